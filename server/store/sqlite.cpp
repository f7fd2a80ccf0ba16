#include "weft/server/store/sqlite.hpp"

#include <sqlite3.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft::store::sql {
namespace {

// How the SQLite backend begins a message for a full disk (store::DiskFull).
constexpr std::string_view kDiskFull = "the disk holding ";
// SQLITE_FULL with less than this free on the store's file system is that
// file system filling up, not a temporary file elsewhere.
constexpr std::uint64_t kNearlyFullBytes = 64ull << 20;

// The bytes free for unprivileged writers on the file system holding `dir` (-1: unknown).
std::int64_t BytesFree(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return -1;
  return static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize);
}

// A write that failed because the store's file system is full: SQLITE_FULL
// (SQLite's word for ENOSPC on a write) with that file system nearly full,
// or an I/O error (the -shm or -wal file growing, an fsync) whose errno was
// ENOSPC or EDQUOT. Says where, how much is free and what to do.
std::optional<std::string> DiskFullMessage(sqlite3* db, int rc, std::string_view what) {
  const int primary = rc & 0xff;
  if (primary != SQLITE_FULL && primary != SQLITE_IOERR && primary != SQLITE_CANTOPEN) return std::nullopt;
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  if (!file || !*file) return std::nullopt;
  const std::string dir = std::filesystem::path(file).parent_path().string();
  const std::int64_t free = BytesFree(dir);
  const int sys = db ? sqlite3_system_errno(db) : 0;
  const bool full = primary == SQLITE_FULL ? free >= 0 && static_cast<std::uint64_t>(free) < kNearlyFullBytes
                                           : sys == ENOSPC || sys == EDQUOT;
  if (!full) return std::nullopt;
  return std::string(kDiskFull) + dir + " is full (statvfs: " + (free >= 0 ? std::to_string(free) : "?") +
         " bytes free" + (sys == EDQUOT ? ", over its quota" : "") + "; SQLite " + std::string(what) +
         " failed: " + (primary == SQLITE_FULL ? std::string(sqlite3_errstr(rc)) : std::strerror(sys)) +
         "); free space there";
}

Status Error(sqlite3* db, int rc, std::string_view what) {
  // Every SQLITE_IOERR_* (extended codes are off: rc is the primary code) is looked at by its errno.
  if (std::optional<std::string> full = DiskFullMessage(db, rc, what)) return Status::Unavailable(std::move(*full));
  std::string msg = "SQLite " + std::string(what) + " failed: " + sqlite3_errstr(rc);
  if (db && sqlite3_errmsg(db)) msg += " (" + std::string(sqlite3_errmsg(db)) + ")";
  // A busy database is transient; everything else is unexpected.
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

// Texts are bound from copies the statement keeps, one buffer per parameter,
// reused from run to run: SQLite takes them as they are (SQLITE_STATIC)
// instead of allocating and freeing a copy of its own for every bind, a tenth
// of the instructions of a task's insert.
class SqliteStatement final : public StatementBackend {
 public:
  SqliteStatement(SqliteDatabase* owner, sqlite3* db, sqlite3_stmt* stmt, bool names_tasks)
      : owner_(owner),
        db_(db),
        stmt_(stmt),
        texts_(static_cast<std::size_t>(sqlite3_bind_parameter_count(stmt))),
        names_tasks_(names_tasks) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void Reset() override {
    // The return code of reset repeats the last step's error, already reported.
    (void)sqlite3_reset(stmt_);
    (void)sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
    // A large text (a cluster's layout) is not kept for a statement that may not run again soon.
    for (std::string& text : texts_)
      if (text.capacity() > kKeptTextBytes) std::string().swap(text);
  }
  void Bind(int index, std::int64_t value) override { Check(sqlite3_bind_int64(stmt_, index, value)); }
  void Bind(int index, std::string_view value) override {
    if (index < 1 || static_cast<std::size_t>(index) > texts_.size()) {
      // Out of range: SQLite says so (SQLITE_RANGE), reported by Step().
      Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
      return;
    }
    std::string& text = texts_[static_cast<std::size_t>(index) - 1];
    text.assign(value);
    Check(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  void BindBinary(int index, std::string_view bytes) override {
    Check(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
  }
  void BindNull(int index) override { Check(sqlite3_bind_null(stmt_, index)); }

  Result<bool> Step() override {
    if (bind_rc_ != SQLITE_OK) return Error(db_, bind_rc_, "bind");
    if (names_tasks_ && !sqlite3_stmt_busy(stmt_)) WEFT_RETURN_IF_ERROR(owner_->BeforeStatement());  // not between two rows
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Error(db_, rc, "step of '" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
  }

  Status RunDeferred(int expected_changes, Status otherwise) override {
    while (true) {
      WEFT_ASSIGN_OR_RETURN(bool row, Step());
      if (!row) break;
    }
    if (expected_changes >= 0 && sqlite3_changes(db_) != expected_changes) return otherwise;
    return Status::Ok();
  }

  std::int64_t Int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const override {
    const unsigned char* p = sqlite3_column_text(stmt_, column);
    if (!p) return std::string();
    return std::string(reinterpret_cast<const char*>(p),
                       static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  bool IsNull(int column) const override { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;  // the first failed bind, reported by Step()
  }

  static constexpr std::size_t kKeptTextBytes = 64 * 1024;

  SqliteDatabase* owner_;
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  // The text bound to parameter i + 1; its buffer stays put while SQLite
  // points at it, until that parameter is bound again after a Reset().
  std::vector<std::string> texts_;
  int bind_rc_ = SQLITE_OK;
  const bool names_tasks_;  // Database::SetBeforeStatement
};

bool NamesTasks(std::string_view sql) { return sql.find("tasks") != std::string_view::npos; }

}  // namespace

SqliteDatabase::~SqliteDatabase() {
  DropIdleStatements();
  for (sqlite3_stmt* s : {begin_, commit_, rollback_}) sqlite3_finalize(s);
  // sqlite3_close (not _v2) refuses while statements live: Store finalizes
  // them first, so a failure here is a bug worth no more than ignoring.
  if (db_) (void)sqlite3_close(db_);
}

Status SqliteDatabase::Open(const std::string& path, int busy_timeout_ms) {
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
  // SQLite reads the file only at the first statement: read its header now, so
  // a file that is not a store is named as such, before anything writes to it.
  rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
    return Status::Internal(
        std::string(rc == SQLITE_NOTADB ? "it is not a SQLite database (a damaged file, or another file put there)"
                                        : "it is damaged (SQLite: " + std::string(sqlite3_errstr(rc)) + ")") +
        "; weftd left it as it is. Restore " + path + " from a backup (docs/configuration.md, \"Backup and "
        "restore\"), or move it aside (with any -wal and -shm files next to it) to start with an empty store");
  if (rc != SQLITE_OK) return Error(db_, rc, "read of " + path);
  // A new store keeps the pointer maps that let retention give free pages back
  // to the file system a few at a time (PRAGMA incremental_vacuum). Only an
  // empty file takes it; an older store needs one VACUUM (weftd --vacuum).
  if (Result<bool> empty = Empty(); !empty.ok()) {
    return empty.status();
  } else if (*empty) {
    rc = sqlite3_exec(db_, "PRAGMA auto_vacuum=INCREMENTAL", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(db_, rc, "auto_vacuum of " + path);
  }
  (void)sqlite3_extended_result_codes(db_, 0);
  for (auto [out, text] : {std::pair{&begin_, "BEGIN IMMEDIATE"}, {&commit_, "COMMIT"}, {&rollback_, "ROLLBACK"}}) {
    rc = sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, out, nullptr);
    if (rc != SQLITE_OK) return Error(db_, rc, std::string("prepare of ") + text);
  }
  return Status::Ok();
}

Result<bool> SqliteDatabase::Empty() {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA page_count", -1, &st, nullptr);
  if (rc != SQLITE_OK) return Error(db_, rc, "prepare of PRAGMA page_count");
  rc = sqlite3_step(st);
  const bool empty = rc == SQLITE_ROW && sqlite3_column_int64(st, 0) == 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return Error(db_, rc, "PRAGMA page_count");
  return empty;
}

Status SqliteDatabase::Exec(std::string_view sql) {
  if (NamesTasks(sql)) WEFT_RETURN_IF_ERROR(BeforeStatement());
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

Result<std::unique_ptr<StatementBackend>> SqliteDatabase::PrepareNew(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) return Error(db_, rc, "prepare of '" + std::string(sql.substr(0, 60)) + "'");
  return std::unique_ptr<StatementBackend>(std::make_unique<SqliteStatement>(this, db_, stmt, NamesTasks(sql)));
}

Status SqliteDatabase::RunCached(sqlite3_stmt* stmt, std::string_view what) {
  const int rc = sqlite3_step(stmt);
  Status s = rc == SQLITE_DONE || rc == SQLITE_ROW ? Status::Ok() : Error(db_, rc, "step of '" + std::string(what) + "'");
  (void)sqlite3_reset(stmt);
  return s;
}

Status SqliteDatabase::Begin() { return RunCached(begin_, "BEGIN IMMEDIATE"); }
Status SqliteDatabase::Commit() { return RunCached(commit_, "COMMIT"); }
Status SqliteDatabase::Rollback() {
  // A statement that failed for a full disk (or I/O, or memory) may have rolled
  // the transaction back already: then there is nothing left to undo.
  if (sqlite3_get_autocommit(db_)) return Status::Ok();
  return RunCached(rollback_, "ROLLBACK");
}

int SqliteDatabase::Changes() const { return sqlite3_changes(db_); }

std::vector<std::string> SqliteDatabase::ResetActiveStatements() {
  std::vector<std::string> reset;
  // A statement left on a row keeps its read transaction open: with none open,
  // none is, and the walk over every prepared statement (after each commit) is skipped.
  if (sqlite3_txn_state(db_, nullptr) == SQLITE_TXN_NONE) return reset;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s; s = sqlite3_next_stmt(db_, s)) {
    if (!sqlite3_stmt_busy(s)) continue;
    reset.emplace_back(sqlite3_sql(s));
    (void)sqlite3_reset(s);
  }
  return reset;
}

}  // namespace weft::store::sql

namespace weft::store {

std::optional<std::string> DiskFull(const Status& s) {
  if (s.ok()) return std::nullopt;
  // Perhaps behind the context a caller added.
  const std::size_t at = s.message().find(sql::kDiskFull);
  if (at == std::string::npos || s.message().find(" is full (statvfs: ", at) == std::string::npos) return std::nullopt;
  return s.message().substr(at);
}

}  // namespace weft::store
