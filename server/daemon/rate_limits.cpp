#include "weft/server/daemon/rate_limits.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "weft/common/log.hpp"

namespace weft::server {

bool RateLimits::Admit(const std::string& connection) {
  const std::int64_t rate = config_.security.api_rate_per_s;
  if (rate <= 0) return true;
  const std::int64_t now = clock_.NowMs();
  if (buckets_.size() > 10000) {
    // Forget connections that have been quiet for a while (their buckets are full again).
    for (auto it = buckets_.begin(); it != buckets_.end();)
      it = now - it->second.at_ms > 60'000 ? buckets_.erase(it) : std::next(it);
  }
  auto [it, fresh] = buckets_.try_emplace(connection, Bucket{static_cast<double>(config_.security.api_burst), now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min<double>(static_cast<double>(config_.security.api_burst),
                                b.tokens + static_cast<double>(now - b.at_ms) * static_cast<double>(rate) / 1000.0);
    b.at_ms = now;
  }
  if (b.tokens < 1.0) {
    if (refused_) refused_->Inc();
    if (!b.warned) {
      b.warned = true;
      WEFT_LOG(kWarn, "weftd") << "an api connection exceeds " << rate
                               << " requests/s (security.api_rate_per_s); refusing its excess (logged once)";
    }
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

std::int64_t RateLimits::RetryAfterMs(const std::string& connection) const {
  const std::int64_t rate = config_.security.api_rate_per_s;
  auto it = buckets_.find(connection);
  if (rate <= 0 || it == buckets_.end() || it->second.tokens >= 1.0) return 1;
  const double wait_ms = (1.0 - it->second.tokens) * 1000.0 / static_cast<double>(rate);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(wait_ms)));
}

}  // namespace weft::server
