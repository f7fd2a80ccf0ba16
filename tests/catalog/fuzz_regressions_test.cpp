// Inputs the fuzzers (tests/fuzz/, docs/fuzzing.md) found to crash the catalog,
// kept so the fixes stay fixed. Each input is also in the fuzz corpus.
#include <catch2/catch.hpp>

#include "weft/catalog/entities.hpp"

using namespace weft::catalog;

TEST_CASE("catalog fuzz: a number too large for a double is malformed JSON, not an exception", "[catalog][fuzz]") {
  // Found by fuzz_catalog_provider: nlohmann throws out_of_range (not parse_error) on
  // number overflow, which escaped ParseJsonText and ended `weft catalog import`.
  auto r = ParseJsonText(R"({"name":"p","providertype":"static","x":[1e8446744073709551615]})", "providers/p.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == weft::Code::kInvalid);
  CHECK_THAT(r.status().message(), Catch::StartsWith("providers/p.json: malformed JSON: number overflow"));
}

TEST_CASE("catalog fuzz: a document nested too deep is refused before it is parsed", "[catalog][fuzz]") {
  // 400 KB of brackets in a provider's free-form provisioner fields overflowed the
  // stack when the entity was copied, compared or written back (ToJson).
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto r = ParseJsonText(R"({"name":"p","providertype":"s","provisioner":{"x":)" + deep + "}}", "providers/p.json");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(),
             Catch::StartsWith("providers/p.json: JSON nests arrays and objects more than 100 levels deep"));
  // 100 levels are fine.
  CHECK(ParseJsonText(std::string(100, '[') + std::string(100, ']'), "x.json").ok());
}
