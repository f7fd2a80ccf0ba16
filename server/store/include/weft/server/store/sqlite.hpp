// The SQLite backend of the SQL layer (database.hpp): small RAII wrappers
// over the sqlite3 C API, private to server/store/. The embedded default and
// the hot path of every benchmark: a statement is a sqlite3_stmt, stepped in
// place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/server/store/database.hpp"
#include "weft/common/status.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace weft::store::sql {

class SqliteDatabase final : public Database {
 public:
  SqliteDatabase() = default;
  ~SqliteDatabase() override;
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  [[nodiscard]] Status Open(const std::string& path, int busy_timeout_ms);

  Dialect dialect() const override { return Dialect::kSqlite; }
  [[nodiscard]] Status Exec(std::string_view sql) override;
  [[nodiscard]] Status Begin() override;
  [[nodiscard]] Status Commit() override;
  [[nodiscard]] Status Rollback() override;
  int Changes() const override;
  std::vector<std::string> ResetActiveStatements() override;

  sqlite3* handle() const { return db_; }

 private:
  [[nodiscard]] Result<std::unique_ptr<StatementBackend>> PrepareNew(std::string_view sql) override;
  // The transaction's own statements, prepared at Open and finalized before the connection closes.
  Status RunCached(sqlite3_stmt* stmt, std::string_view what);
  // Whether the file holds no page yet (a new store).
  Result<bool> Empty();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
};

}  // namespace weft::store::sql
