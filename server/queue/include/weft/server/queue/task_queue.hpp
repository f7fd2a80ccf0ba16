// weft::queue::TaskQueue: the durable task queue.
//
// The store holds every task; the queue keeps an in-memory index of the tasks
// that are ready (per tenant, per plugin type, oldest first) and of the
// leases that run, rebuilt from the store by Load(). Every operation writes
// through to the store; the caller owns the transaction, so that many
// operations share one commit. If that commit fails the caller rolls back and
// calls Load() again, which brings the index back in line with the store.
//
// Rules it enforces:
//  * a host gets only tasks of plugin types it registered;
//  * tenants with ready tasks are served round-robin, each tenant oldest first;
//    a take that names a tenant gets only that tenant's tasks (and leaves the
//    round-robin cursor alone);
//  * taking a task starts attempt+1 and a lease of `lease_ms`, renewed by
//    Renew()/Progress(); ExpireDue() puts a task whose lease ran out back on
//    the queue, or fails it once it used `max_attempts` attempts;
//  * Load() gives every leased task at least a full lease from the load, so
//    after a weftd restart its host can heartbeat before it is handed out again;
//  * a finish must name the current attempt and the holding host (fencing);
//    repeating the accepted finish is answered ok again;
//  * a task may be queued with a not-before time (a retry's backoff): it
//    becomes ready when that time comes (ExpireDue);
//  * tasks a job engine holds back (state waiting) are not in the index until
//    MakeReady(); Cancel() takes a task out for good.
// Every task that ends (succeeded, or failed for good) is reported to the
// observer, inside the same call, so that the job engine's reaction shares
// the caller's transaction.
//
// Not thread-safe: owned by weftd's reactor thread, like the Store and the
// Clock it borrows (both must outlive it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/server/metrics/server_metrics.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/status.hpp"

namespace weft::queue {

using store::TaskRecord;
using store::TaskState;

// The plugin types a host runs. Its host-wide plugins (the operator's plugin
// directories) serve every tenant's tasks; a tenant's own plugins (Lua plugins
// from that tenant's resources) serve that tenant's tasks only, so one tenant
// can never have its tasks run by another tenant's code of the same type name.
struct HostPlugins {
  std::set<std::string> shared;
  std::map<std::string, std::set<std::string>> by_tenant;  // tenant -> its plugin types

  bool empty() const { return shared.empty() && by_tenant.empty(); }
  // Whether a task of `tenant` and `type` may run there.
  bool Runs(const std::string& tenant, const std::string& type) const;
};

struct QueueOptions {
  std::int64_t lease_ms = 30000;
};

struct NewTask {
  std::string plugin;
  std::string action;
  std::string job_id;
  std::string cluster_id;
  std::string node_id;
  std::int64_t max_attempts = 3;
  std::string payload_json = "{}";
  std::string task_key;
  std::string service;
  std::string after_json = "[]";
  bool waiting = false;  // held back until MakeReady(); not in the index
};

// The most a finish's result may be, as JSON text: a result over it fails the
// attempt (for good: the same run returns the same result). A node's merged
// results have their own bound (the job engine's ResultCheck), so that a task
// of the node, which carries them once, fits in the reply that hands it out.
inline constexpr std::size_t kMaxResultBytes = 256 * 1024;

// A finish's codes that say another attempt cannot help: the task or its
// fields are not acceptable (INVALID), the plugin lacks the action
// (UNSUPPORTED), the result was too large to send (TOO_LARGE, from weft-host).
bool RetryCannotHelp(const std::string& code);

// A task that ended: succeeded, or failed with no attempt left.
struct Ended {
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
  bool succeeded = false;
  std::string message;
  std::string result_json;  // "{}" unless a finish sent one
  // A failure another attempt cannot change (RetryCannotHelp, a result over
  // a limit, a task too large to hand out): its job fails it at once.
  bool final = false;
  // An attempt its job cancelled while it ran (Cancel), now over: its host
  // stopped it, or its lease ran out. The task is cancelled (a success is kept as one).
  bool cancelled = false;
};
using EndObserver = std::function<Status(const Ended&)>;
// Whether a succeeded finish's result may be kept: an error (whose message
// names the task, the size and the limit) fails the attempt for good instead.
using ResultCheck = std::function<Status(std::int64_t task_id, const std::string& result_json)>;

// A transition worth publishing on the events endpoint.
struct TaskEvent {
  std::string tenant;
  std::int64_t task_id = 0;
  TaskState state = TaskState::kQueued;
  std::int64_t attempt = 0;
  std::string host_id;
  std::string plugin;
  std::string action;
  std::string message;
  std::int64_t at_ms = 0;
  std::string cluster_id;
};

// Why a finish or progress was refused with kConflict.
struct Conflict {
  std::int64_t current_attempt = 0;
  TaskState state = TaskState::kQueued;
  std::string host_id;
};

struct AttemptRef {
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
};

struct RenewOutcome {
  std::int64_t renewed = 0;
  std::vector<AttemptRef> stale;
};

struct FinishRequest {
  std::string host_id;
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
  bool succeeded = true;
  std::string message;
  std::string result_json = "{}";
  std::string stdout_tail;
  std::string stderr_tail;
  std::string code;  // a failure's plugin error code (INVALID, ...), when the host sent one
  bool final = false;  // a failure another attempt cannot change, whatever its code
};

class TaskQueue {
 public:
  TaskQueue(store::Store& store, const Clock& clock, QueueOptions options);

  // (Re)builds the in-memory index from the store.
  [[nodiscard]] Status Load();

  [[nodiscard]] Result<std::vector<std::int64_t>> Enqueue(const std::string& tenant, std::vector<NewTask> tasks);
  // The next task for a host that runs `plugins`, leased to it; nullopt when none is ready.
  // A non-empty `tenant` limits the take to that tenant's tasks; empty means any tenant.
  // The record is the task as leased (identity, payload, attempt, lease); it
  // does not carry an earlier attempt's output (message, result, stdout, stderr).
  [[nodiscard]] Result<std::optional<TaskRecord>> Take(const std::string& host_id, const HostPlugins& plugins,
                                                       const std::string& tenant = {});
  // The same into `*out` (true: a task was taken), every member written:
  // a record kept from take to take reuses its strings' room, and is neither
  // moved nor freed per take.
  [[nodiscard]] Result<bool> Take(const std::string& host_id, const HostPlugins& plugins, const std::string& tenant,
                                  TaskRecord* out);
  // The same for a host with host-wide plugins only.
  [[nodiscard]] Result<std::optional<TaskRecord>> Take(const std::string& host_id,
                                                       const std::set<std::string>& plugins,
                                                       const std::string& tenant = {}) {
    return Take(host_id, HostPlugins{plugins, {}}, tenant);
  }
  // kConflict fills *conflict; kNotFound when the task does not exist.
  [[nodiscard]] Status Finish(const FinishRequest& finish, Conflict* conflict);
  [[nodiscard]] Result<RenewOutcome> Renew(const std::string& host_id, const std::vector<AttemptRef>& in_flight);
  [[nodiscard]] Status Progress(const std::string& host_id, const AttemptRef& ref, Conflict* conflict);
  // Ends every lease that ran out by now, and readies tasks whose not-before time came.
  // Past `stop_at` it ends no more leases (at least one): the rest stay due for the next call.
  [[nodiscard]] Status ExpireDue(
      std::chrono::steady_clock::time_point stop_at = std::chrono::steady_clock::time_point::max());
  // A waiting task becomes ready.
  [[nodiscard]] Status MakeReady(std::int64_t task_id);
  // A task that failed (for now) is queued again, to be taken no earlier than `not_before_ms`.
  [[nodiscard]] Status Requeue(std::int64_t task_id, std::int64_t not_before_ms, const std::string& message);
  // Takes a queued task out of the queue for good (its job failed or was
  // aborted); waiting tasks are only marked. A leased one stays leased until
  // its host has stopped it: its heartbeats are answered that it is stale (the
  // host cancels it), and it ends, reported with Ended::cancelled, at its
  // finish or when its lease runs out. So its job knows when nothing of it
  // runs any more, and a result it still made is not lost.
  [[nodiscard]] Status Cancel(std::int64_t task_id, const std::string& message);
  // Ends every attempt `host_id` holds, as if its lease had expired (the host went silent).
  // With `counts` false (the host left on purpose and gave them up) the attempts do
  // not use up one of their tasks' max_attempts.
  [[nodiscard]] Status ReleaseHost(const std::string& host_id, const std::string& reason, bool counts = true);
  bool IsLeased(std::int64_t task_id) const {
    auto it = live_.find(task_id);
    return it != live_.end() && it->second.state == TaskState::kLeased;
  }
  void set_end_observer(EndObserver observer) { observer_ = std::move(observer); }
  void set_result_check(ResultCheck check) { result_check_ = std::move(check); }
  // Ends an attempt whose task never reached its host (the reply could not be
  // sent), as if its lease had expired.
  [[nodiscard]] Status Release(const AttemptRef& ref, const std::string& reason);

  // When the next lease runs out or a delayed task becomes ready; nullopt when neither can happen.
  std::optional<std::int64_t> NextExpiryMs() const;
  // Whether Take(host, plugins, tenant) would find a task (empty `tenant`: any tenant).
  bool HasReady(const HostPlugins& plugins, const std::string& tenant = {}) const;
  bool HasReady(const std::set<std::string>& plugins, const std::string& tenant = {}) const {
    return HasReady(HostPlugins{plugins, {}}, tenant);
  }
  std::int64_t queued() const { return queued_; }
  std::int64_t succeeded() const { return succeeded_; }
  std::int64_t failed() const { return failed_; }
  std::int64_t leased() const { return static_cast<std::int64_t>(leases_.size()); }
  std::int64_t InFlight(const std::string& host_id) const;
  // Tenants with a queued or leased task.
  std::set<std::string> LiveTenants() const;
  // The tenant of a queued or leased task; nullptr for others.
  const std::string* TenantOf(std::int64_t task_id) const {
    auto it = live_.find(task_id);
    return it == live_.end() ? nullptr : &it->second.tenant;
  }
  // The cluster of a queued or leased task ("" for a raw task); nullptr for others.
  const std::string* ClusterOf(std::int64_t task_id) const {
    auto it = live_.find(task_id);
    return it == live_.end() ? nullptr : &it->second.cluster_id;
  }

  // Transitions since the last call; publish them only after a commit.
  std::vector<TaskEvent> TakeEvents() { return std::exchange(events_, {}); }
  // Whether transitions are recorded for TakeEvents() at all: with nobody
  // subscribed to the events endpoint they are not even built.
  void set_events_wanted(bool wanted) { events_wanted_ = wanted; }
  // True once after tasks became ready (enqueue, expiry, release): held takes may now be served.
  bool TakeReadyChanged() { return std::exchange(ready_changed_, false); }
  std::int64_t lease_ms() const { return options_.lease_ms; }
  // Times each task's wait and attempts, counts retries, expired leases and
  // each host's finishes (null: nothing is measured).
  void set_metrics(server::ServerMetrics* metrics) { metrics_ = metrics; }
  // Queued (ready or waiting out a backoff) and leased tasks per tenant.
  struct TenantCounts {
    std::int64_t queued = 0;
    std::int64_t leased = 0;
  };
  std::map<std::string, TenantCounts> CountByTenant() const;

 private:
  struct Live {
    std::string tenant;
    std::string plugin;
    std::string action;
    TaskState state = TaskState::kQueued;
    std::int64_t attempt = 0;
    std::int64_t max_attempts = 3;
    std::string host_id;
    std::int64_t lease_until_ms = 0;  // leased: lease end; queued: not before
    std::string cluster_id;
    // Leased, and cancelled by its job: why (its host is told to stop it).
    std::string cancelled;
    // What a take hands out besides the above, so that it need not read the
    // task back from the store. Unknown (read at take time) for tasks loaded
    // by Load() and for payloads over kMaxKeptPayloadBytes.
    bool known = false;
    std::string job_id;
    std::string node_id;
    std::string task_key;
    std::string service;
    std::string payload_json;
    std::int64_t created_at_ms = 0;
    // Measured only with metrics on: this plugin type's and action's histograms,
    // when the task last became ready, and when its current attempt was taken.
    const server::TaskTimers* timers = nullptr;
    std::int64_t ready_at_ms = 0;
    std::int64_t taken_at_ms = 0;
  };
  static constexpr std::size_t kMaxKeptPayloadBytes = 1024;
  // A Live entry for a task record, with what a take needs when the payload is small.
  static Live FromRecord(const TaskRecord& r, TaskState state, std::int64_t attempt, std::string host_id,
                         std::int64_t lease_until_ms, bool details);

  void AddReady(std::int64_t id, Live& t);
  // Ready now, or later when its not-before time is in the future.
  void Queue(std::int64_t id, Live& t);
  Status Report(const Ended& ended) { return observer_ ? observer_(ended) : Status::Ok(); }
  void RemoveReady(std::int64_t id, const Live& t);
  void DropLease(std::int64_t id, Live& t);
  // Ends the current attempt and queues the task again while it has attempts
  // left; one that does not `count` (an undelivered one) gives its task one more.
  Status EndLease(std::int64_t id, AttemptStatus attempt_status, const std::string& why, bool counts = true);
  void Emit(std::int64_t id, const Live& t, std::string message = "");
  static std::string Describe(const Live& t);
  // The oldest ready task of one tenant among `plugins`; 0 when there is none.
  static std::int64_t OldestOf(const std::map<std::string, std::set<std::int64_t>>& by_plugin,
                               const std::set<std::string>& plugins);
  // The oldest ready task of `tenant` (whose ready tasks are `by_plugin`) that `plugins` can run; 0: none.
  static std::int64_t OldestFor(const std::map<std::string, std::set<std::int64_t>>& by_plugin,
                                const HostPlugins& plugins, const std::string& tenant);

  store::Store& store_;
  const Clock& clock_;
  QueueOptions options_;

  std::unordered_map<std::int64_t, Live> live_;  // queued and leased tasks
  // Tasks enqueued waiting (with a plugin) in this process, as they were
  // written, so that MakeReady need not read them back: a job's every task is
  // made ready once. Cleared by Load(); a task missing here is read from the store.
  std::unordered_map<std::int64_t, Live> waiting_;
  // tenant -> plugin type -> ready task ids (oldest first)
  std::map<std::string, std::map<std::string, std::set<std::int64_t>>> ready_;
  std::set<std::pair<std::int64_t, std::int64_t>> leases_;  // (lease_until_ms, task id)
  std::set<std::pair<std::int64_t, std::int64_t>> delayed_;  // (not_before_ms, task id), queued
  EndObserver observer_;
  ResultCheck result_check_;
  std::unordered_map<std::string, std::int64_t> in_flight_;  // host -> leased tasks
  std::int64_t queued_ = 0;
  std::int64_t succeeded_ = 0;  // counted at Load, then kept up to date
  std::int64_t failed_ = 0;
  std::string last_tenant_;  // round-robin cursor
  std::vector<TaskEvent> events_;
  bool events_wanted_ = true;
  bool ready_changed_ = false;
  server::ServerMetrics* metrics_ = nullptr;
};

}  // namespace weft::queue
