// weft::aws: AWS Signature Version 4, the signing every AWS API (EC2's Query
// API among them) requires.
//
//   aws::Request r{.method = "POST", .host = "ec2.eu-west-1.amazonaws.com", .path = "/",
//                  .headers = {{"Content-Type", "application/x-www-form-urlencoded"}},
//                  .payload = "Action=DescribeInstances&Version=2016-11-15"};
//   aws::Signature s = aws::Sign(r, creds, {"eu-west-1", "ec2"}, aws::AmzDate(now));
//   // send r's headers plus s.headers (X-Amz-Date, Authorization, and the
//   // session token when the credentials carry one)
//
// The canonical request, the string to sign and the signature are returned as
// well as the headers, so a test can compare every stage with AWS's published
// test suite and a "signature does not match" reply can be logged with the
// canonical request the server should have built.
//
// Thread-safety: free functions on values; no state.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::aws {

using Pairs = std::vector<std::pair<std::string, std::string>>;

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only; empty otherwise
};

struct Scope {
  std::string region;   // "us-east-1"
  std::string service;  // "ec2"
};

struct Request {
  std::string method = "GET";
  std::string host;         // the Host header's value, port included when not the default
  std::string path = "/";   // as sent, already percent-encoded where it must be
  Pairs query;              // names and values NOT encoded; order does not matter
  Pairs headers;            // besides Host and X-Amz-Date, which Sign adds; all are signed
  std::string payload;
};

struct Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lower-case hex
  std::string authorization;  // the Authorization header's value
  Pairs headers;              // to send as well: X-Amz-Date, Authorization, X-Amz-Security-Token
};

// "20150830T123600Z": the time as SigV4 wants it, in UTC.
std::string AmzDate(std::chrono::system_clock::time_point at);

// RFC 3986 encoding as SigV4 defines it: unreserved characters (A-Z a-z 0-9
// - . _ ~) as they are, every other byte as %XX with upper-case hex; '/' is
// kept when `keep_slash` (paths) and encoded otherwise (query names and values).
std::string UriEncode(std::string_view text, bool keep_slash);

// The query string as it must be sent and signed: pairs encoded and sorted by
// name, then value.
std::string CanonicalQuery(const Pairs& query);

// Signs `request` at `amz_date` (AmzDate's form).
Signature Sign(const Request& request, const Credentials& credentials, const Scope& scope,
               const std::string& amz_date);

}  // namespace weft::aws
