#include "weft/client/probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "weft/common/curve.hpp"
#include "weft/common/probe_key.hpp"

namespace weft::client {
namespace {

using Clock = std::chrono::steady_clock;

int MsLeft(Clock::time_point deadline) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
}

// The host and port of a tcp:// endpoint (IPv6 brackets removed); false for other transports.
bool TcpHostPort(const std::string& endpoint, std::string* host, std::string* port) {
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string address = endpoint.substr(6);
  if (auto semi = address.find(';'); semi != std::string::npos) address = address.substr(semi + 1);
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return !host->empty() && !port->empty();
}

// Sends `hello` over a plain TCP connection and returns the first bytes the
// peer answers (up to `want`) within `ms`: "" when it says nothing or closes.
std::string FirstBytes(const std::string& endpoint, std::string_view hello, std::size_t want, int ms) {
  std::string host, port;
  if (!TcpHostPort(endpoint, &host, &port)) return "";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return "";
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  bool connected = fd >= 0 && (connect(fd, found->ai_addr, found->ai_addrlen) == 0 || errno == EINPROGRESS);
  freeaddrinfo(found);
  std::string answer;
  if (connected) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t size = sizeof error;
    connected = poll(&p, 1, std::max(MsLeft(deadline), 0)) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
  }
  if (connected && send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size())) {
    char buf[64];
    while (answer.size() < want) {
      pollfd p{fd, POLLIN, 0};
      const int left = MsLeft(deadline);
      if (left <= 0 || poll(&p, 1, left) <= 0) break;
      const ssize_t n = recv(fd, buf, std::min(sizeof buf, want - answer.size()), 0);
      if (n <= 0) break;
      answer.append(buf, static_cast<std::size_t>(n));
    }
  }
  if (fd >= 0) close(fd);
  return answer;
}

// ZMTP 3's signature and major version: a ZeroMQ peer answers them with its
// own greeting. Without the version byte a peer sends its signature and
// version only, and waits: the mechanism comes after it.
constexpr char kZmtpSignature[] = {'\xFF', 0, 0, 0, 0, 0, 0, 0, 1, '\x7F', 3};

// A minimal TLS 1.2 ClientHello (no extensions): any TLS server answers it
// with a handshake record or an alert, both starting 0x16/0x15, 0x03.
constexpr unsigned char kClientHello[] = {
    0x16, 0x03, 0x01, 0x00, 0x31,  // record: handshake, 49 bytes
    0x01, 0x00, 0x00, 0x2d,        // ClientHello, 45 bytes
    0x03, 0x03,                    // TLS 1.2
    0x57, 0x45, 0x46, 0x54, 0x2d, 0x70, 0x72, 0x6f, 0x62, 0x65, 0x2d, 0x72, 0x61, 0x6e, 0x64, 0x6f,  // random
    0x6d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x2d,
    0x00,                                // no session id
    0x00, 0x06, 0xc0, 0x2f, 0xc0, 0x2b, 0x00, 0x9c,  // three common cipher suites
    0x01, 0x00,                          // compression: none
};

bool LooksTls(const std::string& endpoint, int ms) {
  const std::string answer = FirstBytes(
      endpoint, std::string_view(reinterpret_cast<const char*>(kClientHello), sizeof kClientHello), 2, ms);
  return answer.size() == 2 && (answer[0] == '\x16' || answer[0] == '\x15') && answer[1] == '\x03';
}

// Connects a DEALER socket with the given security, watches its events for up
// to `ms`, and says how far the connection got.
Peer Handshake(zmq::context_t& ctx, const std::string& server_key, const curve::KeyPair& keys,
               const std::string& endpoint, int ms) {
  static std::atomic<std::uint64_t> probes{0};
  const std::string monitor = "inproc://weft-client-probe-" + std::to_string(++probes);
  try {
    zmq::socket_t socket(ctx, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    if (!server_key.empty()) curve::SetClientKeys(socket, server_key, keys);
    if (zmq_socket_monitor(socket.handle(), monitor.c_str(), ZMQ_EVENT_ALL) != 0) return Peer::kUnknown;
    zmq::socket_t events(ctx, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(monitor);
    socket.connect(endpoint);
    bool connected = false, dropped = false;
    Peer seen = Peer::kUnknown;
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (seen == Peer::kUnknown) {
      const int left = MsLeft(deadline);
      if (left <= 0) break;
      zmq::pollitem_t item{events.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(left));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t head, address;
      if (!events.recv(head) || !head.more() || !events.recv(address) || head.size() < 6) break;
      std::uint16_t event = 0;
      std::uint32_t value = 0;
      std::memcpy(&event, head.data(), sizeof event);
      std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
      switch (event) {
        case ZMQ_EVENT_CONNECTED: connected = true; break;
        case ZMQ_EVENT_CONNECT_RETRIED: if (!connected) seen = Peer::kRefused; break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: seen = Peer::kHandshook; break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: seen = Peer::kAuthRefused; break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
          seen = value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH ? Peer::kMechanismMismatch : Peer::kNotCompatible;
          break;
        // A drop alone says little (which side noticed first is a race): keep
        // watching the reconnects for a handshake failure that says why.
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_DISCONNECTED: dropped = connected; break;
        default: break;
      }
    }
    if (seen == Peer::kUnknown && connected) seen = dropped ? Peer::kDropped : Peer::kSilent;
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    return seen;
  } catch (const zmq::error_t&) {
    return Peer::kUnknown;
  }
}

}  // namespace

Peer ProbePeer(zmq::context_t& ctx, const Options& options, const std::string& endpoint, int ms) {
  // Every look after the first shares the rest of 2 * ms: a peer that accepts
  // connections and says nothing (a stopped weftd) would use each one's whole time.
  const auto deadline = Clock::now() + std::chrono::milliseconds(2 * static_cast<std::int64_t>(ms));
  const Peer seen = Handshake(ctx, options.server_key, options.keys, endpoint, ms);
  switch (seen) {
    case Peer::kAuthRefused: {
      // weftd's provisioner endpoint refuses a user's key but lets an unknown
      // key in (a new host asking to be accepted; it sends nothing here). The
      // probe's own key, which weftd knows for one (so it does not log it as a
      // stranger's).
      const curve::KeyPair probe{std::string(curve::kProbePublicKey), std::string(curve::kProbeSecretKey)};
      const int left = MsLeft(deadline);
      if (left > 0 && Handshake(ctx, options.server_key, probe, endpoint, left) == Peer::kHandshook)
        return Peer::kProvisioner;
      return seen;
    }
    case Peer::kSilent:
    case Peer::kDropped:
    case Peer::kNotCompatible: {
      // Not ZeroMQ, or a ZeroMQ socket of another kind: an HTTP server answers
      // a request, a TLS server a ClientHello. Each gets half of what is left.
      const int left = MsLeft(deadline);
      if (left <= 1) return seen;
      if (AnswersHttp(endpoint, left / 2)) return Peer::kHttp;
      const int rest = MsLeft(deadline);
      if (rest > 0 && LooksTls(endpoint, rest)) return Peer::kHttps;
      return seen;
    }
    default: return seen;
  }
}

bool AnswersHttp(const std::string& endpoint, int ms) {
  return FirstBytes(endpoint, "HEAD / HTTP/1.0\r\n\r\n", 5, ms) == "HTTP/";
}

std::string PeerMechanism(const std::string& endpoint, int ms) {
  // The peer answers our signature with its whole greeting (64 bytes), the
  // mechanism name at bytes 12 to 31, padded with zeros.
  const std::string greeting = FirstBytes(endpoint, std::string_view(kZmtpSignature, sizeof kZmtpSignature), 32, ms);
  if (greeting.size() < 32 || greeting[0] != '\xFF') return "";
  return std::string(greeting.data() + 12, strnlen(greeting.data() + 12, 20));
}

std::string DescribePeer(Peer peer, const std::string& endpoint, int ms) {
  switch (peer) {
    case Peer::kRefused: return "nothing listens at " + endpoint + " (connection refused)";
    case Peer::kSilent:
      return "something at " + endpoint + " accepted the connection but did not answer the ZeroMQ handshake" +
             (ms > 0 ? " within " + std::to_string(ms) + " ms" : std::string()) +
             ": a stopped or overloaded weftd, or not weftd";
    case Peer::kHttp:
      return endpoint + " answered as an HTTP server (weft-web?), not as weftd's api endpoint, which speaks ZeroMQ";
    case Peer::kHttps:
      return endpoint + " answered as an HTTPS server (weft-web?), not as weftd's api endpoint, which speaks ZeroMQ";
    case Peer::kMechanismMismatch:
      return "the ZeroMQ endpoint at " + endpoint + " uses other security than this client (CurveZMQ on one side only)";
    case Peer::kNotCompatible:
    case Peer::kDropped:
      return "the ZeroMQ socket at " + endpoint + " is not one a client can talk to (weftd's events endpoint, or "
             "another program's?)";
    case Peer::kAuthRefused:
      return "weftd at " + endpoint + " refused this client's key at the handshake (a key it does not know, or "
             "revoked; or the endpoint is not the one the key is for)";
    case Peer::kProvisioner:
      // The client may be a host: its key is refused there when it is spent, not when it is new.
      return endpoint + " answered as weftd's provisioner endpoint (the one weft-host uses) and refused this "
             "client's key: a user's key belongs at the api endpoint; a host's or an enrollment token's key there "
             "may be revoked, used up or expired";
    case Peer::kHandshook:
    case Peer::kUnknown: break;
  }
  return "";
}

}  // namespace weft::client
