// weftd's retention timer ([retention] in weftd.toml, docs/configuration.md):
// on the leader, every interval_ms and once when it starts leading, the
// reactor runs one batch of Store::PruneEnded per turn, inside the turn's
// group commit, until nothing more is due; each batch removes at most
// batch_rows rows, so a turn that prunes is never held up for long. What is
// removed and what is kept: server/store/retention_store.cpp.
//
// Batch and Due on the reactor thread; Json from any thread (server.status on
// the api front reads what the last round published).
#pragma once

#include <atomic>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/store/store.hpp"

namespace weft::server {

class Retention {
 public:
  Retention(const RetentionConfig& config, store::Store& store) : config_(config), store_(store) {}

  // Whether a batch is due now (never with ended_after_ms 0: everything is kept).
  bool Due(std::int64_t now_ms) const { return config_.ended_after_ms > 0 && now_ms >= next_ms_; }
  // When the next batch is due (INT64_MAX: never).
  std::int64_t NextMs() const { return config_.ended_after_ms > 0 ? next_ms_ : INT64_MAX; }
  // One batch, in the caller's transaction. When it leaves nothing due, the
  // round is over: it is logged with what it removed, and the next one is
  // due interval_ms later. A failure also puts the next round off that long.
  [[nodiscard]] Status Batch(std::int64_t now_ms);
  // This weftd starts leading: a round is due at once.
  void Restart() {
    next_ms_ = 0;
    round_ = {};
    in_round_ = false;
  }

  // The policy, when the last round ended and what the rounds removed since
  // weftd started, for server.status.
  nlohmann::json Json() const;

 private:
  const RetentionConfig& config_;
  store::Store& store_;
  std::int64_t next_ms_ = 0;
  bool in_round_ = false;
  std::int64_t round_started_ms_ = 0;
  store::PruneCounts round_;
  // When the last round ended (0: none yet), and what the rounds removed
  // since weftd started, as published.
  std::atomic<std::int64_t> last_ms_{0};
  std::atomic<std::int64_t> removed_clusters_{0};
  std::atomic<std::int64_t> removed_jobs_{0};
  std::atomic<std::int64_t> removed_tasks_{0};
};

}  // namespace weft::server
