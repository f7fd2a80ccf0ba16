// The ZAP handler: libzmq sends it one request per CURVE handshake on a
// socket of the context, and waits for the answer before it lets the peer in.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "weft/server/auth/auth.hpp"
#include "weft/common/log.hpp"
#include "weft/common/probe_key.hpp"

namespace weft::auth {
namespace {

constexpr const char* kLog = "auth";
constexpr std::size_t kMaxLogged = 10000;  // refused keys remembered, so each is logged once
// Refused keys beyond the first of an interval are only counted (log::Tally).
constexpr std::int64_t kTallyMs = 5000;
// Connections of a watched socket whose peer address is remembered until they end.
constexpr std::size_t kMaxPeers = 100000;

// The IP address of the peer of a connected socket descriptor; "" when it cannot be read.
std::string PeerAddress(int fd) {
  sockaddr_storage peer{};
  socklen_t size = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  const void* at = peer.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr)
                   : peer.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&peer)->sin_addr)
                                               : nullptr;
  return at && inet_ntop(peer.ss_family, at, text, sizeof text) ? text : "";
}

// Why a key was refused on `domain` (the endpoint), in words that say what to do.
std::string RefusedBecause(const KeyEntry* entry, bool spent, const std::string& domain) {
  if (!entry) return spent ? "revoked, used up or expired" : "unknown";
  if (entry->kind == Kind::kUser)
    return "it is the key of user '" + entry->user + "' of tenant '" + entry->tenant +
           "', and users send requests to the api endpoint (endpoints.json's \"api\"), not the " + domain + " one";
  return std::string(entry->kind == Kind::kHost ? "it is host '" + entry->host_id + "''s key"
                                                : std::string("it is an enroll token's key")) +
         ", and hosts send requests to the provisioner endpoint (endpoints.json's \"provisioner\"), not the " +
         domain + " one";
}

}  // namespace

Status ZapHandler::Watch(zmq::socket_t& socket, const std::string& endpoint) {
  const std::string address = "inproc://weftd.handshakes." + endpoint;
  try {
    auto w = std::make_unique<Watched>();
    w->endpoint = endpoint;
    // Connection events only, a few per connection; read at once by Run.
    if (zmq_socket_monitor(socket.handle(), address.c_str(),
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
      throw zmq::error_t();
    w->monitor = zmq::socket_t(ctx_, zmq::socket_type::pair);
    w->monitor.set(zmq::sockopt::linger, 0);
    w->monitor.connect(address);
    watched_.push_back(std::move(w));
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot watch the handshakes of the " + endpoint + " endpoint: " + e.what());
  }
  return Status::Ok();
}

void ZapHandler::Receive(Watched& w) {
  while (true) {
    zmq::message_t head, address;
    try {
      if (!w.monitor.recv(head, zmq::recv_flags::dontwait)) return;
      if (head.more()) (void)w.monitor.recv(address);
    } catch (const zmq::error_t&) {
      return;
    }
    if (head.size() < 6) continue;
    Event e;
    std::memcpy(&e.event, head.data(), sizeof e.event);
    std::memcpy(&e.value, static_cast<const char*>(head.data()) + sizeof e.event, sizeof e.value);
    w.received.push_back(std::move(e));
  }
}

// The events come in the order the socket's I/O thread sends them. A
// connection's DISCONNECTED is sent before libzmq closes its descriptor, which
// a later connection may then be given: a peer read from the descriptor of an
// ACCEPTED is that connection's only if its DISCONNECTED had not been sent
// when the read was made, that is if none came by the next receive after it.
// A peer that cannot be known so stays unnamed ("").
void ZapHandler::DrainWatched() {
  for (const std::unique_ptr<Watched>& w : watched_) {
    // A bounded number of rounds, so that a flood of connections does not keep ZAP requests waiting.
    for (int round = 0; round < 8; ++round) {
      Receive(*w);
      std::vector<Event>& received = w->received;
      if (received.empty()) break;
      const auto closed_after = [&](std::size_t i) {
        for (std::size_t j = i + 1; j < received.size(); ++j)
          if (received[j].event == ZMQ_EVENT_DISCONNECTED && received[j].value == received[i].value) return true;
        return false;
      };
      for (std::size_t i = 0; i < received.size(); ++i) {
        Event& e = received[i];
        if (e.event != ZMQ_EVENT_ACCEPTED || e.read) continue;
        e.read = true;
        if (!closed_after(i)) e.peer = PeerAddress(static_cast<int>(e.value));
      }
      const std::size_t settled = received.size();
      Receive(*w);
      for (std::size_t i = 0; i < settled; ++i) {
        if (received[i].event == ZMQ_EVENT_ACCEPTED && closed_after(i)) received[i].peer.clear();
        Handle(*w, received[i]);
      }
      received.erase(received.begin(), received.begin() + static_cast<std::ptrdiff_t>(settled));
    }
  }
}

// A handshake that fails before ZAP is asked shows as HANDSHAKE_FAILED_PROTOCOL
// and, next (the socket's connections are served by one I/O thread, which sends
// both in one go), the DISCONNECTED of its connection, which names the
// descriptor that ACCEPTED gave.
void ZapHandler::Handle(Watched& w, const Event& e) {
  const std::uint32_t failed = std::exchange(w.failed, 0);
  if (e.event == ZMQ_EVENT_ACCEPTED) {
    if (w.peers.size() >= kMaxPeers) w.peers.clear();
    w.peers[e.value] = e.peer;
    return;
  }
  if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    w.failed = e.value;
    return;
  }
  if (e.event != ZMQ_EVENT_DISCONNECTED) return;
  auto peer = w.peers.find(e.value);
  const std::string from = peer == w.peers.end() ? "" : peer->second;
  if (peer != w.peers.end()) w.peers.erase(peer);
  const bool undecryptable = failed == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC;
  if (!undecryptable && failed != ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) return;
  const std::int64_t now = clock_.NowMs();
  const bool first = tally_.Count(undecryptable ? "handshakes not decrypted" : "handshakes without CurveZMQ", now);
  // Each address in full once (a host retries every second); every one counted.
  // Keyed by kind too: an address that first came without CurveZMQ, then with
  // another server's key, has each said (the second is the one to fix).
  const bool fresh = !from.empty() ? logged_.size() < kMaxLogged &&
                                         logged_
                                             .insert(std::string(undecryptable ? "undecrypted/" : "plain/") +
                                                     w.endpoint + "/" + from)
                                             .second
                                   : first;
  if (!fresh) return;
  if (undecryptable) {
    WEFT_LOG(kWarn, kLog) << "a client at " << (from.empty() ? "an address weftd could not read" : from)
                          << " on the " << w.endpoint
                          << " endpoint sent a CurveZMQ handshake weftd cannot decrypt: it was most likely "
                             "given another server key than this weftd's (a host's server_key or enroll "
                             "token, or a credential file, of another weftd or an older key); it gets no "
                             "answer (logged once per address)";
  } else {
    WEFT_LOG(kInfo, kLog) << "a client at " << (from.empty() ? "an address weftd could not read" : from)
                          << " on the " << w.endpoint
                          << " endpoint does not use CurveZMQ, which this weftd requires (a client without "
                             "a credential, or a host without server_key); it gets no answer (logged once "
                             "per address)";
  }
}

ZapHandler::ZapHandler(zmq::context_t& ctx, KeySnapshot& keys, const Clock& clock, bool host_requests)
    : ctx_(ctx), keys_(keys), clock_(clock), host_requests_(host_requests), tally_(log::Level::kWarn, kLog, kTallyMs) {}

ZapHandler::~ZapHandler() { Stop(); }

Status ZapHandler::Start() {
  try {
    socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::rep);
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::rcvtimeo, 100);  // so Stop is noticed
    socket_->bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("cannot start the ZAP handler: ") + e.what());
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ZapHandler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  socket_.reset();
}

void ZapHandler::Run() {
  // The ZAP socket, then each watched socket's monitor: read as soon as an
  // event comes, so that a connection's peer is read while it is connected.
  std::vector<zmq::pollitem_t> items = {{socket_->handle(), 0, ZMQ_POLLIN, 0}};
  for (const std::unique_ptr<Watched>& w : watched_) items.push_back({w->monitor.handle(), 0, ZMQ_POLLIN, 0});
  while (!stop_) {
    DrainWatched();
    if (!open_) {
      // Not reading leaves each handshake waiting for its answer, not refused.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    tally_.Flush(clock_.NowMs());
    std::vector<zmq::message_t> frames;
    try {
      bool waiting = false;  // events left for the next DrainWatched by its bound on rounds
      for (const std::unique_ptr<Watched>& w : watched_) waiting = waiting || !w->received.empty();
      if (zmq::poll(items.data(), items.size(), std::chrono::milliseconds(waiting ? 0 : 100)) <= 0 ||
          !(items[0].revents & ZMQ_POLLIN))
        continue;  // (monitor events are read at the top)
      zmq::message_t part;
      if (!socket_->recv(part)) continue;
      frames.push_back(std::move(part));
      while (frames.back().more()) {
        zmq::message_t next;
        (void)socket_->recv(next);
        frames.push_back(std::move(next));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      continue;
    }
    // version, request id, domain, address, identity, mechanism, credentials...
    // (A REP socket must answer even a malformed request before the next one.)
    auto frame = [&](std::size_t i) { return i < frames.size() ? frames[i].to_string() : std::string(); };
    const std::string request_id = frame(1);
    const std::string domain = frame(2);
    const std::string address = frame(3);
    const std::string mechanism = frame(5);
    std::string code = "400", text = "unknown key", user_id;
    if (mechanism != "CURVE" || frames.size() < 7) {
      text = "CURVE is required";
    } else {
      const std::string key = curve::Z85FromBinary(frames[6].to_string_view());
      const std::shared_ptr<const KeyMap> keys = keys_.Get();
      const std::int64_t now = clock_.NowMs();
      const KeyEntry* entry = FindInForce(*keys, key, now);
      const bool spent = SpentIn(*keys, key, now);
      bool ok = false;
      if (domain == "provisioner") {
        ok = (entry && (entry->kind == Kind::kHost || entry->kind == Kind::kToken)) ||
             (!entry && !spent && host_requests_);
      } else {
        ok = entry && entry->kind == Kind::kUser;
      }
      if (ok) {
        code = "200";
        text = "OK";
        user_id = key;
        if (entry) keys_.Seen(key, now);
      } else if (!entry && key == curve::kProbePublicKey) {
        // A client checking what this endpoint is after its own key got no answer: no intrusion.
        if (logged_.size() < kMaxLogged && logged_.insert(domain + "/" + key).second) {
          WEFT_LOG(kInfo, kLog) << "a client at " << address << " checked what the " << domain
                                << " endpoint is, with weft's probe key (a client does so when its own key gets "
                                   "no answer; logged once)";
        }
      } else if (logged_.size() < kMaxLogged && !logged_.count(domain + "/" + key) &&
                 tally_.Count("keys refused at the handshake", clock_.NowMs())) {
        // In full once per key, and at most one new key per tally interval: the
        // others are counted, and each is logged in full in a later interval in
        // which it is the first (a client retries), so none goes unsaid.
        logged_.insert(domain + "/" + key);
        WEFT_LOG(kWarn, kLog) << "refused key " << curve::ShortKey(key) << " from " << address << " on the " << domain
                              << " endpoint: " << RefusedBecause(entry, spent, domain)
                              << " (logged once per key); other keys refused in the next " << kTallyMs / 1000
                              << " s are counted in one line";
      }
    }
    try {
      std::vector<zmq::message_t> reply;
      reply.emplace_back(std::string("1.0"));
      reply.emplace_back(request_id);
      reply.emplace_back(code);
      reply.emplace_back(text);
      reply.emplace_back(user_id);
      reply.emplace_back();  // metadata
      for (std::size_t i = 0; i < reply.size(); ++i)
        (void)socket_->send(reply[i], i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
    }
  }
}

}  // namespace weft::auth
