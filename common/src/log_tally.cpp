#include "weft/common/log_tally.hpp"

namespace weft::log {

bool Tally::Count(std::string_view kind, std::int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (since_ms_ < 0) since_ms_ = now_ms;
  auto it = counts_.find(kind);
  if (it == counts_.end()) it = counts_.emplace(std::string(kind), 0).first;
  return ++it->second == 1;
}

void Tally::Flush(std::int64_t now_ms) {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (since_ms_ < 0 || now_ms - since_ms_ < interval_ms_) return;
    for (const auto& [kind, n] : counts_)
      if (n > 1) line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    counts_.clear();
    since_ms_ = -1;
  }
  if (line.empty()) return;
  Write(level_, component_,
        "in the last " + std::to_string(interval_ms_ / 1000) + " s: " + line + " (the first of each was logged in full)");
}

}  // namespace weft::log
