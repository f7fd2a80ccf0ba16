// weft status: what the server is, where it listens, and what it is doing.
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

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
  kv.Add("server", "weftd " + Text(s, "version") + " (protocol " + Text(s, "protocol") + "), pid " + Text(s, "pid") +
                       ", up " + Duration(Int(s, "uptime_ms")));
  // (Only a superadmin is told where the server keeps its files.)
  if (s.contains("data_dir")) kv.Add("data dir", Text(s, "data_dir"));
  kv.Add("store", (store.contains("path") ? Text(store, "path") + " " : std::string()) + "(schema " + Text(store, "schema_version") + ", WAL " +
                      Text(store, "wal_pages") + " pages)");
  kv.Add("api", Text(endpoints, "api"));
  kv.Add("provisioner", Text(endpoints, "provisioner"));
  kv.Add("events", Text(endpoints, "events"));
  kv.Add("hosts", Text(hosts, "registered") + " registered, " + Text(hosts, "live") + " live");
  kv.Add("tasks", Text(tasks, "queued") + " queued, " + Text(tasks, "leased") + " leased, " +
                      Text(tasks, "succeeded") + " succeeded, " + Text(tasks, "failed") + " failed");
  kv.Print(ctx.out());
  return Status::Ok();
}

}  // namespace

void RegisterStatusCommands(CommandTable& table) {
  table.Add({.noun = "status",
             .verb = "",
             .summary = "Show the server's version, endpoints, hosts and task counts.",
             .description = "Asks weftd for `server.status`. Use it to check that weftd is up and which\n"
                            "endpoints and data directory it uses.",
             .flags = {},
             .args = {},
             .handler = &ShowStatus});
}

}  // namespace weft::cli
