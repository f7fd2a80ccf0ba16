// A real weftd for integration tests: a temp data directory, endpoints on
// ports the system picks (read back from <data_dir>/endpoints.json, checked to
// belong to this process), and helpers to run the real `weft` CLI against it.
// The process is killed when the object dies.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace weft::testing {

class Weftd {
 public:
  // `extra_toml` is appended to the generated weftd.toml (e.g. "[tasks]\nlease_ms = 300\n").
  explicit Weftd(const std::string& name = "weftd-test", const std::string& extra_toml = "");

  std::string api() const { return endpoints_["api"].get<std::string>(); }
  std::string provisioner() const { return endpoints_["provisioner"].get<std::string>(); }
  const nlohmann::json& endpoints() const { return endpoints_; }
  std::string Log() const { return weftd_.Output(); }
  // A path inside the test's temp directory.
  std::filesystem::path Path(const std::string& name) const { return dir_ / name; }

  // `weft --server <api> ARGS...`
  RunResult Weft(std::vector<std::string> args) const;
  // `weft --server <api> -o json ARGS...`, which must succeed, parsed.
  nlohmann::json WeftJson(std::vector<std::string> args) const;
  // Registers a host through a raw host.register call (no weft-host needed).
  void RegisterHost(const std::string& host_id, const nlohmann::json& plugins, int capacity = 2) const;

 private:
  TempDir dir_;
  Process weftd_;
  nlohmann::json endpoints_;
};

}  // namespace weft::testing
