// The store's two backends: what both must do alike (run on each through
// OpenStore: SQLite by default, PostgreSQL with WEFT_TEST_STORE=postgres) and
// what only PostgreSQL has (a real server from tests/support/postgres.hpp).
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/postgres.hpp"
#include "weft/server/store/sqlite.hpp"
#include "weft/server/store/store.hpp"

using weft::Status;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::PostgresServer;
using weft::testing::StartPostgres;
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

TEST_CASE("postgres store: a new database gets every migration once, and a reopen finds its rows",
          "[store][postgres]") {
  TempDir dir("store-pg");
  auto server = StartPostgres(dir.path());
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

TEST_CASE("store task writes: one that finds no task fails the transaction, and nothing of it is kept",
          "[store]") {
  TempDir dir("store-missing-task");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  TaskRecord t = NewTask();
  REQUIRE(store.Begin().ok());
  REQUIRE(store.InsertTask(&t).ok());
  REQUIRE(store.Commit().ok());

  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(t.id, 1, "host-a", 5000, 2000).ok());
  // SQLite says so at once; PostgreSQL, which does not wait for the write's reply, at the commit.
  Status missing = store.LeaseTask(t.id + 1000, 1, "host-a", 5000, 2000);
  Status ended = missing.ok() ? store.Commit() : missing;
  CHECK(ended.code() == weft::Code::kNotFound);
  CHECK(ended.message() == "task " + std::to_string(t.id + 1000) + " does not exist");
  REQUIRE(store.Rollback().ok());

  auto task = store.GetTask(t.id);
  REQUIRE(task.ok());
  REQUIRE(task->has_value());
  CHECK((*task)->state == weft::store::TaskState::kQueued);
  CHECK((*task)->attempt == 0);
  CHECK(store.ListAttempts(t.id).value().empty());
}

namespace {

using weft::store::sql::PostgresDatabase;

// The SQL layer alone on a fresh server, with a table of its own.
std::unique_ptr<PostgresDatabase> OpenItems(const PostgresServer& server) {
  auto db = std::make_unique<PostgresDatabase>();
  Status opened = db->Open({.conninfo = server.conninfo(), .reconnect_timeout_ms = 10'000, .name = "", .call_timeout_ms = 15'000});
  if (!opened.ok()) FAIL(opened.ToString());
  Status made = db->Exec("CREATE TABLE items (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)");
  if (!made.ok()) FAIL(made.ToString());
  return db;
}

weft::store::sql::Statement Prepared(PostgresDatabase& db, std::string_view sql) {
  auto st = db.Prepare(sql);
  if (!st.ok()) FAIL(st.status().ToString());
  return std::move(*st);
}

}  // namespace

TEST_CASE("postgres store: a transaction's writes go out without waiting, and one refused rolls them all "
          "back with the server's message",
          "[store][postgres]") {
  TempDir dir("store-pg-pipeline");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");

  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 10).RunDeferred().ok());
  // The same key again: the server refuses it, but nothing waited for its reply.
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 11).RunDeferred().ok());
  CHECK(insert.Reset().Bind(1, 2).Bind(2, 12).RunDeferred().ok());
  Status committed = db->Commit();
  CHECK(committed.code() == weft::Code::kInternal);
  CHECK_THAT(committed.message(), Catch::StartsWith("PostgreSQL 'INSERT INTO items (id, n) VALUES ($1, $2)' failed: "
                                                    "ERROR:  duplicate key value violates unique constraint"));
  REQUIRE(db->Rollback().ok());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "0");

  // The connection goes on, and a read waits for the writes before it.
  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 3).Bind(2, 13).RunDeferred().ok());
  CHECK(insert.Reset().Bind(1, 4).Bind(2, 14).RunDeferred().ok());
  auto sum = Prepared(*db, "SELECT SUM(n) FROM items");
  REQUIRE(sum.Step().value());
  CHECK(sum.Int(0) == 27);
  REQUIRE(db->Commit().ok());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "2");
}

TEST_CASE("postgres store: a read after a refused write reports that write's failure", "[store][postgres]") {
  TempDir dir("store-pg-pipeline-read");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
  auto count = Prepared(*db, "SELECT COUNT(*) FROM items");

  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 10).RunDeferred().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 11).RunDeferred().ok());
  auto row = count.Reset().Step();
  REQUIRE_FALSE(row.ok());
  CHECK_THAT(row.status().message(), Catch::Contains("duplicate key value violates unique constraint"));
  CHECK_FALSE(db->Commit().ok());
  REQUIRE(db->Rollback().ok());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "0");
}

TEST_CASE("postgres store: a statement whose preparation a failed transaction skipped is prepared again",
          "[store][postgres]") {
  TempDir dir("store-pg-pipeline-prepare");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
  auto bump = Prepared(*db, "UPDATE items SET n = n + 1 WHERE id = ?1");
  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 10).RunDeferred().ok());
  CHECK(bump.Reset().Bind(1, 1).RunDeferred(1).ok());  // its first run: sent with its text
  REQUIRE(db->Commit().ok());

  // Its second run prepares it on the server, in a pipeline that a refused insert aborted before.
  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 11).RunDeferred().ok());
  CHECK(bump.Reset().Bind(1, 1).RunDeferred(1).ok());
  CHECK_FALSE(db->Commit().ok());
  REQUIRE(db->Rollback().ok());

  REQUIRE(db->Begin().ok());
  Status bumped = bump.Reset().Bind(1, 1).RunDeferred(1);
  Status committed = bumped.ok() ? db->Commit() : bumped;
  if (!committed.ok()) FAIL(committed.ToString());
  CHECK(server->Query("SELECT n FROM items WHERE id = 1").value() == "12");
}

TEST_CASE("postgres store: a statement prepared per call is prepared on the server once, and comes back cleared",
          "[store][postgres]") {
  TempDir dir("store-pg-kept");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  for (int i = 1; i <= 5; ++i) {
    auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
    REQUIRE(insert.Bind(1, i).Bind(2, i * 10).RunDeferred().ok());
  }
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "5");
  auto named = Prepared(*db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO items%'");
  REQUIRE(named.Step().value());
  CHECK(named.Int(0) == 1);

  {
    auto echo = Prepared(*db, "SELECT CAST(?1 AS BIGINT)");
    REQUIRE(echo.Bind(1, 7).Step().value());
    CHECK(echo.Int(0) == 7);
  }
  // Kept on its row with 7 bound, it comes back with neither.
  auto echo = Prepared(*db, "SELECT CAST(?1 AS BIGINT)");
  REQUIRE(echo.Step().value());
  CHECK(echo.IsNull(0));
}

TEST_CASE("sqlite store: a statement prepared per call is prepared once, and comes back reset and cleared",
          "[store]") {
  TempDir dir("store-sqlite-kept");
  weft::store::sql::SqliteDatabase db;
  REQUIRE(db.Open((dir / "kept.db").string(), 1000).ok());
  auto statements = [&db] {
    int n = 0;
    for (sqlite3_stmt* s = sqlite3_next_stmt(db.handle(), nullptr); s; s = sqlite3_next_stmt(db.handle(), s)) ++n;
    return n;
  };
  const int own = statements();  // BEGIN, COMMIT and ROLLBACK
  for (int i = 1; i <= 5; ++i) {
    auto echo = db.Prepare("SELECT ?1");
    REQUIRE(echo.ok());
    // The one kept from the turn before was left on its row with a value bound.
    REQUIRE(echo->Step().value());
    CHECK(echo->IsNull(0));
    REQUIRE(echo->Reset().Bind(1, i).Step().value());
    CHECK(echo->Int(0) == i);
  }
  CHECK(statements() == own + 1);
  CHECK(db.idle_statements() == 1);
}

TEST_CASE("sqlite store: a read left on a row across a commit is found and reset, and none is found when none is",
          "[store]") {
  TempDir dir("store-sqlite-leftover");
  weft::store::sql::SqliteDatabase db;
  REQUIRE(db.Open((dir / "leftover.db").string(), 1000).ok());
  REQUIRE(db.Exec("CREATE TABLE t (a INTEGER)").ok());
  REQUIRE(db.Exec("INSERT INTO t VALUES (1), (2)").ok());
  // A commit with no read open: nothing to reset.
  REQUIRE(db.Begin().ok());
  REQUIRE(db.Exec("INSERT INTO t VALUES (3)").ok());
  REQUIRE(db.Commit().ok());
  CHECK(db.ResetActiveStatements().empty());
  auto rows = db.Prepare("SELECT a FROM t ORDER BY a");
  REQUIRE(rows.ok());
  // A read stepped inside the transaction and left on its row keeps a read
  // transaction open after the commit: it is found and reset.
  REQUIRE(db.Begin().ok());
  REQUIRE(rows->Step().value());
  REQUIRE(db.Exec("INSERT INTO t VALUES (4)").ok());
  REQUIRE(db.Commit().ok());
  CHECK(sqlite3_txn_state(db.handle(), nullptr) == SQLITE_TXN_READ);
  const std::vector<std::string> reset = db.ResetActiveStatements();
  REQUIRE(reset.size() == 1);
  CHECK(reset[0] == "SELECT a FROM t ORDER BY a");
  CHECK(sqlite3_txn_state(db.handle(), nullptr) == SQLITE_TXN_NONE);
  CHECK(db.ResetActiveStatements().empty());
  // So is one left on its row outside any transaction.
  REQUIRE(rows->Reset().Step().value());
  CHECK(db.ResetActiveStatements().size() == 1);
}

namespace {

// BEGIN and COMMIT as prepared on the server for `db`'s connection, "name=text,...".
std::string Controls(PostgresDatabase& db) {
  auto read = Prepared(db, "SELECT COALESCE(string_agg(name || '=' || statement, ',' ORDER BY name), '') "
                           "FROM pg_prepared_statements WHERE name IN ('weft_begin', 'weft_commit')");
  auto row = read.Step();
  if (!row.ok() || !*row) FAIL(row.status().ToString());
  return read.Text(0);
}

}  // namespace

TEST_CASE("postgres store: BEGIN and COMMIT are prepared on the server once per connection, again when a failed "
          "transaction skipped the preparation, and on a new connection",
          "[store][postgres]") {
  TempDir dir("store-pg-control");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
  // A refused insert aborts the pipeline after BEGIN, before COMMIT's preparation.
  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 10).RunDeferred().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 11).RunDeferred().ok());
  CHECK_FALSE(db->Commit().ok());
  REQUIRE(db->Rollback().ok());
  CHECK(Controls(*db) == "weft_begin=BEGIN");

  // The next commit prepares COMMIT; the ones after it run both as prepared.
  for (int i = 2; i <= 4; ++i) {
    REQUIRE(db->Begin().ok());
    Status sent = insert.Reset().Bind(1, i).Bind(2, i * 10).RunDeferred();
    Status committed = sent.ok() ? db->Commit() : sent;
    if (!committed.ok()) FAIL(committed.ToString());
  }
  CHECK(Controls(*db) == "weft_begin=BEGIN,weft_commit=COMMIT");
  CHECK(server->Query("SELECT string_agg(id::text, ',' ORDER BY id) FROM items").value() == "2,3,4");

  Status restarted = server->Restart();
  if (!restarted.ok()) FAIL(restarted.ToString());
  for (int i = 5; i <= 6; ++i) {
    REQUIRE(db->Begin().ok());
    Status sent = insert.Reset().Bind(1, i).Bind(2, i * 10).RunDeferred();
    Status committed = sent.ok() ? db->Commit() : sent;
    if (!committed.ok()) FAIL(committed.ToString());
  }
  CHECK(Controls(*db) == "weft_begin=BEGIN,weft_commit=COMMIT");
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "5");
}

TEST_CASE("postgres store: the first transaction after the server restarted runs on a new connection",
          "[store][postgres]") {
  TempDir dir("store-pg-begin-restart");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
  REQUIRE(db->Begin().ok());
  CHECK(insert.Reset().Bind(1, 1).Bind(2, 10).RunDeferred().ok());
  REQUIRE(db->Commit().ok());

  // Its old connection is closed, which BEGIN finds out before the transaction's writes go out.
  Status restarted = server->Restart();
  if (!restarted.ok()) FAIL(restarted.ToString());
  REQUIRE(db->Begin().ok());
  Status sent = insert.Reset().Bind(1, 2).Bind(2, 20).RunDeferred();
  Status committed = sent.ok() ? db->Commit() : sent;
  if (!committed.ok()) FAIL(committed.ToString());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "2");
}

TEST_CASE("postgres store: a transaction of thousands of writes reads their replies as it goes", "[store][postgres]") {
  TempDir dir("store-pg-pipeline-long");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  auto insert = Prepared(*db, "INSERT INTO items (id, n) VALUES (?1, ?2)");
  REQUIRE(db->Begin().ok());
  for (int i = 1; i <= 3000; ++i) REQUIRE(insert.Reset().Bind(1, i).Bind(2, i).RunDeferred().ok());
  REQUIRE(db->Commit().ok());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "3000");

  // One refused among them: found while later ones are still being sent, and the whole transaction goes.
  REQUIRE(db->Begin().ok());
  Status sent;
  int sent_ok = 0;
  for (int i = 3001; i <= 6000 && sent.ok(); ++i) {
    sent = insert.Reset().Bind(1, i == 3100 ? 1 : i).Bind(2, i).RunDeferred();
    if (sent.ok()) ++sent_ok;
  }
  CHECK(sent_ok < 2999);
  CHECK_THAT(sent.message(), Catch::Contains("duplicate key value violates unique constraint"));
  CHECK_FALSE(db->Commit().ok());
  REQUIRE(db->Rollback().ok());
  CHECK(server->Query("SELECT COUNT(*) FROM items").value() == "3000");
}

TEST_CASE("postgres store: the leader's fence goes with the commit, after a takeover the commit fails, nothing "
          "of it is kept, and the leadership hears the epoch in force",
          "[store][postgres]") {
  TempDir dir("store-pg-fence");
  auto server = StartPostgres(dir.path());
  weft::store::StoreOptions options;
  options.backend = weft::store::Backend::kPostgres;
  options.conninfo = server->conninfo();
  auto opened = Store::Open(dir / "unused.db", options);
  Store& store = Opened(opened);
  // The election's table as server/leader keeps it, with epoch 1 in force.
  REQUIRE(server->Exec("CREATE TABLE weft_leader (id integer PRIMARY KEY, epoch bigint NOT NULL); "
                       "INSERT INTO weft_leader VALUES (1, 1)").ok());
  std::optional<std::int64_t> ours = 1;
  std::vector<std::int64_t> heard;
  store.SetLeaderFence({.epoch = [&] { return ours; },
                        .refused = [&](std::int64_t in_force) {
                          heard.push_back(in_force);
                          if (ours && in_force == *ours) return Status::Ok();
                          return Status::Unavailable("another weftd took over as leader");
                        }});
  auto tasks = [&] { return server->Query("SELECT COUNT(*) FROM tasks").value(); };

  TaskRecord kept = NewTask();
  REQUIRE(store.Begin().ok());
  REQUIRE(store.InsertTask(&kept).ok());
  REQUIRE(store.Commit().ok());
  CHECK(tasks() == "1");
  CHECK(heard.empty());

  REQUIRE(server->Exec("UPDATE weft_leader SET epoch = 2").ok());
  TaskRecord refused = NewTask();
  REQUIRE(store.Begin().ok());
  REQUIRE(store.InsertTask(&refused).ok());
  Status committed = store.Commit();
  CHECK(committed.code() == weft::Code::kUnavailable);
  CHECK(committed.message() == "another weftd took over as leader");
  REQUIRE(store.Rollback().ok());
  CHECK(heard == std::vector<std::int64_t>{2});
  CHECK(tasks() == "1");

  // One that no longer leads is refused before its COMMIT goes out.
  ours.reset();
  heard.clear();
  REQUIRE(store.Begin().ok());
  REQUIRE(store.InsertTask(&refused).ok());
  CHECK_FALSE(store.Commit().ok());
  REQUIRE(store.Rollback().ok());
  CHECK_FALSE(heard.empty());
  CHECK(tasks() == "1");
  store.SetLeaderFence({});
}

TEST_CASE("postgres store: a value bound in binary form reaches the server as it is, beside text ones, and the "
          "next run of the statement binds text again",
          "[store][postgres]") {
  TempDir dir("store-pg-binary");
  auto server = StartPostgres(dir.path());
  auto db = OpenItems(*server);
  // bigint[] {7, NULL, -2} with subscripts from 5, in array_recv's form: one
  // dimension, has NULLs, element type int8 (OID 20), 3 elements from 5; each
  // element its length (-1: NULL) and its bytes, all big-endian.
  const std::string array("\0\0\0\1" "\0\0\0\1" "\0\0\0\x14" "\0\0\0\3" "\0\0\0\5"
                          "\0\0\0\x08" "\0\0\0\0\0\0\0\x07"
                          "\xff\xff\xff\xff"
                          "\0\0\0\x08" "\xff\xff\xff\xff\xff\xff\xff\xfe",
                          20 + 12 + 4 + 12);
  const std::string text = R"(say "hi", {x} \)";  // as it is: no quotes or escapes as in an array's text
  auto read = Prepared(*db,
                       "SELECT array_lower(?1::bigint[], 1) || ':' || array_upper(?1::bigint[], 1) || ' ' || "
                       "array_to_string(?1::bigint[], ',', 'null') || ' ' || ?2::text || ' ' || ?3::bigint");
  for (int run = 0; run < 3; ++run) {  // the first run is sent with its text, the next ones prepared
    INFO("run " << run);
    REQUIRE(read.Reset().BindBinary(1, array).BindBinary(2, text).Bind(3, 42).Step().value());
    CHECK(read.Text(0) == "5:7 7,null,-2 " + text + " 42");
  }
  // Bound as text again after a reset: '{1,2}' is parsed, not read as bytes.
  REQUIRE(read.Reset().Bind(1, "{1,2}").Bind(2, "b").Bind(3, 1).Step().value());
  CHECK(read.Text(0) == "1:2 1,2 b 1");
  // In a transaction (pipeline mode) too.
  REQUIRE(db->Begin().ok());
  auto insert = Prepared(*db, "INSERT INTO items (id, n) SELECT i, i * 10 FROM unnest(?1::bigint[]) AS i "
                              "WHERE i IS NOT NULL");
  REQUIRE(insert.BindBinary(1, array).RunDeferred().ok());
  REQUIRE(db->Commit().ok());
  CHECK(server->Query("SELECT string_agg(id || '=' || n, ',' ORDER BY id) FROM items").value() == "-2=-20,7=70");
}

TEST_CASE("sqlite store: a value bound in binary form is a blob of its bytes", "[store]") {
  TempDir dir("store-sqlite-binary");
  weft::store::sql::SqliteDatabase db;
  REQUIRE(db.Open((dir / "binary.db").string(), 1000).ok());
  auto read = db.Prepare("SELECT typeof(?1), hex(?1), length(?1)");
  REQUIRE(read.ok());
  REQUIRE(read->BindBinary(1, std::string("\0\x01\xff", 3)).Step().value());
  CHECK(read->Text(0) == "blob");
  CHECK(read->Text(1) == "0001FF");
  CHECK(read->Int(2) == 3);
}

TEST_CASE("sqlite store: a write that finds the disk full ends the transaction, the rollback after it is no error, "
          "and the connection goes on once there is room",
          "[store][sqlite]") {
  TempDir dir("weft-store-full");
  weft::store::sql::SqliteDatabase db;
  REQUIRE(db.Open((dir.path() / "weft.db").string(), 1000).ok());
  REQUIRE(db.Exec("PRAGMA journal_mode = WAL").ok());
  REQUIRE(db.Exec("CREATE TABLE t (x BLOB)").ok());
  // Never beyond the pages it has now (SQLite keeps it at the current size): the next growth fails.
  REQUIRE(db.Exec("PRAGMA max_page_count = 1").ok());
  REQUIRE(db.Begin().ok());
  Status full = db.Exec("INSERT INTO t VALUES (zeroblob(200000))");
  REQUIRE_FALSE(full.ok());
  CHECK_THAT(full.message(), Catch::Contains("full"));
  // SQLite rolled the transaction back by itself: nothing is left to undo, and that is no failure.
  CHECK(sqlite3_get_autocommit(db.handle()) != 0);
  Status rolled_back = db.Rollback();
  INFO(rolled_back.message());
  CHECK(rolled_back.ok());

  REQUIRE(db.Exec("PRAGMA max_page_count = 1000000").ok());
  // A rollback of a transaction that is open still undoes it.
  REQUIRE(db.Begin().ok());
  REQUIRE(db.Exec("INSERT INTO t VALUES (zeroblob(200000))").ok());
  REQUIRE(db.Rollback().ok());
  CHECK(sqlite3_get_autocommit(db.handle()) != 0);
  REQUIRE(db.Begin().ok());
  REQUIRE(db.Exec("INSERT INTO t VALUES (zeroblob(200000))").ok());
  REQUIRE(db.Commit().ok());
  CHECK(db.Changes() == 1);
}
