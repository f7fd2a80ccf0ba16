// fake-provider: a TEST DOUBLE of a provider plugin. It creates nothing; it
// waits, maybe fails, and returns made-up node data (see README.md).
#include <cstdio>
#include <string>

#include "fake_common.hpp"
#include "weft/plugin.hpp"

namespace {

using weft::fake::json;

class FakeProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "fake-provider";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Test double: pretends to create nodes, with configurable latency and failures";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.fields = weft::fake::KnobFields();
    info.fields.push_back({"make_ssh_key", "Make an SSH key", WEFT_FIELD_BOOLEAN, false, false, "false",
                           "CREATE also returns a made-up ssh_auth.private_key, to test that secrets are redacted"});
    info.fields.push_back({"api_token", "API token", WEFT_FIELD_STRING, false, true, "\"\"",
                           "a sensitive field, to test that secrets are sealed at rest: CREATE reports only its "
                           "length (api_token_length)"});
    info.fields.push_back({"credentials", "Credentials", WEFT_FIELD_JSON, false, true, "null",
                           "a sensitive field of any JSON type, to test that such values are sealed too: CREATE "
                           "reports only its type (credentials_type) and the length of its JSON text "
                           "(credentials_length)"});
    info.fields.push_back({"fail_nodes", "Failing nodes", WEFT_FIELD_STRING, false, false, "\"\"",
                           "comma-separated node ids (or their first label, \"web-4\" for \"web-4.weft.test\"): "
                           "fail_actions fail only on these; empty: on every node"});
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = weft::fake::ParseTask(task);
    const std::string name = weft::fake::ActionName(action);
    const json fields = weft::fake::FieldsAt(t, {"provider", "fields"});
    weft::fake::Knobs knobs = weft::fake::ReadKnobs(fields);
    std::string node_id = t.value("node_id", std::string());
    if (node_id.empty()) node_id = "task-" + std::to_string(t.value("task_id", std::int64_t{0}));
    if (const std::string only = fields.value("fail_nodes", std::string()); !only.empty()) {
      const std::string label = node_id.substr(0, node_id.find('.'));
      if (!weft::fake::ListsAction(only, node_id) && !weft::fake::ListsAction(only, label)) knobs.fail_actions.clear();
    }
    task.Info("fake-provider " + name + " node " + node_id);
    weft::fake::Simulate(task, t, knobs, name);
    switch (action) {
      case WEFT_ACTION_CREATE:
        task.SetResultString("provider_id", "fake-" + node_id);
        if (const std::string token = fields.value("api_token", std::string()); !token.empty())
          task.SetResult("api_token_length", std::to_string(token.size()));
        if (auto c = fields.find("credentials"); c != fields.end() && !c->is_null()) {
          task.SetResultString("credentials_type", c->type_name());
          task.SetResult("credentials_length", std::to_string(c->dump().size()));
        }
        if (fields.value("make_ssh_key", false)) {
          task.SetResult("ssh_auth", json{{"user", "fake"}, {"private_key", "FAKE PRIVATE KEY of " + node_id}}.dump());
        } else {
          task.SetResult("ssh_auth", R"({"user":"fake"})");
        }
        break;
      case WEFT_ACTION_CONFIRM: {
        // A stable private address per node: 10.x.y.z from a hash of its id.
        std::uint64_t h = weft::fake::HashString(node_id);
        char ip[32];
        std::snprintf(ip, sizeof ip, "10.%u.%u.%u", static_cast<unsigned>(h & 0xff),
                      static_cast<unsigned>((h >> 8) & 0xff), static_cast<unsigned>(((h >> 16) % 254) + 1));
        task.SetResultString("access_v4", ip);
        task.SetResultString("bind_v4", ip);
        std::string hostname = t.value("hostname", std::string());
        task.SetResultString("hostname", hostname.empty() ? node_id + ".fake.weft" : hostname);
        break;
      }
      case WEFT_ACTION_DELETE:
        task.Info("fake-provider deleted node " + node_id + " (nothing existed)");
        break;
      default:
        throw weft::sdk::Error(WEFT_ERR_UNSUPPORTED, "fake-provider does not implement " + name);
    }
    task.Progress(100, name + " done");
  }
};

}  // namespace

WEFT_PLUGIN(FakeProvider)
