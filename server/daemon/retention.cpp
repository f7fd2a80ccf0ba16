#include "weft/server/daemon/retention.hpp"

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::server {

Status Retention::Batch(std::int64_t now_ms) {
  if (!in_round_) {
    in_round_ = true;
    round_started_ms_ = now_ms;
    round_ = {};
  }
  const std::int64_t cutoff = now_ms - config_.ended_after_ms;
  Result<store::PruneCounts> batch = store_.PruneEnded(cutoff, config_.batch_rows);
  if (!batch.ok()) {
    in_round_ = false;
    next_ms_ = now_ms + config_.interval_ms;
    WEFT_LOG(kError, "weftd") << "retention: removing what ended before " << cutoff
                              << " (ms since the epoch) failed; tried again in " << DurationText(config_.interval_ms)
                              << ": " << batch.status().message();
    return batch.status();
  }
  round_.Add(*batch);
  if (batch->more) {
    next_ms_ = now_ms;  // the next turn goes on
    return Status::Ok();
  }
  in_round_ = false;
  next_ms_ = now_ms + config_.interval_ms;
  if (round_.rows() > 0) {
    WEFT_LOG(kInfo, "weftd") << "retention: removed " << round_.clusters << " deleted clusters, " << round_.jobs
                             << " jobs, " << round_.tasks << " tasks, " << round_.attempts << " attempts and "
                             << round_.nodes << " nodes that ended more than " << DurationText(config_.ended_after_ms)
                             << " ago, in " << DurationText(now_ms - round_started_ms_);
  }
  constexpr auto kRelaxed = std::memory_order_relaxed;
  removed_clusters_.fetch_add(round_.clusters, kRelaxed);
  removed_jobs_.fetch_add(round_.jobs, kRelaxed);
  removed_tasks_.fetch_add(round_.tasks, kRelaxed);
  last_ms_.store(now_ms, std::memory_order_release);
  return Status::Ok();
}

nlohmann::json Retention::Json() const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  nlohmann::json j = {{"ended_after_ms", config_.ended_after_ms}, {"interval_ms", config_.interval_ms}};
  const std::int64_t last = last_ms_.load(std::memory_order_acquire);
  if (last > 0) j["last_round_at_ms"] = last;
  j["removed"] = {{"clusters", removed_clusters_.load(kRelaxed)},
                  {"jobs", removed_jobs_.load(kRelaxed)},
                  {"tasks", removed_tasks_.load(kRelaxed)}};
  return j;
}

}  // namespace weft::server
