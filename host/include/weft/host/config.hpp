// weft-host's configuration: weft-host.toml plus command-line overrides.
//
// Every key has a default, so an empty file (or no file) is a valid config; an
// unknown key or a value of the wrong type is an error that names the key.
// Plain values and free functions: thread-compatible, no shared state.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/status.hpp"
#include "weft/host/plugin_loader.hpp"

namespace weft::host {

struct HostConfig {
  std::string server = "tcp://127.0.0.1:7421";  // weftd's provisioner endpoint
  std::string host_id;                          // default: this machine's hostname
  int capacity = 4;                             // tasks run at once (one runner thread each)
  std::vector<std::filesystem::path> plugin_dirs;
  int take_wait_ms = 5000;          // how long weftd may hold a task.take open
  int request_timeout_ms = 5000;    // every other call to weftd
  int task_timeout_ms = 3'600'000;  // a plugin run longer than this is cancelled
  int shutdown_grace_ms = 10'000;   // SIGTERM: how long running tasks may take to finish
  std::string log_level = "info";
  // Worker processes (see docs/host.md). The capacity is split between them:
  // each runs capacity / workers tasks at once on threads (the first ones get
  // the remainder); there are never more workers than capacity.
  int workers = 2;
  // Whether `workers` was set (in the file or by --workers), not defaulted: a
  // set value above capacity is warned about at start (ConfigWarnings).
  bool workers_set = false;
  int worker_memory_limit_mb = 1024;  // RSS above this: the worker is killed
  LuaBudget lua;                      // lua_memory_mb, lua_instructions
  // Tenants the workers serve, round-robin (worker i serves tenants[i % n]),
  // pinned by the operator; empty: the workers follow weftd's worker split.
  std::vector<std::string> tenants;
  // How long weftd's worker split must differ from the workers before the master
  // drains and restarts workers to follow it, unless a tenant with work has no
  // worker (SplitHold); 0: at once.
  int split_hold_ms = 120'000;
  // Resources (docs/host.md, "Resources"). Empty paths take their defaults:
  // state_dir: /var/lib/weft-host/<host_id> as root, else
  // $XDG_STATE_HOME (or ~/.local/state)/weft-host/<host_id>;
  // resource_cache_dir: <state_dir>/resources; resource_plugin_dir: <state_dir>/plugins.
  std::filesystem::path state_dir;
  std::filesystem::path resource_cache_dir;
  std::filesystem::path resource_plugin_dir;
  int resource_sync_ms = 2000;  // how often the master asks weftd for the active versions
  // HOST:PORT of the master's Prometheus /metrics listener (docs/metrics.md);
  // * picks a free port, written to <state_dir>/metrics.json; empty: none.
  std::string metrics_listen = "127.0.0.1:*";
  // Security (docs/security.md). enroll_token: a one-time token from `weft host
  // token create`, spent at first start. server_key: weftd's public key, for a
  // host that asks an admin to accept it instead. Neither, and no credential in
  // state_dir: weftd runs without security.
  std::string enroll_token;
  std::string server_key;
  // Filled at start from <state_dir>/credential.json (not read from the TOML).
  std::string curve_server_key = {};
  curve::KeyPair curve_keys = {};
};

// The host's credential: weftd's public key and the host's key pair.
std::filesystem::path CredentialPath(const HostConfig& config);
// Reads the credential into config.curve_*, if the file exists.
[[nodiscard]] Status LoadHostCredential(HostConfig& config);
// Options for a client of weftd's provisioner endpoint, with the host's keys.
client::Options ClientOptions(const HostConfig& config, int timeout_ms);

// The directories above with their defaults filled in.
std::filesystem::path StateDir(const HostConfig& config);
std::filesystem::path ResourceCacheDir(const HostConfig& config);
std::filesystem::path ResourcePluginDir(const HostConfig& config);
// The tenants whose resources the master syncs: `tenants`, or {"default"} when
// the host serves any tenant.
std::vector<std::string> SyncedTenants(const HostConfig& config);

// The workers that will actually run: min(workers, capacity).
int EffectiveWorkers(const HostConfig& config);
// What weft-host logs as warnings at start about a config it runs anyway
// (e.g. `workers` set above `capacity`: only `capacity` workers run).
std::vector<std::string> ConfigWarnings(const HostConfig& config);
// Threads of worker `index` (0-based): capacity split as evenly as possible.
int WorkerThreads(const HostConfig& config, int index);

// What a worker needs of the config, as JSON on its command line, and back.
std::string WorkerConfigJson(const HostConfig& config);
Result<HostConfig> WorkerConfigFromJson(std::string_view text);

// The defaults, with plugin_dirs set relative to the directory that holds the
// executable (<exe_dir>/../plugins/{providers,automators}, where the build puts them)
// and host_id set to the hostname.
HostConfig DefaultConfig(const std::filesystem::path& exe_dir);

// Parses TOML text over the defaults. Relative plugin_dirs are resolved against
// `base_dir` (the config file's directory). `source` names the text in errors.
Result<HostConfig> ParseConfig(std::string_view toml_text, std::string_view source,
                               const std::filesystem::path& base_dir, const std::filesystem::path& exe_dir);

// Reads and parses a file (see ParseConfig).
Result<HostConfig> LoadConfigFile(const std::filesystem::path& path, const std::filesystem::path& exe_dir);

// Checks the values' ranges and formats (also after command-line overrides).
Status ValidateConfig(const HostConfig& config);

}  // namespace weft::host
