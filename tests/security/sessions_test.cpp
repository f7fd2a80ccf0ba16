// Browsers, the gateway and sessions (docs/security.md), end to end: a real
// weftd, the real weft CLI setting passwords and making API tokens and a
// gateway credential, and a client holding the gateway's key that passes
// sessions and tokens on as weft-web does. Every refusal is driven from the
// outside: a gateway alone, a forged or expired session, a wrong CSRF token,
// a revoked token, another tenant, an admin op, too many failed logins.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/store_rows.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/wire.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::Code;
using weft::Result;
using weft::testing::BuildPath;
using weft::testing::ReadFile;
using weft::testing::Run;
using weft::testing::RunResult;
using weft::testing::TempDir;
using weft::testing::Weftd;
using weft::testing::WeftdOptions;
using weft::wire::OnBehalf;

WeftdOptions ServerIn(const fs::path& dir, bool curve, const std::string& security = "") {
  return {.dir = dir, .curve = curve, .security_toml = security, .cli_args = {"--timeout", "5000"}};
}

// `weft ARGS` as the superadmin (or `who`), which must succeed.
RunResult Ok(Weftd& s, std::vector<std::string> args, const fs::path& who = {}) {
  RunResult r = s.Weft(std::move(args), who.empty() && s.curve() ? s.superadmin() : who);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// `weft ... user passwd USER --password-stdin` with `password` on its standard input.
RunResult Passwd(Weftd& s, const std::string& tenant, const std::string& user, const std::string& password,
                 const fs::path& who = {}) {
  // sh -c SCRIPT $0 $@: the password and the arguments never pass through the shell's parser.
  std::vector<std::string> args = {"-c", "printf '%s\\n' \"$0\" | \"$@\"", password, BuildPath("bin/weft").string()};
  std::vector<std::string> weft = s.Connect(who.empty() && s.curve() ? s.superadmin() : who);
  weft.insert(weft.end(), {"--tenant", tenant, "user", "passwd", user, "--password-stdin"});
  args.insert(args.end(), weft.begin(), weft.end());
  return Run("/bin/sh", args);
}

// A tenant with a user of `role` whose password is `password`.
void MakeUser(Weftd& s, const std::string& tenant, const std::string& name, const std::string& role,
              const std::string& password) {
  if (tenant != "default" && s.Weft({"tenant", "list"}, s.curve() ? s.superadmin() : fs::path()).out.find(tenant) ==
                                 std::string::npos)
    Ok(s, {"tenant", "create", tenant});
  Ok(s, {"--tenant", tenant, "user", "create", name, "--role", role});
  RunResult r = Passwd(s, tenant, name, password);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

// What weft-web does: one api client with the gateway's key, each request
// carrying the session (or token) of the browser it serves.
struct Gateway {
  Gateway(Weftd& s, const fs::path& credential) {
    if (credential.empty()) {
      client = std::make_unique<weft::client::Client>(ctx, weft::client::Options{.endpoint = s.api(), .timeout_ms = 10000});
      return;
    }
    Result<weft::curve::Credential> c = weft::curve::LoadCredential(credential);
    REQUIRE(c.ok());
    client = std::make_unique<weft::client::Client>(ctx, weft::client::FromCredential(*c, 10000));
  }

  // session.login; the reply (session, csrf_token, ...) or the refusal.
  Result<json> Login(const json& body, const std::string& client_addr = "192.0.2.10") {
    return client->CallAs({.client_addr = client_addr}, "session.login", body);
  }
  json LoginOk(const std::string& tenant, const std::string& user, const std::string& password) {
    Result<json> r = Login({{"tenant", tenant}, {"user", user}, {"password", password}});
    INFO(r.status().message());
    REQUIRE(r.ok());
    return *r;
  }
  Result<json> As(const json& session, const std::string& op, const json& body = json::object(),
                  bool with_csrf = true) {
    OnBehalf behalf{.session = session["session"].get<std::string>(), .client_addr = "192.0.2.10"};
    if (with_csrf) behalf.csrf = session["csrf_token"].get<std::string>();
    return client->CallAs(behalf, op, body);
  }
  Result<json> WithToken(const std::string& token, const std::string& op, const json& body = json::object()) {
    return client->CallAs({.token = token}, op, body);
  }
  Result<weft::wire::Reply> Raw(const OnBehalf& behalf, const std::string& op, const json& body = json::object(),
                                const std::string& tenant = "") {
    weft::wire::Request req;
    req.op = op;
    req.tenant = tenant;
    req.on_behalf = behalf;
    req.body = body;
    return client->CallRaw(req);
  }

  zmq::context_t ctx;
  std::unique_ptr<weft::client::Client> client;
};

void RequireDenied(const Result<json>& r, const std::string& says) {
  INFO(r.status().message());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kDenied);
  CHECK_THAT(r.status().message(), Catch::Contains(says));
}

fs::path GatewayCredential(Weftd& s, const fs::path& dir, const std::string& name = "web1") {
  const fs::path file = dir / (name + ".json");
  Ok(s, {"gateway", "credentials", name, "-f", file.string()});
  return file;
}

json Provider(const std::string& name) {
  json p = json::parse(ReadFile(fs::path(WEFT_SOURCE_DIR) / "examples/catalog/providers/fake.json"));
  p["name"] = name;
  return p;
}

}  // namespace

TEST_CASE("sessions: a gateway's key alone may only log in, and through a session it is the user, in the user's tenant",
          "[sessions]") {
  TempDir dir("sessions-gateway");
  Weftd s(ServerIn(dir.path(), true));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  MakeUser(s, "globex", "bob", "admin", "bob-password-1");
  // Something of tenant globex that alice must never see.
  weft::testing::WriteFile(dir.path() / "provider.json", Provider("globex-only").dump());
  Ok(s, {"--tenant", "globex", "provider", "put", (dir.path() / "provider.json").string()});
  Gateway gw(s, GatewayCredential(s, dir.path()));

  // The gateway on its own: nothing but session.login.
  RequireDenied(gw.client->Call("provider.list"), "needs role");
  RequireDenied(gw.client->Call("tenant.list"), "the caller is gateway");
  RequireDenied(gw.Login({{"tenant", "acme"}, {"user", "alice"}, {"password", "not-her-password"}}),
                "wrong user name or password");
  RequireDenied(gw.Login({{"tenant", "acme"}, {"user", "nobody"}, {"password", "alice-password-1"}}),
                "wrong user name or password");

  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");
  CHECK(alice["user"] == "alice");
  CHECK(alice["tenant"] == "acme");
  CHECK(alice["role"] == "user");
  CHECK(alice["csrf_token"].get<std::string>().size() >= 32);
  CHECK(alice["session"].get<std::string>().size() >= 32);
  CHECK(alice["expires_at_ms"].get<std::int64_t>() > 0);

  // session.get tells the gateway who is logged in, and the CSRF token again.
  Result<json> who = gw.As(alice, "session.get", json::object(), false);
  REQUIRE(who.ok());
  CHECK((*who)["user"] == "alice");
  CHECK((*who)["csrf_token"] == alice["csrf_token"]);

  // As alice: her tenant's catalog, not globex's, and no admin op.
  Result<json> mine = gw.As(alice, "provider.list");
  REQUIRE(mine.ok());
  CHECK(mine->dump().find("globex-only") == std::string::npos);
  Result<json> theirs = gw.As(alice, "provider.get", {{"name", "globex-only"}});
  REQUIRE_FALSE(theirs.ok());
  CHECK(theirs.status().code() == Code::kNotFound);
  Result<weft::wire::Reply> other_tenant =
      gw.Raw({.session = alice["session"].get<std::string>(), .csrf = alice["csrf_token"].get<std::string>()}, "provider.list", json::object(), "globex");
  REQUIRE(other_tenant.ok());
  REQUIRE_FALSE(other_tenant->ok);
  CHECK(other_tenant->error.code == Code::kDenied);
  CHECK_THAT(other_tenant->error.message, Catch::Contains("belongs to tenant 'acme'"));
  RequireDenied(gw.As(alice, "tenant.list"), "needs role superadmin");
  RequireDenied(gw.As(alice, "provider.put", Provider("hers")), "needs role admin or superadmin");
  RequireDenied(gw.As(alice, "user.create", {{"name", "mallory"}}), "needs role admin or superadmin");
  RequireDenied(gw.As(alice, "gateway.credentials", {{"name", "evil"}, {"public_key", "x"}}), "needs role superadmin");

  // bob, an admin of globex, sees globex's provider through the same gateway.
  const json bob = gw.LoginOk("globex", "bob", "bob-password-1");
  Result<json> bobs = gw.As(bob, "provider.get", {{"name", "globex-only"}});
  CHECK(bobs.ok());

  // A user's own key may not pass sessions on: only a gateway's may.
  Ok(s, {"--tenant", "acme", "credentials", "alice", "-f", (dir.path() / "alice.json").string()});
  Gateway direct(s, dir.path() / "alice.json");
  RequireDenied(direct.As(bob, "provider.get", {{"name", "globex-only"}}), "only a gateway's requests");

  // Logged out, the session is gone.
  REQUIRE(gw.As(alice, "session.logout").ok());
  RequireDenied(gw.As(alice, "provider.list"), "not logged in");

  // A revoked gateway is cut off on its next request, sessions or not.
  Ok(s, {"gateway", "revoke", "web1"});
  RequireDenied(gw.As(bob, "provider.list"), "does not know this client's key");
  RunResult again = s.Weft({"gateway", "revoke", "web1"}, s.superadmin());
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Catch::Contains("has no key in force"));
}

TEST_CASE("sessions: forged sessions and missing or wrong CSRF tokens are refused, and a session survives a restart",
          "[sessions]") {
  TempDir dir("sessions-csrf");
  Weftd s(ServerIn(dir.path(), true));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Gateway gw(s, GatewayCredential(s, dir.path()));
  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");

  // A forged session: DENIED, and the gateway is told the browser must log in.
  Result<weft::wire::Reply> forged = gw.Raw({.session = "Zm9yZ2VkLXNlc3Npb24taWQtdGhhdC1ub2JvZHktaXNzdWVk"}, "provider.list");
  REQUIRE(forged.ok());
  REQUIRE_FALSE(forged->ok);
  CHECK(forged->error.code == Code::kDenied);
  CHECK(forged->error.details.value("login_required", false));

  // A read needs no CSRF token; a change does, and it must be this session's.
  CHECK(gw.As(alice, "token.list", json::object(), false).ok());
  RequireDenied(gw.As(alice, "token.create", {{"name", "t"}}, false), "CSRF token is missing");
  Result<weft::wire::Reply> wrong =
      gw.Raw({.session = alice["session"].get<std::string>(), .csrf = "not-the-token"}, "token.create", {{"name", "t"}});
  REQUIRE(wrong.ok());
  REQUIRE_FALSE(wrong->ok);
  CHECK(wrong->error.code == Code::kDenied);
  CHECK_THAT(wrong->error.message, Catch::Contains("CSRF token is wrong"));
  const json other = gw.LoginOk("acme", "alice", "alice-password-1");
  Result<weft::wire::Reply> crossed =
      gw.Raw({.session = alice["session"].get<std::string>(), .csrf = other["csrf_token"].get<std::string>()}, "token.create", {{"name", "t"}});
  REQUIRE(crossed.ok());
  CHECK_FALSE(crossed->ok);
  CHECK(gw.As(alice, "token.create", {{"name", "with-csrf"}}).ok());

  // Neither the session id nor the password is in the store as it is.
  s.Restart();
  std::string store;
  for (const char* f : {"weft.db", "weft.db-wal"})
    if (fs::exists(s.data() / f)) store += ReadFile(s.data() / f);
  CHECK(store.find(alice["session"].get<std::string>()) == std::string::npos);
  CHECK(store.find("alice-password-1") == std::string::npos);
  CHECK(store.find(alice["csrf_token"].get<std::string>()) == std::string::npos);

  // The restarted weftd knows the session and its CSRF token.
  Gateway again(s, dir.path() / "web1.json");
  Result<json> after = again.As(alice, "token.list");
  INFO(after.status().message());
  REQUIRE(after.ok());
  CHECK(after->dump().find("with-csrf") != std::string::npos);
  CHECK(again.As(alice, "token.create", {{"name", "after-restart"}}).ok());
}

TEST_CASE("sessions: a session unused for longer than session_idle_ms has ended", "[sessions][slow]") {
  TempDir dir("sessions-idle");
  Weftd s(ServerIn(dir.path(), true, "session_idle_ms = 1500"));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Gateway gw(s, GatewayCredential(s, dir.path()));
  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");
  REQUIRE(gw.As(alice, "provider.list").ok());
  std::this_thread::sleep_for(2s);
  Result<weft::wire::Reply> ended = gw.Raw({.session = alice["session"].get<std::string>()}, "provider.list");
  REQUIRE(ended.ok());
  REQUIRE_FALSE(ended->ok);
  CHECK(ended->error.code == Code::kDenied);
  CHECK_THAT(ended->error.message, Catch::Contains("session ended (it was not used for 1.5s)"));
  CHECK(ended->error.details.value("login_required", false));
}

TEST_CASE("sessions: a session ends session_max_ms after its login even while it is used", "[sessions][slow]") {
  TempDir dir("sessions-max");
  Weftd s(ServerIn(dir.path(), true, "session_max_ms = 2000"));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Gateway gw(s, GatewayCredential(s, dir.path()));
  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");
  const auto login = std::chrono::steady_clock::now();
  // Used every 200 ms, it stays until its absolute end, then ends for good.
  Result<weft::wire::Reply> last = gw.Raw({.session = alice["session"].get<std::string>()}, "provider.list");
  while (last.ok() && last->ok && std::chrono::steady_clock::now() - login < 10s) {
    std::this_thread::sleep_for(200ms);
    last = gw.Raw({.session = alice["session"].get<std::string>()}, "provider.list");
  }
  REQUIRE(last.ok());
  REQUIRE_FALSE(last->ok);
  CHECK_THAT(last->error.message, Catch::Contains("session ended (it is older than 2s)"));
}

TEST_CASE("sessions: an API token acts as its user until it is revoked or expires, and a new password ends sessions",
          "[sessions]") {
  TempDir dir("sessions-tokens");
  Weftd s(ServerIn(dir.path(), true));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  MakeUser(s, "acme", "carol", "user", "carol-password-1");
  Ok(s, {"--tenant", "acme", "credentials", "alice", "-f", (dir.path() / "alice.json").string()});
  const fs::path alice_key = dir.path() / "alice.json";
  Gateway gw(s, GatewayCredential(s, dir.path()));

  // Made with the CLI: the secret on stdout, once.
  RunResult made = Ok(s, {"token", "create", "--name", "ci", "--ttl", "30d"}, alice_key);
  const std::string token = made.out.substr(0, made.out.find('\n'));
  REQUIRE(token.rfind("weft_", 0) == 0);
  CHECK_THAT(made.err, Catch::Contains("shown only now"));
  json listed = s.WeftJson({"token", "list"}, alice_key);
  REQUIRE(listed["tokens"].size() == 1);
  const std::string id = listed["tokens"][0]["id"];
  CHECK(listed["tokens"][0]["name"] == "ci");
  CHECK(listed.dump().find(token) == std::string::npos);

  // The token is alice: her role, her tenant, no CSRF token needed.
  Result<json> as_token = gw.WithToken(token, "token.list");
  REQUIRE(as_token.ok());
  CHECK((*as_token)["tokens"].size() == 1);
  RequireDenied(gw.WithToken(token, "tenant.list"), "needs role superadmin");
  RequireDenied(gw.WithToken(token, "token.create"), "an API token cannot make API tokens");
  // It logs in too, for a browser session.
  Result<json> session = gw.Login({{"token", token}});
  REQUIRE(session.ok());
  CHECK((*session)["user"] == "alice");

  // carol may not revoke alice's token; alice may.
  Ok(s, {"--tenant", "acme", "credentials", "carol", "-f", (dir.path() / "carol.json").string()});
  RunResult refused = s.Weft({"token", "revoke", id}, dir.path() / "carol.json");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("belongs to user 'alice'"));
  Ok(s, {"token", "revoke", id}, alice_key);
  RequireDenied(gw.WithToken(token, "token.list"), "API token is not valid");
  RequireDenied(gw.Login({{"token", token}}), "API token is not valid");

  // An expired token is refused like a revoked one.
  RunResult brief = Ok(s, {"token", "create", "--ttl", "1s"}, alice_key);
  const std::string short_lived = brief.out.substr(0, brief.out.find('\n'));
  std::this_thread::sleep_for(1500ms);
  RequireDenied(gw.WithToken(short_lived, "token.list"), "API token is not valid");

  // A new password ends the sessions the old one opened; the new one logs in.
  const json carol = gw.LoginOk("acme", "carol", "carol-password-1");
  REQUIRE(gw.As(carol, "provider.list").ok());
  RunResult changed = Passwd(s, "acme", "carol", "carol-password-2", dir.path() / "carol.json");
  INFO(changed.err);
  REQUIRE(changed.exit_code == 0);
  RequireDenied(gw.As(carol, "provider.list"), "not logged in");
  RequireDenied(gw.Login({{"tenant", "acme"}, {"user", "carol"}, {"password", "carol-password-1"}}), "wrong");
  gw.LoginOk("acme", "carol", "carol-password-2");
  // A user sets only their own password.
  RunResult not_hers = Passwd(s, "acme", "alice", "carol-sets-it", dir.path() / "carol.json");
  CHECK(not_hers.exit_code == 1);
  CHECK_THAT(not_hers.err, Catch::Contains("may set only their own password"));
  // A deleted user's sessions and tokens end with them.
  RunResult kept = Ok(s, {"token", "create"}, dir.path() / "carol.json");
  const std::string carols = kept.out.substr(0, kept.out.find('\n'));
  const json carol2 = gw.LoginOk("acme", "carol", "carol-password-2");
  Ok(s, {"--tenant", "acme", "user", "delete", "carol"});
  RequireDenied(gw.As(carol2, "provider.list"), "not logged in");
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens WHERE \"user\" = 'carol'") == 0);
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM sessions WHERE \"user\" = 'carol'") == 0);
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM user_passwords WHERE \"user\" = 'carol'") == 0);
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens WHERE \"user\" = 'alice'") == 2);
  RequireDenied(gw.WithToken(carols, "provider.list"), "API token is not valid");
  Ok(s, {"--tenant", "acme", "user", "create", "carol"});
  RequireDenied(gw.WithToken(carols, "provider.list"), "API token is not valid");
  RequireDenied(gw.Login({{"tenant", "acme"}, {"user", "carol"}, {"password", "carol-password-2"}}), "wrong");
}

TEST_CASE("sessions: a session made from an API token ends when the token is revoked or expires, across a restart",
          "[sessions]") {
  TempDir dir("sessions-token-login");
  Weftd s(ServerIn(dir.path(), true));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Ok(s, {"--tenant", "acme", "credentials", "alice", "-f", (dir.path() / "alice.json").string()});
  const fs::path alice_key = dir.path() / "alice.json";
  Gateway gw(s, GatewayCredential(s, dir.path()));

  RunResult made = Ok(s, {"token", "create", "--name", "browser", "--ttl", "30d"}, alice_key);
  const std::string token = made.out.substr(0, made.out.find('\n'));
  const std::string id = s.WeftJson({"token", "list"}, alice_key)["tokens"][0]["id"];
  Result<json> from_token = gw.Login({{"token", token}});
  INFO(from_token.status().message());
  REQUIRE(from_token.ok());
  const json by_token = *from_token;
  const json by_password = gw.LoginOk("acme", "alice", "alice-password-1");
  REQUIRE(gw.As(by_token, "provider.list").ok());

  // The link between the session and its token is kept in the store: a
  // restarted weftd still ends the session with the token.
  s.Restart();
  Gateway again(s, dir.path() / "web1.json");
  REQUIRE(again.As(by_token, "provider.list").ok());
  Ok(s, {"token", "revoke", id}, alice_key);
  RequireDenied(again.WithToken(token, "provider.list"), "API token is not valid");
  // Ended at once, as a logged-out session is; alice's password session stays.
  Result<weft::wire::Reply> ended = again.Raw({.session = by_token["session"].get<std::string>()}, "provider.list");
  REQUIRE(ended.ok());
  REQUIRE_FALSE(ended->ok);
  CHECK(ended->error.code == Code::kDenied);
  CHECK_THAT(ended->error.message, Catch::Contains("not logged in"));
  CHECK(ended->error.details.value("login_required", false));
  RequireDenied(again.As(by_token, "session.get"), "not logged in");
  CHECK(again.As(by_password, "provider.list").ok());
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM sessions WHERE \"user\" = 'alice'") == 1);

  // A session never outlives its token: its end is the token's, and when the
  // token expires the session ends, however busy it is.
  RunResult brief = Ok(s, {"token", "create", "--name", "brief", "--ttl", "8s"}, alice_key);
  const std::string short_lived = brief.out.substr(0, brief.out.find('\n'));
  json tokens = s.WeftJson({"token", "list"}, alice_key)["tokens"];
  REQUIRE(tokens.size() == 1);
  const std::int64_t token_end = tokens[0]["expires_at_ms"];
  Result<json> brief_login = again.Login({{"token", short_lived}});
  INFO(brief_login.status().message());
  REQUIRE(brief_login.ok());
  CHECK((*brief_login)["expires_at_ms"].get<std::int64_t>() <= token_end);
  Result<json> described = again.As(*brief_login, "session.get");
  REQUIRE(described.ok());
  CHECK((*described)["expires_at_ms"].get<std::int64_t>() <= token_end);
  std::optional<weft::wire::Reply> last;
  REQUIRE(weft::testing::WaitFor(
      [&] {
        Result<weft::wire::Reply> r = again.Raw({.session = (*brief_login)["session"].get<std::string>()}, "provider.list");
        if (!r.ok() || r->ok) return false;
        last = std::move(r).value();
        return true;
      },
      60s));
  CHECK(last->error.code == Code::kDenied);
  CHECK_THAT(last->error.message, Catch::Contains("the API token it was made from"));
  CHECK_THAT(last->error.message, Catch::Contains("expired"));
  CHECK(last->error.details.value("login_required", false));
  CHECK(again.As(by_password, "provider.list").ok());
}

TEST_CASE("sessions: failed logins are limited per user and per client address", "[sessions]") {
  TempDir dir("sessions-rate");
  Weftd s(ServerIn(dir.path(), true, "login_burst = 3\nlogin_interval_ms = 600000"));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  MakeUser(s, "acme", "dave", "user", "dave-password-1");
  Gateway gw(s, GatewayCredential(s, dir.path()));

  // Successful logins do not count.
  for (int i = 0; i < 5; ++i) gw.LoginOk("acme", "dave", "dave-password-1");
  // Three wrong guesses for alice from three addresses; the fourth try, even with her password, waits.
  for (int i = 0; i < 3; ++i)
    RequireDenied(gw.Login({{"tenant", "acme"}, {"user", "alice"}, {"password", "guess"}},
                           "198.51.100." + std::to_string(i)),
                  "wrong user name or password");
  Result<weft::wire::Reply> limited = gw.Raw({.client_addr = "198.51.100.9"}, "session.login",
                                             {{"tenant", "acme"}, {"user", "alice"}, {"password", "alice-password-1"}});
  REQUIRE(limited.ok());
  REQUIRE_FALSE(limited->ok);
  // A rate, not a size: UNAVAILABLE, to be retried after retry_after_ms (docs/protocol.md).
  CHECK(limited->error.code == Code::kUnavailable);
  CHECK_THAT(limited->error.message, Catch::Contains("too many failed logins for this user; nothing was tried"));
  CHECK(limited->error.details.value("retry_after_ms", 0) > 0);
  // dave is not held back by alice's guesser...
  gw.LoginOk("acme", "dave", "dave-password-1");
  // ...but one address guessing many users' passwords is.
  for (const char* user : {"u1", "u2", "u3"})
    RequireDenied(gw.Login({{"tenant", "acme"}, {"user", user}, {"password", "guess"}}, "203.0.113.5"), "wrong");
  Result<json> from_guesser = gw.Login({{"tenant", "acme"}, {"user", "dave"}, {"password", "dave-password-1"}},
                                       "203.0.113.5");
  REQUIRE_FALSE(from_guesser.ok());
  CHECK_THAT(from_guesser.status().message(), Catch::Contains("too many failed logins from this address"));
}

TEST_CASE("sessions: the audit log names the user and the gateway a change came through", "[sessions]") {
  TempDir dir("sessions-audit");
  Weftd s(ServerIn(dir.path(), true));
  MakeUser(s, "acme", "erin", "admin", "erin-password-1");
  Gateway gw(s, GatewayCredential(s, dir.path(), "frontdoor"));
  const json erin = gw.LoginOk("acme", "erin", "erin-password-1");
  REQUIRE(gw.As(erin, "provider.put", Provider("via-web")).ok());
  json audit = s.WeftJson({"--tenant", "acme", "audit"});
  bool found = false;
  for (const json& e : audit["entries"]) {
    if (e["op"] != "provider.put") continue;
    found = true;
    CHECK(e["actor"] == "erin");
    CHECK(e["actor_tenant"] == "acme");
    CHECK(e["actor_role"] == "admin");
    // Where: the browser's address the gateway gave; the gateway's own is in `via`.
    CHECK(e["address"] == "192.0.2.10");
    CHECK(e["detail"]["via"] == "gateway frontdoor at 127.0.0.1");
    CHECK_FALSE(e["detail"].contains("client_addr"));
  }
  CHECK(found);
  RunResult table = Ok(s, {"--tenant", "acme", "audit"});
  CHECK_THAT(table.out, Catch::Contains("via=gateway frontdoor at 127.0.0.1") && Catch::Contains(" 192.0.2.10 "));

  // The superadmin logs in as tenant _system, user superadmin, and acts in any tenant.
  RunResult set = Passwd(s, "default", "superadmin", "root-password-1");
  INFO(set.err);
  REQUIRE(set.exit_code == 0);
  const json root = gw.LoginOk("_system", "superadmin", "root-password-1");
  CHECK(root["role"] == "superadmin");
  CHECK(gw.As(root, "tenant.list").ok());
  Result<weft::wire::Reply> in_acme = gw.Raw({.session = root["session"].get<std::string>()}, "provider.get",
                                             {{"name", "via-web"}}, "acme");
  REQUIRE(in_acme.ok());
  CHECK(in_acme->ok);
}

TEST_CASE("sessions: with security off a request carrying a session still acts as its user only", "[sessions]") {
  TempDir dir("sessions-nocurve");
  Weftd s(ServerIn(dir.path(), false));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Gateway gw(s, {});
  // Without a session every api caller is superadmin (security off)...
  CHECK(gw.client->Call("tenant.list").ok());
  // ...with one, the request is the session's user's.
  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");
  RequireDenied(gw.As(alice, "tenant.list"), "needs role superadmin");
  RequireDenied(gw.As(alice, "token.create", json::object(), false), "CSRF token is missing");
  CHECK(gw.As(alice, "token.create").ok());
}

TEST_CASE("sessions: a gateway's key subscribes to every tenant's events, to filter them per browser itself",
          "[sessions]") {
  TempDir dir("sessions-events");
  Weftd s(ServerIn(dir.path(), true));
  Ok(s, {"tenant", "create", "acme"});
  Result<weft::curve::Credential> c = weft::curve::LoadCredential(GatewayCredential(s, dir.path()));
  REQUIRE(c.ok());
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  weft::curve::SetClientKeys(sub, c->server_key, c->keys);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.connect(s.events());
  weft::client::Options options = weft::client::FromCredential(*weft::curve::LoadCredential(s.superadmin()), 10000);
  options.tenant = "acme";
  weft::client::Client admin(ctx, options);
  const json task = {{"plugin", "fake-provider"}, {"action", "CREATE"}, {"node_id", "n1"}, {"payload", json::object()}};
  // A new subscription takes a moment to reach the publisher: enqueue until an event arrives.
  std::string topic;
  for (int i = 0; i < 100 && topic.empty(); ++i) {
    REQUIRE(admin.Call("debug.enqueue", {{"tasks", json::array({task})}}).ok());
    weft::wire::Frames frames;
    if (weft::wire::RecvMultipart(sub, frames)) topic = frames[0].to_string();
  }
  CHECK(topic.rfind("acme/task", 0) == 0);
}

TEST_CASE("sessions: a gateway's connection is not held to the per-connection api rate limit, a user's is",
          "[sessions]") {
  TempDir dir("sessions-rate-limit");
  Weftd s(ServerIn(dir.path(), true, "api_rate_per_s = 1\napi_burst = 5"));
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Ok(s, {"--tenant", "acme", "credentials", "alice", "-f", (dir.path() / "alice.json").string()});
  json users = s.WeftJson({"--tenant", "acme", "user", "list"}, s.superadmin());
  REQUIRE(users["users"].size() == 1);
  CHECK(users["users"][0]["password"] == true);

  // Many browsers' requests over one gateway connection: none refused.
  Gateway gw(s, GatewayCredential(s, dir.path()));
  const json alice = gw.LoginOk("acme", "alice", "alice-password-1");
  for (int i = 0; i < 50; ++i) {
    Result<json> r = gw.As(alice, "provider.list");
    INFO("request " << i << ": " << r.status().message());
    REQUIRE(r.ok());
  }
  // The same from alice's own key: the connection's bucket runs dry.
  Gateway direct(s, dir.path() / "alice.json");
  int refused = 0;
  for (int i = 0; i < 50; ++i) {
    Result<weft::wire::Reply> r = direct.Raw({}, "provider.list");
    REQUIRE(r.ok());
    if (r->ok) continue;
    // Nothing was done: UNAVAILABLE (worth retrying), with how long to wait; never TOO_LARGE (never retry).
    INFO(r->error.message);
    CHECK(r->error.code == Code::kUnavailable);
    CHECK_THAT(r->error.message, Catch::Contains("rate limit") && Catch::Contains("retry after"));
    REQUIRE(r->error.details.contains("retry_after_ms"));
    CHECK(r->error.details["retry_after_ms"].get<std::int64_t>() >= 1);
    CHECK(r->error.details["retry_after_ms"].get<std::int64_t>() <= 1000);  // one token at 1 a second
    ++refused;
  }
  CHECK(refused > 0);
}

TEST_CASE("sessions: retention removes API tokens revoked or expired long enough ago, and refuses them as before",
          "[sessions][retention]") {
  TempDir dir("sessions-token-retention");
  WeftdOptions options = ServerIn(dir.path(), true);
  options.extra_toml = "[retention]\ntokens_after_ms = 8000\ninterval_ms = 100\n";
  Weftd s(options);
  MakeUser(s, "acme", "alice", "user", "alice-password-1");
  Ok(s, {"--tenant", "acme", "credentials", "alice", "-f", (dir.path() / "alice.json").string()});
  const fs::path alice_key = dir.path() / "alice.json";
  auto make = [&](std::vector<std::string> args) {
    RunResult made = Ok(s, std::move(args), alice_key);
    return made.out.substr(0, made.out.find('\n'));
  };
  const std::string kept = make({"token", "create", "--name", "kept"});
  const std::string revoked = make({"token", "create", "--name", "revoked"});
  const std::string expired = make({"token", "create", "--name", "expired", "--ttl", "1s"});
  std::string revoked_id;
  const json listed = s.WeftJson({"token", "list"}, alice_key);
  for (const json& t : listed["tokens"])
    if (t["name"] == "revoked") revoked_id = t["id"];
  REQUIRE_FALSE(revoked_id.empty());
  Ok(s, {"token", "revoke", revoked_id}, alice_key);

  // How the two are refused while their rows are there.
  Gateway gw(s, GatewayCredential(s, dir.path()));
  std::this_thread::sleep_for(1100ms);  // the short-lived one has expired
  const Result<json> revoked_before = gw.WithToken(revoked, "token.list");
  const Result<json> expired_before = gw.WithToken(expired, "token.list");
  const Result<json> login_before = gw.Login({{"token", revoked}});
  RequireDenied(revoked_before, "API token is not valid");
  RequireDenied(expired_before, "API token is not valid");
  RequireDenied(login_before, "API token is not valid");
  REQUIRE(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens") == 3);

  // Retention removes both rows once they are spent for tokens_after_ms.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens") > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  REQUIRE(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens") == 1);
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens WHERE name = 'kept'") == 1);
  const json status = s.Call("server.status", json::object());
  CHECK(status["retention"]["removed"]["api_tokens"] == 2);
  CHECK(status["retention"]["tokens_after_ms"] == 8000);

  // Refused with the same code and the same words, now and after a restart
  // (which reads the tokens from the store again); the one in force still acts.
  auto same_refusal = [](const Result<json>& now, const Result<json>& before) {
    REQUIRE_FALSE(now.ok());
    CHECK(now.status().code() == before.status().code());
    CHECK(now.status().message() == before.status().message());
  };
  same_refusal(gw.WithToken(revoked, "token.list"), revoked_before);
  same_refusal(gw.WithToken(expired, "token.list"), expired_before);
  same_refusal(gw.Login({{"token", revoked}}), login_before);
  CHECK(gw.WithToken(kept, "token.list").ok());
  // Revoking a removed token again is refused as revoking a revoked one is.
  RunResult again = s.Weft({"token", "revoke", revoked_id}, alice_key);
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Catch::Contains("no API token " + revoked_id + " in force"));
  CHECK(weft::testing::CountRows(s, "SELECT COUNT(*) FROM api_tokens") == 1);

  s.Restart();
  Gateway after(s, GatewayCredential(s, dir.path(), "web2"));
  same_refusal(after.WithToken(revoked, "token.list"), revoked_before);
  same_refusal(after.WithToken(expired, "token.list"), expired_before);
  CHECK(after.WithToken(kept, "token.list").ok());
}
