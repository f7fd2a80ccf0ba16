#include <catch2/catch.hpp>

#include <algorithm>

#include "support/temp_dir.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/task_context.hpp"

using weft::host::PluginSet;

namespace {

std::filesystem::path FixtureDir() { return std::filesystem::path(WEFT_BUILD_DIR) / "plugins/fixtures"; }

std::string ReasonFor(const PluginSet& set, const std::string& file) {
  for (const auto& r : set.refusals()) {
    if (r.file.filename() == file) return r.reason;
  }
  return "(not refused)";
}

}  // namespace

TEST_CASE("loader: every broken fixture is refused with its reason, the good one loads", "[host][loader]") {
  PluginSet set;
  set.LoadDirectories({FixtureDir()});

  REQUIRE(set.plugins().size() == 1);
  const auto& good = set.plugins()[0];
  CHECK(good.type_name == "fixture-good");
  CHECK(good.file.filename() == "fixture_good.so");

  CHECK_THAT(ReasonFor(set, "fixture_no_entry.so"), Catch::Contains("no entry symbol 'weft_plugin_entry'"));
  CHECK_THAT(ReasonFor(set, "fixture_major2.so"),
             Catch::Contains("built for plugin ABI 2.2; this host supports 1.2"));
  CHECK_THAT(ReasonFor(set, "fixture_minor1.so"),
             Catch::Contains("built for plugin ABI 1.3; this host supports up to 1.2"));
  CHECK_THAT(ReasonFor(set, "fixture_oversized.so"), Catch::Contains("oversized descriptor"));
  CHECK_THAT(ReasonFor(set, "fixture_init_throws.so"),
             Catch::Contains("init threw a C++ exception; exceptions must not cross the plugin ABI"));
  CHECK_THAT(ReasonFor(set, "fixture_declines.so"), Catch::Contains("this fixture needs a GPU"));
  CHECK_THAT(ReasonFor(set, "fixture_bad_default.so"),
             Catch::Contains("'retries'") && Catch::Contains("\"ten\"") && Catch::Contains("integer"));
  CHECK(ReasonFor(set, "fixture_create_only.so") ==
        "provider 'fixture-create-only' does not declare CONFIRM, DELETE; a provider declares all of CREATE, CONFIRM "
        "and DELETE (DELETE also undoes a failed CREATE)");
  // The duplicate names itself (the refusal's file) and the file that won.
  CHECK_THAT(ReasonFor(set, "fixture_good_dup.so"),
             Catch::Contains("duplicate type name 'fixture-good'") && Catch::Contains("fixture_good.so"));

  // Refusals come in file-name order, so logs and tests are deterministic.
  std::vector<std::string> order;
  for (const auto& r : set.refusals()) order.push_back(r.file.filename().string());
  CHECK(order == std::vector<std::string>{"fixture_bad_default.so", "fixture_create_only.so", "fixture_declines.so",
                                          "fixture_good_dup.so", "fixture_init_throws.so", "fixture_major2.so",
                                          "fixture_minor1.so", "fixture_no_entry.so", "fixture_oversized.so"});
}

TEST_CASE("loader: the descriptor becomes host.register JSON, sensitive defaults stay home", "[host][loader]") {
  PluginSet set;
  set.LoadDirectories({FixtureDir()});
  REQUIRE(set.plugins().size() == 1);
  const nlohmann::json info = set.plugins()[0].info;
  CHECK(info["type"] == "fixture-good");
  CHECK(info["kind"] == "automator");
  CHECK(info["version"] == "1.0");
  CHECK(info["actions"] == nlohmann::json::array({"INSTALL", "START"}));
  REQUIRE(info["fields"].size() == 2);
  CHECK(info["fields"][0] == nlohmann::json({{"name", "size"},
                                             {"label", "Size"},
                                             {"type", "integer"},
                                             {"required", false},
                                             {"sensitive", false},
                                             {"default", 1},
                                             {"description", "how big"}}));
  CHECK(info["fields"][1]["sensitive"] == true);
  CHECK_FALSE(info["fields"][1].contains("default"));
  CHECK(set.RegisterJson().dump().find("s3cret") == std::string::npos);
  CHECK(info["resource_types"] == nlohmann::json::array());
}

TEST_CASE("loader: a loaded plugin runs through the host services", "[host][loader]") {
  PluginSet set;
  REQUIRE(set.LoadFile(FixtureDir() / "fixture_good.so"));
  const weft::host::LoadedPlugin* p = set.Find("fixture-good");
  REQUIRE(p != nullptr);
  weft::host::TaskContext ctx("{\"task_id\":1}", nullptr);
  char err[256] = {0};
  int rc = p->descriptor->run(p->instance, weft::host::HostServices(), ctx.handle(), WEFT_ACTION_INSTALL, err,
                              sizeof err);
  CHECK(rc == WEFT_OK);
  CHECK(ctx.result() == nlohmann::json({{"ran", true}}));
  CHECK(ctx.stdout_tail() == "fixture ran\n");
}

TEST_CASE("loader: the fake plugins load from the build's plugin dirs", "[host][loader]") {
  PluginSet set;
  set.LoadDirectories({std::filesystem::path(WEFT_BUILD_DIR) / "plugins/providers",
                       std::filesystem::path(WEFT_BUILD_DIR) / "plugins/automators"});
  CHECK(set.refusals().empty());
  // Other real plugins the build puts there may load beside the fakes.
  const weft::host::LoadedPlugin* provider = set.Find("fake-provider");
  const weft::host::LoadedPlugin* automator = set.Find("fake-automator");
  REQUIRE(provider != nullptr);
  REQUIRE(automator != nullptr);
  CHECK(provider->info["kind"] == "provider");
  CHECK(provider->info["actions"] == nlohmann::json::array({"CREATE", "CONFIRM", "DELETE"}));
  CHECK(automator->info["actions"].size() == 7);
  // Directories in the given order: every provider before every automator.
  CHECK(provider < automator);
}

TEST_CASE("loader: missing directories and non-plugin files are survived", "[host][loader]") {
  weft::testing::TempDir dir;
  weft::testing::WriteFile(dir / "garbage.so", "this is not an ELF file");
  weft::testing::WriteFile(dir / "notes.txt", "ignored: not a .so");
  PluginSet set;
  set.LoadDirectories({dir / "does-not-exist", dir.path()});
  CHECK(set.plugins().empty());
  REQUIRE(set.refusals().size() == 1);
  CHECK(set.refusals()[0].file.filename() == "garbage.so");
  CHECK_THAT(set.refusals()[0].reason, Catch::Contains("cannot load the library"));
}

TEST_CASE("loader: action names map to bits and back", "[host][loader]") {
  CHECK(weft::host::ActionFromName("CREATE") == WEFT_ACTION_CREATE);
  CHECK(weft::host::ActionFromName("DELETE") == WEFT_ACTION_DELETE);
  CHECK(weft::host::ActionFromName("create") == 0);
  CHECK(weft::host::ActionName(WEFT_ACTION_START) == "START");
  CHECK(weft::host::ActionName(WEFT_ACTION_START | WEFT_ACTION_STOP).empty());
}

TEST_CASE("loader: an undefined C++ symbol in a load error is demangled", "[host][loader]") {
  CHECK(weft::host::ReadableLoadError("/p/x.so: undefined symbol: _Z16forgotten_helperv") ==
        "/p/x.so: undefined symbol: forgotten_helper() (_Z16forgotten_helperv)");
  CHECK(weft::host::ReadableLoadError("/p/x.so: undefined symbol: _ZN3foo3barEi, version V1") ==
        "/p/x.so: undefined symbol: foo::bar(int) (_ZN3foo3barEi), version V1");
  // C symbols and anything that is not a mangled name stay as they are.
  CHECK(weft::host::ReadableLoadError("/p/x.so: undefined symbol: forgotten_helper") ==
        "/p/x.so: undefined symbol: forgotten_helper");
  CHECK(weft::host::ReadableLoadError("/p/x.so: undefined symbol: _Zgarbage") ==
        "/p/x.so: undefined symbol: _Zgarbage");
  CHECK(weft::host::ReadableLoadError("libfoo.so: cannot open shared object file") ==
        "libfoo.so: cannot open shared object file");
}
