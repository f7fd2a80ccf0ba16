#include "weft/host/task_view.hpp"

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

}  // namespace weft::host
