// weft::server::RateLimits: a token bucket per api connection (its routing
// id), so that one noisy client gets refusals while every other connection,
// and the provisioner endpoint, is served (security.api_rate_per_s and
// security.api_burst in weftd.toml). Part of weftd's reactor.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "weft/server/config/config.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/metrics.hpp"

namespace weft::server {

class RateLimits {
 public:
  RateLimits(const Config& config, const Clock& clock) : config_(config), clock_(clock) {}

  // Whether `connection` may have one more request now (and takes its token).
  bool Admit(const std::string& connection);
  // After a refusal: how long until `connection` has a token again (ms, at least 1).
  std::int64_t RetryAfterMs(const std::string& connection) const;
  // Counts each refusal there (null: not counted).
  void set_refusal_counter(metrics::Counter* refused) { refused_ = refused; }

 private:
  struct Bucket {
    double tokens = 0;
    std::int64_t at_ms = 0;
    bool warned = false;
  };

  const Config& config_;
  const Clock& clock_;
  std::map<std::string, Bucket> buckets_;
  metrics::Counter* refused_ = nullptr;
};

}  // namespace weft::server
