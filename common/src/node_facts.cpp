#include "weft/common/node_facts.hpp"

#include <string>

namespace weft {

namespace {

using json = nlohmann::json;

bool IsStringList(const json& v) {
  if (v.is_string()) return true;
  if (!v.is_array()) return false;
  for (const json& k : v)
    if (!k.is_string()) return false;
  return true;
}

bool IsPort(const json& v) {
  return v.is_number_integer() && v.get<std::int64_t>() >= 1 && v.get<std::int64_t>() <= 65535;
}

struct Fact {
  const char* key;
  const char* type;  // as the message names it
  bool (*holds)(const json&);
};

constexpr Fact kFacts[] = {
    {"hostname", "a string", [](const json& v) { return v.is_string(); }},
    {"access_v4", "a string", [](const json& v) { return v.is_string(); }},
    {"bind_v4", "a string", [](const json& v) { return v.is_string(); }},
    {"provider_id", "a string", [](const json& v) { return v.is_string(); }},
    {"ssh_port", "an integer 1-65535", IsPort},
    {"host_keys", "a string or an array of strings", IsStringList},
    {"ssh_auth", "an object", [](const json& v) { return v.is_object(); }},
};

}  // namespace

Status CheckNodeFacts(const json& result) {
  if (!result.is_object()) return Status::Ok();
  for (const Fact& fact : kFacts) {
    auto it = result.find(fact.key);
    if (it == result.end() || fact.holds(*it)) continue;
    std::string held = it->dump();
    if (held.size() > 40) held = held.substr(0, 37) + "...";
    if (!it->is_null()) held = std::string("the ") + it->type_name() + " " + held;
    return Status::Invalid(std::string("'") + fact.key + "' must be " + fact.type + "; it is " + held +
                           " (Weft reads it from the node's results in every later task)");
  }
  return Status::Ok();
}

}  // namespace weft
