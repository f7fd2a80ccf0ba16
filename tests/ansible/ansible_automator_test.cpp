// The ansible automator end to end, on real nodes: the real weftd, weft-host
// and weft CLI, the local provider (an sshd per node on a 127.0.x.y of its
// own) and ansible-playbook. examples/catalog's `web-ansible` template has its
// nginx and redis installed and configured by the playbooks of
// examples/ansible/, uploaded as an `ansible` resource. Needs root.
//
// Without ansible-playbook every case says so in one line and exits 77, which
// ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
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

constexpr int kSkipped = 77;              // SKIP_RETURN_CODE in CMakeLists.txt
constexpr std::uint16_t kSshPort = 2022;  // as tests/localnodes: a system sshd on port 22 cannot interfere
constexpr std::uint16_t kNginxPort = 8080;
constexpr std::uint16_t kHaproxyPort = 8000;
const fs::path kSource = WEFT_SOURCE_DIR;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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
// (the ansible automator's private directories) go to a directory of the test.
class Env {
 public:
  Env() : tmp_("weft-ansible") {
    RequireAnsibleOrSkip();
    // nginx's workers (www-data) read the pages under the nodes' directories.
    REQUIRE(::chmod(tmp_.path().c_str(), 0711) == 0);
    fs::create_directories(host_tmp());
    ::setenv("TMPDIR", host_tmp().c_str(), 1);  // weft-host and its workers inherit it
    server_ = std::make_unique<Weftd>(ServerIn(tmp_ / "server"));
    weft::testing::HostOptions host = HostIn(tmp_ / "host", "h1", server_->provisioner(),
                                             {kBuild / "plugins/providers", kBuild / "plugins/automators"},
                                             /*capacity=*/6);
    // ansible-playbook runs keep the machine's cores busy: weft-host's own
    // default (not the tests' 1 s), so that a slow reply is not given up and
    // the call retried on a fresh socket, where weftd's reply cannot arrive.
    host.request_timeout_ms = 5000;
    host_ = std::make_unique<Host>(host);
    ::unsetenv("TMPDIR");
    REQUIRE(WaitFor([&] { return server_->HostLive("h1"); }, 20s));
  }

  Weftd& server() { return *server_; }
  fs::path dir() const { return tmp_.path(); }
  fs::path nodes_dir() const { return tmp_ / "nodes"; }
  fs::path host_tmp() const { return tmp_ / "host-tmp"; }
  std::string Logs() const { return "---- weftd\n" + server_->Log() + "\n---- weft-host\n" + host_->Log(); }

  weft::testing::RunResult Weft(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->endpoints()["api"].get<std::string>()});
    return weft::testing::Run(kBuild / "bin/weft", args, 300s);
  }
  void MustWeft(const std::vector<std::string>& args) {
    auto r = Weft(args);
    std::string line;
    for (const std::string& a : args) line += " " + a;
    INFO("weft" << line << "\nexit " << r.exit_code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    if (r.exit_code != 0) INFO(FailedTasks() << Logs());
    REQUIRE(r.exit_code == 0);
  }

  // Uploads `file` as the ansible resource `name` and makes it active.
  void Resource(const std::string& name, const fs::path& file) {
    MustWeft({"resource", "upload", "ansible", name, file.string()});
    MustWeft({"resource", "stage", "ansible", name, "1"});
    MustWeft({"resource", "sync"});
  }

  // The failed tasks of the last jobs, with their output.
  std::string FailedTasks() {
    std::string out;
    auto jobs = server_->TryCall("job.list", {{"limit", 5}});
    if (!jobs.ok()) return "(job.list failed)\n";
    for (const json& j : (*jobs)["jobs"]) {
      auto d = server_->TryCall("job.get", {{"job", j["id"]}, {"details", true}});
      if (!d.ok()) continue;
      for (const json& t : (*d)["job"].value("tasks", json::array()))
        if (t.value("state", "") == "failed") out += "task " + t.dump() + "\n";
    }
    return out;
  }

 private:
  TempDir tmp_;
  std::unique_ptr<Weftd> server_;
  std::unique_ptr<Host> host_;
};

std::string ServedBy(const std::string& page) {
  const std::string open = "<h1>served by ", close = "</h1>";
  auto a = page.find(open);
  if (a == std::string::npos) return {};
  auto b = page.find(close, a);
  return b == std::string::npos ? std::string() : page.substr(a + open.size(), b - a - open.size());
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
    std::string cmdline = Slurp(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(path.string()) != std::string::npos)
      found.push_back(e.path().filename().string() + ": " + cmdline);
  }
  return found;
}

// A raw task for the ansible automator on a node whose results say how to reach it.
json AnsibleTask(const weft::localnode::Node& n, const json& host_keys, const json& fields,
                 const std::string& action = "CONFIGURE") {
  const json results = {{"provider_id", n.id},    {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
                        {"access_v4", n.address}, {"bind_v4", n.address},
                        {"ssh_port", n.port},     {"hostname", n.name},
                        {"host_keys", host_keys}};
  return {{"plugin", "ansible"},
          {"action", action},
          {"cluster_id", "c1"},
          {"node_id", n.name},
          {"job_id", "job-c1"},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", n.name},
            {"node", {{"id", n.name}, {"hostname", n.name}, {"results", results}}},
            {"results", results},
            {"service", {{"name", "probe"}, {"action", {{"type", "ansible"}, {"fields", fields}}}}}}}};
}

}  // namespace

TEST_CASE("ansible: a web cluster whose nginx and redis Ansible sets up serves through haproxy, and stops",
          "[ansible][localnodes]") {
  Env env;
  env.MustWeft({"catalog", "import", (kSource / "examples/catalog").string()});
  json local = json::parse(Slurp(kSource / "examples/catalog/providers/local.json"));
  local["provisioner"]["state_dir"] = env.nodes_dir().string();
  local["provisioner"]["ssh_port"] = kSshPort;
  env.server().Call("provider.put", local);
  // The playbooks and roles of examples/ansible/ as one archive resource, as its README says.
  const fs::path archive = env.dir() / "web-ansible.tar.gz";
  auto tar = weft::testing::Run("/bin/tar", {"-czf", archive.string(), "-C", (kSource / "examples/ansible").string(),
                                             "--exclude", "README.md", "."});
  REQUIRE(tar.exit_code == 0);
  env.Resource("web-ansible.tar.gz", archive);

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
  Env env;
  weft::localnode::NodeOptions o;
  o.state_dir = env.nodes_dir();
  o.name = "probe";
  o.port = kSshPort;
  auto started = weft::localnode::StartNode(o);
  INFO(started.status().ToString());
  REQUIRE(started.ok());
  const weft::localnode::Node node = *started;
  struct StopAtEnd {
    fs::path dir;
    ~StopAtEnd() { (void)weft::localnode::StopNode(dir); }
  } stop{node.dir};

  const fs::path playbook = env.dir() / "broken.yml";
  std::ofstream(playbook) << "- hosts: all\n  gather_facts: false\n  tasks:\n"
                             "    - name: the node is marked\n"
                             "      ansible.builtin.command: touch "
                          << node.root.string()
                          << "/ran\n"
                             "    - name: read a file that is not there\n"
                             "      ansible.builtin.command: cat /nonexistent/weft-ansible-test\n";
  env.Resource("broken.yml", playbook);
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
  CHECK_THAT(refused["message"].get<std::string>(),
             Catch::Contains("Ansible task 'the node is marked' could not reach the node: ") &&
                 Catch::Contains("Host key verification failed"));
  CHECK_FALSE(fs::exists(node.root / "ran"));
  // No run leaves its private directory (with the node's key) or an ssh master behind.
  CHECK(IsEmptyDir(env.host_tmp()));
  CHECK(ProcessesNaming(env.host_tmp()) == std::vector<std::string>{});
}
