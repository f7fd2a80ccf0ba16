// Real clusters on real nodes, end to end: the real weftd, weft-host and weft
// CLI; the local provider (an sshd per node on a 127.0.x.y of its own) and the
// shell automator; examples/catalog's `web` template with nginx, haproxy and
// redis from Debian (scripts/install-deps.sh installs them). Needs root.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "localnodes/cluster_env.hpp"
#include "localnodes/net.hpp"
#include "weft/localnode/local_node.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Accepts;
using weft::testing::ClusterEnv;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::HttpGet;
using weft::testing::kBuild;
using weft::testing::kHaproxyPort;
using weft::testing::kNginxPort;
using weft::testing::kRedisPort;
using weft::testing::NodeView;
using weft::testing::ReadFile;
using weft::testing::RedisPing;
using weft::testing::ServedBy;
using weft::testing::ServerIn;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;
using weft::testing::With;

namespace {

constexpr std::uint16_t kSshPort = weft::testing::kNodeSshPort;

// The web servers that answer through haproxy, over enough requests for round-robin to reach each.
std::set<std::string> ReachedThroughHaproxy(const std::string& haproxy, std::size_t backends) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < 4 * backends; ++i) {
    auto page = HttpGet(haproxy, kHaproxyPort, "/");
    if (page) seen.insert(ServedBy(*page));
  }
  return seen;
}

// Every service of the cluster answers on its own node's address, and only there.
void CheckServing(ClusterEnv& env, const std::string& name) {
  const std::vector<NodeView> nodes = env.Nodes(name);
  const auto nginx = With(nodes, "nginx");
  const auto haproxy = With(nodes, "haproxy");
  const auto redis = With(nodes, "redis");
  REQUIRE(nginx.size() >= 2);
  REQUIRE(haproxy.size() == 1);
  REQUIRE(redis.size() == 1);
  std::set<std::string> names;
  for (const NodeView& n : nginx) {
    INFO("nginx on " << n.id << " at " << n.address);
    auto page = HttpGet(n.address, kNginxPort, "/");
    REQUIRE(page.has_value());
    CHECK(ServedBy(*page) == n.hostname);
    names.insert(n.hostname);
  }
  // cantcoexist keeps nginx off the balancer's node; each binds only its own address.
  CHECK_FALSE(Accepts(haproxy[0].address, kNginxPort));
  CHECK_FALSE(Accepts(nginx[0].address, kHaproxyPort));
  // Round-robin over every web server. haproxy's health checks find a web
  // server that started after haproxy was reconfigured within a second or two.
  std::set<std::string> reached;
  CHECK(WaitFor(
      [&] {
        reached = ReachedThroughHaproxy(haproxy[0].address, nginx.size());
        return reached == names;
      },
      15s));
  CHECK(reached == names);
  CHECK(RedisPing(redis[0].address) == std::optional<std::string>("+PONG"));
}

// Nothing of `gone` is left: no process, directory, cgroup, address claim or listener.
void CheckNoLeftovers(const std::vector<NodeView>& gone, const std::vector<pid_t>& pids,
                      const std::vector<fs::path>& cgroups) {
  for (pid_t p : pids) {
    INFO("pid " << p);
    CHECK(WaitFor([&] { return !weft::localnode::ProcessAlive(p); }, 2s));
  }
  for (const fs::path& c : cgroups) CHECK_FALSE(fs::exists(c));
  for (const NodeView& n : gone) {
    INFO("node " << n.id << " at " << n.address << " in " << n.dir);
    CHECK_FALSE(fs::exists(n.dir));
    const fs::path claim = fs::path(weft::localnode::kDefaultClaimsDir) / n.address;
    CHECK(ReadFile(claim).find(n.dir.string()) == std::string::npos);
    for (std::uint16_t port : {kSshPort, kNginxPort, kHaproxyPort, kRedisPort}) {
      if (!Accepts(n.address, port)) continue;
      // Tests running beside this one make local nodes too: once the claim is
      // given up, one of them may take the address and listen on it. A node
      // claims its address before it starts anything, so a listener there is
      // ours only while no other node holds the claim.
      const std::string holder = ReadFile(claim);
      INFO("port " << port << " accepts; the address is claimed by '" << holder << "'");
      CHECK((!holder.empty() && holder.find(n.dir.string()) == std::string::npos));
    }
  }
}

// The processes and cgroups of nodes, before they are deleted.
void Footprint(const std::vector<NodeView>& nodes, std::vector<pid_t>* pids, std::vector<fs::path>* cgroups) {
  for (const NodeView& n : nodes) {
    const std::vector<pid_t> p = weft::localnode::NodeProcesses(n.dir);
    CHECK(p.size() >= 2);  // sshd and at least one service
    pids->insert(pids->end(), p.begin(), p.end());
    json j = json::parse(ReadFile(n.dir / "node.json"), nullptr, false);
    if (j.is_object() && !j.value("cgroup", "").empty()) cgroups->push_back(j.value("cgroup", ""));
  }
}

}  // namespace

TEST_CASE("localnodes: a web cluster on real nodes is created, serves, scales, stops, starts and leaves nothing",
          "[localnodes][cluster]") {
  ClusterEnv env({.tag = "localnodes"});
  env.ImportCatalog();

  // Create: 4 nodes, haproxy + redis + 2 nginx (each with its monitoring collector).
  env.MustWeft({"cluster", "create", "web", "--template", "web", "--size", "4", "--wait"});
  json c = env.Cluster("web");
  CHECK(c["status"] == "active");
  std::vector<NodeView> nodes = env.Nodes("web");
  REQUIRE(nodes.size() == 4);
  for (const NodeView& n : nodes) {
    INFO("node " << n.id);
    CHECK(n.address.rfind("127.0.", 0) == 0);
    CHECK(fs::is_directory(n.dir / "root"));
    if (n.services.count("nginx")) CHECK(n.services.count("monitoring"));  // mustcoexist
    CHECK_FALSE((n.services.count("nginx") && n.services.count("haproxy")));  // cantcoexist
  }
  CheckServing(env, "web");
  // The monitoring collector (a daemon that left its SSH session) reports beside each nginx.
  const std::string all_up = std::to_string(With(nodes, "nginx").size()) + " web servers up";
  for (const NodeView& n : With(nodes, "nginx")) {
    std::optional<std::string> status;
    const bool reported = WaitFor(
        [&] {
          status = HttpGet(n.address, kNginxPort, "/status.txt");
          return status && status->find(": PONG") != std::string::npos && status->find(all_up) != std::string::npos;
        },
        10s);
    INFO("status page of " << n.id << ": " << status.value_or("(none)"));
    CHECK(reported);
  }

  // Scale up: a third web server, and haproxy (reconfigured in place) reaches it.
  env.MustWeft({"cluster", "scale", "web", "--size", "5", "--wait"});
  std::vector<NodeView> grown = env.Nodes("web");
  REQUIRE(grown.size() == 5);
  CHECK(With(grown, "nginx").size() == With(nodes, "nginx").size() + 1);
  CheckServing(env, "web");

  // Scale down: the added node goes, with everything it ran.
  std::vector<NodeView> added;
  for (const NodeView& n : grown)
    if (std::none_of(nodes.begin(), nodes.end(), [&](const NodeView& o) { return o.id == n.id; })) added.push_back(n);
  REQUIRE(added.size() == 1);
  std::vector<pid_t> added_pids;
  std::vector<fs::path> added_cgroups;
  Footprint(added, &added_pids, &added_cgroups);
  env.MustWeft({"cluster", "scale", "web", "--size", "4", "--wait"});
  REQUIRE(env.Nodes("web").size() == 4);
  CheckNoLeftovers(added, added_pids, added_cgroups);
  CheckServing(env, "web");

  // Stop: nothing answers; start: everything answers again.
  nodes = env.Nodes("web");
  env.MustWeft({"cluster", "stop", "web", "--wait"});
  for (const NodeView& n : nodes) {
    INFO("stopped node " << n.id);
    CHECK(Accepts(n.address, kSshPort));  // the node itself stays up
    for (std::uint16_t port : {kNginxPort, kHaproxyPort, kRedisPort}) CHECK_FALSE(Accepts(n.address, port));
  }
  env.MustWeft({"cluster", "start", "web", "--wait"});
  CheckServing(env, "web");

  // Delete: no process, directory, cgroup, claim or listener of any node is left.
  std::vector<pid_t> pids;
  std::vector<fs::path> cgroups;
  Footprint(nodes, &pids, &cgroups);
  env.MustWeft({"cluster", "delete", "web", "--wait"});
  auto gone = env.server().TryCall("cluster.get", {{"cluster", "web"}});
  CHECK((!gone.ok() || (*gone)["cluster"]["status"] == "terminated"));
  CheckNoLeftovers(nodes, pids, cgroups);
  std::error_code ec;
  CHECK(fs::is_empty(env.nodes_dir(), ec));
}

namespace {

// A task as the job engine hands it out, for debug.enqueue: the shell
// automator on a node whose earlier results say how to reach it.
json ShellTask(const weft::localnode::Node& n, const json& host_keys, const json& fields) {
  return weft::testing::NodeTask(n, host_keys, "shell", "probe", fields, "INSTALL");
}

// A real node for the tasks below, stopped at the end.
struct OneNode {
  TempDir tmp{"weft-localnodes"};
  weft::testing::ProbeNode probe{tmp / "nodes"};
  const weft::localnode::Node& node = probe.node();
};

}  // namespace

TEST_CASE("localnodes: a node whose host key does not match is refused, and the host keeps serving",
          "[localnodes][ssh]") {
  OneNode one;
  TempDir dir("weft-localnodes");
  Weftd server(ServerIn(dir / "server"));
  Host host(HostIn(dir / "host", "h1", server.provisioner(), {kBuild / "plugins/automators"}));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));

  // A well-formed ed25519 key that is not the node's host key: its user key.
  const std::string& pub = one.node.public_key;
  const std::string wrong = pub.substr(0, pub.rfind(' '));
  REQUIRE(wrong != one.node.host_keys.at(0));
  const json marker = {{"command", "touch \"$WEFT_NODE_ROOT/ran\"; echo ran on $WEFT_BIND_V4"}};
  json refused = server.WaitTaskState(server.Enqueue(ShellTask(one.node, {wrong}, marker)), "failed", 60s);
  CHECK_THAT(refused["message"].get<std::string>(), Catch::Contains("host key mismatch"));
  CHECK_FALSE(fs::exists(one.node.root / "ran"));  // nothing ran on the node

  json ok = server.WaitTaskState(server.Enqueue(ShellTask(one.node, one.node.host_keys, marker)), "succeeded", 60s);
  CHECK_THAT(ok["stdout"].get<std::string>(), Catch::Contains("ran on " + one.node.address));
  CHECK(fs::exists(one.node.root / "ran"));
  CHECK(server.HostLive("h1"));
  CHECK(host.process().running());
}

TEST_CASE("localnodes: a command past its timeout_ms fails the task, and the host keeps serving", "[localnodes][ssh]") {
  OneNode one;
  TempDir dir("weft-localnodes");
  Weftd server(ServerIn(dir / "server"));
  Host host(HostIn(dir / "host", "h1", server.provisioner(), {kBuild / "plugins/automators"}));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));

  const auto start = std::chrono::steady_clock::now();
  const std::int64_t slow_id =
      server.Enqueue(ShellTask(one.node, one.node.host_keys, {{"command", "sleep 30"}, {"timeout_ms", 1500}}));
  json slow = server.WaitTaskState(slow_id, "failed", 60s);
  CHECK(std::chrono::steady_clock::now() - start < 20s);
  CHECK_THAT(slow["message"].get<std::string>(), Catch::Contains("timed out after 1500 ms"));

  json ok = server.WaitTaskState(
      server.Enqueue(ShellTask(one.node, one.node.host_keys, {{"command", "echo still here"}})), "succeeded", 60s);
  CHECK_THAT(ok["stdout"].get<std::string>(), Catch::Contains("still here"));
  CHECK(server.HostLive("h1"));
  CHECK(host.process().running());

  // libssh2 cannot signal the command, so its `sleep` runs on until the node
  // is stopped, and its work directory stays: on the node's own disk, not in
  // the machine's /tmp, so it goes with the node.
  const std::string work = "weft-task-" + std::to_string(slow_id) + "-";
  auto work_dirs_in = [&](const fs::path& dir) {
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(work, 0) == 0) ++n;
    return n;
  };
  CHECK(work_dirs_in(one.node.root / "tmp") == 1);
  CHECK(work_dirs_in("/tmp") == 0);
  const std::vector<pid_t> left = weft::localnode::NodeProcesses(one.node.dir);
  REQUIRE(weft::localnode::StopNode(one.node.dir).ok());
  for (pid_t p : left) CHECK(WaitFor([&] { return !weft::localnode::ProcessAlive(p); }, 2s));
  CHECK_FALSE(fs::exists(one.node.dir));
}
