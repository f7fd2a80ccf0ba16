#include "weftd_pool.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::web {
namespace {

constexpr const char* kLog = "weft-web";
// How long a look at weftd's address may take: a refused connection is known at once.
constexpr int kProbeMs = 1000;
constexpr auto kLogEvery = std::chrono::minutes(1);

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

WeftdPool::WeftdPool(zmq::context_t& ctx, client::Options options, int threads)
    : endpoint_(options.endpoint),
      single_(options.endpoint.find(',') == std::string::npos),
      timeout_(std::chrono::milliseconds(options.timeout_ms)) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, &ctx, options] {
      client::Client client(ctx, options);
      Run(client);
    });
  }
}

WeftdPool::~WeftdPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
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
  return single_ && ConnectionRefused(endpoint_, kProbeMs);
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    CountFailure(std::chrono::steady_clock::now());
  }
  return Status::Unavailable("nothing listens at " + endpoint_ + " (connection refused): weftd is down; '" + op +
                             "' was not sent");
}

bool WeftdPool::Note(const Status& transport) {
  const auto now = std::chrono::steady_clock::now();
  if (!transport.ok()) {
    const bool refused = Refuses();  // (a moment at most: not under the lock)
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = refused;
    if (failing_since_) {
      CountFailure(now);
      return refused;
    }
    failing_since_ = now;
    failed_ = logged_failed_ = 1;
    logged_at_ = now;
    if (refused) {
      WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_ << " cannot be reached: nothing listens there (connection "
                            << "refused); until it listens again calls are answered at once, unsent, and browsers "
                            << "get 503 (logged once, then counts at most once a minute; the recovery is logged too)";
    } else {
      WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_ << " does not answer: " << transport.message()
                            << "; browsers get 503 until it does (logged once, then counts at most once a minute; "
                            << "the recovery is logged too)";
    }
    return refused;
  }
  std::lock_guard<std::mutex> lock(mu_);
  refused_ = false;
  if (!failing_since_) return false;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_).count();
  WEFT_LOG(kInfo, kLog) << "weftd at " << endpoint_ << " answers again, after " << DurationText(ms) << " in which "
                        << failed_ << " calls failed";
  failing_since_.reset();
  failed_ = 0;
  logged_failed_ = 0;
  return false;
}

}  // namespace weft::web
