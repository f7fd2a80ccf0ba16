#include "server/api/ops.hpp"

#include <algorithm>

#include "server/api/audit.hpp"
#include "server/api/catalog_ops.hpp"
#include "server/api/cluster_ops.hpp"
#include "server/api/workers.hpp"

#include "weft/common/json_fields.hpp"
#include "weft/common/log.hpp"

namespace weft::api {
namespace {

constexpr std::size_t kMaxEnqueue = 10000;
constexpr std::size_t kOutputTailBytes = 64 * 1024;
constexpr std::int64_t kMaxId = INT64_MAX;
const std::set<std::string> kActions = {"CREATE",    "CONFIRM", "BOOTSTRAP", "INSTALL", "CONFIGURE",
                                        "INITIALIZE", "START",   "STOP",      "REMOVE",  "DELETE"};

constexpr const char* kActionList = "CREATE CONFIRM BOOTSTRAP INSTALL CONFIGURE INITIALIZE START STOP REMOVE DELETE";

std::string Tail(std::string s) {
  if (s.size() <= kOutputTailBytes) return s;
  std::size_t cut = s.size() - kOutputTailBytes;
  // Do not start inside a UTF-8 sequence.
  while (cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) ++cut;
  return s.substr(cut);
}

json ParseStored(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json::object() : v;
}

// The same for every attempt of a task, and different for every task: a
// provider that finds a machine it made under this key hands that one back
// instead of making a second one when a lost attempt is run again.
std::string IdempotencyKey(const store::TaskRecord& t) {
  if (t.cluster_id.empty()) return "task/" + std::to_string(t.id);
  return t.cluster_id + "/" + t.node_id + "/" + std::to_string(t.id);
}

}  // namespace

bool ValidHostId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

Ops::Ops(store::Store& store, queue::TaskQueue& queue, const Clock& clock, const server::Config& config)
    : store_(store),
      queue_(queue),
      clock_(clock),
      config_(config),
      engine_(store, queue, clock,
              jobs::EngineOptions{config.jobs.max_attempts, config.jobs.retry_backoff_ms,
                                  config.jobs.retry_backoff_max_ms, config.jobs.max_nodes_in_task}) {
  const std::set<Role> anyone = {Role::kHost, Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> hosts = {Role::kHost};
  const std::set<Endpoint> api = {Endpoint::kApi};
  const std::set<Endpoint> prov = {Endpoint::kProvisioner};
  const std::set<Endpoint> both = {Endpoint::kApi, Endpoint::kProvisioner};
  auto bind = [this](Response (Ops::*fn)(const Call&)) { return [this, fn](const Call& c) { return (this->*fn)(c); }; };
  router_.Add("server.status", anyone, both, bind(&Ops::ServerStatus), Effect::kReads);
  router_.Add("host.list", users, api, bind(&Ops::HostList), Effect::kReads);
  router_.Add("plugin.list", users, api, bind(&Ops::PluginList), Effect::kReads);
  router_.Add("task.get", admins, api, bind(&Ops::TaskGet), Effect::kReads);
  router_.Add("task.list", admins, api, bind(&Ops::TaskList), Effect::kReads);
  router_.Add("debug.enqueue", admins, api, bind(&Ops::DebugEnqueue));
  router_.Add("host.register", hosts, prov, bind(&Ops::HostRegister), Effect::kHostTraffic);
  router_.Add("host.heartbeat", hosts, prov, bind(&Ops::HostHeartbeat), Effect::kHostTraffic);
  router_.Add("host.leave", hosts, prov, bind(&Ops::HostLeave), Effect::kHostTraffic);
  router_.Add("task.take", hosts, prov, bind(&Ops::TaskTake), Effect::kHostTraffic);
  router_.Add("task.finish", hosts, prov, bind(&Ops::TaskFinish), Effect::kHostTraffic);
  router_.Add("task.progress", hosts, prov, bind(&Ops::TaskProgress), Effect::kHostTraffic);
  RegisterCatalogOps(router_, store_, clock_, config_);
  RegisterClusterOps(router_, store_, engine_, clock_,
                     [this](const std::string& tenant) { return LivePluginTypes(tenant); });
  RegisterAuditOps(router_, store_);
  router_.set_audit_recorder([this](const Call& c, const Response& r) { return RecordAudit(store_, clock_, c, r); });
  queue_.set_end_observer([this](const queue::Ended& e) { return engine_.OnTaskEnded(e); });
  AddTakeDecorator([this](const store::TaskRecord& r, json& task) { return engine_.Decorate(r, task); });
}

Status Ops::Load() {
  hosts_.clear();
  Result<std::vector<store::HostRecord>> records = store_.ListHosts();
  if (!records.ok()) return records.status().WithContext("cannot load hosts");
  for (store::HostRecord& r : *records) {
    Host h;
    h.descriptors = ParseStored(r.plugins_json);
    if (!h.descriptors.is_array()) h.descriptors = json::array();
    for (const json& d : h.descriptors) {
      if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) continue;
      const std::string tenant = d.value("tenant", std::string());
      (tenant.empty() ? h.plugins.shared : h.plugins.by_tenant[tenant]).insert(d["type"].get<std::string>());
    }
    h.silent = !Live(h);
    std::string id = r.id;
    h.record = std::move(r);
    hosts_.emplace(std::move(id), std::move(h));
  }
  return engine_.Load();
}

Status Ops::Reset() {
  host_events_.clear();
  return Load();
}

bool Ops::Live(const Host& host) const {
  return !host.left && clock_.NowMs() - host.record.last_seen_ms <= config_.hosts.silent_after_ms;
}

std::set<std::string> Ops::LivePluginTypes(const std::string& tenant) const {
  std::set<std::string> out;
  for (const auto& [id, h] : hosts_) {
    if (!Live(h)) continue;
    const std::set<std::string> types = TypesFor(h, tenant);
    out.insert(types.begin(), types.end());
  }
  return out;
}

void Ops::Seen(Host& host) {
  host.record.last_seen_ms = clock_.NowMs();
  host.left = false;
  if (host.silent) {
    host.silent = false;
    HostEvent(host.record.id, "live");
  }
}

void Ops::HostEvent(const std::string& host_id, const char* what) {
  host_events_.push_back(
      Event{"_system/host", json{{"type", "host"}, {"host_id", host_id}, {"event", what}, {"at_ms", clock_.NowMs()}}});
}

Status Ops::Janitor() {
  for (auto& [id, h] : hosts_) {
    if (!h.silent && !Live(h)) {
      h.silent = true;
      WEFT_LOG(kWarn, "weftd") << "host '" << id << "' is silent: not heard from for "
                               << config_.hosts.silent_after_ms << " ms (hosts.silent_after_ms)";
      HostEvent(id, "silent");
      WEFT_RETURN_IF_ERROR(queue_.ReleaseHost(
          id, "the host is silent (not heard from for " + std::to_string(config_.hosts.silent_after_ms) + " ms)"));
    }
  }
  return engine_.ExpireLeases();
}

void Ops::DiscardEvents() {
  host_events_.clear();
  (void)queue_.TakeEvents();
  (void)engine_.TakeEvents();
}

std::vector<Event> Ops::DrainEvents() {
  std::vector<Event> out = std::exchange(host_events_, {});
  for (queue::TaskEvent& e : queue_.TakeEvents()) {
    json p = {{"type", "task"},        {"task_id", e.task_id}, {"state", store::TaskStateName(e.state)},
              {"attempt", e.attempt},  {"host_id", e.host_id}, {"plugin", e.plugin},
              {"action", e.action},    {"at_ms", e.at_ms}};
    if (!e.message.empty()) p["message"] = e.message;
    if (!e.cluster_id.empty()) p["cluster_id"] = e.cluster_id;
    out.push_back(Event{e.tenant + "/task" + (e.cluster_id.empty() ? "" : "/" + e.cluster_id + "/"), std::move(p)});
  }
  for (jobs::Event& e : engine_.TakeEvents()) out.push_back(Event{std::move(e.topic), std::move(e.payload)});
  return out;
}

Result<Ops::Host*> Ops::KnownHost(const json& body) {
  Result<std::string> id = jsonf::String(body, "host_id", "body");
  if (!id.ok()) return id.status();
  auto it = hosts_.find(*id);
  if (it == hosts_.end())
    return Status::NotFound("host '" + *id + "' is not registered; send host.register first");
  return &it->second;
}

json Ops::TaskJson(const store::TaskRecord& t, bool details) {
  json j = {{"task_id", t.id},
            {"tenant", t.tenant},
            {"plugin", t.plugin},
            {"action", t.action},
            {"job_id", t.job_id},
            {"cluster_id", t.cluster_id},
            {"node_id", t.node_id},
            {"state", store::TaskStateName(t.state)},
            {"attempt", t.attempt},
            {"max_attempts", t.max_attempts},
            {"host_id", t.host_id},
            {"created_at_ms", t.created_at_ms},
            {"updated_at_ms", t.updated_at_ms},
            {"lease_until_ms", t.lease_until_ms}};
  if (details) {
    j["payload"] = ParseStored(t.payload_json);
    j["result"] = ParseStored(t.result_json);
    j["message"] = t.message;
    j["stdout"] = t.stdout_tail;
    j["stderr"] = t.stderr_tail;
  }
  return j;
}

// ---- api ------------------------------------------------------------------

json Ops::StoreStatus() const {
  const store::CheckpointStats c = store_.checkpoint_stats();
  return {{"path", store_.path().string()},
          {"schema_version", store_.schema_version()},
          {"wal_pages", c.wal_pages},
          {"checkpoints", {{"background", c.background_rounds}, {"by_commits", c.writer_rounds}}}};
}

Response Ops::ServerStatus(const Call& call) {
  std::int64_t live = 0;
  for (const auto& [id, h] : hosts_) live += Live(h) ? 1 : 0;
  const std::int64_t now = clock_.NowMs();
  json store = StoreStatus();
  json status = {{"version", "0.1.0"},
                 {"protocol", wire::kProtocolVersion},
                 {"pid", info_.pid},
                 {"started_at_ms", info_.started_at_ms},
                 {"uptime_ms", now - info_.started_at_ms},
                 {"data_dir", info_.data_dir},
                 {"endpoints", info_.endpoints},
                 {"store", std::move(store)},
                 {"hosts", {{"registered", hosts_.size()}, {"live", live}}},
                 {"tasks",
                  {{"queued", queue_.queued()},
                   {"leased", queue_.leased()},
                   {"succeeded", queue_.succeeded()},
                   {"failed", queue_.failed()}}},
                 {"requests", router_.Served()}};
  // Where the server keeps its files is for the superadmin only.
  if (call.principal.role != Role::kSuperadmin) {
    status.erase("data_dir");
    status["store"].erase("path");
  }
  return Response::Ok(std::move(status));
}

namespace {

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

}  // namespace

Response Ops::HostList(const Call& call) {
  json list = json::array();
  for (const auto& [id, h] : hosts_) {
    list.push_back({{"id", id},
                    {"capacity", h.record.capacity},
                    {"version", h.record.version},
                    {"live", Live(h)},
                    {"registered_at_ms", h.record.registered_at_ms},
                    {"last_seen_ms", h.record.last_seen_ms},
                    {"in_flight", queue_.InFlight(id)},
                    {"workers", OwnTenantOnly(Live(h) ? WorkersFor(id) : json::array(), call.principal)},
                    {"reported_workers", OwnTenantOnly(h.reported_workers, call.principal)},
                    {"plugins", TypesFor(h, call.principal.tenant)}});
  }
  return Response::Ok({{"hosts", std::move(list)}});
}

Response Ops::PluginList(const Call& call) {
  std::map<std::string, json> plugins;
  for (const auto& [id, h] : hosts_) {
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
      it->second["hosts"].push_back(id);
      if (Live(h)) it->second["live_hosts"].push_back(id);
    }
  }
  json list = json::array();
  for (auto& [type, p] : plugins) list.push_back(std::move(p));
  return Response::Ok({{"plugins", std::move(list)}});
}

Response Ops::TaskGet(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(task_id, jsonf::Int(body, "task_id", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(task, store_.GetTask(task_id));
  if (!task || task->tenant != call.principal.tenant)
    return Response::Error(Status::NotFound("task " + std::to_string(task_id) + " does not exist in tenant '" +
                                            call.principal.tenant + "'"));
  json j = TaskJson(*task, true);
  WEFT_TRY_ASSIGN(attempts, store_.ListAttempts(task_id));
  json list = json::array();
  for (const store::AttemptRecord& a : attempts)
    list.push_back({{"attempt", a.attempt},
                    {"host_id", a.host_id},
                    {"taken_at_ms", a.taken_at_ms},
                    {"finished_at_ms", a.finished_at_ms},
                    {"status", a.status},
                    {"message", a.message}});
  j["attempts"] = std::move(list);
  return Response::Ok(std::move(j));
}

Response Ops::TaskList(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(state_name, jsonf::String(body, "state", "body", ""));
  std::optional<store::TaskState> state;
  if (!state_name.empty()) {
    store::TaskState s;
    if (!store::ParseTaskState(state_name, &s))
      return Response::Error(Status::Invalid("body.state must be one of queued, leased, succeeded, failed; got \"" +
                                             state_name + "\""));
    state = s;
  }
  WEFT_TRY_ASSIGN(limit, jsonf::Int(body, "limit", "body", 1, 10000, 100));
  WEFT_TRY_ASSIGN(tasks, store_.ListTasks(call.principal.tenant, state, limit));
  json list = json::array();
  for (const auto& t : tasks) list.push_back(TaskJson(t, false));
  return Response::Ok({{"tasks", std::move(list)}});
}

Response Ops::DebugEnqueue(const Call& call) {
  const json& body = call.request->body;
  auto it = body.find("tasks");
  if (it == body.end() || !it->is_array())
    return Response::Error(Status::Invalid("body.tasks is required: an array of tasks, each with plugin and action"));
  if (it->size() > kMaxEnqueue)
    return Response::Error(Status::TooLarge("body.tasks has " + std::to_string(it->size()) +
                                            " tasks; at most " + std::to_string(kMaxEnqueue) +
                                            " may be enqueued per request"));
  std::vector<queue::NewTask> tasks;
  tasks.reserve(it->size());
  // Everything is checked before anything is written.
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string path = "tasks[" + std::to_string(i) + "]";
    if (!t.is_object()) return Response::Error(jsonf::RequireObject(t, path));
    queue::NewTask n;
    WEFT_TRY_ASSIGN(plugin, jsonf::String(t, "plugin", path));
    WEFT_TRY_ASSIGN(action, jsonf::String(t, "action", path));
    if (!kActions.count(action))
      return Response::Error(Status::Invalid(path + ".action must be one of " + kActionList + ", got \"" + action +
                                             "\""));
    WEFT_TRY_ASSIGN(node_id, jsonf::String(t, "node_id", path, ""));
    WEFT_TRY_ASSIGN(job_id, jsonf::String(t, "job_id", path, ""));
    WEFT_TRY_ASSIGN(cluster_id, jsonf::String(t, "cluster_id", path, ""));
    WEFT_TRY_ASSIGN(max_attempts,
                    jsonf::Int(t, "max_attempts", path, 1, 1000, config_.tasks.default_max_attempts));
    auto payload = t.find("payload");
    if (payload != t.end() && !payload->is_null() && !payload->is_object())
      return Response::Error(jsonf::RequireObject(*payload, path + ".payload"));
    n.plugin = std::move(plugin);
    n.action = std::move(action);
    n.node_id = std::move(node_id);
    n.job_id = std::move(job_id);
    n.cluster_id = std::move(cluster_id);
    n.max_attempts = max_attempts;
    n.payload_json = payload != t.end() && payload->is_object() ? wire::Dump(*payload) : "{}";
    tasks.push_back(std::move(n));
  }
  WEFT_TRY_ASSIGN(ids, queue_.Enqueue(call.principal.tenant, std::move(tasks)));
  return Response::Ok({{"task_ids", ids}});
}

// ---- provisioner ----------------------------------------------------------

std::set<std::string> Ops::TypesFor(const Host& host, const std::string& tenant) {
  std::set<std::string> out = host.plugins.shared;
  auto own = host.plugins.by_tenant.find(tenant);
  if (own != host.plugins.by_tenant.end()) out.insert(own->second.begin(), own->second.end());
  return out;
}

std::vector<std::string> Ops::HostsWithHostWidePlugin(const std::string& type) const {
  std::vector<std::string> out;
  for (const auto& [id, h] : hosts_)
    if (h.plugins.shared.count(type)) out.push_back(id);
  return out;
}

std::set<std::string> Ops::SensitiveFields(const std::string& type) const {
  std::set<std::string> out;
  for (const auto& [id, h] : hosts_) {
    for (const json& d : h.descriptors) {
      if (!d.is_object() || d.value("type", "") != type || !d.contains("fields") || !d["fields"].is_array()) continue;
      for (const json& f : d["fields"])
        if (f.is_object() && f.value("sensitive", false) && f.contains("name") && f["name"].is_string())
          out.insert(f["name"].get<std::string>());
    }
  }
  return out;
}

bool Ops::HostLive(const std::string& host_id) const {
  auto it = hosts_.find(host_id);
  return it != hosts_.end() && Live(it->second);
}

Status Ops::ForgetHost(const std::string& host_id, const std::string& reason) {
  WEFT_RETURN_IF_ERROR(queue_.ReleaseHost(host_id, reason));
  WEFT_RETURN_IF_ERROR(store_.DeleteHost(host_id));
  if (hosts_.erase(host_id)) HostEvent(host_id, "revoked");
  return Status::Ok();
}

Response Ops::HostRegister(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host_id, jsonf::String(body, "host_id", "body"));
  if (!ValidHostId(host_id))
    return Response::Error(Status::Invalid("body.host_id must be 1 to 128 characters of A-Z a-z 0-9 _ . -, got " +
                                           jsonf::Brief(body["host_id"])));
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
  const std::int64_t now = clock_.NowMs();
  Host h;
  h.record = store::HostRecord{host_id, capacity, version, wire::Dump(descriptors), now, now};
  h.plugins = std::move(types);
  h.descriptors = std::move(descriptors);
  h.incarnation = incarnation;
  Status s = store_.UpsertHost(h.record);
  if (!s.ok()) return Response::Error(s);
  if (auto old = hosts_.find(host_id); old != hosts_.end() && !old->second.incarnation.empty() &&
                                       !incarnation.empty() && old->second.incarnation != incarnation) {
    // A new process under the same name: the old one is gone, and the attempts
    // it ran will never be finished; hand them out again now, not at lease end.
    if (queue_.InFlight(host_id) > 0) {
      WEFT_LOG(kInfo, "weftd") << "host '" << host_id << "' started again; giving up the "
                               << queue_.InFlight(host_id) << " attempt(s) of its previous process";
    }
    s = queue_.ReleaseHost(host_id, "host '" + host_id + "' started again (a new process registered)");
    if (!s.ok()) return Response::Error(s);
  }
  hosts_[host_id] = std::move(h);
  HostEvent(host_id, "registered");
  WEFT_LOG(kInfo, "weftd") << "host '" << host_id << "' registered with capacity " << capacity << " and "
                           << hosts_[host_id].descriptors.size() << " plugin types";
  return Response::Ok({{"heartbeat_ms", config_.hosts.heartbeat_ms},
                       {"lease_ms", config_.tasks.lease_ms},
                       {"workers", WorkersFor(host_id)},
                       {"tenants", ActiveTenants()}});
}

Response Ops::HostHeartbeat(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host, KnownHost(body));
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
    }
  }
  auto workers = body.find("workers");
  if (workers != body.end() && !workers->is_null()) {
    if (!workers->is_array())
      return Response::Error(Status::Invalid("body.workers must be an array of {tenant, threads, pid}, got " +
                                             jsonf::Brief(*workers)));
    host->reported_workers = *workers;
  }
  WEFT_TRY_ASSIGN(outcome, queue_.Renew(host->record.id, refs));
  Seen(*host);
  Status s = store_.TouchHost(host->record.id, host->record.last_seen_ms);
  if (!s.ok()) return Response::Error(s);
  json stale = json::array();
  for (const auto& r : outcome.stale) stale.push_back({{"task_id", r.task_id}, {"attempt", r.attempt}});
  return Response::Ok({{"renewed", outcome.renewed},
                       {"stale", std::move(stale)},
                       {"workers", WorkersFor(host->record.id)},
                       {"tenants", ActiveTenants()}});
}

Response Ops::HostLeave(const Call& call) {
  WEFT_TRY_ASSIGN(host, KnownHost(call.request->body));
  // A host stopping cleanly finished or reported its tasks first; anything
  // still leased to it would never be finished by it.
  Status s = queue_.ReleaseHost(host->record.id, "host '" + host->record.id + "' stopped");
  if (!s.ok()) return Response::Error(s);
  if (!host->left) {
    host->left = true;
    host->silent = true;
    HostEvent(host->record.id, "left");
    WEFT_LOG(kInfo, "weftd") << "host '" << host->record.id << "' stopped";
  }
  return Response::Ok(json::object());
}

std::set<std::string> Ops::ActiveTenants() {
  constexpr std::int64_t kTenantHoldMs = 60000;
  const std::int64_t now = clock_.NowMs();
  for (const std::string& t : queue_.LiveTenants()) tenant_seen_ms_[t] = now;
  std::set<std::string> active;
  for (auto it = tenant_seen_ms_.begin(); it != tenant_seen_ms_.end();) {
    if (now - it->second > kTenantHoldMs) {
      it = tenant_seen_ms_.erase(it);
      continue;
    }
    active.insert(it->first);
    ++it;
  }
  return active;
}

json Ops::WorkersFor(const std::string& host_id) {
  const std::set<std::string> active = ActiveTenants();
  std::vector<HostCapacity> live;
  for (const auto& [id, h] : hosts_)
    if (Live(h)) live.push_back({id, h.record.capacity});
  const WorkerSplit split =
      AllocateWorkers(std::move(live), active, worker_caps_ ? worker_caps_() : std::map<std::string, std::int64_t>{});
  json out = json::array();
  auto it = split.find(host_id);
  if (it != split.end())
    for (const auto& [tenant, threads] : it->second) out.push_back({{"tenant", tenant}, {"threads", threads}});
  return out;
}

bool Ops::IsReadOnly(std::string_view op) {
  static const std::set<std::string, std::less<>> kReads = {
      "server.status", "host.list",    "plugin.list", "task.get",  "task.list",
      "cluster.list",  "cluster.get",  "job.list",    "job.get",   "catalog.check",
      "provider.get",  "provider.list", "hardwaretype.get", "hardwaretype.list", "imagetype.get",
      "imagetype.list", "service.get", "service.list", "clustertemplate.get", "clustertemplate.list", "audit.list"};
  return kReads.count(op) != 0;
}

bool Ops::CanServe(const std::string& host_id, const std::string& tenant) const {
  auto it = hosts_.find(host_id);
  return it != hosts_.end() && queue_.HasReady(it->second.plugins, tenant);
}

Result<json> Ops::TryTake(const std::string& host_id, const std::string& tenant) {
  auto it = hosts_.find(host_id);
  if (it == hosts_.end()) return json();
  Result<std::optional<store::TaskRecord>> taken = queue_.Take(host_id, it->second.plugins, tenant);
  if (!taken.ok()) return taken.status();
  if (!taken->has_value()) return json();
  const store::TaskRecord& t = **taken;
  // Built key by key: an initializer list makes a two-element array per
  // member first, three times the allocations on the hottest path.
  json task = json::object();
  task["task_id"] = t.id;
  task["attempt"] = t.attempt;
  task["tenant"] = t.tenant;
  task["plugin"] = t.plugin;
  task["action"] = t.action;
  task["job_id"] = t.job_id;
  task["cluster_id"] = t.cluster_id;
  task["node_id"] = t.node_id;
  task["idempotency_key"] = IdempotencyKey(t);
  task["lease_ms"] = queue_.lease_ms();
  if (!t.payload_json.empty() && t.payload_json != "{}") {
    json payload = ParseStored(t.payload_json);
    if (payload.is_object())
      for (auto& [k, v] : payload.items())
        if (!task.contains(k)) task[k] = std::move(v);
  }
  for (const TakeDecorator& decorate : decorators_) {
    Status s = decorate(t, task);
    if (s.ok()) continue;
    // What a decorator refuses it will refuse again: the attempt fails here
    // (and is retried or fails the task like any failed attempt).
    queue::FinishRequest f;
    f.host_id = host_id;
    f.task_id = t.id;
    f.attempt = t.attempt;
    f.succeeded = false;
    f.message = "the task could not be handed out: " + s.message();
    queue::Conflict conflict;
    WEFT_RETURN_IF_ERROR(queue_.Finish(f, &conflict));
    return json();
  }
  return task;
}

Response Ops::TaskTake(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host, KnownHost(body));
  // Optional: a worker that serves one tenant takes only that tenant's tasks.
  WEFT_TRY_ASSIGN(take, ParseTake(body, "body"));
  Seen(*host);
  return TakeOrHold(host->record.id, take.tenant, take.wait_ms);
}

Response Ops::TakeOrHold(const std::string& host_id, const std::string& tenant, std::int64_t wait_ms) {
  WEFT_TRY_ASSIGN(task, TryTake(host_id, tenant));
  if (!task.is_null() || wait_ms == 0) {
    json body = json::object();
    body["task"] = std::move(task);
    return Response::Ok(std::move(body));
  }
  Response held;
  held.held = true;
  held.held_host_id = host_id;
  held.held_tenant = tenant;
  held.held_until_ms = clock_.NowMs() + wait_ms;
  return held;
}

Result<Ops::TakeRequest> Ops::ParseTake(const json& body, const std::string& path) {
  Result<std::int64_t> wait_ms = jsonf::Int(body, "wait_ms", path, 0, INT32_MAX, 0);
  if (!wait_ms.ok()) return wait_ms.status();
  Result<std::string> tenant = jsonf::String(body, "tenant", path, "");
  if (!tenant.ok()) return tenant.status();
  if (tenant->empty() && body.contains("tenant"))
    return Status::Invalid(path + ".tenant must be a non-empty string (the tenant whose tasks to take), "
                                  "or left out to take tasks of any tenant");
  return TakeRequest{std::min<std::int64_t>(*wait_ms, config_.tasks.max_wait_ms), std::move(*tenant)};
}

Response Ops::TaskFinish(const Call& call) {
  const json& body = call.request->body;
  queue::FinishRequest f;
  WEFT_TRY_ASSIGN(host_id, jsonf::String(body, "host_id", "body"));
  WEFT_TRY_ASSIGN(task_id, jsonf::Int(body, "task_id", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(attempt, jsonf::Int(body, "attempt", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(status, jsonf::String(body, "status", "body"));
  if (status != "succeeded" && status != "failed")
    return Response::Error(Status::Invalid("body.status must be \"succeeded\" or \"failed\", got \"" + status + "\""));
  WEFT_TRY_ASSIGN(message, jsonf::String(body, "message", "body", ""));
  WEFT_TRY_ASSIGN(out, jsonf::String(body, "stdout", "body", ""));
  WEFT_TRY_ASSIGN(err, jsonf::String(body, "stderr", "body", ""));
  auto result = body.find("result");
  if (result != body.end() && !result->is_null() && !result->is_object())
    return Response::Error(jsonf::RequireObject(*result, "body.result"));
  // Optional: take the next task in the same round trip (a worker thread that
  // finished one task wants another).
  std::optional<TakeRequest> next;
  if (auto t = body.find("take"); t != body.end() && !t->is_null()) {
    if (!t->is_object()) return Response::Error(jsonf::RequireObject(*t, "body.take"));
    WEFT_TRY_ASSIGN(take, ParseTake(*t, "body.take"));
    next = std::move(take);
  }
  f.host_id = std::move(host_id);
  f.task_id = task_id;
  f.attempt = attempt;
  f.succeeded = status == "succeeded";
  f.message = std::move(message);
  f.result_json = result != body.end() && result->is_object() ? wire::Dump(*result) : "{}";
  f.stdout_tail = Tail(std::move(out));
  f.stderr_tail = Tail(std::move(err));
  auto h = hosts_.find(f.host_id);
  if (h != hosts_.end()) Seen(h->second);
  queue::Conflict conflict;
  Status s = queue_.Finish(f, &conflict);
  if (s.code() == Code::kConflict)
    return Response::Error(s, {{"current_attempt", conflict.current_attempt},
                               {"state", store::TaskStateName(conflict.state)},
                               {"host_id", conflict.host_id}});
  if (!s.ok()) return Response::Error(s);
  if (next) return TakeOrHold(f.host_id, next->tenant, next->wait_ms);
  return Response::Ok(json::object());
}

Response Ops::TaskProgress(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(host_id, jsonf::String(body, "host_id", "body"));
  WEFT_TRY_ASSIGN(task_id, jsonf::Int(body, "task_id", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(attempt, jsonf::Int(body, "attempt", "body", 1, kMaxId));
  WEFT_TRY_ASSIGN(percent, jsonf::Int(body, "percent", "body", 0, 100, 0));
  WEFT_TRY_ASSIGN(message, jsonf::String(body, "message", "body", ""));
  auto h = hosts_.find(host_id);
  if (h != hosts_.end()) Seen(h->second);
  queue::Conflict conflict;
  Status s = queue_.Progress(host_id, {task_id, attempt}, &conflict);
  if (s.code() == Code::kConflict)
    return Response::Error(s, {{"current_attempt", conflict.current_attempt},
                               {"state", store::TaskStateName(conflict.state)},
                               {"host_id", conflict.host_id}});
  if (!s.ok()) return Response::Error(s);
  if (!events_wanted_) return Response::Ok(json::object());
  const std::string* tenant = queue_.TenantOf(task_id);
  host_events_.push_back(Event{(tenant ? *tenant : std::string("default")) + "/task/progress",
                               {{"type", "task.progress"},
                                {"task_id", task_id},
                                {"attempt", attempt},
                                {"host_id", host_id},
                                {"percent", percent},
                                {"message", message},
                                {"at_ms", clock_.NowMs()}}});
  return Response::Ok(json::object());
}

}  // namespace weft::api
