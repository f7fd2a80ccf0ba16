// A real weft-host (master and its workers) for integration tests and
// benches: its own directory <dir>/<id>/ with host.toml, host.log (stdout and
// stderr) and state/ (its state_dir: credential, enrollment, resources). The process is
// killed when the object dies.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "weft/common/status.hpp"

namespace weft::testing {

struct HostOptions {
  std::filesystem::path dir = {};  // the host's files go to dir/id
  std::string id = "h1";
  std::string server = {};    // weftd's provisioner endpoint
  int capacity = 2;
  int workers = 0;            // worker processes; 0: weft-host's default
  int take_wait_ms = 500;        // 0: weft-host's default
  int request_timeout_ms = 1000;  // 0: weft-host's default
  int shutdown_grace_ms = 0;  // 0: weft-host's default
  std::vector<std::filesystem::path> plugin_dirs = {};  // empty: weft-host's default
  std::string extra_toml = {};  // more keys (enroll_token, server_key, ...)
  bool start = true;          // start in the constructor
  bool die_with_parent = false;
  bool own_process_group = false;  // signals go to the whole group (master and workers)
  std::filesystem::path binary = {};  // empty: the build's bin/weft-host
};

class Host {
 public:
  explicit Host(HostOptions options);
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // (Re)starts weft-host with host.toml as written in the constructor; its log
  // starts over.
  void Start();
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) { return proc_.Stop(grace); }

  const std::string& id() const { return options_.id; }
  Process& process() { return proc_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path config() const { return dir_ / "host.toml"; }
  std::filesystem::path log() const { return dir_ / "host.log"; }
  std::filesystem::path credential() const { return dir_ / "state" / "credential.json"; }
  std::string Log() const;

 private:
  HostOptions options_;
  std::filesystem::path dir_;
  Process proc_;
};

// weft-host's configuration for `options` (what Host writes to host.toml).
std::string HostToml(const HostOptions& options, const std::filesystem::path& dir);

}  // namespace weft::testing
