// Retention ([retention] in weftd.toml) end to end: the real weftd, weft-host
// and weft with the fake plugins, on the store the run names (SQLite by
// default). A deleted cluster goes once its deletion is older than
// ended_after_ms, with its jobs; a live cluster and the audit log stay.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
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
using testing::CatalogDir;
using testing::Host;
using testing::RunResult;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// `weft -o json ARGS... --wait`, which must succeed; the job it ran.
json RunJob(Weftd& s, std::vector<std::string> args) {
  args.insert(args.begin(), {"-o", "json"});
  args.push_back("--wait");
  RunResult r = s.Weft(args);
  INFO("weft " << args[2] << " " << args[3] << ": " << r.out << r.err << Tail(s.Log()));
  REQUIRE(r.exit_code == 0);
  const json reply = json::parse(r.out, nullptr, false);
  REQUIRE(reply.is_object());
  json job = reply["job"];  // -o json with --wait: {"job"}
  REQUIRE(job["status"] == "succeeded");
  return job;
}

// Every cluster of the tenant, terminated ones too, by id -> name.
std::map<std::string, std::string> AllClusters(Weftd& s) {
  std::map<std::string, std::string> out;
  const json list = s.Call("cluster.list", {{"all", true}});
  for (const json& c : list["clusters"]) out[c["id"]] = c["name"];
  return out;
}

std::vector<std::string> JobIdsOf(Weftd& s, const std::string& cluster_id) {
  std::vector<std::string> out;
  const json list = s.Call("job.list", {{"limit", 1000}});
  for (const json& j : list["jobs"])
    if (j["cluster_id"] == cluster_id) out.push_back(j["id"]);
  return out;
}

}  // namespace

TEST_CASE("retention: weftd removes a deleted cluster and its jobs once its deletion is older than "
          "ended_after_ms, a live cluster and the audit log stay",
          "[retention][integration]") {
  TempDir dir("weft-retention");
  Weftd s(testing::WeftdOptions{.dir = dir.path(),
                                .extra_toml = "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
                                              "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n"
                                              "[retention]\nended_after_ms = 1500\ninterval_ms = 100\n",
                                .cli_timeout = 90s});
  Host host(testing::HostOptions{
      .dir = dir.path(), .id = "h1", .server = s.provisioner(), .capacity = 4, .workers = 2, .shutdown_grace_ms = 1000});
  CatalogDir catalog(dir / "catalog");
  {
    RunResult r = s.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err << Tail(s.Log()));
    REQUIRE(r.exit_code == 0);
  }
  const json status = s.Call("server.status", json::object());
  CHECK(status["retention"]["ended_after_ms"] == 1500);

  const json created = RunJob(s, {"cluster", "create", "gone", "--template", "web-fake", "--size", "3"});
  const std::string gone_id = created["cluster_id"];
  const json deleted = RunJob(s, {"cluster", "delete", "gone"});
  CHECK(JobIdsOf(s, gone_id).size() == 2);
  // A newer cluster, live: what it ran keeps the job of the newest task off the deleted cluster.
  const json kept = RunJob(s, {"cluster", "create", "kept", "--template", "web-fake", "--size", "3"});
  const std::string kept_id = kept["cluster_id"];
  const std::int64_t deleted_at = deleted["finished_at_ms"];

  REQUIRE(WaitFor([&] { return AllClusters(s).count(gone_id) == 0; }, 30s));
  const std::map<std::string, std::string> left = AllClusters(s);
  CHECK(left.count(kept_id) == 1);
  CHECK(JobIdsOf(s, gone_id).empty());
  CHECK(JobIdsOf(s, kept_id) == std::vector<std::string>{kept["id"].get<std::string>()});
  CHECK_FALSE(s.TryCall("job.get", {{"job", deleted["id"]}}).ok());
  CHECK_FALSE(s.TryCall("cluster.get", {{"cluster", gone_id}}).ok());
  CHECK(s.Cluster(kept_id)["status"] == "active");

  // The audit log still says who created and deleted it.
  std::vector<std::string> ops;
  const json audit = s.Call("audit.list", {{"cluster", gone_id}});
  for (const json& e : audit["entries"]) ops.push_back(e["op"]);
  CHECK(std::count(ops.begin(), ops.end(), "cluster.create") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "cluster.delete") == 1);

  // weftd said what it removed, and server.status counts it.
  const std::string log = s.Log();
  CHECK_THAT(log, Catch::Contains("retention: removed 1 deleted clusters, 2 jobs"));
  const json after = s.Call("server.status", json::object())["retention"];
  CHECK(after["removed"]["clusters"] == 1);
  CHECK(after["removed"]["jobs"] == 2);
  CHECK(after["last_round_at_ms"].get<std::int64_t>() >= deleted_at + 1500);
  RunResult shown = s.Weft({"status"});
  CHECK_THAT(shown.out, Catch::Contains("removed 1 clusters, 2 jobs"));
}

}  // namespace weft
