#include "weft/aws/sigv4.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>

namespace weft::aws {
namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string Hex(const unsigned char* data, std::size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 0xF]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), out, &size, EVP_sha256(), nullptr);
  return Hex(out, size);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// A header value as SigV4 signs it: outer blanks trimmed, inner runs of
// blanks made one space.
std::string TrimValue(std::string_view value) {
  std::string out;
  bool blank = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out.push_back(' ');
    blank = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string AmzDate(std::chrono::system_clock::time_point at) {
  const std::time_t t = std::chrono::system_clock::to_time_t(at);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string UriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string CanonicalQuery(const Pairs& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

Signature Sign(const Request& request, const Credentials& credentials, const Scope& scope,
               const std::string& amz_date) {
  Signature s;
  s.headers.emplace_back("X-Amz-Date", amz_date);
  if (!credentials.session_token.empty()) s.headers.emplace_back("X-Amz-Security-Token", credentials.session_token);

  // Every header by its lower-case name; repeated names join their values
  // with commas, in the order given.
  std::map<std::string, std::string> headers;
  auto add = [&](const std::string& name, const std::string& value) {
    std::string& joined = headers[Lower(name)];
    if (!joined.empty()) joined.push_back(',');
    joined += TrimValue(value);
  };
  add("host", request.host);
  for (const auto& [name, value] : request.headers) add(name, value);
  for (const auto& [name, value] : s.headers) add(name, value);

  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + value + "\n";
    if (!signed_headers.empty()) signed_headers.push_back(';');
    signed_headers += name;
  }

  s.canonical_request = request.method + "\n" + (request.path.empty() ? "/" : request.path) + "\n" +
                        CanonicalQuery(request.query) + "\n" + canonical_headers + "\n" + signed_headers + "\n" +
                        Sha256Hex(request.payload);

  const std::string day = amz_date.substr(0, 8);
  const std::string credential_scope = day + "/" + scope.region + "/" + scope.service + "/aws4_request";
  s.string_to_sign = std::string(kAlgorithm) + "\n" + amz_date + "\n" + credential_scope + "\n" +
                     Sha256Hex(s.canonical_request);

  std::string key = HmacSha256("AWS4" + credentials.secret_access_key, day);
  key = HmacSha256(key, scope.region);
  key = HmacSha256(key, scope.service);
  key = HmacSha256(key, "aws4_request");
  const std::string mac = HmacSha256(key, s.string_to_sign);
  s.signature = Hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());

  s.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + "/" + credential_scope +
                    ", SignedHeaders=" + signed_headers + ", Signature=" + s.signature;
  s.headers.emplace_back("Authorization", s.authorization);
  return s;
}

}  // namespace weft::aws
