// The JSON API of weft-web (docs/web.md, "The HTTP API"): /api/v1/login,
// /logout, /session, and /api/v1/<op> for every op of docs/protocol.md, each
// turned into one request to weftd on behalf of the browser's session or API
// token. Runs on the I/O threads; the calls themselves go through the WeftdPool.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include <utility>  // before Asio: awaitable.hpp uses std::exchange without it

#include <boost/asio/awaitable.hpp>

#include "http_util.hpp"
#include "weft/common/status.hpp"
#include "weft/web/config.hpp"
#include "weft/web/events.hpp"
#include "weftd_pool.hpp"

namespace weft::web {

// What a request says about who sends it.
struct Caller {
  std::string session;      // the weft_session cookie
  std::string token;        // Authorization: Bearer <API token>
  std::string csrf;         // X-CSRF-Token
  std::string tenant;       // X-Weft-Tenant (a superadmin acting in another tenant)
  std::string client_addr;  // the browser's IP address
  bool tls = false;
};
Caller CallerOf(const http::request_header<>& header, const std::string& client_addr, bool tls);

// Attempts per client address (logins; API requests): a token bucket each,
// refilled at `per_minute` and holding at most `burst`.
class LoginLimiter {
 public:
  LoginLimiter(int per_minute, int burst) : per_minute_(per_minute), burst_(burst) {}
  bool Admit(const std::string& address);

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  const int per_minute_;
  const int burst_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

class Api {
 public:
  Api(const Config& config, WeftdPool& pool);

  // A request to /api/v1/... other than events and resource uploads, its body read.
  boost::asio::awaitable<Response> Handle(const Request& request, const Target& target, const Caller& caller);

  // One op sent to weftd on behalf of `caller`.
  boost::asio::awaitable<CallResult> Call(std::string op, json body, const Caller& caller,
                                          std::vector<std::string> blobs = {});
  // Who the caller is (their session or token), from weftd: the viewer, or the
  // response refusing the caller (401 when not logged in).
  struct Identity {
    std::optional<Viewer> viewer;
    std::optional<Response> refusal;
    // weftd could not be asked (down, or it did not answer): the session may still be good.
    bool unreachable = false;
  };
  boost::asio::awaitable<Identity> WhoIs(const Caller& caller, unsigned version);

  // Whether `caller` may send a `method` request at all: a response refusing
  // it (401 not logged in, 403 without the CSRF header), or none.
  std::optional<Response> Refusal(http::verb method, const Caller& caller, unsigned version) const;

  // The error answer for a failed call (weftd's code and sentence, or 503
  // when weftd did not answer or cannot be reached), with the status the code
  // maps to. A failure to reach weftd is logged by the pool, not per call.
  Response ErrorFor(const CallResult& result, unsigned version, bool keep_alive, bool tls) const;
  Response Error(const Status& status, unsigned version, bool keep_alive, bool tls) const {
    return ErrorResponse(status, json::object(), version, keep_alive, tls);
  }

 private:
  boost::asio::awaitable<Response> Login(const Request& request, const json& body, const Caller& caller);
  boost::asio::awaitable<Response> Logout(const Request& request, const Caller& caller);
  boost::asio::awaitable<Response> Session(const Request& request, const Caller& caller);
  boost::asio::awaitable<Response> Op(const Request& request, const std::string& op, const json& body,
                                      const Caller& caller);
  // Whether weftd answers `op` as one that only reads (its server.ops list):
  // such an op may be sent with GET and needs no CSRF header. Nothing when
  // weftd does not name the op (or could not be asked).
  boost::asio::awaitable<std::optional<bool>> ReadsOnly(const std::string& op);
  // The body of a POST (a JSON object; empty means {}) or a GET's query.
  Result<json> BodyOf(const Request& request, const Target& target) const;

  const Config& config_;
  WeftdPool& pool_;
  LoginLimiter login_limiter_;
  LoginLimiter request_limiter_;  // every API request, per address
  std::mutex ops_mu_;
  std::map<std::string, bool> read_ops_;  // op -> only reads, from server.ops
  std::chrono::steady_clock::time_point ops_asked_at_{};
};

// 401 with {"error":{"code":"DENIED","message":"not logged in: ..."}}.
Response NotLoggedIn(unsigned version, bool keep_alive, bool tls);

}  // namespace weft::web
