// Probing plugin files in a child `weft-host --probe FILE` (the real binary).
#include <catch2/catch.hpp>

#include <filesystem>

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
