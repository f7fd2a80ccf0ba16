#include "weft/server/config/config.hpp"

#include <fstream>
#include <sstream>

#include "weft/common/toml_table.hpp"

namespace weft::server {
namespace {

std::string CheckEndpoint(const std::string& v) {
  if (v.rfind("tcp://", 0) == 0 || v.rfind("ipc://", 0) == 0 || v.rfind("inproc://", 0) == 0) return "";
  return "use a ZeroMQ address such as \"tcp://127.0.0.1:7420\" (port * picks a free port) or \"ipc:///run/weft/api\"";
}

}  // namespace

Result<Config> ParseConfig(std::string_view toml_text, std::string_view origin_view) {
  std::string origin(origin_view);
  WEFT_ASSIGN_OR_RETURN(toml::table root, ParseToml(toml_text, origin_view));
  WEFT_RETURN_IF_ERROR(CheckTables(root, {"server", "endpoints", "limits", "tasks", "hosts", "jobs", "store", "security",
                                          "metrics", "leader", "retention"},
                                   origin));
  auto table = [&](const char* name) { return root.get_as<toml::table>(name); };

  Config cfg;
  {
    TableReader r(table("server"), "server", origin);
    std::string dir = cfg.server.data_dir.string();
    r.String("data_dir", &dir, [](const std::string& v) {
      return v.empty() ? std::string("give a directory path such as \"/var/lib/weft\"") : std::string();
    });
    cfg.server.data_dir = dir;
    std::string level = "info";
    r.String("log_level", &level, [&](const std::string& v) {
      return log::ParseLevel(v, &cfg.server.log_level) ? std::string()
                                                        : std::string("use one of debug, info, warn, error");
    });
    r.Int("batch_max_messages", 1, 100000, &cfg.server.batch_max_messages);
    r.Int("idle_spin_us", 0, 10000, &cfg.server.idle_spin_us);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("endpoints"), "endpoints", origin);
    r.String("api", &cfg.endpoints.api, CheckEndpoint);
    r.String("provisioner", &cfg.endpoints.provisioner, CheckEndpoint);
    r.String("events", &cfg.endpoints.events, CheckEndpoint);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("limits"), "limits", origin);
    constexpr std::size_t kGiB = 1u << 30;
    r.Size("max_frames", 1, 100000, &cfg.limits.max_frames);
    r.Size("max_header_bytes", 256, kGiB, &cfg.limits.max_header_bytes);
    r.Size("max_frame_bytes", 1, kGiB, &cfg.limits.max_frame_bytes);
    r.Size("max_message_bytes", 256, 4 * kGiB, &cfg.limits.max_total_bytes);
    WEFT_RETURN_IF_ERROR(r.Finish());
    if (cfg.limits.max_header_bytes > cfg.limits.max_total_bytes)
      return Status::Invalid(origin + ": limits.max_header_bytes (" + std::to_string(cfg.limits.max_header_bytes) +
                             ") is larger than limits.max_message_bytes (" +
                             std::to_string(cfg.limits.max_total_bytes) + "); raise max_message_bytes");
  }
  {
    TableReader r(table("tasks"), "tasks", origin);
    r.Int("lease_ms", 10, 86'400'000, &cfg.tasks.lease_ms);
    r.Int("max_wait_ms", 0, 3'600'000, &cfg.tasks.max_wait_ms);
    r.Int("default_max_attempts", 1, 1000, &cfg.tasks.default_max_attempts);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("hosts"), "hosts", origin);
    r.Int("heartbeat_ms", 10, 3'600'000, &cfg.hosts.heartbeat_ms);
    r.Int("silent_after_ms", 10, 86'400'000, &cfg.hosts.silent_after_ms);
    WEFT_RETURN_IF_ERROR(r.Finish());
    if (cfg.hosts.silent_after_ms <= cfg.hosts.heartbeat_ms)
      return Status::Invalid(origin + ": hosts.silent_after_ms (" + std::to_string(cfg.hosts.silent_after_ms) +
                             ") must be larger than hosts.heartbeat_ms (" + std::to_string(cfg.hosts.heartbeat_ms) +
                             "), or every host looks silent between heartbeats");
  }
  {
    TableReader r(table("jobs"), "jobs", origin);
    r.Int("max_attempts", 1, 1000, &cfg.jobs.max_attempts);
    r.Int("retry_backoff_ms", 0, 3'600'000, &cfg.jobs.retry_backoff_ms);
    r.Int("retry_backoff_max_ms", 0, 86'400'000, &cfg.jobs.retry_backoff_max_ms);
    r.Int("janitor_interval_ms", 10, 3'600'000, &cfg.jobs.janitor_interval_ms);
    r.Int("max_nodes_in_task", 0, 1'000'000, &cfg.jobs.max_nodes_in_task);
    r.Int("max_plan_nodes", 1, 1'000'000, &cfg.jobs.max_plan_nodes);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("store"), "store", origin);
    r.String("backend", &cfg.store.backend, [](const std::string& v) -> std::string {
      return v == "sqlite" || v == "postgres" ? "" : "use \"sqlite\" (the default) or \"postgres\"";
    });
    r.Int("busy_timeout_ms", 0, 600'000, &cfg.store.busy_timeout_ms);
    // Never echoed back: it may hold a password.
    r.String("conninfo", &cfg.store.conninfo, [](const std::string&) { return std::string(); });
    r.Int("reconnect_timeout_ms", 0, 86'400'000, &cfg.store.reconnect_timeout_ms);
    r.Int("call_timeout_ms", 0, 86'400'000, &cfg.store.call_timeout_ms);
    r.Int("connect_timeout_ms", 1, 3'600'000, &cfg.store.connect_timeout_ms);
    r.String("resources", &cfg.store.resources, [](const std::string& v) -> std::string {
      return v == "database" || v == "files"
                 ? ""
                 : "use \"database\" (resources in the store, shared by every weftd on one PostgreSQL; the default "
                   "with backend = \"postgres\") or \"files\" (under <data_dir>/resources; the default with "
                   "backend = \"sqlite\")";
    });
    WEFT_RETURN_IF_ERROR(r.Finish());
    if (cfg.store.backend == "postgres" && cfg.store.conninfo.empty())
      return Status::Invalid(origin + ": store.backend is \"postgres\" but store.conninfo is empty; set it to a "
                             "libpq connection string, for example \"host=db1 dbname=weft user=weft\"");
  }
  {
    TableReader r(table("security"), "security", origin);
    r.Bool("curve", &cfg.security.curve);
    r.Bool("host_requests", &cfg.security.host_requests);
    r.Int("token_ttl_ms", 1000, 365LL * 24 * 3600 * 1000, &cfg.security.token_ttl_ms);
    r.Int("api_rate_per_s", 0, 10'000'000, &cfg.security.api_rate_per_s);
    r.Int("api_burst", 1, 10'000'000, &cfg.security.api_burst);
    r.Int("session_idle_ms", 1000, 365LL * 24 * 3600 * 1000, &cfg.security.session_idle_ms);
    r.Int("session_max_ms", 1000, 365LL * 24 * 3600 * 1000, &cfg.security.session_max_ms);
    r.Int("login_burst", 1, 1'000'000, &cfg.security.login_burst);
    r.Int("login_interval_ms", 0, 3600LL * 1000, &cfg.security.login_interval_ms);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("metrics"), "metrics", origin);
    r.Bool("enabled", &cfg.metrics.enabled);
    r.String("listen", &cfg.metrics.listen, [](const std::string& v) {
      const std::size_t colon = v.rfind(':');
      return colon == std::string::npos || colon == 0 || colon + 1 == v.size()
                 ? std::string("give HOST:PORT, such as \"127.0.0.1:9464\" (PORT may be * for any free port)")
                 : std::string();
    });
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("leader"), "leader", origin);
    r.Bool("enabled", &cfg.leader.enabled);
    auto any = [](const std::string&) { return std::string(); };
    auto endpoint = [](const std::string& v) {
      return v.empty() || v.find("://") != std::string::npos
                 ? std::string()
                 : std::string("give a ZeroMQ endpoint such as \"tcp://10.0.0.5:7420\", or leave it out");
    };
    r.String("node", &cfg.leader.node, any);
    r.Int("lease_ms", 100, 3'600'000, &cfg.leader.lease_ms);
    r.Int("poll_ms", 10, 60'000, &cfg.leader.poll_ms);
    r.Int("timeline_check_ms", 0, 3'600'000, &cfg.leader.timeline_check_ms);
    r.String("advertise_api", &cfg.leader.advertise_api, endpoint);
    r.String("advertise_provisioner", &cfg.leader.advertise_provisioner, endpoint);
    r.String("advertise_events", &cfg.leader.advertise_events, endpoint);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  {
    TableReader r(table("retention"), "retention", origin);
    constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
    std::int64_t days = cfg.retention.ended_after_ms / kDayMs;
    r.Int("ended_after_days", 0, 36'500, &days);
    // The same in milliseconds (tests, or less than a day); wins when both are given.
    std::int64_t ms = -1;
    r.Int("ended_after_ms", 0, 36'500 * kDayMs, &ms);
    cfg.retention.ended_after_ms = ms >= 0 ? ms : days * kDayMs;
    r.Int("interval_ms", 10, kDayMs, &cfg.retention.interval_ms);
    r.Int("batch_rows", 1, 100'000, &cfg.retention.batch_rows);
    // Ages of spent API tokens and of audit entries, as ended_after_*: the _ms form wins.
    auto age = [&](const char* days_key, const char* ms_key, std::int64_t* out) {
      std::int64_t d = *out / kDayMs;
      r.Int(days_key, 0, 36'500, &d);
      std::int64_t m = -1;
      r.Int(ms_key, 0, 36'500 * kDayMs, &m);
      *out = m >= 0 ? m : d * kDayMs;
    };
    age("tokens_after_days", "tokens_after_ms", &cfg.retention.tokens_after_ms);
    age("audit_after_days", "audit_after_ms", &cfg.retention.audit_after_ms);
    r.Int("vacuum_pages", 0, 1'000'000, &cfg.retention.vacuum_pages);
    WEFT_RETURN_IF_ERROR(r.Finish());
  }
  return cfg;
}

Result<Config> LoadConfigFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::NotFound("cannot read config file " + path.string() +
                            "; check the path given to --config, or omit --config to use the defaults");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path.string());
}

Result<Flags> ParseFlags(int argc, const char* const* argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::filesystem::path* out) -> Status {
      if (i + 1 >= argc) return Status::Invalid(std::string(arg) + " needs a value");
      *out = argv[++i];
      if (out->empty()) return Status::Invalid(std::string(arg) + " needs a non-empty value");
      return Status::Ok();
    };
    if (arg == "--config") {
      WEFT_RETURN_IF_ERROR(value(&flags.config_path));
    } else if (arg == "--data-dir") {
      WEFT_RETURN_IF_ERROR(value(&flags.data_dir));
    } else if (arg == "--help" || arg == "-h") {
      flags.help = true;
    } else if (arg == "--version") {
      flags.version = true;
    } else if (arg == "--new-keys") {
      flags.new_keys = true;
    } else if (arg == "--vacuum") {
      flags.vacuum = true;
    } else {
      return Status::Invalid("unknown argument '" + std::string(arg) +
                             "'; weftd takes --config FILE, --data-dir DIR, --new-keys and --vacuum");
    }
  }
  return flags;
}

}  // namespace weft::server
