#include "weft/server/hosts/host_ops.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include "weft/common/flat_json.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::hosts {
namespace {

using api::Call;
using api::Endpoint;
using api::Principal;
using api::Response;
using api::Role;

constexpr std::size_t kOutputTailBytes = 64 * 1024;
constexpr std::int64_t kMaxId = INT64_MAX;

std::string Tail(std::string s) {
  if (s.size() <= kOutputTailBytes) return s;
  std::size_t cut = s.size() - kOutputTailBytes;
  // Do not start inside a UTF-8 sequence.
  while (cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) ++cut;
  return s.substr(cut);
}

// What a caller below superadmin sees of a worker split (or of what a host
// reports running): the threads of their own tenant and those that serve any
// tenant, not other tenants' names.
json OwnTenantOnly(const json& workers, const Principal& caller) {
  if (caller.role == Role::kSuperadmin || !workers.is_array()) return workers;
  json out = json::array();
  for (const json& w : workers) {
    auto t = w.is_object() ? w.find("tenant") : w.end();
    if (t == w.end() || !t->is_string()) continue;
    const std::string tenant = t->get<std::string>();
    if (tenant.empty() || tenant == caller.tenant) out.push_back(w);
  }
  return out;
}

class HostOps {
 public:
  explicit HostOps(HostOpsDeps deps) : d_(deps) {}

  Response HostList(const Call& call);
  Response PluginList(const Call& call);
  Response HostRegister(const Call& call);
  Response HostHeartbeat(const Call& call);
  Response HostLeave(const Call& call);
  Response HostDrain(const Call& call, bool draining);
  Response TaskTake(const Call& call);
  Response TaskFinish(const Call& call);
  Response TaskProgress(const Call& call);

 private:
  struct TakeRequest {
    std::int64_t wait_ms = 0;
    std::string tenant;
    std::string runner;  // the host's thread that takes one task at a time; empty: not named
  };
  Result<TakeRequest> ParseTake(const json& body, const std::string& path) const;
  // What a finish asks, read from its body (the tree or, lean, the text).
  struct FinishFields {
    queue::FinishRequest f;
    std::optional<TakeRequest> next;
  };
  Result<FinishFields> ReadFinish(const json& body) const;
  // The lean readings of a body kept as text (wire::Request::body_text): only
  // a request every check passes is read there; nullopt sends it to the tree
  // reading, which decides and explains as for any other body.
  std::optional<FinishFields> ReadFinishText(std::string_view text) const;
  // `host_id` and `incarnation` are read only when asked for (a task.take's own body).
  std::optional<TakeRequest> ReadTakeText(std::string_view text, std::string* host_id,
                                          std::string_view* incarnation = nullptr) const;
  // CONFLICT when the request names an incarnation other than the registered process's.
  std::optional<Response> RefuseReplaced(Host& host, std::string_view incarnation, const char* op) const;
  Response Finish(const FinishFields& finish);
  // The next task for `host_id`, or a held response that the reactor answers later;
  // `incarnation`, the asking process's, lets a held take end when another process
  // registers under the host id.
  Response TakeOrHold(const std::string& host_id, const TakeRequest& take, std::string_view incarnation);
  static Response FencingError(const Status& s, const queue::Conflict& conflict);

  HostOpsDeps d_;
};

Response HostOps::HostList(const Call& call) {
  json list = json::array();
  for (const auto& [id, h] : d_.hosts.all()) {
    const bool live = d_.hosts.Live(h);
    list.push_back({{"id", id},
                    {"capacity", h.record.capacity},
                    {"version", h.record.version},
                    {"live", live},
                    {"draining", h.record.draining},
                    {"registered_at_ms", h.record.registered_at_ms},
                    {"last_seen_ms", h.record.last_seen_ms},
                    {"in_flight", d_.queue.InFlight(id)},
                    {"workers", OwnTenantOnly(live ? d_.hosts.WorkersFor(id) : json::array(), call.principal)},
                    {"reported_workers", OwnTenantOnly(h.reported_workers, call.principal)},
                    {"plugins", HostRegistry::TypesFor(h, call.principal.tenant)},
                    {"refused", RefusedFor(h.refused, call.principal.tenant)}});
  }
  return Response::Ok({{"hosts", std::move(list)}});
}

Response HostOps::PluginList(const Call& call) {
  std::map<std::string, json> plugins;
  std::map<std::string, std::map<std::string, json>> versions;  // type -> version -> {version, hosts, live_hosts}
  for (const auto& [id, h] : d_.hosts.all()) {
    for (const json& d : h.descriptors) {
      if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) continue;
      // Another tenant's own plugins are none of the caller's business, nor usable by it.
      const std::string owner = d.value("tenant", std::string());
      if (!owner.empty() && owner != call.principal.tenant) continue;
      const std::string type = d["type"].get<std::string>();
      auto [it, fresh] = plugins.emplace(type, json());
      if (fresh) {
        json p = {{"type", type},
                  {"kind", d.value("kind", json(""))},
                  {"version", d.value("version", json(""))},
                  {"description", d.value("description", json(""))},
                  {"actions", d.value("actions", json::array())},
                  {"fields", d.value("fields", json::array())},
                  {"resource_types", d.value("resource_types", json::array())},
                  {"hosts", json::array()},
                  {"live_hosts", json::array()}};
        it->second = std::move(p);
      }
      const bool live = d_.hosts.Live(h);
      it->second["hosts"].push_back(id);
      if (live) it->second["live_hosts"].push_back(id);
      // Hosts may run different versions of a type (a rolling upgrade): each
      // version with the hosts that run it.
      const json version = d.value("version", json(""));
      json& by_version = versions[type][version.is_string() ? version.get<std::string>() : version.dump()];
      if (by_version.is_null()) by_version = {{"version", version}, {"hosts", json::array()}, {"live_hosts", json::array()}};
      by_version["hosts"].push_back(id);
      if (live) by_version["live_hosts"].push_back(id);
    }
  }
  json list = json::array();
  for (auto& [type, p] : plugins) {
    p["versions"] = json::array();
    for (auto& [text, v] : versions[type]) p["versions"].push_back(std::move(v));
    list.push_back(std::move(p));
  }
  // The plugin files live hosts refused (a tenant's Lua plugin that does not
  // load, say): the host logs why, and the operator sees it here too.
  json refused = json::array();
  for (const auto& [id, h] : d_.hosts.all()) {
    if (!d_.hosts.Live(h)) continue;
    for (json r : RefusedFor(h.refused, call.principal.tenant)) {
      r["host_id"] = id;
      refused.push_back(std::move(r));
    }
  }
  return Response::Ok({{"plugins", std::move(list)}, {"refused", std::move(refused)}});
}

Response HostOps::HostRegister(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host_id, HostRegistry::HostIdOf(body));
  if (!ValidHostId(host_id))
    return Response::Error(Status::Invalid("host id " + jsonf::Brief(body["host_id"]) +
                                           " cannot be used: a host id is 1 to 128 characters of A-Z a-z 0-9 _ . -; "
                                           "give this host another one (host_id in weft-host's configuration, or "
                                           "--host-id)"),
                           {{"field", "body.host_id"}});
  WEFT_TRY_ASSIGN(capacity, jsonf::Int(body, "capacity", "body", 1, 4096));
  WEFT_TRY_ASSIGN(version, jsonf::String(body, "version", "body", ""));
  json descriptors = json::array();
  queue::HostPlugins types;
  auto plugins = body.find("plugins");
  if (plugins != body.end() && !plugins->is_null()) {
    if (!plugins->is_array())
      return Response::Error(Status::Invalid("body.plugins must be an array of plugin descriptors, got " +
                                             jsonf::Brief(*plugins)));
    for (std::size_t i = 0; i < plugins->size(); ++i) {
      const json& d = (*plugins)[i];
      const std::string path = "body.plugins[" + std::to_string(i) + "]";
      if (!d.is_object()) return Response::Error(jsonf::RequireObject(d, path));
      WEFT_TRY_ASSIGN(type, jsonf::String(d, "type", path));
      WEFT_TRY_ASSIGN(kind, jsonf::String(d, "kind", path, ""));
      if (!kind.empty() && kind != "provider" && kind != "automator")
        return Response::Error(Status::Invalid(path + ".kind must be \"provider\" or \"automator\", got \"" + kind +
                                               "\""));
      for (const char* list : {"actions", "fields", "resource_types"}) {
        auto l = d.find(list);
        if (l != d.end() && !l->is_null() && !l->is_array())
          return Response::Error(Status::Invalid(path + "." + list + " must be an array, got " + jsonf::Brief(*l)));
      }
      // A Lua plugin from a tenant's resources names that tenant: it runs only its tasks.
      WEFT_TRY_ASSIGN(tenant, jsonf::String(d, "tenant", path, ""));
      std::set<std::string>& owned = tenant.empty() ? types.shared : types.by_tenant[tenant];
      if (!owned.insert(type).second)
        return Response::Error(Status::Invalid(path + ".type \"" + type + "\" is listed twice" +
                                               (tenant.empty() ? std::string() : " for tenant '" + tenant + "'")));
      descriptors.push_back(d);
    }
  }
  WEFT_TRY_ASSIGN(incarnation, jsonf::String(body, "incarnation", "body", ""));
  if (incarnation.size() > 128)
    return Response::Error(Status::Invalid("body.incarnation must be at most 128 characters"));
  WEFT_TRY_ASSIGN(refused, ParseRefused(body));
  WEFT_TRY_ASSIGN(machine, jsonf::String(body, "machine", "body", ""));
  if (machine.size() > 256) return Response::Error(Status::Invalid("body.machine must be at most 256 characters"));
  WEFT_TRY_ASSIGN(pid, jsonf::Int(body, "pid", "body", 0, INT32_MAX, 0));
  // A second process under a live host's id: refused, the first one keeps it.
  bool first_refusal = false;
  if (Status busy = d_.hosts.CheckNewProcess(host_id, incarnation, call.principal.key, &first_refusal); !busy.ok()) {
    if (first_refusal) {
      WEFT_LOG(kWarn, "weftd") << "refused host.register of a second process: " << busy.message()
                               << (machine.empty() ? std::string() : " (the refused one runs on " + machine + ")");
    }
    return Response::Error(busy);
  }
  if (const std::string moved = d_.hosts.MachineChange(host_id, machine, pid, call.principal.key); !moved.empty()) {
    WEFT_LOG(kWarn, "weftd") << moved;
  }
  const std::int64_t now = d_.clock.NowMs();
  Host h;
  // Drained by an operator: still drained after the host's restart (an upgrade), until undrained.
  const Host* before = d_.hosts.Find(host_id);
  h.record = store::HostRecord{host_id, capacity, version, wire::Dump(descriptors), now, now, incarnation,
                               before && before->record.draining};
  h.plugins = std::move(types);
  h.descriptors = std::move(descriptors);
  h.incarnation = incarnation;
  h.machine = machine;
  h.pid = pid;
  h.key = call.principal.key;
  h.refused = refused.is_array() ? std::move(refused) : json::array();
  Status s = d_.store.UpsertHost(h.record);
  if (!s.ok()) return Response::Error(s);
  if (const Host* old = d_.hosts.Find(host_id);
      old && !old->incarnation.empty() && !incarnation.empty() && old->incarnation != incarnation) {
    // A new process under the same name: the old one is gone, and the attempts
    // it ran will never be finished; hand them out again now, not at lease end.
    if (d_.queue.InFlight(host_id) > 0) {
      WEFT_LOG(kInfo, "weftd") << "host '" << host_id << "' started again; giving up the "
                               << d_.queue.InFlight(host_id) << " attempt(s) of its previous process";
    }
    s = d_.queue.ReleaseHost(host_id, "host '" + host_id + "' started again (a new process registered)");
    if (!s.ok()) return Response::Error(s);
    d_.dispatcher.ProcessReplaced(host_id, incarnation);
  }
  const std::size_t plugin_count = h.descriptors.size();
  d_.hosts.Put(std::move(h));
  WEFT_LOG(kInfo, "weftd") << "host '" << host_id << "' registered with capacity " << capacity << " and "
                           << plugin_count << " plugin types";
  return Response::Ok({{"heartbeat_ms", d_.config.hosts.heartbeat_ms},
                       {"lease_ms", d_.config.tasks.lease_ms},
                       {"workers", d_.hosts.WorkersFor(host_id)},
                       {"tenants", d_.hosts.ActiveTenants()},
                       {"plugin_tenants", d_.hosts.TenantsWithLuaPlugins()}});
}

// CONFLICT for a request of a process that another one replaced under the host id, with
// details {"reason": "process_replaced", "host_id"}, which is what weft-host goes by;
// nullopt for the registered process.
std::optional<Response> HostOps::RefuseReplaced(Host& host, std::string_view incarnation, const char* op) const {
  bool first = false;
  Status s = d_.hosts.Replaced(host, incarnation, &first);
  if (s.ok()) return std::nullopt;
  if (first) {
    WEFT_LOG(kWarn, "weftd") << "refused " << op << " of an earlier process of host '" << host.record.id
                             << "': " << s.message();
  }
  return Response::Error(std::move(s), {{"reason", "process_replaced"}, {"host_id", host.record.id}});
}

Response HostOps::HostHeartbeat(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host, d_.hosts.Known(body));
  // A process that another one replaced under this id (it fell silent, then came back)
  // renews nothing, is not seen, and reports nothing: it stops and registers again.
  WEFT_TRY_ASSIGN(incarnation, jsonf::String(body, "incarnation", "body", ""));
  if (auto refused = RefuseReplaced(*host, incarnation, "host.heartbeat")) return std::move(*refused);
  d_.hosts.Learn(*host, incarnation, call.principal.key);
  std::vector<queue::AttemptRef> refs;
  auto in_flight = body.find("in_flight");
  if (in_flight != body.end() && !in_flight->is_null()) {
    if (!in_flight->is_array())
      return Response::Error(Status::Invalid("body.in_flight must be an array of {task_id, attempt}, got " +
                                             jsonf::Brief(*in_flight)));
    for (std::size_t i = 0; i < in_flight->size(); ++i) {
      const json& r = (*in_flight)[i];
      const std::string path = "body.in_flight[" + std::to_string(i) + "]";
      if (!r.is_object()) return Response::Error(jsonf::RequireObject(r, path));
      WEFT_TRY_ASSIGN(task_id, jsonf::Int(r, "task_id", path, 1, kMaxId));
      WEFT_TRY_ASSIGN(attempt, jsonf::Int(r, "attempt", path, 1, kMaxId));
      refs.push_back({task_id, attempt});
      d_.dispatcher.Acknowledged(task_id, attempt);
    }
  }
  auto workers = body.find("workers");
  if (workers != body.end() && !workers->is_null()) {
    if (!workers->is_array())
      return Response::Error(Status::Invalid("body.workers must be an array of {tenant, threads, pid}, got " +
                                             jsonf::Brief(*workers)));
    host->reported_workers = *workers;
  }
  WEFT_TRY_ASSIGN(refused, ParseRefused(body));
  if (refused.is_array()) host->refused = std::move(refused);
  // Optional: runners of workers the host retired after its plugin set changed;
  // their held takes are let go at once, so the host can register its new set
  // without waiting them out.
  if (auto retired = body.find("retired_runners"); retired != body.end() && !retired->is_null()) {
    constexpr std::size_t kMaxRetired = 8192;
    if (!retired->is_array() || retired->size() > kMaxRetired)
      return Response::Error(Status::Invalid("body.retired_runners must be an array of at most " +
                                             std::to_string(kMaxRetired) + " runner names, got " +
                                             jsonf::Brief(*retired)));
    for (const json& runner : *retired) {
      if (!runner.is_string())
        return Response::Error(
            Status::Invalid("body.retired_runners must hold runner names (strings), got " + jsonf::Brief(runner)));
    }
    for (const json& runner : *retired) d_.dispatcher.RunnerRetired(host->record.id, runner.get<std::string>());
  }
  WEFT_TRY_ASSIGN(outcome, d_.queue.Renew(host->record.id, refs));
  d_.hosts.Seen(*host);
  Status s = d_.store.TouchHost(host->record.id, host->record.last_seen_ms);
  if (!s.ok()) return Response::Error(s);
  json stale = json::array();
  for (const auto& r : outcome.stale) stale.push_back({{"task_id", r.task_id}, {"attempt", r.attempt}});
  return Response::Ok({{"renewed", outcome.renewed},
                       {"stale", std::move(stale)},
                       {"workers", d_.hosts.WorkersFor(host->record.id)},
                       {"tenants", d_.hosts.ActiveTenants()},
                       {"plugin_tenants", d_.hosts.TenantsWithLuaPlugins()}});
}

Response HostOps::HostLeave(const Call& call) {
  WEFT_TRY_ASSIGN(host, d_.hosts.Known(call.request->body));
  Status s = d_.hosts.Leave(*host);
  if (!s.ok()) return Response::Error(s);
  d_.dispatcher.ForgetHost(host->record.id);
  return Response::Ok(json::object());
}

Response HostOps::HostDrain(const Call& call, bool draining) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host_id, jsonf::String(body, "host_id", "body"));
  Host* host = d_.hosts.Find(host_id);
  if (!host)
    return Response::Error(
        Status::NotFound("host '" + host_id + "' is not registered (weft host list shows the hosts)"));
  Status s = d_.hosts.SetDraining(*host, draining);
  if (!s.ok()) return Response::Error(s);
  const std::int64_t in_flight = d_.queue.InFlight(host_id);
  WEFT_LOG(kInfo, "weftd") << "host '" << host_id << "' "
                           << (draining ? "drains: it is handed no new task; " + std::to_string(in_flight) +
                                              " running task(s) finish"
                                        : std::string("is undrained: it is handed tasks again"))
                           << " (by " << call.principal.user << ")";
  return Response::Ok({{"host_id", host_id}, {"draining", draining}, {"in_flight", in_flight}});
}

Response HostOps::TaskTake(const Call& call) {
  if (!call.request->body_text.empty()) {
    std::string host_id;
    std::string_view incarnation;
    if (std::optional<TakeRequest> take = ReadTakeText(call.request->body_text, &host_id, &incarnation)) {
      if (Host* host = d_.hosts.Find(host_id)) {
        if (auto refused = RefuseReplaced(*host, incarnation, "task.take")) return std::move(*refused);
        d_.hosts.Learn(*host, incarnation, call.principal.key);
        d_.hosts.Seen(*host);
        return TakeOrHold(host->record.id, *take, incarnation);
      }
    }
  }
  const json tree = call.request->body_text.empty() ? json() : wire::BodyTree(*call.request);
  const json& body = call.request->body_text.empty() ? call.request->body : tree;
  WEFT_TRY_ASSIGN(host, d_.hosts.Known(body));
  // Optional: a worker that serves one tenant takes only that tenant's tasks.
  WEFT_TRY_ASSIGN(take, ParseTake(body, "body"));
  WEFT_TRY_ASSIGN(incarnation, jsonf::String(body, "incarnation", "body", ""));
  if (auto refused = RefuseReplaced(*host, incarnation, "task.take")) return std::move(*refused);
  d_.hosts.Learn(*host, incarnation, call.principal.key);
  d_.hosts.Seen(*host);
  return TakeOrHold(host->record.id, take, incarnation);
}

Response HostOps::TakeOrHold(const std::string& host_id, const TakeRequest& take, std::string_view incarnation) {
  if (!take.runner.empty()) {
    Status s = d_.dispatcher.RunnerTakes(host_id, take.runner);
    if (!s.ok()) return Response::Error(s);
  }
  WEFT_TRY_ASSIGN(taken, d_.dispatcher.TryTake(host_id, take.tenant, take.runner));
  if (taken.task_id > 0 || take.wait_ms == 0) return TakeReply(std::move(taken));
  Response held;
  held.held = true;
  held.held_host_id = host_id;
  held.held_tenant = take.tenant;
  held.held_runner = take.runner;
  held.held_incarnation = incarnation;
  held.held_until_ms = d_.clock.NowMs() + take.wait_ms;
  return held;
}

Result<HostOps::TakeRequest> HostOps::ParseTake(const json& body, const std::string& path) const {
  WEFT_ASSIGN_OR_RETURN(std::int64_t wait_ms, jsonf::Int(body, "wait_ms", path, 0, INT32_MAX, 0));
  WEFT_ASSIGN_OR_RETURN(std::string tenant, jsonf::String(body, "tenant", path, ""));
  if (tenant.empty() && body.contains("tenant"))
    return Status::Invalid(path + ".tenant must be a non-empty string (the tenant whose tasks to take), "
                                  "or left out to take tasks of any tenant");
  WEFT_ASSIGN_OR_RETURN(std::string runner, jsonf::String(body, "runner", path, ""));
  if (!runner.empty() && !ValidHostId(runner))
    return Status::Invalid(path + ".runner must be 1 to 128 characters of A-Z a-z 0-9 _ . - (the thread that "
                                  "takes), or left out");
  return TakeRequest{std::min<std::int64_t>(wait_ms, d_.config.tasks.max_wait_ms), std::move(tenant),
                     std::move(runner)};
}

Response HostOps::FencingError(const Status& s, const queue::Conflict& conflict) {
  if (s.code() == Code::kConflict)
    return Response::Error(s, {{"current_attempt", conflict.current_attempt},
                               {"state", store::TaskStateName(conflict.state)},
                               {"host_id", conflict.host_id}});
  return Response::Error(s);
}

namespace {

// The members a lean reading knows, one bit each: a second of one sends the body to the tree.
enum FinishMember : unsigned {
  kHostId = 1u << 0,
  kTaskId = 1u << 1,
  kAttempt = 1u << 2,
  kStatus = 1u << 3,
  kMessage = 1u << 4,
  kStdout = 1u << 5,
  kStderr = 1u << 6,
  kCode = 1u << 7,
  kResult = 1u << 8,
  kTake = 1u << 9,
  kWaitMs = 1u << 10,
  kTenant = 1u << 11,
  kRunner = 1u << 12,
  kIncarnation = 1u << 13,
};

// Marks `bit` seen; false when it was already.
bool FirstOf(unsigned& seen, unsigned bit) {
  if (seen & bit) return false;
  seen |= bit;
  return true;
}

// A string member's value into `out`; false unless it is one.
bool TextOf(const flatjson::Member& m, std::string& out) {
  if (m.kind != flatjson::Kind::kString) return false;
  out.clear();
  if (!m.escaped) {
    out.assign(m.text);
    return true;
  }
  return flatjson::Unescape(m.text, out);
}

// An integer member from `min` to `max`; nullopt unless it is one.
std::optional<std::int64_t> IntOf(const flatjson::Member& m, std::int64_t min, std::int64_t max) {
  if (m.kind != flatjson::Kind::kUnsigned || m.number > static_cast<std::uint64_t>(max)) return std::nullopt;
  const auto n = static_cast<std::int64_t>(m.number);
  if (n < min) return std::nullopt;
  return n;
}

}  // namespace

std::optional<HostOps::TakeRequest> HostOps::ReadTakeText(std::string_view text, std::string* host_id,
                                                          std::string_view* incarnation) const {
  flatjson::Reader reader(text);
  flatjson::Member m;
  unsigned seen = 0;
  std::int64_t wait_ms = 0;
  std::string tenant, runner;
  while (reader.Next(m)) {
    bool ok = true;
    if (m.key == "host_id" && host_id) {
      ok = FirstOf(seen, kHostId) && TextOf(m, *host_id) && !host_id->empty();
    } else if (m.key == "wait_ms") {
      std::optional<std::int64_t> n = IntOf(m, 0, INT32_MAX);
      ok = FirstOf(seen, kWaitMs) && n;
      if (n) wait_ms = *n;
    } else if (m.key == "tenant") {
      ok = FirstOf(seen, kTenant) && TextOf(m, tenant) && !tenant.empty();
    } else if (m.key == "runner") {
      ok = FirstOf(seen, kRunner) && TextOf(m, runner) && (runner.empty() || ValidHostId(runner));
    } else if (m.key == "incarnation" && incarnation) {
      // Read in place (weft-host's never needs escaping); an escaped one goes to the tree.
      ok = FirstOf(seen, kIncarnation) && m.kind == flatjson::Kind::kString && !m.escaped;
      if (ok) *incarnation = m.text;
    }  // any other member is not read, as by the tree reading
    if (!ok) return std::nullopt;
  }
  if (!reader.ok() || (host_id && !(seen & kHostId))) return std::nullopt;
  return TakeRequest{std::min<std::int64_t>(wait_ms, d_.config.tasks.max_wait_ms), std::move(tenant),
                     std::move(runner)};
}

std::optional<HostOps::FinishFields> HostOps::ReadFinishText(std::string_view text) const {
  flatjson::Reader reader(text);
  flatjson::Member m;
  unsigned seen = 0;
  FinishFields out;
  queue::FinishRequest& f = out.f;
  std::string status;
  while (reader.Next(m)) {
    bool ok = true;
    if (m.key == "host_id") {
      ok = FirstOf(seen, kHostId) && TextOf(m, f.host_id) && !f.host_id.empty();
    } else if (m.key == "task_id" || m.key == "attempt") {
      std::optional<std::int64_t> n = IntOf(m, 1, kMaxId);
      ok = FirstOf(seen, m.key == "task_id" ? kTaskId : kAttempt) && n;
      if (n) (m.key == "task_id" ? f.task_id : f.attempt) = *n;
    } else if (m.key == "status") {
      ok = FirstOf(seen, kStatus) && TextOf(m, status);
    } else if (m.key == "message") {
      ok = FirstOf(seen, kMessage) && TextOf(m, f.message);
    } else if (m.key == "stdout") {
      ok = FirstOf(seen, kStdout) && TextOf(m, f.stdout_tail);
    } else if (m.key == "stderr") {
      ok = FirstOf(seen, kStderr) && TextOf(m, f.stderr_tail);
    } else if (m.key == "code") {
      ok = FirstOf(seen, kCode) && TextOf(m, f.code);
    } else if (m.key == "result") {
      // Only an empty one: another is stored as the tree writes it, keys in order.
      ok = FirstOf(seen, kResult) && m.kind == flatjson::Kind::kObject && flatjson::EmptyObject(m.text);
    } else if (m.key == "take") {
      ok = FirstOf(seen, kTake) && m.kind == flatjson::Kind::kObject;
      if (ok) {
        out.next = ReadTakeText(m.text, nullptr);
        ok = out.next.has_value();
      }
    }  // any other member is not read, as by the tree reading
    if (!ok) return std::nullopt;
  }
  constexpr unsigned kRequired = kHostId | kTaskId | kAttempt | kStatus;
  if (!reader.ok() || (seen & kRequired) != kRequired) return std::nullopt;
  const std::optional<AttemptStatus> ended = AttemptStatusFrom(status);
  if (ended != AttemptStatus::kSucceeded && ended != AttemptStatus::kFailed) return std::nullopt;
  f.succeeded = ended == AttemptStatus::kSucceeded;
  f.result_json = "{}";
  f.stdout_tail = Tail(std::move(f.stdout_tail));
  f.stderr_tail = Tail(std::move(f.stderr_tail));
  return out;
}

Response HostOps::TaskFinish(const Call& call) {
  if (!call.request->body_text.empty()) {
    if (std::optional<FinishFields> finish = ReadFinishText(call.request->body_text)) return Finish(*finish);
    WEFT_TRY_ASSIGN(finish, ReadFinish(wire::BodyTree(*call.request)));
    return Finish(finish);
  }
  WEFT_TRY_ASSIGN(finish, ReadFinish(call.request->body));
  return Finish(finish);
}

Result<HostOps::FinishFields> HostOps::ReadFinish(const json& body) const {
  queue::FinishRequest f;
  WEFT_ASSIGN_OR_RETURN(std::string host_id, HostRegistry::HostIdOf(body));
  WEFT_ASSIGN_OR_RETURN(std::int64_t task_id, jsonf::Int(body, "task_id", "body", 1, kMaxId));
  WEFT_ASSIGN_OR_RETURN(std::int64_t attempt, jsonf::Int(body, "attempt", "body", 1, kMaxId));
  WEFT_ASSIGN_OR_RETURN(std::string status, jsonf::String(body, "status", "body"));
  const std::optional<AttemptStatus> ended = AttemptStatusFrom(status);
  if (ended != AttemptStatus::kSucceeded && ended != AttemptStatus::kFailed)
    return Status::Invalid("body.status must be \"succeeded\" or \"failed\", got \"" + status + "\"");
  WEFT_ASSIGN_OR_RETURN(std::string message, jsonf::String(body, "message", "body", ""));
  WEFT_ASSIGN_OR_RETURN(std::string out, jsonf::String(body, "stdout", "body", ""));
  WEFT_ASSIGN_OR_RETURN(std::string err, jsonf::String(body, "stderr", "body", ""));
  WEFT_ASSIGN_OR_RETURN(std::string code, jsonf::String(body, "code", "body", ""));
  auto result = body.find("result");
  if (result != body.end() && !result->is_null() && !result->is_object())
    return jsonf::RequireObject(*result, "body.result");
  // Optional: take the next task in the same round trip (a worker thread that
  // finished one task wants another).
  std::optional<TakeRequest> next;
  if (auto t = body.find("take"); t != body.end() && !t->is_null()) {
    if (!t->is_object()) return jsonf::RequireObject(*t, "body.take");
    WEFT_ASSIGN_OR_RETURN(TakeRequest take, ParseTake(*t, "body.take"));
    next = std::move(take);
  }
  f.host_id = std::move(host_id);
  f.task_id = task_id;
  f.attempt = attempt;
  f.succeeded = ended == AttemptStatus::kSucceeded;
  f.message = std::move(message);
  f.result_json = result != body.end() && result->is_object() ? wire::Dump(*result) : "{}";
  f.stdout_tail = Tail(std::move(out));
  f.stderr_tail = Tail(std::move(err));
  f.code = std::move(code);
  return FinishFields{std::move(f), std::move(next)};
}

Response HostOps::Finish(const FinishFields& finish) {
  const queue::FinishRequest& f = finish.f;
  if (Host* h = d_.hosts.Find(f.host_id)) d_.hosts.Seen(*h);
  queue::Conflict conflict;
  Status s = d_.queue.Finish(f, &conflict);
  d_.dispatcher.Acknowledged(f.task_id, f.attempt);
  if (!s.ok()) return FencingError(s, conflict);
  if (finish.next) return TakeOrHold(f.host_id, *finish.next, {});
  return Response::Ok(json::object());
}

Response HostOps::TaskProgress(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host_id, HostRegistry::HostIdOf(body));
  WEFT_TRY_ASSIGN(task_id, jsonf::Int(body, "task_id", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(attempt, jsonf::Int(body, "attempt", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(percent, jsonf::Int(body, "percent", "body", 0, 100, 0));
  WEFT_TRY_ASSIGN(message, jsonf::String(body, "message", "body", ""));
  if (Host* h = d_.hosts.Find(host_id)) d_.hosts.Seen(*h);
  queue::Conflict conflict;
  d_.dispatcher.Acknowledged(task_id, attempt);
  Status s = d_.queue.Progress(host_id, {task_id, attempt}, &conflict);
  if (!s.ok()) return FencingError(s, conflict);
  if (!d_.hosts.events_wanted()) return Response::Ok(json::object());
  // A job's task reports under its cluster's task topic (which a user's
  // subscription to their cluster covers), a raw task under <tenant>/task/progress.
  const std::string* tenant = d_.queue.TenantOf(task_id);
  const std::string* cluster = d_.queue.ClusterOf(task_id);
  json payload = {{"type", "task.progress"},
                  {"task_id", task_id},
                  {"attempt", attempt},
                  {"host_id", host_id},
                  {"percent", percent},
                  {"message", message},
                  {"at_ms", d_.clock.NowMs()}};
  std::string topic = (tenant ? *tenant : std::string("default")) + "/task/";
  if (cluster && !cluster->empty()) {
    payload["cluster_id"] = *cluster;
    topic += *cluster + "/";
  }
  d_.hosts.AddEvent(Event{topic + "progress", std::move(payload)});
  return Response::Ok(json::object());
}

}  // namespace

void RegisterHostOps(api::Router& router, HostOpsDeps deps) {
  // Owned by the handlers, which share it; it lives as long as the router.
  auto impl = std::make_shared<HostOps>(deps);
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> hosts = {Role::kHost};
  const std::set<Endpoint> api = {Endpoint::kApi};
  const std::set<Endpoint> prov = {Endpoint::kProvisioner};
  auto bind = [impl](Response (HostOps::*fn)(const Call&)) {
    return [impl, fn](const Call& c) { return ((*impl).*fn)(c); };
  };
  router.Add("host.list", users, api, bind(&HostOps::HostList), api::Effect::kReads, {});
  router.Add("plugin.list", users, api, bind(&HostOps::PluginList), api::Effect::kReads, {});
  // Draining a host keeps every tenant's tasks off it: the operator's, as enrolling and revoking hosts are.
  const std::set<Role> superadmin = {Role::kSuperadmin};
  router.Add("host.drain", superadmin, api, [impl](const Call& c) { return impl->HostDrain(c, true); },
             api::Effect::kChanges, {"host_id"});
  router.Add("host.undrain", superadmin, api, [impl](const Call& c) { return impl->HostDrain(c, false); },
             api::Effect::kChanges, {"host_id"});
  router.Add("host.register", hosts, prov, bind(&HostOps::HostRegister), api::Effect::kHostTraffic);
  router.Add("host.heartbeat", hosts, prov, bind(&HostOps::HostHeartbeat), api::Effect::kHostTraffic);
  router.Add("host.leave", hosts, prov, bind(&HostOps::HostLeave), api::Effect::kHostTraffic);
  router.Add("task.take", hosts, prov, bind(&HostOps::TaskTake), api::Effect::kHostTraffic);
  router.Add("task.finish", hosts, prov, bind(&HostOps::TaskFinish), api::Effect::kHostTraffic);
  router.Add("task.progress", hosts, prov, bind(&HostOps::TaskProgress), api::Effect::kHostTraffic);
}

}  // namespace weft::hosts
