// hello-provider: a complete provider plugin in C++ that makes no real machine.
// CREATE "makes" a node named after the task's idempotency key, so a retried
// attempt hands back the same machine; CONFIRM reports its address; DELETE
// succeeds whether or not the node is there. See docs/plugin-abi.md.
#include <optional>
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
        // The provider entry's field as JSON text; the host gives the default
        // declared above when the catalog leaves it out, and checked it is a string.
        const std::optional<std::string> field = task.FieldJson("address");
        if (!field) throw weft::sdk::Error(WEFT_ERR_INVALID, "hello-provider got no address");
        const std::string& address = *field;
        task.Info("hello-provider confirmed " + node + " at " + json::parse(address).get<std::string>());
        task.SetResult("access_v4", address);
        task.SetResult("bind_v4", address);
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
};

}  // namespace

WEFT_PLUGIN(HelloProvider)
