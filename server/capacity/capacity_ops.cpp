#include "weft/server/capacity/capacity_ops.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "weft/server/capacity/advice.hpp"

namespace weft::capacity {
namespace {

using api::Call;
using api::Response;
using api::Role;
using json = nlohmann::json;

constexpr std::int64_t kDefaultWindowMs = 10 * 60 * 1000;
constexpr std::int64_t kMinWindowMs = 1000;
constexpr std::int64_t kMaxWindowMs = 30LL * 24 * 3600 * 1000;
constexpr std::int64_t kDefaultTargetMs = 5000;
constexpr std::int64_t kMaxTargetMs = 24LL * 3600 * 1000;

struct Request {
  std::int64_t window_ms = kDefaultWindowMs;
  WaitTarget target;
};

// An optional integer of the request from `min` to `max`; the sentence names
// it as the user knows it (`what`), not by its field.
Status ReadInt(const json& body, const char* key, const std::string& what, std::int64_t min, std::int64_t max,
               std::int64_t* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max)
    return Status::Invalid(what + " must be a whole number of milliseconds from " + std::to_string(min) + " to " +
                           std::to_string(max) + ", got " + it->dump());
  *out = it->get<std::int64_t>();
  return Status::Ok();
}

Result<Request> ParseRequest(const json& body) {
  Request r;
  std::int64_t target_ms = kDefaultTargetMs;
  WEFT_RETURN_IF_ERROR(ReadInt(body, "window_ms", "the window", kMinWindowMs, kMaxWindowMs, &r.window_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(body, "target_wait_ms", "the target wait", 1, kMaxTargetMs, &target_ms));
  r.target.seconds = static_cast<double>(target_ms) / 1000;
  auto q = body.find("quantile");
  if (q != body.end() && !q->is_null()) {
    if (!q->is_number() || !(q->get<double>() > 0 && q->get<double>() < 1))
      return Status::Invalid("the quantile must be a number between 0 and 1 (0.95 for the 95th percentile), got " +
                             q->dump());
    r.target.quantile = q->get<double>();
  }
  return r;
}

// A duration in ms for the reply: whole milliseconds, or null for "grows without end".
json Ms(const std::optional<double>& seconds) {
  if (!seconds) return nullptr;
  return std::round(*seconds * 1000 * 10) / 10;
}

class CapacityOps {
 public:
  explicit CapacityOps(CapacityOpsDeps deps) : d_(deps) {}

  Response Capacity(const Call& call);

 private:
  // The live hosts, and the threads the worker split gives each tenant on
  // them (its own, plus those that serve any tenant) while every tenant of
  // `measured` has tasks: a tenant that went quiet a minute ago is sized by
  // the share it gets when busy, not by the none it has now.
  Hosts LiveHosts(const std::set<std::string>& measured, std::map<std::string, std::int64_t>* threads_by_tenant,
                  std::int64_t* shared);

  CapacityOpsDeps d_;
};

Hosts CapacityOps::LiveHosts(const std::set<std::string>& measured, std::map<std::string, std::int64_t>* by_tenant,
                             std::int64_t* shared) {
  Hosts hosts;
  for (const auto& [id, h] : d_.hosts.all()) {
    if (!d_.hosts.Live(h)) continue;
    ++hosts.live;
    hosts.threads += h.record.capacity;
  }
  for (const auto& [host, tenants] : d_.hosts.SplitWith(measured)) {
    for (const auto& [tenant, threads] : tenants) {
      if (tenant.empty())
        *shared += threads;
      else
        (*by_tenant)[tenant] += threads;
    }
  }
  if (hosts.live > 0) hosts.threads_per_host = std::max<std::int64_t>(1, (hosts.threads + hosts.live / 2) / hosts.live);
  return hosts;
}

json TenantJson(const TenantAdvice& a, const store::TenantLoad& load) {
  return {{"tenant", a.tenant},
          {"arrivals_per_s", std::round(a.measured.lambda * 1000) / 1000},
          {"tasks_enqueued", load.enqueued},
          {"attempts_started", load.started},
          {"attempts_retried", load.retried},
          {"attempts_finished", load.served},
          {"mean_service_ms", std::round(a.measured.mean_service_s * 1000 * 10) / 10},
          {"service_cv", std::round(a.measured.service_cv * 1000) / 1000},
          {"erlangs", std::round(a.erlangs * 1000) / 1000},
          {"measured_wait_ms", Ms(a.measured.mean_wait_s)},
          {"threads_now", a.threads_now},
          {"threads_needed", a.threads_needed ? json(*a.threads_needed) : json(nullptr)},
          {"wait_now_ms", Ms(a.wait_now_s)},
          {"wait_needed_ms", Ms(a.wait_needed_s)},
          {"change", a.change},
          {"hosts_change", a.hosts_change},
          {"verdict", VerdictName(a.verdict)},
          {"advice", a.sentence}};
}

Response CapacityOps::Capacity(const Call& call) {
  auto request = ParseRequest(call.request->body);
  if (!request.ok()) return Response::Error(request.status());
  const Request& r = *request;
  const std::int64_t now = d_.clock.NowMs();
  // A superadmin sizes the whole pool; anyone else only their own tenant.
  const bool everyone = call.principal.role == Role::kSuperadmin;
  auto loads = d_.store.MeasureLoad(now - r.window_ms, everyone ? std::string() : call.principal.tenant);
  if (!loads.ok()) return Response::Error(loads.status().WithContext("cannot read the tasks of the window"));

  std::set<std::string> measured;
  for (const store::TenantLoad& load : *loads) measured.insert(load.tenant);
  std::map<std::string, std::int64_t> threads_by_tenant;
  std::int64_t shared = 0;
  const Hosts hosts = LiveHosts(measured, &threads_by_tenant, &shared);
  std::vector<TenantAdvice> advice;
  json tenants = json::array();
  for (const store::TenantLoad& load : *loads) {
    const std::int64_t threads = shared + threads_by_tenant[load.tenant];
    advice.push_back(AdviseTenant(load, r.window_ms, threads, r.target, hosts));
    tenants.push_back(TenantJson(advice.back(), load));
  }
  json reply = {{"model", "M/M/c (Erlang C)"},
                {"window_ms", r.window_ms},
                {"since_ms", now - r.window_ms},
                {"until_ms", now},
                {"target", {{"wait_ms", std::llround(r.target.seconds * 1000)},
                            {"measure", r.target.quantile ? "quantile" : "mean"},
                            {"quantile", r.target.quantile ? json(*r.target.quantile) : json(nullptr)},
                            {"text", TargetText(r.target)}}},
                {"hosts", {{"live", hosts.live}, {"threads", hosts.threads},
                           {"threads_per_host", hosts.threads_per_host}, {"shared_threads", shared}}},
                {"tenants", std::move(tenants)}};
  // The hosts serve every tenant: only a superadmin, who sees them all, gets the total.
  if (everyone) {
    const TotalAdvice total = AdviseTotal(advice, hosts);
    reply["total"] = {{"threads_needed", total.threads_needed},
                      {"threads_now", total.threads_now},
                      {"hosts_change", total.hosts_change},
                      {"verdict", VerdictName(total.verdict)},
                      {"advice", total.sentence}};
  }
  return Response::Ok(std::move(reply));
}

}  // namespace

void RegisterCapacityOps(api::Router& router, CapacityOpsDeps deps) {
  auto impl = std::make_shared<CapacityOps>(deps);
  router.Add("server.capacity", {Role::kAdmin, Role::kSuperadmin}, {api::Endpoint::kApi},
             [impl](const Call& c) { return impl->Capacity(c); }, api::Effect::kReads,
             {"window_ms", "target_wait_ms", "quantile"});
}

}  // namespace weft::capacity
