// Rotating and revoking users' keys (docs/security.md, "Rotating and revoking
// keys"), end to end: a real weftd with CurveZMQ on, the real weft CLI with
// credential files, and api clients that keep their connection open across a
// rotation or a revocation.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
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
using weft::testing::RunResult;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;
using weft::testing::WeftdOptions;

WeftdOptions ServerIn(const fs::path& dir) {
  return {.dir = dir, .curve = true, .cli_args = {"--timeout", "3000"}};
}

// `weft ARGS` as `who`, which must succeed.
RunResult Ok(Weftd& s, std::vector<std::string> args, const fs::path& who) {
  RunResult r = s.Weft(std::move(args), who);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// `weft ARGS` as `who`, which must fail saying `says`.
void Refused(Weftd& s, std::vector<std::string> args, const fs::path& who, const std::string& says) {
  RunResult r = s.Weft(std::move(args), who);
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains(says));
}

// A user of `tenant` with `role` and their credential file dir/name.json.
fs::path MakeUser(Weftd& s, const fs::path& dir, const std::string& tenant, const std::string& name,
                  const std::string& role) {
  Ok(s, {"--tenant", tenant, "user", "create", name, "--role", role}, s.superadmin());
  const fs::path file = dir / (name + ".json");
  Ok(s, {"--tenant", tenant, "credentials", name, "-f", file.string()}, s.superadmin());
  return file;
}

std::string PublicKey(const fs::path& credential) {
  Result<weft::curve::Credential> c = weft::curve::LoadCredential(credential);
  REQUIRE(c.ok());
  return c->keys.public_key;
}

// An api client holding `credential`'s key on one connection for its whole life.
struct Connection {
  explicit Connection(const fs::path& credential, int timeout_ms = 3000) {
    Result<weft::curve::Credential> c = weft::curve::LoadCredential(credential);
    REQUIRE(c.ok());
    client = std::make_unique<weft::client::Client>(ctx, weft::client::FromCredential(*c, timeout_ms));
  }
  Result<json> Call(const std::string& op, const json& body = json::object()) { return client->Call(op, body); }
  zmq::context_t ctx;
  std::unique_ptr<weft::client::Client> client;
};

// The key of `credential` in `weft user key list NAME`'s reply.
json KeyOf(const json& listed, const fs::path& credential) {
  const std::string fp = weft::curve::Fingerprint(PublicKey(credential));
  for (const json& k : listed["keys"])
    if (k["fingerprint"] == fp) return k;
  return json();
}

}  // namespace

namespace {
// One sample of weftd's /metrics (`name{labels}` as rendered); -1 when absent.
double Metric(const Weftd& s, const std::string& series) {
  const std::string url = s.endpoints().value("metrics", std::string());
  const std::size_t from = url.find("//") + 2;
  const std::string text =
      weft::testing::HttpSend("http://" + url.substr(from, url.find('/', from) - from), "GET", "/metrics").body;
  const std::size_t at = text.find(series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 1));
}
}  // namespace

TEST_CASE("user keys: /metrics counts the keys weftd keeps by kind, revoked ones included", "[security][metrics]") {
  TempDir dir("userkeys-metrics");
  Weftd s(ServerIn(dir.path()));
  Ok(s, {"tenant", "create", "acme"}, s.superadmin());
  const fs::path alice = MakeUser(s, dir.path(), "acme", "alice", "user");
  const std::string users = "weft_principals{kind=\"user\",state=\"not_revoked\"}";
  const std::string revoked = "weft_principals{kind=\"user\",state=\"revoked\"}";
  const std::string tokens = "weft_principals{kind=\"token\",state=\"not_revoked\"}";
  // The superadmin's key and alice's; nothing revoked, no token yet.
  REQUIRE(WaitFor([&] { return Metric(s, users) == 2; }, 20s));
  CHECK(Metric(s, revoked) == 0);
  CHECK(Metric(s, tokens) == 0);
  CHECK(Metric(s, "weft_principals{kind=\"host\",state=\"revoked\"}") == 0);
  // A rotation keeps the old key, revoked, beside the new one; a token is one more key.
  Ok(s, {"user", "key", "rotate", "alice", "-f", (dir.path() / "alice-new.json").string()}, alice);
  Ok(s, {"host", "token", "create"}, s.superadmin());
  const bool moved =
      WaitFor([&] { return Metric(s, revoked) == 1 && Metric(s, users) == 2 && Metric(s, tokens) == 1; }, 20s);
  INFO(Metric(s, users) << " user keys, " << Metric(s, revoked) << " revoked, " << Metric(s, tokens) << " tokens");
  CHECK(moved);
}

TEST_CASE("user keys: a rotated key is refused, also on its open connection, and the new credential works",
          "[security][userkeys]") {
  TempDir dir("userkeys-rotate");
  Weftd s(ServerIn(dir.path()));
  Ok(s, {"tenant", "create", "acme"}, s.superadmin());
  const fs::path alice = MakeUser(s, dir.path(), "acme", "alice", "user");

  Connection open(alice);
  REQUIRE(open.Call("cluster.list").ok());
  const json before = s.WeftJson({"user", "key", "list", "alice"}, alice);
  REQUIRE(before["keys"].size() == 1);
  CHECK(before["keys"][0]["state"] == "in force");
  CHECK(before["keys"][0]["yours"] == true);
  CHECK(before["keys"][0]["last_seen_ms"].get<std::int64_t>() > 0);  // this very connection

  // alice rotates her own key (a lost laptop): a new credential file, the old key retired at once.
  const fs::path fresh = dir.path() / "alice-new.json";
  RunResult r = Ok(s, {"user", "key", "rotate", "alice", "-f", fresh.string()}, alice);
  CHECK_THAT(r.out, Catch::Contains("wrote " + fresh.string()) && Catch::Contains("no longer work"));
  CHECK((fs::status(fresh).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK_FALSE(fs::exists(fresh.string() + ".new"));
  CHECK(PublicKey(fresh) != PublicKey(alice));

  // The old key's open connection gets no more answers to its requests, and it cannot connect again.
  Result<json> after = open.Call("cluster.list");
  REQUIRE_FALSE(after.ok());
  CHECK(after.status().code() == Code::kDenied);
  CHECK_THAT(after.status().message(), Catch::Contains("does not know this client's key"));
  Refused(s, {"--timeout", "800", "cluster", "list"}, alice, "may not know the key");
  // The new one works, and is alice's with her tenant and role.
  Ok(s, {"cluster", "list"}, fresh);
  const json listed = s.WeftJson({"user", "key", "list", "alice"}, fresh);
  REQUIRE(listed["keys"].size() == 2);
  CHECK(KeyOf(listed, alice)["state"] == "revoked");
  CHECK(KeyOf(listed, fresh)["state"] == "in force");
  CHECK(KeyOf(listed, fresh)["yours"] == true);
  CHECK(KeyOf(listed, fresh)["created_by"] == "alice@acme");
  Result<weft::curve::Credential> c = weft::curve::LoadCredential(fresh);
  REQUIRE(c.ok());
  CHECK(c->tenant == "acme");
  CHECK(c->role == "user");

  // With --grace the old key keeps working that long, then is refused.
  const fs::path third = dir.path() / "alice-3.json";
  r = Ok(s, {"user", "key", "rotate", "alice", "-f", third.string(), "--grace", "8s"}, fresh);
  CHECK_THAT(r.out, Catch::Contains("stops working in"));
  Connection during(fresh);
  REQUIRE(during.Call("cluster.list").ok());
  CHECK(KeyOf(s.WeftJson({"user", "key", "list", "alice"}, third), fresh)["state"] == "expiring");
  REQUIRE(WaitFor([&] { return !during.Call("cluster.list").ok(); }, 20s));
  CHECK(KeyOf(s.WeftJson({"user", "key", "list", "alice"}, third), fresh)["state"] == "expired");
  Refused(s, {"--timeout", "800", "cluster", "list"}, fresh, "may not know the key");
  Ok(s, {"cluster", "list"}, third);

  // A restart keeps all of it.
  s.Restart();
  Refused(s, {"--timeout", "800", "cluster", "list"}, alice, "may not know the key");
  Refused(s, {"--timeout", "800", "cluster", "list"}, fresh, "may not know the key");
  Ok(s, {"cluster", "list"}, third);
}

TEST_CASE("user keys: an admin revokes one key of a user by fingerprint, its open connection and sessions end",
          "[security][userkeys]") {
  TempDir dir("userkeys-revoke");
  Weftd s(ServerIn(dir.path()));
  Ok(s, {"tenant", "create", "acme"}, s.superadmin());
  const fs::path bob = MakeUser(s, dir.path(), "acme", "bob", "admin");
  const fs::path laptop = MakeUser(s, dir.path(), "acme", "alice", "user");
  const fs::path desktop = dir.path() / "alice-desktop.json";
  Ok(s, {"credentials", "alice", "-f", desktop.string()}, bob);

  // A browser session of alice's, through a gateway.
  Ok(s, {"gateway", "credentials", "web1", "-f", (dir.path() / "web1.json").string()}, s.superadmin());
  RunResult set = weft::testing::Run(
      "/bin/sh", [&] {
        std::vector<std::string> args = {"-c", "printf '%s\\n' alice-password-1 | \"$@\"", "sh",
                                         weft::testing::BuildPath("bin/weft").string()};
        for (const std::string& a : s.Connect(bob)) args.push_back(a);
        for (const char* a : {"user", "passwd", "alice", "--password-stdin"}) args.push_back(a);
        return args;
      }());
  INFO(set.out << set.err);
  REQUIRE(set.exit_code == 0);
  Connection gateway(dir.path() / "web1.json");
  Result<json> session = gateway.client->CallAs({.client_addr = "192.0.2.10"}, "session.login",
                                                {{"tenant", "acme"}, {"user", "alice"}, {"password", "alice-password-1"}});
  REQUIRE(session.ok());
  const weft::wire::OnBehalf as_alice{.session = (*session)["session"].get<std::string>(), .client_addr = "192.0.2.10"};
  REQUIRE(gateway.client->CallAs(as_alice, "session.get", json::object()).ok());

  Connection open_laptop(laptop);
  Connection open_desktop(desktop);
  REQUIRE(open_laptop.Call("cluster.list").ok());
  REQUIRE(open_desktop.Call("cluster.list").ok());

  const json listed = s.WeftJson({"user", "key", "list", "alice"}, bob);
  REQUIRE(listed["keys"].size() == 2);
  const std::string lost = KeyOf(listed, laptop)["fingerprint"];
  RunResult r = Ok(s, {"user", "key", "revoke", "alice", lost}, bob);
  CHECK_THAT(r.out, Catch::Contains("revoked") && Catch::Contains("1 browser session ended"));

  // The laptop's connection, open all along, is answered no more; the desktop's is.
  Result<json> refused = open_laptop.Call("cluster.list");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kDenied);
  CHECK(open_desktop.Call("cluster.list").ok());
  Refused(s, {"--timeout", "800", "cluster", "list"}, laptop, "may not know the key");
  Ok(s, {"cluster", "list"}, desktop);
  // The session ended with it; alice logs in again.
  Result<json> gone = gateway.client->CallAs(as_alice, "session.get", json::object());
  REQUIRE_FALSE(gone.ok());
  CHECK_THAT(gone.status().message(), Catch::Contains("not logged in"));
  // alice stays, with her other key.
  const json users = s.WeftJson({"user", "list"}, bob);
  bool still = false;
  for (const json& u : users["users"]) still = still || (u["name"] == "alice" && u["keys"] == 1);
  CHECK(still);
  CHECK(KeyOf(s.WeftJson({"user", "key", "list", "alice"}, bob), laptop)["state"] == "revoked");
  Refused(s, {"user", "key", "revoke", "alice", lost}, bob, "is already revoked");
  Refused(s, {"user", "key", "revoke", "alice", "0000-0000-0000-0000"}, bob,
          "user 'alice' of tenant 'acme' has no key with fingerprint 0000-0000-0000-0000");
}

TEST_CASE("user keys: a user manages only their own keys, an admin only their tenant's, each refusal says why",
          "[security][userkeys]") {
  TempDir dir("userkeys-perms");
  Weftd s(ServerIn(dir.path()));
  Ok(s, {"tenant", "create", "acme"}, s.superadmin());
  Ok(s, {"tenant", "create", "globex"}, s.superadmin());
  const fs::path alice = MakeUser(s, dir.path(), "acme", "alice", "user");
  const fs::path carol = MakeUser(s, dir.path(), "acme", "carol", "user");
  const fs::path gadmin = MakeUser(s, dir.path(), "globex", "gina", "admin");
  const std::string alice_fp = weft::curve::Fingerprint(PublicKey(alice));

  // carol, a user, cannot list, rotate or revoke alice's keys.
  const std::string not_hers = "user 'carol' may manage only their own keys, not user 'alice''s";
  Refused(s, {"user", "key", "list", "alice"}, carol, not_hers);
  Refused(s, {"user", "key", "rotate", "alice", "-f", (dir.path() / "stolen.json").string()}, carol, not_hers);
  CHECK_FALSE(fs::exists(dir.path() / "stolen.json"));
  CHECK_FALSE(fs::exists(dir.path() / "stolen.json.new"));
  Refused(s, {"user", "key", "revoke", "alice", alice_fp}, carol, not_hers);
  // Nor can she make herself a superadmin's key, or rotate someone through a session's role.
  Refused(s, {"user", "key", "rotate", "superadmin"}, carol, "may manage only their own keys");
  // Another tenant's admin: not in acme, and acme's users are not in globex.
  Refused(s, {"--tenant", "acme", "user", "key", "revoke", "alice", alice_fp}, gadmin,
          "in tenant 'acme': user 'gina' belongs to tenant 'globex'");
  Refused(s, {"user", "key", "revoke", "alice", alice_fp}, gadmin, "no user 'alice' in tenant 'globex'");
  Refused(s, {"--tenant", "acme", "user", "key", "rotate", "nosuch"}, s.superadmin(), "no user 'nosuch' in tenant 'acme'");
  // alice's key still works after all of that.
  Ok(s, {"cluster", "list"}, alice);
  CHECK(KeyOf(s.WeftJson({"user", "key", "list", "alice"}, alice), alice)["state"] == "in force");

  // The superadmin's own key in its credential file is not revoked (a restart would put it back): rotated.
  const json root = s.WeftJson({"user", "key", "list", "superadmin"}, s.superadmin());
  REQUIRE(root["keys"].size() == 1);
  Refused(s, {"user", "key", "revoke", "superadmin", root["keys"][0]["fingerprint"].get<std::string>()},
          s.superadmin(), "rotate it instead, with `weft user key rotate superadmin`");
  // --help says what each does.
  RunResult help = s.Weft({"user", "key", "rotate", "--help"}, s.superadmin());
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out + help.err, Catch::Contains("--grace") && Catch::Contains("--fingerprint"));
}

TEST_CASE("user keys: the audit log records each rotation and revocation with the key's fingerprint",
          "[security][userkeys]") {
  TempDir dir("userkeys-audit");
  Weftd s(ServerIn(dir.path()));
  Ok(s, {"tenant", "create", "acme"}, s.superadmin());
  const fs::path bob = MakeUser(s, dir.path(), "acme", "bob", "admin");
  const fs::path alice = MakeUser(s, dir.path(), "acme", "alice", "user");
  const std::string old_fp = weft::curve::Fingerprint(PublicKey(alice));
  const fs::path fresh = dir.path() / "alice-new.json";
  Ok(s, {"user", "key", "rotate", "alice", "-f", fresh.string()}, alice);
  const std::string new_fp = weft::curve::Fingerprint(PublicKey(fresh));
  Ok(s, {"user", "key", "revoke", "alice", new_fp}, bob);

  const json audit = s.WeftJson({"--tenant", "acme", "audit"}, s.superadmin());
  int rotations = 0, revocations = 0;
  for (const json& e : audit["entries"]) {
    INFO(e.dump());
    if (e["op"] == "user.key.rotate") {
      ++rotations;
      CHECK(e["actor"] == "alice");
      CHECK(e["target"] == "user alice");
      CHECK(e["detail"]["fingerprint"] == new_fp);
      CHECK(e["detail"]["retired"] == json::array({old_fp}));
    } else if (e["op"] == "user.key.revoke") {
      ++revocations;
      CHECK(e["actor"] == "bob");
      CHECK(e["target"] == "user alice");
      CHECK(e["detail"]["fingerprint"] == new_fp);
    }
  }
  CHECK(rotations == 1);
  CHECK(revocations == 1);
}

TEST_CASE("user keys: the superadmin rotates its own key: weftd rewrites its credential file, the old key is "
          "refused, a restart keeps the new one, a refused write changes nothing",
          "[security][userkeys]") {
  TempDir dir("userkeys-root");
  Weftd s(ServerIn(dir.path()));
  const fs::path root = s.superadmin();
  const fs::path copy = dir.path() / "root-copy.json";
  fs::copy_file(root, copy);
  const std::string old_key = PublicKey(root);

  // Refused first: the new file cannot be written (a directory in the way of its temporary file).
  fs::create_directories(root.string() + ".tmp");
  RunResult r = s.Weft({"user", "key", "rotate", "superadmin"}, root);
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("cannot write the superadmin's new credential; its key is unchanged"));
  CHECK(PublicKey(root) == old_key);
  json listed = s.WeftJson({"user", "key", "list", "superadmin"}, root);
  REQUIRE(listed["keys"].size() == 1);
  CHECK(listed["keys"][0]["state"] == "in force");
  fs::remove(root.string() + ".tmp");

  // Rotated: the file in the data directory holds the new key, the previous one is kept beside it.
  r = Ok(s, {"user", "key", "rotate", "superadmin"}, copy);
  CHECK_THAT(r.out, Catch::Contains("weftd wrote the superadmin's new credential to " + root.string()));
  const std::string new_key = PublicKey(root);
  CHECK(new_key != old_key);
  CHECK(PublicKey(root.string() + ".previous") == old_key);
  CHECK((fs::status(root).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  Refused(s, {"--timeout", "800", "tenant", "list"}, copy, "may not know the key");
  Ok(s, {"tenant", "list"}, root);
  listed = s.WeftJson({"user", "key", "list", "superadmin"}, root);
  REQUIRE(listed["keys"].size() == 2);
  CHECK(KeyOf(listed, copy)["state"] == "revoked");
  CHECK(KeyOf(listed, root)["state"] == "in force");

  // weftd records its file's key at every start: the new one, and the old stays revoked.
  s.Restart();
  Refused(s, {"--timeout", "800", "tenant", "list"}, copy, "may not know the key");
  Ok(s, {"tenant", "list"}, root);
  listed = s.WeftJson({"user", "key", "list", "superadmin"}, root);
  REQUIRE(listed["keys"].size() == 2);
  CHECK(KeyOf(listed, copy)["state"] == "revoked");
}
