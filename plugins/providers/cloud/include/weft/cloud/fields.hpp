// Reading a cloud provider's fields from a task, as the aws and openstack
// providers both do: Coopr's catalogs write numbers and booleans as strings
// and lists as "a, b", so each reader takes both forms, and an error names the
// plugin and the field to fix. An absent, null or empty field is "not set".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace weft::cloud {

// The task's JSON document; a task that is not an object is refused.
nlohmann::json ParseTask(const weft::sdk::Task& task);

// The field's value, or nothing when it is not set.
std::optional<nlohmann::json> Field(const weft::sdk::Task& task, const char* name);

// `plugin` ("aws provider") begins each error; `meaning` says what the field is.
std::string StringField(const char* plugin, const weft::sdk::Task& task, const char* name, const char* meaning,
                        bool required);
// "a, b" or ["a","b"]; when set it must hold one item at least. `shape` ends the
// error after "must be a comma-separated list ", e.g. "(\"default, web\")".
std::vector<std::string> ListField(const char* plugin, const weft::sdk::Task& task, const char* name,
                                   const char* shape);
std::optional<std::int64_t> IntegerField(const char* plugin, const weft::sdk::Task& task, const char* name,
                                         std::int64_t min, std::int64_t max);
std::optional<bool> BoolField(const char* plugin, const weft::sdk::Task& task, const char* name);

}  // namespace weft::cloud
