// weft capacity: how many worker threads and hosts each tenant needs to keep
// its queue wait under a target (server.capacity, docs/capacity.md).
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "weft/catalog/entities.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

// A duration flag ("10m", "5s", "250ms") in milliseconds from `min_ms` to
// `max_ms` (`range` says it to a person), or a usage error.
Status DurationFlag(Context& ctx, const ParsedArgs& args, const std::string& flag, const std::string& example,
                    std::int64_t min_ms, std::int64_t max_ms, const std::string& range, json* body, const char* key) {
  if (!args.Has(flag)) return Status::Ok();
  const std::string text = args.Get(flag);
  const std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(text));
  if (!ms || *ms < min_ms || *ms > max_ms)
    return ctx.UsageError(flag + " needs a duration " + range + " such as " + example + ", got '" + text + "'");
  (*body)[key] = *ms;
  return Status::Ok();
}

// A number from the reply, with `decimals` digits, or "-".
std::string Number(const json& obj, const char* key, int decimals) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return kMissing;
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, it->get<double>());
  return text;
}

// A wait in ms from the reply: "7.6ms", "1.2s"; null is a queue that grows without end.
std::string WaitCell(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return kMissing;
  if (it->is_null()) return "grows";
  if (!it->is_number()) return kMissing;
  const double ms = it->get<double>();
  if (ms < 10) return Number(obj, key, 1) + "ms";
  return Duration(std::llround(ms));
}

Status Capacity(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  constexpr std::int64_t kDay = 24LL * 3600 * 1000;
  WEFT_RETURN_IF_ERROR(
      DurationFlag(ctx, args, "--window", "10m or 1h", 1000, 30 * kDay, "from 1s to 30d", &body, "window_ms"));
  WEFT_RETURN_IF_ERROR(DurationFlag(ctx, args, "--target-wait", "5s or 500ms", 1, kDay, "from 1ms to 1d", &body,
                                    "target_wait_ms"));
  if (args.Has("--quantile")) {
    const std::string text = args.Get("--quantile");
    char* end = nullptr;
    const double q = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(q > 0 && q < 1))
      return ctx.UsageError("--quantile needs a number between 0 and 1 such as 0.95, got '" + text + "'");
    body["quantile"] = q;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("server.capacity", std::move(body)));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& target = reply.value("target", json::object());
  const json& hosts = reply.value("hosts", json::object());
  KeyValues kv;
  kv.Add("window", "the last " + Duration(Int(reply, "window_ms")) + ", " + Text(reply, "model") + " model");
  kv.Add("target", Text(target, "text") + " under " + Duration(Int(target, "wait_ms")));
  kv.Add("hosts", Count(Int(hosts, "live"), "live host", "live hosts") + ", " +
                      Count(Int(hosts, "threads"), "worker thread", "worker threads"));
  kv.Print(ctx.out());
  ctx.out() << "\n";
  const json& tenants = reply.value("tenants", json::array());
  if (tenants.empty()) {
    ctx.out() << "no task arrived or ran in the window: nothing to advise on\n";
    return Status::Ok();
  }
  Table table({"TENANT", "ARRIVALS/S", "SERVICE", "CV", "ERLANGS", "WAITED", "THREADS", "NEEDED", "WAIT NOW",
               "WAIT THEN", "ADVICE"});
  for (std::size_t column : {1, 2, 3, 4, 5, 6, 7, 8, 9}) table.AlignRight(column);
  for (const json& t : tenants) {
    const std::string change = Text(t, "change");
    const std::string verdict = Text(t, "verdict");
    table.AddRow({Printable(Text(t, "tenant")), Number(t, "arrivals_per_s", 2), WaitCell(t, "mean_service_ms"),
                  Number(t, "service_cv", 2), Number(t, "erlangs", 2), WaitCell(t, "measured_wait_ms"),
                  Text(t, "threads_now"), Text(t, "threads_needed"), WaitCell(t, "wait_now_ms"),
                  WaitCell(t, "wait_needed_ms"),
                  verdict == "add" ? "add " + change : verdict == "remove" ? "remove " + change.substr(1) : verdict});
  }
  table.Print(ctx.out());
  ctx.out() << "\n";
  for (const json& t : tenants) ctx.out() << Printable(Text(t, "advice")) << "\n";
  if (reply.contains("total")) ctx.out() << Printable(Text(reply["total"], "advice")) << "\n";
  return Status::Ok();
}

}  // namespace

void RegisterCapacityCommands(CommandTable& table) {
  table.Add({.noun = "capacity",
             .verb = "",
             .summary = "Say how many worker threads and hosts each tenant needs (M/M/c model).",
             .description =
                 "From the tasks that arrived and ran over the window (arrivals per second and\n"
                 "how long a task runs, per tenant), the M/M/c (Erlang C) model gives the fewest\n"
                 "worker threads that keep the mean queue wait (or, with --quantile, that\n"
                 "quantile of it) under the target; compared with the threads the worker split\n"
                 "gives each tenant now, one sentence says what to add or remove, and one the\n"
                 "hosts for every tenant together. Admins; a tenant admin sees their tenant.\n"
                 "docs/capacity.md states the model and when it is wrong.",
             .flags = {{.name = "--window", .value_name = "DURATION",
                        .help = "how far back to measure (default 10m; from 1s to 30d)"},
                       {.name = "--target-wait", .value_name = "DURATION",
                        .help = "the queue wait to stay under (default 5s)"},
                       {.name = "--quantile", .value_name = "Q",
                        .help = "size for that quantile of the wait (0.95: 95 in 100 tasks wait less), not the mean"}},
             .args = {},
             .handler = &Capacity});
}

}  // namespace weft::cli
