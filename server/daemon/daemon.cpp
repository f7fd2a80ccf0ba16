#include "weft/server/daemon/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <zmq.hpp>

#include "weft/common/dir_lock.hpp"
#include "weft/server/api/router.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/auth/auth_ops.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/server/jobs/cluster_ops.hpp"
#include "weft/server/daemon/api_front.hpp"
#include "weft/server/daemon/components.hpp"
#include "weft/server/daemon/group_commit.hpp"
#include "weft/server/daemon/held_takes.hpp"
#include "weft/server/daemon/pending.hpp"
#include "weft/server/daemon/ports.hpp"
#include "weft/server/daemon/rate_limits.hpp"
#include "weft/server/daemon/subscriptions.hpp"
#include "weft/server/daemon/transport.hpp"
#include "weft/server/leader/follower.hpp"
#include "weft/server/leader/leadership.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/digest.hpp"
#include "weft/common/log.hpp"
#include "weft/common/log_tally.hpp"
#include "weft/common/metrics_http.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {
namespace {

using api::Endpoint;
using json = nlohmann::json;

constexpr const char* kLog = "weftd";
// The longest the loop sleeps with no timer due: bounds how late a clock
// jump or a missed timer is noticed.
constexpr std::int64_t kMaxSleepMs = 1000;
// How often a busy reactor, which never sleeps in poll, looks for a signal.
constexpr std::int64_t kSignalCheckMs = 20;
// How long one turn may spend handling a batch's writes, and then serving
// held takes, before it commits what it has and answers: a read that arrives
// meanwhile waits for at most about this much (twice) plus a commit. The
// requests left over are handled first in the next turn. Wall time, not
// weftd's clock: it only paces the loop.
constexpr auto kTurnBudget = std::chrono::milliseconds(4);
// How often, at most, a turn looks at the api ROUTER for reads that arrived
// while it works: one that did ends the turn's writes, lease expiries and held
// takes early, so that it waits for about one request and a commit, not for
// the budgets (about 10 ms with the commit, several times that on a busy CPU).
constexpr auto kReadLookEvery = std::chrono::microseconds(100);
// The most api requests one such look takes off the socket.
constexpr std::size_t kReadLookMax = 8;
// How long after a turn starts requests that arrive meanwhile still join its
// commit (only those already there when the reactor looks; it never waits).
constexpr auto kJoinWindow = std::chrono::microseconds(100);
// Requests decoded but not yet handled, at most this many batches' worth:
// beyond it the loop stops receiving and ZeroMQ queues (and pushes back).
constexpr std::size_t kMaxInboxBatches = 2;
// How often the plugin types live hosts run are told to the api front (job.get's waiting_for_plugins).
constexpr std::int64_t kLivePluginsEveryMs = 100;

// Each reply's outcome, as it goes out (api::Router::set_outcomes_at_reply):
// a request rolled back with its batch counts as the error it was answered.
void CountOutcomes(const std::vector<Pending>& replies) {
  for (const Pending& p : replies)
    if (p.response.outcome) p.response.outcome->Count(p.response.status.code());
}

// Undelivered replies and host requests beyond the first of an interval are only counted.
constexpr std::int64_t kTallyMs = 5000;
// How long a sleeping reactor keeps the transaction its last commit began on
// PostgreSQL (GroupCommit::ChainWaiting()) for the next turn: hosts answer a
// reply within a round trip; after this it is ended, so that no transaction
// stays open on the server while weftd is idle.
constexpr int kKeepChainMs = 5;

Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) return Status::Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

// The connection a request came from: its ROUTER's routing id.
std::string_view PeerOf(const Inbound& in) {
  const zmq::message_t& rid = in.pending.envelope.front();
  return {static_cast<const char*>(rid.data()), rid.size()};
}

// The reactor: composes the components (the composition root), the transport,
// the group commit, the held takes, the rate limits and the subscriptions,
// and runs the loop that drives them.
class Reactor {
 public:
  Reactor(const Config& config, int signal_fd, store::Store& store, store::StoreOptions store_options,
          std::optional<std::string> election)
      : election_(std::move(election)),
        store_options_(std::move(store_options)),
        config_(config),
        signal_fd_(signal_fd),
        store_(store),
        clock_(SystemClock::Instance()),
        components_(config, store, clock_),
        queue_(components_.queue()),
        registry_(components_.registry()),
        limits_(config, clock_),
        transport_(config, clock_, registry_, tally_),
        front_(config, clock_, limits_),
        commit_(store, components_),
        held_(config, clock_, queue_, components_.dispatcher(), registry_),
        subscriptions_(config, clock_, transport_.events(), store, registry_, components_) {}

  Status Start();
  Status Loop();
  void Shutdown();

 private:
  // The phases of one pass of the loop, in order.
  // 1. Sleeps until a socket, a timer or a signal wants attention (or only
  //    looks, when work is left over).
  enum class Woke { kWork, kAgain, kStop };
  Result<Woke> Wait();
  // 2. Drains both ROUTERs into inbox_, up to `limit` requests; returns how many it queued.
  std::size_t Drain(std::size_t limit, bool look);
  // 3. A turn: reads first, then writes, housekeeping and held takes in one
  //    transaction, the commit, the replies, the events.
  Status Turn(std::int64_t now, bool silence_due);
  // 3a. Answers, ahead of the batch and before its commit, the read-only api
  //     requests in inbox_ that no earlier request of the same peer precedes.
  void AnswerReads();
  // 3b. The writes, oldest first, for up to one budget or until a read waits;
  //     the rest wait for the next turn.
  void HandleWrites(std::vector<Pending>* batch);
  // Between two requests of a turn: whether an api read that could be answered
  // ahead of the writes waits (it is taken into inbox_, and answered first by
  // the next turn). Looks at the socket at most every kReadLookEvery.
  bool ReadWaiting();
  // Whether inbox_[i] is an api read no earlier request of the same peer precedes.
  bool Answerable(std::size_t i) const;
  // 3c. Lease expiries, undelivered attempts, silent hosts, then the held takes.
  Status Housekeeping(std::int64_t now, bool silence_due, std::vector<Pending>* batch);
  // 3d. Sends the replies (after the commit).
  void Reply(std::vector<Pending>& replies);

  std::int64_t PollTimeoutMs(std::int64_t now) const;
  // Handles `in` (the inbox's front) in place; the caller pops it.
  void Receive(Inbound& in, std::vector<Pending>* batch);
  void Handle(Pending& p, const wire::Request& request);
  // Whether an api request may be answered ahead of the batch: an op the router knows only reads.
  bool ReadOnly(const Inbound& in) const;
  Status StartSecurity();
  // The api front's thread (api_front.hpp), with a store connection of its own.
  Status StartFront();
  // Tells the front what changed of the keys and tenants (after a commit, or a rollback that reloaded them).
  void PublishAuth();
  void PublishClusterWrites();
  void PublishLivePlugins();
  Result<std::unique_ptr<metrics::HttpListener>> StartMetrics(ServerMetrics& m);
  Status WriteSuperadminCredential(const std::string& api_endpoint);

  // Several weftd on one database (docs/failover.md). Lead: this weftd took
  // over (or is the only one): load the state a restart would, then serve.
  Status Lead();
  void OpenHandshakes();
  // Renews or tries to take over when due; steps down when leadership is lost.
  Status Elect(std::int64_t now);
  // The leader: which superadmin keys of the other weftd (their credential
  // files') the store does not know yet; about once a second.
  void FindMemberKeys(std::int64_t now);
  // The leadership was lost: held takes and the inbox get NOT_LEADER replies.
  void StepDown();
  // weft_leader and weft_leader_epoch (docs/metrics.md) as this weftd sees them now.
  void PublishLeadership();
  // Waits for the commit in flight (GroupCommit) and sends its replies and events.
  Status SettleCommit();
  // While the earlier commit is in flight, requests that arrive join this
  // turn's batch (which commits once it is confirmed): the batch grows with
  // the store's latency instead of paying a commit per request or two.
  void JoinWhileCommitting(std::vector<Pending>* batch);
  // Whether a read waits in the inbox: it must not see a commit in flight.
  bool ReadInInbox() const;
  // A follower's turn: server.status, and NOT_LEADER for everything else.
  void AnswerAsFollower();
  // While the store waits for its lost PostgreSQL to come back (it calls
  // this between attempts, outage.hpp): for `pause_ms`, every request that
  // comes, held takes and the inbox are answered UNAVAILABLE with why, none
  // handled. False: stop waiting (the leadership was lost, or a signal came).
  bool AnswerWhileStoreWaits(const store::StoreOutage& outage, int pause_ms);
  Status StartElection(const json& endpoints);

  // The libpq connection string of the store's database when weftd elects a
  // leader among several; nullopt: it is the only one and always leads.
  std::optional<std::string> election_;
  store::StoreOptions store_options_;  // the front opens its reader with them
  std::unique_ptr<leader::Leadership> leadership_;
  bool leading_ = false;
  std::string superadmin_key_;  // recorded in the store when this weftd leads
  // The superadmin keys of the other weftd on the database that the store does
  // not know yet: the leader records them in its next turn (RecordMemberKeys).
  std::vector<std::string> member_keys_due_;
  std::int64_t next_member_keys_ms_ = 0;
  std::int64_t next_registry_load_ms_ = 0;

  const Config& config_;
  int signal_fd_;
  store::Store& store_;
  const Clock& clock_;
  // Everything but the sockets and the loop (the composition root).
  Components components_;
  queue::TaskQueue& queue_;
  auth::Registry& registry_;
  curve::KeyPair server_keys_;
  // What peers can make happen by the thousand is logged as a tally.
  log::Tally tally_{log::Level::kInfo, kLog, kTallyMs};
  RateLimits limits_;
  Transport transport_;
  // After transport_: stops before the context ends. Owns the api ROUTER once started.
  ApiFront front_;
  // server.status's task and host counts for the front, taken after every turn.
  StatusCounts status_counts_;
  std::uint64_t auth_generation_ = 0;
  bool auth_published_ = false;
  std::int64_t next_live_plugins_ms_ = 0;
  std::unique_ptr<auth::ZapHandler> zap_;  // after transport_'s context: stops before the context ends
  // Serves /metrics on its own thread (null with metrics off); stops before the components end.
  std::unique_ptr<metrics::HttpListener> metrics_listener_;
  std::int64_t next_metrics_ms_ = 0;
  GroupCommit commit_;
  HeldTakes held_;
  Subscriptions subscriptions_;
  // Decoded requests in arrival order; a turn handles them from the front.
  std::deque<Inbound> inbox_;
  // Requests handled this turn, freed only once their replies are sent:
  // freeing a request's JSON costs about as much as decoding it, time the
  // replies need not wait for.
  std::vector<wire::Request> handled_;
  // A turn ran out of time before serving every held take it could.
  bool serve_more_ = false;
  // This turn took a read off the api ROUTER that waits for its commit (see ReadWaiting).
  bool read_waiting_ = false;
  // The reply to the commit in flight has come (or Wait() found nothing else to do).
  bool commit_ready_ = false;
  std::chrono::steady_clock::time_point next_read_look_{};
  std::vector<queue::AttemptRef> undelivered_;
  std::int64_t next_silence_check_ms_ = 0;
  bool stop_ = false;
  // The store's wait for a lost PostgreSQL called AnswerWhileStoreWaits
  // during this turn's Begin; it stopped for a signal.
  bool store_waited_ = false;
  bool store_wait_signalled_ = false;
  // The statement waiting is this turn's BEGIN, which may give up at once.
  bool store_wait_may_end_ = false;
  // The api front passes every request to the reactor while the store waits
  // (its answers from memory would not say the database is gone).
  bool front_paused_ = false;

  // The loop's view of the ROUTERs (see Loop). Index 0: provisioner, 1: api.
  int fds_[2] = {-1, -1};
  // True while socket i may hold messages we have not seen.
  bool pending_[2] = {true, true};
  std::int64_t next_signal_check_ms_ = 0;
  // Spinning pays only while requests come back to back: it follows a turn
  // that answered requests, and only when the last wait for a request after
  // such a turn was shorter than the budget (so a trickle costs no CPU).
  std::chrono::steady_clock::time_point spin_until_;
  std::chrono::steady_clock::time_point waiting_since_;  // the end of the last turn that answered requests
  std::chrono::steady_clock::duration last_wait_{};
};

Status Reactor::Start() {
  WEFT_RETURN_IF_ERROR(components_.Prepare());
  if (config_.security.curve) WEFT_RETURN_IF_ERROR(StartSecurity());
  json endpoints;
  std::optional<std::string> secret;
  if (config_.security.curve) secret = server_keys_.secret_key;
  WEFT_RETURN_IF_ERROR(transport_.Bind(secret, &endpoints));
  // Before the front starts: the rate limits are its own from then on.
  if (ServerMetrics* m = components_.metrics()) limits_.set_refusal_counter(&m->rate_limited());
  WEFT_RETURN_IF_ERROR(StartFront());
  if (ServerMetrics* m = components_.metrics()) {
    m->StartAtZero(components_.router().KnownOps());  // every op is registered by now
    WEFT_ASSIGN_OR_RETURN(metrics_listener_, StartMetrics(*m));
    endpoints["metrics"] = "http://" + metrics_listener_->address() + "/metrics";
  }
  const std::int64_t now = clock_.NowMs();
  components_.set_info(DaemonInfo{getpid(), now, config_.server.data_dir.string(), endpoints});
  json file = endpoints;
  file["pid"] = getpid();
  if (config_.security.curve) {
    file["server_key"] = server_keys_.public_key;
    WEFT_RETURN_IF_ERROR(WriteSuperadminCredential(endpoints["api"].get<std::string>()));
  }
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(BoundPortsPath(config_.server.data_dir), wire::Dump(endpoints) + "\n"));
  WEFT_RETURN_IF_ERROR(election_ ? StartElection(endpoints) : Lead());
  // Last: endpoints.json tells tools weftd is ready, so only once it knows its
  // keys (a follower loads them as it starts its election) and its state.
  const std::filesystem::path told = config_.server.data_dir / "endpoints.json";
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(told, wire::Dump(file) + "\n"));
  // Addresses, the pid and the public key: for local clients and scripts, whatever user they run as.
  std::error_code ec;
  std::filesystem::permissions(told,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                   std::filesystem::perms::group_read | std::filesystem::perms::others_read,
                               ec);
  WEFT_LOG(kInfo, kLog) << (leading_ ? "serving" : "following") << ": api " << endpoints["api"].get<std::string>() << ", provisioner "
                        << endpoints["provisioner"].get<std::string>() << ", events "
                        << endpoints["events"].get<std::string>()
                        << (endpoints.contains("metrics") ? ", metrics " + endpoints["metrics"].get<std::string>() : "")
                        << "; data in "
                        << config_.server.data_dir.string() << "; " << queue_.queued() << " tasks queued, "
                        << queue_.leased() << " leased";
  return Status::Ok();
}

std::int64_t Reactor::PollTimeoutMs(std::int64_t now) const {
  std::int64_t due = now + kMaxSleepMs;
  if (auto e = queue_.NextExpiryMs()) due = std::min(due, *e);
  if (auto w = held_.NextDeadlineMs()) due = std::min(due, *w);
  due = std::min(due, next_silence_check_ms_);
  if (leading_) due = std::min(due, components_.retention().NextMs());
  if (leadership_) due = std::min(due, leadership_->next_tick_ms());
  if (!undelivered_.empty() || !inbox_.empty() || serve_more_ || !member_keys_due_.empty()) due = now;
  return std::max<std::int64_t>(0, due - now);
}

void Reactor::Receive(Inbound& in, std::vector<Pending>* batch) {
  Pending& p = in.pending;
  if (!in.request) {
    batch->push_back(std::move(p));
    return;
  }
  Handle(p, *in.request);
  // A body kept as text (a host's take or finish) is no tree: such a request
  // costs less to free here than to move aside.
  if (in.request->body_text.empty()) handled_.push_back(std::move(*in.request));
  if (!p.response.held) {
    batch->push_back(std::move(p));
    return;
  }
  held_.Hold(std::move(p));
}

bool Reactor::ReadOnly(const Inbound& in) const {
  return in.pending.endpoint == Endpoint::kApi && in.request && components_.router().ReadOnly(in.request->op);
}

void Reactor::AnswerReads() {
  // A read sees the store and the in-memory state as the last commit left
  // them (nothing of this turn is handled yet), so its reply reports nothing
  // uncommitted and need not wait for the writes. Requests from one peer stay
  // in order: a read behind a write of the same peer waits with the batch.
  std::vector<Pending> reads;
  std::vector<std::chrono::steady_clock::time_point> received;  // of each of `reads`
  // Api peers with an earlier request still queued. Only the api's: hosts,
  // whose requests fill the inbox, have no reads, and a set of them all, made
  // every turn, cost a twentieth of the reactor's time under load.
  std::unordered_set<std::string_view> writers;
  for (auto it = inbox_.begin(); it != inbox_.end();) {
    if (it->pending.endpoint != Endpoint::kApi) {
      ++it;
      continue;
    }
    const std::string_view peer = PeerOf(*it);
    if (!ReadOnly(*it) || writers.count(peer)) {
      writers.insert(peer);
      ++it;
      continue;
    }
    Handle(it->pending, *it->request);
    handled_.push_back(std::move(*it->request));
    reads.push_back(std::move(it->pending));
    received.push_back(it->received);
    it = inbox_.erase(it);
  }
  if (reads.empty()) return;
  CountOutcomes(reads);
  transport_.Send(reads, &undelivered_);
  if (ServerMetrics* m = components_.metrics()) {
    const auto now = std::chrono::steady_clock::now();
    for (const std::chrono::steady_clock::time_point at : received)
      m->read_wait_seconds().Observe(std::chrono::duration<double>(now - at).count());
  }
  handled_.clear();
  // Sending may consume the socket's descriptor signal: look at it again.
  pending_[1] = true;
}

void Reactor::Handle(Pending& p, const wire::Request& request) {
  api::Call call;
  call.endpoint = p.endpoint;
  call.request = &request;
  call.peer_address = p.address;
  if (!config_.security.curve) {
    // No authentication: every api caller is superadmin of the tenant it names.
    if (p.endpoint == Endpoint::kApi) {
      call.principal.tenant = request.tenant.empty() ? "default" : request.tenant;
      call.principal.role = api::Role::kSuperadmin;
    } else {
      call.principal.tenant = "_system";
      call.principal.role = api::Role::kHost;
    }
  } else {
    Result<api::Principal> principal = auth::Resolve(registry_, p.endpoint, p.key, request);
    if (!principal.ok()) {
      p.response = api::Response::Error(principal.status());
      return;
    }
    call.principal = std::move(*principal);
    if (call.principal.role == api::Role::kPending) {
      p.response = auth::HandlePending(registry_, tally_, clock_.NowMs(), p.key, p.address, request);
      return;
    }
  }
  // A gateway's request for a browser acts as the browser's user (server/auth/logins.hpp).
  if (p.endpoint == Endpoint::kApi && (!request.on_behalf.session.empty() || !request.on_behalf.token.empty())) {
    json details = json::object();
    Result<api::Principal> user = components_.logins().ActFor(
        call.principal, request, components_.router().ReadOnly(request.op), config_.security.curve, &details);
    if (!user.ok()) {
      p.response = api::Response::Error(user.status(), std::move(details));
      return;
    }
    call.principal = std::move(*user);
  }
  p.response = components_.router().Route(call);
  // A take (or a finish that takes the next task) hands out an attempt: if the
  // reply cannot be delivered, the attempt is released at once.
  if (p.response.status.ok() && p.response.hands_out_task_id > 0)
    p.delivers = queue::AttemptRef{p.response.hands_out_task_id, p.response.hands_out_attempt};
}

void Reactor::Reply(std::vector<Pending>& replies) {
  CountOutcomes(replies);
  transport_.Send(replies, &undelivered_);
  // A send may process the socket's commands, consuming its descriptor's signal.
  for (const Pending& p : replies) pending_[p.endpoint == Endpoint::kProvisioner ? 0 : 1] = true;
}

Result<Reactor::Woke> Reactor::Wait() {
  const std::int64_t now = clock_.NowMs();
  // Sleep when both ROUTERs are drained and no work is left over; otherwise
  // only look at the descriptors without waiting: the signal's now and then,
  // so that a steady load cannot hide a SIGTERM, and the ROUTERs' when they
  // are drained but the last turn left requests or held takes to handle.
  const bool drained = !pending_[0] && !pending_[1];
  const bool sleep = drained && inbox_.empty() && !serve_more_;
  if (!drained && now < next_signal_check_ms_) return Woke::kWork;
  // With a commit in flight, its reply is waited for with the requests:
  // whichever comes first is handled first.
  const int commit_fd = sleep ? commit_.Socket() : -1;
  pollfd items[] = {{signal_fd_, POLLIN, 0}, {fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}, {commit_fd, POLLIN, 0}};
  const nfds_t watched = commit_fd >= 0 ? 4 : 3;
  const int timeout_ms = sleep ? static_cast<int>(PollTimeoutMs(now)) : 0;
  int rc = 0;
  // Not while a commit is in flight: PostgreSQL, working on it, needs the core.
  if (timeout_ms > 0 && commit_fd < 0 && std::chrono::steady_clock::now() < spin_until_) {
    // Hosts send their next request within a round trip of a reply, and
    // a thread that slept costs a wake-up to get going again (tens of
    // microseconds on a virtual machine): look without sleeping a while.
    // Between looks the CPU goes to any thread waiting for it on this core:
    // often the ZeroMQ I/O thread the replies just woke, which must send them
    // before the next requests can come (without the yield it waited out the
    // spin, about 30 µs a wake-up on two busy cores).
    // With no other thread there, sched_yield returns at once.
    do {
      rc = ::poll(items, watched, 0);
      if (rc == 0) sched_yield();
    } while (rc == 0 && std::chrono::steady_clock::now() < spin_until_);
  }
  spin_until_ = {};
  int left_ms = timeout_ms;
  if (rc == 0 && left_ms > 0 && commit_.ChainWaiting()) {
    const int kept = std::min(left_ms, kKeepChainMs);
    rc = ::poll(items, watched, kept);
    if (rc == 0) commit_.Rest();
    left_ms -= kept;
  }
  if (rc == 0 && (left_ms > 0 || timeout_ms == 0)) rc = ::poll(items, drained ? watched : 1, left_ms);
  if (sleep && commit_.InFlight() && (rc == 0 || items[3].revents != 0)) commit_ready_ = true;
  if (rc > 0 && waiting_since_ != std::chrono::steady_clock::time_point{} &&
      (items[1].revents != 0 || items[2].revents != 0)) {
    last_wait_ = std::chrono::steady_clock::now() - waiting_since_;
    waiting_since_ = {};
  }
  if (rc < 0) {
    if (errno == EINTR) return Woke::kAgain;
    return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
  }
  if (items[0].revents & POLLIN) {
    signalfd_siginfo info;
    if (read(signal_fd_, &info, sizeof info) > 0) {
      WEFT_LOG(kInfo, kLog) << "signal " << info.ssi_signo << " received: shutting down";
    }
    return Woke::kStop;
  }
  if (drained) {
    pending_[0] = items[1].revents != 0;
    pending_[1] = items[2].revents != 0;
    // Both descriptors were just looked at: the api's need not be again for a while (Drain, ReadWaiting).
    next_read_look_ = std::chrono::steady_clock::now() + kReadLookEvery;
  }
  next_signal_check_ms_ = now + kSignalCheckMs;
  return Woke::kWork;
}

std::size_t Reactor::Drain(std::size_t limit, bool look) {
  // `look`: first ask the descriptors (one poll(2), no waiting) whether a
  // socket that refused a receive has something new, which is cheaper than
  // an empty receive on each (a poll(2) and a getpid(2) apiece in libzmq).
  // When only the api's is in doubt (the hosts' socket has work), at most
  // every kReadLookEvery, as between requests (ReadWaiting): looking at it
  // before and after every turn cost a poll(2) or two per turn.
  static constexpr Endpoint kOrder[] = {Endpoint::kProvisioner, Endpoint::kApi};
  std::size_t got = 0;
  if (look && (!pending_[0] || !pending_[1])) {
    const auto now = std::chrono::steady_clock::now();
    if (!pending_[0] || now >= next_read_look_) {
      next_read_look_ = now + kReadLookEvery;
      pollfd items[] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
      if (::poll(items, 2, 0) > 0) {
        pending_[0] = pending_[0] || items[0].revents != 0;
        pending_[1] = pending_[1] || items[1].revents != 0;
      }
    }
  }
  while (inbox_.size() < limit && (pending_[0] || pending_[1])) {
    for (int i = 0; i < 2 && inbox_.size() < limit; ++i) {
      if (!pending_[i]) continue;
      switch (transport_.Receive(kOrder[i], inbox_)) {
        case Transport::Received::kNothing:
          pending_[i] = false;
          break;
        case Transport::Received::kDropped:
          break;
        case Transport::Received::kQueued:
          inbox_.back().received = std::chrono::steady_clock::now();
          ++got;
          break;
      }
    }
  }
  return got;
}

void Reactor::HandleWrites(std::vector<Pending>* batch) {
  const std::size_t batch_max = static_cast<std::size_t>(config_.server.batch_max_messages);
  const auto turn_start = std::chrono::steady_clock::now();
  const auto writes_until = turn_start + kTurnBudget;
  std::size_t handled = 0;
  while (true) {
    for (; !inbox_.empty() && handled < batch_max; ++handled) {
      if (handled > 0 && ReadWaiting()) return;
      // Handled where it lies (a new request only joins the back of the inbox
      // meanwhile, which moves no other): moving it out first, and into
      // Receive, cost two moves of its Pending and Request.
      Receive(inbox_.front(), batch);
      inbox_.pop_front();
      if (std::chrono::steady_clock::now() >= writes_until) break;
    }
    // A commit costs more than a few requests (a dozen system calls and a
    // checksum per page): requests that arrived meanwhile join this one
    // while the turn is young. No waiting, only a look at the descriptors;
    // they are handled in order with the rest, so a read among them waits
    // for the commit (and ends the turn, unless a write of its peer precedes it).
    if (!inbox_.empty() || handled >= batch_max ||
        std::chrono::steady_clock::now() - turn_start >= kJoinWindow || Drain(batch_max - handled, true) == 0)
      break;
    for (std::size_t i = 0; i < inbox_.size() && !read_waiting_; ++i) read_waiting_ = Answerable(i);
    if (read_waiting_) return;
  }
}

bool Reactor::ReadWaiting() {
  if (read_waiting_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_read_look_) return false;
  next_read_look_ = now + kReadLookEvery;
  if (!pending_[1]) {
    // The descriptor signals only what is new since the socket refused a receive.
    pollfd item{fds_[1], POLLIN, 0};
    if (::poll(&item, 1, 0) <= 0) return false;
    pending_[1] = true;
  }
  const std::size_t from = inbox_.size();
  for (std::size_t taken = 0; pending_[1] && taken < kReadLookMax;) {
    switch (transport_.Receive(Endpoint::kApi, inbox_)) {
      case Transport::Received::kNothing:
        pending_[1] = false;
        break;
      case Transport::Received::kDropped:
        break;
      case Transport::Received::kQueued:
        inbox_.back().received = now;
        ++taken;
        break;
    }
  }
  for (std::size_t i = from; i < inbox_.size() && !read_waiting_; ++i) read_waiting_ = Answerable(i);
  return read_waiting_;
}

bool Reactor::Answerable(std::size_t i) const {
  if (!ReadOnly(inbox_[i])) return false;
  const std::string_view peer = PeerOf(inbox_[i]);
  for (std::size_t j = 0; j < i; ++j)
    if (inbox_[j].pending.endpoint == Endpoint::kApi && PeerOf(inbox_[j]) == peer) return false;
  return true;
}

Status Reactor::Housekeeping(std::int64_t now, bool silence_due, std::vector<Pending>* batch) {
  Status s;
  for (const queue::AttemptRef& ref : undelivered_) {
    s = queue_.Release(ref, "attempt " + std::to_string(ref.attempt) +
                                " never reached its host: the reply to task.take could not be delivered");
    if (!s.ok()) break;
  }
  undelivered_.clear();
  WEFT_RETURN_IF_ERROR(s);
  // Past its budget, or with a read waiting, the rest of the leases that ran
  // out expire in the next turn (which comes at once).
  using Steady = std::chrono::steady_clock;
  WEFT_RETURN_IF_ERROR(queue_.ExpireDue(Steady::now() + (ReadWaiting() ? Steady::duration{} : kTurnBudget)));
  if (silence_due) {
    s = components_.Janitor();
    next_silence_check_ms_ =
        now + std::max<std::int64_t>(50, std::min(config_.hosts.silent_after_ms / 4, config_.jobs.janitor_interval_ms));
    WEFT_RETURN_IF_ERROR(s);
  }
  if (components_.retention().Due(now)) WEFT_RETURN_IF_ERROR(components_.retention().Batch(now));
  for (const std::string& key : member_keys_due_) WEFT_RETURN_IF_ERROR(registry_.EnsureSuperadmin(key));
  member_keys_due_.clear();
  // With a read waiting, one held take at most is served now, the rest next turn.
  serve_more_ = held_.Serve(batch, serve_more_, Steady::now() + (ReadWaiting() ? Steady::duration{} : kTurnBudget));
  return Status::Ok();
}

Status Reactor::Turn(std::int64_t now, bool silence_due) {
  const auto started = std::chrono::steady_clock::now();
  read_waiting_ = false;
  // Before anything of the turn happens: its transitions are recorded as
  // events only if someone listens.
  subscriptions_.Check();
  std::vector<Pending> batch;
  // A read is answered from what is committed, so not with a commit in flight.
  if (commit_.InFlight() && ReadInInbox()) WEFT_RETURN_IF_ERROR(SettleCommit());
  store_waited_ = false;
  store_wait_signalled_ = false;
  store_wait_may_end_ = true;
  Status s = commit_.Begin();
  store_wait_may_end_ = false;
  if (s.ok() && front_paused_) {
    front_paused_ = false;
    front_.SetServing(leading_);
  }
  if (!s.ok()) WEFT_RETURN_IF_ERROR(SettleCommit());
  // A leader whose store waited for PostgreSQL until [store] reconnect_timeout_ms
  // ran out gives the leadership up, to a weftd that may reach the database.
  if (!s.ok() && leadership_ && leadership_->leader() && store_waited_ && !store_wait_signalled_)
    leadership_->Lose("its store could not reach PostgreSQL within [store] reconnect_timeout_ms (" + s.message() + ")");
  if (!s.ok() && leadership_ && !leadership_->leader()) {
    StepDown();  // another weftd leads: the inbox gets NOT_LEADER replies next
    return Status::Ok();
  }
  if (!s.ok()) {
    // Nothing was changed; answer every request so that no one waits in vain.
    for (Inbound& in : inbox_) {
      in.pending.response = api::Response::Error(Status::Unavailable("the store is busy (" + s.message() + "); retry"));
      batch.push_back(std::move(in.pending));
    }
    inbox_.clear();
    Reply(batch);
    return Status::Ok();
  }
  AnswerReads();
  // Room for the inbox and a few that join it: growing the batch moved every
  // Pending already in it (about a thousand instructions per request).
  batch.reserve(inbox_.size() + 8);
  HandleWrites(&batch);
  JoinWhileCommitting(&batch);
  // On PostgreSQL `batch` then holds the replies of the turn before, whose commit this one waited for.
  WEFT_RETURN_IF_ERROR(commit_.End(Housekeeping(now, silence_due, &batch), batch));
  // The front sees only committed keys and tenants: a turn that changed them waits for its commit.
  if (commit_.InFlight() && registry_.generation() != auth_generation_) WEFT_RETURN_IF_ERROR(commit_.Settle(batch));
  // Before the replies: a client told its user was made may read as that user
  // at once, and server.status on the front counts what the replies report.
  PublishAuth();
  PublishClusterWrites();
  status_counts_.Take(queue_, components_.hosts());
  Reply(batch);
  handled_.clear();
  if (!batch.empty()) {
    waiting_since_ = std::chrono::steady_clock::now();
    if (last_wait_ <= std::chrono::microseconds(config_.server.idle_spin_us))
      spin_until_ = waiting_since_ + std::chrono::microseconds(config_.server.idle_spin_us);
  }
  subscriptions_.Publish(commit_.TakeEvents());
  if (ServerMetrics* m = components_.metrics())
    m->turn_seconds().Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return Status::Ok();
}

Status Reactor::Loop() {
  // The ROUTERs are waited on through their ZMQ_FD, not zmq::poll: zmq::poll
  // asks every socket for ZMQ_EVENTS before and after it sleeps, and each ask
  // costs libzmq a poll(2) and a getpid(2), about eight system calls per turn
  // for one request. ZMQ_FD only signals *new* events, so the rule is: sleep on
  // it only once the socket has refused a receive since we last used it.
  // `pending_[i]` is true while socket i may hold messages we have not seen:
  // after its descriptor fired, after a batch filled up, and after sending on
  // it (a send may process the socket's commands, consuming the signal).
  WEFT_RETURN_IF_ERROR(transport_.Descriptors(fds_));
  store_.SetReconnectWait(
      [this](const store::StoreOutage& outage, int pause_ms) { return AnswerWhileStoreWaits(outage, pause_ms); });
  const std::size_t batch_max = static_cast<std::size_t>(config_.server.batch_max_messages);
  while (!stop_) {
    WEFT_ASSIGN_OR_RETURN(const Woke woke, Wait());
    if (woke == Woke::kAgain) continue;
    if (woke == Woke::kStop) {
      stop_ = true;
      break;
    }
    // Up to one batch (requests left over from the last turn stay ahead of them).
    // While one ROUTER stays busy the loop never sleeps in poll(2), so the
    // other's descriptor is looked at here, every turn: otherwise a steady
    // stream of host requests would hide api requests (for seconds under load).
    Drain(std::min(inbox_.size(), batch_max * (kMaxInboxBatches - 1)) + batch_max, pending_[0] != pending_[1]);

    const std::int64_t now = clock_.NowMs();
    tally_.Flush(now);
    if (leadership_ && !leading_) {
      WEFT_RETURN_IF_ERROR(Elect(now));
      if (!leading_) {
        AnswerAsFollower();
        // The queue, jobs, hosts and store are the leader's to tell: a scrape of a
        // follower gets none of them (rather than waiting for a snapshot that never comes).
        if (ServerMetrics* m = components_.metrics(); m && m->RefreshDue()) m->Publish({});
        continue;
      }
    }
    if (now >= next_live_plugins_ms_) {
      PublishLivePlugins();
      next_live_plugins_ms_ = now + kLivePluginsEveryMs;
    }
    if (now >= next_metrics_ms_) {
      // About once a second (the loop wakes at least that often): cheap unless someone scrapes.
      components_.RefreshMetrics();
      next_metrics_ms_ = now + 250;
    }
    // Its reply came, or nothing else came: the commit in flight is settled.
    if (commit_.InFlight() && (commit_ready_ || commit_.Socket() < 0)) WEFT_RETURN_IF_ERROR(SettleCommit());
    commit_ready_ = false;
    const bool expiry_due = queue_.NextExpiryMs() && *queue_.NextExpiryMs() <= now;
    const bool silence_due = now >= next_silence_check_ms_;
    if (!inbox_.empty() || expiry_due || held_.AnyDue(now) || silence_due || !undelivered_.empty() || serve_more_ ||
        components_.retention().Due(now) || !member_keys_due_.empty()) {
      Status turned = Turn(now, silence_due);
      if (!turned.ok() && turned.code() == Code::kUnavailable && leadership_ && leading_) {
        // The state could not be loaded again after a rollback, the database
        // being gone: whichever weftd takes over next loads it afresh.
        leadership_->Lose("it could not reload its state from the store (" + turned.message() + ")");
        StepDown();
        continue;
      }
      WEFT_RETURN_IF_ERROR(turned);
    }
    // A leader renews between turns. After a pause (SIGSTOP) the requests
    // waiting meet the fencing check first; nothing commits once another
    // weftd took over, whichever notices it first.
    if (leadership_) WEFT_RETURN_IF_ERROR(Elect(clock_.NowMs()));
  }
  return Status::Ok();
}

void Reactor::Shutdown() {
  if (Status s = SettleCommit(); !s.ok()) {
    WEFT_LOG(kError, kLog) << "the last commit could not be settled: " << s.message();
  }
  commit_.Rest();
  metrics_listener_.reset();
  store_.SetLeaderFence({});  // it points into this reactor, which the store outlives
  store_.SetReconnectWait({});
  std::vector<Pending> replies;
  for (Inbound& in : inbox_) {
    in.pending.response = api::Response::Error(Status::Unavailable("weftd is shutting down; retry"));
    replies.push_back(std::move(in.pending));
  }
  inbox_.clear();
  held_.AnswerAll(&replies, Status::Unavailable("weftd is shutting down; retry the take"));
  transport_.Send(replies, &undelivered_);
  front_.Stop();  // after it passed those replies on
  std::error_code ec;
  std::filesystem::remove(config_.server.data_dir / "endpoints.json", ec);
}

// The /metrics listener. With port `*` it takes the port it had before
// (ports.json) when that is free, so a scrape config keeps working across restarts.
Result<std::unique_ptr<metrics::HttpListener>> Reactor::StartMetrics(ServerMetrics& m) {
  const json previous = ReadBoundPorts(config_.server.data_dir);
  auto old = previous.find("metrics");
  return metrics::HttpListener::StartKeepingPort(config_.metrics.listen,
                                                 old != previous.end() && old->is_string()
                                                     ? old->get_ref<const std::string&>()
                                                     : std::string_view(),
                                                 [&m] { return m.Render(); });
}

Status Reactor::StartFront() {
  store::StoreOptions options = store_options_;
  options.reader = true;
  // A read that finds PostgreSQL lost does not wait for it: the front would
  // answer nothing meanwhile. It goes to the reactor, which answers why.
  options.reconnect_timeout_ms = 0;
  Result<std::unique_ptr<store::Store>> reader = store::Store::Open(store_.path(), options);
  if (!reader.ok()) return reader.status().WithContext("cannot open the api front's store connection");
  auto reads = std::make_unique<api::Router>();
  // Its requests count in the same series as the reactor's (OpMetrics records from either thread).
  reads->set_metrics(components_.metrics());
  // The reactor's replies are counted as they go out (CountOutcomes): after their commit.
  components_.router().set_outcomes_at_reply(true);
  ApiFront* front = &front_;
  jobs::RegisterClusterReads(*reads, **reader, clock_,
                             [front](const std::string& tenant) { return front->LivePlugins(tenant); });
  catalog::RegisterCatalogReads(*reads, **reader, clock_, config_);
  RegisterStatusRead(*reads, components_.router(), status_counts_, store_, clock_, components_.info(),
                     components_.retention(), components_.store_health());
  auth::RefuseSealedRequests(*reads);
  WEFT_RETURN_IF_ERROR(front_.Bind(transport_.context()));
  WEFT_ASSIGN_OR_RETURN(zmq::socket_t router, transport_.HandOverApi(ApiFront::kPipe));
  return front_.Start(std::move(router), std::move(*reader), std::move(reads));
}

void Reactor::PublishAuth() {
  if (auth_published_ && registry_.generation() == auth_generation_) return;
  auth_generation_ = registry_.generation();
  auth_published_ = true;
  front_.SetAuth(registry_.View());
}

void Reactor::PublishClusterWrites() { front_.ClustersWritten(store_.TakeCommittedClusterWrites()); }

void Reactor::PublishLivePlugins() {
  if (!leading_) return;
  status_counts_.Take(queue_, components_.hosts());  // hosts fall silent between turns too
  std::map<std::string, std::set<std::string>> by_tenant;
  for (const auto& [tenant, record] : registry_.tenants())
    by_tenant[tenant] = components_.hosts().LivePluginTypes(tenant);
  front_.SetLivePlugins(std::move(by_tenant));
}

// The server key pair (made at first start), the ZAP handler, the security ops.
Status Reactor::StartSecurity() {
  bool created = false;
  Result<curve::KeyPair> keys =
      curve::LoadOrCreateKeyFile(config_.server.data_dir / "keys" / "server.json", &created);
  if (!keys.ok()) return keys.status().WithContext("cannot load weftd's CURVE key pair");
  server_keys_ = *keys;
  if (created) {
    WEFT_LOG(kInfo, kLog) << "made weftd's CURVE key pair in " << (config_.server.data_dir / "keys").string()
                          << " (public key " << server_keys_.public_key << ")";
  }
  zap_ = std::make_unique<auth::ZapHandler>(transport_.context(), components_.keys(), clock_,
                                            config_.security.host_requests);
  // A client whose handshake fails before ZAP (another server key) is logged too.
  WEFT_RETURN_IF_ERROR(zap_->Watch(transport_.router(Endpoint::kApi), "api"));
  WEFT_RETURN_IF_ERROR(zap_->Watch(transport_.router(Endpoint::kProvisioner), "provisioner"));
  WEFT_RETURN_IF_ERROR(zap_->Start());
  components_.AddSecurityOps(server_keys_.public_key);
  return Status::Ok();
}

// <data_dir>/credentials/superadmin.json: what the local `weft` finds without
// being told (its key is made at first start; the endpoint is refreshed every start).
Status Reactor::WriteSuperadminCredential(const std::string& api_endpoint) {
  const std::filesystem::path path = config_.server.data_dir / "credentials" / "superadmin.json";
  curve::Credential c;
  Result<curve::Credential> old = curve::LoadCredential(path);
  if (old.ok() && old->server_key == server_keys_.public_key) {
    c = *old;
  } else {
    if (!old.ok() && old.status().code() != Code::kNotFound) {
      WEFT_LOG(kWarn, kLog) << old.status().message() << "; making a new superadmin credential";
    } else if (old.ok()) {
      WEFT_LOG(kWarn, kLog) << path.string() << " was made for another server key (" << curve::ShortKey(old->server_key)
                            << ", not this weftd's " << curve::ShortKey(server_keys_.public_key)
                            << "); making a new superadmin credential there";
    }
    WEFT_ASSIGN_OR_RETURN(curve::KeyPair pair, curve::Generate());
    c.keys = pair;
    // A restore onto a fresh data directory comes here too: superadmin keys the
    // store recorded before stay valid until revoked.
    WEFT_LOG(kInfo, kLog) << "made a superadmin credential at " << path.string() << " (key "
                          << curve::ShortKey(c.keys.public_key)
                          << "); superadmin keys recorded before stay valid until revoked (weft user key list superadmin)";
  }
  c.api = api_endpoint;
  c.server_key = server_keys_.public_key;
  c.tenant = "default";
  c.user = "superadmin";
  c.role = "superadmin";
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Status::Unavailable("cannot create " + path.parent_path().string() + ": " + ec.message());
  std::filesystem::permissions(path.parent_path(), std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  // Recorded in the store by Lead(), and by whichever weftd leads (FindMemberKeys): a follower writes nothing.
  superadmin_key_ = c.keys.public_key;
  return curve::SaveCredential(path, c);
}

Status Reactor::Lead() {
  WEFT_RETURN_IF_ERROR(components_.Resume());
  if (!superadmin_key_.empty()) {
    WEFT_RETURN_IF_ERROR(store_.Begin());
    Status s = registry_.EnsureSuperadmin(superadmin_key_);
    if (s.ok()) s = store_.Commit();
    if (!s.ok()) {
      (void)store_.Rollback();
      return s.WithContext("cannot record the superadmin key");
    }
  }
  leading_ = true;
  next_member_keys_ms_ = 0;  // the other weftd's keys: at once
  subscriptions_.Restart();  // events from here on are numbered afresh (another weftd may have led)
  components_.retention().Restart();
  auth_published_ = false;
  PublishAuth();
  PublishLivePlugins();
  front_.SetServing(true);
  OpenHandshakes();
  return Status::Ok();
}

// The endpoints are bound before the keys are loaded (Lead, or a follower's
// StartElection): until then the ZAP handler holds every handshake, which
// would otherwise be refused as an unknown key.
void Reactor::OpenHandshakes() {
  if (zap_) zap_->Open();
}

Status Reactor::StartElection(const json& bound) {
  leader::LeaderOptions o;
  o.conninfo = *election_;
  const LeaderConfig& c = config_.leader;
  o.endpoints = {{"api", c.advertise_api.empty() ? bound.value("api", std::string()) : c.advertise_api},
                 {"provisioner",
                  c.advertise_provisioner.empty() ? bound.value("provisioner", std::string()) : c.advertise_provisioner},
                 {"events", c.advertise_events.empty() ? bound.value("events", std::string()) : c.advertise_events}};
  // An address bound on every interface reaches nobody when another weftd, a
  // host or a client is told it (NOT_LEADER, server.status, the credentials).
  for (const auto& [kind, key] : {std::pair{"api", "advertise_api"}, std::pair{"provisioner", "advertise_provisioner"},
                                  std::pair{"events", "advertise_events"}}) {
    const std::string told = o.endpoints[kind].get<std::string>();
    if (told.find("://0.0.0.0:") != std::string::npos || told.find("://*:") != std::string::npos) {
      WEFT_LOG(kWarn, kLog) << "the other weftd, hosts and clients are told " << told << " as this weftd's " << kind
                            << " endpoint, which names no machine: set [leader] " << key
                            << " to an address they can reach";
    }
  }
  o.node = c.node.empty() ? o.endpoints["api"].get<std::string>() : c.node;
  o.lease_ms = c.lease_ms;
  o.poll_ms = c.poll_ms;
  o.connect_timeout_ms = config_.store.connect_timeout_ms;
  o.timeline_check_ms = c.timeline_check_ms;
  o.timeline_record = (config_.server.data_dir / "postgres-timeline.json").string();
  // Every weftd on the database must have the first one's keys: Open refuses other ones.
  o.server_key = config_.security.curve ? server_keys_.public_key : "";
  WEFT_ASSIGN_OR_RETURN(digest::FileDigest secrets,
                        digest::Sha256OfFile(config_.server.data_dir / "keys" / "secrets.key"));
  o.secrets_digest = secrets.digest;
  o.superadmin_key = superadmin_key_;
  WEFT_ASSIGN_OR_RETURN(leadership_, leader::Leadership::Open(std::move(o)));
  if (ServerMetrics* m = components_.metrics()) m->EnableLeadership(leadership_->node());
  // The fence: no write transaction commits unless the epoch in force is the
  // one this weftd took over with (server/leader/leadership.hpp). PostgreSQL
  // checks it with the COMMIT (store.hpp); a refusal loses the leadership.
  store_.SetLeaderFence({.epoch = [this]() -> std::optional<std::int64_t> {
                           if (!leadership_->leader()) return std::nullopt;
                           return leadership_->epoch();
                         },
                         .refused = [this](std::int64_t in_force) { return leadership_->CheckFence(in_force); }});
  DaemonInfo info = components_.info();
  info.leadership = [this] { return leadership_->View(); };
  components_.set_info(std::move(info));
  // A follower still admits the keys the store knows (to tell them where the leader is).
  WEFT_RETURN_IF_ERROR(registry_.Load());
  OpenHandshakes();
  return Elect(clock_.NowMs());
}

Status Reactor::Elect(std::int64_t now) {
  if (leading_ && !leadership_->leader()) {
    StepDown();  // a write transaction found another epoch
    return Status::Ok();
  }
  if (leading_) FindMemberKeys(now);
  if (now < leadership_->next_tick_ms()) return Status::Ok();
  Result<leader::Leadership::Change> change = leadership_->Tick(now);
  if (!change.ok()) {
    if (tally_.Count("leader election failures", now)) {
      WEFT_LOG(kWarn, kLog) << change.status().message();
    }
    return Status::Ok();
  }
  PublishLeadership();
  if (*change == leader::Leadership::Change::kNone && !leading_ && now >= next_registry_load_ms_) {
    // New users and hosts reach a follower too; their keys come from the store.
    // Only right after the election reached the database: a store statement
    // waits for a lost database to come back (store.reconnect_timeout_ms), and
    // a follower must go on answering (server.status says why) meanwhile.
    if (Status s = registry_.Load(); !s.ok()) {
      WEFT_LOG(kWarn, kLog) << s.message();
    }
    next_registry_load_ms_ = now + 1000;
  }
  if (*change == leader::Leadership::Change::kLost) StepDown();
  if (*change != leader::Leadership::Change::kBecameLeader) return Status::Ok();
  // What a restart after a crash loads: jobs, the queue and its leases, hosts, keys.
  Status s = Lead();
  if (!s.ok()) {
    leadership_->Lose("it could not load the state: " + s.message());
    StepDown();
    return Status::Ok();
  }
  if (ServerMetrics* m = components_.metrics()) m->TookOver();
  PublishLeadership();
  WEFT_LOG(kInfo, kLog) << "took over as leader (epoch " << leadership_->epoch() << "): " << queue_.queued()
                        << " tasks queued, " << queue_.leased() << " leased";
  return Status::Ok();
}

void Reactor::FindMemberKeys(std::int64_t now) {
  if (now < next_member_keys_ms_ || !member_keys_due_.empty()) return;
  next_member_keys_ms_ = now + 1000;
  Result<std::vector<std::string>> keys = leadership_->SuperadminKeys();
  if (!keys.ok()) {
    if (tally_.Count("reads of the other weftd's superadmin keys that failed", now)) {
      WEFT_LOG(kWarn, kLog) << "cannot read the superadmin keys of the other weftd: " << keys.status().message();
    }
    return;
  }
  // Only keys never recorded: one revoked, or retired by a rotation, stays so.
  for (const std::string& key : *keys)
    if (!registry_.Find(key) && !registry_.Spent(key)) member_keys_due_.push_back(key);
}

void Reactor::PublishLeadership() {
  ServerMetrics* m = components_.metrics();
  if (!m || !leadership_) return;
  const json& known = leadership_->known_leader();
  m->SetLeadership(leading_, leading_ ? leadership_->epoch()
                                      : (known.is_object() ? known.value("epoch", std::int64_t{0}) : 0));
}

void Reactor::StepDown() {
  const bool was = leading_;
  leading_ = false;
  front_.SetServing(false);
  front_paused_ = false;
  member_keys_due_.clear();
  PublishLeadership();
  if (!was) return;
  // The commit in flight meets the fence: its batch is answered either way.
  if (Status s = SettleCommit(); !s.ok()) {
    WEFT_LOG(kError, kLog) << "the last commit could not be settled: " << s.message();
  }
  WEFT_LOG(kWarn, kLog) << "stepped down: answering as a follower from now on";
  std::vector<Pending> replies;
  held_.AnswerAll(&replies, leader::NotLeaderStatus(*leadership_, Endpoint::kProvisioner));
  for (Pending& p : replies) p.response.details = leader::NotLeaderDetails(*leadership_, p.endpoint);
  transport_.Send(replies, &undelivered_);
  // Attempts that were never delivered stay leased in the store; the leader's lease expiry hands them out again.
  undelivered_.clear();
  serve_more_ = false;
}

Status Reactor::SettleCommit() {
  if (!commit_.InFlight()) return Status::Ok();
  std::vector<Pending> replies;
  WEFT_RETURN_IF_ERROR(commit_.Settle(replies));
  PublishAuth();
  PublishClusterWrites();
  Reply(replies);
  subscriptions_.Publish(commit_.TakeEvents());
  return Status::Ok();
}

void Reactor::JoinWhileCommitting(std::vector<Pending>* batch) {
  const std::size_t batch_max = static_cast<std::size_t>(config_.server.batch_max_messages);
  const auto until = std::chrono::steady_clock::now() + kTurnBudget;
  while (commit_.InFlight() && !read_waiting_ && batch->size() < batch_max &&
         std::chrono::steady_clock::now() < until) {
    if (!inbox_.empty() || Drain(batch_max - batch->size(), true) > 0) {
      HandleWrites(batch);
      continue;
    }
    // Both ROUTERs refused a receive: their descriptors signal what comes next.
    const int commit_fd = commit_.Socket();
    if (commit_fd < 0) return;
    pollfd items[] = {{commit_fd, POLLIN, 0}, {fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (::poll(items, 3, static_cast<int>(std::max<std::int64_t>(0, left.count()))) <= 0) return;
    if (items[0].revents != 0) return;  // its reply is there
    pending_[0] = pending_[0] || items[1].revents != 0;
    pending_[1] = pending_[1] || items[2].revents != 0;
  }
}

bool Reactor::ReadInInbox() const {
  for (const Inbound& in : inbox_)
    if (ReadOnly(in)) return true;
  return false;
}

void Reactor::AnswerAsFollower() {
  if (inbox_.empty()) return;
  const DaemonInfo& info = components_.info();
  const json status = {{"version", "0.1.0"},
                       {"protocol", wire::kProtocolVersion},
                       {"pid", getpid()},
                       {"started_at_ms", info.started_at_ms},
                       {"uptime_ms", clock_.NowMs() - info.started_at_ms},
                       {"endpoints", info.endpoints}};
  std::vector<Pending> replies;
  for (Inbound& in : inbox_) {
    if (in.request) in.pending.response = leader::AnswerAsFollower(*leadership_, in.pending.endpoint, *in.request, status);
    replies.push_back(std::move(in.pending));
  }
  inbox_.clear();
  Reply(replies);
}

// "12 s", or "1.5 s" below ten seconds.
std::string Seconds(std::int64_t ms) {
  ms = std::max<std::int64_t>(ms, 0);
  if (ms >= 10'000) return std::to_string((ms + 500) / 1000) + " s";
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

bool Reactor::AnswerWhileStoreWaits(const store::StoreOutage& outage, int pause_ms) {
  store_waited_ = true;
  // A leader whose lease could not be renewed meanwhile (its election's
  // connection is down too, as a rule) steps down now and answers as a
  // follower; a follower does not wait. Only from a turn's BEGIN, though: a
  // reload of the state after a rollback must end (Loop steps down if it fails).
  if (leadership_ && !leadership_->leader() && (!leading_ || store_wait_may_end_)) return false;
  if (leading_ && !front_paused_) {
    front_.SetServing(false);
    front_paused_ = true;
  }
  const Status why = Status::Unavailable(
      "this weftd's database, PostgreSQL at " + outage.server + ", has been unreachable for " +
      Seconds(outage.lost_ms_ago) + " (" + outage.why + "); weftd keeps trying" +
      (leadership_ ? " for " + Seconds(outage.left_ms) + " more, then steps down as leader" : " until it is back") +
      "; nothing of this request was done: retry");
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms);
  const std::size_t batch_max = static_cast<std::size_t>(config_.server.batch_max_messages);
  std::vector<Pending> replies;
  held_.AnswerAll(&replies, why);
  while (true) {
    // Until both ROUTERs refused a receive (a reply may consume their descriptor's signal: Reply).
    while (true) {
      Drain(batch_max, false);
      for (Inbound& in : inbox_) {
        if (in.request) in.pending.response = api::Response::Error(why);
        replies.push_back(std::move(in.pending));
      }
      inbox_.clear();
      if (replies.empty()) break;
      Reply(replies);
      replies.clear();
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    pollfd items[] = {{signal_fd_, POLLIN, 0}, {fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    const int rc = ::poll(items, 3, static_cast<int>(left.count()));
    if (rc > 0 && (items[0].revents & POLLIN)) {
      store_wait_signalled_ = true;  // Wait() reads it and stops
      return false;
    }
    if (rc > 0) {
      pending_[0] = pending_[0] || items[1].revents != 0;
      pending_[1] = pending_[1] || items[2].revents != 0;
    }
  }
}

// What of `store` was made with the key files: keys (principals), hosts,
// clusters, providers and services (sealed fields). Empty: a new store.
Result<std::string> StoreInUse(store::Store& store) {
  WEFT_ASSIGN_OR_RETURN(std::vector<store::PrincipalRecord> principals, store.ListPrincipals());
  if (!principals.empty()) return std::to_string(principals.size()) + " keys of users, hosts or tokens";
  WEFT_ASSIGN_OR_RETURN(std::vector<store::HostRecord> hosts, store.ListHosts());
  if (!hosts.empty()) return std::to_string(hosts.size()) + " hosts";
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ClusterCount> clusters, store.CountClusters());
  if (!clusters.empty()) return std::string("clusters");
  WEFT_ASSIGN_OR_RETURN(std::vector<store::TenantRecord> tenants, store.ListTenants());
  for (const store::TenantRecord& t : tenants) {
    for (const char* kind : {"provider", "service"}) {
      WEFT_ASSIGN_OR_RETURN(std::vector<store::CatalogEntityRecord> some,
                            store.ListCatalogEntities(t.name, kind, {}, 1));
      if (!some.empty()) return std::string(kind) + "s (whose sealed fields only keys/secrets.key opens)";
    }
  }
  return std::string();
}

// A store restored without <data_dir>/keys/ (or a second weftd on a shared
// PostgreSQL store given none): new keys would leave every sealed secret
// unopenable and every credential pointing at a key weftd no longer has, so
// weftd stops instead, unless told to start with new keys.
Status CheckKeyFiles(const Config& config, store::Store& store, bool new_keys) {
  const std::filesystem::path keys = config.server.data_dir / "keys";
  std::vector<std::string> missing;
  std::error_code ec;
  if (!std::filesystem::exists(keys / "secrets.key", ec)) missing.push_back((keys / "secrets.key").string());
  if (config.security.curve && !std::filesystem::exists(keys / "server.json", ec))
    missing.push_back((keys / "server.json").string());
  if (missing.empty()) return Status::Ok();
  WEFT_ASSIGN_OR_RETURN(std::string in_use, StoreInUse(store));
  if (in_use.empty()) return Status::Ok();  // a new store: its keys are made now
  std::string files;
  for (const std::string& f : missing) files += (files.empty() ? "" : " and ") + f;
  if (new_keys) {
    WEFT_LOG(kWarn, kLog) << "starting with new keys (--new-keys) although the store holds " << in_use << " and "
                          << files << (missing.size() == 1 ? " is" : " are")
                          << " missing: sealed secrets no longer open (put them again), and every credential and "
                             "host must be made or enrolled again";
    return Status::Ok();
  }
  return Status::Conflict(
      files + (missing.size() == 1 ? " is" : " are") + " missing, but the store holds " + in_use +
      ", made with the keys of <data_dir>/keys/; a restored store needs the keys/ directory it was backed up with "
      "(with several weftd on one database: a copy of the first weftd's keys/). Restore " + keys.string() +
      " and start again, or start once with --new-keys to make new keys (sealed secrets then no longer open, and "
      "every credential and host needs to be made or enrolled again)");
}

}  // namespace

Status LockDataDir(const std::filesystem::path& data_dir) {
  Status s = LockDirectory(data_dir, "weftd.lock", "weftd", "the data directory");
  if (s.code() == Code::kConflict) return Status::Conflict(s.message() + "; stop it first or give this one another --data-dir");
  if (!s.ok()) return Status::Unavailable(s.message() + "; or pass another --data-dir");
  return s;
}

// With the postgres store and [leader] enabled, weftd elects a leader among
// every weftd on that database; the connection string for it.
std::optional<std::string> ElectionConninfo(const Config& config) {
  if (config.store.backend != "postgres" || !config.leader.enabled) return std::nullopt;
  return config.store.conninfo;
}

// A data directory made by an earlier weftd (or by hand) may hold the store,
// resources and keys readable by anyone on the machine: they are made the
// owner's alone, and each change is logged.
void KeepPrivate(const std::filesystem::path& data_dir) {
  namespace fs = std::filesystem;
  for (const char* name : {"weft.db", "weft.db-wal", "weft.db-shm", "resources", "keys", "credentials"}) {
    const fs::path path = data_dir / name;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path, ec);
    if (ec || !fs::exists(st) || fs::is_symlink(st)) continue;
    const fs::perms others = fs::perms::group_all | fs::perms::others_all;
    if ((st.permissions() & others) == fs::perms::none) continue;
    fs::permissions(path, others, fs::perm_options::remove, ec);
    if (ec) {
      WEFT_LOG(kWarn, kLog) << path.string() << " is readable by other users and could not be made private: "
                            << ec.message();
      continue;
    }
    WEFT_LOG(kInfo, kLog) << "made " << path.string() << " readable by its owner only (it was open to other users)";
  }
}

Status RunDaemon(const Config& config, int signal_fd, bool new_keys) {
  KeepPrivate(config.server.data_dir);
  store::StoreOptions options;
  options.busy_timeout_ms = static_cast<int>(config.store.busy_timeout_ms);
  if (config.store.backend == "postgres") {
    options.backend = store::Backend::kPostgres;
    options.conninfo = config.store.conninfo;
    options.reconnect_timeout_ms = static_cast<int>(config.store.reconnect_timeout_ms);
    options.call_timeout_ms = static_cast<int>(config.store.call_timeout_ms);
    options.connect_timeout_ms = static_cast<int>(config.store.connect_timeout_ms);
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store,
                        store::Store::Open(config.server.data_dir / "weft.db", options));
  WEFT_RETURN_IF_ERROR(CheckKeyFiles(config, *store, new_keys));
  auto reactor = std::make_unique<Reactor>(config, signal_fd, *store, options, ElectionConninfo(config));
  Status s = reactor->Start();
  if (s.ok()) s = reactor->Loop();
  reactor->Shutdown();
  reactor.reset();  // sockets and context close before the store
  if (s.ok()) {
    WEFT_LOG(kInfo, kLog) << "stopped cleanly";
  }
  return s;
}

}  // namespace weft::server
