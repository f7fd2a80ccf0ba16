// fake-provider: a TEST DOUBLE of a provider plugin. It creates nothing; it
// waits, maybe fails, and returns made-up node data (see README.md). With
// machines_dir it keeps a file per machine it "made", so tests can count them.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fake_common.hpp"
#include "weft/plugin.hpp"

namespace {

using weft::fake::json;
namespace fs = std::filesystem;

// A file name for an idempotency key: anything but [A-Za-z0-9._-] becomes '_'.
std::string MachineFile(const std::string& key) {
  std::string name = key;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return name + ".json";
}

// CREATE's first step, as with a cloud: the machine exists from here on, even
// if the attempt dies while it "boots". A key made before is answered with the
// machine made for it (CREATE is idempotent per key, docs/plugin-abi.md).
std::string MakeMachine(const weft::sdk::Task& task, const json& t, const std::string& dir,
                        const std::string& node_id) {
  const std::int64_t task_id = t.value("task_id", std::int64_t{0});
  const std::int64_t attempt = t.value("attempt", std::int64_t{1});
  std::string key = t.value("idempotency_key", std::string());
  // Without a key (a weftd before keys) every attempt makes a machine of its own.
  if (key.empty()) key = "task-" + std::to_string(task_id) + "-attempt-" + std::to_string(attempt);
  const fs::path path = fs::path(dir) / MachineFile(key);
  const json machine = {{"key", key},
                        {"cluster_id", t.value("cluster_id", std::string())},
                        {"node_id", node_id},
                        {"task_id", task_id},
                        {"attempt", attempt},
                        {"provider_id", "fake-" + node_id}};
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Written whole beside the final name, then linked to it: link() refuses a
  // name that exists, so one attempt per key makes the machine, and nobody
  // reading the directory meets a file before its text is in it.
  static std::atomic<int> drafts{0};
  const fs::path draft = fs::path(dir) / ("." + MachineFile(key) + "." + std::to_string(::getpid()) + "-" +
                                          std::to_string(++drafts) + ".tmp");
  const std::string text = machine.dump() + "\n";
  const int fd = ::open(draft.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw weft::sdk::Error(WEFT_ERR_FAILED, "cannot record a machine in " + dir + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  const int linked = written ? ::link(draft.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(draft.c_str());
  if (linked < 0 && written && link_errno == EEXIST) {
    std::ifstream in(path);
    std::stringstream made_text;
    made_text << in.rdbuf();
    json made = json::parse(made_text.str(), nullptr, false);
    const std::string id = made.is_object() ? made.value("provider_id", "fake-" + node_id) : "fake-" + node_id;
    task.Info("fake-provider reuses machine " + id + " made for key " + key);
    return id;
  }
  if (linked < 0)
    throw weft::sdk::Error(WEFT_ERR_FAILED, "cannot record a machine in " + dir + ": " +
                                                std::strerror(written ? link_errno : EIO));
  task.Info("fake-provider made machine fake-" + node_id + " for key " + key);
  return "fake-" + node_id;
}

// DELETE: forgets every machine made for the node in this cluster.
int DeleteMachines(const json& t, const std::string& dir, const std::string& node_id) {
  const std::string cluster = t.value("cluster_id", std::string());
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(".")) continue;  // a machine being recorded
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    json made = json::parse(text.str(), nullptr, false);
    if (!made.is_object() || made.value("node_id", "") != node_id || made.value("cluster_id", "") != cluster) continue;
    std::error_code rm;
    removed += fs::remove(entry.path(), rm) ? 1 : 0;
  }
  return removed;
}

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
    info.fields.push_back(
        {.name = "make_ssh_key",
         .label = "Make an SSH key",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "false",
         .description = "CREATE also returns a made-up ssh_auth.private_key, to test that secrets are redacted"});
    info.fields.push_back({.name = "api_token",
                           .label = "API token",
                           .type = WEFT_FIELD_STRING,
                           .sensitive = true,
                           .default_json = "\"\"",
                           .description =
                               "a sensitive field, to test that secrets are sealed at rest: CREATE reports only its "
                               "length (api_token_length)"});
    info.fields.push_back({.name = "credentials",
                           .label = "Credentials",
                           .type = WEFT_FIELD_JSON,
                           .sensitive = true,
                           .default_json = "null",
                           .description =
                               "a sensitive field of any JSON type, to test that such values are sealed too: CREATE "
                               "reports only its type (credentials_type) and the length of its JSON text "
                               "(credentials_length)"});
    info.fields.push_back({.name = "fail_nodes",
                           .label = "Failing nodes",
                           .type = WEFT_FIELD_STRING,
                           .default_json = "\"\"",
                           .description =
                               "comma-separated node ids (or their first label, \"web-4\" for \"web-4.weft.test\"): "
                               "fail_actions fail only on these; empty: on every node"});
    info.fields.push_back({.name = "machines_dir",
                           .label = "Machines directory",
                           .type = WEFT_FIELD_STRING,
                           .default_json = "\"\"",
                           .description =
                               "keep a file per machine CREATE makes (one per idempotency key) in this directory, "
                               "and remove them on DELETE, so tests can count the machines; empty: keep none"});
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
    const std::string machines_dir = fields.value("machines_dir", std::string());
    std::string provider_id = "fake-" + node_id;
    if (action == WEFT_ACTION_CREATE && !machines_dir.empty()) provider_id = MakeMachine(task, t, machines_dir, node_id);
    weft::fake::Simulate(task, t, knobs, name);
    switch (action) {
      case WEFT_ACTION_CREATE:
        task.SetResultString("provider_id", provider_id);
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
        if (!machines_dir.empty()) {
          task.Info("fake-provider deleted " + std::to_string(DeleteMachines(t, machines_dir, node_id)) +
                    " machine(s) of node " + node_id);
        } else {
          task.Info("fake-provider deleted node " + node_id + " (nothing existed)");
        }
        break;
      default:
        throw weft::sdk::Error(WEFT_ERR_UNSUPPORTED, "fake-provider does not implement " + name);
    }
    task.Progress(100, name + " done");
  }
};

}  // namespace

WEFT_PLUGIN(FakeProvider)
