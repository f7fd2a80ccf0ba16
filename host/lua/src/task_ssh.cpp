// task:exec, task:upload, task:write: SSH to the task's node for Lua plugins.
//
// They call the very functions the host's services table calls for native
// plugins (weft::host::ssh::ServiceExec / ServiceUpload / ServiceWrite) with
// the task's JSON as the host hands it to the plugin. So the node is found in
// the task the same way, its host key is checked the same way, connections come
// from the same pool (Pool::Default) with the same timeouts, and an error is
// the same sentence a native plugin gets; it never holds key material.
//
// The budget while a call waits. The count hook cannot run while C code blocks,
// so each call
//  1. cuts its timeout to what is left of the run's wall-clock budget,
//  2. has weft_ssh poll (about every 100 ms) the host's cancel flag, the
//     deadline, and whether an output callback failed or was killed, and
//  3. when it ended because of the budget or the host, kills the run exactly as
//     the hook would have (KillRun), so pcall cannot keep the script going.
// Waiting costs no instructions: the instruction budget counts Lua instructions
// only, including those of on_stdout/on_stderr callbacks, which run under the
// hook like any other Lua code.
//
// Upload reads a file on the host, which the sandbox otherwise forbids: a
// script may upload only the resource files its task names
// (task.json.resources[i].path, fetched and verified by the host).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "task_api.hpp"
#include "weft/ssh/ssh_services.hpp"

namespace weft::host::lua {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;
constexpr std::size_t kDefaultMaxOutputBytes = 1u << 20;
constexpr std::uint32_t kDefaultFileMode = 0644;

// Keeps the last `cap` bytes of a stream: appends until full, then wraps around.
class OutputTail {
 public:
  void set_cap(std::size_t cap) { cap_ = cap; }
  void Add(const char* data, std::size_t len) {
    total_ += len;
    if (cap_ == 0 || len == 0) return;
    if (buf_.size() < cap_) {
      std::size_t take = std::min(len, cap_ - buf_.size());
      buf_.append(data, take);
      data += take;
      len -= take;
      if (len == 0) return;
    }
    if (len >= cap_) {  // the chunk alone fills the tail
      buf_.assign(data + len - cap_, cap_);
      pos_ = 0;
      return;
    }
    std::size_t first = std::min(len, cap_ - pos_);
    buf_.replace(pos_, first, data, first);
    buf_.replace(0, len - first, data + first, len - first);
    pos_ = (pos_ + len) % cap_;
  }
  // The kept bytes, oldest first.
  std::string Take() {
    std::rotate(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_), buf_.end());
    pos_ = 0;
    return std::move(buf_);
  }
  bool truncated() const { return total_ > cap_; }

 private:
  std::size_t cap_ = kDefaultMaxOutputBytes;
  std::string buf_;
  std::size_t pos_ = 0;  // next write position once buf_ is full
  std::uint64_t total_ = 0;
};

// ---- arguments ----------------------------------------------------------------

RunScope& SshScope(lua_State* L, const char* method) {
  RunScope& scope = TaskScope(L, method);
  if (scope.in_output_callback) {
    throw ScriptError(std::string("task:") + method +
                      " cannot be called from task:exec's on_stdout/on_stderr callback (the command is still "
                      "running); keep what you need and act after task:exec returns");
  }
  return scope;
}

std::int64_t TimeoutOption(lua_State* L, int i, const std::string& what) {
  if (lua_type(L, i) != LUA_TNUMBER || !lua_isinteger(L, i)) {
    throw ScriptError(what + ": timeout_ms must be a whole number of milliseconds such as 60000, not " +
                      (lua_type(L, i) == LUA_TNUMBER ? std::string("a float") : TypeOf(L, i)));
  }
  lua_Integer v = lua_tointegerx(L, i, nullptr);
  if (v < 1 || v > kMaxTimeoutMs) {
    throw ScriptError(what + ": timeout_ms must be from 1 to " + std::to_string(kMaxTimeoutMs) + " (24 hours), not " +
                      std::to_string(v));
  }
  return v;
}

// Calls fn(key) for each key of the options table at `i` (value on top);
// nothing to do for nil.
template <typename Fn>
void ForEachOption(lua_State* L, int i, const std::string& what, Fn fn) {
  if (lua_isnoneornil(L, i)) return;
  if (lua_type(L, i) != LUA_TTABLE) {
    throw ScriptError(what + ": the options must be a table like { timeout_ms = 60000 }, not " + TypeOf(L, i));
  }
  if (!lua_checkstack(L, 4)) throw ScriptError(what + ": the Lua stack is full");
  lua_pushnil(L);
  while (lua_next(L, i)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      throw ScriptError(what + ": the options table has " + TypeOf(L, -2) + " key; its keys are option names");
    }
    std::size_t n = 0;
    const char* s = lua_tolstring(L, -2, &n);
    fn(std::string(s, n));
    lua_pop(L, 1);
  }
}

// A file mode: an octal string of permission bits ("0644", "755"); nil is the default.
std::uint32_t ModeArg(lua_State* L, int i, const std::string& what) {
  if (lua_isnoneornil(L, i)) return kDefaultFileMode;
  if (lua_type(L, i) == LUA_TNUMBER) {
    throw ScriptError(what + ": the mode must be an octal string such as \"0644\" or \"0755\", not the number " +
                      ArgText(L, i, "the mode") + " (Lua has no octal numbers: 0644 in Lua is six hundred and "
                      "forty-four)");
  }
  if (lua_type(L, i) != LUA_TSTRING) {
    throw ScriptError(what + ": the mode must be an octal string such as \"0644\", not " + TypeOf(L, i));
  }
  std::string text = ArgText(L, i, "the mode");
  bool digits = text.size() >= 3 && text.size() <= 4 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
  std::uint32_t mode = 0;
  if (digits) {
    for (char c : text) mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (!digits) {
    throw ScriptError(what + ": the mode '" + text + "' is not an octal file mode such as \"0644\" or \"0755\"");
  }
  if (mode > 0777) {
    // SCP carries only the permission bits: refuse rather than drop the rest.
    throw ScriptError(what + ": the mode '" + text + "' sets setuid, setgid or sticky bits, which SCP cannot carry; "
                      "give the permission bits only (up to \"0777\") and set the others with task:exec(\"chmod ...\")");
  }
  return mode;
}

// ---- the budget around a blocking call -----------------------------------------

struct Deadline {
  std::uint32_t timeout_ms = 0;
  bool budget_bound = false;  // the run's budget, not the caller, set timeout_ms
};

// The call's timeout (requested, else the service's default), cut to what is
// left of the run's wall-clock budget. Kills the run if nothing is left.
Deadline CallDeadline(lua_State* L, std::int64_t requested_ms, std::uint32_t service_default_ms) {
  const Control& c = ControlOf(L);
  std::int64_t want = requested_ms > 0 ? requested_ms : service_default_ms;
  std::int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - Clock::now()).count();
  if (left <= 0) {
    KillRun(L, Kill::kTime);
    throw ScriptError("killed: the time budget is spent");
  }
  if (left < want) return {static_cast<std::uint32_t>(left), true};
  return {static_cast<std::uint32_t>(want), false};
}

// What ends a blocking call early: the host's cancel, the run's deadline, a
// kill or failure in an output callback.
ssh::CancelledFn StopWhen(lua_State* L, const RunScope& scope, const bool* callback_failed) {
  const Control* c = &ControlOf(L);
  return [c, host = scope.host, task = scope.task, callback_failed] {
    return (callback_failed && *callback_failed) || c->kill != Kill::kNone || Clock::now() >= c->deadline ||
           host->cancelled(task) != 0;
  };
}

// Decides how a blocking call that returned `rc` ends: returns if it is fine,
// else throws (after KillRun when the budget or the host ended it).
void Settle(lua_State* L, const RunScope& scope, int rc, const char* err, const Deadline& deadline,
            const std::string& callback_error) {
  Control& c = ControlOf(L);
  if (c.kill != Kill::kNone || c.memory_exceeded) {
    throw ScriptError("killed while task:exec's output callback ran");  // Describe names the kill
  }
  if (!callback_error.empty()) {
    throw ScriptError("task:exec: the output callback failed, so the command was stopped: " + callback_error);
  }
  if (rc == WEFT_OK) return;
  if (scope.host->cancelled(scope.task)) {
    KillRun(L, Kill::kCancelled);
    throw ScriptError("killed: the host cancelled the task");
  }
  if (Clock::now() >= c.deadline || (rc == WEFT_ERR_TIMEOUT && deadline.budget_bound)) {
    KillRun(L, Kill::kTime);
    throw ScriptError("killed: the time budget is spent");
  }
  std::string message = err && err[0] ? err : "the SSH service failed without saying why";
  c.raised_text = message;
  c.raised_code = rc;
  throw ScriptError(message);
}

// ---- task:exec ------------------------------------------------------------------

// What the output callbacks need; weft_ssh hands it back as user_data.
struct ExecCall {
  lua_State* L = nullptr;
  RunScope* scope = nullptr;
  int fn_slot[2] = {0, 0};  // stack slots of on_stdout / on_stderr; 0: none
  OutputTail tail[2];
  bool callback_failed = false;
  std::string callback_error;
};

struct CallbackJob {
  const char* data;
  std::size_t len;
};

// Runs under lua_pcall: (function, job) -> function(chunk). Holds nothing with a destructor.
int CallbackBody(lua_State* L) {
  const auto* job = static_cast<const CallbackJob*>(lua_touserdata(L, 2));
  lua_settop(L, 1);
  lua_pushlstring(L, job->data, job->len);
  lua_call(L, 1, 0);
  return 0;
}

void OnOutput(ExecCall* call, int stream, const char* data, std::size_t len) noexcept {
  try {
    call->tail[stream].Add(data, len);
    if (call->fn_slot[stream] == 0 || call->callback_failed) return;
    lua_State* L = call->L;
    if (!lua_checkstack(L, 4)) {
      call->callback_failed = true;
      call->callback_error = "the Lua stack is full";
      return;
    }
    CallbackJob job{data, len};
    call->scope->in_output_callback = true;
    lua_pushcfunction(L, &CallbackBody);
    lua_pushvalue(L, call->fn_slot[stream]);
    lua_pushlightuserdata(L, &job);
    int status = lua_pcall(L, 2, 0, 0);
    call->scope->in_output_callback = false;
    if (status != LUA_OK) {
      call->callback_failed = true;
      call->callback_error = lua_type(L, -1) == LUA_TSTRING
                                 ? lua_tostring(L, -1)
                                 : std::string("it raised a ") + lua_typename(L, lua_type(L, -1)) + " value";
      lua_pop(L, 1);
    }
  } catch (...) {
    call->scope->in_output_callback = false;
    call->callback_failed = true;
    if (call->callback_error.empty()) call->callback_error = "the host ran out of memory";
  }
}

void OnStdout(void* user_data, const char* data, std::size_t len) {
  OnOutput(static_cast<ExecCall*>(user_data), 0, data, len);
}
void OnStderr(void* user_data, const char* data, std::size_t len) {
  OnOutput(static_cast<ExecCall*>(user_data), 1, data, len);
}

}  // namespace

// task:exec(command [, { timeout_ms, on_stdout, on_stderr, max_output_bytes }])
//   -> { status, ok, stdout, stderr, truncated }
Reply TaskExec(lua_State* L) {
  RunScope& scope = SshScope(L, "exec");
  const std::string command = ArgText(L, 2, "task:exec: the command");
  if (command.empty()) throw ScriptError("task:exec: the command is empty");

  ExecCall call;
  call.L = L;
  call.scope = &scope;
  // Slots 4 and 5 keep the callbacks reachable while the command runs.
  lua_settop(L, 3);
  lua_pushnil(L);
  lua_pushnil(L);
  std::int64_t timeout_ms = 0;
  std::size_t max_output = kDefaultMaxOutputBytes;
  const std::size_t cap = ControlOf(L).cap_bytes;
  ForEachOption(L, 3, "task:exec", [&](const std::string& key) {
    if (key == "timeout_ms") {
      timeout_ms = TimeoutOption(L, -1, "task:exec");
    } else if (key == "on_stdout" || key == "on_stderr") {
      if (lua_type(L, -1) != LUA_TFUNCTION) {
        throw ScriptError("task:exec: " + key + " must be a function(chunk), not " + TypeOf(L, -1));
      }
      int slot = key == "on_stdout" ? 4 : 5;
      lua_copy(L, -1, slot);
      call.fn_slot[slot - 4] = slot;
    } else if (key == "max_output_bytes") {
      if (lua_type(L, -1) != LUA_TNUMBER || !lua_isinteger(L, -1) || lua_tointegerx(L, -1, nullptr) < 0 ||
          static_cast<std::uint64_t>(lua_tointegerx(L, -1, nullptr)) > cap) {
        throw ScriptError("task:exec: max_output_bytes must be an integer from 0 to the plugin's memory cap (" +
                          FormatBytes(cap) + ")");
      }
      max_output = static_cast<std::size_t>(lua_tointegerx(L, -1, nullptr));
    } else {
      throw ScriptError("task:exec: unknown option '" + key +
                        "'; the options are timeout_ms, on_stdout, on_stderr, max_output_bytes");
    }
  });
  call.tail[0].set_cap(max_output);
  call.tail[1].set_cap(max_output);

  const Deadline deadline = CallDeadline(L, timeout_ms, ssh::kDefaultExecTimeoutMs);
  char err[1024] = {0};
  int exit_status = -1;
  int rc = ssh::ServiceExec(scope.host->task_json(scope.task), StopWhen(L, scope, &call.callback_failed),
                            command.c_str(), deadline.timeout_ms, &OnStdout, &OnStderr, &call, &exit_status, err,
                            sizeof err - 1);
  Settle(L, scope, rc, err, deadline, call.callback_error);
  const bool truncated = call.tail[0].truncated() || call.tail[1].truncated();
  json result = {{"status", exit_status},
                 {"ok", exit_status == 0},
                 {"stdout", call.tail[0].Take()},
                 {"stderr", call.tail[1].Take()},
                 {"truncated", truncated}};
  return {0, {std::move(result)}};
}

// task:write(text, remote_path [, mode [, { timeout_ms }]])
Reply TaskWrite(lua_State* L) {
  RunScope& scope = SshScope(L, "write");
  if (lua_type(L, 2) != LUA_TSTRING) {
    throw ScriptError("task:write: the text must be a string, not " + TypeOf(L, 2));
  }
  const std::string text = ArgText(L, 2, "task:write: the text");
  const std::string remote = ArgText(L, 3, "task:write: the remote path");
  if (remote.empty()) throw ScriptError("task:write: the remote path is empty");
  const std::uint32_t mode = ModeArg(L, 4, "task:write");
  std::int64_t timeout_ms = 0;
  ForEachOption(L, 5, "task:write", [&](const std::string& key) {
    if (key != "timeout_ms") throw ScriptError("task:write: unknown option '" + key + "'; the option is timeout_ms");
    timeout_ms = TimeoutOption(L, -1, "task:write");
  });
  const Deadline deadline = CallDeadline(L, timeout_ms, ssh::kDefaultUploadTimeoutMs);
  char err[1024] = {0};
  int rc = ssh::ServiceWrite(scope.host->task_json(scope.task), StopWhen(L, scope, nullptr), text.data(), text.size(),
                             remote.c_str(), mode, deadline.timeout_ms, err, sizeof err - 1);
  Settle(L, scope, rc, err, deadline, {});
  return {};
}

// task:upload(local_path, remote_path [, mode [, { timeout_ms }]]): local_path
// must be one of the task's resource files.
Reply TaskUpload(lua_State* L) {
  RunScope& scope = SshScope(L, "upload");
  const std::string local = ArgText(L, 2, "task:upload: the local path");
  const std::string remote = ArgText(L, 3, "task:upload: the remote path");
  if (remote.empty()) throw ScriptError("task:upload: the remote path is empty");
  const std::uint32_t mode = ModeArg(L, 4, "task:upload");
  std::int64_t timeout_ms = 0;
  ForEachOption(L, 5, "task:upload", [&](const std::string& key) {
    if (key != "timeout_ms") throw ScriptError("task:upload: unknown option '" + key + "'; the option is timeout_ms");
    timeout_ms = TimeoutOption(L, -1, "task:upload");
  });

  const char* task_text = scope.host->task_json(scope.task);
  const json task = json::parse(task_text ? task_text : "{}", nullptr, /*allow_exceptions=*/false);
  const std::filesystem::path wanted = std::filesystem::path(local).lexically_normal();
  bool allowed = false;
  if (task.is_object()) {
    if (auto r = task.find("resources"); r != task.end() && r->is_array()) {
      for (const json& entry : *r) {
        if (!entry.is_object()) continue;
        auto p = entry.find("path");
        if (p != entry.end() && p->is_string() && !p->get_ref<const std::string&>().empty() &&
            std::filesystem::path(p->get<std::string>()).lexically_normal() == wanted) {
          allowed = true;
        }
      }
    }
  }
  if (!allowed) {
    throw SandboxViolation("task:upload: the local file '" + local +
                           "' is not one of this task's resources; a Lua plugin may upload only the resource files "
                           "its task names (task.json.resources[i].path) and writes anything else with task:write");
  }
  const Deadline deadline = CallDeadline(L, timeout_ms, ssh::kDefaultUploadTimeoutMs);
  char err[1024] = {0};
  int rc = ssh::ServiceUpload(task_text, StopWhen(L, scope, nullptr), local.c_str(), remote.c_str(), mode,
                              deadline.timeout_ms, err, sizeof err - 1);
  Settle(L, scope, rc, err, deadline, {});
  return {};
}

}  // namespace weft::host::lua
