// The tasks table as the hot task writes find it: its ids after it lost
// AUTOINCREMENT (migration 14), a task's two rows (migration 21), and a task moved to a state that is not final
// through the short write (no attempt to archive) or the long one.
// The state cases run on SQLite and, with WEFT_TEST_STORE=postgres, on PostgreSQL.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

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

// Fails task `id` twice, as hosts would: attempt 1 on h1 ("broke", queued
// again), then attempt 2 on h2 ("broke again", with output) for good.
void FailTwice(Store& store, std::int64_t id) {
  REQUIRE(store.LeaseTask(id, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(id, 1, TaskState::kQueued, AttemptStatus::kFailed, "broke", "{}", "", "", 2500).ok());
  REQUIRE(store.LeaseTask(id, 2, "h2", 9000, 2600).ok());
  REQUIRE(store.EndAttempt(id, 2, TaskState::kFailed, AttemptStatus::kFailed, "broke again", "{}", "out", "err", 2700)
              .ok());
}

// The tasks of job 7 a migration case writes before it rewinds the store, in
// this order: one leased by h1, one failed for good (FailTwice), one waiting
// and, with `queued`, one queued.
struct Job7 {
  std::int64_t leased = 0, failed = 0, waiting = 0, queued = 0;
};

Job7 WriteJob7(const std::filesystem::path& path, bool queued) {
  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  Job7 j;
  j.leased = Insert(store, TaskState::kQueued, "7");
  j.failed = Insert(store, TaskState::kQueued, "7");
  j.waiting = Insert(store, TaskState::kWaiting, "7");
  if (queued) j.queued = Insert(store, TaskState::kQueued, "7");
  REQUIRE(store.LeaseTask(j.leased, 1, "h1", 9000, 2000).ok());
  FailTwice(store, j.failed);
  REQUIRE(store.Commit().ok());
  return j;
}

// What a migration must keep of WriteJob7's tasks: states, the lease, the
// attempts with their messages and output.
void CheckJob7(Store& store, const Job7& j) {
  const TaskRecord l = Get(store, j.leased);
  CHECK(l.state == TaskState::kLeased);
  CHECK(l.host_id == "h1");
  CHECK(l.lease_until_ms == 9000);
  const TaskRecord f = Get(store, j.failed);
  CHECK(f.state == TaskState::kFailed);
  CHECK(f.attempt == 2);
  CHECK(f.message == "broke again");
  CHECK(f.stdout_tail == "out");
  CHECK(f.stderr_tail == "err");
  auto attempts = store.ListAttempts(j.failed);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK((*attempts)[0].message == "broke");
  CHECK((*attempts)[1].status == "failed");
  CHECK(Get(store, j.waiting).state == TaskState::kWaiting);
  if (j.queued != 0) CHECK(Get(store, j.queued).state == TaskState::kQueued);
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
  const Job7 j = WriteJob7(path, false);
  const std::int64_t leased = j.leased, failed = j.failed, waiting = j.waiting;
  // The file as weftd left it before migration 14: the same table (as it
  // was before migration 21), with AUTOINCREMENT.
  REQUIRE(ExecStore(path, RewindFrom(14)) == "");
  const std::string table = SchemaSql(path, "tasks");
  const std::string plain = "id INTEGER PRIMARY KEY,";
  REQUIRE(table.find(plain) != std::string::npos);
  REQUIRE(table.find("payload") != std::string::npos);
  std::string old_table = table;
  old_table.replace(old_table.find(plain), plain.size(), "id INTEGER PRIMARY KEY AUTOINCREMENT,");
  old_table.replace(0, old_table.find('('), "CREATE TABLE tasks_old ");
  REQUIRE(ExecStore(path, old_table +
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
                      "'task_specs_by_tenant', 'task_specs_by_job')") == 3);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('tasks_v14', 'tasks_v21')") == 0);

  CheckJob7(store, j);
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
  const Job7 j = WriteJob7(path, true);
  const std::int64_t leased = j.leased, waiting = j.waiting, queued = j.queued;
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
  CheckJob7(store, j);
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

namespace {

// Every field of a task, in one line: two reads of one task compare whole.
std::string Fields(const TaskRecord& t) {
  return std::to_string(t.id) + "|" + t.tenant + "|" + t.plugin + "|" + t.action + "|" + t.job_id + "|" +
         t.cluster_id + "|" + t.node_id + "|" + std::string(weft::store::TaskStateName(t.state)) + "|" +
         std::to_string(t.attempt) + "|" + std::to_string(t.max_attempts) + "|" + t.host_id + "|" +
         std::to_string(t.created_at_ms) + "|" + std::to_string(t.updated_at_ms) + "|" +
         std::to_string(t.lease_until_ms) + "|" + t.payload_json + "|" + t.result_json + "|" + t.message + "|" +
         t.stdout_tail + "|" + t.stderr_tail + "|" + t.task_key + "|" + t.service + "|" + t.after_json;
}

// A task's attempts, as the store lists them, in one line.
std::string AttemptLines(Store& store, std::int64_t id) {
  auto listed = store.ListAttempts(id);
  REQUIRE(listed.ok());
  std::string out;
  for (const weft::store::AttemptRecord& a : *listed)
    out += std::to_string(a.task_id) + ":" + std::to_string(a.attempt) + ":" + a.host_id + ":" +
           std::to_string(a.taken_at_ms) + ":" + std::to_string(a.finished_at_ms) + ":" + a.status + ":" + a.message +
           ";";
  return out;
}

std::string Ids(const std::vector<TaskRecord>& tasks) {
  std::string out;
  for (const TaskRecord& t : tasks) out += std::to_string(t.id) + ",";
  return out;
}

}  // namespace

TEST_CASE("store tasks: a store from before a task's two rows (migration 21) keeps every task, state, attempt, "
          "output and attempt history, and a running task finishes after the upgrade",
          "[store]") {
  TempDir dir("task-specs");
  const auto path = dir / "weft.db";
  const bool postgres = weft::testing::TestStoreIsPostgres();
  std::int64_t queued = 0, leased = 0, succeeded = 0, failed = 0, waiting = 0;
  std::vector<std::string> fields, attempts;
  std::string unfinished, job;
  {
    auto opened = OpenStore(path);
    Store& store = Opened(opened);
    REQUIRE(store.Begin().ok());
    queued = Insert(store, TaskState::kQueued, "9");
    leased = Insert(store, TaskState::kQueued, "9");
    succeeded = Insert(store, TaskState::kQueued, "9");
    failed = Insert(store, TaskState::kQueued, "9");
    TaskRecord w;
    w.tenant = "acme";
    w.plugin = "fake-automator";
    w.action = "CONFIGURE";
    w.job_id = "9";
    w.cluster_id = "4";
    w.node_id = "web-1";
    w.state = TaskState::kWaiting;
    w.max_attempts = 2;
    w.created_at_ms = 1100;
    w.payload_json = R"({"port":8080})";
    w.task_key = "web-1/CONFIGURE/nginx";
    w.service = "nginx";
    w.after_json = "[" + std::to_string(succeeded) + "]";
    REQUIRE(store.InsertTask(&w).ok());
    waiting = w.id;
    REQUIRE(store.SetTaskMaxAttempts(waiting, 4).ok());
    REQUIRE(store.LeaseTask(leased, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.LeaseTask(succeeded, 1, "h1", 9000, 2000).ok());
    REQUIRE(store.EndAttempt(succeeded, 1, TaskState::kQueued, AttemptStatus::kExpired, "lease ran out", "{}", "", "",
                             2200)
                .ok());
    REQUIRE(store.LeaseTask(succeeded, 2, "h2", 9000, 2300).ok());
    REQUIRE(store.EndAttempt(succeeded, 2, TaskState::kSucceeded, AttemptStatus::kSucceeded, "done",
                             R"({"version":"1.2"})", "installed\n", "warning: old\n", 2400)
                .ok());
    FailTwice(store, failed);
    REQUIRE(store.Commit().ok());
    for (std::int64_t id : {queued, leased, succeeded, failed, waiting}) {
      fields.push_back(Fields(Get(store, id)));
      attempts.push_back(AttemptLines(store, id));
    }
    auto open = store.ListUnfinishedTasks();
    REQUIRE(open.ok());
    unfinished = Ids(*open);
    auto listed = store.ListJobTasks("9", true);
    REQUIRE(listed.ok());
    for (const TaskRecord& t : *listed) job += Fields(t) + "\n";
  }
  CHECK(unfinished == std::to_string(queued) + "," + std::to_string(leased) + ",");  // not waiting: not takeable
  CHECK(attempts[2] == std::to_string(succeeded) + ":1:h1:2000:2200:expired:lease ran out;" +
                           std::to_string(succeeded) + ":2:h2:2300:2400:succeeded:done;");

  // The store as weftd left it before migration 21: a task in one row of 25 columns.
  REQUIRE(ExecStore(path, RewindFrom(21)) == "");
  const std::string payload_in_tasks =
      postgres ? "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'tasks' AND column_name = 'payload'"
               : "SELECT COUNT(*) FROM pragma_table_info('tasks') WHERE name = 'payload'";
  const std::string specs_table = postgres ? "SELECT COUNT(*) FROM pg_class WHERE relname = 'task_specs'"
                                           : "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'task_specs'";
  REQUIRE(QueryStoreInt(path, payload_in_tasks) == 1);
  REQUIRE(QueryStoreInt(path, specs_table) == 0);
  REQUIRE(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks") == 5);

  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  CHECK(QueryStoreInt(path, payload_in_tasks) == 0);
  CHECK(QueryStoreInt(path, specs_table) == 1);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM task_specs") == 5);
  const std::vector<std::int64_t> ids = {queued, leased, succeeded, failed, waiting};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHECK(Fields(Get(store, ids[i])) == fields[i]);
    CHECK(AttemptLines(store, ids[i]) == attempts[i]);
  }
  auto open = store.ListUnfinishedTasks();
  REQUIRE(open.ok());
  CHECK(Ids(*open) == unfinished);
  auto listed = store.ListJobTasks("9", true);
  REQUIRE(listed.ok());
  std::string job_after;
  for (const TaskRecord& t : *listed) job_after += Fields(t) + "\n";
  CHECK(job_after == job);
  auto by_tenant = store.ListTasks("acme", std::nullopt, 10);
  REQUIRE(by_tenant.ok());
  CHECK(Ids(*by_tenant) == std::to_string(waiting) + ",");
  auto counts = store.CountTasks();
  REQUIRE(counts.ok());
  CHECK(counts->queued == 1);
  CHECK(counts->leased == 1);
  CHECK(counts->succeeded == 1);
  CHECK(counts->failed == 1);
  CHECK(counts->waiting == 1);

  // The running task finishes (a fenced end of attempt 1), a finished one
  // refuses an end of another attempt, and new tasks go on after the old ones.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(leased, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "ok", R"({"x":1})", "o", "e",
                           3000)
              .ok());
  REQUIRE(store.LeaseTask(queued, 1, "h3", 9500, 3000).ok());
  REQUIRE(store.SetTaskState(waiting, TaskState::kQueued, "", 0, 3000).ok());
  CHECK(Insert(store, TaskState::kQueued) == waiting + 1);
  REQUIRE(store.Commit().ok());
  const TaskRecord done = Get(store, leased);
  CHECK(done.state == TaskState::kSucceeded);
  CHECK(done.result_json == R"({"x":1})");
  CHECK(done.stdout_tail == "o");
  CHECK(done.payload_json == "{}");
  CHECK(AttemptLines(store, leased) == std::to_string(leased) + ":1:h1:2000:3000:succeeded:ok;");
  CHECK(Get(store, queued).host_id == "h3");
  CHECK(Get(store, waiting).state == TaskState::kQueued);
  CHECK(Get(store, waiting).max_attempts == 4);
  REQUIRE(store.Begin().ok());
  weft::Status late =
      store.EndAttempt(succeeded, 1, TaskState::kFailed, AttemptStatus::kFailed, "late", "{}", "", "", 3100);
  if (late.ok()) late = store.Commit();  // PostgreSQL: the gathered write fails at the commit
  CHECK_FALSE(late.ok());
  REQUIRE(store.Rollback().ok());
  CHECK(Get(store, succeeded).state == TaskState::kSucceeded);
  open = store.ListUnfinishedTasks();
  REQUIRE(open.ok());
  CHECK(Ids(*open) == std::to_string(queued) + "," + std::to_string(waiting) + "," + std::to_string(waiting + 1) + ",");
  // The state check still holds on the narrower row.
  CHECK(ExecStore(path, "UPDATE tasks SET state = 'lost'") != "");

  // PostgreSQL's migration 21 runs again on a store it has split (one whose
  // schema_migrations was rewound): every task keeps its two rows as they were.
  if (!postgres) return;
  const std::vector<std::int64_t> all = {queued, leased, succeeded, failed, waiting, waiting + 1};
  std::vector<std::string> split_fields, split_attempts;
  for (std::int64_t id : all) {
    split_fields.push_back(Fields(Get(store, id)));
    split_attempts.push_back(AttemptLines(store, id));
  }
  opened->reset();
  // Migration 21 and the later ones run again (their added columns dropped: SQLite cannot add one only if missing).
  REQUIRE(ExecStore(path, "DELETE FROM schema_migrations WHERE version >= 21; "
                          "ALTER TABLE resource_names DROP COLUMN deleted; "
                          "ALTER TABLE sessions DROP COLUMN token_hash; ALTER TABLE hosts DROP COLUMN incarnation; "
                          "ALTER TABLE hosts DROP COLUMN draining") == "");
  auto rerun = OpenStore(path);
  Store& again = Opened(rerun);
  CHECK(again.schema_version() == Store::LatestSchemaVersion());
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM schema_migrations WHERE version = 21") == 1);
  CHECK(QueryStoreInt(path, payload_in_tasks) == 0);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM task_specs") == 6);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('task_specs_by_tenant', "
                            "'task_specs_by_job')") == 2);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(Fields(Get(again, all[i])) == split_fields[i]);
    CHECK(AttemptLines(again, all[i]) == split_attempts[i]);
  }
  REQUIRE(again.Begin().ok());
  REQUIRE(again.LeaseTask(waiting + 1, 1, "h4", 9900, 3200).ok());
  REQUIRE(again.Commit().ok());
  CHECK(Get(again, waiting + 1).state == TaskState::kLeased);
  CHECK(Get(again, waiting + 1).host_id == "h4");
}
