#include "weft/openstack/api.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <random>
#include <thread>

namespace weft::openstack {
namespace {

using json = nlohmann::json;

// curl_global_init is not thread-safe; every Session goes through here first.
void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::size_t AppendBody(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// Collects response headers, names in lower case; a new status line (after a
// 100 Continue, or a redirect) starts over.
std::size_t AppendHeader(char* data, std::size_t size, std::size_t count, void* out) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(out);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    headers->clear();
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    (*headers)[Lower(std::string(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
  }
  return size * count;
}

// Where tokens are asked for, from the auth URL as an operator writes it.
std::string TokenUrl(std::string url, bool& v2) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.ends_with("/auth/tokens")) {
    v2 = false;
    return url;
  }
  if (url.ends_with("/tokens")) {  // Coopr's ".../v2.0/tokens"
    v2 = true;
    return url;
  }
  if (url.ends_with("/v2.0")) {
    v2 = true;
    return url + "/tokens";
  }
  v2 = false;
  return url.ends_with("/v3") ? url + "/auth/tokens" : url + "/v3/auth/tokens";
}

// OpenStack's message from an error body: Nova's {"itemNotFound": {"code":
// 404, "message": "..."}}, Keystone's {"error": {"message": "..."}}, or a bare
// {"message": "..."}.
std::string FaultOf(const json& body) {
  if (!body.is_object()) return {};
  if (auto m = body.find("message"); m != body.end() && m->is_string()) return m->get<std::string>();
  for (const auto& [key, value] : body.items()) {
    if (!value.is_object()) continue;
    if (auto m = value.find("message"); m != value.end() && m->is_string()) return m->get<std::string>();
  }
  return {};
}

// The value at `pointer` in `doc`, or null.
json At(const json& doc, const char* pointer) {
  const json::json_pointer p(pointer);
  return doc.contains(p) ? doc.at(p) : json();
}

bool MentionsQuota(const std::string& fault) {
  const std::string f = Lower(fault);
  return f.find("quota") != std::string::npos;
}

// Seconds of a Retry-After header (the HTTP-date form is not used by OpenStack); -1 if none.
long RetryAfterSeconds(const std::map<std::string, std::string>& headers) {
  auto it = headers.find("retry-after");
  if (it == headers.end() || it->second.empty()) return -1;
  try {
    std::size_t used = 0;
    const long s = std::stol(it->second, &used);
    return used == it->second.size() && s >= 0 ? s : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// A rate limit refuses the request before doing anything: it may always be sent again.
bool RateLimited(const Reply& r) {
  return r.http_status == 429 ||
         (r.http_status == 413 && (RetryAfterSeconds(r.headers) >= 0 || !MentionsQuota(r.fault)));
}

Failure Classify(const Reply& r) {
  const long s = r.http_status;
  if (s == 401) return Failure::kRefusedCredentials;
  if (s == 403) return MentionsQuota(r.fault) ? Failure::kOverQuota : Failure::kDenied;
  if (s == 404) return Failure::kNotFound;
  if (s == 409) return Failure::kConflict;
  if (RateLimited(r) || s >= 500) return Failure::kUnavailable;
  if (s == 413) return Failure::kOverQuota;
  return Failure::kInvalid;
}

std::string ServiceName(std::string_view type) {
  if (type == "compute") return "Nova";
  if (type == "image") return "Glance";
  if (type == "identity") return "Keystone";
  if (type == "network") return "Neutron";
  return std::string(type);
}

}  // namespace

std::string QueryEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string ExactNameRegex(std::string_view name) {
  std::string out = "^";
  for (const char c : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out + "$";
}

Session::Session(Credentials credentials, Options options)
    : credentials_(std::move(credentials)), options_(std::move(options)) {
  GlobalInit();
  token_url_ = TokenUrl(credentials_.auth_url, v2_);
  curl_ = curl_easy_init();
}

Session::~Session() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Reply Session::Authenticate() {
  json body;
  if (v2_) {
    body = {{"auth",
             {{"tenantName", credentials_.project},
              {"passwordCredentials", {{"username", credentials_.user}, {"password", credentials_.password}}}}}};
  } else {
    body = {{"auth",
             {{"identity",
               {{"methods", json::array({"password"})},
                {"password",
                 {{"user",
                   {{"name", credentials_.user},
                    {"domain", {{"name", credentials_.user_domain}}},
                    {"password", credentials_.password}}}}}}},
              {"scope",
               {{"project", {{"name", credentials_.project}, {"domain", {{"name", credentials_.project_domain}}}}}}}}}};
  }
  Reply r = Send("Keystone POST " + token_url_, "POST", token_url_, body.dump(), "", Repeat::kSafe);
  if (!r.ok()) return r;
  return ReadCatalog(std::move(r));
}

// The token and the endpoints of the reply to a token request.
Reply Session::ReadCatalog(Reply r) {
  token_.clear();
  endpoints_.clear();
  const json catalog = At(r.body, v2_ ? "/access/serviceCatalog" : "/token/catalog");
  if (v2_) {
    const json id = At(r.body, "/access/token/id");
    if (id.is_string()) token_ = id.get<std::string>();
  } else if (auto it = r.headers.find("x-subject-token"); it != r.headers.end()) {
    token_ = it->second;
  }
  if (token_.empty()) {
    r.failure = Failure::kInvalid;
    r.message = "Keystone at " + token_url_ + " answered without a token";
    return r;
  }
  for (const json& service : catalog.is_array() ? catalog : json::array()) {
    if (!service.is_object() || !service.contains("endpoints") || !service["endpoints"].is_array()) continue;
    const std::string type = service.value("type", "");
    for (const json& e : service["endpoints"]) {
      if (!e.is_object()) continue;
      std::string url;
      if (v2_) {
        url = e.value("publicURL", "");
      } else if (e.value("interface", "") == "public") {
        url = e.value("url", "");
      }
      const bool in_region = credentials_.region.empty() || e.value("region", "") == credentials_.region ||
                             e.value("region_id", "") == credentials_.region;
      if (url.empty() || !in_region || endpoints_.count(type)) continue;
      while (!url.empty() && url.back() == '/') url.pop_back();
      endpoints_[type] = url;
    }
  }
  return r;
}

std::string Session::Endpoint(std::string_view service) const {
  auto it = endpoints_.find(std::string(service));
  return it == endpoints_.end() ? std::string() : it->second;
}

Reply Session::Call(std::string_view service, std::string_view method, const std::string& path, const json& body,
                    Repeat repeat) {
  if (token_.empty()) {
    Reply a = Authenticate();
    if (!a.ok()) return a;
  }
  const std::string base = Endpoint(service);
  const std::string what = ServiceName(service) + " " + std::string(method) + " " + path;
  if (base.empty()) {
    Reply r;
    r.service = "Keystone";
    r.failure = Failure::kNoEndpoint;
    r.message = "the service catalog Keystone gave project '" + credentials_.project + "' has no public " +
                std::string(service) + " endpoint" +
                (credentials_.region.empty() ? std::string() : " in region '" + credentials_.region + "'");
    return r;
  }
  const std::string text = body.is_null() ? std::string() : body.dump();
  Reply r = Send(what, method, base + path, text, token_, repeat);
  if (r.http_status == 401) {  // the token expired or was revoked: one new token, one more try
    Reply a = Authenticate();
    if (!a.ok()) return a;
    r = Send(what, method, Endpoint(service) + path, text, token_, repeat);
  }
  return r;
}

Reply Session::Send(std::string_view what, std::string_view method, const std::string& url, const std::string& body,
                    const std::string& token, Repeat repeat) {
  std::mt19937 jitter(std::random_device{}());
  std::chrono::milliseconds ceiling = options_.first_backoff;
  Reply reply;
  for (int attempt = 1;; ++attempt) {
    reply = Once(what, method, url, body, token);
    const bool rate_limited = reply.http_status != 0 && RateLimited(reply);
    const bool transient = reply.http_status == 0 || reply.http_status >= 500;
    if (!rate_limited && !(transient && repeat == Repeat::kSafe)) break;
    if (attempt >= options_.max_attempts) break;
    std::chrono::milliseconds delay;
    if (const long after = RetryAfterSeconds(reply.headers); rate_limited && after >= 0) {
      delay = std::chrono::seconds(after);
      if (delay > options_.max_retry_after) break;  // the caller hears the rate limit instead of waiting that long
    } else {
      // Full jitter: many workers refused together do not come back together.
      std::uniform_int_distribution<long> pick(ceiling.count() / 2, ceiling.count());
      delay = std::chrono::milliseconds(pick(jitter));
      ceiling = std::min(ceiling * 2, options_.max_backoff);
    }
    if (options_.note) {
      options_.note(reply.message + "; trying again in " + std::to_string(delay.count()) + " ms (attempt " +
                    std::to_string(attempt + 1) + " of " + std::to_string(options_.max_attempts) + ")");
    }
    if (!Wait(delay)) {
      reply.failure = Failure::kCancelled;
      reply.message = std::string(what) + " was cancelled while waiting to retry: " + reply.message;
      break;
    }
  }
  return reply;
}

// Sleeps `delay` in short steps so a cancelled task stops soon; false if cancelled.
bool Session::Wait(std::chrono::milliseconds delay) {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until) {
    if (options_.cancelled && options_.cancelled()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
  return !(options_.cancelled && options_.cancelled());
}

Reply Session::Once(std::string_view what, std::string_view method, const std::string& url, const std::string& body,
                    const std::string& token) {
  Reply reply;
  reply.service = std::string(what.substr(0, what.find(' ')));
  CURL* curl = static_cast<CURL*>(curl_);
  if (!curl) {
    reply.failure = Failure::kUnavailable;
    reply.message = std::string(what) + ": libcurl could not make a handle";
    return reply;
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
  if (!token.empty()) headers = curl_slist_append(headers, ("X-Auth-Token: " + token).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip

  std::string response;
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  const std::string verb(method);
  if (verb == "POST" || verb == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  if (verb != "GET" && verb != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, verb.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &AppendHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // worker threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "weft-openstack/1.0");
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, options_.verify_peer ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, options_.verify_peer ? 2L : 0L);
  // Only HTTP(S), never redirected: a URL field cannot make the host read files or other services.
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  ++requests_;

  if (rc != CURLE_OK) {
    reply.failure = Failure::kUnavailable;
    reply.message = std::string(what) + " could not reach " + url + ": " + curl_easy_strerror(rc);
    return reply;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.http_status);
  if (!response.empty()) {
    reply.body = json::parse(response, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) reply.body = nullptr;
  }
  if (reply.http_status >= 200 && reply.http_status < 300) return reply;
  reply.fault = FaultOf(reply.body);
  reply.failure = Classify(reply);
  reply.message = std::string(what) + " answered HTTP " + std::to_string(reply.http_status);
  if (!reply.fault.empty()) reply.message += ": " + reply.fault;
  return reply;
}

}  // namespace weft::openstack
