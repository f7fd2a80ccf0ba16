// Inputs the fuzzers (tests/fuzz/, docs/fuzzing.md) found to crash or mislead the
// wire codec, kept so the fixes stay fixed. Each input is also in the fuzz corpus.
#include <catch2/catch.hpp>

#include <string>

#include "weft/common/json_fields.hpp"
#include "weft/common/wire.hpp"

using namespace weft::wire;

namespace {

Frames One(const std::string& header) {
  Frames f;
  f.emplace_back(header.data(), header.size());
  return f;
}

std::string Nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("wire fuzz: a failed reply whose message or code is not a string is refused, not thrown",
          "[wire][fuzz]") {
  // Found by fuzz_wire_reply: DecodeReply read them with json::value(), which throws
  // type_error on another type, so a malformed reply ended the CLI or weft-host.
  auto message = DecodeReply(One(R"({"v":1,"id":"8","ok":false,"error":{"code":"CONFLICT","message":{"a":2}}})"),
                             Limits{});
  REQUIRE_FALSE(message.ok());
  CHECK(message.status().code() == weft::Code::kInvalid);
  CHECK_THAT(message.status().message(), Catch::Contains("must be strings"));
  auto code = DecodeReply(One(R"({"v":1,"id":"8","ok":false,"error":{"code":5,"message":"m"}})"), Limits{});
  CHECK_FALSE(code.ok());
  // Null still means "not given".
  auto nulls = DecodeReply(One(R"({"v":1,"id":"8","ok":false,"error":{"code":null,"message":null}})"), Limits{});
  REQUIRE(nulls.ok());
  CHECK(nulls->error.code == weft::Code::kInternal);
  CHECK(nulls->error.message == "(no message)");
}

TEST_CASE("wire fuzz: a failed reply that names code OK is still a failure", "[wire][fuzz]") {
  // Caught by fuzz_wire_reply's invariant on a hand-written input: it decoded with code kOk, so
  // ToStatus() of a failed reply was ok and a caller took the failure for success.
  auto r = DecodeReply(One(R"({"v":1,"id":"9","ok":false,"error":{"code":"OK","message":"no"}})"), Limits{});
  REQUIRE(r.ok());
  CHECK_FALSE(r->ok);
  CHECK(r->error.code == weft::Code::kInternal);
  CHECK_FALSE(r->ToStatus().ok());
}

TEST_CASE("wire fuzz: a header nested too deep is refused before it is parsed", "[wire][fuzz]") {
  // 400 KB of brackets, well under the 1 MiB header limit, overflowed the stack of
  // weftd when the decoded value was dumped, copied or compared.
  std::string deep_v = R"({"v":)" + Nested(200000) + "}";
  std::string id;
  auto req = DecodeRequest(One(deep_v), Limits{}, &id);
  REQUIRE_FALSE(req.ok());
  CHECK(req.status().code() == weft::Code::kTooLarge);
  CHECK_THAT(req.status().message(), Catch::Contains("more than 100 levels deep"));
  CHECK_FALSE(DecodeReply(One(R"({"v":1,"id":"1","ok":true,"body":{"x":)" + Nested(200000) + "}}"), Limits{}).ok());

  // The header object and the body are two levels: 98 more fit, 99 do not.
  auto at = [](std::size_t depth) { return R"({"v":1,"id":"a","op":"b","body":{"x":)" + Nested(depth) + "}}"; };
  CHECK(DecodeRequest(One(at(98)), Limits{}, &id).ok());
  CHECK(DecodeRequest(One(at(99)), Limits{}, &id).status().code() == weft::Code::kTooLarge);
}

TEST_CASE("wire fuzz: brackets inside strings do not count as nesting", "[wire][fuzz]") {
  using weft::jsonf::NestsDeeperThan;
  CHECK_FALSE(NestsDeeperThan(R"({"a":"[[[[{{{{","b":"\"[[[["})", 1));
  CHECK(NestsDeeperThan(R"({"a":"\\",["x"]})", 1));  // the string ends after the escaped backslash
  CHECK_FALSE(NestsDeeperThan("]]]]}}}", 0));         // malformed text is the parser's to refuse
  CHECK(NestsDeeperThan("[", 0));
}
