// The PostgreSQL backend of the SQL layer (database.hpp): small RAII wrappers
// over libpq, private to server/store/.
//
// One connection, opened from a libpq connection string passed through as it
// is (several hosts with target_session_attrs=read-write are libpq's own).
// Statements are sent with their parameters as text; one that runs a second
// time is prepared on the server under a name of its own, and prepared again
// after a reconnection. A result is read whole, so no statement holds the
// connection between steps.
//
// A lost connection: outside a transaction the statement waits for
// PostgreSQL to come back (up to `reconnect_timeout_ms`, with one log line
// when it is lost and one when it is back) and runs again; inside one the
// transaction is gone, so the statement fails with UNAVAILABLE and the caller
// rolls back (which then only forgets it), as after any failed statement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "weft/server/store/database.hpp"
#include "weft/common/status.hpp"

struct pg_conn;
struct pg_result;

namespace weft::store::sql {

class PostgresStatement;

struct PostgresOptions {
  std::string conninfo;               // a libpq connection string or URI
  int reconnect_timeout_ms = 60'000;  // how long a statement waits for a lost server
};

// `?1`, `?2`, ... (and a bare `?`, numbered as SQLite numbers it) become `$1`,
// `$2`, ...; quoted text is left alone. *params is the highest number.
std::string ToDollarParameters(std::string_view sql, int* params);

class PostgresDatabase final : public Database {
 public:
  PostgresDatabase() = default;
  ~PostgresDatabase() override;
  PostgresDatabase(const PostgresDatabase&) = delete;
  PostgresDatabase& operator=(const PostgresDatabase&) = delete;

  // Connects once (no waiting: a server that is not there at start is an error).
  [[nodiscard]] Status Open(PostgresOptions options);
  // Where it is connected, without secrets: "PostgreSQL host=... port=... dbname=...".
  std::string Describe() const;

  Dialect dialect() const override { return Dialect::kPostgres; }
  [[nodiscard]] Status Exec(std::string_view sql) override;
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql) override;
  [[nodiscard]] Status Begin() override;
  [[nodiscard]] Status Commit() override;
  [[nodiscard]] Status Rollback() override;
  int Changes() const override { return changes_; }

 private:
  friend class PostgresStatement;
  struct ResultDeleter {
    void operator()(pg_result* r) const;
  };
  using ResultPtr = std::unique_ptr<pg_result, ResultDeleter>;

  Status Connect();
  // Connect() until it works or the reconnect timeout passes.
  Status Reconnect();
  // Runs `send` (which returns what libpq returned); handles a lost connection
  // as the header says. A failed result becomes a Status naming `what`.
  template <typename Send>
  Result<ResultPtr> Run(Send send, std::string_view what);
  void NoteLost(const std::string& why);
  std::string NextName() { return "weft_" + std::to_string(++names_); }

  PostgresOptions options_;
  pg_conn* conn_ = nullptr;
  std::uint64_t generation_ = 0;  // one more per connection: what a statement was prepared on
  std::uint64_t names_ = 0;
  bool in_transaction_ = false;
  bool lost_ = false;             // lost and not back yet: said once
  std::int64_t lost_at_ms_ = 0;
  int changes_ = 0;
};

}  // namespace weft::store::sql
