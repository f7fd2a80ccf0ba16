#include <catch2/catch.hpp>

#include "weft/common/status.hpp"

using weft::Code;
using weft::Result;
using weft::Status;

TEST_CASE("status: ok and error states render as sentences", "[status]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "OK");
  Status nf = Status::NotFound("host 'h1' is not registered");
  CHECK_FALSE(nf.ok());
  CHECK(nf.code() == Code::kNotFound);
  CHECK(nf.ToString() == "NOT_FOUND: host 'h1' is not registered");
  CHECK(nf.WithContext("heartbeat").message() == "heartbeat: host 'h1' is not registered");
  CHECK(ok.WithContext("x").ok());
}

TEST_CASE("status: code names round-trip through the wire names", "[status]") {
  for (Code c : {Code::kInvalid, Code::kNotFound, Code::kConflict, Code::kDenied, Code::kUnavailable,
                 Code::kTimeout, Code::kTooLarge, Code::kInternal}) {
    CHECK(weft::CodeFromName(weft::CodeName(c)) == c);
  }
  CHECK(weft::CodeFromName("NO_SUCH_CODE") == Code::kInternal);
}

namespace {
Result<int> Half(int n) {
  if (n % 2) return Status::Invalid(std::to_string(n) + " is odd");
  return n / 2;
}
Status Chain(int n) {
  WEFT_RETURN_IF_ERROR(Half(n).status());
  return Status::Ok();
}
// Halves twice, binding both a new and an existing variable through the macro.
Result<int> Quarter(int n) {
  WEFT_ASSIGN_OR_RETURN(int half, Half(n));
  int quarter = 0;
  WEFT_ASSIGN_OR_RETURN(quarter, Half(half));
  return quarter;
}
}  // namespace

TEST_CASE("status: Result carries a value or the error", "[status]") {
  auto r = Half(8);
  REQUIRE(r.ok());
  CHECK(*r == 4);
  auto e = Half(3);
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().message() == "3 is odd");
  CHECK(Chain(4).ok());
  CHECK(Chain(5).code() == Code::kInvalid);
}

TEST_CASE("status: WEFT_ASSIGN_OR_RETURN binds the value or returns the error", "[status]") {
  auto q = Quarter(12);
  REQUIRE(q.ok());
  CHECK(*q == 3);
  CHECK(Quarter(6).status().message() == "3 is odd");
  CHECK(Quarter(5).status().message() == "5 is odd");
}
