#include "weft/ssh/task_view.hpp"

#include "weft/plugin.h"

namespace weft::host {
namespace {

using json = nlohmann::json;

const json* Member(const json* obj, std::string_view key) {
  if (!obj || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() || it->is_null() ? nullptr : &*it;
}

const json* Object(const json* obj, std::string_view key) {
  const json* v = Member(obj, key);
  return v && v->is_object() ? v : nullptr;
}

const char* TypeName(std::uint32_t type) {
  switch (type) {
    case WEFT_FIELD_STRING: return "a string";
    case WEFT_FIELD_INTEGER: return "an integer";
    case WEFT_FIELD_NUMBER: return "a number";
    case WEFT_FIELD_BOOLEAN: return "true or false";
    default: return "JSON";
  }
}

const char* ValueTypeName(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  return "an object";
}

// A string passes for an integer, number or boolean field: a %macro% expands to
// text, and some plugins read "600" as 600 (weft catalog check warns of it).
bool HasType(std::uint32_t type, const json& v) {
  if (v.is_string() && type != WEFT_FIELD_STRING) return true;
  switch (type) {
    case WEFT_FIELD_STRING: return v.is_string();
    case WEFT_FIELD_INTEGER: return v.is_number_integer();
    case WEFT_FIELD_NUMBER: return v.is_number();
    case WEFT_FIELD_BOOLEAN: return v.is_boolean();
    default: return true;
  }
}

}  // namespace

const json* NodeFact(const json& task, std::string_view key) {
  const json* node = Member(&task, "node");
  for (const json* place : {&task, Member(&task, "results"), node, Member(node, "results")}) {
    if (const json* v = Member(place, key)) return v;
  }
  return nullptr;
}

const json* PluginFields(const json& task, std::uint32_t kind) {
  const json* fields = kind == WEFT_KIND_PROVIDER ? Object(Object(&task, "provider"), "fields")
                                                  : Object(Object(Object(&task, "service"), "action"), "fields");
  return fields ? fields : Object(&task, "fields");
}

ResolvedFields ResolvePluginFields(const json& task, const weft_plugin_descriptor& d) {
  ResolvedFields out;
  if (const json* fields = PluginFields(task, d.kind)) out.fields = *fields;
  const char* where = d.kind == WEFT_KIND_PROVIDER ? "provider" : "service action";
  if (d.field_count == 0 || d.fields == nullptr) return out;
  for (std::uint32_t i = 0; i < d.field_count; ++i) {
    // Elements are field_size apart, as the loader reads them (a newer minor may make weft_field longer).
    const auto* f = reinterpret_cast<const weft_field*>(reinterpret_cast<const char*>(d.fields) +
                                                        static_cast<std::size_t>(i) * d.field_size);
    if (!f->name) continue;
    auto it = out.fields.find(f->name);
    if (it == out.fields.end() || it->is_null()) {
      json def = f->default_json ? json::parse(f->default_json, nullptr, /*allow_exceptions=*/false) : json();
      if (!def.is_discarded() && !def.is_null()) {
        out.fields[f->name] = std::move(def);
      } else if (f->flags & WEFT_FIELD_REQUIRED) {
        out.error = std::string("required field '") + f->name + "' is missing from the task's " + where +
                    " fields; set it there";
        return out;
      }
      continue;
    }
    if (!HasType(f->type, *it)) {
      out.error = std::string("field '") + f->name + "' must be " + TypeName(f->type) + ", not " + ValueTypeName(*it) +
                  "; fix it in the task's " + where + " fields";
      return out;
    }
  }
  return out;
}

}  // namespace weft::host
