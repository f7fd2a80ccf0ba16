// What a task says about its node and about the fields of the plugin that runs
// it, read one way for every part of weft-host: the SSH services, and the
// field_json / node_json services plugins call (docs/plugin-abi.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/plugin.h"

namespace weft::host {

// A fact about the task's node (access_v4, ssh_port, ssh_auth, host_keys,
// provider_id, ...): at the top level of the task, else in "results" (what the
// node's earlier tasks returned), "node", then "node.results". A null value
// counts as absent. nullptr when no place has it.
const nlohmann::json* NodeFact(const nlohmann::json& task, std::string_view key);

// The fields object of a plugin of `kind` (weft_plugin_kind): "provider.fields"
// for a provider, "service.action.fields" for an automator; a task enqueued by
// hand (debug.enqueue) has them as its top-level "fields". nullptr when the task
// has none.
const nlohmann::json* PluginFields(const nlohmann::json& task, std::uint32_t kind);

// The fields the plugin of `descriptor` runs with, the same for native and Lua
// plugins: the task's (PluginFields), where each field the descriptor declares
// and the task leaves out (or null) has its default_json. `error` is a sentence
// (empty when none) when a required field without a default is missing or a
// value is not of its field's type (a string passes for an integer, number or
// boolean field: a macro expands to text): the task is then INVALID. Values are never
// put in the sentence (a field may be sensitive).
struct ResolvedFields {
  nlohmann::json fields = nlohmann::json::object();
  std::string error;
};
ResolvedFields ResolvePluginFields(const nlohmann::json& task, const weft_plugin_descriptor& descriptor);

}  // namespace weft::host
