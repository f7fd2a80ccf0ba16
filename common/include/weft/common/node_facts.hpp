// The node facts: the keys of a task's result that Weft itself reads from a node's
// results (the job engine, to name and address nodes in later tasks; the host, to
// reach a node over SSH). A plugin may return any other key as it likes; these must
// have their documented types, or every later task of the node would go wrong.
#pragma once

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft {

// OK when every node fact in `result` (a task's result object) has its type:
// `hostname`, `access_v4`, `bind_v4` and `provider_id` strings, `ssh_port` an
// integer 1-65535, `host_keys` a string or an array of strings, `ssh_auth` an
// object. INVALID naming the first that has not and what it holds instead
// ("'access_v4' must be a string; it is null ...").
// Anything but an object is OK (no facts in it).
Status CheckNodeFacts(const nlohmann::json& result);

}  // namespace weft
