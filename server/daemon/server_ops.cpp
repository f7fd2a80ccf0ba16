#include "weft/server/daemon/server_ops.hpp"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "weft/common/json_fields.hpp"
#include "weft/common/wire.hpp"
#include "weft/plugin.h"

namespace weft::server {
namespace {

using api::Call;
using api::Endpoint;
using api::Response;
using api::Role;
using json = nlohmann::json;

constexpr std::size_t kMaxEnqueue = 10000;
constexpr std::int64_t kMaxId = INT64_MAX;
// True for a plugin action's name as the SDK spells it (weft_action_name).
bool IsPluginAction(const std::string& name) {
  for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1)
    if (name == weft_action_name(bit)) return true;
  return false;
}

// "CREATE CONFIRM ... DELETE", for messages.
std::string PluginActionList() {
  std::string list;
  for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1)
    list += (list.empty() ? "" : " ") + std::string(weft_action_name(bit));
  return list;
}

json ParseStored(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json::object() : v;
}

json TaskJson(const store::TaskRecord& t, bool details) {
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

// server.status's reply, from whichever thread answers it.
Response StatusReply(const Call& call, const DaemonInfo& info, const store::Store& store,
                     const std::map<std::string, std::int64_t>& requests, std::int64_t now, json hosts, json tasks,
                     json retention, const StoreHealth& health) {
  const store::CheckpointStats c = store.checkpoint_stats();
  // The file's size as it is now (a stat); its pages and free pages as the last retention
  // round counted them (the file lags its pages until a checkpoint copies the WAL in).
  if (retention.contains("store") && store.backend() == store::Backend::kSqlite) {
    json& file = retention["store"];
    std::error_code ec;
    const std::uintmax_t bytes = std::filesystem::file_size(store.path(), ec);
    if (!ec) file["file_bytes"] = static_cast<std::int64_t>(bytes);
    file["counted_ms_ago"] = now - retention.value("last_round_at_ms", now);
  }
  json status = {{"version", "0.1.0"},
                 {"protocol", wire::kProtocolVersion},
                 {"pid", info.pid},
                 {"started_at_ms", info.started_at_ms},
                 {"uptime_ms", now - info.started_at_ms},
                 {"data_dir", info.data_dir},
                 {"endpoints", info.endpoints},
                 {"store",
                  {{"path", store.path().string()},
                   {"backend", store.backend() == store::Backend::kPostgres ? "postgres" : "sqlite"},
                   {"schema_version", store.schema_version()},
                   {"wal_pages", c.wal_pages},
                   {"health", health.Json()},
                   {"checkpoints", {{"background", c.background_rounds}, {"by_commits", c.writer_rounds}}}}},
                 {"hosts", std::move(hosts)},
                 {"tasks", std::move(tasks)},
                 {"retention", std::move(retention)},
                 {"requests", requests}};
  if (info.leadership) {
    WEFT_TRY_ASSIGN(leadership, info.leadership());
    status["leadership"] = std::move(leadership);
  }
  // A gateway's own key learns where weftd and its events are (which weftd
  // leads), and nothing about what it holds.
  if (call.principal.role == Role::kGateway) {
    json brief = {{"version", status["version"]}, {"protocol", status["protocol"]}, {"endpoints", status["endpoints"]}};
    if (status.contains("leadership")) brief["leadership"] = std::move(status["leadership"]);
    return Response::Ok(std::move(brief));
  }
  // Where the server keeps its files is for the superadmin only.
  if (call.principal.role != Role::kSuperadmin) {
    status.erase("data_dir");
    status["store"].erase("path");
    status["store"]["health"].erase("last_failure");  // it names the data directory
  }
  return Response::Ok(std::move(status));
}

json HostsJson(std::int64_t registered, std::int64_t live) { return {{"registered", registered}, {"live", live}}; }

json TasksJson(std::int64_t queued, std::int64_t leased, std::int64_t succeeded, std::int64_t failed) {
  return {{"queued", queued}, {"leased", leased}, {"succeeded", succeeded}, {"failed", failed}};
}

std::int64_t LiveHosts(const hosts::HostRegistry& hosts) {
  std::int64_t live = 0;
  for (const auto& [id, h] : hosts.all()) live += hosts.Live(h) ? 1 : 0;
  return live;
}

class ServerOps {
 public:
  ServerOps(const api::Router& router, ServerOpsDeps deps) : router_(router), d_(deps) {}

  Response ServerStatus(const Call& call);
  Response TaskGet(const Call& call);
  Response TaskList(const Call& call);
  Response DebugEnqueue(const Call& call);
  Response OpList(const Call& call);

 private:
  const api::Router& router_;
  ServerOpsDeps d_;
};

Response ServerOps::ServerStatus(const Call& call) {
  const queue::TaskQueue& q = d_.queue;
  return StatusReply(call, d_.info, d_.store, router_.Served(), d_.clock.NowMs(),
                     HostsJson(static_cast<std::int64_t>(d_.hosts.all().size()), LiveHosts(d_.hosts)),
                     TasksJson(q.queued(), q.leased(), q.succeeded(), q.failed()), d_.retention.Json(),
                     d_.store_health);
}

Response ServerOps::TaskGet(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(task_id, jsonf::Int(body, "task_id", "", 1, kMaxId));
  WEFT_TRY_ASSIGN(task, d_.store.GetTask(task_id));
  if (!task || task->tenant != call.principal.tenant)
    return Response::Error(Status::NotFound("task " + std::to_string(task_id) + " does not exist in tenant '" +
                                            call.principal.tenant + "'"));
  json j = TaskJson(*task, true);
  WEFT_TRY_ASSIGN(attempts, d_.store.ListAttempts(task_id));
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

Response ServerOps::TaskList(const Call& call) {
  const json& body = call.request->body;
  WEFT_TRY_ASSIGN(state_name, jsonf::String(body, "state", "", ""));
  std::optional<store::TaskState> state;
  if (!state_name.empty()) {
    store::TaskState s;
    if (!store::ParseTaskState(state_name, &s))
      return Response::Error(Status::Invalid("state must be one of queued, leased, succeeded, failed; got \"" +
                                             state_name + "\""));
    state = s;
  }
  WEFT_TRY_ASSIGN(limit, jsonf::Int(body, "limit", "", 1, 10000, 100));
  WEFT_TRY_ASSIGN(tasks, d_.store.ListTasks(call.principal.tenant, state, limit));
  json list = json::array();
  for (const auto& t : tasks) list.push_back(TaskJson(t, false));
  return Response::Ok({{"tasks", std::move(list)}});
}

Response ServerOps::DebugEnqueue(const Call& call) {
  const json& body = call.request->body;
  auto it = body.find("tasks");
  if (it == body.end() || !it->is_array())
    return Response::Error(Status::Invalid("tasks is required: an array of tasks, each with plugin and action"));
  if (it->size() > kMaxEnqueue)
    return Response::Error(Status::TooLarge("tasks has " + std::to_string(it->size()) +
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
    if (!IsPluginAction(action))
      return Response::Error(
          Status::Invalid(path + ".action must be one of " + PluginActionList() + ", got \"" + action + "\""));
    WEFT_TRY_ASSIGN(node_id, jsonf::String(t, "node_id", path, ""));
    WEFT_TRY_ASSIGN(job_id, jsonf::String(t, "job_id", path, ""));
    WEFT_TRY_ASSIGN(cluster_id, jsonf::String(t, "cluster_id", path, ""));
    WEFT_TRY_ASSIGN(max_attempts,
                    jsonf::Int(t, "max_attempts", path, 1, 1000, d_.config.tasks.default_max_attempts));
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
  WEFT_TRY_ASSIGN(ids, d_.queue.Enqueue(call.principal.tenant, std::move(tasks)));
  return Response::Ok({{"task_ids", ids}});
}

// Every op and whether it only reads: a gateway in front of weftd asks once, so
// it lets a browser GET exactly the ops weftd answers as reads.
Response ServerOps::OpList(const Call&) {
  json ops = json::array();
  for (const std::string& op : router_.KnownOps()) ops.push_back({{"op", op}, {"reads", router_.ReadOnly(op)}});
  return Response::Ok({{"ops", std::move(ops)}});
}

}  // namespace

void StatusCounts::Take(const queue::TaskQueue& queue, const hosts::HostRegistry& hosts) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  hosts_registered.store(static_cast<std::int64_t>(hosts.all().size()), kRelaxed);
  hosts_live.store(LiveHosts(hosts), kRelaxed);
  queued.store(queue.queued(), kRelaxed);
  leased.store(queue.leased(), kRelaxed);
  succeeded.store(queue.succeeded(), kRelaxed);
  failed.store(queue.failed(), kRelaxed);
}

void RegisterStatusRead(api::Router& router, const api::Router& reactor_router, const StatusCounts& counts,
                        const store::Store& store, const Clock& clock, const DaemonInfo& info,
                        const Retention& retention, const StoreHealth& store_health) {
  const std::set<Role> anyone = {Role::kHost, Role::kUser, Role::kAdmin, Role::kSuperadmin};
  router.Add(
      "server.status", anyone, {Endpoint::kApi},
      [&router, &reactor_router, &counts, &store, &clock, &info, &retention, &store_health](const Call& call) {
        constexpr auto kRelaxed = std::memory_order_relaxed;
        std::map<std::string, std::int64_t> requests = reactor_router.Served();
        for (const auto& [op, n] : router.Served()) requests[op] += n;
        return StatusReply(call, info, store, requests, clock.NowMs(),
                           HostsJson(counts.hosts_registered.load(kRelaxed), counts.hosts_live.load(kRelaxed)),
                           TasksJson(counts.queued.load(kRelaxed), counts.leased.load(kRelaxed),
                                     counts.succeeded.load(kRelaxed), counts.failed.load(kRelaxed)),
                           retention.Json(), store_health);
      },
      api::Effect::kReads, {});
}

void RegisterServerOps(api::Router& router, ServerOpsDeps deps) {
  // Owned by the handlers, which share it; it lives as long as the router.
  auto impl = std::make_shared<ServerOps>(router, deps);
  const std::set<Role> anyone = {Role::kHost, Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  const std::set<Endpoint> both = {Endpoint::kApi, Endpoint::kProvisioner};
  auto bind = [impl](Response (ServerOps::*fn)(const Call&)) {
    return [impl, fn](const Call& c) { return ((*impl).*fn)(c); };
  };
  std::set<Role> anyone_or_gateway = anyone;
  anyone_or_gateway.insert(Role::kGateway);
  router.Add("server.status", anyone_or_gateway, both, bind(&ServerOps::ServerStatus), api::Effect::kReads, {});
  router.Add("server.ops", anyone_or_gateway, api, bind(&ServerOps::OpList), api::Effect::kReads, {});
  router.Add("task.get", admins, api, bind(&ServerOps::TaskGet), api::Effect::kReads, {"task_id"});
  router.Add("task.list", admins, api, bind(&ServerOps::TaskList), api::Effect::kReads, {"state", "limit"});
  router.Add("debug.enqueue", admins, api, bind(&ServerOps::DebugEnqueue), api::Effect::kChanges, {"tasks"});
}

}  // namespace weft::server
