// weft::server::ServerMetrics: the metrics weftd exports (docs/metrics.md
// names each), over one metrics::Registry.
//
// The components hold pointers into it (null when [metrics] enabled = false,
// so a hook costs one branch then): the router its op's counters and latency
// histogram, the queue each task's wait and run histograms (found once, when
// the task is queued), and so on. Updating is a relaxed atomic add; the
// lookups below run when an op is added, a task queued or a host first
// finishes a task, never per request.
//
// What the reactor owns (tasks by state, jobs running, hosts, clusters) is
// published as a Snapshot by the reactor about once a second while someone
// scrapes (RefreshDue/Published); a scrape of a snapshot older than that
// waits briefly for a fresh one.
//
// Thread-safe: the reactor updates, the listener thread renders.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/common/metrics.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

class ServerMetrics;

// One op's requests by outcome (indexed by weft::Code) and its latency. The
// counters start at 0 for every outcome (ServerMetrics::StartAtZero); the
// latency histogram is registered at the op's first request, so an op nobody
// calls adds no buckets to a scrape.
class OpMetrics {
 public:
  OpMetrics(ServerMetrics& owner, std::string op) : owner_(owner), op_(std::move(op)) {}
  void Record(Code code, double seconds_taken) const {
    Count(code);
    Observe(seconds_taken);
  }
  void Count(Code code) const;  // by outcome
  void Observe(double seconds_taken) const;
  // Registers the counter of every outcome, at 0.
  void Zero() const;

 private:
  metrics::Counter& Outcome(std::size_t code) const;  // registered at its first use

  ServerMetrics& owner_;
  const std::string op_;
  // Made at their first use; atomic because weftd's api front records the reads it answers too
  // (the registry hands both threads the same series).
  mutable std::array<std::atomic<metrics::Counter*>, static_cast<std::size_t>(Code::kInternal) + 1> outcomes_{};
  mutable std::atomic<metrics::Histogram*> seconds_{nullptr};
};

// The queue's timings of one plugin type and action.
struct TaskTimers {
  metrics::Histogram* wait = nullptr;  // ready -> taken
  metrics::Histogram* run = nullptr;   // taken -> finished
};

class ServerMetrics {
 public:
  ServerMetrics();

  metrics::Registry& registry() { return registry_; }

  // Registration (not per request).
  // Every op's requests by outcome and every job operation's ends by outcome,
  // registered at 0 at start: a counter that appears only at its first
  // increment loses that increment to Prometheus' rate() and increase().
  void StartAtZero(const std::vector<std::string>& ops);
  const OpMetrics* ForOp(const std::string& op);
  const TaskTimers* ForTask(const std::string& plugin, const std::string& action);
  metrics::Counter* HostFinished(const std::string& host_id);

  // A job ended (after its commit): counts it and its duration; a create
  // that succeeded is also a cluster creation (request to active).
  void JobFinished(const std::string& operation, const std::string& outcome, double seconds);

  metrics::Counter& rate_limited() { return *rate_limited_; }
  metrics::Counter& retries() { return *retries_; }
  metrics::Counter& leases_expired() { return *leases_expired_; }
  metrics::Counter& commits() { return *commits_; }
  metrics::Histogram& commit_seconds() { return *commit_seconds_; }
  // Group commits that did not land (their batch was rolled back), by reason.
  metrics::Counter& commit_failures(bool disk_full) { return disk_full ? *commit_failures_disk_full_ : *commit_failures_other_; }
  // The reactor's turns, and how long an api read waited from its receipt to its answer.
  metrics::Histogram& turn_seconds() { return *turn_seconds_; }
  metrics::Histogram& read_wait_seconds() { return *read_wait_seconds_; }
  // Events by type: task, task.progress, job, cluster, host, other.
  metrics::Counter& events(std::string_view type);

  // Several weftd on one database (docs/failover.md): registers the
  // leadership's series for this weftd's `node` (once, when its election starts).
  void EnableLeadership(const std::string& node);
  // Whether this weftd leads, and the epoch in force as it last saw it.
  void SetLeadership(bool leader, std::int64_t epoch);
  // This weftd took over as leader.
  void TookOver();

  // The reactor: whether to build and publish a snapshot now.
  bool RefreshDue() const;
  void Publish(metrics::Snapshot snapshot);
  // The listener thread: the text to serve.
  std::string Render();

 private:
  using Steady = std::chrono::steady_clock;

  metrics::Counter& JobsFinished(const std::string& operation, const std::string& outcome);

  metrics::Registry registry_;
  std::map<std::string, std::unique_ptr<OpMetrics>> ops_;
  std::map<std::string, std::map<std::string, TaskTimers, std::less<>>, std::less<>> tasks_;
  std::unordered_map<std::string, metrics::Counter*> hosts_;
  metrics::Counter* rate_limited_;
  metrics::Counter* retries_;
  metrics::Counter* leases_expired_;
  metrics::Counter* commits_;
  metrics::Histogram* commit_seconds_;
  metrics::Counter* commit_failures_disk_full_;
  metrics::Counter* commit_failures_other_;
  metrics::Histogram* turn_seconds_;
  metrics::Histogram* read_wait_seconds_;
  std::array<metrics::Counter*, 7> events_{};
  metrics::Gauge* leader_ = nullptr;  // null until EnableLeadership
  metrics::Gauge* epoch_ = nullptr;
  metrics::Counter* takeovers_ = nullptr;

  // Snapshot freshness, shared between the reactor and the listener.
  mutable std::mutex mu_;
  std::condition_variable published_cv_;
  Steady::time_point published_at_{};
  Steady::time_point scraped_at_{};
};

}  // namespace weft::server
