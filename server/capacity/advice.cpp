#include "weft/server/capacity/advice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace weft::capacity {
namespace {

std::string Plural(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Threads(std::int64_t n) { return Plural(n, "worker thread", "worker threads"); }

// "2 hosts of 4 threads"
std::string HostsOf(std::int64_t n, std::int64_t per_host) {
  return Plural(n, "host", "hosts") + " of " + Plural(per_host, "thread", "threads");
}

// What `change` threads come to in hosts: ", about 1 more host of 4 threads".
std::string InHosts(std::int64_t change, std::int64_t hosts_change, const Hosts& hosts) {
  if (hosts.threads_per_host <= 0) return " (no host is live now to size hosts by)";
  if (change > 0) return " (" + Plural(hosts_change, "more host", "more hosts") + " of " +
                         Plural(hosts.threads_per_host, "thread", "threads") + ")";
  if (hosts_change < 0) return " (" + HostsOf(-hosts_change, hosts.threads_per_host) + " fewer)";
  return " (less than a host of " + Plural(hosts.threads_per_host, "thread", "threads") + ")";
}

// Threads in whole hosts: up to add, down to remove (a part of a host cannot be removed).
std::int64_t HostsFor(std::int64_t change, const Hosts& hosts) {
  if (hosts.threads_per_host <= 0 || change == 0) return 0;
  if (change > 0) return (change + hosts.threads_per_host - 1) / hosts.threads_per_host;
  return -((-change) / hosts.threads_per_host);
}

std::string Fixed(double v, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

}  // namespace

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAdd: return "add";
    case Verdict::kRemove: return "remove";
    case Verdict::kKeep: return "keep";
    case Verdict::kUnknown: return "unknown";
  }
  return "unknown";
}

std::string WaitText(double seconds) {
  const double ms = seconds * 1000;
  if (ms < 10) return Fixed(ms, 1) + "ms";
  if (ms < 1000) return Fixed(ms, 0) + "ms";
  if (seconds < 60) return Fixed(seconds, 1) + "s";
  const auto whole = static_cast<std::int64_t>(std::llround(seconds));
  return std::to_string(whole / 60) + "m " + std::to_string(whole % 60) + "s";
}

std::string TargetText(const WaitTarget& target) {
  if (!target.quantile) return "mean queue wait";
  const double percent = *target.quantile * 100;
  const bool whole = std::fabs(percent - std::round(percent)) < 1e-9;
  return (whole ? Fixed(percent, 0) : Fixed(percent, 1)) + "th-percentile queue wait";
}

Measured Measure(const store::TenantLoad& load, std::int64_t window_ms) {
  Measured m;
  const double window_s = static_cast<double>(std::max<std::int64_t>(window_ms, 1)) / 1000;
  const std::int64_t arrivals = std::max(load.enqueued + load.retried, load.started);
  m.lambda = static_cast<double>(arrivals) / window_s;
  if (load.served > 0) {
    const double n = static_cast<double>(load.served);
    const double mean_ms = load.service_ms_sum / n;
    m.mean_service_s = mean_ms / 1000;
    const double variance = std::max(0.0, load.service_ms_squares / n - mean_ms * mean_ms);
    m.service_cv = mean_ms > 0 ? std::sqrt(variance) / mean_ms : 0;
  }
  if (load.waited > 0) m.mean_wait_s = load.wait_ms_sum / static_cast<double>(load.waited) / 1000;
  return m;
}

TenantAdvice AdviseTenant(const store::TenantLoad& load, std::int64_t window_ms, std::int64_t threads_now,
                          const WaitTarget& target, const Hosts& hosts) {
  TenantAdvice a;
  a.tenant = load.tenant;
  a.measured = Measure(load, window_ms);
  a.threads_now = threads_now;
  const std::string who = "Tenant " + load.tenant;
  if (a.measured.lambda <= 0) {
    // Nothing came in: whatever serves it now is idle.
    a.threads_needed = 0;
    a.wait_needed_s = 0.0;
    a.wait_now_s = 0.0;
    a.change = -threads_now;
    a.hosts_change = HostsFor(a.change, hosts);
    a.verdict = threads_now > 0 ? Verdict::kRemove : Verdict::kKeep;
    a.sentence = who + ": no task arrived in the window, so it needs no worker threads" +
                 (threads_now > 0 ? " and has " + std::to_string(threads_now) + ": remove " +
                                        std::to_string(threads_now) + InHosts(a.change, a.hosts_change, hosts) + "."
                                  : ".");
    return a;
  }
  if (a.measured.mean_service_s <= 0) {
    a.verdict = Verdict::kUnknown;
    a.sentence = who + ": no task of it finished in the window, so how long its tasks take is not known yet; "
                       "no advice (try a longer window).";
    return a;
  }
  const Load model{.lambda = a.measured.lambda, .mu = 1 / a.measured.mean_service_s};
  a.erlangs = model.erlangs();
  a.threads_needed = ServersNeeded(model, target);
  a.wait_now_s = ExpectedWait(threads_now, model, target);
  if (!a.threads_needed) {
    a.verdict = Verdict::kUnknown;
    a.sentence = who + ": no number of worker threads keeps its " + TargetText(target) + " under " +
                 WaitText(target.seconds) + "; no advice.";
    return a;
  }
  const std::int64_t needed = *a.threads_needed;
  a.wait_needed_s = ExpectedWait(needed, model, target);
  a.change = needed - threads_now;
  a.hosts_change = HostsFor(a.change, hosts);
  const std::string need = who + " needs " + Threads(needed) + " to keep its " + TargetText(target) + " under " +
                           WaitText(target.seconds) + " and has " + std::to_string(threads_now);
  if (a.change > 0) {
    a.verdict = Verdict::kAdd;
    const std::string now = a.wait_now_s ? "its queue waits " + WaitText(*a.wait_now_s) + " now"
                                         : "its queue grows without end now";
    a.sentence = need + " (" + now + "): add " + Threads(a.change) + InHosts(a.change, a.hosts_change, hosts) + ".";
  } else if (a.change < 0) {
    a.verdict = Verdict::kRemove;
    a.sentence = need + ": remove " + Threads(-a.change) + InHosts(a.change, a.hosts_change, hosts) +
                 "; its queue would wait " + WaitText(*a.wait_needed_s) + ".";
  } else {
    a.verdict = Verdict::kKeep;
    a.sentence = need + ": keep them.";
  }
  return a;
}

TotalAdvice AdviseTotal(const std::vector<TenantAdvice>& tenants, const Hosts& hosts) {
  TotalAdvice t;
  t.threads_now = hosts.threads;
  bool any = false;
  for (const TenantAdvice& a : tenants) {
    if (!a.threads_needed) continue;
    any = true;
    t.threads_needed += *a.threads_needed;
  }
  if (!any) {
    t.verdict = Verdict::kUnknown;
    t.sentence = "No tenant has measurements enough in the window for advice.";
    return t;
  }
  const std::int64_t change = t.threads_needed - t.threads_now;
  t.hosts_change = HostsFor(change, hosts);
  const std::string need = "The tenants need " + Threads(t.threads_needed) + " together and the " +
                           Plural(hosts.live, "live host has ", "live hosts have ") + std::to_string(t.threads_now);
  if (hosts.threads_per_host <= 0) {
    t.verdict = change > 0 ? Verdict::kAdd : Verdict::kKeep;
    t.sentence = need + ": start hosts with " + Threads(t.threads_needed) + " in all.";
  } else if (t.hosts_change > 0) {
    t.verdict = Verdict::kAdd;
    t.sentence = need + ": add " + HostsOf(t.hosts_change, hosts.threads_per_host) + ".";
  } else if (t.hosts_change < 0) {
    t.verdict = Verdict::kRemove;
    t.sentence = need + ": remove " + HostsOf(-t.hosts_change, hosts.threads_per_host) + ".";
  } else {
    t.verdict = Verdict::kKeep;
    t.sentence = need + ": keep the hosts as they are.";
  }
  return t;
}

}  // namespace weft::capacity
