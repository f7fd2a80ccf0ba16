#include "weft/server/store/sqlite.hpp"

#include <sqlite3.h>

#include <utility>

namespace weft::store::sql {
namespace {

Status Error(sqlite3* db, int rc, std::string_view what) {
  std::string msg = "SQLite " + std::string(what) + " failed: " + sqlite3_errstr(rc);
  if (db && sqlite3_errmsg(db)) msg += " (" + std::string(sqlite3_errmsg(db)) + ")";
  // A busy database is transient; everything else is unexpected.
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

}  // namespace

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)), bind_rc_(other.bind_rc_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_rc_ = other.bind_rc_;
  }
  return *this;
}

Statement& Statement::Reset() {
  // The return code of reset repeats the last step's error, already reported.
  (void)sqlite3_reset(stmt_);
  (void)sqlite3_clear_bindings(stmt_);
  bind_rc_ = SQLITE_OK;
  return *this;
}

Statement& Statement::Bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Status Statement::BindError() const { return Error(db_, bind_rc_, "bind"); }

Result<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return BindError();
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error(db_, rc, "step of '" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
}

Status Statement::Run() {
  while (true) {
    WEFT_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

std::int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::Text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  if (!p) return std::string();
  return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool Statement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

Database::~Database() {
  // sqlite3_close (not _v2) refuses while statements live: Store finalizes
  // them first, so a failure here is a bug worth no more than ignoring.
  if (db_) (void)sqlite3_close(db_);
}

Status Database::Open(const std::string& path, int busy_timeout_ms) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    Status s = Error(db_, rc, "open of " + path);
    if (db_) (void)sqlite3_close(db_);
    db_ = nullptr;
    return s;
  }
  rc = sqlite3_busy_timeout(db_, busy_timeout_ms);
  if (rc != SQLITE_OK) return Error(db_, rc, "busy_timeout");
  (void)sqlite3_extended_result_codes(db_, 0);
  return Status::Ok();
}

Status Database::Exec(std::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    Status s = Error(db_, rc, "exec of '" + text.substr(0, 60) + "'");
    return Status(s.code(), s.message() + ": " + msg);
  }
  return Status::Ok();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) return Error(db_, rc, "prepare of '" + std::string(sql.substr(0, 60)) + "'");
  return Statement(db_, stmt);
}

std::int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

std::vector<std::string> Database::ResetActiveStatements() {
  std::vector<std::string> reset;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s; s = sqlite3_next_stmt(db_, s)) {
    if (!sqlite3_stmt_busy(s)) continue;
    reset.emplace_back(sqlite3_sql(s));
    (void)sqlite3_reset(s);
  }
  return reset;
}

}  // namespace weft::store::sql
