// Reading (and, to test refusals, writing) a running weftd's store from a
// test, beside the process, as an operator would: the SQLite file (its WAL
// lets both read), or with the postgres store its PostgreSQL server. Test
// binaries that include this link SQLite themselves.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "support/weftd.hpp"

namespace weft::testing {

// The one number a query gives (a COUNT(*)).
inline int CountRows(const std::filesystem::path& db_file, const std::string& query) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

// The same on weftd's store, whichever backend it has. Write `"user"` for
// that column: unquoted, PostgreSQL reads it as the session's user.
inline int CountRows(const Weftd& weftd, const std::string& query) {
  if (!weftd.postgres()) return CountRows(weftd.db(), query);
  Result<std::string> n = weftd.postgres()->Query(query);
  INFO(query);
  REQUIRE(n.ok());
  return std::stoi(*n);
}

// Runs `sql` on weftd's store with a connection of its own; the backend's
// error message, or "" when it worked.
inline std::string ExecSql(const Weftd& weftd, const std::string& sql) {
  if (weftd.postgres()) {
    Status s = weftd.postgres()->Exec(sql);
    return s.ok() ? std::string() : s.message();
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(weftd.db().c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = rc == SQLITE_OK ? "" : (error ? error : "error");
  sqlite3_free(error);
  sqlite3_close(db);
  return message;
}

// What someone who reads the store sees: the bytes of the SQLite files, or
// every row of every table of the PostgreSQL database as text.
inline std::string StoreText(const Weftd& weftd) {
  std::string text;
  if (!weftd.postgres()) {
    for (const char* f : {"weft.db", "weft.db-wal"})
      if (std::filesystem::exists(weftd.data() / f)) text += ReadFile(weftd.data() / f);
    return text;
  }
  Result<std::string> tables = weftd.postgres()->Query(
      "SELECT string_agg(table_name, ' ') FROM information_schema.tables WHERE table_schema = 'public'");
  REQUIRE(tables.ok());
  std::istringstream names(*tables);
  for (std::string table; names >> table;) {
    Result<std::string> rows =
        weftd.postgres()->Query("SELECT COALESCE(string_agg(row_to_json(t)::text, E'\\n'), '') FROM " + table + " t");
    REQUIRE(rows.ok());
    text += *rows + "\n";
  }
  return text;
}

}  // namespace weft::testing
