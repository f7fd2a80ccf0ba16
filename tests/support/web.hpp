// A real weft-web for integration tests and weft-bench: its own directory
// (weft-web.toml, log, a small UI), an ephemeral port read back from its
// address file, a self-signed certificate when TLS is asked for; and a small
// HTTP/1.1 client (plain or TLS, keep-alive, raw bytes for misbehaving
// clients, server-sent events) built on Boost.Beast.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft::testing {

struct WebOptions {
  std::string name = "weft-web-test";
  bool tls = false;            // a self-signed certificate for 127.0.0.1 (the openssl command)
  bool require_login = true;   // false: development mode, requests pass without a session
  std::filesystem::path credentials = {};  // a gateway credential (weftd with curve on)
  std::string server_toml = {};  // more keys of each table
  std::string limits_toml = {};
  std::string events_toml = {};
  std::string weftd_toml = {};
  std::string events = {};  // a fixed events endpoint; "" lets weft-web ask weftd (and follow the leader)
  std::string api = {};     // weftd's api endpoint(s) instead of the given weftd's
  std::filesystem::path static_dir = {};  // empty: a UI of two test files (index.html, app.js)
  bool die_with_parent = false;
};

class WebGateway {
 public:
  // Starts at once against `weftd` (throws with the log when it does not come up).
  WebGateway(const Weftd& weftd, WebOptions options = {});
  ~WebGateway();
  WebGateway(const WebGateway&) = delete;
  WebGateway& operator=(const WebGateway&) = delete;

  const std::string& url() const { return url_; }  // "http://127.0.0.1:41234"
  std::filesystem::path cert() const { return dir_ / "cert.pem"; }  // with tls: what a client trusts
  const std::filesystem::path& dir() const { return dir_; }
  std::string Log() const;
  Process& process() { return proc_; }

 private:
  WebOptions options_;
  TempDir temp_;
  std::filesystem::path dir_;
  Process proc_;
  std::string url_;
};

struct HttpReply {
  int status = 0;
  std::multimap<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string Header(const std::string& lower_name) const;
  nlohmann::json Json() const;
};

struct SseEvent {
  std::string id;
  std::string type;
  std::string data;
};

// One connection to weft-web. Not thread-safe.
class HttpConnection {
 public:
  // `url` as WebGateway::url(); `ca`: the certificate to trust for https.
  explicit HttpConnection(const std::string& url, const std::filesystem::path& ca = {});
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // One request and its whole reply (throws when the connection fails).
  HttpReply Send(const std::string& method, const std::string& target, const std::string& body = "",
                 const std::map<std::string, std::string>& headers = {});

  // Raw bytes, for clients that misbehave.
  void Write(std::string_view bytes);
  // Waits up to `timeout` for the server to close the connection; whatever it
  // sent meanwhile goes to *received.
  bool WaitClosed(std::chrono::milliseconds timeout, std::string* received = nullptr);

  // Starts an event stream: sends the GET and reads the reply's headers.
  HttpReply OpenEvents(const std::string& target, const std::map<std::string, std::string>& headers = {});
  // The next event (comments skipped), or nullopt when none came within `timeout`
  // or the stream ended.
  std::optional<SseEvent> NextEvent(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sends one request on a fresh connection.
HttpReply HttpSend(const std::string& url, const std::string& method, const std::string& target,
                   const std::string& body = "", const std::map<std::string, std::string>& headers = {},
                   const std::filesystem::path& ca = {});

}  // namespace weft::testing
