#include "weft/server/queue/task_queue.hpp"

#include <algorithm>

namespace weft::queue {

bool RetryCannotHelp(const std::string& code) {
  return code == "INVALID" || code == "UNSUPPORTED" || code == "TOO_LARGE";
}

TaskQueue::TaskQueue(store::Store& store, const Clock& clock, QueueOptions options)
    : store_(store), clock_(clock), options_(options) {}

Status TaskQueue::Load() {
  live_.clear();
  waiting_.clear();
  ready_.clear();
  leases_.clear();
  delayed_.clear();
  in_flight_.clear();
  queued_ = 0;
  events_.clear();
  Result<store::TaskCounts> counts = store_.CountTasks();
  if (!counts.ok()) return counts.status().WithContext("cannot count tasks");
  succeeded_ = counts->succeeded;
  failed_ = counts->failed;
  Result<std::vector<TaskRecord>> tasks = store_.ListUnfinishedTasks();
  if (!tasks.ok()) return tasks.status().WithContext("cannot load the task queue");
  const std::int64_t loaded_at = clock_.NowMs();
  for (TaskRecord& r : *tasks) {
    Live t = FromRecord(r, r.state, r.attempt, r.host_id, r.lease_until_ms, /*details=*/false);
    if (t.state == TaskState::kQueued) {
      Queue(r.id, t);
    } else {
      // weftd was down: the host may still be running the attempt and could not
      // renew its lease meanwhile. A fresh lease from now lets its heartbeat
      // reach us before the task is handed out again (so no task runs twice).
      t.lease_until_ms = std::max(t.lease_until_ms, loaded_at + options_.lease_ms);
      leases_.emplace(t.lease_until_ms, r.id);
      ++in_flight_[t.host_id];
    }
    live_.emplace(r.id, std::move(t));
  }
  ready_changed_ = queued_ > 0;
  return Status::Ok();
}

TaskQueue::Live TaskQueue::FromRecord(const TaskRecord& r, TaskState state, std::int64_t attempt, std::string host_id,
                                      std::int64_t lease_until_ms, bool details) {
  Live t;
  t.tenant = r.tenant;
  t.plugin = r.plugin;
  t.action = r.action;
  t.state = state;
  t.attempt = attempt;
  t.max_attempts = r.max_attempts;
  t.host_id = std::move(host_id);
  t.lease_until_ms = lease_until_ms;
  t.cluster_id = r.cluster_id;
  // Without details the record has no payload; a big payload stays in the store only.
  if (!details || r.payload_json.size() > kMaxKeptPayloadBytes) return t;
  t.known = true;
  t.job_id = r.job_id;
  t.node_id = r.node_id;
  t.task_key = r.task_key;
  t.service = r.service;
  t.payload_json = r.payload_json;
  t.created_at_ms = r.created_at_ms;
  return t;
}

void TaskQueue::AddReady(std::int64_t id, Live& t) {
  if (ready_[t.tenant][t.plugin].insert(id).second) ++queued_;
  if (!metrics_) return;
  if (!t.timers) t.timers = metrics_->ForTask(t.plugin, t.action);
  t.ready_at_ms = clock_.NowMs();
}

void TaskQueue::Queue(std::int64_t id, Live& t) {
  if (t.lease_until_ms > clock_.NowMs()) {
    delayed_.emplace(t.lease_until_ms, id);
  } else {
    AddReady(id, t);
    ready_changed_ = true;
  }
}

void TaskQueue::RemoveReady(std::int64_t id, const Live& t) {
  auto tenant = ready_.find(t.tenant);
  if (tenant == ready_.end()) return;
  auto plugin = tenant->second.find(t.plugin);
  if (plugin == tenant->second.end()) return;
  if (plugin->second.erase(id)) --queued_;
  // Empty entries are removed so that Take never walks dead tenants.
  if (plugin->second.empty()) tenant->second.erase(plugin);
  if (tenant->second.empty()) ready_.erase(tenant);
}

void TaskQueue::DropLease(std::int64_t id, Live& t) {
  leases_.erase({t.lease_until_ms, id});
  auto h = in_flight_.find(t.host_id);
  if (h != in_flight_.end() && --h->second <= 0) in_flight_.erase(h);
  t.lease_until_ms = 0;
}

void TaskQueue::Emit(std::int64_t id, const Live& t, std::string message) {
  if (!events_wanted_) return;
  events_.push_back(TaskEvent{t.tenant, id, t.state, t.attempt, t.host_id, t.plugin, t.action, std::move(message),
                              clock_.NowMs(), t.cluster_id});
}

std::string TaskQueue::Describe(const Live& t) {
  return std::string(store::TaskStateName(t.state)) + (t.host_id.empty() ? "" : " by host '" + t.host_id + "'");
}

Result<std::vector<std::int64_t>> TaskQueue::Enqueue(const std::string& tenant, std::vector<NewTask> tasks) {
  std::vector<std::int64_t> ids;
  ids.reserve(tasks.size());
  const std::int64_t now = clock_.NowMs();
  for (NewTask& n : tasks) {
    TaskRecord r;
    r.tenant = tenant;
    r.plugin = std::move(n.plugin);
    r.action = std::move(n.action);
    r.job_id = std::move(n.job_id);
    r.cluster_id = std::move(n.cluster_id);
    r.node_id = std::move(n.node_id);
    r.state = n.waiting ? TaskState::kWaiting : TaskState::kQueued;
    r.max_attempts = n.max_attempts;
    r.payload_json = std::move(n.payload_json);
    r.task_key = std::move(n.task_key);
    r.service = std::move(n.service);
    r.after_json = std::move(n.after_json);
    r.created_at_ms = now;
    WEFT_RETURN_IF_ERROR(store_.InsertTask(&r));
    ids.push_back(r.id);
    if (n.waiting) {
      if (!r.plugin.empty()) waiting_.emplace(r.id, FromRecord(r, TaskState::kWaiting, 0, "", 0, /*details=*/true));
      continue;
    }
    Live t = FromRecord(r, TaskState::kQueued, 0, "", 0, /*details=*/true);
    AddReady(r.id, t);
    Emit(r.id, t);
    live_.emplace(r.id, std::move(t));
    ready_changed_ = true;
  }
  return ids;
}

std::int64_t TaskQueue::OldestOf(const std::map<std::string, std::set<std::int64_t>>& by_plugin,
                                 const std::set<std::string>& plugins) {
  std::int64_t oldest = 0;
  for (const auto& p : plugins) {
    auto it = by_plugin.find(p);
    if (it == by_plugin.end()) continue;
    const std::int64_t id = *it->second.begin();
    if (oldest == 0 || id < oldest) oldest = id;
  }
  return oldest;
}

bool HostPlugins::Runs(const std::string& tenant, const std::string& type) const {
  if (shared.count(type)) return true;
  auto own = by_tenant.find(tenant);
  return own != by_tenant.end() && own->second.count(type) != 0;
}

std::int64_t TaskQueue::OldestFor(const std::map<std::string, std::set<std::int64_t>>& by_plugin,
                                  const HostPlugins& plugins, const std::string& tenant) {
  std::int64_t oldest = OldestOf(by_plugin, plugins.shared);
  auto own = plugins.by_tenant.find(tenant);
  if (own == plugins.by_tenant.end()) return oldest;
  const std::int64_t mine = OldestOf(by_plugin, own->second);
  return oldest == 0 || (mine != 0 && mine < oldest) ? mine : oldest;
}

bool TaskQueue::HasReady(const HostPlugins& plugins, const std::string& tenant) const {
  if (!tenant.empty()) {
    auto it = ready_.find(tenant);
    return it != ready_.end() && OldestFor(it->second, plugins, tenant) != 0;
  }
  for (const auto& [name, by_plugin] : ready_)
    if (OldestFor(by_plugin, plugins, name) != 0) return true;
  return false;
}

Result<std::optional<TaskRecord>> TaskQueue::Take(const std::string& host_id, const HostPlugins& plugins,
                                                  const std::string& tenant) {
  std::optional<TaskRecord> record(std::in_place);
  WEFT_ASSIGN_OR_RETURN(const bool taken, Take(host_id, plugins, tenant, &*record));
  if (!taken) record.reset();
  return record;
}

Result<bool> TaskQueue::Take(const std::string& host_id, const HostPlugins& plugins, const std::string& tenant,
                             TaskRecord* out) {
  if (ready_.empty() || plugins.empty()) return false;
  std::int64_t chosen = 0;
  if (!tenant.empty()) {
    auto it = ready_.find(tenant);
    if (it != ready_.end()) chosen = OldestFor(it->second, plugins, tenant);
  } else {
    // Round-robin over tenants: start after the tenant served last, wrap once.
    auto start = ready_.upper_bound(last_tenant_);
    for (std::size_t n = 0; n < ready_.size() && chosen == 0; ++n, ++start) {
      if (start == ready_.end()) start = ready_.begin();
      chosen = OldestFor(start->second, plugins, start->first);
    }
  }
  if (chosen == 0) return false;

  Live& t = live_.at(chosen);
  const std::int64_t now = clock_.NowMs();
  const std::int64_t attempt = t.attempt + 1;
  const std::int64_t until = now + options_.lease_ms;
  WEFT_RETURN_IF_ERROR(store_.LeaseTask(chosen, attempt, host_id, until, now));
  TaskRecord& r = *out;
  if (t.known) {
    // What the store now holds, without reading it back.
    r.id = chosen;
    r.tenant = t.tenant;
    r.plugin = t.plugin;
    r.action = t.action;
    r.job_id = t.job_id;
    r.cluster_id = t.cluster_id;
    r.node_id = t.node_id;
    r.max_attempts = t.max_attempts;
    r.created_at_ms = t.created_at_ms;
    r.payload_json = t.payload_json;
    r.result_json = "{}";
    r.message.clear();
    r.stdout_tail.clear();
    r.stderr_tail.clear();
    r.task_key = t.task_key;
    r.service = t.service;
    r.after_json = "[]";
  } else {
    WEFT_ASSIGN_OR_RETURN(std::optional<TaskRecord> read, store_.GetTask(chosen));
    if (!read.has_value()) return Status::Internal("task " + std::to_string(chosen) + " vanished while taken");
    r = std::move(*read);
    r.message.clear();
    r.result_json = "{}";
    r.stdout_tail.clear();
    r.stderr_tail.clear();
  }
  r.state = TaskState::kLeased;
  r.attempt = attempt;
  r.host_id = host_id;
  r.lease_until_ms = until;
  r.updated_at_ms = now;

  RemoveReady(chosen, t);
  if (tenant.empty()) last_tenant_ = t.tenant;
  t.state = TaskState::kLeased;
  t.attempt = attempt;
  t.host_id = host_id;
  t.lease_until_ms = until;
  leases_.emplace(until, chosen);
  ++in_flight_[host_id];
  if (t.timers) {
    t.timers->wait->Observe(static_cast<double>(now - t.ready_at_ms) / 1000.0);
    t.taken_at_ms = now;
  }
  Emit(chosen, t);
  return true;
}

Status TaskQueue::Finish(const FinishRequest& f, Conflict* conflict) {
  // The task's name, made only for an error message, not on every finish.
  auto name = [&f] { return "task " + std::to_string(f.task_id); };
  auto it = live_.find(f.task_id);
  if (it == live_.end()) {
    // Not queued or leased: finished already, or unknown.
    WEFT_ASSIGN_OR_RETURN(std::optional<TaskRecord> r, store_.GetTask(f.task_id));
    if (!r.has_value()) return Status::NotFound(name() + " does not exist");
    const TaskRecord& rec = *r;
    const TaskState wanted = f.succeeded ? TaskState::kSucceeded : TaskState::kFailed;
    if (rec.attempt == f.attempt && rec.host_id == f.host_id && rec.state == wanted) return Status::Ok();
    *conflict = Conflict{rec.attempt, rec.state, rec.host_id};
    return Status::Conflict(name() + " is already " + std::string(store::TaskStateName(rec.state)) + " (attempt " +
                            std::to_string(rec.attempt) + " on host '" + rec.host_id + "'); attempt " +
                            std::to_string(f.attempt) + " from host '" + f.host_id + "' cannot finish it");
  }
  Live& t = it->second;
  if (t.state != TaskState::kLeased || t.attempt != f.attempt || t.host_id != f.host_id) {
    *conflict = Conflict{t.attempt, t.state, t.host_id};
    return Status::Conflict(name() + " attempt " + std::to_string(f.attempt) + " from host '" + f.host_id +
                            "' is not current: the task is " + Describe(t) + " at attempt " +
                            std::to_string(t.attempt) + "; stop working on it");
  }
  if (f.succeeded && f.result_json.size() > 2) {  // most tasks return nothing ("{}")
    Status kept = f.result_json.size() > kMaxResultBytes
                      ? Status::TooLarge(name() + " attempt " + std::to_string(f.attempt) + " returned a result of " +
                                         std::to_string(f.result_json.size()) + " bytes (as JSON), over the limit of " +
                                         std::to_string(kMaxResultBytes) + " bytes that one task may return")
                  : result_check_ ? result_check_(f.task_id, f.result_json)
                                  : Status::Ok();
    if (!kept.ok()) {
      // Never kept in part, never dropped unsaid: the attempt fails, and the
      // same run would return the same result, so it is not tried again.
      FinishRequest failed = f;
      failed.succeeded = false;
      failed.final = true;
      failed.result_json = "{}";
      failed.message = kept.message() + "; the result was not kept and the task failed";
      return Finish(failed, conflict);
    }
  }
  // A cancelled attempt that failed was stopped (or failed anyway): the task is cancelled.
  const bool stopped = !f.succeeded && !t.cancelled.empty();
  const TaskState final_state =
      f.succeeded ? TaskState::kSucceeded : stopped ? TaskState::kCancelled : TaskState::kFailed;
  const AttemptStatus attempt_status =
      f.succeeded ? AttemptStatus::kSucceeded : stopped ? AttemptStatus::kCancelled : AttemptStatus::kFailed;
  const std::string message = stopped ? t.cancelled + "; its host stopped it: " + f.message : f.message;
  const std::int64_t now = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.EndAttempt(f.task_id, f.attempt, final_state, attempt_status, message, f.result_json,
                                         f.stdout_tail, f.stderr_tail, now));
  if (t.timers) {
    t.timers->run->Observe(static_cast<double>(now - t.taken_at_ms) / 1000.0);
    metrics_->HostFinished(f.host_id)->Inc();
  }
  DropLease(f.task_id, t);
  t.state = final_state;
  if (f.succeeded) {
    ++succeeded_;
  } else if (!stopped) {
    ++failed_;
  }
  Emit(f.task_id, t, message);
  const bool cancelled = !t.cancelled.empty();
  live_.erase(it);
  return Report(Ended{f.task_id, f.attempt, f.succeeded, message, f.result_json,
                      !f.succeeded && (f.final || RetryCannotHelp(f.code)), cancelled});
}

Result<RenewOutcome> TaskQueue::Renew(const std::string& host_id, const std::vector<AttemptRef>& in_flight) {
  RenewOutcome out;
  const std::int64_t until = clock_.NowMs() + options_.lease_ms;
  for (const AttemptRef& ref : in_flight) {
    auto it = live_.find(ref.task_id);
    if (it == live_.end() || it->second.state != TaskState::kLeased || it->second.attempt != ref.attempt ||
        it->second.host_id != host_id) {
      out.stale.push_back(ref);
      continue;
    }
    Live& t = it->second;
    WEFT_RETURN_IF_ERROR(store_.RenewLease(ref.task_id, until));
    leases_.erase({t.lease_until_ms, ref.task_id});
    t.lease_until_ms = until;
    leases_.emplace(until, ref.task_id);
    ++out.renewed;
    // Cancelled: it still runs (so its lease goes on), and its host is to stop it.
    if (!t.cancelled.empty()) out.stale.push_back(ref);
  }
  return out;
}

Status TaskQueue::Progress(const std::string& host_id, const AttemptRef& ref, Conflict* conflict) {
  WEFT_ASSIGN_OR_RETURN(RenewOutcome r, Renew(host_id, {ref}));
  if (r.renewed == 1) return Status::Ok();
  auto it = live_.find(ref.task_id);
  if (it == live_.end()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<TaskRecord> rec, store_.GetTask(ref.task_id));
    if (!rec.has_value()) return Status::NotFound("task " + std::to_string(ref.task_id) + " does not exist");
    *conflict = Conflict{rec->attempt, rec->state, rec->host_id};
  } else {
    *conflict = Conflict{it->second.attempt, it->second.state, it->second.host_id};
  }
  return Status::Conflict("task " + std::to_string(ref.task_id) + " attempt " + std::to_string(ref.attempt) +
                          " from host '" + host_id + "' is not current (the task is at attempt " +
                          std::to_string(conflict->current_attempt) + ", " +
                          std::string(store::TaskStateName(conflict->state)) + "); stop working on it");
}

Status TaskQueue::EndLease(std::int64_t id, AttemptStatus attempt_status, const std::string& why, bool counts) {
  Live& t = live_.at(id);
  if (!t.cancelled.empty()) {
    // Cancelled, and now over without its finish: the task stays cancelled.
    const std::string message = t.cancelled + "; " + why;
    WEFT_RETURN_IF_ERROR(store_.EndAttempt(id, t.attempt, TaskState::kCancelled, AttemptStatus::kCancelled, message,
                                           "{}", "", "", clock_.NowMs()));
    DropLease(id, t);
    t.state = TaskState::kCancelled;
    Emit(id, t, message);
    const std::int64_t attempt = t.attempt;
    live_.erase(id);
    return Report(Ended{id, attempt, false, message, "{}", true, true});
  }
  if (attempt_status == AttemptStatus::kUndelivered || !counts) {
    // The host never got this attempt (it went away while its take was held),
    // or gave it up as it left on purpose: it keeps its number, for fencing,
    // but does not use up one of the task's.
    ++t.max_attempts;
    WEFT_RETURN_IF_ERROR(store_.SetTaskMaxAttempts(id, t.max_attempts));
  }
  const bool exhausted = t.attempt >= t.max_attempts;
  const std::string message =
      exhausted ? "task " + std::to_string(id) + " failed: " + why + ", and it has used all " +
                      std::to_string(t.max_attempts) + " attempts (max_attempts)"
                : why + "; the task is queued again for attempt " + std::to_string(t.attempt + 1);
  const TaskState next = exhausted ? TaskState::kFailed : TaskState::kQueued;
  WEFT_RETURN_IF_ERROR(
      store_.EndAttempt(id, t.attempt, next, attempt_status, message, "{}", "", "", clock_.NowMs()));
  DropLease(id, t);
  t.state = next;
  Emit(id, t, message);
  if (!exhausted) {
    if (metrics_) metrics_->retries().Inc();
    AddReady(id, t);
    ready_changed_ = true;
    return Status::Ok();
  }
  ++failed_;
  const std::int64_t attempt = t.attempt;
  live_.erase(id);
  return Report(Ended{id, attempt, false, message, "{}", false, false});
}

Status TaskQueue::ExpireDue(std::chrono::steady_clock::time_point stop_at) {
  const std::int64_t now = clock_.NowMs();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const std::int64_t id = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    auto it = live_.find(id);
    if (it == live_.end() || it->second.state != TaskState::kQueued) continue;
    it->second.lease_until_ms = 0;
    AddReady(id, it->second);
    ready_changed_ = true;
  }
  while (!leases_.empty() && leases_.begin()->first <= now) {
    const std::int64_t id = leases_.begin()->second;
    const Live& t = live_.at(id);
    if (metrics_) metrics_->leases_expired().Inc();
    WEFT_RETURN_IF_ERROR(EndLease(id, AttemptStatus::kExpired,
                                  "attempt " + std::to_string(t.attempt) + " on host '" + t.host_id +
                                      "' expired: no heartbeat or progress named it within " +
                                      std::to_string(options_.lease_ms) + " ms (tasks.lease_ms)"));
    // A host that died with many tasks leased: ending each lease writes to the store.
    if (std::chrono::steady_clock::now() >= stop_at) break;
  }
  return Status::Ok();
}

Status TaskQueue::Release(const AttemptRef& ref, const std::string& reason) {
  auto it = live_.find(ref.task_id);
  if (it == live_.end() || it->second.state != TaskState::kLeased || it->second.attempt != ref.attempt)
    return Status::Ok();  // already moved on
  return EndLease(ref.task_id, AttemptStatus::kUndelivered, reason);
}

std::optional<std::int64_t> TaskQueue::NextExpiryMs() const {
  std::optional<std::int64_t> next;
  if (!leases_.empty()) next = leases_.begin()->first;
  if (!delayed_.empty() && (!next || delayed_.begin()->first < *next)) next = delayed_.begin()->first;
  return next;
}

Status TaskQueue::MakeReady(std::int64_t task_id) {
  if (live_.count(task_id)) return Status::Ok();  // already queued or leased
  if (auto w = waiting_.find(task_id); w != waiting_.end()) {
    WEFT_RETURN_IF_ERROR(store_.SetTaskState(task_id, TaskState::kQueued, "", 0, clock_.NowMs()));
    Live t = std::move(w->second);
    waiting_.erase(w);
    t.state = TaskState::kQueued;
    AddReady(task_id, t);
    Emit(task_id, t);
    live_.emplace(task_id, std::move(t));
    ready_changed_ = true;
    return Status::Ok();
  }
  WEFT_ASSIGN_OR_RETURN(std::optional<TaskRecord> r, store_.GetTask(task_id));
  if (!r.has_value()) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  const TaskRecord& rec = *r;
  if (rec.state != TaskState::kWaiting)
    return Status::Internal("task " + std::to_string(task_id) + " is " + std::string(store::TaskStateName(rec.state)) +
                            ", not waiting, and cannot be made ready");
  WEFT_RETURN_IF_ERROR(store_.SetTaskState(task_id, TaskState::kQueued, "", 0, clock_.NowMs()));
  Live t = FromRecord(rec, TaskState::kQueued, rec.attempt, "", 0, /*details=*/true);
  AddReady(task_id, t);
  Emit(task_id, t);
  live_.emplace(task_id, std::move(t));
  ready_changed_ = true;
  return Status::Ok();
}

Status TaskQueue::Requeue(std::int64_t task_id, std::int64_t not_before_ms, const std::string& message) {
  if (live_.count(task_id)) return Status::Ok();
  WEFT_ASSIGN_OR_RETURN(std::optional<TaskRecord> r, store_.GetTask(task_id));
  if (!r.has_value()) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  const TaskRecord& rec = *r;
  const bool was_failed = rec.state == TaskState::kFailed;
  WEFT_RETURN_IF_ERROR(store_.SetTaskState(task_id, TaskState::kQueued, message, not_before_ms, clock_.NowMs()));
  if (was_failed && failed_ > 0) --failed_;
  if (metrics_) metrics_->retries().Inc();
  Live t = FromRecord(rec, TaskState::kQueued, rec.attempt, "", not_before_ms, /*details=*/true);
  Emit(task_id, t, message);
  Queue(task_id, t);
  live_.emplace(task_id, std::move(t));
  return Status::Ok();
}

Status TaskQueue::Cancel(std::int64_t task_id, const std::string& message) {
  auto it = live_.find(task_id);
  if (it != live_.end()) {
    Live& t = it->second;
    if (t.state == TaskState::kLeased) {
      if (t.cancelled.empty()) {
        t.cancelled = message;
        Emit(task_id, t, message + "; its host is told to stop it");
      }
      return Status::Ok();
    }
    WEFT_RETURN_IF_ERROR(store_.SetTaskState(task_id, TaskState::kCancelled, message, 0, clock_.NowMs()));
    RemoveReady(task_id, t);
    delayed_.erase({t.lease_until_ms, task_id});
    t.state = TaskState::kCancelled;
    Emit(task_id, t, message);
    live_.erase(it);
    return Status::Ok();
  }
  waiting_.erase(task_id);
  return store_.SetTaskState(task_id, TaskState::kCancelled, message, 0, clock_.NowMs());
}

Status TaskQueue::ReleaseHost(const std::string& host_id, const std::string& reason, bool counts) {
  if (!in_flight_.count(host_id)) return Status::Ok();
  std::vector<std::int64_t> held;
  for (const auto& [until, id] : leases_)
    if (live_.at(id).host_id == host_id) held.push_back(id);
  for (std::int64_t id : held) {
    const Live& t = live_.at(id);
    if (metrics_) metrics_->leases_expired().Inc();
    WEFT_RETURN_IF_ERROR(EndLease(id, AttemptStatus::kExpired,
                                  "attempt " + std::to_string(t.attempt) + " on host '" + host_id +
                                      "' was given up: " + reason,
                                  counts));
  }
  return Status::Ok();
}

std::set<std::string> TaskQueue::LiveTenants() const {
  std::set<std::string> out;
  for (const auto& [id, t] : live_) out.insert(t.tenant);
  return out;
}

std::map<std::string, TaskQueue::TenantCounts> TaskQueue::CountByTenant() const {
  std::map<std::string, TenantCounts> out;
  for (const auto& [id, t] : live_) {
    TenantCounts& c = out[t.tenant];
    ++(t.state == TaskState::kLeased ? c.leased : c.queued);
  }
  return out;
}

std::int64_t TaskQueue::InFlight(const std::string& host_id) const {
  auto it = in_flight_.find(host_id);
  return it == in_flight_.end() ? 0 : it->second;
}

}  // namespace weft::queue
