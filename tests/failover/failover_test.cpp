// Several weftd on one PostgreSQL (docs/failover.md), with the real processes:
// a throwaway PostgreSQL, two weftd on it and clients given both endpoints.
// The leader is paused (SIGSTOP) and the follower takes over; an old leader
// never commits once another one has taken over.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::PostgresServer;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// Short leases so that a takeover is quick; hosts heartbeat often.
std::string ServerToml(const std::string& conninfo, const std::string& node, std::int64_t lease_ms) {
  return "[store]\nbackend = \"postgres\"\nconninfo = " + json(conninfo).dump() + "\n" +
         "[leader]\nnode = \"" + node + "\"\nlease_ms = " + std::to_string(lease_ms) + "\npoll_ms = 100\n" +
         "[tasks]\nlease_ms = 4000\n"
         "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
         "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 4000\n";
}

// Two weftd on one throwaway PostgreSQL; `a` starts first and leads.
struct Pair {
  Pair(const std::string& name, std::int64_t lease_ms) : dir(name) {
    Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg");
    if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
    pg = std::move(*started);
    a = Start("a", lease_ms);
    REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 20s));
    b = Start("b", lease_ms);
    REQUIRE(WaitFor([&] { return Role(*b) == "follower"; }, 20s));
  }

  std::unique_ptr<Weftd> Start(const std::string& node, std::int64_t lease_ms) {
    fs::create_directories(dir.path() / node);
    return std::make_unique<Weftd>(testing::WeftdOptions{.dir = dir.path() / node,
                                                         .name = node,
                                                         .extra_toml = ServerToml(pg->conninfo(), node, lease_ms),
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
  std::unique_ptr<PostgresServer> pg;
  std::unique_ptr<Weftd> a, b;
};



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
  CHECK(refused.status().message().find("took over") != std::string::npos);
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

}  // namespace
}  // namespace weft
