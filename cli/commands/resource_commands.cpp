// weft resource ...: plugin resources (scripts, archives, Lua plugins) in the
// server's resource store: upload makes a new inactive version, stage + sync
// make it active, recall retires it (docs/protocol.md, "Resources").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/digest.hpp"

namespace weft::cli {
namespace {

constexpr std::int64_t kDefaultChunkBytes = 4 << 20;
constexpr std::int64_t kMaxChunkBytes = 16 << 20;  // weftd's default limits.max_frame_bytes
constexpr std::int64_t kBytesPerSecondFloor = 1 << 20;  // a chunk's timeout allows for this slow a link

std::string Bytes(std::int64_t n) {
  char buf[64];
  if (n < 1024) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  } else if (n < (1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024);
  } else if (n < (1LL << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(n) / (1LL << 30));
  }
  return buf;
}

// "sha256:0123456789ab…" is enough to tell versions apart in a table.
std::string ShortDigest(const std::string& digest) {
  return digest.size() > 19 ? digest.substr(0, 19) + "..." : digest;
}

Result<std::int64_t> ParsePositive(const std::string& text, const std::string& what, std::int64_t max) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno != 0 || v < 1 || v > max)
    return Status::Invalid(what + " must be an integer from 1 to " + std::to_string(max) + ", got '" + text + "'");
  return static_cast<std::int64_t>(v);
}

class Progress {
 public:
  Progress(Context& ctx, std::string what, std::int64_t total, std::int64_t chunk)
      : ctx_(ctx), what_(std::move(what)), total_(total),
        show_(!ctx.json_output() && total > chunk), tty_(isatty(STDERR_FILENO) == 1) {}

  void Sent(std::int64_t bytes) {
    if (!show_) return;
    const int percent = total_ > 0 ? static_cast<int>(bytes * 100 / total_) : 100;
    const std::string line = "uploading " + what_ + ": " + Bytes(bytes) + " of " + Bytes(total_) + " (" +
                             std::to_string(percent) + "%)";
    if (tty_) {
      ctx_.err() << '\r' << line << "\033[K" << std::flush;
    } else if (percent / 25 != last_quarter_) {
      ctx_.err() << line << '\n';  // not a terminal: a line per quarter
    }
    last_quarter_ = percent / 25;
  }
  void Done() {
    if (show_ && tty_) ctx_.err() << '\n';
  }

 private:
  Context& ctx_;
  std::string what_;
  std::int64_t total_;
  bool show_;
  bool tty_;
  int last_quarter_ = -1;
};

Status ResourceUpload(Context& ctx, const ParsedArgs& args) {
  const std::string& type = args.positionals.at(0);
  const std::string& name = args.positionals.at(1);
  const std::string& file = args.positionals.at(2);
  std::int64_t chunk = kDefaultChunkBytes;
  if (args.Has("--chunk-size")) {
    Result<std::int64_t> c = ParsePositive(args.Get("--chunk-size"), "--chunk-size", kMaxChunkBytes);
    if (!c.ok()) return ctx.UsageError(c.status().message());
    chunk = *c;
  }
  // The digest first: the server checks the bytes it received against it.
  Result<digest::FileDigest> digest = digest::Sha256OfFile(file);
  if (!digest.ok())
    return Status::NotFound(digest.status().message() + "; give the path of the file to upload");
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + file + ": " + std::strerror(errno));
  const std::string what = type + "/" + name;
  Progress progress(ctx, what, digest->size_bytes, chunk);
  std::string upload_id;
  std::int64_t offset = 0;
  Result<json> reply = Status::Internal("nothing sent");
  std::string buf(static_cast<std::size_t>(chunk), '\0');
  while (true) {
    std::size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = read(fd, buf.data() + got, buf.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        close(fd);
        return Status::Internal("cannot read " + file + ": " + std::strerror(e));
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    const bool final = offset + static_cast<std::int64_t>(got) >= digest->size_bytes;
    json body = {{"type", type}, {"name", name}, {"offset", offset}, {"final", final}};
    if (!upload_id.empty()) body["upload_id"] = upload_id;
    if (final) {
      body["digest"] = digest->digest;
      body["size"] = digest->size_bytes;
    }
    const int timeout_ms = ctx.options().timeout_ms + static_cast<int>(chunk * 1000 / kBytesPerSecondFloor);
    reply = ctx.Call("resource.upload", std::move(body), {buf.substr(0, got)}, timeout_ms);
    if (!reply.ok()) break;
    upload_id = reply->value("upload_id", "");
    offset += static_cast<std::int64_t>(got);
    progress.Sent(offset);
    if (final) break;
    if (got == 0) {
      reply = Status::Internal(file + " ended before its " + std::to_string(digest->size_bytes) +
                               " bytes were read; it changed during the upload");
      break;
    }
  }
  close(fd);
  progress.Done();
  if (!reply.ok()) return reply.status();
  if (ctx.json_output()) {
    ctx.PrintJson(*reply);
    return Status::Ok();
  }
  const std::string version = Text(*reply, "version");
  ctx.out() << "uploaded " << Printable(what) << " version " << version << " (" << Bytes(Int(*reply, "size"))
            << ", " << Printable(Text(*reply, "digest")) << "), inactive; make it active with\n"
            << "  " << ctx.CommandLine("resource stage " + Printable(type) + " " + Printable(name) + " " + version)
            << " && " << ctx.CommandLine("resource sync") << '\n';
  return Status::Ok();
}

Status ResourceList(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (!args.positionals.empty()) body["type"] = args.positionals[0];
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("resource.list", body));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json resources = reply.value("resources", json::array());
  if (!resources.is_array() || resources.empty()) {
    ctx.out() << "no resources" << (args.positionals.empty() ? "" : " of type " + Printable(args.positionals[0]))
              << "; add one with " << ctx.Suggest("resource upload TYPE NAME FILE") << '\n';
    return Status::Ok();
  }
  Table table({"TYPE", "NAME", "VERSION", "STATE", "SIZE", "DIGEST", "UPLOADED BY"});
  table.AlignRight(2);
  table.AlignRight(4);
  for (const json& r : resources) {
    if (!r.is_object()) continue;
    const json versions = r.value("versions", json::array());
    if (versions.empty()) table.AddRow({Text(r, "type"), Text(r, "name"), "-", "no versions", "-", "-", "-"});
    for (const json& v : versions) {
      table.AddRow({Text(r, "type"), Text(r, "name"), Text(v, "version"), Text(v, "state"), Bytes(Int(v, "size")),
                    ShortDigest(v.value("digest", "")), Text(v, "created_by")});
    }
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status ResourceStage(Context& ctx, const ParsedArgs& args) {
  Result<std::int64_t> version = ParsePositive(args.positionals.at(2), "VERSION", INT64_MAX);
  if (!version.ok()) return ctx.UsageError(version.status().message());
  WEFT_ASSIGN_OR_RETURN(
      json reply, ctx.Call("resource.stage",
                           {{"type", args.positionals[0]}, {"name", args.positionals[1]}, {"version", *version}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "staged " << Printable(args.positionals[0] + "/" + args.positionals[1]) << " version " << *version
            << "; " << ctx.Suggest("resource sync") << " makes every staged version active\n";
  return Status::Ok();
}

Status ResourceRecall(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(
      json reply, ctx.Call("resource.recall", {{"type", args.positionals.at(0)}, {"name", args.positionals.at(1)}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "recalled " << Printable(args.positionals[0] + "/" + args.positionals[1]) << " version "
            << Text(reply, "version") << "; new tasks get no version of it (running ones keep theirs)\n";
  return Status::Ok();
}

Status ResourceSync(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("resource.sync"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json activated = reply.value("activated", json::array());
  if (!activated.is_array() || activated.empty()) {
    ctx.out() << "nothing was staged; stage a version first with " << ctx.Suggest("resource stage TYPE NAME VERSION")
              << '\n';
    return Status::Ok();
  }
  bool lua = false;
  for (const json& a : activated) {
    ctx.out() << "activated " << Printable(Text(a, "type") + "/" + Text(a, "name")) << " version "
              << Text(a, "version")
              << (a.contains("retired") && a["retired"].is_number() ? " (version " + Text(a, "retired") + " retired)"
                                                                     : std::string())
              << '\n';
    lua = lua || Text(a, "type") == "lua-plugin";
  }
  // Activated is not loaded: hosts check a Lua plugin when they install it.
  if (lua) ctx.out() << "hosts load Lua plugins within seconds; `weft plugin list` shows any a host refused, and why\n";
  return Status::Ok();
}

Status ResourceDelete(Context& ctx, const ParsedArgs& args) {
  json body = {{"type", args.positionals.at(0)}, {"name", args.positionals.at(1)}};
  if (args.positionals.size() > 2) {
    Result<std::int64_t> version = ParsePositive(args.positionals[2], "VERSION", INT64_MAX);
    if (!version.ok()) return ctx.UsageError(version.status().message());
    body["version"] = *version;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("resource.delete", body));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  std::vector<std::string> versions;
  for (const json& v : reply.value("deleted", json::array())) versions.push_back(ValueText(v));
  ctx.out() << "deleted " << Printable(args.positionals[0] + "/" + args.positionals[1])
            << (args.positionals.size() > 2 ? " version " : " (versions ")
            << (versions.empty() ? std::string("none") : Join(versions))
            << (args.positionals.size() > 2 ? "" : ")") << '\n';
  return Status::Ok();
}

}  // namespace

void RegisterResourceCommands(CommandTable& table) {
  const ArgSpec type{.name = "TYPE", .required = true,
                     .help = "the plugin type that uses it (e.g. shell), or lua-plugin for a Lua plugin file"};
  const ArgSpec name{.name = "NAME", .required = true, .help = "the resource's file name, e.g. install-nginx.sh"};
  table.Add({.noun = "resource",
             .verb = "upload",
             .summary = "Upload a file as a new, inactive version of a resource.",
             .description = "The file travels in chunks (--chunk-size, default 4 MiB) with its SHA-256, which\n"
                            "the server checks. Tasks get the version only once it is staged and synced.\n"
                            "A lua-plugin resource (NAME ending in .lua) becomes a plugin on the hosts.",
             .flags = {{.name = "--chunk-size", .value_name = "BYTES",
                        .help = "bytes per request, 1 to 16777216 (default 4194304)"}},
             .args = {type, name, {.name = "FILE", .required = true, .help = "the local file to upload"}},
             .handler = &ResourceUpload});
  table.Add({.noun = "resource",
             .verb = "list",
             .summary = "List the resources of the tenant, one row per version with its state.",
             .description = "States: inactive (uploaded), staged (active after the next sync), active\n"
                            "(new tasks get it), retired (was active; tasks that started on it keep it).",
             .flags = {},
             .args = {{.name = "TYPE", .required = false, .help = "only resources of this type"}},
             .handler = &ResourceList});
  table.Add({.noun = "resource",
             .verb = "stage",
             .summary = "Mark a version to become active at the next sync.",
             .description = "At most one version of a resource is staged; staging another unstages it.",
             .flags = {},
             .args = {type, name, {.name = "VERSION", .required = true, .help = "the version number"}},
             .handler = &ResourceStage});
  table.Add({.noun = "resource",
             .verb = "recall",
             .summary = "Retire the active version of a resource.",
             .description = "New tasks get no version of it; tasks already running keep the one they have.",
             .flags = {},
             .args = {type, name},
             .handler = &ResourceRecall});
  table.Add({.noun = "resource",
             .verb = "sync",
             .summary = "Make every staged version of the tenant active.",
             .description = "The version each replaces is retired. Hosts pick up the change within\n"
                            "resource_sync_ms; a task keeps the versions it was handed.",
             .flags = {},
             .args = {},
             .handler = &ResourceSync});
  table.Add({.noun = "resource",
             .verb = "delete",
             .summary = "Delete a version that is not active, or a whole resource.",
             .description = "Without VERSION every version goes; none may be active (recall it first).",
             .flags = {},
             .args = {type, name, {.name = "VERSION", .required = false, .help = "only this version"}},
             .handler = &ResourceDelete});
}

}  // namespace weft::cli
