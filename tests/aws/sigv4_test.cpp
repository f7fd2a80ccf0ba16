// AWS Signature Version 4 against the cases of AWS's published SigV4 test
// suite (aws-sig-v4-test-suite), written out here by hand: each case's
// request, and the Authorization header AWS publishes for it, compared byte
// for byte. Every case signs with the suite's credentials, date, region and
// service.
#include <algorithm>

#include <catch2/catch.hpp>

#include "weft/aws/sigv4.hpp"

namespace aws = weft::aws;

namespace {

const aws::Credentials kSuiteCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
const aws::Scope kSuiteScope{"us-east-1", "service"};
const std::string kSuiteDate = "20150830T123600Z";

aws::Request SuiteRequest(std::string method = "GET") {
  aws::Request r;
  r.method = std::move(method);
  r.host = "example.amazonaws.com";
  return r;
}

std::string Authorization(const std::string& signed_headers, const std::string& signature) {
  return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=" +
         signed_headers + ", Signature=" + signature;
}

}  // namespace

TEST_CASE("sigv4: get-vanilla, stage by stage", "[unit][aws]") {
  aws::Signature s = aws::Sign(SuiteRequest(), kSuiteCredentials, kSuiteScope, kSuiteDate);
  CHECK(s.canonical_request ==
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(s.string_to_sign ==
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  CHECK(s.signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  CHECK(s.authorization ==
        Authorization("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
  // What goes on the wire besides the request's own headers.
  REQUIRE(s.headers.size() == 2);
  CHECK(s.headers[0] == std::pair<std::string, std::string>{"X-Amz-Date", kSuiteDate});
  CHECK(s.headers[1] == std::pair<std::string, std::string>{"Authorization", s.authorization});
}

TEST_CASE("sigv4: post-x-www-form-urlencoded, the form EC2's Query API uses", "[unit][aws]") {
  aws::Request r = SuiteRequest("POST");
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  r.payload = "Param1=value1";
  aws::Signature s = aws::Sign(r, kSuiteCredentials, kSuiteScope, kSuiteDate);
  CHECK(s.canonical_request ==
        "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
        "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
        "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
  CHECK(s.string_to_sign ==
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
  CHECK(s.authorization == Authorization("content-type;host;x-amz-date",
                                         "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"));
}

TEST_CASE("sigv4: the suite's query cases sort and encode the query", "[unit][aws]") {
  struct Case {
    const char* name;
    aws::Pairs query;
    const char* canonical_query;
    const char* signature;
  };
  const Case cases[] = {
      {"get-vanilla-query-order-key-case", {{"Param2", "value2"}, {"Param1", "value1"}}, "Param1=value1&Param2=value2",
       "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
      {"get-vanilla-query-order-value", {{"Param1", "value2"}, {"Param1", "value1"}}, "Param1=value1&Param1=value2",
       "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"},
      {"get-vanilla-utf8-query", {{"\xE1\x88\xB4", "bar"}}, "%E1%88%B4=bar",
       "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    aws::Request r = SuiteRequest();
    r.query = c.query;
    CHECK(aws::CanonicalQuery(r.query) == c.canonical_query);
    CHECK(aws::Sign(r, kSuiteCredentials, kSuiteScope, kSuiteDate).authorization ==
          Authorization("host;x-amz-date", c.signature));
  }
}

TEST_CASE("sigv4: the suite's header cases trim, join and sort headers", "[unit][aws]") {
  struct Case {
    const char* name;
    aws::Pairs headers;
    const char* signed_headers;
    const char* signature;
  };
  const Case cases[] = {
      {"get-header-value-order",
       {{"My-Header1", "value4"}, {"My-Header1", "value1"}, {"My-Header1", "value3"}, {"My-Header1", "value2"}},
       "host;my-header1;x-amz-date", "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
      {"get-header-key-duplicate",
       {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
       "host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
      {"get-header-value-trim",
       {{"My-Header1", " value1"}, {"My-Header2", "\"a   b   c\""}},
       "host;my-header1;my-header2;x-amz-date", "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    aws::Request r = SuiteRequest();
    r.headers = c.headers;
    CHECK(aws::Sign(r, kSuiteCredentials, kSuiteScope, kSuiteDate).authorization ==
          Authorization(c.signed_headers, c.signature));
  }
}

TEST_CASE("sigv4: get-unreserved keeps unreserved characters in the path", "[unit][aws]") {
  aws::Request r = SuiteRequest();
  r.path = "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  CHECK(aws::UriEncode(r.path, true) == r.path);
  CHECK(aws::Sign(r, kSuiteCredentials, kSuiteScope, kSuiteDate).authorization ==
        Authorization("host;x-amz-date", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"));
}

TEST_CASE("sigv4: post-sts-header-after, temporary credentials sign their session token", "[unit][aws]") {
  aws::Credentials temporary = kSuiteCredentials;
  temporary.session_token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
  aws::Signature s = aws::Sign(SuiteRequest(), temporary, kSuiteScope, kSuiteDate);
  CHECK(s.authorization == Authorization("host;x-amz-date;x-amz-security-token",
                                         "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"));
  CHECK(std::find(s.headers.begin(), s.headers.end(),
                  std::pair<std::string, std::string>{"X-Amz-Security-Token", temporary.session_token}) !=
        s.headers.end());
}

TEST_CASE("sigv4: encoding and dates", "[unit][aws]") {
  CHECK(aws::UriEncode("a b/c+d=e", false) == "a%20b%2Fc%2Bd%3De");
  CHECK(aws::UriEncode("a b/c", true) == "a%20b/c");
  CHECK(aws::AmzDate(std::chrono::system_clock::from_time_t(1440938160)) == kSuiteDate);
}
