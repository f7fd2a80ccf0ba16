// task:exec, task:write and task:upload of Lua plugins against real sshd
// nodes (needs root), driven through the plugin descriptor with the host's own
// services table, as weft-host runs them.
#include <atomic>
#include <chrono>
#include <thread>

#include "lua_ssh_util.hpp"
#include "support/temp_dir.hpp"

using namespace weft::lua_test;
using Catch::Contains;
using weft::testing::SshdNode;

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("lua ssh: task:exec runs on the node and returns status and output", "[lua][ssh]") {
  SshdNode node("luaexec");
  Plugin p(Automator(R"(
    local r = task:exec("echo out; echo err >&2; echo $WEFT_NODE_ROOT; exit 3", { timeout_ms = 10000 })
    task:set_result("r", r)
    local chunks = {}
    local r2 = task:exec("printf 'a\\nb\\n'; printf 'c\\n' >&2", {
      on_stdout = function(chunk) table.insert(chunks, chunk); task:log("info", "got " .. #chunk .. " bytes") end,
      on_stderr = function(chunk) task:log("warn", "stderr: " .. chunk) end })
    task:set_result("streamed", table.concat(chunks))
    task:set_result("r2_ok", r2.ok)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["r"]["status"] == 3);
  CHECK(r.result["r"]["ok"] == false);
  CHECK(r.result["r"]["stdout"] == "out\n" + node.node().root.string() + "\n");
  CHECK(r.result["r"]["stderr"] == "err\n");
  CHECK(r.result["r"]["truncated"] == false);
  CHECK(r.result["streamed"] == "a\nb\n");
  CHECK(r.result["r2_ok"] == true);
  CHECK_THAT(r.out, Contains("got "));
  CHECK_THAT(r.log_errors, Contains("stderr: c"));
}

TEST_CASE("lua ssh: captured output is bounded, keeping the end", "[lua][ssh]") {
  SshdNode node("luatail");
  Plugin p(Automator(R"(
    local small = task:exec("seq 1 20000", { max_output_bytes = 12 })
    task:set_result("small", small.stdout)
    task:set_result("small_truncated", small.truncated)
    local none = task:exec("seq 1 100", { max_output_bytes = 0 })
    task:set_result("none", none.stdout)
    local big = task:exec("head -c 3000000 /dev/zero | tr '\\0' x; echo END")
    task:set_result("big_len", #big.stdout)
    task:set_result("big_end", big.stdout:sub(-4))
    task:set_result("big_truncated", big.truncated)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["small"] == "19999\n20000\n");
  CHECK(r.result["small_truncated"] == true);
  CHECK(r.result["none"] == "");
  CHECK(r.result["big_len"] == 1 << 20);  // the default bound: 1 MiB per stream
  CHECK(r.result["big_end"] == "END\n");
  CHECK(r.result["big_truncated"] == true);
}

TEST_CASE("lua ssh: task:write and task:upload put files on the node", "[lua][ssh]") {
  SshdNode node("luafiles");
  weft::testing::TempDir local("weft-lua-upload");
  weft::testing::WriteFile(local / "install.sh", "#!/bin/sh\necho installed \"$@\"\n");
  const std::string written = (node.node().dir / "written.txt").string();
  const std::string uploaded = (node.node().dir / "install.sh").string();
  json task = SshTaskFor(node);
  task["resources"] = json::array({{{"type", "scripts"}, {"name", "install.sh"}, {"version", 2},
                                    {"path", (local / "install.sh").string()}}});
  Plugin p(Automator(R"(
    task:write("line one\n\0after a NUL\n", ")" + written + R"(", "0600")
    task:upload(task.json.resources[1].path, ")" + uploaded + R"(", "0755", { timeout_ms = 10000 })
    local r = task:exec("stat -c %a )" + written + " " + uploaded + "; " + uploaded + R"( a b")
    task:set_result("out", r.stdout)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["out"] == "600\n755\ninstalled a b\n");
  CHECK(weft::testing::ReadFile(written) == std::string("line one\n") + '\0' + "after a NUL\n");
  CHECK(weft::testing::ReadFile(uploaded) == "#!/bin/sh\necho installed \"$@\"\n");
}

TEST_CASE("lua ssh: a task:write that fails is named a write, a task:upload an upload", "[lua][ssh]") {
  SshdNode node("luanodir");
  weft::testing::TempDir local("weft-lua-nodir");
  weft::testing::WriteFile(local / "a.sh", "#!/bin/sh\n");
  const std::string missing = (node.node().dir / "no-such-dir" / "x").string();
  json task = SshTaskFor(node);
  task["resources"] =
      json::array({{{"type", "scripts"}, {"name", "a.sh"}, {"version", 1}, {"path", (local / "a.sh").string()}}});
  Plugin p(Automator(R"(
    local ok, e = pcall(task.write, task, "x", ")" +
                     missing + R"(")
    task:set_result("write", e)
    ok, e = pcall(task.upload, task, task.json.resources[1].path, ")" +
                     missing + R"(")
    task:set_result("upload", e)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  const std::string write = r.result["write"].get<std::string>();
  const std::string upload = r.result["upload"].get<std::string>();
  CHECK_THAT(write, Contains("write to ") && Contains(": cannot create " + missing) && !Contains("upload"));
  CHECK_THAT(upload, Contains("upload to ") && Contains(": cannot create " + missing));
}

TEST_CASE("lua ssh: upload of a host file that is not a task resource breaks a sandbox rule", "[lua][ssh]") {
  SshdNode node("luaescape");
  const std::string stolen = (node.node().dir / "stolen").string();
  Plugin p(Automator(R"(
    local ok = pcall(function() task:upload("/etc/passwd", ")" + stolen + R"(") end)
    task:set_result("caught", ok)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("Lua plugin 't' broke a sandbox rule during INSTALL: t.lua:4: task:upload: the local file "
                             "'/etc/passwd' is not one of this task's resources"));
  CHECK_FALSE(std::filesystem::exists(stolen));
  // A path that only looks like a resource's ("..") is refused the same way.
  json task = SshTaskFor(node);
  task["resources"] = json::array({{{"name", "x"}, {"path", "/var/cache/weft/abc/x"}}});
  Plugin q(Automator(R"(task:upload("/var/cache/weft/abc/../../../../etc/passwd", ")" + stolen + R"("))"));
  RunResult r2 = q.Run(WEFT_ACTION_INSTALL, task);
  CHECK(r2.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r2.err, Contains("broke a sandbox rule"));
  CHECK_FALSE(std::filesystem::exists(stolen));
}

TEST_CASE("lua ssh: a host key mismatch is refused with the native sentence, no key material", "[lua][ssh]") {
  SshdNode node("luamitm");
  json task = SshTaskFor(node);
  std::string key = node.node().host_keys.at(0);
  key[key.find(' ') + 40] = key[key.find(' ') + 40] == 'A' ? 'B' : 'A';
  task["results"]["host_keys"] = json::array({key});
  const std::string marker = (node.node().dir / "must-not-exist").string();
  SECTION("uncaught, it fails the task") {
    Plugin p(Automator("task:exec('touch " + marker + "')"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("Lua plugin 't' failed during INSTALL: t.lua:3: SSH to node luamitm.c1.weft"));
    CHECK_THAT(r.err, Contains("host key mismatch"));
    CHECK_THAT(r.err, !Contains(KeyBodyLine(node.node())));
    CHECK_THAT(r.out + r.log_errors, !Contains(KeyBodyLine(node.node())));
  }
  SECTION("caught, the script sees the same sentence") {
    Plugin p(Automator(R"(
      local ok, e = pcall(task.write, task, "x", ")" + marker + R"(")
      task:set_result("ok", ok)
      task:set_result("e", e)
    )"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK(r.result["ok"] == false);
    CHECK_THAT(r.result["e"].get<std::string>(), Contains("host key mismatch"));
    CHECK_THAT(r.result["e"].get<std::string>(), !Contains(KeyBodyLine(node.node())));
  }
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("lua ssh: a command past its timeout fails the task as TIMEOUT, the plugin keeps serving", "[lua][ssh]") {
  SshdNode node("luatimeout");
  Plugin p(Automator("task:exec('sleep 10', { timeout_ms = 300 })"));
  auto start = Clock::now();
  RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  CHECK(MsSince(start) < 5000);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("Lua plugin 't' failed during INSTALL: t.lua:3: command timed out after 300 ms on node "
                             "luatimeout.c1.weft"));
  // Caught, the timeout is an ordinary error and the action goes on.
  Plugin q(Automator(R"(
    local ok, e = pcall(task.exec, task, "sleep 10", { timeout_ms = 200 })
    task:set_result("e", e)
    task:set_result("after", task:exec("echo fine").stdout)
  )"));
  RunResult c = q.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  INFO(c.err);
  REQUIRE(c.rc == WEFT_OK);
  CHECK_THAT(c.result["e"].get<std::string>(), Contains("command timed out after 200 ms"));
  CHECK(c.result["after"] == "fine\n");
}

TEST_CASE("lua ssh: time waiting in exec counts against the wall-clock budget, pcall or not", "[lua][ssh]") {
  SshdNode node("luabudget");
  LuaLimits limits = TestLimits();
  limits.time_budget_ms = 1000;
  Plugin p(Automator(R"(
    local ok = pcall(task.exec, task, "sleep 20", { timeout_ms = 60000 })
    task:set_result("survived", true)
  )"),
           limits);
  auto start = Clock::now();
  RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
  CHECK(MsSince(start) < 5000);
  CHECK(r.rc == WEFT_ERR_TIMEOUT);
  CHECK_THAT(r.err, Contains("Lua plugin 't' exceeded its time budget of 1000 ms during INSTALL"));
  CHECK_FALSE(r.result.contains("survived"));
  // The state was killed and closed; a fresh one serves the next run.
  RunResult ok = p.Run(WEFT_ACTION_START, SshTaskFor(node));
  CHECK(ok.rc == WEFT_OK);
}

TEST_CASE("lua ssh: a host cancel stops a waiting exec and the run", "[lua][ssh]") {
  SshdNode node("luacancel");
  Plugin p(Automator("pcall(task.exec, task, 'sleep 20') task:set_result('survived', true)"));
  weft::host::TaskContext ctx(SshTaskFor(node).dump(), nullptr);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ctx.Cancel("task timed out");
  });
  auto start = Clock::now();
  std::string err;
  int rc = p.RunWith(ctx, WEFT_ACTION_INSTALL, &err);
  canceller.join();
  CHECK(MsSince(start) < 5000);
  CHECK(rc == WEFT_ERR_CANCELLED);
  CHECK_THAT(err, Contains("Lua plugin 't' was stopped during INSTALL because the host cancelled the task"));
  CHECK_FALSE(ctx.result().contains("survived"));
}

TEST_CASE("lua ssh: output callbacks run under the sandbox's rules", "[lua][ssh]") {
  SshdNode node("luacb");
  SECTION("an error in a callback stops the command and fails the task") {
    Plugin p(Automator("task:exec('echo x; sleep 20', { on_stdout = function(c) error('no thanks') end })"));
    auto start = Clock::now();
    RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
    CHECK(MsSince(start) < 5000);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("task:exec: the output callback failed, so the command was stopped: t.lua:3: no thanks"));
  }
  SECTION("a callback that loops is killed by the instruction budget") {
    Plugin p(Automator("task:exec('echo x; sleep 20', { on_stdout = function(c) while true do end end })"));
    auto start = Clock::now();
    RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
    CHECK(MsSince(start) < 5000);
    CHECK(r.rc == WEFT_ERR_TIMEOUT);
    CHECK_THAT(r.err, Contains("exceeded its time budget of 5000000 Lua instructions during INSTALL"));
  }
  SECTION("SSH calls from inside a callback are refused") {
    Plugin p(Automator("task:exec('echo x', { on_stdout = function(c) task:exec('true') end })"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("task:exec cannot be called from task:exec's on_stdout/on_stderr callback"));
  }
  SECTION("a sandbox rule broken in a callback is final") {
    Plugin p(Automator("pcall(task.exec, task, 'echo x', { on_stdout = function(c) return io end })"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node));
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("broke a sandbox rule during INSTALL: t.lua:3: io is not available"));
  }
}

TEST_CASE("lua ssh: a task that does not say how to reach its node fails as INVALID", "[lua][ssh]") {
  SshdNode node("luanofacts");
  json task = SshTaskFor(node);
  task["results"].erase("access_v4");
  Plugin p(Automator("task:exec('true')"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
  CHECK(r.rc == WEFT_ERR_INVALID);
  CHECK_THAT(r.err, Contains("t.lua:3: the task for node luanofacts.c1.weft has no access_v4 address"));
}
