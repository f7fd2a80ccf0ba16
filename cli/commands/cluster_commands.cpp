// weft cluster ...: clusters. `plan` shows the layout and task DAG a create
// would use; the other verbs start jobs (create, delete, scale, ...), each with
// --dry-run (the plan, nothing runs) and --wait (a progress bar until it ends).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "weft/catalog/entities.hpp"
#include "weft/catalog/layout.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/paging.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/lifecycle.hpp"

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

// Parses --config text; errors name the option (`what`: "--config" or "--config file F")
// and, for malformed JSON, the line and column where it breaks.
Result<json> ParseConfigText(const std::string& text, const std::string& what) {
  if (jsonf::NestsDeeperThan(text, jsonf::kMaxDepth))
    return Status::Invalid(what + " nests arrays and objects more than " +
                           std::to_string(jsonf::kMaxDepth) + " levels deep");
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    std::string reason = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] "; its "at line L, column C" stays.
    if (auto pos = reason.find("] "); pos != std::string::npos) reason = reason.substr(pos + 2);
    return Status::Invalid(what + " is not valid JSON: " + reason);
  }
  if (!config.is_object())
    return Status::Invalid(what + " must be a JSON object such as '{\"a\":1}', got " + jsonf::Brief(config));
  return config;
}

// --config: a JSON file, or JSON given inline ('{"a":1}'). A file by that name wins;
// otherwise text that starts like JSON is taken as JSON.
Result<json> ReadConfig(const std::string& value) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) {
    std::ifstream in(value, std::ios::binary);
    if (!in) return Status::NotFound("--config: cannot read " + value + "; check its permissions");
    std::ostringstream text;
    text << in.rdbuf();
    return ParseConfigText(text.str(), "--config file " + value);
  }
  // Not a file: inline JSON, or meant to be (a '{' or '[' first), so its error is the JSON's.
  const std::size_t first = value.find_first_not_of(" \t\r\n");
  const bool meant_as_json = first != std::string::npos && (value[first] == '{' || value[first] == '[');
  if (meant_as_json || !json::parse(value, nullptr, false).is_discarded()) return ParseConfigText(value, "--config");
  return Status::NotFound("--config: no file " + value + " and not JSON either; give a JSON file or inline JSON " +
                          "such as '{\"a\":1}'");
}

Result<std::int64_t> SizeFlag(Context& ctx, const ParsedArgs& args) {
  const std::string v = args.Get("--size");
  std::int64_t n = 0;
  std::istringstream in(v);
  if (!(in >> n) || !in.eof() || n < 1) return ctx.UsageError("--size needs a number of nodes from 1 up, got '" + v + "'");
  return n;
}

// Prints the plan of a dry run from its summary (weftd counted the tasks): what
// would run, in how many stages.
void PrintDryRun(Context& ctx, const json& reply) {
  const auto count = [&](const char* key) {
    return reply.contains(key) && reply[key].is_number_integer() ? reply[key].get<std::int64_t>() : std::int64_t{0};
  };
  ctx.out() << "dry run of " << reply.value("operation", "") << ": " << Count(count("task_count"), "task", "tasks")
            << " in " << Count(count("stage_count"), "stage", "stages") << " (nothing runs; -o json shows every task)\n";
  const json actions = reply.value("actions", json::object());
  for (const auto& [action, n] : actions.items())
    if (n.is_number_integer()) ctx.out() << "  " << n.get<std::int64_t>() << " × " << Printable(action) << '\n';
  // What an upgrade or a rollback moves the cluster between ("service/fake-nginx: version 1 -> 2").
  if (reply.value("operation", "") == "create") return;
  const json versions = reply.value("versions", json::object());
  const auto version = [](const json& v) { return v.is_number_integer() ? std::to_string(v.get<std::int64_t>()) : std::string("none"); };
  for (const auto& [entity, change] : versions.items())
    if (change.is_object())
      ctx.out() << "  " << Printable(entity) << ": version " << version(change.value("from", json())) << " -> "
                << version(change.value("to", json())) << '\n';
}

// Sends a cluster operation; prints its job, or follows it with --wait.
Status RunOperation(Context& ctx, const ParsedArgs& args, const std::string& op, json body) {
  if (args.Has("--summary") && !args.Has("--dry-run"))
    return ctx.UsageError("--summary goes with --dry-run (the counts of the plan a dry run shows)");
  if (args.Has("--dry-run")) body["dry_run"] = true;
  // The table needs only the counts: weftd leaves out every task (cluster plan does the same).
  if (args.Has("--dry-run") && (!ctx.json_output() || args.Has("--summary"))) body["summary"] = true;
  if (args.Has("--keep-on-failure")) body["keep_on_failure"] = true;
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(op, std::move(body)));
  if (args.Has("--dry-run")) {
    if (ctx.json_output()) {
      ctx.PrintJson(reply);
    } else {
      PrintDryRun(ctx, reply);
    }
    return Status::Ok();
  }
  const json& job = reply["job"];
  const std::string id = job.value("id", "");
  const std::string waiting = WaitingForHosts(reply.value("waiting_for_plugins", json::array()));
  if (!waiting.empty() && !ctx.json_output()) ctx.err() << "warning: job " << id << " is " << waiting << '\n';
  if (args.Has("--wait")) return WaitForJob(ctx, id);
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const std::string name = reply.contains("cluster") ? reply["cluster"].value("name", "") : "";
  ctx.out() << "cluster '" << Printable(name) << "': job " << id << " (" << job.value("operation", "")
            << ") started; follow it with " << ctx.Suggest("job watch " + id) << '\n';
  return Status::Ok();
}

Status ClusterCreate(Context& ctx, const ParsedArgs& args) {
  if (!args.Has("--template")) return ctx.UsageError("'weft cluster create' needs --template T");
  if (!args.Has("--size")) return ctx.UsageError("'weft cluster create' needs --size N");
  WEFT_ASSIGN_OR_RETURN(std::int64_t size, SizeFlag(ctx, args));
  json body = {{"name", args.positionals.at(0)}, {"template", args.Get("--template")}, {"size", size}};
  for (const char* flag : {"--provider", "--hardwaretype", "--imagetype"})
    if (args.Has(flag)) body[std::string(flag).substr(2)] = args.Get(flag);
  if (args.Has("--services")) body["services"] = SplitList(args.Get("--services"));
  if (args.Has("--config")) {
    Result<json> config = ReadConfig(args.Get("--config"));
    if (!config.ok()) return ctx.UsageError(config.status().message());
    body["config"] = std::move(*config);
  }
  if (args.Has("--lease")) {
    std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(args.Get("--lease")));
    if (!ms) return ctx.UsageError("--lease needs a duration such as 30m, 12h, 1d or 0 (no lease), got '" +
                                   args.Get("--lease") + "'");
    body["lease_ms"] = *ms;
  }
  return RunOperation(ctx, args, "cluster.create", std::move(body));
}

// delete, upgrade, rollback: the cluster and nothing else.
Status ClusterSimple(Context& ctx, const ParsedArgs& args, const char* op) {
  return RunOperation(ctx, args, op, {{"cluster", args.positionals.at(0)}});
}
// A delete of a cluster that is deleted already (terminated) is done: a script
// that deletes twice, or after a failed create was undone, gets what it asked for.
Status ClusterDelete(Context& ctx, const ParsedArgs& args) {
  Status st = ClusterSimple(ctx, args, "cluster.delete");
  if (st.code() != Code::kConflict) return st;
  Result<json> got = ctx.Call("cluster.get", {{"cluster", args.positionals.at(0)}});
  if (!got.ok() || !got->contains("cluster") ||
      ClusterStatusFrom((*got)["cluster"].value("status", "")) != ClusterStatus::kTerminated)
    return st;
  const json& c = (*got)["cluster"];
  if (ctx.json_output()) {
    ctx.PrintJson({{"cluster", c}, {"already_deleted", true}});
  } else {
    ctx.out() << "cluster '" << Printable(c.value("name", "")) << "' (id " << c.value("id", "")
              << ") is already deleted (terminated); nothing to do\n";
  }
  return Status::Ok();
}
Status ClusterUpgrade(Context& ctx, const ParsedArgs& args) { return ClusterSimple(ctx, args, "cluster.upgrade"); }
Status ClusterRollback(Context& ctx, const ParsedArgs& args) { return ClusterSimple(ctx, args, "cluster.rollback"); }

Status ClusterScale(Context& ctx, const ParsedArgs& args) {
  if (!args.Has("--size")) return ctx.UsageError("'weft cluster scale' needs --size N");
  WEFT_ASSIGN_OR_RETURN(std::int64_t size, SizeFlag(ctx, args));
  return RunOperation(ctx, args, "cluster.scale", {{"cluster", args.positionals.at(0)}, {"size", size}});
}

Status ServicesOp(Context& ctx, const ParsedArgs& args, const char* op, bool required) {
  json body = {{"cluster", args.positionals.at(0)}};
  if (args.positionals.size() > 1) {
    std::vector<std::string> services = SplitList(args.positionals[1]);
    if (services.empty()) return ctx.UsageError("SERVICES must be a comma-separated list of service names");
    body["services"] = services;
  } else if (required) {
    return ctx.UsageError(std::string("'weft cluster ") + (op + 8) + "' needs SERVICES (a,b)");
  }
  return RunOperation(ctx, args, op, std::move(body));
}
Status ClusterAddServices(Context& ctx, const ParsedArgs& args) { return ServicesOp(ctx, args, "cluster.add_services", true); }
Status ClusterRemoveServices(Context& ctx, const ParsedArgs& args) {
  return ServicesOp(ctx, args, "cluster.remove_services", true);
}
Status ClusterStart(Context& ctx, const ParsedArgs& args) { return ServicesOp(ctx, args, "cluster.start", false); }
Status ClusterStop(Context& ctx, const ParsedArgs& args) { return ServicesOp(ctx, args, "cluster.stop", false); }
Status ClusterRestart(Context& ctx, const ParsedArgs& args) { return ServicesOp(ctx, args, "cluster.restart", false); }

Status ClusterReconfigure(Context& ctx, const ParsedArgs& args) {
  json body = {{"cluster", args.positionals.at(0)}};
  if (args.Has("--config")) {
    Result<json> config = ReadConfig(args.Get("--config"));
    if (!config.ok()) return ctx.UsageError(config.status().message());
    body["config"] = std::move(*config);
  }
  if (args.Has("--restart")) body["restart"] = true;
  return RunOperation(ctx, args, "cluster.reconfigure", std::move(body));
}

Status ClusterExtendLease(Context& ctx, const ParsedArgs& args) {
  json body = {{"cluster", args.positionals.at(0)}};
  if (args.Has("--lease")) {
    std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(args.Get("--lease")));
    if (!ms || *ms <= 0) return ctx.UsageError("--lease needs a duration such as 30m, 12h or 1d, got '" +
                                                args.Get("--lease") + "'");
    body["lease_ms"] = *ms;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("cluster.extend_lease", std::move(body)));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& c = reply["cluster"];
  ctx.out() << "cluster '" << Printable(c.value("name", "")) << "' now expires in "
            << Duration(c.value("expire_at_ms", std::int64_t{0}) - SystemClock::Instance().NowMs()) << '\n';
  return Status::Ok();
}

Status ClusterList(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("--all")) body["all"] = true;
  WEFT_ASSIGN_OR_RETURN(std::optional<std::int64_t> want, LimitFlag(ctx, args, 100000));
  // Every cluster (or the first N), a page of 1000 at a time.
  WEFT_ASSIGN_OR_RETURN(json reply, ReadPages(ctx, {.op = "cluster.list",
                                                    .body = std::move(body),
                                                    .rows = "clusters",
                                                    .want = want,
                                                    .page = 1000,
                                                    .pages_go_back = false}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  Table table({"ID", "NAME", "STATUS", "TEMPLATE", "NODES", "SERVICES", "JOB", "OWNER"});
  table.AlignRight(4);
  for (const json& c : reply["clusters"]) {
    std::string services;
    for (const json& s : c.value("services", json::array())) {
      if (!services.empty()) services += ',';
      services += s.get<std::string>();
    }
    table.AddRow({c.value("id", ""), Printable(c.value("name", "")), c.value("status", ""),
                  Printable(c.value("template", "")), std::to_string(c.value("size", 0)), Printable(services),
                  c.value("latest_job", ""), Printable(c.value("owner", ""))});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status ClusterGet(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("cluster.get", {{"cluster", args.positionals.at(0)}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& c = reply["cluster"];
  KeyValues kv;
  kv.Add("cluster", Printable(c.value("name", "")) + " (id " + c.value("id", "") + ")");
  kv.Add("status", c.value("status", ""));
  kv.Add("template", Printable(c.value("template", "")));
  kv.Add("provider", Printable(c.value("provider", "")));
  kv.Add("owner", Printable(c.value("owner", "")));
  if (const std::int64_t expire = c.value("expire_at_ms", std::int64_t{0}); expire > 0) {
    const std::int64_t left = expire - SystemClock::Instance().NowMs();
    kv.Add("lease", left > 0 ? "expires in " + Duration(left) : "expired");
  }
  // The config its tasks get (the template's defaults with what create and reconfigure set), on one line.
  if (const json config = c.value("config", json::object()); config.is_object() && !config.empty()) {
    constexpr std::size_t kShown = 160;
    std::string text = config.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > kShown)
      text = text.substr(0, kShown) + "... (" + std::to_string(text.size()) + " bytes; -o json shows it all)";
    kv.Add("config", Printable(text));
  }
  kv.Print(ctx.out());
  ctx.out() << '\n';
  Table nodes({"NODE", "ADDRESS", "HARDWARE", "IMAGE", "SERVICES"});
  std::string marked;  // the nodes marked "delete failed", for the note under the table
  std::int64_t count = 0;
  std::int64_t others = 0;
  for (const json& n : c["nodes"]) {
    if (n.value("state", "") != "delete failed") {
      ++others;
      continue;
    }
    marked += (marked.empty() ? "" : ", ") + n.value("hostname", "");
    ++count;
  }
  for (const json& n : c["nodes"]) {
    // Each service with what it last did: "fake-nginx (running)".
    const json states = n.value("service_states", json::object());
    std::string services;
    for (const json& s : n.value("services", json::array())) {
      if (!services.empty()) services += ", ";
      services += s.get<std::string>();
      if (const std::string state = states.value(s.get<std::string>(), ""); !state.empty())
        services += " (" + state + ")";
    }
    const json results = n.value("results", json::object());
    // A node a job was to delete and did not: "web-3 (delete failed)".
    std::string node = n.value("hostname", "");
    if (const std::string state = n.value("state", ""); !state.empty()) node += " (" + state + ")";
    nodes.AddRow({Printable(node), Printable(results.value("access_v4", "-")),
                  Printable(n.value("hardwaretype", "")), Printable(n.value("imagetype", "")), Printable(services)});
  }
  nodes.Print(ctx.out());
  // The server refuses every other operation on such a cluster; say so, and what clears it.
  if (count > 0) {
    const std::string name = Printable(c.value("name", ""));
    ctx.out() << Printable(marked) << (count == 1 ? " is" : " are") << " still to be deleted (delete failed): "
              << "no operation but a scale or a delete runs until " << (count == 1 ? "it is" : "they are") << "; "
              << ctx.Suggest(others > 0 ? "cluster scale " + name + " --size " + std::to_string(others)
                                        : "cluster delete " + name)
              << " deletes " << (count == 1 ? "it" : "them") << " again\n";
  }
  ctx.out() << '\n';
  Table jobs({"JOB", "OPERATION", "STATUS", "BY", "MESSAGE"});
  for (const json& j : c["jobs"])
    jobs.AddRow({j.value("id", ""), j.value("operation", ""), j.value("status", ""),
                 Printable(j.value("requested_by", "")), Printable(j.value("message", ""))});
  jobs.Print(ctx.out());
  return Status::Ok();
}

Status ClusterPlan(Context& ctx, const ParsedArgs& args) {
  if (!args.Has("--template")) return ctx.UsageError("'weft cluster plan' needs --template T");
  if (!args.Has("--size")) return ctx.UsageError("'weft cluster plan' needs --size N");
  json body = {{"name", args.positionals.at(0)}, {"template", args.Get("--template")}};
  WEFT_ASSIGN_OR_RETURN(std::int64_t size, SizeFlag(ctx, args));
  body["size"] = size;
  for (const char* flag : {"--provider", "--hardwaretype", "--imagetype"})
    if (args.Has(flag)) body[std::string(flag).substr(2)] = args.Get(flag);
  if (args.Has("--services")) {
    std::vector<std::string> services = SplitList(args.Get("--services"));
    if (services.empty()) return ctx.UsageError("--services needs a comma-separated list of service names");
    body["services"] = services;
  }
  if (args.Has("--config")) {
    Result<json> config = ReadConfig(args.Get("--config"));
    if (!config.ok()) return ctx.UsageError(config.status().message());
    body["config"] = std::move(*config);
  }
  // The table needs only the summary: weftd leaves out every node and task (a plan of
  // 10,000 nodes is a reply of some 20 MB otherwise).
  if (!ctx.json_output() || args.Has("--summary")) body["summary"] = true;
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("cluster.plan", std::move(body)));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const auto count = [&](const char* key) {
    return reply.contains(key) && reply[key].is_number_integer() ? reply[key].get<std::int64_t>() : std::int64_t{0};
  };
  const std::int64_t nodes = count("nodes");
  ctx.out() << "cluster '" << Printable(args.positionals.at(0)) << "' from template '"
            << Printable(args.Get("--template")) << "': " << Count(nodes, "node", "nodes") << '\n';
  for (const json& line : reply.value("layout_summary", json::array()))
    if (line.is_string()) ctx.out() << "  " << Printable(line.get<std::string>()) << '\n';
  ctx.out() << "plan: " << Count(count("task_count"), "task", "tasks") << " in "
            << Count(count("stage_count"), "stage", "stages")
            << " (nothing runs; -o json shows every node and task)\n";
  std::int64_t prepared = 0;
  const json bootstrap = reply.value("bootstrap", json::object());
  for (const auto& [plugin, n] : bootstrap.items()) {
    const std::int64_t k = n.is_number_integer() ? n.get<std::int64_t>() : 0;
    prepared += k;
    ctx.out() << "  BOOTSTRAP of " << Count(k, "node", "nodes") << " by '" << Printable(plugin) << "'\n";
  }
  if (nodes > prepared)
    ctx.out() << "  no BOOTSTRAP on " << Count(nodes - prepared, "node", "nodes")
              << " (no automator of theirs declares it)\n";
  for (const json& w : reply.value("warnings", json::array()))
    if (w.is_string()) ctx.out() << "warning: " << Printable(w.get<std::string>()) << '\n';
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
                            "prints the reply: layout.nodes, tasks (with their `after` ids and the plugin\n"
                            "that runs each) and stages; with --summary, only the counts the table shows\n"
                            "(weftd then sends no node or task list, however large the plan).\n"
                            "A node's BOOTSTRAP goes to the first automator of\n"
                            "its services that declares BOOTSTRAP; a node with none gets no BOOTSTRAP.\n"
                            "Warns of every task whose plugin does not declare its action.\n"
                            "A request no layout can satisfy fails with the constraint that cannot be met.",
             .flags = {{.name = "--template", .value_name = "T", .help = "the cluster template (required)"},
                       {.name = "--size", .value_name = "N", .help = "number of nodes (required)"},
                       {.name = "--provider", .value_name = "P", .help = "instead of the template's provider"},
                       {.name = "--hardwaretype", .value_name = "H", .help = "every node uses this hardware type"},
                       {.name = "--imagetype", .value_name = "I", .help = "every node uses this image type"},
                       {.name = "--services", .value_name = "a,b", .help = "instead of the template's services"},
                       {.name = "--config", .value_name = "JSON", .help = "file or inline JSON merged over the template's config"},
                       {.name = "--summary", .value_name = "", .help = "-o json: the counts only, not every node and task"}},
             .args = {{.name = "NAME", .required = true, .help = "the cluster's name (hostnames are NAME-1, ...)"}},
             .handler = &ClusterPlan});

  const FlagSpec wait{.name = "--wait", .value_name = "", .help = "follow the job with a progress bar; exit 1 if it fails"};
  const FlagSpec dry{.name = "--dry-run", .value_name = "", .help = "show the plan (-o json: every task); run nothing"};
  const FlagSpec dry_summary{.name = "--summary", .value_name = "", .help = "with --dry-run -o json: the counts only, not every task"};
  const FlagSpec keep{.name = "--keep-on-failure", .value_name = "", .help = "on failure leave what was made, for debugging (no undo)"};
  const ArgSpec cluster{.name = "CLUSTER", .required = true, .help = "the cluster's name or id"};
  table.Add({.noun = "cluster",
             .verb = "create",
             .summary = "Create a cluster from a template.",
             .description = "Solves a layout for SIZE nodes, plans it, and starts the create job. If a\n"
                            "task fails for good, what was made is deleted again unless\n"
                            "--keep-on-failure is given. --lease gives the cluster a lease (30m, 12h, 1d;\n"
                            "0 for none) within the template's administration.leaseduration.",
             .flags = {{.name = "--template", .value_name = "T", .help = "the cluster template (required)"},
                       {.name = "--size", .value_name = "N", .help = "number of nodes (required)"},
                       {.name = "--provider", .value_name = "P", .help = "instead of the template's provider"},
                       {.name = "--hardwaretype", .value_name = "H", .help = "every node uses this hardware type"},
                       {.name = "--imagetype", .value_name = "I", .help = "every node uses this image type"},
                       {.name = "--services", .value_name = "a,b", .help = "instead of the template's services"},
                       {.name = "--config", .value_name = "JSON", .help = "file or inline JSON merged over the template's config"},
                       {.name = "--lease", .value_name = "DURATION", .help = "lease length (default: the template's; 0: never expires)"},
                       keep, wait, dry, dry_summary},
             .args = {{.name = "NAME", .required = true, .help = "the cluster's name (hostnames are NAME-1, ...)"}},
             .handler = &ClusterCreate});
  table.Add({.noun = "cluster", .verb = "delete", .summary = "Delete a cluster and every node it has.",
             .description = "Stops nothing first: every node is deleted by its provider. A cluster\n"
                            "that is deleted already (terminated) is done: it says so and exits 0.",
             .flags = {wait, dry, dry_summary}, .args = {cluster}, .handler = &ClusterDelete});
  table.Add({.noun = "cluster", .verb = "scale", .summary = "Grow or shrink a cluster to SIZE nodes.",
             .description = "Existing nodes keep their services; new nodes are created and set up, removed\n"
                            "nodes (the highest-numbered of a kind first) are stopped and deleted, and the\n"
                            "services on the nodes that stay are reconfigured. A failed grow removes the\n"
                            "new nodes again unless --keep-on-failure is given.",
             .flags = {{.name = "--size", .value_name = "N", .help = "the number of nodes wanted (required)"}, keep,
                       wait, dry, dry_summary},
             .args = {cluster}, .handler = &ClusterScale});
  const ArgSpec services{.name = "SERVICES", .required = true, .help = "comma-separated service names"};
  const ArgSpec some{.name = "SERVICES", .required = false, .help = "only these (and what they pull in); default all"};
  table.Add({.noun = "cluster", .verb = "add-services", .summary = "Add services to a running cluster.",
             .description = "Places the services on the existing nodes as the template's constraints\n"
                            "allow, installs, configures, initializes and starts them, and reconfigures the\n"
                            "rest. A failure removes them again unless --keep-on-failure is given.",
             .flags = {keep, wait, dry, dry_summary}, .args = {cluster, services}, .handler = &ClusterAddServices});
  table.Add({.noun = "cluster", .verb = "remove-services", .summary = "Stop and remove services from a cluster.",
             .description = "Refused when a service that stays requires one that goes.",
             .flags = {wait, dry, dry_summary}, .args = {cluster, services}, .handler = &ClusterRemoveServices});
  table.Add({.noun = "cluster", .verb = "start", .summary = "Start services (and what they need at runtime).",
             .description = "Dependencies start first.", .flags = {wait, dry, dry_summary}, .args = {cluster, some},
             .handler = &ClusterStart});
  table.Add({.noun = "cluster", .verb = "stop", .summary = "Stop services (and what needs them).",
             .description = "Dependents stop first.", .flags = {wait, dry, dry_summary}, .args = {cluster, some},
             .handler = &ClusterStop});
  table.Add({.noun = "cluster", .verb = "restart", .summary = "Stop and start services (and what needs them).",
             .description = "Dependents stop first and start last.", .flags = {wait, dry, dry_summary}, .args = {cluster, some},
             .handler = &ClusterRestart});
  table.Add({.noun = "cluster", .verb = "reconfigure", .summary = "Apply a new config to every service.",
             .description = "--config is merged over the cluster's config (JSON merge patch); --restart\n"
                            "also restarts the services after configuring them.",
             .flags = {{.name = "--config", .value_name = "JSON", .help = "file or inline JSON merged over the config"},
                       {.name = "--restart", .value_name = "", .help = "restart the services after configuring them"}, wait, dry, dry_summary},
             .args = {cluster}, .handler = &ClusterReconfigure});
  table.Add({.noun = "cluster", .verb = "upgrade", .summary = "Move a cluster to the latest template and services.",
             .description = "Re-solves with the nodes fixed against the latest template, then installs,\n"
                            "reconfigures and restarts only the services whose definition changed.",
             .flags = {wait, dry, dry_summary}, .args = {cluster}, .handler = &ClusterUpgrade});
  table.Add({.noun = "cluster", .verb = "rollback",
             .summary = "Return a cluster to its layout, services and config before its last change.",
             .description = "Undoes the last successful scale, add-services, remove-services, reconfigure\n"
                            "or upgrade.",
             .flags = {wait, dry, dry_summary}, .args = {cluster}, .handler = &ClusterRollback});
  table.Add({.noun = "cluster", .verb = "extend-lease", .summary = "Push a cluster's expiry back.",
             .description = "By the template's lease step, or by --lease; never past the template's\n"
                            "maximum lease counted from creation.",
             .flags = {{.name = "--lease", .value_name = "DURATION", .help = "how much longer (default: the template's step)"}},
             .args = {cluster}, .handler = &ClusterExtendLease});
  table.Add({.noun = "cluster", .verb = "list", .summary = "List clusters.",
             .description = "Clusters that are not terminated, oldest first; --all includes terminated ones.",
             .flags = {{.name = "--all", .value_name = "", .help = "include terminated clusters"},
                       {.name = "--limit", .value_name = "N", .help = "only the first N clusters (default: every one)"}},
             .args = {},
             .handler = &ClusterList});
  table.Add({.noun = "cluster", .verb = "get", .summary = "Show a cluster: nodes, addresses, services, history.",
             .description = "Secrets in node results (ssh private keys) are shown as <redacted>.",
             .flags = {}, .args = {cluster}, .handler = &ClusterGet});
}

}  // namespace weft::cli
