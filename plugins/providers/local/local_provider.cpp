// local: a provider whose nodes are real OpenSSH sshd processes on this
// machine, one loopback address each (see README.md and local_node.hpp).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/localnode/local_node.hpp"
#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

json ParseTask(const weft::sdk::Task& task) {
  json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) throw weft::sdk::Error(WEFT_ERR_INVALID, "the task JSON is not an object");
  return t;
}

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    out.push_back(ok ? c : '-');
  }
  if (out.size() > 40) out = out.substr(out.size() - 40);
  return out.empty() ? "node" : out;
}

struct Settings {
  fs::path state_dir = weft::localnode::kDefaultStateDir;
  std::uint16_t port = weft::localnode::kDefaultSshPort;
  std::string user = "root";
};

// A value the host found for the task: the provider's field or a fact about
// the node (json() when the task has none).
json Parsed(const std::optional<std::string>& text) { return text ? json::parse(*text) : json(); }

Settings ReadSettings(const weft::sdk::Task& task) {
  Settings s;
  auto str = [&](const char* name, std::string* out) {
    const json v = Parsed(task.FieldJson(name));
    if (v.is_null()) return;
    if (!v.is_string() || v.get<std::string>().empty()) {
      throw weft::sdk::Error(WEFT_ERR_INVALID, std::string("local provider: field '") + name +
                                                   "' must be a non-empty string");
    }
    *out = v.get<std::string>();
  };
  std::string state_dir = s.state_dir.string();
  str("state_dir", &state_dir);
  s.state_dir = state_dir;
  if (!s.state_dir.is_absolute()) {
    throw weft::sdk::Error(WEFT_ERR_INVALID, "local provider: state_dir '" + state_dir + "' must be an absolute path");
  }
  str("user", &s.user);
  if (const json port = Parsed(task.FieldJson("ssh_port")); !port.is_null()) {
    if (!port.is_number_integer() || port.get<std::int64_t>() < 1 || port.get<std::int64_t>() > 65535) {
      throw weft::sdk::Error(WEFT_ERR_INVALID, "local provider: ssh_port must be an integer 1-65535");
    }
    s.port = static_cast<std::uint16_t>(port.get<std::int64_t>());
  }
  return s;
}

// The node directory named by the task's provider_id, checked so that a
// provider_id can never point outside state_dir.
fs::path NodeDir(const weft::sdk::Task& task, const Settings& s, bool required) {
  const json id = Parsed(task.NodeJson("provider_id"));
  if (!id.is_string() || id.get<std::string>().empty()) {
    if (!required) return {};
    throw weft::sdk::Error(WEFT_ERR_INVALID, "local provider: the task has no provider_id; CREATE must run first");
  }
  const std::string v = id.get<std::string>();
  if (v == "." || v == ".." || Sanitize(v) != v) {
    throw weft::sdk::Error(WEFT_ERR_INVALID, "local provider: provider_id '" + v + "' is not a local node id");
  }
  return s.state_dir / v;
}

class LocalProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "local";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Nodes are real OpenSSH sshd processes on this machine, one 127.0.x.y address each (needs root)";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.fields = {
        {.name = "state_dir",
         .label = "State directory",
         .type = WEFT_FIELD_STRING,
         .default_json = std::string("\"") + weft::localnode::kDefaultStateDir + "\"",
         .description = "absolute path where node directories (keys, sshd_config, logs) live"},
        {.name = "ssh_port",
         .label = "SSH port",
         .type = WEFT_FIELD_INTEGER,
         .default_json = std::to_string(weft::localnode::kDefaultSshPort),
         .description = "port every node's sshd listens on (each node has its own address, so they do not collide)"},
        {.name = "user",
         .label = "SSH user",
         .type = WEFT_FIELD_STRING,
         .default_json = "\"root\"",
         .description = "existing local account automators log in as"},
    };
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = ParseTask(task);
    const Settings s = ReadSettings(task);
    switch (action) {
      case WEFT_ACTION_CREATE: Create(task, t, s); break;
      case WEFT_ACTION_CONFIRM: Confirm(task, t, s); break;
      case WEFT_ACTION_DELETE: Delete(task, s); break;
      default: throw weft::sdk::Error(WEFT_ERR_UNSUPPORTED, "local provider implements CREATE, CONFIRM and DELETE only");
    }
  }

 private:
  static void Create(weft::sdk::Task& task, const json& t, const Settings& s) {
    const std::string cluster = t.value("cluster_id", std::string());
    const std::string node_id = t.value("node_id", std::string());
    std::string name = node_id.empty() ? "task-" + std::to_string(t.value("task_id", std::int64_t{0})) : node_id;
    if (!cluster.empty()) name = cluster + "-" + name;
    name = Sanitize(name);
    // A retried CREATE replaces what an earlier attempt of the same node left.
    if (!cluster.empty() && !node_id.empty()) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(s.state_dir, ec)) {
        const std::string dir = e.path().filename().string();
        if (dir.size() == name.size() + 9 && dir.rfind(name + "-", 0) == 0) {
          task.Warn("local provider: removing node " + dir + " left by an earlier attempt");
          weft::Status st = weft::localnode::StopNode(e.path());
          if (!st.ok()) throw weft::sdk::Error(WEFT_ERR_FAILED, st.message());
        }
      }
    }
    weft::localnode::NodeOptions o;
    o.state_dir = s.state_dir;
    o.name = name;
    o.port = s.port;
    o.user = s.user;
    task.Progress(10, "starting sshd");
    auto node = weft::localnode::StartNode(o);
    if (!node.ok()) {
      throw weft::sdk::Error(node.status().code() == weft::Code::kInvalid ? WEFT_ERR_INVALID : WEFT_ERR_FAILED,
                             node.status().message());
    }
    for (const std::string& note : node->address_notes) task.Info("local provider: " + note);
    task.Info("local provider: node " + node->id + " listens on " + node->address + ":" + std::to_string(node->port) +
              " (sshd pid " + std::to_string(node->pid) + "); " + node->tracking);
    task.SetResultString("provider_id", node->id);
    // ssh_auth.private_key is a secret: it goes into the result only, never a log line.
    json auth = {{"user", node->user}, {"private_key", node->private_key}};
    task.SetResult("ssh_auth", auth.dump());
    task.Progress(100, "node started");
  }

  static void Confirm(weft::sdk::Task& task, const json& t, const Settings& s) {
    const fs::path dir = NodeDir(task, s, true);
    auto node = weft::localnode::LoadNode(dir);
    if (!node.ok()) throw weft::sdk::Error(WEFT_ERR_FAILED, "local provider: " + node.status().message());
    if (!weft::localnode::SshdRunning(*node)) {
      throw weft::sdk::Error(WEFT_ERR_FAILED, "local provider: the sshd of node " + node->id + " (pid " +
                                                  std::to_string(node->pid) + ") is not running; delete and recreate it");
    }
    std::string hostname = t.value("hostname", std::string());
    if (hostname.empty()) hostname = node->name;
    task.SetResultString("access_v4", node->address);
    task.SetResultString("bind_v4", node->address);
    task.SetResultString("hostname", hostname);
    task.SetResult("ssh_port", std::to_string(node->port));
    task.SetResult("host_keys", json(node->host_keys).dump());
    task.Info("local provider: node " + node->id + " confirmed at " + node->address);
    task.Progress(100, "node confirmed");
  }

  static void Delete(weft::sdk::Task& task, const Settings& s) {
    const fs::path dir = NodeDir(task, s, false);
    if (dir.empty()) {
      task.Info("local provider: no provider_id, so CREATE never started a node; nothing to delete");
      return;
    }
    weft::Status st = weft::localnode::StopNode(dir);
    if (!st.ok()) throw weft::sdk::Error(WEFT_ERR_FAILED, "local provider: " + st.message());
    task.Info("local provider: node " + dir.filename().string() + " stopped and removed");
    task.Progress(100, "node deleted");
  }
};

}  // namespace

WEFT_PLUGIN(LocalProvider)
