#include "weft/cloud/fields.hpp"

#include <sstream>

namespace weft::cloud {

using json = nlohmann::json;
using weft::sdk::Error;

json ParseTask(const weft::sdk::Task& task) {
  json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) throw Error(WEFT_ERR_INVALID, "the task JSON is not an object");
  return t;
}

std::optional<json> Field(const weft::sdk::Task& task, const char* name) {
  const std::optional<std::string> text = task.FieldJson(name);
  if (!text) return std::nullopt;
  json v = json::parse(*text, nullptr, false);
  if (v.is_null() || v.is_discarded() || (v.is_string() && v.get<std::string>().empty())) return std::nullopt;
  return v;
}

std::string StringField(const char* plugin, const weft::sdk::Task& task, const char* name, const char* meaning,
                        bool required) {
  const std::optional<json> v = Field(task, name);
  if (!v) {
    if (required) {
      throw Error(WEFT_ERR_INVALID, std::string(plugin) + ": field '" + name + "' (" + meaning +
                                        ") is required; set it in the provider");
    }
    return {};
  }
  if (!v->is_string()) {
    throw Error(WEFT_ERR_INVALID, std::string(plugin) + ": field '" + name + "' (" + meaning + ") must be a string");
  }
  return v->get<std::string>();
}

std::vector<std::string> ListField(const char* plugin, const weft::sdk::Task& task, const char* name,
                                   const char* shape) {
  const std::optional<json> v = Field(task, name);
  std::vector<std::string> out;
  if (!v) return out;
  auto add = [&](const std::string& item) {
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(item.substr(first, last - first + 1));
  };
  if (v->is_string()) {
    std::istringstream in(v->get<std::string>());
    for (std::string item; std::getline(in, item, ',');) add(item);
  } else if (v->is_array()) {
    for (const json& item : *v) {
      if (!item.is_string()) break;
      add(item.get<std::string>());
    }
    if (out.size() != v->size()) out.clear();
  }
  if (out.empty()) {
    throw Error(WEFT_ERR_INVALID,
                std::string(plugin) + ": field '" + name + "' must be a comma-separated list " + shape);
  }
  return out;
}

std::optional<std::int64_t> IntegerField(const char* plugin, const weft::sdk::Task& task, const char* name,
                                         std::int64_t min, std::int64_t max) {
  const std::optional<json> v = Field(task, name);
  if (!v) return std::nullopt;
  std::int64_t n = min - 1;  // out of range unless the value reads as a whole number
  if (v->is_number_integer()) {
    n = v->get<std::int64_t>();
  } else if (v->is_string()) {  // Coopr's catalogs write numbers as strings
    try {
      std::size_t used = 0;
      n = std::stoll(v->get<std::string>(), &used);
      if (used != v->get<std::string>().size()) n = min - 1;
    } catch (const std::exception&) {
      n = min - 1;
    }
  }
  if (n < min || n > max) {
    throw Error(WEFT_ERR_INVALID, std::string(plugin) + ": field '" + name + "' must be a whole number from " +
                                      std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

std::optional<bool> BoolField(const char* plugin, const weft::sdk::Task& task, const char* name) {
  const std::optional<json> v = Field(task, name);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string() && (*v == "true" || *v == "false")) return *v == "true";
  throw Error(WEFT_ERR_INVALID, std::string(plugin) + ": field '" + name + "' must be true or false");
}

}  // namespace weft::cloud
