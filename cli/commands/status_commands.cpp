// weft status: what the server is, where it listens, and what it is doing.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

// Several weftd on one database (docs/failover.md): who leads, who follows, the epoch.
void AddLeadership(KeyValues& kv, const json& l) {
  const json empty = json::object();
  const json& leader = l.contains("leader") && l["leader"].is_object() ? l["leader"] : empty;
  const json& leader_endpoints = leader.contains("endpoints") ? leader["endpoints"] : empty;
  kv.Add("this weftd", Text(l, "self") + " (" + Text(l, "role") + ")");
  kv.Add("leader", Text(leader, "node") + " at " + Text(leader_endpoints, "api") + ", epoch " + Text(l, "epoch") +
                       ", renewed " + Duration(Int(leader, "renewed_ms_ago")) + " ago");
  std::string followers;
  if (l.contains("followers") && l["followers"].is_array()) {
    for (const json& f : l["followers"]) {
      const json& e = f.contains("endpoints") ? f["endpoints"] : empty;
      if (!followers.empty()) followers += ", ";
      followers += Text(f, "node") + " at " + Text(e, "api") + (f.value("live", false) ? "" : " (not seen lately)");
    }
  }
  kv.Add("followers", followers.empty() ? "none" : followers);
}

// server.status's requests per op, compactly: the total, then the busiest ops with
// their counts ("412: host.heartbeat 310, task.finish 42, ..., 3 other ops 7").
std::string RequestsText(const json& requests) {
  if (!requests.is_object() || requests.empty()) return "none";
  std::vector<std::pair<std::int64_t, std::string>> by_count;
  std::int64_t total = 0;
  for (const auto& [op, n] : requests.items()) {
    const std::int64_t count = n.is_number() ? n.get<std::int64_t>() : 0;
    total += count;
    by_count.emplace_back(count, op);
  }
  // Busiest first; ops with the same count by name.
  std::sort(by_count.begin(), by_count.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  constexpr std::size_t kShown = 6;
  std::string out = std::to_string(total) + ":";
  std::int64_t rest = 0;
  for (std::size_t i = 0; i < by_count.size(); ++i) {
    if (i < kShown) {
      out += (i ? ", " : " ") + by_count[i].second + " " + std::to_string(by_count[i].first);
    } else {
      rest += by_count[i].first;
    }
  }
  if (by_count.size() > kShown)
    out += ", " + Count(static_cast<std::int64_t>(by_count.size() - kShown), "other op", "other ops") + " " +
           std::to_string(rest) + " (-o json lists every op)";
  return out;
}

// store.health of server.status: "ok", or since when commits fail and why.
std::string HealthText(const json& h, std::int64_t now_ms) {
  if (!h.is_object()) return "?";
  if (h.value("state", std::string()) != "failing") {
    if (!h.contains("recovered_at_ms")) return "ok";
    return "ok (commits failed until " + Duration(now_ms - Int(h, "recovered_at_ms")) + " ago" +
           (h.contains("last_failure") ? ": " + Text(h, "last_failure") : std::string()) + ")";
  }
  return "FAILING for " + Duration(now_ms - Int(h, "since_ms")) + ", " + Text(h, "batches_rolled_back") +
         " batches (" + Text(h, "requests_rolled_back") + " requests) rolled back" +
         (h.contains("last_failure") ? "; the last, " + Duration(now_ms - Int(h, "last_failure_at_ms")) +
                                           " ago: " + Text(h, "last_failure")
                                     : std::string()) +
         (h.value("disk_full", false) ? " (free space on the disk holding the data dir)" : "");
}

Status ShowStatus(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("server.status"));
  const json& s = reply;
  if (ctx.json_output()) {
    ctx.PrintJson(s);
    return Status::Ok();
  }
  const json empty = json::object();
  const json& endpoints = s.contains("endpoints") ? s["endpoints"] : empty;
  const json& store = s.contains("store") ? s["store"] : empty;
  const json& hosts = s.contains("hosts") ? s["hosts"] : empty;
  const json& tasks = s.contains("tasks") ? s["tasks"] : empty;

  KeyValues kv;
  // The server's own clock: when the ages below are measured from.
  const std::int64_t now_ms = Int(s, "started_at_ms", 0) + Int(s, "uptime_ms", 0);
  const json& health = store.contains("health") ? store["health"] : empty;
  // First, before anything looks healthy: weftd cannot write what it is asked.
  const bool failing = health.value("state", std::string()) == "failing";
  if (failing) kv.Add("WARNING", "weftd cannot commit to its store: " + HealthText(health, now_ms));
  kv.Add("server", "weftd " + Text(s, "version") + " (protocol " + Text(s, "protocol") + "), pid " + Text(s, "pid") +
                       (s.contains("uptime_ms") ? ", up " + Duration(Int(s, "uptime_ms")) : std::string()));
  // (Only a superadmin is told where the server keeps its files.)
  if (s.contains("data_dir")) kv.Add("data dir", Text(s, "data_dir"));
  // A follower (several weftd on one database) says only who it is and who leads:
  // the store, hosts, tasks and requests are the leader's to tell.
  const bool follower = !s.contains("store");
  if (follower) {
    kv.Add("store", "n/a, follower (the leader's weft status has the store, hosts, tasks and requests)");
  } else {
    // The WAL figure is SQLite's; PostgreSQL keeps its own.
    const bool wal = store.value("backend", std::string("sqlite")) == "sqlite" && store.contains("wal_pages");
    kv.Add("store", (store.contains("path") ? Text(store, "path") + " " : std::string()) + "(schema " +
                        Text(store, "schema_version") + (wal ? ", WAL " + Text(store, "wal_pages") + " pages" : "") +
                        ")");
    if (store.contains("health") && !failing) kv.Add("store health", HealthText(health, now_ms));
  }
  kv.Add("api", Text(endpoints, "api"));
  kv.Add("provisioner", Text(endpoints, "provisioner"));
  kv.Add("events", Text(endpoints, "events"));
  if (endpoints.contains("metrics")) kv.Add("metrics", Text(endpoints, "metrics"));
  if (!follower) {
    kv.Add("hosts", Text(hosts, "registered") + " registered, " + Text(hosts, "live") + " live");
    kv.Add("tasks", Text(tasks, "queued") + " queued, " + Text(tasks, "leased") + " leased, " +
                        Text(tasks, "succeeded") + " succeeded, " + Text(tasks, "failed") + " failed");
    if (s.contains("requests")) kv.Add("requests", RequestsText(s["requests"]));
  }
  if (s.contains("retention") && s["retention"].is_object()) {
    const json& r = s["retention"];
    const json& removed = r.contains("removed") ? r["removed"] : empty;
    kv.Add("retention", Int(r, "ended_after_ms") <= 0
                            ? std::string("what ended is kept for ever")
                            : "what ended goes after " + Duration(Int(r, "ended_after_ms")) + "; removed " +
                                  Text(removed, "clusters") + " clusters, " + Text(removed, "jobs") + " jobs, " +
                                  Text(removed, "tasks") + " tasks since start");
    if (Int(removed, "api_tokens", 0) > 0 || Int(removed, "audit", 0) > 0)
      kv.Add("retention, more", "removed " + Text(removed, "api_tokens") + " spent API tokens and " +
                                    Text(removed, "audit") + " audit entries since start");
    if (r.contains("store") && r["store"].is_object()) {
      const json& st = r["store"];
      // The file's size now; its pages and free pages as the last retention round counted them.
      kv.Add("store file", (st.contains("file_bytes") ? Text(st, "file_bytes") + " bytes now; " : std::string()) +
                               Text(st, "pages") + " pages of " + Text(st, "page_size") + " bytes, " +
                               Text(st, "free_pages") + " free" +
                               (st.contains("counted_ms_ago")
                                    ? ", counted " + Duration(Int(st, "counted_ms_ago")) + " ago"
                                    : std::string()) +
                               " (auto_vacuum " + Text(st, "auto_vacuum") + ")");
    }
  }
  if (s.contains("leadership")) AddLeadership(kv, s["leadership"]);
  kv.Print(ctx.out());
  return Status::Ok();
}

}  // namespace

void RegisterStatusCommands(CommandTable& table) {
  table.Add({.noun = "status",
             .verb = "",
             .summary = "Show the server's version, endpoints, hosts, task counts and requests served.",
             .description = "Asks weftd for `server.status`. Use it to check that weftd is up and which\n"
                            "endpoints (the metrics endpoint too) and data directory it uses, its WAL, and\n"
                            "the requests it served since it started: the total and the busiest ops\n"
                            "(`weft -o json status` has every op). With several weftd on one PostgreSQL\n"
                            "database it also names the leader, the followers and the epoch.",
             .flags = {},
             .args = {},
             .handler = &ShowStatus});
}

}  // namespace weft::cli
