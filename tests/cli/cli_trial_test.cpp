// What a new user's trial found in the plan and job views, checked with the real
// `weft` against a real weftd and a real weft-host running the fake plugins.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::RunResult;
using testing::TempDir;
using testing::WaitFor;

// weftd, one live weft-host with the build's plugins and a copy of the example catalog.
struct Env {
  explicit Env(const std::string& name)
      : server({.name = name,
                .extra_toml = "[jobs]\nretry_backoff_ms = 50\n[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n",
                .die_with_parent = true}),
        dir(name + "-files"),
        host({.dir = dir.path(), .id = "trial-host", .server = server.provisioner(), .capacity = 8, .workers = 1,
              .shutdown_grace_ms = 1000, .die_with_parent = true}),
        catalog(dir.path() / "catalog") {
    REQUIRE(WaitFor([&] { return server.HostLive("trial-host"); }, 30s));
    Import();
  }
  void Import() {
    RunResult r = server.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  // Runs `weft -o json ARGS --wait`, which must succeed; the job's tasks, by key.
  std::vector<std::string> JobTaskKeys(std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    RunResult r = server.Weft(args);
    INFO(r.out << r.err << server.Log() << host.Log());
    REQUIRE(r.exit_code == 0);
    const json job = server.WeftJson({"job", "show", json::parse(r.out)["job"]["id"].get<std::string>()})["job"];
    std::vector<std::string> keys;
    for (const json& t : job["tasks"]) keys.push_back(t["key"].get<std::string>());
    CHECK(job["progress"]["total"].get<std::size_t>() == keys.size());
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  testing::Weftd server;
  TempDir dir;
  testing::Host host;
  testing::CatalogDir catalog;
};

// The ids of a plan's tasks (`weft -o json ARGS`), sorted.
std::vector<std::string> PlannedTaskIds(const testing::Weftd& server, std::vector<std::string> args) {
  const json plan = server.WeftJson(args);
  std::vector<std::string> ids;
  for (const json& t : plan["tasks"]) ids.push_back(t["id"].get<std::string>());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::size_t Count(const std::vector<std::string>& ids, const std::string& id) {
  return static_cast<std::size_t>(std::count(ids.begin(), ids.end(), id));
}

}  // namespace

TEST_CASE("weft trial: cluster plan and a dry run show exactly the tasks the job then runs", "[cli][integration]") {
  Env env("weft-trial-plan");
  testing::Weftd& s = env.server;
  // Nothing names an address: no task waits for every CONFIRM.
  CHECK(Count(PlannedTaskIds(s, {"cluster", "plan", "lb", "--template", "web-fake", "--size", "3"}),
              "join/CONFIRM/nodes") == 0);
  // haproxy's configuration names every nginx's address: known only after each
  // node's CONFIRM, so the job waits for all of them (a JOIN).
  json haproxy = env.catalog.Get("services", "fake-haproxy");
  haproxy["provisioner"]["actions"]["configure"]["fields"]["backends"] =
      "%join(map(ip.bind_v4.service.fake-nginx,'$:8080'),',')%";
  env.catalog.Put("services", haproxy);
  env.Import();

  const std::vector<std::string> create = {"cluster", "create", "lb", "--template", "web-fake", "--size", "3"};
  const std::vector<std::string> planned =
      PlannedTaskIds(s, {"cluster", "plan", "lb", "--template", "web-fake", "--size", "3"});
  std::vector<std::string> dry_run = create;
  dry_run.push_back("--dry-run");
  CHECK(PlannedTaskIds(s, dry_run) == planned);
  CHECK(Count(planned, "join/CONFIRM/nodes") == 1);
  RunResult table = s.Weft({"cluster", "plan", "lb", "--template", "web-fake", "--size", "3"});
  CHECK_THAT(table.out, Catch::Contains("plan: " + std::to_string(planned.size()) + " tasks in "));

  const std::vector<std::string> ran = env.JobTaskKeys(create);
  CHECK(ran.size() == planned.size());
  CHECK(ran == planned);

  // Growing: the new nodes' tasks and the kept nodes' reconfiguration, as planned.
  const std::vector<std::string> grow = {"cluster", "scale", "lb", "--size", "5"};
  std::vector<std::string> grow_dry = grow;
  grow_dry.push_back("--dry-run");
  const std::vector<std::string> grow_planned = PlannedTaskIds(s, grow_dry);
  CHECK(env.JobTaskKeys(grow) == grow_planned);
}

TEST_CASE("weft trial: job list names each job's cluster, and keeps its id", "[cli][integration]") {
  Env env("weft-trial-jobs");
  testing::Weftd& s = env.server;
  for (const char* name : {"shop", "blog"}) {
    RunResult r = s.Weft({"cluster", "create", name, "--template", "web-fake", "--size", "3", "--wait"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string shop_id = s.Cluster("shop")["id"].get<std::string>();
  const std::string blog_id = s.Cluster("blog")["id"].get<std::string>();

  const json listed = s.WeftJson({"job", "list"});
  REQUIRE(listed["jobs"].size() == 2);
  for (const json& j : listed["jobs"]) {
    const std::string id = j["cluster_id"].get<std::string>();
    CHECK(j.value("cluster_name", "") == (id == shop_id ? "shop" : "blog"));
  }
  CHECK(s.WeftJson({"job", "list", "--cluster", "blog"})["jobs"][0].value("cluster_name", "") == "blog");

  RunResult table = s.Weft({"job", "list"});
  INFO(table.out);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::StartsWith("JOB"));
  CHECK_THAT(table.out, Catch::Contains("CLUSTER ID"));
  std::istringstream lines(table.out);
  std::string header, line;
  std::getline(lines, header);
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string job, cluster, cluster_id;
    cells >> job >> cluster >> cluster_id;
    CHECK(((cluster == "shop" && cluster_id == shop_id) || (cluster == "blog" && cluster_id == blog_id)));
    ++rows;
  }
  CHECK(rows == 2);
}

}  // namespace weft
