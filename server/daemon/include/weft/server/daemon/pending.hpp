// The requests weftd's reactor holds between receiving and answering them.
// Not thread-safe: reactor thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "weft/server/api/router.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {

// A request whose reply waits for the batch's commit.
struct Pending {
  api::Endpoint endpoint = api::Endpoint::kApi;
  wire::Frames envelope;
  std::string id;
  api::Response response;
  std::optional<queue::AttemptRef> delivers;  // a take's reply carrying a task
  std::string key;      // the connection's CurveZMQ key (ZAP User-Id)
  std::string address;  // the peer's address: for host requests, and api requests' audit entries
};

// A request taken off a ROUTER and decoded, not handled yet.
struct Inbound {
  Pending pending;                       // endpoint, envelope, id; a malformed request's error
  std::optional<wire::Request> request;  // nullopt: malformed, pending.response says why
  std::size_t bytes = 0;                 // the frames' size, for the connection's budget
  std::chrono::steady_clock::time_point received{};  // when the reactor took it off its socket
};

}  // namespace weft::server
