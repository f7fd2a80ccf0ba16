// Time as an injected dependency, so tests can move it by hand.
// Times are milliseconds since the Unix epoch: they are stored (lease expiry)
// and must mean the same thing after a restart.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t NowMs() const = 0;
};

// Wall-clock time. Thread-safe.
class SystemClock final : public Clock {
 public:
  std::int64_t NowMs() const override;
  static SystemClock& Instance();
};

// A clock that only moves when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ms = 1'000'000) : now_ms_(start_ms) {}
  std::int64_t NowMs() const override { return now_ms_.load(); }
  void AdvanceMs(std::int64_t delta_ms) { now_ms_.fetch_add(delta_ms); }
  void SetMs(std::int64_t ms) { now_ms_.store(ms); }

 private:
  std::atomic<std::int64_t> now_ms_;
};

}  // namespace weft
