// A minimal HTTP/1.0 GET over a plain socket, for /metrics and Prometheus's
// API in tests and weft-bench (no TLS, IPv4 loopback addresses).
#pragma once

#include <string>

namespace weft::testing {

struct HttpReply {
  int status = 0;  // 0: no answer (refused, closed, or not HTTP)
  std::string body;
};

// GET http://HOST:PORT<path>; `host_port` is "127.0.0.1:9464". Waits up to 30 s for the answer.
HttpReply HttpGet(const std::string& host_port, const std::string& path);
// The same for a URL such as "http://127.0.0.1:9464/metrics".
HttpReply HttpGetUrl(const std::string& url);
// "http://127.0.0.1:4711/metrics" -> "127.0.0.1:4711"
std::string HostPortOf(const std::string& url);

}  // namespace weft::testing
