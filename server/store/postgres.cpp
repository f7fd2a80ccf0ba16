#include "weft/server/store/postgres.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "weft/common/log.hpp"

namespace weft::store::sql {
namespace {

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Connection trouble, a server shutting down, a serialization failure or
// too many connections pass; anything else is a bug or a broken schema.
bool Transient(std::string_view sqlstate) {
  return sqlstate.starts_with("08") || sqlstate.starts_with("57P") || sqlstate.starts_with("40") ||
         sqlstate.starts_with("53");
}

}  // namespace

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
// values bound as text, and the whole result of its last run.
class PostgresStatement final : public StatementBackend {
 public:
  PostgresStatement(PostgresDatabase* db, std::string text, int params)
      : db_(db), text_(std::move(text)), values_(static_cast<std::size_t>(params)) {}
  ~PostgresStatement() override {
    // Gone with the connection it was prepared on, else given back.
    if (name_.empty() || generation_ != db_->generation_ || !db_->conn_) return;
    if (PQstatus(db_->conn_) != CONNECTION_OK || PQtransactionStatus(db_->conn_) == PQTRANS_INERROR) return;
    PQclear(PQexec(db_->conn_, ("DEALLOCATE " + name_).c_str()));
  }
  PostgresStatement(const PostgresStatement&) = delete;
  PostgresStatement& operator=(const PostgresStatement&) = delete;

  void Reset() override {
    result_.reset();
    row_ = -1;
    rows_ = 0;
    for (auto& v : values_) v.reset();
    bind_error_.clear();
  }
  void Bind(int index, std::int64_t value) override { Set(index, std::to_string(value)); }
  void Bind(int index, std::string_view value) override { Set(index, std::string(value)); }
  void BindNull(int index) override {
    if (Valid(index)) values_[static_cast<std::size_t>(index - 1)].reset();
  }

  Result<bool> Step() override {
    if (!bind_error_.empty()) return Status::Internal(bind_error_);
    if (!result_) {
      WEFT_ASSIGN_OR_RETURN(result_, Execute());
      rows_ = PQntuples(result_.get());
      row_ = -1;
    }
    if (row_ < rows_) ++row_;
    return row_ < rows_;
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
      bind_error_ = "PostgreSQL bind failed: no parameter " + std::to_string(index) + " in '" + text_.substr(0, 60) + "'";
    return false;
  }
  void Set(int index, std::string value) {
    if (Valid(index)) values_[static_cast<std::size_t>(index - 1)] = std::move(value);
  }

  Result<PostgresDatabase::ResultPtr> Execute() {
    std::vector<const char*> values;
    values.reserve(values_.size());
    for (const auto& v : values_) values.push_back(v ? v->c_str() : nullptr);
    const int n = static_cast<int>(values.size());
    // A statement run once (most of those prepared per call) is sent with its
    // text; from its second run on it is prepared on the server.
    const bool prepare = ++runs_ > 1;
    if (prepare && name_.empty()) name_ = db_->NextName();
    auto send = [&]() -> PGresult* {
      PGconn* c = db_->conn_;
      if (!prepare) return PQexecParams(c, text_.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0);
      if (generation_ != db_->generation_) {
        PGresult* made = PQprepare(c, name_.c_str(), text_.c_str(), n, nullptr);
        if (PQresultStatus(made) != PGRES_COMMAND_OK) return made;
        PQclear(made);
        generation_ = db_->generation_;
      }
      return PQexecPrepared(c, name_.c_str(), n, values.data(), nullptr, nullptr, 0);
    };
    return db_->Run(send, "'" + text_.substr(0, 60) + "'");
  }

  PostgresDatabase* db_;
  std::string text_;
  std::vector<std::optional<std::string>> values_;
  std::string bind_error_;
  std::string name_;             // empty until prepared on the server
  std::uint64_t generation_ = 0;  // the connection it was prepared on
  int runs_ = 0;
  PostgresDatabase::ResultPtr result_;
  int rows_ = 0;
  int row_ = -1;
};

PostgresDatabase::~PostgresDatabase() {
  if (conn_) PQfinish(conn_);
}

Status PostgresDatabase::Open(PostgresOptions options) {
  options_ = std::move(options);
  return Connect();
}

Status PostgresDatabase::Connect() {
  if (conn_) PQfinish(conn_);
  // The connection string comes last so that what it says wins; a server
  // that does not answer is given up on after 10 s unless it says otherwise.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "weftd", options_.conninfo.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (!conn_) return Status::Unavailable("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(conn_) != CONNECTION_OK) {
    Status s = Status::Unavailable("cannot connect to PostgreSQL: " + Trimmed(PQerrorMessage(conn_)));
    PQfinish(conn_);
    conn_ = nullptr;
    return s;
  }
  // Notices (a table that already exists, ...) are not weftd's to print.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  ++generation_;
  return Status::Ok();
}

Status PostgresDatabase::Reconnect() {
  const std::int64_t deadline = SteadyMs() + options_.reconnect_timeout_ms;
  auto pause = std::chrono::milliseconds(50);
  while (true) {
    Status s = Connect();
    if (s.ok()) {
      if (lost_) {
        lost_ = false;
        WEFT_LOG(kInfo, "store") << "the connection to PostgreSQL is back after " << SteadyMs() - lost_at_ms_
                                 << " ms (" << Describe() << ")";
      }
      return s;
    }
    NoteLost(s.message());
    if (SteadyMs() >= deadline) return s.WithContext("PostgreSQL did not come back");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

void PostgresDatabase::NoteLost(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  lost_at_ms_ = SteadyMs();
  WEFT_LOG(kWarn, "store") << "lost the connection to PostgreSQL (" << why << "); waiting for it to come back, "
                           << "up to " << options_.reconnect_timeout_ms / 1000 << " s per request";
}

template <typename Send>
Result<PostgresDatabase::ResultPtr> PostgresDatabase::Run(Send send, std::string_view what) {
  for (int tries = 0;; ++tries) {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      if (in_transaction_) return Status::Unavailable("the connection to PostgreSQL was lost during the transaction");
      WEFT_RETURN_IF_ERROR(Reconnect());
    }
    ResultPtr r(send());
    const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
      const char* tuples = PQcmdTuples(r.get());
      changes_ = tuples && *tuples ? std::atoi(tuples) : 0;
      return r;
    }
    const std::string message = Trimmed(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_));
    if (PQstatus(conn_) != CONNECTION_OK) {
      NoteLost(message);
      // Outside a transaction nothing was done: run it again on a new connection.
      if (!in_transaction_ && tries == 0) continue;
      return Status::Unavailable("PostgreSQL " + std::string(what) + " failed: the connection was lost (" + message +
                                 ")");
    }
    const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    const std::string full = "PostgreSQL " + std::string(what) + " failed: " + message;
    if (state && Transient(state)) return Status::Unavailable(full);
    return Status::Internal(full);
  }
}

std::string PostgresDatabase::Describe() const {
  if (!conn_) return "PostgreSQL (not connected)";
  return std::string("PostgreSQL host=") + PQhost(conn_) + " port=" + PQport(conn_) + " dbname=" + PQdb(conn_);
}

Status PostgresDatabase::Exec(std::string_view sql) {
  const std::string text(sql);
  return Run([&] { return PQexec(conn_, text.c_str()); }, "exec of '" + text.substr(0, 60) + "'").status();
}

Result<Statement> PostgresDatabase::Prepare(std::string_view sql) {
  int params = 0;
  std::string text = ToDollarParameters(sql, &params);
  return Statement(std::make_unique<PostgresStatement>(this, std::move(text), params));
}

Status PostgresDatabase::Begin() {
  if (in_transaction_) return Status::Internal("BEGIN inside a transaction");
  WEFT_RETURN_IF_ERROR(Run([&] { return PQexec(conn_, "BEGIN"); }, "BEGIN").status());
  in_transaction_ = true;
  return Status::Ok();
}

Status PostgresDatabase::Commit() {
  // After a failed statement PostgreSQL has aborted the whole transaction;
  // its COMMIT would only roll back.
  if (conn_ && PQtransactionStatus(conn_) == PQTRANS_INERROR)
    return Status::Internal("the transaction was aborted by an earlier failed statement");
  WEFT_RETURN_IF_ERROR(Run([&] { return PQexec(conn_, "COMMIT"); }, "COMMIT").status());
  in_transaction_ = false;
  return Status::Ok();
}

Status PostgresDatabase::Rollback() {
  if (!in_transaction_) return Status::Ok();
  in_transaction_ = false;
  // A lost connection took the transaction with it: nothing to roll back.
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return Status::Ok();
  ResultPtr r(PQexec(conn_, "ROLLBACK"));
  if (PQresultStatus(r.get()) == PGRES_COMMAND_OK || PQstatus(conn_) != CONNECTION_OK) return Status::Ok();
  return Status::Internal("PostgreSQL ROLLBACK failed: " + Trimmed(PQresultErrorMessage(r.get())));
}

}  // namespace weft::store::sql
