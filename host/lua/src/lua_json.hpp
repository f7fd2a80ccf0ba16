// JSON <-> Lua values for the task object and set_result.
//
//   JSON object -> table (null members are left out)
//   JSON array  -> table 1..n marked as an array (weft.array's metatable), null
//                  elements become weft.null so the indices stay dense
//   string, number (integer stays integer), boolean; null -> nil
//
// and back: a table is an array if it carries the array mark or its keys are
// exactly 1..n (n >= 1); otherwise an object, whose keys must be strings or
// integers. An empty unmarked table is {}. weft.null and nil are null.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lua_headers.hpp"

namespace weft::host::lua {

// Registry keys (their addresses) of the array metatable, and the null sentinel
// (a light userdata with this address).
extern const char kArrayMetaKey;
extern const char kNullSentinel;

// Converts the Lua value at `index` to JSON. Calls only Lua API functions that
// never raise a Lua error (no allocation, no metamethods), so it is safe with
// C++ objects alive. Throws std::runtime_error naming `what` (e.g.
// "task:set_result('x')") and the place inside the value when JSON cannot hold
// it: functions, cycles or nesting deeper than 64, NaN, invalid UTF-8, ...
nlohmann::json ToJson(lua_State* L, int index, const std::string& what);

// Pushes `value` as a Lua value. RAISES Lua errors (out of memory, too deep):
// call it only in protected mode, from frames that hold nothing with a
// destructor (a longjmp would skip it).
void PushJson(lua_State* L, const nlohmann::json& value);

// True if `s` is valid UTF-8 (what JSON text needs).
bool ValidUtf8(std::string_view s);

}  // namespace weft::host::lua
