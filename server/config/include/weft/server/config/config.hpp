// weftd's configuration: weftd.toml plus command-line flags.
//
// Every key has a default, so an empty file (or no file) is a valid config.
// An unknown key is an error that names it and lists the keys its table knows;
// a bad value is an error that names the key and says what would be accepted.
// The full reference is docs/configuration.md.
//
// Plain values; thread-compatible. Parsing never throws (toml++ exceptions are
// caught here and turned into a Status).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "weft/common/log.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {

struct EndpointsConfig {
  std::string api = "tcp://127.0.0.1:7420";
  std::string provisioner = "tcp://127.0.0.1:7421";
  std::string events = "tcp://127.0.0.1:7422";
};

struct TasksConfig {
  std::int64_t lease_ms = 30000;          // how long a taken task stays leased without renewal
  std::int64_t max_wait_ms = 30000;       // the longest a task.take is held open
  std::int64_t default_max_attempts = 3;  // when debug.enqueue does not say
};

struct HostsConfig {
  std::int64_t heartbeat_ms = 2000;      // told to hosts at register
  std::int64_t silent_after_ms = 10000;  // a host not heard from for this long is not live
};

struct JobsConfig {
  std::int64_t max_attempts = 3;            // attempts per task of a job (retries = max_attempts - 1)
  std::int64_t retry_backoff_ms = 1000;     // wait before attempt 2; doubles per attempt
  std::int64_t retry_backoff_max_ms = 30000;
  std::int64_t janitor_interval_ms = 1000;  // how often cluster leases and silent hosts are checked
  std::int64_t max_nodes_in_task = 256;     // a task lists the cluster's other nodes up to this size
  std::int64_t max_plan_nodes = 10000;      // cluster.plan and dry runs of larger clusters are refused (TOO_LARGE)
};

struct StoreConfig {
  std::string backend = "sqlite";  // "sqlite" (<data_dir>/weft.db) or "postgres"
  std::int64_t busy_timeout_ms = 5000;  // SQLite only
  // PostgreSQL only: a libpq connection string or URI, passed through as it is
  // (several hosts with target_session_attrs=read-write are libpq's own), and
  // how long a request waits for a lost server to come back.
  std::string conninfo;
  std::int64_t reconnect_timeout_ms = 60'000;
  // PostgreSQL only: a call on a connection that has had no answer for this
  // long (a frozen server) is given up on: weftd closes the connection and
  // makes it again. 0: no limit.
  std::int64_t call_timeout_ms = 15'000;
  // PostgreSQL only: a new connection gives up on a server that accepted it
  // and has not answered for this long (libpq's connect_timeout: whole
  // seconds, 2 at least), unless conninfo sets connect_timeout itself.
  std::int64_t connect_timeout_ms = 5'000;
  // Where plugin resources are kept: "database" (rows of this store, which
  // every weftd on one PostgreSQL shares) or "files" (<data_dir>/resources);
  // empty: "database" with postgres, "files" with sqlite.
  std::string resources;
  bool ResourcesInDatabase() const { return resources.empty() ? backend == "postgres" : resources == "database"; }
};

// docs/security.md.
struct SecurityConfig {
  bool curve = true;          // CurveZMQ + ZAP on every endpoint; false: no authentication at all
  bool host_requests = true;  // hosts with unknown keys may ask an admin to accept them
  std::int64_t token_ttl_ms = 3'600'000;  // default lifetime of `weft host token create`
  // Requests per second one api connection may make (a token bucket of
  // api_burst); 0: no limit. The provisioner endpoint is not limited.
  std::int64_t api_rate_per_s = 1000;
  std::int64_t api_burst = 2000;
  // Browser sessions (session.login): end after this long unused, and this
  // long after the login whatever happens.
  std::int64_t session_idle_ms = 30LL * 60 * 1000;
  std::int64_t session_max_ms = 12LL * 3600 * 1000;
  // Logins per (tenant, user) and per client address: a burst of
  // login_burst, then one per login_interval_ms.
  std::int64_t login_burst = 5;
  std::int64_t login_interval_ms = 12'000;
};

// docs/metrics.md: the Prometheus /metrics listener.
struct MetricsConfig {
  bool enabled = true;                // false: no listener, and nothing is measured
  std::string listen = "127.0.0.1:*";  // HOST:PORT; * picks a free port (endpoints.json names it)
};

// docs/failover.md: several weftd on one PostgreSQL database, one of them the leader.
// Only with the postgres store; with SQLite a weftd is always the only one.
struct LeaderConfig {
  bool enabled = true;        // false: this weftd writes without an election (one weftd only)
  std::string node = {};      // its name among the others; empty: its advertised api endpoint
  std::int64_t lease_ms = 3000;  // a leader that has not renewed for this long is taken over
  std::int64_t poll_ms = 250;    // how often a follower tries to take over
  // How often each server of a multi-host conninfo is asked for its timeline,
  // so that no weftd leads on an old primary a promotion superseded; 0: never.
  std::int64_t timeline_check_ms = 5000;
  // The endpoints clients and hosts reach this weftd at, when they differ
  // from the bound ones (a bind to 0.0.0.0, a proxy); empty: the bound ones.
  std::string advertise_api = {};
  std::string advertise_provisioner = {};
  std::string advertise_events = {};
};

// docs/configuration.md: how long what ended is kept (server/store/retention_store.cpp).
struct RetentionConfig {
  // A deleted cluster with everything under it, and the ended jobs of live
  // clusters (all but each one's latest), are removed this long after they
  // ended; 0: kept for ever. ended_after_days, or ended_after_ms.
  std::int64_t ended_after_ms = 30LL * 24 * 3600 * 1000;
  std::int64_t interval_ms = 300'000;  // how often the leader looks for what is due (and once at start)
  std::int64_t batch_rows = 500;       // rows removed per transaction at most
  // API tokens revoked or expired this long ago are removed; 0: kept for
  // ever. tokens_after_days, or tokens_after_ms.
  std::int64_t tokens_after_ms = 30LL * 24 * 3600 * 1000;
  // Audit entries older than this are removed; 0 (the default): the audit log
  // is kept for ever. audit_after_days, or audit_after_ms.
  std::int64_t audit_after_ms = 0;
  // SQLite (auto_vacuum=INCREMENTAL): free pages given back to the file
  // system per turn after a round, until none is left; 0: none.
  std::int64_t vacuum_pages = 128;
};

struct ServerConfig {
  std::filesystem::path data_dir = "/var/lib/weft";
  log::Level log_level = log::Level::kInfo;
  // Messages handled per group commit: one transaction, then the replies.
  std::int64_t batch_max_messages = 256;
  // After a turn that answered requests, how long the reactor keeps looking
  // for the next ones before it sleeps; 0: sleep at once.
  std::int64_t idle_spin_us = 200;
};

struct Config {
  ServerConfig server;
  EndpointsConfig endpoints;
  wire::Limits limits;
  TasksConfig tasks;
  HostsConfig hosts;
  JobsConfig jobs;
  StoreConfig store;
  SecurityConfig security;
  MetricsConfig metrics;
  LeaderConfig leader;
  RetentionConfig retention;
};

// The largest task, as JSON, that weftd hands out to a host (task.take): a
// reply's header frame holds the task and an envelope of a few dozen bytes (the
// request's id is at most 128), and weft-host reads replies under wire's
// default limit whatever weftd's is; so limits.max_header_bytes, at most that
// default, less 4 KiB. A larger task fails when it is handed out.
inline std::size_t MaxTaskBytes(std::size_t max_header_bytes) {
  const std::size_t reply_bytes = std::min(max_header_bytes, wire::Limits{}.max_header_bytes);
  return reply_bytes > 4096 ? reply_bytes - 4096 : 0;
}
inline std::size_t MaxTaskBytes(const Config& config) { return MaxTaskBytes(config.limits.max_header_bytes); }

// The largest cluster config, as JSON, that a cluster may be given: every
// task of the cluster carries it, so a quarter of MaxTaskBytes, and the rest
// is for what else a task carries (the node's results, up to half a task at
// the default limits; the node list, the service's and provider's definitions).
inline std::size_t MaxClusterConfigBytes(std::size_t max_header_bytes) { return MaxTaskBytes(max_header_bytes) / 4; }

// Parses TOML text; `origin` names the file in error messages.
Result<Config> ParseConfig(std::string_view toml_text, std::string_view origin);
// Reads and parses a file; a missing file is an error naming the path.
Result<Config> LoadConfigFile(const std::filesystem::path& path);

// Command line: weftd [--config FILE] [--data-dir DIR] [--help] [--version]
struct Flags {
  std::filesystem::path config_path;  // empty: built-in defaults
  std::filesystem::path data_dir;     // empty: the config's server.data_dir
  bool help = false;
  bool version = false;
  bool new_keys = false;  // --new-keys: start a store whose keys/ is missing with new keys
  bool vacuum = false;    // --vacuum: rewrite the SQLite store compact, then exit (weftd stopped)
};
Result<Flags> ParseFlags(int argc, const char* const* argv);
inline constexpr std::string_view kUsage =
    "usage: weftd [--config FILE] [--data-dir DIR] [--new-keys] [--vacuum]\n"
    "  --config FILE    weftd.toml to read (default: built-in defaults)\n"
    "  --data-dir DIR   overrides server.data_dir (default /var/lib/weft)\n"
    "  --new-keys       start even though <data_dir>/keys/ is missing for a store that is not new,\n"
    "                   with new keys (its sealed secrets then no longer open; credentials and\n"
    "                   hosts must be made or enrolled again)\n"
    "  --vacuum         with weftd stopped: rewrite <data_dir>/weft.db without its free pages, so\n"
    "                   that retention gives space back from then on (auto_vacuum=INCREMENTAL);\n"
    "                   then exit (docs/configuration.md, [retention])\n";

}  // namespace weft::server
