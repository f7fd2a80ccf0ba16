// A task's current attempt lives in its tasks row; the attempts table keeps
// the attempts it superseded. Whatever the layout, every reader (ListAttempts,
// ListJobAttempts, the capacity window) sees each attempt once, as it ended.
// Run on SQLite and, with WEFT_TEST_STORE=postgres, on PostgreSQL.
#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/server/store/store.hpp"

using weft::AttemptStatus;
using weft::store::AttemptRecord;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::testing::ExecStore;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::QueryStoreInt;
using weft::testing::RewindFrom;
using weft::testing::TempDir;

namespace {

std::int64_t Insert(Store& store, const std::string& job_id = "", std::int64_t created_ms = 1000) {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = "fake-provider";
  t.action = "CREATE";
  t.job_id = job_id;
  t.max_attempts = 3;
  t.created_at_ms = created_ms;
  REQUIRE(store.InsertTask(&t).ok());
  return t.id;
}

std::vector<AttemptRecord> Attempts(Store& store, std::int64_t task_id) {
  auto listed = store.ListAttempts(task_id);
  if (!listed.ok()) FAIL(listed.status().ToString());
  return *listed;
}

bool Same(const AttemptRecord& x, const AttemptRecord& y) {
  return x.task_id == y.task_id && x.attempt == y.attempt && x.host_id == y.host_id &&
         x.taken_at_ms == y.taken_at_ms && x.finished_at_ms == y.finished_at_ms && x.status == y.status &&
         x.message == y.message;
}

// What job.get reads (ListJobTaskDetails) is what ListJobTasks with details and
// ListJobAttempts read, but the payloads.
void CheckJobTaskDetails(Store& store, const std::string& job_id) {
  auto tasks = store.ListJobTasks(job_id, true);
  auto attempts = store.ListJobAttempts(job_id);
  REQUIRE(tasks.ok());
  REQUIRE(attempts.ok());
  std::vector<TaskRecord> read_tasks;
  std::vector<AttemptRecord> read_attempts;
  weft::Status s = store.ListJobTaskDetails(job_id, &read_tasks, &read_attempts);
  if (!s.ok()) FAIL(s.ToString());
  REQUIRE(read_tasks.size() == tasks->size());
  for (std::size_t i = 0; i < read_tasks.size(); ++i) {
    const TaskRecord& x = read_tasks[i];
    const TaskRecord& y = (*tasks)[i];
    INFO("task " << y.id);
    CHECK(x.id == y.id);
    CHECK(x.state == y.state);
    CHECK(x.attempt == y.attempt);
    CHECK(x.host_id == y.host_id);
    CHECK(x.updated_at_ms == y.updated_at_ms);
    CHECK(x.lease_until_ms == y.lease_until_ms);
    CHECK(x.result_json == y.result_json);
    CHECK(x.message == y.message);
    CHECK(x.stdout_tail == y.stdout_tail);
    CHECK(x.stderr_tail == y.stderr_tail);
    CHECK(x.after_json == y.after_json);
    CHECK(x.payload_json.empty());
  }
  REQUIRE(read_attempts.size() == attempts->size());
  for (std::size_t i = 0; i < read_attempts.size(); ++i) {
    INFO("attempt " << (*attempts)[i].attempt << " of task " << (*attempts)[i].task_id);
    CHECK(Same(read_attempts[i], (*attempts)[i]));
  }
}

std::vector<AttemptRecord> JobAttempts(Store& store, const std::string& job_id) {
  auto listed = store.ListJobAttempts(job_id);
  if (!listed.ok()) FAIL(listed.status().ToString());
  CheckJobTaskDetails(store, job_id);
  return *listed;
}

void CheckAttempt(const AttemptRecord& a, std::int64_t attempt, const std::string& host, std::int64_t taken,
                  std::int64_t finished, const std::string& status, const std::string& message) {
  INFO("attempt " << a.attempt << " of task " << a.task_id);
  CHECK(a.attempt == attempt);
  CHECK(a.host_id == host);
  CHECK(a.taken_at_ms == taken);
  CHECK(a.finished_at_ms == finished);
  CHECK(a.status == status);
  CHECK(a.message == message);
}

std::int64_t ArchivedRows(const std::filesystem::path& path, std::int64_t task_id) {
  return QueryStoreInt(path, "SELECT COUNT(*) FROM attempts WHERE task_id = " + std::to_string(task_id));
}

}  // namespace

TEST_CASE("store attempts: two failed attempts and a succeeded one are listed once each, the last from the task's "
          "own row",
          "[store]") {
  TempDir dir("attempts-three");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  const std::int64_t id = Insert(store, "9");
  REQUIRE(store.LeaseTask(id, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(id, 1, TaskState::kQueued, AttemptStatus::kFailed, "boom 1", "{}", "", "", 2500).ok());
  REQUIRE(store.LeaseTask(id, 2, "h2", 9000, 3000).ok());
  REQUIRE(store.EndAttempt(id, 2, TaskState::kQueued, AttemptStatus::kFailed, "boom 2", "{}", "", "", 3500).ok());
  REQUIRE(store.LeaseTask(id, 3, "h3", 9000, 4000).ok());
  REQUIRE(store.Commit().ok());

  // The third is running: not finished, no message yet.
  std::vector<AttemptRecord> running = Attempts(store, id);
  REQUIRE(running.size() == 3);
  CheckAttempt(running[2], 3, "h3", 4000, 0, "running", "");

  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(id, 3, TaskState::kSucceeded, AttemptStatus::kSucceeded, "done", "{}", "", "", 4500).ok());
  REQUIRE(store.Commit().ok());
  for (const std::vector<AttemptRecord>& listed : {Attempts(store, id), JobAttempts(store, "9")}) {
    REQUIRE(listed.size() == 3);
    CheckAttempt(listed[0], 1, "h1", 2000, 2500, "failed", "boom 1");
    CheckAttempt(listed[1], 2, "h2", 3000, 3500, "failed", "boom 2");
    CheckAttempt(listed[2], 3, "h3", 4000, 4500, "succeeded", "done");
    for (const AttemptRecord& a : listed) CHECK(a.task_id == id);
  }
  // The take and the finish of the last attempt wrote the task's row only.
  CHECK(ArchivedRows(path, id) == 2);
}

TEST_CASE("store attempts: an undelivered attempt and a later one with the same number are listed once",
          "[store]") {
  TempDir dir("attempts-undelivered");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  const std::int64_t id = Insert(store);
  REQUIRE(store.LeaseTask(id, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(id, 1, TaskState::kQueued, AttemptStatus::kUndelivered, "h1 went away", "{}", "", "", 2100)
              .ok());
  REQUIRE(store.LeaseTask(id, 1, "h2", 9000, 3000).ok());
  REQUIRE(store.Commit().ok());
  std::vector<AttemptRecord> listed = Attempts(store, id);
  REQUIRE(listed.size() == 1);
  CheckAttempt(listed[0], 1, "h2", 3000, 0, "running", "");

  // Undelivered again: the archived attempt is replaced, not added.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(id, 1, TaskState::kQueued, AttemptStatus::kUndelivered, "h2 went away", "{}", "", "", 3100)
              .ok());
  REQUIRE(store.Commit().ok());
  listed = Attempts(store, id);
  REQUIRE(listed.size() == 1);
  CheckAttempt(listed[0], 1, "h2", 3000, 3100, "undelivered", "h2 went away");

  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(id, 1, "h3", 9000, 4000).ok());
  REQUIRE(store.EndAttempt(id, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 4200).ok());
  REQUIRE(store.Commit().ok());
  listed = Attempts(store, id);
  REQUIRE(listed.size() == 1);
  CheckAttempt(listed[0], 1, "h3", 4000, 4200, "succeeded", "");
}

TEST_CASE("store attempts: a job retry keeps the attempts of the earlier run, failed and cancelled", "[store]") {
  TempDir dir("attempts-job-retry");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  const std::int64_t failed = Insert(store, "4");
  const std::int64_t cancelled = Insert(store, "4");
  REQUIRE(store.LeaseTask(failed, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(failed, 1, TaskState::kFailed, AttemptStatus::kFailed, "broke", "{}", "", "", 2500).ok());
  REQUIRE(store.LeaseTask(cancelled, 1, "h2", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(cancelled, 1, TaskState::kCancelled, AttemptStatus::kCancelled, "cancelled: job 4 failed",
                           "{}", "", "", 2600)
              .ok());
  REQUIRE(store.Commit().ok());

  // The job engine's retry: the failed task is queued again with more
  // attempts, the cancelled one waits again and is then made ready.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.SetTaskMaxAttempts(failed, 4).ok());
  REQUIRE(store.SetTaskState(failed, TaskState::kQueued, "retried with job 4", 5000, 5000).ok());
  REQUIRE(store.SetTaskState(cancelled, TaskState::kWaiting, "", 0, 5000).ok());
  REQUIRE(store.SetTaskState(cancelled, TaskState::kQueued, "", 0, 5001).ok());
  REQUIRE(store.Commit().ok());
  auto queued = store.GetTask(failed);
  REQUIRE(queued.ok());
  CHECK((*queued)->message == "retried with job 4");
  CheckAttempt(Attempts(store, failed).at(0), 1, "h1", 2000, 2500, "failed", "broke");

  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(failed, 2, "h3", 9000, 6000).ok());
  REQUIRE(store.EndAttempt(failed, 2, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 6500).ok());
  REQUIRE(store.LeaseTask(cancelled, 2, "h4", 9000, 6000).ok());
  REQUIRE(store.Commit().ok());

  const std::vector<AttemptRecord> listed = JobAttempts(store, "4");
  REQUIRE(listed.size() == 4);
  CHECK(listed[0].task_id == failed);
  CheckAttempt(listed[0], 1, "h1", 2000, 2500, "failed", "broke");
  CheckAttempt(listed[1], 2, "h3", 6000, 6500, "succeeded", "");
  CHECK(listed[2].task_id == cancelled);
  CheckAttempt(listed[2], 1, "h2", 2000, 2600, "cancelled", "cancelled: job 4 failed");
  CheckAttempt(listed[3], 2, "h4", 6000, 0, "running", "");
  CHECK(Attempts(store, cancelled).size() == 2);
}

TEST_CASE("store attempts: job.get's read of a job's tasks with their attempts matches the tasks and attempts read "
          "apart, for tasks waiting, running, retried, undelivered, ended and of another job",
          "[store]") {
  TempDir dir("attempts-job-details");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  REQUIRE(store.Begin().ok());
  const std::int64_t waiting = Insert(store, "7");
  const std::int64_t running = Insert(store, "7");
  const std::int64_t retried = Insert(store, "7");
  const std::int64_t undelivered = Insert(store, "7");
  const std::int64_t other = Insert(store, "8");
  const std::int64_t succeeded = Insert(store, "7");
  REQUIRE(store.LeaseTask(running, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(retried, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(retried, 1, TaskState::kQueued, AttemptStatus::kFailed, "boom", "{}", "out", "err", 2100)
              .ok());
  REQUIRE(store.LeaseTask(retried, 2, "h2", 9000, 3000).ok());
  REQUIRE(store.EndAttempt(retried, 2, TaskState::kFailed, AttemptStatus::kFailed, "boom again", "{\"x\":1}", "o2",
                           "e2", 3100)
              .ok());
  REQUIRE(store.LeaseTask(undelivered, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(undelivered, 1, TaskState::kQueued, AttemptStatus::kUndelivered, "h1 went away", "{}", "",
                           "", 2200)
              .ok());
  REQUIRE(store.LeaseTask(undelivered, 1, "h2", 9000, 3000).ok());
  REQUIRE(store.LeaseTask(other, 1, "h3", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(other, 1, TaskState::kQueued, AttemptStatus::kFailed, "not this job", "{}", "", "", 2300)
              .ok());
  REQUIRE(store.LeaseTask(succeeded, 1, "h1", 9000, 2000).ok());
  REQUIRE(store.EndAttempt(succeeded, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "done", "{\"ip\":\"a\"}",
                           "all fine", "", 2400)
              .ok());
  REQUIRE(store.Commit().ok());

  std::vector<TaskRecord> tasks;
  std::vector<AttemptRecord> attempts;
  REQUIRE(store.ListJobTaskDetails("7", &tasks, &attempts).ok());
  REQUIRE(tasks.size() == 5);
  CHECK(tasks[0].id == waiting);
  CHECK(tasks[4].id == succeeded);
  CHECK(tasks[4].result_json == "{\"ip\":\"a\"}");
  CHECK(tasks[4].stdout_tail == "all fine");
  REQUIRE(attempts.size() == 5);
  CHECK(attempts[0].task_id == running);
  CheckAttempt(attempts[0], 1, "h1", 2000, 0, "running", "");
  CHECK(attempts[1].task_id == retried);
  CheckAttempt(attempts[1], 1, "h1", 2000, 2100, "failed", "boom");
  CheckAttempt(attempts[2], 2, "h2", 3000, 3100, "failed", "boom again");
  CHECK(attempts[3].task_id == undelivered);
  CheckAttempt(attempts[3], 1, "h2", 3000, 0, "running", "");
  CHECK(attempts[4].task_id == succeeded);
  CheckAttempt(attempts[4], 1, "h1", 2000, 2400, "succeeded", "done");
  CheckJobTaskDetails(store, "7");
  CheckJobTaskDetails(store, "8");

  // A job without tasks: nothing, and what was in the vectors is gone.
  REQUIRE(store.ListJobTaskDetails("99", &tasks, &attempts).ok());
  CHECK(tasks.empty());
  CHECK(attempts.empty());
}

TEST_CASE("store attempts: the capacity window counts current attempts, of tasks created before it too",
          "[store]") {
  TempDir dir("attempts-capacity");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  constexpr std::int64_t kSince = 100000;
  REQUIRE(store.Begin().ok());
  // Created before the window, run inside it (the late task of a long job).
  const std::int64_t old_task = Insert(store, "", 50000);
  REQUIRE(store.LeaseTask(old_task, 1, "h1", 200000, 100100).ok());
  REQUIRE(store.EndAttempt(old_task, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 100600)
              .ok());
  // Created before the window and still running since before it: not started in it.
  const std::int64_t long_running = Insert(store, "", 60000);
  REQUIRE(store.LeaseTask(long_running, 1, "h2", 200000, 70000).ok());
  // In the window: one running, one failed after 200 ms (waited 10 ms).
  const std::int64_t running = Insert(store, "", 101000);
  REQUIRE(store.LeaseTask(running, 1, "h3", 200000, 101000).ok());
  const std::int64_t failed = Insert(store, "", 102000);
  REQUIRE(store.LeaseTask(failed, 1, "h4", 200000, 102010).ok());
  REQUIRE(store.EndAttempt(failed, 1, TaskState::kFailed, AttemptStatus::kFailed, "no", "{}", "", "", 102210).ok());
  REQUIRE(store.Commit().ok());

  auto loads = store.MeasureLoad(kSince, "");
  REQUIRE(loads.ok());
  REQUIRE(loads->size() == 1);
  const weft::store::TenantLoad& load = loads->front();
  CHECK(load.tenant == "default");
  CHECK(load.started == 3);  // the old task's, the running one, the failed one
  CHECK(load.retried == 0);
  CHECK(load.served == 2);
  CHECK(load.service_ms_sum == Approx(500 + 200));
  CHECK(load.waited == 3);
  CHECK(load.wait_ms_sum == Approx(50100 + 0 + 10));
}

TEST_CASE("store attempts: opening a store from before the attempt moved into the task's row (migration 11) lists "
          "the same attempts",
          "[store]") {
  TempDir dir("attempts-migration");
  const auto path = dir / "weft.db";
  {
    auto made = OpenStore(path);
    Opened(made);
  }
  // The tasks and attempts as weftd wrote them before migration 11: every
  // attempt a row of its own, the task's current one included.
  REQUIRE(ExecStore(path,
                    RewindFrom(11) +
                    "ALTER TABLE tasks DROP COLUMN taken_at_ms; ALTER TABLE tasks DROP COLUMN attempt_status; "
                    "DROP INDEX IF EXISTS tasks_unfinished; ALTER TABLE tasks DROP COLUMN finished_at_ms; "
                    "CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased'); "
                    "INSERT INTO tasks (id, tenant, plugin, action, job_id, state, attempt, max_attempts, host_id, "
                    "created_at_ms, updated_at_ms, lease_until_ms, message) VALUES "
                    // leased mid-attempt 2, after attempt 1 expired
                    "(1, 'default', 'fake', 'CREATE', '5', 'leased', 2, 3, 'h2', 1000, 3000, 9000, 'expired'), "
                    // succeeded at attempt 1
                    "(2, 'default', 'fake', 'CREATE', '5', 'succeeded', 1, 3, 'h1', 1000, 2500, 0, 'ok'), "
                    // queued again after a failed attempt (a retry waiting for its backoff)
                    "(3, 'default', 'fake', 'CREATE', '5', 'queued', 1, 3, 'h1', 1000, 2600, 8000, 'retry'), "
                    // failed, then cancelled with its job: its row no longer says how the attempt ended
                    "(4, 'default', 'fake', 'CREATE', '5', 'cancelled', 1, 3, 'h3', 1000, 4000, 0, 'job failed'); "
                    "INSERT INTO attempts (task_id, attempt, host_id, taken_at_ms, finished_at_ms, status, message) "
                    "VALUES (1, 1, 'h1', 2000, 2900, 'expired', 'lease ran out'), "
                    "(1, 2, 'h2', 3000, 0, 'running', ''), "
                    "(2, 1, 'h1', 2000, 2500, 'succeeded', 'ok'), "
                    "(3, 1, 'h1', 2000, 2600, 'failed', 'broke'), "
                    "(4, 1, 'h3', 2000, 3000, 'failed', 'broke too')") == "");

  auto opened = OpenStore(path);
  Store& store = Opened(opened);
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  auto check_all = [&] {
    std::vector<AttemptRecord> one = Attempts(store, 1);
    REQUIRE(one.size() == 2);
    CheckAttempt(one[0], 1, "h1", 2000, 2900, "expired", "lease ran out");
    CheckAttempt(one[1], 2, "h2", 3000, 0, "running", "");
    std::vector<AttemptRecord> two = Attempts(store, 2);
    REQUIRE(two.size() == 1);
    CheckAttempt(two[0], 1, "h1", 2000, 2500, "succeeded", "ok");
    std::vector<AttemptRecord> three = Attempts(store, 3);
    REQUIRE(three.size() == 1);
    CheckAttempt(three[0], 1, "h1", 2000, 2600, "failed", "broke");
    std::vector<AttemptRecord> four = Attempts(store, 4);
    REQUIRE(four.size() == 1);
    CheckAttempt(four[0], 1, "h3", 2000, 3000, "failed", "broke too");
    CHECK(JobAttempts(store, "5").size() == 5);
  };
  check_all();
  // The current attempts of the leased and the succeeded task moved into their rows.
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM attempts") == 3);

  // The leased task's attempt goes on where it was: it ends as before.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(1, 2, TaskState::kSucceeded, AttemptStatus::kSucceeded, "fine", "{}", "", "", 3500).ok());
  REQUIRE(store.Commit().ok());
  std::vector<AttemptRecord> ended = Attempts(store, 1);
  REQUIRE(ended.size() == 2);
  CheckAttempt(ended[1], 2, "h2", 3000, 3500, "succeeded", "fine");
}

TEST_CASE("store unfinished tasks: the queued and leased ones, a finished task queued again among them, the same "
          "after migration 12 from a store that had none marked",
          "[store]") {
  TempDir dir("unfinished");
  const auto path = dir / "weft.db";
  auto opened = std::make_unique<weft::Result<std::unique_ptr<Store>>>(OpenStore(path));
  Store* store = &Opened(*opened);
  REQUIRE(store->Begin().ok());
  const std::int64_t queued = Insert(*store);
  TaskRecord waiting_task;
  waiting_task.tenant = "default";
  waiting_task.plugin = "fake-provider";
  waiting_task.action = "CREATE";
  waiting_task.state = TaskState::kWaiting;
  waiting_task.created_at_ms = 1000;
  REQUIRE(store->InsertTask(&waiting_task).ok());
  const std::int64_t leased = Insert(*store);
  REQUIRE(store->LeaseTask(leased, 1, "h1", 9000, 2000).ok());
  const std::int64_t succeeded = Insert(*store);
  REQUIRE(store->LeaseTask(succeeded, 1, "h1", 9000, 2000).ok());
  REQUIRE(store->EndAttempt(succeeded, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 2100)
              .ok());
  const std::int64_t cancelled = Insert(*store);
  REQUIRE(store->SetTaskState(cancelled, TaskState::kCancelled, "job aborted", 0, 2200).ok());
  const std::int64_t retried = Insert(*store);
  REQUIRE(store->LeaseTask(retried, 1, "h1", 9000, 2000).ok());
  REQUIRE(store->EndAttempt(retried, 1, TaskState::kFailed, AttemptStatus::kFailed, "broke", "{}", "", "", 2300).ok());
  REQUIRE(store->SetTaskState(retried, TaskState::kQueued, "retried with job 1", 2400, 2400).ok());
  REQUIRE(store->Commit().ok());

  auto check_unfinished = [&](Store& s) {
    auto listed = s.ListUnfinishedTasks();
    REQUIRE(listed.ok());
    REQUIRE(listed->size() == 3);
    CHECK(listed->at(0).id == queued);
    CHECK(listed->at(0).state == TaskState::kQueued);
    CHECK(listed->at(1).id == leased);
    CHECK(listed->at(1).state == TaskState::kLeased);
    CHECK(listed->at(1).host_id == "h1");
    CHECK(listed->at(1).lease_until_ms == 9000);
    CHECK(listed->at(2).id == retried);
    CHECK(listed->at(2).state == TaskState::kQueued);
  };
  check_unfinished(*store);
  // Only what may still run is in the index of unfinished tasks.
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks WHERE finished_at_ms = 0") == 4);

  // A store from before migration 12: no task marked finished, the index by state.
  opened.reset();
  REQUIRE(ExecStore(path,
                    RewindFrom(12) + "DROP INDEX IF EXISTS tasks_unfinished; "
                    "ALTER TABLE tasks DROP COLUMN finished_at_ms; "
                    "CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased')") == "");
  auto reopened = OpenStore(path);
  Store& again = Opened(reopened);
  CHECK(again.schema_version() == Store::LatestSchemaVersion());
  check_unfinished(again);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks WHERE finished_at_ms = 0") == 4);
  CHECK(QueryStoreInt(path, "SELECT finished_at_ms FROM tasks WHERE id = " + std::to_string(succeeded)) == 2100);
}
