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
// Inside a transaction the connection is in libpq's pipeline mode: BEGIN and
// the writes run with RunDeferred() go out without waiting for their replies,
// which are read at the next statement that needs its own result (the leader
// fence, a read) or at COMMIT, whose sync answers everything sent before it.
// A batch of writes thus costs one round trip, not one per statement. The
// first failure in a pipeline fails that statement and COMMIT; the caller
// rolls back. BEGIN waits for its reply only when the connection is not known
// to be quiet (not connected, or the server said something unasked, as one
// shutting down does), so that a lost connection is still found, and
// replaced, before the transaction starts.
//
// SendCommit() sends COMMIT AND CHAIN and a flush, and returns: the transaction
// that begins next goes out behind it in the same pipeline, with no sync
// between them, so that when the COMMIT (or anything before it) fails, the
// server skips everything after it up to the sync, and the later transaction
// never commits. The COMMIT itself begins that transaction (a BEGIN of its
// own cost the server a statement per commit); ending the pipeline rolls it
// back when no transaction used it. AwaitCommit() reads the replies up to the COMMIT's and says how it
// ended; a statement that needs its own result reads them too, and fails if
// the COMMIT did. A statement outside a transaction first ends the pipeline.
// A commit that AwaitCommit() found confirmed, with nothing sent behind it,
// leaves the transaction it began waiting for the next Begin() (ChainWaiting()):
// the next transaction, usually a moment later, then sends no BEGIN, and the
// pipeline no ROLLBACK and sync, each a statement for the server and a round
// trip weftd waited for. EndChain() rolls it back (and ends the pipeline)
// when none is coming soon: weftd does before it sleeps. That transaction
// holds no snapshot and no lock, so it keeps back no vacuum (the server shows
// the session active, its pipeline not synced, as between chained turns).
//
// A lost connection: outside a transaction the statement waits for
// PostgreSQL to come back (up to `reconnect_timeout_ms`, with one log line
// when it is lost and one when it is back) and runs again; inside one the
// transaction is gone, so the statement fails with UNAVAILABLE and the caller
// rolls back (which then only forgets it), as after any failed statement.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "weft/server/store/database.hpp"
#include "weft/server/store/outage.hpp"
#include "weft/common/call_watchdog.hpp"
#include "weft/common/status.hpp"

struct pg_conn;
struct pg_result;

namespace weft::store::sql {

// Opens a libpq connection to `conninfo` with what it does not say itself
// (the connection string comes last, so what it says wins): a server that
// does not answer is given up on after `connect_timeout_s` (whole seconds),
// TCP keepalives and `tcp_user_timeout` (`user_timeout_ms`, 0: the system's)
// notice a server or network gone without closing the connection, and the
// server lists it as `application_name`. Null only when out of memory; else
// the caller checks PQstatus and PQfinishes it.
pg_conn* ConnectPostgres(const std::string& conninfo, std::int64_t connect_timeout_s, std::int64_t user_timeout_ms,
                         const char* application_name);
// A connection made by ConnectPostgres on a thread of its own, so that the
// thread that asked goes on meanwhile (weftd's reactor answers its clients): a
// server that accepts the connection and never answers (a frozen machine, a
// stopped postmaster) holds only that thread, and only until libpq's
// connect_timeout for each server listed. Dropping it abandons the attempt:
// the thread closes what it made when it ends.
class PendingConnect {
 public:
  PendingConnect(std::string conninfo, std::int64_t connect_timeout_s, std::int64_t user_timeout_ms,
                 std::string application_name);
  ~PendingConnect();
  PendingConnect(const PendingConnect&) = delete;
  PendingConnect& operator=(const PendingConnect&) = delete;

  // How long a caller that can do something else meanwhile waits for an
  // attempt first: a server that answers has done so by then.
  static constexpr std::int64_t kMomentMs = 100;
  // Whether the attempt ended (connected or not), waiting up to `wait_ms` for it.
  bool Wait(std::int64_t wait_ms);
  // Once it ended: the connection, the caller's to check (PQstatus) and PQfinish; null when out of memory.
  pg_conn* Take();
  // How long it has been under way.
  std::int64_t ElapsedMs() const;
  std::int64_t connect_timeout_s() const { return connect_timeout_s_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::int64_t connect_timeout_s_;
  std::int64_t started_ms_;
};

// Why a connection could not be made, on one line: libpq's reason, led by
// "PostgreSQL at HOST:PORT did not answer within N s" when it gave up waiting
// for a server's answer (connect_timeout).
std::string ConnectFailure(pg_conn* conn);

// "1.2 s".
std::string TenthsOfSeconds(std::int64_t ms);
// "PostgreSQL at HOST:PORT" for a connection's log lines.
std::string PostgresPeer(pg_conn* conn);
// "HOST:PORT" of a connection.
std::string PostgresAddress(pg_conn* conn);

class PostgresStatement;

// Which connection a statement is prepared on (its generation; 0: none).
// Shared with a Prepare still in flight in a pipeline, which clears it when
// the server did not run it.
struct PreparedMark {
  std::uint64_t generation = 0;
};

struct PostgresOptions {
  std::string conninfo;               // a libpq connection string or URI
  int reconnect_timeout_ms = 60'000;  // how long a statement waits for a lost server
  // A second connection of the same process ("api reads"): its losses and
  // returns are logged at info under this name, so that the operator reads
  // the store's own warning once, not once per connection.
  std::string name;
  // A call that has had no answer for this long (a stopped or frozen server,
  // which TCP keepalives do not notice) shuts the connection's socket down, so
  // that the call fails and the connection is made again (0: no limit).
  int call_timeout_ms = 15'000;
  // A new connection's attempt gives up on a server that has not answered
  // for this long (libpq's connect_timeout, whole seconds, 2 at least). The
  // attempt runs on a thread of its own (PendingConnect): while it lasts, a
  // statement waits on as for a lost server, calling the reconnect wait.
  int connect_timeout_ms = 5'000;
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
  // Called between the attempts of a wait for a lost server (outage.hpp); none: it sleeps.
  void SetReconnectWait(ReconnectWait wait) { reconnect_wait_ = std::move(wait); }

  Dialect dialect() const override { return Dialect::kPostgres; }
  [[nodiscard]] Status Exec(std::string_view sql) override;
  [[nodiscard]] Status Begin() override;
  [[nodiscard]] Status Commit() override;
  [[nodiscard]] Status Rollback() override;
  [[nodiscard]] Status SendCommit() override;
  [[nodiscard]] Status AwaitCommit() override;
  bool CommitInFlight() const override { return commit_in_flight_; }
  int CommitSocket() const override;
  bool ChainWaiting() const override { return pipelining_ && chained_ && !in_transaction_ && !commit_in_flight_; }
  void EndChain() override;
  int Changes() const override { return changes_; }

 private:
  friend class PostgresStatement;
  [[nodiscard]] Result<std::unique_ptr<StatementBackend>> PrepareNew(std::string_view sql) override;
  struct ResultDeleter {
    void operator()(pg_result* r) const;
  };
  using ResultPtr = std::unique_ptr<pg_result, ResultDeleter>;

  // Connects once, on this thread (Open).
  Status Connect();
  // Takes over the connection an attempt made: its failure, or Ok.
  Status Adopt(pg_conn* conn);
  // Closes the connection and forgets what was in flight on it.
  void Drop();
  // libpq's connect_timeout, whole seconds.
  std::int64_t ConnectTimeoutS() const;
  // Arms the call deadline (call_timeout_ms) on the connection's socket while it lives.
  CallWatchdog::Guard Watch() const;
  // PQflush under Watch().
  int Flush();
  // Connect() until it works or the reconnect timeout passes.
  Status Reconnect();
  // Runs `send` (which returns what libpq returned); handles a lost connection
  // as the header says. A failed result becomes a Status naming `what`.
  template <typename Send>
  Result<ResultPtr> Run(Send send, std::string_view what);
  void NoteLost(const std::string& why);
  // "the " or "<name>' ", to start a log line about this connection.
  std::string Whose() const;
  // What a failed result (or none) means: UNAVAILABLE for a lost connection
  // and transient errors, INTERNAL otherwise.
  // Notes in failed_too_few_ whether it was a checked write's refusal (a
  // division by zero: see Statement::RunDeferred).
  Status Failure(const pg_result* r, std::string_view what);

  // Pipeline mode (see the header comment).
  struct Awaited {
    std::string what;                        // for messages: "'UPDATE tasks ...'"
    int expected_changes = -1;               // checked when not negative...
    Status otherwise;                        // ...failing with this
    std::shared_ptr<PreparedMark> prepared;  // a Prepare: cleared unless it ran
    bool commit = false;                     // the COMMIT sent by SendCommit()
  };
  // Whether nothing is known to be wrong with the connection and the server
  // has sent nothing since its last reply.
  bool Quiet() const;
  // Notes a statement just sent in pipeline mode; reads the replies of those
  // before it when many are waiting.
  Status Await(Awaited awaited);
  Status Await(std::string what) { return Await({std::move(what), -1, Status::Ok(), nullptr}); }
  // Reads the reply of the oldest statement awaited; a failure is also kept
  // as the pipeline's.
  Result<ResultPtr> ReadAwaited();
  // Flushes, reads every reply before the last statement sent, then its own.
  Result<ResultPtr> ReadLast();
  // A send or flush that failed: the connection is gone, and the transaction with it.
  Status SendFailed(std::string_view what);
  // Syncs, reads every reply and leaves pipeline mode; the first failure.
  // Outside a transaction, a transaction block the failure left open is rolled back.
  Status EndPipeline();
  // The replies awaited will never be read (the connection is gone, or out of
  // step): a commit among them failed with `why`.
  void ForgetAwaited(const Status& why);
  // A statement outside a transaction runs on its own, not in the pipeline
  // behind a commit in flight.
  void LeavePipelineOutside() {
    if (pipelining_ && !in_transaction_) (void)EndPipeline();
  }
  std::string NextName() { return "weft_" + std::to_string(++names_); }
  // BEGIN or COMMIT in pipeline mode: prepared on the server once per
  // connection, then only bound and run (sent as text, each was parsed and
  // analyzed again at every transaction).
  struct Control {
    Control(const char* name, const char* text) : name(name), text(text) {}
    const char* name;
    const char* text;
    std::shared_ptr<PreparedMark> prepared = std::make_shared<PreparedMark>();
  };
  // Sends it (its preparation first when this connection has none); false when libpq could not.
  bool SendControl(Control& control);

  PostgresOptions options_;
  ReconnectWait reconnect_wait_;
  std::string address_;  // HOST:PORT of the last connection made
  pg_conn* conn_ = nullptr;
  std::string peer_ = "PostgreSQL";  // "PostgreSQL at HOST:PORT" once connected, for the watchdog's line
  std::unique_ptr<PendingConnect> connecting_;  // an attempt under way (Reconnect)
  std::string last_failure_;  // why the last attempt failed, one line ("" before any did)
  std::uint64_t generation_ = 0;  // one more per connection: what a statement was prepared on
  std::uint64_t names_ = 0;
  Control begin_{"weft_begin", "BEGIN"};
  Control commit_{"weft_commit", "COMMIT"};
  Control commit_chain_{"weft_commit_chain", "COMMIT AND CHAIN"};
  Control rollback_{"weft_rollback", "ROLLBACK"};
  bool in_transaction_ = false;
  bool closing_ = false;  // in the destructor
  bool pipelining_ = false;
  // SendCommit()'s COMMIT AND CHAIN began the next transaction on the server:
  // the next Begin() sends nothing, and EndPipeline() rolls an unused one back.
  bool chained_ = false;
  std::deque<Awaited> awaited_;  // sent in pipeline mode, replies not read yet, oldest first
  Status pipeline_failure_;      // the first failure in this transaction's pipeline
  bool commit_in_flight_ = false;  // sent by SendCommit(), its reply not read yet
  Status commit_outcome_;          // how the last commit sent by SendCommit() ended, once read
  bool lost_ = false;             // lost and not back yet: said once
  std::int64_t lost_at_ms_ = 0;
  int changes_ = 0;
  bool failed_too_few_ = false;  // the last Failure() was a division by zero
};

}  // namespace weft::store::sql
