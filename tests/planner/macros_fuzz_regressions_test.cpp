// Inputs the fuzz target fuzz_macros (tests/fuzz/, docs/fuzzing.md) ran out of
// memory on, kept so the fix stays fixed. Each input is also in the fuzz corpus.
#include <catch2/catch.hpp>

#include <string>

#include "weft/planner/macros.hpp"

using namespace weft::planner;
using nlohmann::json;

namespace {

// map(map(...(host.service.zookeeper,'$$$$$$$$')...)) `levels` deep: each of the two
// names becomes 8^levels copies of itself.
std::string Bomb(int levels) {
  std::string s = "host.service.zookeeper";
  for (int i = 0; i < levels; ++i) s = "map(" + s + ",'$$$$$$$$')";
  return "%join(" + s + ",',')%";
}

MacroContext Layout() {
  MacroContext c;
  c.nodes = {{"n1", "zk-1.example", "10.0.0.1", "", {"zookeeper"}},
             {"n2", "zk-2.example", "10.0.0.2", "", {"zookeeper"}}};
  c.self = "n1";
  c.owner = "alice";
  return c;
}

}  // namespace

TEST_CASE("macros fuzz: nested map()s that would expand to gigabytes are an error", "[macros][fuzz]") {
  // A 194-byte config string asked for ~25 GB (libFuzzer: out-of-memory); any user
  // who can create a cluster could have exhausted weftd's memory this way.
  auto r = ExpandString(Bomb(10), Layout());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("would produce more than 8 MiB"));
  // The check before a job starts, without a layout, is bounded too: cluster.owner is
  // "" there, but a format with text multiplies just the same.
  std::string checked = "cluster.owner";
  for (int i = 0; i < 12; ++i) checked = "map(" + checked + ",'x$$$$$$$$')";
  CHECK_FALSE(CheckMacros(json{{"k", "%" + checked + "%"}}).ok());
  // The budget is per config: strings that are each fine add up. Bomb(5) makes
  // two names of 12 * 8^5 bytes (~0.8 MB) and spends ~1.7 MB on the way.
  REQUIRE(ExpandMacros(json::array({Bomb(5)}), Layout()).ok());
  json many = json::array();
  for (int i = 0; i < 8; ++i) many.push_back(Bomb(5));
  CHECK_FALSE(ExpandMacros(many, Layout()).ok());
  // Ordinary use stays as it was.
  auto ok = ExpandString(Bomb(2), Layout());
  REQUIRE(ok.ok());
  CHECK(ok->size() == 2 * 12 * 64 + 1);  // two names, 64 copies each, one ','
}
