#include "field_check.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/common/text.hpp"
#include "weft/common/json_fields.hpp"

namespace weft::catalog {
namespace {

// How a value fits the type its field declares.
enum class Fit {
  kYes,
  kAsString,  // a string that reads as the type ("600", "true"): some plugins take it, others refuse it
  kNo,
};

struct TypeCheck {
  Fit fit = Fit::kYes;
  std::string expected;  // in words: "a whole number", "a list"
};

// A string holding a %macro% is expanded per node when the task is made:
// what it becomes cannot be told here.
bool HasMacro(const json& v) { return v.is_string() && v.get<std::string>().find('%') != std::string::npos; }

bool ReadsAsInteger(const std::string& s) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

bool ReadsAsNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool IsListOfStrings(const json& v) {
  if (!v.is_array()) return false;
  for (const json& item : v)
    if (!item.is_string()) return false;
  return true;
}

// The field types hosts register: string, integer, number, boolean, json. A
// json field whose default is a list or an object takes that shape.
TypeCheck CheckType(const json& field, const json& value) {
  const std::string type = field.value("type", std::string("string"));
  const bool text = value.is_string();
  const std::string s = text ? value.get<std::string>() : std::string();
  if (value.is_null() || HasMacro(value)) return {};
  if (type == "string") {
    // Lists ("a, b" or ["a","b"]) are string fields too, so a list of strings fits.
    return {text || IsListOfStrings(value) ? Fit::kYes : Fit::kNo, "a string"};
  }
  if (type == "integer") {
    if (value.is_number_integer()) return {};
    return {text && ReadsAsInteger(s) ? Fit::kAsString : Fit::kNo, "a whole number"};
  }
  if (type == "number") {
    if (value.is_number()) return {};
    return {text && ReadsAsNumber(s) ? Fit::kAsString : Fit::kNo, "a number"};
  }
  if (type == "boolean") {
    if (value.is_boolean()) return {};
    return {text && (s == "true" || s == "false") ? Fit::kAsString : Fit::kNo, "true or false"};
  }
  const json def = field.value("default", json());
  if (def.is_array()) {
    if (value.is_array()) return {};
    return {text ? Fit::kAsString : Fit::kNo, "a list"};
  }
  if (def.is_object()) return {value.is_object() ? Fit::kYes : Fit::kNo, "a JSON object"};
  return {};
}

// A string field names a resource (of one of the plugin's resource types) when
// its name is "resource" or ends in "_resource", or its label ends in "resource":
// ssh_key_resource, user_data_resource, ansible's resource, puppet's modules
// ("Modules resource").
bool NamesResource(const json& field) {
  if (field.value("type", std::string("string")) != "string") return false;
  const std::string name = field.value("name", std::string());
  const std::string label = AsciiLower(field.value("label", std::string()));
  return name == "resource" || name.ends_with("_resource") || label.ends_with("resource");
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// One entity's fields: a provider's provisioner, or one action of a service.
struct Entity {
  Kind kind;
  std::string name;
  std::string action;  // services only
  std::string type;    // the plugin type
  std::string path;    // where the fields are: "provisioner", "provisioner.actions.install.fields"
  const json* fields;

  std::string Where(const std::string& field) const {
    return std::string(KindName(kind)) + " '" + name + "'" + (action.empty() ? "" : " (action " + action + ")") + ": " +
           path + "." + field;
  }
};

class Checker {
 public:
  Checker(const std::map<std::string, json>& descriptors, resources::ResourceStore* resources, std::string tenant)
      : descriptors_(descriptors), resources_(resources), tenant_(std::move(tenant)) {}

  Status Check(const Entity& e) {
    auto d = descriptors_.find(e.type);
    if (d == descriptors_.end()) {
      // Once per entity and plugin, not per action.
      if (unchecked_.insert({std::string(KindName(e.kind)), e.name, e.type}).second)
        Warn(e, "", "unchecked",
             std::string(KindName(e.kind)) + " '" + e.name + "': fields not checked: no host has registered plugin '" +
                 e.type + "' yet, so its field schema is unknown; check again once a weft-host with that plugin "
                 "has registered");
      return Status::Ok();
    }
    // A provider entry must name a provider plugin, a service action an
    // automator: weftd would send the plugin actions it does not have.
    const std::string wanted = e.kind == Kind::kProvider ? "provider" : "automator";
    const std::string registered = d->second.value("kind", std::string());
    if (!registered.empty() && registered != wanted) {
      const std::string where =
          e.kind == Kind::kProvider ? std::string("providertype") : "provisioner.actions." + e.action + ".type";
      auto a = [](const std::string& kind) { return (kind == "automator" ? "an " : "a ") + kind; };
      Problem(e, "", "kind", a(wanted) + " plugin",
              std::string(KindName(e.kind)) + " '" + e.name + "'" +
                  (e.action.empty() ? "" : " (action " + e.action + ")") + ": " + where + " '" + e.type + "' is " +
                  a(registered) + " plugin, not " + a(wanted) + "; name " + a(wanted) +
                  " plugin (see `weft plugin list`)");
      return Status::Ok();
    }
    // A descriptor without a field list declares no schema to check against.
    if (!d->second.contains("fields") || !d->second["fields"].is_array()) return Status::Ok();
    const json& schema = d->second["fields"];
    std::vector<std::string> known;
    for (const json& f : schema) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
      known.push_back(f["name"].get<std::string>());
      WEFT_RETURN_IF_ERROR(CheckField(e, d->second, f));
    }
    // Every key must be one of the plugin's fields, a provider's and a service
    // action's alike: a misspelt field would silently do nothing. An automator
    // that declares no field at all may read fields it never declared (the
    // SDK does not make it declare them), so its keys are not judged.
    if (!e.fields->is_object() || (e.kind != Kind::kProvider && known.empty())) return Status::Ok();
    for (const auto& [field, value] : e.fields->items()) {
      if (std::find(known.begin(), known.end(), field) != known.end()) continue;
      Problem(e, field, "unknown", "",
              e.Where(field) + " is not a field of plugin '" + e.type + "' (it knows: " +
                  (known.empty() ? std::string("none") : Join(known)) + "); remove or rename it");
    }
    return Status::Ok();
  }

  FieldFindings Take() { return std::move(findings_); }

 private:
  Status CheckField(const Entity& e, const json& descriptor, const json& f) {
    const std::string field = f["name"].get<std::string>();
    const bool set = e.fields->is_object() && e.fields->contains(field) && !(*e.fields)[field].is_null();
    if (!set) {
      if (!f.value("required", false) || f.contains("default")) return Status::Ok();
      // A sensitive field's default never leaves its host, so it may have one.
      Problem(e, field, "missing", "",
              e.Where(field) + " is required by plugin '" + e.type + "'" +
                  (f.value("sensitive", false) ? "; add it unless the plugin's hosts give it a default"
                                               : " and has no default; add it"));
      return Status::Ok();
    }
    const json& value = (*e.fields)[field];
    // A secret weftd sealed (docs/security.md) reaches the plugin with its type; its text shows none.
    if (value.is_string() && value.get<std::string>().rfind("enc:", 0) == 0) return Status::Ok();
    const TypeCheck t = CheckType(f, value);
    if (t.fit == Fit::kNo) {
      Problem(e, field, "type", t.expected,
              e.Where(field) + " is " + jsonf::Brief(value) + ", but plugin '" + e.type + "' expects " + t.expected);
      return Status::Ok();
    }
    if (t.fit == Fit::kAsString)
      Warn(e, field, "string",
           e.Where(field) + " is the string " + jsonf::Brief(value) + " where plugin '" + e.type + "' expects " +
               t.expected + "; write it without the quotes" + (t.expected == "a list" ? " as a JSON list" : "") +
               " (some plugins read the string form, others refuse it)");
    if (NamesResource(f) && value.is_string() && !value.get<std::string>().empty() && !HasMacro(value))
      return CheckResource(e, descriptor, field, value.get<std::string>());
    return Status::Ok();
  }

  Status CheckResource(const Entity& e, const json& descriptor, const std::string& field, const std::string& name) {
    if (!resources_) return Status::Ok();
    std::vector<std::string> types;
    for (const json& t : descriptor.value("resource_types", json::array()))
      if (t.is_string()) types.push_back(t.get<std::string>());
    if (types.empty()) return Status::Ok();
    bool exists = false;
    for (const std::string& type : types) {
      WEFT_ASSIGN_OR_RETURN(const std::vector<resources::ResourceInfo>* list, Resources(type));
      for (const resources::ResourceInfo& r : *list) {
        if (r.name != name) continue;
        exists = true;
        for (const resources::VersionInfo& v : r.versions)
          if (v.state == resources::VersionState::kActive) return Status::Ok();
      }
    }
    const std::string type_words = "type " + Join(types);
    if (exists)
      Problem(e, field, "resource", "an active resource of " + type_words,
              e.Where(field) + " names the resource '" + name + "' (" + type_words +
                  "), which has no active version; stage one and sync (`weft resource stage " + types.front() + " " +
                  name + " VERSION`, `weft resource sync`)");
    else
      Problem(e, field, "resource", "a resource of " + type_words,
              e.Where(field) + " names the resource '" + name + "', but tenant '" + tenant_ + "' has no resource of " +
                  type_words + " by that name; upload it (`weft resource upload " + types.front() + " " + name +
                  " FILE`, then stage and sync it)");
    return Status::Ok();
  }

  Result<const std::vector<resources::ResourceInfo>*> Resources(const std::string& type) {
    auto it = by_type_.find(type);
    if (it == by_type_.end()) {
      WEFT_ASSIGN_OR_RETURN(std::vector<resources::ResourceInfo> list, resources_->List(tenant_, type));
      it = by_type_.emplace(type, std::move(list)).first;
    }
    return &it->second;
  }

  static json Item(const Entity& e, const std::string& field, const std::string& problem) {
    json item = {{"kind", KindName(e.kind)}, {"name", e.name}, {"type", e.type}, {"problem", problem}};
    if (e.kind == Kind::kProvider) item["provider"] = e.name;
    if (!e.action.empty()) item["action"] = e.action;
    if (!field.empty()) item["field"] = field;
    return item;
  }

  void Problem(const Entity& e, const std::string& field, const std::string& problem, const std::string& expected,
               std::string message) {
    json item = Item(e, field, problem);
    if (!expected.empty()) item["expected"] = expected;
    item["message"] = std::move(message);
    findings_.problems.push_back(std::move(item));
  }

  void Warn(const Entity& e, const std::string& field, const std::string& problem, std::string message) {
    json item = Item(e, field, problem);
    item["message"] = std::move(message);
    findings_.warnings.push_back(std::move(item));
  }

  const std::map<std::string, json>& descriptors_;
  resources::ResourceStore* resources_;
  std::string tenant_;
  std::map<std::string, std::vector<resources::ResourceInfo>> by_type_;
  std::set<std::tuple<std::string, std::string, std::string>> unchecked_;  // kind, name, plugin type warned about
  FieldFindings findings_;
};

}  // namespace

Result<FieldFindings> CheckPluginFields(const Catalog& cat, const std::map<std::string, json>& descriptors,
                                        resources::ResourceStore* resources, const std::string& tenant) {
  Checker checker(descriptors, resources, tenant);
  for (const auto& [name, provider] : cat.providers)
    WEFT_RETURN_IF_ERROR(
        checker.Check({Kind::kProvider, name, "", provider.providertype, "provisioner", &provider.provisioner}));
  for (const auto& [name, service] : cat.services)
    for (const auto& [action, a] : service.actions)
      WEFT_RETURN_IF_ERROR(checker.Check(
          {Kind::kService, name, action, a.type, "provisioner.actions." + action + ".fields", &a.fields}));
  return checker.Take();
}

}  // namespace weft::catalog
