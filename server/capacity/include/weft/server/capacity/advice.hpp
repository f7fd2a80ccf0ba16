// Capacity advice: from what one tenant's tasks asked of the worker threads
// over a window (store::TenantLoad) and the threads that serve it now, how
// many it needs under the M/M/c model (erlang.hpp) to keep its queue wait
// under a target, and one sentence saying what to add or remove.
// docs/capacity.md states the model, its inputs and its limits.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/server/capacity/erlang.hpp"
#include "weft/server/store/store.hpp"

namespace weft::capacity {

enum class Verdict { kAdd, kRemove, kKeep, kUnknown };
std::string_view VerdictName(Verdict verdict);

// What the load measured over the window comes to.
struct Measured {
  double lambda = 0;             // arrivals per second
  double mean_service_s = 0;     // 0 when no attempt ended with a result
  double service_cv = 0;         // standard deviation / mean of the run times (1 for the model's exponential)
  std::optional<double> mean_wait_s;  // the queue wait tasks had, where the store tells it
};

// Arrivals are the larger of (tasks enqueued + retries) and attempts started
// in the window: the first sees a queue that grows faster than it is served,
// the second the later tasks of work enqueued before the window began.
Measured Measure(const store::TenantLoad& load, std::int64_t window_ms);

struct Hosts {
  std::int64_t live = 0;
  std::int64_t threads = 0;          // their capacity, summed
  std::int64_t threads_per_host = 0; // the mean capacity of a live host, rounded; 0 with no live host
};

struct TenantAdvice {
  std::string tenant;
  Measured measured;
  double erlangs = 0;                       // lambda * mean service time: threads kept busy on average
  std::int64_t threads_now = 0;             // from the worker split
  std::optional<std::int64_t> threads_needed;
  std::optional<double> wait_now_s;         // the model's wait with threads_now; unset: the queue grows
  std::optional<double> wait_needed_s;      // ... with threads_needed
  std::int64_t change = 0;                  // threads to add (> 0) or remove (< 0)
  std::int64_t hosts_change = 0;            // the same in hosts of threads_per_host (rounded away from zero to add, down to remove)
  Verdict verdict = Verdict::kUnknown;
  std::string sentence;
};

TenantAdvice AdviseTenant(const store::TenantLoad& load, std::int64_t window_ms, std::int64_t threads_now,
                          const WaitTarget& target, const Hosts& hosts);

// Over every tenant advised: the threads they need together against the live
// hosts' threads, in hosts to add or remove.
struct TotalAdvice {
  std::int64_t threads_needed = 0;
  std::int64_t threads_now = 0;
  std::int64_t hosts_change = 0;
  Verdict verdict = Verdict::kUnknown;
  std::string sentence;
};

TotalAdvice AdviseTotal(const std::vector<TenantAdvice>& tenants, const Hosts& hosts);

// "250ms", "1.5s", "2m 5s": a wait as a sentence shows it.
std::string WaitText(double seconds);
// "mean queue wait" or "95th-percentile queue wait".
std::string TargetText(const WaitTarget& target);

}  // namespace weft::capacity
