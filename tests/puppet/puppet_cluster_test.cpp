// The puppet automator on real nodes, end to end: the real weftd, weft-host and
// weft CLI; the local provider (an sshd per node on a 127.0.x.y of its own);
// examples/catalog's `web-puppet` template, whose nginx and redis Puppet
// installs, configures and starts from the modules of examples/puppet, uploaded
// as a `puppet` resource. Needs root and puppet (scripts/install-deps.sh);
// without puppet the case says so and exits 77, which ctest shows as skipped.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "localnodes/cluster_env.hpp"
#include "localnodes/net.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::ClusterEnv;
using weft::testing::HttpGet;
using weft::testing::kHaproxyPort;
using weft::testing::kNginxPort;
using weft::testing::NodeTask;
using weft::testing::NodeView;
using weft::testing::ProbeNode;
using weft::testing::RedisPing;
using weft::testing::ServedBy;
using weft::testing::WaitFor;

namespace {

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
constexpr std::uint16_t kSshPort = weft::testing::kNodeSshPort;
const fs::path kSource = WEFT_SOURCE_DIR;
const std::string kModules = "web-modules.tar.gz";  // the resource examples/catalog's puppet services name
const std::string kBroken = "broken-modules.tar.gz";

// The nodes run puppet from this machine; without it there is nothing to test.
void PuppetOrSkip() {
  if (weft::testing::Run("/bin/sh", {"-c", "command -v puppet"}).exit_code == 0) return;
  std::printf("SKIPPED: puppet is not installed on this machine (scripts/install-deps.sh installs it)\n");
  std::fflush(stdout);
  std::exit(kSkipped);
}

// A tar.gz of the module tree in `modules` (its top-level directories are modules).
fs::path Archive(const fs::path& modules, const fs::path& out) {
  auto r = weft::testing::Run("/bin/tar", {"-czf", out.string(), "-C", modules.string(), "."});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return out;
}

}  // namespace

TEST_CASE("puppet: Puppet builds the web-puppet cluster on real nodes, and a failing manifest fails its task with "
          "Puppet's error",
          "[puppet][localnodes]") {
  PuppetOrSkip();
  ClusterEnv env({.tag = "puppet"});
  env.ImportCatalog();

  // The example modules, and a module whose only resource cannot be applied.
  const fs::path broken = env.dir() / "broken" / "weft_broken" / "manifests";
  fs::create_directories(broken);
  std::ofstream(broken / "init.pp") << "class weft_broken {\n"
                                       "  file { '/nonexistent-weft-dir/x': ensure => file, content => 'x' }\n"
                                       "}\n";
  env.UploadResource("puppet", kModules, Archive(kSource / "examples/puppet/modules", env.dir() / kModules));
  env.UploadResource("puppet", kBroken, Archive(env.dir() / "broken", env.dir() / kBroken));

  // The failing manifest runs on a node of its own while the cluster is made.
  ProbeNode probe(env.dir() / "probe-nodes");
  const std::int64_t failing =
      env.server().Enqueue(NodeTask(probe.node(), probe.node().host_keys, "puppet", "broken", {{"modules", kBroken}, {"class", "weft_broken"}}));
  const std::int64_t missing =
      env.server().Enqueue(NodeTask(probe.node(), probe.node().host_keys, "puppet", "missing", {{"modules", kBroken}, {"class", "weft_missing"}}));

  // 3 nodes: haproxy (shell) on one, nginx on two, redis beside one of them.
  env.MustWeft({"cluster", "create", "web", "--template", "web-puppet", "--size", "3", "--wait"});
  const std::vector<NodeView> nodes = env.Nodes("web");
  REQUIRE(nodes.size() == 3);
  std::set<std::string> web_servers;
  std::string haproxy, redis;
  for (const NodeView& n : nodes) {
    if (n.services.count("nginx-puppet")) {
      INFO("nginx-puppet on " << n.hostname << " at " << n.address);
      auto page = HttpGet(n.address, kNginxPort, "/");
      REQUIRE(page.has_value());
      CHECK_THAT(*page, Catch::Contains("configured by Puppet"));  // written by weft_nginx's template
      CHECK(ServedBy(*page) == n.hostname);
      web_servers.insert(n.hostname);
    }
    if (n.services.count("haproxy-puppet")) haproxy = n.address;
    if (n.services.count("redis-puppet")) redis = n.address;
  }
  REQUIRE(web_servers.size() == 2);
  REQUIRE_FALSE(haproxy.empty());
  // Round-robin reaches every web server (haproxy's health checks find one that
  // started after it was configured within a second or two).
  std::set<std::string> reached;
  CHECK(WaitFor(
      [&] {
        for (std::size_t i = 0; i < 8; ++i)
          if (auto page = HttpGet(haproxy, kHaproxyPort, "/")) reached.insert(ServedBy(*page));
        return reached == web_servers;
      },
      15s));
  CHECK(reached == web_servers);
  CHECK(RedisPing(redis) == std::optional<std::string>("+PONG"));

  // Puppet's own error, with its resource and reason, is the task's message.
  const json failed = env.server().WaitTaskState(failing, "failed", 120s);
  const std::string message = failed.value("message", "");
  INFO("message: " << message);
  CHECK_THAT(message, Catch::Contains("puppet apply exited with 4 (some resources failed)"));
  CHECK_THAT(message, Catch::Contains("Error: /Stage[main]/Weft_broken/File[/nonexistent-weft-dir/x]"));
  CHECK_FALSE(fs::exists("/nonexistent-weft-dir"));
  // The agent was looked for first (and found: this machine has it).
  CHECK_THAT(failed.value("stdout", ""), Catch::Contains("is on the node"));
  // A class the modules lack fails the compile: exit code 1, with Puppet's reason.
  const std::string compile = env.server().WaitTaskState(missing, "failed", 120s).value("message", "");
  INFO("message: " << compile);
  CHECK_THAT(compile, Catch::Contains("puppet apply exited with 1 (the run failed"));
  CHECK_THAT(compile, Catch::Contains("Could not find class ::weft_missing"));

  // Delete: Puppet stops and removes its services, then the nodes go.
  env.MustWeft({"cluster", "delete", "web", "--wait"});
  for (const NodeView& n : nodes) {
    INFO("node " << n.hostname << " at " << n.address);
    CHECK_FALSE(weft::testing::Accepts(n.address, kNginxPort));
    CHECK_FALSE(weft::testing::Accepts(n.address, kSshPort));
  }
  std::error_code ec;
  CHECK(fs::is_empty(env.nodes_dir(), ec));
}
