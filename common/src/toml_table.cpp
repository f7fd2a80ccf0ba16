#include "weft/common/toml_table.hpp"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

namespace weft {
namespace {

// A value as the error shows it: a string in double quotes (once), as in the
// JSON checks' errors; anything else as TOML writes it.
std::string Render(const toml::node& node) {
  std::string s;
  if (const auto* text = node.as_string()) {
    s = nlohmann::json(text->get()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    std::ostringstream out;
    node.visit([&](auto&& n) { out << n; });
    s = out.str();
  }
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Result<toml::table> ParseToml(std::string_view text, std::string_view origin) {
  // toml++ reports syntax errors by throwing; this is its edge.
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Status::Invalid(std::string(origin) + ":" + std::to_string(where.line) + ":" +
                           std::to_string(where.column) + ": not valid TOML: " + std::string(e.description()));
  }
}

Status CheckTables(const toml::table& root, const std::vector<std::string>& tables, const std::string& origin) {
  for (const auto& [k, node] : root) {
    std::string key(k.str());
    if (std::find(tables.begin(), tables.end(), key) == tables.end())
      return Status::Invalid(origin + ": unknown key '" + key + "' at the top level; the known tables are " +
                             JoinNames(tables));
    if (!node.is_table())
      return Status::Invalid(origin + ": '" + key + "' must be a table ([" + key + "]), not a value");
  }
  return Status::Ok();
}

void TableReader::Int(const std::string& key, std::int64_t min, std::int64_t max, std::int64_t* out) {
  const toml::node* node = Find(key);
  if (!node) return;
  // Not value<>(): it casts a float, which is undefined behaviour for 1e70.
  auto v = node->value_exact<std::int64_t>();
  if (!v || *v < min || *v > max) {
    return Fail(Where(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                ", got " + Render(*node) + "; set it within that range or remove it to use the default " +
                std::to_string(*out));
  }
  *out = *v;
}

void TableReader::Int(const std::string& key, std::int64_t min, std::int64_t max, int* out) {
  std::int64_t v = *out;
  Int(key, min, max, &v);
  *out = static_cast<int>(v);
}

void TableReader::Size(const std::string& key, std::size_t min, std::size_t max, std::size_t* out) {
  std::int64_t v = static_cast<std::int64_t>(*out);
  Int(key, static_cast<std::int64_t>(min), static_cast<std::int64_t>(max), &v);
  *out = static_cast<std::size_t>(v);
}

void TableReader::Bool(const std::string& key, bool* out) {
  const toml::node* node = Find(key);
  if (!node) return;
  if (!node->is_boolean()) return Fail(Where(key) + " must be true or false, got " + Render(*node));
  *out = *node->value<bool>();
}

void TableReader::String(const std::string& key, std::string* out) { ReadString(key, out); }

void TableReader::Path(const std::string& key, std::filesystem::path* out) {
  std::string v = out->string();
  if (ReadString(key, &v)) *out = v;
}

void TableReader::Fail(std::string message) {
  if (error_.ok()) error_ = Status::Invalid(std::move(message));
}

Status TableReader::Finish() const {
  if (!error_.ok() || !table_) return error_;
  for (const auto& [k, node] : *table_) {
    std::string key(k.str());
    if (std::find(known_.begin(), known_.end(), key) == known_.end())
      return Status::Invalid(origin_ + ": unknown key '" + key + "' in [" + name_ + "]; the known keys are " +
                             JoinNames(known_));
  }
  return Status::Ok();
}

const toml::node* TableReader::Find(const std::string& key) {
  known_.push_back(key);
  return table_ ? table_->get(key) : nullptr;
}

bool TableReader::ReadString(const std::string& key, std::string* out) {
  const toml::node* node = Find(key);
  if (!node) return false;
  if (!node->is_string()) {
    Fail(Where(key) + " must be a string, got " + Render(*node));
    return false;
  }
  *out = *node->value<std::string>();
  return true;
}

}  // namespace weft
