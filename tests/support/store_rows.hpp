// Reading a running weftd's store file from a test, read-only, as an operator
// would (beside the process; SQLite's WAL lets both read). Test binaries that
// include this link SQLite themselves.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

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

}  // namespace weft::testing
