// weftd and weft-host as the host-level integration tests run them (tests/
// integration, tests/lua, tests/static): short leases and heartbeats, so lost
// hosts and tasks show quickly.
#pragma once

#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/host.hpp"
#include "support/weftd.hpp"

namespace weft::testing {

inline const std::filesystem::path kBuild = WEFT_BUILD_DIR;

// weftd in `dir`; `endpoints` empty: ports the system picks, else the ports to bind.
inline WeftdOptions ServerIn(const std::filesystem::path& dir,
                                      const nlohmann::json& endpoints = nlohmann::json(), int lease_ms = 1500) {
  return {.dir = dir,
          .lease_ms = lease_ms,
          .heartbeat_ms = 300,
          .silent_after_ms = 3000,
          .endpoints = endpoints,
          .api_timeout_ms = 3000};
}

// weft-host `id` with its files in dir/id; `plugin_dirs` empty: weft-host's own.
inline HostOptions HostIn(const std::filesystem::path& dir, const std::string& id, const std::string& server,
                                   const std::vector<std::filesystem::path>& plugin_dirs = {}, int capacity = 2,
                                   const std::string& extra = "") {
  const bool own_grace = extra.find("shutdown_grace_ms") != std::string::npos;
  return {.dir = dir,
          .id = id,
          .server = server,
          .capacity = capacity,
          .shutdown_grace_ms = own_grace ? 0 : 2000,
          .plugin_dirs = plugin_dirs,
          .extra_toml = extra};
}

inline int ExitCodeOf(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

}  // namespace weft::testing
