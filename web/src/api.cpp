#include "api.hpp"

#include <algorithm>

#include <boost/asio/use_awaitable.hpp>

#include "weft/common/json_parse.hpp"
#include "weft/common/log.hpp"

namespace weft::web {
namespace {

namespace asio = boost::asio;
constexpr const char* kLog = "weft-web";

bool ValidOpName(const std::string& op) {
  if (op.empty() || op.size() > 64) return false;
  return std::all_of(op.begin(), op.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_';
  });
}

bool ChangesState(http::verb method) {
  return method == http::verb::post || method == http::verb::put || method == http::verb::delete_;
}

}  // namespace

Caller CallerOf(const http::request_header<>& header, const std::string& client_addr, bool tls) {
  Caller c;
  c.client_addr = client_addr;
  c.tls = tls;
  c.session = CookieValue(header[http::field::cookie], kSessionCookie);
  std::string_view auth = header[http::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() > kBearer.size() && auth.substr(0, kBearer.size()) == kBearer)
    c.token = std::string(auth.substr(kBearer.size()));
  c.csrf = std::string(header["X-CSRF-Token"]);
  c.tenant = std::string(header["X-Weft-Tenant"]);
  return c;
}

bool LoginLimiter::Admit(const std::string& address) {
  if (per_minute_ <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (buckets_.size() > 10000) {
    // Addresses quiet for a few minutes have full buckets again: forget them.
    for (auto it = buckets_.begin(); it != buckets_.end();)
      it = now - it->second.at > std::chrono::minutes(5) ? buckets_.erase(it) : std::next(it);
  }
  auto [it, fresh] = buckets_.try_emplace(address, Bucket{static_cast<double>(burst_), now});
  Bucket& b = it->second;
  if (!fresh) {
    const double minutes = std::chrono::duration<double>(now - b.at).count() / 60.0;
    b.tokens = std::min(static_cast<double>(burst_), b.tokens + minutes * per_minute_);
    b.at = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

Response NotLoggedIn(unsigned version, bool keep_alive, bool tls) {
  Response res = ErrorResponse(
      Status::Denied("not logged in: log in first (POST /api/v1/login), or send an API token "
                     "(Authorization: Bearer ...)"),
      json::object(), version, keep_alive, tls);
  res.result(http::status::unauthorized);
  return res;
}

Api::Api(const Config& config, WeftdPool& pool)
    : config_(config),
      pool_(pool),
      login_limiter_(config.limits.login_per_minute, config.limits.login_burst),
      request_limiter_(config.limits.requests_per_s * 60, config.limits.requests_burst) {}

asio::awaitable<CallResult> Api::Call(std::string op, json body, const Caller& caller,
                                      std::vector<std::string> blobs) {
  wire::Request req;
  req.op = std::move(op);
  req.body = std::move(body);
  req.blobs = std::move(blobs);
  req.tenant = caller.tenant;
  req.on_behalf.client_addr = caller.client_addr;
  if (!caller.token.empty()) {
    req.on_behalf.token = caller.token;  // a token is not ambient authority: no CSRF
  } else {
    req.on_behalf.session = caller.session;
    req.on_behalf.csrf = caller.csrf;
  }
  co_return co_await pool_.AsyncCall(std::move(req), asio::use_awaitable);
}

asio::awaitable<std::optional<bool>> Api::ReadsOnly(const std::string& op) {
  constexpr auto kRefreshEvery = std::chrono::seconds(5);
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    auto it = read_ops_.find(op);
    // An op weftd did not name may be one it gained since (an upgrade): ask
    // again, but not more than every few seconds whatever browsers send.
    if (it != read_ops_.end()) co_return it->second;
    if (std::chrono::steady_clock::now() - ops_asked_at_ < kRefreshEvery) co_return std::nullopt;
    ops_asked_at_ = std::chrono::steady_clock::now();
  }
  // A named caller, not a temporary: gcc 12 destroys a temporary inside a
  // co_await expression twice.
  const Caller gateway_itself;
  CallResult r = co_await Call("server.ops", json::object(), gateway_itself);
  if (!r.ToStatus().ok()) {
    WEFT_LOG(kWarn, kLog) << "cannot learn which ops only read (server.ops): " << r.ToStatus().message()
                          << "; treating '" << op << "' as one that changes state";
    co_return std::nullopt;
  }
  std::map<std::string, bool> ops;
  for (const json& o : r.reply.body.value("ops", json::array()))
    if (o.is_object()) ops[o.value("op", "")] = o.value("reads", false);
  std::lock_guard<std::mutex> lock(ops_mu_);
  read_ops_ = std::move(ops);
  auto it = read_ops_.find(op);
  if (it == read_ops_.end()) co_return std::nullopt;
  co_return it->second;
}

asio::awaitable<Api::Identity> Api::WhoIs(const Caller& caller, unsigned version) {
  Identity out;
  if (caller.session.empty() && caller.token.empty()) {
    if (config_.server.require_login) {
      out.refusal = NotLoggedIn(version, false, caller.tls);
    } else {
      out.viewer = Viewer{"default", "", "superadmin"};  // development mode: weftd's security is off
    }
    co_return out;
  }
  CallResult r;
  std::string session = caller.session;
  if (!caller.token.empty()) {
    // A token has no session to describe: a short one made with the token
    // says whose it is, and ends at once.
    Caller anonymous;
    anonymous.client_addr = caller.client_addr;
    json body = {{"token", caller.token}};
    r = co_await Call("session.login", std::move(body), anonymous);
    session = r.ToStatus().ok() ? r.reply.body.value("session", "") : "";
    if (!session.empty()) {
      Caller temporary;
      temporary.session = session;
      temporary.csrf = r.reply.body.value("csrf_token", "");
      temporary.client_addr = caller.client_addr;
      (void)co_await Call("session.logout", json::object(), temporary);
    }
  } else {
    r = co_await Call("session.get", json::object(), caller);
  }
  if (!r.ToStatus().ok()) {
    out.refusal = ErrorFor(r, version, false, caller.tls);
    out.unreachable = !r.transport.ok();
    co_return out;
  }
  const json& b = r.reply.body;
  out.viewer = Viewer{b.value("tenant", ""), b.value("user", ""), b.value("role", "")};
  co_return out;
}

std::optional<Response> Api::Refusal(http::verb method, const Caller& caller, unsigned version) const {
  const bool tls = caller.tls;
  if (caller.session.empty() && caller.token.empty()) {
    if (config_.server.require_login) return NotLoggedIn(version, true, tls);
    return std::nullopt;
  }
  if (ChangesState(method) && caller.token.empty() && caller.csrf.empty())
    return ErrorResponse(Status::Denied("this request changes something but has no X-CSRF-Token header: send the "
                                        "csrf_token that login returned"),
                         json::object(), version, true, tls);
  return std::nullopt;
}

Response Api::ErrorFor(const CallResult& result, unsigned version, bool keep_alive, bool tls) const {
  if (!result.transport.ok()) {
    // Logged when weftd stops answering, then as counts (WeftdPool::Note): not for every call.
    WEFT_LOG(kDebug, kLog) << result.transport.message();
    if (result.unreachable)
      return ErrorResponse(Status::Unavailable("weftd cannot be reached: nothing listens at its address, so it is "
                                               "stopped or restarting. Try again once it is back (live pages "
                                               "reconnect by themselves); if it stays down, an operator must start "
                                               "weftd"),
                           json::object(), version, keep_alive, tls);
    return ErrorResponse(Status::Unavailable("weftd did not answer in time; try again in a moment"), json::object(),
                         version, keep_alive, tls);
  }
  Response res = ErrorResponse(result.reply.ToStatus(), result.reply.error.details, version, keep_alive, tls);
  // A session weftd no longer knows (expired, logged out, forged), or a dead
  // token: the browser should log in again.
  const json& details = result.reply.error.details;
  if (details.value("login_required", false)) res.result(http::status::unauthorized);
  // weftd's rate limits (logins, requests): UNAVAILABLE with the wait.
  if (auto wait = details.find("retry_after_ms"); wait != details.end() && wait->is_number_integer()) {
    res.result(http::status::too_many_requests);
    res.set(http::field::retry_after, std::to_string((wait->get<std::int64_t>() + 999) / 1000));
  }
  return res;
}

Result<json> Api::BodyOf(const Request& request, const Target& target) const {
  // A key named twice is refused here, as weftd refuses it: the body goes on
  // re-serialised, with one of the two, and weftd would never see the other.
  if (request.method() == http::verb::get) {
    if (!target.repeated.empty())
      return Status::Invalid("query parameter " + wire::Dump(json(target.repeated)) +
                             " appears twice; name each parameter once (each is the op's body field of its name, "
                             "and which of the two to take would be a guess)");
    json body = json::object();
    for (const auto& [key, value] : target.query) {
      WEFT_ASSIGN_OR_RETURN(body[key], QueryValue(key, value));
    }
    return body;
  }
  if (request.body().empty()) return json::object();
  WEFT_ASSIGN_OR_RETURN(json body, wire::ParseBody(request.body()));
  if (body.is_discarded() || !body.is_object())
    return Status::Invalid("the request body must be a JSON object (the op's body, docs/protocol.md)");
  return body;
}

asio::awaitable<Response> Api::Handle(const Request& request, const Target& target, const Caller& caller) {
  const unsigned version = request.version();
  const bool keep = request.keep_alive();
  const std::string name = target.path.substr(kApiPrefix.size());
  const http::verb method = request.method();
  if (method != http::verb::get && method != http::verb::post) {
    Response res = Error(Status::Invalid("use POST (or GET for an op that only reads) on " + target.path), version,
                         keep, caller.tls);
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET, POST");
    co_return res;
  }
  if (!request_limiter_.Admit(caller.client_addr)) {
    Response res = Error(Status::TooLarge("rate limit: more than " + std::to_string(config_.limits.requests_per_s) +
                                          " requests per second from " + caller.client_addr +
                                          " (limits.requests_per_s); slow down and retry"),
                         version, keep, caller.tls);
    res.set(http::field::retry_after, "1");
    co_return res;
  }
  Result<json> body = BodyOf(request, target);
  if (!body.ok()) co_return Error(body.status(), version, keep, caller.tls);

  if (name == "login" || name == "logout" || name == "session") {
    if (name == "session" ? method != http::verb::get : method != http::verb::post) {
      Response res = Error(Status::Invalid(std::string("use ") + (name == "session" ? "GET" : "POST") + " on " +
                                           target.path),
                           version, keep, caller.tls);
      res.result(http::status::method_not_allowed);
      co_return res;
    }
    if (name == "login") co_return co_await Login(request, *body, caller);
    if (name == "logout") co_return co_await Logout(request, caller);
    co_return co_await Session(request, caller);
  }
  if (!ValidOpName(name)) {
    Response res = Error(Status::NotFound("there is no API at " + target.path + "; ops are /api/v1/<op> with an op "
                                          "of docs/protocol.md such as /api/v1/cluster.list"),
                         version, keep, caller.tls);
    co_return res;
  }
  if (name.rfind("session.", 0) == 0)
    co_return Error(Status::Invalid("use /api/v1/login, /api/v1/logout and /api/v1/session for sessions"), version,
                    keep, caller.tls);
  // An op weftd does not name goes on as it came, and weftd says it has no such op.
  const std::optional<bool> listed = co_await ReadsOnly(name);
  const bool reads = listed.value_or(false);
  if (method == http::verb::get && listed == false) {
    Response res = Error(Status::Invalid("'" + name + "' may change something: send it with POST"), version, keep,
                         caller.tls);
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "POST");
    co_return res;
  }
  // A POST of an op that only reads needs no CSRF token either (weftd checks
  // every other op's token against the session, whatever the name says).
  const http::verb effective = reads ? http::verb::get : method;
  if (std::optional<Response> refused = Refusal(effective, caller, version)) co_return std::move(*refused);
  co_return co_await Op(request, name, *body, caller);
}

asio::awaitable<Response> Api::Op(const Request& request, const std::string& op, const json& body,
                                  const Caller& caller) {
  CallResult r = co_await Call(op, body, caller);
  if (!r.ToStatus().ok()) co_return ErrorFor(r, request.version(), request.keep_alive(), caller.tls);
  co_return JsonResponse(http::status::ok, r.reply.body, request.version(), request.keep_alive(), caller.tls);
}

asio::awaitable<Response> Api::Login(const Request& request, const json& body, const Caller& caller) {
  const bool tls = caller.tls;
  if (!login_limiter_.Admit(caller.client_addr)) {
    Response res = Error(Status::TooLarge("rate limit: too many login attempts from " + caller.client_addr +
                                          "; wait a minute and try again"),
                         request.version(), request.keep_alive(), tls);
    res.set(http::field::retry_after, std::to_string(60 / std::max(1, config_.limits.login_per_minute) + 1));
    co_return res;
  }
  Caller anonymous;  // a login carries no earlier session
  anonymous.client_addr = caller.client_addr;
  anonymous.tenant = caller.tenant;
  anonymous.tls = tls;
  CallResult r = co_await Call("session.login", body, anonymous);
  if (!r.ToStatus().ok()) co_return ErrorFor(r, request.version(), request.keep_alive(), tls);
  json out = r.reply.body;
  // The session id lives only in the HttpOnly cookie, out of the page's reach.
  const std::string session = out.value("session", "");
  out.erase("session");
  Response res = JsonResponse(http::status::ok, out, request.version(), request.keep_alive(), tls);
  res.set(http::field::set_cookie, SessionCookie(session, tls));
  co_return res;
}

asio::awaitable<Response> Api::Logout(const Request& request, const Caller& caller) {
  const bool tls = caller.tls;
  if (!caller.session.empty()) {
    if (caller.csrf.empty()) {
      if (std::optional<Response> refused = Refusal(http::verb::post, caller, request.version()))
        co_return std::move(*refused);
    }
    CallResult r = co_await Call("session.logout", json::object(), caller);
    if (!r.ToStatus().ok() && r.ToStatus().code() != Code::kNotFound)
      co_return ErrorFor(r, request.version(), request.keep_alive(), tls);
  }
  Response res = JsonResponse(http::status::ok, json::object(), request.version(), request.keep_alive(), tls);
  res.set(http::field::set_cookie, SessionCookie("", tls));
  co_return res;
}

asio::awaitable<Response> Api::Session(const Request& request, const Caller& caller) {
  if (caller.session.empty() && caller.token.empty())
    co_return NotLoggedIn(request.version(), request.keep_alive(), caller.tls);
  if (caller.session.empty()) {
    Identity who = co_await WhoIs(caller, request.version());
    if (who.refusal) co_return std::move(*who.refusal);
    const json out = {{"user", who.viewer->user}, {"tenant", who.viewer->tenant}, {"role", who.viewer->role}};
    co_return JsonResponse(http::status::ok, out, request.version(), request.keep_alive(), caller.tls);
  }
  CallResult r = co_await Call("session.get", json::object(), caller);
  if (!r.ToStatus().ok()) co_return ErrorFor(r, request.version(), request.keep_alive(), caller.tls);
  json out = r.reply.body;
  out.erase("session");
  co_return JsonResponse(http::status::ok, out, request.version(), request.keep_alive(), caller.tls);
}

}  // namespace weft::web
