// weft::api::Ops: the handlers of every op in docs/protocol.md, and the
// in-memory view of registered hosts they share.
//
// Ops borrows the Store, the TaskQueue and the Clock (all must outlive it)
// and never opens a transaction itself: weftd's reactor wraps a batch of
// calls in one. Transitions worth publishing pile up until DrainEvents(),
// which the reactor calls only after a successful commit.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api/router.hpp"
#include "server/config/config.hpp"
#include "server/jobs/job_engine.hpp"
#include "server/queue/task_queue.hpp"
#include "server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::api {

// A host id: 1 to 128 of A-Z a-z 0-9 _ . -
bool ValidHostId(const std::string& id);

// Facts about the running daemon that server.status reports.
struct DaemonInfo {
  std::int64_t pid = 0;
  std::int64_t started_at_ms = 0;
  std::string data_dir;
  json endpoints = json::object();
};

struct Event {
  std::string topic;
  json payload;
};

class Ops {
 public:
  Ops(store::Store& store, queue::TaskQueue& queue, const Clock& clock, const server::Config& config);

  // Loads the registered hosts from the store.
  [[nodiscard]] Status Load();
  void set_info(DaemonInfo info) { info_ = std::move(info); }
  const Router& router() const { return router_; }
  // For components that add their own ops (resources: server/resources/resource_ops.hpp).
  Router& router() { return router_; }

  // The task for a held take of `host_id`, leased, as the plugin sees it; null when none is ready.
  // A non-empty `tenant` (the take's "tenant") limits it to that tenant's tasks.
  [[nodiscard]] Result<json> TryTake(const std::string& host_id, const std::string& tenant);
  // Something that adds to a task as it is handed out (the job engine: node facts,
  // expanded config; resources: the versions the plugin needs). Decorators run in
  // the order added, inside the take's transaction; an error fails the take.
  using TakeDecorator = std::function<Status(const store::TaskRecord& record, json& task)>;
  void AddTakeDecorator(TakeDecorator decorator) { decorators_.push_back(std::move(decorator)); }
  // Whether a held take of `host_id` for `tenant` could be served now (cheap, no store access).
  bool CanServe(const std::string& host_id, const std::string& tenant) const;
  // Publishes "silent" for hosts that stopped reporting and gives their tasks back
  // to the queue; starts delete jobs for clusters whose lease ran out (the janitor).
  [[nodiscard]] Status Janitor();
  jobs::JobEngine& engine() { return engine_; }
  std::vector<Event> DrainEvents();
  // Forgets pending events without building them (nobody is subscribed).
  void DiscardEvents();
  // The registered hosts that run a host-wide plugin (from the operator's
  // plugin directories) of `type`; a tenant may not take that type for a Lua plugin.
  std::vector<std::string> HostsWithHostWidePlugin(const std::string& type) const;
  // The fields a registered plugin of `type` declares sensitive.
  std::set<std::string> SensitiveFields(const std::string& type) const;
  // Each tenant's max_workers quota, for the worker split (server/auth sets it).
  using WorkerCaps = std::function<std::map<std::string, std::int64_t>()>;
  void set_worker_caps(WorkerCaps caps) { worker_caps_ = std::move(caps); }
  // Whether weftd heard from the host within hosts.silent_after_ms.
  bool HostLive(const std::string& host_id) const;
  // A revoked host: its tasks go back to the queue at once and it is forgotten.
  [[nodiscard]] Status ForgetHost(const std::string& host_id, const std::string& reason);
  // Whether anyone listens: when not, task transitions and progress are not
  // even recorded as events (host and job events, which are rare, still are).
  void set_events_wanted(bool wanted) {
    events_wanted_ = wanted;
    queue_.set_events_wanted(wanted);
  }
  // After a failed commit: forget unpublished events and reload hosts.
  [[nodiscard]] Status Reset();
  // Whether `op` only reads (changes nothing in the store and nothing another
  // request could observe). weftd answers such api requests ahead of the
  // batch's writes, from committed state, without waiting for the commit.
  static bool IsReadOnly(std::string_view op);

 private:
  struct Host {
    store::HostRecord record;
    queue::HostPlugins plugins;  // plugin types: host-wide, and tenants' own
    json descriptors = json::array();
    bool silent = false;
    // Said goodbye (host.leave): not live until it registers again.
    bool left = false;
    // The process that registered last (host.register's `incarnation`); kept in memory only.
    std::string incarnation;
    json reported_workers = json::array();  // what the host says it runs: [{tenant, threads, pid}]
  };

  json StoreStatus() const;
  Response ServerStatus(const Call& call);
  Response HostList(const Call& call);
  Response PluginList(const Call& call);
  Response TaskGet(const Call& call);
  Response TaskList(const Call& call);
  Response DebugEnqueue(const Call& call);
  Response HostLeave(const Call& call);
  Response HostRegister(const Call& call);
  Response HostHeartbeat(const Call& call);
  Response TaskTake(const Call& call);
  Response TaskFinish(const Call& call);
  Response TaskProgress(const Call& call);

  struct TakeRequest {
    std::int64_t wait_ms = 0;
    std::string tenant;
  };
  Result<TakeRequest> ParseTake(const json& body, const std::string& path);
  // The next task for `host_id`, or a held response that the reactor answers later.
  Response TakeOrHold(const std::string& host_id, const std::string& tenant, std::int64_t wait_ms);
  Result<Host*> KnownHost(const json& body);
  void Seen(Host& host);
  bool Live(const Host& host) const;
  // The plugin types live hosts run for tasks of `tenant`.
  std::set<std::string> LivePluginTypes(const std::string& tenant) const;
  void HostEvent(const std::string& host_id, const char* what);
  static json TaskJson(const store::TaskRecord& t, bool details);
  // The plugin types of `host` that tasks of `tenant` may use, sorted.
  static std::set<std::string> TypesFor(const Host& host, const std::string& tenant);
  // The worker split the server wants on `host_id`: [{"tenant" ("" = any), "threads"}].
  json WorkersFor(const std::string& host_id);
  // The tenants with tasks now or within the last minute: they share the split,
  // and hosts sync their resources (Lua plugins) even when the split names none.
  std::set<std::string> ActiveTenants();

  store::Store& store_;
  queue::TaskQueue& queue_;
  const Clock& clock_;
  const server::Config& config_;
  jobs::JobEngine engine_;
  DaemonInfo info_;
  Router router_;
  std::map<std::string, Host> hosts_;
  std::vector<Event> host_events_;
  bool events_wanted_ = true;
  std::vector<TakeDecorator> decorators_;
  // When each tenant last had a live task: a tenant keeps its workers for a
  // minute after its last task, so that the split does not flap between jobs.
  std::map<std::string, std::int64_t> tenant_seen_ms_;
  WorkerCaps worker_caps_;
};

}  // namespace weft::api
