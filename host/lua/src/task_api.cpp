// The `task` object's methods: the host services as Lua sees them.
//
// To add a service: write a `Reply Name(lua_State*)` that reads its arguments
// with the non-raising helpers of task_api.hpp, calls the host (with a timeout
// of its own if it can block: the budget hook cannot interrupt C code; see
// task_ssh.cpp for how a blocking call honours the budget), returns its results
// as JSON, and list it in TaskMethods(). Trampoline does the rest.
#include "task_api.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "lua_json.hpp"

namespace weft::host::lua {
namespace {

using json = nlohmann::json;

int LevelFromName(std::string_view name) {
  if (name == "debug") return WEFT_LOG_DEBUG;
  if (name == "info") return WEFT_LOG_INFO;
  if (name == "warn" || name == "warning") return WEFT_LOG_WARN;
  if (name == "error") return WEFT_LOG_ERROR;
  return 0;
}

// task:log(level, message) or task:log(message) (info).
Reply Log(lua_State* L) {
  RunScope& scope = TaskScope(L, "log");
  int level = WEFT_LOG_INFO;
  std::string message;
  if (lua_gettop(L) >= 3) {
    std::string name = ArgText(L, 2, "task:log: the level");
    level = LevelFromName(name);
    if (level == 0) throw ScriptError("task:log: level '" + name + "' is not one of debug, info, warn, error");
    message = ArgText(L, 3, "task:log: the message");
  } else {
    message = ArgText(L, 2, "task:log: the message");
  }
  scope.host->log(scope.task, level, message.c_str());
  return {};
}

// task:progress(percent [, message])
Reply Progress(lua_State* L) {
  RunScope& scope = TaskScope(L, "progress");
  if (lua_type(L, 2) != LUA_TNUMBER) {
    throw ScriptError("task:progress: the percent must be a number from 0 to 100, not " + TypeOf(L, 2));
  }
  double pct = lua_tonumberx(L, 2, nullptr);
  if (!std::isfinite(pct)) throw ScriptError("task:progress: the percent must be a number from 0 to 100");
  pct = pct < 0 ? 0 : (pct > 100 ? 100 : pct);
  std::string message;
  bool has_message = lua_gettop(L) >= 3 && !lua_isnil(L, 3);
  if (has_message) message = ArgText(L, 3, "task:progress: the message");
  scope.host->progress(scope.task, static_cast<int>(pct), has_message ? message.c_str() : nullptr);
  return {};
}

// task:set_result(key, value): value becomes JSON (tables, strings, numbers, booleans, nil/weft.null).
Reply SetResult(lua_State* L) {
  RunScope& scope = TaskScope(L, "set_result");
  if (lua_type(L, 2) != LUA_TSTRING) {
    throw ScriptError("task:set_result: the key must be a string, not " + TypeOf(L, 2));
  }
  std::string key = ArgText(L, 2, "task:set_result: the key");
  if (key.empty()) throw ScriptError("task:set_result: the key must not be empty");
  std::string text = ToJson(L, 3, "task:set_result('" + key + "')").dump();
  char err[512] = {0};
  int rc = scope.host->set_result(scope.task, key.c_str(), text.c_str(), err, sizeof err - 1);
  if (rc != WEFT_OK) {
    throw ScriptError("task:set_result('" + key + "'): the host refused the value: " + (err[0] ? err : "no reason given"));
  }
  return {};
}

// task:cancelled(): true once the host wants the task to stop.
Reply Cancelled(lua_State* L) {
  RunScope& scope = TaskScope(L, "cancelled");
  lua_pushboolean(L, scope.host->cancelled(scope.task) ? 1 : 0);
  return {1, {}};
}

}  // namespace

RunScope& TaskScope(lua_State* L, const char* method) {
  RunScope* scope = ControlOf(L).scope;
  if (!scope || !scope->task_object || lua_type(L, 1) != LUA_TTABLE || lua_topointer(L, 1) != scope->task_object) {
    throw ScriptError(std::string("task:") + method +
                      " must be called as task:" + method +
                      "(...) on the task passed to the running action; a task kept from an earlier run is dead");
  }
  return *scope;
}

std::string TypeOf(lua_State* L, int i) {
  if (lua_isnoneornil(L, i)) return "nil";
  return std::string("a ") + lua_typename(L, lua_type(L, i));
}

std::string ArgText(lua_State* L, int i, const char* what) {
  if (lua_type(L, i) == LUA_TSTRING) {
    std::size_t n = 0;
    const char* s = lua_tolstring(L, i, &n);
    return std::string(s, n);
  }
  if (lua_type(L, i) == LUA_TNUMBER) {
    if (lua_isinteger(L, i)) return std::to_string(lua_tointegerx(L, i, nullptr));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.14g", lua_tonumberx(L, i, nullptr));
    return buf;
  }
  throw ScriptError(std::string(what) + " must be a string, not " + TypeOf(L, i));
}

const std::vector<LuaMethod>& TaskMethods() {
  static const std::vector<LuaMethod> kMethods = {
      {"log", &Trampoline<&Log>},
      {"progress", &Trampoline<&Progress>},
      {"set_result", &Trampoline<&SetResult>},
      {"cancelled", &Trampoline<&Cancelled>},
      {"exec", &Trampoline<&TaskExec>},
      {"upload", &Trampoline<&TaskUpload>},
      {"write", &Trampoline<&TaskWrite>},
  };
  return kMethods;
}

}  // namespace weft::host::lua
