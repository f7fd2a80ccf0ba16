#include "weft/server/leader/timeline_check.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <utility>

#include "weft/common/call_watchdog.hpp"
#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::server::leader {
namespace {

using json = nlohmann::json;

constexpr const char* kLog = "leader";
constexpr std::int64_t kRepeatMs = 60'000;  // a verdict that lasts is logged again this often

// Whether the server is in recovery, the WAL file it writes (its first eight
// hex digits are the timeline), its system identifier and its start time.
// pg_walfile_name fails in recovery: it is asked of a primary only.
constexpr const char* kIdentitySql =
    "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN '' "
    "ELSE pg_walfile_name(pg_current_wal_lsn()) END, "
    "(SELECT system_identifier FROM pg_control_system())::text, pg_postmaster_start_time()::text";
constexpr const char* kLeaderSql =
    "SELECT epoch, node, endpoints, EXTRACT(EPOCH FROM (now() - renewed_at)) * 1000 FROM weft_leader WHERE id = 1";

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> SplitCommas(const char* text) {
  std::vector<std::string> out;
  if (!text || !*text) return out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

// One statement on `conn`, given up after `deadline_ms`; nullptr with `error` set when it failed.
PGresult* Exec(PGconn* conn, const char* sql, std::int64_t deadline_ms, const std::string& peer, std::string* error) {
  PGresult* r = nullptr;
  {
    CallWatchdog::Guard watch(PQsocket(conn), deadline_ms, peer);
    r = PQexec(conn, sql);
  }
  if (PQresultStatus(r) == PGRES_TUPLES_OK) return r;
  *error = OneLine(r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
  PQclear(r);
  return nullptr;
}

// Fills `state` from kIdentitySql on `conn`.
Status ReadIdentity(PGconn* conn, std::int64_t deadline_ms, const std::string& peer, ServerState* state) {
  std::string error;
  PGresult* r = Exec(conn, kIdentitySql, deadline_ms, peer, &error);
  if (!r) return Status::Unavailable("cannot read the timeline of the " + peer + ": " + error);
  if (PQntuples(r) != 1) {
    PQclear(r);
    return Status::Internal("the " + peer + " did not say which timeline it is on");
  }
  state->in_recovery = std::string(PQgetvalue(r, 0, 0)) == "t";
  const std::string walfile = PQgetvalue(r, 0, 1);
  state->timeline = 0;
  if (!state->in_recovery && walfile.size() >= 8) state->timeline = std::stoll(walfile.substr(0, 8), nullptr, 16);
  state->system_id = PQgetvalue(r, 0, 2);
  state->started = PQgetvalue(r, 0, 3);
  PQclear(r);
  state->reached = true;
  return Status::Ok();
}

std::string Timeline(std::int64_t t) { return "timeline " + std::to_string(t); }

}  // namespace

Result<std::vector<ListedServer>> ListServers(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (!options) {
    std::string why = error ? OneLine(error) : "out of memory";
    PQfreemem(error);
    return Status::Invalid("[store] conninfo cannot be read: " + why);
  }
  std::vector<std::string> hosts, addrs, ports;
  for (PQconninfoOption* o = options; o->keyword; ++o) {
    const std::string key = o->keyword;
    if (key == "host") hosts = SplitCommas(o->val);
    if (key == "hostaddr") addrs = SplitCommas(o->val);
    if (key == "port") ports = SplitCommas(o->val);
  }
  PQconninfoFree(options);
  const std::size_t n = std::max(hosts.size(), addrs.size());
  std::vector<ListedServer> out;
  if (n < 2) return out;
  for (std::size_t i = 0; i < n; ++i) {
    ListedServer s;
    const std::string host = i < hosts.size() ? hosts[i] : "";
    const std::string addr = i < addrs.size() ? addrs[i] : "";
    const std::string port = ports.size() == n ? ports[i] : ports.size() == 1 ? ports[0] : "";
    if (!host.empty()) s.params.emplace_back("host", host);
    if (!addr.empty()) s.params.emplace_back("hostaddr", addr);
    if (!port.empty()) s.params.emplace_back("port", port);
    s.where = (host.empty() ? addr : host) + (port.empty() ? "" : ":" + port);
    out.push_back(std::move(s));
  }
  return out;
}

TimelineVerdict JudgeTimelines(const std::string& node, const ServerState& own, const std::vector<ServerState>& listed) {
  TimelineVerdict v;
  const ServerState* newer = nullptr;
  const ServerState* same = nullptr;
  std::vector<std::string> warnings;
  for (const ServerState& s : listed) {
    if (!s.reached || s.in_recovery) continue;
    if (s.system_id != own.system_id) {
      warnings.push_back("the PostgreSQL at " + s.where + ", in this weftd's conninfo, is another database cluster " +
                         "(system identifier " + s.system_id + ", not " + own.system_id +
                         "), not a standby made from the one this weftd uses (" + own.where +
                         "): list only the primary and its standbys");
      continue;
    }
    if (s.started == own.started && s.timeline == own.timeline) continue;  // the same server, maybe by another name
    if (s.timeline > own.timeline) {
      if (!newer || s.timeline > newer->timeline) newer = &s;
    } else if (s.timeline == own.timeline) {
      if (!same) same = &s;
    } else {
      warnings.push_back("the PostgreSQL at " + s.where + ", in this weftd's conninfo, is a primary on " +
                         Timeline(s.timeline) + ", older than " + Timeline(own.timeline) + " of the one at " +
                         own.where + " that this weftd uses: it is an old primary that a promotion superseded, " +
                         "with a copy of the data that diverged then, and a weftd that connects to it first would " +
                         "lead on that copy. Fence it (stop it and keep it stopped) or rebuild it as a standby of " +
                         own.where + " (pg_rewind, or a new pg_basebackup)");
    }
  }
  if (newer) {
    v.kind = TimelineVerdict::Kind::kSuperseded;
    v.newer_leader = newer->leader;
    v.message = "this weftd ('" + node + "') must not lead on the PostgreSQL at " + own.where + ": it is a primary on " +
                Timeline(own.timeline) + ", but the PostgreSQL at " + newer->where +
                ", also in this weftd's conninfo, is a primary of the same database cluster on " +
                Timeline(newer->timeline) + ": it was promoted after " + own.where +
                ", which is an old primary whose data diverged at that promotion (jobs' tasks would run again " +
                "from it). Fence " + own.where + " (stop it and keep it stopped) or rebuild it as a standby of " +
                newer->where + " (pg_rewind, or a new pg_basebackup); weftd then connects to " + newer->where +
                " by itself";
    return v;
  }
  if (same) {
    v.kind = TimelineVerdict::Kind::kSameTimeline;
    v.message = "the PostgreSQL at " + own.where + ", which this weftd ('" + node + "') uses, and the PostgreSQL at " +
                same->where + ", also in its conninfo, are both primaries of the same database cluster on " +
                Timeline(own.timeline) + ": weftd cannot tell which of them holds the right data (were two " +
                "standbys promoted?). This weftd does not take over as leader while both take writes (a leader " +
                "that already leads keeps leading): fence the wrong one (stop it, or rebuild it as a standby of " +
                "the other)";
    return v;
  }
  for (const std::string& w : warnings) v.message += (v.message.empty() ? "" : "; ") + w;
  return v;
}

Result<std::unique_ptr<TimelineCheck>> TimelineCheck::Start(TimelineCheckOptions options) {
  if (options.interval_ms <= 0) return std::unique_ptr<TimelineCheck>();
  WEFT_ASSIGN_OR_RETURN(std::vector<ListedServer> servers, ListServers(options.conninfo));
  if (servers.size() < 2 && options.record_path.empty()) return std::unique_ptr<TimelineCheck>();
  std::unique_ptr<TimelineCheck> check(new TimelineCheck(std::move(options), std::move(servers)));
  // With one server listed there is no other to ask: only the record counts.
  if (check->servers_.size() >= 2) check->thread_ = std::thread([raw = check.get()] { raw->Loop(); });
  return check;
}

TimelineCheck::TimelineCheck(TimelineCheckOptions options, std::vector<ListedServer> servers)
    : options_(std::move(options)), servers_(std::move(servers)) {}

TimelineCheck::~TimelineCheck() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status TimelineCheck::Connected(pg_conn* conn, std::int64_t deadline_ms, const std::string& peer) {
  ServerState own;
  own.where = std::string(PQhost(conn)) + ":" + PQport(conn);
  WEFT_RETURN_IF_ERROR(ReadIdentity(conn, deadline_ms, peer, &own));
  {
    std::lock_guard<std::mutex> lock(mu_);
    own_ = std::move(own);
    own_known_ = true;
    ++generation_;
    wanted_ = true;
    record_refusal_ = CheckRecord(own_);
    if (!record_refusal_.empty()) {
      WEFT_LOG(kError, kLog) << record_refusal_;
    }
  }
  wake_.notify_all();
  return Status::Ok();
}

Status TimelineCheck::MayLead() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!record_refusal_.empty()) return Status::Conflict(record_refusal_);
  if (servers_.size() < 2) return Status::Ok();
  if (judged_ != generation_)
    return Status::Unavailable("the timelines of the PostgreSQL servers in the conninfo are not checked yet");
  if (verdict_.kind == TimelineVerdict::Kind::kOk) return Status::Ok();
  return Status::Conflict(verdict_.message);
}

std::int64_t TimelineCheck::AskRound() {
  if (servers_.size() < 2) return 0;
  std::int64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = ++asked_;
    wanted_ = true;
  }
  wake_.notify_all();
  return ticket;
}

bool TimelineCheck::RoundDone(std::int64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_ >= ticket;
}

std::string TimelineCheck::Superseded() {
  std::lock_guard<std::mutex> lock(mu_);
  if (judged_ != generation_ || verdict_.kind != TimelineVerdict::Kind::kSuperseded) return "";
  return verdict_.message;
}

nlohmann::json TimelineCheck::newer_leader() {
  std::lock_guard<std::mutex> lock(mu_);
  if (judged_ != generation_ || verdict_.kind != TimelineVerdict::Kind::kSuperseded) return nullptr;
  return verdict_.newer_leader;
}

void TimelineCheck::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [&] { return stop_ || wanted_; });
    if (stop_) break;
    wanted_ = false;
    const std::int64_t generation = generation_;
    const std::int64_t asked = asked_;
    lock.unlock();
    std::vector<ServerState> states = Round();
    lock.lock();
    if (!own_known_ || stop_) continue;
    verdict_ = JudgeTimelines(options_.node, own_, states);
    for (const ServerState& state : states) {
      if (state.reached && !state.in_recovery && state.system_id == own_.system_id)
        Record(state.system_id, state.timeline, state.where);
    }
    // A round that began before the latest Connected judged another server.
    if (generation == generation_) {
      judged_ = generation;
      answered_ = asked;
    }
    Report(verdict_);
  }
}

std::vector<ServerState> TimelineCheck::Round() {
  std::vector<ServerState> states;
  const std::string connect_timeout = std::to_string(std::max<std::int64_t>(2, (options_.timeout_ms + 999) / 1000));
  for (const ListedServer& server : servers_) {
    ServerState state;
    state.where = server.where;
    // The server's own conninfo, then this server only, whatever it is.
    std::vector<const char*> keys = {"dbname"};
    std::vector<const char*> values = {options_.conninfo.c_str()};
    for (const auto& [key, value] : server.params) {
      keys.push_back(key.c_str());
      values.push_back(value.c_str());
    }
    for (const auto& [key, value] : {std::pair{"target_session_attrs", "any"},
                                     std::pair{"fallback_application_name", "weftd timeline check"}}) {
      keys.push_back(key);
      values.push_back(value);
    }
    keys.push_back("connect_timeout");
    values.push_back(connect_timeout.c_str());
    keys.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* conn = PQconnectdbParams(keys.data(), values.data(), 1);
    const std::string peer = "PostgreSQL at " + server.where;
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
      state.error = conn ? OneLine(PQerrorMessage(conn)) : "out of memory";
    } else if (Status s = ReadIdentity(conn, options_.timeout_ms, peer, &state); !s.ok()) {
      state.error = s.message();
    } else if (!state.in_recovery) {
      // Where clients should go, should this one be the newer primary.
      std::string error;
      if (PGresult* r = Exec(conn, kLeaderSql, options_.timeout_ms, peer, &error)) {
        if (PQntuples(r) == 1 && std::string(PQgetvalue(r, 0, 1)) != "") {
          json endpoints = json::parse(PQgetvalue(r, 0, 2), nullptr, false);
          state.leader = {{"epoch", std::stoll(PQgetvalue(r, 0, 0))},
                          {"node", PQgetvalue(r, 0, 1)},
                          {"endpoints", endpoints.is_object() ? endpoints : json::object()},
                          {"renewed_ms_ago", static_cast<std::int64_t>(std::stod(PQgetvalue(r, 0, 3)))}};
        }
        PQclear(r);
      }
    }
    if (conn) PQfinish(conn);
    states.push_back(std::move(state));
  }
  return states;
}

void TimelineCheck::Report(const TimelineVerdict& verdict) {
  const std::int64_t now = SteadyMs();
  if (verdict.message == reported_ && (verdict.message.empty() || now - reported_ms_ < kRepeatMs)) return;
  if (verdict.message.empty()) {
    WEFT_LOG(kInfo, kLog) << "the PostgreSQL servers in the conninfo no longer disagree: no other primary than "
                          << own_.where << " (" << Timeline(own_.timeline) << ") answers";
  } else {
    WEFT_LOG(kError, kLog) << verdict.message;
  }
  reported_ = verdict.message;
  reported_ms_ = now;
}

std::string TimelineCheck::CheckRecord(const ServerState& own) {
  if (options_.record_path.empty()) return "";
  std::ifstream in(options_.record_path);
  const json recorded = in ? json::parse(in, nullptr, false) : json();
  if (recorded.is_object() && recorded.value("system_identifier", std::string()) == own.system_id &&
      recorded.value("timeline", std::int64_t{0}) > own.timeline && !own.in_recovery) {
    const std::int64_t timeline = recorded.value("timeline", std::int64_t{0});
    return "this weftd ('" + options_.node + "') must not lead on the PostgreSQL at " + own.where +
           ": it is a primary on " + Timeline(own.timeline) + ", but this weftd saw the same database cluster " +
           "(system identifier " + own.system_id + ") on " + Timeline(timeline) + " at " +
           recorded.value("where", std::string("?")) + " (" + recorded.value("seen_at", std::string("?")) +
           ", recorded in " + options_.record_path + "): " + own.where +
           " is an old primary that a promotion superseded, whose data diverged then (jobs' tasks would run again "
           "from it). Fence it (stop it and keep it stopped) or rebuild it as a standby of the promoted server "
           "(pg_rewind, or a new pg_basebackup), and have [store] conninfo name the promoted server. Only to go back "
           "to this copy of the data on purpose, delete " +
           options_.record_path;
  }
  if (!own.in_recovery) {
    if (recorded.is_object() && recorded.value("system_identifier", std::string()) != own.system_id) {
      WEFT_LOG(kInfo, kLog) << "the PostgreSQL at " << own.where << " is another database cluster (system identifier "
                            << own.system_id << ") than the one " << options_.record_path
                            << " recorded: recording its timeline from now on";
    }
    Record(own.system_id, own.timeline, own.where);
  }
  return "";
}

void TimelineCheck::Record(const std::string& system_id, std::int64_t timeline, const std::string& where) {
  if (options_.record_path.empty()) return;
  std::ifstream in(options_.record_path);
  const json recorded = in ? json::parse(in, nullptr, false) : json();
  in.close();
  if (recorded.is_object() && recorded.value("system_identifier", std::string()) == system_id &&
      recorded.value("timeline", std::int64_t{0}) >= timeline)
    return;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char seen_at[32];
  std::strftime(seen_at, sizeof seen_at, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const json record = {{"system_identifier", system_id}, {"timeline", timeline}, {"where", where}, {"seen_at", seen_at}};
  // Written whole, then renamed: a crash leaves the old record or the new one.
  const std::string tmp = options_.record_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << record.dump() << "\n";
    if (!out) {
      WEFT_LOG(kWarn, kLog) << "cannot write " << tmp << ": the highest PostgreSQL timeline seen is not recorded";
      return;
    }
  }
  if (std::rename(tmp.c_str(), options_.record_path.c_str()) != 0) {
    WEFT_LOG(kWarn, kLog) << "cannot rename " << tmp << " to " << options_.record_path
                          << ": the highest PostgreSQL timeline seen is not recorded";
  }
}

}  // namespace weft::server::leader
