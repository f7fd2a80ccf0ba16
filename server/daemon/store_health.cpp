#include "weft/server/daemon/store_health.hpp"

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"
#include "weft/server/store/store.hpp"

namespace weft::server {

void StoreHealth::Failed(const Status& why, std::size_t requests, std::int64_t now_ms) {
  const auto n = static_cast<std::int64_t>(requests);
  {
    std::lock_guard lock(mu_);
    if (!failing_.load(std::memory_order_relaxed)) {
      since_ms_ = now_ms;
      batches_ = 0;
      requests_ = 0;
      logged_ms_ = 0;
      unlogged_batches_ = 0;
      unlogged_requests_ = 0;
    }
    last_at_ms_ = now_ms;
    failed_ms_ = now_ms;
    last_ = why.message();
    disk_full_ = store::DiskFull(why).has_value();
    ++batches_;
    requests_ += n;
    failing_.store(true, std::memory_order_relaxed);
  }
  // Every rolled-back batch logged would fill the full disk faster: the first
  // with its cause, then a line a minute with what happened since.
  ++unlogged_batches_;
  unlogged_requests_ += n;
  if (logged_ms_ != 0 && now_ms - logged_ms_ < kLogEveryMs) return;
  if (logged_ms_ == 0) {
    WEFT_LOG(kError, "weftd") << "the store cannot commit: " << why.message() << ". A batch of " << n
                              << " requests was rolled back and asked to retry; while commits keep failing, "
                              << "this is said once a minute (weft status shows the store's health)";
  } else {
    WEFT_LOG(kError, "weftd") << "the store still cannot commit: " << unlogged_batches_ << " batches ("
                              << unlogged_requests_ << " requests) rolled back in the last "
                              << DurationText(now_ms - logged_ms_) << ", " << batches_ << " since commits began "
                              << "failing " << DurationText(now_ms - since_ms_) << " ago; the last: "
                              << why.message();
  }
  logged_ms_ = now_ms;
  unlogged_batches_ = 0;
  unlogged_requests_ = 0;
}

void StoreHealth::Recovered(std::int64_t now_ms) {
  std::int64_t batches = 0, requests = 0, since = 0;
  {
    std::lock_guard lock(mu_);
    batches = batches_;
    requests = requests_;
    since = since_ms_;
    recovered_at_ms_ = now_ms;
    failing_.store(false, std::memory_order_relaxed);
  }
  WEFT_LOG(kWarn, "weftd") << "the store commits again, after " << DurationText(now_ms - since) << " of failures: "
                           << batches << " batches (" << requests << " requests) were rolled back and asked to "
                           << "retry";
}

nlohmann::json StoreHealth::Json() const {
  std::lock_guard lock(mu_);
  if (!failing_.load(std::memory_order_relaxed)) {
    nlohmann::json j = {{"state", "ok"}};
    if (recovered_at_ms_ > 0) {
      j["last_failure"] = last_;
      j["last_failure_at_ms"] = last_at_ms_;
      j["recovered_at_ms"] = recovered_at_ms_;
    }
    return j;
  }
  return {{"state", "failing"},
          {"disk_full", disk_full_},
          {"since_ms", since_ms_},
          {"last_failure_at_ms", last_at_ms_},
          {"last_failure", last_},
          {"batches_rolled_back", batches_},
          {"requests_rolled_back", requests_}};
}

}  // namespace weft::server
