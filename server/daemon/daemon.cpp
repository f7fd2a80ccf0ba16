#include "server/daemon/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <zmq.hpp>

#include "server/api/router.hpp"
#include "server/auth/auth.hpp"
#include "server/auth/auth_ops.hpp"
#include "server/daemon/components.hpp"
#include "server/daemon/ports.hpp"
#include "server/queue/task_queue.hpp"
#include "server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/log.hpp"
#include "weft/common/log_tally.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {
namespace {

using api::Endpoint;
using json = nlohmann::json;

constexpr const char* kLog = "weftd";
// The longest the loop sleeps with no timer due: bounds how late a clock
// jump or a missed timer is noticed.
constexpr std::int64_t kMaxSleepMs = 1000;
constexpr std::int64_t kSubscriptionCheckMs = 20;
// How often a busy reactor, which never sleeps in poll, looks for a signal.
constexpr std::int64_t kSignalCheckMs = 20;
// How long one turn may spend handling a batch's writes, and then serving
// held takes, before it commits what it has and answers: a read that arrives
// meanwhile waits for at most about this much (twice) plus a commit. The
// requests left over are handled first in the next turn. Wall time, not
// weftd's clock: it only paces the loop.
constexpr auto kTurnBudget = std::chrono::milliseconds(4);
// How long after a turn starts requests that arrive meanwhile still join its
// commit (only those already there when the reactor looks; it never waits).
constexpr auto kJoinWindow = std::chrono::microseconds(100);
// Requests decoded but not yet handled, at most this many batches' worth:
// beyond it the loop stops receiving and ZeroMQ queues (and pushes back).
constexpr std::size_t kMaxInboxBatches = 2;
// Undelivered replies and host requests beyond the first of an interval are only counted.
constexpr std::int64_t kTallyMs = 5000;
// Memory before authentication (docs/security.md, "Hostile input"). ZeroMQ
// keeps a message until its last frame has arrived, so what weftd can bound
// is each frame (ZMQ_MAXMSGSIZE, per socket: hosts send a JSON header and
// nothing else, so the provisioner takes frames of limits.max_header_bytes
// plus CurveZMQ's few dozen bytes per frame), the messages queued per
// connection (ZMQ_RCVHWM), and what it keeps of each message once read:
// from a key it does not know, a request of one frame of at most
// kUnknownKeyBytes, and kUnknownKeyPeerBytes waiting per connection. More is
// read and dropped frame by frame, never kept.
constexpr std::size_t kCurveFrameOverhead = 64;
constexpr int kProvisionerRcvHwm = 8;
constexpr std::size_t kUnknownKeyBytes = 64 * 1024;
constexpr std::size_t kUnknownKeyPeerBytes = 2 * kUnknownKeyBytes;
// Above this size a message is checked against its connection's budget of bytes waiting in the inbox.
constexpr std::size_t kPeerCheckBytes = 64 * 1024;

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

// Binds `configured`; with TCP port `*`, the port of the last run first (see
// ports.hpp), and a new one only when that is taken. Throws what bind throws.
void BindKeepingPort(zmq::socket_t& socket, const char* name, const std::string& configured, const json& previous) {
  const std::string again = PreviousAddress(previous, name, configured);
  if (again != configured) {
    try {
      socket.bind(again);
      return;
    } catch (const zmq::error_t& e) {
      WEFT_LOG(kWarn, kLog) << "the " << name << " endpoint cannot have its previous address " << again << " again ("
                            << e.what() << "); binding a new port for " << configured
                            << ": hosts and clients that know the old address must be given the new one";
    }
  }
  socket.bind(configured);
}

// Sends the routing envelope, then `frames`, as one message; false if the
// socket refused (with ROUTER_MANDATORY: the peer is gone). No copy of either.
bool SendWithEnvelope(zmq::socket_t& socket, wire::Frames& envelope, wire::Frames& frames) {
  try {
    for (zmq::message_t& e : envelope)
      if (!socket.send(e, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
  } catch (const zmq::error_t&) {
    return false;
  }
  return wire::SendMultipart(socket, frames);
}

// A request whose reply waits for the batch's commit.
struct Pending {
  Endpoint endpoint = Endpoint::kApi;
  wire::Frames envelope;
  std::string id;
  api::Response response;
  std::optional<queue::AttemptRef> delivers;  // a take's reply carrying a task
  std::string key;      // the connection's CurveZMQ key (ZAP User-Id)
  std::string address;  // the peer's address, for host requests
};

// A request taken off a ROUTER and decoded, not handled yet.
struct Inbound {
  Pending pending;                       // endpoint, envelope, id; a malformed request's error
  std::optional<wire::Request> request;  // nullopt: malformed, pending.response says why
  std::size_t bytes = 0;                 // the frames' size, for the connection's budget
};

// How much of one message weftd keeps (frames include the routing envelope).
struct Bound {
  std::size_t frames = 0;
  std::size_t bytes = 0;
};

// A task.take held open until a task is ready or its deadline passes.
struct Waiter {
  wire::Frames envelope;
  std::string id;
  std::string host_id;
  std::string tenant;  // the take's "tenant"; empty: any tenant
  std::int64_t until_ms = 0;
  std::string key;  // the key that asked (security on): once it is revoked, the take ends
};

class Reactor {
 public:
  Reactor(const Config& config, int signal_fd, store::Store& store)
      : config_(config),
        signal_fd_(signal_fd),
        store_(store),
        clock_(SystemClock::Instance()),
        components_(config, store, clock_),
        queue_(components_.queue()),
        registry_(components_.registry()),
        ctx_(1),
        api_(ctx_, zmq::socket_type::router),
        prov_(ctx_, zmq::socket_type::router),
        events_(ctx_, zmq::socket_type::xpub) {}

  Status Start();
  Status Loop();
  void Shutdown();

 private:
  zmq::socket_t& Socket(Endpoint e) { return e == Endpoint::kApi ? api_ : prov_; }
  std::int64_t PollTimeoutMs(std::int64_t now) const;
  // Receives one message frame by frame, keeping what its sender's Bound
  // allows and dropping the rest as it comes; false when nothing was ready.
  // `*over`: something was dropped.
  bool ReceiveBounded(Endpoint endpoint, wire::Frames& out, std::size_t* bytes, bool* over);
  Bound BoundFor(Endpoint endpoint, zmq::message_t& first) const;
  // Whether the connection of `in` may have it waiting too (its budget of bytes in the inbox).
  bool WithinPeerBudget(const Inbound& in) const;
  // Splits the envelope and decodes; false when the message cannot be answered (no envelope).
  // `over`: ReceiveBounded dropped part of it, which is answered TOO_LARGE.
  bool Decode(Endpoint endpoint, wire::Frames frames, bool over, Inbound* out);
  void Receive(Inbound in, std::vector<Pending>* batch_out);
  void Handle(Pending& p, const wire::Request& request);
  bool Admit(const std::string& connection);
  // Answers, ahead of the batch and before its commit, the read-only api
  // requests in inbox_ that no earlier request of the same peer precedes.
  // Returns whether it sent anything (on the api socket).
  bool AnswerReads();
  // Serves held takes until `deadline`; sets serve_more_ when it stopped early.
  void ServeWaiters(std::vector<Pending>* out, bool force, std::chrono::steady_clock::time_point deadline);
  // Whether the key that asked for a held take still acts for its host.
  bool WaiterKeyInForce(const Waiter& w) const;
  void Send(std::vector<Pending>& replies);
  void Publish();
  // Reads new subscriptions now and then and tells the components whether events are wanted.
  void CheckSubscriptions();
  void ReadSubscriptions();
  std::vector<std::string> AllowedTopics(const std::string& key, const std::string& prefix);
  Status Recover(const Status& why, std::vector<Pending>& replies);
  Status StartSecurity();
  Status WriteSuperadminCredential(const std::string& api_endpoint);

  const Config& config_;
  int signal_fd_;
  store::Store& store_;
  const Clock& clock_;
  // Everything but the sockets and the loop (the composition root).
  Components components_;
  queue::TaskQueue& queue_;
  auth::Registry& registry_;
  curve::KeyPair server_keys_;
  zmq::context_t ctx_;
  zmq::socket_t api_;
  zmq::socket_t prov_;
  zmq::socket_t events_;
  std::unique_ptr<auth::ZapHandler> zap_;  // after ctx_: stops before the context ends
  // Topic prefixes someone subscribed to. The events socket is an XPUB so
  // that, with nobody listening, events are not even built.
  std::set<std::string> subscriptions_;
  std::int64_t next_subscription_check_ms_ = 0;
  std::list<Waiter> waiters_;
  struct Bucket {
    double tokens = 0;
    std::int64_t at_ms = 0;
    bool warned = false;
  };
  std::map<std::string, Bucket> buckets_;  // api connections' rate limits
  // Decoded requests in arrival order; a turn handles them from the front.
  std::deque<Inbound> inbox_;
  // A turn ran out of time before serving every held take it could.
  bool serve_more_ = false;
  std::vector<queue::AttemptRef> undelivered_;
  std::int64_t next_silence_check_ms_ = 0;
  bool stop_ = false;
  // What peers can make happen by the thousand is logged as a tally.
  log::Tally tally_{log::Level::kInfo, kLog, kTallyMs};
};

Status Reactor::Start() {
  WEFT_RETURN_IF_ERROR(components_.Start());
  if (config_.security.curve) WEFT_RETURN_IF_ERROR(StartSecurity());
  json endpoints;
  const json previous = ReadBoundPorts(config_.server.data_dir);
  struct Binding {
    const char* name;
    zmq::socket_t* socket;
    const std::string* address;
  };
  const Binding bindings[] = {{"api", &api_, &config_.endpoints.api},
                              {"provisioner", &prov_, &config_.endpoints.provisioner},
                              {"events", &events_, &config_.endpoints.events}};
  for (const Binding& b : bindings) {
    try {
      b.socket->set(zmq::sockopt::linger, 200);
      if (b.socket != &events_) {
        // A reply to a peer that went away fails visibly instead of vanishing.
        b.socket->set(zmq::sockopt::router_mandatory, 1);
        // A frame larger than a whole message may be is refused by the
        // transport (the peer is disconnected) rather than buffered. With
        // CurveZMQ a frame counts with its encryption's few dozen bytes, so a
        // frame of exactly max_message_bytes is refused too.
        std::size_t max_frame = config_.limits.max_total_bytes;
        if (b.socket == &prov_) {
          // Anyone may connect here: hosts send one JSON header, so no frame may be larger.
          max_frame = std::min(max_frame, config_.limits.max_header_bytes + kCurveFrameOverhead);
          b.socket->set(zmq::sockopt::rcvhwm, kProvisionerRcvHwm);
        }
        b.socket->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_frame));
      }
      if (config_.security.curve) {
        curve::SetServerKey(*b.socket, server_keys_.secret_key, b.name);
        if (b.socket == &events_) b.socket->set(zmq::sockopt::xpub_manual, 1);
      }
      BindKeepingPort(*b.socket, b.name, *b.address, previous);
      endpoints[b.name] = wire::LastEndpoint(*b.socket);
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(std::string("cannot bind the ") + b.name + " endpoint to " + *b.address + ": " +
                                 e.what() + "; set endpoints." + b.name +
                                 " in weftd.toml to a free address (port * picks one)");
    }
  }
  const std::int64_t now = clock_.NowMs();
  components_.set_info(DaemonInfo{getpid(), now, config_.server.data_dir.string(), endpoints});
  json file = endpoints;
  file["pid"] = getpid();
  if (config_.security.curve) {
    file["server_key"] = server_keys_.public_key;
    WEFT_RETURN_IF_ERROR(WriteSuperadminCredential(endpoints["api"].get<std::string>()));
  }
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(config_.server.data_dir / "endpoints.json", wire::Dump(file) + "\n"));
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(BoundPortsPath(config_.server.data_dir), wire::Dump(endpoints) + "\n"));
  WEFT_LOG(kInfo, kLog) << "serving: api " << endpoints["api"].get<std::string>() << ", provisioner "
                        << endpoints["provisioner"].get<std::string>() << ", events "
                        << endpoints["events"].get<std::string>() << "; data in "
                        << config_.server.data_dir.string() << "; " << queue_.queued() << " tasks queued, "
                        << queue_.leased() << " leased";
  return Status::Ok();
}

std::int64_t Reactor::PollTimeoutMs(std::int64_t now) const {
  std::int64_t due = now + kMaxSleepMs;
  if (auto e = queue_.NextExpiryMs()) due = std::min(due, *e);
  for (const Waiter& w : waiters_) due = std::min(due, w.until_ms);
  due = std::min(due, next_silence_check_ms_);
  if (!undelivered_.empty() || !inbox_.empty() || serve_more_) due = now;
  return std::max<std::int64_t>(0, due - now);
}

// A token bucket per api connection (its routing id): one noisy client gets
// refusals while every other connection, and the provisioner endpoint, is served.
bool Reactor::Admit(const std::string& connection) {
  const std::int64_t rate = config_.security.api_rate_per_s;
  if (rate <= 0) return true;
  const std::int64_t now = clock_.NowMs();
  if (buckets_.size() > 10000) {
    // Forget connections that have been quiet for a while (their buckets are full again).
    for (auto it = buckets_.begin(); it != buckets_.end();)
      it = now - it->second.at_ms > 60'000 ? buckets_.erase(it) : std::next(it);
  }
  auto [it, fresh] = buckets_.try_emplace(connection, Bucket{static_cast<double>(config_.security.api_burst), now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min<double>(static_cast<double>(config_.security.api_burst),
                                b.tokens + static_cast<double>(now - b.at_ms) * static_cast<double>(rate) / 1000.0);
    b.at_ms = now;
  }
  if (b.tokens < 1.0) {
    if (!b.warned) {
      b.warned = true;
      WEFT_LOG(kWarn, kLog) << "an api connection exceeds " << rate
                            << " requests/s (security.api_rate_per_s); refusing its excess (logged once)";
    }
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

Bound Reactor::BoundFor(Endpoint endpoint, zmq::message_t& first) const {
  // Routing id, REQ's empty delimiter, then the message's own frames.
  const Bound known{config_.limits.max_frames + 2, config_.limits.max_total_bytes + 1024};
  if (endpoint != Endpoint::kProvisioner || !config_.security.curve) return known;
  try {
    if (registry_.Find(first.gets("User-Id"))) return known;
  } catch (const zmq::error_t&) {
  }
  return Bound{3, kUnknownKeyBytes};
}

bool Reactor::ReceiveBounded(Endpoint endpoint, wire::Frames& out, std::size_t* bytes, bool* over) {
  zmq::socket_t& socket = Socket(endpoint);
  out.clear();
  *bytes = 0;
  *over = false;
  zmq::message_t part;
  if (!socket.recv(part, zmq::recv_flags::dontwait)) return false;
  bool more = part.more();
  *bytes = part.size();
  out.push_back(std::move(part));  // the routing id, which ROUTER adds
  std::optional<Bound> bound;
  while (more) {
    zmq::message_t next;
    (void)socket.recv(next);  // the rest of a message is there already
    more = next.more();
    if (!bound) bound = BoundFor(endpoint, next);
    *bytes += next.size();
    if (*over || out.size() >= bound->frames || *bytes > bound->bytes) {
      *over = true;  // `next` is freed here
      continue;
    }
    out.push_back(std::move(next));
  }
  return true;
}

bool Reactor::WithinPeerBudget(const Inbound& in) const {
  const bool unknown = in.pending.endpoint == Endpoint::kProvisioner && config_.security.curve &&
                       registry_.Find(in.pending.key) == nullptr;
  if (!unknown && in.bytes < kPeerCheckBytes) return true;
  const std::size_t budget = unknown ? kUnknownKeyPeerBytes : 2 * config_.limits.max_total_bytes;
  const zmq::message_t& rid = in.pending.envelope.front();
  std::size_t waiting = in.bytes;
  for (const Inbound& other : inbox_) {
    const zmq::message_t& o = other.pending.envelope.front();
    if (other.pending.endpoint == in.pending.endpoint && o.size() == rid.size() &&
        std::memcmp(o.data(), rid.data(), rid.size()) == 0)
      waiting += other.bytes;
  }
  return waiting <= budget;
}

bool Reactor::Decode(Endpoint endpoint, wire::Frames frames, bool over, Inbound* out) {
  Pending& p = out->pending;
  p.endpoint = endpoint;
  wire::SplitEnvelope(frames, p.envelope);
  if (p.envelope.empty()) {
    WEFT_LOG(kWarn, kLog) << "dropped a message without a routing envelope on the "
                          << api::EndpointName(endpoint) << " endpoint: no reply is possible";
    return false;
  }
  if (over) {
    // Only what was kept is here: enough for the request id, if its header was small enough.
    std::string id;
    (void)wire::DecodeRequest(frames, config_.limits, &id);
    p.id = id;
    p.response = api::Response::Error(Status::TooLarge(
        "this request is larger than weftd accepts from this key (a key weftd does not know may send one frame of "
        "at most " + std::to_string(kUnknownKeyBytes / 1024) + " KiB; see limits in weftd.toml for others)"));
    return true;
  }
  if (endpoint == Endpoint::kApi && !Admit(p.envelope.front().to_string())) {
    std::string id;
    (void)wire::DecodeRequest(frames, config_.limits, &id);
    p.id = id;
    // TOO_LARGE like every other limit; never UNAVAILABLE, which would roll the batch back.
    p.response = api::Response::Error(Status::TooLarge(
        "rate limit: this connection made more than " + std::to_string(config_.security.api_rate_per_s) +
        " requests per second (security.api_rate_per_s); slow down and retry"));
    return true;  // no request: Receive answers the refusal
  }
  if (config_.security.curve && !frames.empty()) {
    // The ZAP handler's User-Id (the client's public key) rides on every frame.
    try {
      p.key = frames[0].gets("User-Id");
      if (p.endpoint == Endpoint::kProvisioner) p.address = frames[0].gets("Peer-Address");
    } catch (const zmq::error_t&) {
    }
  }
  Result<wire::Request> request = wire::DecodeRequest(frames, config_.limits, &p.id);
  if (!request.ok()) {
    WEFT_LOG(kDebug, kLog) << "malformed request on " << api::EndpointName(endpoint) << ": "
                           << request.status().message();
    p.response = api::Response::Error(request.status());
    return true;
  }
  out->request = std::move(*request);
  return true;
}

void Reactor::Receive(Inbound in, std::vector<Pending>* batch) {
  Pending& p = in.pending;
  if (!in.request) {
    batch->push_back(std::move(p));
    return;
  }
  Handle(p, *in.request);
  if (!p.response.held) {
    batch->push_back(std::move(p));
    return;
  }
  waiters_.push_back(Waiter{std::move(p.envelope), std::move(p.id), p.response.held_host_id,
                            std::move(p.response.held_tenant), p.response.held_until_ms, std::move(p.key)});
}

bool Reactor::AnswerReads() {
  // A read sees the store and the in-memory state as the last commit left
  // them (nothing of this turn is handled yet), so its reply reports nothing
  // uncommitted and need not wait for the writes. Requests from one peer stay
  // in order: a read behind a write of the same peer waits with the batch.
  std::vector<Pending> reads;
  std::unordered_set<std::string_view> writers;  // routing ids with an earlier request still queued
  for (auto it = inbox_.begin(); it != inbox_.end();) {
    const zmq::message_t& rid = it->pending.envelope.front();
    const std::string_view peer(static_cast<const char*>(rid.data()), rid.size());
    const bool read = it->pending.endpoint == Endpoint::kApi && it->request &&
                      components_.router().ReadOnly(it->request->op) && !writers.count(peer);
    if (!read) {
      writers.insert(peer);
      ++it;
      continue;
    }
    Handle(it->pending, *it->request);
    reads.push_back(std::move(it->pending));
    it = inbox_.erase(it);
  }
  if (reads.empty()) return false;
  Send(reads);
  return true;
}

void Reactor::Handle(Pending& p, const wire::Request& request) {
  api::Call call;
  call.endpoint = p.endpoint;
  call.request = &request;
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
  p.response = components_.router().Route(call);
  // A take (or a finish that takes the next task) hands out an attempt: if the
  // reply cannot be delivered, the attempt is released at once.
  if ((request.op == "task.take" || request.op == "task.finish") && p.response.status.ok() && !p.response.held) {
    auto task = p.response.body.find("task");
    if (task != p.response.body.end() && task->is_object())
      p.delivers = queue::AttemptRef{(*task)["task_id"].get<std::int64_t>(), (*task)["attempt"].get<std::int64_t>()};
  }
}

void Reactor::ServeWaiters(std::vector<Pending>* out, bool force, std::chrono::steady_clock::time_point deadline) {
  const std::int64_t now = clock_.NowMs();
  const bool ready = queue_.TakeReadyChanged() || force;
  serve_more_ = false;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!WaiterKeyInForce(*it)) {
      // Revoked by any path (host.revoke, a new key by enrollment or accept):
      // what it waited for must not go to a key that no longer speaks for the host.
      Pending p{Endpoint::kProvisioner, std::move(it->envelope), it->id,
                api::Response::Error(Status::Denied("host '" + it->host_id + "': this key " +
                                                    curve::ShortKey(it->key) + " was revoked while it waited for a task")),
                {}, {}, {}};
      out->push_back(std::move(p));
      it = waiters_.erase(it);
      continue;
    }
    json task;
    if ((ready || queue_.queued() > 0) && components_.dispatcher().CanServe(it->host_id, it->tenant)) {
      Result<json> taken = components_.dispatcher().TryTake(it->host_id, it->tenant);
      if (!taken.ok()) {
        Pending p{Endpoint::kProvisioner, std::move(it->envelope), it->id, api::Response::Error(taken.status()), {}, {}, {}};
        out->push_back(std::move(p));
        it = waiters_.erase(it);
        continue;
      }
      task = std::move(*taken);
    }
    if (task.is_object() || it->until_ms <= now) {
      const bool served = task.is_object();
      std::optional<queue::AttemptRef> delivers;
      if (served)
        delivers = queue::AttemptRef{task["task_id"].get<std::int64_t>(), task["attempt"].get<std::int64_t>()};
      json body = json::object();
      body["task"] = std::move(task);
      Pending p{Endpoint::kProvisioner, std::move(it->envelope), it->id, api::Response::Ok(std::move(body)), delivers, {}, {}};
      out->push_back(std::move(p));
      it = waiters_.erase(it);
      // Handing out a task is the costly part: past the budget, the rest next turn (which comes at once).
      if (served && it != waiters_.end() && std::chrono::steady_clock::now() >= deadline) {
        serve_more_ = true;
        return;
      }
      continue;
    }
    ++it;
  }
}

bool Reactor::WaiterKeyInForce(const Waiter& w) const {
  if (!config_.security.curve) return true;
  const auth::KeyEntry* e = registry_.Find(w.key);
  return e && e->kind == auth::Kind::kHost && e->host_id == w.host_id;
}

void Reactor::Send(std::vector<Pending>& replies) {
  for (Pending& p : replies) {
    wire::Reply reply = p.response.status.ok() ? wire::Reply::Success(p.id, std::move(p.response.body))
                                               : wire::Reply::Failure(p.id, p.response.status, p.response.details);
    if (p.response.status.ok()) reply.blobs = std::move(p.response.blobs);
    wire::Frames frames = wire::EncodeReply(reply);
    if (SendWithEnvelope(Socket(p.endpoint), p.envelope, frames)) continue;
    if (tally_.Count("replies not delivered", clock_.NowMs())) {
      WEFT_LOG(kInfo, kLog) << "could not deliver the reply to request '" << p.id << "' on the "
                            << api::EndpointName(p.endpoint) << " endpoint: the peer is gone or not reading";
    }
    if (p.delivers) undelivered_.push_back(*p.delivers);
  }
}

// What a subscription to `prefix` by `key` may deliver (security on): a
// superadmin anything; a tenant admin their tenant's topics; a user the topics
// of the clusters they own when they subscribe. A prefix broader than what the
// key may see becomes the topics it may; one outside them, nothing.
std::vector<std::string> Reactor::AllowedTopics(const std::string& key, const std::string& prefix) {
  const auth::KeyEntry* e = registry_.Find(key);
  if (!e || e->kind != auth::Kind::kUser) return {};
  if (e->role == "superadmin") return {prefix};
  const std::string mine = e->tenant + "/";
  if (e->role == "admin") {
    if (prefix.rfind(mine, 0) == 0) return {prefix};
    if (mine.rfind(prefix, 0) == 0) return {mine};
    return {};
  }
  std::vector<std::string> out;
  Result<std::vector<store::ClusterRecord>> clusters = store_.ListClusters(e->tenant, false);
  if (!clusters.ok()) return out;
  for (const store::ClusterRecord& c : *clusters) {
    if (c.owner != e->user) continue;
    for (const char* kind : {"job/", "cluster/", "task/"}) {
      const std::string topic = mine + kind + c.id + "/";
      if (topic.rfind(prefix, 0) == 0) {
        out.push_back(topic);
      } else if (prefix.rfind(topic, 0) == 0) {
        out.push_back(prefix);
      }
    }
  }
  return out;
}

void Reactor::ReadSubscriptions() {
  // Without security XPUB passes on the first subscription to a topic and the
  // last unsubscription from it: a set of prefixes is exact. With security it
  // runs in manual mode: every (un)subscription comes here with the
  // subscriber's key and is applied, narrowed to what the key may see, to
  // that subscriber's pipe alone.
  while (true) {
    zmq::message_t m;
    try {
      if (!events_.recv(m, zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t& e) {
      WEFT_LOG(kWarn, kLog) << "events endpoint: cannot read subscriptions: " << e.what();
      return;
    }
    if (m.size() == 0) continue;
    const char* data = static_cast<const char*>(m.data());
    std::string prefix(data + 1, m.size() - 1);
    if (config_.security.curve) {
      if (data[0] != 0 && data[0] != 1) continue;
      std::string key;
      try {
        key = m.gets("User-Id");
      } catch (const zmq::error_t&) {
        continue;  // libzmq's own unsubscription of a pipe that closed
      }
      for (const std::string& topic : AllowedTopics(key, prefix)) {
        try {
          if (data[0] == 1) {
            events_.set(zmq::sockopt::subscribe, topic);
          } else {
            events_.set(zmq::sockopt::unsubscribe, topic);
          }
        } catch (const zmq::error_t& e) {
          WEFT_LOG(kWarn, kLog) << "events endpoint: cannot apply a subscription: " << e.what();
        }
      }
      continue;
    }
    if (data[0] == 1) {
      subscriptions_.insert(std::move(prefix));
    } else if (data[0] == 0) {
      subscriptions_.erase(prefix);
    }
  }
}

void Reactor::CheckSubscriptions() {
  // Checked now and then, not every turn: an empty receive costs a system
  // call, and a new subscriber misses the first moments anyway (PUB/SUB).
  const std::int64_t now = clock_.NowMs();
  if (now < next_subscription_check_ms_) return;
  ReadSubscriptions();
  next_subscription_check_ms_ = now + kSubscriptionCheckMs;
  // (In manual mode, with security, weftd does not see subscribers leave: events are always built.)
  components_.set_events_wanted(!subscriptions_.empty() || config_.security.curve);
}

void Reactor::Publish() {
  CheckSubscriptions();
  if (subscriptions_.empty() && !config_.security.curve) {
    components_.DiscardEvents();
    return;
  }
  for (Event& e : components_.DrainEvents()) {
    try {
      zmq::message_t topic(e.topic.data(), e.topic.size());
      std::string body = wire::Dump(e.payload);
      zmq::message_t payload(body.data(), body.size());
      // PUB never blocks: a slow subscriber loses messages at its high-water mark.
      if (!events_.send(topic, zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
          !events_.send(payload, zmq::send_flags::dontwait)) {
        WEFT_LOG(kDebug, kLog) << "event " << e.topic << " not published";
      }
    } catch (const zmq::error_t& err) {
      WEFT_LOG(kWarn, kLog) << "cannot publish event " << e.topic << ": " << err.what();
    }
  }
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
  zap_ = std::make_unique<auth::ZapHandler>(ctx_, components_.keys(), clock_, config_.security.host_requests);
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
    }
    Result<curve::KeyPair> pair = curve::Generate();
    if (!pair.ok()) return pair.status();
    c.keys = *pair;
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
  WEFT_RETURN_IF_ERROR(store_.Begin());
  Status s = registry_.EnsureSuperadmin(c.keys.public_key);
  if (s.ok()) s = store_.Commit();
  if (!s.ok()) {
    (void)store_.Rollback();
    return s.WithContext("cannot record the superadmin key");
  }
  return curve::SaveCredential(path, c);
}

Status Reactor::Recover(const Status& why, std::vector<Pending>& replies) {
  WEFT_LOG(kError, kLog) << "a batch of " << replies.size() << " requests was rolled back: " << why.message();
  Status rb = store_.Rollback();
  if (!rb.ok()) {
    WEFT_LOG(kError, kLog) << "rollback failed: " << rb.message();
  }
  // The in-memory indexes may hold changes that were just rolled back.
  WEFT_RETURN_IF_ERROR(components_.Reset());
  for (Pending& p : replies) {
    p.response = api::Response::Error(
        Status::Unavailable("the store could not commit this request (" + why.message() + "); retry it"));
    p.delivers.reset();
  }
  return Status::Ok();
}

Status Reactor::Loop() {
  const std::size_t batch_max = static_cast<std::size_t>(config_.server.batch_max_messages);
  std::vector<Pending> batch;
  // The ROUTERs are waited on through their ZMQ_FD, not zmq::poll: zmq::poll
  // asks every socket for ZMQ_EVENTS before and after it sleeps, and each ask
  // costs libzmq a poll(2) and a getpid(2), about eight system calls per turn
  // for one request. ZMQ_FD only signals *new* events, so the rule is: sleep on
  // it only once the socket has refused a receive since we last used it.
  // `pending[i]` is true while socket i may hold messages we have not seen:
  // after its descriptor fired, after a batch filled up, and after sending on
  // it (a send may process the socket's commands, consuming the signal).
  const Endpoint order[] = {Endpoint::kProvisioner, Endpoint::kApi};
  int fds[2];
  try {
    fds[0] = prov_.get(zmq::sockopt::fd);
    fds[1] = api_.get(zmq::sockopt::fd);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot read the ZeroMQ descriptors: ") + e.what());
  }
  bool pending[2] = {true, true};
  std::int64_t next_signal_check_ms = 0;
  // Spinning pays only while requests come back to back: it follows a turn
  // that answered requests, and only when the last wait for a request after
  // such a turn was shorter than the budget (so a trickle costs no CPU).
  const auto idle_spin = std::chrono::microseconds(config_.server.idle_spin_us);
  std::chrono::steady_clock::time_point spin_until;
  std::chrono::steady_clock::time_point waiting_since;  // the end of the last turn that answered requests
  std::chrono::steady_clock::duration last_wait{};
  while (!stop_) {
    std::int64_t now = clock_.NowMs();
    // Sleep when both ROUTERs are drained and no work is left over; otherwise
    // only look at the descriptors without waiting: the signal's now and then,
    // so that a steady load cannot hide a SIGTERM, and the ROUTERs' when they
    // are drained but the last turn left requests or held takes to handle.
    const bool drained = !pending[0] && !pending[1];
    const bool sleep = drained && inbox_.empty() && !serve_more_;
    if (drained || now >= next_signal_check_ms) {
      pollfd items[] = {{signal_fd_, POLLIN, 0}, {fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      const int timeout_ms = sleep ? static_cast<int>(PollTimeoutMs(now)) : 0;
      int rc = 0;
      if (timeout_ms > 0 && std::chrono::steady_clock::now() < spin_until) {
        // Hosts send their next request within a round trip of a reply, and
        // a thread that slept costs a wake-up to get going again (tens of
        // microseconds on a virtual machine): look without sleeping a while.
        do {
          rc = ::poll(items, 3, 0);
        } while (rc == 0 && std::chrono::steady_clock::now() < spin_until);
      }
      spin_until = {};
      if (rc == 0) rc = ::poll(items, drained ? 3 : 1, timeout_ms);
      if (rc > 0 && waiting_since != std::chrono::steady_clock::time_point{} &&
          (items[1].revents != 0 || items[2].revents != 0)) {
        last_wait = std::chrono::steady_clock::now() - waiting_since;
        waiting_since = {};
      }
      if (rc < 0) {
        if (errno == EINTR) continue;
        return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
      }
      if (items[0].revents & POLLIN) {
        signalfd_siginfo info;
        if (read(signal_fd_, &info, sizeof info) > 0) {
          WEFT_LOG(kInfo, kLog) << "signal " << info.ssi_signo << " received: shutting down";
        }
        stop_ = true;
        break;
      }
      if (drained) {
        pending[0] = items[1].revents != 0;
        pending[1] = items[2].revents != 0;
      }
      next_signal_check_ms = now + kSignalCheckMs;
    }

    // Drains both ROUTERs in turn into inbox_, up to `limit` requests in all;
    // `look`: first ask their descriptors (one poll(2), no waiting) whether a
    // socket that refused a receive has something new, which is cheaper than
    // an empty receive on each (a poll(2) and a getpid(2) apiece in libzmq).
    const auto drain = [&](std::size_t limit, bool look) {
      std::size_t got = 0;
      if (look && (!pending[0] || !pending[1])) {
        pollfd items[] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        if (::poll(items, 2, 0) > 0) {
          pending[0] = pending[0] || items[0].revents != 0;
          pending[1] = pending[1] || items[1].revents != 0;
        }
      }
      while (inbox_.size() < limit && (pending[0] || pending[1])) {
        for (int i = 0; i < 2 && inbox_.size() < limit; ++i) {
          if (!pending[i]) continue;
          wire::Frames frames;
          std::size_t bytes = 0;
          bool over = false;
          try {
            if (!ReceiveBounded(order[i], frames, &bytes, &over)) {
              pending[i] = false;
              continue;
            }
          } catch (const zmq::error_t& err) {
            WEFT_LOG(kWarn, kLog) << "receive failed on " << api::EndpointName(order[i]) << ": " << err.what();
            pending[i] = false;
            continue;
          }
          Inbound in;
          in.bytes = over ? 0 : bytes;  // (what was dropped is not kept)
          if (!Decode(order[i], std::move(frames), over, &in)) continue;
          if (!WithinPeerBudget(in)) {
            // The connection already has its share waiting: refuse this one without keeping it.
            in.request.reset();
            in.bytes = 0;
            in.pending.response = api::Response::Error(Status::TooLarge(
                "this connection has too much waiting to be handled; wait for replies before sending more"));
          }
          inbox_.push_back(std::move(in));
          ++got;
        }
      }
      return got;
    };
    // Up to one batch (requests left over from the last turn stay ahead of them).
    // While one ROUTER stays busy the loop never sleeps in poll(2), so the
    // other's descriptor is looked at here, every turn: otherwise a steady
    // stream of host requests would hide api requests (for seconds under load).
    drain(std::min(inbox_.size(), batch_max * (kMaxInboxBatches - 1)) + batch_max, pending[0] != pending[1]);

    now = clock_.NowMs();
    tally_.Flush(now);
    const bool expiry_due = queue_.NextExpiryMs() && *queue_.NextExpiryMs() <= now;
    const bool waiter_due = std::any_of(waiters_.begin(), waiters_.end(),
                                        [&](const Waiter& w) { return w.until_ms <= now; });
    const bool silence_due = now >= next_silence_check_ms_;
    if (inbox_.empty() && !expiry_due && !waiter_due && !silence_due && undelivered_.empty() && !serve_more_)
      continue;

    // Before anything of the turn happens: its transitions are recorded as
    // events only if someone listens.
    CheckSubscriptions();
    batch.clear();
    Status s = store_.Begin();
    if (!s.ok()) {
      // Nothing was changed; answer every request so that no one waits in vain.
      for (Inbound& in : inbox_) {
        in.pending.response = api::Response::Error(Status::Unavailable("the store is busy (" + s.message() + "); retry"));
        batch.push_back(std::move(in.pending));
      }
      inbox_.clear();
      Send(batch);
      for (const Pending& p : batch) pending[p.endpoint == Endpoint::kProvisioner ? 0 : 1] = true;
      continue;
    }
    // Sending may consume the socket's descriptor signal: look at it again.
    if (AnswerReads()) pending[1] = true;
    // The writes, oldest first, for up to one budget; the rest wait for the next turn.
    const auto turn_start = std::chrono::steady_clock::now();
    const auto writes_until = turn_start + kTurnBudget;
    std::size_t handled = 0;
    while (true) {
      for (; !inbox_.empty() && handled < batch_max; ++handled) {
        Inbound in = std::move(inbox_.front());
        inbox_.pop_front();
        Receive(std::move(in), &batch);
        if (std::chrono::steady_clock::now() >= writes_until) break;
      }
      // A commit costs more than a few requests (a dozen system calls and a
      // checksum per page): requests that arrived meanwhile join this one
      // while the turn is young. No waiting, only a look at the descriptors;
      // they are handled in order with the rest, so a read among them waits
      // for the commit.
      if (!inbox_.empty() || handled >= batch_max ||
          std::chrono::steady_clock::now() - turn_start >= kJoinWindow || drain(batch_max - handled, true) == 0)
        break;
    }
    if (s.ok()) {
      for (const queue::AttemptRef& ref : undelivered_) {
        s = queue_.Release(ref, "attempt " + std::to_string(ref.attempt) +
                                    " never reached its host: the reply to task.take could not be delivered");
        if (!s.ok()) break;
      }
      undelivered_.clear();
    }
    if (s.ok()) s = queue_.ExpireDue();
    if (s.ok() && silence_due) {
      s = components_.Janitor();
      next_silence_check_ms_ =
          now + std::max<std::int64_t>(50, std::min(config_.hosts.silent_after_ms / 4, config_.jobs.janitor_interval_ms));
    }
    if (s.ok()) ServeWaiters(&batch, serve_more_, std::chrono::steady_clock::now() + kTurnBudget);
    // A handler's store error leaves the transaction in an unknown state: roll it all back.
    for (const Pending& p : batch)
      if (s.ok() && (p.response.status.code() == Code::kInternal || p.response.status.code() == Code::kUnavailable))
        s = p.response.status;
    if (s.ok()) s = store_.Commit();
    if (!s.ok()) {
      WEFT_RETURN_IF_ERROR(Recover(s, batch));
      (void)components_.DrainEvents();
    }
    Send(batch);
    for (const Pending& p : batch) pending[p.endpoint == Endpoint::kProvisioner ? 0 : 1] = true;
    if (!batch.empty()) {
      waiting_since = std::chrono::steady_clock::now();
      if (last_wait <= idle_spin) spin_until = waiting_since + idle_spin;
    }
    Publish();
  }
  return Status::Ok();
}

void Reactor::Shutdown() {
  std::vector<Pending> replies;
  for (Inbound& in : inbox_) {
    in.pending.response = api::Response::Error(Status::Unavailable("weftd is shutting down; retry"));
    replies.push_back(std::move(in.pending));
  }
  inbox_.clear();
  for (Waiter& w : waiters_)
    replies.push_back(Pending{Endpoint::kProvisioner, std::move(w.envelope), w.id,
                              api::Response::Error(Status::Unavailable("weftd is shutting down; retry the take")), {}, {}, {}});
  waiters_.clear();
  Send(replies);
  std::error_code ec;
  std::filesystem::remove(config_.server.data_dir / "endpoints.json", ec);
}

}  // namespace

Status LockDataDir(const std::filesystem::path& data_dir) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec)
    return Status::Unavailable("cannot create the data directory " + data_dir.string() + ": " + ec.message() +
                               "; create it or pass another --data-dir");
  const std::filesystem::path lock_path = data_dir / "weftd.lock";
  // Deliberately never closed: the lock lives as long as the process.
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::Unavailable("cannot open " + lock_path.string() + ": " + std::strerror(errno) +
                               "; check the permissions of the data directory");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("unknown");
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    close(fd);
    return Status::Conflict("another weftd (pid " + pid + ") is already using the data directory " +
                            data_dir.string() + "; stop it first or give this one another --data-dir");
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    WEFT_LOG(kWarn, kLog) << "cannot record the pid in " << lock_path.string() << ": " << std::strerror(errno);
  }
  return Status::Ok();
}

Status RunDaemon(const Config& config, int signal_fd) {
  store::StoreOptions options;
  options.busy_timeout_ms = static_cast<int>(config.store.busy_timeout_ms);
  Result<std::unique_ptr<store::Store>> store = store::Store::Open(config.server.data_dir / "weft.db", options);
  if (!store.ok()) return store.status();
  auto reactor = std::make_unique<Reactor>(config, signal_fd, **store);
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
