// Takes and attempt ends. On PostgreSQL, in a transaction, the Store gathers
// them and sends them as one statement before the next statement or the
// commit; on SQLite each runs at once. Either way a transaction sees its own
// writes in order, a write that misses its task (missing, or at another
// attempt) fails the whole transaction and names the task, and a deposed
// leader commits nothing. Run on SQLite and, with WEFT_TEST_STORE=postgres,
// on PostgreSQL; the leader cases on PostgreSQL only.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/server/store/store.hpp"

using weft::AttemptStatus;
using weft::Status;
using weft::store::AttemptRecord;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::testing::ExecStore;
using weft::testing::InsertCommittedTasks;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::PostgresStoreOptions;
using weft::testing::StartPostgres;
using weft::testing::PostgresServer;
using weft::testing::QueryStoreInt;
using weft::testing::TempDir;

namespace {

TaskRecord Task(Store& store, std::int64_t id) {
  auto task = store.GetTask(id);
  if (!task.ok()) FAIL(task.status().ToString());
  if (!task->has_value()) FAIL("task " << id << " is missing");
  return **task;
}

Status Finish(Store& store, std::int64_t id, std::int64_t attempt, std::int64_t now_ms,
              std::string_view message = "done") {
  return store.EndAttempt(id, attempt, TaskState::kSucceeded, AttemptStatus::kSucceeded, message,
                          R"({"ok":true})", "out", "err", now_ms);
}

// The first failure among the steps, else the commit's: SQLite says so at the
// write, PostgreSQL (which sends the writes later) at the commit.
template <typename... Steps>
Status RunThenCommit(Store& store, Steps&&... steps) {
  Status failed;
  ((failed = failed.ok() ? steps() : failed), ...);
  return failed.ok() ? store.Commit() : failed;
}

}  // namespace

TEST_CASE("store task writes: a finish of a stale attempt among good takes and finishes fails the whole "
          "transaction, names the task, and nothing of it is kept",
          "[store]") {
  TempDir dir("task-writes-stale");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 4);
  REQUIRE(store.Begin().ok());
  for (std::int64_t id : ids) REQUIRE(store.LeaseTask(id, 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());

  REQUIRE(store.Begin().ok());
  Status ended = RunThenCommit(
      store, [&] { return Finish(store, ids[0], 1, 3000); },
      // Attempt 2 of a task at attempt 1: stale (a host that was replaced, or a bug).
      [&] { return Finish(store, ids[1], 2, 3000); }, [&] { return Finish(store, ids[2], 1, 3000); },
      [&] { return store.LeaseTask(ids[3], 2, "host-b", 9500, 3000); });
  CHECK(ended.code() == weft::Code::kNotFound);
  CHECK(ended.message() == "task " + std::to_string(ids[1]) + " is not at attempt 2");
  REQUIRE(store.Rollback().ok());

  for (std::int64_t id : ids) {
    const TaskRecord t = Task(store, id);
    INFO("task " << id);
    CHECK(t.state == TaskState::kLeased);
    CHECK(t.attempt == 1);
    CHECK(t.host_id == "host-a");
  }

  // The same writes without the stale one commit, each as it was asked.
  REQUIRE(store.Begin().ok());
  Status committed = RunThenCommit(
      store, [&] { return Finish(store, ids[0], 1, 3000); }, [&] { return Finish(store, ids[2], 1, 3000); },
      [&] { return store.LeaseTask(ids[3], 2, "host-b", 9500, 3000); });
  if (!committed.ok()) FAIL(committed.ToString());
  CHECK(Task(store, ids[0]).state == TaskState::kSucceeded);
  CHECK(Task(store, ids[1]).state == TaskState::kLeased);
  CHECK(Task(store, ids[2]).state == TaskState::kSucceeded);
  const TaskRecord retaken = Task(store, ids[3]);
  CHECK(retaken.attempt == 2);
  CHECK(retaken.host_id == "host-b");
}

TEST_CASE("store task writes: a take of a missing task among good ones fails the transaction and names it",
          "[store]") {
  TempDir dir("task-writes-missing");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 2);
  const std::int64_t missing = ids[1] + 500;
  REQUIRE(store.Begin().ok());
  Status ended = RunThenCommit(
      store, [&] { return store.LeaseTask(ids[0], 1, "host-a", 9000, 2000); },
      [&] { return store.LeaseTask(missing, 1, "host-a", 9000, 2000); },
      [&] { return store.LeaseTask(ids[1], 1, "host-a", 9000, 2000); });
  CHECK(ended.code() == weft::Code::kNotFound);
  CHECK(ended.message() == "task " + std::to_string(missing) + " does not exist");
  REQUIRE(store.Rollback().ok());
  for (std::int64_t id : ids) CHECK(Task(store, id).state == TaskState::kQueued);

  // A finish of a task that does not exist says so too.
  REQUIRE(store.Begin().ok());
  ended = RunThenCommit(store, [&] { return Finish(store, missing, 1, 3000); });
  CHECK(ended.message() == "task " + std::to_string(missing) + " does not exist");
  REQUIRE(store.Rollback().ok());
}

TEST_CASE("store task writes: one task taken, failed, taken again and finished in one transaction ends as "
          "written, in order, and reads in the transaction see each write",
          "[store]") {
  TempDir dir("task-writes-order");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 2);
  const std::int64_t id = ids[0];
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(id, 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-b", 9000, 2000).ok());
  CHECK(Task(store, id).state == TaskState::kLeased);
  REQUIRE(store.EndAttempt(id, 1, TaskState::kQueued, AttemptStatus::kFailed, "boom", "{}", "", "", 2500).ok());
  REQUIRE(store.LeaseTask(id, 2, "host-c", 9900, 2600).ok());
  REQUIRE(Finish(store, id, 2, 2700).ok());
  REQUIRE(Finish(store, ids[1], 1, 2800).ok());
  // Read before the commit: the writes gathered so far are sent first.
  const TaskRecord seen = Task(store, id);
  CHECK(seen.state == TaskState::kSucceeded);
  REQUIRE(store.Commit().ok());

  const TaskRecord t = Task(store, id);
  CHECK(t.state == TaskState::kSucceeded);
  CHECK(t.attempt == 2);
  CHECK(t.host_id == "host-c");
  CHECK(t.message == "done");
  CHECK(t.result_json == R"({"ok":true})");
  CHECK(t.updated_at_ms == 2700);
  auto attempts = store.ListAttempts(id);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  const AttemptRecord& first = (*attempts)[0];
  CHECK(first.attempt == 1);
  CHECK(first.host_id == "host-a");
  CHECK(first.taken_at_ms == 2000);
  CHECK(first.finished_at_ms == 2500);
  CHECK(first.status == "failed");
  CHECK(first.message == "boom");
  const AttemptRecord& second = (*attempts)[1];
  CHECK(second.attempt == 2);
  CHECK(second.host_id == "host-c");
  CHECK(second.taken_at_ms == 2600);
  CHECK(second.finished_at_ms == 2700);
  CHECK(second.status == "succeeded");
  CHECK(Task(store, ids[1]).state == TaskState::kSucceeded);

  // Finished tasks are no longer unfinished; nothing else is.
  auto unfinished = store.ListUnfinishedTasks();
  REQUIRE(unfinished.ok());
  CHECK(unfinished->empty());
}

TEST_CASE("store task writes: a finish's message, result and output come back as they were sent, quotes, "
          "backslashes, braces and all",
          "[store]") {
  TempDir dir("task-writes-text");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 2);
  const std::string message = R"(it said "no" {a,b} \ NULL)";
  const std::string result = R"({"path":"C:\\x","list":[1,2],"q":"\"","u":"é"})";
  const std::string out = "line 1\nline \"2\"\t\\n,}{\n";
  const std::string err = "NULL";
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host \"a\", b", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-b", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(store.EndAttempt(ids[0], 1, TaskState::kFailed, AttemptStatus::kFailed, message, result, out, err, 3000)
              .ok());
  REQUIRE(store.EndAttempt(ids[1], 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "", "", "", 3000).ok());
  REQUIRE(store.Commit().ok());
  const TaskRecord t = Task(store, ids[0]);
  CHECK(t.host_id == "host \"a\", b");
  CHECK(t.message == message);
  CHECK(t.result_json == result);
  CHECK(t.stdout_tail == out);
  CHECK(t.stderr_tail == err);
  const TaskRecord empty = Task(store, ids[1]);
  CHECK(empty.message.empty());
  CHECK(empty.result_json == "{}");
  CHECK(empty.stdout_tail.empty());
  CHECK(empty.stderr_tail.empty());
}

TEST_CASE("store task writes: a waiting task made ready and taken in one transaction is written once, one "
          "made ready and not taken is queued for every read and at the commit",
          "[store]") {
  TempDir dir("task-writes-ready");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  std::vector<std::int64_t> ids;
  REQUIRE(store.Begin().ok());
  for (int i = 0; i < 4; ++i) {
    TaskRecord t;
    t.tenant = "default";
    t.plugin = "fake-provider";
    t.action = "CREATE";
    t.state = TaskState::kWaiting;
    t.max_attempts = 3;
    t.created_at_ms = 1000;
    REQUIRE(store.InsertTask(&t).ok());
    ids.push_back(t.id);
  }
  REQUIRE(store.Commit().ok());
  const std::int64_t taken = ids[0], later = ids[1], read = ids[2], undone = ids[3];
  // Every write that makes a task queued, counted beside the Store.
  const bool sqlite = !weft::testing::TestStoreIsPostgres();
  REQUIRE(ExecStore(dir / "weft.db",
                    sqlite ? "CREATE TABLE queued_writes (id BIGINT); CREATE TRIGGER count_queued AFTER UPDATE OF "
                             "state ON tasks WHEN new.state = 'queued' BEGIN INSERT INTO queued_writes VALUES "
                             "(new.id); END;"
                           : "CREATE TABLE queued_writes (id BIGINT); CREATE FUNCTION count_queued() RETURNS "
                             "trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO queued_writes VALUES (NEW.id); "
                             "RETURN NEW; END $$; CREATE TRIGGER count_queued AFTER UPDATE OF state ON tasks FOR "
                             "EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION count_queued();") == "");

  REQUIRE(store.Begin().ok());
  REQUIRE(store.SetTaskState(taken, TaskState::kQueued, "", 0, 2000).ok());
  REQUIRE(store.SetTaskState(later, TaskState::kQueued, "", 0, 2000).ok());
  REQUIRE(store.LeaseTask(taken, 1, "h1", 9000, 2001).ok());
  REQUIRE(store.Commit().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(store.SetTaskState(read, TaskState::kQueued, "", 0, 3000).ok());
  CHECK(Task(store, read).state == TaskState::kQueued);  // a read in the transaction sees it ready
  REQUIRE(store.Commit().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(store.SetTaskState(undone, TaskState::kQueued, "", 0, 4000).ok());
  REQUIRE(store.Rollback().ok());

  const TaskRecord t = Task(store, taken);
  CHECK(t.state == TaskState::kLeased);
  CHECK(t.attempt == 1);
  CHECK(t.host_id == "h1");
  CHECK(t.lease_until_ms == 9000);
  CHECK(t.updated_at_ms == 2001);
  CHECK(t.message.empty());
  const TaskRecord l = Task(store, later);
  CHECK(l.state == TaskState::kQueued);
  CHECK(l.updated_at_ms == 2000);
  CHECK(l.lease_until_ms == 0);
  CHECK(Task(store, read).updated_at_ms == 3000);
  CHECK(Task(store, undone).state == TaskState::kWaiting);
  auto unfinished = store.ListUnfinishedTasks();
  REQUIRE(unfinished.ok());
  CHECK(unfinished->size() == 3);  // taken, later and read; not the one rolled back
  // SQLite holds the write of a ready task back, and the take of it writes the
  // row once; PostgreSQL writes it at once.
  CHECK(QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM queued_writes") == (sqlite ? 2 : 3));
  CHECK(QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM queued_writes WHERE id = " + std::to_string(taken)) ==
        (sqlite ? 0 : 1));
}

TEST_CASE("postgres store: a deposed leader's gathered takes and finishes are not committed", "[store][postgres]") {
  TempDir dir("task-writes-fence");
  auto server = StartPostgres(dir.path());
  weft::store::StoreOptions options = PostgresStoreOptions(*server);
  auto opened = Store::Open(dir / "unused.db", options);
  Store& store = Opened(opened);
  REQUIRE(server->Exec("CREATE TABLE weft_leader (id integer PRIMARY KEY, epoch bigint NOT NULL); "
                          "INSERT INTO weft_leader VALUES (1, 1)").ok());
  std::optional<std::int64_t> ours = 1;
  store.SetLeaderFence({.epoch = [&] { return ours; },
                        .refused = [&](std::int64_t in_force) {
                          if (ours && in_force == *ours) return Status::Ok();
                          return Status::Unavailable("another weftd took over as leader");
                        }});
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());

  REQUIRE(server->Exec("UPDATE weft_leader SET epoch = 2").ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1, 3000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-a", 9000, 3000).ok());
  REQUIRE(store.LeaseTask(ids[2], 1, "host-b", 9000, 3000).ok());
  Status committed = store.Commit();
  CHECK(committed.code() == weft::Code::kUnavailable);
  CHECK(committed.message() == "another weftd took over as leader");
  REQUIRE(store.Rollback().ok());
  CHECK(server->Query("SELECT string_agg(state || ':' || attempt, ',' ORDER BY id) FROM tasks").value() ==
        "leased:1,queued:0,queued:0");
  store.SetLeaderFence({});
}

TEST_CASE("postgres store: a leader's gathered writes carry the fence: they commit while its epoch is in force, a "
          "missed task is named, and after a takeover the takeover is what the commit reports",
          "[store][postgres]") {
  TempDir dir("task-writes-fenced");
  auto server = StartPostgres(dir.path());
  weft::store::StoreOptions options = PostgresStoreOptions(*server);
  auto opened = Store::Open(dir / "unused.db", options);
  Store& store = Opened(opened);
  REQUIRE(server->Exec("CREATE TABLE weft_leader (id integer PRIMARY KEY, epoch bigint NOT NULL); "
                          "INSERT INTO weft_leader VALUES (1, 1)").ok());
  std::vector<std::int64_t> heard;
  store.SetLeaderFence({.epoch = [] { return std::optional<std::int64_t>(1); },
                        .refused = [&](std::int64_t in_force) {
                          heard.push_back(in_force);
                          if (in_force == 1) return Status::Ok();
                          return Status::Unavailable("another weftd took over as leader");
                        }});
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  auto rows = [&] {
    return server->Query("SELECT string_agg(state || ':' || attempt, ',' ORDER BY id) FROM tasks").value();
  };

  // In force: the writes and the fence commit together, the epoch's row locked until then.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.SendCommit().ok());
  REQUIRE(store.AwaitCommit().ok());
  CHECK(rows() == "leased:1,leased:1,queued:0");
  CHECK(heard.empty());

  // In force, a stale finish among good writes: the task is named, the leadership kept.
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1, 3000).ok());
  REQUIRE(Finish(store, ids[1], 2, 3000).ok());
  Status stale = store.Commit();
  CHECK(stale.code() == weft::Code::kNotFound);
  CHECK(stale.message() == "task " + std::to_string(ids[1]) + " is not at attempt 2");
  REQUIRE(store.Rollback().ok());
  CHECK(heard == std::vector<std::int64_t>{1});
  CHECK(rows() == "leased:1,leased:1,queued:0");

  // Deposed, with a stale finish too: the takeover is reported, nothing is kept.
  heard.clear();
  REQUIRE(server->Exec("UPDATE weft_leader SET epoch = 2").ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1, 3000).ok());
  REQUIRE(Finish(store, ids[1], 2, 3000).ok());
  Status deposed = store.Commit();
  CHECK(deposed.code() == weft::Code::kUnavailable);
  CHECK(deposed.message() == "another weftd took over as leader");
  REQUIRE(store.Rollback().ok());
  CHECK(heard == std::vector<std::int64_t>{2});
  CHECK(rows() == "leased:1,leased:1,queued:0");
  store.SetLeaderFence({});
}

TEST_CASE("store task writes: takes and finishes of tasks close together, with others between them, and far apart "
          "each write their own task's values and no other task's",
          "[store]") {
  TempDir dir("task-writes-spread");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  // On PostgreSQL a batch whose ids are close goes by id, one whose ids are far apart finds each by its position.
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 100);
  const std::vector<int> close = {0, 2, 3, 7};
  REQUIRE(store.Begin().ok());
  for (int k : close)
    REQUIRE(store.LeaseTask(ids[k], 1, "host-" + std::to_string(k), 9000 + k, 2000 + k).ok());
  REQUIRE(store.Commit().ok());
  for (int k : close) {
    INFO("task " << k);
    const TaskRecord t = Task(store, ids[k]);
    CHECK(t.state == TaskState::kLeased);
    CHECK(t.host_id == "host-" + std::to_string(k));
    CHECK(t.lease_until_ms == 9000 + k);
    CHECK(t.updated_at_ms == 2000 + k);
  }

  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[7], 1, 3007, "seven").ok());
  REQUIRE(store.LeaseTask(ids[99], 1, "host-99", 9099, 3099).ok());
  REQUIRE(Finish(store, ids[2], 1, 3002, "two").ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-1", 9001, 3001).ok());
  REQUIRE(store.Commit().ok());
  const TaskRecord seven = Task(store, ids[7]);
  CHECK(seven.state == TaskState::kSucceeded);
  CHECK(seven.message == "seven");
  CHECK(seven.updated_at_ms == 3007);
  CHECK(seven.host_id == "host-7");
  const TaskRecord two = Task(store, ids[2]);
  CHECK(two.state == TaskState::kSucceeded);
  CHECK(two.message == "two");
  CHECK(two.updated_at_ms == 3002);
  CHECK(Task(store, ids[99]).host_id == "host-99");
  CHECK(Task(store, ids[99]).lease_until_ms == 9099);
  CHECK(Task(store, ids[1]).host_id == "host-1");
  CHECK(Task(store, ids[1]).updated_at_ms == 3001);
  for (int k : {4, 5, 6, 98}) {
    INFO("untouched task " << k);
    const TaskRecord t = Task(store, ids[k]);
    CHECK(t.state == TaskState::kQueued);
    CHECK(t.attempt == 0);
    CHECK(t.host_id.empty());
  }

  // A stale finish among close ones, with others between them, is the one named.
  REQUIRE(store.Begin().ok());
  Status ended = RunThenCommit(
      store, [&] { return Finish(store, ids[3], 1, 4000); }, [&] { return Finish(store, ids[0], 2, 4000); },
      [&] { return store.LeaseTask(ids[5], 1, "host-5", 9005, 4000); });
  CHECK(ended.code() == weft::Code::kNotFound);
  CHECK(ended.message() == "task " + std::to_string(ids[0]) + " is not at attempt 2");
  REQUIRE(store.Rollback().ok());
  CHECK(Task(store, ids[3]).state == TaskState::kLeased);
}

TEST_CASE("postgres store: gathered writes of tasks whose ids pass 2^31 commit, and a missed one is named",
          "[store][postgres]") {
  TempDir dir("task-writes-big-ids");
  auto server = StartPostgres(dir.path());
  auto opened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& store = Opened(opened);
  // An array's subscripts are 32-bit: these ids cannot be its subscripts.
  REQUIRE(server->Exec("ALTER TABLE tasks ALTER COLUMN id RESTART WITH 2147483646").ok());
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 3);
  REQUIRE(ids.back() == 2147483648);
  REQUIRE(store.Begin().ok());
  for (std::int64_t id : ids) REQUIRE(store.LeaseTask(id, 1, "host-" + std::to_string(id), 9000, 2000).ok());
  REQUIRE(store.Commit().ok());
  for (std::int64_t id : ids) CHECK(Task(store, id).host_id == "host-" + std::to_string(id));

  REQUIRE(store.Begin().ok());
  Status ended = RunThenCommit(
      store, [&] { return Finish(store, ids[0], 1, 3000); }, [&] { return Finish(store, ids[2], 3, 3000); });
  CHECK(ended.message() == "task " + std::to_string(ids[2]) + " is not at attempt 3");
  REQUIRE(store.Rollback().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[2], 1, 3000).ok());
  REQUIRE(Finish(store, ids[1], 1, 3000).ok());
  REQUIRE(store.Commit().ok());
  CHECK(server->Query("SELECT string_agg(state::text, ',' ORDER BY id) FROM tasks").value() ==
        "leased,succeeded,succeeded");
}

TEST_CASE("postgres store: a finish updates its task's row in place, and open_tasks holds exactly the unfinished "
          "tasks through takes, finishes, retries, requeues and a store from before it",
          "[store][postgres]") {
  TempDir dir("task-writes-open-tasks");
  auto server = StartPostgres(dir.path());
  auto opened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 4);
  auto open_ids = [&] {
    return server->Query("SELECT COALESCE(string_agg(id::text, ',' ORDER BY id), '') FROM open_tasks").value();
  };
  auto unfinished_ids = [&] {
    return server->Query("SELECT COALESCE(string_agg(id::text, ',' ORDER BY id), '') FROM tasks "
                         "WHERE finished_at_ms = 0").value();
  };
  auto listed_ids = [](Store& s) {
    auto listed = s.ListUnfinishedTasks();
    REQUIRE(listed.ok());
    std::string out;
    for (const TaskRecord& t : *listed) out += (out.empty() ? "" : ",") + std::to_string(t.id);
    return out;
  };
  auto QueryInt = [](const PostgresServer& pg, const std::string& query) {
    return std::stoll(pg.Query(query).value());
  };
  auto csv = [](std::initializer_list<std::int64_t> list) {
    std::string out;
    for (std::int64_t id : list) out += (out.empty() ? "" : ",") + std::to_string(id);
    return out;
  };
  CHECK(open_ids() == csv({ids[0], ids[1], ids[2], ids[3]}));

  // Gathered (in a transaction): two takes, then a finish and a retry.
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.LeaseTask(ids[1], 1, "host-b", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 1, 3000).ok());
  REQUIRE(store.EndAttempt(ids[1], 1, TaskState::kQueued, AttemptStatus::kFailed, "retry", "{}", "", "", 3000).ok());
  REQUIRE(store.LeaseTask(ids[2], 1, "host-c", 9000, 3000).ok());
  REQUIRE(store.Commit().ok());
  // A task the gathered writes finished leaves open_tasks later, with a batch of others.
  CHECK(open_ids() == csv({ids[0], ids[1], ids[2], ids[3]}));
  CHECK(unfinished_ids() == csv({ids[1], ids[2], ids[3]}));
  CHECK(listed_ids(store) == csv({ids[1], ids[2], ids[3]}));
  // One at a time (outside a transaction), and by a state set from outside.
  REQUIRE(Finish(store, ids[2], 1, 4000).ok());
  REQUIRE(store.SetTaskState(ids[0], TaskState::kQueued, "again", 0, 5000).ok());
  REQUIRE(store.SetTaskState(ids[3], TaskState::kCancelled, "no", 0, 5000).ok());
  CHECK(open_ids() == csv({ids[0], ids[1]}));
  CHECK(unfinished_ids() == open_ids());
  CHECK(listed_ids(store) == csv({ids[0], ids[1]}));
  // A failed transaction leaves open_tasks as it was.
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[0], 7, 6000).ok());  // stale: fails at the commit
  CHECK(!store.Commit().ok());
  REQUIRE(store.Rollback().ok());
  CHECK(open_ids() == csv({ids[0], ids[1]}));

  // Every update of a task was in place (HOT): none changed a column an
  // index names. The server counts them once the store's connection ends.
  opened->reset();
  const std::string updates = "SELECT n_tup_upd || ':' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'tasks'";
  std::string counted;
  for (int i = 0; i < 100 && (counted = server->Query(updates).value()) != "8:8"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(counted == "8:8");  // 3 takes, 3 ends, 2 states set; the failed finish updated nothing

  // A store from before open_tasks (migration 17): the index on finished_at_ms, no table.
  REQUIRE(server->Exec("DELETE FROM schema_migrations WHERE version >= 17; DROP TABLE open_tasks; " +
                           weft::testing::TasksBeforeSpecs(true) +
                           "CREATE INDEX tasks_unfinished ON tasks (id) WHERE finished_at_ms = 0",
                       "postgres")
              .ok());
  auto reopened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& again = Opened(reopened);
  CHECK(again.schema_version() == Store::LatestSchemaVersion());
  CHECK(open_ids() == csv({ids[0], ids[1]}));
  CHECK(listed_ids(again) == csv({ids[0], ids[1]}));
  CHECK(server->Query("SELECT COALESCE(to_regclass('tasks_unfinished')::text, 'none')").value() == "none");

  // Hundreds of tasks finished by gathered writes leave open_tasks in one
  // batch, with a later transaction's writes; a task queued again stays.
  const std::vector<std::int64_t> many = InsertCommittedTasks(again, 300);
  REQUIRE(again.Begin().ok());
  for (std::int64_t id : many) REQUIRE(again.LeaseTask(id, 1, "host-m", 9000, 7000).ok());
  REQUIRE(again.Commit().ok());
  REQUIRE(again.Begin().ok());
  for (std::int64_t id : many) REQUIRE(Finish(again, id, 1, 8000).ok());
  REQUIRE(again.Commit().ok());
  REQUIRE(again.SetTaskState(many[5], TaskState::kQueued, "again", 0, 8500).ok());
  CHECK(QueryInt(*server, "SELECT COUNT(*) FROM open_tasks") == 302);
  REQUIRE(again.Begin().ok());
  REQUIRE(again.LeaseTask(ids[1], 2, "host-a", 9000, 9000).ok());
  REQUIRE(again.Commit().ok());
  CHECK(open_ids() == csv({ids[0], ids[1], many[5]}));
  CHECK(unfinished_ids() == open_ids());
  CHECK(listed_ids(again) == csv({ids[0], ids[1], many[5]}));
}

TEST_CASE("postgres store: the finishes of a transaction that failed, at its COMMIT or at a COMMIT in flight, and "
          "a finish whose task was queued again in its transaction, leave their tasks in open_tasks when the "
          "finishes committed around them leave it",
          "[store][postgres]") {
  TempDir dir("task-writes-open-tasks-failed");
  auto server = StartPostgres(dir.path());
  auto opened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& store = Opened(opened);
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, 305);
  REQUIRE(store.Begin().ok());
  for (std::int64_t id : ids) REQUIRE(store.LeaseTask(id, 1, "host-a", 9000, 2000).ok());
  REQUIRE(store.Commit().ok());
  auto open_ids = [&] {
    return server->Query("SELECT COALESCE(string_agg(id::text, ',' ORDER BY id), '') FROM open_tasks").value();
  };
  auto unfinished_ids = [&] {
    return server->Query("SELECT COALESCE(string_agg(id::text, ',' ORDER BY id), '') FROM tasks "
                         "WHERE finished_at_ms = 0").value();
  };

  // ids[0] finished with a stale finish of ids[1]: the COMMIT fails, both stay leased.
  REQUIRE(store.Begin().ok());
  CHECK(!RunThenCommit(
             store, [&] { return Finish(store, ids[0], 1, 3000); }, [&] { return Finish(store, ids[1], 7, 3000); })
             .ok());
  REQUIRE(store.Rollback().ok());
  // The same with the COMMIT in flight (as weftd's group commit sends it).
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[2], 1, 3000).ok());
  REQUIRE(Finish(store, ids[3], 7, 3000).ok());
  if (store.SendCommit().ok()) CHECK(!store.AwaitCommit().ok());
  REQUIRE(store.Rollback().ok());
  CHECK(server->Query("SELECT string_agg(state::text, ',' ORDER BY id) FROM tasks WHERE id <= " +
                      std::to_string(ids[3])).value() == "leased,leased,leased,leased");
  // The last one finished, then queued again, in one transaction.
  REQUIRE(store.Begin().ok());
  REQUIRE(Finish(store, ids[304], 1, 3500).ok());
  REQUIRE(store.SetTaskState(ids[304], TaskState::kQueued, "again", 0, 3500).ok());
  REQUIRE(store.Commit().ok());

  // Three hundred finishes committed, half of them with the COMMIT in flight;
  // a later transaction's writes remove them from open_tasks in one batch.
  REQUIRE(store.Begin().ok());
  for (std::size_t i = 4; i < 154; ++i) REQUIRE(Finish(store, ids[i], 1, 4000).ok());
  REQUIRE(store.Commit().ok());
  REQUIRE(store.Begin().ok());
  for (std::size_t i = 154; i < 304; ++i) REQUIRE(Finish(store, ids[i], 1, 4000).ok());
  REQUIRE(store.SendCommit().ok());
  REQUIRE(store.AwaitCommit().ok());
  REQUIRE(store.Begin().ok());
  REQUIRE(store.LeaseTask(ids[0], 2, "host-b", 9000, 5000).ok());
  REQUIRE(store.Commit().ok());
  const std::string left = std::to_string(ids[0]) + "," + std::to_string(ids[1]) + "," + std::to_string(ids[2]) +
                           "," + std::to_string(ids[3]) + "," + std::to_string(ids[304]);
  CHECK(unfinished_ids() == left);
  CHECK(open_ids() == left);
}

TEST_CASE("postgres store: takes and finishes committed two by two, as hosts send them, update their rows in "
          "place, and a store from before migration 18 gets the room for them",
          "[store][postgres]") {
  TempDir dir("task-writes-fill");
  auto server = StartPostgres(dir.path());
  auto opened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& store = Opened(opened);
  // No autovacuum: its snapshot would keep the old versions of the rows from
  // being pruned while it runs, which is not what this case measures.
  REQUIRE(server->Exec("ALTER TABLE tasks SET (autovacuum_enabled = off)").ok());
  constexpr int kTasks = 400;
  const std::vector<std::int64_t> ids = InsertCommittedTasks(store, kTasks);
  // Each commit finishes the two tasks the one before took and takes the next two.
  std::int64_t now = 2000;
  for (int at = 0; at <= kTasks; at += 2, ++now) {
    REQUIRE(store.Begin().ok());
    for (int i = at - 2; i < at; ++i) {
      if (i < 0) continue;
      REQUIRE(store.EndAttempt(ids[i], 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", now)
                  .ok());
    }
    for (int i = at; i < at + 2 && i < kTasks; ++i)
      REQUIRE(store.LeaseTask(ids[i], 1, "bench-host-" + std::to_string(i % 4), now + 30000, now).ok());
    REQUIRE(store.SendCommit().ok());
    REQUIRE(store.AwaitCommit().ok());
  }
  CHECK(server->Query("SELECT COUNT(*) FROM tasks WHERE state = 'succeeded' AND attempt = 1").value() ==
        std::to_string(kTasks));
  // The server counts the updates once the store's connection ends.
  opened->reset();
  const std::string updates =
      "SELECT n_tup_upd || ':' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'tasks'";
  const std::string all_in_place = std::to_string(2 * kTasks) + ":" + std::to_string(2 * kTasks);
  std::string counted;
  for (int i = 0; i < 100 && !(counted = server->Query(updates).value()).starts_with(std::to_string(2 * kTasks) + ":"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(counted == all_in_place);

  // A store from before migration 18 (pages filled to 90 %): upgraded in place, its rows as they were.
  const std::string rows = "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM tasks t";
  const std::string before = server->Query(rows).value();
  const std::string fill = "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'tasks'";
  REQUIRE(server->Exec("DELETE FROM schema_migrations WHERE version >= 18; " + weft::testing::TasksBeforeSpecs(true) +
                       "ALTER TABLE tasks SET (fillfactor = 90)")
              .ok());
  CHECK(server->Query(fill).value() == "autovacuum_enabled=off,fillfactor=90");
  auto reopened = Store::Open(dir / "unused.db", PostgresStoreOptions(*server));
  Store& again = Opened(reopened);
  CHECK(again.schema_version() == Store::LatestSchemaVersion());
  CHECK(server->Query(fill).value() == "autovacuum_enabled=off,fillfactor=70");
  CHECK(server->Query(rows).value() == before);
  CHECK(Task(again, ids[7]).state == TaskState::kSucceeded);
}
