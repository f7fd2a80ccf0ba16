// weftd's own ops (docs/protocol.md): server.status, and the task ops that
// look into the queue or fill it directly: task.get, task.list, debug.enqueue.
//
// The handlers borrow what ServerOpsDeps names (all must outlive the Router),
// never open a transaction, and run on the reactor thread. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/config/config.hpp"
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

struct ServerOpsDeps {
  store::Store& store;
  queue::TaskQueue& queue;
  const hosts::HostRegistry& hosts;
  const Clock& clock;
  const Config& config;
  const DaemonInfo& info;  // filled in once the endpoints are bound
};

// Adds server.status (its request counts are `router`'s), task.get, task.list and debug.enqueue.
void RegisterServerOps(api::Router& router, ServerOpsDeps deps);

}  // namespace weft::server
