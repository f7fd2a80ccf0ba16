// weft::server::Transport: weftd's three sockets (api and provisioner
// ROUTERs, events XPUB) and what touches their bytes: binding (keeping the
// ports of the last run), receiving a message within what its sender may send
// before authentication, decoding it (with the api rate limits), and sending
// replies. Part of weftd's reactor.
//
// Memory before authentication (docs/security.md, "Hostile input"): ZeroMQ
// keeps a message until its last frame has arrived, so what weftd can bound
// is each frame (ZMQ_MAXMSGSIZE, per socket: hosts send a JSON header and
// nothing else, so the provisioner takes frames of limits.max_header_bytes
// plus CurveZMQ's few dozen bytes per frame), the messages queued per
// connection (ZMQ_RCVHWM), and what it keeps of each message once read: from
// a key it does not know, a request of one frame of at most 64 KiB, and twice
// that waiting per connection. More is read and dropped frame by frame.
//
// The api ROUTER itself is served by the api front's thread (api_front.hpp),
// which passes on to the reactor what it does not answer itself over an
// inproc PAIR that takes the ROUTER's place here: each message there is a
// frame of ApiMeta and then the ROUTER's frames, kept within the same bounds.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/server/auth/auth.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/pending.hpp"
#include "weft/server/daemon/rate_limits.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/log_tally.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

// What the api front says of a message it passes on: whether part of it was
// dropped (over its bounds), the connection's CurveZMQ key (its User-Id) and
// the peer's address (its Peer-Address, on TCP).
struct ApiMeta {
  bool over = false;
  std::string key;
  std::string address;
};
zmq::message_t EncodeApiMeta(const ApiMeta& meta);
ApiMeta DecodeApiMeta(const zmq::message_t& frame);

// How much of one message weftd keeps (frames include the routing envelope).
struct FrameBound {
  std::size_t frames = 0;
  std::size_t bytes = 0;
};
// Receives one message frame by frame, keeping what `bound_for(first frame
// after the routing id)` allows and dropping the rest as it comes; false when
// nothing was ready. `*over`: something was dropped.
bool ReceiveWithin(zmq::socket_t& socket, const std::function<FrameBound(zmq::message_t&)>& bound_for,
                   wire::Frames& out, std::size_t* bytes, bool* over);
// The replies the api ROUTER queues for one client (ZMQ_SNDHWM); a client that sends
// more requests than this without reading its replies loses the replies beyond it.
inline constexpr int kRepliesQueued = 1000;

// What became of a reply sent on a ROUTER (ROUTER_MANDATORY, never waiting).
enum class Delivery {
  kSent,
  kGone,         // its peer is not connected any more
  kBacklogged,   // its peer has as many replies waiting unread as the socket queues (ZMQ_SNDHWM): dropped
};
// Sends `p`'s reply on `socket` (a ROUTER or the api front's PAIR) after its envelope.
Delivery SendReply(zmq::socket_t& socket, Pending& p);
// Sends `frames`, whose first is the peer's routing id, on a ROUTER.
Delivery SendRouted(zmq::socket_t& socket, wire::Frames& frames);

class Transport {
 public:
  Transport(const Config& config, const Clock& clock, const auth::Registry& registry, log::Tally& tally);

  zmq::context_t& context() { return ctx_; }
  // The api (until HandOverApi) or provisioner ROUTER, for the ZAP handler to watch its handshakes.
  zmq::socket_t& router(api::Endpoint endpoint) { return endpoint == api::Endpoint::kApi ? api_ : prov_; }
  zmq::socket_t& events() { return events_; }

  // Sets the sockets' options and binds the three endpoints (the configured
  // addresses; with port `*`, the last run's port first). With security on,
  // `server_secret_key` is weftd's CURVE secret key. `endpoints`: what was bound.
  [[nodiscard]] Status Bind(const std::optional<std::string>& server_secret_key, nlohmann::json* endpoints);
  // Once bound: hands the api ROUTER over (to the api front) and takes its
  // place with a PAIR connected to `pipe`, where the front passes requests on.
  [[nodiscard]] Result<zmq::socket_t> HandOverApi(const std::string& pipe);
  // The ROUTERs' descriptors (ZMQ_FD): provisioner, then api (the front's PAIR).
  [[nodiscard]] Status Descriptors(int fds[2]);

  enum class Received { kNothing, kDropped, kQueued };
  // Takes one message of `endpoint` off its socket: kNothing when none was
  // ready, kDropped when it cannot be answered, else decoded (or refused) into
  // `inbox`, whose other requests count towards its connection's budget.
  Received Receive(api::Endpoint endpoint, std::deque<Inbound>& inbox);
  // Sends each reply; the attempts that replies which could not be delivered
  // carried are added to `undelivered`.
  void Send(std::vector<Pending>& replies, std::vector<queue::AttemptRef>* undelivered);

 private:
  using Bound = FrameBound;
  zmq::socket_t& Socket(api::Endpoint e) { return e == api::Endpoint::kApi ? api_ : prov_; }
  // Receives one message frame by frame, keeping what its sender's Bound
  // allows and dropping the rest as it comes; false when nothing was ready.
  // `*over`: something was dropped.
  bool ReceiveBounded(api::Endpoint endpoint, wire::Frames& out, std::size_t* bytes, bool* over);
  Bound BoundFor(api::Endpoint endpoint, zmq::message_t& first) const;
  // Whether the connection of `in` may have it waiting too (its budget of bytes in `inbox`).
  bool WithinPeerBudget(const Inbound& in, const std::deque<Inbound>& inbox) const;
  // Splits the envelope and decodes; false when the message cannot be answered (no envelope).
  // `over`: part of it was dropped, which is answered TOO_LARGE. `api_key`:
  // the key the api front read off the connection (null on the provisioner).
  bool Decode(api::Endpoint endpoint, wire::Frames frames, bool over, const std::string* api_key, Inbound* out);

  const Config& config_;
  const Clock& clock_;
  const auth::Registry& registry_;
  log::Tally& tally_;
  zmq::context_t ctx_;
  zmq::socket_t api_;
  zmq::socket_t prov_;
  zmq::socket_t events_;
};

}  // namespace weft::server
