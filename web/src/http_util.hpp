// Small HTTP pieces of weft-web that know nothing of sockets: responses with
// the security headers every answer carries, the error shape of the JSON API,
// the mapping from weftd's error codes to HTTP statuses, and the parsing of
// targets, query strings and cookies.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::web {

namespace http = boost::beast::http;
using json = nlohmann::json;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

inline constexpr std::string_view kSessionCookie = "weft_session";
inline constexpr std::string_view kApiPrefix = "/api/v1/";

// Content-Security-Policy and its companions: no inline script, no framing,
// no MIME sniffing, no referrer leaving the site; HSTS under TLS.
template <typename Fields>
void AddSecurityHeaders(Fields& fields, bool tls) {
  fields.set("Content-Security-Policy",
             "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
             "frame-ancestors 'none'; form-action 'self'");
  fields.set("X-Frame-Options", "DENY");
  fields.set("X-Content-Type-Options", "nosniff");
  fields.set("Referrer-Policy", "no-referrer");
  fields.set("Cross-Origin-Opener-Policy", "same-origin");
  if (tls) fields.set("Strict-Transport-Security", "max-age=31536000");
}

// A JSON response (no-store: API answers are per user and never cached).
Response JsonResponse(http::status status, const json& body, unsigned version, bool keep_alive, bool tls);
// {"error":{"code","message","details"}} with the status the code maps to.
Response ErrorResponse(const Status& status, const json& details, unsigned version, bool keep_alive, bool tls);
// INVALID 400, DENIED 403, NOT_FOUND 404, CONFLICT 409, TOO_LARGE 413 (429 for
// weft-web's own rate limits), UNAVAILABLE 503, TIMEOUT 504, INTERNAL 500.
http::status HttpStatusFor(const Status& status);

// The path and the query of a request target; the path percent-decoded.
struct Target {
  std::string path;
  std::map<std::string, std::string> query;  // decoded; the last of a repeated key
  std::string repeated;                      // the first key the query names again ("" when none)
  bool ok = true;                            // false: bad percent-encoding or a NUL
};
Target ParseTarget(std::string_view target);
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// The value of cookie `name` in a Cookie header ("" when absent).
std::string CookieValue(std::string_view cookie_header, std::string_view name);
// Set-Cookie for the session (empty value and Max-Age=0 clears it).
std::string SessionCookie(std::string_view value, bool tls);

// Query parameter `key`'s value as a JSON value: JSON when it parses as JSON,
// else the string. JSON with an object that names a key twice is refused, as
// weftd refuses such a body (wire::ParseBody).
Result<json> QueryValue(const std::string& key, const std::string& text);

}  // namespace weft::web
