// fake-automator: a TEST DOUBLE of an automator plugin. It touches no node; it
// waits, maybe fails, and logs what a real automator would have done.
#include <string>

#include "fake_common.hpp"
#include "weft/plugin.hpp"

namespace {

using weft::fake::json;

class FakeAutomator : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "fake-automator";
    info.kind = WEFT_KIND_AUTOMATOR;
    info.version = "1.0";
    info.description = "Test double: pretends to run service actions, with configurable latency and failures";
    info.actions = {WEFT_ACTION_BOOTSTRAP, WEFT_ACTION_INSTALL, WEFT_ACTION_CONFIGURE, WEFT_ACTION_INITIALIZE,
                    WEFT_ACTION_START,     WEFT_ACTION_STOP,    WEFT_ACTION_REMOVE};
    info.fields = weft::fake::KnobFields();
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = weft::fake::ParseTask(task);
    const std::string name = weft::fake::ActionName(action);
    const weft::fake::Knobs knobs = weft::fake::ReadKnobs(weft::fake::FieldsAt(t, {"service", "action", "fields"}));
    std::string service;
    if (auto s = t.find("service"); s != t.end() && s->is_object()) service = s->value("name", std::string());
    task.Info("fake-automator " + name + (service.empty() ? "" : " service " + service) + " on node " +
              t.value("node_id", std::string("?")));
    weft::fake::Simulate(task, t, knobs, name);
    task.Progress(100, name + " done");
  }
};

}  // namespace

WEFT_PLUGIN(FakeAutomator)
