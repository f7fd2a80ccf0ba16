#include "support/host.hpp"

#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"

namespace weft::testing {

namespace fs = std::filesystem;

std::string HostToml(const HostOptions& o, const fs::path& dir) {
  auto line = [](const char* key, int value) { return std::string(key) + " = " + std::to_string(value) + "\n"; };
  auto quoted = [](const std::string& text) { return nlohmann::json(text).dump(); };
  std::string toml = "server = " + quoted(o.server) + "\nhost_id = " + quoted(o.id) + "\n";
  // Its own state directory, never the default one the machine's hosts share.
  toml += "state_dir = " + quoted((dir / "state").string()) + "\n";
  toml += line("capacity", o.capacity);
  if (o.workers > 0) toml += line("workers", o.workers);
  if (o.take_wait_ms > 0) toml += line("take_wait_ms", o.take_wait_ms);
  if (o.request_timeout_ms > 0) toml += line("request_timeout_ms", o.request_timeout_ms);
  if (o.shutdown_grace_ms > 0) toml += line("shutdown_grace_ms", o.shutdown_grace_ms);
  if (!o.plugin_dirs.empty()) {
    std::string dirs;
    for (const fs::path& d : o.plugin_dirs) dirs += (dirs.empty() ? "" : ", ") + quoted(d.string());
    toml += "plugin_dirs = [" + dirs + "]\n";
  }
  return toml + o.extra_toml;
}

Host::Host(HostOptions options) : options_(std::move(options)), dir_(options_.dir / options_.id) {
  fs::create_directories(dir_);
  WriteFile(config(), HostToml(options_, dir_));
  if (options_.start) Start();
}

void Host::Start() {
  ProcessOptions o;
  o.stdout_path = log();
  o.stderr_path = log();
  o.die_with_parent = options_.die_with_parent;
  o.own_process_group = options_.own_process_group;
  proc_ = Process(options_.binary.empty() ? BuildPath("bin/weft-host") : options_.binary,
                  {"--config", config().string()}, o);
}

std::string Host::Log() const { return ReadFile(log()); }

}  // namespace weft::testing
