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
    // The split the server wants: threads per tenant ("any" serves every tenant).
    std::string workers;
    for (const json& w : h.value("workers", json::array())) {
      if (!w.is_object()) continue;
      const std::string tenant = w.value("tenant", "");
      workers += (workers.empty() ? "" : " ") + Printable(tenant.empty() ? "any" : tenant) + ":" +
                 std::to_string(w.value("threads", std::int64_t{0}));
    }
    table.AddRow({Text(h, "id"), YesNo(h, "live"), Text(h, "capacity"), workers.empty() ? "-" : workers,
                  Text(h, "in_flight"), Ago(now_ms, Int(h, "last_seen_ms")), Ago(now_ms, Int(h, "registered_at_ms")),
                  Join(h, "plugins")});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

}  // namespace

void RegisterHostCommands(CommandTable& table) {
  table.Add({.noun = "host",
             .verb = "list",
             .summary = "List the provisioner hosts, whether they are live, and the plugins they run.",
             .description = "A host is live when the server heard from it within hosts.silent_after_ms.\n"
                            "IN FLIGHT is the number of tasks it holds right now.",
             .flags = {},
             .args = {},
             .handler = &HostList});
}

}  // namespace weft::cli
