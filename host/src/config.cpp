#include "weft/host/config.hpp"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "weft/common/log.hpp"

namespace weft::host {
namespace {

const std::set<std::string, std::less<>> kKnownKeys = {
    "server",          "host_id",           "capacity",         "plugin_dirs",      "take_wait_ms",
    "request_timeout_ms", "task_timeout_ms", "shutdown_grace_ms", "log_level"};

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

Status ReadInt(const toml::table& table, std::string_view key, std::string_view source, std::int64_t min,
               std::int64_t max, int* out) {
  const toml::node* node = table.get(key);
  if (!node) return Status::Ok();
  std::optional<std::int64_t> v = node->value_exact<std::int64_t>();
  if (!v || *v < min || *v > max) {
    std::string got = v ? std::to_string(*v) : "a " + TypeName(*node);
    return Status::Invalid(std::string(source) + ": '" + std::string(key) + "' must be an integer from " +
                           std::to_string(min) + " to " + std::to_string(max) + ", got " + got);
  }
  *out = static_cast<int>(*v);
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
  std::filesystem::path plugins = exe_dir.parent_path() / "plugins";
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
                             "request_timeout_ms, task_timeout_ms, shutdown_grace_ms, log_level");
    }
  }
  WEFT_RETURN_IF_ERROR(ReadString(table, "server", source, &config.server));
  WEFT_RETURN_IF_ERROR(ReadString(table, "host_id", source, &config.host_id));
  WEFT_RETURN_IF_ERROR(ReadString(table, "log_level", source, &config.log_level));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "capacity", source, 1, 4096, &config.capacity));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "take_wait_ms", source, 0, 30'000, &config.take_wait_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "request_timeout_ms", source, 100, 600'000, &config.request_timeout_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "task_timeout_ms", source, 1, INT_MAX, &config.task_timeout_ms));
  WEFT_RETURN_IF_ERROR(ReadInt(table, "shutdown_grace_ms", source, 0, 3'600'000, &config.shutdown_grace_ms));
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
  log::Level level;
  if (!log::ParseLevel(config.log_level, &level)) {
    return Status::Invalid("'log_level' must be one of debug, info, warn, error, got \"" + config.log_level + "\"");
  }
  return Status::Ok();
}

}  // namespace weft::host
