// weft host token create|accept|revoke|requests, weft tenant ..., weft user ...,
// weft credentials: who may reach weftd (docs/security.md).
#include <filesystem>

#include "weft/catalog/entities.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"

namespace weft::cli {
namespace {

// Prints `reply` as JSON with -o json, else `line`.
Status Done(Context& ctx, const json& reply, const std::string& line) {
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
  } else {
    ctx.out() << line << '\n';
  }
  return Status::Ok();
}

Status HostTokenCreate(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("--ttl")) {
    std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(args.Get("--ttl")));
    if (!ms || *ms < 1000)
      return ctx.UsageError("--ttl needs a duration of 1s or more such as 30m, 12h or 7d, got '" + args.Get("--ttl") +
                            "'");
    body["ttl_ms"] = *ms;
  }
  if (args.Has("--host")) body["host_id"] = args.Get("--host");
  if (args.Has("--force")) {
    if (!args.Has("--host")) return ctx.UsageError("--force needs --host: the host the token may replace");
    body["force"] = true;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.token.create", body));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  // The token alone on stdout, so `$(weft host token create)` works; the rest on stderr.
  ctx.out() << Text(reply, "token") << '\n';
  // The ttl asked for, exactly; else what is left of the server's default (rounded).
  const std::int64_t valid_ms = body.contains("ttl_ms") ? body["ttl_ms"].get<std::int64_t>()
                                                        : Int(reply, "expires_at_ms") - SystemClock::Instance().NowMs();
  const std::string for_host = Text(reply, "host_id");
  ctx.err() << "one-time enrollment token for "
            << (for_host.empty() || for_host == "-"
                    ? std::string("a new host")
                    : "host '" + for_host + "'" + (reply.value("force", false) ? " (even while it is live)" : ""))
            << ", valid for " << Duration(valid_ms)
            << "; put it in weft-host.toml as enroll_token = \"...\" (or pass --enroll-token)\n";
  return Status::Ok();
}

Status HostAccept(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals[0];
  if (!args.Has("--fingerprint"))
    return ctx.UsageError("host accept needs --fingerprint FP: the fingerprint of the key to let in, as the host "
                          "logged it and `weft host requests` shows it");
  json body = {{"host_id", id}, {"fingerprint", args.Get("--fingerprint")}};
  if (args.Has("--force")) body["force"] = true;
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.accept", body));
  return Done(ctx, reply, "host '" + id + "' accepted; it registers at its next attempt");
}

Status HostRevoke(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals[0];
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.revoke", {{"host_id", id}}));
  return Done(ctx, reply, "host '" + id + "' revoked; its tasks went back to the queue");
}

Status HostRequests(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("host.requests"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json requests = reply.value("requests", json::array());
  if (requests.empty()) {
    ctx.out() << "no host waits to be accepted\n";
    return Status::Ok();
  }
  const std::int64_t now = SystemClock::Instance().NowMs();
  Table table({"HOST", "FINGERPRINT", "KEY", "ADDRESS", "ASKED"});
  for (const json& r : requests)
    table.AddRow({Text(r, "host_id"), Text(r, "fingerprint"), Text(r, "key"), Text(r, "address"),
                  Ago(now, Int(r, "requested_at_ms"))});
  table.Print(ctx.out());
  return Status::Ok();
}

Status TenantCreate(Context& ctx, const ParsedArgs& args) {
  json body = {{"name", args.positionals[0]}};
  for (const char* flag : {"--max-clusters", "--max-nodes", "--max-workers"}) {
    if (!args.Has(flag)) continue;
    try {
      std::size_t used = 0;
      const long long v = std::stoll(args.Get(flag), &used);
      if (used != args.Get(flag).size() || v < 0) throw std::invalid_argument("");
      std::string key = std::string(flag).substr(2);
      for (char& c : key) c = c == '-' ? '_' : c;
      body[key] = v;
    } catch (const std::exception&) {
      return ctx.UsageError(std::string(flag) + " needs a number (0: no limit), got '" + args.Get(flag) + "'");
    }
  }
  const bool update = args.Has("--update");
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(update ? "tenant.update" : "tenant.create", body));
  return Done(ctx, reply, std::string("tenant '") + args.positionals[0] + "' " + (update ? "updated" : "created"));
}

Status TenantList(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("tenant.list"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  auto limit = [](const json& t, const char* key) {
    const std::int64_t v = Int(t, key);
    return v ? std::to_string(v) : std::string("-");
  };
  Table table({"NAME", "MAX CLUSTERS", "MAX NODES", "MAX WORKERS"});
  for (const json& t : reply.value("tenants", json::array()))
    table.AddRow({Text(t, "name"), limit(t, "max_clusters"), limit(t, "max_nodes"), limit(t, "max_workers")});
  table.Print(ctx.out());
  return Status::Ok();
}

Status TenantDelete(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("tenant.delete", {{"name", args.positionals[0]}}));
  return Done(ctx, reply, "tenant '" + args.positionals[0] + "' deleted; its users' keys are revoked");
}

Status UserCreate(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply,
                        ctx.Call("user.create", {{"name", args.positionals[0]}, {"role", args.Get("--role", "user")}}));
  return Done(ctx, reply,
              "user '" + args.positionals[0] + "' (" + Text(reply, "role") + ") created in tenant '" +
                  Text(reply, "tenant") + "'; `weft credentials " + args.positionals[0] +
                  " -f FILE` makes their credential file");
}

Status UserList(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("user.list"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  Table table({"NAME", "ROLE", "KEYS"});
  for (const json& u : reply.value("users", json::array()))
    table.AddRow({Text(u, "name"), Text(u, "role"), Text(u, "keys")});
  table.Print(ctx.out());
  return Status::Ok();
}

Status UserDelete(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("user.delete", {{"name", args.positionals[0]}}));
  return Done(ctx, reply, "user '" + args.positionals[0] + "' deleted; their keys are revoked");
}

// A fresh key pair made here (the secret never travels), its public half
// registered for the user, and a credential file written with mode 0600.
Status Credentials(Context& ctx, const ParsedArgs& args) {
  const std::string user = args.positionals[0];
  const std::filesystem::path file = args.Get("-f", user + ".credentials.json");
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !args.Has("--force"))
    return ctx.UsageError(file.string() + " exists; pass --force to replace it");
  WEFT_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::Generate());
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("credentials.add", {{"user", user}, {"public_key", keys.public_key}}));
  curve::Credential c;
  c.api = ctx.server();
  c.server_key = ctx.credential() ? ctx.credential()->server_key : std::string();
  c.keys = keys;
  c.tenant = Text(reply, "tenant");
  c.user = user;
  c.role = Text(reply, "role");
  WEFT_RETURN_IF_ERROR(curve::SaveCredential(file, c));
  return Done(ctx, reply,
              "wrote " + file.string() + " for user '" + user + "' of tenant '" + c.tenant + "' (" + c.role +
                  "); use it with weft --credentials " + file.string() +
                  " or copy it to ~/.config/weft/credentials.json");
}

}  // namespace

void RegisterSecurityCommands(CommandTable& table) {
  table.Add({.noun = "host",
             .verb = "token create",
             .summary = "Make a one-time token a new weft-host enrolls with.",
             .description = "Prints the token on stdout. The host spends it on its first connection: weftd records\n"
                            "the host's own key and the token is used up. It expires after --ttl (default:\n"
                            "security.token_ttl_ms, 1h). Without --host it enrolls only a host id that has no\n"
                            "key yet; with --host ID it enrolls only ID, giving it a new key, but not while ID\n"
                            "is live unless --force.",
             .flags = {{"--ttl", "DURATION", "how long the token is valid (30m, 12h, 7d)"},
                       {"--host", "ID", "the host the token is for (default: a new host)"},
                       {"--force", "", "with --host: replace the host's key even while it is live"}},
             .args = {},
             .handler = &HostTokenCreate});
  table.Add({.noun = "host",
             .verb = "accept",
             .summary = "Let in a host that asked to join with a key weftd does not know.",
             .description = "See `weft host requests` for the hosts that wait and their keys' fingerprints;\n"
                            "compare the fingerprint with the one the host logged before accepting it. A live\n"
                            "host with a key in force is not replaced unless --force.",
             .flags = {{"--fingerprint", "FP", "the fingerprint of the key to let in (required)"},
                       {"--force", "", "replace the key of a live host with this one"}},
             .args = {{"ID", true, "the host id"}},
             .handler = &HostAccept});
  table.Add({.noun = "host",
             .verb = "revoke",
             .summary = "Cut a host off at once; its tasks return to the queue.",
             .description = "Its key is revoked: its next request is refused and it cannot connect again.",
             .flags = {},
             .args = {{"ID", true, "the host id"}},
             .handler = &HostRevoke});
  table.Add({.noun = "host",
             .verb = "requests",
             .summary = "List the hosts that asked to join and wait for `weft host accept`.",
             .description = "",
             .flags = {},
             .args = {},
             .handler = &HostRequests});
  const std::vector<FlagSpec> quotas = {{"--max-clusters", "N", "clusters the tenant may have (0: no limit)"},
                                        {"--max-nodes", "N", "nodes over all its clusters (0: no limit)"},
                                        {"--max-workers", "N", "worker threads it may get on the hosts (0: no limit)"}};
  std::vector<FlagSpec> create_flags = quotas;
  create_flags.push_back({"--update", "", "change the quotas of an existing tenant"});
  table.Add({.noun = "tenant",
             .verb = "create",
             .summary = "Create a tenant (superadmin), or with --update change its quotas.",
             .description = "",
             .flags = create_flags,
             .args = {{"NAME", true, "a-z, 0-9, '-' and '_'"}},
             .handler = &TenantCreate});
  table.Add({.noun = "tenant",
             .verb = "list",
             .summary = "List the tenants and their quotas (superadmin).",
             .description = "",
             .flags = {},
             .args = {},
             .handler = &TenantList});
  table.Add({.noun = "tenant",
             .verb = "delete",
             .summary = "Delete a tenant and revoke its users' keys (superadmin).",
             .description = "",
             .flags = {},
             .args = {{"NAME", true, "the tenant"}},
             .handler = &TenantDelete});
  table.Add({.noun = "user",
             .verb = "create",
             .summary = "Create a user of the tenant (--tenant, or your own).",
             .description = "Role user: their own clusters, the catalog read-only. Role admin: the tenant's\n"
                            "catalog, resources, users and every cluster.",
             .flags = {{"--role", "ROLE", "user (default) or admin"}},
             .args = {{"NAME", true, "a-z, 0-9, '-' and '_'"}},
             .handler = &UserCreate});
  table.Add({.noun = "user",
             .verb = "list",
             .summary = "List the tenant's users.",
             .description = "",
             .flags = {},
             .args = {},
             .handler = &UserList});
  table.Add({.noun = "user",
             .verb = "delete",
             .summary = "Delete a user and revoke their keys.",
             .description = "",
             .flags = {},
             .args = {{"NAME", true, "the user"}},
             .handler = &UserDelete});
  table.Add({.noun = "credentials",
             .verb = "",
             .summary = "Write a credential file for a user of the tenant.",
             .description = "Makes a key pair here, registers its public half for USER and writes the file\n"
                            "(mode 0600): the server's endpoint and key, and the user's key pair.",
             .flags = {{"-f", "FILE", "where to write it (default USER.credentials.json)"},
                       {"--force", "", "replace an existing file"}},
             .args = {{"USER", true, "the user"}},
             .handler = &Credentials});
}

}  // namespace weft::cli
