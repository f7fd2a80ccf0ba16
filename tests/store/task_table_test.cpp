// The tasks table as the hot task writes find it: its ids after it lost
// AUTOINCREMENT (migration 14), and a task moved to a state that is not final
// through the short write (no attempt to archive) or the long one.
// The state cases run on SQLite and, with WEFT_TEST_STORE=postgres, on PostgreSQL.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include <string>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/server/store/store.hpp"

using weft::AttemptStatus;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::testing::ExecStore;
using weft::testing::Opened;
using weft::testing::OpenStore;
using weft::testing::QueryStoreInt;
using weft::testing::RewindFrom;
using weft::testing::TempDir;

namespace {

std::int64_t Insert(Store& store, TaskState state, const std::string& job_id = "") {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = "fake-automator";
  t.action = "INSTALL";
  t.job_id = job_id;
  t.state = state;
  t.max_attempts = 3;
  t.after_json = state == TaskState::kWaiting ? "[1]" : "[]";
  t.created_at_ms = 1000;
  REQUIRE(store.InsertTask(&t).ok());
  return t.id;
}

TaskRecord Get(Store& store, std::int64_t id) {
  auto got = store.GetTask(id);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  return **got;
}

bool Unfinished(Store& store, std::int64_t id) {
  auto listed = store.ListUnfinishedTasks();
  REQUIRE(listed.ok());
  for (const TaskRecord& t : *listed)
    if (t.id == id) return true;
  return false;
}

// The SQL of a schema object of the SQLite file at `path`.
std::string SchemaSql(const std::filesystem::path& path, const std::string& name) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_schema WHERE name = ?1", -1, &st, nullptr) == SQLITE_OK);
  sqlite3_bind_text(st, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  std::string sql;
  if (sqlite3_step(st) == SQLITE_ROW) sql = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return sql;
}

}  // namespace

TEST_CASE(
    "store tasks: the tasks table without AUTOINCREMENT (migration 14) keeps every task, attempt and id, and "
    "numbers new tasks after them",
    "[store][sqlite]") {
  TempDir dir("task-table");
  const auto path = dir / "weft.db";
  std::int64_t leased = 0, failed = 0, waiting = 0;
  {
    auto opened = OpenStore(path);
    Store& store = Opened(opened);
    REQUIRE(store.Begin().ok());
    leased = Insert(store, TaskState::kQueued, "7");
    failed = Insert(store, TaskState::kQueued, "7");
    waiting = Insert(store, TaskState::kWaiting, "7");
    REQUIRE(store.LeaseTask(leased, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.LeaseTask(failed, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.EndAttempt(failed, 1, TaskState::kQueued, AttemptStatus::kFailed, "broke", "{}", "", "", 2500).ok());
    REQUIRE(store.LeaseTask(failed, 2, "h2", 9000, 2600).ok());
    REQUIRE(
        store.EndAttempt(failed, 2, TaskState::kFailed, AttemptStatus::kFailed, "broke again", "{}", "out", "err", 2700)
            .ok());
    REQUIRE(store.Commit().ok());
  }
  // The file as weftd left it before migration 14: the same table, with AUTOINCREMENT.
  const std::string table = SchemaSql(path, "tasks");
  const std::string plain = "id INTEGER PRIMARY KEY,";
  REQUIRE(table.find(plain) != std::string::npos);
  std::string old_table = table;
  old_table.replace(old_table.find(plain), plain.size(), "id INTEGER PRIMARY KEY AUTOINCREMENT,");
  old_table.replace(0, old_table.find('('), "CREATE TABLE tasks_old ");
  REQUIRE(ExecStore(path, RewindFrom(14) + old_table +
                              "; INSERT INTO tasks_old SELECT * FROM tasks; DROP TABLE tasks; "
                              "ALTER TABLE tasks_old RENAME TO tasks; "
                              "CREATE INDEX tasks_unfinished ON tasks (id) WHERE finished_at_ms = 0; "
                              "CREATE INDEX tasks_by_tenant ON tasks (tenant, id); "
                              "CREATE INDEX tasks_by_job ON tasks (job_id, id) WHERE job_id != ''") == "");
  REQUIRE(QueryStoreInt(path, "SELECT seq FROM sqlite_sequence WHERE name = 'tasks'") == waiting);

  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  CHECK(SchemaSql(path, "tasks").find("AUTOINCREMENT") == std::string::npos);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'tasks'") == 0);
  CHECK(QueryStoreInt(path,
                      "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('tasks_unfinished', "
                      "'tasks_by_tenant', 'tasks_by_job')") == 3);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'tasks_v14'") == 0);

  const TaskRecord l = Get(store, leased);
  CHECK(l.state == TaskState::kLeased);
  CHECK(l.host_id == "h1");
  CHECK(l.lease_until_ms == 9000);
  const TaskRecord f = Get(store, failed);
  CHECK(f.state == TaskState::kFailed);
  CHECK(f.attempt == 2);
  CHECK(f.message == "broke again");
  CHECK(f.stdout_tail == "out");
  CHECK(f.stderr_tail == "err");
  auto attempts = store.ListAttempts(failed);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK((*attempts)[0].message == "broke");
  CHECK((*attempts)[1].status == "failed");
  CHECK(Get(store, waiting).state == TaskState::kWaiting);
  CHECK(Unfinished(store, leased));
  CHECK_FALSE(Unfinished(store, failed));
  auto jobs = store.ListJobTasks("7", false);
  REQUIRE(jobs.ok());
  CHECK(jobs->size() == 3);

  // New tasks go on after the old ones.
  REQUIRE(store.Begin().ok());
  CHECK(Insert(store, TaskState::kQueued) == waiting + 1);
  REQUIRE(store.Commit().ok());
  // The state check still holds.
  CHECK(ExecStore(path, "UPDATE tasks SET state = 'lost'") != "");
}

TEST_CASE("store tasks: a task moved to queued or waiting keeps its attempts and message as the state it left asks",
          "[store]") {
  TempDir dir("task-state");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  // Waiting, made ready: nothing to archive, still unfinished.
  const std::int64_t ready = Insert(store, TaskState::kWaiting);
  REQUIRE(store.SetTaskState(ready, TaskState::kQueued, "", 0, 1500).ok());
  // Failed at its last attempt, queued again by a job retry with a backoff.
  const std::int64_t retried = Insert(store, TaskState::kQueued);
  REQUIRE(store.LeaseTask(retried, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(retried, 1, TaskState::kFailed, AttemptStatus::kFailed, "broke", "{}", "", "", 2500).ok());
  REQUIRE(store.SetTaskState(retried, TaskState::kQueued, "attempt 2 in 100 ms", 2600, 2500).ok());
  // Succeeded, sent back to waiting with a message (its node is made again), then ready.
  const std::int64_t again = Insert(store, TaskState::kQueued);
  REQUIRE(store.LeaseTask(again, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(again, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 2100).ok());
  REQUIRE(store.SetTaskState(again, TaskState::kWaiting, "made again", 0, 2200).ok());
  const TaskRecord back = Get(store, again);
  CHECK(back.state == TaskState::kWaiting);
  CHECK(back.message == "made again");
  REQUIRE(store.SetTaskState(again, TaskState::kQueued, "", 0, 2300).ok());
  // A task that does not exist is said to be missing.
  CHECK(store.SetTaskState(999999, TaskState::kQueued, "", 0, 2400).code() == weft::Code::kNotFound);
  REQUIRE(store.Commit().ok());

  const TaskRecord r = Get(store, ready);
  CHECK(r.state == TaskState::kQueued);
  CHECK(r.updated_at_ms == 1500);
  CHECK(r.lease_until_ms == 0);
  auto none = store.ListAttempts(ready);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(Unfinished(store, ready));

  const TaskRecord q = Get(store, retried);
  CHECK(q.state == TaskState::kQueued);
  CHECK(q.message == "attempt 2 in 100 ms");
  CHECK(q.lease_until_ms == 2600);
  auto archived = store.ListAttempts(retried);
  REQUIRE(archived.ok());
  REQUIRE(archived->size() == 1);
  CHECK((*archived)[0].status == "failed");
  CHECK((*archived)[0].message == "broke");
  CHECK((*archived)[0].finished_at_ms == 2500);
  CHECK(Unfinished(store, retried));

  const TaskRecord a = Get(store, again);
  CHECK(a.state == TaskState::kQueued);
  CHECK(a.message.empty());
  CHECK(a.updated_at_ms == 2300);
  auto kept = store.ListAttempts(again);
  REQUIRE(kept.ok());
  REQUIRE(kept->size() == 1);
  CHECK((*kept)[0].status == "succeeded");
  CHECK(Unfinished(store, again));
}

TEST_CASE("store tasks: a store from before the state became an ENUM on PostgreSQL (migration 15) keeps every task, "
          "attempt and id, still refuses an unknown state, and takes and finishes as before",
          "[store]") {
  TempDir dir("task-state-enum");
  const auto path = dir / "weft.db";
  const bool postgres = weft::testing::TestStoreIsPostgres();
  std::int64_t leased = 0, failed = 0, waiting = 0, queued = 0;
  {
    auto opened = OpenStore(path);
    Store& store = Opened(opened);
    REQUIRE(store.Begin().ok());
    leased = Insert(store, TaskState::kQueued, "7");
    failed = Insert(store, TaskState::kQueued, "7");
    waiting = Insert(store, TaskState::kWaiting, "7");
    queued = Insert(store, TaskState::kQueued, "7");
    REQUIRE(store.LeaseTask(leased, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.LeaseTask(failed, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.EndAttempt(failed, 1, TaskState::kQueued, AttemptStatus::kFailed, "broke", "{}", "", "", 2500).ok());
    REQUIRE(store.LeaseTask(failed, 2, "h2", 9000, 2600).ok());
    REQUIRE(
        store.EndAttempt(failed, 2, TaskState::kFailed, AttemptStatus::kFailed, "broke again", "{}", "out", "err", 2700)
            .ok());
    REQUIRE(store.Commit().ok());
  }
  // The store as weftd left it before migration 15 (and 16, the function that
  // names a missed task write): on PostgreSQL the state a TEXT with a CHECK.
  REQUIRE(ExecStore(path, postgres ? RewindFrom(15) +
                                     "DROP FUNCTION weft_task_writes_missed(BIGINT[], BIGINT[], BIGINT[]); "
                                     "ALTER TABLE tasks ALTER COLUMN state TYPE TEXT; DROP TYPE task_state; "
                                     "ALTER TABLE tasks ADD CONSTRAINT tasks_state CHECK (state IN ('queued', "
                                     "'leased', 'succeeded', 'failed', 'waiting', 'cancelled'))"
                                   : RewindFrom(15)) == "");
  if (postgres) {
    REQUIRE(QueryStoreInt(path, "SELECT COUNT(*) FROM pg_constraint WHERE conname = 'tasks_state'") == 1);
    REQUIRE(QueryStoreInt(path, "SELECT COUNT(*) FROM pg_type WHERE typname = 'task_state'") == 0);
  }

  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  if (postgres) {
    // The state is checked as it is read in, by its type; no CHECK is left to compile per statement.
    CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'tasks' AND "
                              "column_name = 'state' AND udt_name = 'task_state'") == 1);
    CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM pg_constraint WHERE conname = 'tasks_state'") == 0);
  }
  const TaskRecord l = Get(store, leased);
  CHECK(l.state == TaskState::kLeased);
  CHECK(l.host_id == "h1");
  CHECK(l.lease_until_ms == 9000);
  const TaskRecord f = Get(store, failed);
  CHECK(f.state == TaskState::kFailed);
  CHECK(f.attempt == 2);
  CHECK(f.message == "broke again");
  auto attempts = store.ListAttempts(failed);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK((*attempts)[0].message == "broke");
  CHECK((*attempts)[1].status == "failed");
  CHECK(Get(store, waiting).state == TaskState::kWaiting);
  CHECK(Get(store, queued).state == TaskState::kQueued);
  auto counts = store.CountTasks();
  REQUIRE(counts.ok());
  CHECK(counts->queued == 1);
  CHECK(counts->leased == 1);
  CHECK(counts->failed == 1);
  CHECK(counts->waiting == 1);

  // Takes and finishes (one statement of them on PostgreSQL), a state set on its own, new ids after the old ones.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(leased, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "ok", "{}", "", "", 3000).ok());
  REQUIRE(store.LeaseTask(queued, 1, "h2", 9000, 3000).ok());
  REQUIRE(store.SetTaskState(waiting, TaskState::kCancelled, "job cancelled", 0, 3000).ok());
  CHECK(Insert(store, TaskState::kQueued) == queued + 1);
  REQUIRE(store.Commit().ok());
  CHECK(Get(store, leased).state == TaskState::kSucceeded);
  CHECK(Get(store, queued).state == TaskState::kLeased);
  CHECK(Get(store, waiting).state == TaskState::kCancelled);
  auto listed = store.ListTasks("default", TaskState::kLeased, 10);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().id == queued);

  // The state check still holds.
  CHECK(ExecStore(path, "UPDATE tasks SET state = 'lost'") != "");
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'") == 1);
}
