// weft::server::leader::Leadership against a throwaway PostgreSQL, in-process:
// what a follower answers before it has ever read the leader's row.
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>

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
      .poll_ms = 100});
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

}  // namespace
}  // namespace weft
