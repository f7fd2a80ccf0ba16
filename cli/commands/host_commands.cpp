// weft host ...: the provisioner hosts the server knows.
#include <chrono>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The split the server wants: threads per tenant ("any" serves every tenant).
std::string Workers(const json& host) {
  std::string workers;
  for (const json& w : host.value("workers", json::array())) {
    if (!w.is_object()) continue;
    const std::string tenant = w.value("tenant", "");
    workers += (workers.empty() ? "" : " ") + Printable(tenant.empty() ? "any" : tenant) + ":" +
               std::to_string(w.value("threads", std::int64_t{0}));
  }
  return workers.empty() ? "-" : workers;
}

// Live or not, and whether an operator drains it (weft host drain).
std::string LiveCell(const json& host) {
  const auto draining = host.find("draining");
  const bool drains = draining != host.end() && draining->is_boolean() && draining->get<bool>();
  return YesNo(host, "live") + (drains ? ", draining" : "");
}

Status HostList(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.list"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& hosts = reply.contains("hosts") ? reply["hosts"] : json::array();
  if (!hosts.is_array() || hosts.empty()) {
    ctx.out() << "no hosts registered; start weft-host pointed at this server's provisioner endpoint\n";
    return Status::Ok();
  }
  const std::int64_t now_ms = NowMs();
  Table table({"ID", "LIVE", "CAPACITY", "WORKERS", "IN FLIGHT", "LAST SEEN", "REGISTERED", "PLUGINS"});
  table.AlignRight(2);
  table.AlignRight(4);
  for (const json& h : hosts) {
    table.AddRow({Text(h, "id"), LiveCell(h), Text(h, "capacity"), Workers(h),
                  Text(h, "in_flight"), Ago(now_ms, Int(h, "last_seen_ms")), Ago(now_ms, Int(h, "registered_at_ms")),
                  Join(h, "plugins")});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status HostShow(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals.at(0);
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.list"));
  const json hosts = reply.contains("hosts") && reply["hosts"].is_array() ? reply["hosts"] : json::array();
  const json* host = nullptr;
  for (const json& h : hosts) {
    if (h.is_object() && h.value("id", "") == id) host = &h;
  }
  if (!host) return Status::NotFound("no host '" + id + "' is registered (weft host list shows the hosts)");
  const json& h = *host;
  if (ctx.json_output()) {
    ctx.PrintJson(h);
    return Status::Ok();
  }
  const std::int64_t now_ms = NowMs();
  KeyValues kv;
  kv.Add("host", Text(h, "id"));
  kv.Add("live", YesNo(h, "live"));
  kv.Add("draining", YesNo(h, "draining"));
  kv.Add("version", Text(h, "version"));
  kv.Add("capacity", Text(h, "capacity"));
  kv.Add("workers", Workers(h));
  kv.Add("in flight", Text(h, "in_flight"));
  kv.Add("last seen", Ago(now_ms, Int(h, "last_seen_ms")));
  kv.Add("registered", Ago(now_ms, Int(h, "registered_at_ms")));
  kv.Add("plugins", Join(h, "plugins"));
  kv.Print(ctx.out());
  const json refused = h.contains("refused") && h["refused"].is_array() ? h["refused"] : json::array();
  if (!refused.empty()) {
    ctx.out() << "refused plugin files (" << refused.size() << "):\n";
    PrintRefusedPlugins(ctx.out(), refused, /*with_host=*/false);
  }
  return Status::Ok();
}

Status HostDrain(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals.at(0);
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.drain", {{"host_id", id}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const std::int64_t running = Int(reply, "in_flight");
  ctx.out() << "host '" << Printable(id) << "' is draining: weftd hands it no new task";
  if (running > 0)
    ctx.out() << "; its " << running << " running task(s) finish (IN FLIGHT in weft host list).\n"
              << "Once it runs none, it can be stopped (an upgrade) without giving up work.\n";
  else
    ctx.out() << "; it runs no task now and can be stopped (an upgrade) without giving up work.\n";
  ctx.out() << "It stays drained, also once started again, until: weft host undrain " << Printable(id) << "\n";
  return Status::Ok();
}

Status HostUndrain(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals.at(0);
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.undrain", {{"host_id", id}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "host '" << Printable(id) << "' is no longer draining: weftd hands it tasks again\n";
  return Status::Ok();
}

}  // namespace

void RegisterHostCommands(CommandTable& table) {
  table.Add({.noun = "host",
             .verb = "list",
             .summary = "List the provisioner hosts, whether they are live, and the plugins they run.",
             .description = "A host is live when this server process heard from it within hosts.silent_after_ms\n"
                            "and it did not stop (host.leave) since; after a restart of weftd a host is live\n"
                            "again once it speaks (its next heartbeat).\n"
                            "IN FLIGHT is the number of tasks it holds right now. LIVE says \"draining\" for a\n"
                            "host that weft host drain keeps new tasks from.",
             .flags = {},
             .args = {},
             .handler = &HostList});
  table.Add({.noun = "host",
             .verb = "show",
             .summary = "Show one host: liveness, capacity, workers, plugins, and the plugin files it refused.",
             .description = "What weft host list says of one host, and every plugin file the host refused\n"
                            "(a Lua plugin that does not load, a file not named after its type) with the\n"
                            "reason. A tenant's users see the host-wide refusals and their tenant's own.",
             .flags = {},
             .args = {{.name = "ID", .required = true, .help = "the host id"}},
             .handler = &HostShow});
  table.Add({.noun = "host",
             .verb = "drain",
             .summary = "Hand a host no new task, and let its running tasks finish (superadmin).",
             .description = "To stop a host without giving up work (an upgrade): drain it, wait until\n"
                            "weft host list shows 0 IN FLIGHT for it, then stop weft-host. Other hosts take\n"
                            "the queued tasks meanwhile. The host stays drained, across restarts of weftd and\n"
                            "of the host, until weft host undrain.",
             .flags = {},
             .args = {{.name = "ID", .required = true, .help = "the host id"}},
             .handler = &HostDrain});
  table.Add({.noun = "host",
             .verb = "undrain",
             .summary = "Hand a drained host tasks again (superadmin).",
             .description = "Ends weft host drain: weftd hands the host tasks again.",
             .flags = {},
             .args = {{.name = "ID", .required = true, .help = "the host id"}},
             .handler = &HostUndrain});
}

}  // namespace weft::cli
