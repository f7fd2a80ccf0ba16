// What a task says about its node and about the fields of the plugin that runs
// it, read one way for every part of weft-host: the SSH services, and the
// field_json / node_json services plugins call (docs/plugin-abi.md).
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

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

}  // namespace weft::host
