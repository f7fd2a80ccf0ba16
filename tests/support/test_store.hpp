// Store::Open for tests that open weftd's store in-process, on the backend the
// run asks for: the SQLite file `path`, or with WEFT_TEST_STORE=postgres a
// PostgreSQL database standing in for that file: one server per directory
// (<dir>/postgres, started at the first open, stopped when the process ends)
// and one database per file name, so reopening `path` finds what it holds.
// ExecStore and QueryStoreInt reach the same data beside the Store, as an
// operator's shell would. Header-only: only Catch2 test binaries that
// link weft_server_store (and SQLite) include it.
#pragma once

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/postgres.hpp"
#include "weft/server/store/store.hpp"

namespace weft::testing {

namespace test_store_detail {

inline std::map<std::filesystem::path, std::unique_ptr<PostgresServer>>& Servers() {
  static std::map<std::filesystem::path, std::unique_ptr<PostgresServer>> servers;
  return servers;
}

inline std::string DatabaseName(const std::filesystem::path& path) {
  std::string name = "weft_";
  for (char c : path.filename().string()) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

// The server for `path`'s directory, started (and the database made) when missing.
inline Result<PostgresServer*> Server(const std::filesystem::path& path) {
  std::unique_ptr<PostgresServer>& server = Servers()[path.parent_path()];
  if (!server) {
    WEFT_ASSIGN_OR_RETURN(server, PostgresServer::Start(path.parent_path() / "postgres"));
  }
  const std::string name = DatabaseName(path);
  WEFT_ASSIGN_OR_RETURN(const std::string found,
                        server->Query("SELECT COUNT(*) FROM pg_database WHERE datname = '" + name + "'"));
  if (found == "0") WEFT_RETURN_IF_ERROR(server->Exec("CREATE DATABASE " + name));
  return server.get();
}

}  // namespace test_store_detail

inline Result<std::unique_ptr<store::Store>> OpenStore(const std::filesystem::path& path,
                                                       store::StoreOptions options = {}) {
  if (!TestStoreIsPostgres()) return store::Store::Open(path, options);
  WEFT_ASSIGN_OR_RETURN(PostgresServer * server, test_store_detail::Server(path));
  options.backend = store::Backend::kPostgres;
  options.conninfo = server->conninfo(test_store_detail::DatabaseName(path));
  return store::Store::Open(path, options);
}

// A PostgreSQL server of its own in `dir`, for a case that needs PostgreSQL
// whichever backend the suite runs on; the test fails when it does not start.
inline std::unique_ptr<PostgresServer> StartPostgres(const std::filesystem::path& dir) {
  auto server = PostgresServer::Start(dir / "postgres");
  if (!server.ok()) FAIL(server.status().ToString());
  return std::move(*server);
}

// Options that open a Store on `server`'s own database.
inline store::StoreOptions PostgresStoreOptions(const PostgresServer& server) {
  store::StoreOptions options;
  options.backend = store::Backend::kPostgres;
  options.conninfo = server.conninfo();
  return options;
}

// The store `opened` holds; the test fails with the error when it did not open.
inline store::Store& Opened(Result<std::unique_ptr<store::Store>>& opened) {
  if (!opened.ok()) FAIL(opened.status().ToString());
  return **opened;
}

// SQL that puts a store's tasks back as they were before migration 21, on
// PostgreSQL or SQLite: one table of 25 columns, made from the two rows of
// each task (tasks and task_specs), with its indexes, and no task_specs.
inline std::string TasksBeforeSpecs(bool postgres) {
  if (postgres)
    return "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT '', ADD COLUMN plugin TEXT NOT NULL DEFAULT '', "
           "ADD COLUMN action TEXT NOT NULL DEFAULT '', ADD COLUMN job_id TEXT NOT NULL DEFAULT '', "
           "ADD COLUMN cluster_id TEXT NOT NULL DEFAULT '', ADD COLUMN node_id TEXT NOT NULL DEFAULT '', "
           "ADD COLUMN max_attempts BIGINT NOT NULL DEFAULT 0, ADD COLUMN created_at_ms BIGINT NOT NULL DEFAULT 0, "
           "ADD COLUMN payload TEXT NOT NULL DEFAULT '{}', ADD COLUMN task_key TEXT NOT NULL DEFAULT '', "
           "ADD COLUMN service TEXT NOT NULL DEFAULT '', ADD COLUMN after TEXT NOT NULL DEFAULT '[]'; "
           "UPDATE tasks t SET tenant = s.tenant, plugin = s.plugin, action = s.action, job_id = s.job_id, "
           "cluster_id = s.cluster_id, node_id = s.node_id, max_attempts = s.max_attempts, "
           "created_at_ms = s.created_at_ms, payload = s.payload, task_key = s.task_key, service = s.service, "
           "after = s.after FROM task_specs s WHERE s.id = t.id; "
           "ALTER TABLE tasks ALTER COLUMN tenant DROP DEFAULT, ALTER COLUMN plugin DROP DEFAULT, "
           "ALTER COLUMN action DROP DEFAULT, ALTER COLUMN max_attempts DROP DEFAULT, "
           "ALTER COLUMN created_at_ms DROP DEFAULT; "
           "DROP TABLE task_specs; CREATE INDEX tasks_by_tenant ON tasks (tenant, id); "
           "CREATE INDEX tasks_by_job ON tasks (job_id, id) WHERE job_id != ''; ";
  return "CREATE TABLE tasks_v20 (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, plugin TEXT NOT NULL, "
         "action TEXT NOT NULL, job_id TEXT NOT NULL DEFAULT '', cluster_id TEXT NOT NULL DEFAULT '', "
         "node_id TEXT NOT NULL DEFAULT '', state TEXT NOT NULL CHECK (state = 'queued' OR state = 'leased' OR "
         "state = 'succeeded' OR state = 'failed' OR state = 'waiting' OR state = 'cancelled'), "
         "attempt INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, host_id TEXT NOT NULL DEFAULT '', "
         "created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL, lease_until_ms INTEGER NOT NULL DEFAULT 0, "
         "payload TEXT NOT NULL DEFAULT '{}', result TEXT NOT NULL DEFAULT '{}', message TEXT NOT NULL DEFAULT '', "
         "stdout TEXT NOT NULL DEFAULT '', stderr TEXT NOT NULL DEFAULT '', task_key TEXT NOT NULL DEFAULT '', "
         "service TEXT NOT NULL DEFAULT '', after TEXT NOT NULL DEFAULT '[]', taken_at_ms INTEGER NOT NULL DEFAULT 0, "
         "attempt_status TEXT NOT NULL DEFAULT '', finished_at_ms INTEGER NOT NULL DEFAULT 0); "
         "INSERT INTO tasks_v20 SELECT t.id, s.tenant, s.plugin, s.action, s.job_id, s.cluster_id, s.node_id, "
         "t.state, t.attempt, s.max_attempts, t.host_id, s.created_at_ms, t.updated_at_ms, t.lease_until_ms, "
         "s.payload, t.result, t.message, t.stdout, t.stderr, s.task_key, s.service, s.after, t.taken_at_ms, "
         "t.attempt_status, t.finished_at_ms FROM tasks t JOIN task_specs s ON s.id = t.id; "
         "DROP TABLE tasks; DROP TABLE task_specs; ALTER TABLE tasks_v20 RENAME TO tasks; "
         "CREATE INDEX tasks_unfinished ON tasks (id) WHERE finished_at_ms = 0; "
         "CREATE INDEX tasks_by_tenant ON tasks (tenant, id); "
         "CREATE INDEX tasks_by_job ON tasks (job_id, id) WHERE job_id != ''; ";
}

// The start of the SQL that makes a store look as if migration `version` and
// the later ones had not run: their rows leave schema_migrations, and a column
// a later migration added goes (SQLite cannot add a column only if it is
// missing, so that migration would fail when it runs again); from 21 or
// before, the tasks are one table again (TasksBeforeSpecs).
inline std::string RewindFrom(std::int64_t version) {
  std::string sql = "DELETE FROM schema_migrations WHERE version >= " + std::to_string(version) + "; ";
  if (version <= 25) sql += "ALTER TABLE resource_names DROP COLUMN deleted; ";
  if (version <= 24) sql += "ALTER TABLE sessions DROP COLUMN token_hash; ";
  if (version <= 23) sql += "ALTER TABLE hosts DROP COLUMN incarnation; ALTER TABLE hosts DROP COLUMN draining; ";
  if (version <= 21) sql += TasksBeforeSpecs(TestStoreIsPostgres());
  if (version <= 20) sql += "ALTER TABLE audit_log DROP COLUMN address; ";
  return sql;
}

// Runs `sql` beside the Store; the error message, or "" when it worked.
inline std::string ExecStore(const std::filesystem::path& path, const std::string& sql) {
  if (TestStoreIsPostgres()) {
    Result<PostgresServer*> server = test_store_detail::Server(path);
    if (!server.ok()) return server.status().ToString();
    Status s = (*server)->Exec(sql, test_store_detail::DatabaseName(path));
    return s.ok() ? std::string() : s.message();
  }
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) error = "cannot open " + path.string();
  char* message = nullptr;
  if (error.empty() && sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK)
    error = message ? message : "failed";
  sqlite3_free(message);
  sqlite3_close(db);
  return error;
}

// The integer `query` gives (a COUNT(*)); -1 when it fails.
inline std::int64_t QueryStoreInt(const std::filesystem::path& path, const std::string& query) {
  if (TestStoreIsPostgres()) {
    Result<PostgresServer*> server = test_store_detail::Server(path);
    if (!server.ok()) return -1;
    Result<std::string> v = (*server)->Query(query, test_store_detail::DatabaseName(path));
    return v.ok() ? std::stoll(*v) : -1;
  }
  sqlite3* db = nullptr;
  std::int64_t v = -1;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

// n queued tasks of tenant "default" (fake-provider CREATE, 3 attempts), made
// and committed in one transaction; their ids in order.
inline std::vector<std::int64_t> InsertCommittedTasks(store::Store& store, int n) {
  std::vector<std::int64_t> ids;
  REQUIRE(store.Begin().ok());
  for (int i = 0; i < n; ++i) {
    store::TaskRecord t;
    t.tenant = "default";
    t.plugin = "fake-provider";
    t.action = "CREATE";
    t.max_attempts = 3;
    t.created_at_ms = 1000;
    REQUIRE(store.InsertTask(&t).ok());
    ids.push_back(t.id);
  }
  REQUIRE(store.Commit().ok());
  return ids;
}

}  // namespace weft::testing
