#include "weft/common/call_watchdog.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/common/log.hpp"

namespace weft {
namespace {

std::int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using Armed = CallWatchdog::Armed;

// The calls armed in the process and the thread that watches them (started
// with the first guard, stopped when the process exits).
class Watcher {
 public:
  static Watcher& Get() {
    static Watcher watcher;
    return watcher;
  }
  ~Watcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Add(Armed* a) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    armed_.push_back(a);
    last_armed_ms_ = SteadyNowMs();
    // A busy connection arms a call every few microseconds: the watcher, awake
    // while calls come, finds each at its next look, so only a sleeping one is woken.
    if (sleeping_) {
      sleeping_ = false;
      wake_.notify_all();
    }
  }
  void Remove(Armed* a) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(armed_.begin(), armed_.end(), a);
    if (it != armed_.end()) {
      *it = armed_.back();
      armed_.pop_back();
    }
  }
  bool Fired(const Armed* a) {
    std::lock_guard<std::mutex> lock(mu_);
    return a->fired;
  }

 private:
  Watcher() = default;

  // Looks every kLookMs while calls are armed or were lately, and sleeps
  // until the next Add once none was armed for kIdleMs. A deadline is thus
  // acted on up to kLookMs late; deadlines are hundreds of milliseconds at least.
  static constexpr std::int64_t kLookMs = 50;
  static constexpr std::int64_t kIdleMs = 1000;

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const std::int64_t now = SteadyNowMs();
      for (Armed* a : armed_) {
        if (a->fired || a->due_ms > now) continue;
        a->fired = true;
        WEFT_LOG(kWarn, "postgres") << *a->peer << " did not answer within " << a->deadline_ms
                                 << " ms; closing the connection";
        (void)::shutdown(a->fd, SHUT_RDWR);
      }
      if (armed_.empty() && now - last_armed_ms_ >= kIdleMs) {
        sleeping_ = true;
        wake_.wait(lock, [this] { return stop_ || !sleeping_; });
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(kLookMs), [this] { return stop_; });
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Armed*> armed_;
  std::int64_t last_armed_ms_ = 0;
  bool sleeping_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

CallWatchdog::Guard::Guard(int fd, std::int64_t deadline_ms, const std::string& peer) {
  if (fd < 0 || deadline_ms <= 0) return;
  armed_ = {.fd = fd, .deadline_ms = deadline_ms, .due_ms = SteadyNowMs() + deadline_ms, .peer = &peer, .fired = false};
  watched_ = true;
  Watcher::Get().Add(&armed_);
}

CallWatchdog::Guard::~Guard() {
  if (watched_) Watcher::Get().Remove(&armed_);
}

bool CallWatchdog::Guard::fired() const { return watched_ && Watcher::Get().Fired(&armed_); }

}  // namespace weft
