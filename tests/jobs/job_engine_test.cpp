// The job engine over a real SQLite store and task queue, with a manual clock:
// the tests play the hosts (take, finish) and check what the engine releases,
// retries, cancels and undoes, and what survives a restart.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "weft/server/jobs/job_engine.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/wire.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using weft::Code;
using weft::ManualClock;
using weft::jobs::ClusterState;
using weft::jobs::EngineOptions;
using weft::jobs::JobEngine;
using weft::jobs::NewJob;
using weft::queue::TaskQueue;
using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using json = nlohmann::json;

namespace {

const std::set<std::string> kPlugins = {"fp", "fa", "fb"};
constexpr std::int64_t kBackoffMs = 100;

json Service(const std::string& name, json deps = json::object()) {
  return {{"name", name},
          {"dependencies", std::move(deps)},
          {"provisioner",
           {{"actions",
             {{"install", {{"type", "fa"}, {"fields", {{"me", "%ip.self%"}}}}}, {"start", {{"type", "fa"}}}}}}}};
}

// Two services: db, and web that needs db at runtime; the config names db's address.
json Spec() {
  return {{"template", {{"name", "t"}}},
          {"provider", {{"name", "p"}, {"type", "fp"}, {"fields", {{"zone", "z1"}}}}},
          {"services",
           {{"db", Service("db")}, {"web", Service("web", {{"runtime", {{"requires", json::array({"db"})}}}})}}},
          {"config", {{"db_at", "%ip.bind_v4.service.db%"}}}};
}

json Layout(std::initializer_list<std::pair<const char*, std::vector<std::string>>> nodes) {
  json list = json::array();
  for (const auto& [id, services] : nodes) list.push_back({{"hostname", id}, {"services", services}});
  return {{"nodes", list}};
}

struct Fixture {
  weft::testing::TempDir dir{"weft-jobs"};
  ManualClock clock;
  std::unique_ptr<Store> store;
  std::unique_ptr<TaskQueue> queue;
  std::unique_ptr<JobEngine> engine;
  std::string cluster_id;

  Fixture() { Open(); }

  // (Re)opens everything from the database file, as a restarted weftd does.
  void Open() {
    engine.reset();
    queue.reset();
    store.reset();
    auto s = weft::testing::OpenStore(dir / "weft.db");
    REQUIRE(s.ok());
    store = std::move(s.value());
    queue = std::make_unique<TaskQueue>(*store, clock, weft::queue::QueueOptions{10000});
    EngineOptions options;
    options.retry_backoff_ms = kBackoffMs;
    engine = std::make_unique<JobEngine>(*store, *queue, clock, options);
    queue->set_end_observer([this](const weft::queue::Ended& e) { return engine->OnTaskEnded(e); });
    queue->set_result_check(
        [this](std::int64_t task_id, const std::string& result) { return engine->CheckResult(task_id, result); });
    REQUIRE(queue->Load().ok());
    REQUIRE(engine->Load().ok());
  }

  std::string Create(json layout, json options = json::object(), json spec = Spec()) {
    weft::store::ClusterRecord c;
    c.tenant = "t1";
    c.name = "c";
    c.owner = "alice";
    c.status = "pending";
    c.created_at_ms = clock.NowMs();
    REQUIRE(store->InsertCluster(&c).ok());
    cluster_id = c.id;
    NewJob job;
    job.tenant = "t1";
    job.cluster_id = c.id;
    job.operation = "create";
    job.requested_by = "alice";
    job.options = std::move(options);
    job.before = ClusterState{spec, Layout({}), "pending"};
    job.target = ClusterState{std::move(spec), std::move(layout), "active"};
    auto started = engine->Start(std::move(job));
    REQUIRE(started.ok());
    return started->id;
  }

  std::map<std::string, TaskRecord> Tasks(const std::string& job) {
    auto tasks = store->ListJobTasks(job, true);
    REQUIRE(tasks.ok());
    std::map<std::string, TaskRecord> out;
    for (auto& t : *tasks) out[t.task_key] = t;
    return out;
  }

  // Takes tasks until one with `key` comes (leasing the others it passes);
  // fails the test when it never comes.
  std::map<std::string, TaskRecord> taken;
  TaskRecord TakeKey(const std::string& key) {
    if (taken.count(key)) return taken[key];
    while (true) {
      auto t = queue->Take("h1", kPlugins);
      REQUIRE(t.ok());
      if (!t->has_value()) FAIL("task " << key << " is not ready");
      taken[(*t)->task_key] = **t;
      if ((*t)->task_key == key) return **t;
    }
  }

  bool Ready(const std::string& key) {
    auto tasks = Tasks(CurrentJob());
    return tasks.count(key) && (tasks[key].state == TaskState::kQueued || tasks[key].state == TaskState::kLeased);
  }

  std::string CurrentJob() {
    auto c = store->GetCluster(cluster_id);
    REQUIRE(c.ok());
    return (**c).latest_job;
  }

  // Takes the task `key` (if not taken yet) and finishes it; a failure has
  // `code` (as weft-host sends it; "" for none) and `message` ("boom" if "").
  weft::Status Finish(const std::string& key, bool ok, json result = json::object(), std::string code = "",
                      std::string message = "") {
    TaskRecord t = TakeKey(key);
    taken.erase(key);
    weft::queue::FinishRequest f;
    f.host_id = "h1";
    f.task_id = t.id;
    f.attempt = t.attempt;
    f.succeeded = ok;
    f.message = ok || !message.empty() ? std::move(message) : "boom";
    f.code = std::move(code);
    f.result_json = result.dump();
    weft::queue::Conflict conflict;
    return queue->Finish(f, &conflict);
  }

  // Succeeds every ready task (repeatedly) until nothing is ready.
  void Drain(const std::map<std::string, json>& results = {}) {
    while (true) {
      auto t = queue->Take("h1", kPlugins);
      REQUIRE(t.ok());
      if (!t->has_value()) break;
      taken[(*t)->task_key] = **t;
      auto r = results.find((*t)->task_key);
      REQUIRE(Finish((*t)->task_key, true, r == results.end() ? json::object() : r->second).ok());
    }
  }

  std::string ClusterStatus() {
    auto c = store->GetCluster(cluster_id);
    REQUIRE(c.ok());
    return (**c).status;
  }
  std::string JobStatus(const std::string& id) {
    auto j = store->GetJob(id);
    REQUIRE(j.ok());
    return (**j).status;
  }
  // The audit log's entries with `op`.
  std::vector<weft::store::AuditRecord> Audited(const std::string& op) {
    auto all = store->ListAudit(weft::store::AuditQuery{});
    REQUIRE(all.ok());
    std::vector<weft::store::AuditRecord> out;
    for (auto& a : *all)
      if (a.op == op) out.push_back(a);
    return out;
  }
};

// A decorated task as the host gets it: the tree and the members given as
// text, as weftd sends them, parsed.
json Sent(const json& task, const weft::queue::TaskTexts& texts) {
  json out = json::parse(weft::wire::Dump(task));
  for (const weft::queue::TaskTexts::Member& m : texts.members)
    if (!out.contains(m.name)) out[m.name] = json::parse(*m.text);
  return out;
}

// Whether `name` was given as text.
bool AsText(const weft::queue::TaskTexts& texts, const std::string& name) {
  for (const weft::queue::TaskTexts::Member& m : texts.members)
    if (m.name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("job engine: a task is released when its own predecessors succeed, without stage barriers", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"db"}}}));
  // Both CREATEs are ready; the rest waits.
  CHECK(f.Ready("n1/CREATE"));
  CHECK(f.Ready("n2/CREATE"));
  CHECK_FALSE(f.Ready("n1/CONFIRM"));
  f.TakeKey("n2/CREATE");  // n2 is slow: leased, never finished here
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  // n1 goes on although n2's CREATE, in the same "stage", is still running.
  CHECK(f.Ready("n1/CONFIRM"));
  CHECK_FALSE(f.Ready("n2/CONFIRM"));
  CHECK(f.Tasks(job)["n2/CREATE"].state == TaskState::kLeased);
  CHECK(f.JobStatus(job) == "running");
  CHECK(f.ClusterStatus() == "pending");
}

TEST_CASE("job engine: results flow into later tasks and macros expand per node at take time", "[jobs]") {
  Fixture f;
  f.Create(Layout({{"n1", {"db"}}, {"n2", {"web"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}, {"ssh_auth", {{"user", "root"}}}}).ok());
  REQUIRE(f.Finish("n2/CREATE", true, {{"provider_id", "vm-2"}}).ok());
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.1"}, {"bind_v4", "10.0.0.1"}}).ok());
  // The config names db's address: no service task may start before every node confirmed.
  CHECK_FALSE(f.Ready("n1/INSTALL/db"));
  REQUIRE(f.Finish("n2/CONFIRM", true, {{"access_v4", "10.0.0.2"}, {"bind_v4", "10.0.0.2"}}).ok());
  REQUIRE(f.Finish("n1/BOOTSTRAP", true).ok());
  TaskRecord install = f.TakeKey("n1/INSTALL/db");
  json decorated = json::object();
  weft::queue::TaskTexts decorated_texts;
  REQUIRE(f.engine->Decorate(install, decorated, decorated_texts).ok());
  json task = Sent(decorated, decorated_texts);
  CHECK(task["results"]["provider_id"] == "vm-1");
  CHECK_FALSE(task["node"].contains("results"));  // sent once; weft-host copies them there
  CHECK(task["results"]["ssh_auth"]["user"] == "root");
  CHECK(task["provider"]["fields"]["zone"] == "z1");
  CHECK(task["config"]["db_at"] == "10.0.0.1");
  CHECK(task["service"]["action"]["fields"]["me"] == "10.0.0.1");
  CHECK(task["cluster"]["owner"] == "alice");
  REQUIRE(task["nodes"].size() == 2);
  CHECK(task["nodes"][1]["access_v4"] == "10.0.0.2");
}

TEST_CASE("job engine: a finish's result is merged as it came, not as an earlier check of the same task read it",
          "[jobs]") {
  Fixture f;
  f.Create(Layout({{"n1", {"db"}}}));
  const TaskRecord create = f.TakeKey("n1/CREATE");
  // A check whose finish never ended the task (its transaction rolled back, say)...
  REQUIRE(f.engine->CheckResult(create.id, R"({"provider_id":"stale"})").ok());
  // ...then a finish of the same task with another result that reaches the engine unchecked.
  f.queue->set_result_check(nullptr);
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 1);
  CHECK(json::parse(nodes->front().results_json) == json{{"provider_id", "vm-1"}});
  json confirm = json::object();
  weft::queue::TaskTexts confirm_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/CONFIRM"), confirm, confirm_texts).ok());
  CHECK(Sent(confirm, confirm_texts)["results"] == json{{"provider_id", "vm-1"}});
}

TEST_CASE("job engine: the task a plugin gets is the whole decorated JSON, before and after results arrive", "[jobs]") {
  Fixture f;
  json spec = Spec();
  spec["config"] = {{"port", 80}, {"motd", "no macro here"}};  // the same text for every node
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"web"}}}), json::object(), spec);
  // The job keeps both cluster states as ClusterState::ToJson() writes them.
  auto stored = f.store->GetJob(job);
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((*stored)->before_json == weft::wire::Dump(ClusterState{spec, Layout({}), "pending"}.ToJson()));
  CHECK((*stored)->target_json ==
        weft::wire::Dump(ClusterState{spec, Layout({{"n1", {"db"}}, {"n2", {"web"}}}), "active"}.ToJson()));
  const json cluster = {{"id", f.cluster_id}, {"name", "c"}, {"owner", "alice"}, {"template", "t"}};
  const json provider = {{"name", "p"}, {"type", "fp"}, {"fields", {{"zone", "z1"}}}};
  const json config = {{"port", 80}, {"motd", "no macro here"}};

  json create = json::object();
  weft::queue::TaskTexts create_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/CREATE"), create, create_texts).ok());
  CHECK(Sent(create, create_texts) == json{{"task_key", "n1/CREATE"},
                             {"hostname", "n1"},
                             {"cluster", cluster},
                             {"provider", provider},
                             {"node", {{"hostname", "n1"}, {"services", {"db"}}, {"id", "n1"}}},
                             {"results", json::object()},
                             {"config", config},
                             {"nodes",
                              {{{"id", "n1"}, {"hostname", "n1"}, {"access_v4", ""}, {"bind_v4", ""}, {"services", {"db"}}},
                               {{"id", "n2"}, {"hostname", "n2"}, {"access_v4", ""}, {"bind_v4", ""}, {"services", {"web"}}}}}});

  // The nodes list made for the CREATE is made again once addresses arrive.
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}, {"ssh_auth", {{"user", "root"}}}}).ok());
  REQUIRE(f.Finish("n2/CREATE", true, {{"provider_id", "vm-2"}}).ok());
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.1"}, {"bind_v4", "10.0.0.1"}}).ok());
  REQUIRE(f.Finish("n2/CONFIRM", true, {{"access_v4", "10.0.0.2"}, {"bind_v4", "10.0.0.3"}, {"hostname", "n2.example"}}).ok());
  REQUIRE(f.Finish("n1/BOOTSTRAP", true).ok());
  json install = json::object();
  weft::queue::TaskTexts install_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/INSTALL/db"), install, install_texts).ok());
  const json results = {{"provider_id", "vm-1"}, {"ssh_auth", {{"user", "root"}}}, {"access_v4", "10.0.0.1"}, {"bind_v4", "10.0.0.1"}};
  CHECK(Sent(install, install_texts) ==
        json{{"task_key", "n1/INSTALL/db"},
             {"hostname", "n1"},
             {"cluster", cluster},
             {"provider", provider},
             {"node", {{"hostname", "n1"}, {"services", {"db"}}, {"id", "n1"}}},  // results once: weft-host copies them
             {"results", results},
             {"config", config},
             {"service", {{"name", "db"}, {"action", {{"type", "fa"}, {"fields", {{"me", "10.0.0.1"}}}}}}},
             {"nodes",
              {{{"id", "n1"}, {"hostname", "n1"}, {"access_v4", "10.0.0.1"}, {"bind_v4", "10.0.0.1"}, {"services", {"db"}}},
               {{"id", "n2"}, {"hostname", "n2.example"}, {"access_v4", "10.0.0.2"}, {"bind_v4", "10.0.0.3"}, {"services", {"web"}}}}}});
}

TEST_CASE("job engine: a part of a task that holds sealed text stays a tree for the auth decorator to open", "[jobs]") {
  Fixture f;
  json spec = Spec();
  spec["provider"]["fields"]["token"] = "enc:v2:sealed-token";
  f.Create(Layout({{"n1", {"db"}}}), json::object(), spec);
  REQUIRE(f.Finish("n1/CREATE", true, {{"ssh_auth", {{"user", "root"}, {"private_key", "enc:v2:sealed-key"}}}}).ok());
  json confirm = json::object();
  weft::queue::TaskTexts confirm_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/CONFIRM"), confirm, confirm_texts).ok());
  // The auth decorator looks into these as objects; text made once it would pass by.
  CHECK_FALSE(AsText(confirm_texts, "provider"));
  CHECK_FALSE(AsText(confirm_texts, "results"));
  CHECK(AsText(confirm_texts, "node"));  // without the results (sent once), it holds nothing sealed
  CHECK(AsText(confirm_texts, "cluster"));
  REQUIRE(confirm["provider"].is_object());
  CHECK(confirm["provider"]["fields"]["token"] == "enc:v2:sealed-token");
  REQUIRE(confirm["results"].is_object());
  CHECK(confirm["results"]["ssh_auth"]["private_key"] == "enc:v2:sealed-key");
  CHECK_FALSE(Sent(confirm, confirm_texts)["node"].contains("results"));  // sent once, as "results" 
  // Opening a task's copy leaves the next task of the node its own sealed copy.
  confirm["results"]["ssh_auth"]["private_key"] = "opened";
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.1"}}).ok());
  json bootstrap = json::object();
  weft::queue::TaskTexts bootstrap_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/BOOTSTRAP"), bootstrap, bootstrap_texts).ok());
  REQUIRE(bootstrap["results"].is_object());
  CHECK(bootstrap["results"]["ssh_auth"]["private_key"] == "enc:v2:sealed-key");
}

TEST_CASE("job engine: a plan kept services of an earlier plan for the same services only", "[jobs]") {
  NewJob a;
  a.tenant = "t1";
  a.operation = "create";
  a.before = ClusterState{Spec(), Layout({}), "pending"};
  a.target = ClusterState{Spec(), Layout({{"n1", {"db"}}, {"n2", {"web"}}}), "active"};
  weft::jobs::PlanCache cache;
  auto first = weft::jobs::PlanJob(a, nullptr, &cache);
  REQUIRE(first.ok());
  CHECK(cache.valid);
  // web without its runtime dependency on db: its START no longer waits for db's.
  NewJob b = a;
  b.before.spec["services"]["web"] = Service("web");
  b.target.spec["services"]["web"] = Service("web");
  auto cached = weft::jobs::PlanJob(b, nullptr, &cache);
  auto fresh = weft::jobs::PlanJob(b);
  REQUIRE(cached.ok());
  REQUIRE(fresh.ok());
  CHECK(cached->ToJson() == fresh->ToJson());
  CHECK(cached->ToJson() != first->ToJson());
  auto again = weft::jobs::PlanJob(a, nullptr, &cache);
  REQUIRE(again.ok());
  CHECK(again->ToJson() == first->ToJson());
}

TEST_CASE("job engine: a failed attempt is retried after a growing backoff", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  REQUIRE(f.Finish("n1/CREATE", false).ok());
  auto t = f.Tasks(job)["n1/CREATE"];
  CHECK(t.state == TaskState::kQueued);
  CHECK(t.message.find("attempt 1 failed (boom); attempt 2 after a 100ms backoff") != std::string::npos);
  auto none = f.queue->Take("h1", kPlugins);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());  // not before the backoff
  f.clock.AdvanceMs(kBackoffMs);
  REQUIRE(f.queue->ExpireDue().ok());
  REQUIRE(f.Finish("n1/CREATE", false).ok());
  CHECK(f.Tasks(job)["n1/CREATE"].message.find("attempt 3 after a 200ms backoff") != std::string::npos);
  f.clock.AdvanceMs(2 * kBackoffMs);
  REQUIRE(f.queue->ExpireDue().ok());
  REQUIRE(f.Finish("n1/CREATE", true).ok());
  t = f.Tasks(job)["n1/CREATE"];
  CHECK(t.state == TaskState::kSucceeded);
  CHECK(t.attempt == 3);
  CHECK(f.Ready("n1/CONFIRM"));
}

TEST_CASE("job engine: a failed CONFIRM deletes and re-creates its node before confirming again", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  REQUIRE(f.Finish("n1/CONFIRM", false).ok());
  auto tasks = f.Tasks(job);
  REQUIRE(tasks.count("n1/DELETE#2"));
  REQUIRE(tasks.count("n1/CREATE#2"));
  CHECK(tasks["n1/CONFIRM"].state == TaskState::kWaiting);
  CHECK(f.Ready("n1/DELETE#2"));
  CHECK_FALSE(f.Ready("n1/CREATE#2"));
  REQUIRE(f.Finish("n1/DELETE#2", true).ok());
  REQUIRE(f.Finish("n1/CREATE#2", true, {{"provider_id", "vm-2"}}).ok());
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.9"}}).ok());
  tasks = f.Tasks(job);
  CHECK(tasks["n1/CONFIRM"].attempt == 2);
  f.Drain();
  CHECK(f.JobStatus(job) == "succeeded");
  CHECK(f.ClusterStatus() == "active");
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 1);
  CHECK(json::parse(nodes->front().results_json)["provider_id"] == "vm-2");
}

TEST_CASE("job engine: a task that fails for good fails the job and the undo job deletes what was created",
          "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"db"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  f.TakeKey("n1/CONFIRM");  // running while the job fails: it may finish
  for (int attempt = 1; attempt <= 3; ++attempt) {
    REQUIRE(f.Finish("n2/CREATE", false).ok());
    f.clock.AdvanceMs(10 * kBackoffMs);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  auto tasks = f.Tasks(job);
  CHECK(tasks["n2/CREATE"].state == TaskState::kFailed);
  CHECK(tasks["n1/BOOTSTRAP"].state == TaskState::kCancelled);
  CHECK(f.JobStatus(job) == "failing");  // n1's CONFIRM still runs
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.1"}}).ok());
  CHECK(f.JobStatus(job) == "failed");
  const std::string undo = f.CurrentJob();
  REQUIRE(undo != job);
  auto j = f.store->GetJob(undo);
  REQUIRE(j.ok());
  CHECK((**j).operation == "undo");
  CHECK((**j).parent_job == job);
  // weftd started it: the audit log says so, on the cluster, naming both jobs.
  auto audited = f.Audited("cluster.undo");
  REQUIRE(audited.size() == 1);
  CHECK(audited[0].actor == "weftd");
  CHECK(audited[0].actor_role == "system");
  CHECK(audited[0].tenant == "t1");
  CHECK(audited[0].target == "cluster c");
  CHECK(audited[0].cluster_id == f.cluster_id);
  CHECK(audited[0].job_id == undo);
  CHECK(json::parse(audited[0].detail_json)["failed_job"] == job);
  auto undo_tasks = f.Tasks(undo);
  // Both nodes had a CREATE attempt, so both are deleted (a DELETE of a node never made is the plugin's no-op).
  REQUIRE(undo_tasks.size() == 2);
  CHECK(undo_tasks.count("n1/DELETE"));
  CHECK(undo_tasks.count("n2/DELETE"));
  CHECK(f.ClusterStatus() == "pending");
  f.Drain();
  CHECK(f.JobStatus(undo) == "succeeded");
  CHECK(f.ClusterStatus() == "terminated");
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  CHECK(nodes->empty());
  // A job that was undone cannot be retried.
  CHECK(f.engine->Retry(job).code() == Code::kConflict);
}

TEST_CASE("job engine: keep_on_failure leaves the cluster incomplete and retry resumes the job", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}), {{"keep_on_failure", true}});
  for (const char* key : {"n1/CREATE", "n1/CONFIRM", "n1/BOOTSTRAP"}) REQUIRE(f.Finish(key, true).ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    REQUIRE(f.Finish("n1/INSTALL/db", false).ok());
    f.clock.AdvanceMs(10 * kBackoffMs);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  CHECK(f.JobStatus(job) == "failed");
  CHECK(f.ClusterStatus() == "incomplete");
  CHECK(f.Tasks(job)["n1/START/db"].state == TaskState::kCancelled);
  REQUIRE(f.engine->Retry(job).ok());
  CHECK(f.JobStatus(job) == "running");
  CHECK(f.Ready("n1/INSTALL/db"));
  f.Drain();
  auto tasks = f.Tasks(job);
  CHECK(tasks["n1/INSTALL/db"].attempt == 4);
  CHECK(tasks["n1/START/db"].state == TaskState::kSucceeded);
  CHECK(f.JobStatus(job) == "succeeded");
  CHECK(f.ClusterStatus() == "active");
}

TEST_CASE("job engine: after a restart every job continues where it stopped", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"web"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  const TaskRecord confirm = f.TakeKey("n1/CONFIRM");  // its host dies with weftd
  const TaskRecord create = f.TakeKey("n2/CREATE");    // its host lives on
  f.taken.clear();
  f.Open();  // a restarted weftd: new queue and engine over the same file
  CHECK(f.engine->ActiveJob(f.cluster_id) == job);
  weft::queue::Conflict conflict;
  // The surviving host's attempt finishes after the restart: accepted, its lease still holds.
  weft::queue::FinishRequest late;
  late.host_id = "h1";
  late.task_id = create.id;
  late.attempt = create.attempt;
  late.result_json = R"({"provider_id":"vm-2"})";
  REQUIRE(f.queue->Finish(late, &conflict).ok());
  CHECK(f.Ready("n2/CONFIRM"));
  // The dead host's lease runs out: its task is handed out again, as attempt 2.
  f.clock.AdvanceMs(10001);
  REQUIRE(f.queue->ExpireDue().ok());
  f.Drain({{"n1/CONFIRM", {{"access_v4", "10.0.0.1"}}}, {"n2/CONFIRM", {{"access_v4", "10.0.0.2"}}}});
  auto tasks = f.Tasks(job);
  CHECK(tasks["n1/CONFIRM"].attempt == 2);
  CHECK(f.JobStatus(job) == "succeeded");
  // A late finish of the expired attempt is refused (fencing).
  weft::queue::FinishRequest stale;
  stale.host_id = "h1";
  stale.task_id = confirm.id;
  stale.attempt = confirm.attempt;
  CHECK(f.queue->Finish(stale, &conflict).code() == Code::kConflict);
  CHECK(conflict.current_attempt == 2);
}

// A 1-node create whose CREATE runs on h1 when bob aborts it.
struct AbortedWhileRunning : Fixture {
  std::string job = Create(Layout({{"n1", {"db"}}}));
  TaskRecord running = TakeKey("n1/CREATE");
  AbortedWhileRunning() { REQUIRE(engine->Abort(job, "bob").ok()); }
};

TEST_CASE("job engine: abort cancels what has not started and waits for a running attempt to stop", "[jobs]") {
  AbortedWhileRunning f;
  // Until h1 has stopped the CREATE, the job is not over and the cluster takes nothing else.
  CHECK(f.JobStatus(f.job) == "failing");
  auto stored = f.store->GetJob(f.job);
  REQUIRE(stored.ok());
  CHECK_THAT((*stored)->message, Catch::Contains("aborted by bob; waiting for 1 running attempt(s) to stop"));
  auto tasks = f.Tasks(f.job);
  CHECK(tasks["n1/START/db"].state == TaskState::kCancelled);
  CHECK(tasks["n1/CREATE"].state == TaskState::kLeased);
  CHECK(f.engine->Abort(f.job, "bob").code() == Code::kConflict);
  NewJob other;
  other.tenant = "t1";
  other.cluster_id = f.cluster_id;
  other.operation = "delete";
  other.before = ClusterState{Spec(), Layout({{"n1", {"db"}}}), "pending"};
  other.target = ClusterState{Spec(), Layout({}), "terminated"};
  CHECK(f.engine->Start(other).status().code() == Code::kConflict);
  // h1's heartbeat is answered that the attempt is stale (so h1 cancels it); its lease goes on meanwhile.
  auto renewed = f.queue->Renew("h1", {{f.running.id, f.running.attempt}});
  REQUIRE(renewed.ok());
  CHECK(renewed->renewed == 1);
  REQUIRE(renewed->stale.size() == 1);
  CHECK(renewed->stale[0].task_id == f.running.id);
  // h1 stopped it: the job is aborted, the task cancelled, nothing undone.
  REQUIRE(f.Finish("n1/CREATE", false, json::object(), "", "fp CREATE: cancelled by the host").ok());
  CHECK(f.JobStatus(f.job) == "aborted");
  CHECK(f.ClusterStatus() == "incomplete");
  stored = f.store->GetJob(f.job);
  REQUIRE(stored.ok());
  CHECK((*stored)->message == "aborted by bob");
  const TaskRecord create = f.Tasks(f.job)["n1/CREATE"];
  CHECK(create.state == TaskState::kCancelled);
  CHECK(f.engine->Abort(f.job, "bob").code() == Code::kConflict);
  // An aborted job can be resumed; if it then fails, it fails (it is not taken for aborted again).
  REQUIRE(f.engine->Retry(f.job).ok());
  f.Drain();
  CHECK(f.JobStatus(f.job) == "succeeded");
}

TEST_CASE("job engine: a running attempt that succeeds after its job's abort keeps its result", "[jobs]") {
  AbortedWhileRunning f;
  // The machine was made before h1 could stop the plugin: a later delete must know it.
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  CHECK(f.JobStatus(f.job) == "aborted");
  CHECK(f.Tasks(f.job)["n1/CREATE"].state == TaskState::kSucceeded);
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 1);
  CHECK(json::parse((*nodes)[0].results_json).value("provider_id", "") == "vm-1");
}

TEST_CASE("job engine: an aborted job's running attempt whose host goes silent ends cancelled with its lease",
          "[jobs]") {
  AbortedWhileRunning f;
  // A restarted weftd tells the host again (what the last one said is gone with it).
  f.Open();
  CHECK(f.JobStatus(f.job) == "failing");
  auto renewed = f.queue->Renew("h1", {{f.running.id, f.running.attempt}});
  REQUIRE(renewed.ok());
  CHECK(renewed->stale.size() == 1);
  f.clock.AdvanceMs(10001);
  REQUIRE(f.queue->ExpireDue().ok());
  CHECK(f.JobStatus(f.job) == "aborted");
  const TaskRecord create = f.Tasks(f.job)["n1/CREATE"];
  CHECK(create.state == TaskState::kCancelled);
  CHECK_THAT(create.message, Catch::Contains("aborted by bob") && Catch::Contains("expired"));
}

TEST_CASE("job engine: a second job on a busy cluster is refused", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  NewJob other;
  other.tenant = "t1";
  other.cluster_id = f.cluster_id;
  other.operation = "delete";
  other.before = ClusterState{Spec(), Layout({{"n1", {"db"}}}), "pending"};
  other.target = ClusterState{Spec(), Layout({}), "terminated"};
  auto r = f.engine->Start(other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kConflict);
  CHECK(r.status().message().find("job " + job) != std::string::npos);
}

TEST_CASE("job engine: a failed grow removes the new nodes again and the cluster keeps its old layout", "[jobs]") {
  Fixture f;
  const std::string create = f.Create(Layout({{"n1", {"db"}}}));
  f.Drain();
  REQUIRE(f.JobStatus(create) == "succeeded");
  NewJob scale;
  scale.tenant = "t1";
  scale.cluster_id = f.cluster_id;
  scale.operation = "scale";
  scale.before = ClusterState{Spec(), Layout({{"n1", {"db"}}}), "active"};
  scale.target = ClusterState{Spec(), Layout({{"n1", {"db"}}, {"n2", {"db"}}}), "active"};
  auto started = f.engine->Start(scale);
  REQUIRE(started.ok());
  const std::string job = started->id;
  for (const char* key : {"n2/CREATE", "n2/CONFIRM", "n2/BOOTSTRAP"}) REQUIRE(f.Finish(key, true).ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    REQUIRE(f.Finish("n2/INSTALL/db", false).ok());
    f.clock.AdvanceMs(10 * kBackoffMs);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  CHECK(f.JobStatus(job) == "failed");
  const std::string undo = f.CurrentJob();
  REQUIRE(undo != job);
  auto tasks = f.Tasks(undo);
  CHECK(tasks.count("n2/DELETE"));
  CHECK_FALSE(tasks.count("n1/DELETE"));
  // The grow ran nothing on n1 (db defines no CONFIGURE), so neither does its undo: no restart.
  for (const auto& [key, t] : tasks) CHECK(t.node_id != "n1");
  f.Drain();
  CHECK(f.JobStatus(undo) == "succeeded");
  CHECK(f.ClusterStatus() == "active");
  auto c = f.store->GetCluster(f.cluster_id);
  REQUIRE(c.ok());
  CHECK(json::parse((**c).layout_json)["nodes"].size() == 1);
  CHECK((**c).previous_json.empty());  // a failed change is not a change to roll back to
}

TEST_CASE("job engine: a failed shrink is not undone, the cluster is inconsistent until retry finishes it",
          "[jobs]") {
  Fixture f;
  const std::string create = f.Create(Layout({{"n1", {"db"}}, {"n2", {"db"}}}));
  f.Drain({{"n1/CREATE", {{"provider_id", "vm-1"}}}, {"n2/CREATE", {{"provider_id", "vm-2"}}}});
  REQUIRE(f.JobStatus(create) == "succeeded");
  NewJob scale;
  scale.tenant = "t1";
  scale.cluster_id = f.cluster_id;
  scale.operation = "scale";
  scale.before = ClusterState{Spec(), Layout({{"n1", {"db"}}, {"n2", {"db"}}}), "active"};
  scale.target = ClusterState{Spec(), Layout({{"n1", {"db"}}}), "active"};
  auto started = f.engine->Start(scale);
  REQUIRE(started.ok());
  const std::string job = started->id;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    REQUIRE(f.Finish("n2/DELETE", false).ok());
    f.clock.AdvanceMs(10 * kBackoffMs);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  CHECK(f.JobStatus(job) == "failed");
  // Going back would CREATE n2 again although its DELETE may have half run.
  CHECK(f.CurrentJob() == job);
  CHECK(f.engine->ActiveJob(f.cluster_id).empty());
  CHECK(f.ClusterStatus() == "inconsistent");
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  CHECK(nodes->size() == 2);  // n2 was not deleted
  REQUIRE(f.engine->Retry(job).ok());
  CHECK(f.Ready("n2/DELETE"));
  f.Drain();
  CHECK(f.JobStatus(job) == "succeeded");
  CHECK(f.ClusterStatus() == "active");
  nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 1);
  CHECK(nodes->front().id == "n1");
}

namespace {

// A service that defines STOP and REMOVE too, so that taking it off runs tasks.
json StoppableService(const std::string& name) {
  json s = Service(name);
  s["provisioner"]["actions"]["stop"] = {{"type", "fa"}};
  s["provisioner"]["actions"]["remove"] = {{"type", "fa"}};
  return s;
}

// The delete job of the cluster as it is stored.
NewJob DeleteOf(const weft::store::ClusterRecord& c) {
  NewJob job;
  job.tenant = c.tenant;
  job.cluster_id = c.id;
  job.operation = "delete";
  job.before = ClusterState{json::parse(c.spec_json), json::parse(c.layout_json), c.status};
  job.target = ClusterState{job.before.spec, Layout({}), "terminated"};
  return job;
}

// Everything written to stderr (the log) while `run` runs.
template <typename F>
std::string Stderr(F&& run) {
  weft::testing::TempDir dir{"weft-stderr"};
  const std::string path = (dir / "stderr").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  ::close(fd);
  run();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("job engine: an add-services whose undo fails leaves the service on the nodes with its definition, "
          "so a delete of the cluster plans",
          "[jobs]") {
  Fixture f;
  json plain = Spec();
  plain["services"].erase("web");
  const std::string create = f.Create(Layout({{"n1", {"db"}}, {"n2", {"db"}}}), json::object(), plain);
  f.Drain();
  REQUIRE(f.JobStatus(create) == "succeeded");
  json more = plain;
  more["services"]["mon"] = StoppableService("mon");
  NewJob add;
  add.tenant = "t1";
  add.cluster_id = f.cluster_id;
  add.operation = "add-services";
  add.before = ClusterState{plain, Layout({{"n1", {"db"}}, {"n2", {"db"}}}), "active"};
  add.target = ClusterState{more, Layout({{"n1", {"db", "mon"}}, {"n2", {"db", "mon"}}}), "active"};
  auto started = f.engine->Start(add);
  REQUIRE(started.ok());
  const std::string job = started->id;
  // mon installs on n2 and never on n1; then STOP fails for good, so the undo fails.
  REQUIRE(f.Finish("n2/INSTALL/mon", true).ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    REQUIRE(f.Finish("n1/INSTALL/mon", false).ok());
    f.clock.AdvanceMs(10 * kBackoffMs);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  REQUIRE(f.JobStatus(job) == "failed");
  const std::string undo = f.CurrentJob();
  REQUIRE(undo != job);
  REQUIRE(f.Tasks(undo).count("n1/STOP/mon"));
  for (const std::string node : {"n1", "n2"})
    for (int attempt = 1; attempt <= 3; ++attempt) {
      if (!f.Ready(node + "/STOP/mon")) break;
      REQUIRE(f.Finish(node + "/STOP/mon", false).ok());
      f.clock.AdvanceMs(10 * kBackoffMs);
      REQUIRE(f.queue->ExpireDue().ok());
    }
  REQUIRE(f.JobStatus(undo) == "failed");
  CHECK(f.ClusterStatus() == "inconsistent");

  auto c = f.store->GetCluster(f.cluster_id);
  REQUIRE(c.ok());
  const json layout = json::parse((**c).layout_json);
  const json spec = json::parse((**c).spec_json);
  INFO(layout.dump() << "\n" << spec.dump());
  bool left = false;
  for (const json& n : layout["nodes"])
    for (const json& s : n["services"]) left = left || s == "mon";
  CHECK(left);
  CHECK(spec["services"].contains("mon"));
  CHECK(spec["services"].value("mon", json()) == more["services"]["mon"]);
  CHECK(spec["services"].contains("db"));

  // The delete (as cluster delete and the lease janitor make it) plans a DELETE per node.
  auto plan = weft::jobs::PlanJob(DeleteOf(**c));
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  std::size_t deletes = 0;
  for (const auto& t : plan->tasks()) deletes += t.action == weft::planner::Action::kDelete;
  CHECK(deletes == 2);
  // So does any other job, a stop for one.
  NewJob stop = DeleteOf(**c);
  stop.operation = "stop";
  stop.target = stop.before;
  auto stopping = weft::jobs::PlanJob(stop);
  INFO(stopping.status().message());
  CHECK(stopping.ok());
  auto deleting = f.engine->Start(DeleteOf(**c));
  REQUIRE(deleting.ok());
  f.Drain();
  CHECK(f.JobStatus(deleting->id) == "succeeded");
  CHECK(f.ClusterStatus() == "terminated");
}

TEST_CASE("job engine: a lease that runs out on a cluster whose delete cannot be planned is kept, said once, "
          "and the cluster is deleted once the cause is fixed",
          "[jobs]") {
  Fixture f;
  const std::string create = f.Create(Layout({{"n1", {"db"}}}));
  f.Drain();
  REQUIRE(f.JobStatus(create) == "succeeded");
  auto got = f.store->GetCluster(f.cluster_id);
  REQUIRE(got.ok());
  weft::store::ClusterRecord c = **got;
  const std::string good_spec = c.spec_json;
  // The spec's copy of the service the node runs is damaged: no plan can be made.
  json broken = json::parse(good_spec);
  broken["services"]["db"]["name"] = 42;
  c.spec_json = broken.dump();
  c.expire_at_ms = f.clock.NowMs() + 1000;
  REQUIRE(f.store->UpdateCluster(c).ok());
  const std::int64_t due = c.expire_at_ms;

  REQUIRE(f.engine->ExpireLeases().ok());
  CHECK(f.engine->ActiveJob(f.cluster_id).empty());  // not due yet

  f.clock.AdvanceMs(2000);
  const std::string logged = Stderr([&] {
    for (int pass = 0; pass < 3; ++pass) {
      REQUIRE(f.engine->ExpireLeases().ok());
      f.clock.AdvanceMs(100);
    }
  });
  INFO(logged);
  CHECK(f.engine->ActiveJob(f.cluster_id).empty());
  CHECK(f.CurrentJob() == create);
  // Said once for the three passes, naming the cluster and why.
  CHECK(Count(logged, "cannot be deleted") == 1);
  CHECK(Count(logged, "cluster 'c' (id " + f.cluster_id + ",") == 1);
  CHECK(Count(logged, "the cluster's copy of service 'db'") == 1);
  // The lease is still there, and due.
  got = f.store->GetCluster(f.cluster_id);
  REQUIRE(got.ok());
  CHECK((**got).expire_at_ms == due);
  CHECK((**got).status == "active");
  CHECK(f.Audited("cluster.delete").empty());  // nothing started, nothing audited

  // Fixed: the next pass deletes it, and the lease is over.
  c = **got;
  c.spec_json = good_spec;
  REQUIRE(f.store->UpdateCluster(c).ok());
  REQUIRE(f.engine->ExpireLeases().ok());
  const std::string deleting = f.engine->ActiveJob(f.cluster_id);
  REQUIRE(!deleting.empty());
  auto j = f.store->GetJob(deleting);
  REQUIRE(j.ok());
  CHECK((**j).operation == "delete");
  auto audited = f.Audited("cluster.delete");
  REQUIRE(audited.size() == 1);
  CHECK(audited[0].actor == "weftd");
  CHECK(audited[0].target == "cluster c");
  CHECK(audited[0].job_id == deleting);
  const json detail = json::parse(audited[0].detail_json);
  CHECK(detail["reason"] == "the cluster's lease ran out");
  CHECK(detail["expired_at_ms"] == due);
  got = f.store->GetCluster(f.cluster_id);
  REQUIRE(got.ok());
  CHECK((**got).expire_at_ms == 0);
  // A pass while it runs starts nothing more.
  REQUIRE(f.engine->ExpireLeases().ok());
  CHECK(f.engine->ActiveJob(f.cluster_id) == deleting);
  CHECK(f.Audited("cluster.delete").size() == 1);
  f.Drain();
  CHECK(f.JobStatus(deleting) == "succeeded");
  CHECK(f.ClusterStatus() == "terminated");
}

TEST_CASE("job engine: a node's service without a definition in the cluster's spec fails a change with what to "
          "do, and does not stop a delete",
          "[jobs]") {
  NewJob job;
  job.tenant = "t1";
  job.cluster_id = "c1";
  job.operation = "stop";
  json spec = Spec();
  spec["services"].erase("web");
  job.before = ClusterState{spec, Layout({{"n1", {"db", "web"}}, {"n2", {"db"}}}), "inconsistent"};
  job.target = job.before;
  auto stop = weft::jobs::PlanJob(job);
  REQUIRE_FALSE(stop.ok());
  CHECK(stop.status().code() == Code::kInvalid);
  CHECK(stop.status().message() ==
        "node 'n1' runs service 'web', which the cluster's spec does not define; `weft cluster upgrade` puts the "
        "catalog's definition of it back (`weft cluster delete` needs none)");
  job.operation = "delete";
  job.target = ClusterState{spec, Layout({}), "terminated"};
  auto del = weft::jobs::PlanJob(job);
  INFO(del.status().message());
  REQUIRE(del.ok());
  std::set<std::string> deleted;
  for (const auto& t : del->tasks()) {
    CHECK(t.action == weft::planner::Action::kDelete);
    deleted.insert(t.node);
  }
  CHECK(deleted == std::set<std::string>{"n1", "n2"});
}

TEST_CASE("job engine: a result that would make its node's results too large fails the task at once, "
          "saying the node, sizes and limit", "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  const std::string blob(200 * 1024, 'b');
  REQUIRE(f.Finish("n1/CREATE", true, {{"a", blob}}).ok());
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"b", blob}}).ok());
  CHECK(f.Tasks(job)["n1/CONFIRM"].state == TaskState::kSucceeded);
  // The same key again replaces it: the node's results stay within the limit.
  REQUIRE(f.Finish("n1/BOOTSTRAP", true, {{"a", blob}}).ok());
  CHECK(f.Tasks(job)["n1/BOOTSTRAP"].state == TaskState::kSucceeded);
  // A third 200 KiB would make them about 600 KiB, over 512 KiB.
  REQUIRE(f.Finish("n1/INSTALL/db", true, {{"c", blob}}).ok());
  const TaskRecord bootstrap = f.Tasks(job)["n1/INSTALL/db"];
  CHECK(bootstrap.state == TaskState::kFailed);
  CHECK(bootstrap.attempt == 1);  // not retried: the same run returns the same result
  CHECK(bootstrap.result_json == "{}");
  CHECK_THAT(bootstrap.message, Catch::Contains("returned a result of 204808 bytes that would make node n1's results") &&
                                    Catch::Contains("over the limit of 524288 bytes"));
  auto stored = f.store->GetJob(job);
  REQUIRE(stored.ok());
  CHECK_THAT((*stored)->message, Catch::Contains("another attempt cannot change that, so it is not retried"));
  CHECK(f.JobStatus(job) != "running");
  // The node's stored results are those of before: the refused result was not merged.
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  bool seen = false;
  for (const auto& n : *nodes)
    if (n.id == "n1") {
      seen = true;
      const json r = json::parse(n.results_json);
      CHECK(r.contains("a"));
      CHECK(r.contains("b"));
      CHECK_FALSE(r.contains("c"));
    }
  CHECK(seen);
}

TEST_CASE("job engine: a failure coded INVALID or UNSUPPORTED fails the job at once, FAILED is retried", "[jobs]") {
  for (const char* code : {"INVALID", "UNSUPPORTED"}) {
    Fixture f;
    const std::string job = f.Create(Layout({{"n1", {"db"}}}));
    REQUIRE(f.Finish("n1/CREATE", false, json::object(), code,
                     std::string("fp CREATE ") + code + ": required field 'zone' is missing")
                .ok());
    const TaskRecord after = f.Tasks(job)["n1/CREATE"];
    CHECK(after.state == TaskState::kFailed);
    CHECK(after.attempt == 1);
    auto stored = f.store->GetJob(job);
    REQUIRE(stored.ok());
    CHECK_THAT((*stored)->message,
               Catch::Contains("failed at attempt 1, and another attempt cannot change that, so it is not retried") &&
                   Catch::Contains("required field 'zone' is missing"));
    CHECK(f.JobStatus(job) != "running");
  }
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  REQUIRE(f.Finish("n1/CREATE", false, json::object(), "FAILED").ok());
  CHECK(f.Tasks(job)["n1/CREATE"].state == TaskState::kQueued);
  CHECK(f.JobStatus(job) == "running");
}

TEST_CASE("job engine: a node's BOOTSTRAP goes only to an automator of the node that declares it", "[jobs]") {
  Fixture f;
  using weft::planner::Action;
  auto bit = [](Action a) { return 1u << (static_cast<int>(a) - 1); };  // weft_action's bits
  // As the hosts registered them: fa declares no BOOTSTRAP (as hello.lua), fb does.
  const std::uint32_t install_start = bit(Action::kInstall) | bit(Action::kStart);
  f.engine->set_declared_actions([&](const std::string& tenant) {
    CHECK(tenant == "t1");
    return weft::planner::DeclaredActions{
        {"fp", bit(Action::kCreate) | bit(Action::kConfirm) | bit(Action::kDelete)},
        {"fa", install_start},
        {"fb", bit(Action::kBootstrap) | install_start}};
  });
  json spec = Spec();
  json cache = Service("cache");  // installed by fa, started by fb
  cache["provisioner"]["actions"]["start"]["type"] = "fb";
  spec["services"]["cache"] = cache;
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"cache", "db"}}}), json::object(), spec);
  auto tasks = f.Tasks(job);
  CHECK(tasks.count("n1/BOOTSTRAP") == 0);  // fa alone: no BOOTSTRAP, its INSTALL follows the CONFIRMs
  REQUIRE(tasks.count("n2/BOOTSTRAP") == 1);
  CHECK(tasks["n2/BOOTSTRAP"].plugin == "fb");  // not fa, the first automator of n2's services
  // The job runs to the end without a BOOTSTRAP on n1.
  f.Drain({{"n1/CONFIRM", {{"access_v4", "10.0.0.1"}, {"bind_v4", "10.0.0.1"}}},
           {"n2/CONFIRM", {{"access_v4", "10.0.0.2"}, {"bind_v4", "10.0.0.2"}}}});
  CHECK(f.JobStatus(job) == "succeeded");

  // The dry run's JSON names each task's plugin.
  NewJob dry;
  dry.tenant = "t1";
  dry.operation = "create";
  dry.before = ClusterState{spec, Layout({}), "pending"};
  dry.target = ClusterState{spec, Layout({{"n1", {"db"}}}), "active"};
  const auto declared = f.engine->DeclaredActions("t1");
  REQUIRE(declared.has_value());
  auto plan = weft::jobs::PlanJob(dry, &*declared);
  REQUIRE(plan.ok());
  std::map<std::string, std::string> plugin;
  const json plan_json = weft::jobs::PlanJson(dry, *plan, &*declared);
  for (const json& t : plan_json["tasks"])
    plugin[t["id"].get<std::string>()] = t["plugin"].get<std::string>();
  CHECK(plugin == std::map<std::string, std::string>{{"n1/CREATE", "fp"},
                                                     {"n1/CONFIRM", "fp"},
                                                     {"n1/INSTALL/db", "fa"},
                                                     {"n1/START/db", "fa"}});
}

TEST_CASE("job engine: a result whose node fact has the wrong type fails the task at once, and the job goes on",
          "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  // A plugin that returns no address as null: weftd reads access_v4 as a string in
  // every later task of the node (macros, the task's node list).
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", nullptr}, {"note", "kept? no"}}).ok());
  const TaskRecord confirm = f.Tasks(job)["n1/CONFIRM"];
  CHECK(confirm.state == TaskState::kFailed);
  CHECK(confirm.attempt == 1);  // the same run would return the same result
  CHECK(confirm.result_json == "{}");
  CHECK_THAT(confirm.message, Catch::Contains("(n1/CONFIRM) returned a result Weft cannot use: 'access_v4' must be "
                                              "a string; it is null") &&
                                  Catch::Contains("the result was not kept and the task failed"));
  auto nodes = f.store->ListNodes(f.cluster_id);
  REQUIRE(nodes.ok());
  for (const auto& n : *nodes) CHECK(n.results_json.find("access_v4") == std::string::npos);
  // The job fails there, as for any task that failed for good (the cluster's undo is a job of its own).
  f.Drain();
  CHECK(f.JobStatus(job) == "failed");
}

TEST_CASE("job engine: node results stored with a fact of the wrong type (before weftd checked them) do not stop a "
          "restarted weftd",
          "[jobs]") {
  Fixture f;
  const std::string job = f.Create(Layout({{"n1", {"db"}}, {"n2", {"web"}}}));
  REQUIRE(f.Finish("n1/CREATE", true, {{"provider_id", "vm-1"}}).ok());
  // What an older weftd kept: every fact the macros read, of the wrong type.
  REQUIRE(f.store->PutNode({f.cluster_id, "n1", R"({"hostname":5,"access_v4":7,"bind_v4":false})"}).ok());
  f.Open();  // a restarted weftd reads them back
  // Handing out the node's next task fills its macros and node list from them.
  json confirm = json::object();
  weft::queue::TaskTexts confirm_texts;
  REQUIRE(f.engine->Decorate(f.TakeKey("n1/CONFIRM"), confirm, confirm_texts).ok());
  const json task = Sent(confirm, confirm_texts);
  REQUIRE(task["nodes"].size() == 2);
  CHECK(task["nodes"][0]["hostname"] == "n1");  // named by its id, as a node with no hostname fact
  CHECK(task["nodes"][0]["access_v4"] == "");
  REQUIRE(f.Finish("n1/CONFIRM", true, {{"access_v4", "10.0.0.1"}}).ok());
  CHECK(f.Tasks(job).at("n1/CONFIRM").state == TaskState::kSucceeded);
}
