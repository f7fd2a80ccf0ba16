// weft::hosts::Dispatcher: hands a host the next task it may run, leased and
// as the plugin sees it: the queue picks the task among the plugin types the
// host registered, then each take decorator adds what the plugin needs.
//
// Used by task.take and task.finish (server/hosts/host_ops.hpp) and by the
// reactor's held takes. Borrows the HostRegistry and the TaskQueue; never
// opens a transaction. Not thread-safe: runs on the reactor thread.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/queue/task_texts.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/status.hpp"

namespace weft::hosts {

// A task handed out, as the plugin sees it.
struct Taken {
  std::int64_t task_id = 0;  // 0: no task was ready
  std::int64_t attempt = 0;
  std::string json;  // the task object, JSON text
};

// Members a take decorator gives as JSON text (see task_texts.hpp). A name
// in the tree too is written from the tree.
using TaskTexts = queue::TaskTexts;

// The reply to a take (task.take, or a finish's take): {"task":{...}} or {"task":null}.
api::Response TakeReply(Taken taken);

class Dispatcher {
 public:
  Dispatcher(HostRegistry& hosts, queue::TaskQueue& queue) : hosts_(hosts), queue_(queue) {}

  // Something that adds to a task as it is handed out (the job engine: node facts,
  // expanded config; resources: the versions the plugin needs; auth: the sealed
  // values opened for that task). Decorators run in the order added, inside the
  // take's transaction; an error fails the attempt. `task` holds the payload's
  // members and what earlier decorators added; the members every task has
  // (task_id, attempt, tenant, plugin, action, job_id, cluster_id, node_id,
  // idempotency_key, lease_ms) are written beside them, from `record`.
  using TakeDecorator = std::function<Status(const store::TaskRecord& record, json& task)>;
  void AddTakeDecorator(TakeDecorator decorator);
  // A decorator that may also hand over members as JSON text it made once
  // and shares between many tasks (`texts`, see TaskTexts): the job engine's.
  using TextDecorator = std::function<Status(const store::TaskRecord& record, json& task, TaskTexts& texts)>;
  void AddTakeDecorator(TextDecorator decorator) { decorators_.push_back(std::move(decorator)); }

  // The task for `host_id`, leased, as the plugin sees it; null when none is ready or the
  // host is draining (weft host drain).
  // A non-empty `tenant` (the take's "tenant") limits it to that tenant's tasks.
  // A non-empty `runner` (the take's "runner") is remembered as the attempt's
  // taker until the host acknowledges the attempt (see RunnerTakes).
  [[nodiscard]] Result<Taken> TryTake(const std::string& host_id, const std::string& tenant,
                                      const std::string& runner = {});

  // A runner is one thread of a host that runs one task at a time and names
  // itself in its takes. Its take says it holds no task: an attempt handed to
  // it that it never acknowledged (no heartbeat, progress or finish named it)
  // never reached it (the reply was lost, or came after it gave up waiting),
  // and ends now as undelivered instead of when its lease runs out. Also tells
  // the listener, so that a take of that runner still held is let go.
  [[nodiscard]] Status RunnerTakes(const std::string& host_id, const std::string& runner);
  // A runner that takes no more (its worker was retired, host.heartbeat's
  // retired_runners): a take of it still held is let go (answered CONFLICT),
  // and nothing else changes.
  void RunnerRetired(const std::string& host_id, const std::string& runner) {
    if (runner_listener_) runner_listener_(host_id, runner);
  }
  // The host named this attempt (heartbeat, progress, finish): it reached it.
  void Acknowledged(std::int64_t task_id, std::int64_t attempt);
  // The host left or started again: its runners' attempts are no longer watched.
  void ForgetHost(const std::string& host_id);
  // A new process registered under `host_id`, as `incarnation`: ForgetHost, and
  // tells the listener, so that a take the earlier process left held is let go
  // (it must not get a task: that process is gone, or stops once it hears).
  void ProcessReplaced(const std::string& host_id, const std::string& incarnation) {
    ForgetHost(host_id);
    if (replaced_listener_) replaced_listener_(host_id, incarnation);
  }
  // The queue was rebuilt from the store (a failed commit): an attempt
  // remembered here may not exist, and its number may go to another taker.
  void ForgetRunners() {
    unacknowledged_.clear();
    runner_of_.clear();
  }
  using RunnerListener = std::function<void(const std::string& host_id, const std::string& runner)>;
  void set_runner_listener(RunnerListener listener) { runner_listener_ = std::move(listener); }
  using ReplacedListener = std::function<void(const std::string& host_id, const std::string& incarnation)>;
  void set_replaced_listener(ReplacedListener listener) { replaced_listener_ = std::move(listener); }
  // The most a task handed out may be as JSON text (0: no bound): a larger one
  // could not reach its host, so its attempt fails, for good, instead.
  void set_max_task_bytes(std::size_t bytes) { max_task_bytes_ = bytes; }
  // Whether a take of `host_id` for `tenant` could be served now (cheap, no store access).
  bool CanServe(const std::string& host_id, const std::string& tenant) const;

 private:
  void ForgetTaker(std::int64_t task_id, const std::pair<std::string, std::string>& taker);

  HostRegistry& hosts_;
  queue::TaskQueue& queue_;
  std::vector<TextDecorator> decorators_;
  // Attempts handed to a runner and not acknowledged yet: (host, runner) ->
  // (task, attempt), and task -> (host, runner). At most one per runner.
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> unacknowledged_;
  std::unordered_map<std::int64_t, std::pair<std::string, std::string>> runner_of_;
  RunnerListener runner_listener_;
  ReplacedListener replaced_listener_;
  std::size_t max_task_bytes_ = 0;
  store::TaskRecord taking_;  // the task TryTake is handing out (kept: its strings' room is reused)
};

}  // namespace weft::hosts
