// weft cluster ...: clusters. For now `plan`: the layout and task DAG a create
// would use, computed by the server and run nowhere.
#include <fstream>
#include <sstream>

#include "commands/commands.hpp"
#include "context.hpp"
#include "format.hpp"
#include "table.hpp"
#include "weft/catalog/entities.hpp"
#include "weft/solver/solver.hpp"

namespace weft::cli {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Status ClusterPlan(Context& ctx, const ParsedArgs& args) {
  if (!args.Has("--template")) return ctx.UsageError("'weft cluster plan' needs --template T");
  if (!args.Has("--size")) return ctx.UsageError("'weft cluster plan' needs --size N");
  json body = {{"name", args.positionals.at(0)}, {"template", args.Get("--template")}};
  {
    const std::string v = args.Get("--size");
    std::int64_t n = 0;
    std::istringstream in(v);
    if (!(in >> n) || !in.eof() || n < 1) return ctx.UsageError("--size needs a number of nodes from 1 up, got '" + v + "'");
    body["size"] = n;
  }
  for (const char* flag : {"--provider", "--hardwaretype", "--imagetype"})
    if (args.Has(flag)) body[std::string(flag).substr(2)] = args.Get(flag);
  if (args.Has("--services")) {
    std::vector<std::string> services = SplitList(args.Get("--services"));
    if (services.empty()) return ctx.UsageError("--services needs a comma-separated list of service names");
    body["services"] = services;
  }
  if (args.Has("--config")) {
    const std::string file = args.Get("--config");
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status::NotFound("cannot read " + file + "; check the path and its permissions");
    std::ostringstream text;
    text << in.rdbuf();
    Result<json> config = catalog::ParseJsonText(text.str(), file);
    if (!config.ok()) return config.status();
    body["config"] = std::move(*config);
  }
  Result<json> reply = ctx.Call("cluster.plan", std::move(body));
  if (!reply.ok()) return reply.status();
  if (ctx.json_output()) {
    ctx.PrintJson(*reply);
    return Status::Ok();
  }
  Result<solver::Layout> layout =
      solver::LayoutFromJson(reply->contains("layout") ? (*reply)["layout"] : json::object());
  if (!layout.ok()) return Status::Internal("the server's layout cannot be read: " + layout.status().message());
  const std::int64_t tasks = reply->contains("tasks") && (*reply)["tasks"].is_array()
                                 ? static_cast<std::int64_t>((*reply)["tasks"].size())
                                 : 0;
  const std::int64_t stages = reply->contains("stages") && (*reply)["stages"].is_array()
                                  ? static_cast<std::int64_t>((*reply)["stages"].size())
                                  : 0;
  ctx.out() << "cluster '" << Printable(args.positionals.at(0)) << "' from template '"
            << Printable(args.Get("--template")) << "': "
            << Count(static_cast<std::int64_t>(layout->nodes.size()), "node", "nodes") << '\n';
  for (const std::string& line : solver::LayoutSummary(*layout)) ctx.out() << "  " << Printable(line) << '\n';
  ctx.out() << "plan: " << Count(tasks, "task", "tasks") << " in " << Count(stages, "stage", "stages")
            << " (nothing runs; -o json shows every node and task)\n";
  return Status::Ok();
}

}  // namespace

void RegisterClusterCommands(CommandTable& table) {
  table.Add({.noun = "cluster",
             .verb = "plan",
             .summary = "Show the layout and task plan a new cluster would get, without creating it.",
             .description = "Solves the template's constraints for SIZE nodes against the tenant's latest\n"
                            "catalog and plans the create. The table groups identical nodes\n"
                            "(\"3 × small debian12 [base, nginx]\") and counts tasks and stages; -o json\n"
                            "prints the reply: layout.nodes, tasks (with their `after` ids) and stages.\n"
                            "A request no layout can satisfy fails with the constraint that cannot be met.",
             .flags = {{.name = "--template", .value_name = "T", .help = "the cluster template (required)"},
                       {.name = "--size", .value_name = "N", .help = "number of nodes (required)"},
                       {.name = "--provider", .value_name = "P", .help = "instead of the template's provider"},
                       {.name = "--hardwaretype", .value_name = "H", .help = "every node uses this hardware type"},
                       {.name = "--imagetype", .value_name = "I", .help = "every node uses this image type"},
                       {.name = "--services", .value_name = "a,b", .help = "instead of the template's services"},
                       {.name = "--config", .value_name = "FILE", .help = "JSON merged over the template's config"}},
             .args = {{.name = "NAME", .required = true, .help = "the cluster's name (hostnames are NAME-1, ...)"}},
             .handler = &ClusterPlan});
}

}  // namespace weft::cli
