// weftd's own ops (docs/protocol.md): server.status, and the task ops that
// look into the queue or fill it directly: task.get, task.list, debug.enqueue.
//
// The handlers borrow what ServerOpsDeps names (all must outlive the Router),
// never open a transaction, and run on the reactor thread. Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/retention.hpp"
#include "weft/server/daemon/store_health.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::server {

// Facts about the running daemon that server.status reports.
struct DaemonInfo {
  std::int64_t pid = 0;
  std::int64_t started_at_ms = 0;
  std::string data_dir;
  nlohmann::json endpoints = nlohmann::json::object();
  // With several weftd on one database: the leader, the followers and the epoch (docs/failover.md).
  std::function<Result<nlohmann::json>()> leadership = {};
};

// The task and host counts server.status reports, as the reactor copies them
// after every turn (Take), for a thread that answers server.status without
// touching the queue or the host registry (weftd's api front).
struct StatusCounts {
  std::atomic<std::int64_t> hosts_registered{0};
  std::atomic<std::int64_t> hosts_live{0};
  std::atomic<std::int64_t> queued{0};
  std::atomic<std::int64_t> leased{0};
  std::atomic<std::int64_t> succeeded{0};
  std::atomic<std::int64_t> failed{0};

  // On the reactor thread.
  void Take(const queue::TaskQueue& queue, const hosts::HostRegistry& hosts);
};

struct ServerOpsDeps {
  store::Store& store;
  queue::TaskQueue& queue;
  const hosts::HostRegistry& hosts;
  const Clock& clock;
  const Config& config;
  const DaemonInfo& info;  // filled in once the endpoints are bound
  const Retention& retention;
  const StoreHealth& store_health;
};

// Adds server.status (its request counts are `router`'s), task.get, task.list and debug.enqueue.
void RegisterServerOps(api::Router& router, ServerOpsDeps deps);

// Adds server.status to `router`, a router of another thread than the
// reactor's: its counts are `counts`, and its request counts those of
// `reactor_router` and `router` together. Only on the api endpoint.
void RegisterStatusRead(api::Router& router, const api::Router& reactor_router, const StatusCounts& counts,
                        const store::Store& store, const Clock& clock, const DaemonInfo& info,
                        const Retention& retention, const StoreHealth& store_health);

}  // namespace weft::server
