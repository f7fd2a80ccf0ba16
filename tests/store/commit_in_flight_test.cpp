// A commit in flight on PostgreSQL (Store::SendCommit, then AwaitCommit): the
// next transaction begins behind it before its outcome is known. When it
// fails, nothing of the transaction behind it may commit, whether its
// statements were sent without waiting, ran at once, or read; when it
// commits, the one behind sees its writes.
#include <catch2/catch.hpp>

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
      .Query("SELECT string_agg(state || ':' || attempt || ':' || max_attempts, ',' ORDER BY id) FROM tasks")
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
