// `weft job retry` keeps the failed run: with the real weftd, weft-host and
// the fake plugins, a job fails for good (one node's CREATE fails twice), is
// retried and succeeds; what the failed run ended with (its status and
// message, each failed task with its message and output, its cancelled tasks)
// is still in `job.get` and `weft job show` afterwards.
#include <map>
#include <string>

#include "options.hpp"

namespace weft::audit_test {

TEST_CASE("history: a retried job keeps its failed run: status, message, the failed tasks with their output",
          "[audit][history]") {
  testing::TempDir tmp("weft-history");
  Weftd s(ServerIn(tmp / "server", /*curve=*/false, "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\n"));
  Host host(HostIn(tmp.path(), "h1", s.provisioner()));
  const CatalogDir catalog(tmp / "catalog");
  // Node r1-2's CREATE fails its first two attempts: the job fails for good; the retry's third attempt succeeds.
  catalog.PatchActions("", "", {{"latency_ms", 20}});
  catalog.PatchProvider({{"fail_actions", "CREATE"}, {"fail_nodes", "r1-2"}, {"fail_attempts", 2}});
  RunResult imported = s.Weft({"catalog", "import", catalog.path().string()});
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);

  RunResult created =
      s.Weft({"cluster", "create", "r1", "--template", "web-fake", "--size", "3", "--keep-on-failure", "--wait"});
  INFO(created.out << created.err << Tail(s.Log(), 4000) << Tail(host.Log(), 4000));
  REQUIRE(created.exit_code == 1);
  const std::string job_id = s.WeftJson({"cluster", "get", "r1"})["cluster"]["latest_job"];
  const json failed = s.WeftJson({"job", "show", job_id})["job"];
  REQUIRE(failed["status"] == "failed");
  REQUIRE(!failed["message"].get<std::string>().empty());
  std::map<std::int64_t, json> failed_tasks;
  std::int64_t cancelled = 0;
  for (const json& t : failed["tasks"]) {
    if (t["state"] == "failed") failed_tasks[t["id"]] = t;
    cancelled += t["state"] == "cancelled";
  }
  REQUIRE(!failed_tasks.empty());

  RunResult retried = s.Weft({"job", "retry", job_id, "--wait"});
  INFO(retried.out << retried.err << Tail(s.Log(), 4000));
  REQUIRE(retried.exit_code == 0);
  const json done = s.WeftJson({"job", "show", job_id})["job"];
  REQUIRE(done["status"] == "succeeded");
  CHECK(done["message"] == "");

  // The failed run, as it ended.
  REQUIRE(done["history"].size() == 1);
  const json& run = done["history"][0];
  CHECK(run["run"] == 1);
  CHECK(run["status"] == "failed");
  CHECK(run["message"] == failed["message"]);
  CHECK(run["retried_by"] == "admin");
  CHECK(run["finished_at_ms"] == failed["finished_at_ms"]);
  CHECK(run["started_at_ms"] == failed["created_at_ms"]);
  CHECK(run["cancelled"] == cancelled);
  CHECK(run["failed"] == failed_tasks.size());
  REQUIRE(run["failed_tasks"].size() == failed_tasks.size());
  for (const json& t : run["failed_tasks"]) {
    INFO(t.dump());
    REQUIRE(failed_tasks.count(t["id"]));
    const json& before = failed_tasks[t["id"]];
    CHECK(t["key"] == before["key"]);
    CHECK(t["attempt"] == 2);
    CHECK(t["message"] == before["message"]);
    CHECK_THAT(t["message"].get<std::string>(), Catch::Contains("fails because fail_actions lists it"));
    CHECK(t["stdout"] == before["stdout"]);
    CHECK(t["stderr"] == before["stderr"]);
  }
  // The failed attempts themselves are still listed under each task, with the one that succeeded.
  for (const json& t : done["tasks"]) {
    if (!failed_tasks.count(t["id"])) continue;
    INFO(t.dump());
    REQUIRE(t["attempts"].size() == 3);
    CHECK(t["attempts"][0]["status"] == "failed");
    CHECK(t["attempts"][1]["status"] == "failed");
    CHECK(t["attempts"][2]["status"] == "succeeded");
  }
  // And people see it in `weft job show`.
  RunResult shown = s.Weft({"job", "show", job_id});
  INFO(shown.out << shown.err);
  REQUIRE(shown.exit_code == 0);
  CHECK_THAT(shown.out, Catch::Contains("earlier runs") && Catch::Contains("run 1: failed") &&
                            Catch::Contains("retried by admin") &&
                            Catch::Contains(failed_tasks.begin()->second["message"].get<std::string>()));
}

}  // namespace weft::audit_test
