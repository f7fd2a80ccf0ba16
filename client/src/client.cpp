#include "weft/client/client.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "weft/client/probe.hpp"

namespace weft::client {
namespace {

// NOT_LEADER replies followed within one call, at most: a leader that moves
// more often than this during one call is not one a client can keep up with.
constexpr int kMaxRedirects = 4;
// With several endpoints: how long a connection to one may take before the next is tried.
constexpr int kReachMs = 1000;
// With several endpoints and no leader known yet (a takeover under way): the pause before the next.
constexpr int kNoLeaderPauseMs = 100;
// A reply that is not weftd's: how long an HTTP server may take to answer the probe.
constexpr int kHttpProbeMs = 1000;

}  // namespace

std::vector<std::string> SplitEndpoints(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view one = list.substr(0, comma);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (!one.empty()) out.emplace_back(one);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

Options FromCredential(const curve::Credential& credential, int timeout_ms) {
  Options o;
  o.endpoint = credential.api;
  o.timeout_ms = timeout_ms;
  o.server_key = credential.server_key;
  o.keys = credential.keys;
  return o;
}

Client::Client(zmq::context_t& ctx, Options options) : ctx_(ctx), options_(std::move(options)) {
  std::random_device rd;
  id_prefix_ = std::to_string(rd()) + "-";
  endpoints_ = SplitEndpoints(options_.endpoint);
  if (endpoints_.empty()) endpoints_.push_back(options_.endpoint);
}

Client::~Client() = default;

void Client::Connect() {
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
  // With several endpoints, a message waits only for a connection that is up,
  // so that an endpoint nobody listens on can be told apart and skipped.
  if (endpoints_.size() > 1) socket_->set(zmq::sockopt::immediate, 1);
  if (!options_.server_key.empty()) curve::SetClientKeys(*socket_, options_.server_key, options_.keys);
  monitor_.reset();
  if (endpoints_.size() > 1) {
    // A leader that dies while a call waits (a held task.take) is noticed at
    // once, not when the call times out: the next weftd takes over within a second.
    static std::atomic<std::uint64_t> next_monitor{0};
    const std::string address = "inproc://weft-client-monitor-" + std::to_string(next_monitor++);
    if (zmq_socket_monitor(static_cast<void*>(*socket_), address.c_str(), ZMQ_EVENT_DISCONNECTED) == 0) {
      monitor_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::pair);
      monitor_->set(zmq::sockopt::linger, 0);
      monitor_->connect(address);
    }
  }
  socket_->connect(endpoint());
}

bool Client::Disconnected() {
  // A monitor event is two frames: the event (16-bit id, 32-bit value) and the endpoint.
  bool disconnected = false;
  zmq::message_t event;
  while (monitor_->recv(event, zmq::recv_flags::dontwait)) {
    std::uint16_t id = 0;
    if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
    disconnected = disconnected || id == ZMQ_EVENT_DISCONNECTED;
    zmq::message_t address;
    if (event.more()) (void)monitor_->recv(address, zmq::recv_flags::dontwait);
  }
  return disconnected;
}

bool Client::ConnectReachable(int ms) {
  for (std::size_t tried = 0; tried < endpoints_.size(); ++tried) {
    if (!socket_) Connect();
    zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLOUT, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(ms));
    if (item.revents & ZMQ_POLLOUT) return true;
    MoveTo("");
  }
  return false;
}

void Client::MoveTo(const std::string& to) {
  socket_.reset();
  if (to.empty()) {
    current_ = (current_ + 1) % endpoints_.size();
    return;
  }
  auto it = std::find(endpoints_.begin(), endpoints_.end(), to);
  if (it == endpoints_.end()) it = endpoints_.insert(endpoints_.end(), to);
  current_ = static_cast<std::size_t>(it - endpoints_.begin());
}

std::string Client::NextId() { return id_prefix_ + std::to_string(next_id_++); }

DetailedResult Client::Call(std::string_view op, json body, int timeout_ms) {
  return CallAs(wire::OnBehalf{}, op, std::move(body), timeout_ms);
}

DetailedResult Client::CallAs(const wire::OnBehalf& on_behalf, std::string_view op, json body, int timeout_ms) {
  wire::Request req;
  req.op = std::string(op);
  req.on_behalf = on_behalf;
  req.body = std::move(body);
  WEFT_ASSIGN_OR_RETURN(wire::Reply reply, Exchange(req, timeout_ms));
  if (!reply.ok) return DetailedResult(reply.ToStatus(), std::move(reply.error.details));
  return std::move(reply.body);
}

Result<wire::Reply> Client::CallRaw(const wire::Request& request, int timeout_ms) {
  wire::Request req = request;
  return Exchange(req, timeout_ms);
}

Result<wire::Reply> Client::Exchange(wire::Request& req, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = options_.timeout_ms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (req.tenant.empty()) req.tenant = options_.tenant;
  if (req.on_behalf.empty()) req.on_behalf = options_.on_behalf;
  for (int hop = 0;; ++hop) {
    Result<wire::Reply> reply = CallOnce(req, deadline, timeout_ms);
    if (!reply.ok() || reply->ok || hop >= kMaxRedirects || !options_.follow_leader) return reply;
    const json& details = reply->error.details;
    if (!details.is_object() || !details.value("not_leader", false)) return reply;
    // A follower answered without doing anything: the request goes on to the leader.
    const auto leader = details.find("leader");
    if (leader != details.end() && leader->is_string() && *leader != endpoint()) {
      MoveTo(leader->get<std::string>());
      continue;
    }
    // No leader known yet (a takeover under way): the next endpoint, while time is left.
    const auto left = deadline - std::chrono::steady_clock::now();
    if (endpoints_.size() < 2 || left < std::chrono::milliseconds(2 * kNoLeaderPauseMs)) return reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(kNoLeaderPauseMs));
    MoveTo("");
  }
}

Result<wire::Reply> Client::CallOnce(wire::Request& req, std::chrono::steady_clock::time_point deadline,
                                     int timeout_ms) {
  try {
    const bool several = endpoints_.size() > 1;
    if (several) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const int reach_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 1, kReachMs));
      if (!ConnectReachable(reach_ms)) {
        std::string list;
        for (const std::string& e : endpoints_) list += (list.empty() ? "" : ", ") + e;
        return Status::Unavailable("cannot connect to any weftd of " + list + " to send '" + req.op +
                                   "'; are they running?");
      }
    }
    if (!socket_) Connect();
    req.id = NextId();
    wire::Frames frames = wire::EncodeRequest(req);
    if (!wire::SendMultipart(*socket_, frames)) {
      if (several) MoveTo("");
      socket_.reset();
      return Status::Unavailable("could not send '" + req.op + "' to " + endpoint());
    }
    // Looking for a reachable endpoint may have used the call's time: the
    // request just sent still gets its full timeout to be answered.
    const auto wait_until = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
    bool dropped = false;
    while (!dropped) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wait_until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      wire::Frames in;
      if (monitor_) {
        // Several endpoints: the monitor says when the connection drops.
        zmq::pollitem_t items[] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                   {static_cast<void*>(*monitor_), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 2, left);
        if (items[1].revents & ZMQ_POLLIN) dropped = Disconnected();
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        if (!wire::RecvMultipart(*socket_, in, zmq::recv_flags::dontwait)) continue;
      } else {
        // A blocking receive with a timeout, not zmq::poll and a receive: the
        // poll asks the socket for its events before and after it sleeps, a
        // poll(2) and a getpid(2) each time, on every call of a busy host.
        socket_->set(zmq::sockopt::rcvtimeo, static_cast<int>(left.count()));
        if (!wire::RecvMultipart(*socket_, in, zmq::recv_flags::none)) continue;
      }
      Result<wire::Reply> reply = wire::DecodeReply(in, options_.limits);
      if (!reply.ok() && reply.status().code() == Code::kTooLarge) {
        // weftd's answer, larger than this program chose to read: say so, not "malformed".
        return Status::TooLarge("the reply from " + endpoint() + " to '" + req.op +
                                "' is larger than this client accepts (" + reply.status().message() +
                                "; the client's Options::limits, 64 MiB by default): raise them to read it");
      }
      if (!reply.ok()) {
        // Without CurveZMQ libzmq takes an HTTP server's answer to its greeting for a message.
        if (AnswersHttp(endpoint(), std::min(timeout_ms, kHttpProbeMs)))
          return Status::Unavailable(DescribePeer(Peer::kHttp, endpoint()));
        return reply.status().WithContext("malformed reply from " + endpoint());
      }
      if (reply->id != req.id) continue;  // a late answer to an abandoned call
      return reply;
    }
    const std::string silent = endpoint();
    // Not sent again: it may have been carried out. The next call tries the next endpoint.
    if (several) MoveTo("");
    socket_.reset();
    // TIMEOUT too: the request reached weftd, and may have been carried out.
    if (dropped)
      return Status::Timeout("weftd at " + silent + " closed the connection before it answered '" + req.op +
                             "'; is the server running? (the request may or may not have been carried out)");
    const int probe_ms = std::min(options_.probe_ms, timeout_ms);
    const std::string found = several || probe_ms <= 0
                                  ? std::string()
                                  : DescribePeer(ProbePeer(ctx_, options_, silent, probe_ms), silent, probe_ms);
    // TIMEOUT, not UNAVAILABLE (weftd's "not done; retry"): the request may have been carried out.
    return Status::Timeout("no answer from weftd at " + silent + " within " + std::to_string(timeout_ms) +
                           " ms to '" + req.op + "'" + (found.empty() ? "; is the server running?" : ": " + found) +
                           " (the request may or may not have been carried out)");
  } catch (const zmq::error_t& e) {
    socket_.reset();
    return Status::Unavailable("cannot reach " + endpoint() + ": " + e.what());
  }
}

}  // namespace weft::client
