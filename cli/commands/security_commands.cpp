// weft host token create|accept|revoke|requests, weft tenant ..., weft user ...,
// weft user key list|rotate|revoke, weft credentials: who may reach weftd (docs/security.md).
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
                  Text(reply, "tenant") + "'; " + ctx.Suggest("credentials " + args.positionals[0] + " -f FILE") +
                  " makes their credential file");
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

// The keys of a user (of yourself, of a user of your tenant as its admin, or
// the superadmin's own as user "superadmin").
Status UserKeyList(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("user.key.list", {{"name", args.positionals[0]}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const std::int64_t now = SystemClock::Instance().NowMs();
  Table table({"FINGERPRINT", "STATE", "CREATED", "BY", "LAST SEEN", "UNTIL", ""});
  for (const json& k : reply.value("keys", json::array())) {
    const std::int64_t seen = Int(k, "last_seen_ms");
    const std::int64_t expires = Int(k, "expires_at_ms");
    const std::int64_t revoked = Int(k, "revoked_at_ms");
    std::string until = "-";
    if (revoked) {
      until = Ago(now, revoked);
    } else if (expires) {
      until = expires > now ? "in " + Duration(expires - now) : Ago(now, expires);
    }
    table.AddRow({Text(k, "fingerprint"), Text(k, "state"), Ago(now, Int(k, "created_at_ms")), Text(k, "created_by"),
                  seen ? Ago(now, seen) : std::string("-"), until,
                  k.value("yours", false) ? std::string("(this credential)") : std::string()});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status UserKeyRotate(Context& ctx, const ParsedArgs& args) {
  const std::string user = args.positionals[0];
  json body = {{"name", user}};
  if (args.Has("--grace")) {
    std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(args.Get("--grace")));
    if (!ms || *ms < 0 || *ms > 24LL * 3600 * 1000)
      return ctx.UsageError("--grace needs a duration up to 24h such as 10m or 1h, got '" + args.Get("--grace") + "'");
    body["grace_ms"] = *ms;
  }
  if (args.Has("--fingerprint")) body["fingerprint"] = args.Get("--fingerprint");
  // Whose keys, and may we: asked first, so that no file is written for a refusal.
  WEFT_ASSIGN_OR_RETURN(json listed, ctx.Call("user.key.list", {{"name", user}}));
  if (Text(listed, "tenant") == "_system") {
    // weftd makes the superadmin's key and writes it to its own credential file.
    if (args.Has("-f"))
      return ctx.UsageError("the superadmin's new key is written by weftd to <data_dir>/credentials/superadmin.json "
                            "on its machine; -f does not apply");
    WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("user.key.rotate", body));
    std::string retired;
    for (const json& fp : reply.value("retired", json::array())) retired += (retired.empty() ? "" : ", ") + fp.get<std::string>();
    return Done(ctx, reply,
                "weftd wrote the superadmin's new credential to " + Text(reply, "file") + " (key fingerprint " +
                    Text(reply, "fingerprint") + "); the key it replaced (" + retired + ") " +
                    (reply.contains("expires_at_ms") ? "stops working in " + Duration(Int(body, "grace_ms"))
                                                     : std::string("no longer works")) +
                    ": copy the new file to wherever a copy of the old one is used");
  }
  const std::filesystem::path file = args.Get("-f", user + ".credentials.json");
  std::error_code ec;
  const bool in_use = ctx.credential() && ctx.credential()->user == user && ctx.credential()->tenant == Text(listed, "tenant");
  if (std::filesystem::exists(file, ec) && !args.Has("--force"))
    return ctx.UsageError(file.string() + " exists; pass --force to replace it" +
                          (in_use ? " (to replace the credential you use, name its file)" : ""));
  WEFT_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::Generate());
  curve::Credential c;
  c.api = ctx.server();
  c.server_key = ctx.credential() ? ctx.credential()->server_key : std::string();
  c.keys = keys;
  c.tenant = Text(listed, "tenant");
  c.user = user;
  c.role = ctx.credential() && in_use ? ctx.credential()->role : std::string();
  // The new key pair is on disk before weftd retires the old key: were the
  // reply lost, the pending file still holds a key that may be in force.
  const std::filesystem::path pending = file.string() + ".new";
  WEFT_RETURN_IF_ERROR(curve::SaveCredential(pending, c));
  body["public_key"] = keys.public_key;
  Result<json> reply = ctx.Call("user.key.rotate", body);
  if (!reply.ok()) {
    if (reply.status().code() == Code::kUnavailable || reply.status().code() == Code::kTimeout) {
      ctx.err() << "no answer from weftd: if the rotation went through, the new credential is " << pending.string()
                << " (weft --credentials " << pending.string() << " user key list " << user << " tells)\n";
    } else {
      std::filesystem::remove(pending, ec);
    }
    return reply.status();
  }
  c.role = Text(*reply, "role");
  WEFT_RETURN_IF_ERROR(curve::SaveCredential(file, c));
  std::filesystem::remove(pending, ec);
  std::string retired;
  for (const json& fp : reply->value("retired", json::array())) retired += (retired.empty() ? "" : ", ") + fp.get<std::string>();
  const bool several = reply->value("retired", json::array()).size() > 1;
  const std::string old =
      retired.empty() ? std::string("no other key was in force")
                      : std::string(several ? "the old keys" : "the old key") + " (" + retired + ") " +
                            (reply->contains("expires_at_ms")
                                 ? std::string(several ? "stop" : "stops") + " working in " + Duration(Int(body, "grace_ms"))
                                 : std::string(several ? "no longer work" : "no longer works"));
  return Done(ctx, *reply,
              "wrote " + file.string() + " for user '" + user + "' of tenant '" + c.tenant + "' (key fingerprint " +
                  Text(*reply, "fingerprint") + "); " + old);
}

Status UserKeyRevoke(Context& ctx, const ParsedArgs& args) {
  const std::string user = args.positionals[0];
  WEFT_ASSIGN_OR_RETURN(json reply,
                        ctx.Call("user.key.revoke", {{"name", user}, {"fingerprint", args.positionals[1]}}));
  const std::int64_t ended = Int(reply, "sessions_ended");
  return Done(ctx, reply,
              "key " + args.positionals[1] + " of user '" + user + "' revoked: weftd answers it no more" +
                  (ended ? "; " + std::to_string(ended) + " browser session" + (ended == 1 ? "" : "s") + " ended" : ""));
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
  table.Add({.noun = "user",
             .verb = "key list",
             .summary = "List a user's keys: fingerprint, state, when made and last seen.",
             .description = "A user lists their own keys, a tenant admin those of the tenant's users, the\n"
                            "superadmin anyone's (--tenant) and its own as user 'superadmin'. STATE is\n"
                            "'in force', 'expiring' (a rotation's grace), 'expired' or 'revoked'. LAST SEEN is\n"
                            "the key's last handshake since weftd started ('-': none since).",
             .flags = {},
             .args = {{"NAME", true, "the user (superadmin: the superadmin itself)"}},
             .handler = &UserKeyList});
  table.Add({.noun = "user",
             .verb = "key rotate",
             .summary = "Give a user a new key and retire the old ones (a lost or leaked credential).",
             .description = "Makes a key pair here, registers it for NAME and writes the credential file (mode\n"
                            "0600) as `weft credentials` does; every other key of NAME in force (or only the one\n"
                            "--fingerprint names) is revoked at once, or with --grace keeps working that long\n"
                            "(at most 24h) so that running jobs can switch. The user's browser sessions end.\n"
                            "A user rotates their own key, a tenant admin any of the tenant's users'.\n"
                            "NAME superadmin (as the superadmin): weftd makes the new key itself and writes\n"
                            "it to <data_dir>/credentials/superadmin.json (the old file is kept beside it as\n"
                            "superadmin.json.previous); copy it wherever a copy of the old one is used.",
             .flags = {{"-f", "FILE", "where to write the new credential (default NAME.credentials.json)"},
                       {"--force", "", "replace an existing file (such as the credential you use)"},
                       {"--grace", "DURATION", "the old keys keep working this long (10m, 1h; default: none)"},
                       {"--fingerprint", "FP", "retire only this key (default: all of NAME's other keys)"}},
             .args = {{"NAME", true, "the user (superadmin: the superadmin itself)"}},
             .handler = &UserKeyRotate});
  table.Add({.noun = "user",
             .verb = "key revoke",
             .summary = "Revoke one key of a user by its fingerprint; the user stays.",
             .description = "weftd answers the key no more, on connections already open too, and refuses its\n"
                            "handshakes; the user's browser sessions end. `weft user key list NAME` shows the\n"
                            "fingerprints. The superadmin's last key, and the key of weftd's own superadmin\n"
                            "credential file, are not revoked: rotate those.",
             .flags = {},
             .args = {{"NAME", true, "the user (superadmin: the superadmin itself)"},
                      {"FP", true, "the key's fingerprint"}},
             .handler = &UserKeyRevoke});
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
