#include "format.hpp"

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

std::string Duration(std::int64_t ms) {
  if (ms < 0) ms = 0;
  std::int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  std::int64_t m = s / 60;
  if (m < 60) return std::to_string(m) + "m " + std::to_string(s % 60) + "s";
  std::int64_t h = m / 60;
  if (h < 24) return std::to_string(h) + "h " + std::to_string(m % 60) + "m";
  return std::to_string(h / 24) + "d " + std::to_string(h % 24) + "h";
}

std::string Ago(std::int64_t now_ms, std::int64_t then_ms) {
  if (then_ms <= 0) return kMissing;
  if (now_ms - then_ms < 1000) return "just now";
  return Duration(now_ms - then_ms) + " ago";
}

std::string Count(std::int64_t n, std::string_view singular, std::string_view plural) {
  return std::to_string(n) + " " + std::string(n == 1 ? singular : plural);
}

}  // namespace weft::cli
