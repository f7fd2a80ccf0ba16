// A commit in flight on PostgreSQL (Store::SendCommit, then AwaitCommit): the
// next transaction begins behind it before its outcome is known. When it
// fails, nothing of the transaction behind it may commit, whether its
// statements were sent without waiting, ran at once, or read; when it
// commits, the one behind sees its writes. The COMMIT itself begins the next
// transaction; once confirmed with nothing behind it, that one waits for the
// next Begin() until EndChain(), and none is left open after a failure.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/server/store/store.hpp"

using weft::AttemptStatus;
using weft::Status;
using weft::store::Store;
using weft::store::TaskState;
using weft::testing::InsertCommittedTasks;
using weft::testing::Opened;
using weft::testing::PostgresServer;
using weft::testing::PostgresStoreOptions;
using weft::testing::StartPostgres;
using weft::testing::TempDir;

namespace {

struct PostgresStore {
  std::unique_ptr<PostgresServer> server;
  std::unique_ptr<Store> store;
};

PostgresStore Open(TempDir& dir) {
  auto server = StartPostgres(dir.path());
  weft::store::StoreOptions options = PostgresStoreOptions(*server);
  auto opened = Store::Open(dir / "unused.db", options);
  Opened(opened);
  return {std::move(server), std::move(*opened)};
}

Status Finish(Store& store, std::int64_t id, std::int64_t attempt) {
  return store.EndAttempt(id, attempt, TaskState::kSucceeded, AttemptStatus::kSucceeded, "done", "{}", "", "", 3000);
}

// Every task as state:attempt:max_attempts, read beside the store.
std::string Rows(const PostgresServer& server) {
  return server
      .Query("SELECT string_agg(t.state || ':' || t.attempt || ':' || s.max_attempts, ',' ORDER BY t.id) FROM tasks t "
                 "JOIN task_specs s ON s.id = t.id")
      .value();
}

}  // namespace

TEST_CASE("postgres store: when a commit in flight fails, the transaction begun behind it commits nothing",
          "[store][postgres]") {
  TempDir dir("commit-in-flight-fails");
  PostgresStore pg = Open(dir);
  Store& store = *pg.store;
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());

  SECTION("behind a write the server refuses") {
    REQUIRE(store.Begin().ok());
    REQUIRE(Finish(store, ids[0], 2).ok());  // stale: the task is at attempt 1
    REQUIRE(store.SendCommit().ok());
    CHECK(store.CommitInFlight());
    CHECK(!store.in_transaction());

    REQUIRE(store.Begin().ok());
    CHECK(store.LeaseTask(ids[1], 1, "host-b", 9000, 3000).ok());  // gathered, sent later
    // A statement that waits for its reply gets the earlier failure, not a commit of its own.
    CHECK(!store.SetTaskMaxAttempts(ids[2], 7).ok());
    CHECK(!store.GetTask(ids[1]).ok());
    const Status outcome = store.AwaitCommit();
    CHECK(outcome.code() == weft::Code::kNotFound);
    CHECK(outcome.message() == "task " + std::to_string(ids[0]) + " is not at attempt 2");
    // The later transaction was rolled back with it.
    CHECK(!store.in_transaction());
    CHECK(!store.CommitInFlight());
    CHECK(Rows(*pg.server) == "leased:1:3,queued:0:3,queued:0:3");
  }

  SECTION("behind a deposed leader's fence") {
    REQUIRE((*pg.server).Exec("CREATE TABLE weft_leader (id integer PRIMARY KEY, epoch bigint NOT NULL); "
                              "INSERT INTO weft_leader VALUES (1, 1)").ok());
    std::optional<std::int64_t> ours = 1;
    store.SetLeaderFence({.epoch = [&] { return ours; },
                          .refused = [&](std::int64_t in_force) {
                            if (ours && in_force == *ours) return Status::Ok();
                            return Status::Unavailable("another weftd took over as leader");
                          }});
    REQUIRE((*pg.server).Exec("UPDATE weft_leader SET epoch = 2").ok());
    REQUIRE(store.Begin().ok());
    REQUIRE(Finish(store, ids[0], 1).ok());
    REQUIRE(store.SendCommit().ok());
    REQUIRE(store.Begin().ok());
    CHECK(store.LeaseTask(ids[1], 1, "host-b", 9000, 3000).ok());
    const Status outcome = store.AwaitCommit();
    CHECK(outcome.code() == weft::Code::kUnavailable);
    CHECK(outcome.message() == "another weftd took over as leader");
    CHECK(!store.in_transaction());
    CHECK(Rows(*pg.server) == "leased:1:3,queued:0:3,queued:0:3");
    store.SetLeaderFence({});
  }

  // The connection is sound afterwards: the same writes, without the stale one, commit.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-b", 9000, 3000).ok());
  REQUIRE(store.SetTaskMaxAttempts(ids[2], 7).ok());
  REQUIRE(store.SendCommit().ok());
  REQUIRE(store.AwaitCommit().ok());
  CHECK(Rows(*pg.server) == "leased:1:3,leased:1:3,queued:0:7");
}

TEST_CASE("postgres store: the transaction begun behind a commit in flight sees its writes, and both commit",
          "[store][postgres]") {
  TempDir dir("commit-in-flight-commits");
  PostgresStore pg = Open(dir);
  Store& store = *pg.store;
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.SendCommit().ok());

  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1).ok());
  auto seen = store.GetTask(ids[1]);  // reads behind the COMMIT, whose reply it reads on the way
  REQUIRE(seen.ok());
  CHECK((*seen)->state == TaskState::kLeased);
  REQUIRE(store.AwaitCommit().ok());
  REQUIRE(store.SendCommit().ok());
  // Outside a transaction a read runs on its own, after the commit in flight.
  auto finished = store.GetTask(ids[0]);
  REQUIRE(finished.ok());
  CHECK((*finished)->state == TaskState::kSucceeded);
  REQUIRE(store.AwaitCommit().ok());
  CHECK(Rows(*pg.server) == "succeeded:1:3,leased:1:3,queued:0:3");
  CHECK(!store.CommitInFlight());
}

namespace {

// How many times `what` occurs in `text`.
std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The states of weftd's sessions on the server ("idle", "idle in transaction", ...).
std::string SessionStates(const PostgresServer& server) {
  return server.Query("SELECT COALESCE(string_agg(state, ','), '') FROM pg_stat_activity WHERE application_name = "
                      "'weftd'")
      .value();
}

// How many of weftd's sessions are in a transaction on the server.
std::string OpenTransactions(const PostgresServer& server) {
  return server.Query("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'weftd' AND xact_start IS "
                      "NOT NULL")
      .value();
}

}  // namespace

TEST_CASE("postgres store: a transaction begun behind a commit in flight needs no BEGIN of its own",
          "[store][postgres]") {
  TempDir dir("commit-in-flight-chain");
  auto server = StartPostgres(dir.path());
  // Every statement the server runs goes to its log, sessions that start later included.
  REQUIRE(server->Exec("ALTER SYSTEM SET log_statement = 'all'").ok());
  REQUIRE(server->Query("SELECT pg_reload_conf()").ok());
  for (int i = 0; i < 500 && server->Query("SHOW log_statement").value() != "all"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(server->Query("SHOW log_statement").value() == "all");
  auto opened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Opened(opened);
  Store& store = **opened;
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  REQUIRE(server->Exec("SELECT 'chain test starts'").ok());

  // Three transactions, each begun behind the commit of the one before.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.SendCommit().ok());
  for (std::size_t k = 1; k < ids.size(); ++k) {
    REQUIRE(store.Begin().ok());
    REQUIRE(store.LeaseTask(ids[k], 1, "host-a", 9000, 2000).ok());
    REQUIRE(store.AwaitCommit().ok());
    REQUIRE(store.SendCommit().ok());
  }
  REQUIRE(store.AwaitCommit().ok());
  CHECK(Rows(*server) == "leased:1:3,leased:1:3,leased:1:3");
  // Confirmed, with nothing behind it: the transaction its COMMIT began waits for the next Begin().
  CHECK(store.ChainWaiting());
  CHECK(OpenTransactions(*server) == "1");
  // Which needs no BEGIN either, though it comes after the outcome was read.
  REQUIRE(store.Begin().ok());
  CHECK(!store.ChainWaiting());
  REQUIRE(Finish(store, ids[2], 1).ok());
  REQUIRE(store.SendCommit().ok());
  REQUIRE(store.AwaitCommit().ok());
  CHECK(Rows(*server) == "leased:1:3,leased:1:3,succeeded:1:3");
  // EndChain() rolls back the one nothing used, and leaves no transaction open.
  REQUIRE(store.ChainWaiting());
  store.EndChain();
  CHECK(!store.ChainWaiting());
  CHECK(OpenTransactions(*server) == "0");
  CHECK(SessionStates(*server) == "idle");

  const std::string log = server->Log();
  const std::size_t start = log.find("chain test starts");
  REQUIRE(start != std::string::npos);
  const std::string ran = log.substr(start);
  // The first transaction's BEGIN is the only one: each COMMIT began the next transaction.
  CHECK(Count(ran, ": BEGIN\n") == 1);
  CHECK(Count(ran, ": COMMIT AND CHAIN\n") == 4);
  CHECK(Count(ran, ": ROLLBACK\n") == 1);  // the one begun by the last COMMIT, which nothing used

  // A commit that fails leaves no transaction open either, and the next one commits.
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 2).ok());  // stale: the task is at attempt 1
  REQUIRE(store.SendCommit().ok());
  CHECK(store.AwaitCommit().code() == weft::Code::kNotFound);
  CHECK(!store.ChainWaiting());
  CHECK(SessionStates(*server) == "idle");
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1).ok());
  REQUIRE(store.SendCommit().ok());
  REQUIRE(store.AwaitCommit().ok());
  CHECK(OpenTransactions(*server) == "1");
  store.EndChain();
  CHECK(OpenTransactions(*server) == "0");
  CHECK(SessionStates(*server) == "idle");
  CHECK(Rows(*server) == "succeeded:1:3,leased:1:3,succeeded:1:3");
}
