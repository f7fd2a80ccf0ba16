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
    info.fields.push_back({.name = "echo_task",
                           .label = "Echo the task",
                           .type = WEFT_FIELD_BOOLEAN,
                           .default_json = "false",
                           .description =
                               "return what the task said (expanded config and fields, hostname, the node's earlier "
                               "results without secrets) as the result field `echo`, so tests can see it"});
    // The example catalog tags each action with its service and action name.
    for (const char* tag : {"service", "action"})
      info.fields.push_back({.name = tag,
                             .label = std::string("The ") + tag + " (a tag)",
                             .type = WEFT_FIELD_STRING,
                             .default_json = "\"\"",
                             .description = "a label the task's fields carry; the plugin does nothing with it"});
    info.fields.push_back({.name = "password",
                           .label = "Password",
                           .type = WEFT_FIELD_STRING,
                           .sensitive = true,
                           .default_json = "\"\"",
                           .description =
                               "a sensitive field, to test that secrets are sealed at rest: every action reports only "
                               "its length (password_length)"});
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
    const json fields = weft::fake::FieldsAt(t, {"service", "action", "fields"});
    if (auto p = fields.find("password"); p != fields.end() && p->is_string() && !p->get<std::string>().empty())
      task.SetResult("password_length", std::to_string(p->get<std::string>().size()));
    if (fields.value("echo_task", false)) Echo(task, t);
    task.Progress(100, name + " done");
  }

 private:
  static void Echo(weft::sdk::Task& task, const json& t) {
    json results = t.value("results", json::object());
    if (!results.is_object()) results = json::object();
    results.erase("echo");  // the echo of the node's previous task
    if (auto auth = results.find("ssh_auth"); auth != results.end() && auth->is_object())
      for (const char* secret : {"private_key", "passphrase", "password"})
        if (auth->contains(secret)) (*auth)[secret] = "(not echoed)";
    json fields = weft::fake::FieldsAt(t, {"service", "action", "fields"});
    if (fields.contains("password")) fields["password"] = "(not echoed)";
    json echo = {{"config", t.value("config", json::object())},
                 {"fields", std::move(fields)},
                 {"hostname", t.value("hostname", json())},
                 {"results", std::move(results)}};
    task.SetResult("echo", echo.dump());
  }
};

}  // namespace

WEFT_PLUGIN(FakeAutomator)
