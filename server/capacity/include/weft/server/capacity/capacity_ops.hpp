// server.capacity: how many worker threads and hosts each tenant needs to keep
// its queue wait under a target, from the load measured over a window
// (advice.hpp; docs/capacity.md, docs/protocol.md).
//
// The handler borrows what CapacityOpsDeps names (all must outlive the
// Router), only reads, and runs on the reactor thread. Not thread-safe.
#pragma once

#include "weft/server/api/router.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::capacity {

struct CapacityOpsDeps {
  store::Store& store;
  hosts::HostRegistry& hosts;
  const Clock& clock;
};

void RegisterCapacityOps(api::Router& router, CapacityOpsDeps deps);

}  // namespace weft::capacity
