// Retention (Store::PruneEnded, server/store/retention_store.cpp) on both
// backends: what ended before the cutoff goes, a batch at a time; what a live
// cluster, a running job or an unfinished task still needs, and the audit
// log, stay.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using weft::AttemptStatus;
using weft::store::AuditRecord;
using weft::store::ClusterRecord;
using weft::store::JobRecord;
using weft::store::NodeRecord;
using weft::store::PruneCounts;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::QueryStoreInt;
using weft::testing::TempDir;

namespace {

// A cluster in `status`, last changed at `at_ms`, with `nodes` nodes.
ClusterRecord Cluster(Store& s, const std::string& name, const std::string& status, std::int64_t at_ms, int nodes) {
  ClusterRecord c;
  c.tenant = "default";
  c.name = name;
  c.owner = "alice";
  c.status = "pending";
  c.created_at_ms = 10;
  REQUIRE(s.InsertCluster(&c).ok());
  c.status = status;
  c.updated_at_ms = at_ms;
  REQUIRE(s.UpdateCluster(c).ok());
  for (int i = 0; i < nodes; ++i) REQUIRE(s.PutNode(NodeRecord{c.id, name + "-" + std::to_string(i), "{}"}).ok());
  return c;
}

// A job of `cluster` that ended at `finished_ms` (0: still running); the
// cluster names it as its latest job.
JobRecord Job(Store& s, ClusterRecord& cluster, std::int64_t finished_ms) {
  JobRecord j;
  j.tenant = "default";
  j.cluster_id = cluster.id;
  j.operation = "create";
  j.status = finished_ms ? "succeeded" : "running";
  j.created_at_ms = finished_ms ? finished_ms - 5 : 20;
  j.finished_at_ms = finished_ms;
  REQUIRE(s.InsertJob(&j).ok());
  cluster.latest_job = j.id;
  REQUIRE(s.UpdateCluster(cluster).ok());
  return j;
}

// A task of `job` that succeeded at `at_ms` after `retries` failed attempts
// (kept in the attempts table); `finish` false: its last attempt still runs.
std::int64_t Task(Store& s, const JobRecord& job, std::int64_t at_ms, int retries, bool finish = true) {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = "fake-provider";
  t.action = "CREATE";
  t.job_id = job.id;
  t.cluster_id = job.cluster_id;
  t.max_attempts = 100;
  t.created_at_ms = at_ms - 4;
  REQUIRE(s.InsertTask(&t).ok());
  for (int a = 1; a <= retries + 1; ++a) {
    REQUIRE(s.LeaseTask(t.id, a, "h1", at_ms + 100'000, at_ms - 3).ok());
    if (a > retries && !finish) break;
    const bool last = a > retries;
    REQUIRE(s.EndAttempt(t.id, a, last ? TaskState::kSucceeded : TaskState::kQueued,
                         last ? AttemptStatus::kSucceeded : AttemptStatus::kFailed, "", "{}", "", "", at_ms)
                .ok());
  }
  return t.id;
}

// A task of no job (debug.enqueue's), which retention keeps.
std::int64_t LooseTask(Store& s, std::int64_t at_ms) {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = "fake-provider";
  t.action = "CREATE";
  t.max_attempts = 3;
  t.created_at_ms = at_ms;
  REQUIRE(s.InsertTask(&t).ok());
  return t.id;
}

bool HasCluster(Store& s, const ClusterRecord& c) {
  auto got = s.GetCluster(c.id);
  REQUIRE(got.ok());
  return got->has_value();
}

bool HasJob(Store& s, const JobRecord& j) {
  auto got = s.GetJob(j.id);
  REQUIRE(got.ok());
  return got->has_value();
}

bool HasTask(Store& s, std::int64_t id) {
  auto got = s.GetTask(id);
  REQUIRE(got.ok());
  return got->has_value();
}

PruneCounts Prune(Store& s, std::int64_t cutoff_ms, std::int64_t max_rows) {
  REQUIRE(s.Begin().ok());
  auto pruned = s.PruneEnded(cutoff_ms, max_rows);
  if (!pruned.ok()) FAIL(pruned.status().ToString());
  REQUIRE(s.Commit().ok());
  return *pruned;
}

std::vector<std::string> Listed(Store& s) {
  std::vector<std::string> names;
  REQUIRE(s.VisitClusterSummaries("default", true, [&](const ClusterRecord& c) { names.push_back(c.name); }).ok());
  return names;
}

}  // namespace

TEST_CASE("retention: a deleted cluster that ended before the cutoff goes with everything under it, "
          "what is live, recent or unfinished stays",
          "[store][retention]") {
  TempDir dir("retention");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  constexpr std::int64_t kCutoff = 3000;
  REQUIRE(s.Begin().ok());
  // Deleted long ago: goes, with two jobs, their tasks, attempts and nodes.
  ClusterRecord old_gone = Cluster(s, "old-gone", "terminated", 1000, 3);
  JobRecord og_create = Job(s, old_gone, 500);
  const std::int64_t og_t1 = Task(s, og_create, 500, 2);
  const std::int64_t og_t2 = Task(s, og_create, 500, 0);
  JobRecord og_delete = Job(s, old_gone, 1000);
  const std::int64_t og_t3 = Task(s, og_delete, 1000, 1);
  // Deleted after the cutoff: stays whole.
  ClusterRecord new_gone = Cluster(s, "new-gone", "terminated", 5000, 1);
  JobRecord ng_create = Job(s, new_gone, 100);
  const std::int64_t ng_t1 = Task(s, ng_create, 100, 1);
  JobRecord ng_delete = Job(s, new_gone, 5000);
  // Live: its old job goes, its latest one stays though it ended long ago.
  ClusterRecord live = Cluster(s, "live", "active", 200, 2);
  JobRecord live_old = Job(s, live, 100);
  const std::int64_t live_t1 = Task(s, live_old, 100, 1);
  JobRecord live_latest = Job(s, live, 200);
  const std::int64_t live_t2 = Task(s, live_latest, 200, 0);
  // Live with a job running: none of its jobs goes.
  ClusterRecord busy = Cluster(s, "busy", "pending", 100, 1);
  JobRecord busy_old = Job(s, busy, 100);
  const std::int64_t busy_t1 = Task(s, busy_old, 100, 0);
  JobRecord busy_running = Job(s, busy, 0);
  Task(s, busy_running, 150, 0, /*finish=*/false);
  // An old job with a task a host still runs (an aborted job's): it stays.
  ClusterRecord held = Cluster(s, "held", "active", 300, 0);
  JobRecord held_old = Job(s, held, 100);
  const std::int64_t held_t1 = Task(s, held_old, 100, 0, /*finish=*/false);
  JobRecord held_latest = Job(s, held, 300);
  // The audit log names the deleted cluster.
  AuditRecord audit;
  audit.at_ms = 900;
  audit.actor = "alice";
  audit.actor_tenant = "default";
  audit.actor_role = "user";
  audit.op = "cluster.delete";
  audit.tenant = "default";
  audit.target = "cluster old-gone";
  audit.cluster_id = old_gone.id;
  audit.cluster = "old-gone";
  audit.job_id = og_delete.id;
  audit.outcome = "ok";
  audit.detail_json = "{}";
  REQUIRE(s.AppendAudit(audit).ok());
  // The newest task, of no job: neither it nor any job is held back by it.
  const std::int64_t loose = LooseTask(s, 100);
  REQUIRE(s.Commit().ok());
  REQUIRE(QueryStoreInt(path, "SELECT COUNT(*) FROM attempts WHERE task_id = " + std::to_string(og_t1)) == 2);
  REQUIRE(Listed(s).size() == 5);  // the summaries are kept from here on

  const PruneCounts pruned = Prune(s, kCutoff, 500);
  CHECK_FALSE(pruned.more);
  CHECK(pruned.clusters == 1);
  CHECK(pruned.jobs == 3);      // old-gone's two, live's old one
  CHECK(pruned.tasks == 4);     // og_t1, og_t2, og_t3, live_t1
  CHECK(pruned.attempts == 4);  // 2 + 0 + 1 + 1
  CHECK(pruned.nodes == 3);

  CHECK_FALSE(HasCluster(s, old_gone));
  CHECK_FALSE(HasJob(s, og_create));
  CHECK_FALSE(HasJob(s, og_delete));
  for (std::int64_t id : {og_t1, og_t2, og_t3, live_t1}) {
    CHECK_FALSE(HasTask(s, id));
    CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM attempts WHERE task_id = " + std::to_string(id)) == 0);
  }
  auto nodes = s.ListNodes(old_gone.id);
  REQUIRE(nodes.ok());
  CHECK(nodes->empty());
  CHECK_FALSE(HasJob(s, live_old));

  CHECK(HasCluster(s, new_gone));
  CHECK(HasJob(s, ng_create));
  CHECK(HasJob(s, ng_delete));
  CHECK(HasTask(s, ng_t1));
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM attempts WHERE task_id = " + std::to_string(ng_t1)) == 1);
  CHECK(HasCluster(s, live));
  CHECK(HasJob(s, live_latest));
  CHECK(HasTask(s, live_t2));
  auto live_nodes = s.ListNodes(live.id);
  REQUIRE(live_nodes.ok());
  CHECK(live_nodes->size() == 2);
  CHECK(HasJob(s, busy_old));
  CHECK(HasJob(s, busy_running));
  CHECK(HasTask(s, busy_t1));
  CHECK(HasJob(s, held_old));
  CHECK(HasTask(s, held_t1));
  CHECK(HasJob(s, held_latest));
  CHECK(HasTask(s, loose));

  // The audit log keeps its entry; the summaries no longer list the cluster.
  weft::store::AuditQuery q;
  q.cluster = old_gone.id;
  auto entries = s.ListAudit(q);
  REQUIRE(entries.ok());
  CHECK(entries->size() == 1);
  CHECK(Listed(s) == std::vector<std::string>{"new-gone", "live", "busy", "held"});

  // Nothing more is due; later, the recent deletion is.
  CHECK(Prune(s, kCutoff, 500).rows() == 0);
  const PruneCounts later = Prune(s, 6000, 500);
  CHECK(later.clusters == 1);
  CHECK_FALSE(HasCluster(s, new_gone));
  CHECK(HasCluster(s, live));
}

TEST_CASE("retention: a batch removes at most its limit of rows, and the next batches go on", "[store][retention]") {
  TempDir dir("retention-batches");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  REQUIRE(s.Begin().ok());
  ClusterRecord gone = Cluster(s, "gone", "terminated", 1000, 5);
  JobRecord create = Job(s, gone, 900);
  std::vector<std::int64_t> tasks;
  for (int i = 0; i < 25; ++i) tasks.push_back(Task(s, create, 900, 1));  // a task and an attempt each
  JobRecord del = Job(s, gone, 1000);
  ClusterRecord live = Cluster(s, "live", "active", 1000, 1);
  JobRecord live_job = Job(s, live, 1000);
  Task(s, live_job, 1000, 0);  // the newest task
  REQUIRE(s.Commit().ok());

  PruneCounts total;
  int batches = 0;
  for (bool more = true; more; ++batches) {
    REQUIRE(batches < 20);
    const PruneCounts one = Prune(s, 2000, 10);
    CHECK(one.rows() <= 10);
    CHECK(one.rows() > 0);
    more = one.more;
    total.Add(one);
    // The cluster is the last to go.
    if (more) CHECK(HasCluster(s, gone));
  }
  CHECK(batches >= 6);  // 25 tasks + 25 attempts + 2 jobs + 5 nodes + 1 cluster = 58 rows
  CHECK(total.tasks == 25);
  CHECK(total.attempts == 25);
  CHECK(total.jobs == 2);
  CHECK(total.nodes == 5);
  CHECK(total.clusters == 1);
  CHECK_FALSE(HasCluster(s, gone));
  CHECK_FALSE(HasJob(s, del));
  for (std::int64_t id : tasks) CHECK_FALSE(HasTask(s, id));
  CHECK(HasCluster(s, live));
  CHECK(HasJob(s, live_job));
}

TEST_CASE("retention: the job of the newest task stays until a newer task exists, so no task id comes twice",
          "[store][retention]") {
  TempDir dir("retention-newest");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  REQUIRE(s.Begin().ok());
  ClusterRecord gone = Cluster(s, "gone", "terminated", 1000, 1);
  JobRecord create = Job(s, gone, 900);
  const std::int64_t first = Task(s, create, 900, 0);
  JobRecord del = Job(s, gone, 1000);
  const std::int64_t newest = Task(s, del, 1000, 0);
  REQUIRE(s.Commit().ok());

  const PruneCounts held = Prune(s, 2000, 500);
  CHECK(held.jobs == 1);  // the create job; the delete job holds the newest task
  CHECK(held.clusters == 0);
  CHECK_FALSE(HasTask(s, first));
  CHECK(HasTask(s, newest));
  CHECK(HasCluster(s, gone));

  REQUIRE(s.Begin().ok());
  const std::int64_t next = LooseTask(s, 3000);
  REQUIRE(s.Commit().ok());
  CHECK(next > newest);
  const PruneCounts rest = Prune(s, 2000, 500);
  CHECK(rest.jobs == 1);
  CHECK(rest.clusters == 1);
  CHECK_FALSE(HasCluster(s, gone));
  CHECK(HasTask(s, next));
}
