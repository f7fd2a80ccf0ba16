#include "weft/server/capacity/erlang.hpp"

#include <cmath>

namespace weft::capacity {
namespace {

// Erlang C from Erlang B for the same c and a (a < c): C = c B / (c - a (1 - B)),
// as stable as the recurrence that gave B.
double ErlangCFromB(std::int64_t c, double a, double b) {
  const double servers = static_cast<double>(c);
  return servers * b / (servers - a * (1 - b));
}

// How fast the queue drains when every server is busy: c mu - lambda, or
// nullopt when it does not drain at all.
std::optional<double> DrainRate(std::int64_t c, const Load& load) {
  const double rate = static_cast<double>(c) * load.mu - load.lambda;
  if (c <= 0 || load.mu <= 0 || rate <= 0) return std::nullopt;
  return rate;
}

// The wait `target` measures, from the probability of waiting and the drain rate.
double WaitOf(double waits, double drain, const WaitTarget& target) {
  if (!target.quantile) return waits / drain;
  const double beyond = 1 - *target.quantile;
  return waits <= beyond ? 0 : std::log(waits / beyond) / drain;
}

}  // namespace

double ErlangB(std::int64_t c, double a) {
  double b = 1;
  for (std::int64_t k = 1; k <= c; ++k) b = a * b / (static_cast<double>(k) + a * b);
  return b;
}

double ErlangC(std::int64_t c, double a) {
  if (a <= 0) return 0;
  if (c <= 0 || a >= static_cast<double>(c)) return 1;
  return ErlangCFromB(c, a, ErlangB(c, a));
}

std::optional<double> ExpectedWait(std::int64_t c, const Load& load, const WaitTarget& target) {
  if (load.lambda <= 0) return 0.0;
  const std::optional<double> drain = DrainRate(c, load);
  if (!drain) return std::nullopt;
  return WaitOf(ErlangC(c, load.erlangs()), *drain, target);
}

std::optional<double> MeanWait(std::int64_t c, const Load& load) { return ExpectedWait(c, load, WaitTarget{}); }

std::optional<double> WaitQuantile(std::int64_t c, const Load& load, double p) {
  return ExpectedWait(c, load, WaitTarget{.seconds = 0, .quantile = p});
}

std::optional<std::int64_t> ServersNeeded(const Load& load, const WaitTarget& target) {
  if (load.lambda <= 0) return 0;
  if (load.mu <= 0) return std::nullopt;
  const double a = load.erlangs();
  if (!(a < static_cast<double>(kMaxServers))) return std::nullopt;
  // The wait only falls as servers are added, so the first c that meets the
  // target is the answer. Erlang B is carried from c to c + 1 (one step of its
  // recurrence), so the search costs O(answer), not O(answer^2).
  const std::int64_t first = static_cast<std::int64_t>(std::floor(a)) + 1;  // the fewest that keep up
  double b = ErlangB(first, a);
  for (std::int64_t c = first; c <= kMaxServers; ++c) {
    if (c > first) b = a * b / (static_cast<double>(c) + a * b);
    const double drain = static_cast<double>(c) * load.mu - load.lambda;
    if (WaitOf(ErlangCFromB(c, a, b), drain, target) <= target.seconds) return c;
  }
  return std::nullopt;
}

}  // namespace weft::capacity
