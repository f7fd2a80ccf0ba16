#include "weft/server/leader/leadership.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "weft/common/call_watchdog.hpp"
#include "weft/common/log.hpp"
#include "weft/common/text.hpp"
#include "weft/common/wire.hpp"
#include "weft/server/store/postgres.hpp"

namespace weft::server::leader {
namespace {

using json = nlohmann::json;

constexpr const char* kLog = "leader";
// The advisory lock's two keys: 'weft' and 1 (the leader); 0 guards making the tables.
constexpr const char* kLockArgs = "2003199604, 1";
constexpr const char* kSetupLock = "SELECT pg_advisory_xact_lock(2003199604, 0)";

// One result, cleared when it goes out of scope.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  ~PgResult() { PQclear(r_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return r_; }
  int rows() const { return PQntuples(r_); }
  std::string text(int row, int col) const { return PQgetvalue(r_, row, col); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::int64_t number(int row, int col) const {
    return null(row, col) ? 0 : static_cast<std::int64_t>(std::stod(PQgetvalue(r_, row, col)));
  }

 private:
  PGresult* r_;
};

json ParseEndpoints(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

}  // namespace

struct Leadership::Conn {
  PGconn* pg = nullptr;
  // A call unanswered for this long (a stopped or frozen server) shuts the
  // socket down: the call fails and the next tick connects again.
  std::int64_t deadline_ms = 0;
  std::string peer = "PostgreSQL";
  ~Conn() {
    if (pg) PQfinish(pg);
  }

  // Runs one statement with text parameters; an error names what failed.
  Result<std::unique_ptr<PgResult>> Exec(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* raw = nullptr;
    {
      CallWatchdog::Guard watch(PQsocket(pg), deadline_ms, peer);
      raw = PQexecParams(pg, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
    }
    auto r = std::make_unique<PgResult>(raw);
    const ExecStatusType st = PQresultStatus(r->get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      // A connection the server dropped may leave the result without a message.
      std::string why = OneLine(PQresultErrorMessage(r->get()));
      if (why.empty()) why = OneLine(PQerrorMessage(pg));
      if (why.empty()) why = "the connection was lost";
      return Status::Unavailable("the leader election's connection to " + peer + " failed: " + why);
    }
    return r;
  }
  bool ok() const { return pg && PQstatus(pg) == CONNECTION_OK; }
};

Leadership::Leadership(LeaderOptions options) : options_(std::move(options)) {
  options_.poll_ms = std::clamp<std::int64_t>(options_.poll_ms, 10, std::max<std::int64_t>(10, options_.lease_ms / 3));
}

Leadership::~Leadership() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

Result<std::unique_ptr<Leadership>> Leadership::Open(LeaderOptions options) {
  std::unique_ptr<Leadership> l(new Leadership(std::move(options)));
  WEFT_ASSIGN_OR_RETURN(l->timeline_, TimelineCheck::Start({.conninfo = l->options_.conninfo,
                                                            .node = l->options_.node,
                                                            .interval_ms = l->options_.timeline_check_ms,
                                                            .timeout_ms = 2000,
                                                            .record_path = l->options_.timeline_record}));
  WEFT_RETURN_IF_ERROR(l->Connect());
  WEFT_RETURN_IF_ERROR(l->Setup());
  WEFT_RETURN_IF_ERROR(l->CheckKeys());
  WEFT_RETURN_IF_ERROR(l->ClaimNode());
  l->renewer_ = std::thread([raw = l.get()] { raw->RenewLoop(); });
  return l;
}

const char* Leadership::FenceSql() { return "SELECT epoch FROM weft_leader WHERE id = 1 FOR SHARE"; }

Status Leadership::CheckFence(std::int64_t epoch_in_force) {
  if (leader_ && epoch_in_force == epoch_.load()) return Status::Ok();
  // The epoch is still this weftd's, but it gave up the leadership (its election
  // connection ended, a renewal failed): no other weftd has taken over yet.
  const std::string why =
      epoch_in_force == epoch_.load()
          ? "this weftd is no longer the leader (epoch " + std::to_string(epoch_in_force) +
                ", no other weftd has taken over yet) and may not write"
          : "another weftd took over as leader (epoch " + std::to_string(epoch_in_force) + ", this one had " +
                std::to_string(epoch_.load()) + "); this weftd may not write";
  if (leader_) Lose(why);
  return Status::Unavailable(why);
}

void Leadership::Lose(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  LoseLocked(why);
}

void Leadership::LoseLocked(const std::string& why) {
  if (!leader_) return;
  WEFT_LOG(kWarn, kLog) << "'" << options_.node << "' is no longer the leader: " << why;
  leader_ = false;
  // The session lock may still be held by this connection: dropping it lets
  // the next leader take over at once instead of after the lease.
  conn_.reset();
}

std::int64_t Leadership::ConnectTimeoutS() const {
  // Unless the connection string says otherwise, a server that does not
  // answer is given up on within the lease (libpq counts whole seconds, 2 at least).
  return std::max<std::int64_t>(2, (std::min(options_.lease_ms, options_.connect_timeout_ms) + 999) / 1000);
}

Status Leadership::Connect() {
  connecting_.reset();
  return Adopt(store::sql::ConnectPostgres(options_.conninfo, ConnectTimeoutS(), options_.lease_ms,
                                           "weftd leader election"));
}

Status Leadership::Reconnect() {
  conn_.reset();
  if (!connecting_)
    connecting_ = std::make_unique<store::sql::PendingConnect>(options_.conninfo, ConnectTimeoutS(), options_.lease_ms,
                                                               "weftd leader election");
  if (connecting_->Wait(std::max<std::int64_t>(0, store::sql::PendingConnect::kMomentMs - connecting_->ElapsedMs()))) {
    pg_conn* made = connecting_->Take();
    connecting_.reset();
    return Adopt(made);
  }
  // A server that accepted the connection and has not answered: the attempt
  // goes on on its thread, and this weftd answers meanwhile, saying so.
  const std::string pending = peer_ + " has not answered a new connection for " +
                              store::sql::TenthsOfSeconds(connecting_->ElapsedMs()) + " (weftd gives up on it after " +
                              std::to_string(connecting_->connect_timeout_s()) + " s)";
  connect_error_ = "cannot connect to PostgreSQL for the leader election: " +
                   (last_failure_.empty() ? pending : last_failure_ + "; " + pending);
  return Status::Unavailable(connect_error_);
}

Status Leadership::Adopt(pg_conn* made) {
  // A lock held on a connection that ended went with it.
  holding_lock_ = false;
  round_ticket_ = 0;
  conn_ = std::make_unique<Conn>();
  conn_->pg = made;
  if (!conn_->ok()) {
    last_failure_ = store::sql::ConnectFailure(conn_->pg);
    conn_.reset();
    connect_error_ = "cannot connect to PostgreSQL for the leader election: " + last_failure_;
    return Status::Unavailable(connect_error_);
  }
  last_failure_.clear();
  connect_error_.clear();
  // CREATE TABLE IF NOT EXISTS says NOTICE on every start: not worth a line on stderr.
  PQsetNoticeProcessor(conn_->pg, [](void*, const char*) {}, nullptr);
  conn_->peer = store::sql::PostgresPeer(conn_->pg);
  peer_ = conn_->peer;
  // statement_timeout (below) ends a statement that waits on the server in
  // half the lease; a server that does not answer at all is given the lease.
  conn_->deadline_ms = std::max<std::int64_t>(500, options_.lease_ms);
  // A statement that hangs (a lock held by a stopped process) must not stall the reactor for long.
  const std::string limit = std::to_string(std::max<std::int64_t>(100, options_.lease_ms / 2));
  Result<std::unique_ptr<PgResult>> r = conn_->Exec("SET statement_timeout = " + limit);
  if (!r.ok()) {
    conn_.reset();
    return r.status();
  }
  // Which server this is, for the timeline check (it may have been superseded).
  if (timeline_) {
    if (Status s = timeline_->Connected(conn_->pg, conn_->deadline_ms, conn_->peer); !s.ok()) {
      conn_.reset();
      return s;
    }
  }
  return Status::Ok();
}

Status Leadership::Setup() {
  // Several weftd may start at once: the tables are made under a lock of their own.
  static constexpr const char* kStatements[] = {
      "BEGIN",
      kSetupLock,
      "CREATE TABLE IF NOT EXISTS weft_leader (id integer PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, "
      "node text NOT NULL, endpoints text NOT NULL, lock_pid integer NOT NULL, since timestamptz NOT NULL, "
      "renewed_at timestamptz NOT NULL)",
      "INSERT INTO weft_leader VALUES (1, 0, '', '{}', 0, now(), now()) ON CONFLICT (id) DO NOTHING",
      "CREATE TABLE IF NOT EXISTS weft_members (node text PRIMARY KEY, endpoints text NOT NULL, "
      "seen_at timestamptz NOT NULL)",
      "ALTER TABLE weft_members ADD COLUMN IF NOT EXISTS superadmin_key text NOT NULL DEFAULT ''",
      "ALTER TABLE weft_members ADD COLUMN IF NOT EXISTS session_pid integer NOT NULL DEFAULT 0",
      "CREATE TABLE IF NOT EXISTS weft_keys (id integer PRIMARY KEY CHECK (id = 1), server_key text NOT NULL, "
      "secrets_digest text NOT NULL, node text NOT NULL, recorded_at timestamptz NOT NULL)",
      "COMMIT",
  };
  for (const char* sql : kStatements) {
    Result<std::unique_ptr<PgResult>> r = conn_->Exec(sql);
    if (!r.ok()) {
      (void)conn_->Exec("ROLLBACK");
      return r.status().WithContext("cannot make the leader election's tables");
    }
  }
  return Status::Ok();
}

Status Leadership::CheckKeys() {
  if (options_.secrets_digest.empty()) return Status::Ok();
  WEFT_RETURN_IF_ERROR(conn_
                           ->Exec("INSERT INTO weft_keys VALUES (1, $1, $2, $3, now()) ON CONFLICT (id) DO NOTHING",
                                  {options_.server_key, options_.secrets_digest, options_.node})
                           .status()
                           .WithContext("cannot record this weftd's keys"));
  WEFT_ASSIGN_OR_RETURN(auto r, conn_->Exec("SELECT server_key, secrets_digest, node, recorded_at::text "
                                            "FROM weft_keys WHERE id = 1"));
  if (r->rows() != 1) return Status::Internal("the record of the weftd keys is missing");
  const std::string server_key = r->text(0, 0);
  const std::string secrets = r->text(0, 1);
  const bool same_server_key = server_key.empty() || options_.server_key.empty() || server_key == options_.server_key;
  if (same_server_key && secrets == options_.secrets_digest) return Status::Ok();
  std::string differ;
  if (!same_server_key) differ = "its CURVE key pair (keys/server.json, public key " + options_.server_key + ")";
  if (secrets != options_.secrets_digest) differ += (differ.empty() ? "" : " and ") + std::string("its keys/secrets.key");
  return Status::Conflict(
      "this weftd ('" + options_.node + "') cannot join the weftd on this database: " + differ +
      " differ from the keys that every weftd here must share, recorded by '" + r->text(0, 2) + "' at " +
      r->text(0, 3) + (server_key.empty() ? "" : " (server public key " + server_key + ")") +
      ". Hosts and clients trust that server key and sealed secrets open only with that secrets.key, so a "
      "follower with other keys could not serve once it leads. Stop this weftd, copy the first weftd's keys/ "
      "directory (server.json and secrets.key) into this one's data directory, replacing its keys/, and start it "
      "again. --new-keys makes keys for this weftd only and is refused here too: to give every weftd new keys, "
      "stop them all, DELETE FROM weft_keys, start one with --new-keys and copy its keys/ to the others");
}

Status Leadership::ClaimNode() {
  // Under the lock that guards the tables, so that of two weftd started at
  // once with one name the second sees the first's row. A row is another
  // weftd's while the election session it names is open and it was seen within
  // three leases (as View counts a follower live). The session of a weftd that
  // just stopped may take a moment to end: it is given one lease.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.lease_ms);
  for (;;) {
    Result<std::unique_ptr<PgResult>> r = conn_->Exec("BEGIN");
    if (r.ok()) r = conn_->Exec(kSetupLock);
    if (r.ok())
      r = conn_->Exec(
          "SELECT m.endpoints, EXTRACT(EPOCH FROM (now() - m.seen_at)) * 1000 FROM weft_members m "
          "WHERE m.node = $1 AND m.seen_at > now() - $2::float8 * interval '1 millisecond' "
          "AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.session_pid AND a.pid <> pg_backend_pid())",
          {options_.node, std::to_string(3 * options_.lease_ms)});
    if (r.ok() && (*r)->rows() == 0) {
      Status s = Announce();
      if (s.ok()) s = conn_->Exec("COMMIT").status();
      if (!s.ok()) (void)conn_->Exec("ROLLBACK");
      return s.WithContext("cannot record this weftd among the others");
    }
    (void)conn_->Exec("ROLLBACK");
    if (!r.ok()) return r.status().WithContext("cannot record this weftd among the others");
    if (std::chrono::steady_clock::now() >= until) {
      const json endpoints = ParseEndpoints((*r)->text(0, 0));
      const std::string api = endpoints.value("api", std::string());
      return Status::Conflict("another weftd runs as node '" + options_.node + "' on this database" +
                              (api.empty() ? std::string() : " (api endpoint " + api + ")") + ", seen " +
                              std::to_string((*r)->number(0, 1)) +
                              " ms ago: every weftd on one database needs a name of its own. Set [leader] node in "
                              "this weftd's weftd.toml to another name, or stop the other weftd first");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status Leadership::Announce() {
  WEFT_RETURN_IF_ERROR(conn_
                           ->Exec("INSERT INTO weft_members (node, endpoints, seen_at, superadmin_key, session_pid) "
                                  "VALUES ($1, $2, now(), $3, pg_backend_pid()) ON CONFLICT (node) DO UPDATE "
                                  "SET endpoints = excluded.endpoints, seen_at = excluded.seen_at, "
                                  "superadmin_key = excluded.superadmin_key, session_pid = excluded.session_pid",
                                  {options_.node, wire::Dump(options_.endpoints), options_.superadmin_key})
                           .status());
  return Status::Ok();
}

Status Leadership::ReadLeader() {
  WEFT_ASSIGN_OR_RETURN(
      auto r, conn_->Exec("SELECT epoch, node, endpoints, EXTRACT(EPOCH FROM (now() - renewed_at)) * 1000, lock_pid "
                          "FROM weft_leader WHERE id = 1"));
  if (r->rows() != 1) return Status::Internal("the leader election's row is missing");
  known_leader_ = {{"epoch", r->number(0, 0)},
                   {"node", r->text(0, 1)},
                   {"endpoints", ParseEndpoints(r->text(0, 2))},
                   {"renewed_ms_ago", r->number(0, 3)}};
  known_lock_pid_ = r->number(0, 4);
  // On a superseded server the row is stale: the newer primary's names the leader clients should go to.
  if (timeline_) {
    if (json newer = timeline_->newer_leader(); !newer.is_null()) known_leader_ = std::move(newer);
  }
  return Status::Ok();
}

Result<Leadership::Change> Leadership::Tick(std::int64_t now_ms) {
  next_tick_ms_ = now_ms + options_.poll_ms;
  std::lock_guard<std::mutex> lock(mu_);
  if (!conn_ || !conn_->ok()) {
    if (leader_) {
      LoseLocked("its connection to PostgreSQL, which held the leader's lock, ended");
      return Change::kLost;
    }
    WEFT_RETURN_IF_ERROR(Reconnect());
  }
  if (now_ms >= next_announce_ms_) {
    WEFT_RETURN_IF_ERROR(Announce());
    next_announce_ms_ = now_ms + std::max<std::int64_t>(options_.poll_ms, options_.lease_ms / 3);
  }
  // The renewing thread keeps a leader's lease.
  if (leader_) return Change::kNone;
  Result<Change> c = TryTakeOver();
  if (c.ok() && *c == Change::kBecameLeader) wake_.notify_all();
  return c;
}

void Leadership::RenewLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Renewing costs a write: a third of the lease is often enough.
    wake_.wait_for(lock, std::chrono::milliseconds(std::max<std::int64_t>(10, options_.lease_ms / 3)));
    if (stop_ || !leader_) continue;
    Renew();
  }
}

void Leadership::Renew() {
  if (!conn_ || !conn_->ok()) {
    LoseLocked("its connection to PostgreSQL, which held the leader's lock, ended");
    return;
  }
  Result<std::unique_ptr<PgResult>> r =
      conn_->Exec("UPDATE weft_leader SET renewed_at = now() WHERE id = 1 AND epoch = $1 RETURNING epoch",
                  {std::to_string(epoch_.load())});
  if (!r.ok()) {
    LoseLocked("it could not renew its lease (" + r.status().message() + ")");
  } else if ((*r)->rows() != 1) {
    LoseLocked("the leader's row has another epoch now");
  } else if (timeline_) {
    if (std::string why = timeline_->Superseded(); !why.empty()) LoseLocked(why);
  }
}

Result<Leadership::Change> Leadership::TryTakeOver() {
  // Not on a server that a promotion superseded, nor before that was checked (the check logs why).
  if (timeline_ && !timeline_->MayLead().ok()) {
    if (holding_lock_) {
      // A round asked for at the takeover found this server superseded: the lock is the next weftd's.
      holding_lock_ = false;
      round_ticket_ = 0;
      WEFT_RETURN_IF_ERROR(conn_->Exec(std::string("SELECT pg_advisory_unlock(") + kLockArgs + ")").status());
    }
    WEFT_RETURN_IF_ERROR(ReadLeader());
    return Change::kNone;
  }
  if (!holding_lock_) {
    WEFT_ASSIGN_OR_RETURN(auto lock, conn_->Exec(std::string("SELECT pg_try_advisory_lock(") + kLockArgs + ")"));
    if (lock->rows() != 1 || lock->text(0, 0) != "t") {
      WEFT_RETURN_IF_ERROR(ReadLeader());
      if (known_leader_.value("renewed_ms_ago", std::int64_t{0}) > options_.lease_ms)
        WEFT_RETURN_IF_ERROR(EndStaleLeader());
      return Change::kNone;
    }
    holding_lock_ = true;
    // The last round of the timeline check may be from before a promotion
    // (they run every timeline_check_ms): the takeover waits, holding the
    // lock, for one that starts now (a few milliseconds when every listed
    // server answers), so that it never leads on an old primary it could
    // have told from the promoted one.
    if (timeline_) round_ticket_ = timeline_->AskRound();
  }
  if (round_ticket_ != 0 && !timeline_->RoundDone(round_ticket_)) return Change::kNone;
  // The lock is ours: no other weftd can be taking over. Transactions of a
  // stale leader that hold the row are ended; then the new epoch.
  static constexpr const char* kEndStaleWriters =
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation = 'weft_leader'::regclass "
      "AND mode = 'RowShareLock' AND pid <> pg_backend_pid()";
  Result<std::unique_ptr<PgResult>> r = conn_->Exec("BEGIN");
  if (r.ok()) r = conn_->Exec(kEndStaleWriters);
  if (r.ok())
    r = conn_->Exec(
        "UPDATE weft_leader SET epoch = epoch + 1, node = $1, endpoints = $2, lock_pid = pg_backend_pid(), "
        "since = now(), renewed_at = now() WHERE id = 1 RETURNING epoch",
        {options_.node, wire::Dump(options_.endpoints)});
  std::int64_t epoch = 0;
  if (r.ok()) epoch = (*r)->number(0, 0);
  if (r.ok()) r = conn_->Exec("COMMIT");
  holding_lock_ = false;
  round_ticket_ = 0;
  if (!r.ok()) {
    (void)conn_->Exec("ROLLBACK");
    // Let another weftd try: this one may be the slow one.
    (void)conn_->Exec(std::string("SELECT pg_advisory_unlock_all()"));
    return r.status().WithContext("cannot take over as leader");
  }
  leader_ = true;
  epoch_ = epoch;
  known_leader_ = {{"epoch", epoch}, {"node", options_.node}, {"endpoints", options_.endpoints}, {"renewed_ms_ago", 0}};
  WEFT_LOG(kInfo, kLog) << "'" << options_.node << "' is the leader now (epoch " << epoch << ")";
  return Change::kBecameLeader;
}

Status Leadership::EndStaleLeader() {
  // Only the stale leader's own session is ended: the one whose pid the row
  // recorded when it took over. The lock may be held by another weftd that has
  // just taken it and not written the row yet; ending that one would fail its
  // takeover. A holder that is not the recorded one is ended only when it has
  // done nothing for two leases (a weftd stopped between taking the lock and
  // writing the row), since a takeover writes the row at once.
  const std::int64_t pid = known_lock_pid_;
  WEFT_ASSIGN_OR_RETURN(
      auto r, conn_->Exec("WITH holder AS MATERIALIZED (SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a "
                          "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = 2003199604 AND l.objid = 1 "
                          "AND l.objsubid = 2 AND l.granted AND l.pid <> pg_backend_pid() "
                          "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                          "AND (l.pid = $1 OR a.state_change < now() - $2::float8 * interval '1 millisecond')) "
                          "SELECT pid FROM holder WHERE pg_terminate_backend(pid)",
                          {std::to_string(pid), std::to_string(2 * options_.lease_ms)}));
  if (r->rows() > 0) {
    WEFT_LOG(kWarn, kLog) << "the leader '" << known_leader_.value("node", std::string())
                          << "' has not renewed its lease for " << known_leader_.value("renewed_ms_ago", std::int64_t{0})
                          << " ms: ended its database session (pid " << r->text(0, 0)
                          << ") so that another weftd can take over";
  }
  return Status::Ok();
}

Result<nlohmann::json> Leadership::View() {
  std::lock_guard<std::mutex> lock(mu_);
  // While the database cannot be reached, server.status says so at once: Tick
  // tries again every poll, and a second attempt here (a connect_timeout of its
  // own) would keep the reply past a client's timeout.
  if ((!conn_ || !conn_->ok()) && !connect_error_.empty())
    return Status::Unavailable(connect_error_ + " (this weftd tries again every " + std::to_string(options_.poll_ms) +
                               " ms)");
  if (!conn_ || !conn_->ok()) WEFT_RETURN_IF_ERROR(Reconnect());
  WEFT_RETURN_IF_ERROR(ReadLeader());
  WEFT_ASSIGN_OR_RETURN(auto r, conn_->Exec("SELECT node, endpoints, EXTRACT(EPOCH FROM (now() - seen_at)) * 1000 "
                                            "FROM weft_members ORDER BY node"));
  const std::string leader_node = known_leader_.value("node", std::string());
  json followers = json::array();
  for (int i = 0; i < r->rows(); ++i) {
    if (r->text(i, 0) == leader_node) continue;
    const std::int64_t age = r->number(i, 2);
    followers.push_back({{"node", r->text(i, 0)},
                         {"endpoints", ParseEndpoints(r->text(i, 1))},
                         {"seen_ms_ago", age},
                         {"live", age <= 3 * options_.lease_ms}});
  }
  return json{{"self", options_.node},
              {"role", leader_ ? "leader" : "follower"},
              {"epoch", known_leader_.value("epoch", std::int64_t{0})},
              {"leader", known_leader_},
              {"followers", followers},
              {"lease_ms", options_.lease_ms}};
}

std::string Leadership::ConnectError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_ && conn_->ok() ? std::string() : connect_error_;
}

Result<std::vector<std::string>> Leadership::SuperadminKeys() {
  std::lock_guard<std::mutex> lock(mu_);
  // Not connected again here: a leader's connection holds its lock, and Tick notices its loss.
  if (!conn_ || !conn_->ok()) return Status::Unavailable("the leader election's database connection is closed");
  WEFT_ASSIGN_OR_RETURN(auto r, conn_->Exec("SELECT DISTINCT superadmin_key FROM weft_members "
                                            "WHERE superadmin_key <> '' ORDER BY 1"));
  std::vector<std::string> keys;
  for (int i = 0; i < r->rows(); ++i) keys.push_back(r->text(i, 0));
  return keys;
}

}  // namespace weft::server::leader
