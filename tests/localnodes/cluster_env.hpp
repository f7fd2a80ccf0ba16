// What the tests that build real clusters on local nodes share (the shell,
// ansible and puppet automators' end-to-end tests): the real weftd and
// weft-host with every built plugin, the weft CLI, the example catalog with
// its local provider pointed at the test's directories, and a node of its own
// for raw tasks. Needs root (local nodes run their own sshd).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/localnode/local_node.hpp"

namespace weft::testing {

inline constexpr std::uint16_t kNodeSshPort = 2022;  // as tests/ssh: a system sshd on port 22 cannot interfere
inline constexpr std::uint16_t kNginxPort = 8080;    // the example catalog's services
inline constexpr std::uint16_t kHaproxyPort = 8000;
inline constexpr std::uint16_t kRedisPort = 6379;

// The programs the example catalog's services run; their INSTALL would otherwise go to the network.
void RequireServicePackages();

// A node of a cluster as `cluster.get` shows it.
struct NodeView {
  std::string id;        // layout hostname
  std::string hostname;  // CONFIRM's hostname
  std::string address;
  std::filesystem::path dir;  // the local node's directory
  std::set<std::string> services;
};

// The nodes of `nodes` that run `service`.
std::vector<NodeView> With(const std::vector<NodeView>& nodes, const std::string& service);

// The name in an example web page's "<h1>served by NAME</h1>".
std::string ServedBy(const std::string& page);

struct ClusterEnvOptions {
  std::string tag;  // names the test's temporary directory
  // The host's temporary files (an automator's private directories) go to
  // host_tmp(), so a test can check that nothing is left there.
  bool host_tmp = false;
  int request_timeout_ms = 1000;  // weft-host's; 0: its own default
};

// weftd + one weft-host (capacity 6) with every built plugin.
class ClusterEnv {
 public:
  explicit ClusterEnv(const ClusterEnvOptions& options);

  Weftd& server() { return *server_; }
  std::filesystem::path dir() const { return tmp_.path(); }
  std::filesystem::path nodes_dir() const { return tmp_ / "nodes"; }
  std::filesystem::path host_tmp() const { return tmp_ / "host-tmp"; }
  std::string Logs() const;

  RunResult Weft(std::vector<std::string> args, std::chrono::milliseconds timeout = std::chrono::seconds(300));
  // Runs a weft command that must succeed (a `--wait` one follows its job to the end).
  void MustWeft(const std::vector<std::string>& args);

  // examples/catalog, with its local provider's nodes under nodes_dir().
  void ImportCatalog();
  // Uploads `file` as version 1 of the resource, makes it active and syncs it to the host.
  void UploadResource(const std::string& type, const std::string& name, const std::filesystem::path& file);

  nlohmann::json Cluster(const std::string& name);
  std::vector<NodeView> Nodes(const std::string& name);
  // Every task that failed in the last jobs, with its output, and the logs.
  std::string JobFailures();

 private:
  TempDir tmp_;
  std::unique_ptr<Weftd> server_;
  std::unique_ptr<Host> host_;
};

// A local node of its own for raw tasks, stopped however the test ends.
class ProbeNode {
 public:
  explicit ProbeNode(const std::filesystem::path& state_dir);
  ~ProbeNode();
  ProbeNode(const ProbeNode&) = delete;
  ProbeNode& operator=(const ProbeNode&) = delete;
  const localnode::Node& node() const { return node_; }

 private:
  localnode::Node node_;
};

// A raw task of automator `plugin` on `node` as the job engine hands one out
// (for debug.enqueue): its results say how to reach the node, with `host_keys`
// as the keys to trust; the service `service` carries `fields`.
nlohmann::json NodeTask(const localnode::Node& node, const nlohmann::json& host_keys, const std::string& plugin,
                        const std::string& service, const nlohmann::json& fields,
                        const std::string& action = "CONFIGURE");

}  // namespace weft::testing
