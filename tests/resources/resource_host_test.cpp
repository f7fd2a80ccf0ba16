// weft-host's side of resources without a server: the config keys, reading a
// task's resource entries, and pruning the cache.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <utime.h>

#include <filesystem>

#include "support/temp_dir.hpp"
#include "weft/host/config.hpp"
#include "weft/host/resource_cache.hpp"

namespace {

namespace fs = std::filesystem;
using weft::host::ParseConfig;
using weft::host::ParseResourceRef;
using weft::host::ResourceCache;
using weft::testing::TempDir;
using weft::testing::WriteFile;
using json = nlohmann::json;

constexpr const char* kDigest = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

void Age(const fs::path& path, int seconds) {
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  utimbuf times{st.st_atime - seconds, st.st_mtime - seconds};
  REQUIRE(utime(path.c_str(), &times) == 0);
}

}  // namespace

TEST_CASE("host resources: state and resource directories default under the state dir", "[resources][host]") {
  auto config = ParseConfig("host_id = \"h7\"\nstate_dir = \"state\"\nresource_sync_ms = 250\n", "t.toml",
                            "/etc/weft", "/opt/weft/bin");
  REQUIRE(config.ok());
  CHECK(weft::host::StateDir(*config) == fs::path("/etc/weft/state"));
  CHECK(weft::host::ResourceCacheDir(*config) == fs::path("/etc/weft/state/resources"));
  CHECK(weft::host::ResourcePluginDir(*config) == fs::path("/etc/weft/state/plugins"));
  CHECK(config->resource_sync_ms == 250);
  // The worker gets the resolved cache directory.
  auto worker = weft::host::WorkerConfigFromJson(weft::host::WorkerConfigJson(*config));
  REQUIRE(worker.ok());
  CHECK(weft::host::ResourceCacheDir(*worker) == fs::path("/etc/weft/state/resources"));

  auto explicit_dirs = ParseConfig("resource_cache_dir = \"/var/cache/weft\"\nresource_plugin_dir = \"/srv/p\"\n",
                                   "t.toml", "/etc/weft", "/opt/weft/bin");
  REQUIRE(explicit_dirs.ok());
  CHECK(weft::host::ResourceCacheDir(*explicit_dirs) == fs::path("/var/cache/weft"));
  CHECK(weft::host::ResourcePluginDir(*explicit_dirs) == fs::path("/srv/p"));
  // Without state_dir the default still names the host, so hosts on one machine never share it.
  CHECK(weft::host::StateDir(*explicit_dirs).filename() == explicit_dirs->host_id);

  CHECK(!ParseConfig("state_dir = \"\"\n", "t.toml", "/etc", "/opt").ok());
  CHECK(!ParseConfig("resource_sync_ms = 1\n", "t.toml", "/etc", "/opt").ok());
  // A host that serves any tenant syncs the Lua plugins of tenant "default".
  CHECK(weft::host::SyncedTenants(*config) == std::vector<std::string>{"default"});
  auto tenants = ParseConfig("tenants = [\"acme\", \"globex\"]\n", "t.toml", "/etc", "/opt");
  REQUIRE(tenants.ok());
  CHECK(weft::host::SyncedTenants(*tenants) == std::vector<std::string>{"acme", "globex"});
}

TEST_CASE("host resources: a task's resource entry is read strictly", "[resources][host]") {
  json good = {{"type", "shell"}, {"name", "a.sh"}, {"version", 2}, {"digest", kDigest}, {"size", 3}};
  auto ref = ParseResourceRef(good, "acme", "resources[0]");
  REQUIRE(ref.ok());
  CHECK(ref->tenant == "acme");
  CHECK(ref->version == 2);
  CHECK(weft::host::Describe(*ref) == "shell/a.sh version 2");
  ResourceCache cache("/cache");
  // The place follows the content: the digest, then the file name.
  CHECK(cache.PathOf(*ref) == fs::path("/cache/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad/a.sh"));

  for (const char* key : {"type", "name", "version", "digest", "size"}) {
    json bad = good;
    bad.erase(key);
    INFO(key);
    CHECK(ParseResourceRef(bad, "acme", "resources[0]").status().code() == weft::Code::kInvalid);
  }
  json escape = good;
  escape["name"] = "../../etc/passwd";
  CHECK(!ParseResourceRef(escape, "acme", "resources[0]").ok());
  json weak = good;
  weak["digest"] = "md5:abc";
  CHECK(!ParseResourceRef(weak, "acme", "resources[0]").ok());
}

TEST_CASE("host resources: prune keeps active and recently used versions", "[resources][host]") {
  TempDir dir;
  const std::string old_hex(64, 'a'), kept_hex(64, 'b'), fresh_hex(64, 'c');
  for (const std::string& hex : {old_hex, kept_hex, fresh_hex}) WriteFile(dir / hex / "file", hex);
  Age(dir / old_hex, 3600);
  Age(dir / kept_hex, 3600);
  ResourceCache cache(dir.path());
  CHECK(cache.Prune({"sha256:" + kept_hex}, 60'000) == 1);
  CHECK(!fs::exists(dir / old_hex));
  CHECK(fs::exists(dir / kept_hex / "file"));   // active
  CHECK(fs::exists(dir / fresh_hex / "file"));  // used within the window
}
