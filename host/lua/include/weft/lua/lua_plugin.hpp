// Lua plugins: a .lua file that returns a table describing the plugin and its
// actions, run in sandboxed lua_States (docs/lua-plugins.md).
//
// LoadLuaPlugin turns such a file into an ordinary weft_plugin_descriptor, so
// the host validates it and calls init/run/destroy exactly as it does for a
// native plugin. Only Lua source text is accepted, never precompiled bytecode.
//
// Ownership: the descriptor and everything it points to are never freed (like a
// native library that is never unloaded). Each call makes a new descriptor; a
// process can load at most kMaxLuaPlugins of them.
//
// Thread-safety: LoadLuaPlugin* may be called from any thread. The descriptor
// follows the plugin ABI: init once per instance, run from several threads at
// once (each concurrent run gets its own lua_State from a per-instance pool),
// destroy after every run returned.
//
// The sandbox, per lua_State: only base, table, string, math, utf8 and a small
// os (time, clock, difftime, date); no io, os.execute, package, require, debug,
// dofile, loadfile, string.dump, __gc or binary chunks; a memory cap enforced by
// the allocator; an instruction and wall-clock budget per run enforced by a count
// hook that pcall cannot escape. A run that breaks a rule fails its task with a
// message naming the rule; a state that was killed is closed, never reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "weft/common/status.hpp"
#include "weft/plugin.h"

namespace weft::host::lua {

// Limits of one plugin's lua_States. The same limits apply while the file is
// loaded (its top level runs once per state) and to every run. weft-host sets
// the memory and the instructions from its lua_memory_mb and lua_instructions.
struct LuaLimits {
  std::size_t memory_bytes = 64u << 20;              // per lua_State, everything Lua allocates
  std::uint64_t instruction_budget = 2'000'000'000;  // Lua VM instructions per run call
  // Wall clock per run call (checked by the hook). By default no shorter than
  // any task_timeout_ms weft-host accepts (at most INT_MAX ms): the host's task
  // timeout, which cancels the run, is what bounds a Lua run's wall clock.
  std::int64_t time_budget_ms = 2'147'483'647;
};

// How many Lua plugins one process can load (each load takes one init slot for good).
inline constexpr std::size_t kMaxLuaPlugins = 1024;

// Loads a Lua plugin file (text only) and returns a descriptor whose init/run/
// destroy run it in sandboxed lua_States. Errors name the file and what is
// wrong (syntax error with its line, missing `type`, bad field, ...).
Result<const weft_plugin_descriptor*> LoadLuaPlugin(const std::filesystem::path& file, const LuaLimits& limits = {});

// The same from source text; chunk_name ("hello.lua") is what messages and
// Lua's own "hello.lua:12:" positions call it.
Result<const weft_plugin_descriptor*> LoadLuaPluginSource(const std::string& chunk_name, const std::string& source,
                                                          const LuaLimits& limits = {});

}  // namespace weft::host::lua
