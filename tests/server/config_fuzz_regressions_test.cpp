// Inputs the fuzzers (tests/fuzz/, docs/fuzzing.md) found to crash weftd's config
// parser, kept so the fixes stay fixed. Each input is also in the fuzz corpus.
#include <catch2/catch.hpp>

#include "weft/server/config/config.hpp"

using weft::server::ParseConfig;

TEST_CASE("config fuzz: a float too large for an integer key is an error, not undefined behaviour",
          "[config][fuzz]") {
  // Found by fuzz_config (UBSan): toml++'s value<int64_t>() casts a float such as
  // 5.07e69 to int64, which is undefined; the reader now takes integers only.
  auto cfg = ParseConfig("[jobs]\njanitor_interval_ms = 506666666e61\n", "weftd.toml");
  REQUIRE_FALSE(cfg.ok());
  CHECK_THAT(cfg.status().message(),
             Catch::StartsWith("weftd.toml: jobs.janitor_interval_ms must be an integer from 10 to 3600000"));
  // A float that is a whole number is still not an integer.
  CHECK_FALSE(ParseConfig("[tasks]\nlease_ms = 300.0\n", "weftd.toml").ok());
  CHECK(ParseConfig("[tasks]\nlease_ms = 300\n", "weftd.toml").ok());
}
