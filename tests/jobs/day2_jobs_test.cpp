// Day-2 operations end to end, as a user trial met them: the real weftd,
// weft-host and weft binaries with the fake provider and automator, on
// ephemeral loopback ports and a temp data directory per test.
//
//  * a CREATE run again after its host died hands back the machine the first
//    attempt made (idempotency key), so no machine leaks;
//  * undoing a failed grow does no more than undo what the grow did;
//  * rolling back an upgrade installs the previous versions again;
//  * terminated clusters are found by name, stopped services show per node;
//  * a template whose default image type is not among its compatible ones
//    imports with a warning and fails only when a plan uses that default;
//  * a node whose DELETE failed stays in the cluster, and the next delete or
//    scale (up or down) deletes it (and only it, with no other task on it); every
//    other operation is refused while it is there, naming it; a service whose
//    REMOVE failed stays on its node.
#include <signal.h>

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
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::Host;
using testing::Process;
using testing::ProcessOptions;
using testing::RunResult;
using testing::Tail;
using testing::WaitFor;
using testing::Weftd;

// weftd, its hosts (h1, h2, ...) and the real `weft` CLI, in one temp directory.
class Env {
 public:
  Env(const std::string& name, const std::string& extra_toml, int host_count = 1, int capacity = 4)
      : weftd_(ServerOptions(name, extra_toml)) {
    for (int i = 1; i <= host_count; ++i)
      hosts_.push_back(std::make_unique<Host>(testing::HostOptions{.dir = weftd_.dir(),
                                                                   .id = "h" + std::to_string(i),
                                                                   .server = weftd_.provisioner(),
                                                                   .capacity = capacity,
                                                                   .workers = 2,
                                                                   .shutdown_grace_ms = 1000}));
  }
  fs::path Path(const std::string& name) const { return weftd_.Path(name); }
  Host& host(std::size_t i) { return *hosts_.at(i); }
  Weftd& weftd() { return weftd_; }

  json Call(const std::string& op, const json& body) { return weftd_.Call(op, body); }
  Result<json> TryCall(const std::string& op, const json& body) { return weftd_.TryCall(op, body); }
  RunResult Weft(std::vector<std::string> args) { return weftd_.Weft(std::move(args)); }
  json WeftJson(std::vector<std::string> args) { return weftd_.WeftJson(std::move(args)); }

  RunResult Import(const CatalogDir& catalog) {
    RunResult r = Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err << Tail(weftd_.Log()));
    REQUIRE(r.exit_code == 0);
    return r;
  }
  bool HostLive(const std::string& id) { return weftd_.HostLive(id); }
  void WaitHosts() {
    for (const auto& h : hosts_) REQUIRE(WaitFor([&] { return HostLive(h->id()); }, 30s));
  }
  json Job(const std::string& id) { return weftd_.Job(id); }
  json WaitJob(const std::string& id, std::chrono::milliseconds timeout = 90s) { return weftd_.WaitJob(id, timeout); }
  // Runs an operation through the CLI and waits for its job, which must succeed.
  json RunJob(std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    RunResult r = Weft(args);
    INFO("weft " << args[2] << " " << args[3] << ": " << r.out << r.err << Tail(weftd_.Log()) << Logs());
    REQUIRE(r.exit_code == 0);
    const json reply = json::parse(r.out, nullptr, false);
    REQUIRE(reply.is_object());
    const json& job = reply["job"];  // -o json with --wait: {"job"}
    REQUIRE(job.contains("id"));
    json done = WaitJob(job["id"].get<std::string>());
    INFO(done.dump(1).substr(0, 6000));
    REQUIRE(done["status"] == "succeeded");
    return done;
  }
  std::string Logs() const {
    std::string out;
    for (const auto& h : hosts_) out += "--- host " + h->id() + " ---\n" + Tail(h->Log(), 3000);
    return out;
  }
  std::string ServerLog() const { return weftd_.Log(); }

 private:
  // `weft` gets room for --wait on a busy machine.
  static testing::WeftdOptions ServerOptions(const std::string& name, const std::string& extra_toml) {
    return {.name = name, .extra_toml = extra_toml, .cli_timeout = 120s};
  }

  Weftd weftd_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

std::vector<json> TasksOf(const json& job, const std::string& action, const std::string& service = "*") {
  std::vector<json> out;
  for (const json& t : job["tasks"])
    if (t["action"] == action && (service == "*" || t.value("service", "") == service)) out.push_back(t);
  return out;
}
std::set<std::string> NodesOf(const std::vector<json>& tasks) {
  std::set<std::string> out;
  for (const json& t : tasks) out.insert(t.value("node", ""));
  return out;
}
std::set<std::string> NodeNames(const json& cluster) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"]) out.insert(n["hostname"].get<std::string>());
  return out;
}
std::set<std::string> NodesRunning(const json& cluster, const std::string& service) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"])
    for (const json& s : n["services"])
      if (s == service) out.insert(n["hostname"].get<std::string>());
  return out;
}
// The jobs of a cluster (name or id), newest first.
std::vector<json> JobsOf(Env& env, const std::string& cluster) {
  json jobs = env.Call("job.list", {{"cluster", cluster}})["jobs"];
  return {jobs.begin(), jobs.end()};
}

// The machines the fake provider holds: one file each in its machines_dir
// (a dot file is one being written).
std::vector<json> Machines(const fs::path& dir) {
  std::vector<json> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (!entry.path().filename().string().starts_with("."))
      out.push_back(json::parse(testing::ReadFile(entry.path())));
  return out;
}

const std::string kFastHosts =
    "[tasks]\nlease_ms = 1500\n[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
    "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 1000\n";

}  // namespace

// ---- 1. a retried CREATE does not leak a machine ------------------------------------

TEST_CASE("day2: a CREATE whose host dies mid-way is run again under the same idempotency key, the fake "
          "provider holds exactly one machine per node",
          "[jobs][integration][day2]") {
  Env env("weft-day2-create-key", kFastHosts, 2, 2);
  const fs::path machines = env.Path("machines");
  CatalogDir catalog(env.Path("catalog"));
  // CREATE makes its machine first and then "boots" it for 3 s: long enough to kill the host in between,
  // even on a machine so busy that seeing the machine and sending the signal are far apart.
  catalog.PatchProvider({{"latency_ms", 3000}, {"machines_dir", machines.string()}});
  env.Import(catalog);
  env.WaitHosts();

  json started = env.Call("cluster.create", {{"name", "leak"}, {"template", "web-fake"}, {"size", 3}});
  const std::string job_id = started["job"]["id"];
  // Wait until h1 runs a CREATE whose machine exists, then kill h1.
  std::int64_t lost = 0;
  REQUIRE(WaitFor(
      [&] {
        const json now = env.Job(job_id);
        for (const json& t : now["tasks"]) {
          if (t["action"] != "CREATE" || t["state"] != "leased" || t.value("host_id", "") != "h1") continue;
          for (const json& m : Machines(machines))
            if (m.value("task_id", std::int64_t{0}) == t["id"].get<std::int64_t>()) lost = m["task_id"];
        }
        return lost != 0;
      },
      30s));
  env.host(0).process().Signal(SIGKILL);
  REQUIRE(env.host(0).process().Wait(10s).has_value());

  json job = env.WaitJob(job_id);
  INFO(job.dump(1).substr(0, 8000) << Tail(env.ServerLog()) << env.Logs());
  REQUIRE(job["status"] == "succeeded");
  // The CREATE that h1 lost ran again, on h2, and found the machine h1 had made.
  int rerun = 0;
  for (const json& t : TasksOf(job, "CREATE")) {
    if (t["id"] != lost) continue;
    ++rerun;
    CHECK(t["attempts"].size() >= 2);
    CHECK(t["attempts"].back()["host_id"] == "h2");
    CHECK_THAT(t["stdout"].get<std::string>(), Catch::Contains("reuses machine"));
  }
  CHECK(rerun == 1);
  // Exactly one machine per node, each made under its CREATE's key.
  std::map<std::string, int> per_node;
  for (const json& m : Machines(machines)) {
    INFO(m.dump());
    const std::string node = m.value("node_id", "");
    ++per_node[node];
    CHECK(m.value("key", "") == m.value("cluster_id", "") + "/" + node + "/" +
                                    std::to_string(m.value("task_id", std::int64_t{0})));
  }
  json cluster = env.Call("cluster.get", {{"cluster", "leak"}})["cluster"];
  REQUIRE(cluster["nodes"].size() == 3);
  CHECK(per_node.size() == 3);
  for (const json& n : cluster["nodes"]) CHECK(per_node[n["hostname"].get<std::string>()] == 1);

  // Deleting the cluster deletes its machines.
  env.RunJob({"cluster", "delete", "leak"});
  CHECK(Machines(machines).empty());
}

// ---- 2. undoing a failed grow undoes what the grow did, no more -----------------------

TEST_CASE("day2: the undo of a failed grow deletes the new node and touches no service on the nodes the grow "
          "never reconfigured",
          "[jobs][integration][day2]") {
  Env env("weft-day2-undo-grow", "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  // Only the fourth node's CREATE fails: the grow never gets to reconfigure the three nodes it keeps
  // (their CONFIGURE waits for the new node's addresses).
  catalog.PatchProvider({{"fail_actions", "CREATE"}, {"fail_nodes", "g-4"}, {"latency_ms", 5}});
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  env.Import(catalog);
  env.RunJob({"cluster", "create", "g", "--template", "web-fake", "--size", "3"});
  const json before = env.Call("cluster.get", {{"cluster", "g"}})["cluster"];
  const std::set<std::string> kept = NodeNames(before);

  RunResult r = env.Weft({"cluster", "scale", "g", "--size", "4", "--wait"});
  INFO(r.out << r.err << Tail(env.ServerLog()) << env.Logs());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("undoing it"));
  std::vector<json> jobs = JobsOf(env, "g");
  REQUIRE(jobs.size() == 3);
  json undo = env.WaitJob(jobs[0]["id"]);
  json grow = env.Job(jobs[1]["id"]);
  REQUIRE(grow["operation"] == "scale");
  REQUIRE(undo["operation"] == "undo");
  INFO("grow " << grow.dump(1).substr(0, 6000) << "\nundo " << undo.dump(1).substr(0, 6000));
  REQUIRE(undo["status"] == "succeeded");
  // What the grow ran on the kept nodes: nothing.
  for (const json& t : grow["tasks"])
    if (kept.count(t.value("node", ""))) CHECK(t["attempt"] == 0);
  // So the undo runs nothing there either: no reconfigure, and above all no restart.
  for (const json& t : undo["tasks"]) {
    INFO(t.dump());
    CHECK_FALSE(kept.count(t.value("node", "")));
  }
  CHECK(TasksOf(undo, "STOP").empty());
  CHECK(TasksOf(undo, "START").empty());
  CHECK(NodesOf(TasksOf(undo, "DELETE")).size() == 1);
  json after = env.Call("cluster.get", {{"cluster", "g"}})["cluster"];
  CHECK(after["status"] == "active");
  CHECK(NodeNames(after) == kept);
}

// ---- 3. rolling back an upgrade installs the earlier versions ------------------------

TEST_CASE("day2: a rollback of an upgrade installs the previous version of every upgraded service again",
          "[jobs][integration][day2]") {
  Env env("weft-day2-rollback-upgrade", "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchActions("", "", {{"echo_task", true}, {"latency_ms", 5}});
  catalog.PatchActions("fake-nginx", "", {{"build", 1}});
  env.Import(catalog);
  env.RunJob({"cluster", "create", "up", "--template", "web-fake", "--size", "3"});
  const std::set<std::string> nginx = NodesRunning(env.Call("cluster.get", {{"cluster", "up"}})["cluster"], "fake-nginx");
  REQUIRE(!nginx.empty());

  catalog.PatchActions("fake-nginx", "", {{"build", 2}});
  env.Import(catalog);
  // A dry run says which catalog versions the upgrade moves to, and the table prints them.
  const json nginx_was = env.Call("service.get", {{"name", "fake-nginx"}, {"version", 1}})["version"];
  const json nginx_now = env.Call("service.get", {{"name", "fake-nginx"}})["version"];
  REQUIRE(nginx_now != nginx_was);
  json preview = env.Call("cluster.upgrade", {{"cluster", "up"}, {"dry_run", true}, {"summary", true}});
  INFO(preview.dump());
  CHECK(preview["versions"] == json{{"service/fake-nginx", {{"from", nginx_was}, {"to", nginx_now}}}});
  RunResult table = env.Weft({"cluster", "upgrade", "up", "--dry-run"});
  INFO(table.out << table.err);
  CHECK_THAT(table.out, Catch::Contains("service/fake-nginx: version " + nginx_was.dump() + " -> " + nginx_now.dump()));
  json upgrade = env.RunJob({"cluster", "upgrade", "up"});
  for (const json& t : TasksOf(upgrade, "INSTALL", "fake-nginx")) CHECK(t["result"]["echo"]["fields"]["build"] == 2);

  // And a rollback's, back.
  CHECK(env.Call("cluster.rollback", {{"cluster", "up"}, {"dry_run", true}})["versions"] ==
        json{{"service/fake-nginx", {{"from", nginx_now}, {"to", nginx_was}}}});
  json rollback = env.RunJob({"cluster", "rollback", "up"});
  INFO(rollback.dump(1).substr(0, 8000));
  CHECK(rollback["operation"] == "rollback");
  // build 1 is installed again on every nginx node, configured, and restarted.
  std::vector<json> installs = TasksOf(rollback, "INSTALL", "fake-nginx");
  CHECK(NodesOf(installs) == nginx);
  for (const json& t : installs) CHECK(t["result"]["echo"]["fields"]["build"] == 1);
  for (const json& t : TasksOf(rollback, "CONFIGURE", "fake-nginx")) CHECK(t["result"]["echo"]["fields"]["build"] == 1);
  CHECK(NodesOf(TasksOf(rollback, "START", "fake-nginx")) == nginx);
  // The services the upgrade did not change are not installed again.
  for (const json& t : TasksOf(rollback, "INSTALL")) CHECK(t["service"] == "fake-nginx");
  CHECK(TasksOf(rollback, "CREATE").empty());
  CHECK(TasksOf(rollback, "DELETE").empty());
  CHECK(env.Call("cluster.get", {{"cluster", "up"}})["cluster"]["status"] == "active");
}

// ---- 4. terminated clusters by name; service state per node -------------------------

TEST_CASE("day2: a terminated cluster is found by its name, stop and start show in the cluster's status and in "
          "every node's service states",
          "[jobs][integration][day2]") {
  Env env("weft-day2-states", "[jobs]\nmax_attempts = 1\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchProvider({{"fail_actions", "CREATE"}, {"fail_nodes", "broken-1"}, {"latency_ms", 5}});
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  env.Import(catalog);

  // A create that fails is undone: the cluster ends terminated, and its name still finds it.
  {
    RunResult r = env.Weft({"cluster", "create", "broken", "--template", "web-fake", "--size", "3", "--wait"});
    CHECK(r.exit_code != 0);
    const std::string id = JobsOf(env, "broken").front()["id"];
    env.WaitJob(id);
    json listed = env.Call("cluster.list", {{"all", true}})["clusters"];
    REQUIRE(listed.size() == 1);
    REQUIRE(listed[0]["status"] == "terminated");
    RunResult got = env.Weft({"cluster", "get", "broken"});
    INFO(got.out << got.err);
    CHECK(got.exit_code == 0);
    CHECK_THAT(got.out, Catch::Contains("terminated"));
    json c = env.WeftJson({"cluster", "get", "broken"})["cluster"];
    CHECK(c["status"] == "terminated");
    CHECK(c["id"] == listed[0]["id"]);
    CHECK(c["jobs"].size() == 2);
  }

  env.RunJob({"cluster", "create", "svc", "--template", "web-fake", "--size", "3"});
  // A create checks its name against the clusters that are not terminated, by
  // name only: a terminated cluster's name and a name that is another cluster's
  // id are free.
  {
    const std::string svc_id = env.Call("cluster.get", {{"cluster", "svc"}})["cluster"]["id"];
    auto dry_create = [&](const std::string& name) {
      return env.TryCall("cluster.create", {{"name", name}, {"template", "web-fake"}, {"size", 3}, {"dry_run", true}});
    };
    Result<json> taken = dry_create("svc");
    REQUIRE_FALSE(taken.ok());
    CHECK(taken.status().code() == Code::kConflict);
    CHECK_THAT(taken.status().message(), Catch::Contains("cluster 'svc' already exists (id " + svc_id));
    Result<json> by_id = dry_create(svc_id);
    INFO((by_id.ok() ? std::string() : by_id.status().message()));
    CHECK(by_id.ok());
    CHECK(dry_create("broken").ok());
  }
  auto states = [&](const json& cluster) {
    std::map<std::string, std::set<std::string>> by_service;  // service -> its states over the nodes
    for (const json& n : cluster["nodes"]) {
      REQUIRE(n["service_states"].size() == n["services"].size());
      for (const auto& [s, state] : n["service_states"].items()) by_service[s].insert(state.get<std::string>());
    }
    return by_service;
  };
  using Set = std::set<std::string>;
  json c = env.WeftJson({"cluster", "get", "svc"})["cluster"];
  CHECK(c["status"] == "active");
  auto st = states(c);
  CHECK(st["fake-nginx"] == Set{"running"});
  CHECK(st["fake-redis"] == Set{"running"});
  CHECK(st["fake-haproxy"] == Set{"running"});
  CHECK(st["fake-base"] == Set{"configured"});  // it has no START: it is as far as it gets

  // Stopping nginx stops haproxy too (it needs nginx); redis keeps running; the cluster is still active.
  env.RunJob({"cluster", "stop", "svc", "fake-nginx"});
  c = env.WeftJson({"cluster", "get", "svc"})["cluster"];
  CHECK(c["status"] == "active");
  st = states(c);
  CHECK(st["fake-nginx"] == Set{"stopped"});
  CHECK(st["fake-haproxy"] == Set{"stopped"});
  CHECK(st["fake-redis"] == Set{"running"});
  RunResult text = env.Weft({"cluster", "get", "svc"});
  CHECK_THAT(text.out, Catch::Contains("fake-nginx (stopped)") && Catch::Contains("fake-redis (running)"));

  // Stopping everything: the cluster is stopped.
  env.RunJob({"cluster", "stop", "svc"});
  c = env.WeftJson({"cluster", "get", "svc"})["cluster"];
  CHECK(c["status"] == "stopped");
  st = states(c);
  for (const char* s : {"fake-nginx", "fake-haproxy", "fake-redis"}) CHECK(st[s] == Set{"stopped"});
  json listed = env.WeftJson({"cluster", "list"})["clusters"];
  for (const json& l : listed)
    if (l["name"] == "svc") CHECK(l["status"] == "stopped");

  // And started again: active, every service running.
  env.RunJob({"cluster", "start", "svc"});
  c = env.WeftJson({"cluster", "get", "svc"})["cluster"];
  CHECK(c["status"] == "active");
  st = states(c);
  for (const char* s : {"fake-nginx", "fake-haproxy", "fake-redis"}) CHECK(st[s] == Set{"running"});
}

// ---- 5. a Coopr template whose default image type is not among its compatible ones ----

TEST_CASE("day2: a template whose defaults.imagetype is outside compatibility.imagetypes imports with a "
          "warning, a cluster fails to plan only when it uses that default",
          "[jobs][integration][day2]") {
  Env env("weft-day2-coopr-default", "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchProvider({{"latency_ms", 5}});
  // As in Coopr's public catalog: the default image type exists but the template does not list it.
  json centos = catalog.Get("imagetypes", "debian12");
  centos["name"] = "centos6";
  catalog.Put("imagetypes", centos);
  json tmpl = catalog.Get("clustertemplates", "web-fake");
  tmpl["name"] = "coopr-web";
  tmpl["defaults"]["imagetype"] = "centos6";
  catalog.Put("clustertemplates", tmpl);

  RunResult imported = env.Import(catalog);
  CHECK_THAT(imported.out + imported.err,
             Catch::Contains("coopr-web") && Catch::Contains("defaults.imagetype") && Catch::Contains("centos6"));

  // With the defaults: refused at plan time, with a sentence that says what to do.
  for (const char* verb : {"plan", "create"}) {
    RunResult r = env.Weft({"cluster", verb, "c5", "--template", "coopr-web", "--size", "3"});
    INFO(verb << ": " << r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("default imagetype 'centos6' is not in compatibility.imagetypes") &&
                          Catch::Contains("--imagetype"));
  }
  CHECK(env.Call("cluster.list", {{"all", true}})["clusters"].empty());

  // Naming a compatible image type solves, and the cluster comes up.
  json job = env.RunJob({"cluster", "create", "c5", "--template", "coopr-web", "--size", "3", "--imagetype", "debian12"});
  CHECK(job["status"] == "succeeded");
  const json c5 = env.Call("cluster.get", {{"cluster", "c5"}})["cluster"];
  for (const json& n : c5["nodes"]) CHECK(n["imagetype"] == "debian12");
}

// ---- 6. what a failed undo could not remove stays on the cluster ---------------------

TEST_CASE("day2: a create whose undo fails leaves an inconsistent cluster that lists every machine it may "
          "have made, and delete runs a DELETE for each",
          "[jobs][integration][day2]") {
  Env env("weft-day2-undo-fails", "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  const fs::path machines = env.Path("machines");
  CatalogDir catalog(env.Path("catalog"));
  // Every CONFIRM fails, so the create is undone; every DELETE fails, so the undo fails too.
  catalog.PatchProvider({{"fail_actions", "CONFIRM,DELETE"}, {"latency_ms", 5}, {"machines_dir", machines.string()}});
  env.Import(catalog);
  RunResult r = env.Weft({"cluster", "create", "orphans", "--template", "web-fake", "--size", "3", "--wait"});
  INFO(r.out << r.err << Tail(env.ServerLog()) << env.Logs());
  CHECK(r.exit_code != 0);
  std::vector<json> jobs = JobsOf(env, "orphans");
  REQUIRE(jobs.size() == 2);
  json undo = env.WaitJob(jobs[0]["id"]);
  REQUIRE(undo["operation"] == "undo");
  REQUIRE(undo["status"] == "failed");
  REQUIRE(Machines(machines).size() == 3);

  // The cluster says the three machines may still exist.
  json cluster = env.Call("cluster.get", {{"cluster", "orphans"}})["cluster"];
  CHECK(cluster["status"] == "inconsistent");
  CHECK(cluster["nodes"].size() == 3);

  // So a delete tries to remove each of them; here DELETE still fails, and the
  // cluster stays listed instead of reporting a delete that removed nothing.
  RunResult del = env.Weft({"cluster", "delete", "orphans", "--wait"});
  CHECK(del.exit_code != 0);
  jobs = JobsOf(env, "orphans");
  json deleting = env.WaitJob(jobs[0]["id"]);
  INFO(deleting.dump(1).substr(0, 6000));
  REQUIRE(deleting["operation"] == "delete");
  CHECK(NodesOf(TasksOf(deleting, "DELETE")).size() == 3);
  CHECK(env.Call("cluster.get", {{"cluster", "orphans"}})["cluster"]["status"] == "inconsistent");
  CHECK(Machines(machines).size() == 3);
}

}  // namespace weft

// ---- 7. a failed undo of add-services leaves a cluster every later job can plan ------

namespace weft {

TEST_CASE("day2: after an add-services whose undo fails, the cluster keeps the service's definition: stop, "
          "scale and remove-services plan, and delete removes every node",
          "[jobs][integration][day2]") {
  Env env("weft-day2-undo-add-fails", "[jobs]\nmax_attempts = 2\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchProvider({{"latency_ms", 5}});
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  // Monitoring never installs, and the undo cannot stop it either.
  catalog.PatchActions("fake-monitoring", "", {{"fail_actions", "INSTALL,STOP"}});
  env.Import(catalog);
  env.RunJob({"cluster", "create", "ad", "--template", "web-fake", "--size", "3"});

  RunResult r = env.Weft({"cluster", "add-services", "ad", "fake-monitoring", "--wait"});
  INFO(r.out << r.err << Tail(env.ServerLog()) << env.Logs());
  CHECK(r.exit_code != 0);
  std::vector<json> jobs = JobsOf(env, "ad");
  REQUIRE(jobs.size() == 3);
  json undo = env.WaitJob(jobs[0]["id"]);
  INFO(undo.dump(1).substr(0, 6000));
  REQUIRE(undo["operation"] == "undo");
  REQUIRE(undo["status"] == "failed");
  CHECK(!TasksOf(undo, "STOP", "fake-monitoring").empty());

  // The nodes still list the service the undo could not take off.
  json cluster = env.Call("cluster.get", {{"cluster", "ad"}})["cluster"];
  CHECK(cluster["status"] == "inconsistent");
  const std::set<std::string> left = NodesRunning(cluster, "fake-monitoring");
  CHECK(!left.empty());

  // Every later operation plans (a dry run shows the plan, nothing runs).
  for (std::vector<std::string> args : {std::vector<std::string>{"cluster", "stop", "ad"},
                                        std::vector<std::string>{"cluster", "restart", "ad"},
                                        std::vector<std::string>{"cluster", "reconfigure", "ad"},
                                        std::vector<std::string>{"cluster", "scale", "ad", "--size", "4"},
                                        std::vector<std::string>{"cluster", "remove-services", "ad", "fake-monitoring"},
                                        std::vector<std::string>{"cluster", "delete", "ad"}}) {
    args.push_back("--dry-run");
    RunResult dry = env.Weft(args);
    INFO("weft " << args[1] << ": " << dry.out << dry.err);
    CHECK(dry.exit_code == 0);
    CHECK_THAT(dry.err, !Catch::Contains("does not describe"));
  }

  // And the delete removes every node, those left with monitoring included.
  json deleted = env.RunJob({"cluster", "delete", "ad"});
  CHECK(NodesOf(TasksOf(deleted, "DELETE")) == NodeNames(cluster));
  for (const std::string& n : left) CHECK(NodeNames(cluster).count(n));
  CHECK(env.Call("cluster.get", {{"cluster", "ad"}})["cluster"]["status"] == "terminated");
}

}  // namespace weft

// ---- 8. a task counts as waiting to retry only while its backoff lasts ---------------

namespace weft {

TEST_CASE("day2: job progress counts a task as waiting to retry during its backoff and as queued after it, and "
          "its message names the backoff",
          "[jobs][integration][day2]") {
  Env env("weft-day2-retrying",
          "[jobs]\nretry_backoff_ms = 1500\nretry_backoff_max_ms = 1500\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchProvider({{"latency_ms", 5}});
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  // Every nginx INSTALL fails its first attempt.
  catalog.PatchActions("fake-nginx", "install", {{"fail_actions", "INSTALL"}, {"fail_attempts", 1}});
  env.Import(catalog);
  env.WaitHosts();
  json started = env.WeftJson({"cluster", "create", "rt", "--template", "web-fake", "--size", "3"});
  const std::string id = started["job"]["id"].get<std::string>();

  // In its backoff: waiting to retry, and the message says when the next attempt comes.
  json job;
  REQUIRE(WaitFor(
      [&] {
        job = env.Job(id);
        return job["progress"]["retrying"].get<int>() >= 1;
      },
      60s));
  bool named = false;
  for (const json& t : TasksOf(job, "INSTALL", "fake-nginx"))
    named = named || t.value("message", "").find("attempt 2 after a 1.5s backoff") != std::string::npos;
  INFO(job.dump(1).substr(0, 6000));
  CHECK(named);

  // The only host leaves: past the backoff nobody takes the retry, and it shows as queued, not waiting to retry.
  env.host(0).Stop();
  const bool settled = WaitFor(
      [&] {
        job = env.Job(id);
        return job["progress"]["retrying"].get<int>() == 0;
      },
      15s);
  INFO(job["progress"].dump());
  CHECK(settled);
  CHECK(job["progress"]["queued"].get<int>() >= 1);
  CHECK(job["status"] == "running");
}

}  // namespace weft

// ---- 9. a node whose DELETE failed stays until a later job deletes it ---------------

namespace weft {

namespace {
// The machines the fake provider holds for one cluster's nodes.
std::set<std::string> MachinesOf(const fs::path& dir, const json& cluster_id) {
  std::set<std::string> out;
  for (const json& m : Machines(dir))
    if (m.value("cluster_id", "") == cluster_id) out.insert(m.value("node_id", ""));
  return out;
}
std::set<std::string> FailedDeletes(const json& cluster) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"])
    if (n.value("state", "") == "delete failed") out.insert(n["hostname"].get<std::string>());
  return out;
}

// weftd with a provider whose every DELETE fails (each fails its first 2 attempts and a task gets 2) until
// LetDeletesSucceed gives a task a third; the provider keeps its machines in `machines`.
struct FailingDeletes {
  explicit FailingDeletes(const std::string& name) : env(name, Toml(2)) {
    catalog.PatchProvider(
        {{"fail_actions", "DELETE"}, {"fail_attempts", 2}, {"latency_ms", 5}, {"machines_dir", machines.string()}});
    env.Import(catalog);
    env.WaitHosts();
  }
  void LetDeletesSucceed() {
    env.weftd().SetExtraToml(Toml(3));
    env.weftd().Restart();
    env.WaitHosts();
  }
  static std::string Toml(int attempts) {
    return "[jobs]\nmax_attempts = " + std::to_string(attempts) +
           "\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 1000\n";
  }

  Env env;
  const fs::path machines = env.Path("machines");
  CatalogDir catalog{env.Path("catalog")};
};

// A cluster `name` of `size` nodes whose shrink by one failed: the node it was to delete stays, marked.
// Returns that node.
std::string ShrinkFails(Env& env, const std::string& name, int size) {
  env.RunJob({"cluster", "create", name, "--template", "web-fake", "--size", std::to_string(size)});
  RunResult shrink = env.Weft({"cluster", "scale", name, "--size", std::to_string(size - 1), "--wait"});
  INFO(shrink.out << shrink.err);
  CHECK(shrink.exit_code != 0);
  json failed = env.WaitJob(JobsOf(env, name)[0]["id"]);
  REQUIRE(failed["operation"] == "scale");
  REQUIRE(failed["status"] == "failed");
  const std::set<std::string> dropped = NodesOf(TasksOf(failed, "DELETE"));
  REQUIRE(dropped.size() == 1);
  REQUIRE(FailedDeletes(env.Call("cluster.get", {{"cluster", name}})["cluster"]) == dropped);
  return *dropped.begin();
}

// `weft cluster OP NAME ARGS...` (and cluster.OP with `body`, a dry run too) on cluster `name`, whose node
// `marked` is marked "delete failed": each is refused with a CONFLICT that names the node and the commands that
// delete it; no job starts and the cluster's nodes, the mark among them, are as they were.
void RefusedWhileMarked(Env& env, const std::string& name, const std::string& marked, const std::string& op,
                        json body, const std::vector<std::string>& args = {}) {
  const json before = env.Call("cluster.get", {{"cluster", name}})["cluster"];
  const std::size_t jobs = JobsOf(env, name).size();
  std::string wire_op = op;
  std::replace(wire_op.begin(), wire_op.end(), '-', '_');
  body["cluster"] = name;
  for (const bool dry_run : {false, true}) {
    body["dry_run"] = dry_run;
    Result<json> r = env.TryCall("cluster." + wire_op, body);
    INFO("cluster." << wire_op << " " << body.dump() << ": " << (r.ok() ? r->dump() : r.status().message()));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::kConflict);
    CHECK_THAT(r.status().message(), Catch::Contains(marked) && Catch::Contains("delete failed") &&
                                         Catch::Contains("weft cluster scale " + name + " --size 3") &&
                                         Catch::Contains("weft cluster delete " + name));
  }
  std::vector<std::string> cli = {"cluster", op, name};
  cli.insert(cli.end(), args.begin(), args.end());
  RunResult shown = env.Weft(cli);
  INFO("weft cluster " << op << ": " << shown.out << shown.err);
  CHECK(shown.exit_code != 0);
  CHECK_THAT(shown.err, Catch::Contains(marked) && Catch::Contains("weft cluster scale"));

  const json after = env.Call("cluster.get", {{"cluster", name}})["cluster"];
  INFO(after.dump(1).substr(0, 4000));
  CHECK(JobsOf(env, name).size() == jobs);
  CHECK(FailedDeletes(after) == std::set<std::string>{marked});
  CHECK(after["nodes"] == before["nodes"]);
  CHECK(after["status"] == before["status"]);
}
}  // namespace

TEST_CASE("day2: after a delete or a shrink whose DELETEs failed, the cluster keeps those nodes, and the next "
          "delete or scale deletes exactly them",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-delete-fails");
  Env& env = f.env;
  const fs::path& machines = f.machines;
  env.RunJob({"cluster", "create", "leak", "--template", "web-fake", "--size", "3"});
  env.RunJob({"cluster", "create", "shrink", "--template", "web-fake", "--size", "4"});
  const json leak = env.Call("cluster.get", {{"cluster", "leak"}})["cluster"];
  const json shrink = env.Call("cluster.get", {{"cluster", "shrink"}})["cluster"];
  const std::set<std::string> leak_nodes = NodeNames(leak);
  const std::set<std::string> shrink_nodes = NodeNames(shrink);
  REQUIRE(leak_nodes.size() == 3);
  REQUIRE(shrink_nodes.size() == 4);
  REQUIRE(MachinesOf(machines, leak["id"]) == leak_nodes);
  REQUIRE(MachinesOf(machines, shrink["id"]) == shrink_nodes);

  // The delete fails: the three nodes stay listed, marked, and a dry run plans their DELETEs again.
  RunResult del = env.Weft({"cluster", "delete", "leak", "--wait"});
  INFO(del.out << del.err);
  CHECK(del.exit_code != 0);
  json failed = env.WaitJob(JobsOf(env, "leak")[0]["id"]);
  REQUIRE(failed["operation"] == "delete");
  REQUIRE(failed["status"] == "failed");
  json c = env.Call("cluster.get", {{"cluster", "leak"}})["cluster"];
  INFO(c.dump(1).substr(0, 4000));
  CHECK(c["status"] == "inconsistent");
  CHECK(NodeNames(c) == leak_nodes);
  CHECK(FailedDeletes(c) == leak_nodes);
  CHECK(c["size"] == 3);
  RunResult shown = env.Weft({"cluster", "get", "leak"});
  CHECK_THAT(shown.out, Catch::Contains("(delete failed)"));
  CHECK_THAT(shown.out, Catch::Contains("no operation but a scale or a delete runs until they are; "
                                        "`weft cluster delete leak` deletes them again"));
  // Nothing else runs on it meanwhile, and the refusal points at the delete alone.
  Result<json> refused = env.TryCall("cluster.restart", {{"cluster", "leak"}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kConflict);
  CHECK_THAT(refused.status().message(), Catch::Contains("`weft cluster delete leak` (cluster.delete) deletes them "
                                                         "again") && !Catch::Contains("weft cluster scale"));
  json plan = env.Call("cluster.delete", {{"cluster", "leak"}, {"dry_run", true}});
  CHECK(NodesOf(TasksOf(plan, "DELETE")) == leak_nodes);
  CHECK(MachinesOf(machines, leak["id"]) == leak_nodes);

  // The shrink fails: the node it was to delete stays, marked; the others are as they were.
  RunResult scale = env.Weft({"cluster", "scale", "shrink", "--size", "3", "--wait"});
  INFO(scale.out << scale.err);
  CHECK(scale.exit_code != 0);
  failed = env.WaitJob(JobsOf(env, "shrink")[0]["id"]);
  REQUIRE(failed["operation"] == "scale");
  REQUIRE(failed["status"] == "failed");
  const std::set<std::string> dropped = NodesOf(TasksOf(failed, "DELETE"));
  REQUIRE(dropped.size() == 1);
  c = env.Call("cluster.get", {{"cluster", "shrink"}})["cluster"];
  INFO(c.dump(1).substr(0, 4000));
  CHECK(NodeNames(c) == shrink_nodes);
  CHECK(FailedDeletes(c) == dropped);
  shown = env.Weft({"cluster", "get", "shrink"});
  CHECK_THAT(shown.out, Catch::Contains(*dropped.begin() + " is still to be deleted (delete failed): no operation but "
                                        "a scale or a delete runs until it is; `weft cluster scale shrink --size 3` "
                                        "deletes it again"));
  plan = env.Call("cluster.scale", {{"cluster", "shrink"}, {"size", 3}, {"dry_run", true}});
  CHECK(NodesOf(TasksOf(plan, "DELETE")) == dropped);
  CHECK(MachinesOf(machines, shrink["id"]) == shrink_nodes);

  // With 3 attempts a DELETE gets past its 2 failures: the next delete deletes the three
  // nodes and only then is the cluster terminated; the next scale deletes only the node left.
  f.LetDeletesSucceed();
  json deleted = env.RunJob({"cluster", "delete", "leak"});
  CHECK(NodesOf(TasksOf(deleted, "DELETE")) == leak_nodes);
  CHECK(TasksOf(deleted, "DELETE").size() == 3);
  c = env.Call("cluster.get", {{"cluster", "leak"}})["cluster"];
  CHECK(c["status"] == "terminated");
  CHECK(c["nodes"].empty());
  CHECK(MachinesOf(machines, leak["id"]).empty());

  json scaled = env.RunJob({"cluster", "scale", "shrink", "--size", "3"});
  CHECK(NodesOf(TasksOf(scaled, "DELETE")) == dropped);
  CHECK(TasksOf(scaled, "DELETE").size() == 1);
  c = env.Call("cluster.get", {{"cluster", "shrink"}})["cluster"];
  CHECK(c["status"] == "active");
  CHECK(c["nodes"].size() == 3);
  CHECK(FailedDeletes(c).empty());
  std::set<std::string> kept = shrink_nodes;
  for (const std::string& n : dropped) kept.erase(n);
  CHECK(NodeNames(c) == kept);
  CHECK(MachinesOf(machines, shrink["id"]) == kept);
}

TEST_CASE("day2: a scale up after a shrink whose DELETE failed deletes the marked node in the same job and "
          "numbers the new nodes past it",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-grow-after-failed-shrink");
  Env& env = f.env;
  const std::set<std::string> dropped = {ShrinkFails(env, "regrow", 4)};
  json c = env.Call("cluster.get", {{"cluster", "regrow"}})["cluster"];
  const std::set<std::string> first = NodeNames(c);
  REQUIRE(first.size() == 4);

  // The marked node is not one of the `size` nodes: growing to 4 plans one new node and the DELETE again.
  json plan = env.Call("cluster.scale", {{"cluster", "regrow"}, {"size", 4}, {"dry_run", true}});
  INFO(plan.dump(1).substr(0, 4000));
  CHECK(NodesOf(TasksOf(plan, "DELETE")) == dropped);
  CHECK(TasksOf(plan, "CREATE").size() == 1);
  // A half-deleted node gets its DELETE and nothing else: no STOP of the services it ran.
  for (const json& t : plan["tasks"])
    if (dropped.count(t.value("node", ""))) CHECK(t["action"] == "DELETE");

  f.LetDeletesSucceed();
  json grown = env.RunJob({"cluster", "scale", "regrow", "--size", "5"});
  CHECK(NodesOf(TasksOf(grown, "DELETE")) == dropped);
  const std::set<std::string> made = NodesOf(TasksOf(grown, "CREATE"));
  CHECK(made.size() == 2);
  for (const std::string& n : made) {
    CHECK(!first.count(n));  // new names, none the marked node's
  }
  c = env.Call("cluster.get", {{"cluster", "regrow"}})["cluster"];
  INFO(c.dump(1).substr(0, 4000));
  CHECK(c["status"] == "active");
  CHECK(c["nodes"].size() == 5);
  CHECK(FailedDeletes(c).empty());
  std::set<std::string> want = first;
  for (const std::string& n : dropped) want.erase(n);
  want.insert(made.begin(), made.end());
  CHECK(NodeNames(c) == want);
  CHECK(MachinesOf(f.machines, c["id"]) == want);
}

TEST_CASE("day2: a cluster keeps the provider it was made with until an upgrade moves it to the catalog's "
          "current one, and then a corrected provider deletes its nodes",
          "[jobs][integration][day2]") {
  Env env("weft-day2-provider-upgrade",
          "[jobs]\nmax_attempts = 1\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  const fs::path machines = env.Path("machines");
  CatalogDir catalog(env.Path("catalog"));
  // The provider as first imported: its DELETE always fails.
  catalog.PatchProvider({{"fail_actions", "DELETE"}, {"latency_ms", 5}, {"machines_dir", machines.string()}});
  env.Import(catalog);
  env.WaitHosts();
  env.RunJob({"cluster", "create", "prov", "--template", "web-fake", "--size", "3"});
  const json made = env.Call("cluster.get", {{"cluster", "prov"}})["cluster"];
  REQUIRE(MachinesOf(machines, made["id"]).size() == 3);

  // The provider is corrected in the catalog; the cluster still has its own copy.
  catalog.PatchProvider({{"fail_actions", nullptr}});
  env.Import(catalog);
  json upgraded = env.RunJob({"cluster", "upgrade", "prov"});
  CHECK(TasksOf(upgraded, "DELETE").empty());
  CHECK(TasksOf(upgraded, "CREATE").empty());
  // Nothing is left to move to.
  Result<json> again = env.TryCall("cluster.upgrade", {{"cluster", "prov"}});
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.status().message(), Catch::Contains("nothing to upgrade"));

  json deleted = env.RunJob({"cluster", "delete", "prov"});
  CHECK(TasksOf(deleted, "DELETE").size() == 3);
  CHECK(env.Call("cluster.get", {{"cluster", "prov"}})["cluster"]["status"] == "terminated");
  CHECK(MachinesOf(machines, made["id"]).empty());
}

TEST_CASE("day2: after a remove-services whose REMOVE failed, the nodes still list the service and the next "
          "remove-services plans its REMOVE again",
          "[jobs][integration][day2]") {
  Env env("weft-day2-remove-fails", "[jobs]\nmax_attempts = 1\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n");
  CatalogDir catalog(env.Path("catalog"));
  catalog.PatchProvider({{"latency_ms", 5}});
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  // Monitoring gets a REMOVE, which fails.
  json monitoring = catalog.Get("services", "fake-monitoring");
  monitoring["provisioner"]["actions"]["remove"] = {
      {"type", "fake-automator"},
      {"fields", {{"action", "remove"}, {"service", "fake-monitoring"}, {"fail_actions", "REMOVE"}}}};
  catalog.Put("services", monitoring);
  env.Import(catalog);
  env.RunJob({"cluster", "create", "rs", "--template", "web-fake", "--size", "3"});
  env.RunJob({"cluster", "add-services", "rs", "fake-monitoring"});
  const std::set<std::string> monitored = NodesRunning(env.Call("cluster.get", {{"cluster", "rs"}})["cluster"],
                                                       "fake-monitoring");
  REQUIRE(!monitored.empty());

  RunResult r = env.Weft({"cluster", "remove-services", "rs", "fake-monitoring", "--wait"});
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  json failed = env.WaitJob(JobsOf(env, "rs")[0]["id"]);
  REQUIRE(failed["operation"] == "remove-services");
  REQUIRE(failed["status"] == "failed");
  CHECK(NodesOf(TasksOf(failed, "REMOVE", "fake-monitoring")) == monitored);
  json c = env.Call("cluster.get", {{"cluster", "rs"}})["cluster"];
  INFO(c.dump(1).substr(0, 4000));
  CHECK(c["status"] == "inconsistent");
  CHECK(NodesRunning(c, "fake-monitoring") == monitored);
  json plan = env.Call("cluster.remove_services", {{"cluster", "rs"}, {"services", {"fake-monitoring"}}, {"dry_run", true}});
  CHECK(NodesOf(TasksOf(plan, "REMOVE", "fake-monitoring")) == monitored);
}


// ---- 10. while a node is marked "delete failed", only a delete or a scale runs ------

TEST_CASE("day2: add-services is refused while a node is marked delete failed, and runs once the scale the "
          "refusal names deleted the node",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-add-services");
  Env& env = f.env;
  const std::string marked = ShrinkFails(env, "mk", 4);
  RefusedWhileMarked(env, "mk", marked, "add-services", {{"services", {"fake-monitoring"}}}, {"fake-monitoring"});

  // The scale the refusal names deletes the node again, and plans nothing else on it (no STOP of what it ran).
  f.LetDeletesSucceed();
  json scaled = env.RunJob({"cluster", "scale", "mk", "--size", "3"});
  INFO(scaled.dump(1).substr(0, 6000));
  for (const json& t : scaled["tasks"])
    if (t["node"] == marked) CHECK(t["action"] == "DELETE");
  CHECK(NodesOf(TasksOf(scaled, "DELETE")) == std::set<std::string>{marked});
  json c = env.Call("cluster.get", {{"cluster", "mk"}})["cluster"];
  CHECK(FailedDeletes(c).empty());
  CHECK(!NodeNames(c).count(marked));
  CHECK(MachinesOf(f.machines, c["id"]) == NodeNames(c));
  // Going back to the state before that scale does not make the deleted node again.
  json back = env.Call("cluster.rollback", {{"cluster", "mk"}, {"dry_run", true}});
  INFO(back.dump(1).substr(0, 4000));
  CHECK(TasksOf(back, "CREATE").empty());
  CHECK(!NodesOf(back["tasks"].get<std::vector<json>>()).count(marked));

  json added = env.RunJob({"cluster", "add-services", "mk", "fake-monitoring"});
  CHECK(!TasksOf(added, "INSTALL", "fake-monitoring").empty());
  CHECK(!NodesOf(added["tasks"].get<std::vector<json>>()).count(marked));
}

TEST_CASE("day2: upgrade is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-upgrade");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  f.catalog.PatchActions("fake-nginx", "", {{"build", 2}});
  f.env.Import(f.catalog);
  RefusedWhileMarked(f.env, "mk", marked, "upgrade", json::object());
}

TEST_CASE("day2: start is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-start");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  RefusedWhileMarked(f.env, "mk", marked, "start", json::object());
}

TEST_CASE("day2: stop is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-stop");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  RefusedWhileMarked(f.env, "mk", marked, "stop", {{"services", {"fake-nginx"}}}, {"fake-nginx"});
}

TEST_CASE("day2: restart is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-restart");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  RefusedWhileMarked(f.env, "mk", marked, "restart", json::object());
}

TEST_CASE("day2: reconfigure is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-reconfigure");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  RefusedWhileMarked(f.env, "mk", marked, "reconfigure", {{"config", {{"nginx", {{"port", "9090"}}}}}},
                     {"--config", R"({"nginx":{"port":"9090"}})"});
}

TEST_CASE("day2: remove-services is refused while a node is marked delete failed, and the mark stays",
          "[jobs][integration][day2]") {
  FailingDeletes f("weft-day2-marked-remove-services");
  const std::string marked = ShrinkFails(f.env, "mk", 4);
  RefusedWhileMarked(f.env, "mk", marked, "remove-services", {{"services", {"fake-redis"}}}, {"fake-redis"});
}

}  // namespace weft
