#include <sqlite3.h>

#include <catch2/catch.hpp>

#include "weft/common/log.hpp"
#include "weft/server/store/store.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::AttemptStatus;

namespace {

// Reads one integer straight from the database, bypassing Store, to check what is stored.
std::int64_t QueryInt(const std::filesystem::path& db_path, const char* sql) {
  return weft::testing::QueryStoreInt(db_path, sql);
}

TaskRecord NewTask(const std::string& plugin = "fake-provider") {
  TaskRecord t;
  t.tenant = "default";
  t.plugin = plugin;
  t.action = "CREATE";
  t.node_id = "n1";
  t.max_attempts = 3;
  t.created_at_ms = 1000;
  t.payload_json = R"({"k":1})";
  return t;
}

}  // namespace

TEST_CASE("store: a new file gets every migration, recorded once", "[store]") {
  weft::testing::TempDir dir;
  auto path = dir / "weft.db";
  {
    auto store = weft::testing::OpenStore(path);
    REQUIRE(store.ok());
    CHECK((*store)->schema_version() == Store::LatestSchemaVersion());
  }
  {
    auto again = weft::testing::OpenStore(path);
    REQUIRE(again.ok());
    CHECK((*again)->schema_version() == Store::LatestSchemaVersion());
  }
  CHECK(QueryInt(path, "SELECT COUNT(*) FROM schema_migrations") == Store::LatestSchemaVersion());
  CHECK(QueryInt(path, "SELECT MAX(version) FROM schema_migrations") == Store::LatestSchemaVersion());
}

TEST_CASE("store: write-ahead logging is on", "[store][sqlite]") {
  weft::testing::TempDir dir;
  auto store = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(store.ok());
  auto mode = (*store)->JournalMode();
  REQUIRE(mode.ok());
  CHECK(*mode == "wal");
  TaskRecord t = NewTask();
  REQUIRE((*store)->InsertTask(&t).ok());
  CHECK(std::filesystem::exists(dir / "weft.db-wal"));
}

TEST_CASE("store: reopening keeps hosts and tasks", "[store]") {
  weft::testing::TempDir dir;
  std::int64_t id = 0;
  {
    auto store = weft::testing::OpenStore(dir / "weft.db");
    REQUIRE(store.ok());
    REQUIRE((*store)->Begin().ok());
    TaskRecord t = NewTask();
    REQUIRE((*store)->InsertTask(&t).ok());
    id = t.id;
    REQUIRE((*store)->UpsertHost({"h1", 4, "0.1.0", R"([{"type":"fake-provider"}])", 5, 6, "", false}).ok());
    REQUIRE((*store)->Commit().ok());
  }
  auto store = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(store.ok());
  auto task = (*store)->GetTask(id);
  REQUIRE(task.ok());
  REQUIRE(task->has_value());
  CHECK((*task)->plugin == "fake-provider");
  CHECK((*task)->state == TaskState::kQueued);
  CHECK((*task)->payload_json == R"({"k":1})");
  auto hosts = (*store)->ListHosts();
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 1);
  CHECK(hosts->at(0).id == "h1");
  CHECK(hosts->at(0).capacity == 4);
}

TEST_CASE("store: a rolled-back transaction leaves nothing behind", "[store]") {
  weft::testing::TempDir dir;
  auto store = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(store.ok());
  REQUIRE((*store)->Begin().ok());
  TaskRecord t = NewTask();
  REQUIRE((*store)->InsertTask(&t).ok());
  REQUIRE((*store)->Rollback().ok());
  auto task = (*store)->GetTask(t.id);
  REQUIRE(task.ok());
  CHECK_FALSE(task->has_value());
}

TEST_CASE("store: leasing and ending attempts are recorded per attempt", "[store]") {
  weft::testing::TempDir dir;
  auto opened = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(opened.ok());
  Store& store = **opened;
  TaskRecord t = NewTask();
  REQUIRE(store.InsertTask(&t).ok());
  REQUIRE(store.LeaseTask(t.id, 1, "h1", 5000, 2000).ok());
  auto leased = store.GetTask(t.id);
  REQUIRE(leased.ok());
  CHECK((*leased)->state == TaskState::kLeased);
  CHECK((*leased)->host_id == "h1");
  CHECK((*leased)->lease_until_ms == 5000);
  REQUIRE(store.EndAttempt(t.id, 1, TaskState::kQueued, AttemptStatus::kExpired, "lease ran out", "{}", "", "", 5001).ok());
  REQUIRE(store.LeaseTask(t.id, 2, "h2", 9000, 6000).ok());
  REQUIRE(store.EndAttempt(t.id, 2, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", R"({"provider_id":"p1"})", "out",
                           "err", 7000)
              .ok());
  auto done = store.GetTask(t.id);
  REQUIRE(done.ok());
  CHECK((*done)->state == TaskState::kSucceeded);
  CHECK((*done)->result_json == R"({"provider_id":"p1"})");
  CHECK((*done)->stdout_tail == "out");
  auto attempts = store.ListAttempts(t.id);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK(attempts->at(0).status == "expired");
  CHECK(attempts->at(0).host_id == "h1");
  CHECK(attempts->at(1).status == "succeeded");
  CHECK(attempts->at(1).finished_at_ms == 7000);
  auto counts = store.CountTasks();
  REQUIRE(counts.ok());
  CHECK(counts->succeeded == 1);
  CHECK(counts->queued == 0);
}

// Take -> finish cycles, one transaction each, as weftd's reactor commits them.
void CommitCycles(Store& store, int cycles) {
  for (int i = 0; i < cycles; ++i) {
    REQUIRE(store.Begin().ok());
    TaskRecord t = NewTask();
    REQUIRE(store.InsertTask(&t).ok());
    REQUIRE(store.LeaseTask(t.id, 1, "h1", 5000, 2000).ok());
    REQUIRE(store.EndAttempt(t.id, 1, TaskState::kSucceeded, AttemptStatus::kSucceeded, "", "{}", "", "", 3000).ok());
    REQUIRE(store.Commit().ok());
  }
}

TEST_CASE("store: checkpoints run on their own thread and the WAL stays bounded under steady commits", "[store][sqlite][slow]") {
  weft::testing::TempDir dir;
  weft::store::StoreOptions options;
  options.checkpoint.background_pages = 64;
  options.checkpoint.limit_pages = 1'000'000;  // never: only the thread and its finishing step may checkpoint
  constexpr int kCycles = 4000;                // several pages a commit: far more than 64 pages in all
  {
    auto opened = weft::testing::OpenStore(dir / "weft.db", options);
    REQUIRE(opened.ok());
    Store& store = **opened;
    std::int64_t max_wal_pages = 0;
    for (int round = 0; round < 40; ++round) {
      CommitCycles(store, kCycles / 40);
      max_wal_pages = std::max(max_wal_pages, store.checkpoint_stats().wal_pages);
    }
    const weft::store::CheckpointStats stats = store.checkpoint_stats();
    CHECK(stats.background_rounds > 0);
    // Every round is finished by a commit, which lets the WAL start over.
    CHECK(stats.writer_rounds > 0);
    CHECK(stats.writer_rounds <= stats.background_rounds + 1);
    // Commits come back to back, so the thread alone would never find the WAL
    // quiet enough to empty it: without the finishing step it grows with every
    // commit, to several pages per commit. Bounded means under one page per
    // commit in all, with room for a checkpoint thread kept off the CPU for a
    // while on a loaded machine (a few hundred pages is usual).
    constexpr std::int64_t kBoundPages = kCycles;
    INFO("largest WAL seen: " << max_wal_pages << " pages");
    CHECK(max_wal_pages < kBoundPages);
    CHECK(std::filesystem::file_size(dir / "weft.db-wal") < kBoundPages * 4096);
  }
  // Nothing committed was lost on the way into the database file.
  CHECK(QueryInt(dir / "weft.db", "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'") == kCycles);
}

TEST_CASE("store: the checkpoint thread copies the WAL into the database file by itself", "[store][sqlite]") {
  weft::testing::TempDir dir;
  weft::store::StoreOptions options;
  options.checkpoint.background_pages = 64;
  options.checkpoint.limit_pages = 1'000'000;  // never: only the thread may checkpoint here
  auto opened = weft::testing::OpenStore(dir / "weft.db", options);
  REQUIRE(opened.ok());
  Store& store = **opened;
  const auto db_bytes = [&] { return std::filesystem::file_size(dir / "weft.db"); };
  const std::uintmax_t before = db_bytes();
  // Commits until the WAL passes 64 pages: the last one asks the thread for a round.
  int cycles = 0;
  while (store.checkpoint_stats().wal_pages < options.checkpoint.background_pages) {
    CommitCycles(store, 1);
    REQUIRE(++cycles < 10'000);
  }
  // No commit comes after it, so nothing but the thread can checkpoint: the
  // tables the commits grew reach the database file only if its round copies
  // them (the file is written by checkpoints alone).
  const bool copied = weft::testing::WaitFor(
      [&] { return db_bytes() > before && store.checkpoint_stats().background_rounds >= 1; }, std::chrono::seconds(30));
  INFO("weft.db: " << before << " bytes before the commits, " << db_bytes() << " after; "
                   << store.checkpoint_stats().background_rounds << " background rounds");
  CHECK(copied);
}

TEST_CASE("store: a WAL past 32 MiB is not cut back when it starts over", "[store][sqlite][slow]") {
  weft::testing::TempDir dir;
  weft::store::StoreOptions options;
  // A round at 40 MiB of WAL (4 KiB pages and their 24-byte frame headers).
  options.checkpoint.background_pages = 10'240;
  options.checkpoint.limit_pages = 1'000'000;
  constexpr std::uintmax_t kRoundBytes = 10'240 * (4096 + 24);
  auto opened = weft::testing::OpenStore(dir / "weft.db", options);
  REQUIRE(opened.ok());
  Store& store = **opened;
  // Commits until the writer has finished a round of the thread's...
  int cycles = 0;
  while (store.checkpoint_stats().writer_rounds == 0) {
    CommitCycles(store, 1);
    REQUIRE(++cycles < 100'000);
  }
  CHECK(store.checkpoint_stats().background_rounds >= 1);
  // ...and one more, which starts the WAL over and gives back what its file
  // holds beyond journal_size_limit: nothing, under 64 MiB, so the next
  // rounds write over the file rather than growing it again.
  CommitCycles(store, 1);
  const std::uintmax_t wal_bytes = std::filesystem::file_size(dir / "weft.db-wal");
  INFO("weft.db-wal: " << wal_bytes << " bytes after " << cycles + 1 << " commits");
  CHECK(wal_bytes >= kRoundBytes);
}

TEST_CASE("store: a file from a newer weftd is refused", "[store]") {
  weft::testing::TempDir dir;
  { REQUIRE(weft::testing::OpenStore(dir / "weft.db").ok()); }
  REQUIRE(weft::testing::ExecStore(dir / "weft.db", "INSERT INTO schema_migrations (version) VALUES (999)") == "");
  auto store = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE_FALSE(store.ok());
  CHECK_THAT(store.status().message(), Catch::Contains("999"));
}

TEST_CASE("store: rebuilding the tasks table (migrations 3 and 4) keeps tasks, attempts, ids and the state check",
          "[store][sqlite]") {
  weft::testing::TempDir dir;
  const auto path = dir / "weft.db";
  std::int64_t first = 0;
  {
    auto opened = weft::testing::OpenStore(path);
    REQUIRE(opened.ok());
    TaskRecord t = NewTask();
    REQUIRE((*opened)->InsertTask(&t).ok());
    REQUIRE((*opened)->LeaseTask(t.id, 1, "h1", 5000, 2000).ok());
    first = t.id;
  }
  // Make the file look as if migrations 3 and 4 had not run yet; reopening runs them on a table with rows.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const std::string rewind =
      weft::testing::TasksBeforeSpecs(false) +
      "DELETE FROM schema_migrations WHERE version >= 3; DROP TABLE clusters; DROP TABLE nodes; "
      "DROP TABLE jobs; DROP INDEX tasks_by_job; DROP TABLE principals; DROP TABLE tenants; "
      "DROP TABLE users; DROP TABLE host_requests; DROP TABLE audit_log; DROP TABLE user_passwords; "
      "DROP TABLE sessions; DROP TABLE api_tokens; "
      "ALTER TABLE hosts DROP COLUMN incarnation; ALTER TABLE hosts DROP COLUMN draining; "
      "ALTER TABLE resource_names DROP COLUMN deleted; "
      // the attempt as weftd wrote it then, in a row of its own
      "INSERT INTO attempts (task_id, attempt, host_id, taken_at_ms) VALUES (" + std::to_string(first) +
      ", 1, 'h1', 2000)";
  REQUIRE(sqlite3_exec(db, rewind.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);

  // The upgrade is logged: an older weftd refuses the store afterwards.
  std::FILE* log = std::tmpfile();
  REQUIRE(log);
  weft::log::SetOutput(log);
  auto opened = weft::testing::OpenStore(path);
  weft::log::SetOutput(stderr);
  std::rewind(log);
  std::string logged;
  for (int ch; (ch = std::fgetc(log)) != EOF;) logged += static_cast<char>(ch);
  std::fclose(log);
  CHECK_THAT(logged, Catch::Contains("upgrading the store " + path.string() + " from schema version 2 to " +
                                     std::to_string(Store::LatestSchemaVersion())) &&
                         Catch::Contains("upgraded the store to schema version " +
                                         std::to_string(Store::LatestSchemaVersion())));
  REQUIRE(opened.ok());
  Store& store = **opened;
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  auto task = store.GetTask(first);
  REQUIRE(task.ok());
  REQUIRE(task->has_value());
  CHECK((*task)->state == TaskState::kLeased);
  CHECK((*task)->payload_json == R"({"k":1})");
  auto attempts = store.ListAttempts(first);
  REQUIRE(attempts.ok());
  CHECK(attempts->size() == 1);
  TaskRecord next = NewTask();
  REQUIRE(store.InsertTask(&next).ok());
  CHECK(next.id > first);
  CHECK(QueryInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('tasks_unfinished', 'task_specs_by_tenant')") ==
        2);
  CHECK(QueryInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('tasks_v3', 'tasks_v4')") == 0);
  CHECK(QueryInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('clusters', 'nodes', 'jobs')") == 3);
  // The state check still holds.
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
  CHECK(sqlite3_exec(raw, "UPDATE tasks SET state = 'lost'", nullptr, nullptr, nullptr) == SQLITE_CONSTRAINT);
  sqlite3_close(raw);
}

TEST_CASE("store: moving a cluster's summary into columns of its own (migration 10) keeps every cluster, and a "
          "row from before it gets its summary when read",
          "[store][sqlite]") {
  weft::testing::TempDir dir;
  const auto path = dir / "weft.db";
  const std::string spec = R"({"template":{"name":"web","services":["x"]},"provider":{"name":"cloud","fields":{}},)"
                           R"("services":{"db":{"name":"db"}}})";
  const std::string layout = R"({"nodes":[{"hostname":"a","services":["web","db"]},{"hostname":"b","services":["web"]}]})";
  { REQUIRE(weft::testing::OpenStore(path).ok()); }
  // The clusters table as migration 4 made it, with one row, and migration 10 not run yet.
  REQUIRE(weft::testing::ExecStore(
              path, weft::testing::RewindFrom(10) + "DROP TABLE clusters; "
                    "ALTER TABLE tasks DROP COLUMN taken_at_ms; ALTER TABLE tasks DROP COLUMN attempt_status; "
                    "DROP INDEX tasks_unfinished; ALTER TABLE tasks DROP COLUMN finished_at_ms; "
                    "CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased'); "
                    "CREATE TABLE clusters (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, "
                    "name TEXT NOT NULL, owner TEXT NOT NULL, status TEXT NOT NULL, spec TEXT NOT NULL DEFAULT '{}', "
                    "layout TEXT NOT NULL DEFAULT '{}', previous TEXT NOT NULL DEFAULT '', created_at_ms INTEGER "
                    "NOT NULL, updated_at_ms INTEGER NOT NULL, expire_at_ms INTEGER NOT NULL DEFAULT 0, latest_job "
                    "TEXT NOT NULL DEFAULT ''); CREATE INDEX clusters_by_tenant ON clusters (tenant, name); "
                    "INSERT INTO clusters VALUES (7, 'default', 'old', 'alice', 'active', '" + spec + "', '" +
                    layout + "', '{\"spec\":{}}', 100, 200, 0, '3')") == "");

  auto opened = weft::testing::OpenStore(path);
  REQUIRE(opened.ok());
  Store& store = **opened;
  CHECK(store.schema_version() == Store::LatestSchemaVersion());
  auto check_old = [&](const weft::store::ClusterRecord& c) {
    CHECK(c.id == "7");
    CHECK(c.name == "old");
    CHECK(c.owner == "alice");
    CHECK(c.created_at_ms == 100);
    CHECK(c.updated_at_ms == 200);
    CHECK(c.latest_job == "3");
    CHECK(c.template_name == "web");
    CHECK(c.provider_name == "cloud");
    CHECK(c.size == 2);
    CHECK(c.services == std::vector<std::string>{"db", "web"});
  };
  auto got = store.GetCluster("7");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  check_old(**got);
  CHECK((*got)->spec_json == spec);
  CHECK((*got)->layout_json == layout);
  CHECK((*got)->previous_json == R"({"spec":{}})");
  auto listed = store.ListClusterSummaries("default", false);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  check_old(listed->front());
  CHECK(listed->front().spec_json.empty());

  // A write stores the summary; the list then reads it from its columns.
  weft::store::ClusterRecord changed = **got;
  changed.layout_json = R"({"nodes":[{"hostname":"a","services":["db"]}]})";
  REQUIRE(store.UpdateCluster(changed).ok());
  CHECK(QueryInt(path, "SELECT node_count FROM clusters WHERE id = 7") == 1);
  listed = store.ListClusterSummaries("default", false);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().size == 1);
  CHECK(listed->front().services == std::vector<std::string>{"db"});
  CHECK(listed->front().template_name == "web");

  // New clusters go on numbering after the old ones.
  weft::store::ClusterRecord next;
  next.tenant = "default";
  next.name = "new";
  next.owner = "bob";
  next.status = "pending";
  next.spec_json = "not json";
  REQUIRE(store.InsertCluster(&next).ok());
  CHECK(std::stoll(next.id) > 7);
  CHECK(next.template_name.empty());
  CHECK(next.size == 0);
  CHECK(QueryInt(path, "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('clusters_by_tenant', 'clusters_v10')") == 1);
}

TEST_CASE("store: a cluster's summary reads the spec and layout as their parsed documents would, odd ones too",
          "[store]") {
  weft::testing::TempDir dir;
  auto opened = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(opened.ok());
  Store& store = **opened;
  struct Case {
    std::string spec, layout, template_name, provider_name;
    std::int64_t size;
    std::vector<std::string> services;
  };
  const std::vector<Case> cases = {
      // Names only from objects, and only string names; a key given twice counts with its last value.
      {R"({"template":{"name":"t1","x":{"name":"deep"}},"provider":{"name":5},"services":{"a":{"name":"no"}}})",
       R"({"nodes":[{"services":["b","a"]},"odd",[1],{"services":"c"},{"services":["x"],"services":["d",7]}]})",
       "t1", "", 5, {"a", "b", "d"}},
      {R"({"template":"t2","provider":{"name":"p","name":"q"},"template":{"name":["no"]}})",
       R"({"nodes":{"services":["a"]},"other":{"nodes":[1,2]}})", "", "q", 0, {}},
      {R"({"template":{"name":"gone"},"template":{"name":"t3"}})",
       R"({"nodes":[{"services":["a"]}],"nodes":[{"services":["z"]},{},{"nodes":[1]}]})", "t3", "", 3, {"z"}},
      // Text that is not one JSON document gives no summary at all.
      {R"({"template":{"name":"t4"}} trailing)", R"({"nodes":[{"services":["a"]}])", "", "", 0, {}},
      {R"([{"template":{"name":"t5"}}])", R"([{"nodes":[1]}])", "", "", 0, {}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.spec, c.layout);
    weft::store::ClusterRecord rec;
    rec.tenant = "default";
    rec.name = "c" + std::to_string(&c - cases.data());
    rec.owner = "alice";
    rec.status = "active";
    rec.spec_json = c.spec;
    rec.layout_json = c.layout;
    REQUIRE(store.InsertCluster(&rec).ok());
    CHECK(rec.template_name == c.template_name);
    CHECK(rec.provider_name == c.provider_name);
    CHECK(rec.size == c.size);
    CHECK(rec.services == c.services);
    // An update that keeps the texts (a job's status change) keeps the summary and writes the rest.
    rec.status = "pending";
    rec.latest_job = "9";
    REQUIRE(store.UpdateCluster(rec).ok());
    auto got = store.GetCluster(rec.id);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK((*got)->status == "pending");
    CHECK((*got)->latest_job == "9");
    CHECK((*got)->template_name == c.template_name);
    CHECK((*got)->provider_name == c.provider_name);
    CHECK((*got)->size == c.size);
    CHECK((*got)->services == c.services);
  }
}
