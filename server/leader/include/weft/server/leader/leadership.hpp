// weft::server::leader::Leadership: which of several weftd sharing one
// PostgreSQL database is the leader (docs/failover.md).
//
// Each weftd keeps a connection of its own to the database for this, apart
// from the store's. The leader holds a session advisory lock on it and the
// row of weft_leader names it, with an epoch that every takeover increments.
// Every write transaction of the store first reads that epoch FOR SHARE
// (FenceSql) and gives up when it is not the one this weftd took over with,
// so a leader that was paused or cut off can never commit once another one
// has taken over: the takeover's UPDATE of the row waits for any transaction
// that holds it, and a takeover first ends the connections of such stale
// transactions.
//
// The lock alone does not notice a leader that is stopped (SIGSTOP, a frozen
// machine) while its connection stays open, so the leader also renews the
// row's renewed_at; a follower that sees it older than the lease ends the
// old leader's lock connection (only the session whose pid the row recorded
// when it took over, never another weftd's that has just taken the lock) and
// takes over on its next tick.
//
// Every weftd also keeps a row of its own in weft_members (its endpoints, when
// it was last seen), which server.status shows as the followers.
//
// The leader renews on a thread of its own, so that a long turn of the
// reactor (a big cluster.create) never lets the lease run out; everything
// else runs on the reactor's thread, between turns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"
#include "weft/server/leader/timeline_check.hpp"

namespace weft::store::sql {
class PendingConnect;
}

namespace weft::server::leader {

struct LeaderOptions {
  std::string conninfo;  // libpq connection string of the store's database
  std::string node;      // this weftd's name among the others (unique)
  // This weftd's endpoints as clients reach them: {"api":..,"provisioner":..,"events":..}.
  nlohmann::json endpoints = nlohmann::json::object();
  // A leader that has not renewed for this long is taken over.
  std::int64_t lease_ms = 3000;
  // How often a follower tries to take over, and a leader renews (a third of the lease at most).
  std::int64_t poll_ms = 250;
  // A new connection gives up on a server that has not answered for this
  // long, or for the lease when that is shorter ([store] connect_timeout_ms).
  std::int64_t connect_timeout_ms = 5000;
  // This weftd's keys: its CURVE public key ("" without CURVE) and the digest
  // of its keys/secrets.key. Every weftd on one database must have the same
  // ones (a follower serves with them once it leads): the first weftd records
  // them in weft_keys, and Open refuses to start one whose keys differ. An
  // empty digest checks nothing.
  std::string server_key;
  std::string secrets_digest;
  // The public key of this weftd's superadmin credential ("" without CURVE),
  // recorded with its row of weft_members: whichever weftd leads admits it.
  std::string superadmin_key;
  // How often every server the conninfo lists is asked for its timeline
  // (timeline_check.hpp); 0: never. Only with several servers listed.
  std::int64_t timeline_check_ms = 5000;
  // The file that keeps the highest timeline of the database this weftd saw ("": none).
  std::string timeline_record = {};
};

class Leadership {
 public:
  // Connects and makes the tables when they do not exist yet. Does not take over yet: Tick does.
  static Result<std::unique_ptr<Leadership>> Open(LeaderOptions options);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  enum class Change { kNone, kBecameLeader, kLost };
  // Renews (leader) or tries to take over (follower). kLost: this weftd is no
  // longer the leader and must stop serving writes at once. An error is only
  // logged by the caller: the connection is made again on the next tick.
  Result<Change> Tick(std::int64_t now_ms);
  // When Tick is next due.
  std::int64_t next_tick_ms() const { return next_tick_ms_; }

  bool leader() const { return leader_.load(); }
  std::int64_t epoch() const { return epoch_.load(); }
  const std::string& node() const { return options_.node; }
  // The leader as last seen: {"node":..,"epoch":..,"endpoints":{..}}; null before any is known.
  const nlohmann::json& known_leader() const { return known_leader_; }
  // Why the election cannot reach the database ("cannot connect to PostgreSQL
  // for the leader election: ..."); "" while it is connected, or has not tried yet.
  std::string ConnectError() const;

  // Marks the leadership lost (a write transaction found another epoch).
  void Lose(const std::string& why);

  // The first statement of every write transaction: one row with the epoch in force.
  static const char* FenceSql();
  // Whether `epoch_in_force` (what FenceSql returned) lets this weftd commit;
  // an error that says so when it does not, and the leadership is lost.
  Status CheckFence(std::int64_t epoch_in_force);

  // For server.status: {"leader":{..},"followers":[..],"epoch":N,"self":node,"role":..}.
  Result<nlohmann::json> View();
  // The superadmin keys of every weftd on the database (LeaderOptions::superadmin_key), this one's too.
  Result<std::vector<std::string>> SuperadminKeys();

 private:
  explicit Leadership(LeaderOptions options);
  // Connects on this thread (Open).
  Status Connect();
  // Goes on with the attempt to connect again, which runs on a thread of its
  // own (started here when none is under way): Ok once connected; UNAVAILABLE
  // while it lasts (saying since when the server has not answered) or when it failed.
  Status Reconnect();
  // Takes over the connection an attempt made.
  Status Adopt(pg_conn* made);
  std::int64_t ConnectTimeoutS() const;
  Status Setup();
  // Records this weftd's keys when none are yet; an error when they differ from the recorded ones.
  Status CheckKeys();
  // Records this weftd in weft_members; an error naming the other weftd when a live one has its name.
  Status ClaimNode();
  Status Announce();
  // The renewing thread: every third of the lease while this weftd leads.
  void RenewLoop();
  void Renew();
  void LoseLocked(const std::string& why);
  Result<Change> TryTakeOver();
  Status EndStaleLeader();
  Status ReadLeader();

  LeaderOptions options_;
  struct Conn;
  mutable std::mutex mu_;  // guards conn_ (the renewing thread and the reactor share it)
  std::unique_ptr<Conn> conn_;
  std::atomic<bool> leader_{false};
  std::atomic<std::int64_t> epoch_{0};
  std::int64_t next_tick_ms_ = 0;
  std::int64_t next_announce_ms_ = 0;
  nlohmann::json known_leader_;  // the reactor's only
  std::int64_t known_lock_pid_ = 0;  // the backend pid of the leader's lock session, as the row says
  // A follower that got the leader's lock and waits, holding it, for the
  // timeline check's round asked for then (round_ticket_; 0: none) before it takes over.
  bool holding_lock_ = false;
  std::int64_t round_ticket_ = 0;
  std::string connect_error_;  // why the last Connect failed; "" once one succeeded (guarded by mu_)
  std::string last_failure_;   // why the last attempt that ended failed, one line (guarded by mu_)
  std::string peer_ = "PostgreSQL";  // "PostgreSQL at HOST:PORT" of the last connection (guarded by mu_)
  // An attempt to connect again, under way on a thread of its own (guarded by mu_).
  std::unique_ptr<store::sql::PendingConnect> connecting_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread renewer_;
  // Refuses to lead on a PostgreSQL that a promotion superseded; null with one server listed.
  std::unique_ptr<TimelineCheck> timeline_;
};

}  // namespace weft::server::leader
