// weft user passwd, weft token create|list|revoke, weft gateway credentials:
// how people reach weftd through a browser (docs/security.md, "Browsers, the
// gateway and sessions").
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "weft/catalog/entities.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"

namespace weft::cli {
namespace {

// One line typed at the terminal without echoing it; nullopt without a terminal.
std::optional<std::string> ReadHidden(const std::string& prompt) {
  const int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  termios saved{};
  const bool terminal = ::tcgetattr(fd, &saved) == 0;
  if (terminal) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(fd, TCSAFLUSH, &quiet);
  }
  (void)!::write(fd, prompt.data(), prompt.size());
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  (void)!::write(fd, "\n", 1);
  if (terminal) ::tcsetattr(fd, TCSAFLUSH, &saved);
  ::close(fd);
  return line;
}

Status UserPasswd(Context& ctx, const ParsedArgs& args) {
  const std::string user = args.positionals[0];
  std::string password;
  if (args.Has("--password-stdin")) {
    if (!std::getline(std::cin, password) && password.empty())
      return ctx.UsageError("--password-stdin: nothing to read on standard input");
    if (!password.empty() && password.back() == '\r') password.pop_back();
  } else {
    std::optional<std::string> first = ReadHidden("new password for " + user + ": ");
    if (!first)
      return ctx.UsageError("no terminal to read the password from; pass it on standard input with --password-stdin");
    std::optional<std::string> again = ReadHidden("the same again: ");
    if (!again || *again != *first) return ctx.UsageError("the two passwords differ; nothing was changed");
    password = *first;
  }
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("user.password", {{"name", user}, {"password", password}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "password of user '" << user << "' of tenant '" << Text(reply, "tenant")
            << "' set; their browser sessions ended\n";
  return Status::Ok();
}

Status TokenCreate(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("--ttl")) {
    std::optional<std::int64_t> ms = catalog::ParseDurationMs(json(args.Get("--ttl")));
    if (!ms || *ms < 1000)
      return ctx.UsageError("--ttl needs a duration of 1s or more such as 12h, 30d or 365d, got '" +
                            args.Get("--ttl") + "'");
    body["ttl_ms"] = *ms;
  }
  if (args.Has("--name")) body["name"] = args.Get("--name");
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("token.create", body));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  // The secret alone on stdout, so `$(weft token create)` works; the rest on stderr.
  ctx.out() << Text(reply, "token") << '\n';
  const std::int64_t expires = Int(reply, "expires_at_ms");
  ctx.err() << "API token " << Text(reply, "id") << " of user '" << Text(reply, "user") << "', valid "
            << (expires ? "for " + Duration(expires - SystemClock::Instance().NowMs()) : std::string("until revoked"))
            << "; it is shown only now. Send it as `Authorization: Bearer TOKEN` to weft-web; "
            << ctx.Suggest("token revoke " + Text(reply, "id")) << " ends it\n";
  return Status::Ok();
}

Status TokenList(Context& ctx, const ParsedArgs&) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("token.list"));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const std::int64_t now = SystemClock::Instance().NowMs();
  Table table({"ID", "NAME", "USER", "CREATED", "EXPIRES"});
  for (const json& t : reply.value("tokens", json::array())) {
    const std::int64_t expires = Int(t, "expires_at_ms");
    table.AddRow({Text(t, "id"), Text(t, "name"), Text(t, "user") + "@" + Text(t, "tenant"),
                  Ago(now, Int(t, "created_at_ms")), expires ? "in " + Duration(expires - now) : "never"});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status TokenRevoke(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("token.revoke", {{"id", args.positionals[0]}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "API token " << args.positionals[0] << " revoked\n";
  return Status::Ok();
}

// Like `weft credentials`: the key pair is made here and only its public half travels.
Status GatewayCredentials(Context& ctx, const ParsedArgs& args) {
  const std::string name = args.positionals[0];
  const std::filesystem::path file = args.Get("-f", name + ".gateway.json");
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !args.Has("--force"))
    return ctx.UsageError(file.string() + " exists; pass --force to replace it");
  WEFT_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::Generate());
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("gateway.credentials", {{"name", name}, {"public_key", keys.public_key}}));
  curve::Credential c;
  c.api = ctx.server();
  c.server_key = ctx.credential() ? ctx.credential()->server_key : std::string();
  c.keys = keys;
  c.user = name;
  c.role = "gateway";
  WEFT_RETURN_IF_ERROR(curve::SaveCredential(file, c));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "wrote " << file.string() << " for gateway '" << name
            << "'; its key may only log users in and then act for them (give it to weft-web)\n";
  return Status::Ok();
}

Status GatewayRevoke(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("gateway.revoke", {{"name", args.positionals[0]}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "gateway '" << args.positionals[0] << "' revoked; its next request is refused\n";
  return Status::Ok();
}

}  // namespace

void RegisterLoginCommands(CommandTable& table) {
  table.Add({.noun = "user",
             .verb = "passwd",
             .summary = "Set a user's password, for logging in through a browser.",
             .description = "Reads the new password twice from the terminal, or once from standard input with\n"
                            "--password-stdin. A user sets their own; a tenant admin anyone's of the tenant;\n"
                            "the superadmin its own as user superadmin. The user's browser sessions end.",
             .flags = {{"--password-stdin", "", "read the password from standard input (one line)"}},
             .args = {{"USER", true, "the user"}},
             .handler = &UserPasswd});
  table.Add({.noun = "token",
             .verb = "create",
             .summary = "Make an API token that acts as you, for scripts over weft-web.",
             .description = "Prints the secret on stdout, once: weftd keeps only its hash. It expires after\n"
                            "--ttl (default 30d; 0 never) and `weft token revoke ID` ends it sooner.",
             .flags = {{"--ttl", "DURATION", "how long it is valid (12h, 30d, 365d)"},
                       {"--name", "NAME", "what it is for, shown by token list"}},
             .args = {},
             .handler = &TokenCreate});
  table.Add({.noun = "token",
             .verb = "list",
             .summary = "List API tokens in force: yours, or a tenant admin the tenant's.",
             .description = "",
             .flags = {},
             .args = {},
             .handler = &TokenList});
  table.Add({.noun = "token",
             .verb = "revoke",
             .summary = "End an API token at once.",
             .description = "",
             .flags = {},
             .args = {{"ID", true, "the token's id (token list)"}},
             .handler = &TokenRevoke});
  table.Add({.noun = "gateway",
             .verb = "credentials",
             .summary = "Write a credential file for a gateway (weft-web) (superadmin).",
             .description = "Makes a key pair here, registers its public half as gateway NAME and writes the\n"
                            "file (mode 0600). The gateway's key may only log users in (session.login); a\n"
                            "request it passes on for a session or an API token acts as that user.",
             .flags = {{"-f", "FILE", "where to write it (default NAME.gateway.json)"},
                       {"--force", "", "replace an existing file"}},
             .args = {{"NAME", true, "the gateway's name, shown in the audit log"}},
             .handler = &GatewayCredentials});
  table.Add({.noun = "gateway",
             .verb = "revoke",
             .summary = "Cut a gateway off at once (superadmin).",
             .description = "Every key of gateway NAME is revoked: its next request is refused. Sessions stay;\n"
                            "a gateway with new credentials serves them again.",
             .flags = {},
             .args = {{"NAME", true, "the gateway"}},
             .handler = &GatewayRevoke});
}

}  // namespace weft::cli
