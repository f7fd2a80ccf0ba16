// weft-web: the HTTPS gateway between browsers and weftd (docs/web.md).
//
// Serves the UI's static files, the JSON API under /api/v1/ (each request sent
// to weftd on behalf of the browser's session or API token), resource uploads
// and server-sent events. HTTP is Boost.Beast on Boost.Asio coroutines, TLS is
// OpenSSL; every connection is a coroutine on a strand of its own, so a slow
// client holds only its own connection, and its reads and writes have deadlines.
#pragma once

#include <memory>
#include <string>

#include "weft/common/status.hpp"
#include "weft/web/config.hpp"

namespace weft::web {

class Gateway {
 public:
  explicit Gateway(Config config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds the listener, loads the TLS files and the gateway credential,
  // connects to weftd; nothing is served yet.
  Status Start();
  // Serves until SIGTERM or SIGINT.
  void Run();
  // "https://127.0.0.1:8443" as bound.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::web
