#include "weft/web/config.hpp"

#include <arpa/inet.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/common/toml_table.hpp"

namespace weft::web {
namespace {

bool IsZmqEndpoint(const std::string& v) {
  return v.rfind("tcp://", 0) == 0 || v.rfind("ipc://", 0) == 0 || v.rfind("inproc://", 0) == 0;
}

Status ReadTables(const toml::table& root, const std::string& origin, Config& cfg) {
  auto table = [&](const char* name) { return root.get_as<toml::table>(name); };
  {
    TableReader t(table("server"), "server", origin);
    t.String("listen", &cfg.server.listen);
    t.Path("static_dir", &cfg.server.static_dir);
    t.Bool("allow_plain_http", &cfg.server.allow_plain_http);
    std::string level = "info";
    t.String("log_level", &level);
    if (!log::ParseLevel(level, &cfg.server.log_level))
      t.Fail(t.Where("log_level") + " is \"" + level + "\"; use one of debug, info, warn, error");
    t.Path("address_file", &cfg.server.address_file);
    t.Int("threads", 1, 64, &cfg.server.threads);
    t.Bool("require_login", &cfg.server.require_login);
    WEFT_RETURN_IF_ERROR(t.Finish());
    if (Result<HostPort> hp = ParseListen(cfg.server.listen); !hp.ok())
      return Status::Invalid(origin + ": server.listen: " + hp.status().message());
  }
  {
    TableReader t(table("tls"), "tls", origin);
    t.Path("cert", &cfg.tls.cert);
    t.Path("key", &cfg.tls.key);
    WEFT_RETURN_IF_ERROR(t.Finish());
    if (cfg.tls.cert.empty() != cfg.tls.key.empty())
      return Status::Invalid(origin + ": [tls] needs both cert and key (PEM files), or neither for plain HTTP");
  }
  {
    TableReader t(table("weftd"), "weftd", origin);
    t.String("api", &cfg.weftd.api);
    t.String("events", &cfg.weftd.events);
    t.Path("credentials", &cfg.weftd.credentials);
    t.Int("clients", 1, 256, &cfg.weftd.clients);
    t.Int("timeout_ms", 100, 3'600'000, &cfg.weftd.timeout_ms);
    t.Int("heartbeat_ms", 50, 600'000, &cfg.weftd.heartbeat_ms);
    WEFT_RETURN_IF_ERROR(t.Finish());
    // `api` may list several weftd ("tcp://a:7420,tcp://b:7420"); `events` is one endpoint or none.
    const std::string& api_list = cfg.weftd.api;
    for (std::size_t start = 0; !api_list.empty() && start <= api_list.size();) {
      std::size_t comma = api_list.find(',', start);
      if (comma == std::string::npos) comma = api_list.size();
      const std::string one = api_list.substr(start, comma - start);
      if (!IsZmqEndpoint(one))
        return Status::Invalid(origin + ": [weftd] api \"" + one +
                               "\" is not a ZeroMQ address; use one such as \"tcp://127.0.0.1:7420\", or a "
                               "comma-separated list of them (several weftd on one database)");
      start = comma + 1;
    }
    if (!cfg.weftd.events.empty() && (!IsZmqEndpoint(cfg.weftd.events) || cfg.weftd.events.find(',') != std::string::npos))
      return Status::Invalid(origin + ": [weftd] events \"" + cfg.weftd.events +
                             "\" is not one ZeroMQ address; leave it out to follow the events of the weftd that "
                             "leads (weft-web asks weftd where they are), or give one such as \"tcp://127.0.0.1:7422\"");
  }
  {
    TableReader t(table("limits"), "limits", origin);
    constexpr std::int64_t kGiB = 1 << 30;
    t.Size("max_body_bytes", 1024, kGiB, &cfg.limits.max_body_bytes);
    t.Size("max_upload_bytes", 0, 64 * kGiB, &cfg.limits.max_upload_bytes);
    t.Size("max_header_bytes", 1024, 1 << 20, &cfg.limits.max_header_bytes);
    t.Int("header_timeout_ms", 100, 3'600'000, &cfg.limits.header_timeout_ms);
    t.Int("body_timeout_ms", 100, 3'600'000, &cfg.limits.body_timeout_ms);
    t.Int("write_timeout_ms", 100, 3'600'000, &cfg.limits.write_timeout_ms);
    t.Int("max_connections", 1, 1'000'000, &cfg.limits.max_connections);
    t.Int("login_per_minute", 0, 1'000'000, &cfg.limits.login_per_minute);
    t.Int("login_burst", 1, 1'000'000, &cfg.limits.login_burst);
    t.Int("requests_per_s", 0, 1'000'000, &cfg.limits.requests_per_s);
    t.Int("requests_burst", 1, 1'000'000, &cfg.limits.requests_burst);
    WEFT_RETURN_IF_ERROR(t.Finish());
  }
  {
    TableReader t(table("events"), "events", origin);
    t.Size("buffer", 1, 10'000'000, &cfg.events.buffer);
    t.Int("keepalive_ms", 100, 3'600'000, &cfg.events.keepalive_ms);
    t.Int("max_streams", 1, 1'000'000, &cfg.events.max_streams);
    t.Int("session_check_ms", 100, 86'400'000, &cfg.events.session_check_ms);
    WEFT_RETURN_IF_ERROR(t.Finish());
  }
  return Status::Ok();
}

}  // namespace

Result<HostPort> ParseListen(std::string_view listen) {
  std::string text(listen);
  std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return Status::Invalid("\"" + text + "\" is not host:port; write it like \"127.0.0.1:8443\" or \"[::1]:8443\"");
  HostPort hp;
  hp.host = text.substr(0, colon);
  if (hp.host.size() > 2 && hp.host.front() == '[' && hp.host.back() == ']') hp.host = hp.host.substr(1, hp.host.size() - 2);
  const std::string port = text.substr(colon + 1);
  unsigned long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) return Status::Invalid("the port of \"" + text + "\" is not a number from 0 to 65535");
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535) return Status::Invalid("the port of \"" + text + "\" is not a number from 0 to 65535");
  hp.port = static_cast<std::uint16_t>(value);
  unsigned char buf[16];
  if (inet_pton(AF_INET, hp.host.c_str(), buf) != 1 && inet_pton(AF_INET6, hp.host.c_str(), buf) != 1)
    return Status::Invalid("\"" + hp.host + "\" is not an IP address; listen on an address such as 127.0.0.1 or 0.0.0.0");
  return hp;
}

bool IsLoopback(std::string_view host) {
  std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Result<Config> ParseConfig(std::string_view toml_text, std::string_view origin_view) {
  const std::string origin(origin_view);
  WEFT_ASSIGN_OR_RETURN(toml::table root, ParseToml(toml_text, origin_view));
  WEFT_RETURN_IF_ERROR(CheckTables(root, {"server", "tls", "weftd", "limits", "events"}, origin));
  Config cfg;
  WEFT_RETURN_IF_ERROR(ReadTables(root, origin, cfg));
  if (!cfg.tls.enabled() && !cfg.server.allow_plain_http) {
    Result<HostPort> hp = ParseListen(cfg.server.listen);
    if (!IsLoopback(hp->host))
      return Status::Invalid(origin + ": server.listen is " + cfg.server.listen +
                             ", not a loopback address, and [tls] has no cert: browsers would send passwords "
                             "and session cookies in the clear. Give [tls] cert and key, or set "
                             "server.allow_plain_http = true behind a TLS-terminating proxy");
  }
  if (!cfg.server.require_login && !cfg.weftd.credentials.empty())
    return Status::Invalid(origin + ": server.require_login = false is for development against a weftd with "
                           "security off; remove weftd.credentials or require login");
  return cfg;
}

Result<Config> LoadConfigFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the configuration file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  WEFT_ASSIGN_OR_RETURN(Config cfg, ParseConfig(text.str(), path.string()));
  // A UI folder that is not there would answer every page with 404: say so now.
  std::error_code ec;
  const std::string dir = "server.static_dir is \"" + cfg.server.static_dir.string() + "\"";
  if (!std::filesystem::is_directory(cfg.server.static_dir, ec))
    return Status::Invalid(path.string() + ": " + dir +
                           ", which is not a folder (missing?); point it at the UI's files (web/ui of the "
                           "source tree, installed as /usr/share/weft/web)");
  if (!std::filesystem::is_regular_file(cfg.server.static_dir / "index.html", ec))
    return Status::Invalid(path.string() + ": " + dir +
                           ", which has no index.html, so it is not the UI's folder; point it at the UI's files "
                           "(web/ui of the source tree, installed as /usr/share/weft/web)");
  return cfg;
}

}  // namespace weft::web
