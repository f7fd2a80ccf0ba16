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

// The start of the SQL that makes a store look as if migration `version` and
// the later ones had not run: their rows leave schema_migrations, and a column
// a later migration added goes (SQLite cannot add a column only if it is
// missing, so that migration would fail when it runs again).
inline std::string RewindFrom(std::int64_t version) {
  std::string sql = "DELETE FROM schema_migrations WHERE version >= " + std::to_string(version) + "; ";
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
