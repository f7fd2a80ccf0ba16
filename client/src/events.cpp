#include "weft/client/events.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace weft::client {
namespace {

// The longest one question to weftd (where are your events?) may take: not
// shortened to a short Next's timeout, for a question that times out costs the
// api connection, and a key weftd no longer knows gets no new one (the
// handshake is refused, and its DENIED reply never comes).
constexpr int kLocateMs = 1000;
// The longest wait between two looks at the socket's state.
constexpr std::int64_t kPollMs = 100;

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// An address bound to every interface ("tcp://0.0.0.0:7422", "tcp://*:7422")
// means "the api's host": it becomes `api`'s host with its own port.
std::string Reachable(std::string events, const std::string& api) {
  for (const char* any : {"tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"}) {
    const std::string wildcard = any;
    if (events.rfind(wildcard, 0) != 0) continue;
    const std::size_t host = api.find("://");
    const std::size_t port = api.rfind(':');
    if (host != std::string::npos && port != std::string::npos && port > host + 3)
      events = "tcp://" + api.substr(host + 3, port - host - 3) + ":" + events.substr(wildcard.size());
  }
  return events;
}

}  // namespace

EventSequence::Seen EventSequence::Check(std::string_view topic, const nlohmann::json& event) {
  Seen seen;
  const auto seq = event.find("seq");
  const auto incarnation = event.find("incarnation");
  if (seq == event.end() || !seq->is_number_unsigned() || incarnation == event.end() || !incarnation->is_string()) {
    seen.unnumbered = true;
    return seen;
  }
  const std::uint64_t number = seq->get<std::uint64_t>();
  const std::string& inc = incarnation->get_ref<const std::string&>();
  if (inc != incarnation_) {
    if (incarnation_.empty()) {
      seen.first = true;
    } else {
      seen.restarted = true;
    }
    incarnation_ = inc;
    last_.clear();
    last_.emplace(std::string(topic), number);
    return seen;
  }
  auto last = last_.find(topic);
  if (last == last_.end()) {
    // The first event of this topic seen: numbered from wherever the topic was.
    last_.emplace(std::string(topic), number);
    return seen;
  }
  if (number <= last->second) {
    seen.restarted = true;  // never from one weftd: the numbering went back
  } else {
    seen.missed = number - last->second - 1;
  }
  last->second = number;
  return seen;
}

void EventSequence::Reset() {
  incarnation_.clear();
  last_.clear();
}

EventStream::EventStream(zmq::context_t& ctx, Options options, std::vector<std::string> prefixes, EventOptions events)
    : ctx_(ctx), options_(options), prefixes_(std::move(prefixes)), events_(events), api_(ctx, std::move(options)) {}

EventStream::~EventStream() {
  sub_.reset();  // before its monitor
  monitor_.reset();
}

Result<std::string> EventStream::Locate(int timeout_ms) {
  if (!events_.endpoint.empty()) return events_.endpoint;
  WEFT_ASSIGN_OR_RETURN(nlohmann::json status, api_.Call("server.status", nlohmann::json::object(), timeout_ms));
  return EventsEndpointOf(status, api_.endpoint());
}

Result<std::string> EventsEndpointOf(const nlohmann::json& status, std::string api) {
  // Several weftd on one database: the leader publishes; a follower, even the one asked, does not.
  const nlohmann::json* leader = nullptr;
  if (auto l = status.find("leadership"); l != status.end() && l->is_object()) {
    if (auto who = l->find("leader"); who != l->end() && who->is_object()) {
      if (auto eps = who->find("endpoints"); eps != who->end() && eps->is_object() && eps->contains("events"))
        leader = &*eps;
    }
  }
  std::string events;
  if (leader) {
    events = leader->value("events", "");
    const std::string leader_api = Reachable(leader->value("api", ""), api);
    if (!leader_api.empty()) api = leader_api;
  } else {
    events = status.value("endpoints", nlohmann::json::object()).value("events", "");
  }
  if (events.empty()) return Status::NotFound("weftd did not say where its events endpoint is");
  return Reachable(events, api);
}

Status EventStream::Connect(const std::string& endpoint) {
  const bool was_connected = connected_;
  try {
    sub_.reset();  // before its monitor
    monitor_.reset();
    sub_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::sub);
    sub_->set(zmq::sockopt::linger, 0);
    if (events_.rcvhwm > 0) sub_->set(zmq::sockopt::rcvhwm, events_.rcvhwm);
    if (events_.rcvbuf > 0) sub_->set(zmq::sockopt::rcvbuf, events_.rcvbuf);
    if (!options_.server_key.empty()) curve::SetClientKeys(*sub_, options_.server_key, options_.keys);
    static std::atomic<std::uint64_t> next_monitor{0};
    const std::string address = "inproc://weft-events-monitor-" + std::to_string(next_monitor++);
    if (zmq_socket_monitor(sub_->handle(), address.c_str(),
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
      sub_.reset();
      connected_ = false;
      return Status::Internal("cannot watch the events connection: " + std::string(zmq_strerror(zmq_errno())));
    }
    monitor_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(address);
    for (const std::string& p : prefixes_) sub_->set(zmq::sockopt::subscribe, p);
    sub_->connect(endpoint);
  } catch (const zmq::error_t& e) {
    sub_.reset();
    monitor_.reset();
    connected_ = false;
    return Status::Unavailable("cannot follow weftd's events at " + endpoint + ": " + e.what());
  }
  const bool moved = !endpoint_.empty() && endpoint != endpoint_;
  if (!endpoint_.empty()) ++reopened_;
  endpoint_ = endpoint;
  connected_ = false;
  tcp_ = false;
  dead_ = false;
  const std::int64_t now = NowMs();
  opened_ms_ = now;
  quiet_since_ms_ = now;
  next_locate_ms_ = now + events_.check_ms;  // time for the new socket's handshake
  if (moved) Tell({.kind = StreamChange::Kind::kMoved, .endpoint = endpoint, .was_connected = was_connected});
  return Status::Ok();
}

Status EventStream::Open() {
  WEFT_ASSIGN_OR_RETURN(std::string endpoint, Locate(options_.timeout_ms));
  return Connect(endpoint);
}

void EventStream::Subscribe(const std::string& prefix) {
  if (std::find(prefixes_.begin(), prefixes_.end(), prefix) == prefixes_.end()) prefixes_.push_back(prefix);
  // Sent again even when known: weftd applies a subscription as it stands when it receives it.
  if (sub_) sub_->set(zmq::sockopt::subscribe, prefix);
}

void EventStream::Resubscribe(const std::string& topic) {
  for (const std::string& p : prefixes_)
    if (topic.rfind(p, 0) == 0) sub_->set(zmq::sockopt::subscribe, p);
}

void EventStream::Tell(StreamChange change) {
  if (events_.on_change) events_.on_change(change);
}

bool EventStream::Healthy() {
  while (monitor_) {
    zmq::message_t head, address;
    if (!monitor_->recv(head, zmq::recv_flags::dontwait)) break;
    if (head.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
    if (head.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t event = 0;
    std::uint32_t value = 0;
    std::memcpy(&event, head.data(), sizeof event);
    if (head.size() >= sizeof event + sizeof value)
      std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof event, sizeof value);
    switch (event) {
      case ZMQ_EVENT_CONNECTED:
        tcp_ = true;
        break;
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        if (!connected_) Tell({.kind = StreamChange::Kind::kConnected, .endpoint = endpoint_});
        connected_ = true;
        dead_ = false;
        break;
      case ZMQ_EVENT_DISCONNECTED:
        tcp_ = false;
        if (connected_) Tell({.kind = StreamChange::Kind::kLost, .endpoint = endpoint_});
        connected_ = false;
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        tcp_ = false;
        connected_ = false;
        dead_ = true;  // a failed handshake: ZeroMQ does not try this connection again
        Tell({.kind = StreamChange::Kind::kLost,
              .endpoint = endpoint_,
              .why = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                         ? "weftd refused the key (ZAP status " + std::to_string(value) + ")"
                         : std::string("the handshake failed (weftd's key not the one in the credential?)")});
        break;
      default:
        break;
    }
  }
  return connected_ && !dead_;
}

Status EventStream::Relocate(std::int64_t now) {
  next_locate_ms_ = now + events_.check_ms;
  quiet_since_ms_ = now;
  Result<std::string> where = Locate(kLocateMs);
  // A key weftd no longer knows never gets in again; no answer is no error (weftd may be
  // restarting), and the socket is tried again where it was.
  if (!where.ok() && where.status().code() == Code::kDenied) return where.status();
  const std::string target = where.ok() ? *where : endpoint_;
  if (target.empty()) return Status::Ok();
  // A socket with no connection made for a while is opened anew too, whatever went wrong.
  const bool stuck = !tcp_ && !connected_ && now - opened_ms_ >= events_.check_ms;
  if (!sub_ || target != endpoint_ || dead_ || stuck) return Connect(target);
  return Status::Ok();
}

Result<std::optional<ReceivedEvent>> EventStream::Next(int timeout_ms) {
  try {
    return Wait(timeout_ms);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::optional<ReceivedEvent>();
    sub_.reset();  // before its monitor
    monitor_.reset();
    tcp_ = false;
    if (connected_) Tell({.kind = StreamChange::Kind::kLost, .endpoint = endpoint_, .why = e.what()});
    connected_ = false;
    return Status::Unavailable("following weftd's events at " + endpoint_ + " failed: " + e.what() +
                               "; the next call looks for the events endpoint again");
  }
}

Result<std::optional<ReceivedEvent>> EventStream::Wait(int timeout_ms) {
  const std::int64_t deadline = NowMs() + std::max(timeout_ms, 0);
  while (true) {
    const std::int64_t now = NowMs();
    if (!sub_ && now >= next_locate_ms_) WEFT_RETURN_IF_ERROR(Relocate(now));
    if (sub_) {
      // The connection's changes first: told before the events received after them.
      const bool healthy = Healthy();
      zmq::message_t topic, body;
      if (sub_->recv(topic, zmq::recv_flags::dontwait)) {
        if (!topic.more() || !sub_->recv(body, zmq::recv_flags::none)) continue;
        nlohmann::json event = nlohmann::json::parse(body.to_string_view(), nullptr, false);
        if (!event.is_object()) continue;
        quiet_since_ms_ = NowMs();
        ReceivedEvent out{.topic = topic.to_string(), .event = std::move(event), .seen = {}};
        out.seen = sequence_.Check(out.topic, out.event);
        // A cluster made since the subscription reached weftd: sent again, the
        // subscription covers it too.
        if (const auto type = out.event.find("type");
            events_.follow_created && type != out.event.end() && *type == "cluster.created")
          Resubscribe(out.topic);
        return std::optional<ReceivedEvent>(std::move(out));
      }
      if ((!healthy || now - quiet_since_ms_ >= events_.check_ms) && now >= next_locate_ms_) {
        // Gone, refused, or quiet: a follower that lost the lead stays connected and says nothing.
        WEFT_RETURN_IF_ERROR(Relocate(now));
        continue;
      }
    }
    const std::int64_t left = deadline - NowMs();
    if (left <= 0) return std::optional<ReceivedEvent>();
    // Short waits: a quiet stream or a socket that went away is looked at again soon.
    const auto wait = std::chrono::milliseconds(std::min<std::int64_t>(left, kPollMs));
    if (sub_) {
      zmq::pollitem_t items[] = {{sub_->handle(), 0, ZMQ_POLLIN, 0}, {monitor_->handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, wait);
    } else {
      std::this_thread::sleep_for(wait);
    }
  }
}

}  // namespace weft::client
