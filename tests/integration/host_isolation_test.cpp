// weft-host's worker processes against the real weftd: crash isolation with
// the crash fixtures (tests/host/crashers), plugin directories watched at
// runtime, and no orphan workers when the master is SIGKILLed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::kBuild;
using weft::testing::ServerIn;
using weft::testing::Weftd;
using weft::testing::TempDir;
using weft::testing::WaitFor;

// Worker pids the master logged as started, in order.
std::vector<pid_t> StartedWorkers(const std::string& log) {
  std::vector<pid_t> pids;
  static const std::regex started("started worker ([0-9]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), started); it != std::sregex_iterator(); ++it) {
    pids.push_back(static_cast<pid_t>(std::stol((*it)[1].str())));
  }
  return pids;
}

// True while `pid` exists and is not a zombie.
bool Alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::vector<std::string> PluginTypes(Weftd& server) {
  std::vector<std::string> types;
  auto list = server.TryCall("plugin.list", json::object());
  if (!list.ok()) return types;
  for (const auto& p : (*list)["plugins"]) types.push_back(p["type"]);
  return types;
}

// The types that start with `prefix`, in order. Tests compare only their own
// plugins: the build may put other real plugins into providers/ and automators/.
std::vector<std::string> WithPrefix(const std::vector<std::string>& types, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& t : types) {
    if (t.rfind(prefix, 0) == 0) out.push_back(t);
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Workers run under the same sanitizers as the master in CI; a report from one
// lands in the host's log (a deliberate crash is a signal, never a report).
void CheckNoSanitizerReport(const std::string& log) {
  CHECK(log.find("ERROR: AddressSanitizer") == std::string::npos);
  CHECK(log.find("ERROR: LeakSanitizer") == std::string::npos);
  CHECK(log.find("runtime error:") == std::string::npos);
}

// `text` as a regular expression that matches exactly it.
std::string RegexQuoted(const std::string& text) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, special, R"(\$&)");
}

json FakeTask(const char* action, int latency_ms) {
  return {{"plugin", "fake-automator"},
          {"action", action},
          {"max_attempts", 1},
          {"payload", {{"service", {{"action", {{"fields", {{"latency_ms", latency_ms}}}}}}}}}};
}

}  // namespace

TEST_CASE("isolation: each crashing plugin fails only its own task, and the host keeps serving",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // Two workers of one thread each: a crasher and a fake task always run in
  // different workers.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(),
            {kBuild / "plugins/crashers", kBuild / "plugins/automators"}, 2,
            "workers = 2\ntask_timeout_ms = 1500\nworker_memory_limit_mb = 300\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));

  // A plugin whose entry point crashes is refused by its probe; the others load.
  const std::string crashers = (kBuild / "plugins/crashers").string();
  CHECK_THAT(host.Log(), Catch::Contains("refused plugin " + crashers +
                                         "/crash_on_load.so: plugin file crash_on_load.so crashed while loading "
                                         "(SIGSEGV)"));
  std::vector<std::string> types = PluginTypes(server);
  CHECK(WithPrefix(types, "crash-") ==
        std::vector<std::string>{"crash-abort", "crash-exit", "crash-hang", "crash-memory", "crash-segv"});
  CHECK(Has(types, "fake-automator"));

  struct Case {
    const char* plugin;
    const char* action;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"crash-segv", "INSTALL", "plugin 'crash-segv' crashed with SIGSEGV during INSTALL"},
      {"crash-abort", "START", "plugin 'crash-abort' crashed with SIGABRT during START"},
      {"crash-exit", "CONFIGURE", "plugin 'crash-exit' exited with status 3 during CONFIGURE"},
      {"crash-hang", "INSTALL",
       "plugin 'crash-hang' hung past the task timeout of 1500 ms during INSTALL; its worker was killed"},
      {"crash-memory", "INITIALIZE",
       "plugin 'crash-memory' used more than 300 MiB during INITIALIZE; its worker was killed"},
  };
  std::map<std::string, std::int64_t> crash_ids;  // by plugin
  for (const Case& c : cases) {
    INFO("crasher " << c.plugin);
    // The fake task first, so it is running in one worker when the crasher
    // takes down the other.
    const std::int64_t fake = server.Enqueue(FakeTask("START", 1000));
    server.WaitTaskState(fake, "leased", 15s);
    const std::int64_t crash =
        server.Enqueue({{"plugin", c.plugin}, {"action", c.action}, {"max_attempts", 1}, {"node_id", "n1"}});
    crash_ids[c.plugin] = crash;
    json failed = server.WaitTaskState(crash, "failed", 30s);
    CHECK(failed["message"] == c.message);
    CHECK(failed["host_id"] == "h1");
    json ok = server.WaitTaskState(fake, "succeeded", 15s);
    CHECK(ok["attempt"] == 1);
  }
  // One worker per crash was replaced, and the host still runs tasks.
  REQUIRE(WaitFor([&] { return StartedWorkers(host.Log()).size() >= 2 + cases.size(); }, 15s));
  const std::int64_t after = server.Enqueue(FakeTask("INSTALL", 0));
  server.WaitTaskState(after, "succeeded", 15s);
  CHECK(host.process().running());
  CHECK(server.HostLive("h1"));
  const std::string log = host.Log();
  CHECK_THAT(log, Catch::Contains("crashed with SIGSEGV holding 1 task(s): task ") &&
                     Catch::Contains(" (plugin 'crash-segv' INSTALL, node n1); reporting them as failed"));
  CHECK_THAT(log, Catch::Contains("starting a new worker for slot"));
  // What a plugin writes to stderr just before its process dies (unfinished) is logged with its task.
  CHECK_THAT(log, Catch::Contains(" stderr, task " + std::to_string(crash_ids["crash-abort"]) +
                                  " (plugin 'crash-abort' START, node n1): crash-abort: about to abort (no newline)\n"));

  // SIGTERM still stops the master and its workers cleanly.
  std::vector<pid_t> workers = StartedWorkers(host.Log());
  CHECK(weft::testing::ExitCodeOf(host.process().Stop(20s)) == 0);
  for (pid_t pid : workers) CHECK_FALSE(Alive(pid));
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: a plugin dropped into a watched directory becomes usable, a broken one is refused",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  const std::filesystem::path dropins = tmp / "dropins";
  std::filesystem::create_directories(dropins);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(),
            {kBuild / "plugins/providers", kBuild / "plugins/automators", dropins}, 2));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  CHECK_FALSE(Has(PluginTypes(server), "fixture-good"));
  // A task that runs across the roll: its worker is retired but finishes it.
  const std::int64_t across = server.Enqueue(FakeTask("INSTALL", 1500));
  server.WaitTaskState(across, "leased", 15s);

  std::filesystem::copy_file(kBuild / "plugins/fixtures/fixture_good.so", dropins / "fixture_good.so");
  REQUIRE(WaitFor([&] { return Has(PluginTypes(server), "fixture-good"); }, 20s));
  const std::int64_t good = server.Enqueue({{"plugin", "fixture-good"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  json t = server.WaitTaskState(good, "succeeded", 15s);
  CHECK(t["result"]["ran"] == true);
  json a = server.WaitTaskState(across, "succeeded", 15s);
  CHECK(a["attempt"] == 1);
  CHECK_THAT(host.Log(), Catch::Contains("rolling workers"));

  // Broken files: refused with a log line each, nothing else changes.
  std::filesystem::copy_file(kBuild / "plugins/fixtures/fixture_no_entry.so", dropins / "fixture_no_entry.so");
  std::filesystem::copy_file(kBuild / "plugins/crashers/crash_on_load.so", dropins / "crash_on_load.so");
  const std::string prefix = "refused plugin " + dropins.string();
  REQUIRE(WaitFor(
      [&] {
        const std::string log = host.Log();
        return log.find(prefix + "/fixture_no_entry.so: no entry symbol") != std::string::npos &&
               log.find(prefix + "/crash_on_load.so: plugin file crash_on_load.so crashed while loading") !=
                   std::string::npos;
      },
      20s));
  std::vector<std::string> types = PluginTypes(server);
  CHECK(WithPrefix(types, "fixture-") == std::vector<std::string>{"fixture-good"});
  CHECK(WithPrefix(types, "crash-").empty());
  CHECK(Has(types, "fake-automator"));
  CHECK(Has(types, "fake-provider"));
  const std::int64_t still = server.Enqueue({{"plugin", "fixture-good"}, {"action", "START"}, {"max_attempts", 1}});
  server.WaitTaskState(still, "succeeded", 15s);
  const std::int64_t fake = server.Enqueue(FakeTask("START", 0));
  server.WaitTaskState(fake, "succeeded", 15s);
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: a plugin directory absent at start, or removed and made again, is watched once it is there",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  const std::filesystem::path later = tmp / "later";  // not there when the host starts
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/automators", later}, 2));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  CHECK_THAT(host.Log(), Catch::Contains("cannot watch plugin directory " + later.string() +
                                         ": it does not exist; watching for it to appear"));
  std::filesystem::create_directories(later);
  REQUIRE(WaitFor([&] { return host.Log().find("plugin directory " + later.string() + " is there") != std::string::npos; },
                  20s));
  std::filesystem::copy_file(kBuild / "plugins/fixtures/fixture_good.so", later / "fixture_good.so");
  REQUIRE(WaitFor([&] { return Has(PluginTypes(server), "fixture-good"); }, 20s));

  // rm -rf and mkdir again: the plugin goes away, and one dropped into the new directory is loaded.
  std::filesystem::remove_all(later);
  std::filesystem::create_directories(later);
  REQUIRE(WaitFor([&] { return !Has(PluginTypes(server), "fixture-good"); }, 20s));
  CHECK(WaitFor([&] { return host.Log().find("plugin directory " + later.string() + " was removed") !=
                             std::string::npos; },
                20s));
  std::filesystem::copy_file(kBuild / "plugins/fixtures/fixture_good.so", later / "fixture_good.so");
  const bool back = WaitFor([&] { return Has(PluginTypes(server), "fixture-good"); }, 20s);
  INFO(host.Log());
  REQUIRE(back);
  const std::int64_t id = server.Enqueue({{"plugin", "fixture-good"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  CHECK(server.WaitTaskState(id, "succeeded", 15s)["result"]["ran"] == true);
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: SIGKILL of the master leaves no worker behind", "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, 4, "workers = 3\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  REQUIRE(WaitFor([&] { return StartedWorkers(host.Log()).size() == 3; }, 15s));
  // A worker in the middle of a task, too.
  const std::int64_t id = server.Enqueue(FakeTask("INSTALL", 30000));
  server.WaitTaskState(id, "leased", 15s);
  const std::vector<pid_t> workers = StartedWorkers(host.Log());
  for (pid_t pid : workers) REQUIRE(Alive(pid));

  host.process().Signal(SIGKILL);
  REQUIRE(host.process().Wait(5s).has_value());
  CHECK(WaitFor(
      [&] {
        for (pid_t pid : workers) {
          if (Alive(pid)) return false;
        }
        return true;
      },
      10s));
}

#ifdef WEFT_TEST_LUA
TEST_CASE("isolation: a Lua plugin dropped into a watched directory runs like a native one, a broken one is refused",
          "[integration][host][isolation][lua]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  const std::filesystem::path dropins = tmp / "dropins";
  std::filesystem::create_directories(dropins);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/automators", dropins}, 2));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));

  // Written elsewhere and renamed in, as docs/host.md advises.
  weft::testing::WriteFile(tmp / "dropped.lua",
                           "return {\n"
                           "  type = \"dropped-lua\", kind = \"automator\", version = \"1.0\",\n"
                           "  description = \"integration test plugin\",\n"
                           "  actions = { install = function(task) task:set_result(\"ran\", true) end },\n"
                           "}\n");
  std::filesystem::rename(tmp / "dropped.lua", dropins / "dropped.lua");
  REQUIRE(WaitFor([&] { return Has(PluginTypes(server), "dropped-lua"); }, 20s));
  const std::int64_t id = server.Enqueue({{"plugin", "dropped-lua"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  json t = server.WaitTaskState(id, "succeeded", 15s);
  CHECK(t["result"]["ran"] == true);

  weft::testing::WriteFile(tmp / "broken.lua", "return { type = \n");
  std::filesystem::rename(tmp / "broken.lua", dropins / "broken.lua");
  REQUIRE(WaitFor(
      [&] {
        return host.Log().find("refused plugin " + (dropins / "broken.lua").string() +
                               ": cannot load the Lua plugin") != std::string::npos;
      },
      20s));
  CHECK(Has(PluginTypes(server), "dropped-lua"));
  CHECK(Has(PluginTypes(server), "fake-automator"));
}

TEST_CASE("isolation: weft-host.toml's lua_instructions and lua_memory_mb are the budget of its Lua plugins, in "
          "workers and probes",
          "[integration][host][isolation][lua]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  const std::filesystem::path lua = tmp / "lua";
  std::filesystem::create_directories(lua);
  // About 10 million instructions: within the default budget, over 2 million.
  weft::testing::WriteFile(lua / "counting.lua",
                           "return {\n"
                           "  type = \"counting\", kind = \"automator\", version = \"1.0\",\n"
                           "  actions = { install = function(task)\n"
                           "    local n = 0\n"
                           "    for i = 1, 2500000 do n = n + i end\n"
                           "    task:set_result(\"sum\", n)\n"
                           "  end },\n"
                           "}\n");
  // Its top level holds about 3 MiB: over a 2 MiB cap, so refused while the probe loads it.
  weft::testing::WriteFile(lua / "holding.lua",
                           "local held = string.rep(\"x\", 3 * 1024 * 1024)\n"
                           "return { type = \"holding\", kind = \"automator\", version = \"1.0\",\n"
                           "  actions = { install = function(task) task:set_result(\"n\", #held) end } }\n");

  Host roomy(HostIn(tmp / "roomy", "roomy", server.provisioner(), {lua}, 1));
  REQUIRE(WaitFor([&] { return Has(PluginTypes(server), "counting") && Has(PluginTypes(server), "holding"); }, 20s));
  const std::int64_t fits = server.Enqueue({{"plugin", "counting"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  CHECK(server.WaitTaskState(fits, "succeeded", 30s)["result"]["sum"] == 3'125'001'250'000LL);
  roomy.Stop();  // leaves weftd: the next task can only go to the tight host

  Host tight(HostIn(tmp / "tight", "tight", server.provisioner(), {lua}, 1,
                    "lua_instructions = 2000000\nlua_memory_mb = 2\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("tight"); }, 20s));
  const std::int64_t over = server.Enqueue({{"plugin", "counting"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  json t = server.WaitTaskState(over, "failed", 30s);
  CHECK_THAT(t.value("message", std::string()),
             Catch::Contains("exceeded its time budget of 2000000 Lua instructions during INSTALL") &&
                 Catch::Contains("raise the host's lua_instructions (weft-host.toml)"));
  CHECK_THAT(tight.Log(), Catch::Contains("holding.lua") && Catch::Contains("exceeded its memory cap of 2 MiB while loading"));
}
#endif

TEST_CASE("isolation: a crash costs every task of its worker, and says which tasks ran beside them",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // One worker with three threads: two tasks of the same plugin type share the crasher's process.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/crashers", kBuild / "plugins/automators"},
            3, "workers = 1\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  json on_a = FakeTask("START", 20000), on_b = FakeTask("START", 20000);
  on_a["node_id"] = "node-a";
  on_b["node_id"] = "node-b";
  const std::int64_t a = server.Enqueue(on_a);
  const std::int64_t b = server.Enqueue(on_b);
  server.WaitTaskState(a, "leased", 15s);
  server.WaitTaskState(b, "leased", 15s);
  const std::int64_t crash = server.Enqueue({{"plugin", "crash-abort"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  json c = server.WaitTaskState(crash, "failed", 20s);
  const std::string label_a = "task " + std::to_string(a) + " (plugin 'fake-automator' START, node node-a)";
  const std::string label_b = "task " + std::to_string(b) + " (plugin 'fake-automator' START, node node-b)";
  const std::string label_crash = "task " + std::to_string(crash) + " (plugin 'crash-abort' INSTALL)";
  INFO(host.Log());
  CHECK_THAT(c["message"].get<std::string>(),
             Catch::StartsWith("plugin 'crash-abort' crashed with SIGABRT during INSTALL (the worker also ran "));
  CHECK_THAT(c["message"].get<std::string>(), Catch::Contains(label_a) && Catch::Contains(label_b));
  // Each task of the same plugin names the other one by task and node.
  json fa = server.WaitTaskState(a, "failed", 20s);
  json fb = server.WaitTaskState(b, "failed", 20s);
  CHECK_THAT(fa["message"].get<std::string>(),
             Catch::StartsWith("plugin 'fake-automator' crashed with SIGABRT during START (the worker also ran "));
  CHECK_THAT(fa["message"].get<std::string>(), Catch::Contains(label_b) && Catch::Contains(label_crash) &&
                                                   Catch::Contains("at the time, so the fault may be theirs"));
  CHECK_THAT(fa["message"].get<std::string>(), !Catch::Contains(label_a));
  CHECK_THAT(fb["message"].get<std::string>(), Catch::Contains(label_a) && Catch::Contains(label_crash));
  // The host's log names every task the worker held.
  CHECK_THAT(host.Log(), Catch::Contains("holding 3 task(s): ") && Catch::Contains(label_a) &&
                             Catch::Contains(label_b) && Catch::Contains(label_crash));
  // The replacement worker serves.
  const std::int64_t after = server.Enqueue(FakeTask("INSTALL", 0));
  server.WaitTaskState(after, "succeeded", 15s);
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: what a plugin prints to stdout and stderr is logged with its task, and only up to a limit per "
          "task",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/crashers", kBuild / "plugins/automators"},
            1, "workers = 1\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  const std::size_t before = host.Log().size();
  // crash_noisy prints 40,000 lines (about 2.4 MB) to stdout, as many to stderr, and succeeds.
  const std::int64_t id =
      server.Enqueue({{"plugin", "noisy-output"}, {"action", "INSTALL"}, {"max_attempts", 1}, {"node_id", "web-1"}});
  server.WaitTaskState(id, "succeeded", 60s);
  const std::string task = "task " + std::to_string(id) + " (plugin 'noisy-output' INSTALL, node web-1): ";
  REQUIRE(WaitFor([&] { return host.Log().find("stdout, " + task + "... ") != std::string::npos; }, 15s));
  REQUIRE(WaitFor([&] { return host.Log().find("stderr, " + task + "... ") != std::string::npos; }, 15s));
  const std::string log = host.Log().substr(before);
  INFO(log.substr(0, 4096));
  for (const std::string stream : {"stdout", "stderr"}) {
    INFO(stream);
    const std::string label = stream + ", " + task;
    const std::string line = "noisy-" + stream + " line ";
    // Every printed line in the log carries the stream and the task; the first ones are there, the last ones are not.
    CHECK_THAT(log, Catch::Contains(label + line + "0: the "));
    CHECK_THAT(log, !Catch::Contains(line + "39999"));
    std::size_t printed = 0, unlabelled = 0;
    for (std::size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) {
      ++printed;
      if (at < label.size() || log.compare(at - label.size(), label.size(), label) != 0) ++unlabelled;
    }
    CHECK(printed > 100);
    CHECK(unlabelled == 0);
    // 64 KiB of it at most, then one line says how much more was dropped.
    const std::regex dropped(stream + ", task [0-9]+ \\(plugin 'noisy-output' INSTALL, node web-1\\): \\.\\.\\. ([0-9]+) "
                             "more bytes dropped \\(at most 65536 per task are logged\\)");
    std::smatch m;
    REQUIRE(std::regex_search(log, m, dropped));
    CHECK(std::stoll(m[1].str()) > 2'000'000);
  }
  // With the labels, under 1 MiB of log for both streams.
  CHECK(log.size() < 1024 * 1024);
  // The worker's own log lines still reach the host's log as they are, not as plugin output.
  const std::string full = host.Log();
  static const std::regex serving("\n[0-9TZ:.-]+ INFO  worker [0-9]+: serving any tenant with 1 thread\\(s\\)");
  CHECK(std::regex_search(full, serving));
  CHECK_THAT(full, !Catch::Contains("stderr, no task running: "));
  CheckNoSanitizerReport(log);
}

TEST_CASE("isolation: a crash report printed after a flood of output is logged with its task, past the limit per "
          "task",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/crashers"}, 1, "workers = 1\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  // crash_flood_abort prints 4,000 lines (about 300 KB) to stderr, then one line of crash report, and aborts.
  const std::int64_t id = server.Enqueue(
      {{"plugin", "flood-then-abort"}, {"action", "INSTALL"}, {"max_attempts", 1}, {"node_id", "web-1"}});
  json failed = server.WaitTaskState(id, "failed", 60s);
  CHECK(failed["message"] == "plugin 'flood-then-abort' crashed with SIGABRT during INSTALL");
  const std::string failed_line = "task " + std::to_string(id) + " attempt 1 failed: ";
  REQUIRE(WaitFor([&] { return host.Log().find(failed_line) != std::string::npos; }, 15s));
  const std::string log = host.Log();
  const std::string label = "stderr, task " + std::to_string(id) + " (plugin 'flood-then-abort' INSTALL, node web-1): ";
  // The first 64 KiB are logged, then lines are dropped...
  CHECK_THAT(log, Catch::Contains(label + "flood-then-abort line 0: the "));
  CHECK_THAT(log, !Catch::Contains("flood-then-abort line 2000: "));
  // ... and the worker's last 32 KiB, the crash report among them, are logged when it dies, after the count of
  // what was dropped before them, and before the task is reported.
  const std::regex dropped(RegexQuoted(label) + "\\.\\.\\. ([0-9]+) more bytes dropped \\(at most 65536 per task "
                           "are logged\\); the last ([0-9]+) bytes before its worker died follow");
  std::smatch m;
  REQUIRE(std::regex_search(log, m, dropped));
  CHECK(std::stoll(m[1].str()) > 150'000);
  CHECK(std::stoll(m[2].str()) > 30'000);
  CHECK(std::stoll(m[2].str()) <= 32 * 1024);
  const std::size_t at_dropped = static_cast<std::size_t>(m.position(0));
  const std::size_t at_last = log.find(label + "flood-then-abort line 3999: the ");
  const std::size_t at_report = log.find(label + "flood-then-abort: the crash report, written after the flood\n");
  REQUIRE(at_last != std::string::npos);
  REQUIRE(at_report != std::string::npos);
  CHECK(at_dropped < at_last);
  CHECK(at_last < at_report);
  CHECK(at_report < log.find(failed_line));
  CheckNoSanitizerReport(log);
}

TEST_CASE("isolation: what a worker wrote last is logged with its task when it dies, while a child it started still "
          "holds its stdout and stderr open",
          "[integration][host][isolation]") {
  // The master logs an unfinished line once the pipe ends or once it reaps the
  // worker. Here the pipe cannot end: crash_daemon_abort leaves a child holding
  // it (until the master is gone), writes an unfinished line and aborts, so
  // only what the master reads when it reaps the worker logs that line.
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/crashers"}, 1, "workers = 1\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  const std::int64_t id =
      server.Enqueue({{"plugin", "daemon-then-abort"}, {"action", "START"}, {"max_attempts", 1}, {"node_id", "n1"}});
  json failed = server.WaitTaskState(id, "failed", 30s);
  CHECK(failed["message"] == "plugin 'daemon-then-abort' crashed with SIGABRT during START");
  const std::string failed_line = "task " + std::to_string(id) + " attempt 1 failed: ";
  REQUIRE(WaitFor([&] { return host.Log().find(failed_line) != std::string::npos; }, 15s));
  const std::string log = host.Log();
  const std::string last_words = " stderr, task " + std::to_string(id) +
                                 " (plugin 'daemon-then-abort' START, node n1): daemon-then-abort: about to abort (no "
                                 "newline)\n";
  CHECK_THAT(log, Catch::Contains(last_words));
  CHECK(log.find(last_words) < log.find(failed_line));
  // The host goes on: a new worker serves.
  REQUIRE(WaitFor([&] { return StartedWorkers(host.Log()).size() >= 2; }, 15s));
  CheckNoSanitizerReport(log);
}

TEST_CASE("isolation: what a plugin file prints while it is probed is logged, labelled with the file, and only up to "
          "a limit",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // probe_chatty prints to stdout and about 150 KB to stderr from its entry point, and loads.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/probe_chatty"}, 1, "workers = 1\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  // What it printed to stdout is not taken for the probe's verdict.
  CHECK(Has(PluginTypes(server), "probe-chatty"));
  const std::string label = "probe of plugin file " + (kBuild / "plugins/probe_chatty/probe_chatty.so").string() + " ";
  REQUIRE(WaitFor([&] { return host.Log().find(label + "stderr: ... ") != std::string::npos; }, 15s));
  const std::string log = host.Log();
  CHECK_THAT(log, !Catch::Contains("refused plugin"));
  CHECK_THAT(log, Catch::Contains(label + "stdout: probe-chatty: hello on stdout from the entry point\n"));
  CHECK_THAT(log, Catch::Contains(label + "stdout: probe-chatty: the last words on stdout, unfinished\n"));
  CHECK_THAT(log, Catch::Contains(label + "stderr: probe-chatty stderr line 0: the "));
  // 64 KiB at most, then one line says how much more was dropped.
  CHECK_THAT(log, !Catch::Contains("probe-chatty stderr line 1999"));
  const std::regex dropped(RegexQuoted(label) + "stderr: \\.\\.\\. ([0-9]+) more bytes dropped \\(at most 65536 "
                           "per probe are logged\\)");
  std::smatch m;
  REQUIRE(std::regex_search(log, m, dropped));
  CHECK(std::stoll(m[1].str()) > 50'000);
  // Every line it printed is labelled: by its probe, or by the worker that loaded it (no task running yet).
  std::size_t probed = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("probe-chatty stderr line ") == std::string::npos) continue;
    INFO(line);
    const bool by_probe = line.find(label + "stderr: probe-chatty stderr line ") != std::string::npos;
    if (by_probe) ++probed;
    CHECK((by_probe || line.find(" stderr, no task running: probe-chatty stderr line ") != std::string::npos));
  }
  CHECK(probed > 500);
  CheckNoSanitizerReport(log);
}

TEST_CASE("isolation: SIGTERM with a plugin that ignores cancellation: its worker is killed, its task given up, the "
          "master exits 0",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/crashers", kBuild / "plugins/automators"},
            2, "shutdown_grace_ms = 300\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  const std::int64_t hang = server.Enqueue({{"plugin", "crash-hang"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  const std::int64_t quick = server.Enqueue(FakeTask("START", 200));
  server.WaitTaskState(hang, "leased", 15s);
  server.WaitTaskState(quick, "leased", 15s);
  const std::vector<pid_t> workers = StartedWorkers(host.Log());
  CHECK(weft::testing::ExitCodeOf(host.process().Stop(30s)) == 0);
  // Given up by the stop, not failed: queued again without using up its only attempt.
  json h = server.WaitTaskState(hang, "queued", 10s);
  CHECK(h["max_attempts"] == 2);
  REQUIRE(h["attempts"].size() == 1);
  CHECK_THAT(h["attempts"][0]["message"].get<std::string>(), Catch::Contains("was given up: host 'h1' stopped"));
  CHECK_THAT(host.Log(), Catch::Contains("task " + std::to_string(hang) + " attempt 1 given up: the host stops and "
                                         "plugin 'crash-hang' ignored cancellation during INSTALL"));
  server.WaitTaskState(quick, "succeeded", 10s);
  for (pid_t pid : workers) CHECK_FALSE(Alive(pid));
  CHECK_THAT(host.Log(), Catch::Contains("host: stopped"));
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: a task of a newly dropped plugin type is handed out at once, not after the old workers' held "
          "takes ran out",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  const std::filesystem::path dropins = tmp / "dropins";
  std::filesystem::create_directories(dropins);
  // Takes held for 25 s: the old workers' ones would keep the new type from weftd that long.
  weft::testing::HostOptions options =
      HostIn(tmp / "host", "h1", server.provisioner(), {kBuild / "plugins/automators", dropins}, 2);
  options.take_wait_ms = 25000;
  Host host(options);
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));
  // Both workers hold a take by now (weftd has two runners of h1 waiting).
  std::this_thread::sleep_for(1s);
  const std::int64_t waiting =
      server.Enqueue({{"plugin", "fixture-good"}, {"action", "INSTALL"}, {"max_attempts", 1}});
  std::filesystem::copy_file(kBuild / "plugins/fixtures/fixture_good.so", dropins / "fixture_good.so");
  REQUIRE(WaitFor([&] { return host.Log().find("loaded plugin 'fixture-good'") != std::string::npos; }, 20s));
  const json t = server.WaitTaskState(waiting, "succeeded", 10s);
  INFO(host.Log());
  CHECK(t["result"]["ran"] == true);
  CHECK(t["attempt"] == 1);
  // The retired workers exited; an automator task still runs on the new ones.
  const std::int64_t fake = server.Enqueue(FakeTask("START", 0));
  server.WaitTaskState(fake, "succeeded", 10s);
  CheckNoSanitizerReport(host.Log());
}

TEST_CASE("isolation: a host started with plugin files that each load slowly probes them at once, not one after the "
          "other",
          "[integration][host][isolation]") {
  TempDir tmp("weft-it");
  // Each copy of load_hang.so loads only once all three of its probes run at once
  // (WEFT_TEST_LOAD_RENDEZVOUS; the master's probes inherit its environment).
  // Probed one after the other, the first would wait for the others until its
  // probe's bound and be refused as hung, then the next, and so on.
  const std::filesystem::path slow = tmp / "slow";
  std::filesystem::create_directories(slow);
  std::filesystem::create_directories(tmp / "met");
  for (const char* name : {"a.so", "b.so", "c.so"})
    std::filesystem::copy_file(kBuild / "plugins/load_hang/load_hang.so", slow / name);
  REQUIRE(setenv("WEFT_TEST_LOAD_RENDEZVOUS", ((tmp / "met").string() + ":3").c_str(), 1) == 0);
  // No weftd: the probes run before the host registers.
  Host host(HostIn(tmp / "host", "h1", "tcp://127.0.0.1:9", {slow}, 1));
  unsetenv("WEFT_TEST_LOAD_RENDEZVOUS");
  REQUIRE(WaitFor([&] { return host.Log().find(" plugin(s) loaded, ") != std::string::npos; }, 60s));
  const std::string log = host.Log();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("loaded plugin 'load-hang' (automator, version 1.0) from " + (slow / "a.so").string()));
  // The other two have the same type: refused for that, not for hanging.
  CHECK_THAT(log, Catch::Contains("1 plugin(s) loaded, 2 refused"));
  CHECK_THAT(log, !Catch::Contains("hung while loading"));
  CheckNoSanitizerReport(log);
}
