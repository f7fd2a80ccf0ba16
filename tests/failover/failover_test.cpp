// Several weftd on one PostgreSQL (docs/failover.md), with the real processes:
// a throwaway PostgreSQL, two weftd on it, weft-host and the clients given
// both endpoints. The leader dies (kill -9) or is paused (SIGSTOP) and the
// follower takes over; jobs finish, every task takes effect once, and an old
// leader never commits once another one has taken over.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/common/digest.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::Host;
using testing::PostgresServer;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// Short leases so that a takeover is quick; hosts heartbeat often.
std::string ServerToml(const std::string& conninfo, const std::string& node, std::int64_t lease_ms,
                       const std::string& store_extra = "") {
  return "[store]\nbackend = \"postgres\"\nconninfo = " + json(conninfo).dump() + "\n" + store_extra +
         "[leader]\nnode = \"" + node + "\"\nlease_ms = " + std::to_string(lease_ms) + "\npoll_ms = 100\n" +
         "[tasks]\nlease_ms = 4000\n"
         "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
         "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 4000\n";
}

// A throwaway PostgreSQL in `dir`/pg; fails the test when it cannot start.
std::unique_ptr<PostgresServer> StartPostgres(const TempDir& dir) {
  Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg");
  if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
  return std::move(*started);
}

// Two weftd on one throwaway PostgreSQL; `a` starts first and leads.
struct Pair {
  Pair(const std::string& name, std::int64_t lease_ms, std::string store_extra = "")
      : dir(name), store_extra(std::move(store_extra)) {
    pg = StartPostgres(dir);
    a = Start("a", lease_ms);
    REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 20s));
    // Every weftd on one database has the first one's keys (docs/failover.md).
    fs::create_directories(dir.path() / "b" / "data");
    fs::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
    b = Start("b", lease_ms);
    REQUIRE(WaitFor([&] { return Role(*b) == "follower"; }, 20s));
  }

  std::unique_ptr<Weftd> Start(const std::string& node, std::int64_t lease_ms) {
    fs::create_directories(dir.path() / node);
    return std::make_unique<Weftd>(testing::WeftdOptions{.dir = dir.path() / node,
                                                         .name = node,
                                                         .extra_toml = ServerToml(pg->conninfo(), node, lease_ms, store_extra),
                                                         .cli_timeout = 60s,
                                                         .store = "sqlite"});  // its [store] says postgres
  }

  // What `w` says it is ("leader", "follower"; "" when it does not answer).
  static std::string Role(Weftd& w) {
    Result<json> s = w.TryCall("server.status", json::object(), 2000);
    if (!s.ok() || !s->contains("leadership")) return "";
    return (*s)["leadership"].value("role", std::string());
  }

  std::string Apis() const { return a->api() + "," + b->api(); }
  std::string Provisioners() const { return a->provisioner() + "," + b->provisioner(); }
  std::string Logs() const { return "--- a ---\n" + Tail(a->AllLogs(), 4000) + "--- b ---\n" + Tail(b->AllLogs(), 4000); }

  TempDir dir;
  std::string store_extra;  // more lines of [store]
  std::unique_ptr<PostgresServer> pg;
  std::unique_ptr<Weftd> a, b;
};

// The lines the fake plugins appended: how many times each task took effect.
std::map<std::int64_t, int> EffectsByTask(const fs::path& file) {
  std::map<std::int64_t, int> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::int64_t task = 0;
    if (fields >> task) ++out[task];
  }
  return out;
}

// job.get through `client` until the job ends (a takeover may make some calls fail meanwhile).
json WaitJobEnds(client::Client& client, const std::string& job, std::chrono::seconds timeout) {
  json last;
  WaitFor(
      [&] {
        Result<json> r = client.Call("job.get", {{"job", job}});
        if (!r.ok()) return false;
        last = (*r)["job"];
        const std::string status = last.value("status", std::string());
        return status != "running" && status != "failing";
      },
      timeout);
  return last;
}

TEST_CASE("failover: kill -9 of the leader during a 200-task job: the follower takes over, the job finishes, "
          "every task takes effect once",
          "[failover][integration]") {
  Pair pair("failover-kill", 3000);
  const fs::path effects = pair.dir.path() / "effects.log";
  CatalogDir catalog(pair.dir.path() / "catalog");
  catalog.PatchActions("", "", {{"latency_ms", 40}, {"effects_file", effects.string()}});
  catalog.PatchProvider({{"latency_ms", 40}, {"effects_file", effects.string()}});
  catalog.DeriveTemplate("web-big", {{"constraints", {{"size", {{"max", 100}}}}}});
  testing::RunResult imported = pair.a->Weft({"catalog", "import", catalog.path().string()});
  INFO(imported.out << imported.err);
  REQUIRE(imported.exit_code == 0);

  // The host and the client know both weftd and find the leader themselves.
  Host host({.dir = pair.dir.path(), .id = "h1", .server = pair.Provisioners(), .capacity = 8, .workers = 2});
  zmq::context_t ctx;
  client::Client api(ctx, {.endpoint = pair.Apis(), .timeout_ms = 3000});
  REQUIRE(WaitFor([&] { return pair.a->HostLive("h1"); }, 20s));
  Result<json> created = api.Call("cluster.create", {{"name", "big"}, {"template", "web-big"}, {"size", 30}});
  INFO(pair.Logs() << created.status().message());
  REQUIRE(created.ok());
  const std::string job = (*created)["job"]["id"].get<std::string>();

  // The leader dies when about a third of the tasks are done.
  std::int64_t total = 0;
  REQUIRE(WaitFor(
      [&] {
        Result<json> r = api.Call("job.get", {{"job", job}});
        if (!r.ok()) return false;
        const json& progress = (*r)["job"]["progress"];
        total = progress.value("total", std::int64_t{0});
        return progress.value("succeeded", std::int64_t{0}) * 3 >= total;
      },
      60s));
  REQUIRE(total >= 200);
  pair.a->Kill();

  const json ended = WaitJobEnds(api, job, 90s);
  INFO(pair.Logs() << "--- host ---\n" << Tail(host.Log(), 4000));
  REQUIRE(ended.value("status", std::string()) == "succeeded");
  CHECK(Pair::Role(*pair.b) == "leader");

  // Every task ran to its effect exactly once: none lost, none repeated.
  Result<json> details = api.Call("job.get", {{"job", job}, {"details", true}});
  REQUIRE(details.ok());
  const std::map<std::int64_t, int> counted = EffectsByTask(effects);
  int tasks_with_effects = 0;
  for (const json& t : (*details)["job"]["tasks"]) {
    // JOIN runs no plugin; BOOTSTRAP has no service, so no fields to ask for the record.
    if (t["action"] == "JOIN" || t["action"] == "BOOTSTRAP") continue;
    INFO("task " << t.dump());
    CHECK(t["state"] == "succeeded");
    const json& id = t["id"];
    auto it = counted.find(id.is_string() ? std::stoll(id.get<std::string>()) : id.get<std::int64_t>());
    CHECK(it != counted.end());
    if (it != counted.end()) CHECK(it->second == 1);
    ++tasks_with_effects;
  }
  CHECK(tasks_with_effects >= 150);

  // The CLI, given both endpoints, finds the new leader, which names itself and the epoch.
  testing::RunResult status = testing::Run(testing::BuildPath("bin/weft"), {"--server", pair.Apis(), "status"});
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("b (leader)") != std::string::npos);
  CHECK(status.out.find("epoch 2") != std::string::npos);
}

TEST_CASE("failover: a paused leader (SIGSTOP) is taken over and, resumed, commits nothing",
          "[failover][integration]") {
  Pair pair("failover-pause", 1000);
  zmq::context_t ctx;
  // A client of the old leader only, connected before the pause: its request waits in a's socket.
  client::Client old_leader(ctx, {.endpoint = pair.a->api(), .timeout_ms = 20000});
  REQUIRE(old_leader.Call("tenant.create", {{"name", "before"}}).ok());

  REQUIRE(kill(pair.a->pid(), SIGSTOP) == 0);
  INFO(pair.Logs());
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.b) == "leader"; }, 20s));
  client::Client new_leader(ctx, {.endpoint = pair.b->api(), .timeout_ms = 5000});
  REQUIRE(new_leader.Call("tenant.create", {{"name", "during"}}).ok());

  // Sent to the paused leader, answered once it runs again: refused by the
  // fencing check, or sent on to the new leader; never committed by a.
  Result<json> late = Status::Unavailable("not sent");
  std::thread sender([&] { late = old_leader.Call("tenant.create", {{"name", "after"}}); });
  std::this_thread::sleep_for(300ms);
  REQUIRE(kill(pair.a->pid(), SIGCONT) == 0);
  sender.join();
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.a) == "follower"; }, 20s));

  Result<std::string> after =
      pair.pg->Query("SELECT count(*) FROM tenants WHERE name = 'after'", "postgres");
  REQUIRE(after.ok());
  if (late.ok()) {
    // The follower's NOT_LEADER sent it on to b, which committed it.
    CHECK(old_leader.endpoint() == pair.b->api());
    CHECK(*after == "1");
  } else {
    CHECK(*after == "0");
  }
  CHECK(pair.a->Log().find("no longer the leader") != std::string::npos);
  Result<std::string> epoch = pair.pg->Query("SELECT epoch FROM weft_leader", "postgres");
  REQUIRE(epoch.ok());
  CHECK(*epoch == "2");

  // The CLI, given both endpoints: the old leader, a follower now, names the new one;
  // a write sent to it goes on to the new leader.
  testing::RunResult status = testing::Run(testing::BuildPath("bin/weft"), {"--server", pair.Apis(), "status"});
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("a (follower)") != std::string::npos);
  CHECK(status.out.find("b at " + pair.b->api() + ", epoch 2") != std::string::npos);
  testing::RunResult created =
      testing::Run(testing::BuildPath("bin/weft"), {"--server", pair.Apis(), "tenant", "create", "via-cli"});
  INFO(created.out << created.err);
  CHECK(created.exit_code == 0);
}

TEST_CASE("failover: a leader whose epoch was taken over cannot commit a write", "[failover][integration]") {
  // A long lease: the leader does not renew (and notice) for a while, so the
  // write below meets the fencing check in its own transaction.
  Pair pair("failover-fence", 60000);
  zmq::context_t ctx;
  client::Client leader(ctx, {.endpoint = pair.a->api(), .timeout_ms = 10000});
  REQUIRE(leader.Call("tenant.create", {{"name", "before"}}).ok());
  // What a takeover does to the row, done behind the leader's back.
  REQUIRE(pair.pg->Exec("UPDATE weft_leader SET epoch = epoch + 1", "postgres").ok());

  Result<json> refused = leader.Call("tenant.create", {{"name", "fenced"}});
  INFO(pair.Logs());
  REQUIRE(!refused.ok());
  // The write meets the fence and says so, unless a commit of weftd's own
  // (its housekeeping) met it first: then weftd has stepped down already and
  // answers as a follower. Either way nothing is written.
  const std::string& why = refused.status().message();
  CHECK((why.find("took over") != std::string::npos || why.find("is a follower") != std::string::npos));
  Result<std::string> fenced = pair.pg->Query("SELECT count(*) FROM tenants WHERE name = 'fenced'", "postgres");
  REQUIRE(fenced.ok());
  CHECK(*fenced == "0");
  // It stepped down; a weftd (either: the lock is free again) takes over with the next epoch.
  CHECK(WaitFor([&] { return pair.a->Log().find("no longer the leader") != std::string::npos; }, 10s));
  REQUIRE(WaitFor(
      [&] {
        Result<std::string> epoch = pair.pg->Query("SELECT epoch FROM weft_leader", "postgres");
        return epoch.ok() && *epoch == "3";
      },
      10s));
  client::Client both(ctx, {.endpoint = pair.Apis(), .timeout_ms = 5000});
  CHECK(both.Call("tenant.create", {{"name", "later"}}).ok());
}

// cluster.list is answered from summaries the leader keeps in memory; a weftd
// that leads again after another one led meanwhile must not list what it kept.
TEST_CASE("failover: a weftd that leads again lists the clusters created while another one led",
          "[failover][integration]") {
  Pair pair("failover-list", 1000);
  CatalogDir catalog(pair.dir.path() / "catalog");
  testing::RunResult imported = pair.a->Weft({"catalog", "import", catalog.path().string()});
  INFO(imported.out << imported.err);
  REQUIRE(imported.exit_code == 0);
  zmq::context_t ctx;
  client::Client to_a(ctx, {.endpoint = pair.a->api(), .timeout_ms = 20000});
  // No host runs the tasks: the clusters stay pending, which is enough to be listed.
  REQUIRE(to_a.Call("cluster.create", {{"name", "first"}, {"template", "web-fake"}, {"size", 3}}).ok());
  Result<json> listed = to_a.Call("cluster.list", json::object());
  REQUIRE(listed.ok());
  REQUIRE((*listed)["clusters"].size() == 1);

  // b leads while a is paused, and creates a cluster; a comes back as a follower.
  REQUIRE(kill(pair.a->pid(), SIGSTOP) == 0);
  INFO(pair.Logs());
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.b) == "leader"; }, 20s));
  client::Client to_b(ctx, {.endpoint = pair.b->api(), .timeout_ms = 5000});
  REQUIRE(to_b.Call("cluster.create", {{"name", "second"}, {"template", "web-fake"}, {"size", 3}}).ok());
  REQUIRE(kill(pair.a->pid(), SIGCONT) == 0);
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.a) == "follower"; }, 20s));

  // b dies; a leads again and lists both clusters.
  pair.b->Kill();
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.a) == "leader"; }, 20s));
  client::Client again(ctx, {.endpoint = pair.a->api(), .timeout_ms = 5000});
  listed = again.Call("cluster.list", json::object());
  REQUIRE(listed.ok());
  std::set<std::string> names;
  for (const json& c : (*listed)["clusters"]) names.insert(c.value("name", std::string()));
  CHECK(names == std::set<std::string>{"first", "second"});
}

// PostgreSQL's sessions stop answering (SIGSTOP: a frozen primary) while
// their sockets stay open, which TCP never notices: weftd's calls on them get
// no answer. Each weftd gives up on a call after its deadline (store.
// call_timeout_ms, the lease for the election), closes the connection and
// makes a new one, so it answers again instead of hanging until the sessions
// resume; and once they resume everything works.
TEST_CASE("failover: weftd whose PostgreSQL sessions stop answering gives up on them and answers",
          "[failover][integration]") {
  Pair pair("failover-frozen", 2000, "call_timeout_ms = 2000\n");
  zmq::context_t ctx;
  client::Client both(ctx, {.endpoint = pair.Apis(), .timeout_ms = 20000});
  REQUIRE(both.Call("tenant.create", {{"name", "before"}}).ok());

  // Every session weftd has, stopped: the ones made after this answer.
  Result<std::string> pids = pair.pg->Query(
      "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type = 'client backend' "
      "AND pid <> pg_backend_pid()",
      "postgres");
  REQUIRE(pids.ok());
  std::vector<pid_t> stopped;
  std::istringstream list(*pids);
  for (pid_t pid = 0; list >> pid;) {
    REQUIRE(kill(pid, SIGSTOP) == 0);
    stopped.push_back(pid);
  }
  REQUIRE(stopped.size() >= 4);  // two weftd, each with its store and election connections at least
  // A write that now waits on a stopped session.
  Result<json> during = Status::Unavailable("not sent");
  std::thread writer([&] {
    client::Client to_a(ctx, {.endpoint = pair.a->api(), .timeout_ms = 30000});
    during = to_a.Call("tenant.create", {{"name", "during"}});
  });
  const auto resume = [&] {
    for (pid_t pid : stopped) kill(pid, SIGCONT);
  };
  const bool a_answers = WaitFor([&] { return pair.a->TryCall("server.status", json::object(), 2000).ok(); }, 20s);
  const bool b_answers = WaitFor([&] { return pair.b->TryCall("server.status", json::object(), 2000).ok(); }, 20s);
  writer.join();
  const bool said = pair.a->Log().find("did not answer within") != std::string::npos ||
                    pair.b->Log().find("did not answer within") != std::string::npos;
  resume();
  INFO(pair.Logs());
  CHECK(a_answers);
  CHECK(b_answers);
  CHECK(said);
  // Resumed: a leader serves writes again.
  CHECK(WaitFor([&] { return both.Call("tenant.create", {{"name", "after"}}).ok(); }, 30s));
}

// Three weftd started on an empty database each made keys of their own, and
// at the first failover no host or client could connect: the keys of the
// first one are recorded in the database and a weftd with others refuses to
// start, saying what to do.
TEST_CASE("failover: a weftd whose keys differ from the first one's refuses to start, with the same keys it starts",
          "[failover][integration]") {
  TempDir dir("failover-keys");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  auto options = [&](const std::string& node) {
    fs::create_directories(dir.path() / node);
    return testing::WeftdOptions{.dir = dir.path() / node,
                                 .name = node,
                                 .curve = true,
                                 .extra_toml = ServerToml(pg->conninfo(), node, 2000),
                                 .start_timeout = 30s,
                                 .store = "sqlite"};  // its [store] says postgres
  };
  Weftd a(options("a"));
  REQUIRE(WaitFor([&] { return Pair::Role(a) == "leader"; }, 20s));

  // b has keys/ of its own (as when several weftd start at once on an empty
  // database, each making its own): refused, and told to copy a's.
  {
    Weftd other({.dir = dir.path() / "other", .name = "other", .curve = true, .store = "sqlite"});
    other.Kill();
    fs::create_directories(dir.path() / "b" / "data");
    fs::copy(other.data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  }
  std::string refusal;
  try {
    Weftd b(options("b"));
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  INFO(refusal);
  CHECK(refusal.find("cannot join the weftd on this database") != std::string::npos);
  CHECK(refusal.find("copy the first weftd's keys/ directory") != std::string::npos);
  CHECK(refusal.find("recorded by 'a'") != std::string::npos);

  // With a's keys/ it starts, follows, and serves once it leads.
  fs::remove_all(dir.path() / "b" / "data" / "keys");
  fs::copy(a.data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  Weftd b(options("b"));
  // Its log says it follows.
  REQUIRE(WaitFor([&] { return b.Log().find("following: api") != std::string::npos; }, 20s));
  a.Kill();
  REQUIRE(WaitFor([&] { return Pair::Role(b) == "leader"; }, 20s));
  Result<json> created = b.TryCall("tenant.create", {{"name", "after"}});
  INFO(created.status().message());
  CHECK(created.ok());
}

// Resources are kept in the database (the default with PostgreSQL): the
// weftd that takes over serves what was uploaded and synced on the old leader,
// though each weftd has a data directory of its own.
TEST_CASE("failover: a resource uploaded and synced on the leader is served by the new leader after kill -9",
          "[failover][integration]") {
  Pair pair("failover-resources", 2000);
  // More than one row of the store's content (1 MiB each), bytes of every value.
  std::string content(1536 * 1024 + 11, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 7 + i / 4093) & 0xFF);
  const std::string digest = digest::Sha256Of(content).value();
  const fs::path file = pair.dir.path() / "tool.tar";
  testing::WriteFile(file, content);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"resource", "upload", "shell", "tool.tar", file.string()},
        std::vector<std::string>{"resource", "stage", "shell", "tool.tar", "1"},
        std::vector<std::string>{"resource", "sync"}}) {
    testing::RunResult r = pair.a->Weft(args);
    INFO(args[1] << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }

  pair.a->Kill();
  INFO(pair.Logs());
  REQUIRE(WaitFor([&] { return Pair::Role(*pair.b) == "leader"; }, 20s));

  // What a host asks of the new leader: the active versions, then the content.
  zmq::context_t ctx;
  client::Client prov(ctx, {.endpoint = pair.b->provisioner(), .timeout_ms = 10000});
  Result<json> active = prov.Call("resource.active", {{"tenant", "default"}, {"types", {"shell"}}});
  INFO(active.status().message());
  REQUIRE(active.ok());
  REQUIRE((*active)["resources"].size() == 1);
  CHECK((*active)["resources"][0]["name"] == "tool.tar");
  CHECK((*active)["resources"][0]["version"] == 1);
  CHECK((*active)["resources"][0]["digest"] == digest);
  CHECK((*active)["resources"][0]["size"] == content.size());
  std::string fetched;
  bool eof = false;
  while (!eof) {
    wire::Request request;
    request.op = "resource.fetch";
    request.body = {{"tenant", "default"}, {"type", "shell"}, {"name", "tool.tar"}, {"version", 1},
                    {"offset", fetched.size()}, {"max_bytes", 700 * 1024}};
    Result<wire::Reply> chunk = prov.CallRaw(request);
    REQUIRE(chunk.ok());
    INFO(chunk->error.message);
    REQUIRE(chunk->ok);
    REQUIRE(chunk->blobs.size() == 1);
    CHECK(chunk->body["digest"] == digest);
    REQUIRE(!chunk->blobs[0].empty());
    fetched += chunk->blobs[0];
    eof = chunk->body["eof"].get<bool>();
  }
  CHECK(fetched.size() == content.size());
  CHECK(fetched == content);
  // Nothing of it is a file in b's data directory.
  CHECK(!fs::exists(pair.b->data() / "resources" / "default"));
}

// A resource change is a write of the leader's transaction like any other: a
// leader whose epoch was taken over cannot stage, and what the next leader
// lists is what the database holds.
TEST_CASE("failover: a leader whose epoch was taken over cannot change resources", "[failover][integration]") {
  Pair pair("failover-resource-fence", 60000);
  const fs::path file = pair.dir.path() / "a.sh";
  testing::WriteFile(file, "echo one\n");
  testing::RunResult uploaded = pair.a->Weft({"resource", "upload", "shell", "a.sh", file.string()});
  INFO(uploaded.out << uploaded.err);
  REQUIRE(uploaded.exit_code == 0);
  // What a takeover does to the row, done behind the leader's back.
  REQUIRE(pair.pg->Exec("UPDATE weft_leader SET epoch = epoch + 1", "postgres").ok());

  zmq::context_t ctx;
  client::Client leader(ctx, {.endpoint = pair.a->api(), .timeout_ms = 10000});
  Result<json> refused = leader.Call("resource.stage", {{"type", "shell"}, {"name", "a.sh"}, {"version", 1}});
  INFO(pair.Logs());
  REQUIRE(!refused.ok());
  const std::string& why = refused.status().message();
  CHECK((why.find("took over") != std::string::npos || why.find("is a follower") != std::string::npos));

  // A weftd (either) takes over with the next epoch, and lists version 1 as it was: inactive.
  REQUIRE(WaitFor(
      [&] {
        Result<std::string> epoch = pair.pg->Query("SELECT epoch FROM weft_leader", "postgres");
        return epoch.ok() && *epoch == "3";
      },
      20s));
  client::Client both(ctx, {.endpoint = pair.Apis(), .timeout_ms = 5000});
  json listed;
  REQUIRE(WaitFor(
      [&] {
        Result<json> r = both.Call("resource.list", {{"type", "shell"}});
        if (!r.ok()) return false;
        listed = *r;
        return true;
      },
      20s));
  INFO(listed.dump());
  REQUIRE(listed["resources"].size() == 1);
  CHECK(listed["resources"][0]["versions"][0]["state"] == "inactive");
  CHECK(listed["resources"][0]["staged"].is_null());
}

// Each weftd writes a superadmin credential of its own; only the leader used to
// record its key, so a follower's credential was refused until that weftd had
// led. The leader records the keys of every weftd on the database.
TEST_CASE("failover: a follower's superadmin credential works against the leader and after it takes over",
          "[failover][integration]") {
  TempDir dir("failover-superadmin");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  auto options = [&](const std::string& node) {
    fs::create_directories(dir.path() / node);
    return testing::WeftdOptions{.dir = dir.path() / node,
                                 .name = node,
                                 .curve = true,
                                 .extra_toml = ServerToml(pg->conninfo(), node, 2000),
                                 .start_timeout = 30s,
                                 .cli_timeout = 20s,
                                 .store = "sqlite"};  // its [store] says postgres
  };
  Weftd a(options("a"));
  REQUIRE(WaitFor([&] { return Pair::Role(a) == "leader"; }, 20s));
  fs::create_directories(dir.path() / "b" / "data");
  fs::copy(a.data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  Weftd b(options("b"));
  REQUIRE(WaitFor([&] { return b.Log().find("following: api") != std::string::npos; }, 20s));
  REQUIRE(Pair::Role(a) == "leader");

  // b's credential names b's endpoint: the CLI is sent on to the leader a, which admits b's key.
  testing::RunResult via_follower;
  const bool admitted = WaitFor(
      [&] {
        via_follower = b.Weft({"tenant", "create", "by-b"}, b.superadmin());
        return via_follower.exit_code == 0;
      },
      30s);
  INFO(via_follower.out << via_follower.err << "--- a ---\n" << Tail(a.Log(), 3000) << "--- b ---\n"
                        << Tail(b.Log(), 3000));
  REQUIRE(admitted);
  testing::RunResult listed = a.Weft({"tenant", "list"});
  CHECK(listed.out.find("by-b") != std::string::npos);

  // b takes over: its own credential and a's key, recorded by a, still work.
  a.Kill();
  REQUIRE(WaitFor([&] { return Pair::Role(b) == "leader"; }, 20s));
  testing::RunResult after = b.Weft({"tenant", "create", "after"}, b.superadmin());
  INFO(after.out << after.err);
  CHECK(after.exit_code == 0);
  Result<std::string> superadmins = pg->Query(
      "SELECT count(*) FROM principals WHERE \"user\" = 'superadmin' AND revoked_at_ms = 0", "postgres");
  INFO(superadmins.status().message());
  REQUIRE(superadmins.ok());
  CHECK(*superadmins == "2");
}

// Two weftd configured with one [leader] node name ran side by side and
// confused status and takeovers: the second refuses to start, naming the first.
TEST_CASE("failover: a weftd whose node name another live weftd uses refuses to start, naming it",
          "[failover][integration]") {
  TempDir dir("failover-dup-node");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  auto options = [&](const std::string& dirname, const std::string& node) {
    fs::create_directories(dir.path() / dirname);
    return testing::WeftdOptions{.dir = dir.path() / dirname,
                                 .name = dirname,
                                 .extra_toml = ServerToml(pg->conninfo(), node, 1000),
                                 .start_timeout = 30s,
                                 .store = "sqlite"};  // its [store] says postgres
  };
  Weftd a(options("a", "a"));
  REQUIRE(WaitFor([&] { return Pair::Role(a) == "leader"; }, 20s));
  fs::create_directories(dir.path() / "twin" / "data");
  fs::copy(a.data() / "keys", dir.path() / "twin" / "data" / "keys", fs::copy_options::recursive);
  std::string refusal;
  try {
    Weftd twin(options("twin", "a"));
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  INFO(refusal);
  CHECK(refusal.find("another weftd runs as node 'a' on this database (api endpoint " + a.api() + ")") !=
        std::string::npos);
  CHECK(refusal.find("Set [leader] node") != std::string::npos);
  CHECK(Pair::Role(a) == "leader");

  // The same weftd restarted is no other one: it starts again under its name.
  a.Restart();
  CHECK(WaitFor([&] { return Pair::Role(a) == "leader"; }, 20s));
}

// A follower's `weft status` said "up 0ms" (its reply had no uptime) and a
// weftd on PostgreSQL showed SQLite's WAL as "WAL 0 pages": a follower tells
// its real uptime and says the store's figures are the leader's to tell.
TEST_CASE("failover: weft status on a follower shows its uptime and no figures it cannot know",
          "[failover][integration]") {
  Pair pair("failover-status", 3000);
  const std::string weft = testing::BuildPath("bin/weft");
  testing::RunResult follower = testing::Run(weft, {"--server", pair.b->api(), "status"});
  INFO(follower.out << follower.err);
  REQUIRE(follower.exit_code == 0);
  CHECK(follower.out.find("b (follower)") != std::string::npos);
  CHECK(follower.out.find(", up ") != std::string::npos);
  CHECK(follower.out.find("up 0ms") == std::string::npos);
  CHECK(follower.out.find("n/a, follower") != std::string::npos);
  CHECK(follower.out.find("WAL") == std::string::npos);
  testing::RunResult as_json = testing::Run(weft, {"--server", pair.b->api(), "-o", "json", "status"});
  REQUIRE(as_json.exit_code == 0);
  const json status = json::parse(as_json.out);
  CHECK(status.value("uptime_ms", std::int64_t{0}) > 0);
  CHECK(status.value("started_at_ms", std::int64_t{0}) > 0);

  // The leader, on PostgreSQL: its store, without SQLite's WAL.
  testing::RunResult leader = testing::Run(weft, {"--server", pair.a->api(), "status"});
  INFO(leader.out << leader.err);
  REQUIRE(leader.exit_code == 0);
  CHECK(leader.out.find("a (leader)") != std::string::npos);
  CHECK(leader.out.find("(schema ") != std::string::npos);
  CHECK(leader.out.find("WAL") == std::string::npos);
}

// /metrics of `w` ("" when it does not answer).
std::string Scrape(Weftd& w) {
  const std::string url = w.endpoints().value("metrics", std::string());
  const std::size_t path = url.find("/metrics");
  if (path == std::string::npos) return "";
  try {
    testing::HttpReply r = testing::HttpSend(url.substr(0, path), "GET", "/metrics");
    return r.status == 200 ? r.body : "";
  } catch (const std::exception&) {
    return "";
  }
}

// Whether the scrape has the sample line `series value` exactly.
bool HasSample(const std::string& text, const std::string& series, const std::string& value) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line == series + " " + value) return true;
  return false;
}

TEST_CASE("failover: /metrics shows each weftd's role, the epoch and its takeovers, changed by a takeover",
          "[failover][integration]") {
  Pair pair("failover-metrics", 1000);
  std::string a_text, b_text;
  const bool before = WaitFor(
      [&] {
        a_text = Scrape(*pair.a);
        b_text = Scrape(*pair.b);
        return HasSample(a_text, "weft_leader{node=\"a\"}", "1") && HasSample(a_text, "weft_leader_epoch", "1") &&
               HasSample(a_text, "weft_leader_takeovers_total", "1") &&
               HasSample(b_text, "weft_leader{node=\"b\"}", "0") && HasSample(b_text, "weft_leader_epoch", "1") &&
               HasSample(b_text, "weft_leader_takeovers_total", "0");
      },
      20s);
  INFO("--- a ---\n" << a_text << "--- b ---\n" << b_text);
  REQUIRE(before);
  // The follower shows none of the leader's queue figures.
  CHECK(b_text.find("weft_tasks{") == std::string::npos);

  pair.a->Kill();
  const bool after = WaitFor(
      [&] {
        b_text = Scrape(*pair.b);
        return HasSample(b_text, "weft_leader{node=\"b\"}", "1") && HasSample(b_text, "weft_leader_epoch", "2") &&
               HasSample(b_text, "weft_leader_takeovers_total", "1");
      },
      20s);
  INFO("--- b after ---\n" << b_text << pair.Logs());
  CHECK(after);
}

// With the database down, the operator saw the client's "is the server
// running?" or libpq's multi-line text as it was: weft says on one line that
// weftd answered UNAVAILABLE, and why.
TEST_CASE("failover: with the database down, weft status says on one line that weftd answered UNAVAILABLE and why",
          "[failover][integration]") {
  Pair pair("failover-db-down", 1000);
  pair.pg.reset();  // an immediate shutdown: its sessions and its socket are gone
  const std::string weft = testing::BuildPath("bin/weft");
  // The follower says so at once. (A leader does too: see the cases below.)
  Weftd& follower = *pair.b;
  testing::RunResult r;
  const bool said = WaitFor(
      [&] {
        r = testing::Run(weft, {"--server", follower.api(), "status"});
        return r.exit_code != 0 && r.err.find("answered UNAVAILABLE") != std::string::npos;
      },
      30s);
  INFO(r.out << r.err << pair.Logs());
  REQUIRE(said);
  CHECK(r.err.find("weft: weftd at " + follower.api() + " answered UNAVAILABLE: ") == 0);
  CHECK(r.err.find("PostgreSQL") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

// A task's id in job.get's details.
std::int64_t TaskId(const json& task) {
  const json& id = task["id"];
  return id.is_string() ? std::stoll(id.get<std::string>()) : id.get<std::int64_t>();
}

// One weftd on a throwaway PostgreSQL, one host whose provider's tasks take
// a while: PostgreSQL is stopped while a CREATE runs, so that its finish is
// sent while the database is down, then started again on the same data.
struct Outage {
  explicit Outage(const std::string& name, const std::string& leader_toml) : dir(name) {
    pg = StartPostgres(dir);
    fs::create_directories(dir.path() / "a");
    weftd = std::make_unique<Weftd>(testing::WeftdOptions{
        .dir = dir.path() / "a",
        .name = "a",
        // Leases and silence far past the outage: a finish that is lost would show as a job that never ends.
        .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json(pg->conninfo()).dump() + "\n" +
                      leader_toml + "[tasks]\nlease_ms = 120000\n[jobs]\nretry_backoff_ms = 50\n" +
                      "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 120000\n",
        .store = "sqlite"});  // its [store] says postgres
    effects = dir.path() / "effects.log";
    CatalogDir catalog(dir.path() / "catalog");
    catalog.PatchActions("", "", {{"effects_file", effects.string()}});
    catalog.PatchProvider({{"latency_ms", 3000}, {"effects_file", effects.string()}});
    testing::RunResult imported = weftd->Weft({"catalog", "import", catalog.path().string()});
    INFO(imported.out << imported.err);
    REQUIRE(imported.exit_code == 0);
    host = std::make_unique<Host>(
        testing::HostOptions{.dir = dir.path(), .id = "h1", .server = weftd->provisioner(), .capacity = 4, .workers = 2});
    REQUIRE(WaitFor([&] { return weftd->HostLive("h1"); }, 20s));
  }

  // Creates a cluster and stops PostgreSQL while one of its CREATE tasks runs; that task's id.
  std::int64_t StopDuringCreate(client::Client& api) {
    Result<json> created = api.Call("cluster.create", {{"name", "c1"}, {"template", "web-fake"}, {"size", 3}});
    INFO(Logs() << created.status().message());
    REQUIRE(created.ok());
    job = (*created)["job"]["id"].get<std::string>();
    std::int64_t running = 0;
    REQUIRE(WaitFor(
        [&] {
          Result<json> r = api.Call("job.get", {{"job", job}, {"details", true}});
          if (!r.ok()) return false;
          for (const json& t : (*r)["job"]["tasks"])
            if (t["action"] == "CREATE" && t["state"] == "leased") running = TaskId(t);
          return running != 0;
        },
        30s));
    pg.reset();  // an immediate shutdown: its sessions and its socket are gone
    return running;
  }

  std::string Logs() const {
    return "--- weftd ---\n" + Tail(weftd->AllLogs(), 4000) + "--- host ---\n" + Tail(host ? host->Log() : "", 3000);
  }

  TempDir dir;
  std::unique_ptr<PostgresServer> pg;
  std::unique_ptr<Weftd> weftd;
  std::unique_ptr<Host> host;
  fs::path effects;
  std::string job;
};

// The job ends, and the task whose finish was sent during the outage
// succeeded with its first attempt, which took effect once.
void CheckFinishKept(Outage& outage, client::Client& api, std::int64_t task) {
  const json ended = WaitJobEnds(api, outage.job, 90s);
  INFO(outage.Logs());
  REQUIRE(ended.value("status", std::string()) == "succeeded");
  Result<json> details = api.Call("job.get", {{"job", outage.job}, {"details", true}});
  REQUIRE(details.ok());
  bool found = false;
  for (const json& t : (*details)["job"]["tasks"]) {
    if (TaskId(t) != task) continue;
    found = true;
    INFO(t.dump());
    CHECK(t["state"] == "succeeded");
    CHECK(t["attempts"].size() == 1);
    CHECK(EffectsByTask(outage.effects)[task] == 1);
  }
  CHECK(found);
}

// A weftd on PostgreSQL whose database went down answered nothing while its
// store waited for the database (up to [store] reconnect_timeout_ms, 60 s):
// the CLI said "no reply within 5s". It now answers at once, UNAVAILABLE,
// saying which database is unreachable, for how long, and what weftd does.
TEST_CASE("failover: a weftd whose database is down answers at once which database is unreachable, and a host's "
          "finish sent meanwhile is kept",
          "[failover][integration]") {
  // The only weftd on its database: it always leads, and keeps waiting for it.
  Outage outage("failover-store-wait", "[leader]\nenabled = false\n");
  zmq::context_t ctx;
  client::Client api(ctx, {.endpoint = outage.weftd->api(), .timeout_ms = 3000});
  const fs::path pg_dir = outage.pg->dir();
  const std::int64_t task = outage.StopDuringCreate(api);

  const std::string weft = testing::BuildPath("bin/weft");
  const std::string said = "weft: weftd at " + outage.weftd->api() +
                           " answered UNAVAILABLE: this weftd's database, PostgreSQL at " + pg_dir.string() +
                           ":5432, has been unreachable for ";
  // Within the CLI's own wait (5 s): at once, not after the store's wait.
  for (const char* command : {"status", "cluster"}) {
    std::vector<std::string> args = {"--server", outage.weftd->api(), command};
    if (std::string(command) == "cluster") args.push_back("list");
    testing::RunResult r;
    // The first request may come before the store found the connection lost.
    const bool answered = WaitFor(
        [&] {
          r = testing::Run(weft, args);
          return r.exit_code != 0 && r.err.find("no reply") == std::string::npos &&
                 r.err.find("has been unreachable") != std::string::npos;
        },
        20s);
    INFO(command << ": " << r.out << r.err << outage.Logs());
    REQUIRE(answered);
    CHECK(r.err.find(said) == 0);
    CHECK(r.err.find("weftd keeps trying until it is back; nothing of this request was done: retry") !=
          std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // The host's finish of the CREATE came meanwhile and was refused.
  REQUIRE(WaitFor([&] { return outage.host->Log().find("cannot report finished tasks to weftd") != std::string::npos; },
                  20s));

  outage.pg = StartPostgres(outage.dir);
  CheckFinishKept(outage, api, task);
}

// The same with an election: the leader's lease cannot be renewed either, so
// it steps down as well and answers as a follower until it leads again.
TEST_CASE("failover: a leader whose database is down answers at once, and leads again with a host's finish kept",
          "[failover][integration]") {
  Outage outage("failover-leader-wait", "[leader]\nnode = \"a\"\nlease_ms = 3000\npoll_ms = 100\n");
  REQUIRE(WaitFor([&] { return Pair::Role(*outage.weftd) == "leader"; }, 20s));
  zmq::context_t ctx;
  client::Client api(ctx, {.endpoint = outage.weftd->api(), .timeout_ms = 3000});
  const std::int64_t task = outage.StopDuringCreate(api);

  const std::string weft = testing::BuildPath("bin/weft");
  for (int i = 0; i < 3; ++i) {
    // Within the CLI's wait, whoever answers says the database is the cause: the store's wait
    // (or, at the loss, the batch cut off), or the follower weftd became.
    // server.status, and an op only the reactor answers.
    for (const char* command : {"status", "host"}) {
      std::vector<std::string> args = {"--server", outage.weftd->api(), command};
      if (std::string(command) == "host") args.push_back("list");
      testing::RunResult r = testing::Run(weft, args);
      INFO(command << ": " << r.out << r.err << outage.Logs());
      CHECK(r.exit_code != 0);
      CHECK(r.err.find("weft: weftd at " + outage.weftd->api() + " answered UNAVAILABLE: ") == 0);
      CHECK(r.err.find("PostgreSQL") != std::string::npos);
    }
  }
  REQUIRE(WaitFor([&] { return outage.host->Log().find("cannot report finished tasks to weftd") != std::string::npos; },
                  20s));

  outage.pg = StartPostgres(outage.dir);
  REQUIRE(WaitFor([&] { return Pair::Role(*outage.weftd) == "leader"; }, 30s));
  CheckFinishKept(outage, api, task);
  Result<std::string> epoch = outage.pg->Query("SELECT epoch FROM weft_leader", "postgres");
  INFO(outage.Logs());
  CHECK(epoch.ok());
  if (epoch.ok()) CHECK(*epoch == "2");
}

// A weftd that would tell the others an address of every interface says so at start.
TEST_CASE("failover: a weftd whose advertised endpoint names no machine warns at start", "[failover][integration]") {
  TempDir dir("failover-advertise");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  fs::create_directories(dir.path() / "a");
  Weftd a(testing::WeftdOptions{
      .dir = dir.path() / "a",
      .name = "a",
      .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json(pg->conninfo()).dump() +
                    "\n[leader]\nnode = \"a\"\nadvertise_api = \"tcp://0.0.0.0:7420\"\n",
      .store = "sqlite"});  // its [store] says postgres
  REQUIRE(WaitFor([&] { return Pair::Role(a) == "leader"; }, 20s));
  const std::string log = a.Log();
  INFO(Tail(log, 4000));
  CHECK(log.find("are told tcp://0.0.0.0:7420 as this weftd's api endpoint, which names no machine: set [leader] "
                 "advertise_api") != std::string::npos);
  // The endpoints it binds on loopback are told as they are: no line for them.
  CHECK(log.find("as this weftd's provisioner endpoint") == std::string::npos);
}

}  // namespace
}  // namespace weft
