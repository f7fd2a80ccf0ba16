// log::Tally: events a peer can make happen by the thousand, logged as a count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "weft/common/log.hpp"

namespace weft::log {

// Events that a peer can make happen by the thousand (a refused key, an
// undelivered reply) are logged as a tally: the first of each kind in an
// interval in full, the others counted and written as one line when the
// interval ends ("in the last 5 s: 1567 replies not delivered, 12 keys
// refused"). So a flood costs two lines per kind and interval, not one per event.
// Thread-safe.
class Tally {
 public:
  Tally(Level level, std::string component, std::int64_t interval_ms)
      : level_(level), component_(std::move(component)), interval_ms_(interval_ms) {}
  // Counts one event of `kind` (a plural noun phrase: "replies not delivered")
  // at `now_ms`; true when it is the first of its kind since the last summary,
  // which the caller then logs in full.
  bool Count(std::string_view kind, std::int64_t now_ms);
  // Writes the summary line once the interval is over and something was counted beyond the first ones.
  void Flush(std::int64_t now_ms);
  std::int64_t interval_ms() const { return interval_ms_; }

 private:
  std::mutex mu_;
  const Level level_;
  const std::string component_;
  const std::int64_t interval_ms_;
  std::int64_t since_ms_ = -1;  // start of the interval; -1: nothing counted yet
  std::map<std::string, std::int64_t, std::less<>> counts_;  // of the interval, the first ones included
};

}  // namespace weft::log
