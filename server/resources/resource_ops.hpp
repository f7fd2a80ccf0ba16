// The resource ops of docs/protocol.md ("Resources"): resource.upload, .list,
// .stage, .recall, .sync and .delete on the api endpoint, resource.fetch and
// .active on the provisioner endpoint, and the take decorator that pins the
// active versions of a task's plugin type into the task as it is handed out.
//
// The handlers borrow the ResourceStore (it must outlive the Ops), keep no
// state of their own and run on weftd's reactor thread. Not thread-safe.
#pragma once

#include "server/api/ops.hpp"
#include "server/resources/resource_store.hpp"
#include "weft/common/wire.hpp"

namespace weft::resources {

// The most a resource.fetch reply carries in its payload frame.
inline constexpr std::int64_t kMaxFetchChunkBytes = 8 << 20;

// Adds the resource ops to `ops`' router and its take decorator. `limits` are
// the server's wire limits: a fetch chunk never exceeds one payload frame.
void RegisterResourceOps(api::Ops& ops, ResourceStore& store, const wire::Limits& limits);

}  // namespace weft::resources
