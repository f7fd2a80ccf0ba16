// How the audit, follow and history tests run weftd and weft-host (tests/
// support starts them): weftd on a data directory that outlives the process
// (Restart() brings it back on the same ports), hosts with their own state.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft::audit_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::Host;
using testing::Process;
using testing::ReadFile;
using testing::RunResult;
using testing::Tail;
using testing::WaitFor;
using testing::Weftd;
using testing::WriteFile;

// weftd in `dir`; `curve`: CurveZMQ on (`weft` then uses the superadmin credential weftd writes).
inline testing::WeftdOptions ServerIn(const fs::path& dir, bool curve, const std::string& extra_toml = "") {
  return {.dir = dir, .curve = curve, .extra_toml = extra_toml, .cli_timeout = 60s};
}

// weft-host `id` in dir/id with the build's plugins; `extra` adds config lines (enroll_token, server_key).
inline testing::HostOptions HostIn(const fs::path& dir, const std::string& id, const std::string& server,
                                   const std::string& extra = "") {
  return {.dir = dir,
          .id = id,
          .server = server,
          .capacity = 4,
          .workers = 1,
          .shutdown_grace_ms = 1000,
          .extra_toml = extra};
}

}  // namespace weft::audit_test
