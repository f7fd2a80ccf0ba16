// The M/M/c queue (Erlang C): how long tasks wait for one of `c` worker
// threads when they arrive at random (Poisson, rate lambda per second) and
// each takes an exponentially distributed time (mean 1/mu seconds) to run.
// docs/capacity.md states the model, its assumptions and when it is wrong.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

namespace weft::capacity {

// The Erlang B blocking probability of `a` erlangs offered to `c` servers
// with no queue. Computed by the recurrence B(k) = a B(k-1) / (k + a B(k-1)),
// which never overflows, whatever c.
double ErlangB(std::int64_t c, double a);

// The Erlang C probability that an arriving task has to wait: `a` erlangs
// (lambda / mu) offered to `c` servers. 1 when the queue is unstable (a >= c).
double ErlangC(std::int64_t c, double a);

// The load a queue must keep up with.
struct Load {
  double lambda = 0;  // arrivals per second
  double mu = 0;      // tasks one server finishes per second (1 / mean service time)
  double erlangs() const { return mu > 0 ? lambda / mu : 0; }
};

// The mean time a task waits before a server takes it, in seconds: C / (c mu - lambda).
// nullopt when c servers cannot keep up (lambda >= c mu): the queue grows without end.
std::optional<double> MeanWait(std::int64_t c, const Load& load);

// The time within which a fraction `p` (0 < p < 1) of tasks are taken, in
// seconds: the wait W has P(W > t) = C e^{-(c mu - lambda) t}, so the
// p-quantile is 0 when C <= 1 - p and ln(C / (1 - p)) / (c mu - lambda)
// otherwise. nullopt when the queue is unstable.
std::optional<double> WaitQuantile(std::int64_t c, const Load& load, double p);

// What a target is about: the mean wait, or the wait of the p-quantile task.
struct WaitTarget {
  double seconds = 5;
  std::optional<double> quantile;  // unset: the mean
};

// The wait a target measures for `c` servers; nullopt when unstable.
std::optional<double> ExpectedWait(std::int64_t c, const Load& load, const WaitTarget& target);

// The fewest servers that keep the wait the target measures at or under
// target.seconds: 0 when nothing arrives, else at least one more than the
// load in erlangs needs to be stable. nullopt only when no number up to
// kMaxServers would do (a target of 0 for the mean, or an absurd load).
inline constexpr std::int64_t kMaxServers = 1000000;
std::optional<std::int64_t> ServersNeeded(const Load& load, const WaitTarget& target);

}  // namespace weft::capacity
