// Fuzzes weftd's configuration parser (server/config: toml++ plus our checks).
// Input: weftd.toml text. Checks that an accepted config keeps the cross-key rules
// the parser enforces, and that parsing is deterministic.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"
#include "weft/server/config/config.hpp"

using weft::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto cfg = weft::server::ParseConfig(weft::fuzz::Bytes(data, size), "fuzz.toml");
  if (!cfg.ok()) {
    Require(cfg.status().message().rfind("fuzz.toml", 0) == 0, "a config error names the file",
            cfg.status().message());
    return 0;
  }
  Require(cfg->limits.max_header_bytes <= cfg->limits.max_total_bytes, "header limit within the message limit");
  Require(cfg->hosts.silent_after_ms > cfg->hosts.heartbeat_ms, "silent_after_ms above heartbeat_ms");
  Require(!cfg->server.data_dir.empty(), "data_dir is never empty");
  auto again = weft::server::ParseConfig(weft::fuzz::Bytes(data, size), "fuzz.toml");
  Require(again.ok() && again->limits.max_total_bytes == cfg->limits.max_total_bytes &&
              again->endpoints.api == cfg->endpoints.api && again->tasks.lease_ms == cfg->tasks.lease_ms,
          "parsing is deterministic");
  return 0;
}
