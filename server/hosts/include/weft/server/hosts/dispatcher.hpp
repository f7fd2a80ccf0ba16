// weft::hosts::Dispatcher: hands a host the next task it may run, leased and
// as the plugin sees it: the queue picks the task among the plugin types the
// host registered, then each take decorator adds what the plugin needs.
//
// Used by task.take and task.finish (server/hosts/host_ops.hpp) and by the
// reactor's held takes. Borrows the HostRegistry and the TaskQueue; never
// opens a transaction. Not thread-safe: runs on the reactor thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/status.hpp"

namespace weft::hosts {

class Dispatcher {
 public:
  Dispatcher(HostRegistry& hosts, queue::TaskQueue& queue) : hosts_(hosts), queue_(queue) {}

  // Something that adds to a task as it is handed out (the job engine: node facts,
  // expanded config; resources: the versions the plugin needs; auth: the sealed
  // values opened for that task). Decorators run in the order added, inside the
  // take's transaction; an error fails the attempt.
  using TakeDecorator = std::function<Status(const store::TaskRecord& record, json& task)>;
  void AddTakeDecorator(TakeDecorator decorator) { decorators_.push_back(std::move(decorator)); }

  // The task for `host_id`, leased, as the plugin sees it; null when none is ready.
  // A non-empty `tenant` (the take's "tenant") limits it to that tenant's tasks.
  [[nodiscard]] Result<json> TryTake(const std::string& host_id, const std::string& tenant);
  // Whether a take of `host_id` for `tenant` could be served now (cheap, no store access).
  bool CanServe(const std::string& host_id, const std::string& tenant) const;

 private:
  HostRegistry& hosts_;
  queue::TaskQueue& queue_;
  std::vector<TakeDecorator> decorators_;
};

}  // namespace weft::hosts
