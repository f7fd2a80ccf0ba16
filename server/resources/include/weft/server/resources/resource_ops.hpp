// The resource ops of docs/protocol.md ("Resources"): resource.upload, .list,
// .stage, .recall, .sync and .delete on the api endpoint, resource.fetch and
// .active on the provisioner endpoint, and the take decorator that pins the
// active versions of a task's plugin type into the task as it is handed out.
//
// The handlers borrow what ResourceOpsDeps names (all must outlive the Router), keep no
// state of their own and run on weftd's reactor thread. Not thread-safe.
#pragma once

#include "weft/server/api/router.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/common/wire.hpp"

namespace weft::resources {

// The most a resource.fetch reply carries in its payload frame.
inline constexpr std::int64_t kMaxFetchChunkBytes = 8 << 20;

struct ResourceOpsDeps {
  ResourceStore& store;
  const hosts::HostRegistry& hosts;  // which hosts run a plugin type host-wide
  hosts::Dispatcher& dispatcher;     // gets the take decorator
  // The server's wire limits: a fetch chunk never exceeds one payload frame.
  const wire::Limits& limits;
};

// Adds the resource ops to `router` and their take decorator to the dispatcher.
void RegisterResourceOps(api::Router& router, ResourceOpsDeps deps);

}  // namespace weft::resources
