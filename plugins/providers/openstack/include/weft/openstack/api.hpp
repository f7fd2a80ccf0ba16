// weft::openstack: the OpenStack APIs the openstack provider calls, over
// libcurl with JSON bodies (nlohmann-json): Keystone (v3 password auth, and
// v2.0 tokens for auth URLs written Coopr's way, ".../v2.0/tokens"), then
// Nova, Glance and Neutron at the endpoints of the token's service catalog.
//
//   openstack::Session os({.auth_url = "https://keystone:5000/v3", .user = "u", .password = "p",
//                          .project = "demo"}, {});
//   openstack::Reply r = os.Call("compute", "GET", "/servers/" + id);
//   if (!r.ok()) ... r.failure, r.message ("Nova GET /servers/... answered HTTP 404: ...")
//   else r.body["server"]["status"]
//
// Calls are retried with jittered exponential backoff when OpenStack asks for
// it: 5xx, a connection that failed, and rate limits (429, or 413 with
// Retry-After, whose wait is honoured). A call that is not safe to repeat
// (creating a server) is retried only on rate limits, which refuse a request
// before doing it. A refused token (401) is renewed once.
//
// Thread-safety: one Session per thread (it owns a curl handle, which keeps
// its connections open between calls).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace weft::openstack {

struct Credentials {
  // Keystone: "https://host:5000/v3", "https://host:5000" (v3), or a v2.0 URL
  // ("http://host:5000/v2.0/tokens", Coopr's form).
  std::string auth_url;
  std::string user;
  std::string password;
  std::string project;  // the project (Keystone v2.0's tenant) by name
  std::string user_domain = "Default";
  std::string project_domain = "Default";
  std::string region;  // empty: the catalog's first endpoint of a service
};

struct Options {
  int max_attempts = 6;  // per call, the first included
  std::chrono::milliseconds first_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  std::chrono::milliseconds max_retry_after{60000};  // a longer Retry-After fails the call
  std::chrono::milliseconds request_timeout{30000};
  bool verify_peer = true;  // TLS certificates checked
  // Asked while waiting between attempts: true stops the call (a cancelled task).
  std::function<bool()> cancelled;
  // Told about each retry, in a sentence.
  std::function<void(const std::string&)> note;
};

enum class Failure {
  kNone,
  kRefusedCredentials,  // Keystone said 401
  kDenied,              // 403: the user may not do this
  kNotFound,            // 404
  kConflict,            // 409
  kOverQuota,           // 413 or 403 for a quota, not a rate limit
  kInvalid,             // any other 4xx: the request names something wrong
  kNoEndpoint,          // the catalog has no such service (in the region)
  kUnavailable,         // retries ran out on 5xx, rate limits or a broken connection
  kCancelled,
};

struct Reply {
  Failure failure = Failure::kNone;
  std::string service;  // who answered: "Keystone", "Nova", "Glance", "Neutron"
  long http_status = 0;
  std::string message;  // a sentence: the service, method, path, status and OpenStack's own message
  std::string fault;    // OpenStack's own message from the error body ("Flavor 42 could not be found.")
  nlohmann::json body;  // the JSON reply (null when there was none)
  std::map<std::string, std::string> headers;  // names in lower case

  bool ok() const { return failure == Failure::kNone; }
};

// How a call may be repeated after a failure.
enum class Repeat {
  kSafe,             // reads, deletes: retried on 5xx, connection failures and rate limits
  kOnlyRateLimited,  // creations: retried only when a rate limit refused them
};

class Session {
 public:
  Session(Credentials credentials, Options options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Gets a token and the service catalog (done by the first Call too).
  Reply Authenticate();

  // `method` `path` (relative to the endpoint of catalog service `service`:
  // "compute", "image", "network") with `body` as JSON when it is not null.
  Reply Call(std::string_view service, std::string_view method, const std::string& path,
             const nlohmann::json& body = nullptr, Repeat repeat = Repeat::kSafe);

  // The endpoint of a catalog service, once authenticated; empty if none.
  std::string Endpoint(std::string_view service) const;
  // Keystone's v2.0 API is in use (Coopr's ".../v2.0/tokens" URLs).
  bool v2() const { return v2_; }
  // The URL tokens are asked at.
  const std::string& token_url() const { return token_url_; }
  const Credentials& credentials() const { return credentials_; }
  const Options& options() const { return options_; }
  // HTTP requests sent so far, retries included.
  int requests() const { return requests_; }

 private:
  Reply Send(std::string_view what, std::string_view method, const std::string& url,
             const std::string& body, const std::string& token, Repeat repeat);
  Reply Once(std::string_view what, std::string_view method, const std::string& url,
             const std::string& body, const std::string& token);
  bool Wait(std::chrono::milliseconds delay);
  Reply ReadCatalog(Reply reply);

  Credentials credentials_;
  Options options_;
  std::string token_url_;
  bool v2_ = false;
  std::string token_;
  std::map<std::string, std::string> endpoints_;  // catalog type -> URL without a trailing '/'
  void* curl_ = nullptr;
  int requests_ = 0;
};

// Percent-encodes a query value.
std::string QueryEncode(std::string_view text);

// Nova's name filter is a regular expression: `name` matched exactly.
std::string ExactNameRegex(std::string_view name);

}  // namespace weft::openstack
