// The paging cursor of the list ops (docs/protocol.md, "Paging"): a reply's
// `next`, given back as the next request's `after`. To a client it is an
// opaque string; here it is a letter naming the list and the id of the last
// row the page holds, so a page always starts right after the previous one,
// whatever rows were added or removed meanwhile.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/common/json_fields.hpp"
#include "weft/common/status.hpp"

namespace weft::api {

inline std::string MakeCursor(char list, std::int64_t id) { return std::string(1, list) + std::to_string(id); }

// body.after as the id it names; 0 when absent or null (the first page).
// `list` is the letter MakeCursor was given for `op`.
inline Result<std::int64_t> ReadCursor(const nlohmann::json& body, char list, std::string_view op) {
  if (!body.is_object()) return std::int64_t{0};
  auto it = body.find("after");
  if (it == body.end() || it->is_null()) return std::int64_t{0};
  const std::string hint = std::string("; give the \"next\" of the previous ") + std::string(op) +
                           " reply as it is, or leave \"after\" out for the first page";
  if (!it->is_string()) return Status::Invalid("after must be a cursor string, got " + jsonf::Brief(*it) + hint);
  const std::string& text = it->get_ref<const std::string&>();
  std::int64_t id = 0;
  const char* end = text.data() + text.size();
  if (text.size() < 2 || text.size() > 24 || text[0] != list || text[1] == '-' || text[1] == '+' ||
      std::from_chars(text.data() + 1, end, id).ptr != end || id <= 0)
    return Status::Invalid("after: " + jsonf::Brief(*it) + " is not a cursor of " + std::string(op) + hint);
  return id;
}

}  // namespace weft::api
