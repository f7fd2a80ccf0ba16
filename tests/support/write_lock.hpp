// Holds SQLite's write lock on a store file, as another writer would, so that
// weftd's next write turn waits in it: a test's way to keep weftd's reactor busy.
#pragma once

#include <sqlite3.h>

#include <filesystem>

#include <catch2/catch.hpp>

namespace weft::testing {

class WriteLock {
 public:
  explicit WriteLock(const std::filesystem::path& db_file) {
    REQUIRE(sqlite3_open_v2(db_file.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
    sqlite3_busy_timeout(db_, 10000);
    REQUIRE(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~WriteLock() { Release(); }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;
  void Release() {
    if (!db_) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace weft::testing
