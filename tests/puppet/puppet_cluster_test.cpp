// The puppet automator on real nodes, end to end: the real weftd, weft-host and
// weft CLI; the local provider (an sshd per node on a 127.0.x.y of its own);
// examples/catalog's `web-puppet` template, whose nginx and redis Puppet
// installs, configures and starts from the modules of examples/puppet, uploaded
// as a `puppet` resource. Needs root and puppet (scripts/install-deps.sh);
// without puppet the case says so and exits 77, which ctest shows as skipped.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "localnodes/net.hpp"
#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/localnode/local_node.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::HttpGet;
using weft::testing::kBuild;
using weft::testing::RedisPing;
using weft::testing::ServerIn;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

namespace {

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
constexpr std::uint16_t kSshPort = 2022;  // as tests/localnodes: a system sshd on port 22 cannot interfere
constexpr std::uint16_t kNginxPort = 8080;
constexpr std::uint16_t kHaproxyPort = 8000;
const fs::path kSource = WEFT_SOURCE_DIR;
const std::string kModules = "web-modules.tar.gz";  // the resource examples/catalog's puppet services name
const std::string kBroken = "broken-modules.tar.gz";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The nodes run puppet from this machine; without it there is nothing to test.
void PuppetOrSkip() {
  if (weft::testing::Run("/bin/sh", {"-c", "command -v puppet"}).exit_code == 0) return;
  std::printf("SKIPPED: puppet is not installed on this machine (scripts/install-deps.sh installs it)\n");
  std::fflush(stdout);
  std::exit(kSkipped);
}

void RequirePackages() {
  for (const char* tool : {"/usr/sbin/nginx", "/usr/sbin/haproxy", "/usr/bin/redis-server", "/usr/bin/redis-cli",
                           "/usr/sbin/sshd", "/usr/bin/curl"}) {
    INFO(tool << " is missing: run scripts/install-deps.sh");
    REQUIRE(fs::exists(tool));
  }
}

// A tar.gz of the module tree in `modules` (its top-level directories are modules).
fs::path Archive(const fs::path& modules, const fs::path& out) {
  auto r = weft::testing::Run("/bin/tar", {"-czf", out.string(), "-C", modules.string(), "."});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return out;
}

// A node of the cluster as `cluster.get` shows it.
struct NodeView {
  std::string hostname;
  std::string address;
  std::set<std::string> services;
};

std::string ServedBy(const std::string& page) {
  const std::string open = "<h1>served by ", close = "</h1>";
  auto a = page.find(open);
  if (a == std::string::npos) return {};
  auto b = page.find(close, a);
  return b == std::string::npos ? std::string() : page.substr(a + open.size(), b - a - open.size());
}

// weftd + one weft-host with every built plugin, and the example catalog with
// its local provider pointed at this test's directories.
class Env {
 public:
  Env() : tmp_("weft-puppet") {
    RequirePackages();
    // nginx's workers (www-data) read the pages under the nodes' directories.
    REQUIRE(::chmod(tmp_.path().c_str(), 0711) == 0);
    server_ = std::make_unique<Weftd>(ServerIn(tmp_ / "server"));
    host_ = std::make_unique<Host>(HostIn(tmp_ / "host", "h1", server_->provisioner(),
                                          {kBuild / "plugins/providers", kBuild / "plugins/automators"},
                                          /*capacity=*/6));
    REQUIRE(WaitFor([&] { return server_->HostLive("h1"); }, 20s));
  }

  Weftd& server() { return *server_; }
  const TempDir& tmp() const { return tmp_; }
  fs::path nodes_dir() const { return tmp_ / "nodes"; }

  // Runs a weft command that must succeed (a `--wait` one follows its job to the end).
  void MustWeft(std::vector<std::string> args) {
    std::string line;
    for (const auto& a : args) line += " " + a;
    args.insert(args.begin(), {"--server", server_->api()});
    auto r = weft::testing::Run(kBuild / "bin/weft", args, 300s);
    INFO("weft" << line << "\nexit " << r.exit_code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    if (r.exit_code != 0) INFO(Failures());
    REQUIRE(r.exit_code == 0);
  }

  void ImportCatalog() {
    MustWeft({"catalog", "import", (kSource / "examples/catalog").string()});
    json local = json::parse(Slurp(kSource / "examples/catalog/providers/local.json"));
    local["provisioner"]["state_dir"] = nodes_dir().string();
    local["provisioner"]["ssh_port"] = kSshPort;
    server_->Call("provider.put", local);
  }

  // Uploads `file` as the active version of the puppet resource `name`.
  void UploadModules(const std::string& name, const fs::path& file) {
    MustWeft({"resource", "upload", "puppet", name, file.string()});
    MustWeft({"resource", "stage", "puppet", name, "1"});
  }

  std::vector<NodeView> Nodes(const std::string& cluster) {
    std::vector<NodeView> out;
    const json reply = server_->Call("cluster.get", {{"cluster", cluster}});
    for (const json& n : reply["cluster"]["nodes"]) {
      const json r = n.value("results", json::object());
      NodeView v{r.value("hostname", ""), r.value("access_v4", ""), {}};
      for (const json& s : n["services"]) v.services.insert(s.get<std::string>());
      out.push_back(v);
    }
    return out;
  }

  // Every failed task of the last jobs with its output, and the logs, for a failing REQUIRE.
  std::string Failures() {
    std::string out;
    if (auto jobs = server_->TryCall("job.list", {{"limit", 5}}); jobs.ok()) {
      for (const json& j : (*jobs)["jobs"]) {
        auto d = server_->TryCall("job.get", {{"job", j["id"]}, {"details", true}});
        if (!d.ok()) continue;
        for (const json& t : (*d)["job"].value("tasks", json::array()))
          if (t.value("state", "") == "failed") out += "task " + t.dump() + "\n";
      }
    }
    return out + "---- weftd\n" + server_->Log() + "\n---- weft-host\n" + host_->Log();
  }

 private:
  TempDir tmp_;
  std::unique_ptr<Weftd> server_;
  std::unique_ptr<Host> host_;
};

// A raw puppet task on `n`, as the job engine hands one out, for debug.enqueue.
json PuppetTask(const weft::localnode::Node& n, const std::string& service, const json& fields) {
  const json results = {{"provider_id", n.id},
                        {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
                        {"access_v4", n.address},
                        {"bind_v4", n.address},
                        {"ssh_port", n.port},
                        {"hostname", n.name},
                        {"host_keys", n.host_keys}};
  return {{"plugin", "puppet"},
          {"action", "CONFIGURE"},
          {"cluster_id", "c1"},
          {"node_id", n.name},
          {"job_id", "job-c1"},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", n.name},
            {"node", {{"id", n.name}, {"hostname", n.name}, {"results", results}}},
            {"results", results},
            {"service", {{"name", service}, {"action", {{"type", "puppet"}, {"fields", fields}}}}}}}};
}

// A node of its own for a raw task, stopped however the case ends.
class ProbeNode {
 public:
  explicit ProbeNode(const fs::path& state_dir) {
    weft::localnode::NodeOptions o;
    o.state_dir = state_dir;
    o.name = "probe";
    o.port = kSshPort;
    auto n = weft::localnode::StartNode(o);
    INFO(n.status().ToString());
    REQUIRE(n.ok());
    node_ = *n;
  }
  ~ProbeNode() { (void)weft::localnode::StopNode(node_.dir); }
  ProbeNode(const ProbeNode&) = delete;
  ProbeNode& operator=(const ProbeNode&) = delete;
  const weft::localnode::Node& node() const { return node_; }

 private:
  weft::localnode::Node node_;
};

}  // namespace

TEST_CASE("puppet: Puppet builds the web-puppet cluster on real nodes, and a failing manifest fails its task with "
          "Puppet's error",
          "[puppet][localnodes]") {
  PuppetOrSkip();
  Env env;
  env.ImportCatalog();

  // The example modules, and a module whose only resource cannot be applied.
  const fs::path broken = env.tmp() / "broken" / "weft_broken" / "manifests";
  fs::create_directories(broken);
  std::ofstream(broken / "init.pp") << "class weft_broken {\n"
                                       "  file { '/nonexistent-weft-dir/x': ensure => file, content => 'x' }\n"
                                       "}\n";
  env.UploadModules(kModules, Archive(kSource / "examples/puppet/modules", env.tmp() / kModules));
  env.UploadModules(kBroken, Archive(env.tmp() / "broken", env.tmp() / kBroken));
  env.MustWeft({"resource", "sync"});

  // The failing manifest runs on a node of its own while the cluster is made.
  ProbeNode probe(env.tmp() / "probe-nodes");
  const std::int64_t failing =
      env.server().Enqueue(PuppetTask(probe.node(), "broken", {{"modules", kBroken}, {"class", "weft_broken"}}));
  const std::int64_t missing =
      env.server().Enqueue(PuppetTask(probe.node(), "missing", {{"modules", kBroken}, {"class", "weft_missing"}}));

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
