// A job's tasks written together (Store::BeginTaskInserts): the same rows, ids
// and unfinished tasks as inserting them one by one, across more rows than one
// statement writes; read in the middle of the batch; dropped by a rollback.
// Run on SQLite and, with WEFT_TEST_STORE=postgres, on PostgreSQL.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::testing::Opened;
using weft::testing::OpenStore;
using weft::testing::QueryStoreInt;
using weft::testing::TempDir;

namespace {

// Task `k` of a job, every field its own: some waiting on earlier ones (by the
// ids `ids` holds), some queued, some finished, texts that need quoting.
TaskRecord JobTask(int k, const std::vector<std::int64_t>& ids) {
  TaskRecord t;
  const std::string n = std::to_string(k);
  t.tenant = k % 3 == 0 ? "default" : "tenant-" + n;
  t.plugin = k % 7 == 0 ? "" : "plugin-" + n;
  t.action = k % 2 ? "INSTALL" : "CONFIGURE";
  t.job_id = "job-" + std::to_string(k / 50);
  t.cluster_id = "cluster 'c" + n + "'";
  t.node_id = "node-\xc3\xa9-" + n;
  t.state = k % 5 == 0 ? TaskState::kQueued : k % 11 == 0 ? TaskState::kSucceeded : TaskState::kWaiting;
  t.max_attempts = 1 + k % 4;
  t.created_at_ms = 1000 + k;
  t.payload_json = "{\"k\":" + n + ",\"s\":\"a\\\"b\"}";
  t.task_key = "node-" + n + "/INSTALL/svc-" + n;
  t.service = k % 4 ? "svc-" + n : "";
  t.after_json = ids.empty() || t.state != TaskState::kWaiting
                     ? "[]"
                     : "[" + std::to_string(ids[static_cast<std::size_t>(k - 1) / 2]) + "]";
  return t;
}

void Ok(const weft::Status& s) {
  INFO(s.ToString());
  REQUIRE(s.ok());
}

TaskRecord Get(Store& store, std::int64_t id) {
  auto got = store.GetTask(id);
  Ok(got.status());
  REQUIRE(got->has_value());
  return **got;
}

void CheckSame(const TaskRecord& a, const TaskRecord& b) {
  INFO("task " << a.id);
  CHECK(a.id == b.id);
  CHECK(a.tenant == b.tenant);
  CHECK(a.plugin == b.plugin);
  CHECK(a.action == b.action);
  CHECK(a.job_id == b.job_id);
  CHECK(a.cluster_id == b.cluster_id);
  CHECK(a.node_id == b.node_id);
  CHECK(a.state == b.state);
  CHECK(a.attempt == b.attempt);
  CHECK(a.max_attempts == b.max_attempts);
  CHECK(a.host_id == b.host_id);
  CHECK(a.created_at_ms == b.created_at_ms);
  CHECK(a.updated_at_ms == b.updated_at_ms);
  CHECK(a.lease_until_ms == b.lease_until_ms);
  CHECK(a.payload_json == b.payload_json);
  CHECK(a.result_json == b.result_json);
  CHECK(a.message == b.message);
  CHECK(a.stdout_tail == b.stdout_tail);
  CHECK(a.stderr_tail == b.stderr_tail);
  CHECK(a.task_key == b.task_key);
  CHECK(a.service == b.service);
  CHECK(a.after_json == b.after_json);
}

// Writes `count` job tasks after three single ones, in one transaction, one
// by one or (`together`) between BeginTaskInserts and EndTaskInserts; their ids.
std::vector<std::int64_t> WriteJob(Store& store, int count, bool together) {
  Ok(store.Begin());
  std::vector<std::int64_t> ids;
  for (int k = 0; k < 3; ++k) {
    TaskRecord t = JobTask(1000 + k, {});
    Ok(store.InsertTask(&t));
  }
  if (together) Ok(store.BeginTaskInserts(static_cast<std::size_t>(count)));
  for (int k = 1; k <= count; ++k) {
    TaskRecord t = JobTask(k, ids);
    Ok(store.InsertTask(&t));
    ids.push_back(t.id);
  }
  if (together) Ok(store.EndTaskInserts());
  Ok(store.Commit());
  return ids;
}

std::vector<std::pair<std::int64_t, TaskState>> Unfinished(Store& store) {
  auto listed = store.ListUnfinishedTasks();
  REQUIRE(listed.ok());
  std::vector<std::pair<std::int64_t, TaskState>> out;
  for (const TaskRecord& t : *listed) out.emplace_back(t.id, t.state);
  return out;
}

}  // namespace

TEST_CASE("store tasks: a job's tasks written together are the rows, ids and unfinished tasks one by one writes, "
          "over three statements' rows",
          "[store]") {
  TempDir dir("task-inserts");
  auto one_opened = OpenStore(dir / "one.db");
  auto all_opened = OpenStore(dir / "all.db");
  Store& one = Opened(one_opened);
  Store& all = Opened(all_opened);
  constexpr int kTasks = 150;  // 64 + 64 + 22 rows
  const std::vector<std::int64_t> one_ids = WriteJob(one, kTasks, false);
  const std::vector<std::int64_t> all_ids = WriteJob(all, kTasks, true);
  REQUIRE(all_ids == one_ids);
  for (std::size_t k = 1; k < all_ids.size(); ++k) CHECK(all_ids[k] == all_ids[k - 1] + 1);
  for (std::int64_t id : all_ids) CheckSame(Get(all, id), Get(one, id));
  CHECK(Unfinished(all) == Unfinished(one));
  CHECK(Unfinished(all).size() == 31);  // the queued ones: 30 of the job's, 1 of the three before
  auto job = all.ListJobTasks("job-1", true);
  REQUIRE(job.ok());
  CHECK(job->size() == 50);
  CHECK(QueryStoreInt(dir / "all.db", "SELECT COUNT(*) FROM task_specs") == 3 + kTasks);

  // A task inserted after them takes the next id, as it does after one by one.
  Ok(all.Begin());
  Ok(one.Begin());
  TaskRecord a = JobTask(5, {}), b = JobTask(5, {});
  Ok(all.InsertTask(&a));
  Ok(one.InsertTask(&b));
  Ok(all.Commit());
  Ok(one.Commit());
  CHECK(a.id == all_ids.back() + 1);
  CHECK(a.id == b.id);
}

TEST_CASE("store tasks: tasks being written together are read in the middle, are written by the commit without "
          "EndTaskInserts, and go with a rollback",
          "[store]") {
  TempDir dir("task-inserts-read");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& store = Opened(opened);

  Ok(store.Begin());
  Ok(store.BeginTaskInserts(6));
  std::vector<std::int64_t> ids;
  for (int k = 1; k <= 2; ++k) {
    TaskRecord t = JobTask(k * 5, ids);  // queued
    Ok(store.InsertTask(&t));
    ids.push_back(t.id);
  }
  // A read of the tasks before the rest are given sees those given.
  CHECK(Get(store, ids[0]).task_key == JobTask(5, {}).task_key);
  CHECK(Unfinished(store).size() == 2);
  for (int k = 3; k <= 4; ++k) {
    TaskRecord t = JobTask(k * 5, ids);
    Ok(store.InsertTask(&t));
    ids.push_back(t.id);
  }
  for (std::size_t k = 1; k < ids.size(); ++k) CHECK(ids[k] == ids[k - 1] + 1);
  Ok(store.Commit());  // 4 of the 6 given: the commit writes them
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks") == 4);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM task_specs") == 4);
  CHECK(Get(store, ids[3]).task_key == JobTask(20, {}).task_key);

  // The ids left are not used: the next one is given as one by one.
  Ok(store.Begin());
  TaskRecord single = JobTask(7, {});
  Ok(store.InsertTask(&single));
  Ok(store.Commit());
  CHECK(Get(store, single.id).task_key == single.task_key);

  Ok(store.Begin());
  Ok(store.BeginTaskInserts(3));
  std::vector<std::int64_t> dropped;
  for (int k = 1; k <= 3; ++k) {
    TaskRecord t = JobTask(k * 5, {});
    Ok(store.InsertTask(&t));
    dropped.push_back(t.id);
  }
  Ok(store.Rollback());
  for (std::int64_t id : dropped) {
    auto got = store.GetTask(id);
    REQUIRE(got.ok());
    CHECK_FALSE(got->has_value());
  }
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM tasks") == 5);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM task_specs") == 5);
  CHECK(Unfinished(store).size() == 4);  // the single one waits
}
