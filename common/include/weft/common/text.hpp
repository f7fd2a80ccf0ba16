// Small text helpers every program may use. Free functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

// `text` with its ASCII capitals lowered ("NOT_FOUND" -> "not_found"); every
// other byte as it is, whatever the locale.
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// A duration as people read it, everywhere weft prints one (the CLI, weftd's
// messages): 22 -> "22ms", 5230 -> "5.2s", 22400 -> "22s", 312000 -> "5m 12s",
// 50340000 -> "13h 59m", 89820000 -> "1d 0h 57m". Two units below a day, three
// from a day on (so a day's minutes are not lost); units that are zero at the end
// are left out (300000 -> "5m", 7 days -> "7d"). Seconds are rounded, and what is
// below the last unit shown is cut off. Negative reads "0ms".
inline std::string DurationText(std::int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return std::to_string(ms) + "ms";
  // Under 10 s a tenth of a second still tells jobs apart (0.9 s is not "0s").
  if (const std::int64_t tenths = (ms + 50) / 100; tenths < 100)
    return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "") + "s";
  const std::int64_t s = (ms + 500) / 1000;  // rounded, so 4,999 ms of a 5 s ttl reads "5s"
  const std::int64_t m = s / 60, h = m / 60, d = h / 24;
  // The units shown, largest first, and how many of them there are.
  const std::int64_t values[] = {d, h % 24, m % 60, s % 60};
  static constexpr const char* kUnits[] = {"d", "h", "m", "s"};
  const int first = d > 0 ? 0 : h > 0 ? 1 : m > 0 ? 2 : 3;
  int last = first + (d > 0 ? 2 : 1);
  if (last > 3) last = 3;
  while (last > first && values[last] == 0) --last;
  std::string out;
  for (int i = first; i <= last; ++i) {
    if (!out.empty()) out += ' ';
    out += std::to_string(values[i]) + kUnits[i];
  }
  return out;
}

// A message of several lines (libpq's: a DETAIL or HINT on a line of its own,
// its continuation lines indented by a tab) as one log line: the lines joined
// with "; ", a tab that starts a line dropped, and trailing spaces, semicolons
// and newlines cut off. "FATAL:  x\nHINT:  y\n" -> "FATAL:  x; HINT:  y".
inline std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n') {
      if (!out.empty() && !out.ends_with("; ")) out += "; ";
    } else if (c != '\t' || !(out.empty() || out.ends_with("; "))) {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

// The name in `known` that `typed` (an unknown field or op) most likely meant:
// the same once folded (lower case, without '_' and '-': "dryRun", "dry-run"
// and "dryrun" all read "dryrun"), else the nearest within two edits (and less
// than half its length); "" if none.
inline std::string NearestName(std::string_view typed, std::span<const std::string> known) {
  const auto folded = [](std::string_view s) {
    std::string out;
    for (char c : s)
      if (c != '_' && c != '-') out += AsciiLower(std::string_view(&c, 1));
    return out;
  };
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  const std::string want = folded(typed);
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& k : known) {
    const std::size_t d = distance(want, folded(k));
    if (d < best_distance && d * 2 < std::max<std::size_t>(want.size(), 2)) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace weft
