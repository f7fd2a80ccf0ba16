#include "sandbox.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "lua_json.hpp"

namespace weft::host::lua {
namespace {

using json = nlohmann::json;

// Registry keys (their addresses).
const char kPluginKey = 0;
const char kTaskMetaKey = 0;

// Instructions between two budget checks. A check costs a clock read, so this
// keeps the hook well under 1% of run time, and a kill late by at most this.
constexpr std::uint64_t kHookEvery = 1000;

constexpr const char* kForbiddenRule =
    "the Lua sandbox offers only base, table, string, math, utf8 and os.time/os.clock/os.difftime/os.date "
    "(no io, os.execute, package, require, debug, dofile, loadfile); see docs/lua-plugins.md";

// ---- allocator and hook (rule 3: no C++ objects with destructors) ----------

void Hook(lua_State* L, lua_Debug* ar);

void* Allocate(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  Control* c = static_cast<Control*>(ud);
  std::size_t old = ptr ? osize : 0;  // for a new block, osize is the object's type
  if (nsize == 0) {
    std::free(ptr);
    c->used_bytes -= old;
    return nullptr;
  }
  if (nsize > old && nsize - old > c->cap_bytes - c->used_bytes) {
    c->memory_exceeded = true;
    // Lua turns the refusal into a catchable "not enough memory"; the hook,
    // re-armed to fire on the very next instruction, makes it final.
    if (c->L && c->mode == Mode::kRunning) lua_sethook(c->L, &Hook, LUA_MASKCOUNT, 1);
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (!p) return nullptr;
  c->used_bytes = c->used_bytes - old + nsize;
  return p;
}

const char* KillText(Kill kill) {
  switch (kill) {
    case Kill::kInstructions: return "killed: the instruction budget is spent";
    case Kill::kTime: return "killed: the time budget is spent";
    case Kill::kMemory: return "killed: the memory cap was reached";
    case Kill::kCancelled: return "killed: the host cancelled the task";
    default: return "killed: the Lua state is closing";
  }
}

void Hook(lua_State* L, lua_Debug*) {
  Control* c = &ControlOf(L);
  if (c->kill == Kill::kNone) {
    c->instructions += static_cast<std::uint64_t>(c->hook_count);
    if (c->mode == Mode::kClosing) {
      c->kill = Kill::kClosing;
    } else if (c->memory_exceeded) {
      c->kill = Kill::kMemory;
    } else if (c->instructions > c->budget) {
      c->kill = Kill::kInstructions;
    } else if (std::chrono::steady_clock::now() >= c->deadline) {
      c->kill = Kill::kTime;
    } else if (c->scope && c->scope->host->cancelled(c->scope->task)) {
      c->kill = Kill::kCancelled;
    }
  }
  if (c->kill == Kill::kNone) return;
  // Fire again on the next instruction: whatever pcall catches this, the
  // script dies at the first instruction it runs afterwards.
  c->hook_count = 1;
  lua_sethook(L, &Hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "%s", KillText(c->kill));
}

// ---- helpers for C functions (they never raise) ----------------------------

std::string FormatNumber(lua_State* L, int i) {
  if (lua_isinteger(L, i)) return std::to_string(lua_tointegerx(L, i, nullptr));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.14g", lua_tonumberx(L, i, nullptr));
  return buf;
}

// Text of a value for print(): strings and numbers as Lua prints them, others by type.
std::string Show(lua_State* L, int i) {
  switch (lua_type(L, i)) {
    case LUA_TSTRING: {
      std::size_t n = 0;
      const char* s = lua_tolstring(L, i, &n);
      return std::string(s, n);
    }
    case LUA_TNUMBER: return FormatNumber(L, i);
    case LUA_TBOOLEAN: return lua_toboolean(L, i) ? "true" : "false";
    case LUA_TNIL: return "nil";
    default: return std::string(lua_typename(L, lua_type(L, i)));
  }
}

// True if table `t` has the string key `name` (found by walking it: pushing a
// key string to look it up could raise).
bool HasKey(lua_State* L, int t, std::string_view name) {
  t = lua_absindex(L, t);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      std::size_t n = 0;
      const char* s = lua_tolstring(L, -2, &n);
      if (std::string_view(s, n) == name && !lua_isnil(L, -1)) {
        lua_pop(L, 2);
        return true;
      }
    }
    lua_pop(L, 1);
  }
  return false;
}

// ---- the C functions scripts can reach (through Trampoline) ---------------

// print(...): a line in the task's log (info), dropped outside a run.
Reply Print(lua_State* L) {
  int n = lua_gettop(L);
  std::string line;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) line += '\t';
    line += Show(L, i);
  }
  const RunScope* scope = ControlOf(L).scope;
  if (scope) scope->host->log(scope->task, WEFT_LOG_INFO, line.c_str());
  return {};
}

// load(text [, chunkname [, mode [, env]]]): text chunks only.
Reply Load(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    throw ScriptError("load: the chunk must be a string of Lua source text (reader functions are not supported)");
  }
  std::size_t size = 0;
  const char* text = lua_tolstring(L, 1, &size);
  if (size > 0 && text[0] == LUA_SIGNATURE[0]) {
    throw SandboxViolation("load: binary chunks (precompiled bytecode) are refused; the Lua sandbox loads source "
                           "text only");
  }
  if (lua_type(L, 3) == LUA_TSTRING && std::strchr(lua_tolstring(L, 3, nullptr), 't') == nullptr) {
    throw SandboxViolation("load: mode 'b' (binary chunks) is refused; the Lua sandbox loads source text only");
  }
  const char* chunk_name = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, nullptr) : "=(load)";
  bool has_env = lua_gettop(L) >= 4;
  int status = luaL_loadbufferx(L, text, size, chunk_name, "t");  // protected inside: never raises
  if (status != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);  // nil, message: what load returns on failure
    return {2, {}};
  }
  if (has_env) {
    lua_pushvalue(L, 4);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return {1, {}};
}

// setmetatable without __gc: finalizers run with hooks off, so no budget could
// stop one; an object only gets a finalizer if __gc is set when the metatable is.
Reply SetMetatable(lua_State* L) {
  if (lua_type(L, 1) != LUA_TTABLE) throw ScriptError("bad argument #1 to 'setmetatable' (table expected)");
  int mt_type = lua_type(L, 2);
  if (mt_type != LUA_TNIL && mt_type != LUA_TTABLE) {
    throw ScriptError("bad argument #2 to 'setmetatable' (nil or table expected)");
  }
  if (mt_type == LUA_TTABLE && HasKey(L, 2, "__gc")) {
    throw SandboxViolation("setmetatable: __gc metamethods are refused in the Lua sandbox (a finalizer runs "
                           "outside the time budget); release resources explicitly instead");
  }
  if (lua_getmetatable(L, 1)) {
    bool is_protected = HasKey(L, -1, "__metatable");
    lua_pop(L, 1);
    if (is_protected) throw ScriptError("cannot change a protected metatable");
  }
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return {1, {}};  // the table
}

Reply StringDump(lua_State*) {
  throw SandboxViolation("string.dump is not available: the Lua sandbox refuses bytecode");
}

// __index of _G: names the rule when a script reaches for a removed library.
Reply GlobalIndex(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    std::string_view name = lua_tolstring(L, 2, nullptr);
    static constexpr std::string_view kForbidden[] = {"io",     "package",   "require",  "debug",     "dofile",
                                                      "loadfile", "coroutine", "loadstring"};
    for (std::string_view f : kForbidden) {
      if (name == f) throw SandboxViolation(std::string(name) + " is not available: " + kForbiddenRule);
    }
  }
  lua_pushnil(L);
  return {1, {}};
}

// __index of os: only time, clock, difftime and date are there.
Reply OsIndex(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    std::string_view name = lua_tolstring(L, 2, nullptr);
    static constexpr std::string_view kForbidden[] = {"execute", "exit",    "getenv",   "remove",
                                                      "rename",  "tmpname", "setlocale"};
    for (std::string_view f : kForbidden) {
      if (name == f) throw SandboxViolation("os." + std::string(name) + " is not available: " + kForbiddenRule);
    }
  }
  lua_pushnil(L);
  return {1, {}};
}

// Whether the hook has killed this run (for the xpcall guard below).
Reply Killed(lua_State* L) {
  lua_pushboolean(L, ControlOf(L).kill != Kill::kNone ? 1 : 0);
  return {1, {}};
}

// An error the hook raises is raised inside the hook, where Lua runs no hooks:
// a message handler called for it could loop forever. So xpcall's handler is
// skipped once the run is killed (it is bounded: a call and a return).
constexpr char kXpcallGuard[] = R"lua(
local killed, raw_xpcall, type, error = ...
xpcall = function(f, handler, ...)
  if type(handler) ~= "function" then error("bad argument #2 to 'xpcall' (function expected)", 2) end
  return raw_xpcall(f, function(e)
    if killed() then return e end
    return handler(e)
  end, ...)
end
)lua";

// weft.array(t): marks t as a JSON array (so {} becomes [] in set_result).
Reply MarkArray(lua_State* L) {
  if (lua_type(L, 1) != LUA_TTABLE) throw ScriptError("weft.array: argument must be a table");
  lua_settop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kArrayMetaKey);
  lua_setmetatable(L, 1);
  return {1, {}};
}

// weft.json_encode(value): JSON text, by the rules of set_result.
Reply JsonEncode(lua_State* L) { return {0, {json(ToJson(L, 1, "weft.json_encode").dump())}}; }

// weft.json_decode(text): Lua values, by the rules of task.json.
Reply JsonDecode(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    throw ScriptError(std::string("weft.json_decode: the argument must be a string of JSON text, not ") +
                      (lua_isnoneornil(L, 1) ? "nil" : std::string("a ") + lua_typename(L, lua_type(L, 1))));
  }
  std::size_t n = 0;
  const char* text = lua_tolstring(L, 1, &n);
  json value = json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw ScriptError("weft.json_decode: the text is not valid JSON");
  return {0, {std::move(value)}};
}

// ---- protected bodies (rule 1) ----------------------------------------------

enum class SetupStage : int { kLibraries = 1, kCompile, kRun };

struct SetupArgs {
  const SandboxSpec* spec;
  const char* chunk_name;  // "@hello.lua"
  SetupStage stage;
};

void SetFunction(lua_State* L, int table, const char* name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, table, name);
}

// Makes a protected metatable {__index = index, __metatable = false} for the value on top.
void ProtectWithIndex(lua_State* L, lua_CFunction index) {
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, index);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
}

int SetupBody(lua_State* L) {
  auto* args = static_cast<SetupArgs*>(lua_touserdata(L, 1));
  args->stage = SetupStage::kLibraries;
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  lua_settop(L, 1);

  lua_pushglobaltable(L);
  int g = lua_gettop(L);
  for (const char* name : {"dofile", "loadfile", "require", "load", "print", "setmetatable"}) {
    lua_pushnil(L);
    lua_setfield(L, g, name);
  }
  SetFunction(L, g, "print", &Trampoline<&Print>);
  SetFunction(L, g, "load", &Trampoline<&Load>);
  SetFunction(L, g, "setmetatable", &Trampoline<&SetMetatable>);

  lua_getfield(L, g, LUA_STRLIBNAME);
  SetFunction(L, lua_gettop(L), "dump", &Trampoline<&StringDump>);
  lua_pop(L, 1);

  // A small os: copy the harmless functions out of the real library.
  luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
  int full_os = lua_gettop(L);
  lua_createtable(L, 0, 4);
  for (const char* name : {"time", "clock", "difftime", "date"}) {
    lua_getfield(L, full_os, name);
    lua_setfield(L, -2, name);
  }
  ProtectWithIndex(L, &Trampoline<&OsIndex>);
  lua_setfield(L, g, LUA_OSLIBNAME);
  lua_pop(L, 1);
  // luaL_requiref left the full os in the (unreachable) loaded table: drop it.
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushnil(L);
  lua_setfield(L, -2, LUA_OSLIBNAME);
  lua_pop(L, 1);

  // JSON helpers: the array mark and null.
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "weft.array");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kArrayMetaKey);
  lua_createtable(L, 0, 4);
  lua_pushlightuserdata(L, const_cast<char*>(&kNullSentinel));
  lua_setfield(L, -2, "null");
  SetFunction(L, lua_gettop(L), "array", &Trampoline<&MarkArray>);
  SetFunction(L, lua_gettop(L), "json_encode", &Trampoline<&JsonEncode>);
  SetFunction(L, lua_gettop(L), "json_decode", &Trampoline<&JsonDecode>);
  lua_setfield(L, g, "weft");

  // The task object's metatable: its methods, protected.
  lua_createtable(L, 0, 2);
  lua_createtable(L, 0, static_cast<int>(TaskMethods().size()));
  for (const LuaMethod& m : TaskMethods()) SetFunction(L, lua_gettop(L), m.name, m.function);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kTaskMetaKey);

  if (luaL_loadbufferx(L, kXpcallGuard, sizeof kXpcallGuard - 1, "=weft-sandbox", "t") != LUA_OK) {
    return lua_error(L);
  }
  lua_pushcfunction(L, &Trampoline<&Killed>);
  lua_getfield(L, g, "xpcall");
  lua_getfield(L, g, "type");
  lua_getfield(L, g, "error");
  lua_call(L, 4, 0);

  // Globals last: a script reaching for a removed library learns the rule.
  lua_pushvalue(L, g);
  ProtectWithIndex(L, &Trampoline<&GlobalIndex>);
  lua_pop(L, 1);

  args->stage = SetupStage::kCompile;
  const std::string& source = *args->spec->source;
  if (luaL_loadbufferx(L, source.data(), source.size(), args->chunk_name, "t") != LUA_OK) return lua_error(L);
  args->stage = SetupStage::kRun;
  lua_call(L, 0, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kPluginKey);
  return 0;
}

struct RunArgs {
  const char* action;        // "install": the key in `actions`
  const char* action_upper;  // "INSTALL": task.action
  const json* task_json;
  const json* fields;
  RunScope* scope;
};

int RunBody(lua_State* L) {
  auto* args = static_cast<RunArgs*>(lua_touserdata(L, 1));
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kPluginKey);
  if (lua_type(L, -1) != LUA_TTABLE) return luaL_error(L, "the plugin table is gone from this Lua state");
  if (lua_getfield(L, -1, "actions") != LUA_TTABLE) {
    return luaL_error(L, "the plugin table has no 'actions' table in this Lua state");
  }
  if (lua_getfield(L, -1, args->action) != LUA_TFUNCTION) {
    return luaL_error(L, "actions.%s is not a function in this Lua state", args->action);
  }
  lua_createtable(L, 0, 3);
  PushJson(L, *args->task_json);
  lua_setfield(L, -2, "json");
  lua_pushstring(L, args->action_upper);
  lua_setfield(L, -2, "action");
  PushJson(L, *args->fields);
  lua_setfield(L, -2, "fields");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTaskMetaKey);
  lua_setmetatable(L, -2);
  args->scope->task_object = lua_topointer(L, -1);
  lua_call(L, 1, 0);
  return 0;
}

// Message handler: the error plus Lua's traceback, for the task log.
int Traceback(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) return 1;  // a non-string error object is reported by type
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

}  // namespace

Control& ControlOf(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return *static_cast<Control*>(ud);
}

void KillRun(lua_State* L, Kill why) noexcept {
  Control& c = ControlOf(L);
  if (c.kill == Kill::kNone) c.kill = why;
  c.hook_count = 1;
  lua_sethook(L, &Hook, LUA_MASKCOUNT, 1);
}

namespace detail {

int PushJobBody(lua_State* L) {
  auto* job = static_cast<PushJob*>(lua_touserdata(L, 1));
  lua_settop(L, 0);
  if (job->error) {
    luaL_where(L, 2);  // level 0 is this function, 1 the trampoline, 2 the script that called it
    lua_pushlstring(L, job->error->data(), job->error->size());
    lua_concat(L, 2);
    return 1;
  }
  luaL_checkstack(L, static_cast<int>(job->values->size()) + 2, "too many results");
  for (const json& v : *job->values) PushJson(L, v);
  return static_cast<int>(job->values->size());
}

void RecordViolation(lua_State* L, const char* message) noexcept {
  try {
    Control& c = ControlOf(L);
    if (!c.violation.empty()) return;
    // Where the script broke the rule ("<chunk>:<line>: "), as Lua puts it
    // before an error: level 0 is the refusing C function, 1 what called it.
    // Read without pushing anything (no Lua allocation, so no error here).
    lua_Debug ar;
    std::string where;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
      where = std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
    c.violation = where + message;
  } catch (...) {
  }
}

}  // namespace detail

std::string FormatBytes(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

Result<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxSpec& spec, const std::string& label,
                                                 const std::string& when) {
  std::unique_ptr<Sandbox> box(new Sandbox(spec.limits));
  box->control_.cap_bytes = spec.limits.memory_bytes;
  box->L_ = lua_newstate(&Allocate, &box->control_);
  if (!box->L_) {
    return Status::TooLarge(label + " exceeded its memory cap of " + FormatBytes(spec.limits.memory_bytes) + " " +
                            when + " (a bare Lua state does not fit)");
  }
  lua_State* L = box->L_;
  box->control_.L = L;
  const std::string chunk_name = "@" + spec.chunk_name;
  SetupArgs args{&spec, chunk_name.c_str(), SetupStage::kLibraries};
  box->Arm(nullptr);
  lua_pushcfunction(L, &SetupBody);
  lua_pushlightuserdata(L, &args);
  int status = lua_pcall(L, 1, 0, 0);
  std::string error;
  if (status != LUA_OK) {
    error = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(error object is not a string)";
  }
  box->Disarm();
  lua_settop(L, 0);
  if (status == LUA_OK) return box;

  Outcome o = box->Describe(status, error, label, when);
  if (o.code == WEFT_ERR_FAILED && !box->control_.memory_exceeded && box->control_.kill == Kill::kNone &&
      box->control_.violation.empty()) {
    // A plain script error: say whether it does not compile or failed running.
    if (args.stage == SetupStage::kCompile) {
      return Status::Invalid(label + " does not compile: " + error + "; fix the script and load it again");
    }
    if (args.stage == SetupStage::kLibraries) {
      return Status::Internal(label + ": the Lua sandbox could not be set up " + when + ": " + error);
    }
    return Status::Invalid(label + " failed " + when + " (its top level raised an error): " + error);
  }
  return Status::Invalid(o.message);
}

Sandbox::~Sandbox() {
  if (!L_) return;
  // Whatever runs now (a pending __close, a stray finalizer) dies at its first instruction.
  control_.mode = Mode::kClosing;
  control_.kill = Kill::kClosing;
  control_.scope = nullptr;
  lua_sethook(L_, &Hook, LUA_MASKCOUNT, 1);
  lua_close(L_);
}

void Sandbox::PushPlugin() { lua_rawgetp(L_, LUA_REGISTRYINDEX, &kPluginKey); }

void Sandbox::Arm(RunScope* scope) {
  control_.mode = Mode::kRunning;
  control_.kill = Kill::kNone;
  control_.memory_exceeded = false;
  control_.violation.clear();
  control_.raised_text.clear();
  control_.raised_code = 0;
  control_.instructions = 0;
  control_.budget = limits_.instruction_budget;
  // Clamped so that a "no limit" value cannot overflow the clock.
  constexpr std::int64_t kLongestBudgetMs = 100LL * 24 * 3600 * 1000;
  control_.deadline = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(std::min(limits_.time_budget_ms, kLongestBudgetMs));
  control_.scope = scope;
  std::uint64_t every = std::clamp<std::uint64_t>(limits_.instruction_budget, 1, kHookEvery);
  control_.hook_count = static_cast<int>(every);
  lua_sethook(L_, &Hook, LUA_MASKCOUNT, control_.hook_count);
}

void Sandbox::Disarm() {
  lua_sethook(L_, nullptr, 0, 0);
  control_.mode = Mode::kIdle;
  control_.scope = nullptr;
}

Outcome Sandbox::RunAction(const char* action, const json& task_json, const json& fields, RunScope* scope,
                           const std::string& label, const std::string& when) {
  std::string upper(action);
  for (char& ch : upper) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  RunArgs args{action, upper.c_str(), &task_json, &fields, scope};
  Arm(scope);
  lua_settop(L_, 0);
  lua_pushcfunction(L_, &Traceback);
  lua_pushcfunction(L_, &RunBody);
  lua_pushlightuserdata(L_, &args);
  int status = lua_pcall(L_, 1, 0, 1);
  std::string error;
  if (status != LUA_OK) {
    error = lua_type(L_, -1) == LUA_TSTRING
                ? lua_tostring(L_, -1)
                : std::string("error object is a ") + lua_typename(L_, lua_type(L_, -1)) +
                      " value; raise errors with error(\"a message\")";
  }
  Disarm();
  scope->task_object = nullptr;
  lua_settop(L_, 0);
  Outcome o = Describe(status, error, label, when);
  // Keep the first line(s) as the message, the traceback for the log.
  std::size_t tb = o.message.find("\nstack traceback:");
  if (tb != std::string::npos) {
    o.traceback = error.substr(error.find("stack traceback:"));
    // Lua indents each frame with a tab: two spaces read the same in a log,
    // a terminal and a web page.
    for (std::size_t at = o.traceback.find('\t'); at != std::string::npos; at = o.traceback.find('\t', at + 2))
      o.traceback.replace(at, 1, "  ");
    o.message.erase(tb);
  }
  return o;
}

Outcome Sandbox::Describe(int status, const std::string& error, const std::string& label,
                          const std::string& when) const {
  Outcome o;
  const Control& c = control_;
  if (c.kill != Kill::kNone && c.kill != Kill::kClosing) {
    o.poisoned = true;
    switch (c.kill) {
      case Kill::kInstructions:
        o.code = WEFT_ERR_TIMEOUT;
        o.message = label + " exceeded its time budget of " + std::to_string(limits_.instruction_budget) +
                    " Lua instructions " + when +
                    "; make it do less per action, or raise the host's lua_instructions (weft-host.toml)";
        break;
      case Kill::kTime:
        o.code = WEFT_ERR_TIMEOUT;
        o.message = label + " exceeded its time budget of " + std::to_string(limits_.time_budget_ms) + " ms " +
                    when + "; make it do less per action";
        break;
      case Kill::kMemory:
        o.code = WEFT_ERR_FAILED;
        o.message = label + " exceeded its memory cap of " + FormatBytes(limits_.memory_bytes) + " " + when;
        break;
      default:
        o.code = WEFT_ERR_CANCELLED;
        o.message = label + " was stopped " + when + " because the host cancelled the task";
        break;
    }
    return o;
  }
  if (c.memory_exceeded) {
    // The refusal was caught (or the run ended) before the hook fired.
    o.poisoned = true;
    o.code = WEFT_ERR_FAILED;
    o.message = label + " exceeded its memory cap of " + FormatBytes(limits_.memory_bytes) + " " + when;
    return o;
  }
  if (!c.violation.empty()) {
    o.code = WEFT_ERR_FAILED;
    o.message = label + " broke a sandbox rule " + when + ": " + c.violation;
    return o;
  }
  if (status == LUA_OK) return o;
  o.code = WEFT_ERR_FAILED;
  if (!c.raised_text.empty() && c.raised_code != 0) {
    // The script let a host service's error end the run (perhaps rethrown):
    // the task fails with the service's code.
    std::string_view first = std::string_view(error).substr(0, error.find("\nstack traceback:"));
    if (first.ends_with(c.raised_text)) o.code = c.raised_code;
  }
  if (status == LUA_ERRMEM) {
    o.poisoned = true;
    o.message = label + " ran out of memory " + when;
  } else if (error.find("stack overflow") != std::string::npos) {
    o.message = label + " overflowed the Lua stack " + when + " (runaway recursion?): " + error;
  } else {
    o.message = label + " failed " + when + ": " + error;
  }
  return o;
}

}  // namespace weft::host::lua
