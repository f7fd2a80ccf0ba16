// hello-provider: a complete provider plugin in C++ that makes no real machine.
// CREATE "makes" a node named after the task's idempotency key, so a retried
// attempt hands back the same machine; CONFIRM reports its address; DELETE
// succeeds whether or not the node is there. See docs/plugin-abi.md.
#include <string>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;

class HelloProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "hello-provider";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Example: nodes that exist only on paper, at one address";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.fields = {{"address", "Address", WEFT_FIELD_STRING, false, false, "\"127.0.0.1\"",
                    "the address every node reports"}};
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = json::parse(task.Json());
    const std::string node = t.value("node_id", std::string("node"));
    switch (action) {
      case WEFT_ACTION_CREATE: {
        // The same key for every attempt of this task: the id a retry finds again.
        const std::string id = "hello-" + t.value("idempotency_key", node);
        task.Info("hello-provider made " + id + " for " + node);
        task.Progress(50, "machine made");
        task.SetResultString("provider_id", id);
        task.SetResult("ssh_auth", R"({"user":"hello"})");
        break;
      }
      case WEFT_ACTION_CONFIRM: {
        const std::string address = Field(t, "address", "127.0.0.1");
        task.Info("hello-provider confirmed " + node + " at " + address);
        task.SetResultString("access_v4", address);
        task.SetResultString("bind_v4", address);
        task.SetResultString("hostname", t.value("hostname", node));
        break;
      }
      case WEFT_ACTION_DELETE:
        task.Info("hello-provider deleted " + node);
        break;
      default:
        throw weft::sdk::Error(WEFT_ERR_UNSUPPORTED, "hello-provider does not do this action");
    }
    task.Progress(100, "done");
  }

 private:
  // A field of the provider entry in the catalog ("provider": {"fields": {...}}).
  static std::string Field(const json& t, const char* name, const std::string& fallback) {
    const json fields = t.value("provider", json::object()).value("fields", json::object());
    auto f = fields.find(name);
    return f != fields.end() && f->is_string() ? f->get<std::string>() : fallback;
  }
};

}  // namespace

WEFT_PLUGIN(HelloProvider)
