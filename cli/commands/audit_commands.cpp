// weft audit: who changed what, from where, when (the audit log, docs/protocol.md `audit.list`).
#include <cstdio>
#include <ctime>

#include "weft/catalog/entities.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/paging.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/clock.hpp"

namespace weft::cli {
namespace {

// "2026-11-25 17:40:42" (UTC), as weftd's log writes times.
std::string UtcTime(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// A UTC time "2026-11-25", "2026-11-25 17:40", "2026-11-25T17:40:42Z" as ms since the epoch.
std::optional<std::int64_t> ParseUtcTime(const std::string& text) {
  std::tm tm{};
  int n = 0;
  int consumed = 0;
  n = std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed);
  if (n != 3) return std::nullopt;
  std::string rest = text.substr(static_cast<std::size_t>(consumed));
  if (!rest.empty()) {
    if (rest[0] != 'T' && rest[0] != ' ') return std::nullopt;
    int used = 0;
    if (std::sscanf(rest.c_str() + 1, "%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &used) != 2) return std::nullopt;
    rest = rest.substr(1 + static_cast<std::size_t>(used));
    if (!rest.empty() && rest[0] == ':') {
      if (std::sscanf(rest.c_str() + 1, "%2d%n", &tm.tm_sec, &used) != 1) return std::nullopt;
      rest = rest.substr(1 + static_cast<std::size_t>(used));
    }
    if (rest == "Z") rest.clear();
    if (!rest.empty()) return std::nullopt;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

// "size=5 template=web" from an entry's detail object.
std::string DetailText(const json& detail) {
  std::string out;
  if (!detail.is_object()) return out;
  for (const auto& [key, value] : detail.items()) {
    if (!out.empty()) out += ' ';
    out += key + "=" + ValueText(value);
  }
  return out;
}

Status Audit(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("--since")) {
    const std::string since = args.Get("--since");
    std::optional<std::int64_t> ms = ParseUtcTime(since);
    if (!ms) {
      std::optional<std::int64_t> ago = catalog::ParseDurationMs(json(since));
      if (!ago || *ago <= 0)
        return ctx.UsageError("--since needs a duration such as 30m, 12h or 7d, or a UTC time such as "
                              "2026-11-25 or 2026-11-25T17:40:00Z, got '" + since + "'");
      ms = SystemClock::Instance().NowMs() - *ago;
    }
    body["since_ms"] = std::max<std::int64_t>(0, *ms);
  }
  if (args.Has("--user")) body["user"] = args.Get("--user");
  if (args.Has("--cluster")) body["cluster"] = args.Get("--cluster");
  // The newest 1000 (or N), or with --all every entry, a page of 1000 at a time, shown oldest first.
  WEFT_ASSIGN_OR_RETURN(const std::optional<std::int64_t> want, LimitOrAll(ctx, args, 1000));
  WEFT_ASSIGN_OR_RETURN(json reply, ReadPages(ctx, {.op = "audit.list",
                                                    .body = std::move(body),
                                                    .rows = "entries",
                                                    .want = want,
                                                    .page = 1000,
                                                    .pages_go_back = true}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  Table table({"TIME (UTC)", "WHO", "ROLE", "FROM", "OP", "TENANT", "TARGET", "JOB", "DETAIL"});
  for (const json& e : reply["entries"]) {
    std::string who = Text(e, "actor");
    const std::string home = e.value("actor_tenant", "");
    if (!home.empty() && home != "_system") who += "@" + home;
    const std::string job = e.value("job_id", "");
    const std::string from = e.value("address", "");
    table.AddRow({UtcTime(Int(e, "at_ms")), Printable(who), Text(e, "actor_role"),
                  from.empty() ? "-" : Printable(from), Text(e, "op"), Printable(Text(e, "tenant")),
                  Printable(Text(e, "target")), job.empty() ? "-" : job,
                  Printable(DetailText(e.value("detail", json::object())))});
  }
  if (table.rows() == 0) {
    ctx.out() << "no audit entries match\n";
    return Status::Ok();
  }
  table.Print(ctx.out());
  return Status::Ok();
}

}  // namespace

void RegisterAuditCommands(CommandTable& table) {
  table.Add({.noun = "audit",
             .verb = "",
             .summary = "Show who changed what, from where, when (the audit log).",
             .description =
                 "Every change that succeeded, oldest first, with who asked, as what role, from\n"
                 "which address (FROM: the client's, or the browser's through weft-web) and\n"
                 "when: cluster operations, job aborts and retries, lease extensions, catalog\n"
                 "puts and deletes, resources, host tokens, host accepts and revokes, tenants,\n"
                 "users and credentials. A superadmin sees\n"
                 "every tenant (one with --tenant), a tenant admin their tenant, a user only\n"
                 "what they did. Reads and hosts' task traffic are not recorded.",
             .flags = {{.name = "--since", .value_name = "DURATION|TIME",
                        .help = "only entries newer than that (2h, 7d, or a UTC time: 2026-11-25T17:00:00Z)"},
                       {.name = "--user", .value_name = "U", .help = "only what user U did"},
                       {.name = "--cluster", .value_name = "C", .help = "only what was done to cluster C (name or id)"},
                       {.name = "--limit", .value_name = "N", .help = "the newest N entries (default 1000)"},
                       {.name = "--all", .value_name = "", .help = "every entry that matches, however many"}},
             .args = {},
             .handler = &Audit});
}

}  // namespace weft::cli
