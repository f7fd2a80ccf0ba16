// One test per way a script could try to escape the Lua sandbox. Each asserts
// that the task fails with a message naming the rule, and that the host (this
// process) and the plugin keep working afterwards.
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "lua_test_util.hpp"
#include "weft/host/config.hpp"

using namespace weft::lua_test;
using Catch::Contains;

namespace {

// After any escape attempt, the same instance still runs a healthy action.
void StillServes(const Plugin& p) {
  RunResult ok = p.Run(WEFT_ACTION_START);
  INFO(ok.err);
  CHECK(ok.rc == WEFT_OK);
  CHECK(ok.result.value("started", false));
}

}  // namespace

TEST_CASE("lua: an infinite loop is killed by the instruction budget", "[lua]") {
  Plugin p(Automator("while true do end"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("Lua plugin 't' exceeded its time budget of 5000000 Lua instructions during INSTALL"));
  StillServes(p);
}

TEST_CASE("lua: an infinite loop inside pcall is still killed", "[lua]") {
  Plugin p(Automator(R"(
    local caught = 0
    while true do
      local ok = pcall(function() while true do end end)
      caught = caught + 1
      task:set_result("caught", caught)   -- never reached: the kill re-fires at once
    end)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("exceeded its time budget"));
  CHECK_FALSE(r.result.contains("caught"));
  StillServes(p);
}

TEST_CASE("lua: xpcall with a handler that loops cannot outlive the kill", "[lua]") {
  Plugin p(Automator(R"(
    while true do
      xpcall(function() while true do end end, function(e) while true do end end)
    end)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("exceeded its time budget"));
  StillServes(p);
}

TEST_CASE("lua: the wall-clock budget stops a run that has instructions left", "[lua]") {
  LuaLimits limits = TestLimits();
  limits.instruction_budget = 1'000'000'000'000ull;
  limits.time_budget_ms = 150;
  Plugin p(Automator("while true do pcall(string.rep, 'x', 10) end"), limits);
  auto start = std::chrono::steady_clock::now();
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("exceeded its time budget of 150 ms during INSTALL"));
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("lua: a memory bomb by string growth hits the memory cap", "[lua]") {
  Plugin p(Automator("local s = 'x' while true do s = s .. s end"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("Lua plugin 't' exceeded its memory cap of 8 MiB during INSTALL"));
  StillServes(p);
}

TEST_CASE("lua: a memory bomb by table growth hits the memory cap, even inside pcall", "[lua]") {
  Plugin p(Automator(R"(
    local ok, e = pcall(function()
      local t = {}
      for i = 1, 1e9 do t[i] = { i } end
    end)
    task:set_result("survived", tostring(e)))"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("exceeded its memory cap of 8 MiB"));
  CHECK_FALSE(r.result.contains("survived"));
  StillServes(p);
}

TEST_CASE("lua: one huge allocation (string.rep) is refused by the cap", "[lua]") {
  Plugin p(Automator("local s = string.rep('x', 1 << 30)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("exceeded its memory cap"));
}

TEST_CASE("lua: string.dump is refused", "[lua]") {
  Plugin p(Automator("local b = string.dump(function() end)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("broke a sandbox rule during INSTALL") && Contains("string.dump is not available"));
  StillServes(p);
}

TEST_CASE("lua: a plugin file of bytecode is refused at load", "[lua]") {
  std::string bytecode = std::string("\x1bLua\x54\x00\x19\x93\r\n\x1a\n", 12) + "rest";
  auto r = weft::host::lua::LoadLuaPluginSource("evil.luac", bytecode, TestLimits());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Contains("Lua plugin evil.luac") && Contains("binary") &&
                                       Contains("only Lua source text"));
}

TEST_CASE("lua: load refuses bytecode and binary mode but takes text", "[lua]") {
  SECTION("a chunk starting with ESC Lua") {
    Plugin p(Automator(R"(local f = load("\27Lua\84\0\25\147\r\n\26\n"))"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("broke a sandbox rule") && Contains("binary chunks"));
  }
  SECTION("mode 'b'") {
    Plugin p(Automator(R"(local f = load("return 1", "x", "b"))"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("mode 'b'"));
  }
  SECTION("a binary chunk caught by pcall still fails the task") {
    Plugin p(Automator(R"(pcall(load, "\27Lua"); task:set_result("went_on", true))"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("binary chunks"));
  }
  SECTION("text, with an environment") {
    Plugin p(Automator(R"(
      local f = assert(load("return x * 2", "calc", "t", { x = 21 }))
      task:set_result("v", f())
      local g, err = load("return +", "broken")
      task:set_result("err", err))"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK(r.result["v"] == 42);
    CHECK_THAT(r.result["err"].get<std::string>(), Contains("\"broken\"]:1:"));
  }
}

TEST_CASE("lua: io is not available", "[lua]") {
  Plugin p(Automator("local f = io.open('/etc/passwd')"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("broke a sandbox rule during INSTALL: t.lua:3: io is not available") &&
                        Contains("docs/lua-plugins.md"));
  StillServes(p);
}

TEST_CASE("lua: os.execute is not available, os.time is", "[lua]") {
  SECTION("os.execute") {
    Plugin p(Automator("os.execute('touch /tmp/weft-lua-escaped')"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("os.execute is not available"));
  }
  SECTION("os.getenv and os.exit") {
    Plugin p(Automator("local h = os.getenv('HOME')"));
    CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("os.getenv is not available"));
    Plugin q(Automator("os.exit(3)"));
    CHECK_THAT(q.Run(WEFT_ACTION_INSTALL).err, Contains("os.exit is not available"));
  }
  SECTION("the safe os") {
    Plugin p(Automator(R"(
      task:set_result("time", os.time() > 0)
      task:set_result("clock", type(os.clock()))
      task:set_result("mt", tostring(getmetatable(os))))"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK(r.result["time"] == true);
    CHECK(r.result["clock"] == "number");
    CHECK(r.result["mt"] == "false");  // protected: the guard cannot be removed
  }
}

TEST_CASE("lua: require and package are not available", "[lua]") {
  Plugin p(Automator("local m = require('socket')"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("require is not available"));
  Plugin q(Automator("local x = package.loadlib"));
  CHECK_THAT(q.Run(WEFT_ACTION_INSTALL).err, Contains("package is not available"));
}

TEST_CASE("lua: debug is not available, so the hook cannot be removed", "[lua]") {
  Plugin p(Automator("debug.sethook() while true do end"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("debug is not available"));
}

TEST_CASE("lua: dofile and loadfile are not available", "[lua]") {
  Plugin p(Automator("dofile('/etc/passwd')"));
  CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("dofile is not available"));
  Plugin q(Automator("loadfile('/etc/passwd')"));
  CHECK_THAT(q.Run(WEFT_ACTION_INSTALL).err, Contains("loadfile is not available"));
}

TEST_CASE("lua: the globals guard cannot be removed", "[lua]") {
  Plugin p(Automator(R"(
    task:set_result("mt", tostring(getmetatable(_G)))
    local ok, e = pcall(setmetatable, _G, nil)
    task:set_result("removed", ok)
    task:set_result("io", rawget(_G, "io") == nil))"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["mt"] == "false");
  CHECK(r.result["removed"] == false);
  CHECK(r.result["io"] == true);
}

TEST_CASE("lua: deep recursion fails the task, not the process", "[lua]") {
  LuaLimits limits = TestLimits();
  limits.memory_bytes = 64u << 20;  // room for the Lua stack to reach its own limit
  limits.instruction_budget = 50'000'000;
  SECTION("Lua recursion") {
    Plugin p(Automator("local function f(n) return 1 + f(n + 1) end f(1)"), limits);
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("overflowed the Lua stack during INSTALL") && Contains("stack overflow"));
    StillServes(p);
  }
  SECTION("C recursion through a metamethod") {
    Plugin p(Automator(R"(
      local t = setmetatable({}, { __index = function(t, k) return t[k .. "x"] end })
      local v = t.a)"), limits);
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("stack overflow"));
    StillServes(p);
  }
  SECTION("nested pcall") {
    Plugin p(Automator("local function f() return pcall(f) end f()"), limits);
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK((r.rc == WEFT_OK || r.rc == WEFT_ERR_FAILED));  // pcall may swallow the overflow; the process lives
    StillServes(p);
  }
}

TEST_CASE("lua: __gc finalizers are refused (they would run outside the budget)", "[lua]") {
  Plugin p(Automator("setmetatable({}, { __gc = function() while true do end end }) collectgarbage()"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("__gc metamethods are refused"));
  StillServes(p);
}

TEST_CASE("lua: a forbidden access caught by pcall still fails the task", "[lua]") {
  Plugin p(Automator(R"(
    local ok = pcall(function() return io.popen("id") end)
    task:set_result("caught", not ok))"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("io is not available"));
}

TEST_CASE("lua: a task kept in a global after its run is dead", "[lua]") {
  Plugin p(R"(
    return { type = "keeper", kind = "automator", actions = {
      install = function(task) kept = task end,
      start = function(task)
        local ok, e = pcall(function() kept:set_result("leak", 1) end)
        task:set_result("refused", not ok)
        task:set_result("why", tostring(e))
      end } })");
  REQUIRE(p.Run(WEFT_ACTION_INSTALL).rc == WEFT_OK);
  RunResult r = p.Run(WEFT_ACTION_START);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["refused"] == true);
  CHECK_THAT(r.result["why"].get<std::string>(), Contains("a task kept from an earlier run is dead"));
  CHECK_FALSE(r.result.contains("leak"));
}

TEST_CASE("lua: a poisoned state is not reused", "[lua]") {
  Plugin p(R"(
    return { type = "counter", kind = "automator", actions = {
      install = function(task) runs = (runs or 0) + 1; task:set_result("runs", runs) end,
      start = function(task) runs = 100; while true do end end,
      stop = function(task) runs = 200; local s = "x" while true do s = s .. s end end } })");
  // One state, reused: the global counter goes on.
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["runs"] == 1);
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["runs"] == 2);
  // A budget kill discards it: the next run starts from a fresh state.
  CHECK(p.Run(WEFT_ACTION_START).rc == WEFT_ERR_TIMEOUT);
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["runs"] == 1);
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["runs"] == 2);
  // So does a memory failure.
  CHECK(p.Run(WEFT_ACTION_STOP).rc == WEFT_ERR_FAILED);
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["runs"] == 1);
}

TEST_CASE("lua: a cancelled task is stopped by the hook", "[lua]") {
  LuaLimits limits = TestLimits();
  limits.instruction_budget = 1'000'000'000'000ull;
  Plugin p(Automator("while true do end"), limits);
  weft::host::TaskContext ctx(DefaultTask().dump(), nullptr);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ctx.Cancel("task timed out");
  });
  std::string err;
  int rc = p.RunWith(ctx, WEFT_ACTION_INSTALL, &err);
  canceller.join();
  CHECK(rc == WEFT_ERR_CANCELLED);
  CHECK_THAT(err, Contains("Lua plugin 't' was stopped during INSTALL because the host cancelled the task"));
}

TEST_CASE("lua: an infinite loop at the top level of the file fails the load", "[lua]") {
  auto r = weft::host::lua::LoadLuaPluginSource("spin.lua", "while true do end", TestLimits());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Contains("Lua plugin spin.lua exceeded its time budget") &&
                                       Contains("while loading"));
  auto m = weft::host::lua::LoadLuaPluginSource("big.lua", "local s = 'x' while true do s = s .. s end",
                                                 TestLimits());
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.status().message(), Contains("Lua plugin big.lua exceeded its memory cap of 8 MiB while loading"));
}

TEST_CASE("lua: collectgarbage('stop') does not lift the memory cap", "[lua]") {
  Plugin p(Automator(R"(
    collectgarbage("stop")
    local keep = {}
    for i = 1, 1e9 do keep[#keep + 1] = string.rep("y", 1000) .. i end)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("exceeded its memory cap of 8 MiB"));
  StillServes(p);
}

TEST_CASE("lua: a __close handler that loops is killed while the kill unwinds", "[lua]") {
  Plugin p(Automator(R"(
    local guard <close> = setmetatable({}, { __close = function() while true do end end })
    while true do end)"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("exceeded its time budget"));
  StillServes(p);
}

TEST_CASE("lua: source nested too deeply for the parser is a load error", "[lua]") {
  auto r = weft::host::lua::LoadLuaPluginSource("deep.lua", "return " + std::string(100000, '('), TestLimits());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Contains("Lua plugin deep.lua does not compile") && Contains("stack overflow"));
}

// Not run by default (timing): `lua_test "[.lua-overhead]"` prints the per-task
// cost of a Lua plugin as the host sees it (state reuse, task JSON, one call).
TEST_CASE("lua: per-task overhead of a trivial action", "[.lua-overhead]") {
  Plugin p(Automator("task:set_result('ok', true)"));
  constexpr int kRuns = 2000;
  auto start = std::chrono::steady_clock::now();
  int ok = 0;
  for (int i = 0; i < kRuns; ++i) ok += p.Run(WEFT_ACTION_INSTALL).rc == WEFT_OK ? 1 : 0;
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kRuns;
  WARN("Lua plugin overhead: " << us << " us per task (including the test's TaskContext)");
  CHECK(ok == kRuns);
  CHECK(us < 1000.0);
}

TEST_CASE("lua: weft-host's task timeout, not a shorter Lua budget, bounds a run's wall clock, and a message "
          "asks to raise only a limit the operator can set",
          "[lua]") {
  // task_timeout_ms (default 3600000, at most INT_MAX in weft-host.toml) cancels the run.
  CHECK(LuaLimits{}.time_budget_ms >= weft::host::HostConfig{}.task_timeout_ms);
  CHECK(LuaLimits{}.time_budget_ms >= std::numeric_limits<int>::max());

  Plugin p(Automator("while true do end"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("exceeded its time budget") &&
                        Contains("or raise the host's lua_instructions (weft-host.toml)"));
  LuaLimits wall = TestLimits();
  wall.instruction_budget = 1'000'000'000'000ull;
  wall.time_budget_ms = 100;
  Plugin q(Automator("while true do pcall(string.rep, 'x', 10) end"), wall);
  RunResult w = q.Run(WEFT_ACTION_INSTALL);
  CHECK(w.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(w.err, Contains("exceeded its time budget of 100 ms") && !Contains("raise"));
}
