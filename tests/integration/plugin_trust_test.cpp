// weft-host loads plugin code as its own user (root, for the local provider):
// a plugin file where anyone else could have changed it, the file itself or
// a directory above it, along its path or the path it links to, is refused
// with why, and not even probed. Needs root to give files to other users;
// without it the case exits 77, which ctest shows as skipped.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/forked_daemon.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::kBuild;
using weft::testing::ServerIn;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

constexpr uid_t kNobody = 65534;  // nobody and nogroup on Debian

fs::path Copy(const fs::path& from, const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(from, dir / from.filename(), fs::copy_options::overwrite_existing);
  return dir / from.filename();
}

// The refused files of plugin.list, by file.
std::map<std::string, std::string> Refused(Weftd& server) {
  std::map<std::string, std::string> out;
  const json list = server.Call("plugin.list", json::object());
  for (const json& r : list["refused"])
    out[r["file"].get<std::string>()] = r["reason"].get<std::string>();
  return out;
}

bool Listed(Weftd& server, const std::string& type) {
  const json list = server.Call("plugin.list", json::object());
  for (const json& p : list["plugins"])
    if (p["type"] == type) return true;
  return false;
}


}  // namespace

TEST_CASE("plugin trust: a plugin file others than root could change is neither probed nor loaded",
          "[integration][host][root]") {
  if (geteuid() != 0) {
    std::cout << "SKIPPED: this test gives files to the user nobody, which needs root (CI runs it as root)"
              << std::endl;
    std::exit(77);
  }
  TempDir tmp("weft-trust");  // in /tmp, which is sticky: its entries only their owner may replace
  const fs::path automators = kBuild / "plugins/automators", providers = kBuild / "plugins/providers";

  // Root's own directory and file: loaded.
  const fs::path safe = tmp / "safe";
  Copy(automators / "fake_automator.so", safe);
  // A file of nobody's in root's directory.
  const fs::path foreign_file = Copy(kBuild / "plugins/fixtures/fixture_good.so", safe);
  REQUIRE(chown(foreign_file.c_str(), kNobody, kNobody) == 0);
  // Root's file in nobody's directory.
  const fs::path foreign_dir = tmp / "foreign";
  const fs::path in_foreign = Copy(providers / "fake_provider.so", foreign_dir);
  REQUIRE(chown(foreign_dir.c_str(), kNobody, kNobody) == 0);
  // A directory group nogroup may write to.
  const fs::path group_dir = tmp / "group";
  const fs::path in_group = Copy(providers / "fake_provider.so", group_dir);
  REQUIRE(chown(group_dir.c_str(), 0, kNobody) == 0);
  REQUIRE(chmod(group_dir.c_str(), 0775) == 0);
  // A directory every user may write to, not sticky, and a link to its file from root's directory.
  // Its plugin starts a daemon and writes its pid when it loads: a probe would leave that trace.
  const fs::path world_dir = tmp / "world";
  const fs::path in_world = Copy(kBuild / "plugins/probe_forks/probe_forks.so", world_dir);
  REQUIRE(chmod(world_dir.c_str(), 0777) == 0);
  const fs::path link = safe / "linked.so";
  fs::create_symlink(in_world, link);
  weft::testing::ForkedDaemon daemon(tmp / "daemon.pid");
  REQUIRE(setenv("WEFT_TEST_FORK_PIDFILE", daemon.pidfile().c_str(), 1) == 0);

  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {safe, foreign_dir, group_dir, world_dir}));
  unsetenv("WEFT_TEST_FORK_PIDFILE");
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 15s));

  CHECK(Listed(server, "fake-automator"));
  CHECK_FALSE(Listed(server, "fixture-good"));
  CHECK_FALSE(Listed(server, "fake-provider"));
  CHECK_FALSE(Listed(server, "probe-forks"));
  std::map<std::string, std::string> refused = Refused(server);
  const std::string prefix =
      "not loaded: weft-host runs as root and loads plugin code only from files and directories that only root can "
      "change, but ";
  CHECK(refused[foreign_file.string()] == prefix + foreign_file.string() + " is owned by nobody (uid 65534); chown root " +
                                              foreign_file.string() + " once you have checked it");
  CHECK(refused[in_foreign.string()] == prefix + foreign_dir.string() + " is owned by nobody (uid 65534); chown root " +
                                            foreign_dir.string() + " once you have checked it");
  CHECK(refused[in_group.string()] ==
        prefix + group_dir.string() + " is writable by group nogroup (gid 65534); chmod g-w " + group_dir.string());
  const std::string world = prefix + world_dir.string() + " is writable by every user; chmod o-w " + world_dir.string();
  CHECK(refused[in_world.string()] == world);
  CHECK(refused[link.string()] == world);  // by the path it resolves to
  CHECK_THAT(host.Log(), Catch::Contains("refused plugin " + in_world.string() + ": " + world));
  // Neither the file nor its link was probed: nothing loaded it.
  CHECK_FALSE(fs::exists(daemon.pidfile()));

  // Made safe, the directory is scanned again at once (its own change of mode is watched), and its file
  // loaded. The link loads it too, a second file of the same type: refused as a duplicate, not as unsafe.
  REQUIRE(chmod(world_dir.c_str(), 0755) == 0);
  CHECK(WaitFor([&] { return Listed(server, "probe-forks"); }, 15s));
  CHECK(fs::exists(daemon.pidfile()));
  refused = Refused(server);
  CHECK(refused.count(in_world.string()) + refused.count(link.string()) == 1);
  for (const auto& [file, reason] : refused)
    if (file == in_world.string() || file == link.string()) CHECK_THAT(reason, Catch::Contains("duplicate type name"));
}
