// resource-echo: a test fixture plugin (never installed). It reports the
// resource versions its task names and what their files hold, read once when
// the action starts and again after waiting `wait_ms`, so a test can see that a
// task keeps the version it was handed while a newer one becomes active.
//
// Result: {"seen":[{"type","name","version","digest","path","content_start","content_end"}]}
// (content is "<unreadable: ...>" when the file cannot be read).
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<unreadable: " + path + ">";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class ResourceEcho : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "resource-echo";
    info.kind = WEFT_KIND_AUTOMATOR;
    info.version = "1.0";
    info.description = "Test fixture: reports the resources its task names and their content";
    info.actions = {WEFT_ACTION_INSTALL};
    info.fields = {{"wait_ms", "Wait (ms)", WEFT_FIELD_INTEGER, false, false, "0",
                    "how long to wait between the two reads of every resource file"}};
    info.resource_types = {"resource-echo"};
    return info;
  }

  void Run(weft_action, weft::sdk::Task& task) override {
    json t = json::parse(task.Json(), nullptr, false);
    if (!t.is_object()) throw weft::sdk::Error(WEFT_ERR_INVALID, "the task JSON is not an object");
    json seen = json::array();
    for (const json& r : t.value("resources", json::array())) {
      json entry = {{"type", r.value("type", "")},   {"name", r.value("name", "")},
                    {"version", r.value("version", 0)}, {"digest", r.value("digest", "")},
                    {"path", r.value("path", "")}};
      entry["content_start"] = Slurp(entry["path"].get<std::string>());
      seen.push_back(std::move(entry));
    }
    task.Progress(10, "read " + std::to_string(seen.size()) + " resource(s)");
    const json fields = t.value("fields", json::object());
    const auto wait = std::chrono::milliseconds(fields.value("wait_ms", 0));
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      if (task.Cancelled()) throw weft::sdk::Error(WEFT_ERR_CANCELLED, "cancelled while waiting");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (json& entry : seen) entry["content_end"] = Slurp(entry["path"].get<std::string>());
    task.SetResult("seen", seen.dump());
  }
};

}  // namespace

WEFT_PLUGIN(ResourceEcho)
