// weft events: follows weftd's events endpoint (docs/protocol.md, `events`),
// one line per event, until interrupted. The following itself is the client
// library's client::EventStream: it finds the leader's events endpoint,
// survives a restart of weftd (and a handshake refused meanwhile), moves to
// another weftd when that one leads, sends a user's subscription again when
// they create a cluster, and says of each event whether events were missed
// before it. This command words what the stream tells it for people: where
// it follows the events, when the connection went away and came back (once
// per outage), a move to another weftd, and a gap in the events (one line on
// stderr: the state must then be read again). A key weftd no longer knows
// (revoked, its user deleted) ends it with an error.
#include <cstdint>
#include <ctime>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/client/events.hpp"

namespace weft::cli {
namespace {

constexpr int kWaitMs = 1000;      // the longest one wait for an event (the stream looks around meanwhile)
constexpr int kAskAgainMs = 2000;  // while away, or quiet: how often to ask weftd where its events are

std::string IdText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  return "";
}

std::string UtcTime(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// One line for people: what happened, without the topic's plumbing.
std::string Describe(const json& e) {
  const std::string type = e.value("type", "");
  std::string line;
  if (type == "job") {
    line = "job " + IdText(e["job_id"]) + " " + e.value("operation", "") + " " + e.value("status", "") + ": " +
           std::to_string(e.value("succeeded", 0)) + "/" + std::to_string(e.value("total", 0)) + " done, " +
           std::to_string(e.value("failed", 0)) + " failed (cluster " + IdText(e["cluster_id"]) + ")";
  } else if (type == "cluster.created") {
    line = "cluster " + e.value("name", "") + " (" + IdText(e["cluster_id"]) + ") created by " + e.value("owner", "") +
           ", job " + IdText(e["job_id"]);
  } else if (type == "cluster") {
    line = "cluster " + e.value("name", "") + " (" + IdText(e["cluster_id"]) + ") " + e.value("status", "");
  } else if (type == "task") {
    line = "task " + IdText(e["task_id"]) + " " + e.value("action", "") + " " + e.value("plugin", "") + " " +
           e.value("state", "");
    if (e.value("attempt", 0) > 0) line += " (attempt " + std::to_string(e.value("attempt", 0)) + ")";
    if (!e.value("host_id", "").empty()) line += " on host " + e.value("host_id", "");
  } else if (type == "task.progress") {
    line = "task " + IdText(e["task_id"]) + " at " + std::to_string(e.value("percent", 0)) + "%";
  } else if (type == "host") {
    line = "host " + e.value("host_id", "") + " " + e.value("event", "");
  } else {
    line = type.empty() ? "event" : type;
  }
  if (!e.value("message", "").empty()) line += ": " + e.value("message", "");
  return UtcTime(e.value("at_ms", std::int64_t{0})) + "  " + line;
}

// What to subscribe to, and which events of those to show.
struct Filter {
  std::vector<std::string> prefixes;
  std::string job_id;               // with --job: only that job's events
  std::set<std::int64_t> task_ids;  // ...and its tasks'
  std::set<std::int64_t> others;    // tasks of the cluster's other jobs, asked about once
};

Result<Filter> MakeFilter(Context& ctx, const ParsedArgs& args) {
  Filter f;
  std::string cluster_id;
  if (args.Has("--job")) {
    WEFT_ASSIGN_OR_RETURN(json job, ctx.Call("job.get", {{"job", args.Get("--job")}}));
    f.job_id = IdText(job["job"]["id"]);
    cluster_id = IdText(job["job"]["cluster_id"]);
    for (const json& t : job["job"].value("tasks", json::array())) f.task_ids.insert(t.value("id", std::int64_t{0}));
  }
  if (args.Has("--cluster")) {
    WEFT_ASSIGN_OR_RETURN(json cluster, ctx.Call("cluster.get", {{"cluster", args.Get("--cluster")}}));
    const std::string id = IdText(cluster["cluster"]["id"]);
    if (!cluster_id.empty() && id != cluster_id)
      return ctx.UsageError("job " + f.job_id + " is not a job of cluster '" + args.Get("--cluster") + "'");
    cluster_id = id;
  }
  if (cluster_id.empty()) {
    // Everything this caller may see (weftd narrows it to the caller's role).
    // The stream sends it again on each cluster.created, so that it covers the new cluster too.
    f.prefixes.push_back(ctx.options().tenant.empty() ? "" : ctx.options().tenant + "/");
    return f;
  }
  // The credential's tenant is known once a call has loaded it (the lookups above).
  std::string tenant = ctx.options().tenant;
  if (tenant.empty()) tenant = ctx.credential() && !ctx.credential()->tenant.empty() ? ctx.credential()->tenant : "default";
  for (const char* kind : {"job/", "cluster/", "task/"}) f.prefixes.push_back(tenant + "/" + kind + cluster_id + "/");
  return f;
}

bool Shown(Context& ctx, Filter& f, const json& e) {
  if (f.job_id.empty()) return true;
  const std::string type = e.value("type", "");
  if (type == "job") return IdText(e["job_id"]) == f.job_id;
  if (type != "task" && type != "task.progress") return true;  // the cluster's own transitions
  const std::int64_t id = e.value("task_id", std::int64_t{0});
  if (!f.task_ids.count(id) && !f.others.count(id)) {
    // A task the job added since (a node created again): ask once more.
    Result<json> job = ctx.Call("job.get", {{"job", f.job_id}});
    if (job.ok())
      for (const json& t : (*job)["job"].value("tasks", json::array()))
        f.task_ids.insert(t.value("id", std::int64_t{0}));
    if (!f.task_ids.count(id)) f.others.insert(id);
  }
  return f.task_ids.count(id) != 0;
}

// What the command says on stderr of the stream's connection: once per outage, not once per try.
class Notices {
 public:
  explicit Notices(Context& ctx) : ctx_(ctx) {}

  void operator()(const client::StreamChange& change) {
    using Kind = client::StreamChange::Kind;
    switch (change.kind) {
      case Kind::kConnected:
        ctx_.err() << (ever_ ? "reconnected to weftd's events at " : "following weftd's events at ")
                   << change.endpoint << '\n' << std::flush;
        ever_ = true;
        away_said_ = false;
        break;
      case Kind::kLost:
        if (ever_) {
          WentAway(change.why);
        } else if (!away_said_) {
          away_said_ = true;
          ctx_.err() << "cannot follow weftd's events yet: " << change.why << "; trying again\n" << std::flush;
        }
        break;
      case Kind::kMoved:
        if (change.was_connected)
          ctx_.err() << "weftd's events are now published at " << change.endpoint
                     << " (another weftd leads); following there\n"
                     << std::flush;
        break;
    }
  }

 private:
  void WentAway(const std::string& why) {
    if (away_said_) return;
    away_said_ = true;
    ctx_.err() << "weftd's events endpoint went away" << (why.empty() ? "" : " (" + why + ")")
               << "; reconnecting (events meanwhile are missed)\n"
               << std::flush;
  }

  Context& ctx_;
  bool ever_ = false;       // connected once: a new connection is a reconnection
  bool away_said_ = false;  // this outage was told
};

Status Events(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(Filter filter, MakeFilter(ctx, args));
  // Asked here first: when weftd does not answer, the error says what is at --server.
  WEFT_RETURN_IF_ERROR(ctx.Call("server.status", json::object()).status());
  Notices notices(ctx);
  zmq::context_t zmq(1);
  client::EventStream stream(
      zmq, ctx.ClientOptions(), filter.prefixes,
      {.check_ms = kAskAgainMs, .on_change = [&notices](const client::StreamChange& c) { notices(c); }});
  WEFT_RETURN_IF_ERROR(stream.Open());
  while (true) {
    Result<std::optional<client::ReceivedEvent>> next = stream.Next(kWaitMs);
    if (!next.ok()) {
      // A key weftd no longer knows (revoked, its user or tenant deleted) never gets in again.
      if (next.status().code() == Code::kDenied) return next.status().WithContext("stopped following weftd's events");
      return next.status();
    }
    if (!*next) continue;
    client::ReceivedEvent& got = **next;
    if (got.seen.gap()) {
      ctx.err() << "events were missed ("
                << (got.seen.restarted ? std::string("weftd's numbering started anew: a restart or a new leader")
                                       : std::to_string(got.seen.missed) + " on " + got.topic)
                << "); read the state again (weft job show, weft cluster get)\n"
                << std::flush;
    }
    json& e = got.event;
    if (!Shown(ctx, filter, e)) continue;
    if (ctx.json_output()) {
      e["topic"] = got.topic;
      ctx.out() << e.dump() << '\n' << std::flush;
    } else {
      ctx.out() << Printable(Describe(e)) << '\n' << std::flush;
    }
  }
}

}  // namespace

void RegisterEventsCommands(CommandTable& table) {
  table.Add({.noun = "events",
             .verb = "",
             .summary = "Follow job, cluster, task and host events as they happen.",
             .description =
                 "One line per event until interrupted (-o json: one JSON object per line, with\n"
                 "its topic). Without options: every event you may see (a tenant admin their\n"
                 "tenant's, a user those of the clusters they own, and of each cluster they\n"
                 "create later from just after its `created by` line: the job's first events\n"
                 "may come before, see `weft job show`). When weftd restarts it says so and\n"
                 "reconnects by itself; a key weftd no longer knows (revoked) ends it with exit\n"
                 "code 1. Events missed (published while away, or dropped for a slow reader)\n"
                 "are told in one line on stderr: read the state back then with `weft job show`\n"
                 "or `weft cluster get`.",
             .flags = {{.name = "--cluster", .value_name = "C", .help = "only this cluster's events (name or id)"},
                       {.name = "--job", .value_name = "J", .help = "only this job's events and its tasks'"}},
             .args = {},
             .handler = &Events});
}

}  // namespace weft::cli
