#include "weft/server/daemon/transport.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "weft/server/daemon/ports.hpp"
#include "weft/server/hosts/host_ops.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {
namespace {

using api::Endpoint;
using json = nlohmann::json;

constexpr const char* kLog = "weftd";
constexpr std::size_t kCurveFrameOverhead = 64;
constexpr int kProvisionerRcvHwm = 8;
constexpr std::size_t kUnknownKeyBytes = 64 * 1024;
constexpr std::size_t kUnknownKeyPeerBytes = 2 * kUnknownKeyBytes;
// Above this size a message is checked against its connection's budget of bytes waiting in the inbox.
constexpr std::size_t kPeerCheckBytes = 64 * 1024;

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
// With ROUTER_MANDATORY a ROUTER refuses a message at its first frame: EHOSTUNREACH
// (thrown) when the peer is gone, EAGAIN (a send that returns nothing) when its queue is full.
Delivery SendWithEnvelope(zmq::socket_t& socket, wire::Frames& envelope, wire::Frames& frames) {
  try {
    for (zmq::message_t& e : envelope)
      if (!socket.send(e, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return Delivery::kBacklogged;
  } catch (const zmq::error_t&) {
    return Delivery::kGone;
  }
  return wire::SendMultipart(socket, frames) ? Delivery::kSent : Delivery::kGone;
}

}  // namespace

zmq::message_t EncodeApiMeta(const ApiMeta& meta) {
  // "1" or "0", the key (Z85, no newline in it), a newline, the address.
  std::string text(1, meta.over ? '1' : '0');
  text += meta.key;
  text += '\n';
  text += meta.address;
  return zmq::message_t(text.data(), text.size());
}

ApiMeta DecodeApiMeta(const zmq::message_t& frame) {
  ApiMeta meta;
  const std::string text = frame.to_string();
  meta.over = !text.empty() && text[0] == '1';
  const std::size_t nl = text.find('\n');
  if (text.size() > 1) meta.key = text.substr(1, nl == std::string::npos ? std::string::npos : nl - 1);
  if (nl != std::string::npos) meta.address = text.substr(nl + 1);
  return meta;
}

bool ReceiveWithin(zmq::socket_t& socket, const std::function<FrameBound(zmq::message_t&)>& bound_for,
                   wire::Frames& out, std::size_t* bytes, bool* over) {
  out.clear();
  *bytes = 0;
  *over = false;
  zmq::message_t part;
  if (!socket.recv(part, zmq::recv_flags::dontwait)) return false;
  bool more = part.more();
  *bytes = part.size();
  out.push_back(std::move(part));  // the routing id, which ROUTER adds
  std::optional<FrameBound> bound;
  while (more) {
    zmq::message_t next;
    (void)socket.recv(next);  // the rest of a message is there already
    more = next.more();
    if (!bound) bound = bound_for(next);
    *bytes += next.size();
    if (*over || out.size() >= bound->frames || *bytes > bound->bytes) {
      *over = true;  // `next` is freed here
      continue;
    }
    out.push_back(std::move(next));
  }
  return true;
}

Delivery SendRouted(zmq::socket_t& socket, wire::Frames& frames) {
  if (frames.empty()) return Delivery::kGone;
  wire::Frames envelope;
  envelope.push_back(std::move(frames.front()));
  frames.erase(frames.begin());
  return SendWithEnvelope(socket, envelope, frames);
}

Delivery SendReply(zmq::socket_t& socket, Pending& p) {
  wire::Reply reply = p.response.status.ok() ? wire::Reply::Success(p.id, std::move(p.response.body))
                                             : wire::Reply::Failure(p.id, p.response.status, p.response.details);
  if (p.response.status.ok()) {
    reply.blobs = std::move(p.response.blobs);
    reply.body_text = std::move(p.response.body_text);
  }
  wire::Frames frames = wire::EncodeReply(reply);
  // The body is freed with the reply's Pending, after every reply is sent, not between them.
  if (p.response.status.ok()) p.response.body = std::move(reply.body);
  return SendWithEnvelope(socket, p.envelope, frames);
}

Transport::Transport(const Config& config, const Clock& clock, const auth::Registry& registry, log::Tally& tally)
    : config_(config),
      clock_(clock),
      registry_(registry),
      tally_(tally),
      // Two I/O threads: the api endpoint's connections on one of their own (see Bind).
      ctx_(2),
      api_(ctx_, zmq::socket_type::router),
      prov_(ctx_, zmq::socket_type::router),
      events_(ctx_, zmq::socket_type::xpub) {}

Status Transport::Bind(const std::optional<std::string>& server_secret_key, json* endpoints) {
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
      // The api's connections on the second I/O thread, the hosts' and the events' on
      // the first: an api request and its reply no longer wait behind the hosts'
      // traffic for the one I/O thread, which under load waits for a CPU itself
      // (api reads' p99 was mostly that wait, both ways, not the front's work).
      b.socket->set(zmq::sockopt::affinity, std::uint64_t{b.socket == &api_ ? 2u : 1u});
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
        // Replies waiting for a client that does not read them: beyond these, dropped (and logged).
        if (b.socket == &api_) b.socket->set(zmq::sockopt::sndhwm, kRepliesQueued);
      }
      if (server_secret_key) {
        curve::SetServerKey(*b.socket, *server_secret_key, b.name);
        if (b.socket == &events_) b.socket->set(zmq::sockopt::xpub_manual, 1);
      }
      BindKeepingPort(*b.socket, b.name, *b.address, previous);
      (*endpoints)[b.name] = wire::LastEndpoint(*b.socket);
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(std::string("cannot bind the ") + b.name + " endpoint to " + *b.address + ": " +
                                 e.what() + "; set endpoints." + b.name +
                                 " in weftd.toml to a free address (port * picks one)");
    }
  }
  return Status::Ok();
}

Result<zmq::socket_t> Transport::HandOverApi(const std::string& pipe) {
  zmq::socket_t router = std::move(api_);
  try {
    api_ = zmq::socket_t(ctx_, zmq::socket_type::pair);
    // Replies to the front are never dropped (their requests bound them);
    // requests from it wait in the front when the reactor falls behind.
    api_.set(zmq::sockopt::sndhwm, 0);
    api_.set(zmq::sockopt::linger, 0);
    api_.connect(pipe);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot connect the reactor to the api front: ") + e.what());
  }
  return router;
}

Status Transport::Descriptors(int fds[2]) {
  try {
    fds[0] = prov_.get(zmq::sockopt::fd);
    fds[1] = api_.get(zmq::sockopt::fd);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot read the ZeroMQ descriptors: ") + e.what());
  }
  return Status::Ok();
}

Transport::Received Transport::Receive(Endpoint endpoint, std::deque<Inbound>& inbox) {
  wire::Frames frames;
  std::size_t bytes = 0;
  bool over = false;
  std::optional<ApiMeta> meta;
  try {
    if (endpoint == api::Endpoint::kApi) {
      // From the api front: its metadata, then the frames it kept (bounded there).
      zmq::message_t first;
      if (!api_.recv(first, zmq::recv_flags::dontwait)) return Received::kNothing;
      meta = DecodeApiMeta(first);
      over = meta->over;
      if (first.more()) wire::RecvMultipart(api_, frames);
      for (const zmq::message_t& f : frames) bytes += f.size();
    } else if (!ReceiveBounded(endpoint, frames, &bytes, &over)) {
      return Received::kNothing;
    }
  } catch (const zmq::error_t& err) {
    WEFT_LOG(kWarn, kLog) << "receive failed on " << api::EndpointName(endpoint) << ": " << err.what();
    return Received::kNothing;
  }
  // Decoded where it is kept: a request decoded aside cost a move of its Pending and Request into the inbox.
  Inbound& in = inbox.emplace_back();
  in.bytes = over ? 0 : bytes;  // (what was dropped is not kept)
  if (!Decode(endpoint, std::move(frames), over, meta ? &meta->key : nullptr, &in)) {
    inbox.pop_back();
    return Received::kDropped;
  }
  if (meta) in.pending.address = std::move(meta->address);
  if (!WithinPeerBudget(in, inbox)) {
    // The connection already has its share waiting: refuse this one without keeping it.
    in.request.reset();
    in.bytes = 0;
    in.pending.response = api::Response::Error(Status::TooLarge(
        "this connection has too much waiting to be handled; wait for replies before sending more"));
  }
  return Received::kQueued;
}

Transport::Bound Transport::BoundFor(Endpoint endpoint, zmq::message_t& first) const {
  // Routing id, REQ's empty delimiter, then the message's own frames.
  const Bound known{config_.limits.max_frames + 2, config_.limits.max_total_bytes + 1024};
  if (endpoint != Endpoint::kProvisioner || !config_.security.curve) return known;
  try {
    if (registry_.Find(first.gets("User-Id"))) return known;
  } catch (const zmq::error_t&) {
  }
  return Bound{3, kUnknownKeyBytes};
}

bool Transport::ReceiveBounded(Endpoint endpoint, wire::Frames& out, std::size_t* bytes, bool* over) {
  return ReceiveWithin(
      Socket(endpoint), [&](zmq::message_t& first) { return BoundFor(endpoint, first); }, out, bytes, over);
}

bool Transport::WithinPeerBudget(const Inbound& in, const std::deque<Inbound>& inbox) const {
  const bool unknown = in.pending.endpoint == Endpoint::kProvisioner && config_.security.curve &&
                       registry_.Find(in.pending.key) == nullptr;
  if (!unknown && in.bytes < kPeerCheckBytes) return true;
  const std::size_t budget = unknown ? kUnknownKeyPeerBytes : 2 * config_.limits.max_total_bytes;
  const zmq::message_t& rid = in.pending.envelope.front();
  std::size_t waiting = in.bytes;
  for (const Inbound& other : inbox) {
    if (&other == &in) continue;  // `in` may be in the inbox already
    const zmq::message_t& o = other.pending.envelope.front();
    if (other.pending.endpoint == in.pending.endpoint && o.size() == rid.size() &&
        std::memcmp(o.data(), rid.data(), rid.size()) == 0)
      waiting += other.bytes;
  }
  return waiting <= budget;
}

bool Transport::Decode(Endpoint endpoint, wire::Frames frames, bool over, const std::string* api_key, Inbound* out) {
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
  if (api_key) {
    p.key = *api_key;  // the front read it off the connection; its rate limit is applied there too
  } else if (config_.security.curve && !frames.empty()) {
    // The ZAP handler's User-Id (the client's public key) rides on every frame.
    try {
      p.key = frames[0].gets("User-Id");
      p.address = frames[0].gets("Peer-Address");
    } catch (const zmq::error_t&) {
    }
  }
  // A host's task.take and task.finish keep their bodies as text, which their handlers read lean.
  // Decoded where the request is kept: a request decoded aside and moved in moved its dozen strings.
  wire::Request& request = out->request.emplace();
  const Status decoded = wire::DecodeRequestInto(
      frames, config_.limits, &p.id,
      endpoint == api::Endpoint::kProvisioner ? std::span<const std::string_view>(hosts::kTextBodyOps)
                                              : std::span<const std::string_view>(),
      &request);
  if (!decoded.ok()) {
    out->request.reset();
    WEFT_LOG(kDebug, kLog) << "malformed request on " << api::EndpointName(endpoint) << ": " << decoded.message();
    p.response = api::Response::Error(decoded);
    return true;
  }
  return true;
}

void Transport::Send(std::vector<Pending>& replies, std::vector<queue::AttemptRef>* undelivered) {
  for (Pending& p : replies) {
    const Delivery d = SendReply(Socket(p.endpoint), p);
    if (d == Delivery::kSent) continue;
    if (tally_.Count("replies not delivered", clock_.NowMs())) {
      WEFT_LOG(kInfo, kLog) << "could not deliver the reply to request '" << p.id << "' on the "
                            << api::EndpointName(p.endpoint) << " endpoint: "
                            << (d == Delivery::kGone ? "its client is gone" : "its client is not reading its replies");
    }
    if (p.delivers) undelivered->push_back(*p.delivers);
  }
}

}  // namespace weft::server
