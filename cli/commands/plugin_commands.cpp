// weft plugin ...: the plugin types registered hosts can run, with their fields.
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

// The default column: absent when the plugin gives none.
std::string DefaultText(const json& field) {
  if (!field.is_object() || !field.contains("default")) return "";
  if (field.value("sensitive", false)) return "(hidden)";
  const json& v = field["default"];
  // Quoted, so an empty string default is visible.
  if (v.is_string()) return json(v.get<std::string>()).dump(-1, ' ', false, json::error_handler_t::replace);
  return ValueText(v);
}

void PrintPlugin(Context& ctx, const json& p) {
  std::ostream& out = ctx.out();
  std::size_t live = p.contains("live_hosts") && p["live_hosts"].is_array() ? p["live_hosts"].size() : 0;
  std::size_t all = p.contains("hosts") && p["hosts"].is_array() ? p["hosts"].size() : 0;
  // A plugin need not declare a version: then none is printed ("(automator)").
  const std::string version = Text(p, "version");
  // Hosts may run different versions of the type (weftd before this field sends none).
  const json versions = p.contains("versions") && p["versions"].is_array() ? p["versions"] : json::array();
  if (versions.size() > 1) {
    std::string names;
    for (const json& v : versions) names += (names.empty() ? "" : ", ") + Printable(Text(v, "version"));
    out << Printable(Text(p, "type")) << "  (" << Printable(Text(p, "kind")) << ", " << versions.size()
        << " versions on the hosts: " << names << ")\n";
  } else {
    out << Printable(Text(p, "type")) << "  (" << Printable(Text(p, "kind"))
        << (version.empty() ? std::string() : ", version " + Printable(version)) << ")\n";
  }
  KeyValues kv;
  if (p.contains("description") && p["description"].is_string() && !p["description"].get<std::string>().empty()) {
    kv.Add("description", Text(p, "description"));
  }
  kv.Add("actions", Join(p, "actions", " "));
  kv.Add("hosts", Join(p, "hosts") + " (" + std::to_string(live) + " of " + std::to_string(all) + " live)");
  if (versions.size() > 1) {
    for (const json& v : versions) {
      const std::size_t v_live = v.contains("live_hosts") && v["live_hosts"].is_array() ? v["live_hosts"].size() : 0;
      const std::size_t v_all = v.contains("hosts") && v["hosts"].is_array() ? v["hosts"].size() : 0;
      const std::string name = Text(v, "version");
      kv.Add("version " + (name.empty() ? std::string("(none)") : name),
             Join(v, "hosts") + " (" + std::to_string(v_live) + " of " + std::to_string(v_all) + " live)");
    }
    kv.Add("shown", "actions and fields of version " + (version.empty() ? std::string("(none)") : version));
  }
  if (p.contains("resource_types") && p["resource_types"].is_array() && !p["resource_types"].empty()) {
    kv.Add("resources", Join(p, "resource_types"));
  }
  kv.Print(out, "  ");

  const json& fields = p.contains("fields") ? p["fields"] : json::array();
  if (!fields.is_array() || fields.empty()) {
    out << "  fields: none\n";
    return;
  }
  out << "  fields:\n";
  Table table({"NAME", "TYPE", "REQUIRED", "SENSITIVE", "DEFAULT", "LABEL"});
  for (const json& f : fields) {
    table.AddRow({Text(f, "name"), Text(f, "type"), YesNo(f, "required"), YesNo(f, "sensitive"), DefaultText(f),
                  f.contains("label") ? Text(f, "label") : ""});
  }
  table.Print(out, "    ");
}

// The entries of `list` (plugins or refused files) of plugin type `wanted`.
json OfType(const json& list, const std::string& wanted) {
  json kept = json::array();
  for (const json& p : list) {
    if (p.is_object() && p.value("type", "") == wanted) kept.push_back(p);
  }
  return kept;
}

}  // namespace

void PrintRefusedPlugins(std::ostream& out, const json& refused, bool with_host) {
  for (const json& r : refused) {
    if (!r.is_object()) continue;
    std::string what = Printable(Text(r, "file"));
    std::string about;
    if (r.contains("tenant")) about += "tenant " + Printable(Text(r, "tenant"));
    if (r.contains("type")) about += (about.empty() ? "" : ", ") + std::string("type ") + Printable(Text(r, "type"));
    if (!about.empty()) what += " (" + about + ")";
    if (with_host) what += " on host " + Printable(Text(r, "host_id"));
    out << "  REFUSED " << what << ": " << Printable(Text(r, "reason")) << "\n";
  }
}

namespace {

Status PluginList(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("plugin.list"));
  json plugins = reply.contains("plugins") ? reply["plugins"] : json::array();
  if (!plugins.is_array()) plugins = json::array();
  // Plugin files live hosts refused (weftd before this field sends none).
  json refused = reply.contains("refused") && reply["refused"].is_array() ? reply["refused"] : json::array();
  if (args.Has("--type")) {
    const std::string wanted = args.Get("--type");
    plugins = OfType(plugins, wanted);
    refused = OfType(refused, wanted);
    if (plugins.empty() && refused.empty())
      return Status::NotFound("no registered host offers plugin type '" + wanted + "'");
  }
  if (ctx.json_output()) {
    // The reply body as the server sent it, with only the lists filtered.
    if (args.Has("--type")) {
      reply["plugins"] = plugins;
      if (reply.contains("refused")) reply["refused"] = refused;
    }
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  if (plugins.empty()) {
    ctx.out() << "no plugin types registered; a weft-host lists its plugins when it registers\n";
  }
  bool first = true;
  for (const json& p : plugins) {
    if (!first) ctx.out() << '\n';
    first = false;
    PrintPlugin(ctx, p);
  }
  if (!refused.empty()) {
    ctx.out() << (plugins.empty() ? "" : "\n") << "refused plugin files (the host does not run them):\n";
    PrintRefusedPlugins(ctx.out(), refused, /*with_host=*/true);
  }
  return Status::Ok();
}

}  // namespace

void RegisterPluginCommands(CommandTable& table) {
  table.Add({.noun = "plugin",
             .verb = "list",
             .summary = "List the plugin types registered hosts can run, with their fields.",
             .description = "One block per plugin type: its kind, version, actions, the hosts that offer it,\n"
                            "(when hosts run different versions of it: each version with its hosts),\n"
                            "and the fields a provider or service gives it (name, type, whether required\n"
                            "or sensitive, default). Defaults of sensitive fields are not shown.\n"
                            "Then the plugin files live hosts refused (a Lua plugin that does not load,\n"
                            "a file not named after its type), each with its host and the reason.",
             .flags = {{.name = "--type", .value_name = "TYPE", .help = "show only this plugin type"}},
             .args = {},
             .handler = &PluginList});
}

}  // namespace weft::cli
