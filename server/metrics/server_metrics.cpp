#include "weft/server/metrics/server_metrics.hpp"

#include "weft/common/lifecycle.hpp"
#include "weft/common/text.hpp"

namespace weft::server {
namespace {

// While someone scraped within this long, the reactor refreshes its snapshot every second.
constexpr auto kScrapedRecently = std::chrono::minutes(5);
constexpr auto kRefreshEvery = std::chrono::seconds(1);
// A scrape waits for a fresh snapshot at most this long (the reactor wakes at least once a second).
constexpr auto kScrapeWait = std::chrono::milliseconds(2500);

constexpr std::string_view kEventTypes[] = {"task", "task.progress", "job", "cluster", "cluster.created", "host", "other"};

}  // namespace

ServerMetrics::ServerMetrics() {
  rate_limited_ = &registry_.AddCounter("weft_api_rate_limited_total",
                                        "Api requests refused because their connection exceeded its rate limit.");
  retries_ = &registry_.AddCounter("weft_task_retries_total",
                                   "Task attempts that failed or expired and were queued again for another attempt.");
  leases_expired_ = &registry_.AddCounter("weft_task_leases_expired_total",
                                          "Task attempts whose lease ran out before their host finished them.");
  commits_ = &registry_.AddCounter("weft_store_commits_total",
                                   "Group commits of the store that landed (one per reactor turn that wrote).");
  constexpr std::string_view kFailuresHelp =
      "Group commits of the store that did not land (their requests were rolled back and asked to retry), by "
      "reason: disk_full (the disk holding the store is full) or error.";
  commit_failures_disk_full_ = &registry_.AddCounter("weft_store_commit_failures_total", kFailuresHelp,
                                                     {{"reason", "disk_full"}});
  commit_failures_other_ = &registry_.AddCounter("weft_store_commit_failures_total", kFailuresHelp,
                                                 {{"reason", "error"}});
  commit_seconds_ = &registry_.AddHistogram("weft_store_commit_duration_seconds",
                                            "How long a group commit of the store took.", metrics::buckets::kFast);
  turn_seconds_ = &registry_.AddHistogram(
      "weft_reactor_turn_duration_seconds",
      "How long a turn of weftd's reactor took: its reads, writes, housekeeping, commit, replies and events.",
      metrics::buckets::kFast);
  read_wait_seconds_ = &registry_.AddHistogram(
      "weft_api_read_wait_seconds",
      "How long an api read waited, from when weftd took it off the socket to its answer (ahead of a turn's writes).",
      metrics::buckets::kFast);
  static_assert(std::size(kEventTypes) == std::tuple_size_v<decltype(events_)>, "a counter for each event type");
  for (std::size_t i = 0; i < std::size(kEventTypes); ++i)
    events_[i] = &registry_.AddCounter("weft_events_published_total", "Events published on the events endpoint.",
                                       {{"type", std::string(kEventTypes[i])}});
  registry_.AddCollector(metrics::ProcessSnapshot);
}

const OpMetrics* ServerMetrics::ForOp(const std::string& op) {
  std::unique_ptr<OpMetrics>& m = ops_[op];
  if (!m) m = std::make_unique<OpMetrics>(*this, op);
  return m.get();
}

metrics::Counter& OpMetrics::Outcome(std::size_t i) const {
  metrics::Counter* outcome = outcomes_[i].load(std::memory_order_acquire);
  if (!outcome) {
    outcome = &owner_.registry().AddCounter("weft_api_requests_total",
                                            "Requests handled, by op and outcome (ok or the error code).",
                                            {{"op", op_}, {"outcome", AsciiLower(CodeName(static_cast<Code>(i)))}});
    outcomes_[i].store(outcome, std::memory_order_release);
  }
  return *outcome;
}

void OpMetrics::Count(Code code) const {
  std::size_t i = static_cast<std::size_t>(code);
  if (i == 0 || i >= outcomes_.size()) i = static_cast<std::size_t>(Code::kInternal);
  Outcome(i).Inc();
}

void OpMetrics::Zero() const {
  for (std::size_t i = static_cast<std::size_t>(Code::kOk); i < outcomes_.size(); ++i) Outcome(i);
}

void ServerMetrics::StartAtZero(const std::vector<std::string>& ops) {
  for (const std::string& op : ops) ForOp(op)->Zero();
  ForOp("unknown")->Zero();  // what an op weftd does not know counts as
  // The enums count from 0 and ToString names each value ("" past the last).
  for (int o = 0; !ToString(static_cast<JobOperation>(o)).empty(); ++o)
    for (const char* outcome : {"succeeded", "failed", "aborted"})
      JobsFinished(std::string(ToString(static_cast<JobOperation>(o))), outcome);
}

void OpMetrics::Observe(double seconds_taken) const {
  metrics::Histogram* seconds = seconds_.load(std::memory_order_acquire);
  if (!seconds) {
    seconds = &owner_.registry().AddHistogram(
        "weft_api_request_duration_seconds",
        "How long weftd took to handle a request, by op (the handler, not the network).", metrics::buckets::kFast,
        {{"op", op_}});
    seconds_.store(seconds, std::memory_order_release);
  }
  seconds->Observe(seconds_taken);
}

const TaskTimers* ServerMetrics::ForTask(const std::string& plugin, const std::string& action) {
  auto& by_action = tasks_[plugin];
  auto it = by_action.find(action);
  if (it != by_action.end()) return &it->second;
  const metrics::Labels labels = {{"plugin", plugin}, {"action", action}};
  TaskTimers t;
  t.wait =
      &registry_.AddHistogram("weft_task_wait_seconds", "How long a task waited in the queue, from ready to taken.",
                              metrics::buckets::kTask, labels);
  t.run =
      &registry_.AddHistogram("weft_task_run_seconds", "How long an attempt took, from taken to finished by its host.",
                              metrics::buckets::kTask, labels);
  return &by_action.emplace(action, t).first->second;
}

metrics::Counter* ServerMetrics::HostFinished(const std::string& host_id) {
  auto it = hosts_.find(host_id);
  if (it != hosts_.end()) return it->second;
  metrics::Counter* c = &registry_.AddCounter(
      "weft_host_tasks_finished_total", "Task attempts each host finished (succeeded or failed).", {{"host", host_id}});
  hosts_.emplace(host_id, c);
  return c;
}

metrics::Counter& ServerMetrics::JobsFinished(const std::string& operation, const std::string& outcome) {
  return registry_.AddCounter("weft_jobs_finished_total", "Jobs that ended, by operation and outcome.",
                              {{"operation", operation}, {"outcome", outcome}});
}

void ServerMetrics::JobFinished(const std::string& operation, const std::string& outcome, double seconds) {
  // Jobs are rare: registering (a lookup under the registry's mutex) per job is fine.
  JobsFinished(operation, outcome).Inc();
  registry_
      .AddHistogram("weft_job_duration_seconds", "How long jobs took, from request to end, by operation.",
                    metrics::buckets::kJob, {{"operation", operation}})
      .Observe(seconds);
  if (operation == "create" && outcome == "succeeded")
    registry_
        .AddHistogram("weft_cluster_creation_seconds", "How long a cluster took from its create request to active.",
                      metrics::buckets::kJob)
        .Observe(seconds);
}

metrics::Counter& ServerMetrics::events(std::string_view type) {
  for (std::size_t i = 0; i + 1 < std::size(kEventTypes); ++i)
    if (kEventTypes[i] == type) return *events_[i];
  return *events_.back();
}

void ServerMetrics::EnableLeadership(const std::string& node) {
  if (leader_) return;
  leader_ = &registry_.AddGauge("weft_leader", "1 while this weftd is the leader of the weftd on its database, else 0.",
                                {{"node", node}});
  epoch_ = &registry_.AddGauge("weft_leader_epoch",
                               "The leader's epoch in force, as this weftd last saw it (0 before it saw one).");
  takeovers_ = &registry_.AddCounter("weft_leader_takeovers_total", "Times this weftd took over as leader.");
}

void ServerMetrics::SetLeadership(bool leader, std::int64_t epoch) {
  if (!leader_) return;
  leader_->Set(leader ? 1 : 0);
  epoch_->Set(static_cast<double>(epoch));
}

void ServerMetrics::TookOver() {
  if (takeovers_) takeovers_->Inc();
}

bool ServerMetrics::RefreshDue() const {
  std::lock_guard lock(mu_);
  const Steady::time_point now = Steady::now();
  return scraped_at_ != Steady::time_point{} && now - scraped_at_ < kScrapedRecently &&
         now - published_at_ >= kRefreshEvery;
}

void ServerMetrics::Publish(metrics::Snapshot snapshot) {
  registry_.Publish("reactor", std::move(snapshot));
  {
    std::lock_guard lock(mu_);
    published_at_ = Steady::now();
  }
  published_cv_.notify_all();
}

std::string ServerMetrics::Render() {
  {
    std::unique_lock lock(mu_);
    const Steady::time_point now = Steady::now();
    scraped_at_ = now;
    if (now - published_at_ > kRefreshEvery + kRefreshEvery / 2) {
      const Steady::time_point before = published_at_;
      published_cv_.wait_for(lock, kScrapeWait, [&] { return published_at_ != before; });
    }
  }
  return registry_.Render();
}

}  // namespace weft::server
