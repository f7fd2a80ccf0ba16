// Small RAII wrappers over the sqlite3 C API, private to server/store/.
//
// A Statement must be destroyed before the Database it came from; Store keeps
// its statements in members declared after the Database so that they are
// finalized first. Not thread-safe: one thread uses a Database and its
// statements. Every return code is checked and turned into a Status that
// carries SQLite's own message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace weft::store::sql {

class Database;

// A prepared statement, reset and cleared before each use by Bind().
class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Resets the statement so it can run again with fresh parameters.
  Statement& Reset();
  // Parameters are 1-based, as in SQLite.
  Statement& Bind(int index, std::int64_t value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindNull(int index);

  // Steps once. True: a row is ready; false: done. Errors become a Status.
  [[nodiscard]] Result<bool> Step();
  // Steps to completion, for statements that return no rows.
  [[nodiscard]] Status Run();

  std::int64_t Int(int column) const;
  std::string Text(int column) const;
  bool IsNull(int column) const;

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Status BindError() const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bind_rc_ = 0;  // first failed bind, reported by Step()
};

// Steps through every row, calling read_row(statement) for each. Stops at the
// first error and returns it.
template <typename ReadRow>
[[nodiscard]] Status ForEachRow(Statement& statement, ReadRow&& read_row) {
  while (true) {
    WEFT_ASSIGN_OR_RETURN(bool row, statement.Step());
    if (!row) return Status::Ok();
    read_row(statement);
  }
}

class Database {
 public:
  Database() = default;
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  [[nodiscard]] Status Open(const std::string& path, int busy_timeout_ms);
  [[nodiscard]] Status Exec(std::string_view sql);
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  std::int64_t LastInsertRowId() const;
  int Changes() const;
  sqlite3* handle() const { return db_; }
  // Resets every statement still on a row (stepped but neither finished nor
  // reset) and returns their SQL. Such a statement keeps a read transaction
  // open, and with it a snapshot of the WAL that no checkpoint may copy past.
  std::vector<std::string> ResetActiveStatements();

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace weft::store::sql
