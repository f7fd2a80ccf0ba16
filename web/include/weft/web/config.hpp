// weft-web's configuration: weft-web.toml (docs/web.md lists every key).
//
// Every key has a default except where TLS needs files, so a short file is a
// valid config. An unknown key is an error naming it and the keys its table
// knows; a bad value names the key and what would be accepted. Plain values;
// parsing never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "weft/common/log.hpp"
#include "weft/common/status.hpp"

namespace weft::web {

struct ServerConfig {
  std::string listen = "127.0.0.1:8443";  // host:port; port 0 lets the system pick
  std::filesystem::path static_dir = "/usr/share/weft/web";
  // Plain HTTP is served only on a loopback address unless this is set (behind a
  // TLS-terminating proxy on another machine, say).
  bool allow_plain_http = false;
  log::Level log_level = log::Level::kInfo;
  // When set, the bound URL and pid are written there as JSON once listening
  // ({"url":"https://127.0.0.1:8443","pid":..}); tests and scripts read it.
  std::filesystem::path address_file = {};
  int threads = 2;  // HTTP I/O threads
  // Requests without a session or token are refused (401). Turning it off passes
  // them to weftd as the gateway itself: only for development against a weftd
  // with security off.
  bool require_login = true;
};

struct TlsConfig {
  std::filesystem::path cert = {};  // PEM certificate chain
  std::filesystem::path key = {};   // PEM private key
  bool enabled() const { return !cert.empty(); }
};

struct WeftdConfig {
  // weftd's api endpoint, or several weftd's ("tcp://a:7420,tcp://b:7420"); "":
  // the credential's endpoint, else tcp://127.0.0.1:7420.
  std::string api = {};
  // A fixed events endpoint; "" (the default) asks weftd where the leader publishes them.
  std::string events = {};
  // A gateway credential file (weft gateway credentials NAME -f FILE); empty:
  // CurveZMQ off. Its api endpoint is used when `api` is not given.
  std::filesystem::path credentials = {};
  int clients = 8;           // connections (and threads) that carry requests to weftd
  int timeout_ms = 15000;    // per request to weftd
  // weft-web's own connection to each weftd sends a ZeroMQ heartbeat this
  // often; three unanswered, and a new connection not made within as long,
  // and weftd is taken to hang (stopped with SIGSTOP, or stuck).
  int heartbeat_ms = 1000;
};

struct LimitsConfig {
  std::size_t max_body_bytes = 1u << 20;          // a JSON request body
  std::size_t max_upload_bytes = std::size_t{1} << 30;  // a resource upload (PUT)
  std::size_t max_header_bytes = 16u << 10;       // request line and headers
  std::int64_t header_timeout_ms = 10000;         // to receive a request's headers (also the keep-alive idle time)
  std::int64_t body_timeout_ms = 30000;           // to receive a body; an upload: between two chunks
  std::int64_t write_timeout_ms = 30000;          // to send a response (SSE: one batch of events)
  int max_connections = 10000;
  int login_per_minute = 10;  // login attempts one address may make per minute
  int login_burst = 10;       // and at once
  // API requests one address may make per second, and at once (weftd does not
  // limit a gateway's connections: this is the per-browser limit). 0: none.
  int requests_per_s = 200;
  int requests_burst = 400;
};

struct EventsConfig {
  std::size_t buffer = 10000;        // events kept for Last-Event-ID resumption
  std::int64_t keepalive_ms = 15000; // a comment line on a quiet stream
  int max_streams = 1000;
  // How often a stream's session is checked again with weftd: a logout or an
  // expiry ends the stream within this.
  std::int64_t session_check_ms = 60000;
};

struct Config {
  ServerConfig server;
  TlsConfig tls;
  WeftdConfig weftd;
  LimitsConfig limits;
  EventsConfig events;
};

// Parses TOML text; `origin` names it in errors (a file path).
Result<Config> ParseConfig(std::string_view toml_text, std::string_view origin);
// ParseConfig of the file, and server.static_dir must be a folder with index.html.
Result<Config> LoadConfigFile(const std::filesystem::path& path);

// "host:port" split; INVALID naming the key when it is not one.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
Result<HostPort> ParseListen(std::string_view listen);
// Whether an address (IPv4 or IPv6 text) is a loopback one.
bool IsLoopback(std::string_view host);

}  // namespace weft::web
