// weft::server::leader::TimelineCheck: a weftd must not lead on a PostgreSQL
// that a promotion has superseded (docs/failover.md, "After a promotion").
//
// When the standby is promoted (pg_promote) it starts a new timeline: the
// timeline ID goes up by one, and every server that follows it is on that
// timeline too. An old primary that comes back as a primary stays on its old
// timeline and holds a copy of the data that diverged at the promotion. A
// weftd whose conninfo lists both (host=db1,db2 target_session_attrs=read-write)
// connects to the first that takes writes, which may be that old primary.
//
// So, when the conninfo names several servers, a thread of its own connects
// to each of them (target_session_attrs=any, a short timeout) every
// interval_ms and reads whether it is in recovery, its timeline, its system
// identifier (the same on a primary and every standby made from it) and when
// it started. The leader election compares that with the server its own
// connection is on (Connected):
//  * another primary of the same system on a HIGHER timeline: the server this
//    weftd writes to was superseded. It does not take over (MayLead), and a
//    leader steps down (Superseded). Both say so in an ERROR line.
//  * another primary on the SAME timeline: weftd cannot tell which copy is the
//    right one. It does not take over, but a leader that already leads keeps
//    leading: it has written there all along, and no other weftd would take
//    over either, so stepping down would only stop the service.
//  * another primary on a LOWER timeline: that one is the old primary; the
//    weftd leads as usual and logs an ERROR that it must be fenced.
//  * a server that does not answer, or of another system, is not judged.
// Each weftd also records in its data directory the highest timeline it has
// seen of its database cluster (on its own connection, or another listed
// primary's), and refuses to take over on a server of that cluster on a lower
// one: that catches an old primary even with one server in the conninfo, or
// with the promoted one out of reach, once this weftd has seen the promoted one.
// Reading the timeline needs no privilege: pg_walfile_name(pg_current_wal_lsn())
// (whose first eight hex digits are the timeline ID the server writes on),
// pg_control_system() and pg_postmaster_start_time() are open to every role.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

struct pg_conn;

namespace weft::server::leader {

// What one PostgreSQL server said about itself.
struct ServerState {
  std::string where = {};  // "db1:5432", as listed in the conninfo
  bool reached = false;
  std::string error = {};  // why it was not reached
  bool in_recovery = false;
  std::int64_t timeline = 0;    // of a primary; 0 in recovery
  std::string system_id = {};   // pg_control_system().system_identifier
  std::string started = {};     // pg_postmaster_start_time(): tells two servers apart
  nlohmann::json leader = {};   // its weft_leader row ({"node","epoch","endpoints"}), or null
};

struct TimelineVerdict {
  enum class Kind {
    kOk,           // no other primary of this system on a timeline as high as this one's
    kSuperseded,   // another primary is on a higher timeline
    kSameTimeline  // another primary is on the same timeline
  };
  Kind kind = Kind::kOk;
  // kSuperseded, kSameTimeline: what is wrong and what to do. kOk: a warning
  // about an older primary or another system, or "".
  std::string message;
  nlohmann::json newer_leader;  // kSuperseded: the weft_leader row of the newer primary, or null
};

// The judgement, from the server this weftd's election connection is on
// (`own`) and what every listed server said (own included). `node` is this weftd's.
TimelineVerdict JudgeTimelines(const std::string& node, const ServerState& own, const std::vector<ServerState>& listed);

// The servers a conninfo (key=value or URI) names: one conninfo per host, each
// with target_session_attrs=any. Fewer than two: nothing to compare.
struct ListedServer {
  std::string where;                                       // host:port
  std::vector<std::pair<std::string, std::string>> params;  // libpq keywords, overriding the conninfo's
};
Result<std::vector<ListedServer>> ListServers(const std::string& conninfo);

struct TimelineCheckOptions {
  std::string conninfo;
  std::string node;
  std::int64_t interval_ms = 5000;  // how often every listed server is asked
  std::int64_t timeout_ms = 2000;   // to connect to one and get its answer
  // The file that keeps the highest timeline this weftd saw ("": none).
  std::string record_path = {};
};

class TimelineCheck {
 public:
  // nullptr when interval_ms is 0, or the conninfo names one server and there is no record_path.
  static Result<std::unique_ptr<TimelineCheck>> Start(TimelineCheckOptions options);
  ~TimelineCheck();
  TimelineCheck(const TimelineCheck&) = delete;
  TimelineCheck& operator=(const TimelineCheck&) = delete;

  // The election's connection was (re)made: reads which server it is on.
  // Judgements made before this no longer count. `deadline_ms` bounds the call.
  Status Connected(pg_conn* conn, std::int64_t deadline_ms, const std::string& peer);
  // Whether this weftd may take over on the server its connection is on: an
  // error says why not (logged here as an ERROR, once a minute at most); a
  // kUnavailable "not checked yet" while no round has run since Connected.
  Status MayLead();
  // Asks for a round now (a takeover's: the last one may predate a
  // promotion); RoundDone(ticket) says when one that started since has been
  // judged, and MayLead then says what it found. 0 with one server listed:
  // there is no round to wait for.
  std::int64_t AskRound();
  bool RoundDone(std::int64_t ticket);
  // For a leader: what makes it step down ("" when nothing): a newer primary.
  std::string Superseded();
  // The weft_leader row of the newer primary that superseded this weftd's
  // server (where clients should go), or null.
  nlohmann::json newer_leader();

 private:
  TimelineCheck(TimelineCheckOptions options, std::vector<ListedServer> servers);
  void Loop();
  std::vector<ServerState> Round();
  // Logs `verdict` when it is new, and once a minute while it lasts. Under mu_.
  void Report(const TimelineVerdict& verdict);
  // Compares `own` with the recorded timeline and records a higher one: what
  // forbids leading on it ("" when nothing). Under mu_.
  std::string CheckRecord(const ServerState& own);
  // Records `timeline` of cluster `system_id`, seen at `where`, when it is higher than the recorded one. Under mu_.
  void Record(const std::string& system_id, std::int64_t timeline, const std::string& where);

  TimelineCheckOptions options_;
  std::vector<ListedServer> servers_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool wanted_ = false;  // a round is asked for now
  ServerState own_;
  bool own_known_ = false;
  std::int64_t generation_ = 0;  // counts Connected calls
  std::int64_t judged_ = -1;     // the generation verdict_ was judged for (a round started after Connected)
  std::int64_t asked_ = 0;       // counts AskRound calls
  std::int64_t answered_ = 0;    // the last ask a judged round started after
  TimelineVerdict verdict_;
  std::string record_refusal_;  // CheckRecord's for the current connection
  std::string reported_;
  std::int64_t reported_ms_ = 0;
  std::thread thread_;
};

}  // namespace weft::server::leader
