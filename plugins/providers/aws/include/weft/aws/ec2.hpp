// weft::aws::Ec2: calls of EC2's Query API over libcurl, signed with SigV4,
// retried with backoff when AWS asks for it (throttling, RequestLimitExceeded,
// 5xx, a connection that failed), the reply parsed with pugixml.
//
//   aws::Ec2 ec2({.region = "eu-west-1", .credentials = {key_id, secret}});
//   aws::Reply r = ec2.Call("DescribeInstances", {{"InstanceId.1", "i-123"}});
//   if (!r.ok()) ... r.error_code ("InvalidInstanceID.NotFound"), r.message
//   else r.xml->select_node("//instancesSet/item/instanceState/name")
//
// Thread-safety: one Ec2 per thread (it owns a curl handle, which keeps its
// connection open between calls).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <pugixml.hpp>

#include "weft/aws/sigv4.hpp"

namespace weft::aws {

inline constexpr std::string_view kEc2ApiVersion = "2016-11-15";

struct Ec2Options {
  std::string region;
  Credentials credentials;
  // Where requests go: empty for AWS's own (https://ec2.<region>.amazonaws.com);
  // "http://127.0.0.1:5000" for a simulator or a test's fake.
  std::string endpoint;
  int max_attempts = 6;  // per call, the first included
  std::chrono::milliseconds first_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  std::chrono::milliseconds request_timeout{30000};
  // Asked while waiting between attempts: true stops the call (a cancelled task).
  std::function<bool()> cancelled;
  // Told about each retry, in a sentence.
  std::function<void(const std::string&)> note;
};

enum class Failure {
  kNone,
  kRefusedCredentials,  // AuthFailure, SignatureDoesNotMatch, InvalidClientTokenId, ...
  kDenied,              // the credentials are good but may not do this
  kNotFound,            // *.NotFound: the thing named does not exist
  kInvalid,             // any other 4xx: the request names something wrong
  kUnavailable,         // retries ran out on throttling, 5xx or a broken connection
  kCancelled,
};

struct Reply {
  Failure failure = Failure::kNone;
  long http_status = 0;
  std::string error_code;  // EC2's code ("InvalidAMIID.NotFound"); empty when ok
  std::string message;     // a sentence: the action, EC2's code and message
  std::shared_ptr<pugi::xml_document> xml;  // the reply; set when ok

  bool ok() const { return failure == Failure::kNone; }
  // The reply's root element (RunInstancesResponse, ...).
  pugi::xml_node root() const { return xml ? xml->document_element() : pugi::xml_node(); }
};

class Ec2 {
 public:
  explicit Ec2(Ec2Options options);
  ~Ec2();
  Ec2(const Ec2&) = delete;
  Ec2& operator=(const Ec2&) = delete;

  // Calls `action` with `params` (names and values not encoded), retrying as
  // the options say.
  Reply Call(std::string_view action, const Pairs& params);

  // The endpoint requests go to.
  const std::string& endpoint() const { return endpoint_; }
  // HTTP requests sent so far, retries included.
  int requests() const { return requests_; }

 private:
  Reply Once(std::string_view action, const std::string& body);
  bool Wait(std::chrono::milliseconds delay);

  Ec2Options options_;
  std::string endpoint_;
  std::string host_;  // the Host header: the endpoint's authority
  void* curl_ = nullptr;
  int requests_ = 0;
};

// Whether an EC2 error code asks the caller to slow down and try again.
bool IsThrottling(std::string_view error_code);

}  // namespace weft::aws
