#include "weft/cli/format.hpp"

#include <algorithm>

#include "weft/common/text.hpp"

namespace weft::cli {

std::string ValueText(const json& value) {
  if (value.is_null()) return kMissing;
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Text(const json& obj, std::string_view key) {
  if (!obj.is_object()) return kMissing;
  auto it = obj.find(key);
  if (it == obj.end()) return kMissing;
  return ValueText(*it);
}

std::int64_t Int(const json& obj, std::string_view key, std::int64_t fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  if (it->is_number_float()) return static_cast<std::int64_t>(it->get<double>());
  if (it->is_number_unsigned()) return static_cast<std::int64_t>(it->get<std::uint64_t>());
  return it->get<std::int64_t>();
}

std::string YesNo(const json& obj, std::string_view key) {
  if (!obj.is_object()) return kMissing;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return kMissing;
  return it->get<bool>() ? "yes" : "no";
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  if (items.empty()) return kMissing;
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

std::string Join(const json& obj, std::string_view key, std::string_view sep) {
  if (!obj.is_object()) return kMissing;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return kMissing;
  std::vector<std::string> items;
  for (const json& v : *it) items.push_back(ValueText(v));
  return Join(items, sep);
}

std::string Duration(std::int64_t ms) { return DurationText(ms); }

std::string Ago(std::int64_t now_ms, std::int64_t then_ms) {
  if (then_ms <= 0) return kMissing;
  if (now_ms - then_ms < 1000) return "just now";
  return Duration(now_ms - then_ms) + " ago";
}

namespace {

// Optimal string alignment distance: Levenshtein plus the swap of two neighbours,
// the commonest typo ("lsit").
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  constexpr std::size_t kMaxEdits = 2;
  std::string best;
  std::size_t best_distance = kMaxEdits + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = EditDistance(word, c);
    if (d < best_distance && d < word.size()) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string Count(std::int64_t n, std::string_view singular, std::string_view plural) {
  return std::to_string(n) + " " + std::string(n == 1 ? singular : plural);
}

}  // namespace weft::cli
