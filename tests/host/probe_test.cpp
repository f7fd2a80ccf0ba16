// Probing plugin files in a child `weft-host --probe FILE` (the real binary).
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/forked_daemon.hpp"
#include "support/temp_dir.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/probe.hpp"

namespace {
const std::filesystem::path kBuild = WEFT_BUILD_DIR;
const std::string kExe = (kBuild / "bin/weft-host").string();
}  // namespace

TEST_CASE("probe: a good plugin's descriptor comes back as host.register wants it", "[host][probe]") {
  weft::host::ProbeResult r = weft::host::RunProbe(kExe, kBuild / "plugins/fixtures/fixture_good.so");
  INFO(r.reason);
  REQUIRE(r.ok);
  CHECK(r.info["type"] == "fixture-good");
  CHECK(r.info["kind"] == "automator");
  CHECK(r.info["actions"] == nlohmann::json({"INSTALL", "START"}));
  // A sensitive default never leaves the probe.
  CHECK_FALSE(r.info["fields"][1].contains("default"));
}

TEST_CASE("probe: a refused plugin comes back with the loader's reason", "[host][probe]") {
  weft::host::ProbeResult r = weft::host::RunProbe(kExe, kBuild / "plugins/fixtures/fixture_no_entry.so");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::StartsWith("no entry symbol 'weft_plugin_entry'"));
  r = weft::host::RunProbe(kExe, kBuild / "plugins/fixtures/fixture_init_throws.so");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("init threw a C++ exception"));
}

TEST_CASE("probe: a plugin that crashes while loading takes down only its probe", "[host][probe]") {
  weft::host::ProbeResult r = weft::host::RunProbe(kExe, kBuild / "plugins/crashers/crash_on_load.so");
  CHECK_FALSE(r.ok);
  CHECK(r.reason == "plugin file crash_on_load.so crashed while loading (SIGSEGV)");
}

TEST_CASE("probe: a probe that does not answer in time is killed and the file refused", "[host][probe]") {
  // 1 ms is far less than starting weft-host takes, so this probe always times out.
  weft::host::ProbeResult r = weft::host::RunProbe(kExe, kBuild / "plugins/fixtures/fixture_good.so", {}, 1);
  CHECK_FALSE(r.ok);
  CHECK(r.reason == "plugin file fixture_good.so hung while loading (no answer within 1 ms); its probe was killed");
}

TEST_CASE("probe: a plugin that starts a daemon while loading is judged when its probe ends, not the daemon",
          "[host][probe]") {
  // The daemon, forked in the probe, holds the verdict pipe open for as long as
  // it lives (longer than the probe's timeout): the verdict cannot wait for
  // that pipe's end.
  weft::testing::TempDir tmp("weft-probe-forks");
  const std::filesystem::path file = kBuild / "plugins/probe_forks/probe_forks.so";
  REQUIRE(setenv("WEFT_TEST_FORK_PIDFILE", (tmp / "daemon.pid").c_str(), 1) == 0);
  SECTION("it loads") {
    weft::testing::ForkedDaemon daemon(tmp / "daemon.pid");
    const weft::host::ProbeResult r = weft::host::RunProbe(kExe, file, {}, 60'000);
    INFO(r.reason);
    CHECK(r.ok);
    CHECK(r.info.value("type", "") == "probe-forks");
    CHECK(r.reason.empty());
    // The daemon still ran when the verdict came.
    REQUIRE(daemon.pid() > 0);
    CHECK(kill(daemon.pid(), 0) == 0);
  }
  SECTION("its entry point crashes after it started the daemon") {
    REQUIRE(setenv("WEFT_TEST_FORK_CRASH", "1", 1) == 0);
    weft::testing::ForkedDaemon daemon(tmp / "daemon.pid");
    const weft::host::ProbeResult r = weft::host::RunProbe(kExe, file, {}, 60'000);
    unsetenv("WEFT_TEST_FORK_CRASH");
    CHECK_FALSE(r.ok);
    CHECK(r.reason == "plugin file probe_forks.so crashed while loading (SIGSEGV)");
    REQUIRE(daemon.pid() > 0);
    CHECK(kill(daemon.pid(), 0) == 0);
  }
  unsetenv("WEFT_TEST_FORK_PIDFILE");
}

TEST_CASE("probe: files are probed at once, so files that hang while loading wait for each other and not in turn",
          "[host][probe]") {
  // Each copy of load_hang.so loads only once all three of its probes have
  // started (WEFT_TEST_LOAD_RENDEZVOUS): probed one at a time, the first would
  // wait for the others until its timeout, and all three would be refused.
  weft::testing::TempDir tmp("weft-probe-parallel");
  std::filesystem::create_directories(tmp / "met");
  std::vector<std::filesystem::path> files;
  for (const char* name : {"a.so", "b.so", "c.so"}) {
    std::filesystem::copy_file(kBuild / "plugins/load_hang/load_hang.so", tmp / name);
    files.push_back(tmp / name);
  }
  REQUIRE(setenv("WEFT_TEST_LOAD_RENDEZVOUS", ((tmp / "met").string() + ":3").c_str(), 1) == 0);
  std::vector<weft::host::ProbeResult> r = weft::host::RunProbes(kExe, files, {}, 60'000);
  unsetenv("WEFT_TEST_LOAD_RENDEZVOUS");
  REQUIRE(r.size() == 3);
  for (const auto& one : r) {
    INFO(one.reason);
    CHECK(one.ok);
    CHECK(one.info.value("type", "") == "load-hang");
  }
  // The bound still holds for each: one that never loads is refused by name,
  // in its place among the results.
  files = {kBuild / "plugins/fixtures/fixture_good.so", tmp / "a.so", kBuild / "plugins/fixtures/fixture_no_entry.so"};
  r = weft::host::RunProbes(kExe, files);
  REQUIRE(r.size() == 3);
  CHECK(r[0].ok);
  CHECK(r[1].reason == "plugin file a.so hung while loading (no answer within 10000 ms); its probe was killed");
  CHECK_THAT(r[2].reason, Catch::StartsWith("no entry symbol 'weft_plugin_entry'"));
}

TEST_CASE("probe: plugin files are listed per directory in order, sorted by name", "[host][probe]") {
  auto files = weft::host::ListPluginFiles({kBuild / "plugins/automators", kBuild / "plugins/crashers"});
  REQUIRE(files.size() >= 7);
  CHECK(files[0].parent_path() == kBuild / "plugins/automators");
  // Every automator (sorted) comes before the first crasher (sorted).
  std::size_t first_crasher = 0;
  while (first_crasher < files.size() && files[first_crasher].parent_path() == kBuild / "plugins/automators") {
    if (first_crasher > 0) CHECK(files[first_crasher - 1].filename() < files[first_crasher].filename());
    ++first_crasher;
  }
  REQUIRE(first_crasher < files.size());
  CHECK(files[first_crasher].filename() == "crash_abort.so");
  CHECK(files.back().filename() == "crash_segv.so");
}
