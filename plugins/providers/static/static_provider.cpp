// static: a provider whose nodes are existing SSH hosts from a pool the
// operator lists in the provider's fields (see README.md and static_pool.hpp).
// CREATE allocates a free host to the cluster node, CONFIRM checks it answers
// over SSH, DELETE frees it. The pool's private key (field ssh_key) goes into
// results only; no log line or error message ever contains it.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/static_pool/static_pool.hpp"
#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
namespace sp = weft::staticpool;
using weft::sdk::Error;

// CONFIRM's reachability check: a trivial command with its own deadline.
constexpr std::uint32_t kConfirmTimeoutMs = 30000;

json ParseTask(const weft::sdk::Task& task) {
  json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) throw Error(WEFT_ERR_INVALID, "the task JSON is not an object");
  return t;
}

// A fact about the task's node, as the host found it (null when it has none).
json NodeFact(const weft::sdk::Task& task, const char* key) {
  const std::optional<std::string> text = task.NodeJson(key);
  return text ? json::parse(*text) : json();
}

std::string StringAt(const weft::sdk::Task& task, const char* key) {
  const json v = NodeFact(task, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

int CodeOf(const weft::Status& s) {
  return s.code() == weft::Code::kInvalid ? WEFT_ERR_INVALID
         : s.code() == weft::Code::kTimeout ? WEFT_ERR_TIMEOUT
                                            : WEFT_ERR_FAILED;
}

[[noreturn]] void Throw(const weft::Status& s) { throw Error(CodeOf(s), s.message()); }

// The provider's fields, as the host found them in the task.
json Fields(const weft::sdk::Task& task) {
  json fields = json::object();
  for (const char* name : {"hosts", "ssh_key", "state_dir"}) {
    if (const std::optional<std::string> text = task.FieldJson(name)) fields[name] = json::parse(*text);
  }
  return fields;
}

fs::path StateDir(const json& fields) {
  auto it = fields.find("state_dir");
  if (it == fields.end() || it->is_null()) return sp::kDefaultStateDir;
  if (!it->is_string() || !fs::path(it->get<std::string>()).is_absolute()) {
    throw Error(WEFT_ERR_INVALID, "static provider: field 'state_dir' must be an absolute path (default " +
                                      std::string(sp::kDefaultStateDir) + ")");
  }
  return it->get<std::string>();
}

std::vector<sp::PoolHost> Pool(const json& fields) {
  auto it = fields.find("hosts");
  auto pool = sp::ParseHosts(it == fields.end() ? json() : *it);
  if (!pool.ok()) Throw(pool.status());
  return std::move(*pool);
}

// The pool's private key. Only its presence is ever mentioned in a message.
std::string SshKey(const json& fields) {
  auto it = fields.find("ssh_key");
  if (it == fields.end() || !it->is_string() || it->get<std::string>().find("PRIVATE KEY") == std::string::npos) {
    throw Error(WEFT_ERR_INVALID,
                "static provider: field 'ssh_key' must hold the private key (OpenSSH or PEM text, ed25519 or "
                "ECDSA) that logs in to every host of the pool");
  }
  return it->get<std::string>();
}

// The cluster node the task is for; allocations are recorded per node.
sp::Holder HolderOf(const json& t) {
  sp::Holder h;
  h.tenant = t.value("tenant", std::string());
  h.cluster_id = t.value("cluster_id", std::string());
  h.node_id = t.value("node_id", std::string());
  if (h.node_id.empty()) {
    auto node = t.find("node");
    if (node != t.end() && node->is_object()) h.node_id = node->value("id", std::string());
  }
  if (h.cluster_id.empty() || h.node_id.empty()) {
    throw Error(WEFT_ERR_INVALID, "static provider: the task names no cluster_id and node_id; allocations of the "
                                  "pool are recorded per cluster node, so both are needed");
  }
  return h;
}

const sp::PoolHost* FindHost(const std::vector<sp::PoolHost>& pool, const std::string& id) {
  for (const sp::PoolHost& h : pool) {
    if (h.Id() == id) return &h;
  }
  return nullptr;
}

class StaticProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "static";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Nodes are existing SSH hosts from a pool; each is allocated to one cluster node at a time";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.fields = {
        {.name = "hosts",
         .label = "Hosts",
         .type = WEFT_FIELD_JSON,
         .required = true,
         .description =
             "the pool: a list (or a string holding a JSON list) of {\"address\": IPv4, \"port\": 22, \"user\": "
             "\"root\", \"host_keys\": [\"ssh-ed25519 AAAA...\"]}; host_keys are required"},
        {.name = "ssh_key",
         .label = "SSH private key",
         .type = WEFT_FIELD_STRING,
         .required = true,
         .sensitive = true,
         .description = "private key (OpenSSH text, ed25519 or ECDSA) that logs in to every host of the pool"},
        {.name = "state_dir",
         .label = "State directory",
         .type = WEFT_FIELD_STRING,
         .default_json = std::string("\"") + sp::kDefaultStateDir + "\"",
         .description =
             "absolute path where allocations are recorded; share it between every weft-host on this machine"},
    };
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = ParseTask(task);
    const json fields = Fields(task);
    const sp::Allocations allocations(StateDir(fields));
    switch (action) {
      case WEFT_ACTION_CREATE: Create(task, t, fields, allocations); break;
      case WEFT_ACTION_CONFIRM: Confirm(task, t, fields, allocations); break;
      case WEFT_ACTION_DELETE: Delete(task, t, allocations); break;
      default: throw Error(WEFT_ERR_UNSUPPORTED, "static provider implements CREATE, CONFIRM and DELETE only");
    }
  }

 private:
  static void Create(weft::sdk::Task& task, const json& t, const json& fields, const sp::Allocations& allocations) {
    const std::vector<sp::PoolHost> pool = Pool(fields);
    const std::string key = SshKey(fields);
    sp::Claim request;
    request.holder = HolderOf(t);
    request.job_id = t.value("job_id", std::string());
    if (auto id = t.find("task_id"); id != t.end() && id->is_number_integer()) request.task_id = id->get<std::int64_t>();
    auto got = allocations.Allocate(pool, request);
    if (!got.ok()) Throw(got.status());
    const sp::PoolHost& h = got->host;
    task.Info("static provider: " + h.Id() + (got->reused ? " stays allocated to " : " allocated to ") +
              request.holder.Describe() + (got->reused ? " (an earlier attempt took it)" : ""));
    task.SetResultString("provider_id", h.Id());
    // ssh_auth.private_key is a secret: it goes into the result only, never a log line.
    task.SetResult("ssh_auth", json{{"user", h.user}, {"private_key", key}}.dump());
    // The address and host keys are known now, not only at CONFIRM: returning
    // them here puts them in CONFIRM's task, where the SSH service looks for
    // its target, so CONFIRM can check the host with a command.
    task.SetResultString("access_v4", h.address);
    task.SetResultString("bind_v4", h.address);
    task.SetResult("ssh_port", std::to_string(h.port));
    task.SetResult("host_keys", json(h.host_keys).dump());
    task.Progress(100, "host allocated");
  }

  static void Confirm(weft::sdk::Task& task, const json& t, const json& fields, const sp::Allocations& allocations) {
    const std::vector<sp::PoolHost> pool = Pool(fields);
    const std::string key = SshKey(fields);
    const sp::Holder holder = HolderOf(t);
    const std::string id = StringAt(task, "provider_id");
    if (id.empty()) throw Error(WEFT_ERR_INVALID, "static provider: the task has no provider_id; CREATE must run first");
    const sp::PoolHost* h = FindHost(pool, id);
    if (!h) {
      throw Error(WEFT_ERR_FAILED, "static provider: host " + id + " of " + holder.Describe() +
                                       " is no longer in the pool's 'hosts'; delete the node, or put the host back");
    }
    auto claim = allocations.Find(id);
    if (!claim.ok()) Throw(claim.status());
    if (!claim->has_value() || !((*claim)->holder == holder)) {
      throw Error(WEFT_ERR_FAILED,
                  "static provider: host " + id + " is not allocated to " + holder.Describe() + " (" +
                      (claim->has_value() ? "it is allocated to " + (*claim)->holder.Describe() : "it is free") +
                      "); run the node's CREATE again");
    }
    // The SSH service reaches the host as CREATE described it; if the pool
    // entry was edited since, the check below would test stale data.
    std::vector<std::string> changed;
    if (StringAt(task, "access_v4") != h->address) changed.push_back("address");
    const json port = NodeFact(task, "ssh_port");
    if (!port.is_number_integer() || port.get<std::int64_t>() != h->port) changed.push_back("port");
    if (NodeFact(task, "host_keys") != json(h->host_keys)) changed.push_back("host_keys");
    const json auth = NodeFact(task, "ssh_auth");
    if (!auth.is_object() || auth.value("user", std::string()) != h->user) changed.push_back("user");
    if (!auth.is_object() || auth.value("private_key", std::string()) != key) changed.push_back("ssh_key");
    if (!changed.empty()) {
      std::string what;
      for (const std::string& c : changed) what += (what.empty() ? "" : ", ") + c;
      throw Error(WEFT_ERR_FAILED, "static provider: the task does not carry what CREATE returned for host " + id +
                                       " (" + what + " differ from the pool), so the pool changed since; run the "
                                       "node's CREATE again to pick up the change");
    }

    task.Progress(50, "checking the host over SSH");
    std::string out;
    int status = 0;
    try {
      status = task.Exec("echo \"$SSH_CONNECTION\"", kConfirmTimeoutMs, [&](std::string_view c) {
        if (out.size() < 512) out.append(c);
      });
    } catch (const Error& e) {
      throw Error(e.code(), "static provider: host " + id + " of " + holder.Describe() +
                                " does not answer over SSH: " + e.what());
    }
    if (status != 0) {
      throw Error(WEFT_ERR_FAILED, "static provider: host " + id + " accepted SSH as " + h->user +
                                       " but a trivial command exited with status " + std::to_string(status) +
                                       "; check the account's shell there");
    }
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    task.Info("static provider: host " + id + " answers over SSH as " + h->user + " (connection " + out + ")");

    std::string hostname = t.value("hostname", std::string());
    if (hostname.empty()) {
      auto node = t.find("node");
      if (node != t.end() && node->is_object()) hostname = node->value("hostname", std::string());
    }
    if (hostname.empty()) hostname = h->address;
    task.SetResultString("access_v4", h->address);
    task.SetResultString("bind_v4", h->address);
    task.SetResultString("hostname", hostname);
    task.SetResult("host_keys", json(h->host_keys).dump());
    task.SetResult("ssh_port", std::to_string(h->port));
    task.Progress(100, "host confirmed");
  }

  // Frees whatever the node holds, found by the node rather than only by
  // provider_id: a CREATE that allocated and then died never returned one.
  // Needs no valid pool, so a broken 'hosts' field never blocks a delete.
  static void Delete(weft::sdk::Task& task, const json& t, const sp::Allocations& allocations) {
    const sp::Holder holder = HolderOf(t);
    auto freed = allocations.Release(holder);
    if (!freed.ok()) Throw(freed.status());
    for (const std::string& id : *freed) task.Info("static provider: freed " + id + " (" + holder.Describe() + ")");
    if (freed->empty()) {
      const std::string id = StringAt(task, "provider_id");
      std::string why = "nothing is allocated to " + holder.Describe();
      if (!id.empty()) {
        auto claim = allocations.Find(id);
        if (claim.ok() && claim->has_value()) {
          why += "; " + id + " is allocated to " + (*claim)->holder.Describe() + " now and stays so";
        }
      }
      task.Info("static provider: " + why + "; nothing to free");
    }
    task.Progress(100, "host freed");
  }
};

}  // namespace

WEFT_PLUGIN(StaticProvider)
