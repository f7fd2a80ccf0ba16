#include "weft/server/store/postgres.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::store::sql {
namespace {

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What the Store's checks on the server raise (weft_task_writes_missed(), migration 16).
constexpr std::string_view kRefusedState = "WF001";

// Connection trouble, a server shutting down, a serialization failure or
// too many connections pass; anything else is a bug or a broken schema.
bool Transient(std::string_view sqlstate) {
  return sqlstate.starts_with("08") || sqlstate.starts_with("57P") || sqlstate.starts_with("40") ||
         sqlstate.starts_with("53");
}

}  // namespace

std::string TenthsOfSeconds(std::int64_t ms) {
  ms = std::max<std::int64_t>(ms, 0);
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

void PostgresDatabase::ResultDeleter::operator()(pg_result* r) const { PQclear(r); }

std::string ToDollarParameters(std::string_view sql, int* params) {
  std::string out;
  out.reserve(sql.size() + 8);
  int highest = 0;
  char quote = 0;  // inside '...' or "..."
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: same result
      out += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    std::size_t end = i + 1;
    while (end < sql.size() && sql[end] >= '0' && sql[end] <= '9') ++end;
    const int number = end > i + 1 ? std::atoi(std::string(sql.substr(i + 1, end - i - 1)).c_str()) : highest + 1;
    highest = std::max(highest, number);
    out += '$' + std::to_string(number);
    i = end - 1;
  }
  *params = highest;
  return out;
}

// A statement of the PostgreSQL backend: its text with $N parameters, the
// values bound (as text, or in binary form), and the whole result of its last run.
class PostgresStatement final : public StatementBackend {
 public:
  PostgresStatement(PostgresDatabase* db, std::string text, int params)
      : db_(db), text_(std::move(text)), what_("'" + text_.substr(0, 60) + "'"),
        values_(static_cast<std::size_t>(params)), formats_(static_cast<std::size_t>(params), 0) {}
  ~PostgresStatement() override {
    // Gone with the connection it was prepared on, else given back.
    if (!prepared_ || prepared_->generation != db_->generation_ || !db_->conn_ || db_->closing_) return;
    if (PQstatus(db_->conn_) != CONNECTION_OK) return;
    const std::string deallocate = "DEALLOCATE " + name_;
    if (db_->pipelining_) {
      // Sent with the rest; skipped, and left to the connection, if the transaction failed.
      if (PQsendQueryParams(db_->conn_, deallocate.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0))
        (void)db_->Await("'" + deallocate + "'");
      return;
    }
    if (PQtransactionStatus(db_->conn_) == PQTRANS_INERROR) return;
    CallWatchdog::Guard watch = db_->Watch();
    PQclear(PQexec(db_->conn_, deallocate.c_str()));
  }
  PostgresStatement(const PostgresStatement&) = delete;
  PostgresStatement& operator=(const PostgresStatement&) = delete;

  void Reset() override {
    result_.reset();
    row_ = -1;
    rows_ = 0;
    for (auto& v : values_) v.reset();
    if (binary_) std::fill(formats_.begin(), formats_.end(), 0);
    binary_ = false;
    bind_error_.clear();
  }
  void Bind(int index, std::int64_t value) override { Set(index, std::to_string(value)); }
  void Bind(int index, std::string_view value) override { Set(index, std::string(value)); }
  void BindBinary(int index, std::string_view bytes) override {
    if (!Valid(index)) return;
    Set(index, std::string(bytes));
    formats_[static_cast<std::size_t>(index - 1)] = 1;
    binary_ = true;
  }
  void BindNull(int index) override {
    if (Valid(index)) values_[static_cast<std::size_t>(index - 1)].reset();
  }

  Result<bool> Step() override {
    if (!bind_error_.empty()) return Status::Internal(bind_error_);
    if (!result_) {
      WEFT_RETURN_IF_ERROR(db_->BeforeStatement());
      WEFT_ASSIGN_OR_RETURN(result_, Execute());
      rows_ = PQntuples(result_.get());
      row_ = -1;
    }
    if (row_ < rows_) ++row_;
    return row_ < rows_;
  }

  Status RunDeferred(int expected_changes, Status otherwise) override {
    if (!bind_error_.empty()) return Status::Internal(bind_error_);
    WEFT_RETURN_IF_ERROR(db_->BeforeStatement());
    db_->LeavePipelineOutside();
    if (db_->pipelining_) return Send(expected_changes, std::move(otherwise));
    // Outside a transaction nothing waits for a commit: it runs now.
    Result<PostgresDatabase::ResultPtr> ran = Execute();
    if (!ran.ok()) return expected_changes >= 0 && db_->failed_too_few_ ? otherwise : ran.status();
    result_ = std::move(*ran);
    rows_ = PQntuples(result_.get());
    row_ = rows_;
    if (expected_changes >= 0 && db_->changes_ != expected_changes) return otherwise;
    return Status::Ok();
  }

  std::int64_t Int(int column) const override {
    if (IsNull(column)) return 0;
    return std::strtoll(PQgetvalue(result_.get(), row_, column), nullptr, 10);
  }
  std::string Text(int column) const override {
    if (IsNull(column)) return std::string();
    return std::string(PQgetvalue(result_.get(), row_, column),
                       static_cast<std::size_t>(PQgetlength(result_.get(), row_, column)));
  }
  bool IsNull(int column) const override {
    return !result_ || row_ < 0 || row_ >= rows_ || column >= PQnfields(result_.get()) ||
           PQgetisnull(result_.get(), row_, column);
  }

 private:
  bool Valid(int index) {
    if (index >= 1 && static_cast<std::size_t>(index) <= values_.size()) return true;
    if (bind_error_.empty())
      bind_error_ = "PostgreSQL bind failed: no parameter " + std::to_string(index) + " in " + what_;
    return false;
  }
  void Set(int index, std::string value) {
    if (!Valid(index)) return;
    values_[static_cast<std::size_t>(index - 1)] = std::move(value);
    formats_[static_cast<std::size_t>(index - 1)] = 0;
  }

  std::vector<const char*> Values() const {
    std::vector<const char*> values;
    values.reserve(values_.size());
    for (const auto& v : values_) values.push_back(v ? v->c_str() : nullptr);
    return values;
  }
  // Only with a value in binary form (libpq needs the length of those; text ends at its NUL).
  std::vector<int> Lengths() const {
    std::vector<int> lengths;
    if (!binary_) return lengths;
    lengths.reserve(values_.size());
    for (const auto& v : values_) lengths.push_back(v ? static_cast<int>(v->size()) : 0);
    return lengths;
  }
  const int* Formats() const { return binary_ ? formats_.data() : nullptr; }

  // A statement run once (most of those prepared per call) is sent with its
  // text; from its second run on it is prepared on the server.
  bool NextRunPrepared() {
    if (++runs_ == 1) return false;
    if (name_.empty()) name_ = db_->NextName();
    if (!prepared_) prepared_ = std::make_shared<PreparedMark>();
    return true;
  }

  Result<PostgresDatabase::ResultPtr> Execute() {
    db_->LeavePipelineOutside();
    if (db_->pipelining_) {
      WEFT_RETURN_IF_ERROR(Send(-1, Status::Ok()));
      return db_->ReadLast();
    }
    const std::vector<const char*> values = Values();
    const std::vector<int> lengths = Lengths();
    const int n = static_cast<int>(values.size());
    const bool prepare = NextRunPrepared();
    auto send = [&]() -> PGresult* {
      PGconn* c = db_->conn_;
      if (!prepare) return PQexecParams(c, text_.c_str(), n, nullptr, values.data(), lengths.data(), Formats(), 0);
      if (prepared_->generation != db_->generation_) {
        PGresult* made = PQprepare(c, name_.c_str(), text_.c_str(), n, nullptr);
        if (PQresultStatus(made) != PGRES_COMMAND_OK) return made;
        PQclear(made);
        prepared_->generation = db_->generation_;
      }
      return PQexecPrepared(c, name_.c_str(), n, values.data(), lengths.data(), Formats(), 0);
    };
    return db_->Run(send, what_);
  }

  // Sends it in pipeline mode (preparing it first when it must be); its reply is awaited.
  Status Send(int expected_changes, Status otherwise) {
    const std::vector<const char*> values = Values();
    const std::vector<int> lengths = Lengths();
    const int n = static_cast<int>(values.size());
    PGconn* c = db_->conn_;
    PostgresDatabase::Awaited awaited{.what = what_, .expected_changes = expected_changes,
                                      .otherwise = std::move(otherwise), .prepared = nullptr};
    if (!NextRunPrepared()) {
      if (!PQsendQueryParams(c, text_.c_str(), n, nullptr, values.data(), lengths.data(), Formats(), 0))
        return db_->SendFailed(what_);
      return db_->Await(std::move(awaited));
    }
    if (prepared_->generation != db_->generation_) {
      if (!PQsendPrepare(c, name_.c_str(), text_.c_str(), n, nullptr)) return db_->SendFailed(what_);
      prepared_->generation = db_->generation_;
      WEFT_RETURN_IF_ERROR(db_->Await(
          {.what = "prepare of " + what_, .expected_changes = -1, .otherwise = Status::Ok(), .prepared = prepared_}));
    }
    if (!PQsendQueryPrepared(c, name_.c_str(), n, values.data(), lengths.data(), Formats(), 0))
      return db_->SendFailed(what_);
    return db_->Await(std::move(awaited));
  }

  PostgresDatabase* db_;
  std::string text_;
  std::string what_;  // for messages
  std::vector<std::optional<std::string>> values_;
  std::vector<int> formats_;  // per value: 0 text, 1 binary
  bool binary_ = false;       // some value is in binary form
  std::string bind_error_;
  std::string name_;                        // empty until prepared on the server
  std::shared_ptr<PreparedMark> prepared_;  // made with the name
  int runs_ = 0;
  PostgresDatabase::ResultPtr result_;
  int rows_ = 0;
  int row_ = -1;
};

PostgresDatabase::~PostgresDatabase() {
  closing_ = true;  // the statements kept need no DEALLOCATE: the connection goes with them
  DropIdleStatements();
  if (conn_) PQfinish(conn_);
}

Status PostgresDatabase::Open(PostgresOptions options) {
  options_ = std::move(options);
  return Connect();
}

pg_conn* ConnectPostgres(const std::string& conninfo, std::int64_t connect_timeout_s, std::int64_t user_timeout_ms,
                         const char* application_name) {
  const std::string connect_timeout = std::to_string(connect_timeout_s);
  const std::string user_timeout = std::to_string(user_timeout_ms);
  const char* keys[] = {"connect_timeout",     "keepalives",       "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "tcp_user_timeout",
                        "fallback_application_name", "dbname", nullptr};
  const char* values[] = {connect_timeout.c_str(), "1", "5", "2", "3", user_timeout.c_str(), application_name,
                          conninfo.c_str(), nullptr};
  return PQconnectdbParams(keys, values, 1);
}

std::string PostgresAddress(pg_conn* conn) {
  const char* host = PQhost(conn);
  const char* port = PQport(conn);
  return std::string(host ? host : "") + ":" + (port ? port : "");
}

std::string PostgresPeer(pg_conn* conn) { return "PostgreSQL at " + PostgresAddress(conn); }

std::string ConnectFailure(pg_conn* conn) {
  if (!conn) return "out of memory";
  const std::string why = OneLine(PQerrorMessage(conn));
  // libpq's own words for a server that accepted the connection (or a network
  // that holds it) and sent nothing before connect_timeout.
  if (why.find("timeout expired") == std::string::npos) return why;
  std::string seconds = "?";
  if (PQconninfoOption* options = PQconninfo(conn)) {
    for (PQconninfoOption* o = options; o->keyword; ++o)
      if (std::string_view(o->keyword) == "connect_timeout" && o->val) seconds = o->val;
    PQconninfoFree(options);
  }
  return PostgresPeer(conn) + " did not answer within " + seconds +
         " s (a frozen or stopped server, or a network that drops its packets): " + why;
}

struct PendingConnect::State {
  std::mutex mu;
  std::condition_variable ended;
  bool done = false;
  bool abandoned = false;
  pg_conn* conn = nullptr;
};

PendingConnect::PendingConnect(std::string conninfo, std::int64_t connect_timeout_s, std::int64_t user_timeout_ms,
                               std::string application_name)
    : state_(std::make_shared<State>()), connect_timeout_s_(connect_timeout_s), started_ms_(SteadyMs()) {
  std::thread([state = state_, conninfo = std::move(conninfo), connect_timeout_s, user_timeout_ms,
               name = std::move(application_name)] {
    pg_conn* conn = ConnectPostgres(conninfo, connect_timeout_s, user_timeout_ms, name.c_str());
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (!state->abandoned) {
        state->conn = conn;
        state->done = true;
        state->ended.notify_all();
        return;
      }
    }
    if (conn) PQfinish(conn);  // no one wants it any more
  }).detach();
}

PendingConnect::~PendingConnect() {
  pg_conn* made = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->abandoned = true;
    made = std::exchange(state_->conn, nullptr);
  }
  if (made) PQfinish(made);
}

bool PendingConnect::Wait(std::int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->ended.wait_for(lock, std::chrono::milliseconds(std::max<std::int64_t>(wait_ms, 0)),
                                [&] { return state_->done; });
}

pg_conn* PendingConnect::Take() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return std::exchange(state_->conn, nullptr);
}

std::int64_t PendingConnect::ElapsedMs() const { return SteadyMs() - started_ms_; }

std::int64_t PostgresDatabase::ConnectTimeoutS() const {
  return std::max<std::int64_t>(2, (std::int64_t{options_.connect_timeout_ms} + 999) / 1000);
}

void PostgresDatabase::Drop() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  // Whatever was in flight went with the old connection.
  pipelining_ = false;
  chained_ = false;
  ForgetAwaited(Status::Unavailable("the connection to PostgreSQL was lost before COMMIT was confirmed"));
}

Status PostgresDatabase::Connect() {
  connecting_.reset();
  return Adopt(ConnectPostgres(options_.conninfo, ConnectTimeoutS(), std::max(options_.call_timeout_ms, 0), "weftd"));
}

Status PostgresDatabase::Adopt(pg_conn* conn) {
  Drop();
  conn_ = conn;
  if (!conn_) return Status::Unavailable("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(conn_) != CONNECTION_OK) {
    Status s = Status::Unavailable("cannot connect to PostgreSQL: " + ConnectFailure(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    return s;
  }
  // Notices (a table that already exists, ...) are not weftd's to print.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  peer_ = PostgresPeer(conn_);
  address_ = PostgresAddress(conn_);
  ++generation_;
  return Status::Ok();
}

CallWatchdog::Guard PostgresDatabase::Watch() const {
  return CallWatchdog::Guard(conn_ ? PQsocket(conn_) : -1, options_.call_timeout_ms, peer_);
}

int PostgresDatabase::Flush() {
  CallWatchdog::Guard watch = Watch();
  return PQflush(conn_);
}

Status PostgresDatabase::Reconnect() {
  const std::int64_t deadline = SteadyMs() + options_.reconnect_timeout_ms;
  auto pause = std::chrono::milliseconds(50);
  // An attempt is waited for here a moment (a server that answers does within
  // it), then the owner answers its clients while it goes on. Without an
  // owner, until the deadline, but that moment at least: a connection that
  // may not wait at all (reconnect_timeout_ms 0) still finds a server that
  // answers at once, and leaves one that does not to its next statement.
  const auto wait_here = [&] {
    const std::int64_t moment = std::max<std::int64_t>(0, PendingConnect::kMomentMs - connecting_->ElapsedMs());
    return reconnect_wait_ ? moment : std::max(deadline - SteadyMs(), moment);
  };
  while (true) {
    if (!connecting_) {
      Drop();
      connecting_ = std::make_unique<PendingConnect>(options_.conninfo, ConnectTimeoutS(),
                                                     std::max(options_.call_timeout_ms, 0), "weftd");
    }
    if (connecting_->Wait(wait_here())) {
      Status s = Adopt(connecting_->Take());
      connecting_.reset();
      if (s.ok()) {
        last_failure_.clear();
        if (lost_) {
          lost_ = false;
          WEFT_LOG(kInfo, "store") << Whose() << "connection to PostgreSQL is back after " << SteadyMs() - lost_at_ms_
                                   << " ms (" << Describe() << ")";
        }
        return s;
      }
      NoteLost(s.message());
      last_failure_ = s.message();
      if (const std::string_view prefix = "cannot connect to PostgreSQL: "; last_failure_.starts_with(prefix))
        last_failure_.erase(0, prefix.size());
      const std::int64_t now = SteadyMs();
      if (now >= deadline) return s.WithContext("PostgreSQL did not come back");
      if (!reconnect_wait_) {
        std::this_thread::sleep_for(pause);
      } else {
        // The owner answers its clients meanwhile (outage.hpp).
        const StoreOutage outage{.server = address_, .why = last_failure_, .lost_ms_ago = now - lost_at_ms_,
                                 .left_ms = deadline - now};
        if (!reconnect_wait_(outage, static_cast<int>(std::min<std::int64_t>(pause.count(), deadline - now))))
          return s.WithContext("weftd stopped waiting for PostgreSQL");
      }
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
      continue;
    }
    // The attempt is still under way: a server that accepted it and has not
    // answered yet. It goes on, on its thread; the owner answers meanwhile.
    const std::string pending = "a new connection to it has had no answer for " +
                                TenthsOfSeconds(connecting_->ElapsedMs()) + " (weftd gives up on it after " +
                                std::to_string(connecting_->connect_timeout_s()) + " s, [store] connect_timeout_ms)";
    if (!lost_) NoteLost(pending);
    const std::int64_t now = SteadyMs();
    const std::string why = last_failure_.empty() ? pending : last_failure_ + "; " + pending;
    if (now >= deadline) return Status::Unavailable("cannot connect to PostgreSQL at " + address_ + ": " + why)
                                .WithContext("PostgreSQL did not come back");
    if (!reconnect_wait_) continue;
    const StoreOutage outage{.server = address_, .why = why, .lost_ms_ago = now - lost_at_ms_,
                             .left_ms = deadline - now};
    if (!reconnect_wait_(outage, static_cast<int>(std::min<std::int64_t>(50, deadline - now))))
      return Status::Unavailable("cannot connect to PostgreSQL at " + address_ + ": " + why)
          .WithContext("weftd stopped waiting for PostgreSQL");
  }
}

std::string PostgresDatabase::Whose() const {
  return options_.name.empty() ? "the " : options_.name + "' ";
}

void PostgresDatabase::NoteLost(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  lost_at_ms_ = SteadyMs();
  // libpq's first line says what happened; the rest guesses why.
  const std::string first = why.substr(0, why.find('\n'));
  if (!options_.name.empty()) {
    WEFT_LOG(kInfo, "store") << Whose() << "connection to PostgreSQL was lost (" << first << "); waiting for it";
    return;
  }
  WEFT_LOG(kWarn, "store") << "lost the connection to PostgreSQL (" << first << "); waiting for it to come back, "
                           << "up to " << options_.reconnect_timeout_ms / 1000 << " s per request";
}

template <typename Send>
Result<PostgresDatabase::ResultPtr> PostgresDatabase::Run(Send send, std::string_view what) {
  for (int tries = 0;; ++tries) {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      if (in_transaction_) return Status::Unavailable("the connection to PostgreSQL was lost during the transaction");
      WEFT_RETURN_IF_ERROR(Reconnect());
    }
    ResultPtr r;
    {
      CallWatchdog::Guard watch = Watch();
      r.reset(send());
    }
    const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
      const char* tuples = PQcmdTuples(r.get());
      changes_ = tuples && *tuples ? std::atoi(tuples) : 0;
      return r;
    }
    // Outside a transaction nothing was done: run it again on a new connection.
    if (PQstatus(conn_) != CONNECTION_OK && !in_transaction_ && tries == 0) {
      NoteLost(OneLine(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_)));
      continue;
    }
    return Failure(r.get(), what);
  }
}

Status PostgresDatabase::Failure(const pg_result* r, std::string_view what) {
  const std::string message = OneLine(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
  if (PQstatus(conn_) != CONNECTION_OK) {
    NoteLost(message);
    return Status::Unavailable("PostgreSQL " + std::string(what) + " failed: the connection was lost (" + message +
                               ")");
  }
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  failed_too_few_ = state && std::string_view(state) == "22012";  // division_by_zero
  // A write the Store checks on the server (weft_task_writes_missed): its message is for the user as it is.
  if (state && std::string_view(state) == kRefusedState) {
    const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    return Status::NotFound(primary ? primary : message);
  }
  const std::string full = "PostgreSQL " + std::string(what) + " failed: " + message;
  if (state && Transient(state)) return Status::Unavailable(full);
  return Status::Internal(full);
}

bool PostgresDatabase::Quiet() const {
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return false;
  pollfd socket{.fd = PQsocket(conn_), .events = POLLIN, .revents = 0};
  return poll(&socket, 1, 0) == 0;
}

Status PostgresDatabase::Await(Awaited awaited) {
  awaited_.push_back(std::move(awaited));
  // Unread replies wait in the socket; a long batch reads them as it goes
  // rather than let them fill it.
  constexpr std::size_t kMaxAwaited = 512;
  if (awaited_.size() < kMaxAwaited) return Status::Ok();
  if (PQsendFlushRequest(conn_) != 1 || Flush() != 0) return SendFailed(awaited_.back().what);
  while (awaited_.size() > 1) (void)ReadAwaited();  // the last one's reply may be wanted by ReadLast()
  return pipeline_failure_;
}

Result<PostgresDatabase::ResultPtr> PostgresDatabase::ReadAwaited() {
  Awaited awaited = std::move(awaited_.front());
  awaited_.pop_front();
  ResultPtr r;
  {
    CallWatchdog::Guard watch = Watch();
    r.reset(PQgetResult(conn_));
    // A statement's replies end with a NULL.
    if (r) {
      while (PGresult* more = PQgetResult(conn_)) PQclear(more);
    }
  }
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  Status failure;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    const char* tuples = PQcmdTuples(r.get());
    changes_ = tuples && *tuples ? std::atoi(tuples) : 0;
    const bool rolled_back = awaited.commit && std::string_view(PQcmdStatus(r.get())) != "COMMIT";
    if (awaited.commit) {
      commit_in_flight_ = false;
      commit_outcome_ = rolled_back ? Status::Internal("PostgreSQL rolled the transaction back at COMMIT")
                                    : Status::Ok();
    }
    if (rolled_back) failure = commit_outcome_;
    else if (awaited.expected_changes < 0 || changes_ == awaited.expected_changes) return r;
    else failure = std::move(awaited.otherwise);
  } else if (status == PGRES_PIPELINE_ABORTED) {
    failure = Status::Internal("PostgreSQL " + awaited.what + " was not run: an earlier statement of its "
                               "transaction failed");
  } else {
    failure = Failure(r.get(), awaited.what);
    if (failed_too_few_ && awaited.expected_changes >= 0) failure = std::move(awaited.otherwise);
  }
  if (awaited.prepared) awaited.prepared->generation = 0;
  if (pipeline_failure_.ok()) pipeline_failure_ = failure;
  if (awaited.commit) {
    // Skipped or failed: the first failure is the cause.
    commit_in_flight_ = false;
    commit_outcome_ = pipeline_failure_;
  }
  // No more replies come on a lost connection.
  if (PQstatus(conn_) != CONNECTION_OK) ForgetAwaited(failure);
  return failure;
}

Result<PostgresDatabase::ResultPtr> PostgresDatabase::ReadLast() {
  if (PQsendFlushRequest(conn_) != 1 || Flush() != 0) return SendFailed(awaited_.back().what);
  while (awaited_.size() > 1) (void)ReadAwaited();
  if (awaited_.empty()) return pipeline_failure_;
  Result<ResultPtr> last = ReadAwaited();
  // Skipped after an earlier failure: that one is the cause.
  if (!pipeline_failure_.ok()) return pipeline_failure_;
  return last;
}

Status PostgresDatabase::SendFailed(std::string_view what) {
  const std::string message = OneLine(PQerrorMessage(conn_));
  NoteLost(message);
  Status failure = Status::Unavailable("PostgreSQL " + std::string(what) +
                                       " failed: the connection was lost during the transaction (" + message + ")");
  ForgetAwaited(failure);
  if (pipeline_failure_.ok()) pipeline_failure_ = failure;
  return failure;
}

void PostgresDatabase::ForgetAwaited(const Status& why) {
  awaited_.clear();
  if (!commit_in_flight_) return;
  commit_in_flight_ = false;
  commit_outcome_ = why.ok() ? Status::Unavailable("PostgreSQL never confirmed COMMIT") : why;
}

Status PostgresDatabase::EndPipeline() {
  // The transaction the last COMMIT AND CHAIN began, which nothing used, ends
  // with the pipeline (the server skips it after a failure, which the sync then ends).
  const bool end_chained = chained_ && !in_transaction_;
  chained_ = false;
  if (end_chained && PQstatus(conn_) == CONNECTION_OK && !SendControl(rollback_)) (void)SendFailed("ROLLBACK");
  else if (end_chained && PQstatus(conn_) == CONNECTION_OK) (void)Await("ROLLBACK");
  if (PQstatus(conn_) == CONNECTION_OK && PQpipelineSync(conn_) == 1) {
    while (!awaited_.empty()) (void)ReadAwaited();
  } else {
    (void)SendFailed("sync");
  }
  if (PQstatus(conn_) == CONNECTION_OK) {
    ResultPtr sync;
    {
      CallWatchdog::Guard watch = Watch();
      sync.reset(PQgetResult(conn_));
    }
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(conn_) != 1) {
      // Out of step with the server: this connection is not to be trusted again.
      if (pipeline_failure_.ok())
        pipeline_failure_ = Status::Internal("PostgreSQL pipeline out of step: " + OneLine(PQerrorMessage(conn_)));
      PQfinish(conn_);
      conn_ = nullptr;
    }
  }
  pipelining_ = false;
  ForgetAwaited(pipeline_failure_);
  Status failure = std::move(pipeline_failure_);
  pipeline_failure_ = Status::Ok();
  // A chained commit that failed inside its transaction block leaves the block
  // open (and aborted) after the sync: nothing else of it is wanted.
  if (!failure.ok() && !in_transaction_ && conn_ && PQstatus(conn_) == CONNECTION_OK &&
      PQtransactionStatus(conn_) == PQTRANS_INERROR) {
    CallWatchdog::Guard watch = Watch();
    PQclear(PQexec(conn_, "ROLLBACK"));
  }
  return failure;
}

std::string PostgresDatabase::Describe() const {
  if (!conn_) return "PostgreSQL (not connected)";
  return std::string("PostgreSQL host=") + PQhost(conn_) + " port=" + PQport(conn_) + " dbname=" + PQdb(conn_);
}

Status PostgresDatabase::Exec(std::string_view sql) {
  WEFT_RETURN_IF_ERROR(BeforeStatement());
  LeavePipelineOutside();
  // A text of several statements runs only outside pipeline mode: the rest of
  // the transaction then waits for each reply.
  if (pipelining_) WEFT_RETURN_IF_ERROR(EndPipeline());
  const std::string text(sql);
  return Run([&] { return PQexec(conn_, text.c_str()); }, "exec of '" + text.substr(0, 60) + "'").status();
}

Result<std::unique_ptr<StatementBackend>> PostgresDatabase::PrepareNew(std::string_view sql) {
  int params = 0;
  std::string text = ToDollarParameters(sql, &params);
  return std::unique_ptr<StatementBackend>(std::make_unique<PostgresStatement>(this, std::move(text), params));
}

bool PostgresDatabase::SendControl(Control& control) {
  if (control.prepared->generation != generation_) {
    if (!PQsendPrepare(conn_, control.name, control.text, 0, nullptr)) return false;
    control.prepared->generation = generation_;
    // Not run (an earlier statement of the pipeline failed): the mark is
    // cleared, and the next one prepares it again. A failure read here is
    // the pipeline's, which the statement itself reports.
    (void)Await({.what = std::string("prepare of ") + control.text, .expected_changes = -1,
                 .otherwise = Status::Ok(), .prepared = control.prepared});
  }
  return PQsendQueryPrepared(conn_, control.name, 0, nullptr, nullptr, nullptr, 0) == 1;
}

Status PostgresDatabase::Begin() {
  if (in_transaction_) return Status::Internal("BEGIN inside a transaction");
  if (pipelining_ && chained_) {
    // The COMMIT in flight began it (AND CHAIN): it runs only if that one commits.
    chained_ = false;
    in_transaction_ = true;
    return Status::Ok();
  }
  if (pipelining_) {
    // Behind a commit in flight: run only if it commits (see the header).
    if (!SendControl(begin_)) return SendFailed("BEGIN");
    in_transaction_ = true;
    return Await("BEGIN");
  }
  if (!Quiet()) {
    // Waits for BEGIN, which finds out (and replaces) a lost connection.
    WEFT_RETURN_IF_ERROR(Run([&] { return PQexec(conn_, "BEGIN"); }, "BEGIN").status());
    in_transaction_ = true;
    pipelining_ = PQenterPipelineMode(conn_) == 1;
    return Status::Ok();
  }
  if (PQenterPipelineMode(conn_) != 1)
    return Status::Internal("PostgreSQL would not enter pipeline mode: " + OneLine(PQerrorMessage(conn_)));
  if (!SendControl(begin_)) {
    // No transaction began: the next Begin() finds the connection gone and replaces it.
    Status failed = SendFailed("BEGIN");
    pipeline_failure_ = Status::Ok();
    return failed;
  }
  pipelining_ = true;
  in_transaction_ = true;
  return Await("BEGIN");
}

Status PostgresDatabase::Commit() {
  if (pipelining_) {
    // After a failure the transaction is aborted; its COMMIT would only roll back.
    if (!pipeline_failure_.ok()) return pipeline_failure_;
    if (!SendControl(commit_)) return SendFailed("COMMIT");
    WEFT_RETURN_IF_ERROR(Await("COMMIT"));
    // Still in the transaction on failure: the caller rolls back.
    WEFT_RETURN_IF_ERROR(EndPipeline());
    in_transaction_ = false;
    return Status::Ok();
  }
  // After a failed statement PostgreSQL has aborted the whole transaction;
  // its COMMIT would only roll back.
  if (conn_ && PQtransactionStatus(conn_) == PQTRANS_INERROR)
    return Status::Internal("the transaction was aborted by an earlier failed statement");
  WEFT_RETURN_IF_ERROR(Run([&] { return PQexec(conn_, "COMMIT"); }, "COMMIT").status());
  in_transaction_ = false;
  return Status::Ok();
}

Status PostgresDatabase::SendCommit() {
  if (!pipelining_) return Commit();
  if (!in_transaction_) return Status::Internal("COMMIT outside a transaction");
  // After a failure the transaction is aborted; its COMMIT would only roll back.
  if (!pipeline_failure_.ok()) return pipeline_failure_;
  if (!SendControl(commit_chain_)) return SendFailed("COMMIT");
  chained_ = true;
  WEFT_RETURN_IF_ERROR(
      Await({.what = "COMMIT", .expected_changes = -1, .otherwise = Status::Ok(), .prepared = nullptr, .commit = true}));
  // The server sends its replies when asked to flush; the COMMIT's is wanted as soon as it is there.
  if (PQsendFlushRequest(conn_) != 1 || Flush() != 0) return SendFailed("COMMIT");
  in_transaction_ = false;
  commit_in_flight_ = true;
  commit_outcome_ = Status::Ok();
  return Status::Ok();
}

Status PostgresDatabase::AwaitCommit() {
  while (commit_in_flight_ && !awaited_.empty()) (void)ReadAwaited();
  if (commit_in_flight_) ForgetAwaited(Status::Ok());
  Status outcome = std::move(commit_outcome_);
  commit_outcome_ = Status::Ok();
  // Nothing behind it: committed, the transaction it began waits for the
  // next Begin() (ChainWaiting()); else the connection leaves pipeline mode
  // (a failure was read above).
  if (!in_transaction_ && pipelining_ && !(outcome.ok() && chained_ && awaited_.empty())) (void)EndPipeline();
  return outcome;
}

void PostgresDatabase::EndChain() {
  if (ChainWaiting()) (void)EndPipeline();
}

int PostgresDatabase::CommitSocket() const { return commit_in_flight_ && conn_ ? PQsocket(conn_) : -1; }

Status PostgresDatabase::Rollback() {
  if (!in_transaction_) return Status::Ok();
  in_transaction_ = false;
  // The replies still in flight are read and forgotten: the transaction is going.
  if (pipelining_) (void)EndPipeline();
  // A lost connection took the transaction with it: nothing to roll back.
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return Status::Ok();
  ResultPtr r;
  {
    CallWatchdog::Guard watch = Watch();
    r.reset(PQexec(conn_, "ROLLBACK"));
  }
  if (PQresultStatus(r.get()) == PGRES_COMMAND_OK || PQstatus(conn_) != CONNECTION_OK) return Status::Ok();
  return Status::Internal("PostgreSQL ROLLBACK failed: " + OneLine(PQresultErrorMessage(r.get())));
}

}  // namespace weft::store::sql
