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
    if (a->due_ms < next_due_ms_) wake_.notify_all();
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

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const std::int64_t now = SteadyNowMs();
      next_due_ms_ = INT64_MAX;
      for (Armed* a : armed_) {
        if (a->fired) continue;
        if (a->due_ms > now) {
          next_due_ms_ = std::min(next_due_ms_, a->due_ms);
          continue;
        }
        a->fired = true;
        WEFT_LOG(kWarn, "postgres") << *a->peer << " did not answer within " << a->deadline_ms
                                 << " ms; closing the connection";
        (void)::shutdown(a->fd, SHUT_RDWR);
      }
      if (next_due_ms_ == INT64_MAX) wake_.wait(lock);
      else wake_.wait_for(lock, std::chrono::milliseconds(next_due_ms_ - now));
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Armed*> armed_;
  std::int64_t next_due_ms_ = INT64_MAX;
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
