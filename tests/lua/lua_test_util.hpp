// Drives a Lua plugin through its descriptor exactly as weft-host does: init
// with the host's services, run with a real TaskContext, destroy at the end.
#pragma once

#include <catch2/catch.hpp>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/host/plugin_loader.hpp"
#include "weft/host/task_context.hpp"
#include "weft/lua/lua_plugin.hpp"

namespace weft::lua_test {

using nlohmann::json;
using weft::host::lua::LuaLimits;

// Small limits keep the escape tests fast, also under ASan.
inline LuaLimits TestLimits() {
  LuaLimits l;
  l.memory_bytes = 8u << 20;
  l.instruction_budget = 5'000'000;
  l.time_budget_ms = 10'000;
  return l;
}

inline json DefaultTask() {
  return {{"task_id", 7},
          {"attempt", 1},
          {"tenant", "default"},
          {"plugin", "t"},
          {"action", "INSTALL"},
          {"node_id", "n1"},
          {"service", {{"name", "web"}, {"action", {{"type", "t"}, {"fields", json::object()}}}}}};
}

struct RunResult {
  int rc = -1;
  std::string err;
  json result;
  std::string out;  // debug/info log lines
  std::string log_errors;  // warn/error log lines
  std::vector<std::pair<int, std::string>> progress;
};

class Plugin {
 public:
  explicit Plugin(const std::string& source, const LuaLimits& limits = TestLimits(),
                  const std::string& name = "t.lua") {
    auto r = weft::host::lua::LoadLuaPluginSource(name, source, limits);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    d_ = *r;
    Init();
  }
  explicit Plugin(const weft_plugin_descriptor* d) : d_(d) { Init(); }
  ~Plugin() {
    if (d_->destroy) d_->destroy(instance_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const weft_plugin_descriptor& descriptor() const { return *d_; }

  RunResult Run(std::uint32_t action, const json& task = DefaultTask(),
                weft::host::TaskContext** context_out = nullptr) const {
    RunResult r;
    std::mutex mu;
    weft::host::TaskContext ctx(task.dump(), [&](int pct, const std::string& msg) {
      std::lock_guard<std::mutex> lock(mu);
      r.progress.emplace_back(pct, msg);
    });
    if (context_out) *context_out = &ctx;
    char err[1024] = {0};
    r.rc = d_->run(instance_, weft::host::HostServices(), ctx.handle(), action, err, sizeof err);
    r.err = err;
    r.result = ctx.result();
    r.out = ctx.stdout_tail();
    r.log_errors = ctx.stderr_tail();
    return r;
  }
  // Runs with a context the caller made (to cancel it from another thread).
  int RunWith(weft::host::TaskContext& ctx, std::uint32_t action, std::string* err_out) const {
    char err[1024] = {0};
    int rc = d_->run(instance_, weft::host::HostServices(), ctx.handle(), action, err, sizeof err);
    *err_out = err;
    return rc;
  }

 private:
  void Init() {
    char err[1024] = {0};
    int rc = d_->init(weft::host::HostServices(), &instance_, err, sizeof err);
    INFO(err);
    REQUIRE(rc == WEFT_OK);
  }

  const weft_plugin_descriptor* d_ = nullptr;
  void* instance_ = nullptr;
};

// An automator whose install action is `body`.
inline std::string Automator(const std::string& body, const std::string& type = "t") {
  return "return { type = '" + type + "', kind = 'automator', actions = {\n install = function(task)\n" + body +
         "\n end,\n start = function(task) task:set_result('started', true) end } }";
}

}  // namespace weft::lua_test
