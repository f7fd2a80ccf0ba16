// weft::server::StoreHealth: whether weftd's group commits land, as
// server.status reports it (docs/protocol.md, "store.health"). While they
// fail it keeps since when, the last reason (a full disk, in words that say
// where and what to do) and how many batches were rolled back; the log says
// so once with the cause, then at most once a minute with the counts, and
// once more when commits land again (docs/operations.md, "When the disk fills").
//
// Failed() and Committed() run on the reactor thread (GroupCommit); Json()
// on any thread (server.status is also answered by weftd's api front).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::server {

class StoreHealth {
 public:
  // At most one line a minute while commits keep failing.
  static constexpr std::int64_t kLogEveryMs = 60'000;

  // A batch of `requests` was rolled back because of `why`, at `now_ms`.
  void Failed(const Status& why, std::size_t requests, std::int64_t now_ms);
  // Commits that land between failures do not end them: on a full disk a small
  // commit may still fit where the WAL has room while larger ones fail. They
  // have ended when a commit lands this long after the last failure.
  static constexpr std::int64_t kQuietMs = 10'000;

  // A commit landed at `now_ms`: once failures have ended (kQuietMs), the log says so. Cheap while healthy.
  void Committed(std::int64_t now_ms) {
    if (failing_.load(std::memory_order_relaxed) && now_ms - failed_ms_ >= kQuietMs) Recovered(now_ms);
  }
  bool failing() const { return failing_.load(std::memory_order_relaxed); }
  // {"state": "ok"} or {"state": "failing", "disk_full", "since_ms", "last_failure_at_ms",
  // "last_failure", "batches_rolled_back", "requests_rolled_back"}; with "last_failure" and
  // "recovered_at_ms" of the last episode once it ended.
  nlohmann::json Json() const;

 private:
  void Recovered(std::int64_t now_ms);

  std::atomic<bool> failing_{false};
  mutable std::mutex mu_;  // guards what follows (written by the reactor, read by server.status)
  std::int64_t since_ms_ = 0;
  std::int64_t last_at_ms_ = 0;
  std::string last_;
  bool disk_full_ = false;
  std::int64_t batches_ = 0;   // rolled back since since_ms_
  std::int64_t requests_ = 0;
  std::int64_t recovered_at_ms_ = 0;  // when the last episode ended (0: none yet)
  std::int64_t failed_ms_ = 0;  // last_at_ms_, for the reactor thread without the lock
  // The log's throttle (reactor thread only): when it last spoke and what it has not told yet.
  std::int64_t logged_ms_ = 0;
  std::int64_t unlogged_batches_ = 0;
  std::int64_t unlogged_requests_ = 0;
};

}  // namespace weft::server
