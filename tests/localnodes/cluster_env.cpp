#include "localnodes/cluster_env.hpp"

#include <sys/stat.h>

#include <cstdlib>

#include <catch2/catch.hpp>

namespace weft::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
const fs::path kSource = WEFT_SOURCE_DIR;
}  // namespace

void RequireServicePackages() {
  for (const char* tool : {"/usr/sbin/nginx", "/usr/sbin/haproxy", "/usr/bin/redis-server", "/usr/bin/redis-cli",
                           "/usr/bin/curl", "/usr/sbin/sshd"}) {
    INFO(tool << " is missing: run scripts/install-deps.sh (it installs nginx, haproxy, redis-server, curl)");
    REQUIRE(fs::exists(tool));
  }
}

std::vector<NodeView> With(const std::vector<NodeView>& nodes, const std::string& service) {
  std::vector<NodeView> out;
  for (const NodeView& n : nodes)
    if (n.services.count(service)) out.push_back(n);
  return out;
}

std::string ServedBy(const std::string& page) {
  const std::string open = "<h1>served by ", close = "</h1>";
  auto a = page.find(open);
  if (a == std::string::npos) return {};
  auto b = page.find(close, a);
  return b == std::string::npos ? std::string() : page.substr(a + open.size(), b - a - open.size());
}

ClusterEnv::ClusterEnv(const ClusterEnvOptions& options) : tmp_("weft-" + options.tag) {
  RequireServicePackages();
  // nginx's workers (www-data) read the pages under the nodes' directories.
  REQUIRE(::chmod(tmp_.path().c_str(), 0711) == 0);
  server_ = std::make_unique<Weftd>(ServerIn(tmp_ / "server"));
  HostOptions host = HostIn(tmp_ / "host", "h1", server_->provisioner(),
                            {kBuild / "plugins/providers", kBuild / "plugins/automators"}, /*capacity=*/6);
  host.request_timeout_ms = options.request_timeout_ms;
  if (options.host_tmp) {
    fs::create_directories(host_tmp());
    ::setenv("TMPDIR", host_tmp().c_str(), 1);  // weft-host and its workers inherit it
  }
  host_ = std::make_unique<Host>(host);
  if (options.host_tmp) ::unsetenv("TMPDIR");
  REQUIRE(WaitFor([&] { return server_->HostLive("h1"); }, 20s));
}

std::string ClusterEnv::Logs() const {
  return "---- weftd\n" + server_->Log() + "\n---- weft-host\n" + host_->Log();
}

RunResult ClusterEnv::Weft(std::vector<std::string> args, std::chrono::milliseconds timeout) {
  args.insert(args.begin(), {"--server", server_->api()});
  return Run(kBuild / "bin/weft", args, timeout);
}

void ClusterEnv::MustWeft(const std::vector<std::string>& args) {
  const RunResult r = Weft(args);
  std::string line;
  for (const std::string& a : args) line += " " + a;
  INFO("weft" << line << "\nexit " << r.exit_code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  if (r.exit_code != 0) INFO(JobFailures());
  REQUIRE(r.exit_code == 0);
}

void ClusterEnv::ImportCatalog() {
  MustWeft({"catalog", "import", (kSource / "examples/catalog").string()});
  json local = json::parse(ReadFile(kSource / "examples/catalog/providers/local.json"));
  local["provisioner"]["state_dir"] = nodes_dir().string();
  local["provisioner"]["ssh_port"] = kNodeSshPort;
  server_->Call("provider.put", local);
}

void ClusterEnv::UploadResource(const std::string& type, const std::string& name, const fs::path& file) {
  MustWeft({"resource", "upload", type, name, file.string()});
  MustWeft({"resource", "stage", type, name, "1"});
  MustWeft({"resource", "sync"});
}

json ClusterEnv::Cluster(const std::string& name) {
  return server_->Call("cluster.get", {{"cluster", name}})["cluster"];
}

std::vector<NodeView> ClusterEnv::Nodes(const std::string& name) {
  std::vector<NodeView> out;
  const json cluster = Cluster(name);
  for (const json& n : cluster["nodes"]) {
    NodeView v;
    v.id = n.value("hostname", "");
    const json r = n.value("results", json::object());
    v.hostname = r.value("hostname", "");
    v.address = r.value("access_v4", "");
    v.dir = nodes_dir() / r.value("provider_id", "");
    for (const json& s : n["services"]) v.services.insert(s.get<std::string>());
    out.push_back(v);
  }
  return out;
}

std::string ClusterEnv::JobFailures() {
  std::string out;
  if (auto jobs = server_->TryCall("job.list", {{"limit", 5}}); jobs.ok()) {
    for (const json& j : (*jobs)["jobs"]) {
      auto d = server_->TryCall("job.get", {{"job", j["id"]}, {"details", true}});
      if (!d.ok()) continue;
      for (const json& t : (*d)["job"].value("tasks", json::array()))
        if (t.value("state", "") == "failed") out += "task " + t.dump() + "\n";
    }
  } else {
    out += "(job.list failed)\n";
  }
  return out + Logs();
}

ProbeNode::ProbeNode(const fs::path& state_dir) {
  localnode::NodeOptions o;
  o.state_dir = state_dir;
  o.name = "probe";
  o.port = kNodeSshPort;
  auto n = localnode::StartNode(o);
  INFO(n.status().ToString());
  REQUIRE(n.ok());
  node_ = *n;
}

ProbeNode::~ProbeNode() { (void)localnode::StopNode(node_.dir); }

json NodeTask(const localnode::Node& n, const json& host_keys, const std::string& plugin, const std::string& service,
              const json& fields, const std::string& action) {
  const json results = {{"provider_id", n.id},    {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
                        {"access_v4", n.address}, {"bind_v4", n.address},
                        {"ssh_port", n.port},     {"hostname", n.name},
                        {"host_keys", host_keys}};
  return {{"plugin", plugin},
          {"action", action},
          {"cluster_id", "c1"},
          {"node_id", n.name},
          {"job_id", "job-c1"},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", n.name},
            {"node", {{"id", n.name}, {"hostname", n.name}, {"results", results}}},
            {"results", results},
            {"service", {{"name", service}, {"action", {{"type", plugin}, {"fields", fields}}}}}}}};
}

}  // namespace weft::testing
