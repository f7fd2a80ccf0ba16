#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"
#include "weft/host/config.hpp"

using weft::host::HostConfig;
using weft::host::ParseConfig;

namespace {
const std::filesystem::path kExeDir = "/opt/weft/bin";
const std::filesystem::path kBase = "/etc/weft";
}  // namespace

TEST_CASE("host config: an empty file gives every default", "[host][config]") {
  auto c = ParseConfig("", "weft-host.toml", kBase, kExeDir);
  REQUIRE(c.ok());
  CHECK(c->server == "tcp://127.0.0.1:7421");
  CHECK_FALSE(c->host_id.empty());
  CHECK(c->capacity == 4);
  CHECK(c->take_wait_ms == 5000);
  CHECK(c->request_timeout_ms == 5000);
  CHECK(c->shutdown_grace_ms == 10000);
  CHECK(c->log_level == "info");
  CHECK(c->lua.memory_mb == 64);
  CHECK(c->lua.instructions == 2'000'000'000);
  REQUIRE(c->plugin_dirs.size() == 2);
  CHECK(c->plugin_dirs[0] == std::filesystem::path("/opt/weft/plugins/providers"));
  CHECK(c->plugin_dirs[1] == std::filesystem::path("/opt/weft/plugins/automators"));
}

TEST_CASE("host config: every key is read, relative plugin dirs are relative to the file", "[host][config]") {
  auto c = ParseConfig(R"(
server = "tcp://10.0.0.1:9000"
host_id = "h-1.example"
capacity = 16
plugin_dirs = ["/abs/p", "rel/q"]
take_wait_ms = 1000
request_timeout_ms = 2000
task_timeout_ms = 60000
shutdown_grace_ms = 0
log_level = "debug"
lua_memory_mb = 256
lua_instructions = 50000000000
)",
                       "weft-host.toml", kBase, kExeDir);
  REQUIRE(c.ok());
  CHECK(c->server == "tcp://10.0.0.1:9000");
  CHECK(c->host_id == "h-1.example");
  CHECK(c->capacity == 16);
  CHECK(c->plugin_dirs == std::vector<std::filesystem::path>{"/abs/p", "/etc/weft/rel/q"});
  CHECK(c->take_wait_ms == 1000);
  CHECK(c->request_timeout_ms == 2000);
  CHECK(c->task_timeout_ms == 60000);
  CHECK(c->shutdown_grace_ms == 0);
  CHECK(c->log_level == "debug");
  CHECK(c->lua.memory_mb == 256);
  CHECK(c->lua.instructions == 50'000'000'000);
  // What a worker is told: the same budget.
  auto worker = weft::host::WorkerConfigFromJson(weft::host::WorkerConfigJson(*c));
  REQUIRE(worker.ok());
  CHECK(worker->lua.memory_mb == 256);
  CHECK(worker->lua.instructions == 50'000'000'000);
}

TEST_CASE("host config: an unknown key is an error that names it", "[host][config]") {
  auto c = ParseConfig("capacty = 3\n", "weft-host.toml", kBase, kExeDir);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == weft::Code::kInvalid);
  CHECK_THAT(c.status().message(), Catch::Contains("unknown key 'capacty'") && Catch::Contains("weft-host.toml"));
}

TEST_CASE("host config: wrong types and ranges name the key", "[host][config]") {
  auto a = ParseConfig("capacity = \"four\"\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.status().message(), Catch::Contains("'capacity' must be an integer from 1 to 4096"));
  auto b = ParseConfig("capacity = 0\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.status().message(), Catch::Contains("'capacity'") && Catch::Contains("got 0"));
  auto d = ParseConfig("plugin_dirs = \"/x\"\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Catch::Contains("'plugin_dirs' must be an array"));
  auto e = ParseConfig("host_id = \"bad id!\"\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.status().message(), Catch::Contains("host_id"));
  auto f = ParseConfig("log_level = \"loud\"\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.status().message(), Catch::Contains("log_level"));
  auto g = ParseConfig("lua_memory_mb = 0\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(g.status().message(), Catch::Contains("'lua_memory_mb' must be an integer from 1 to 4096, got 0"));
  auto i = ParseConfig("lua_instructions = 1000\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(i.ok());
  CHECK_THAT(i.status().message(),
             Catch::Contains("'lua_instructions' must be an integer from 1000000 to 1000000000000, got 1000"));
}

TEST_CASE("host config: a TOML syntax error says where", "[host][config]") {
  auto c = ParseConfig("capacity = = 3\n", "h.toml", kBase, kExeDir);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.status().message(), Catch::StartsWith("h.toml:1:"));
}

TEST_CASE("host config: a missing file is a clear error", "[host][config]") {
  weft::testing::TempDir dir;
  auto c = weft::host::LoadConfigFile(dir / "nope.toml", kExeDir);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.status().message(), Catch::Contains("nope.toml"));
  weft::testing::WriteFile(dir / "h.toml", "capacity = 2\nplugin_dirs = [\"p\"]\n");
  auto ok = weft::host::LoadConfigFile(dir / "h.toml", kExeDir);
  REQUIRE(ok.ok());
  CHECK(ok->capacity == 2);
  CHECK(ok->plugin_dirs == std::vector<std::filesystem::path>{dir.path() / "p"});
}
