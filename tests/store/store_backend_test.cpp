// The store's two backends: what both must do alike (run on each through
// OpenStore: SQLite by default, PostgreSQL with WEFT_TEST_STORE=postgres) and
// what only PostgreSQL has (a real server from tests/support/postgres.hpp).
#include <catch2/catch.hpp>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/postgres.hpp"
#include "weft/server/store/store.hpp"

using weft::Status;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::testing::OpenStore;
using weft::testing::PostgresServer;
using weft::testing::TempDir;

namespace {

TaskRecord NewTask() {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = "fake-provider";
  t.action = "CREATE";
  t.max_attempts = 3;
  t.created_at_ms = 1000;
  return t;
}

std::unique_ptr<PostgresServer> StartPostgres(const TempDir& dir) {
  auto server = PostgresServer::Start(dir / "postgres");
  if (!server.ok()) FAIL(server.status().ToString());
  return std::move(*server);
}

Store& Opened(weft::Result<std::unique_ptr<Store>>& opened) {
  if (!opened.ok()) FAIL(opened.status().ToString());
  return **opened;
}

}  // namespace

TEST_CASE("store parameters: ?N becomes $N for PostgreSQL, quoted text is left alone", "[store]") {
  int params = 0;
  CHECK(weft::store::sql::ToDollarParameters("UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?2", &params) ==
        "UPDATE t SET a = $2 WHERE id = $1 AND b = $2");
  CHECK(params == 2);
  CHECK(weft::store::sql::ToDollarParameters("SELECT '?1', \"a?\" FROM t WHERE x = ? AND y = ?", &params) ==
        "SELECT '?1', \"a?\" FROM t WHERE x = $1 AND y = $2");
  CHECK(params == 2);
  CHECK(weft::store::sql::ToDollarParameters("SELECT 'it''s ?' , ?3", &params) == "SELECT 'it''s ?' , $3");
  CHECK(params == 3);
}

TEST_CASE("store write guard: it runs before every commit, and a refusal commits nothing", "[store]") {
  TempDir dir("store-guard");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  int checks = 0;
  bool leader = true;
  store.SetWriteGuard([&]() -> Status {
    ++checks;
    if (!leader) return Status::Conflict("this weftd is no longer the leader");
    // A guard may read and write in the transaction it guards.
    auto hosts = store.ListHosts();
    return hosts.status();
  });

  REQUIRE(store.Begin().ok());
  TaskRecord kept = NewTask();
  REQUIRE(store.InsertTask(&kept).ok());
  REQUIRE(store.Commit().ok());
  CHECK(checks == 1);

  leader = false;
  REQUIRE(store.Begin().ok());
  TaskRecord refused = NewTask();
  REQUIRE(store.InsertTask(&refused).ok());
  const Status commit = store.Commit();
  CHECK(commit.code() == weft::Code::kConflict);
  CHECK(commit.message() == "this weftd is no longer the leader");
  CHECK(store.in_transaction());
  REQUIRE(store.Rollback().ok());
  CHECK(checks == 2);

  auto counts = store.CountTasks();
  REQUIRE(counts.ok());
  CHECK(counts->queued == 1);
  auto gone = store.GetTask(refused.id);
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());

  store.SetWriteGuard({});
  REQUIRE(store.Begin().ok());
  REQUIRE(store.InsertTask(&refused).ok());
  REQUIRE(store.Commit().ok());
  CHECK(checks == 2);
}

TEST_CASE("postgres store: a new database gets every migration once, and a reopen finds its rows",
          "[store][postgres]") {
  TempDir dir("store-pg");
  auto server = StartPostgres(dir);
  weft::store::StoreOptions options;
  options.backend = weft::store::Backend::kPostgres;
  options.conninfo = server->conninfo();
  std::int64_t id = 0;
  {
    auto opened = Store::Open(dir / "unused.db", options);
    Store& store = Opened(opened);
    CHECK(store.schema_version() == Store::LatestSchemaVersion());
    CHECK(store.path().string().starts_with("PostgreSQL host="));
    REQUIRE(store.Begin().ok());
    TaskRecord t = NewTask();
    REQUIRE(store.InsertTask(&t).ok());
    REQUIRE(store.Commit().ok());
    id = t.id;
    CHECK(id > 0);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "unused.db"));
  CHECK(server->Query("SELECT COUNT(*) FROM schema_migrations").value() ==
        std::to_string(Store::LatestSchemaVersion()));
  auto again = Store::Open(dir / "unused.db", options);
  Store& store = Opened(again);
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  auto task = store.GetTask(id);
  REQUIRE(task.ok());
  REQUIRE(task->has_value());
  CHECK((*task)->plugin == "fake-provider");
  CHECK(server->Query("SELECT COUNT(*) FROM schema_migrations").value() ==
        std::to_string(Store::LatestSchemaVersion()));
}

TEST_CASE("postgres store: a server that is not there is a clear error at open", "[store][postgres]") {
  TempDir dir("store-pg-none");
  weft::store::StoreOptions options;
  options.backend = weft::store::Backend::kPostgres;
  options.conninfo = "host=" + (dir / "nowhere").string() + " dbname=weft";
  auto opened = Store::Open(dir / "weft.db", options);
  REQUIRE_FALSE(opened.ok());
  CHECK_THAT(opened.status().message(), Catch::StartsWith("cannot open the PostgreSQL store: cannot connect to PostgreSQL"));
}
