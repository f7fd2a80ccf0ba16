// Inputs the fuzzers (tests/fuzz/, docs/fuzzing.md) found to crash or mislead the
// wire codec, kept so the fixes stay fixed. Each input is also in the fuzz corpus.
#include <catch2/catch.hpp>

#include <string>

#include "weft/common/wire.hpp"

using namespace weft::wire;

namespace {

Frames One(const std::string& header) {
  Frames f;
  f.emplace_back(header.data(), header.size());
  return f;
}

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
