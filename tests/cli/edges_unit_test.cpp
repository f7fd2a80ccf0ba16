// Pure helpers behind the CLI's rough edges: suggestions for typos, endpoint
// checks and the progress line. The same behaviour end to end, with the real
// binaries, is in cli_edges_test.cpp.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "weft/cli/args.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/format.hpp"

namespace weft::cli {

TEST_CASE("cli edges: a typo gets the closest name, and nothing far off is suggested", "[cli]") {
  const std::vector<std::string> verbs = {"list", "get", "create", "delete", "scale"};
  CHECK(ClosestMatch("lsit", verbs) == "list");  // two neighbours swapped: one edit
  CHECK(ClosestMatch("craete", verbs) == "create");
  CHECK(ClosestMatch("delet", verbs) == "delete");
  CHECK(ClosestMatch("frobnicate", verbs).empty());
  CHECK(ClosestMatch("x", verbs).empty());  // one letter is no evidence of anything
  CHECK(ClosestMatch("--sise", {"--size", "--services", "--wait"}) == "--size");
}

TEST_CASE("cli edges: tcp endpoints need a host and a port from 1 to 65535", "[cli]") {
  CHECK(CheckEndpointPort("tcp://127.0.0.1:7420").ok());
  CHECK(CheckEndpointPort("tcp://[::1]:7420").ok());
  CHECK(CheckEndpointPort("tcp://weft.example:65535").ok());
  CHECK(CheckEndpointPort("ipc:///run/weft/api").ok());
  CHECK_THAT(CheckEndpointPort("tcp://127.0.0.1:99999").message(), Catch::Contains("'99999' is not a number from 1 to 65535"));
  CHECK_THAT(CheckEndpointPort("tcp://127.0.0.1:0").message(), Catch::Contains("not a number from 1 to 65535"));
  CHECK_THAT(CheckEndpointPort("tcp://127.0.0.1:http").message(), Catch::Contains("not a number"));
  CHECK_THAT(CheckEndpointPort("tcp://127.0.0.1").message(), Catch::Contains("has no port"));
  CHECK_THAT(CheckEndpointPort("tcp://[::1]").message(), Catch::Contains("has no port"));
  CHECK_THAT(CheckEndpointPort("tcp://:7420").message(), Catch::Contains("has no host"));
}

TEST_CASE("cli edges: the progress line shows tasks waiting to retry, and where an ended job stopped", "[cli]") {
  nlohmann::json job = {{"id", "7"},
                        {"operation", "create"},
                        {"status", "running"},
                        {"progress",
                         {{"total", 10},
                          {"succeeded", 4},
                          {"running", 0},
                          {"retrying", 1},
                          {"failed", 0},
                          {"stage", 3},
                          {"stages", 6}}}};
  const std::string running = ProgressLine(job, 900);
  CHECK_THAT(running, Catch::Contains("4/10 done, 0 running, 1 waiting to retry, 0 failed, stage 3/6, 900ms"));

  job["progress"]["retrying"] = 0;
  CHECK_THAT(ProgressLine(job, 1500), Catch::Contains("4/10 done, 0 running, 0 failed, stage 3/6, 1.5s"));

  job["status"] = "aborted";
  CHECK_THAT(ProgressLine(job, 1500), Catch::EndsWith("stage 3/6 (aborted), 1.5s"));
}

}  // namespace weft::cli
