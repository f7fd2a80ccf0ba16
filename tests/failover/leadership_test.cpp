// weft::server::leader::Leadership against a throwaway PostgreSQL, in-process:
// what a follower answers before it has ever read the leader's row, and which
// session a follower ends when the leader's row is stale.
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/server/leader/follower.hpp"
#include "weft/server/leader/leadership.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using server::leader::Leadership;
using server::leader::LeaderOptions;
using testing::PostgresServer;
using testing::TempDir;

std::unique_ptr<PostgresServer> StartPostgres(const TempDir& dir) {
  Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg");
  if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
  return std::move(*started);
}

std::unique_ptr<Leadership> Open(const PostgresServer& pg, const std::string& node, std::int64_t lease_ms) {
  Result<std::unique_ptr<Leadership>> l = Leadership::Open(LeaderOptions{
      .conninfo = pg.conninfo(),
      .node = node,
      .endpoints = {{"api", "tcp://" + node + ":1"}, {"provisioner", "tcp://" + node + ":2"}},
      .lease_ms = lease_ms,
      .poll_ms = 100,
      .server_key = "",
      .secrets_digest = "",
      .superadmin_key = ""});
  if (!l.ok()) FAIL("cannot open the leadership: " << l.status().message());
  return std::move(*l);
}

// A libpq session of the test's own, closed when it goes out of scope.
struct Session {
  explicit Session(const std::string& conninfo) : pg(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(pg) != CONNECTION_OK) FAIL("cannot connect: " << PQerrorMessage(pg));
  }
  ~Session() { PQfinish(pg); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // The first value of `sql`'s result ("" when it has none); fails the test on an error.
  std::string Value(const std::string& sql) {
    PGresult* r = PQexec(pg, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    std::string out;
    if (st == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    const std::string error = PQresultErrorMessage(r);
    PQclear(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) FAIL(sql << ": " << error);
    return out;
  }
  // Whether the session still answers.
  bool Alive() {
    PGresult* r = PQexec(pg, "SELECT 1");
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok;
  }
  PGconn* pg;
};

// A session that holds the leader's lock, as another weftd that has just taken
// it, while the row names a stale leader whose session is another one.
struct LockHolder {
  explicit LockHolder(const PostgresServer& pg) : session(pg.conninfo()) {
    REQUIRE(session.Value("SELECT pg_try_advisory_lock(2003199604, 1)") == "t");
    pid = session.Value("SELECT pg_backend_pid()");
    REQUIRE(pg.Exec("UPDATE weft_leader SET epoch = 4, node = 'a', lock_pid = " + std::to_string(std::stoll(pid) + 1) +
                    ", renewed_at = now() - interval '1 hour'")
                .ok());
  }
  Session session;
  std::string pid;
};

TEST_CASE("leadership: a follower that never read the leader's row answers NOT_LEADER without a leader",
          "[leader][postgres]") {
  TempDir dir("leadership-unread");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  std::unique_ptr<Leadership> follower = Open(*pg, "b", 3000);
  // No Tick yet: as after a takeover attempt that failed on its connection.
  REQUIRE(follower->known_leader().is_null());
  json details;
  REQUIRE_NOTHROW(details = server::leader::NotLeaderDetails(*follower, api::Endpoint::kApi));
  CHECK(details.value("not_leader", false));
  CHECK(details.value("epoch", std::int64_t{-1}) == 0);
  CHECK(!details.contains("leader"));
  Status status = Status::Ok();
  REQUIRE_NOTHROW(status = server::leader::NotLeaderStatus(*follower, api::Endpoint::kProvisioner));
  CHECK(status.message().find("no leader is known yet") != std::string::npos);
}

// Several followers see the same stale row; one of them may have taken the
// lock already and not yet written the row. The others must end only the
// session that the row names as the stale leader's.
TEST_CASE("leadership: a follower ends the stale leader's own session only, not another lock holder",
          "[leader][postgres]") {
  TempDir dir("leadership-stale");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  std::unique_ptr<Leadership> follower = Open(*pg, "b", 3000);
  LockHolder lock(*pg);
  Session& holder = lock.session;
  const std::string& holder_pid = lock.pid;

  Result<Leadership::Change> change = follower->Tick(1000);
  REQUIRE(change.ok());
  CHECK(*change == Leadership::Change::kNone);
  CHECK(follower->known_leader().value("node", std::string()) == "a");
  std::this_thread::sleep_for(300ms);  // a terminated backend exits at once; give it the time to
  CHECK(holder.Alive());
  CHECK(!follower->leader());

  // The row names the holder: it is the stale leader, and is ended.
  REQUIRE(pg->Exec("UPDATE weft_leader SET lock_pid = " + holder_pid).ok());
  change = follower->Tick(2000);
  REQUIRE(change.ok());
  CHECK(testing::WaitFor([&] { return !holder.Alive(); }, 10s));
  // The lock is free again: the follower takes over on its next tick.
  change = follower->Tick(3000);
  REQUIRE(change.ok());
  CHECK(*change == Leadership::Change::kBecameLeader);
  CHECK(follower->epoch() == 5);
}

// A weftd stopped between taking the lock and writing the row would hold it
// for ever: a holder that is not the recorded one, idle for two leases, is ended.
TEST_CASE("leadership: a lock holder that never wrote the row and stays idle is ended after two leases",
          "[leader][postgres]") {
  TempDir dir("leadership-idle");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  std::unique_ptr<Leadership> follower = Open(*pg, "b", 200);
  LockHolder lock(*pg);
  std::this_thread::sleep_for(800ms);  // more than two leases of 200 ms
  REQUIRE(follower->Tick(1000).ok());
  CHECK(testing::WaitFor([&] { return !lock.session.Alive(); }, 10s));
}

// A leader that gave up its leadership (its connection ended) while its epoch
// is still the one in force: its writes are refused, and the refusal does not
// blame a takeover that did not happen.
TEST_CASE("leadership: a leader that stepped down with its epoch still in force is refused without naming a takeover",
          "[leader][postgres]") {
  TempDir dir("leadership-lost");
  std::unique_ptr<PostgresServer> pg = StartPostgres(dir);
  std::unique_ptr<Leadership> leader = Open(*pg, "a", 3000);
  Result<Leadership::Change> change = leader->Tick(1000);
  REQUIRE(change.ok());
  REQUIRE(*change == Leadership::Change::kBecameLeader);
  const std::int64_t epoch = leader->epoch();
  CHECK(leader->CheckFence(epoch).ok());

  leader->Lose("its connection to PostgreSQL, which held the leader's lock, ended");
  Status same = leader->CheckFence(epoch);
  CHECK(same.code() == Code::kUnavailable);
  CHECK(same.message().find("no longer the leader") != std::string::npos);
  CHECK(same.message().find("took over") == std::string::npos);

  Status newer = leader->CheckFence(epoch + 1);
  CHECK(newer.message().find("another weftd took over as leader (epoch " + std::to_string(epoch + 1)) !=
        std::string::npos);
}

}  // namespace
}  // namespace weft
