#include <catch2/catch.hpp>

#include "weft/common/json_fields.hpp"

using nlohmann::json;
namespace jf = weft::jsonf;

TEST_CASE("json fields: errors name the JSON path and what was found", "[json]") {
  json body = {{"host_id", "h1"}, {"capacity", "four"}, {"flag", 1}, {"empty", ""}};
  CHECK(jf::String(body, "host_id", "body").value() == "h1");
  auto missing = jf::String(body, "nope", "body");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "body.nope is required (a non-empty string)");
  CHECK(jf::String(body, "empty", "body").status().message() == "body.empty must not be empty");
  auto cap = jf::Int(body, "capacity", "body", 1, 4096);
  REQUIRE_FALSE(cap.ok());
  CHECK(cap.status().message() == "body.capacity must be an integer from 1 to 4096, got \"four\"");
  CHECK(jf::Int(json{{"n", 5000}}, "n", "b", 1, 4096).status().message() ==
        "b.n must be an integer from 1 to 4096, got 5000");
  CHECK(jf::Int(body, "absent", "body", 1, 10, 7).value() == 7);
  CHECK(jf::Bool(body, "flag", "body").status().message() == "body.flag must be true or false, got 1");
  CHECK(jf::Bool(body, "absent", "body", true).value());
  CHECK(jf::RequireObject(json::array(), "body").message() == "body must be a JSON object, got []");
}
