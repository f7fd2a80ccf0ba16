#include "weft/host/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "weft/common/log.hpp"

namespace weft::host {
namespace {

const std::set<std::string, std::less<>> kKnownKeys = {
    "server",          "host_id",           "capacity",         "plugin_dirs",      "take_wait_ms",
    "request_timeout_ms", "task_timeout_ms", "shutdown_grace_ms", "log_level", "workers",
    "worker_memory_limit_mb", "tenants", "state_dir", "resource_cache_dir", "resource_plugin_dir",
    "enroll_token", "server_key",
    "resource_sync_ms", "metrics_listen", "lua_memory_mb", "lua_instructions", "split_hold_ms"};

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "weft-host";
  return buf;
}

std::string TypeName(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

template <typename Int>
Status ReadInt(const toml::table& table, std::string_view key, std::string_view source, std::int64_t min,
               std::int64_t max, Int* out) {
  const toml::node* node = table.get(key);
  if (!node) return Status::Ok();
  std::optional<std::int64_t> v = node->value_exact<std::int64_t>();
  if (!v || *v < min || *v > max) {
    std::string got = v ? std::to_string(*v) : "a " + TypeName(*node);
    return Status::Invalid(std::string(source) + ": '" + std::string(key) + "' must be an integer from " +
                           std::to_string(min) + " to " + std::to_string(max) + ", got " + got);
  }
  *out = static_cast<Int>(*v);
  return Status::Ok();
}

Status ReadString(const toml::table& table, std::string_view key, std::string_view source, std::string* out) {
  const toml::node* node = table.get(key);
  if (!node) return Status::Ok();
  std::optional<std::string> v = node->value_exact<std::string>();
  if (!v) {
    return Status::Invalid(std::string(source) + ": '" + std::string(key) + "' must be a string, got a " +
                           TypeName(*node));
  }
  *out = *v;
  return Status::Ok();
}

}  // namespace

HostConfig DefaultConfig(const std::filesystem::path& exe_dir) {
  HostConfig config;
  config.host_id = Hostname();
  // <exe dir>/../plugins in a build tree; <prefix>/lib/weft/plugins once installed.
  std::filesystem::path plugins = exe_dir.parent_path() / "plugins";
  std::error_code ec;
  if (const auto installed = exe_dir.parent_path() / "lib" / "weft" / "plugins";
      !std::filesystem::is_directory(plugins, ec) && std::filesystem::is_directory(installed, ec)) {
    plugins = installed;
  }
  config.plugin_dirs = {plugins / "providers", plugins / "automators"};
  return config;
}

Result<HostConfig> ParseConfig(std::string_view toml_text, std::string_view source,
                               const std::filesystem::path& base_dir, const std::filesystem::path& exe_dir) {
  HostConfig config = DefaultConfig(exe_dir);
  toml::table table;
  // toml++ reports syntax errors by throwing; this is the component's edge.
  try {
    table = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    out << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::Invalid(out.str());
  }
  for (const auto& [key, node] : table) {
    if (!kKnownKeys.contains(key.str())) {
      return Status::Invalid(std::string(source) + ": unknown key '" + std::string(key.str()) +
                             "'; known keys are server, host_id, capacity, plugin_dirs, take_wait_ms, "
                             "request_timeout_ms, task_timeout_ms, shutdown_grace_ms, log_level, workers, "
                             "worker_memory_limit_mb, tenants, state_dir, resource_cache_dir, "
                             "resource_plugin_dir, resource_sync_ms, enroll_token, server_key, metrics_listen, "
                             "lua_memory_mb, lua_instructions, split_hold_ms");
    }
  }
  WEFT_RETURN_IF_ERROR(ReadString(table, "server", source, &config.server));
  WEFT_RETURN_IF_ERROR(ReadString(table, "host_id", source, &config.host_id));
  WEFT_RETURN_IF_ERROR(ReadString(table, "log_level", source, &config.log_level));
  WEFT_RETURN_IF_ERROR(ReadString(table, "enroll_token", source, &config.enroll_token));
  WEFT_RETURN_IF_ERROR(ReadString(table, "server_key", source, &config.server_key));
  WEFT_RETURN_IF_ERROR(ReadString(table, "metrics_listen", source, &config.metrics_listen));
  if (!config.enroll_token.empty()) {
    Result<curve::Token> token = curve::DecodeToken(config.enroll_token);
    if (!token.ok()) return Status::Invalid(std::string(source) + ": 'enroll_token' is " + token.status().message());
  }
  if (!config.server_key.empty() && !curve::IsKey(config.server_key))
    return Status::Invalid(std::string(source) + ": 'server_key' must be weftd's 40-character Z85 public key");
  WEFT_RETURN_IF_ERROR(ReadInt(table, "capacity", source, 1, 4096, &config.capacity));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "take_wait_ms", source, 0, 30'000, &config.take_wait_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "request_timeout_ms", source, 100, 600'000, &config.request_timeout_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "task_timeout_ms", source, 1, INT_MAX, &config.task_timeout_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "shutdown_grace_ms", source, 0, 3'600'000, &config.shutdown_grace_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "workers", source, 1, 256, &config.workers));
  if (table.contains("workers")) config.workers_set = true;
  WEFT_RETURN_IF_ERROR(
      ReadInt(table, "worker_memory_limit_mb", source, 16, 1024 * 1024, &config.worker_memory_limit_mb));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "resource_sync_ms", source, 50, 3'600'000, &config.resource_sync_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "split_hold_ms", source, 0, 3'600'000, &config.split_hold_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "lua_memory_mb", source, LuaBudget::kMinMemoryMb, LuaBudget::kMaxMemoryMb,
                               &config.lua.memory_mb));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "lua_instructions", source, LuaBudget::kMinInstructions,
                               LuaBudget::kMaxInstructions, &config.lua.instructions));
  for (auto [key, out] : {std::pair{"state_dir", &config.state_dir},
                          std::pair{"resource_cache_dir", &config.resource_cache_dir},
                          std::pair{"resource_plugin_dir", &config.resource_plugin_dir}}) {
    std::string dir;
    WEFT_RETURN_IF_ERROR(ReadString(table, key, source, &dir));
    if (table.get(key) && dir.empty())
      return Status::Invalid(std::string(source) + ": '" + key + "' must be a non-empty path");
    if (!dir.empty()) *out = std::filesystem::path(dir).is_absolute() ? std::filesystem::path(dir) : base_dir / dir;
  }
  if (const toml::node* tenants = table.get("tenants")) {
    const toml::array* array = tenants->as_array();
    if (!array) {
      return Status::Invalid(std::string(source) + ": 'tenants' must be an array of tenant names, got a " +
                             TypeName(*tenants));
    }
    for (std::size_t i = 0; i < array->size(); ++i) {
      std::optional<std::string> name = (*array)[i].value_exact<std::string>();
      if (!name || name->empty()) {
        return Status::Invalid(std::string(source) + ": 'tenants[" + std::to_string(i) +
                               "]' must be a non-empty string");
      }
      config.tenants.push_back(*name);
    }
  }
  if (const toml::node* dirs = table.get("plugin_dirs")) {
    const toml::array* array = dirs->as_array();
    if (!array) {
      return Status::Invalid(std::string(source) + ": 'plugin_dirs' must be an array of strings, got a " +
                             TypeName(*dirs));
    }
    config.plugin_dirs.clear();
    for (std::size_t i = 0; i < array->size(); ++i) {
      std::optional<std::string> dir = (*array)[i].value_exact<std::string>();
      if (!dir || dir->empty()) {
        return Status::Invalid(std::string(source) + ": 'plugin_dirs[" + std::to_string(i) +
                               "]' must be a non-empty string");
      }
      std::filesystem::path p(*dir);
      config.plugin_dirs.push_back(p.is_absolute() ? p : base_dir / p);
    }
  }
  WEFT_RETURN_IF_ERROR(ValidateConfig(config).WithContext(source));
  return config;
}

Result<HostConfig> LoadConfigFile(const std::filesystem::path& path, const std::filesystem::path& exe_dir) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read config file " + path.string() + "; check the --config path");
  std::ostringstream text;
  text << in.rdbuf();
  std::filesystem::path base = std::filesystem::absolute(path).parent_path();
  return ParseConfig(text.str(), path.string(), base, exe_dir);
}

Status ValidateConfig(const HostConfig& config) {
  if (config.server.empty()) return Status::Invalid("'server' must be a ZeroMQ endpoint like tcp://127.0.0.1:7421");
  if (config.host_id.empty() || config.host_id.size() > 128) {
    return Status::Invalid("'host_id' must be 1 to 128 characters [A-Za-z0-9_.-]");
  }
  for (char c : config.host_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) {
      return Status::Invalid("'host_id' \"" + config.host_id +
                             "\" may only contain A-Z a-z 0-9 _ . -; set host_id in the config or --host-id");
    }
  }
  if (config.capacity < 1 || config.capacity > 4096) {
    return Status::Invalid("'capacity' must be an integer from 1 to 4096, got " + std::to_string(config.capacity));
  }
  if (config.workers < 1 || config.workers > 256) {
    return Status::Invalid("'workers' must be an integer from 1 to 256, got " + std::to_string(config.workers));
  }
  if (config.worker_memory_limit_mb < 16) {
    return Status::Invalid("'worker_memory_limit_mb' must be at least 16, got " +
                           std::to_string(config.worker_memory_limit_mb));
  }
  if (!config.tenants.empty() && static_cast<int>(config.tenants.size()) > EffectiveWorkers(config)) {
    return Status::Invalid("'tenants' lists " + std::to_string(config.tenants.size()) + " tenants but only " +
                           std::to_string(EffectiveWorkers(config)) +
                           " worker(s) run (min of workers and capacity); each tenant needs a worker of its own");
  }
  for (const std::string& t : config.tenants) {
    if (t.empty()) return Status::Invalid("'tenants' must not contain an empty name");
  }
  log::Level level;
  if (!log::ParseLevel(config.log_level, &level)) {
    return Status::Invalid("'log_level' must be one of debug, info, warn, error, got \"" + config.log_level + "\"");
  }
  return Status::Ok();
}

std::filesystem::path StateDir(const HostConfig& config) {
  if (!config.state_dir.empty()) return config.state_dir;
  std::filesystem::path base;
  if (geteuid() == 0) {
    base = "/var/lib/weft-host";
  } else if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && xdg[0] == '/') {
    base = std::filesystem::path(xdg) / "weft-host";
  } else if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    base = std::filesystem::path(home) / ".local" / "state" / "weft-host";
  } else {
    base = "/tmp/weft-host-" + std::to_string(geteuid());
  }
  return base / config.host_id;
}

std::filesystem::path ResourceCacheDir(const HostConfig& config) {
  return config.resource_cache_dir.empty() ? StateDir(config) / "resources" : config.resource_cache_dir;
}

std::filesystem::path ResourcePluginDir(const HostConfig& config) {
  return config.resource_plugin_dir.empty() ? StateDir(config) / "plugins" : config.resource_plugin_dir;
}

std::vector<std::string> SyncedTenants(const HostConfig& config) {
  if (config.tenants.empty()) return {"default"};
  std::vector<std::string> out;
  for (const std::string& t : config.tenants)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

int EffectiveWorkers(const HostConfig& config) { return std::max(1, std::min(config.workers, config.capacity)); }

std::vector<std::string> ConfigWarnings(const HostConfig& config) {
  std::vector<std::string> warnings;
  // Warned about, not refused: a host whose capacity was lowered (in the file,
  // or by --capacity for a run) keeps starting, with fewer workers.
  if (config.workers_set && config.workers > config.capacity)
    warnings.push_back("'workers' = " + std::to_string(config.workers) + " is more than 'capacity' = " +
                       std::to_string(config.capacity) + ": only " + std::to_string(EffectiveWorkers(config)) +
                       " worker(s) run, one task slot each (a worker gets at least one); set workers to at most "
                       "capacity, or raise capacity");
  return warnings;
}

int WorkerThreads(const HostConfig& config, int index) {
  const int n = EffectiveWorkers(config);
  return std::max(1, config.capacity / n + (index < config.capacity % n ? 1 : 0));
}

std::string WorkerConfigJson(const HostConfig& config) {
  nlohmann::json j = {{"server", config.server},
                      {"host_id", config.host_id},
                      {"capacity", config.capacity},
                      {"take_wait_ms", config.take_wait_ms},
                      {"request_timeout_ms", config.request_timeout_ms},
                      {"task_timeout_ms", config.task_timeout_ms},
                      {"shutdown_grace_ms", config.shutdown_grace_ms},
                      {"log_level", config.log_level},
                      {"workers", config.workers},
                      {"worker_memory_limit_mb", config.worker_memory_limit_mb},
                      {"lua_memory_mb", config.lua.memory_mb},
                      {"lua_instructions", config.lua.instructions},
                      {"tenants", config.tenants},
                      {"resource_cache_dir", ResourceCacheDir(config).string()},
                      {"state_dir", StateDir(config).string()}};
  return j.dump();
}

Result<HostConfig> WorkerConfigFromJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Invalid("--worker-config is not a JSON object");
  HostConfig config;
  // nlohmann throws on a type mismatch; the master wrote this text, so a
  // mismatch means a master and worker of different builds.
  try {
    config.server = j.at("server").get<std::string>();
    config.host_id = j.at("host_id").get<std::string>();
    config.capacity = j.at("capacity").get<int>();
    config.take_wait_ms = j.at("take_wait_ms").get<int>();
    config.request_timeout_ms = j.at("request_timeout_ms").get<int>();
    config.task_timeout_ms = j.at("task_timeout_ms").get<int>();
    config.shutdown_grace_ms = j.at("shutdown_grace_ms").get<int>();
    config.log_level = j.at("log_level").get<std::string>();
    config.workers = j.at("workers").get<int>();
    config.worker_memory_limit_mb = j.at("worker_memory_limit_mb").get<int>();
    config.lua.memory_mb = j.at("lua_memory_mb").get<int>();
    config.lua.instructions = j.at("lua_instructions").get<std::int64_t>();
    config.tenants = j.at("tenants").get<std::vector<std::string>>();
    config.resource_cache_dir = j.value("resource_cache_dir", std::string());
    config.state_dir = j.value("state_dir", std::string());
  } catch (const nlohmann::json::exception& e) {
    return Status::Invalid(std::string("--worker-config: ") + e.what());
  }
  WEFT_RETURN_IF_ERROR(ValidateConfig(config));
  WEFT_RETURN_IF_ERROR(LoadHostCredential(config));
  return config;
}

std::filesystem::path CredentialPath(const HostConfig& config) { return StateDir(config) / "credential.json"; }

Status LoadHostCredential(HostConfig& config) {
  Result<curve::Credential> c = curve::LoadCredential(CredentialPath(config));
  if (!c.ok()) return c.status().code() == Code::kNotFound ? Status::Ok() : c.status();
  config.curve_server_key = c->server_key;
  config.curve_keys = c->keys;
  return Status::Ok();
}

client::Options ClientOptions(const HostConfig& config, int timeout_ms) {
  client::Options o;
  o.endpoint = config.server;
  o.timeout_ms = timeout_ms;
  o.server_key = config.curve_server_key;
  o.keys = config.curve_keys;
  return o;
}

}  // namespace weft::host
