// The Erlang B and C formulas and the threads search against published
// values and closed forms, and the advice's sentences and verdicts.
#include <catch2/catch.hpp>

#include <cmath>

#include "weft/server/capacity/advice.hpp"
#include "weft/server/capacity/erlang.hpp"

namespace {

using namespace weft::capacity;
using Catch::Matchers::WithinAbs;

// A target on the mean wait, or on the `q` quantile of it.
WaitTarget MeanUnder(double seconds) {
  WaitTarget t;
  t.seconds = seconds;
  return t;
}
WaitTarget QuantileUnder(double seconds, double q) {
  WaitTarget t = MeanUnder(seconds);
  t.quantile = q;
  return t;
}

}  // namespace

TEST_CASE("erlang: Erlang B matches the published traffic tables", "[unit][capacity]") {
  // Erlang B tables (e.g. those printed in ITU-T E.500-series handbooks): blocking at 2 E on 5 trunks, 10 E on 10.
  CHECK_THAT(ErlangB(5, 2.0), WithinAbs(0.0367, 0.00005));
  CHECK_THAT(ErlangB(10, 10.0), WithinAbs(0.2146, 0.00005));
  CHECK_THAT(ErlangB(1, 1.0), WithinAbs(0.5, 1e-12));  // a / (1 + a)
  CHECK(ErlangB(0, 3.0) == 1.0);
}

TEST_CASE("erlang: Erlang C matches published values and the closed forms", "[unit][capacity]") {
  // 10 erlangs on 11 agents: 68.21% of calls wait (the classic call-centre example).
  CHECK_THAT(ErlangC(11, 10.0), WithinAbs(0.6821, 0.00005));
  // 120 customers an hour, 3 minutes each (6 E), 10 servers: about 10% wait.
  CHECK_THAT(ErlangC(10, 6.0), WithinAbs(0.1013, 0.00005));
  // M/M/1: the chance to wait is the utilization.
  CHECK_THAT(ErlangC(1, 0.7), WithinAbs(0.7, 1e-12));
  // M/M/2 at a = 1: P0 = 1/3 and P(wait) = 1/3.
  CHECK_THAT(ErlangC(2, 1.0), WithinAbs(1.0 / 3, 1e-12));
  // An unstable queue always waits; no load never does.
  CHECK(ErlangC(3, 3.0) == 1.0);
  CHECK(ErlangC(3, 4.5) == 1.0);
  CHECK(ErlangC(3, 0.0) == 0.0);
  // Large pools do not overflow: 900 E on 1000 servers is a sensible probability.
  const double big = ErlangC(1000, 900.0);
  CHECK(big > 0.0);
  CHECK(big < 0.01);
}

TEST_CASE("erlang: waits and the threads needed", "[unit][capacity]") {
  // 20 tasks/s of 100 ms: 2 erlangs.
  const Load load{.lambda = 20, .mu = 10};
  // M/M/c mean wait C / (c mu - lambda): c = 3 -> (4/9) / 10 s; c = 4 -> (4/23) / 20 s.
  REQUIRE(MeanWait(3, load).has_value());
  CHECK_THAT(*MeanWait(3, load), WithinAbs(4.0 / 90, 1e-12));
  CHECK_THAT(*MeanWait(4, load), WithinAbs(4.0 / 460, 1e-12));
  CHECK_FALSE(MeanWait(2, load).has_value());  // 2 servers at 2 erlangs never catch up
  CHECK_FALSE(MeanWait(1, load).has_value());
  // M/M/1 closed form: Wq = rho / (mu - lambda).
  CHECK_THAT(*MeanWait(1, Load{.lambda = 5, .mu = 10}), WithinAbs(0.5 / 5, 1e-12));

  CHECK(*ServersNeeded(load, MeanUnder(0.020)) == 4);
  CHECK(*ServersNeeded(load, MeanUnder(0.050)) == 3);
  CHECK(*ServersNeeded(load, MeanUnder(0.005)) == 5);
  CHECK(*ServersNeeded(Load{.lambda = 0, .mu = 10}, MeanUnder(1)) == 0);
  // However long the target, the pool must keep up: more than a servers.
  CHECK(*ServersNeeded(load, MeanUnder(3600)) == 3);
  CHECK(*ServersNeeded(Load{.lambda = 0.5, .mu = 10}, MeanUnder(3600)) == 1);
  CHECK_FALSE(ServersNeeded(Load{.lambda = 1, .mu = 0}, MeanUnder(1)).has_value());

  // The search agrees with the wait it stops at, and the one before misses.
  for (double lambda : {0.3, 2.5, 17.0, 140.0, 2500.0}) {
    const Load l{.lambda = lambda, .mu = 1.7};
    const WaitTarget t = MeanUnder(0.25);
    const std::int64_t c = *ServersNeeded(l, t);
    INFO("lambda " << lambda << " needs " << c);
    CHECK(*MeanWait(c, l) <= 0.25);
    const std::optional<double> fewer = MeanWait(c - 1, l);
    CHECK((!fewer || *fewer > 0.25));
  }
}

TEST_CASE("erlang: wait quantiles", "[unit][capacity]") {
  const Load load{.lambda = 20, .mu = 10};
  // P(W > t) = C e^{-(c mu - lambda) t}: with c = 3, C = 4/9 and a drain of 10/s.
  const double p95 = *WaitQuantile(3, load, 0.95);
  CHECK_THAT(p95, WithinAbs(std::log((4.0 / 9) / 0.05) / 10, 1e-12));
  CHECK_THAT((4.0 / 9) * std::exp(-10 * p95), WithinAbs(0.05, 1e-12));
  // Fewer than 1 - p wait at all: the quantile is 0.
  CHECK(*WaitQuantile(5, load, 0.9) == 0.0);
  CHECK_FALSE(WaitQuantile(2, load, 0.5).has_value());
  // A 95th-percentile target asks for more threads than the same mean target.
  const WaitTarget mean = MeanUnder(0.05);
  const WaitTarget tail = QuantileUnder(0.05, 0.95);
  CHECK(*ServersNeeded(load, mean) == 3);
  CHECK(*ServersNeeded(load, tail) == 5);
  CHECK(*WaitQuantile(5, load, 0.95) <= 0.05);
  CHECK(*WaitQuantile(4, load, 0.95) > 0.05);
}

TEST_CASE("advice: a sentence that says what to add or remove", "[unit][capacity]") {
  // 200 tasks of 100 ms in 10 s: 20/s, 2 erlangs; a mean wait under 20 ms needs 4 threads.
  weft::store::TenantLoad load;
  load.tenant = "acme";
  load.enqueued = 200;
  load.started = 198;
  load.served = 196;
  load.service_ms_sum = 196 * 100.0;
  load.service_ms_squares = 196 * 100.0 * 100.0;
  const Hosts hosts{.live = 1, .threads = 3, .threads_per_host = 3};
  const WaitTarget target = MeanUnder(0.020);

  const TenantAdvice add = AdviseTenant(load, 10000, 3, target, hosts);
  CHECK_THAT(add.measured.lambda, WithinAbs(20.0, 1e-9));
  CHECK_THAT(add.measured.mean_service_s, WithinAbs(0.1, 1e-9));
  CHECK_THAT(add.measured.service_cv, WithinAbs(0.0, 1e-9));
  CHECK(add.threads_needed == 4);
  CHECK(add.change == 1);
  CHECK(add.hosts_change == 1);
  CHECK(add.verdict == Verdict::kAdd);
  CHECK(add.sentence ==
        "Tenant acme needs 4 worker threads to keep its mean queue wait under 20ms and has 3 (its queue waits 44ms "
        "now): add 1 worker thread (1 more host of 3 threads).");

  const TenantAdvice remove = AdviseTenant(load, 10000, 8, target, Hosts{.live = 2, .threads = 8, .threads_per_host = 4});
  CHECK(remove.verdict == Verdict::kRemove);
  CHECK(remove.change == -4);
  CHECK(remove.hosts_change == -1);
  CHECK(remove.sentence ==
        "Tenant acme needs 4 worker threads to keep its mean queue wait under 20ms and has 8: remove 4 worker threads "
        "(1 host of 4 threads fewer); its queue would wait 8.7ms.");

  const TenantAdvice keep = AdviseTenant(load, 10000, 4, target, hosts);
  CHECK(keep.verdict == Verdict::kKeep);
  CHECK(keep.change == 0);

  const TenantAdvice grows = AdviseTenant(load, 10000, 2, target, hosts);
  CHECK(grows.verdict == Verdict::kAdd);
  CHECK_FALSE(grows.wait_now_s.has_value());
  CHECK_THAT(grows.sentence, Catch::Contains("its queue grows without end now"));

  // Arrivals count what came in even when the threads fell behind.
  weft::store::TenantLoad behind = load;
  behind.started = 50;
  CHECK_THAT(AdviseTenant(behind, 10000, 3, target, hosts).measured.lambda, WithinAbs(20.0, 1e-9));
  // ... and the later tasks of work enqueued before the window.
  weft::store::TenantLoad earlier = load;
  earlier.enqueued = 0;
  CHECK_THAT(AdviseTenant(earlier, 10000, 3, target, hosts).measured.lambda, WithinAbs(19.8, 1e-9));

  weft::store::TenantLoad unknown = load;
  unknown.served = 0;
  unknown.service_ms_sum = unknown.service_ms_squares = 0;
  const TenantAdvice none = AdviseTenant(unknown, 10000, 3, target, hosts);
  CHECK(none.verdict == Verdict::kUnknown);
  CHECK_FALSE(none.threads_needed.has_value());

  // Over the tenants: 4 + 4 needed on 2 hosts of 3 threads: add 1 host (rounded up).
  const TotalAdvice total = AdviseTotal({add, add}, Hosts{.live = 2, .threads = 6, .threads_per_host = 3});
  CHECK(total.threads_needed == 8);
  CHECK(total.hosts_change == 1);
  CHECK(total.verdict == Verdict::kAdd);
  CHECK(total.sentence == "The tenants need 8 worker threads together and the 2 live hosts have 6: add 1 host of 3 threads.");
  const TotalAdvice fewer = AdviseTotal({add}, Hosts{.live = 3, .threads = 12, .threads_per_host = 4});
  CHECK(fewer.verdict == Verdict::kRemove);
  CHECK(fewer.hosts_change == -2);
}

TEST_CASE("advice: waits and targets as text", "[unit][capacity]") {
  CHECK(WaitText(0.0087) == "8.7ms");
  CHECK(WaitText(0.25) == "250ms");
  CHECK(WaitText(5) == "5.0s");
  CHECK(WaitText(125) == "2m 5s");
  CHECK(TargetText(WaitTarget{}) == "mean queue wait");
  CHECK(TargetText(QuantileUnder(1, 0.95)) == "95th-percentile queue wait");
  CHECK(TargetText(QuantileUnder(1, 0.999)) == "99.9th-percentile queue wait");
}
