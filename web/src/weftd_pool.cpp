#include "weftd_pool.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "weft/common/curve.hpp"
#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::web {
namespace {

constexpr const char* kLog = "weft-web";
// How long a look at weftd's address may take: a refused connection is known at once.
constexpr int kProbeMs = 1000;
constexpr auto kLogEvery = std::chrono::minutes(1);
// The watcher's connections try again every 100 ms after a loss, then less
// often, up to this.
constexpr int kReconnectMaxMs = 1000;
// How often the watcher looks whether weft-web is stopping.
constexpr int kWatchPollMs = 200;

// Whether a TCP connection to a tcp://host:port endpoint is refused (within
// `ms`): nothing listens there. Anything else (it connects, times out, the
// endpoint is not tcp://) is not a refusal.
bool ConnectionRefused(const std::string& endpoint, int ms) {
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string address = endpoint.substr(6);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return false;
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int error = 0;
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      socklen_t size = sizeof error;
      if (poll(&p, 1, ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = 0;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) close(fd);
  return error == ECONNREFUSED;
}

}  // namespace

WeftdPool::WeftdPool(zmq::context_t& ctx, client::Options options, int threads, std::chrono::milliseconds heartbeat,
                     Listener listener)
    : endpoint_(options.endpoint),
      endpoints_(client::SplitEndpoints(options.endpoint)),
      listener_(std::move(listener)),
      timeout_(std::chrono::milliseconds(options.timeout_ms)) {
  if (endpoints_.empty()) endpoints_.push_back(endpoint_);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, &ctx, options] {
      client::Client client(ctx, options);
      Run(client);
    });
  }
  watcher_ = std::thread([this, &ctx, options, heartbeat] { Watch(ctx, options, heartbeat); });
}

WeftdPool::~WeftdPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  stop_watching_ = true;
  for (std::thread& t : threads_) t.join();
  watcher_.join();
}

void WeftdPool::Submit(std::function<void(client::Client&)> job, std::function<void(bool refused)> unsent) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{std::chrono::steady_clock::now(), std::move(job), std::move(unsent)});
  }
  cv_.notify_one();
}

void WeftdPool::Run(client::Client& client) {
  while (true) {
    Job job;
    bool refused = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;  // calls still queued are dropped with their handlers: the server is stopping
      job = std::move(jobs_.front());
      jobs_.pop_front();
      refused = refused_;
    }
    if (job.unsent && std::chrono::steady_clock::now() - job.queued_at >= timeout_) {
      job.unsent(false);
      continue;
    }
    // The last call found weftd stopped: look again before sending, rather
    // than wait the whole timeout for a weftd that is not there.
    if (refused && job.unsent && Refuses()) {
      job.unsent(true);
      continue;
    }
    job.run(client);
  }
}

bool WeftdPool::Refuses() {
  // (With several weftd, the client itself skips one it cannot connect to.)
  return std::all_of(endpoints_.begin(), endpoints_.end(),
                     [](const std::string& e) { return ConnectionRefused(e, kProbeMs); });
}

void WeftdPool::Watch(zmq::context_t& ctx, const client::Options& options, std::chrono::milliseconds heartbeat) {
  // Three heartbeats unanswered: the connection is dropped (its monitor says
  // DISCONNECTED). A new one to a weftd that is stopped but not gone connects
  // (the kernel accepts for it) and then waits for a handshake: that wait gets
  // as long, instead of libzmq's 30 s.
  const int patience_ms = static_cast<int>(std::min<std::int64_t>(heartbeat.count() * 3, 3'600'000));
  struct Link {
    std::unique_ptr<zmq::socket_t> socket;
    std::unique_ptr<zmq::socket_t> monitor;
    bool up = false;  // connected (its handshake done) since it was last lost
  };
  static std::atomic<std::uint64_t> next_monitor{0};
  std::vector<Link> links;
  std::vector<zmq::pollitem_t> items;
  // Since when every connection is down after one was lost (none: the epoch).
  std::chrono::steady_clock::time_point down_since{};
  try {
    for (const std::string& endpoint : endpoints_) {
      Link link;
      link.socket = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
      link.socket->set(zmq::sockopt::linger, 0);
      link.socket->set(zmq::sockopt::reconnect_ivl_max, kReconnectMaxMs);
      link.socket->set(zmq::sockopt::heartbeat_ivl, static_cast<int>(heartbeat.count()));
      link.socket->set(zmq::sockopt::heartbeat_timeout, patience_ms);
      link.socket->set(zmq::sockopt::handshake_ivl, patience_ms);
      if (!options.server_key.empty()) curve::SetClientKeys(*link.socket, options.server_key, options.keys);
      const std::string address = "inproc://weft-web-watch-" + std::to_string(next_monitor++);
      if (zmq_socket_monitor(static_cast<void*>(*link.socket), address.c_str(),
                             ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED) != 0) {
        WEFT_LOG(kWarn, kLog) << "cannot watch the connection to weftd at " << endpoint << ": "
                              << zmq_strerror(zmq_errno()) << "; a stopped weftd is noticed by a call that fails";
        return;
      }
      link.monitor = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
      link.monitor->set(zmq::sockopt::linger, 0);
      link.monitor->connect(address);
      link.socket->connect(endpoint);
      items.push_back({static_cast<void*>(*link.monitor), 0, ZMQ_POLLIN, 0});
      links.push_back(std::move(link));
    }
  } catch (const zmq::error_t& e) {
    WEFT_LOG(kWarn, kLog) << "cannot watch the connection to weftd at " << endpoint_ << ": " << e.what()
                          << "; a stopped weftd is noticed by a call that fails";
    return;
  }
  while (!stop_watching_) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(kWatchPollMs));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      continue;  // EINTR: a signal
    }
    bool connected = false, lost = false, retried = false;
    for (std::size_t i = 0; i < links.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      // A monitor event is two frames: the event (16-bit id, 32-bit value) and the endpoint.
      zmq::message_t event;
      while (links[i].monitor->recv(event, zmq::recv_flags::dontwait)) {
        std::uint16_t id = 0;
        if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
        zmq::message_t address;
        if (event.more()) (void)links[i].monitor->recv(address, zmq::recv_flags::dontwait);
        if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
          links[i].up = connected = true;
        } else if (id == ZMQ_EVENT_DISCONNECTED) {
          links[i].up = false;
          lost = true;
        } else if (id == ZMQ_EVENT_CONNECT_RETRIED) {
          links[i].up = false;
          retried = true;
        }
      }
    }
    if (std::any_of(links.begin(), links.end(), [](const Link& l) { return l.up; })) {
      down_since = {};
      if (connected) Back(false);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (lost && down_since == std::chrono::steady_clock::time_point{}) down_since = now;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      known = failing_since_ && refused_;
      // Lost: the next calls look before they are sent.
      if (lost || retried) refused_ = true;
    }
    // A new connection failed: is it that nothing listens there (weftd
    // stopped), or is weftd starting again already (the next event says)?
    if (retried && !known && Refuses()) {
      Failing(true, "the connection to weftd was lost", false);
      continue;
    }
    // Lost (its heartbeats unanswered, or closed) and not made again within
    // the patience, though weftd's address takes connections: weftd hangs.
    // (A weftd that stops or restarts refuses, or completes a handshake, well before.)
    if (down_since != std::chrono::steady_clock::time_point{} &&
        now - down_since >= std::chrono::milliseconds(patience_ms)) {
      down_since = {};
      bool failing = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        failing = failing_since_.has_value();
      }
      if (!failing && !Refuses())
        Failing(false,
                "its connection's heartbeats went unanswered, and a new connection gets no handshake (is weftd "
                "stopped with SIGSTOP, or stuck?)",
                false);
    }
  }
}

void WeftdPool::CountFailure(std::chrono::steady_clock::time_point now) {
  ++failed_;
  if (!failing_since_ || now - logged_at_ < kLogEvery) return;
  const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_).count();
  const auto last = std::chrono::duration_cast<std::chrono::milliseconds>(now - logged_at_).count();
  WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_
                        << (refused_ ? " still cannot be reached (connection refused)" : " still does not answer")
                        << ": " << (failed_ - logged_failed_) << " calls failed in the last " << DurationText(last)
                        << ", " << failed_ << " in the " << DurationText(since) << " since it stopped answering";
  logged_at_ = now;
  logged_failed_ = failed_;
}

Status WeftdPool::Expired(const std::string& op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CountFailure(std::chrono::steady_clock::now());
  }
  return Status::Timeout("'" + op + "' waited " + std::to_string(timeout_.count()) +
                         " ms for a connection to weftd at " + endpoint_ +
                         ", all busy with calls it did not answer; not sent");
}

Status WeftdPool::Refused(const std::string& op) {
  Failing(true, "nothing listens at its address", true);
  return Status::Unavailable("nothing listens at " + endpoint_ + " (connection refused): weftd is down; '" + op +
                             "' was not sent");
}

bool WeftdPool::Note(const Status& transport) {
  if (transport.ok()) {
    Back(true);
    return false;
  }
  const bool refused = Refuses();  // (a moment at most: not under the lock)
  Failing(refused, transport.message(), true);
  return refused;
}

void WeftdPool::Failing(bool refused, const std::string& why, bool call) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = refused;
    if (failing_since_) {
      if (call) CountFailure(now);
      return;
    }
    failing_since_ = now;
    failed_ = logged_failed_ = call ? 1 : 0;
    logged_at_ = now;
    if (refused) {
      WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_ << " cannot be reached: nothing listens there (connection "
                            << "refused); until it listens again calls are answered at once, unsent, and browsers "
                            << "get 503 (logged once, then counts at most once a minute; the recovery is logged too)";
    } else {
      WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_ << " does not answer: " << why
                            << "; browsers get 503 until it does (logged once, then counts at most once a minute; "
                            << "the recovery is logged too)";
    }
  }
  if (listener_) {
    listener_(false, refused ? "weftd cannot be reached: it is stopped or restarting"
                             : "weftd does not answer");
  }
}

void WeftdPool::Back(bool call) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = false;
    if (!failing_since_) return;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_).count();
    WEFT_LOG(kInfo, kLog) << "weftd at " << endpoint_ << (call ? " answers again" : " can be connected to again")
                          << ", after " << DurationText(ms) << " in which " << failed_ << " calls failed";
    failing_since_.reset();
    failed_ = 0;
    logged_failed_ = 0;
  }
  if (listener_) listener_(true, "weftd is back");
}

}  // namespace weft::web
