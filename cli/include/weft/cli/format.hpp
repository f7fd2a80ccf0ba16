// Small helpers that turn reply JSON into table cells. They never throw: a field
// the server did not send (an older server, a newer client) shows as "-".
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace weft::cli {

using json = nlohmann::json;

inline constexpr char kMissing[] = "-";

// obj[key] as text: strings as they are, numbers and booleans printed, objects
// and arrays as compact JSON, absent or null as "-".
std::string Text(const json& obj, std::string_view key);
// A JSON value as a cell: strings unquoted, everything else as compact JSON.
std::string ValueText(const json& value);
// obj[key] as an integer, or `fallback` when absent or not a number.
std::int64_t Int(const json& obj, std::string_view key, std::int64_t fallback = 0);
// obj[key] as "yes"/"no", or "-".
std::string YesNo(const json& obj, std::string_view key);
// An array of strings joined with `sep`; "-" when absent or empty.
std::string Join(const json& obj, std::string_view key, std::string_view sep = ", ");
std::string Join(const std::vector<std::string>& items, std::string_view sep = ", ");

// A duration as weft prints every one (weft::DurationText, which weftd's messages use
// too): "22ms", "5.2s", "22s", "5m 12s", "13h 59m", "1d 0h 57m".
std::string Duration(std::int64_t ms);
// How long ago `then_ms` was, from `now_ms`: "3s ago", "just now", "-" for 0.
std::string Ago(std::int64_t now_ms, std::int64_t then_ms);
// The candidate closest to a mistyped `word` (edits: insert, delete, replace, swap two
// neighbours), or "" when none is close enough to be what was meant: at most 2 edits,
// and fewer than the word's length.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// "1 host", "2 hosts".
std::string Count(std::int64_t n, std::string_view singular, std::string_view plural);

}  // namespace weft::cli
