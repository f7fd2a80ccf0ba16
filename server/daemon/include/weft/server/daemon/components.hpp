// weft::server::Components: weftd's composition root. It builds, in this one
// place, every component the daemon runs on its reactor thread (the TaskQueue,
// the JobEngine, the host registry and dispatcher, auth's Registry, the
// resource store, the Router) over the Store, wires them to each other (the
// queue's end observer, the take decorators, the audit recorder, the worker
// quotas) and registers each op group with only the dependencies it needs.
//
// The reactor (daemon.cpp) owns the sockets and the loop and drives these
// components; the fuzz targets build the same components without sockets.
// Borrows the Config, the Store and the Clock, which must outlive it.
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "weft/server/api/router.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/auth/logins.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/server_ops.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/jobs/job_engine.hpp"
#include "weft/server/metrics/server_metrics.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/resources/database_resource_store.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/server/store/store.hpp"
#include "weft/server/daemon/retention.hpp"
#include "weft/server/daemon/store_health.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/event.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

class Components {
 public:
  Components(const Config& config, store::Store& store, const Clock& clock);

  // Opens the resource store (the SQL store's or <data_dir>/resources, [store] resources) and the secrets key,
  // registers every op group but the CurveZMQ ones, and loads everything from
  // the store in one transaction (which may resume jobs).
  [[nodiscard]] Status Start();
  // Start in two steps, for a weftd that may be a follower (docs/failover.md):
  // Prepare opens the resource store and registers the ops without writing
  // anything; Resume loads everything from the store in one transaction (which
  // may resume jobs), at start-up or when this weftd takes over as leader.
  [[nodiscard]] Status Prepare();
  [[nodiscard]] Status Resume();
  // Resources kept in the store: imports the files of <data_dir>/resources the
  // store lacks (a weftd that kept them as files before), logging what it did.
  // Resume does it first; a failure is logged, not fatal.
  void ImportResourceFiles();
  // Resources kept as files: the reverse, at Prepare (database_resource_store.hpp,
  // ExportFiles); a refusal stops weftd, saying what is there and what to do.
  [[nodiscard]] Status ExportResourceRows(resources::FileResourceStore& files);
  // Security on: enrollment, host accept/revoke, users and keys; tokens name `server_key`.
  void AddSecurityOps(const std::string& server_key);

  // Rebuilds the in-memory state from the store, in the caller's transaction.
  [[nodiscard]] Status Load();
  // After a failed commit: forgets unpublished host events and rebuilds the in-memory state.
  [[nodiscard]] Status Reset();
  // Silent hosts give their tasks back; clusters whose lease ran out get delete jobs.
  [[nodiscard]] Status Janitor();
  // What ended long ago goes, a batch per turn (retention.hpp).
  Retention& retention() { return retention_; }
  const Retention& retention() const { return retention_; }
  // Whether commits land (GroupCommit tells it; server.status reports it).
  StoreHealth& store_health() { return store_health_; }
  const StoreHealth& store_health() const { return store_health_; }
  const Clock& clock() const { return clock_; }

  // Whether anyone listens: when not, task transitions and progress are not
  // even recorded as events (host and job events, which are rare, still are).
  void set_events_wanted(bool wanted);
  // The transitions since the last call, in the order: hosts, tasks, jobs and clusters.
  std::vector<Event> DrainEvents();
  // Forgets pending events without building them (nobody is subscribed).
  void DiscardEvents();

  void set_info(DaemonInfo info) { info_ = std::move(info); }
  const DaemonInfo& info() const { return info_; }

  // The metrics (docs/metrics.md); null with [metrics] enabled = false.
  ServerMetrics* metrics() { return metrics_.get(); }
  // After a successful commit: counts what it made final (jobs that ended, what retention removed).
  void Committed();
  // Publishes what the reactor owns (tasks, jobs, hosts, clusters, the store)
  // to the metrics when a scrape wants it; reads the store outside any transaction.
  void RefreshMetrics();

  api::Router& router() { return router_; }
  const api::Router& router() const { return router_; }
  queue::TaskQueue& queue() { return queue_; }
  const queue::TaskQueue& queue() const { return queue_; }
  hosts::Dispatcher& dispatcher() { return dispatcher_; }
  const hosts::HostRegistry& hosts() const { return hosts_; }
  auth::Registry& registry() { return registry_; }
  const auth::Registry& registry() const { return registry_; }
  auth::KeySnapshot& keys() { return keys_; }
  auth::Logins& logins() { return logins_; }

 private:
  // Every op group but the CurveZMQ ones, and the wiring between components.
  [[nodiscard]] Status Wire();

  const Config& config_;
  store::Store& store_;
  const Clock& clock_;
  std::unique_ptr<ServerMetrics> metrics_;  // before the components that point into it
  queue::TaskQueue queue_;
  jobs::JobEngine engine_;
  hosts::HostRegistry hosts_;
  hosts::Dispatcher dispatcher_;
  auth::KeySnapshot keys_;
  auth::Registry registry_;
  auth::Logins logins_;
  std::unique_ptr<resources::ResourceStore> resources_;  // opened by Prepare
  resources::DatabaseResourceStore* resources_in_store_ = nullptr;  // resources_, when it keeps them in the store
  api::Router router_;
  DaemonInfo info_;
  Retention retention_;
  StoreHealth store_health_;
};

}  // namespace weft::server
