// Helpers the task object's methods share (task_api.cpp, task_ssh.cpp), and
// the SSH methods. Internal to weft_lua. Every function here reads arguments
// with Lua API calls that never raise (sandbox.hpp, rule 2) and throws
// ScriptError or SandboxViolation instead.
#pragma once

#include <string>

#include "sandbox.hpp"

namespace weft::host::lua {

// The run a method was called for; refuses a `task` kept from an earlier run
// (its weft_task is gone) and a call made with '.' instead of ':'.
RunScope& TaskScope(lua_State* L, const char* method);

// "string", "table", ... for messages.
std::string TypeOf(lua_State* L, int i);

// A string argument (numbers are accepted and formatted like Lua does).
std::string ArgText(lua_State* L, int i, const char* what);

// task:exec(command [, options]), task:upload(local_path, remote_path [, mode [, options]]),
// task:write(text, remote_path [, mode [, options]]): the SSH host services
// (weft_ssh), with the sandbox's budget applied while they wait.
Reply TaskExec(lua_State* L);
Reply TaskUpload(lua_State* L);
Reply TaskWrite(lua_State* L);

}  // namespace weft::host::lua
