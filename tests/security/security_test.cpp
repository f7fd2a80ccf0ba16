// Security end to end (docs/security.md): a real weftd with CurveZMQ on, real
// weft-host processes enrolling with tokens or waiting to be accepted, and the
// real weft CLI with credential files. Every denial path is driven from the
// outside and checked in what the user sees and in weftd's log.
#include <catch2/catch.hpp>


#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/host.hpp"
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
using weft::testing::BuildPath;
using weft::testing::CountRows;
using weft::testing::Host;
using weft::testing::HostOptions;
using weft::testing::Process;
using weft::testing::ReadFile;
using weft::testing::Run;
using weft::testing::RunResult;
using weft::testing::Tail;
using weft::testing::WaitFor;
using weft::testing::Weftd;
using weft::testing::WeftdOptions;
using weft::testing::WriteFile;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// weftd with security on (the default), on ports it picks; restartable on the same ports.
// `security`: more keys of [security].
WeftdOptions ServerIn(const fs::path& dir, const std::string& security = "") {
  return {.dir = dir,
          .curve = true,
          .security_toml = security,
          .lease_ms = 2000,
          .heartbeat_ms = 200,
          .silent_after_ms = 2000,
          .cli_args = {"--timeout", "3000"}};
}

// weft-host `id` in dir/id, with a state directory for its credential; `security`: more keys
// (enroll_token, server_key, ...).
HostOptions HostIn(const fs::path& dir, const std::string& id, const std::string& server,
                   const std::string& security) {
  return {.dir = dir, .id = id, .server = server, .extra_toml = security};
}

// A user of `tenant` with `role` and their credential file.
fs::path MakeUser(Weftd& s, const fs::path& dir, const std::string& tenant, const std::string& name,
                  const std::string& role) {
  REQUIRE(s.Weft({"--tenant", tenant, "user", "create", name, "--role", role}, s.superadmin()).exit_code == 0);
  const fs::path file = dir / (name + ".json");
  REQUIRE(s.Weft({"--tenant", tenant, "credentials", name, "-f", file.string()}, s.superadmin()).exit_code == 0);
  return file;
}

// The first sealed value ("enc:v2:...") in `text`, or "".
std::string SealedText(const std::string& text) {
  const auto at = text.find("enc:v2:");
  return at == std::string::npos ? std::string() : text.substr(at, text.find('"', at) - at);
}

// The store's files as text (weft.db and its write-ahead log).
std::string StoreFiles(const fs::path& data_dir) {
  std::string store;
  for (const char* f : {"weft.db", "weft.db-wal"})
    if (fs::exists(data_dir / f)) store += ReadFile(data_dir / f);
  return store;
}

// Every file of a `catalog export` as one text.
std::string Exported(Weftd& s, const fs::path& credential, const fs::path& dir) {
  RunResult r = s.Weft({"catalog", "export", dir.string()}, credential);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string exported;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file()) exported += ReadFile(f.path());
  return exported;
}

json Example(const std::string& kind, const std::string& name) {
  return json::parse(ReadFile(fs::path(WEFT_SOURCE_DIR) / "examples/catalog" / kind / (name + ".json")));
}

std::string Token(Weftd& s, const std::string& ttl = "") {
  std::vector<std::string> args = {"host", "token", "create"};
  if (!ttl.empty()) args.insert(args.end(), {"--ttl", ttl});
  RunResult r = s.Weft(args, s.superadmin());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string token = r.out.substr(0, r.out.find('\n'));
  REQUIRE(token.rfind("weft1.", 0) == 0);
  return token;
}

// The example catalog imported by the superadmin into `tenant`, made first
// with `flags` (--max-clusters N, ...); with "" into the superadmin's own.
void WithExamples(Weftd& s, const std::string& tenant, const std::vector<std::string>& flags = {}) {
  const fs::path root = s.superadmin();
  std::vector<std::string> import = {"catalog", "import", (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string()};
  if (!tenant.empty()) {
    std::vector<std::string> create = {"tenant", "create", tenant};
    create.insert(create.end(), flags.begin(), flags.end());
    RunResult made = s.Weft(create, root);
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
    import.insert(import.begin(), {"--tenant", tenant});
  }
  RunResult imported = s.Weft(import, root);
  INFO(imported.out << imported.err);
  REQUIRE(imported.exit_code == 0);
}

}  // namespace

TEST_CASE("security: unknown and missing keys are refused at the handshake and logged once per key",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  // The local credential works without --server.
  json status = s.WeftJson({"status"}, s.superadmin());
  CHECK(status.contains("pid"));
  CHECK((fs::status(s.superadmin()).permissions() & fs::perms::group_all) == fs::perms::none);
  CHECK((fs::status(s.superadmin()).permissions() & fs::perms::others_all) == fs::perms::none);

  // A well-formed credential whose key weftd never saw.
  auto base = weft::curve::LoadCredential(s.superadmin());
  REQUIRE(base.ok());
  weft::curve::Credential stranger = *base;
  stranger.keys = *weft::curve::Generate();
  REQUIRE(weft::curve::SaveCredential(tmp / "stranger.json", stranger).ok());
  for (int i = 0; i < 3; ++i) {
    RunResult r = s.Weft({"--timeout", "800", "status"}, tmp / "stranger.json");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("no answer") && Catch::Contains("may not know the key"));
  }
  const std::string shortkey = weft::curve::ShortKey(stranger.keys.public_key);
  REQUIRE(WaitFor([&] { return s.Log().find("refused key " + shortkey) != std::string::npos; }, 5s));
  CHECK(Count(s.Log(), "refused key " + shortkey) == 1);
  CHECK_THAT(s.Log(), Catch::Contains("(logged once per key)"));

  // No credential at all: the CLI says what it needs.
  RunResult bare = Run(BuildPath("bin/weft"), {"--server", base->api, "--timeout", "800", "status"});
  CHECK(bare.exit_code == 1);
  CHECK_THAT(bare.err, Catch::Contains("--credentials"));
}

TEST_CASE("security: a host given weftd's api endpoint to enroll says it is the api endpoint",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  Host wrong(HostIn(tmp.path(), "h1", s.api(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return wrong.Log().find("no answer from weftd") != std::string::npos; }, 20s));
  INFO(wrong.Log());
  CHECK_THAT(wrong.Log(), Catch::Contains("is most likely weftd's api endpoint, not its provisioner endpoint") &&
                              Catch::Contains("weft-host needs weftd's provisioner endpoint"));
  CHECK_THAT(wrong.Log(), !Catch::Contains("it is unreachable"));
  CHECK_FALSE(s.HostLive("h1"));
}

TEST_CASE("security: a host enrolls with a one-time token, a used or expired token is refused", "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const std::string token = Token(s);
  Host h1(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + token + "\"\n"));
  const bool live = WaitFor([&] { return s.HostLive("h1"); }, 15s);
  INFO(h1.Log() << s.Log());
  REQUIRE(live);
  CHECK_THAT(h1.Log(), Catch::Contains("enrolled with weftd"));
  CHECK((fs::status(h1.credential()).permissions() & fs::perms::others_all) == fs::perms::none);
  // The token's secret and the host's secret key appear in no log.
  const std::string secret = token.substr(6, 64);
  auto host_credential = weft::curve::LoadCredential(h1.credential());
  REQUIRE(host_credential.ok());
  for (const std::string& log : {h1.Log(), s.Log()}) {
    CHECK(log.find(secret) == std::string::npos);
    CHECK(log.find(host_credential->keys.secret_key) == std::string::npos);
  }

  // The same token again: it was spent, so the connection is refused.
  Host h2(HostIn(tmp.path(), "h2", s.provisioner(), "enroll_token = \"" + token + "\"\n"));
  // An expired one: the same.
  const std::string short_lived = Token(s, "1s");
  std::this_thread::sleep_for(1500ms);
  Host h3(HostIn(tmp.path(), "h3", s.provisioner(), "enroll_token = \"" + short_lived + "\"\n"));
  REQUIRE(WaitFor([&] { return Count(h2.Log(), "no answer from weftd") >= 1 && Count(h3.Log(), "no answer") >= 1; },
                  15s));
  CHECK_FALSE(s.HostLive("h2"));
  CHECK_FALSE(s.HostLive("h3"));
  // The host looked again and says which it is: the provisioner endpoint refused the token.
  CHECK_THAT(h2.Log(), Catch::Contains("weftd's provisioner endpoint refused the token's key: the token is unknown, "
                                       "expired or used up"));
  CHECK_THAT(s.Log(), Catch::Contains("revoked, used up or expired"));
  CHECK(h1.process().running());

  // The superadmin credential weftd made at its first start is said, with where it is.
  CHECK_THAT(s.Log(), Catch::Contains("made a superadmin credential at " + s.superadmin().string()));

  // A restart keeps every key: the host reconnects and the CLI still works.
  h2.process().Stop();
  h3.process().Stop();
  s.Restart();
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  CHECK(h1.process().running());
  CHECK(Count(h1.Log(), "enrolled with weftd") == 1);
  CHECK(s.Log().find("made a superadmin credential") == std::string::npos);  // the same one, not a new one
}

TEST_CASE("security: an unknown host waits until an admin accepts it, a revoked host is cut off at once",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  auto admin = weft::curve::LoadCredential(s.superadmin());
  REQUIRE(admin.ok());
  Host h1(HostIn(tmp.path(), "h1", s.provisioner(), "server_key = \"" + admin->server_key + "\"\n"));
  json requests;
  REQUIRE(WaitFor(
      [&] {
        requests = s.WeftJson({"host", "requests"}, s.superadmin());
        return !requests["requests"].empty();
      },
      15s));
  CHECK(requests["requests"][0]["host_id"] == "h1");
  CHECK_FALSE(s.HostLive("h1"));
  CHECK_THAT(s.Log(), Catch::Contains("asks to join"));

  const std::string fingerprint = requests["requests"][0]["fingerprint"];
  CHECK_THAT(h1.Log(), Catch::Contains("--fingerprint " + fingerprint));
  RunResult accept = s.Weft({"host", "accept", "h1", "--fingerprint", fingerprint}, s.superadmin());
  INFO(accept.err);
  REQUIRE(accept.exit_code == 0);
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  CHECK(s.WeftJson({"host", "requests"}, s.superadmin())["requests"].empty());

  // Accepting a host nobody asked for is a clear error.
  RunResult nobody = s.Weft({"host", "accept", "h9", "--fingerprint", fingerprint}, s.superadmin());
  CHECK(nobody.exit_code == 1);
  CHECK_THAT(nobody.err, Catch::Contains("no host 'h9' waits"));

  // A task runs on h1 when it is revoked.
  zmq::context_t ctx(1);
  weft::client::Client api(ctx, weft::client::FromCredential(*admin, 5000));
  auto enqueued = api.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                     {"action", "INSTALL"},
                                                                     {"node_id", "n1"},
                                                                     {"payload", {{"fields", {{"latency_ms", 30000}}}}}}})}});
  REQUIRE(enqueued.ok());
  const json task_id = (*enqueued)["task_ids"][0];
  auto task_state = [&] {
    auto t = api.Call("task.get", {{"task_id", task_id}});
    return t.ok() ? (*t)["state"].get<std::string>() : std::string();
  };
  REQUIRE(WaitFor([&] { return task_state() == "leased"; }, 15s));

  // Revoked: gone from the list at once, its task back in the queue, every request it makes refused.
  REQUIRE(s.Weft({"host", "revoke", "h1"}, s.superadmin()).exit_code == 0);
  CHECK(task_state() == "queued");
  json hosts = s.WeftJson({"host", "list"}, s.superadmin());
  CHECK(hosts["hosts"].empty());
  std::this_thread::sleep_for(1500ms);
  CHECK_FALSE(s.HostLive("h1"));
  CHECK_THAT(h1.Log(), Catch::Contains("was revoked"));
  CHECK(s.Weft({"host", "revoke", "h1"}, s.superadmin()).exit_code == 1);
}

TEST_CASE("security: roles and tenants are checked on the server, each denial names the op and the role",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  REQUIRE(s.Weft({"tenant", "create", "acme", "--max-clusters", "2"}, root).exit_code == 0);
  REQUIRE(s.Weft({"tenant", "create", "globex"}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "bob", "--role", "admin"}, root).exit_code == 0);
  RunResult made = s.Weft({"--tenant", "acme", "credentials", "bob", "-f", (tmp / "bob.json").string()}, root);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const fs::path bob = tmp / "bob.json";
  CHECK((fs::status(bob).permissions() & fs::perms::others_all) == fs::perms::none);

  // bob, a tenant admin, manages his tenant's users...
  REQUIRE(s.Weft({"user", "create", "alice"}, bob).exit_code == 0);
  REQUIRE(s.Weft({"credentials", "alice", "-f", (tmp / "alice.json").string()}, bob).exit_code == 0);
  const fs::path alice = tmp / "alice.json";
  json users = s.WeftJson({"user", "list"}, bob);
  CHECK(users["tenant"] == "acme");
  CHECK(users["users"].size() == 2);

  // ...but not tenants or hosts.
  RunResult r = s.Weft({"tenant", "list"}, bob);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("op 'tenant.list' needs role superadmin") && Catch::Contains("admin of tenant 'acme'"));
  r = s.Weft({"host", "token", "create"}, bob);
  CHECK_THAT(r.err, Catch::Contains("op 'host.token.create' needs role superadmin"));

  // alice, a user: no user management, no other tenant.
  r = s.Weft({"user", "create", "mallory"}, alice);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("op 'user.create' needs role admin or superadmin") &&
                        Catch::Contains("the caller is user of tenant 'acme'"));
  r = s.Weft({"--tenant", "globex", "cluster", "list"}, alice);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("in tenant 'globex'") && Catch::Contains("belongs to tenant 'acme'"));
  CHECK(s.Weft({"cluster", "list"}, alice).exit_code == 0);

  // Deleting the user revokes her key on the very next request.
  REQUIRE(s.Weft({"user", "delete", "alice"}, bob).exit_code == 0);
  r = s.Weft({"--timeout", "800", "cluster", "list"}, alice);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("may not know the key"));
  // And a tenant's deletion revokes its admins too.
  REQUIRE(s.Weft({"tenant", "delete", "acme"}, root).exit_code == 0);
  CHECK(s.Weft({"user", "list"}, bob).exit_code == 1);
  json tenants = s.WeftJson({"tenant", "list"}, root);
  CHECK(tenants["tenants"].size() == 2);  // default and globex
}

TEST_CASE("security: quotas hold at create and scale, also for creates at the same moment, users see only their "
          "own clusters",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  WithExamples(s, "acme", {"--max-clusters", "2", "--max-nodes", "7"});
  WithExamples(s, "globex", {"--max-clusters", "1"});
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "alice"}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "carol"}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "alice", "-f", (tmp / "alice.json").string()}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "carol", "-f", (tmp / "carol.json").string()}, root).exit_code == 0);
  const fs::path alice = tmp / "alice.json", carol = tmp / "carol.json";
  auto create = [&](const fs::path& who, const std::string& name, const std::string& size) {
    return s.Weft({"cluster", "create", name, "--template", "web-fake", "--size", size}, who);
  };

  REQUIRE(create(alice, "a1", "3").exit_code == 0);
  RunResult r = create(alice, "a2", "5");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("may have 7 nodes (quota max_nodes); its other clusters have 3 and this needs 5"));
  REQUIRE(create(alice, "a2", "4").exit_code == 0);
  r = create(carol, "c1", "3");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("may have 2 clusters (quota max_clusters) and has 2"));
  // (No host runs the tasks here: stop a1's create first, so that it may be scaled.)
  const std::string job = s.WeftJson({"cluster", "get", "a1"}, alice)["cluster"]["latest_job"];
  REQUIRE(s.Weft({"job", "abort", job}, alice).exit_code == 0);
  r = s.Weft({"--tenant", "acme", "cluster", "scale", "a1", "--size", "4"}, root);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("its other clusters have 4 and this needs 4"));

  // carol sees none of alice's clusters; the superadmin sees both.
  CHECK(s.WeftJson({"cluster", "list"}, carol)["clusters"].empty());
  r = s.Weft({"cluster", "get", "a1"}, carol);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("cluster 'a1' does not exist"));
  CHECK(s.WeftJson({"job", "list"}, carol)["jobs"].empty());
  CHECK(s.WeftJson({"cluster", "list"}, alice)["clusters"].size() == 2);
  CHECK(s.WeftJson({"--tenant", "acme", "cluster", "list"}, root)["clusters"].size() == 2);

  // Two creates at the same moment against a quota of one cluster: exactly one wins.
  RunResult first, second;
  std::thread a([&] { first = s.Weft({"--tenant", "globex", "cluster", "create", "g1", "--template", "web-fake",
                                            "--size", "3"}, root); });
  std::thread b([&] { second = s.Weft({"--tenant", "globex", "cluster", "create", "g2", "--template", "web-fake",
                                             "--size", "3"}, root); });
  a.join();
  b.join();
  CHECK(first.exit_code + second.exit_code == 1);
  CHECK_THAT(first.err + second.err, Catch::Contains("quota max_clusters"));
  CHECK(s.WeftJson({"--tenant", "globex", "cluster", "list"}, root)["clusters"].size() == 1);
}

TEST_CASE("security: event subscriptions deliver only what the subscriber's key may see", "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  for (const std::string tenant : {"acme", "globex"}) WithExamples(s, tenant);
  std::map<std::string, fs::path> who = {{"root", root}};
  for (const auto& [name, role] : {std::pair{"bob", "admin"}, {"alice", "user"}, {"carol", "user"}}) {
    REQUIRE(s.Weft({"--tenant", "acme", "user", "create", name, "--role", role}, root).exit_code == 0);
    who[name] = tmp / (std::string(name) + ".json");
    REQUIRE(s.Weft({"--tenant", "acme", "credentials", name, "-f", who[name].string()}, root).exit_code == 0);
  }
  REQUIRE(s.Weft({"cluster", "create", "a1", "--template", "web-fake", "--size", "3"}, who["alice"]).exit_code == 0);
  REQUIRE(s.Weft({"cluster", "create", "c1", "--template", "web-fake", "--size", "3"}, who["carol"]).exit_code == 0);
  RunResult g1_made = s.Weft({"--tenant", "globex", "cluster", "create", "g1", "--template", "web-fake", "--size", "3"},
                             root);
  REQUIRE(g1_made.exit_code == 0);
  // The command it suggests works as typed: it names the tenant given.
  CHECK_THAT(g1_made.out, Catch::Contains("follow it with `weft --tenant globex job watch "));
  auto cluster_id = [&](const fs::path& as, const std::string& name, const std::string& tenant) {
    return s.WeftJson({"--tenant", tenant, "cluster", "get", name}, as)["cluster"];
  };
  const json a1 = cluster_id(who["alice"], "a1", "acme"), c1 = cluster_id(who["carol"], "c1", "acme"),
             g1 = cluster_id(root, "g1", "globex");

  // Everyone subscribes to everything.
  zmq::context_t ctx(1);
  std::map<std::string, std::unique_ptr<zmq::socket_t>> subs;
  for (const auto& [name, file] : who) {
    auto c = weft::curve::LoadCredential(file);
    REQUIRE(c.ok());
    auto sub = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::sub);
    sub->set(zmq::sockopt::linger, 0);
    weft::curve::SetClientKeys(*sub, c->server_key, c->keys);
    sub->connect(s.events());
    sub->set(zmq::sockopt::subscribe, "");
    subs[name] = std::move(sub);
  }
  std::this_thread::sleep_for(1000ms);
  // Events in both tenants: each cluster's create job is aborted.
  REQUIRE(s.Weft({"job", "abort", a1["latest_job"].get<std::string>()}, who["alice"]).exit_code == 0);
  REQUIRE(s.Weft({"job", "abort", c1["latest_job"].get<std::string>()}, who["carol"]).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "globex", "job", "abort", g1["latest_job"].get<std::string>()}, root).exit_code == 0);

  std::map<std::string, std::set<std::string>> seen;
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until) {
    for (auto& [name, sub] : subs) {
      weft::wire::Frames frames;
      while (weft::wire::RecvMultipart(*sub, frames, zmq::recv_flags::dontwait)) seen[name].insert(frames[0].to_string());
    }
    std::this_thread::sleep_for(20ms);
  }
  auto all_start_with = [](const std::set<std::string>& topics, const std::vector<std::string>& prefixes) {
    for (const std::string& t : topics) {
      bool ok = false;
      for (const std::string& p : prefixes) ok = ok || t.rfind(p, 0) == 0;
      if (!ok) return false;
    }
    return !topics.empty();
  };
  const std::string a = a1["id"], c = c1["id"], g = g1["id"];
  INFO("root " << json(seen["root"]).dump() << "\nbob " << json(seen["bob"]).dump() << "\nalice "
               << json(seen["alice"]).dump() << "\ncarol " << json(seen["carol"]).dump());
  CHECK(seen["root"].count("globex/job/" + g + "/"));
  CHECK(seen["root"].count("acme/job/" + a + "/"));
  CHECK(all_start_with(seen["bob"], {"acme/"}));
  CHECK(seen["bob"].count("acme/job/" + a + "/"));
  CHECK(seen["bob"].count("acme/job/" + c + "/"));
  CHECK(all_start_with(seen["alice"], {"acme/job/" + a + "/", "acme/cluster/" + a + "/", "acme/task/" + a + "/"}));
  CHECK(all_start_with(seen["carol"], {"acme/job/" + c + "/", "acme/cluster/" + c + "/", "acme/task/" + c + "/"}));
}

TEST_CASE("security: a planted secret and SSH private keys appear in no log, event, listing, export or store file",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const std::string secret = "PLANTED-SECRET-7f3a9c", early = "EARLY-SECRET-1b2c";
  WithExamples(s, "");
  // The fake provider's api_token field is declared sensitive by the plugin. Put
  // before any host registered the plugin, weftd cannot know that yet...
  json provider = json::parse(ReadFile(fs::path(WEFT_SOURCE_DIR) / "examples/catalog/providers/fake.json"));
  provider["provisioner"] = {{"api_token", early}, {"make_ssh_key", true}};
  WriteFile(tmp / "fake.json", provider.dump());
  REQUIRE(s.Weft({"provider", "put", (tmp / "fake.json").string()}, root).exit_code == 0);
  // ...so the registration of the plugin seals it in place, in every version.
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  CHECK_THAT(s.WeftJson({"provider", "get", "fake"}, root).dump(), Catch::Contains("\"api_token\":\"enc:v2:"));
  CHECK(CountRows(s, "SELECT COUNT(*) FROM catalog_entities WHERE json LIKE '%" + early + "%'") == 0);
  // Put once the plugin is known, a secret is never written in the clear at all.
  provider["provisioner"]["api_token"] = secret;
  WriteFile(tmp / "fake.json", provider.dump());
  REQUIRE(s.Weft({"provider", "put", (tmp / "fake.json").string()}, root).exit_code == 0);

  auto admin = weft::curve::LoadCredential(root);
  REQUIRE(admin.ok());
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  weft::curve::SetClientKeys(sub, admin->server_key, admin->keys);
  sub.connect(s.events());
  sub.set(zmq::sockopt::subscribe, "");
  std::this_thread::sleep_for(500ms);

  RunResult created = s.Weft({"--timeout", "20000", "cluster", "create", "web", "--template", "web-fake", "--size",
                                    "3", "--wait"}, root);
  INFO(created.out << created.err << host.Log());
  REQUIRE(created.exit_code == 0);
  json job = s.WeftJson({"job", "show", s.WeftJson({"cluster", "get", "web"}, root)["cluster"]["latest_job"]}, root);

  // The plugin got the token in the clear (only its length comes back)...
  int creates = 0;
  for (const json& t : job["job"]["tasks"]) {
    if (t["action"] != "CREATE") continue;
    ++creates;
    CHECK(t["attempts"].back()["status"] == "succeeded");
  }
  CHECK(creates == 3);
  const std::string everything = job.dump();
  const std::string cluster = s.WeftJson({"cluster", "get", "web"}, root).dump();
  CHECK(Count(cluster, "\"api_token_length\":" + std::to_string(secret.size())) == 3);

  // ...and no channel shows it, nor a private key.
  std::string events;
  weft::wire::Frames frames;
  while (weft::wire::RecvMultipart(sub, frames, zmq::recv_flags::dontwait))
    for (const auto& f : frames) events += f.to_string() + "\n";
  CHECK_FALSE(events.empty());
  REQUIRE(s.Weft({"catalog", "export", (tmp / "export").string()}, root).exit_code == 0);
  std::string exported;
  for (const auto& f : fs::recursive_directory_iterator(tmp / "export"))
    if (f.is_regular_file()) exported += ReadFile(f.path());
  const std::string store = weft::testing::StoreText(s);
  const std::vector<std::pair<std::string, std::string>> channels = {
      {"weftd's log", s.Log()},
      {"the host's log", host.Log()},
      {"events", events},
      {"job show", everything},
      {"cluster get", cluster},
      {"provider get", s.WeftJson({"provider", "get", "fake"}, root).dump()},
      {"catalog export", exported},
      {"the store's files", store},
      {"weft's own output", created.out + created.err}};
  for (const auto& [name, text] : channels) {
    INFO(name);
    CHECK(text.find(secret) == std::string::npos);
    CHECK(text.find("FAKE PRIVATE KEY") == std::string::npos);
    // The early one was on disk in the clear until the registration (free pages may keep it).
    if (name != "the store's files") CHECK(text.find(early) == std::string::npos);
  }
  CHECK_THAT(store, Catch::Contains("enc:v2:"));  // it is there, sealed

  // Deleting the cluster wipes even the sealed values it kept (spec, nodes, tasks).
  RunResult deleted = s.Weft({"--timeout", "20000", "cluster", "delete", "web", "--wait"}, root);
  INFO(deleted.err);
  REQUIRE(deleted.exit_code == 0);
  CHECK(CountRows(s,
                  "SELECT (SELECT COUNT(*) FROM tasks WHERE result LIKE '%enc:v%') + "
                  "(SELECT COUNT(*) FROM task_specs WHERE payload LIKE '%enc:v%') + "
                  "(SELECT COUNT(*) FROM nodes WHERE results LIKE '%enc:v%') + (SELECT COUNT(*) FROM clusters "
                  "WHERE spec LIKE '%enc:v%' OR previous LIKE '%enc:v%')") == 0);
  // The catalog keeps its own sealed copy: the provider still exists.
  CHECK(s.WeftJson({"provider", "get", "fake"}, root).dump().find("enc:v2:") != std::string::npos);
}

TEST_CASE("security: a sealed value opens only where it was sealed for, copied into a cluster's config, a task, "
          "another provider or another tenant it is refused",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const std::string secret = "COPIED-SECRET-5d8e1a";
  for (const std::string tenant : {"acme", "globex"}) WithExamples(s, tenant);
  const fs::path bob = MakeUser(s, tmp.path(), "acme", "bob", "admin");
  const fs::path alice = MakeUser(s, tmp.path(), "acme", "alice", "user");
  const fs::path carol = MakeUser(s, tmp.path(), "globex", "carol", "admin");
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  auto put = [&](const fs::path& who, const json& entity) {
    WriteFile(tmp / "entity.json", entity.dump());
    return s.Weft({entity.contains("providertype") ? "provider" : "service", "put", (tmp / "entity.json").string()}, who);
  };
  json provider = Example("providers", "fake");
  provider["provisioner"] = {{"api_token", secret}};
  REQUIRE(put(bob, provider).exit_code == 0);
  // Everyone in the tenant may read the sealed text.
  const std::string sealed = SealedText(s.WeftJson({"provider", "get", "fake"}, alice).dump());
  REQUIRE_FALSE(sealed.empty());

  // A plain user puts it into the config of a cluster, whose automator may report its config.
  RunResult r = s.Weft({"cluster", "create", "c1", "--template", "web-fake", "--size", "3", "--config",
                               json{{"note", sealed}}.dump()}, alice);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("op 'cluster.create': the request holds sealed text (enc:...) at 'config.note'") &&
                        Catch::Contains("give the clear value"));
  CHECK(s.WeftJson({"cluster", "list"}, alice)["clusters"].empty());

  // The admin of another tenant hands it to a task of his own, an automator that echoes its config.
  auto carol_key = weft::curve::LoadCredential(carol);
  REQUIRE(carol_key.ok());
  zmq::context_t ctx(1);
  weft::client::Client api(ctx, weft::client::FromCredential(*carol_key, 5000));
  const json echo = {{"name", "x"}, {"action", {{"type", "fake-automator"}, {"fields", {{"echo_task", true}}}}}};
  auto enqueued = api.Call(
      "debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                {"action", "INSTALL"},
                                                {"node_id", "n1"},
                                                {"payload", {{"config", {{"note", sealed}}}, {"service", echo}}}}})}});
  CHECK_FALSE(enqueued.ok());
  CHECK_THAT(enqueued.status().message(),
             Catch::Contains("op 'debug.enqueue': the request holds sealed text (enc:...) at "
                             "'tasks[0].payload.config.note'"));

  // Catalog puts: into another provider, into a field that is not sensitive, beside the fields, into another tenant.
  json other = provider;
  other["name"] = "fake2";
  other["provisioner"]["api_token"] = sealed;
  r = put(bob, other);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("field 'api_token' of provider 'fake2' in tenant 'acme' holds sealed text") &&
                        Catch::Contains("not sealed for it"));
  json note = provider;
  note["provisioner"] = {{"api_token", "x"}, {"fail_nodes", sealed}};
  CHECK_THAT(put(bob, note).err, Catch::Contains("field 'fail_nodes' of provider 'fake'"));
  json described = provider;
  described["description"] = sealed;
  CHECK_THAT(put(bob, described).err, Catch::Contains("provider 'fake' holds sealed text (enc:...) at 'description'"));
  json service = Example("services", "fake-nginx");
  service["provisioner"]["actions"]["install"]["fields"]["action"] = sealed;
  CHECK_THAT(put(bob, service).err, Catch::Contains("field 'install.action' of service 'fake-nginx' in tenant 'acme'"));
  json theirs = provider;
  theirs["provisioner"]["api_token"] = sealed;
  r = put(carol, theirs);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("field 'api_token' of provider 'fake' in tenant 'globex' holds sealed text"));
  // Text that only looks sealed, as an older weftd sealed it, is refused too.
  theirs["provisioner"]["api_token"] = "enc:v1:AAAA";
  CHECK_THAT(put(carol, theirs).err, Catch::Contains("not sealed for it"));

  // Put back where it was sealed for (a provider edited after `provider get`, an export imported again), it stays.
  json again = provider;
  again["provisioner"]["api_token"] = sealed;
  again["description"] = "edited";
  r = put(bob, again);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(SealedText(s.WeftJson({"provider", "get", "fake"}, bob).dump()) == sealed);
  Exported(s, bob, tmp / "export");
  CHECK(s.Weft({"catalog", "import", (tmp / "export").string()}, bob).exit_code == 0);
  r = s.Weft({"catalog", "import", (tmp / "export").string()}, carol);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out + r.err, Catch::Contains("in tenant 'globex' holds sealed text"));

  // At its own place it opens: a cluster of acme runs with the clear token (only its length comes back).
  RunResult created =
      s.Weft({"--timeout", "20000", "cluster", "create", "c2", "--template", "web-fake", "--size", "3", "--wait"}, alice);
  INFO(created.out << created.err << host.Log());
  REQUIRE(created.exit_code == 0);
  CHECK(Count(s.WeftJson({"cluster", "get", "c2"}, alice).dump(), "\"api_token_length\":" +
                                                                       std::to_string(secret.size())) == 3);
  // And the clear text is nowhere a client or the store could show it.
  const std::string job = s.WeftJson({"cluster", "get", "c2"}, alice)["cluster"]["latest_job"];
  CHECK(s.WeftJson({"job", "show", job}, alice).dump().find(secret) == std::string::npos);
  CHECK(StoreFiles(tmp / "server" / "data").find(secret) == std::string::npos);
}

TEST_CASE("security: a task of another tenant that names a running job gets nothing from that job",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const std::string motto = "ACME-CONFIG-9f1c";
  for (const std::string tenant : {"acme", "globex"}) WithExamples(s, tenant);
  const fs::path carol = MakeUser(s, tmp.path(), "globex", "carol", "admin");
  // The only host serves globex: acme's job keeps waiting, in flight.
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\ntenants = [\"globex\"]\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  REQUIRE(s.Weft({"--tenant", "acme", "cluster", "create", "a1", "--template", "web-fake", "--size", "3",
                        "--config", json{{"motto", motto}}.dump()}, root)
              .exit_code == 0);
  const std::string job = s.WeftJson({"--tenant", "acme", "cluster", "get", "a1"}, root)["cluster"]["latest_job"];
  const json shown = s.WeftJson({"--tenant", "acme", "job", "show", job}, root);
  REQUIRE_FALSE(shown["job"]["tasks"].empty());
  const std::string node = shown["job"]["tasks"][0]["node"];

  // carol, admin of globex, enqueues a task naming acme's job and node, for an automator that echoes its task.
  auto key = weft::curve::LoadCredential(carol);
  REQUIRE(key.ok());
  zmq::context_t ctx(1);
  weft::client::Client api(ctx, weft::client::FromCredential(*key, 5000));
  const json echo = {{"name", "x"}, {"action", {{"type", "fake-automator"}, {"fields", {{"echo_task", true}}}}}};
  auto enqueued = api.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                     {"action", "INSTALL"},
                                                                     {"job_id", job},
                                                                     {"node_id", node},
                                                                     {"payload", {{"service", echo}}}}})}});
  INFO(enqueued.status().ToString());
  REQUIRE(enqueued.ok());
  json task;
  REQUIRE(WaitFor(
      [&] {
        auto t = api.Call("task.get", {{"task_id", (*enqueued)["task_ids"][0]}});
        if (t.ok()) task = *t;
        return t.ok() && (*t)["state"] == "succeeded";
      },
      15s));
  INFO(task.dump());
  CHECK(task["result"]["echo"]["config"] == json::object());
  CHECK(task.dump().find(motto) == std::string::npos);
}

TEST_CASE("security: a sensitive field of any JSON type is sealed, and reaches the plugin with its type",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const std::string secret = "OBJECT-SECRET-94c2e7";
  WithExamples(s, "");
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  // `credentials` is a sensitive field of the fake provider that takes any JSON value.
  const json credentials = {{"user", "svc"}, {"keys", json::array({secret, 424242})}};
  json provider = Example("providers", "fake");
  provider["provisioner"] = {{"credentials", credentials}};
  WriteFile(tmp / "fake.json", provider.dump());
  RunResult r = s.Weft({"provider", "put", (tmp / "fake.json").string()}, root);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string shown = s.WeftJson({"provider", "get", "fake"}, root).dump();
  CHECK_THAT(shown, Catch::Contains("\"credentials\":\"enc:v2:"));
  CHECK(shown.find(secret) == std::string::npos);
  CHECK(shown.find("424242") == std::string::npos);
  CHECK(CountRows(s, "SELECT COUNT(*) FROM catalog_entities WHERE json LIKE '%" + secret + "%'") == 0);
  // Numbers and arrays too.
  for (const json& value : {json(31337), json::array({"a", secret})}) {
    provider["provisioner"] = {{"credentials", value}};
    WriteFile(tmp / "other.json", provider.dump());
    REQUIRE(s.Weft({"provider", "put", (tmp / "other.json").string()}, root).exit_code == 0);
    const std::string other = s.WeftJson({"provider", "get", "fake"}, root).dump();
    CHECK_THAT(other, Catch::Contains("\"credentials\":\"enc:v2:"));
    CHECK(other.find("31337") == std::string::npos);
  }
  REQUIRE(s.Weft({"provider", "put", (tmp / "fake.json").string()}, root).exit_code == 0);

  RunResult created =
      s.Weft({"--timeout", "20000", "cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"}, root);
  INFO(created.out << created.err << host.Log());
  REQUIRE(created.exit_code == 0);
  // The plugin got the object back (it reports only its type and size).
  const std::string cluster = s.WeftJson({"cluster", "get", "web"}, root).dump();
  CHECK(Count(cluster, "\"credentials_type\":\"object\"") == 3);
  CHECK(Count(cluster, "\"credentials_length\":" + std::to_string(credentials.dump().size())) == 3);
  const std::string job = s.WeftJson({"cluster", "get", "web"}, root)["cluster"]["latest_job"];
  for (const std::string& text : {cluster, s.WeftJson({"job", "show", job}, root).dump(),
                                  Exported(s, root, tmp / "export"), StoreFiles(tmp / "server" / "data")})
    CHECK(text.find(secret) == std::string::npos);
}

TEST_CASE("security: a service's fields that its automator declares sensitive are sealed like a provider's",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const std::string secret = "SERVICE-SECRET-31b7d0", early = "EARLY-SERVICE-SECRET-77aa";
  WithExamples(s, "");
  // The fake automator's `password` is sensitive. Put before any host registered the plugin...
  json service = Example("services", "fake-nginx");
  service["provisioner"]["actions"]["install"]["fields"]["password"] = early;
  WriteFile(tmp / "nginx.json", service.dump());
  REQUIRE(s.Weft({"service", "put", (tmp / "nginx.json").string()}, root).exit_code == 0);
  // ...it is sealed in place when one does.
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  std::string shown = s.WeftJson({"service", "get", "fake-nginx"}, root).dump();
  CHECK_THAT(shown, Catch::Contains("\"password\":\"enc:v2:"));
  CHECK(shown.find(early) == std::string::npos);
  // Once the plugin is known, a put seals at once.
  service["provisioner"]["actions"]["install"]["fields"]["password"] = secret;
  WriteFile(tmp / "nginx.json", service.dump());
  REQUIRE(s.Weft({"service", "put", (tmp / "nginx.json").string()}, root).exit_code == 0);
  shown = s.WeftJson({"service", "get", "fake-nginx"}, root).dump();
  CHECK_THAT(shown, Catch::Contains("\"password\":\"enc:v2:"));
  CHECK(shown.find(secret) == std::string::npos);

  // The automator gets it in the clear (it reports only its length) on the nodes that install nginx.
  RunResult created =
      s.Weft({"--timeout", "20000", "cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"}, root);
  INFO(created.out << created.err << host.Log());
  REQUIRE(created.exit_code == 0);
  const std::string job = s.WeftJson({"cluster", "get", "web"}, root)["cluster"]["latest_job"];
  const std::string shown_job = s.WeftJson({"job", "show", job}, root).dump();
  CHECK(Count(shown_job, "\"password_length\":" + std::to_string(secret.size())) >= 1);
  for (const std::string& text : {shown_job, s.WeftJson({"cluster", "get", "web"}, root).dump(),
                                  Exported(s, root, tmp / "export"), StoreFiles(tmp / "server" / "data"), s.Log(),
                                  host.Log()})
    CHECK(text.find(secret) == std::string::npos);
}

TEST_CASE("security: a secret put before any host registered its plugin is put with a warning, and sealed when "
          "one registers", "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const std::string early = "EARLY-UNSEALED-5e1d", imported = "IMPORTED-UNSEALED-90c4";
  // weftd learns which fields are secrets from the plugin a host registers: none has yet.
  json provider = Example("providers", "fake");
  provider["provisioner"] = {{"api_token", early}};
  WriteFile(tmp / "fake.json", provider.dump());
  RunResult put = s.Weft({"provider", "put", (tmp / "fake.json").string()}, root);
  INFO(put.out << put.err);
  REQUIRE(put.exit_code == 0);
  CHECK_THAT(put.err, Catch::Contains("weft: warning: no host has registered plugin 'fake-provider' yet, so weftd "
                                      "cannot tell which fields of provider 'fake' are secrets: they are stored "
                                      "unsealed until a weft-host with that plugin registers, which seals them"));
  // `weft catalog import` says it of every entity it puts so.
  fs::create_directories(tmp / "catalog" / "services");
  json service = Example("services", "fake-nginx");
  service["provisioner"]["actions"]["install"]["fields"]["password"] = imported;
  WriteFile(tmp / "catalog" / "services" / "fake-nginx.json", service.dump());
  RunResult import = s.Weft({"catalog", "import", (tmp / "catalog").string()}, root);
  INFO(import.out << import.err);
  REQUIRE(import.exit_code == 0);
  CHECK_THAT(import.out, Catch::Contains("imported service 'fake-nginx' (version 1)\n  warning: no host has "
                                         "registered plugin 'fake-automator' yet"));
  CHECK(s.WeftJson({"provider", "get", "fake"}, root).dump().find(early) != std::string::npos);  // as it warned

  // The first registration of the plugins seals both in place.
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  const std::string shown_provider = s.WeftJson({"provider", "get", "fake"}, root).dump();
  const std::string shown_service = s.WeftJson({"service", "get", "fake-nginx"}, root).dump();
  CHECK_THAT(shown_provider, Catch::Contains("\"api_token\":\"enc:v2:"));
  CHECK_THAT(shown_service, Catch::Contains("\"password\":\"enc:v2:"));
  CHECK(shown_provider.find(early) == std::string::npos);
  CHECK(shown_service.find(imported) == std::string::npos);
  // From then on a put seals at once and warns of nothing.
  RunResult again = s.Weft({"provider", "put", (tmp / "fake.json").string()}, root);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, !Catch::Contains("warning"));
}

TEST_CASE("security: a cluster name another user took is CONFLICT without its id, a misspelt field is INVALID "
          "and nothing is done, job.get leaves the task list out with tasks false",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  WithExamples(s, "acme");
  for (const std::string user : {"alice", "carol"}) {
    REQUIRE(s.Weft({"--tenant", "acme", "user", "create", user}, root).exit_code == 0);
    REQUIRE(s.Weft({"--tenant", "acme", "credentials", user, "-f", (tmp / (user + ".json")).string()}, root)
                .exit_code == 0);
  }
  zmq::context_t ctx(1);
  auto client_of = [&](const std::string& user) {
    auto cred = weft::curve::LoadCredential(tmp / (user + ".json"));
    REQUIRE(cred.ok());
    return std::make_unique<weft::client::Client>(ctx, weft::client::FromCredential(*cred, 10000));
  };
  auto alice = client_of("alice"), carol = client_of("carol");
  auto raw = [](weft::client::Client& c, const std::string& op, const json& body) {
    weft::wire::Request req;
    req.op = op;
    req.body = body;
    auto r = c.CallRaw(req);
    REQUIRE(r.ok());
    return *r;
  };
  const json create = {{"name", "shared"}, {"template", "web-fake"}, {"size", 3}};
  weft::wire::Reply made = raw(*alice, "cluster.create", create);
  INFO(made.error.message);
  REQUIRE(made.ok);
  const std::string id = made.body["cluster"]["id"];
  auto clusters = [&](weft::client::Client& c) { return raw(c, "cluster.list", json::object()).body["clusters"].size(); };

  // carol cannot see alice's cluster: the refusal says the name is taken, without its id, status or advice to delete.
  weft::wire::Reply taken = raw(*carol, "cluster.create", create);
  CHECK_FALSE(taken.ok);
  CHECK(taken.error.code == weft::Code::kConflict);
  CHECK_THAT(taken.error.message, Catch::Contains("cluster name 'shared' is taken by a cluster you cannot see"));
  CHECK_THAT(taken.error.message, !Catch::Contains(id) && !Catch::Contains("pending") && !Catch::Contains("delete"));
  CHECK(taken.error.details == json({{"name", "shared"}, {"visible", false}}));
  CHECK(raw(*carol, "cluster.get", {{"cluster", "shared"}}).error.code == weft::Code::kNotFound);
  // alice, who can, is told which cluster it is (what to cluster.get after a lost reply).
  weft::wire::Reply again = raw(*alice, "cluster.create", create);
  CHECK(again.error.code == weft::Code::kConflict);
  CHECK_THAT(again.error.message, Catch::Contains("cluster 'shared' already exists (id " + id));
  CHECK(again.error.details ==
        json({{"name", "shared"}, {"cluster_id", id}, {"status", "pending"}, {"visible", true}}));

  // Misspelt fields are refused before anything happens, naming the field meant.
  weft::wire::Reply r = raw(*alice, "cluster.delete", {{"cluster", "shared"}, {"dryrun", true}});
  CHECK(r.error.code == weft::Code::kInvalid);
  CHECK(r.error.message == "\"dryrun\" is not a field of cluster.delete; did you mean \"dry_run\"?");
  CHECK(r.error.details["known_fields"] == json({"cluster", "dry_run", "keep_on_failure", "summary"}));
  r = raw(*alice, "cluster.create", {{"name", "x1"}, {"template", "web-fake"}, {"size", 3}, {"dryRun", true}});
  CHECK(r.error.code == weft::Code::kInvalid);
  CHECK(r.error.details["did_you_mean"] == "dry_run");
  r = raw(*alice, "cluster.create", {{"name", "x2"}, {"template", "web-fake"}, {"size", 3}, {"colour", "red"}});
  CHECK(r.error.code == weft::Code::kInvalid);
  CHECK_THAT(r.error.message, Catch::StartsWith("\"colour\" is not a field of cluster.create; its fields are "));
  r = raw(*alice, "job.list", {{"clusterr", "shared"}});
  CHECK(r.error.code == weft::Code::kInvalid);
  CHECK(r.error.details["did_you_mean"] == "cluster");
  r = raw(*alice, "cluster.list", {{"owner", "alice"}});  // cluster.list has no owner filter: refused, not ignored
  CHECK(r.error.code == weft::Code::kInvalid);
  CHECK(r.error.details["known_fields"] == json({"after", "all", "limit"}));
  CHECK(clusters(*alice) == 1);
  json still = raw(*alice, "cluster.get", {{"cluster", "shared"}}).body["cluster"];
  CHECK(still["status"] == "pending");
  CHECK(still["jobs"].size() == 1);  // only the create: no delete job was started

  // job.get with "tasks": false has the progress without the task list.
  const json full = raw(*alice, "job.get", {{"job", still["latest_job"]}}).body["job"];
  REQUIRE(full["tasks"].size() > 3);
  weft::wire::Reply brief = raw(*alice, "job.get", {{"job", still["latest_job"]}, {"tasks", false}, {"details", true}});
  INFO(brief.error.message);
  REQUIRE(brief.ok);
  CHECK_FALSE(brief.body["job"].contains("tasks"));
  CHECK(brief.body["job"]["progress"] == full["progress"]);
  CHECK(brief.body["job"]["progress"]["total"] == full["tasks"].size());
  CHECK(brief.body["job"]["status"] == full["status"]);
  json without = full;
  without.erase("tasks");
  CHECK(brief.body["job"] == without);
}

TEST_CASE("security: a client flooding the api endpoint is rate limited, a host keeps getting tasks meanwhile",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  // A limit low enough that even a slow (sanitized, loaded) client exceeds it.
  Weftd s(ServerIn(tmp / "server", "api_rate_per_s = 50\napi_burst = 50\n"));
  Host host(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n"));
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  auto admin = weft::curve::LoadCredential(s.superadmin());
  REQUIRE(admin.ok());

  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, limited{0};
  std::thread flood([&] {
    zmq::context_t ctx(1);
    weft::client::Client c(ctx, weft::client::FromCredential(*admin, 3000));
    while (!stop) {
      auto r = c.Call("server.status");
      if (r.ok()) {
        ++served;
      } else if (r.status().message().find("rate limit") != std::string::npos) {
        ++limited;
      }
    }
  });
  std::this_thread::sleep_for(500ms);

  // Meanwhile, on a connection of its own: tasks go to the host and come back.
  zmq::context_t ctx(1);
  weft::client::Client c(ctx, weft::client::FromCredential(*admin, 5000));
  const auto start = std::chrono::steady_clock::now();
  json tasks = json::array();
  for (int i = 0; i < 20; ++i)
    tasks.push_back({{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n" + std::to_string(i)}});
  auto enqueued = c.Call("debug.enqueue", {{"tasks", tasks}});
  if (!enqueued.ok()) {
    stop = true;
    flood.join();
  }
  INFO(enqueued.status().ToString());
  REQUIRE(enqueued.ok());
  for (const json& id : (*enqueued)["task_ids"]) {
    REQUIRE(WaitFor(
        [&] {
          std::this_thread::sleep_for(80ms);  // this connection stays far below the limit
          auto t = c.Call("task.get", {{"task_id", id}});
          return t.ok() && (*t)["state"] == "succeeded";
        },
        15s));
  }
  const auto took = std::chrono::steady_clock::now() - start;
  std::this_thread::sleep_for(1000ms);
  stop = true;
  flood.join();
  INFO("served " << served << ", refused " << limited);
  CHECK(limited > 0);
  CHECK(took < 10s);
  CHECK(host.process().running());
  CHECK(Count(s.Log(), "exceeds 50 requests/s") == 1);
}

TEST_CASE("security: the superadmin cannot act in a tenant that does not exist, a tenant's own users are unaffected",
          "[security][tenant]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  const fs::path provider = fs::path(WEFT_SOURCE_DIR) / "examples/catalog/providers/fake.json";
  for (const std::string tenant : {"nosuch", "a b", "../../x"}) {
    INFO("tenant " << tenant);
    RunResult r = s.Weft({"--tenant", tenant, "provider", "put", provider.string()}, root);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("tenant '" + tenant + "' does not exist (weft tenant list shows the tenants)"));
    r = s.Weft({"--tenant", tenant, "catalog", "import", (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string()}, root);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("does not exist (weft tenant list shows the tenants)"));
  }
  CHECK(CountRows(s, "SELECT COUNT(*) FROM catalog_entities") == 0);
  json tenants = s.WeftJson({"tenant", "list"}, root);
  REQUIRE(tenants["tenants"].size() == 1);
  CHECK(tenants["tenants"][0]["name"] == "default");

  // The default tenant and a created tenant's admin work as before.
  CHECK(s.Weft({"provider", "put", provider.string()}, root).exit_code == 0);
  REQUIRE(s.Weft({"tenant", "create", "acme"}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "bob", "--role", "admin"}, root).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "bob", "-f", (tmp / "bob.json").string()}, root).exit_code == 0);
  CHECK(s.Weft({"provider", "put", provider.string()}, tmp / "bob.json").exit_code == 0);
  CHECK(s.WeftJson({"provider", "list"}, tmp / "bob.json")["entities"].size() == 1);
}

namespace {

// Opens one connection after another to `endpoint` with `credential`'s keys
// (each as soon as weftd listens: reconnecting every millisecond) and counts
// how each handshake ended, until stopped.
class Hammer {
 public:
  Hammer(const std::string& endpoint, const weft::curve::Credential& credential, zmq::socket_type type)
      : thread_([this, endpoint, credential, type] { Run(endpoint, credential, type); }) {}
  ~Hammer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int accepted() const { return accepted_; }
  int refused() const { return refused_; }

 private:
  void Run(const std::string& endpoint, const weft::curve::Credential& credential, zmq::socket_type type) {
    zmq::context_t ctx(1);
    for (int n = 0; !stop_; ++n) {
      const std::string address = "inproc://hammer-" + std::to_string(n);
      zmq::socket_t monitor(ctx, zmq::socket_type::pair);
      monitor.set(zmq::sockopt::linger, 0);
      {
        zmq::socket_t socket(ctx, type);
        socket.set(zmq::sockopt::linger, 0);
        socket.set(zmq::sockopt::reconnect_ivl, 1);
        weft::curve::SetClientKeys(socket, credential.server_key, credential.keys);
        if (zmq_socket_monitor(socket.handle(), address.c_str(),
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                   ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
          ++refused_;  // (not on the test's thread: no REQUIRE) the case fails on it
          return;
        }
        monitor.connect(address);
        if (type == zmq::socket_type::sub) socket.set(zmq::sockopt::subscribe, "");
        socket.connect(endpoint);
        while (!stop_) {
          zmq::message_t head;
          if (!monitor.recv(head, zmq::recv_flags::dontwait)) {
            std::this_thread::sleep_for(1ms);
            continue;
          }
          zmq::message_t address_frame;
          if (head.more()) (void)monitor.recv(address_frame);
          std::uint16_t event = 0;
          std::memcpy(&event, head.data(), sizeof event);
          (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ? accepted_ : refused_)++;
          break;
        }
      }
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0}, refused_{0};
  std::thread thread_;
};

// A stand-in on weftd's events endpoint while weftd is down: weftd's own key
// pair, and a ZAP handler that refuses every key (what weftd's handler does to
// a key it does not know).
class RefusingEndpoint {
 public:
  RefusingEndpoint(const std::string& endpoint, const fs::path& server_keys) : ctx_(1) {
    auto keys = weft::curve::LoadKeyFile(server_keys);
    REQUIRE(keys.ok());
    zap_ = zmq::socket_t(ctx_, zmq::socket_type::rep);
    zap_.set(zmq::sockopt::linger, 0);
    zap_.bind("inproc://zeromq.zap.01");
    pub_ = zmq::socket_t(ctx_, zmq::socket_type::pub);
    pub_.set(zmq::sockopt::linger, 0);
    weft::curve::SetServerKey(pub_, keys->secret_key, "events");
    pub_.bind(endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~RefusingEndpoint() {
    stop_ = true;
    thread_.join();
    pub_.close();
    zap_.close();
  }
  int refused() const { return refused_; }

 private:
  void Run() {
    while (!stop_) {
      zmq::pollitem_t item{zap_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) <= 0) continue;
      std::vector<zmq::message_t> frames;
      do {
        zmq::message_t part;
        (void)zap_.recv(part);
        frames.push_back(std::move(part));
      } while (frames.back().more());
      const std::vector<std::string> reply = {"1.0", frames.size() > 1 ? frames[1].to_string() : "", "400",
                                              "refused by the test", "", ""};
      for (std::size_t i = 0; i < reply.size(); ++i)
        (void)zap_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      ++refused_;
    }
  }

  zmq::context_t ctx_;
  zmq::socket_t zap_, pub_;
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("security: while weftd starts, a known key's handshake waits for the keys to load, never refused as "
          "unknown",
          "[security][restart]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path alice = MakeUser(s, tmp.path(), "default", "alice", "user");
  auto credential = weft::curve::LoadCredential(alice);
  REQUIRE(credential.ok());
  for (int round = 1; round <= 3; ++round) {
    INFO("restart " << round);
    s.Stop();
    // Connecting before weftd is up: each handshake starts the moment weftd listens.
    Hammer api(s.api(), *credential, zmq::socket_type::dealer);
    Hammer events(s.events(), *credential, zmq::socket_type::sub);
    REQUIRE(s.Start().ok());
    REQUIRE(WaitFor([&] { return api.accepted() > 0 && events.accepted() > 0; }, 10s));
    std::this_thread::sleep_for(100ms);
    api.Stop();
    events.Stop();
    INFO(Tail(s.Log(), 3000));
    CHECK(api.refused() == 0);
    CHECK(events.refused() == 0);
    CHECK(s.Log().find("refused key") == std::string::npos);
  }
}

TEST_CASE("security: weft events goes on after each restart of weftd, also after a handshake was refused meanwhile",
          "[security][restart]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  WithExamples(s, "");
  Process events = s.Background("events", {"-o", "json", "events"}, root);
  REQUIRE(WaitFor([&] { return s.Err("events").find("following weftd's events") != std::string::npos; }, 20s));
  // A job's events reach `weft events`: its create job, aborted.
  auto job_seen = [&](const std::string& name) {
    const json created = s.WeftJson({"cluster", "create", name, "--template", "web-fake", "--size", "3"}, root);
    const std::string job = created["job"]["id"];
    REQUIRE(s.Weft({"job", "abort", job}, root).exit_code == 0);
    const bool seen = WaitFor(
        [&] { return s.Out("events").find("\"job_id\":\"" + job + "\"") != std::string::npos; }, 20s);
    INFO(s.Out("events") << s.Err("events") << Tail(s.Log(), 3000));
    CHECK(seen);
  };
  job_seen("r0");
  for (int round = 1; round <= 3; ++round) {
    INFO("restart " << round);
    s.Stop();
    REQUIRE(WaitFor([&] { return Count(s.Err("events"), "went away") == round; }, 20s));
    if (round != 2) {
      // weftd's events endpoint refuses the key for a while (as an empty key set at start did).
      RefusingEndpoint refusing(s.events(), s.data() / "keys" / "server.json");
      REQUIRE(WaitFor([&] { return refusing.refused() >= 2; }, 20s));
    }
    REQUIRE(s.Start().ok());
    const bool back = WaitFor([&] { return Count(s.Err("events"), "reconnected") == round; }, 30s);
    INFO(s.Err("events"));
    REQUIRE(back);
    REQUIRE(events.running());
    job_seen("r" + std::to_string(round));
  }
  CHECK(Count(s.Err("events"), "went away") == 3);  // once per outage, not once per try
}

TEST_CASE("security: a store restored without keys/ stops weftd at start, naming the file and the ways out, "
          "with keys/ it starts, with --new-keys it starts with new keys",
          "[security][keys][sqlite]") {
  weft::testing::TempDir tmp("weft-sec");
  fs::path backup;
  {
    Weftd s(ServerIn(tmp / "server"));
    const fs::path provider = fs::path(WEFT_SOURCE_DIR) / "examples/catalog/providers/fake.json";
    REQUIRE(s.Weft({"provider", "put", provider.string()}, s.superadmin()).exit_code == 0);
    REQUIRE(s.Stop() == 0);
    backup = tmp / "weft.db";
    fs::copy_file(s.db(), backup);  // a clean stop leaves everything in weft.db
    fs::copy(s.data() / "keys", tmp / "keys-backup", fs::copy_options::recursive);
  }
  // Only the store file, into an empty data directory.
  Weftd restored(ServerIn(tmp / "restored"), Weftd::Deferred{});
  fs::create_directories(restored.data());
  fs::copy_file(backup, restored.db());
  weft::Status started = restored.Start();
  INFO(restored.Log());
  REQUIRE_FALSE(started.ok());
  CHECK_THAT(restored.Log(), Catch::Contains((restored.data() / "keys" / "secrets.key").string() + " and " +
                                             (restored.data() / "keys" / "server.json").string() + " are missing") &&
                                 Catch::Contains("Restore " + (restored.data() / "keys").string()) &&
                                 Catch::Contains("--new-keys"));
  // Nothing was made in their place.
  CHECK_FALSE(fs::exists(restored.data() / "keys" / "secrets.key"));
  CHECK_FALSE(fs::exists(restored.data() / "keys" / "server.json"));
  CHECK_FALSE(fs::exists(restored.superadmin()));

  // --new-keys: it starts, and says what that costs.
  {
    Process forced(BuildPath("bin/weftd"), {"--config", restored.Path("weftd.toml").string(), "--new-keys"},
                   {.env = {}, .stdout_path = tmp / "forced.log", .stderr_path = tmp / "forced.log", .cwd = {},
                    .die_with_parent = false, .own_process_group = false});
    const bool up = WaitFor([&] { return fs::exists(restored.data() / "endpoints.json"); }, 30s);
    INFO(ReadFile(tmp / "forced.log"));
    CHECK(up);
    CHECK_THAT(ReadFile(tmp / "forced.log"), Catch::Contains("starting with new keys (--new-keys)"));
    CHECK(forced.Stop() == 0);
    CHECK(fs::exists(restored.data() / "keys" / "secrets.key"));
  }

  // The keys restored with the store: it starts, and the sealed values open as before.
  Weftd again(ServerIn(tmp / "again"), Weftd::Deferred{});
  fs::create_directories(again.data());
  fs::copy_file(backup, again.db());
  fs::copy(tmp / "keys-backup", again.data() / "keys", fs::copy_options::recursive);
  weft::Status ok = again.Start();
  INFO(again.Log());
  REQUIRE(ok.ok());
  CHECK(again.WeftJson({"provider", "list"}, again.superadmin())["entities"].size() == 1);
}

TEST_CASE("security: a tenant with clusters that are not deleted cannot be deleted, one without can",
          "[security][tenant]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  WithExamples(s, "acme");
  // (No host runs their tasks: they stay live.)
  for (const std::string name : {"c1", "c2"})
    REQUIRE(s.Weft({"--tenant", "acme", "cluster", "create", name, "--template", "web-fake", "--size", "3"}, root)
                .exit_code == 0);
  RunResult r = s.Weft({"tenant", "delete", "acme"}, root);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("tenant 'acme' still has 2 live clusters (c1, c2)"));
  // Nothing was deleted: the clusters still answer in their tenant.
  CHECK(s.WeftJson({"--tenant", "acme", "cluster", "get", "c1"}, root)["cluster"]["name"] == "c1");
  CHECK(s.WeftJson({"tenant", "list"}, root)["tenants"].size() == 2);
  // A tenant without clusters goes as before.
  REQUIRE(s.Weft({"tenant", "create", "empty"}, root).exit_code == 0);
  r = s.Weft({"tenant", "delete", "empty"}, root);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(s.WeftJson({"tenant", "list"}, root)["tenants"].size() == 2);
}

TEST_CASE("security: the check a client makes of an endpoint after its key got no answer is logged as what it is, "
          "not as a stranger's key",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  auto base = weft::curve::LoadCredential(s.superadmin());
  REQUIRE(base.ok());
  weft::curve::Credential stranger = *base;
  stranger.keys = *weft::curve::Generate();
  REQUIRE(weft::curve::SaveCredential(tmp / "stranger.json", stranger).ok());
  RunResult r = s.Weft({"--timeout", "800", "status"}, tmp / "stranger.json");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("may not know the key"));
  const bool said = WaitFor(
      [&] { return s.Log().find("checked what the api endpoint is, with weft's probe key") != std::string::npos; }, 5s);
  // Past the 5 s in which other refused keys would be counted in one line.
  std::this_thread::sleep_for(5500ms);
  INFO(s.Log());
  CHECK(said);
  CHECK(Count(s.Log(), "refused key ") == 1);  // the stranger's own key only
  CHECK(Count(s.Log(), "refused key " + weft::curve::ShortKey(stranger.keys.public_key)) == 1);
  CHECK(s.Log().find("keys refused at the handshake") == std::string::npos);

  // The same check still tells the provisioner endpoint for what it is.
  RunResult wrong = s.Weft({"--server", s.provisioner(), "--timeout", "800", "status"}, s.superadmin());
  CHECK(wrong.exit_code == 1);
  CHECK_THAT(wrong.err, Catch::Contains("provisioner"));
}

TEST_CASE("security: a revoked host backs off its refused calls, says what to do, and enrolls with a new enroll_token "
          "at its restart",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  HostOptions options = HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + Token(s) + "\"\n");
  Host h1(options);
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));
  auto old = weft::curve::LoadCredential(h1.credential());
  REQUIRE(old.ok());
  const std::string old_fingerprint = weft::curve::Fingerprint(old->keys.public_key);

  // Revoked while it runs: its runners' takes are refused, and they wait 1, 2, 4 s ... between tries
  // (one line per change), not 500 ms for ever.
  REQUIRE(s.Weft({"host", "revoke", "h1"}, s.superadmin()).exit_code == 0);
  const bool backed_off = WaitFor([&] { return h1.Log().find("next try in 4 s") != std::string::npos; }, 30s);
  INFO(h1.Log());
  REQUIRE(backed_off);
  CHECK(h1.Log().find("failures so far") == std::string::npos);
  CHECK(Count(h1.Log(), "task.take from " + s.provisioner() + ": ") <= 3 * 2);  // two runners at most

  // Restarted with the token it already spent: refused at the handshake; the log names the key and says that
  // a new token is needed and how, and the tries back off.
  h1.Stop();
  h1.Start();
  const bool told = WaitFor([&] { return h1.Log().find("next try in 2 s") != std::string::npos; }, 30s);
  INFO(h1.Log());
  REQUIRE(told);
  CHECK_THAT(h1.Log(), Catch::Contains("weftd refuses this host's key") && Catch::Contains(old_fingerprint) &&
                           Catch::Contains("already spent on this key") &&
                           Catch::Contains("weft host token create"));
  CHECK_FALSE(s.HostLive("h1"));

  // A new token in its configuration and a restart: it enrolls with it, keeping the old credential aside.
  h1.Stop();
  options.extra_toml = "enroll_token = \"" + Token(s) + "\"\n";
  WriteFile(h1.config(), weft::testing::HostToml(options, h1.dir()));
  h1.Start();
  const bool live = WaitFor([&] { return s.HostLive("h1"); }, 20s);
  INFO(h1.Log());
  REQUIRE(live);
  CHECK_THAT(h1.Log(), Catch::Contains("enrolled with weftd") && Catch::Contains("the old credential is kept as"));
  auto fresh = weft::curve::LoadCredential(h1.credential());
  REQUIRE(fresh.ok());
  CHECK(fresh->keys.public_key != old->keys.public_key);
  int aside = 0;
  for (const auto& f : fs::directory_iterator(h1.credential().parent_path()))
    if (f.path().filename().string().rfind("credential.json.refused-", 0) == 0) {
      ++aside;
      auto kept = weft::curve::LoadCredential(f.path());
      REQUIRE(kept.ok());
      CHECK(kept->keys.public_key == old->keys.public_key);
    }
  CHECK(aside == 1);
  const std::int64_t id =
      s.Enqueue({{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n1"}});
  s.WaitTaskState(id, "succeeded", 30s);

  // A later restart keeps the new credential: the new token is spent on it.
  h1.Stop();
  h1.Start();
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 20s));
  CHECK(h1.Log().find("enrolled with weftd") == std::string::npos);
  CHECK(weft::curve::LoadCredential(h1.credential())->keys.public_key == fresh->keys.public_key);
}

TEST_CASE("security: a host with a wrong server_key says the handshake failed and names the key, and corrected it asks "
          "to join with the same key pair",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const std::string wrong = weft::curve::Generate()->public_key;
  HostOptions options = HostIn(tmp.path(), "h1", s.provisioner(), "server_key = \"" + wrong + "\"\n");
  Host h1(options);
  REQUIRE(WaitFor([&] { return h1.Log().find("cannot register with weftd") != std::string::npos; }, 20s));
  INFO(h1.Log());
  CHECK_THAT(h1.Log(), Catch::Contains("the CurveZMQ handshake with " + s.provisioner() + " failed") &&
                           Catch::Contains("(fingerprint " + weft::curve::Fingerprint(wrong) +
                                           ", server_key in the configuration), may be wrong") &&
                           Catch::Contains("endpoints.json"));
  CHECK_THAT(h1.Log(), !Catch::Contains("events endpoint, or another program"));
  auto made = weft::curve::LoadCredential(h1.credential());
  REQUIRE(made.ok());

  // The right key in the configuration: the stored credential's wrong one gives way, the key pair stays.
  h1.Stop();
  const std::string right = weft::curve::LoadCredential(s.superadmin())->server_key;
  options.extra_toml = "server_key = \"" + right + "\"\n";
  WriteFile(h1.config(), weft::testing::HostToml(options, h1.dir()));
  h1.Start();
  json requests;
  const bool asked = WaitFor(
      [&] {
        requests = s.WeftJson({"host", "requests"}, s.superadmin());
        return !requests["requests"].empty();
      },
      20s);
  INFO(h1.Log());
  REQUIRE(asked);
  CHECK(requests["requests"][0]["fingerprint"] == weft::curve::Fingerprint(made->keys.public_key));
  CHECK_THAT(h1.Log(), Catch::Contains("using the configured one"));
  CHECK(weft::curve::LoadCredential(h1.credential())->server_key == right);
}

TEST_CASE("security: every api op refuses a body field it does not take, and refusals carry what a program needs "
          "(a malformed job id, a quota, a running job)",
          "[security]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path root = s.superadmin();
  WithExamples(s, "acme", {"--max-clusters", "1", "--max-nodes", "5"});
  const fs::path ann = MakeUser(s, tmp.path(), "acme", "ann", "admin");
  zmq::context_t ctx(1);
  auto client_of = [&](const fs::path& file) {
    auto cred = weft::curve::LoadCredential(file);
    REQUIRE(cred.ok());
    return std::make_unique<weft::client::Client>(ctx, weft::client::FromCredential(*cred, 10000));
  };
  auto admin = client_of(ann), super = client_of(root);
  auto raw = [](weft::client::Client& c, const std::string& op, const json& body) {
    weft::wire::Request req;
    req.op = op;
    req.body = body;
    auto r = c.CallRaw(req);
    REQUIRE(r.ok());
    return *r;
  };
  // Refused before the op runs, the field meant named. Reads answered by weftd's api front thread
  // (server.status, <kind>.get, <kind>.list) are checked there too.
  struct Refused {
    weft::client::Client* who;
    std::string op;
    json body;
    std::string meant;  // "" when nothing is near
  };
  const std::vector<Refused> refused = {
      {admin.get(), "server.status", {{"verbose", true}}, ""},
      {admin.get(), "provider.get", {{"nam", "fake"}}, "name"},
      {admin.get(), "service.list", {{"with_entities", true}, {"aftr", "a"}}, "after"},
      {admin.get(), "provider.delete", {{"name", "fake"}, {"force", true}}, ""},
      {admin.get(), "catalog.check", {{"strict", true}}, ""},
      {admin.get(), "cluster.plan", {{"name", "p"}, {"template", "web-fake"}, {"sise", 3}}, "size"},
      {admin.get(), "user.create", {{"name", "bob"}, {"rol", "admin"}}, "role"},
      {admin.get(), "token.create", {{"ttlMs", 1000}}, "ttl_ms"},
      {admin.get(), "resource.delete", {{"type", "shell"}, {"name", "a.sh"}, {"verison", 1}}, "version"},
      {admin.get(), "server.capacity", {{"window", 600000}}, "window_ms"},
      {admin.get(), "audit.list", {{"usr", "ann"}}, "user"},
      {admin.get(), "host.list", {{"live", true}}, ""},
      {super.get(), "tenant.update", {{"name", "acme"}, {"max_node", 100}}, "max_nodes"},
      {super.get(), "host.token.create", {{"hostId", "h1"}}, "host_id"},
  };
  for (const Refused& r : refused) {
    INFO(r.op << " " << r.body.dump());
    weft::wire::Reply reply = raw(*r.who, r.op, r.body);
    CHECK(reply.error.code == weft::Code::kInvalid);
    CHECK(reply.error.details["op"] == r.op);
    if (r.meant.empty()) {
      CHECK_FALSE(reply.error.details.contains("did_you_mean"));
    } else {
      CHECK(reply.error.details["did_you_mean"] == r.meant);
      CHECK_THAT(reply.error.message, Catch::EndsWith("did you mean \"" + r.meant + "\"?"));
    }
  }
  CHECK(raw(*admin, "server.status", {{"verbose", true}}).error.message ==
        "\"verbose\" is not a field of server.status; it takes no fields (its body is {})");
  // Nothing was done: no user bob, acme's quota unchanged, the provider still there.
  CHECK(s.WeftJson({"--tenant", "acme", "user", "list"}, root)["users"].size() == 1);
  const json tenants = s.WeftJson({"tenant", "list"}, root)["tenants"];
  for (const json& t : tenants)
    if (t["name"] == "acme") CHECK(t["max_nodes"] == 5);
  CHECK(raw(*admin, "provider.get", {{"name", "fake"}}).ok);
  // An entity's put takes the entity's own keys: not refused (kept with a warning).
  json entity = raw(*admin, "provider.get", {{"name", "fake"}}).body["entity"];
  entity["colour"] = "red";
  weft::wire::Reply put = raw(*admin, "provider.put", entity);
  INFO(put.error.message);
  CHECK(put.ok);

  // A malformed job id is the caller's mistake (INVALID); a well-formed one that names no job is NOT_FOUND.
  for (const json& bad : {json("abc"), json("0"), json(-3), json("7x")}) {
    weft::wire::Reply r = raw(*admin, "job.get", {{"job", bad}});
    CHECK(r.error.code == weft::Code::kInvalid);
    CHECK_THAT(r.error.message, Catch::StartsWith("job must be a job id"));
  }
  weft::wire::Reply missing = raw(*admin, "job.get", {{"job", "999"}});
  CHECK(missing.error.code == weft::Code::kNotFound);
  CHECK_THAT(missing.error.message, Catch::Contains("job.list"));
  // A field named as the caller wrote it, not by an internal path.
  weft::wire::Reply typed = raw(*admin, "cluster.create", {{"name", "t"}, {"template", "web-fake"}, {"size", 3},
                                                           {"dry_run", "yes"}});
  CHECK(typed.error.code == weft::Code::kInvalid);
  CHECK_THAT(typed.error.message, Catch::StartsWith("dry_run ") && !Catch::Contains("body."));

  // Quotas: the refusal says which quota, its limit, what is used and what was asked.
  weft::wire::Reply over = raw(*admin, "cluster.create", {{"name", "big"}, {"template", "web-fake"}, {"size", 6}});
  CHECK(over.error.code == weft::Code::kDenied);
  CHECK(over.error.details ==
        json({{"tenant", "acme"}, {"quota", "max_nodes"}, {"limit", 5}, {"used", 0}, {"asked", 6}}));
  weft::wire::Reply made = raw(*admin, "cluster.create", {{"name", "c1"}, {"template", "web-fake"}, {"size", 3}});
  INFO(made.error.message);
  REQUIRE(made.ok);
  const std::string cluster_id = made.body["cluster"]["id"];
  const std::string job_id = made.body["job"]["id"];
  over = raw(*admin, "cluster.create", {{"name", "c2"}, {"template", "web-fake"}, {"size", 3}});
  CHECK(over.error.code == weft::Code::kDenied);
  CHECK(over.error.details ==
        json({{"tenant", "acme"}, {"quota", "max_clusters"}, {"limit", 1}, {"used", 1}, {"asked", 1}}));

  // A cluster whose job runs (no host takes its tasks): the refusal names the job and its operation.
  weft::wire::Reply busy = raw(*admin, "cluster.scale", {{"cluster", "c1"}, {"size", 4}});
  CHECK(busy.error.code == weft::Code::kConflict);
  CHECK(busy.error.details == json({{"cluster_id", cluster_id}, {"job", job_id}, {"operation", "create"}}));
  CHECK_THAT(busy.error.message, Catch::Contains("has job " + job_id + " running (create)") &&
                                     Catch::Contains("job.abort"));
}

// [sqlite]: the store's files are SQLite's (with PostgreSQL there is no weft.db).
TEST_CASE("security: weftd keeps its store, resources and keys private to its user, and makes an open one private",
          "[security][sqlite]") {
  weft::testing::TempDir tmp("weft-sec");
  Weftd s(ServerIn(tmp / "server"));
  const fs::path data = s.Path("data");
  const fs::perms others = fs::perms::group_all | fs::perms::others_all;
  const auto open_to_others = [&](const std::string& name) {
    return (fs::status(data / name).permissions() & others) != fs::perms::none;
  };
  // Made private however weftd was started (the test runs it with its own umask, 022 or so).
  for (const std::string name : {"weft.db", "weft.db-wal", "resources", "keys"}) {
    INFO(name);
    CHECK_FALSE(open_to_others(name));
  }
  // endpoints.json is for every local client.
  CHECK((fs::status(data / "endpoints.json").permissions() & fs::perms::others_read) != fs::perms::none);

  // A data directory an earlier weftd left open is closed at the next start, and the log says so.
  s.Stop();
  fs::permissions(data / "weft.db", fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  fs::permissions(data / "resources", fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                                          fs::perms::others_exec,
                  fs::perm_options::add);
  REQUIRE(open_to_others("weft.db"));
  s.Restart();
  CHECK_FALSE(open_to_others("weft.db"));
  CHECK_FALSE(open_to_others("resources"));
  CHECK_THAT(s.Log(), Catch::Contains("made " + (data / "weft.db").string() + " readable by its owner only"));
}
