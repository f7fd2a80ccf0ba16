// Typed access to fields of a JSON object with errors that name the JSON path:
//   "body.capacity must be an integer from 1 to 4096, got \"four\"".
// Stateless free functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::jsonf {

using json = nlohmann::json;

// How deep arrays and objects may nest in JSON text Weft accepts. nlohmann's parser
// does not recurse, but copying, comparing and dumping a value do, once per level:
// a few hundred KB of "[[[[" would overflow the stack.
inline constexpr std::size_t kMaxDepth = 100;

// True when `text` nests arrays and objects more than `max_depth` deep (brackets
// inside strings do not count). A scan, not a parse: run it before parsing, and
// leave malformed text to the parser.
bool NestsDeeperThan(std::string_view text, std::size_t max_depth);

// A short rendering of a value for error messages (long values are cut).
std::string Brief(const json& value);

// Fails unless `value` is an object.
Status RequireObject(const json& value, std::string_view path);

// A required, non-empty string field; or, with a fallback, an optional one.
Result<std::string> String(const json& obj, std::string_view key, std::string_view path);
Result<std::string> String(const json& obj, std::string_view key, std::string_view path, std::string fallback);

// An integer field within [min, max]; optional when a fallback is given.
Result<std::int64_t> Int(const json& obj, std::string_view key, std::string_view path, std::int64_t min,
                         std::int64_t max, std::optional<std::int64_t> fallback = std::nullopt);

Result<bool> Bool(const json& obj, std::string_view key, std::string_view path,
                  std::optional<bool> fallback = std::nullopt);

}  // namespace weft::jsonf
