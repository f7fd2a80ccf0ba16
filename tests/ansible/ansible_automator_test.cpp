// The ansible automator end to end, on real nodes: the real weftd, weft-host
// and weft CLI, the local provider (an sshd per node on a 127.0.x.y of its
// own) and ansible-playbook. examples/catalog's `web-ansible` template has its
// nginx and redis installed and configured by the playbooks of
// examples/ansible/, uploaded as an `ansible` resource. Needs root.
//
// Without ansible-playbook every case says so in one line and exits 77, which
// ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
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
using weft::testing::ClusterEnvOptions;
using weft::testing::HttpGet;
using weft::testing::kHaproxyPort;
using weft::testing::kNginxPort;
using weft::testing::NodeTask;
using weft::testing::ProbeNode;
using weft::testing::RedisPing;
using weft::testing::ServedBy;
using weft::testing::WaitFor;

namespace {

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
constexpr std::uint16_t kSshPort = weft::testing::kNodeSshPort;
const fs::path kSource = WEFT_SOURCE_DIR;

void RequireAnsibleOrSkip() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    if (::access((fs::path(dirs.substr(start, end - start)) / "ansible-playbook").c_str(), X_OK) == 0) return;
    start = end + 1;
  }
  std::cout << "SKIPPED: ansible-playbook is not on PATH, so the ansible automator cannot run a playbook; "
               "install Ansible (scripts/install-deps.sh, or apt-get install ansible-core) to run this test"
            << std::endl;
  std::exit(kSkipped);
}

// weftd + one weft-host with every built plugin; the host's temporary files
// (the ansible automator's private directories) go to env.host_tmp().
// ansible-playbook runs keep the machine's cores busy: weft-host's own request
// timeout (not the tests' 1 s), so that a slow reply is not given up and the
// call retried on a fresh socket, where weftd's reply cannot arrive.
ClusterEnvOptions AnsibleEnv() {
  RequireAnsibleOrSkip();
  return {.tag = "ansible", .host_tmp = true, .request_timeout_ms = 5000};
}

bool IsEmptyDir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_empty(dir, ec) && !ec;
}

// The processes whose command line names `path` (an ssh master would name its control socket there).
std::vector<std::string> ProcessesNaming(const fs::path& path) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    std::string cmdline = weft::testing::ReadFile(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(path.string()) != std::string::npos)
      found.push_back(e.path().filename().string() + ": " + cmdline);
  }
  return found;
}

// A raw task for the ansible automator on a node whose results say how to reach it.
json AnsibleTask(const weft::localnode::Node& n, const json& host_keys, const json& fields,
                 const std::string& action = "CONFIGURE") {
  return NodeTask(n, host_keys, "ansible", "probe", fields, action);
}

}  // namespace

TEST_CASE("ansible: a web cluster whose nginx and redis Ansible sets up serves through haproxy, and stops",
          "[ansible][localnodes]") {
  ClusterEnv env(AnsibleEnv());
  env.ImportCatalog();
  // The playbooks and roles of examples/ansible/ as one archive resource, as its README says.
  const fs::path archive = env.dir() / "web-ansible.tar.gz";
  auto tar = weft::testing::Run("/bin/tar", {"-czf", archive.string(), "-C", (kSource / "examples/ansible").string(),
                                             "--exclude", "README.md", "."});
  REQUIRE(tar.exit_code == 0);
  env.UploadResource("ansible", "web-ansible.tar.gz", archive);

  env.MustWeft({"cluster", "create", "web", "--template", "web-ansible", "--size", "3", "--wait"});
  const json cluster = env.server().Call("cluster.get", {{"cluster", "web"}})["cluster"];
  CHECK(cluster["status"] == "active");
  std::set<std::string> nginx_names;
  std::vector<std::string> nginx, haproxy, redis;
  for (const json& n : cluster["nodes"]) {
    const json r = n.value("results", json::object());
    const std::string address = r.value("access_v4", "");
    for (const json& s : n["services"]) {
      if (s == "nginx-ansible") {
        nginx.push_back(address);
        nginx_names.insert(r.value("hostname", ""));
      }
      if (s == "haproxy-ansible") haproxy.push_back(address);
      if (s == "redis-ansible") redis.push_back(address);
    }
  }
  REQUIRE(nginx.size() == 2);
  REQUIRE(haproxy.size() == 1);
  REQUIRE(redis.size() == 1);
  // Each nginx serves its own page, made from the role's template.
  for (const std::string& address : nginx) {
    auto page = HttpGet(address, kNginxPort, "/");
    INFO("nginx at " << address);
    REQUIRE(page.has_value());
    CHECK(nginx_names.count(ServedBy(*page)) == 1);
    CHECK_THAT(*page, Catch::Contains("configured by Ansible") && Catch::Contains(redis[0] + ":6379"));
  }
  // haproxy spreads requests over every nginx (its health checks find a
  // backend that started after it within a second or two).
  std::set<std::string> reached;
  CHECK(WaitFor(
      [&] {
        for (int i = 0; i < 8; ++i)
          if (auto page = HttpGet(haproxy[0], kHaproxyPort, "/")) reached.insert(ServedBy(*page));
        return reached == nginx_names;
      },
      15s));
  CHECK(reached == nginx_names);
  CHECK(RedisPing(redis[0]) == std::optional<std::string>("+PONG"));
  // Every run's private directory (with the node's key) is gone, and no ssh master is left.
  CHECK(IsEmptyDir(env.host_tmp()));
  CHECK(ProcessesNaming(env.host_tmp()) == std::vector<std::string>{});

  // Stop: each STOP playbook ends its server; the nodes stay up.
  env.MustWeft({"cluster", "stop", "web", "--wait"});
  for (const std::string& address : nginx) CHECK_FALSE(weft::testing::Accepts(address, kNginxPort));
  CHECK_FALSE(weft::testing::Accepts(redis[0], 6379));
  CHECK(weft::testing::Accepts(redis[0], kSshPort));

  env.MustWeft({"cluster", "delete", "web", "--wait"});
  CHECK(IsEmptyDir(env.nodes_dir()));
}

TEST_CASE("ansible: a failing playbook fails its task with Ansible's own error, and a wrong host key is refused",
          "[ansible][localnodes]") {
  ClusterEnv env(AnsibleEnv());
  const ProbeNode probe(env.nodes_dir());
  const weft::localnode::Node& node = probe.node();

  const fs::path playbook = env.dir() / "broken.yml";
  std::ofstream(playbook) << "- hosts: all\n  gather_facts: false\n  tasks:\n"
                             "    - name: the node is marked\n"
                             "      ansible.builtin.command: touch "
                          << node.root.string()
                          << "/ran\n"
                             "    - name: read a file that is not there\n"
                             "      ansible.builtin.command: cat /nonexistent/weft-ansible-test\n";
  env.UploadResource("ansible", "broken.yml", playbook);
  const json fields = {{"playbook", "broken.yml"}};

  const json failed =
      env.server().WaitTaskState(env.server().Enqueue(AnsibleTask(node, node.host_keys, fields)), "failed", 120s);
  INFO(failed.dump(2) << "\n" << env.Logs());
  const std::string message = failed["message"].get<std::string>();
  CHECK_THAT(message, Catch::Contains("node probe: Ansible task 'read a file that is not there' failed: "));
  CHECK_THAT(message, Catch::Contains("non-zero return code"));  // Ansible's msg
  CHECK_THAT(message, Catch::Contains("cat: /nonexistent/weft-ansible-test: No such file or directory"));
  CHECK_THAT(failed["stderr"].get<std::string>(), Catch::Contains("failed: read a file that is not there"));
  CHECK_THAT(failed["stdout"].get<std::string>(), Catch::Contains("changed: the node is marked"));
  CHECK(fs::exists(node.root / "ran"));

  // A node's BOOTSTRAP names no playbook: Ansible logs in and runs a module there.
  const json bootstrap = env.server().WaitTaskState(
      env.server().Enqueue(AnsibleTask(node, node.host_keys, json::object(), "BOOTSTRAP")), "succeeded", 120s);
  CHECK_THAT(bootstrap["stdout"].get<std::string>(), Catch::Contains("ok: Ansible reaches the node and runs a module"));

  // A key that is not the node's: ssh refuses the node, nothing runs there.
  fs::remove(node.root / "ran");
  const std::string wrong = node.public_key.substr(0, node.public_key.rfind(' '));
  const json refused =
      env.server().WaitTaskState(env.server().Enqueue(AnsibleTask(node, {wrong}, fields)), "failed", 120s);
  INFO(refused.dump(2));
  // Ansible passes on ssh's own refusal, or, when ssh has already exited by
  // the time Ansible writes the module to it (a busy machine), a broken pipe.
  CHECK_THAT(refused["message"].get<std::string>(),
             Catch::Contains("Ansible task 'the node is marked' could not reach the node: ") &&
                 (Catch::Contains("Host key verification failed") || Catch::Contains("Broken pipe")));
  CHECK_FALSE(fs::exists(node.root / "ran"));
  // No run leaves its private directory (with the node's key) or an ssh master behind.
  CHECK(IsEmptyDir(env.host_tmp()));
  CHECK(ProcessesNaming(env.host_tmp()) == std::vector<std::string>{});
}
