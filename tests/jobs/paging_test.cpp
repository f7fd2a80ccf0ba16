// Paging and bounded replies end to end, with a real weftd (on the store the
// run names) and the real `weft`: cluster.list, job.list and audit.list read
// page by page with `limit` and `after` cover every row once while rows are
// added between pages; a bad cursor is INVALID; cluster.plan and dry runs are
// refused past jobs.max_plan_nodes and past the message limit, with weftd
// answering (and staying up) instead of sending a reply no client may read.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"
#include "weft/server/store/store.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::RunResult;
using testing::Tail;
using testing::TempDir;
using testing::Weftd;

std::int64_t Id(const json& v) { return std::stoll(v.get<std::string>()); }

// The example catalog, and web-big: web-fake without its 20-node bound.
void ImportCatalog(Weftd& s, const fs::path& dir) {
  CatalogDir catalog(dir);
  catalog.DeriveTemplate("web-big", {{"constraints", {{"size", {{"min", 3}, {"max", 100000}}}}}});
  RunResult r = s.Weft({"catalog", "import", catalog.path().string()});
  INFO(r.out << r.err << Tail(s.Log()));
  REQUIRE(r.exit_code == 0);
}

// A cluster of three nodes; no host runs its job, which stays running. Its cluster id and job id.
std::pair<std::int64_t, std::int64_t> Create(Weftd& s, const std::string& name) {
  const json reply = s.Call("cluster.create", {{"name", name}, {"template", "web-fake"}, {"size", 3}});
  return {Id(reply["cluster"]["id"]), Id(reply["job"]["id"])};
}

// The error of a call that must fail.
Status Refused(Weftd& s, const std::string& op, const json& body) {
  Result<json> r = s.TryCall(op, body);
  INFO(op << " " << body.dump() << " answered " << (r.ok() ? r->dump().substr(0, 300) : ""));
  REQUIRE_FALSE(r.ok());
  return r.status();
}

// `base` with the keys of `more`.
json With(json base, const json& more) {
  base.update(more);
  return base;
}

std::vector<std::int64_t> Ids(const json& rows) {
  std::vector<std::int64_t> out;
  for (const json& r : rows) out.push_back(r["id"].is_string() ? Id(r["id"]) : r["id"].get<std::int64_t>());
  return out;
}

}  // namespace

TEST_CASE("paging: cluster.list, job.list and audit.list pages hold every row once while rows are added, and a "
          "bad cursor is INVALID",
          "[paging]") {
  TempDir dir("weft-paging");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .cli_timeout = 60s});
  ImportCatalog(s, dir.path() / "catalog");
  std::vector<std::int64_t> clusters, jobs;
  for (int i = 0; i < 7; ++i) {
    auto [c, j] = Create(s, "p" + std::to_string(i));
    clusters.push_back(c);
    jobs.push_back(j);
  }

  SECTION("cluster.list goes up by id; clusters made between pages come at the end") {
    const json first = s.Call("cluster.list", {{"limit", 3}});
    REQUIRE(first["clusters"].size() == 3);
    REQUIRE(first["next"].is_string());
    std::vector<std::int64_t> seen = Ids(first["clusters"]);
    for (int i = 7; i < 9; ++i) clusters.push_back(Create(s, "p" + std::to_string(i)).first);
    json next = first["next"];
    int pages = 1;
    while (next.is_string()) {
      const json page = s.Call("cluster.list", {{"limit", 3}, {"after", next}});
      REQUIRE(page["clusters"].size() <= 3);
      for (std::int64_t id : Ids(page["clusters"])) seen.push_back(id);
      next = page.value("next", json());
      REQUIRE(++pages < 10);
    }
    CHECK(pages == 3);
    CHECK(seen == clusters);  // each once, in id order, the two made meanwhile included
    // Without a limit: every cluster in one reply.
    const json all = s.Call("cluster.list", json::object());
    CHECK(Ids(all["clusters"]) == clusters);
    CHECK_FALSE(all.contains("next"));
    // The CLI reads every page; --limit N the first N.
    CHECK(Ids(s.WeftJson({"cluster", "list"})["clusters"]) == clusters);
    CHECK(Ids(s.WeftJson({"cluster", "list", "--limit", "2"})["clusters"]) ==
          std::vector<std::int64_t>(clusters.begin(), clusters.begin() + 2));
  }

  SECTION("job.list goes back from the newest; jobs started between pages come in no later page") {
    const json first = s.Call("job.list", {{"limit", 3}});
    REQUIRE(first["jobs"].size() == 3);
    std::vector<std::int64_t> seen = Ids(first["jobs"]);
    std::vector<std::int64_t> newer;
    for (int i = 7; i < 9; ++i) newer.push_back(Create(s, "p" + std::to_string(i)).second);
    json next = first["next"];
    int pages = 1;
    while (next.is_string()) {
      const json page = s.Call("job.list", {{"limit", 3}, {"after", next}});
      for (std::int64_t id : Ids(page["jobs"])) seen.push_back(id);
      next = page.value("next", json());
      REQUIRE(++pages < 10);
    }
    CHECK(pages == 3);
    std::vector<std::int64_t> expected(jobs.rbegin(), jobs.rend());
    CHECK(seen == expected);  // each job there was at the first page once, newest first
    // A new first page starts with the newer jobs.
    const json again = s.Call("job.list", {{"limit", 2}});
    CHECK(Ids(again["jobs"]) == std::vector<std::int64_t>{newer[1], newer[0]});
    // No limit: the newest 100; all of them here, so no next.
    const json all = s.Call("job.list", json::object());
    CHECK(all["jobs"].size() == 9);
    CHECK_FALSE(all.contains("next"));
    // The pages of one cluster.
    const json one = s.Call("job.list", {{"cluster", "p2"}, {"limit", 1}});
    CHECK(Ids(one["jobs"]) == std::vector<std::int64_t>{jobs[2]});
    CHECK_FALSE(one.contains("next"));
    // The CLI: --limit N the newest N, --all every job.
    CHECK(s.WeftJson({"job", "list", "--limit", "4"})["jobs"].size() == 4);
    CHECK(s.WeftJson({"job", "list", "--all"})["jobs"].size() == 9);
    // Both at once are refused, as by weft audit.
    RunResult both = s.Weft({"job", "list", "--limit", "4", "--all"});
    INFO(both.out << both.err);
    CHECK(both.exit_code != 0);
    CHECK(both.err.find("--limit and --all contradict each other") != std::string::npos);
  }

  SECTION("audit.list goes back from the newest entries, each page oldest first") {
    const json everything = s.Call("audit.list", {{"limit", 100000}});
    const std::vector<std::int64_t> before = Ids(everything["entries"]);
    REQUIRE(before.size() >= 8);  // the catalog import's puts and the creates
    const json first = s.Call("audit.list", {{"limit", 3}});
    REQUIRE(first["entries"].size() == 3);
    std::vector<std::vector<std::int64_t>> pages = {Ids(first["entries"])};
    for (int i = 7; i < 9; ++i) Create(s, "p" + std::to_string(i));
    json next = first["next"];
    while (next.is_string()) {
      const json page = s.Call("audit.list", {{"limit", 3}, {"after", next}});
      pages.push_back(Ids(page["entries"]));
      next = page.value("next", json());
      REQUIRE(pages.size() < 100);
    }
    std::vector<std::int64_t> seen;
    for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
      CHECK(std::is_sorted(it->begin(), it->end()));
      seen.insert(seen.end(), it->begin(), it->end());
    }
    CHECK(seen == before);  // every entry there was at the first page, once, oldest first
    CHECK(s.Call("audit.list", json::object())["entries"].size() == before.size() + 2);
    // The CLI: the newest N, oldest first; --all every entry.
    CHECK(Ids(s.WeftJson({"audit", "--limit", "2"})["entries"]).size() == 2);
    CHECK(s.WeftJson({"audit", "--all"})["entries"].size() == before.size() + 2);
    RunResult both = s.Weft({"audit", "--limit", "2", "--all"});
    INFO(both.out << both.err);
    CHECK(both.exit_code != 0);
    CHECK(both.err.find("--limit and --all contradict each other") != std::string::npos);
  }

  SECTION("a bad cursor is INVALID and says what to give") {
    const json page = s.Call("job.list", {{"limit", 1}});
    const std::string job_cursor = page["next"];
    for (const auto& [op, bad] : std::vector<std::pair<std::string, json>>{{"job.list", "zzz"},
                                                                          {"job.list", 5},
                                                                          {"job.list", "j-3"},
                                                                          {"cluster.list", job_cursor},
                                                                          {"audit.list", job_cursor},
                                                                          {"audit.list", ""}}) {
      const Status st = Refused(s, op, {{"after", bad}});
      INFO(op << " after " << bad.dump() << ": " << st.ToString());
      CHECK(st.code() == Code::kInvalid);
      CHECK(st.message().find("after") != std::string::npos);
      CHECK(st.message().find("\"next\" of the previous " + op) != std::string::npos);
    }
    // A limit outside 1..100000 is refused too.
    CHECK(Refused(s, "cluster.list", {{"limit", 0}}).code() == Code::kInvalid);
    CHECK(Refused(s, "job.list", {{"limit", 100001}}).code() == Code::kInvalid);
  }
}

TEST_CASE("paging: a user's pages hold only their own clusters and jobs, every one once, however many of other "
          "users' lie between",
          "[paging]") {
  TempDir dir("weft-paging-user");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_timeout = 60s});
  ImportCatalog(s, dir.path() / "catalog");
  std::map<std::string, std::unique_ptr<client::Client>> users;
  for (const std::string name : {"alice", "bob"}) {
    const fs::path cred = dir.path() / (name + ".json");
    for (std::vector<std::string> args : {std::vector<std::string>{"user", "create", name},
                                          std::vector<std::string>{"credentials", name, "-f", cred.string()}}) {
      RunResult r = s.Weft(args);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
    }
    Result<curve::Credential> c = curve::LoadCredential(cred);
    REQUIRE(c.ok());
    client::Options o = client::FromCredential(*c, 10000);
    o.endpoint = s.api();
    users[name] = std::make_unique<client::Client>(s.ctx(), o);
  }
  const auto call = [&](const std::string& who, const std::string& op, const json& body) {
    Result<json> r = users[who]->Call(op, body);
    INFO(who << " " << op << " " << body.dump() << ": " << (r.ok() ? "" : r.status().ToString()));
    REQUIRE(r.ok());
    return *r;
  };
  // Alice's clusters among many more of Bob's; the newest is Bob's.
  std::vector<std::int64_t> alice_clusters, alice_jobs;
  for (int i = 0; i < 12; ++i) {
    const std::string who = i % 4 == 1 ? "alice" : "bob";
    const json reply = call(who, "cluster.create", {{"name", "u" + std::to_string(i)}, {"template", "web-fake"},
                                                    {"size", 3}});
    if (who == "alice") {
      alice_clusters.push_back(Id(reply["cluster"]["id"]));
      alice_jobs.push_back(Id(reply["job"]["id"]));
    }
  }
  REQUIRE(alice_jobs.size() == 3);

  std::vector<std::int64_t> seen;
  json next;
  int pages = 0;
  do {
    json body = {{"limit", 1}};
    if (next.is_string()) body["after"] = next;
    const json page = call("alice", "job.list", body);
    REQUIRE(page["jobs"].size() == 1);  // full pages: other users' jobs are skipped, not counted
    for (std::int64_t id : Ids(page["jobs"])) seen.push_back(id);
    next = page.value("next", json());
    REQUIRE(++pages < 10);
  } while (next.is_string());
  CHECK(seen == std::vector<std::int64_t>(alice_jobs.rbegin(), alice_jobs.rend()));

  seen.clear();
  next = json();
  pages = 0;
  do {
    json body = {{"limit", 2}};
    if (next.is_string()) body["after"] = next;
    const json page = call("alice", "cluster.list", body);
    for (std::int64_t id : Ids(page["clusters"])) seen.push_back(id);
    next = page.value("next", json());
    REQUIRE(++pages < 10);
  } while (next.is_string());
  CHECK(pages == 2);
  CHECK(seen == alice_clusters);
}

TEST_CASE("paging: the store reads a user's page of jobs by the owner of their clusters, not the tenant's newest "
          "jobs",
          "[paging]") {
  // What job.list asks of the store for a user: the filter is the statement's, so `limit` jobs of the owner's
  // come back however many of other users' are newer, and the page after the last one's id holds the older ones.
  TempDir dir("weft-paging-owner");
  auto opened = testing::OpenStore(dir.path() / "weft.db");
  store::Store& db = testing::Opened(opened);
  const auto cluster = [&](const std::string& tenant, const std::string& name, const std::string& owner) {
    store::ClusterRecord c;
    c.tenant = tenant;
    c.name = name;
    c.owner = owner;
    c.status = "active";
    c.created_at_ms = 1;
    REQUIRE(db.InsertCluster(&c).ok());
    return c.id;
  };
  const auto job = [&](const std::string& tenant, const std::string& cluster_id) {
    store::JobRecord j;
    j.tenant = tenant;
    j.cluster_id = cluster_id;
    j.operation = "create";
    j.status = "running";
    j.created_at_ms = 1;
    REQUIRE(db.InsertJob(&j).ok());
    return std::stoll(j.id);
  };
  const std::string alice1 = cluster("t", "a1", "alice");
  const std::string alice2 = cluster("t", "a2", "alice");
  const std::string bob = cluster("t", "b", "bob");
  // Alice in another tenant: a cluster there is not hers here.
  const std::string elsewhere = cluster("other", "a3", "alice");
  std::vector<std::int64_t> alice_jobs;  // oldest first
  for (int i = 0; i < 60; ++i) {
    if (i % 20 == 5) alice_jobs.push_back(job("t", i % 40 == 5 ? alice1 : alice2));
    job("t", bob);
    job("other", elsewhere);
  }
  REQUIRE(alice_jobs.size() == 3);
  const auto ids = [](const Result<std::vector<store::JobRecord>>& r) {
    INFO((r.ok() ? "" : r.status().ToString()));
    REQUIRE(r.ok());
    std::vector<std::int64_t> out;
    for (const store::JobRecord& j : *r) out.push_back(std::stoll(j.id));
    return out;
  };
  const std::string_view alice = "alice";
  // A full page of two, the newest of hers, though a hundred of other users' jobs are newer.
  const std::vector<std::int64_t> first = ids(db.ListJobs("t", "", 2, 0, alice));
  CHECK(first == std::vector<std::int64_t>{alice_jobs[2], alice_jobs[1]});
  // The page after it: the one left, and nothing past it.
  CHECK(ids(db.ListJobs("t", "", 2, first.back(), alice)) == std::vector<std::int64_t>{alice_jobs[0]});
  CHECK(ids(db.ListJobs("t", "", 2, alice_jobs[0], alice)).empty());
  // One more than the page, as job.list reads to know there is a `next`.
  CHECK(ids(db.ListJobs("t", "", 4, 0, alice)).size() == 3);
  // With a cluster too, and for a user who owns no cluster.
  CHECK(ids(db.ListJobs("t", alice1, 5, 0, alice)) == std::vector<std::int64_t>{alice_jobs[2], alice_jobs[0]});
  CHECK(ids(db.ListJobs("t", bob, 5, 0, alice)).empty());
  CHECK(ids(db.ListJobs("t", "", 5, 0, std::string_view("carol"))).empty());
  // Without an owner: the tenant's newest, Bob's.
  const std::vector<std::int64_t> tenant = ids(db.ListJobs("t", "", 2));
  REQUIRE(tenant.size() == 2);
  CHECK(tenant[0] > alice_jobs[2]);
}

TEST_CASE("paging: weft audit reads page after page, oldest first, --limit N the newest N and --all every entry",
          "[paging]") {
  TempDir dir("weft-paging-cli");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .cli_timeout = 120s});
  // More entries than the CLI's pages of 1000: one for each put of a new hardware type.
  for (int i = 0; i < 1100; ++i)
    s.Call("hardwaretype.put", {{"name", "hw" + std::to_string(i)}, {"providermap", {{"fake", {{"flavor", "f"}}}}}});
  const std::vector<std::int64_t> all = Ids(s.Call("audit.list", {{"limit", 100000}})["entries"]);
  REQUIRE(all.size() == 1100);
  REQUIRE(std::is_sorted(all.begin(), all.end()));

  const json every = s.WeftJson({"audit", "--all"});
  CHECK(Ids(every["entries"]) == all);
  CHECK(every["entries"][0]["target"] == "hardwaretype hw0");
  CHECK_FALSE(every.contains("next"));
  const json newest = s.WeftJson({"audit", "--limit", "1050"});
  CHECK(Ids(newest["entries"]) == std::vector<std::int64_t>(all.end() - 1050, all.end()));
  CHECK(newest["next"].is_string());  // where a script would go on
  CHECK(Ids(s.WeftJson({"audit"})["entries"]) == std::vector<std::int64_t>(all.end() - 1000, all.end()));
}

TEST_CASE("paging: a plan past jobs.max_plan_nodes is refused before it is made, and one whose reply would pass "
          "the message limit is refused instead of sent",
          "[paging]") {
  TempDir dir("weft-plan-bound");
  // Messages of at most 64 KiB, so that a plan of some 40 nodes (about 2 KiB each) is over it.
  Weftd s(testing::WeftdOptions{
      .dir = dir.path() / "server",
      .extra_toml = "[jobs]\nmax_plan_nodes = 200\n[limits]\nmax_header_bytes = 32768\nmax_message_bytes = 65536\n",
      .cli_timeout = 60s});
  ImportCatalog(s, dir.path() / "catalog");
  const json plan = {{"name", "big"}, {"template", "web-big"}};

  // Within both bounds: the whole plan, up to close to the message limit.
  const json small = s.Call("cluster.plan", With(plan, {{"size", 3}}));
  CHECK(small["layout"]["nodes"].size() == 3);
  const json near = s.Call("cluster.plan", With(plan, {{"size", 20}}));
  CHECK(near["layout"]["nodes"].size() == 20);
  CHECK(near.dump().size() > 20000);
  CHECK(near.dump().size() < 65536 - 4096);

  // Past max_plan_nodes: TOO_LARGE naming the limit and where to raise it.
  Status st = Refused(s, "cluster.plan", With(plan, {{"size", 201}}));
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message().find("201 nodes") != std::string::npos);
  CHECK(st.message().find("at most 200") != std::string::npos);
  CHECK(st.message().find("jobs.max_plan_nodes") != std::string::npos);
  st = Refused(s, "cluster.create", With(plan, {{"size", 201}, {"dry_run", true}}));
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message().find("jobs.max_plan_nodes") != std::string::npos);

  // Within max_plan_nodes but over the message limit: TOO_LARGE saying so, and weftd answers on.
  st = Refused(s, "cluster.plan", With(plan, {{"size", 150}}));
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message().find("limits.max_message_bytes") != std::string::npos);
  st = Refused(s, "cluster.create", With(plan, {{"size", 150}, {"dry_run", true}}));
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message().find("limits.max_message_bytes") != std::string::npos);
  // A dry run of a change to a cluster is bounded too.
  // (No host runs its create: aborted, the cluster takes another operation.)
  const json created = s.Call("cluster.create", With(plan, {{"size", 3}}));
  s.Call("job.abort", {{"job", created["job"]["id"]}});
  REQUIRE(s.WaitJob(created["job"]["id"], 30s)["status"] == "aborted");
  st = Refused(s, "cluster.scale", {{"cluster", "big"}, {"size", 201}, {"dry_run", true}});
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message().find("jobs.max_plan_nodes") != std::string::npos);
  CHECK(s.Call("server.status", json::object()).contains("version"));

  // The CLI says why.
  RunResult r = s.Weft({"cluster", "plan", "big2", "--template", "web-big", "--size", "201"});
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("jobs.max_plan_nodes") != std::string::npos);
}

}  // namespace weft
