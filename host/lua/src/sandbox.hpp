// Sandbox: one lua_State with a memory cap, a budget hook and only the safe
// libraries. Internal to weft_lua.
//
// Lua is a C library that raises errors with longjmp, which skips C++
// destructors. Three rules keep C++ and Lua apart:
//  1. Any Lua API call that can raise (allocates, calls metamethods or Lua
//     code) runs in protected mode (lua_pcall of a C function) from frames that
//     hold only trivially destructible objects.
//  2. Every C function a script can call goes through Trampoline<F>: F reads
//     its arguments with API calls that never raise, does its C++ work (which may
//     throw), and hands back JSON values; the trampoline pushes them in protected
//     mode and calls lua_error only after every C++ object of F is destroyed.
//     F may call back into Lua (task:exec's output callbacks) only through
//     lua_pcall of a C function whose frame holds nothing with a destructor.
//  3. The hook and the allocator hold no C++ objects with destructors.
//
// Thread-safety: a Sandbox is used by one thread at a time (the instance's pool
// hands each to one run).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lua_headers.hpp"
#include "weft/common/status.hpp"
#include "weft/lua/lua_plugin.hpp"
#include "weft/plugin.h"

namespace weft::host::lua {

// The task a state is running for, while it runs one (null otherwise).
struct RunScope {
  const weft_host_services* host = nullptr;
  weft_task* task = nullptr;
  const void* task_object = nullptr;  // identity of this run's Lua `task` table
  bool in_output_callback = false;    // inside task:exec's on_stdout/on_stderr
};

// Why the hook stopped a script. kNone is "not stopped"; 0 is never used.
enum class Kill : int { kNone = 1, kInstructions, kTime, kMemory, kCancelled, kClosing };

enum class Mode : int { kIdle = 1, kRunning, kClosing };

// Per-state bookkeeping: the allocator's ud, reached from the hook and from C
// functions with lua_getallocf. Plain data on purpose (rule 3).
struct Control {
  lua_State* L = nullptr;
  std::size_t cap_bytes = 0;
  std::size_t used_bytes = 0;
  bool memory_exceeded = false;  // the allocator refused to grow past the cap
  Mode mode = Mode::kIdle;
  Kill kill = Kill::kNone;
  std::uint64_t budget = 0;
  std::uint64_t instructions = 0;
  int hook_count = 1;
  std::chrono::steady_clock::time_point deadline{};
  RunScope* scope = nullptr;
  std::string violation;  // the first sandbox rule a script broke in this run
  // The last error a host service raised into the script, and its WEFT_ERR_*
  // code: a run that ends with that error keeps the code (an SSH timeout
  // fails the task as TIMEOUT, not FAILED).
  std::string raised_text;
  int raised_code = 0;
};

Control& ControlOf(lua_State* L);

// Ends the running script from a C function (the budget ran out or the host
// cancelled while it waited in C): marks the kill and re-arms the hook to fire
// on the next instruction, exactly as if the hook had found it. The caller
// then raises an error; Describe reports the kill. Never raises.
void KillRun(lua_State* L, Kill why) noexcept;

// Thrown by a C function when a script passes something unusable.
class ScriptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Thrown by a C function when a script reaches for something the sandbox forbids;
// the run fails with this message even if the script catches the error.
class SandboxViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a C function hands back to Lua: `on_stack` values it left on the stack
// itself (only with API calls that never raise), then `values`, pushed by the
// trampoline in protected mode.
struct Reply {
  int on_stack = 0;
  std::vector<nlohmann::json> values;
};
using LuaService = Reply (*)(lua_State* L);

namespace detail {
struct PushJob {
  const std::vector<nlohmann::json>* values;
  const std::string* error;  // non-null: push this as an error message instead
};
int PushJobBody(lua_State* L);  // runs under lua_pcall
void RecordViolation(lua_State* L, const char* message) noexcept;
}  // namespace detail

// The one way C++ is exposed to Lua (rule 2). Errors reach Lua as
// "<file>:<line>: <message>" only after F's objects are gone.
template <LuaService F>
int Trampoline(lua_State* L) {
  bool raise = false;
  int results = 0;
  {
    Reply reply;
    std::string error;
    try {
      reply = F(L);
    } catch (const SandboxViolation& e) {
      detail::RecordViolation(L, e.what());
      error = e.what();
      raise = true;
    } catch (const std::exception& e) {
      error = e.what();
      raise = true;
    } catch (...) {
      error = "an internal error in a Weft Lua function";
      raise = true;
    }
    results = raise ? 0 : reply.on_stack;
    if (raise || !reply.values.empty()) {
      // Lua leaves a C function LUA_MINSTACK (20) free slots; F used at most a few.
      detail::PushJob job{&reply.values, raise ? &error : nullptr};
      int top = lua_gettop(L);
      lua_pushcfunction(L, &detail::PushJobBody);
      lua_pushlightuserdata(L, &job);
      if (lua_pcall(L, 1, LUA_MULTRET, 0) != LUA_OK) {
        raise = true;  // the error object (e.g. "not enough memory") is on top
      } else {
        results += lua_gettop(L) - top;
      }
    }
  }
  if (raise) return lua_error(L);
  return results;
}

// What a state needs to start: the plugin's source and limits.
struct SandboxSpec {
  std::string chunk_name;  // "hello.lua"
  const std::string* source = nullptr;
  LuaLimits limits;
};

// The result of one protected call in a sandbox, described for a person.
struct Outcome {
  int code = WEFT_OK;     // WEFT_OK or WEFT_ERR_*
  std::string message;    // a sentence when code != WEFT_OK
  std::string traceback;  // Lua's traceback for script errors, may be empty
  bool poisoned = false;  // the state must be closed, not reused
};

class Sandbox {
 public:
  // Makes a state, opens the safe libraries, and runs the chunk under the
  // budget; the value it returns is kept (see PushPlugin). `label` names the
  // plugin in messages ("Lua plugin hello.lua"), `when` the moment
  // ("while loading").
  static Result<std::unique_ptr<Sandbox>> Create(const SandboxSpec& spec, const std::string& label,
                                                 const std::string& when);
  ~Sandbox();  // closes the state; finalizers and __close handlers are killed at once
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  lua_State* state() { return L_; }
  // Pushes the value the chunk returned (never raises).
  void PushPlugin();

  // Runs `action` ("install") of the plugin table with a task object made of
  // task_json and fields. Budget and deadline start now.
  Outcome RunAction(const char* action, const nlohmann::json& task_json, const nlohmann::json& fields,
                    RunScope* scope, const std::string& label, const std::string& when);

 private:
  explicit Sandbox(const LuaLimits& limits) : limits_(limits) {}
  void Arm(RunScope* scope);
  void Disarm();
  // Turns a pcall status (and the kill/memory/violation marks) into an Outcome.
  Outcome Describe(int status, const std::string& error, const std::string& label, const std::string& when) const;

  const LuaLimits limits_;
  Control control_;  // the allocator's ud: a Sandbox never moves (heap only)
  lua_State* L_ = nullptr;
};

// "64 MiB", "512 KiB", "1000 bytes".
std::string FormatBytes(std::size_t bytes);

// The methods of the `task` object (task_api.cpp), registered by the sandbox.
struct LuaMethod {
  const char* name;
  lua_CFunction function;
};
const std::vector<LuaMethod>& TaskMethods();

}  // namespace weft::host::lua
