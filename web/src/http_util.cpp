#include "http_util.hpp"

#include "weft/common/json_parse.hpp"
#include "weft/common/wire.hpp"

namespace weft::web {

Response JsonResponse(http::status status, const json& body, unsigned version, bool keep_alive, bool tls) {
  Response res{status, version};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  AddSecurityHeaders(res, tls);
  res.keep_alive(keep_alive);
  res.body() = wire::Dump(body);
  res.prepare_payload();
  return res;
}

http::status HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk: return http::status::ok;
    case Code::kInvalid: return http::status::bad_request;
    case Code::kNotFound: return http::status::not_found;
    case Code::kConflict: return http::status::conflict;
    case Code::kDenied: return http::status::forbidden;
    case Code::kUnavailable: return http::status::service_unavailable;
    case Code::kTimeout: return http::status::gateway_timeout;
    case Code::kTooLarge:
      // weft-web's own rate limits ("rate limit: ..."); weftd's are UNAVAILABLE
      // with retry_after_ms, made 429 where its replies are passed on (api.cpp).
      return status.message().rfind("rate limit", 0) == 0 ? http::status::too_many_requests
                                                          : http::status::payload_too_large;
    case Code::kInternal: return http::status::internal_server_error;
  }
  return http::status::internal_server_error;
}

Response ErrorResponse(const Status& status, const json& details, unsigned version, bool keep_alive, bool tls) {
  json body = {{"error",
                {{"code", std::string(CodeName(status.code()))},
                 {"message", status.message()},
                 {"details", details.is_object() ? details : json::object()}}}};
  return JsonResponse(HttpStatusFor(status), body, version, keep_alive, tls);
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex(text[i + 1]);
      const int lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  return out;
}

Target ParseTarget(std::string_view target) {
  Target t;
  const std::size_t q = target.find('?');
  std::optional<std::string> path = PercentDecode(target.substr(0, q), false);
  if (!path) {
    t.ok = false;
    return t;
  }
  t.path = *path;
  if (q == std::string_view::npos) return t;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::optional<std::string> key = PercentDecode(pair.substr(0, eq), true);
    std::optional<std::string> value =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (!key || !value) {
      t.ok = false;
      return t;
    }
    if (!t.query.insert_or_assign(*key, *value).second && t.repeated.empty()) t.repeated = *key;
  }
  return t;
}

std::string CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const std::size_t semi = header.find(';');
    std::string_view part = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const std::size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) return std::string(part.substr(eq + 1));
  }
  return "";
}

std::string SessionCookie(std::string_view value, bool tls) {
  std::string out = std::string(kSessionCookie) + "=" + std::string(value) + "; HttpOnly; SameSite=Strict; Path=/";
  if (value.empty()) out += "; Max-Age=0";
  if (tls) out += "; Secure";
  return out;
}

Result<json> QueryValue(const std::string& key, const std::string& text) {
  WEFT_ASSIGN_OR_RETURN(json parsed, wire::ParseBody(text, key));
  return parsed.is_discarded() ? json(text) : parsed;
}

}  // namespace weft::web
