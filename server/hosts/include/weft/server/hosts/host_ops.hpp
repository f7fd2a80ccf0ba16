// The host ops of docs/protocol.md: what provisioner hosts send
// (host.register, host.heartbeat, host.leave, task.take, task.finish,
// task.progress) and what people read about them (host.list, plugin.list).
//
// The handlers borrow what HostOpsDeps names (all must outlive the Router),
// never open a transaction, and run on the reactor thread. Not thread-safe.
#pragma once

#include <string_view>

#include "weft/server/api/router.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::hosts {

struct HostOpsDeps {
  HostRegistry& hosts;
  Dispatcher& dispatcher;
  queue::TaskQueue& queue;
  store::Store& store;
  const Clock& clock;
  const server::Config& config;
};

void RegisterHostOps(api::Router& router, HostOpsDeps deps);

// The host ops whose request bodies the transport keeps as text
// (wire::DecodeRequest's text_body_ops): their handlers read the few fields
// they need from it, not from a tree, when every check passes.
inline constexpr std::string_view kTextBodyOps[] = {"task.finish", "task.take"};

}  // namespace weft::hosts
