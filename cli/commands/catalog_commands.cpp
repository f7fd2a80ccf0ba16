// weft catalog ... and weft <kind> ...: the tenant's catalog of providers,
// hardware types, image types, services and cluster templates. Import and export
// read and write the Coopr directory layout with weft_catalog's own reader and
// writer; every entity goes to and comes from the server one op at a time.
#include <chrono>
#include <fstream>
#include <sstream>

#include "weft/catalog/catalog.hpp"
#include "weft/catalog/directory.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

using catalog::Kind;

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Op(Kind kind, std::string_view verb) {
  std::string op(catalog::KindName(kind));
  op.append(".").append(verb);
  return op;
}

// ---- weft <kind> list|get|put|delete --------------------------------------

Status ListEntities(Context& ctx, Kind kind) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(Op(kind, "list")));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& list = reply.contains("entities") ? reply["entities"] : json::array();
  if (!list.is_array() || list.empty()) {
    ctx.out() << "no " << catalog::KindDirectory(kind) << " in this tenant; add one with "
              << ctx.Suggest(std::string(catalog::KindName(kind)) + " put FILE") << " or "
              << ctx.Suggest("catalog import DIR") << '\n';
    return Status::Ok();
  }
  const std::int64_t now_ms = NowMs();
  Table table({"NAME", "VERSION", "UPDATED"});
  table.AlignRight(1);
  for (const json& e : list) table.AddRow({Text(e, "name"), Text(e, "version"), Ago(now_ms, Int(e, "created_at_ms"))});
  table.Print(ctx.out());
  return Status::Ok();
}

Status GetEntity(Context& ctx, const ParsedArgs& args, Kind kind) {
  json body = {{"name", args.positionals.at(0)}};
  if (args.Has("--version")) {
    const std::string v = args.Get("--version");
    std::int64_t n = 0;
    std::istringstream in(v);
    if (!(in >> n) || !in.eof() || n < 1)
      return ctx.UsageError("--version needs a version number from 1 up, got '" + v + "'");
    body["version"] = n;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(Op(kind, "get"), std::move(body)));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  // The entity alone, so `weft provider get x > x.json` gives a file `put` takes back.
  ctx.PrintJson(reply.contains("entity") ? reply["entity"] : json::object());
  return Status::Ok();
}

Result<json> ReadJsonFile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + file + "; check the path and its permissions");
  std::ostringstream text;
  text << in.rdbuf();
  return catalog::ParseJsonText(text.str(), file);
}

void PrintWarnings(Context& ctx, const json& reply) {
  if (!reply.contains("warnings") || !reply["warnings"].is_array()) return;
  for (const json& w : reply["warnings"])
    if (w.is_string()) ctx.err() << "weft: warning: " << Printable(w.get<std::string>()) << '\n';
}

Status PutEntity(Context& ctx, const ParsedArgs& args, Kind kind) {
  WEFT_ASSIGN_OR_RETURN(json doc, ReadJsonFile(args.positionals.at(0)));
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(Op(kind, "put"), std::move(doc)));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  if (reply.value("unchanged", false))
    ctx.out() << catalog::KindName(kind) << " '" << Printable(Text(reply, "name")) << "' unchanged: equal to version "
              << Text(reply, "version") << ", its latest\n";
  else
    ctx.out() << catalog::KindName(kind) << " '" << Printable(Text(reply, "name")) << "' saved as version "
              << Text(reply, "version") << '\n';
  PrintWarnings(ctx, reply);
  return Status::Ok();
}

Status DeleteEntity(Context& ctx, const ParsedArgs& args, Kind kind) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(Op(kind, "delete"), json{{"name", args.positionals.at(0)}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << catalog::KindName(kind) << " '" << Printable(Text(reply, "name"))
            << "' deleted; earlier versions stay readable with --version N\n";
  return Status::Ok();
}

// Handlers are plain function pointers: one instance per kind.
template <Kind K>
Status KindList(Context& ctx, const ParsedArgs&) {
  return ListEntities(ctx, K);
}
template <Kind K>
Status KindGet(Context& ctx, const ParsedArgs& args) {
  return GetEntity(ctx, args, K);
}
template <Kind K>
Status KindPut(Context& ctx, const ParsedArgs& args) {
  return PutEntity(ctx, args, K);
}
template <Kind K>
Status KindDelete(Context& ctx, const ParsedArgs& args) {
  return DeleteEntity(ctx, args, K);
}

template <Kind K>
void RegisterKind(CommandTable& table) {
  const std::string noun(catalog::KindName(K));
  const std::string plural(catalog::KindDirectory(K));
  const std::string a_noun = (noun[0] == 'i' ? "an " : "a ") + noun;  // "an imagetype"
  table.Add({.noun = noun,
             .verb = "list",
             .summary = "List the " + plural + " of the tenant, with their latest versions.",
             .description = "One row per " + noun + ": its name, latest version and when that version was put.",
             .flags = {},
             .args = {},
             .handler = &KindList<K>});
  table.Add({.noun = noun,
             .verb = "get",
             .summary = "Print one " + noun + " as JSON (the latest version, or --version N).",
             .description = "Prints the " + noun + "'s JSON as stored, so the output can be edited and put back.\n"
                            "With -o json, prints the whole reply (name, version, created_at_ms, entity).",
             .flags = {{.name = "--version", .value_name = "N", .help = "an earlier version"}},
             .args = {{.name = "NAME", .required = true, .help = "the " + noun + "'s name"}},
             .handler = &KindGet<K>});
  table.Add({.noun = noun,
             .verb = "put",
             .summary = "Add or update " + a_noun + " from a JSON file (a new version when it differs).",
             .description = "Validates the file on the server; an invalid " + noun +
                            " is refused with every problem named\n"
                            "by its JSON path. Unknown fields are kept and shown as warnings, and so are plugin\n"
                            "fields the registered plugin would refuse (as `weft catalog check` finds them).\n"
                            "A file equal to the latest version (secrets compared in the clear) keeps that version.",
             .flags = {},
             .args = {{.name = "FILE", .required = true, .help = "a JSON file in the Coopr format"}},
             .handler = &KindPut<K>});
  table.Add({.noun = noun,
             .verb = "delete",
             .summary = "Delete " + a_noun + " (its earlier versions stay readable).",
             .description = "Marks the " + noun + " deleted; a later put starts the next version.",
             .flags = {},
             .args = {{.name = "NAME", .required = true, .help = "the " + noun + "'s name"}},
             .handler = &KindDelete<K>});
}

// ---- weft catalog import|export|check -------------------------------------

bool IsJsonFile(const std::string& file) { return file.size() >= 5 && file.substr(file.size() - 5) == ".json"; }

Status CatalogImport(Context& ctx, const ParsedArgs& args) {
  const std::string dir = args.positionals.at(0);
  WEFT_ASSIGN_OR_RETURN(catalog::ImportResult read, catalog::ImportDirectory(dir));
  json imported = json::array();
  json unchanged = json::array();
  json refused = json::array();
  json skipped = json::array();
  for (const catalog::SkippedFile& s : read.report.skipped) {
    // A .json file the reader refused is a refused entity; anything else is only noted.
    (IsJsonFile(s.file) ? refused : skipped).push_back({{"file", s.file}, {"reason", s.reason}});
  }
  for (const catalog::ImportedEntity& e : read.report.imported) {
    Result<json> doc = read.catalog.GetJson(e.kind, e.name);
    // An entity the tenant already has as it is keeps its version. Equal text
    // saves a put; one with secrets differs in its sealed text, and the put
    // (which compares with those opened) says whether it changed anything.
    if (doc.ok()) {
      Result<json> current = ctx.Call(Op(e.kind, "get"), json{{"name", e.name}});
      if (!current.ok() && (current.status().code() == Code::kUnavailable || current.status().code() == Code::kTimeout))
        return current.status();
      if (current.ok() && current->contains("entity") && (*current)["entity"] == *doc) {
        unchanged.push_back({{"kind", catalog::KindName(e.kind)},
                             {"name", e.name},
                             {"file", e.file},
                             {"version", (*current)["version"]}});
        continue;
      }
    }
    Result<json> reply = doc.ok() ? ctx.Call(Op(e.kind, "put"), *doc) : Result<json>(doc.status());
    if (!reply.ok()) {
      // A server that cannot be reached, or a tenant that does not exist (a put
      // is never NOT_FOUND otherwise), refuses everything: stop at the first.
      if (reply.status().code() == Code::kUnavailable || reply.status().code() == Code::kTimeout ||
          reply.status().code() == Code::kNotFound)
        return reply.status();
      refused.push_back({{"file", e.file}, {"reason", reply.status().message()}});
      continue;
    }
    if (reply->value("unchanged", false)) {
      unchanged.push_back(
          {{"kind", catalog::KindName(e.kind)}, {"name", e.name}, {"file", e.file}, {"version", (*reply)["version"]}});
      continue;
    }
    imported.push_back({{"kind", catalog::KindName(e.kind)},
                        {"name", e.name},
                        {"file", e.file},
                        {"version", (*reply)["version"]},
                        {"warnings", (*reply)["warnings"]}});
  }
  if (ctx.json_output()) {
    ctx.PrintJson({{"imported", imported}, {"unchanged", unchanged}, {"skipped", skipped}, {"refused", refused}});
  } else {
    for (const json& i : imported) {
      ctx.out() << "imported " << Text(i, "kind") << " '" << Printable(Text(i, "name")) << "' (version "
                << Text(i, "version") << ")\n";
      for (const json& w : i["warnings"]) ctx.out() << "  warning: " << Printable(ValueText(w)) << '\n';
    }
    for (const json& u : unchanged)
      ctx.out() << "unchanged " << Text(u, "kind") << " '" << Printable(Text(u, "name")) << "' (version "
                << Text(u, "version") << ")\n";
    for (const json& s : skipped)
      ctx.out() << "skipped " << Printable(Text(s, "file")) << ": " << Printable(Text(s, "reason")) << '\n';
    for (const json& r : refused)
      ctx.out() << "refused " << Printable(Text(r, "file")) << ": " << Printable(Text(r, "reason")) << '\n';
    ctx.out() << Count(static_cast<std::int64_t>(imported.size()), "entity", "entities") << " imported, "
              << unchanged.size() << " unchanged, " << Count(static_cast<std::int64_t>(skipped.size()), "file", "files") << " skipped, "
              << refused.size() << " refused\n";
  }
  if (!refused.empty())
    return Status::Invalid(Count(static_cast<std::int64_t>(refused.size()), "file was", "files were") +
                           " refused; fix them and import again (the others are in)");
  return Status::Ok();
}

Status CatalogExport(Context& ctx, const ParsedArgs& args) {
  const std::string dir = args.positionals.at(0);
  catalog::Catalog cat;
  json written = json::array();
  for (Kind kind : catalog::kAllKinds) {
    // A page of entities with their bodies per request: one request per
    // entity would run into the server's per-connection rate limit.
    json page = {{"with_entities", true}};
    while (true) {
      WEFT_ASSIGN_OR_RETURN(json list, ctx.Call(Op(kind, "list"), page));
      const json& entities = list.contains("entities") ? list["entities"] : json::array();
      for (const json& e : entities) {
        const std::string name = Text(e, "name");
        Result<std::string> put = cat.PutJson(kind, e.contains("entity") ? e["entity"] : json::object());
        if (!put.ok())
          return Status::Internal("the server sent a " + std::string(catalog::KindName(kind)) + " '" + name +
                                  "' this weft cannot read: " + put.status().message());
        written.push_back({{"kind", catalog::KindName(kind)},
                           {"name", name},
                           {"version", e.value("version", json())},
                           {"file", std::string(catalog::KindDirectory(kind)) + "/" + name + ".json"}});
      }
      const json next = list.value("next", json());
      if (!next.is_string() || entities.empty()) break;
      page["after"] = next;
    }
  }
  Status s = catalog::ExportDirectory(cat, dir);
  if (!s.ok()) return s;
  if (ctx.json_output()) {
    ctx.PrintJson({{"directory", dir}, {"exported", written}});
    return Status::Ok();
  }
  for (const json& w : written)
    ctx.out() << "exported " << Text(w, "kind") << " '" << Printable(Text(w, "name")) << "' (version "
              << Text(w, "version") << ") to " << Printable(Text(w, "file")) << '\n';
  ctx.out() << Count(static_cast<std::int64_t>(written.size()), "entity", "entities") << " exported to "
            << Printable(dir) << '\n';
  return Status::Ok();
}

Status CatalogCheck(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("catalog.check"));
  const std::int64_t problems = Int(reply, "problems");
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
  } else {
    auto section = [&](const char* key, const char* title) {
      if (!reply.contains(key) || !reply[key].is_array() || reply[key].empty()) return;
      ctx.out() << title << ":\n";
      for (const json& item : reply[key]) ctx.out() << "  " << Printable(Text(item, "message")) << '\n';
    };
    section("dangling", "dangling references");
    section("unrunnable", "plugin types no live host runs");
    section("fields", "plugin fields");
    section("warnings", "warnings (not counted as problems)");
    const bool warned = reply.contains("warnings") && reply["warnings"].is_array() && !reply["warnings"].empty();
    if (problems == 0 && !warned)
      ctx.out() << "catalog is consistent: every reference resolves, every plugin type runs on a live host and "
                   "every field fits its plugin\n";
    else if (problems == 0)
      ctx.out() << "no problems found, but see the warnings: not everything could be checked\n";
  }
  if (problems > 0)
    return Status::Invalid("catalog check found " + Count(problems, "problem", "problems"));
  return Status::Ok();
}

}  // namespace

void RegisterCatalogCommands(CommandTable& table) {
  table.Add({.noun = "catalog",
             .verb = "import",
             .summary = "Put every entity of a Coopr-layout directory into the tenant's catalog.",
             .description = "Reads DIR/providers, hardwaretypes, imagetypes, services and clustertemplates\n"
                            "(one <name>.json per entity), puts each entity that differs from the tenant's\n"
                            "latest version as a new version (the same one stays as it is, \"unchanged\"),\n"
                            "and reports what was imported, unchanged, skipped (other files and folders) and\n"
                            "refused, and why. Exits 1 if anything was refused, or if DIR holds no kind folder.",
             .flags = {},
             .args = {{.name = "DIR", .required = true, .help = "a catalog directory"}},
             .handler = &CatalogImport});
  table.Add({.noun = "catalog",
             .verb = "export",
             .summary = "Write the tenant's catalog to a directory in the Coopr layout.",
             .description = "Writes the latest version of every entity as DIR/<kind dir>/<name>.json\n"
                            "(sorted keys, 2-space indent), so import then export round-trips unchanged.",
             .flags = {},
             .args = {{.name = "DIR", .required = true, .help = "where to write (created if needed)"}},
             .handler = &CatalogExport});
  table.Add({.noun = "catalog",
             .verb = "check",
             .summary = "List dangling references and plugin types no live host can run.",
             .description = "Finds references to missing entities, provider and automator types no live\n"
                            "registered host offers, and provider fields the plugin does not know or needs.\n"
                            "Exits 1 when it finds anything.",
             .flags = {},
             .args = {},
             .handler = &CatalogCheck});
  RegisterKind<Kind::kProvider>(table);
  RegisterKind<Kind::kHardwareType>(table);
  RegisterKind<Kind::kImageType>(table);
  RegisterKind<Kind::kService>(table);
  RegisterKind<Kind::kClusterTemplate>(table);
}

}  // namespace weft::cli
