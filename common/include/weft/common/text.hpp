// Small text helpers every program may use. Free functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace weft {

// `text` with its ASCII capitals lowered ("NOT_FOUND" -> "not_found"); every
// other byte as it is, whatever the locale.
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace weft
