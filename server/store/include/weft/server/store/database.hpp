// The SQL layer under the Store, private to server/store/: a Database (one
// connection) and its prepared Statements, with two backends, SQLite
// (sqlite.hpp, the embedded default) and PostgreSQL (postgres.hpp).
//
// Statements are written once, in SQL both backends accept. Parameters are
// `?1`, `?2`, ... (SQLite's own numbered parameters; the PostgreSQL backend
// turns them into `$1`, `$2`, ... when it prepares a statement), bound by
// number, so one number may appear several times and in any order. Where the
// dialects differ, the Store asks dialect() and picks the text.
//
// A Statement must be destroyed before the Database it came from; Store keeps
// its statements in members declared after the Database so that they go
// first. A Statement that goes is kept, reset, by its Database and handed out
// again by the next Prepare() of the same text: a statement prepared per call
// is prepared once per connection (sqlite3_prepare was a third of weftd's CPU
// in catalog reads; PostgreSQL prepares it on the server at its second run). Not thread-safe: one thread uses a Database and its statements.
// Every failure becomes a Status that carries the backend's own message.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::store::sql {

enum class Dialect { kSqlite, kPostgres };

// What a backend implements for one prepared statement.
class StatementBackend {
 public:
  virtual ~StatementBackend() = default;
  virtual void Reset() = 0;
  virtual void Bind(int index, std::int64_t value) = 0;
  virtual void Bind(int index, std::string_view value) = 0;
  virtual void BindBinary(int index, std::string_view bytes) = 0;
  virtual void BindNull(int index) = 0;
  virtual Result<bool> Step() = 0;
  virtual Status RunDeferred(int expected_changes, Status otherwise) = 0;
  virtual std::int64_t Int(int column) const = 0;
  virtual std::string Text(int column) const = 0;
  virtual bool IsNull(int column) const = 0;
};

class Database;

// A prepared statement, reset and cleared before each use by Reset().
class Statement {
 public:
  using Idle = std::vector<std::unique_ptr<StatementBackend>>;

  Statement() = default;
  // `idle`: where it goes back to in `cache` when it goes (none: it is destroyed).
  Statement(std::unique_ptr<StatementBackend> backend, Database* cache, Idle* idle)
      : backend_(std::move(backend)), cache_(cache), idle_(idle) {}
  ~Statement() { GiveBack(); }
  Statement(Statement&& other) noexcept
      : backend_(std::move(other.backend_)), cache_(other.cache_), idle_(other.idle_) {}
  Statement& operator=(Statement&& other) noexcept {
    if (this == &other) return *this;
    GiveBack();
    backend_ = std::move(other.backend_);
    cache_ = other.cache_;
    idle_ = other.idle_;
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Resets the statement so it can run again with fresh parameters.
  Statement& Reset() {
    backend_->Reset();
    return *this;
  }
  // Parameters are 1-based: ?1 is index 1. A failed bind is reported by Step().
  Statement& Bind(int index, std::int64_t value) {
    backend_->Bind(index, value);
    return *this;
  }
  Statement& Bind(int index, std::string_view value) {
    backend_->Bind(index, value);
    return *this;
  }
  // A value in the backend's binary form: on PostgreSQL the one its type's
  // receive function reads (no text to parse on the server), on SQLite a blob.
  Statement& BindBinary(int index, std::string_view bytes) {
    backend_->BindBinary(index, bytes);
    return *this;
  }
  Statement& BindNull(int index) {
    backend_->BindNull(index);
    return *this;
  }

  // Steps once. True: a row is ready; false: done. Errors become a Status.
  [[nodiscard]] Result<bool> Step() { return backend_->Step(); }
  // Steps to completion, for statements that return no rows.
  [[nodiscard]] Status Run() {
    while (true) {
      WEFT_ASSIGN_OR_RETURN(bool row, Step());
      if (!row) return Status::Ok();
    }
  }
  // Runs a write whose outcome the caller does not need before the commit.
  // Inside a transaction the PostgreSQL backend sends it without waiting for
  // its reply (libpq's pipeline mode), so a batch of writes costs one round
  // trip instead of one each; SQLite runs it at once. Its failure, or a count
  // of changed rows other than `expected_changes` (when not negative: then
  // `otherwise` is the error), is returned here or by the next statement of
  // the transaction that waits for the server, or by Commit(); either way the
  // transaction must be rolled back. PostgreSQL's COMMIT may be sent before the
  // count is read, so there a write with `expected_changes` must fail on the
  // server itself when it changes too few rows: by dividing by zero (the Store
  // wraps it, see OneRowWrite in store.cpp), which is reported as `otherwise`.
  [[nodiscard]] Status RunDeferred(int expected_changes = -1, Status otherwise = Status::Ok()) {
    return backend_->RunDeferred(expected_changes, std::move(otherwise));
  }
  // Steps once for the single value an `INSERT ... RETURNING id` gives, then to completion.
  [[nodiscard]] Result<std::int64_t> RunReturningId() {
    WEFT_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Internal("an insert returned no id");
    const std::int64_t id = Int(0);
    WEFT_RETURN_IF_ERROR(Run());
    return id;
  }

  // A NULL reads as 0 and as "".
  std::int64_t Int(int column) const { return backend_->Int(column); }
  std::string Text(int column) const { return backend_->Text(column); }
  bool IsNull(int column) const { return backend_->IsNull(column); }

 private:
  void GiveBack();

  std::unique_ptr<StatementBackend> backend_;
  Database* cache_ = nullptr;
  Idle* idle_ = nullptr;
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
  virtual ~Database() = default;

  virtual Dialect dialect() const = 0;
  // Runs one or more statements without parameters (migrations, settings).
  [[nodiscard]] virtual Status Exec(std::string_view sql) = 0;
  // Prepares `sql`, or takes back a statement of the same text that is not in use.
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  // A write transaction: SQLite's BEGIN IMMEDIATE, PostgreSQL's BEGIN.
  [[nodiscard]] virtual Status Begin() = 0;
  [[nodiscard]] virtual Status Commit() = 0;
  [[nodiscard]] virtual Status Rollback() = 0;
  // A commit whose outcome is read later: SendCommit() ends the transaction
  // (a failure here is the transaction's, which the caller rolls back) and
  // AwaitCommit() says whether it committed. Meanwhile the next transaction
  // may begin; it goes out behind the COMMIT and, if the COMMIT fails, is not
  // run by the server (PostgreSQL's pipeline). A backend that waits commits in
  // SendCommit(), and AwaitCommit() has nothing to say.
  [[nodiscard]] virtual Status SendCommit() { return Commit(); }
  [[nodiscard]] virtual Status AwaitCommit() { return Status::Ok(); }
  virtual bool CommitInFlight() const { return false; }
  // What to poll(2) for the reply to the commit in flight (-1: none).
  virtual int CommitSocket() const { return -1; }
  // Whether the last commit, confirmed, left the next transaction begun on
  // the server for the next Begin() (PostgreSQL's COMMIT AND CHAIN), and
  // EndChain() ends it (rolls it back) when none is coming soon.
  virtual bool ChainWaiting() const { return false; }
  virtual void EndChain() {}
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int Changes() const = 0;
  // Resets every statement still on a row and returns their SQL (SQLite: such
  // a statement keeps a read transaction, and a WAL snapshot, open). None for
  // a backend that reads whole results at once.
  virtual std::vector<std::string> ResetActiveStatements() { return {}; }

  // Statements kept for the next Prepare() of their text.
  std::size_t idle_statements() const { return idle_count_; }

  // Runs `before` ahead of the statements the backend says need it (PostgreSQL:
  // every statement it sends; SQLite: those whose text names the tasks table),
  // never ahead of those `before` runs itself: the Store writes there what it
  // held back (gathered task writes, tasks made ready), so that whatever reads
  // or writes next sees them. Its failure is that statement's.
  void SetBeforeStatement(std::function<Status()> before) { before_ = std::move(before); }
  // Called by a backend's statements before they run.
  [[nodiscard]] Status BeforeStatement() {
    if (!before_ || in_before_) return Status::Ok();
    in_before_ = true;
    Status s = before_();
    in_before_ = false;
    return s;
  }

 protected:
  [[nodiscard]] virtual Result<std::unique_ptr<StatementBackend>> PrepareNew(std::string_view sql) = 0;
  // A backend calls it first in its destructor: the statements kept go before its connection.
  void DropIdleStatements() {
    idle_.clear();
    idle_count_ = 0;
  }

 private:
  friend class Statement;
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  // Bounds for texts made up at run time: past them a statement is not kept.
  static constexpr std::size_t kMaxTexts = 512;
  static constexpr std::size_t kMaxIdlePerText = 4;
  std::function<Status()> before_;  // SetBeforeStatement
  bool in_before_ = false;

  void Keep(Statement::Idle* idle, std::unique_ptr<StatementBackend> backend) {
    if (idle->size() >= kMaxIdlePerText) return;
    backend->Reset();
    idle->push_back(std::move(backend));
    ++idle_count_;
  }

  std::unordered_map<std::string, Statement::Idle, TextHash, std::equal_to<>> idle_;
  std::size_t idle_count_ = 0;
};

inline void Statement::GiveBack() {
  if (backend_ && cache_) cache_->Keep(idle_, std::move(backend_));
  backend_.reset();
}

inline Result<Statement> Database::Prepare(std::string_view sql) {
  auto it = idle_.find(sql);
  if (it == idle_.end() && idle_.size() < kMaxTexts) it = idle_.emplace(std::string(sql), Statement::Idle()).first;
  if (it == idle_.end()) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<StatementBackend> made, PrepareNew(sql));
    return Statement(std::move(made), nullptr, nullptr);
  }
  Statement::Idle& idle = it->second;
  if (!idle.empty()) {
    std::unique_ptr<StatementBackend> kept = std::move(idle.back());
    idle.pop_back();
    --idle_count_;
    return Statement(std::move(kept), this, &idle);
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<StatementBackend> made, PrepareNew(sql));
  return Statement(std::move(made), this, &idle);
}

}  // namespace weft::store::sql
