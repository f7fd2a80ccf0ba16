// The job engine end to end: the real weftd, weft-host and weft binaries with
// the fake provider and automator (plugins/*/fake), on ephemeral loopback ports
// and a temp data directory per test. Every case asserts what the store says
// happened (jobs, tasks, attempts, cluster layout and node results) through
// job.get / cluster.get, and drives the operations through the real CLI.
//
// The fake plugins' knobs used here: latency_ms, jitter_ms, fail_actions with
// fail_attempts (fail only the first N attempts), the provider's make_ssh_key
// (a made-up private key, to check redaction) and the automator's echo_task
// (the task as the plugin saw it comes back as the result field `echo`).
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/store_rows.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::CountRows;
using testing::ExecSql;
using testing::Host;
using testing::Process;
using testing::ProcessOptions;
using testing::RunResult;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// From a weft-host log: for each task, when each attempt started and ended
// running in the plugin (ISO timestamps, which compare as strings).
std::map<std::int64_t, std::map<std::int64_t, std::pair<std::string, std::string>>> RunIntervals(
    const std::string& log) {
  static const std::regex start(R"(^(\S+) .*: task (\d+) attempt (\d+): [\w-]+ [A-Z]+$)");
  static const std::regex end(R"(^(\S+) .*: task (\d+) attempt (\d+) (succeeded|failed) in \d+ ms)");
  std::map<std::int64_t, std::map<std::int64_t, std::pair<std::string, std::string>>> out;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, start))
      out[std::stoll(m[2])][std::stoll(m[3])].first = m[1];
    else if (std::regex_search(line, m, end))
      out[std::stoll(m[2])][std::stoll(m[3])].second = m[1];
  }
  return out;
}

// weftd for these tests in `dir` (WEFT_TEST_DEBUG=1: at debug level, to see a failure's story).
testing::WeftdOptions ServerIn(const fs::path& dir, const std::string& extra_toml) {
  return {.dir = dir,
          .server_toml = std::getenv("WEFT_TEST_DEBUG") ? "log_level = \"debug\"\n" : "",
          .extra_toml = extra_toml,
          .cli_timeout = 90s};
}

// One weft-host (master and its workers) with the build's plugin directories.
testing::HostOptions HostIn(const fs::path& dir, const std::string& id, const std::string& server, int capacity) {
  // DEBUG: a task's start is logged (the abort test waits for one).
  return {.dir = dir,
          .id = id,
          .server = server,
          .capacity = capacity,
          .workers = 2,
          .shutdown_grace_ms = 1000,
          .extra_toml = "log_level = \"debug\"\n"};
}

// weftd, its hosts and a catalog, in one temp directory.
struct Env {
  explicit Env(const std::string& name, const std::string& extra_toml, int host_count = 1, int capacity = 4)
      : dir(name), server(ServerIn(dir.path(), extra_toml)) {
    for (int i = 1; i <= host_count; ++i)
      hosts.push_back(std::make_unique<Host>(HostIn(dir.path(), "h" + std::to_string(i), server.provisioner(), capacity)));
  }
  void Import(const CatalogDir& catalog) {
    RunResult r = server.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err << Tail(server.Log()));
    REQUIRE(r.exit_code == 0);
  }
  // `weft -o json ARGS... --wait`, which must succeed; the job with its tasks.
  json RunJob(std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    RunResult r = server.Weft(args);
    INFO("weft " << args[2] << " " << args[3] << ": " << r.out << r.err << Tail(server.Log()) << Logs());
    REQUIRE(r.exit_code == 0);
    const json reply = json::parse(r.out, nullptr, false);
    REQUIRE(reply.is_object());
    const json& job = reply["job"];  // -o json with --wait: {"job"}
    REQUIRE(job["status"] == "succeeded");
    return server.Job(job["id"].get<std::string>());
  }
  std::string Logs() const {
    std::string out;
    for (const auto& h : hosts) out += "--- host " + h->id() + " ---\n" + Tail(h->Log(), 3000);
    return out;
  }

  TempDir dir;
  Weftd server;
  std::vector<std::unique_ptr<Host>> hosts;
};

// ---- reading jobs and clusters ---------------------------------------------------

std::vector<json> TasksWhere(const json& job, const std::function<bool(const json&)>& pred) {
  std::vector<json> out;
  for (const json& t : job["tasks"])
    if (pred(t)) out.push_back(t);
  return out;
}
std::vector<json> TasksOf(const json& job, const std::string& action, const std::string& service = "*") {
  return TasksWhere(job, [&](const json& t) {
    return t["action"] == action && (service == "*" || t.value("service", "") == service);
  });
}
std::set<std::string> NodesOf(const std::vector<json>& tasks) {
  std::set<std::string> out;
  for (const json& t : tasks) out.insert(t.value("node", ""));
  return out;
}
// Services that have a task in the job, and the actions of those tasks.
std::set<std::string> ServicesWithTasks(const json& job) {
  std::set<std::string> out;
  for (const json& t : job["tasks"])
    if (!t.value("service", "").empty() && t["action"] != "JOIN") out.insert(t["service"].get<std::string>());
  return out;
}
std::set<std::string> ActionsOf(const json& job) {
  std::set<std::string> out;
  for (const json& t : job["tasks"])
    if (t["action"] != "JOIN") out.insert(t["action"].get<std::string>());
  return out;
}
std::map<std::string, json> NodesByName(const json& cluster) {
  std::map<std::string, json> out;
  for (const json& n : cluster["nodes"]) out[n["hostname"].get<std::string>()] = n;
  return out;
}
std::set<std::string> NodeNames(const json& cluster) {
  std::set<std::string> out;
  for (const auto& [name, n] : NodesByName(cluster)) out.insert(name);
  return out;
}
std::set<std::string> NodesRunning(const json& cluster, const std::string& service) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"])
    for (const json& s : n["services"])
      if (s == service) out.insert(n["hostname"].get<std::string>());
  return out;
}
std::set<std::string> StringSet(const json& list) {
  std::set<std::string> out;
  for (const json& s : list) out.insert(s.get<std::string>());
  return out;
}
// The number in a hostname such as "web-12" or "web-12.weft.test"; -1 when none.
long NodeNumber(const std::string& hostname) {
  std::string head = hostname.substr(0, hostname.find('.'));
  std::size_t digits = head.find_last_not_of("0123456789");
  if (digits == std::string::npos || digits + 1 == head.size()) return -1;
  return std::stol(head.substr(digits + 1));
}

void RequireAllSucceeded(const json& job) {
  INFO("job " << job.dump(1).substr(0, 8000));
  REQUIRE(job["status"] == "succeeded");
  for (const json& t : job["tasks"]) {
    INFO("task " << t.dump());
    CHECK(t["state"] == "succeeded");
  }
}

// The id of the newest cluster called `name`, terminated or not (a terminated
// cluster's name is free again, so only its id finds it).
std::string ClusterId(Weftd& server, const std::string& name) {
  std::string id;
  const json list = server.Call("cluster.list", {{"all", true}});
  for (const json& c : list["clusters"])
    if (c["name"] == name) id = c["id"];
  INFO("no cluster called " << name);
  REQUIRE(!id.empty());
  return id;
}

// The jobs of a cluster (name or id), newest first.
std::vector<json> JobsOf(Weftd& server, const std::string& cluster) {
  json jobs = server.Call("job.list", {{"cluster", cluster}})["jobs"];
  return {jobs.begin(), jobs.end()};
}

// The catalog most tests start from: echoing fake services, a fake provider
// that makes a private key, and a little latency so tasks overlap.
CatalogDir BaseCatalog(const fs::path& dir, std::int64_t latency_ms = 5) {
  CatalogDir c(dir);
  c.PatchActions("", "", {{"echo_task", true}, {"latency_ms", latency_ms}});
  c.PatchProvider({{"make_ssh_key", true}, {"latency_ms", latency_ms}});
  return c;
}

// `base` with the keys of `more`.
json With(json base, const json& more) {
  base.update(more);
  return base;
}

const std::string kFastJobs =
    "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
    "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n";

}  // namespace

// ---- 1. lifecycle --------------------------------------------------------------

TEST_CASE("jobs: a cluster's whole life with the fake plugins, through the weft CLI", "[jobs][integration]") {
  Env env("weft-jobs-life", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  env.Import(catalog);
  Weftd& s = env.server;

  // create --wait: exit 0 once every task succeeded.
  {
    RunResult r = s.Weft({"cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"});
    INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("succeeded"));
  }
  json c = s.Cluster("web");
  REQUIRE(c["status"] == "active");
  REQUIRE(c["nodes"].size() == 3);
  const std::set<std::string> first_nodes = NodeNames(c);
  json create = s.Job(c["latest_job"].get<std::string>());
  CHECK(create["operation"] == "create");
  CHECK(create["requested_by"] == "admin");
  RequireAllSucceeded(create);
  CHECK(NodesOf(TasksOf(create, "CREATE")) == first_nodes);
  CHECK(NodesOf(TasksOf(create, "CONFIRM")) == first_nodes);
  CHECK(NodesOf(TasksOf(create, "BOOTSTRAP")) == first_nodes);
  for (const char* svc : {"fake-base", "fake-haproxy", "fake-nginx", "fake-redis"})
    CHECK(NodesOf(TasksOf(create, "INSTALL", svc)) == NodesRunning(c, svc));
  // No stage barriers and the per-node order: every task ran after each task it waits for.
  {
    std::map<std::int64_t, json> by_id;
    for (const json& t : create["tasks"]) by_id[t["id"].get<std::int64_t>()] = t;
    for (const json& t : create["tasks"]) {
      if (t["attempts"].empty()) continue;
      for (const json& a : t["after"]) {
        const json& before = by_id.at(a.get<std::int64_t>());
        if (before["attempts"].empty()) continue;  // a JOIN
        INFO(t["key"] << " after " << before["key"]);
        CHECK(t["attempts"].back()["taken_at_ms"].get<std::int64_t>() >=
              before["attempts"].back()["finished_at_ms"].get<std::int64_t>());
      }
    }
  }

  // Dry runs change nothing.
  {
    const std::size_t jobs_before = JobsOf(s, "web").size();
    json plan = s.Call("cluster.scale", {{"cluster", "web"}, {"size", 5}, {"dry_run", true}});
    CHECK(plan["dry_run"] == true);
    CHECK(NodesOf(std::vector<json>(plan["tasks"].begin(), plan["tasks"].end())).size() >= 2);
    RunResult r = s.Weft({"cluster", "delete", "web", "--dry-run"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("dry run of delete") && Catch::Contains("3 × DELETE"));
    RunResult r2 = s.Weft({"cluster", "create", "web-two", "--template", "web-fake", "--size", "4", "--dry-run"});
    CHECK(r2.exit_code == 0);
    json after = s.Cluster("web");
    CHECK(after["status"] == "active");
    CHECK(NodeNames(after) == first_nodes);
    CHECK(after["latest_job"] == c["latest_job"]);
    CHECK(JobsOf(s, "web").size() == jobs_before);
    CHECK_FALSE(s.TryCall("cluster.get", {{"cluster", "web-two"}}).ok());
  }

  // scale up: only the new node is created; it gets its own results.
  std::string added;
  {
    json job = env.RunJob({"cluster", "scale", "web", "--size", "4"});
    RequireAllSucceeded(job);
    c = s.Cluster("web");
    REQUIRE(c["nodes"].size() == 4);
    for (const std::string& n : NodeNames(c))
      if (!first_nodes.count(n)) added = n;
    REQUIRE(!added.empty());
    CHECK(NodesOf(TasksOf(job, "CREATE")) == std::set<std::string>{added});
    CHECK(TasksOf(job, "DELETE").empty());
    CHECK(NodesByName(c)[added]["results"].value("provider_id", "") == "fake-" + added);
  }

  // rollback of the scale-up: the new node is deleted, the others stay untouched.
  {
    json job = env.RunJob({"cluster", "rollback", "web"});
    RequireAllSucceeded(job);
    CHECK(NodesOf(TasksOf(job, "DELETE")) == std::set<std::string>{added});
    CHECK(TasksOf(job, "CREATE").empty());
    c = s.Cluster("web");
    CHECK(NodeNames(c) == first_nodes);
    // And up again, for the shrink below.
    RequireAllSucceeded(env.RunJob({"cluster", "scale", "web", "--size", "4"}));
    c = s.Cluster("web");
    REQUIRE(c["nodes"].size() == 4);
    for (const std::string& n : NodeNames(c))
      if (!first_nodes.count(n)) added = n;
  }

  // scale down: the highest-numbered node of its kind goes, after its DELETE ran.
  {
    json before = s.Cluster("web");
    json job = env.RunJob({"cluster", "scale", "web", "--size", "3"});
    RequireAllSucceeded(job);
    c = s.Cluster("web");
    REQUIRE(c["nodes"].size() == 3);
    std::set<std::string> removed;
    for (const std::string& n : NodeNames(before))
      if (!NodeNames(c).count(n)) removed.insert(n);
    REQUIRE(removed.size() == 1);
    const std::string gone = *removed.begin();
    CHECK(gone == added);
    const json kind = NodesByName(before)[gone]["services"];
    for (const auto& [name, n] : NodesByName(before))
      if (n["services"] == kind) CHECK(NodeNumber(name) <= NodeNumber(gone));
    std::vector<json> deletes = TasksOf(job, "DELETE");
    REQUIRE(deletes.size() == 1);
    CHECK(deletes[0]["node"] == gone);
    CHECK(deletes[0]["state"] == "succeeded");
    CHECK(deletes[0]["attempts"].back()["status"] == "succeeded");
    CHECK(TasksOf(job, "CREATE").empty());
    CHECK(NodeNames(c) == first_nodes);
  }

  // add-services: monitoring must coexist with nginx, so it lands on the nginx nodes.
  std::set<std::string> nginx_nodes = NodesRunning(c, "fake-nginx");
  {
    json job = env.RunJob({"cluster", "add-services", "web", "fake-monitoring"});
    RequireAllSucceeded(job);
    c = s.Cluster("web");
    CHECK(StringSet(c["services"]).count("fake-monitoring"));
    CHECK(NodesRunning(c, "fake-monitoring") == nginx_nodes);
    CHECK(NodesOf(TasksOf(job, "INSTALL", "fake-monitoring")) == nginx_nodes);
    CHECK(NodesOf(TasksOf(job, "START", "fake-monitoring")) == nginx_nodes);
    CHECK(TasksOf(job, "INSTALL", "fake-nginx").empty());
    CHECK(TasksOf(job, "CREATE").empty());
  }

  // remove-services: monitoring stops (it has no REMOVE action) and leaves every node.
  {
    json job = env.RunJob({"cluster", "remove-services", "web", "fake-monitoring"});
    RequireAllSucceeded(job);
    c = s.Cluster("web");
    CHECK_FALSE(StringSet(c["services"]).count("fake-monitoring"));
    CHECK(NodesRunning(c, "fake-monitoring").empty());
    CHECK(NodesOf(TasksOf(job, "STOP", "fake-monitoring")) == nginx_nodes);
    // Only monitoring stops; the services that stay are reconfigured.
    for (const json& t : job["tasks"])
      if (t["action"] != "JOIN" && t["service"] != "fake-monitoring") CHECK(t["action"] == "CONFIGURE");
    CHECK(TasksOf(job, "STOP").size() == nginx_nodes.size());
  }

  // stop nginx: it and what needs it at runtime (haproxy requires an http backend) stop;
  // start nginx: it and what it uses at runtime (redis) start. Nothing else has a task.
  {
    json stop = env.RunJob({"cluster", "stop", "web", "fake-nginx"});
    RequireAllSucceeded(stop);
    CHECK(ServicesWithTasks(stop) == std::set<std::string>{"fake-haproxy", "fake-nginx"});
    CHECK(ActionsOf(stop) == std::set<std::string>{"STOP"});
    CHECK(NodesOf(TasksOf(stop, "STOP", "fake-nginx")) == nginx_nodes);
    // Dependents stop first.
    for (const json& h : TasksOf(stop, "STOP", "fake-haproxy"))
      for (const json& n : TasksOf(stop, "STOP", "fake-nginx"))
        CHECK(n["attempts"].back()["taken_at_ms"] >= h["attempts"].back()["finished_at_ms"]);

    json start = env.RunJob({"cluster", "start", "web", "fake-nginx"});
    RequireAllSucceeded(start);
    CHECK(ServicesWithTasks(start) == std::set<std::string>{"fake-nginx", "fake-redis"});
    CHECK(ActionsOf(start) == std::set<std::string>{"START"});
    // Dependencies start first.
    for (const json& r : TasksOf(start, "START", "fake-redis"))
      for (const json& n : TasksOf(start, "START", "fake-nginx"))
        CHECK(n["attempts"].back()["taken_at_ms"] >= r["attempts"].back()["finished_at_ms"]);

    // restart haproxy (stopped with nginx above; nginx runs again now): nothing needs
    // it, so only it stops and then starts, on its own node.
    json restart = env.RunJob({"cluster", "restart", "web", "fake-haproxy"});
    RequireAllSucceeded(restart);
    CHECK(restart["operation"] == "restart");
    CHECK(ServicesWithTasks(restart) == std::set<std::string>{"fake-haproxy"});
    CHECK(ActionsOf(restart) == std::set<std::string>{"STOP", "START"});
    CHECK(NodesOf(TasksOf(restart, "STOP", "fake-haproxy")) == NodesRunning(c, "fake-haproxy"));
    CHECK(NodesOf(TasksOf(restart, "START", "fake-haproxy")) == NodesRunning(c, "fake-haproxy"));
    for (const json& h : TasksOf(restart, "STOP", "fake-haproxy"))
      for (const json& n : TasksOf(restart, "START", "fake-haproxy"))
        CHECK(n["attempts"].back()["taken_at_ms"] >= h["attempts"].back()["finished_at_ms"]);
  }

  // reconfigure: the config a task gets has its macros expanded for that task's node.
  const json node_results = [&] {
    json out = json::object();
    for (const auto& [name, n] : NodesByName(c)) out[name] = n["results"];
    return out;
  }();
  const std::string redis_node = *NodesRunning(c, "fake-redis").begin();
  const std::string redis_ip = node_results[redis_node].value("bind_v4", "");
  REQUIRE(!redis_ip.empty());
  {
    json job = env.RunJob({"cluster", "reconfigure", "web", "--config",
                           R"({"app":{"redis":"%ip.bind_v4.service.fake-redis%:6379","me":"%host.self%",)"
                           R"("web_nodes":"%num.service.fake-nginx%"}})"});
    RequireAllSucceeded(job);
    CHECK(ActionsOf(job) == std::set<std::string>{"CONFIGURE"});
    std::vector<json> configures = TasksOf(job, "CONFIGURE");
    CHECK(NodesOf(configures) == first_nodes);
    for (const json& t : configures) {
      INFO(t.dump());
      const json& seen = t["result"]["echo"]["config"];
      CHECK(seen["app"]["redis"] == redis_ip + ":6379");
      CHECK(seen["app"]["me"] == node_results[t["node"].get<std::string>()]["hostname"]);
      CHECK(seen["app"]["web_nodes"] == std::to_string(nginx_nodes.size()));
      CHECK(seen["nginx"]["port"] == "8080");  // the template's default config stays
    }
    c = s.Cluster("web");
    // The cluster keeps the macros; only tasks see them expanded.
    CHECK(c["config"]["app"]["redis"] == "%ip.bind_v4.service.fake-redis%:6379");
    CHECK(c["has_previous"] == true);
  }

  // rollback: back to the config before the reconfigure, pushed to every node again.
  {
    json job = env.RunJob({"cluster", "rollback", "web"});
    RequireAllSucceeded(job);
    CHECK(job["operation"] == "rollback");
    c = s.Cluster("web");
    CHECK_FALSE(c["config"].contains("app"));
    CHECK(c["config"]["nginx"]["port"] == "8080");
    CHECK(NodeNames(c) == first_nodes);
    std::vector<json> configures = TasksOf(job, "CONFIGURE");
    REQUIRE(!configures.empty());
    for (const json& t : configures) CHECK_FALSE(t["result"]["echo"]["config"].contains("app"));
  }

  // upgrade: a new version of fake-nginx in the catalog; only nginx is reinstalled and restarted.
  {
    RunResult none = s.Weft({"cluster", "upgrade", "web"});
    CHECK(none.exit_code != 0);
    CHECK_THAT(none.err, Catch::Contains("nothing to upgrade"));
    catalog.PatchActions("fake-nginx", "", {{"build", 2}});
    env.Import(catalog);
    json job = env.RunJob({"cluster", "upgrade", "web"});
    RequireAllSucceeded(job);
    CHECK(ServicesWithTasks(job) == std::set<std::string>{"fake-nginx"});
    CHECK(NodesOf(TasksOf(job, "INSTALL", "fake-nginx")) == nginx_nodes);
    CHECK(NodesOf(TasksOf(job, "START", "fake-nginx")) == nginx_nodes);
    for (const json& t : TasksOf(job, "INSTALL", "fake-nginx")) CHECK(t["result"]["echo"]["fields"]["build"] == 2);
    CHECK(TasksOf(job, "CREATE").empty());
    CHECK(NodeNames(s.Cluster("web")) == first_nodes);
  }

  // delete: every node is deleted; the cluster is terminated and listed only with --all.
  {
    json job = env.RunJob({"cluster", "delete", "web"});
    RequireAllSucceeded(job);
    CHECK(NodesOf(TasksOf(job, "DELETE")) == first_nodes);
    // A terminated cluster's name is free again; until a new cluster takes it, it finds the terminated one.
    const std::string cluster_id = c["id"];
    CHECK(s.Cluster("web")["id"] == cluster_id);
    c = s.Cluster(cluster_id);
    CHECK(c["status"] == "terminated");
    CHECK(c["nodes"].empty());
    CHECK(s.Call("cluster.list", json::object())["clusters"].empty());
    json all = s.Call("cluster.list", {{"all", true}})["clusters"];
    REQUIRE(all.size() == 1);
    CHECK(all[0]["status"] == "terminated");
    // A terminated cluster takes no more jobs.
    RunResult r = s.Weft({"cluster", "scale", cluster_id, "--size", "4"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("terminated"));
  }
  // The statements kept prepared across requests (a job's node, cluster and
  // catalog reads) give back their rows: none holds a read open past a commit.
  CHECK_THAT(s.Log(), !Catch::Contains("left open across a commit"));
}

// cluster.list reads each cluster's template, provider, size and services from
// columns the store writes beside the spec and layout; what cluster.get reads
// from the layout itself must agree with them after every change.
TEST_CASE("jobs: cluster.list shows each cluster's template, provider, size and services as its layout has them, "
          "after every change and for a cluster stored before the store kept them apart",
          "[jobs][integration]") {
  Env env("weft-jobs-list", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog", 0);
  env.Import(catalog);
  Weftd& s = env.server;
  const std::string provider = catalog.Get("clustertemplates", "web-fake")["defaults"]["provider"];

  // The list entry of `name` against what cluster.get says of its nodes.
  auto check_listed = [&](const std::string& name) {
    const json c = s.Cluster(name);
    const json list = s.Call("cluster.list", json::object());
    json listed;
    for (const json& l : list["clusters"])
      if (l["name"] == name) listed = l;
    INFO(name << ": " << listed.dump() << " against " << c.dump().substr(0, 4000));
    REQUIRE(listed.is_object());
    std::set<std::string> services;
    for (const json& n : c["nodes"])
      for (const json& sv : n["services"]) services.insert(sv.get<std::string>());
    CHECK(listed["template"] == "web-fake");
    CHECK(listed["provider"] == provider);
    CHECK(listed["size"] == c["nodes"].size());
    CHECK(listed["services"] == json(services));  // sorted, each once
    for (const char* key : {"id", "name", "owner", "status", "created_at_ms", "updated_at_ms", "expire_at_ms",
                            "latest_job"})
      CHECK(listed[key] == c[key]);
    // The list is written as text, cluster.get's summary as a tree: the same keys.
    std::set<std::string> keys;
    for (const auto& [key, value] : listed.items()) keys.insert(key);
    CHECK(keys == std::set<std::string>{"created_at_ms", "expire_at_ms", "id", "latest_job", "name", "owner",
                                        "provider", "services", "size", "status", "template", "updated_at_ms"});
    return listed;
  };

  env.RunJob({"cluster", "create", "one", "--template", "web-fake", "--size", "3"});
  env.RunJob({"cluster", "create", "two", "--template", "web-fake", "--size", "4"});
  check_listed("one");
  check_listed("two");

  env.RunJob({"cluster", "scale", "one", "--size", "5"});
  CHECK(check_listed("one")["size"] == 5);
  env.RunJob({"cluster", "add-services", "two", "fake-monitoring"});
  CHECK(StringSet(check_listed("two")["services"]).count("fake-monitoring") == 1);
  env.RunJob({"cluster", "remove-services", "two", "fake-monitoring"});
  CHECK(StringSet(check_listed("two")["services"]).count("fake-monitoring") == 0);

  // Rows as a store before the summary columns left them: reading derives the
  // summary from spec and layout, and the next change of the cluster stores it.
  REQUIRE(ExecSql(s, "UPDATE clusters SET template_name = '', provider_name = '', node_count = -1, services = '[]'") ==
          "");
  check_listed("one");
  check_listed("two");
  env.RunJob({"cluster", "scale", "two", "--size", "3"});
  CHECK(check_listed("two")["size"] == 3);
  CHECK(CountRows(s, "SELECT COUNT(*) FROM clusters WHERE node_count = 3 AND template_name = 'web-fake'") == 1);

  // job.list names each job's cluster.
  const json jobs = s.Call("job.list", json::object());
  REQUIRE(jobs["jobs"].size() == 6);
  const json one_id = s.Cluster("one")["id"];
  for (const json& j : jobs["jobs"]) CHECK(j["cluster_name"] == (j["cluster_id"] == one_id ? "one" : "two"));

  // Terminated clusters only with `all`, with the summary of what is left (no nodes).
  env.RunJob({"cluster", "delete", "one"});
  json live = s.Call("cluster.list", json::object())["clusters"];
  REQUIRE(live.size() == 1);
  CHECK(live[0]["name"] == "two");
  json all = s.Call("cluster.list", {{"all", true}})["clusters"];
  REQUIRE(all.size() == 2);
  CHECK(all[0]["name"] == "one");
  CHECK(all[0]["status"] == "terminated");
  CHECK(all[0]["size"] == 0);
  CHECK(all[0]["services"].empty());
  CHECK(all[0]["template"] == "web-fake");

  // weftd keeps the summaries it listed: a cluster created since is listed too.
  env.RunJob({"cluster", "create", "three", "--template", "web-fake", "--size", "3"});
  CHECK(check_listed("three")["size"] == 3);
}

// ---- 2. results flow -------------------------------------------------------------

TEST_CASE("jobs: CREATE and CONFIRM results reach later tasks of the node, private keys never show",
          "[jobs][integration]") {
  Env env("weft-jobs-results", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  env.Import(catalog);
  Weftd& s = env.server;

  json job = env.RunJob({"cluster", "create", "res", "--template", "web-fake", "--size", "3"});
  RequireAllSucceeded(job);
  json c = s.Cluster("res");
  REQUIRE(c["nodes"].size() == 3);

  for (const auto& [name, n] : NodesByName(c)) {
    INFO(name << ": " << n.dump());
    const json& r = n["results"];
    CHECK(r.value("provider_id", "") == "fake-" + name);   // CREATE
    CHECK(r["ssh_auth"]["user"] == "fake");                 // CREATE
    CHECK(r["ssh_auth"]["private_key"] == "<redacted>");
    CHECK(r.value("access_v4", "").rfind("10.", 0) == 0);  // CONFIRM
    CHECK(r.value("bind_v4", "") == r.value("access_v4", ""));
    CHECK(!r.value("hostname", "").empty());
  }
  // Every service task saw what CREATE and CONFIRM of its own node returned, and the key.
  std::vector<json> service_tasks =
      TasksWhere(job, [](const json& t) { return !t.value("service", "").empty() && t["action"] != "JOIN"; });
  REQUIRE(service_tasks.size() >= 9);
  for (const json& t : service_tasks) {
    INFO(t.dump());
    const std::string node = t["node"];
    const json mine = NodesByName(c)[node]["results"];
    const json& echo = t["result"]["echo"];
    CHECK(echo["results"]["provider_id"] == "fake-" + node);
    CHECK(echo["results"]["access_v4"] == mine["access_v4"]);
    CHECK(echo["results"]["ssh_auth"]["private_key"] == "(not echoed)");  // it was there
    CHECK(echo["hostname"] == mine["hostname"]);
  }
  for (const json& t : TasksOf(job, "CREATE")) {
    CHECK(t["result"]["ssh_auth"]["private_key"] == "<redacted>");
    CHECK(t["result"]["provider_id"] == "fake-" + t["node"].get<std::string>());
  }
  for (const json& t : TasksOf(job, "CONFIRM")) CHECK(t["result"].contains("access_v4"));

  // The key itself appears nowhere an api user can read it.
  CHECK(job.dump().find("FAKE PRIVATE KEY") == std::string::npos);
  CHECK(c.dump().find("FAKE PRIVATE KEY") == std::string::npos);
  RunResult show = s.Weft({"-o", "json", "job", "show", job["id"].get<std::string>()});
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("FAKE PRIVATE KEY") == std::string::npos);
  RunResult get = s.Weft({"-o", "json", "cluster", "get", "res"});
  CHECK(get.exit_code == 0);
  CHECK(get.out.find("FAKE PRIVATE KEY") == std::string::npos);
}

// ---- 3. failures -----------------------------------------------------------------

TEST_CASE("jobs: failed attempts are retried with backoff, a task that fails for good fails the job, "
          "which is undone or, with keep_on_failure, kept and resumed by retry",
          "[jobs][integration]") {
  constexpr std::int64_t kBackoffMs = 250;
  Env env("weft-jobs-fail", "[jobs]\nmax_attempts = 3\nretry_backoff_ms = " + std::to_string(kBackoffMs) +
                                "\nretry_backoff_max_ms = 5000\njanitor_interval_ms = 100\n");
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  // fake-base INSTALL fails once per task; fake-redis START fails its first three attempts.
  catalog.PatchActions("fake-base", "install", {{"fail_actions", "INSTALL"}, {"fail_attempts", 1}});
  catalog.PatchActions("fake-redis", "start", {{"fail_actions", "START"}, {"fail_attempts", 3}});
  env.Import(catalog);
  Weftd& s = env.server;

  // Without keep_on_failure: `create --wait` fails, prints the failed task, and the undo deletes everything.
  {
    RunResult r = s.Weft({"cluster", "create", "bad", "--template", "web-fake", "--size", "3", "--wait"});
    INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("failed: task") && Catch::Contains("/START/fake-redis") &&
                          Catch::Contains("fail_actions lists it (attempt 3"));
    CHECK_THAT(r.err, Catch::Contains("undoing it"));

    const std::string bad_id = ClusterId(s, "bad");
    json c = s.Cluster(bad_id);
    std::vector<json> jobs = JobsOf(s, bad_id);
    REQUIRE(jobs.size() == 2);
    json undo = s.Job(jobs[0]["id"]);
    json create = s.Job(jobs[1]["id"]);
    CHECK(create["operation"] == "create");
    CHECK(create["status"] == "failed");
    CHECK_THAT(create["message"].get<std::string>(), Catch::Contains("START/fake-redis") &&
                                                        Catch::Contains("3 attempt(s)"));

    // The retried INSTALLs: a failed attempt, the backoff, then success.
    std::vector<json> installs = TasksOf(create, "INSTALL", "fake-base");
    REQUIRE(installs.size() == 3);
    for (const json& t : installs) {
      INFO(t.dump());
      CHECK(t["state"] == "succeeded");
      REQUIRE(t["attempts"].size() == 2);
      CHECK(t["attempt"] == 2);
      CHECK(t["attempts"][0]["status"] == "failed");
      CHECK(t["attempts"][1]["status"] == "succeeded");
      CHECK(t["attempts"][1]["taken_at_ms"].get<std::int64_t>() -
                t["attempts"][0]["finished_at_ms"].get<std::int64_t>() >= kBackoffMs);
    }
    // The START that failed for good: three attempts, the backoff doubling between them.
    std::vector<json> redis = TasksOf(create, "START", "fake-redis");
    REQUIRE(redis.size() == 1);
    const json& bad = redis[0];
    INFO(bad.dump());
    CHECK(bad["state"] == "failed");
    REQUIRE(bad["attempts"].size() == 3);
    for (const json& a : bad["attempts"]) CHECK(a["status"] == "failed");
    CHECK(bad["attempts"][1]["taken_at_ms"].get<std::int64_t>() -
              bad["attempts"][0]["finished_at_ms"].get<std::int64_t>() >= kBackoffMs);
    CHECK(bad["attempts"][2]["taken_at_ms"].get<std::int64_t>() -
              bad["attempts"][1]["finished_at_ms"].get<std::int64_t>() >= 2 * kBackoffMs);
    // What waited for it never started: cancelled, no attempt; nothing is left pending.
    std::vector<json> cancelled = TasksWhere(create, [](const json& t) { return t["state"] == "cancelled"; });
    CHECK(!cancelled.empty());
    CHECK(!TasksOf(create, "START", "fake-nginx").empty());
    for (const json& t : TasksOf(create, "START", "fake-nginx")) CHECK(t["state"] == "cancelled");
    for (const json& t : cancelled) {
      CHECK(t["attempt"] == 0);
      CHECK(t["attempts"].empty());
    }
    for (const json& t : create["tasks"]) CHECK((t["state"] == "succeeded" || t["state"] == "failed" ||
                                                 t["state"] == "cancelled"));

    // The undo: a job of its own, deleting every node the create made.
    CHECK(undo["operation"] == "undo");
    CHECK(undo["parent_job"] == create["id"]);
    RequireAllSucceeded(undo);
    CHECK(NodesOf(TasksOf(undo, "DELETE")) == NodesOf(TasksOf(create, "CREATE")));
    CHECK(NodesOf(TasksOf(undo, "DELETE")).size() == 3);
    CHECK(c["status"] == "terminated");
    CHECK(c["nodes"].empty());
    // An undone job cannot be retried.
    RunResult retry = s.Weft({"job", "retry", create["id"].get<std::string>()});
    CHECK(retry.exit_code != 0);
    CHECK_THAT(retry.err, Catch::Contains("undone"));
  }

  // With --keep-on-failure: the wreck stays (incomplete), and `job retry` resumes it to success.
  {
    RunResult r = s.Weft({"cluster", "create", "kept", "--template", "web-fake", "--size", "3", "--keep-on-failure",
                          "--wait"});
    INFO(r.out << r.err << Tail(s.Log()));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("/START/fake-redis"));
    json c = s.Cluster("kept");
    CHECK(c["status"] == "incomplete");
    CHECK(c["nodes"].size() == 3);
    std::vector<json> jobs = JobsOf(s, "kept");
    REQUIRE(jobs.size() == 1);  // no undo
    const std::string id = jobs[0]["id"];
    json failed = s.Job(id);
    CHECK(failed["status"] == "failed");
    const std::size_t cancelled =
        TasksWhere(failed, [](const json& t) { return t["state"] == "cancelled"; }).size();
    CHECK(cancelled > 0);
    for (const auto& [name, n] : NodesByName(c)) CHECK(n["results"].contains("provider_id"));  // nodes kept

    RunResult retry = s.Weft({"job", "retry", id, "--wait"});
    INFO(retry.out << retry.err << Tail(s.Log()));
    REQUIRE(retry.exit_code == 0);
    json done = s.Job(id);
    RequireAllSucceeded(done);
    std::vector<json> redis = TasksOf(done, "START", "fake-redis");
    REQUIRE(redis.size() == 1);
    CHECK(redis[0]["attempt"] == 4);
    CHECK(redis[0]["attempts"].size() == 4);
    CHECK(redis[0]["attempts"][3]["status"] == "succeeded");
    // The retry resumed the job: nothing that had succeeded ran again.
    for (const json& t : TasksOf(done, "CREATE")) CHECK(t["attempts"].size() == 1);
    c = s.Cluster("kept");
    CHECK(c["status"] == "active");
    CHECK(JobsOf(s, "kept").size() == 1);
  }
}

TEST_CASE("jobs: a failed scale-up and a failed add-services are undone back to the layout before them",
          "[jobs][integration]") {
  Env env("weft-jobs-undo", "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  // Only a fourth node's CREATE fails; monitoring never starts.
  catalog.PatchProvider({{"fail_actions", "CREATE"}, {"fail_nodes", "sc-4"}});
  catalog.PatchActions("fake-monitoring", "start", {{"fail_actions", "START"}});
  env.Import(catalog);
  Weftd& s = env.server;

  RequireAllSucceeded(env.RunJob({"cluster", "create", "sc", "--template", "web-fake", "--size", "3"}));
  const json before = s.Cluster("sc");
  REQUIRE(before["status"] == "active");

  // scale up: the new node cannot be made, so the undo deletes it and the cluster is as it was.
  {
    RunResult r = s.Weft({"cluster", "scale", "sc", "--size", "4", "--wait"});
    INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("/CREATE") && Catch::Contains("undoing it"));
    std::vector<json> jobs = JobsOf(s, "sc");
    REQUIRE(jobs.size() == 3);
    json undo = s.Job(jobs[0]["id"]);
    json scale = s.Job(jobs[1]["id"]);
    CHECK(scale["operation"] == "scale");
    CHECK(scale["status"] == "failed");
    std::vector<json> creates = TasksOf(scale, "CREATE");
    REQUIRE(creates.size() == 1);
    const std::string added = creates[0]["node"];
    CHECK(added.rfind("sc-4", 0) == 0);
    CHECK(creates[0]["state"] == "failed");
    CHECK(creates[0]["attempts"].size() == 2);
    CHECK(undo["operation"] == "undo");
    CHECK(undo["parent_job"] == scale["id"]);
    RequireAllSucceeded(undo);
    CHECK(NodesOf(TasksOf(undo, "DELETE")) == std::set<std::string>{added});
    CHECK(TasksOf(undo, "CREATE").empty());
    json c = s.Cluster("sc");
    CHECK(c["status"] == "active");
    CHECK(NodeNames(c) == NodeNames(before));
    for (const auto& [name, n] : NodesByName(c)) CHECK(n["services"] == NodesByName(before)[name]["services"]);
  }

  // add-services: monitoring's START fails for good; the undo stops it and takes it off again.
  {
    RunResult r = s.Weft({"cluster", "add-services", "sc", "fake-monitoring", "--wait"});
    INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("/START/fake-monitoring"));
    std::vector<json> jobs = JobsOf(s, "sc");
    REQUIRE(jobs.size() == 5);
    json undo = s.Job(jobs[0]["id"]);
    json add = s.Job(jobs[1]["id"]);
    CHECK(add["operation"] == "add-services");
    CHECK(add["status"] == "failed");
    const std::set<std::string> installed = NodesOf(TasksOf(add, "INSTALL", "fake-monitoring"));
    CHECK(!installed.empty());
    CHECK(undo["operation"] == "undo");
    CHECK(undo["parent_job"] == add["id"]);
    RequireAllSucceeded(undo);
    CHECK(NodesOf(TasksOf(undo, "STOP", "fake-monitoring")) == installed);
    CHECK(TasksOf(undo, "DELETE").empty());
    CHECK(TasksOf(undo, "INSTALL").empty());
    json c = s.Cluster("sc");
    CHECK(c["status"] == "active");
    CHECK_FALSE(StringSet(c["services"]).count("fake-monitoring"));
    CHECK(NodeNames(c) == NodeNames(before));
    for (const auto& [name, n] : NodesByName(c)) CHECK(n["services"] == NodesByName(before)[name]["services"]);
  }
}

TEST_CASE("jobs: a failed scale-down is not undone (that would create its node a second time), job retry "
          "finishes it",
          "[jobs][integration]") {
  Env env("weft-jobs-shrink", "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  // The fourth node can be made, but the first two attempts to delete it fail.
  catalog.PatchProvider({{"fail_actions", "DELETE"}, {"fail_nodes", "sh-4"}, {"fail_attempts", 2}});
  env.Import(catalog);
  Weftd& s = env.server;

  RequireAllSucceeded(env.RunJob({"cluster", "create", "sh", "--template", "web-fake", "--size", "3"}));
  const std::set<std::string> three = NodeNames(s.Cluster("sh"));
  RequireAllSucceeded(env.RunJob({"cluster", "scale", "sh", "--size", "4"}));
  const json four = s.Cluster("sh");
  REQUIRE(four["nodes"].size() == 4);

  RunResult r = s.Weft({"cluster", "scale", "sh", "--size", "3", "--wait"});
  INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("/DELETE"));
  CHECK_THAT(r.err, !Catch::Contains("undoing it"));
  std::vector<json> jobs = JobsOf(s, "sh");
  REQUIRE(jobs.size() == 3);  // create, scale up, the failed scale down: no undo job
  json shrink = s.Job(jobs[0]["id"]);
  CHECK(shrink["operation"] == "scale");
  CHECK(shrink["status"] == "failed");
  std::vector<json> deletes = TasksOf(shrink, "DELETE");
  REQUIRE(deletes.size() == 1);
  const std::string gone = deletes[0]["node"];
  CHECK(gone.rfind("sh-4", 0) == 0);
  CHECK(deletes[0]["state"] == "failed");
  CHECK(deletes[0]["attempts"].size() == 2);
  // Its services were stopped; the node still exists, with what CREATE returned.
  CHECK(!TasksOf(shrink, "STOP").empty());
  CHECK(NodesOf(TasksOf(shrink, "STOP")) == std::set<std::string>{gone});
  json c = s.Cluster("sh");
  CHECK(c["status"] == "inconsistent");
  CHECK(TasksOf(shrink, "CREATE").empty());

  // Retry gives the DELETE more attempts; the third one succeeds and the shrink is done.
  RunResult retry = s.Weft({"job", "retry", shrink["id"].get<std::string>(), "--wait"});
  INFO(retry.out << retry.err << Tail(s.Log()));
  REQUIRE(retry.exit_code == 0);
  json done = s.Job(shrink["id"]);
  RequireAllSucceeded(done);
  deletes = TasksOf(done, "DELETE");
  REQUIRE(deletes.size() == 1);
  CHECK(deletes[0]["attempts"].size() == 3);
  c = s.Cluster("sh");
  CHECK(c["status"] == "active");
  CHECK(NodeNames(c) == three);
  CHECK(JobsOf(s, "sh").size() == 3);
}

TEST_CASE("jobs: abort has the hosts stop the running attempts and ends once they have, so the next "
          "operation never runs beside them",
          "[jobs][integration]") {
  Env env("weft-jobs-abort-stop", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog", 3000);
  env.Import(catalog);
  Weftd& s = env.server;
  Host& host = *env.hosts[0];

  json started = s.Call("cluster.create", {{"name", "ab"}, {"template", "web-fake"}, {"size", 3}});
  const std::string id = started["job"]["id"];
  REQUIRE(WaitFor([&] { return host.Log().find(": fake-provider CREATE") != std::string::npos; }, 30s));
  RunResult r = s.Weft({"job", "abort", id});
  INFO(r.out << r.err << Tail(host.Log()));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("running attempt(s) to stop on their hosts"));
  CHECK_THAT(r.out, Catch::Contains("job " + id + " aborted"));
  // When the command returns, nothing of the job runs any more: every CREATE
  // the host had started was stopped by it (not left to finish beside what comes next).
  json job = s.Job(id);
  CHECK(job["status"] == "aborted");
  CHECK(job["progress"]["running"] == 0);
  std::vector<json> creates = TasksOf(job, "CREATE");
  REQUIRE(!creates.empty());
  int stopped = 0;
  for (const json& t : creates) {
    INFO(t.dump());
    CHECK(t["state"] == "cancelled");
    if (t["attempts"].empty()) continue;  // never handed out
    CHECK(t["attempts"].back()["finished_at_ms"].get<std::int64_t>() > 0);
    CHECK(t["attempts"].back()["status"] == "cancelled");
    if (t["message"].get<std::string>().find("its host stopped it") != std::string::npos) ++stopped;
  }
  CHECK(stopped > 0);
  CHECK_THAT(host.Log(), Catch::Contains("is stale (weftd cancelled the task"));
  CHECK_THAT(host.Log(), !Catch::Contains("weftd refused the finish"));
  // The delete that follows starts at once, with nothing of the create left running.
  RunResult del = s.Weft({"cluster", "delete", "ab", "--wait"});
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);
}

TEST_CASE("jobs: abort stops a running job and undoes nothing, retry resumes it, a busy cluster "
          "refuses a second operation",
          "[jobs][integration]") {
  Env env("weft-jobs-abort", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog", 250);
  env.Import(catalog);
  Weftd& s = env.server;

  json started = s.Call("cluster.create", {{"name", "ab"}, {"template", "web-fake"}, {"size", 3}});
  const std::string id = started["job"]["id"];
  {
    RunResult r = s.Weft({"cluster", "scale", "ab", "--size", "4"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("has job " + id + " running"));
  }
  // Abort while some tasks are done and some run.
  REQUIRE(WaitFor(
      [&] {
        json j = s.Job(id, false);
        return j["progress"]["succeeded"] >= 4 && j["progress"]["running"] >= 1;
      },
      30s));
  RunResult r = s.Weft({"job", "abort", id});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json aborted = s.Job(id);
  CHECK(aborted["status"] == "aborted");
  CHECK_THAT(aborted["message"].get<std::string>(), Catch::Contains("aborted by"));
  std::int64_t cancelled = 0, succeeded = 0;
  for (const json& t : aborted["tasks"]) {
    INFO(t.dump());
    CHECK((t["state"] == "succeeded" || t["state"] == "cancelled"));
    cancelled += t["state"] == "cancelled";
    succeeded += t["state"] == "succeeded";
  }
  CHECK(cancelled > 0);
  CHECK(s.Cluster("ab")["status"] == "incomplete");
  CHECK(JobsOf(s, "ab").size() == 1);  // nothing undone
  RunResult again = s.Weft({"job", "abort", id});
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.err, Catch::Contains("already aborted"));
  // What was running when it was aborted cannot change the job afterwards.
  std::this_thread::sleep_for(800ms);
  json later = s.Job(id);
  CHECK(later["status"] == "aborted");
  CHECK(later["progress"]["succeeded"] == succeeded);

  RunResult retry = s.Weft({"job", "retry", id, "--wait"});
  INFO(retry.out << retry.err << Tail(s.Log()));
  REQUIRE(retry.exit_code == 0);
  json done = s.Job(id);
  RequireAllSucceeded(done);
  CHECK(s.Cluster("ab")["status"] == "active");
  // Tasks that had succeeded did not run again.
  for (const json& t : done["tasks"])
    if (t["action"] == "CREATE") CHECK(t["attempts"].size() == 1);
}

// ---- 4. CONFIRM failure re-creates the node --------------------------------------

TEST_CASE("jobs: a failed CONFIRM deletes the node and creates it again before confirming again",
          "[jobs][integration]") {
  Env env("weft-jobs-confirm", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  catalog.PatchProvider({{"fail_actions", "CONFIRM"}, {"fail_attempts", 1}});
  env.Import(catalog);
  Weftd& s = env.server;

  json job = env.RunJob({"cluster", "create", "conf", "--template", "web-fake", "--size", "3"});
  RequireAllSucceeded(job);
  json c = s.Cluster("conf");
  CHECK(c["status"] == "active");
  std::map<std::string, json> by_key;
  for (const json& t : job["tasks"]) by_key[t["key"].get<std::string>()] = t;
  for (const std::string& node : NodeNames(c)) {
    INFO(node);
    REQUIRE(by_key.count(node + "/CONFIRM"));
    REQUIRE(by_key.count(node + "/DELETE#2"));
    REQUIRE(by_key.count(node + "/CREATE#2"));
    const json& confirm = by_key[node + "/CONFIRM"];
    const json& del = by_key[node + "/DELETE#2"];
    const json& create = by_key[node + "/CREATE#2"];
    INFO(confirm.dump() << "\n" << del.dump() << "\n" << create.dump());
    REQUIRE(confirm["attempts"].size() == 2);
    CHECK(confirm["attempts"][0]["status"] == "failed");
    CHECK(confirm["attempts"][1]["status"] == "succeeded");
    REQUIRE(del["attempts"].size() == 1);
    REQUIRE(create["attempts"].size() == 1);
    // failed CONFIRM → DELETE#2 → CREATE#2 → CONFIRM again, in that order.
    CHECK(del["attempts"][0]["taken_at_ms"] >= confirm["attempts"][0]["finished_at_ms"]);
    CHECK(create["attempts"][0]["taken_at_ms"] >= del["attempts"][0]["finished_at_ms"]);
    CHECK(confirm["attempts"][1]["taken_at_ms"] >= create["attempts"][0]["finished_at_ms"]);
    CHECK(create["action"] == "CREATE");
    CHECK(del["action"] == "DELETE");
    CHECK(NodesByName(c)[node]["results"].contains("access_v4"));
    CHECK(NodesByName(c)[node]["results"].value("provider_id", "") == "fake-" + node);
  }
}

// ---- 5. weftd killed again and again -----------------------------------------------

TEST_CASE("jobs: kill -9 of weftd at random points of a 200-task job, it resumes, the audit holds",
          "[jobs][integration][crash]") {
  constexpr std::int64_t kLeaseMs = 800;
  Env env("weft-jobs-crash",
          "[tasks]\nlease_ms = " + std::to_string(kLeaseMs) +
              "\n[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\nmax_attempts = 10\n"
              "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 5000\n",
          1, 8);
  CatalogDir catalog(env.dir / "catalog");
  catalog.PatchActions("", "", {{"latency_ms", 40}, {"jitter_ms", 60}});
  catalog.PatchProvider({{"latency_ms", 40}, {"jitter_ms", 60}});
  catalog.DeriveTemplate("web-big", {{"constraints", {{"size", {{"min", 3}, {"max", 60}}}}}});
  env.Import(catalog);
  Weftd& s = env.server;

  std::uint64_t seed = std::random_device{}();
  if (const char* env_seed = std::getenv("WEFT_TEST_SEED")) seed = std::strtoull(env_seed, nullptr, 10);
  std::mt19937_64 rng(seed);
  INFO("seed " << seed << " (WEFT_TEST_SEED reproduces the kill points)");

  json started = s.Call("cluster.create", {{"name", "big"}, {"template", "web-big"}, {"size", 25}});
  const std::string id = started["job"]["id"];
  const std::int64_t total = s.Job(id, false)["progress"]["total"];
  INFO("the job has " << total << " tasks");
  REQUIRE(total >= 190);

  // Kill when the job is inside random bands of its progress, then stay down
  // longer than a lease so in-flight attempts expire and their finishes come late.
  constexpr int kKills = 4;
  int kills = 0;
  for (int k = 0; k < kKills; ++k) {
    const double lo = 0.05 + 0.2 * k, hi = lo + 0.15;
    const std::int64_t at = static_cast<std::int64_t>(
        total * std::uniform_real_distribution<double>(lo, hi)(rng));
    std::int64_t done = 0;
    std::string status;
    const bool reached = WaitFor(
        [&] {
          Result<json> j = s.TryCall("job.get", {{"job", id}});
          if (!j.ok()) return false;
          done = (*j)["job"]["progress"]["succeeded"];
          status = (*j)["job"]["status"];
          return done >= at || status != "running";
        },
        60s);
    INFO("waiting for " << at << " tasks done; " << done << " are, job " << status << "\n" << Tail(s.Log()));
    REQUIRE(reached);
    if (status != "running") break;
    // A random moment inside the band, not just the poll that crossed it.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
    s.Kill();
    ++kills;
    std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 300));
    REQUIRE(s.Start().ok());
  }
  CHECK(kills >= 3);

  json job = s.WaitJob(id, 120s);
  INFO(Tail(s.AllLogs(), 20000) << env.Logs());
  RequireAllSucceeded(job);
  CHECK(s.Cluster("big")["status"] == "active");
  CHECK(s.Cluster("big")["nodes"].size() == 25);

  // The audit: every attempt is recorded, numbered 1..n, ended before the next
  // began, only the last one succeeded. (A restarted weftd gives in-flight
  // attempts a fresh lease, so the live host usually finishes them; fencing of
  // late finishes is tested with a frozen host in tests/integration.)
  for (const json& t : job["tasks"]) {
    if (t["plugin"] == "") continue;  // a JOIN: no attempts
    INFO(t.dump());
    const json& a = t["attempts"];
    REQUIRE(!a.empty());
    CHECK(t["attempt"] == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i]["attempt"] == i + 1);
      CHECK(a[i]["finished_at_ms"].get<std::int64_t>() >= a[i]["taken_at_ms"].get<std::int64_t>());
      if (i + 1 < a.size()) {
        CHECK(a[i]["status"] != "succeeded");
        CHECK(a[i]["status"] != "running");
        CHECK(a[i + 1]["taken_at_ms"].get<std::int64_t>() >= a[i]["finished_at_ms"].get<std::int64_t>());
      }
    }
    CHECK(a.back()["status"] == "succeeded");
  }
  // On the host itself no attempt of a task started before the previous one ended.
  int checked = 0;
  for (const auto& [task, attempts] : RunIntervals(env.hosts[0]->Log())) {
    const std::pair<std::string, std::string>* previous = nullptr;
    for (const auto& [attempt, run] : attempts) {
      INFO("task " << task << " attempt " << attempt << " ran " << run.first << " .. " << run.second);
      if (previous) CHECK(run.first >= previous->second);
      previous = &run;
      ++checked;
    }
  }
  CHECK(checked >= total / 2);
  // The host was never restarted: it found each new weftd by itself.
  CHECK(env.hosts[0]->process().running());
  CHECK(WaitFor([&] { return s.HostLive("h1"); }, 10s));
  CHECK(s.starts() >= 1 + kills);
}

// ---- 6. a host killed mid-job ------------------------------------------------------

TEST_CASE("jobs: kill -9 of a weft-host mid-job, the other host finishes the dead one's tasks",
          "[jobs][integration][crash]") {
  Env env("weft-jobs-hostkill",
          "[tasks]\nlease_ms = 1500\n[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
          "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 1000\n",
          2, 2);
  CatalogDir catalog(env.dir / "catalog");
  catalog.PatchActions("", "", {{"latency_ms", 300}});
  catalog.PatchProvider({{"latency_ms", 300}});
  env.Import(catalog);
  Weftd& s = env.server;
  REQUIRE(WaitFor([&] { return s.HostLive("h1") && s.HostLive("h2"); }, 30s));

  json started = s.Call("cluster.create", {{"name", "hk"}, {"template", "web-fake"}, {"size", 4}});
  const std::string id = started["job"]["id"];
  // Wait until h1 holds tasks, then kill it.
  std::set<std::int64_t> held;
  REQUIRE(WaitFor(
      [&] {
        json j = s.Job(id, false);
        held.clear();
        for (const json& t : j["tasks"])
          if (t["state"] == "leased" && t["host_id"] == "h1") held.insert(t["id"].get<std::int64_t>());
        return !held.empty();
      },
      30s));
  env.hosts[0]->process().Signal(SIGKILL);
  REQUIRE(env.hosts[0]->process().Wait(10s).has_value());
  const auto killed_at = std::chrono::system_clock::now();

  json job = s.WaitJob(id, 90s);
  INFO(Tail(s.Log(), 10000) << env.Logs());
  RequireAllSucceeded(job);
  // The tasks h1 held were handed to h2: an attempt on h1 that did not succeed, then one on h2 that did.
  int moved = 0;
  for (const json& t : job["tasks"]) {
    const json& a = t["attempts"];
    if (a.empty()) continue;
    bool lost_on_h1 = false;
    for (const json& x : a) lost_on_h1 = lost_on_h1 || (x["host_id"] == "h1" && x["status"] != "succeeded");
    if (!lost_on_h1) continue;
    INFO(t.dump());
    ++moved;
    CHECK(a.back()["host_id"] == "h2");
    CHECK(a.back()["status"] == "succeeded");
    CHECK(t["host_id"] == "h2");
  }
  CHECK(moved >= 1);
  for (std::int64_t tid : held) {
    for (const json& t : job["tasks"]) {
      if (t["id"] != tid) continue;
      INFO(t.dump());
      CHECK(t["attempts"].size() >= 2);
      CHECK(t["attempts"].back()["host_id"] == "h2");
    }
  }
  // Nothing ran on h1 after it died.
  const std::int64_t killed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(killed_at.time_since_epoch()).count();
  for (const json& t : job["tasks"])
    for (const json& x : t["attempts"])
      if (x["host_id"] == "h1") CHECK(x["taken_at_ms"].get<std::int64_t>() <= killed_ms);
  CHECK_FALSE(s.HostLive("h1"));
  CHECK(s.HostLive("h2"));
}

// ---- 7. cluster leases ------------------------------------------------------------

TEST_CASE("jobs: a cluster whose lease runs out is deleted by the janitor, extend-lease keeps to the "
          "template's maximum",
          "[jobs][integration]") {
  Env env("weft-jobs-lease", kFastJobs);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  catalog.DeriveTemplate("web-short",
                         {{"administration", {{"leaseduration", {{"initial", "3s"}, {"max", "8s"}, {"step", "2s"}}}}}});
  env.Import(catalog);
  Weftd& s = env.server;

  // Longer than the template allows: refused before anything starts.
  {
    RunResult r = s.Weft({"cluster", "create", "long", "--template", "web-short", "--size", "3", "--lease", "1m"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("administration.leaseduration.max"));
    CHECK_FALSE(s.TryCall("cluster.get", {{"cluster", "long"}}).ok());
  }

  RunResult r = s.Weft({"cluster", "create", "lease", "--template", "web-short", "--size", "3", "--lease", "2s"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string lease_id = ClusterId(s, "lease");
  json c = s.Cluster(lease_id);
  const std::int64_t created = c["created_at_ms"];
  const std::int64_t expire = c["expire_at_ms"];
  CHECK(expire - created == 2000);
  const std::string create_job = c["latest_job"];

  // One step (2 s) fits under the maximum (8 s from creation); 20 s more does not.
  json extended = s.Call("cluster.extend_lease", {{"cluster", "lease"}});
  CHECK(extended["cluster"]["expire_at_ms"].get<std::int64_t>() >= expire + 2000);
  CHECK(extended["cluster"]["expire_at_ms"].get<std::int64_t>() <= created + 8000);
  RunResult too_long = s.Weft({"cluster", "extend-lease", "lease", "--lease", "20s"});
  CHECK(too_long.exit_code != 0);
  CHECK_THAT(too_long.err, Catch::Contains("maximum lease"));
  CHECK(s.Cluster(lease_id)["expire_at_ms"] == extended["cluster"]["expire_at_ms"]);

  // The janitor deletes it once the lease is over.
  std::string status;
  REQUIRE(WaitFor(
      [&] {
        status = s.Cluster(lease_id)["status"];
        return status == "terminated";
      },
      40s));
  c = s.Cluster(lease_id);
  CHECK(c["nodes"].empty());
  std::vector<json> jobs = JobsOf(s, lease_id);
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[1]["id"] == create_job);
  json del = s.Job(jobs[0]["id"]);
  CHECK(del["operation"] == "delete");
  CHECK_THAT(del["requested_by"].get<std::string>(), Catch::Contains("janitor"));
  RequireAllSucceeded(del);
  CHECK(NodesOf(TasksOf(del, "DELETE")).size() == 3);
  // The delete started only when the lease was over.
  CHECK(del["created_at_ms"].get<std::int64_t>() >= extended["cluster"]["expire_at_ms"].get<std::int64_t>());
}

// ---- 8. events --------------------------------------------------------------------

TEST_CASE("jobs: job and cluster transitions are published under <tenant>/job/<cluster> and "
          "<tenant>/cluster/<cluster>, a job task's progress under <tenant>/task/<cluster>/progress",
          "[jobs][integration]") {
  Env env("weft-jobs-events", kFastJobs);
  // Long enough for the fake plugins to report progress (at 25 %, 50 %, 75 %).
  CatalogDir catalog = BaseCatalog(env.dir / "catalog", /*latency_ms=*/60);
  env.Import(catalog);
  Weftd& s = env.server;

  zmq::socket_t sub(s.ctx(), zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.set(zmq::sockopt::subscribe, "default/job/");
  sub.set(zmq::sockopt::subscribe, "default/cluster/");
  sub.set(zmq::sockopt::subscribe, "default/task/");
  sub.connect(s.events());
  // Let the subscriptions reach weftd (it reads them as its loop turns).
  for (int i = 0; i < 10; ++i) {
    (void)s.TryCall("cluster.list", json::object());
    std::this_thread::sleep_for(50ms);
  }

  json started = s.Call("cluster.create", {{"name", "ev"}, {"template", "web-fake"}, {"size", 3}});
  const std::string cluster_id = started["cluster"]["id"];
  const std::string job_id = started["job"]["id"];

  std::vector<std::pair<std::string, json>> events;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool job_done = false, cluster_active = false;
  while (std::chrono::steady_clock::now() < deadline && !(job_done && cluster_active)) {
    zmq::message_t topic, body;
    if (!sub.recv(topic, zmq::recv_flags::none)) continue;
    REQUIRE(sub.get(zmq::sockopt::rcvmore));
    REQUIRE(sub.recv(body, zmq::recv_flags::none));
    json payload = json::parse(body.to_string(), nullptr, false);
    REQUIRE(payload.is_object());
    events.emplace_back(topic.to_string(), payload);
    if (payload["type"] == "job" && payload["job_id"] == job_id && payload["status"] == "succeeded") job_done = true;
    if (payload["type"] == "cluster" && payload["cluster_id"] == cluster_id && payload["status"] == "active")
      cluster_active = true;
  }
  std::string seen;
  for (const auto& [t, p] : events) seen += t + " " + p.dump() + "\n";
  INFO(seen);
  CHECK(job_done);
  CHECK(cluster_active);
  std::vector<std::string> job_statuses, cluster_statuses;
  int progress = 0;
  for (const auto& [topic, p] : events) {
    if (p["type"] == "task") {
      CHECK(topic == "default/task/" + cluster_id + "/");
    } else if (p["type"] == "task.progress") {
      // Its cluster in the topic and the payload, as for the task's other events.
      CHECK(topic == "default/task/" + cluster_id + "/progress");
      CHECK(p.value("cluster_id", "") == cluster_id);
      ++progress;
    } else if (p["type"] == "job") {
      CHECK(topic == "default/job/" + cluster_id + "/");
      CHECK(p["cluster_id"] == cluster_id);
      CHECK(p["operation"] == "create");
      job_statuses.push_back(p["status"]);
    } else {
      CHECK(p["type"] == "cluster");
      CHECK(topic == "default/cluster/" + cluster_id + "/");
      CHECK(p["name"] == "ev");
      cluster_statuses.push_back(p["status"]);
    }
  }
  CHECK(progress > 0);
  REQUIRE(!job_statuses.empty());
  CHECK(job_statuses.front() == "running");
  CHECK(job_statuses.back() == "succeeded");
  REQUIRE(!cluster_statuses.empty());
  CHECK(cluster_statuses.front() == "pending");
  CHECK(cluster_statuses.back() == "active");
  // The last job event counts every task as done.
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->second["type"] != "job") continue;
    CHECK(it->second["succeeded"] == it->second["total"]);
    CHECK(it->second["total"] == s.Job(job_id, false)["progress"]["total"]);
    break;
  }
}

// ---- day 2: restarts and hosts that come and go ------------------------------------

TEST_CASE("jobs: weftd restarted under a running job with every port `*` keeps its ports, the host "
          "stays with it and the job finishes",
          "[jobs][integration][day2]") {
  Env env("weft-jobs-starports", kFastJobs, 1, 4);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog", /*latency_ms=*/100);
  env.Import(catalog);
  Weftd& s = env.server;
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 30s));
  const json before = s.endpoints();

  json started = s.Call("cluster.create", {{"name", "sp"}, {"template", "web-fake"}, {"size", 4}});
  const std::string id = started["job"]["id"];
  REQUIRE(WaitFor([&] { return s.Job(id, false)["progress"]["succeeded"].get<std::int64_t>() > 0; }, 60s));
  REQUIRE(s.Stop() == 0);
  s.ForgetPorts();  // every port `*` in weftd.toml, as scripts/demo.sh has them
  REQUIRE(s.Start().ok());
  // The configuration says `*`; the new process bound what the old one had.
  CHECK(s.endpoints()["api"] == before["api"]);
  CHECK(s.endpoints()["provisioner"] == before["provisioner"]);
  CHECK(s.endpoints()["events"] == before["events"]);

  json job = s.WaitJob(id, 120s);
  INFO(Tail(s.AllLogs(), 10000) << env.Logs());
  RequireAllSucceeded(job);
  CHECK(WaitFor([&] { return s.HostLive("h1"); }, 10s));
  // The host never lost weftd for long: it was not restarted and still runs.
  CHECK(env.hosts[0]->process().running());
}

TEST_CASE("jobs: a job whose plugins no live host runs says so at once, and runs when such a host comes, "
          "a host stopped cleanly is not live at once",
          "[jobs][integration][day2]") {
  // No host yet, and a silence threshold far longer than the test: a host is
  // not live only because it said it stops.
  Env env("weft-jobs-noplugin",
          "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
          "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 600000\n",
          /*host_count=*/0);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  env.Import(catalog);
  Weftd& s = env.server;

  // The create itself says which plugins have no live host.
  RunResult created = s.Weft({"cluster", "create", "np", "--template", "web-fake", "--size", "3"});
  INFO(created.out << created.err << Tail(s.Log()));
  REQUIRE(created.exit_code == 0);
  CHECK_THAT(created.err, Catch::Contains("waiting for a host that runs plugins 'fake-automator', 'fake-provider'"));
  const std::vector<json> jobs = JobsOf(s, "np");
  REQUIRE(jobs.size() == 1);
  const std::string id = jobs.front()["id"];

  // job.get names the plugin its ready tasks wait for; so do `job show` and the progress of `--wait`.
  json job = s.Job(id, false);
  CHECK(job["waiting_for_plugins"] == json::array({"fake-provider"}));
  RunResult show = s.Weft({"job", "show", id});
  INFO(show.out << show.err);
  CHECK_THAT(show.out, Catch::Contains("waiting for a host that runs plugin 'fake-provider'"));
  ProcessOptions o;
  o.stdout_path = env.dir.path() / "watch.out";
  o.stderr_path = env.dir.path() / "watch.err";
  Process watch(testing::BuildPath("bin/weft"), {"--server", s.api(), "job", "watch", id}, o);
  REQUIRE(WaitFor(
      [&] {
        return testing::ReadFile(o.stderr_path).find("waiting for a host that runs plugin 'fake-provider'") !=
               std::string::npos;
      },
      30s));

  // A host that starts later picks the tasks up; the job finishes.
  env.hosts.push_back(std::make_unique<Host>(HostIn(env.dir.path(), "h1", s.provisioner(), 4)));
  job = s.WaitJob(id, 120s);
  INFO(Tail(s.Log()) << env.Logs());
  RequireAllSucceeded(job);
  CHECK(job["waiting_for_plugins"].empty());
  const std::optional<int> watched = watch.Wait(30s);
  REQUIRE(watched.has_value());
  CHECK(WIFEXITED(*watched));
  CHECK(WEXITSTATUS(*watched) == 0);

  // SIGTERM: the host says it leaves, and is not live the moment it is gone.
  REQUIRE(s.HostLive("h1"));
  env.hosts[0]->process().Signal(SIGTERM);
  const std::optional<int> stopped = env.hosts[0]->process().Wait(30s);
  REQUIRE(stopped.has_value());
  CHECK(WIFEXITED(*stopped));
  CHECK_FALSE(s.HostLive("h1"));
  json later = s.Call("cluster.create", {{"name", "np2"}, {"template", "web-fake"}, {"size", 3}});
  CHECK(later["waiting_for_plugins"] == json::array({"fake-automator", "fake-provider"}));
}

TEST_CASE("jobs: a cluster create after a catalog put or delete uses the catalog as it is then",
          "[jobs][integration]") {
  // weftd keeps each tenant's catalog between creates: every put and delete
  // must reach the very next create. No host: only the creates' plans matter.
  Env env("weft-jobs-catalog-now", kFastJobs, /*host_count=*/0);
  CatalogDir catalog = BaseCatalog(env.dir / "catalog");
  env.Import(catalog);
  Weftd& s = env.server;
  auto create = [&](const std::string& name) {
    return s.TryCall("cluster.create", {{"name", name}, {"template", "web-fake"}, {"size", 3}});
  };
  auto port_of = [&](const std::string& name) { return s.Cluster(name)["config"]["nginx"]["port"]; };

  REQUIRE(create("first").ok());
  REQUIRE(create("second").ok());
  CHECK(port_of("second") == "8080");

  json tmpl = catalog.Get("clustertemplates", "web-fake");
  tmpl["defaults"]["config"]["nginx"]["port"] = "9090";
  s.Call("clustertemplate.put", tmpl);
  REQUIRE(create("third").ok());
  CHECK(port_of("third") == "9090");
  CHECK(port_of("first") == "8080");

  s.Call("clustertemplate.delete", {{"name", "web-fake"}});
  Result<json> gone = create("fourth");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == Code::kNotFound);

  tmpl["defaults"]["config"]["nginx"]["port"] = "7070";
  s.Call("clustertemplate.put", tmpl);
  REQUIRE(create("fifth").ok());
  CHECK(port_of("fifth") == "7070");
}

// ---- results that are too large, failures that cannot change ---------------------

TEST_CASE("jobs: a node's results up to their limit reach its later tasks and its delete, a result over a limit, "
          "INVALID and UNSUPPORTED fail their task at once, and the undo still deletes the node",
          "[jobs][integration]") {
  Env env("weft-jobs-result-limits", kFastJobs);
  CatalogDir catalog(env.dir / "catalog");
  // Two results of 255 KiB on one node: about 510 KiB of node results, within
  // the 512 KiB a node may keep, carried once by every later task of the node
  // (sent twice, as results and node.results, they made the task too large to
  // hand out, and its take was retried without end).
  catalog.PatchActions("fake-base", "install", {{"result_kb", 255}, {"result_field", "a"}});
  catalog.PatchActions("fake-base", "configure", {{"result_kb", 255}, {"result_field", "b"}});
  // One node running fake-base only: its INSTALL and CONFIGURE are the tasks under test.
  catalog.DeriveTemplate(
      "solo", {{"constraints", {{"services", nullptr}, {"layout", nullptr}, {"size", {{"min", 1}, {"max", 1}}}}},
               {"defaults", {{"services", {"fake-base"}}}}});
  env.Import(catalog);
  Weftd& s = env.server;

  json job = env.RunJob({"cluster", "create", "big", "--template", "solo", "--size", "1"});
  RequireAllSucceeded(job);
  {
    json c = s.Cluster("big");
    REQUIRE(c["nodes"].size() == 1);
    const json& r = c["nodes"][0]["results"];
    CHECK(r.value("a", "").size() == 255 * 1024);
    CHECK(r.value("b", "").size() == 255 * 1024);
  }
  json del = env.RunJob({"cluster", "delete", "big"});
  RequireAllSucceeded(del);
  CHECK(TasksOf(del, "DELETE").size() == 1);

  // The failed create's job, once its undo ended too (the create's --wait returns at the undo's start).
  auto failed_create = [&](const std::string& name) {
    RunResult r = s.Weft({"cluster", "create", name, "--template", "solo", "--size", "1", "--wait"});
    INFO(r.out << r.err << Tail(s.Log()) << env.Logs());
    CHECK(r.exit_code != 0);
    const std::string id = ClusterId(s, name);
    REQUIRE(WaitFor([&] {
      std::vector<json> jobs = JobsOf(s, id);
      return jobs.size() == 2 && jobs[0]["status"] != "running" && jobs[0]["status"] != "failing";
    }, 60s));
    std::vector<json> jobs = JobsOf(s, id);
    json undo = s.Job(jobs[0]["id"]);
    INFO(undo.dump(1).substr(0, 4000));
    CHECK(undo["status"] == "succeeded");  // the node is gone again
    CHECK(TasksOf(undo, "DELETE").size() == 1);
    json create = s.Job(jobs[1]["id"]);
    CHECK(create["status"] == "failed");
    return create;
  };
  // One INSTALL attempt, failed, with `message_has` in its message and the job's.
  auto one_failed_install = [](const json& create, const std::string& message_has) {
    std::vector<json> installs = TasksOf(create, "INSTALL", "fake-base");
    REQUIRE(installs.size() == 1);
    const json& t = installs[0];
    INFO(t.dump().substr(0, 4000));
    CHECK(t["state"] == "failed");
    CHECK(t["attempts"].size() == 1);  // not retried: another attempt would end the same
    CHECK_THAT(t["message"].get<std::string>(), Catch::Contains(message_has));
    CHECK_THAT(create["message"].get<std::string>(),
               Catch::Contains("another attempt cannot change that, so it is not retried") &&
                   Catch::Contains(message_has));
  };

  // Over the 256 KiB one task may return: weftd would refuse it at task.finish;
  // the worker fails it first, in weftd's words, and its host log says why.
  const std::string over_task = "returned a result of " + std::to_string(300 * 1024 + 8) +
                                " bytes (as JSON), over the limit of 262144 bytes that one task may return; the "
                                "result was not kept and the task failed";
  catalog.PatchActions("fake-base", "install", {{"result_kb", 300}});
  env.Import(catalog);
  one_failed_install(failed_create("over-task"), over_task);
  CHECK_THAT(env.hosts[0]->Log(), Catch::Contains(over_task));

  // Over what one task.finish may carry: refused by the same check, never sent
  // as a frame weftd would drop (and resent forever).
  catalog.PatchActions("fake-base", "install", {{"result_kb", 1200}});
  env.Import(catalog);
  one_failed_install(failed_create("over-frame"), "returned a result of " + std::to_string(1200 * 1024 + 8) +
                                                      " bytes (as JSON), over the limit of 262144 bytes");

  // A node fact of the wrong type (ssh_port a string): the worker fails it as
  // weftd would, naming the task and the fact, in its log too.
  catalog.PatchActions("fake-base", "install", {{"result_kb", 1}, {"result_field", "ssh_port"}});
  env.Import(catalog);
  const std::string bad_fact =
      "/INSTALL/fake-base) returned a result Weft cannot use: 'ssh_port' must be an integer 1-65535";
  one_failed_install(failed_create("bad-fact"), bad_fact);
  CHECK_THAT(env.hosts[0]->Log(), Catch::Contains(bad_fact));
  catalog.PatchActions("fake-base", "install", {{"result_field", "blob"}});

  // INVALID and UNSUPPORTED: the same task would fail the same way.
  catalog.PatchActions("fake-base", "install",
                       {{"result_kb", nullptr}, {"fail_actions", "INSTALL"}, {"fail_code", "INVALID"}});
  env.Import(catalog);
  one_failed_install(failed_create("invalid"), "INSTALL fails because fail_actions lists it (attempt 1");
  catalog.PatchActions("fake-base", "install", {{"fail_code", "UNSUPPORTED"}});
  env.Import(catalog);
  one_failed_install(failed_create("unsupported"), "unsupported: INSTALL fails because fail_actions lists it");
}


// ---- what a cluster's tasks must be able to carry --------------------------------

// Every task of a cluster carries its config, and a task handed out to a host
// is at most 1 MiB less 4 KiB: a config over a quarter of that is refused where
// it is set (create, plan, reconfigure, their dry runs, the CLI), naming the
// size, the limit and what to do, instead of a cluster whose every task fails
// when it is handed out; one at the limit is created and its tasks run.
TEST_CASE("jobs: a cluster config too large for its tasks is refused at create, plan and reconfigure, and one at "
          "the limit runs",
          "[jobs][integration]") {
  Env env("weft-jobs-config-limit", kFastJobs);
  CatalogDir catalog(env.dir / "catalog");
  // One node running fake-base only, and no config of the template's: the request's is the cluster's.
  catalog.DeriveTemplate(
      "solo", {{"constraints", {{"services", nullptr}, {"layout", nullptr}, {"size", {{"min", 1}, {"max", 1}}}}},
               {"defaults", {{"services", {"fake-base"}}, {"config", nullptr}}}});
  env.Import(catalog);
  Weftd& s = env.server;
  // A quarter of what a task may be: (1 MiB - 4 KiB) / 4.
  constexpr std::size_t kLimit = 261120;
  // {"blob":"xx...x"}: 11 bytes and the blob's.
  auto config_of = [](std::size_t bytes) { return json{{"blob", std::string(bytes - 11, 'x')}}; };
  REQUIRE(config_of(kLimit).dump().size() == kLimit);
  const std::string over = "the cluster config is " + std::to_string(kLimit + 1) + " bytes as JSON, more than the " +
                           std::to_string(kLimit) + " bytes a cluster's config may be";
  auto refused = [&](const std::string& op, const json& body) {
    Result<json> r = s.TryCall(op, body);
    INFO(op << " answered " << (r.ok() ? r->dump().substr(0, 300) : r.status().ToString()));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::kInvalid);
    CHECK_THAT(r.status().message(), Catch::Contains(over) && Catch::Contains("1044480 bytes") &&
                                         Catch::Contains("upload them as resources (weft resource upload)"));
  };
  const json create = {{"name", "huge"}, {"template", "solo"}, {"size", 1}, {"config", config_of(kLimit + 1)}};
  refused("cluster.create", create);
  refused("cluster.create", With(create, {{"dry_run", true}}));
  refused("cluster.plan", create);
  CHECK(s.Call("cluster.list", json::object())["clusters"].empty());

  // What the CLI prints.
  const fs::path file = env.dir / "over.json";
  testing::WriteFile(file, config_of(kLimit + 1).dump());
  RunResult cli = s.Weft({"cluster", "create", "huge", "--template", "solo", "--size", "1", "--config", file.string()});
  INFO(cli.out << cli.err);
  CHECK(cli.exit_code == 1);
  CHECK_THAT(cli.err, Catch::Contains(over));
  CHECK(s.Call("cluster.list", json::object())["clusters"].empty());

  // At the limit: created, and every task handed out and run.
  testing::WriteFile(file, config_of(kLimit).dump());
  RequireAllSucceeded(env.RunJob({"cluster", "create", "edge", "--template", "solo", "--size", "1", "--config",
                                  file.string()}));
  CHECK(s.Cluster("edge")["config"] == config_of(kLimit));

  // A reconfigure that would pass it (its patch merged over the cluster's config).
  const json grow = {{"cluster", "edge"}, {"config", {{"blob", std::string(kLimit - 11 + 1, 'y')}}}};
  refused("cluster.reconfigure", grow);
  refused("cluster.reconfigure", With(grow, {{"dry_run", true}}));
  CHECK(s.Cluster("edge")["config"] == config_of(kLimit));
  CHECK(JobsOf(s, "edge").size() == 1);
}

// `services: []` is no request for the template's services (what leaving it
// out asks for) and no cluster without services (the solver refuses that):
// create, its dry run and plan refuse it alike, naming the template's services.
TEST_CASE("jobs: an empty services list is refused by cluster.create and cluster.plan, naming the template's "
          "services",
          "[jobs][integration]") {
  Env env("weft-jobs-no-services", kFastJobs, 0);
  env.Import(CatalogDir(env.dir / "catalog"));
  Weftd& s = env.server;
  const json body = {{"name", "shop"}, {"template", "web-fake"}, {"size", 3}, {"services", json::array()}};
  const std::string message = "services is empty: leave it out to get the services of template 'web-fake' "
                              "(fake-base, fake-haproxy, fake-nginx, fake-redis), or name at least one";
  for (const json& b : {body, With(body, {{"dry_run", true}})}) {
    for (const char* op : {"cluster.create", "cluster.plan"}) {
      if (std::string(op) == "cluster.plan" && b.contains("dry_run")) continue;
      Result<json> r = s.TryCall(op, b);
      INFO(op << " " << b.dump() << " answered " << (r.ok() ? r->dump().substr(0, 300) : r.status().ToString()));
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == Code::kInvalid);
      CHECK(r.status().message() == message);
    }
  }
  RunResult cli = s.Weft({"cluster", "create", "shop", "--template", "web-fake", "--size", "3", "--services", ""});
  INFO(cli.out << cli.err);
  CHECK(cli.exit_code != 0);
  CHECK_THAT(cli.err, Catch::Contains(message));
  CHECK(s.Call("cluster.list", json::object())["clusters"].empty());
  // Left out or null: the template's.
  for (const json& services : {json(nullptr), json(std::vector<std::string>{"fake-base", "fake-haproxy", "fake-nginx",
                                                                            "fake-redis"})}) {
    json plan = s.Call("cluster.plan", With(body, {{"services", services}}));
    CHECK(plan["layout"]["nodes"].size() == 3);
  }
  json plan = s.Call("cluster.plan", {{"name", "shop"}, {"template", "web-fake"}, {"size", 3}});
  CHECK(plan["layout"]["nodes"].size() == 3);
}

// start, stop and restart take `services` as create does: left out (or null) it is
// every service of the cluster (day2_jobs_test drives that through the CLI, which
// leaves it out when no service is named); an empty list is refused, naming the
// cluster's services, and starts no job: a client that builds its list from a
// filter that matched nothing must not stop or restart everything.
TEST_CASE("jobs: an empty services list is refused by cluster.start, cluster.stop and cluster.restart and their "
          "dry runs, naming the cluster's services",
          "[jobs][integration]") {
  Env env("weft-jobs-no-services-day2", kFastJobs);
  env.Import(BaseCatalog(env.dir / "catalog", 1));
  Weftd& s = env.server;
  RequireAllSucceeded(env.RunJob({"cluster", "create", "shop", "--template", "web-fake", "--size", "3"}));
  const json body = {{"cluster", "shop"}, {"services", json::array()}};
  for (const std::string op : {"start", "stop", "restart"}) {
    const std::string message = "services is empty: leave it out to " + op + " every service of cluster 'shop' "
                                "(fake-base, fake-haproxy, fake-nginx, fake-redis), or name at least one";
    for (const json& b : {With(body, {{"dry_run", true}}), With(body, {{"dry_run", true}, {"summary", true}}), body}) {
      Result<json> r = s.TryCall("cluster." + op, b);
      INFO("cluster." << op << " " << b.dump() << " answered "
                      << (r.ok() ? r->dump().substr(0, 300) : r.status().ToString()));
      CHECK(r.status().code() == Code::kInvalid);
      CHECK(r.status().message() == message);
    }
  }
  // Nothing ran: the create is the cluster's only job, and it is as the create left it.
  CHECK(JobsOf(s, "shop").size() == 1);
  CHECK(s.Cluster("shop")["status"] == "active");
}

// A template's defaults.config is the config of every cluster made from it that adds
// none: one over what a cluster's config may be (a quarter of a task, from
// limits.max_header_bytes) is refused where it is written, clustertemplate.put and so
// `weft clustertemplate put` and `weft catalog import`, naming both sizes and where the
// limit comes from, instead of a template every create from would be refused. One at
// the limit is stored, and a cluster made from it runs its tasks.
TEST_CASE("jobs: a cluster template whose config is over a cluster config's limit is refused where it is written, "
          "one at the limit makes clusters whose tasks run",
          "[jobs][integration]") {
  // Tasks of at most 512 KiB less 4 KiB, so configs of at most a quarter of that.
  Env env("weft-jobs-template-config-limit", kFastJobs + "[limits]\nmax_header_bytes = 524288\n");
  constexpr std::size_t kTask = 524288 - 4096;
  constexpr std::size_t kLimit = kTask / 4;
  // {"blob":"xx...x"}: 11 bytes and the blob's.
  auto config_of = [](std::size_t bytes) { return json{{"blob", std::string(bytes - 11, 'x')}}; };
  REQUIRE(config_of(kLimit).dump().size() == kLimit);
  CatalogDir catalog(env.dir / "catalog");
  // One node running fake-base only, with a config of `bytes`.
  catalog.DeriveTemplate(
      "solo", {{"constraints", {{"services", nullptr}, {"layout", nullptr}, {"size", {{"min", 1}, {"max", 1}}}}},
               {"defaults", {{"services", {"fake-base"}}, {"config", nullptr}}}});
  json solo = catalog.Get("clustertemplates", "solo");
  auto solo_of = [&](std::size_t bytes) {
    return With(solo, {{"defaults", With(solo["defaults"], {{"config", config_of(bytes)}})}});
  };
  catalog.Put("clustertemplates", solo_of(kLimit + 1));
  Weftd& s = env.server;
  const std::string over = "clustertemplate 'solo': defaults.config: " + std::to_string(kLimit + 1) +
                           " bytes as JSON, more than the " + std::to_string(kLimit) +
                           " bytes a cluster's config may be";
  const std::string origin = "a task handed out to a host may be at most " + std::to_string(kTask) +
                             " bytes (limits.max_header_bytes";
  auto template_names = [&] {
    std::set<std::string> out;
    const json list = s.Call("clustertemplate.list", json::object());
    for (const json& e : list["entities"]) out.insert(e["name"]);
    return out;
  };

  // The import stores the rest and refuses the template, saying why.
  RunResult imported = s.Weft({"catalog", "import", catalog.path().string()});
  INFO(imported.out << imported.err);
  CHECK(imported.exit_code == 1);
  CHECK_THAT(imported.out, Catch::Contains("refused clustertemplates/solo.json: " + over) &&
                               Catch::Contains(origin) &&
                               Catch::Contains("every cluster.create from it would be refused"));
  CHECK(template_names().count("solo") == 0);
  CHECK(template_names().count("web-fake") == 1);

  // clustertemplate.put, and the CLI's put.
  Result<json> put = s.TryCall("clustertemplate.put", solo_of(kLimit + 1));
  INFO("clustertemplate.put answered " << (put.ok() ? put->dump() : put.status().ToString()));
  CHECK(put.status().code() == Code::kInvalid);
  CHECK_THAT(put.status().message(), Catch::StartsWith(over) && Catch::Contains(origin) &&
                                         Catch::Contains("upload them as resources (weft resource upload)"));
  const fs::path file = env.dir / "solo.json";
  testing::WriteFile(file, solo_of(kLimit + 1).dump());
  RunResult cli = s.Weft({"clustertemplate", "put", file.string()});
  INFO(cli.out << cli.err);
  CHECK(cli.exit_code == 1);
  CHECK_THAT(cli.err, Catch::Contains(over));
  CHECK(template_names().count("solo") == 0);

  // At the limit: stored, and a cluster made from it runs every task.
  json stored = s.Call("clustertemplate.put", solo_of(kLimit));
  CHECK(stored["version"] == 1);
  RequireAllSucceeded(env.RunJob({"cluster", "create", "edge", "--template", "solo", "--size", "1"}));
  CHECK(s.Cluster("edge")["config"] == config_of(kLimit));

  // A new version over the limit is refused and the one at it stays.
  Result<json> grown = s.TryCall("clustertemplate.put", solo_of(kLimit + 1));
  CHECK(grown.status().code() == Code::kInvalid);
  CHECK(s.Call("clustertemplate.get", {{"name", "solo"}})["version"] == 1);
}

}  // namespace weft
