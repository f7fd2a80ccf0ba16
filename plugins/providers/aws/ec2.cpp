#include "weft/aws/ec2.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <thread>

namespace weft::aws {
namespace {

// curl_global_init is not thread-safe; every Ec2 goes through here first.
void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::size_t Append(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// "https://host:port/anything" -> "host:port".
std::string Authority(const std::string& url) {
  std::string_view rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string_view::npos) rest.remove_prefix(scheme + 3);
  return std::string(rest.substr(0, rest.find('/')));
}

std::string Text(const pugi::xml_node& node, const char* child) { return node.child(child).text().as_string(); }

Failure Classify(long http_status, const std::string& code) {
  static constexpr std::string_view kRefused[] = {"AuthFailure", "SignatureDoesNotMatch", "InvalidClientTokenId",
                                                   "UnrecognizedClientException", "IncompleteSignature",
                                                   "MissingAuthenticationToken", "InvalidAccessKeyId"};
  if (std::find(std::begin(kRefused), std::end(kRefused), code) != std::end(kRefused)) {
    return Failure::kRefusedCredentials;
  }
  if (code == "UnauthorizedOperation" || code == "AccessDenied" || code == "OptInRequired") return Failure::kDenied;
  if (code.size() > 9 && code.ends_with(".NotFound")) return Failure::kNotFound;
  if (IsThrottling(code) || http_status >= 500) return Failure::kUnavailable;
  return Failure::kInvalid;
}

}  // namespace

bool IsThrottling(std::string_view code) {
  return code == "RequestLimitExceeded" || code == "Throttling" || code == "ThrottlingException" ||
         code == "RequestThrottled" || code == "SlowDown" || code == "TooManyRequestsException";
}

Ec2::Ec2(Ec2Options options) : options_(std::move(options)) {
  GlobalInit();
  endpoint_ = options_.endpoint.empty() ? "https://ec2." + options_.region + ".amazonaws.com" : options_.endpoint;
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  host_ = Authority(endpoint_);
  curl_ = curl_easy_init();
}

Ec2::~Ec2() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Reply Ec2::Call(std::string_view action, const Pairs& params) {
  Pairs all = params;
  all.emplace_back("Action", std::string(action));
  all.emplace_back("Version", std::string(kEc2ApiVersion));
  const std::string body = CanonicalQuery(all);

  std::mt19937 jitter(std::random_device{}());
  std::chrono::milliseconds ceiling = options_.first_backoff;
  Reply reply;
  for (int attempt = 1;; ++attempt) {
    reply = Once(action, body);
    if (reply.failure != Failure::kUnavailable || attempt >= options_.max_attempts) break;
    // Full jitter: many workers throttled together do not come back together.
    std::uniform_int_distribution<long> pick(ceiling.count() / 2, ceiling.count());
    const std::chrono::milliseconds delay(pick(jitter));
    if (options_.note) {
      options_.note(reply.message + "; trying again in " + std::to_string(delay.count()) + " ms (attempt " +
                    std::to_string(attempt + 1) + " of " + std::to_string(options_.max_attempts) + ")");
    }
    if (!Wait(delay)) {
      reply.failure = Failure::kCancelled;
      reply.message = "EC2 " + std::string(action) + " was cancelled while waiting to retry: " + reply.message;
      break;
    }
    ceiling = std::min(ceiling * 2, options_.max_backoff);
  }
  return reply;
}

// Sleeps `delay` in short steps so a cancelled task stops soon; false if cancelled.
bool Ec2::Wait(std::chrono::milliseconds delay) {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until) {
    if (options_.cancelled && options_.cancelled()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
  return !(options_.cancelled && options_.cancelled());
}

Reply Ec2::Once(std::string_view action, const std::string& body) {
  Reply reply;
  CURL* curl = static_cast<CURL*>(curl_);
  if (!curl) {
    reply.failure = Failure::kUnavailable;
    reply.message = "EC2 " + std::string(action) + ": libcurl could not make a handle";
    return reply;
  }
  Request request{.method = "POST",
                  .host = host_,
                  .path = "/",
                  .query = {},
                  .headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}},
                  .payload = body};
  const Signature signature =
      Sign(request, options_.credentials, {options_.region, "ec2"}, AmzDate(std::chrono::system_clock::now()));

  curl_slist* headers = nullptr;
  for (const auto& [name, value] : request.headers) headers = curl_slist_append(headers, (name + ": " + value).c_str());
  for (const auto& [name, value] : signature.headers)
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip

  std::string response;
  const std::string url = endpoint_ + "/";
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // worker threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "weft-aws/1.0");
  // Only HTTP(S), never redirected: an endpoint field cannot make the host read files or other services.
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  ++requests_;

  if (rc != CURLE_OK) {
    reply.failure = Failure::kUnavailable;
    reply.message = "EC2 " + std::string(action) + " could not reach " + endpoint_ + ": " + curl_easy_strerror(rc);
    return reply;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.http_status);

  auto xml = std::make_shared<pugi::xml_document>();
  const bool parsed = static_cast<bool>(xml->load_buffer(response.data(), response.size()));
  if (reply.http_status >= 200 && reply.http_status < 300 && parsed) {
    reply.xml = std::move(xml);
    return reply;
  }
  // EC2 answers <Response><Errors><Error><Code/><Message/>...; other AWS
  // services and some proxies <ErrorResponse><Error>...: take the first Error.
  const pugi::xml_node error = parsed ? xml->select_node("//Error").node() : pugi::xml_node();
  reply.error_code = Text(error, "Code");
  const std::string what = Text(error, "Message");
  reply.failure = Classify(reply.http_status, reply.error_code);
  if (!parsed && reply.http_status < 300) reply.failure = Failure::kUnavailable;  // a truncated reply
  reply.message = "EC2 " + std::string(action) + " answered HTTP " + std::to_string(reply.http_status);
  if (!reply.error_code.empty()) reply.message += " " + reply.error_code;
  if (!what.empty()) reply.message += ": " + what;
  return reply;
}

}  // namespace weft::aws
