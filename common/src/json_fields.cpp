#include "weft/common/json_fields.hpp"

#include "weft/common/wire.hpp"

namespace weft::jsonf {
namespace {

std::string Path(std::string_view path, std::string_view key) {
  std::string p(path);
  if (!p.empty()) p += '.';
  p += key;
  return p;
}

const json* Find(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

bool NestsDeeperThan(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // skips the escaped character, '"' among them
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

std::string Brief(const json& value) {
  std::string s = wire::Dump(value);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

Status RequireObject(const json& value, std::string_view path) {
  if (value.is_object()) return Status::Ok();
  return Status::Invalid(std::string(path) + " must be a JSON object, got " + Brief(value));
}

Result<std::string> String(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Find(obj, key);
  if (!v) return Status::Invalid(Path(path, key) + " is required (a non-empty string)");
  if (!v->is_string()) return Status::Invalid(Path(path, key) + " must be a string, got " + Brief(*v));
  std::string s = v->get<std::string>();
  if (s.empty()) return Status::Invalid(Path(path, key) + " must not be empty");
  return s;
}

Result<std::string> String(const json& obj, std::string_view key, std::string_view path, std::string fallback) {
  const json* v = Find(obj, key);
  if (!v) return fallback;
  if (!v->is_string()) return Status::Invalid(Path(path, key) + " must be a string, got " + Brief(*v));
  return v->get<std::string>();
}

Result<std::int64_t> Int(const json& obj, std::string_view key, std::string_view path, std::int64_t min,
                         std::int64_t max, std::optional<std::int64_t> fallback) {
  const json* v = Find(obj, key);
  // Written only for an error: every request reads a few integers.
  auto range = [&] { return " an integer from " + std::to_string(min) + " to " + std::to_string(max); };
  if (!v) {
    if (fallback) return *fallback;
    return Status::Invalid(Path(path, key) + " is required (" + range().substr(1) + ")");
  }
  if (!v->is_number_integer()) return Status::Invalid(Path(path, key) + " must be" + range() + ", got " + Brief(*v));
  std::int64_t n = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
                       ? INT64_MAX
                       : v->get<std::int64_t>();
  if (n < min || n > max) return Status::Invalid(Path(path, key) + " must be" + range() + ", got " + Brief(*v));
  return n;
}

Result<bool> Bool(const json& obj, std::string_view key, std::string_view path, std::optional<bool> fallback) {
  const json* v = Find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::Invalid(Path(path, key) + " is required (true or false)");
  }
  if (!v->is_boolean()) return Status::Invalid(Path(path, key) + " must be true or false, got " + Brief(*v));
  return v->get<bool>();
}

}  // namespace weft::jsonf
