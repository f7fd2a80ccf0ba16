// The openstack provider end to end: the real weftd and weft-host loading the
// built plugin, against tests/openstack/fake_openstack.py, a small fake of
// Keystone (v3 and v2.0 tokens, a service catalog), Nova (flavors, key pairs,
// servers going BUILD -> ACTIVE) and Glance (images by name) on a loopback
// port, with Nova's and Keystone's error shapes. The fake puts in the faults a
// test asks for (5xx, rate limits with Retry-After, a lost answer, a held
// answer, servers that never boot or fail to) and shows what was made through
// admin endpoints of its own, which the cases check instead of the plugin's
// own client.
//
// Without python3 every case says so in one line and exits 77, which ctest
// reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::CatalogDir;
using weft::testing::Host;
using weft::testing::Process;
using weft::testing::RunResult;
using weft::testing::Tail;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
const fs::path kFakeScript = fs::path(WEFT_SOURCE_DIR) / "tests" / "openstack" / "fake_openstack.py";
const std::string kProvider = "openstack-fake";

// ---- the fake OpenStack, or the case skipped ----------------------------------------

fs::path PythonOrSkip() {
  static const std::optional<fs::path> python = []() -> std::optional<fs::path> {
    std::vector<fs::path> dirs;
    if (const char* path = std::getenv("PATH")) {
      std::string rest = path;
      for (std::size_t at = 0; at <= rest.size();) {
        const std::size_t colon = std::min(rest.find(':', at), rest.size());
        dirs.emplace_back(rest.substr(at, colon - at));
        at = colon + 1;
      }
    }
    for (const fs::path& d : dirs) {
      const fs::path p = d / "python3";
      if (fs::exists(p) && weft::testing::Run(p, {"-c", "import http.server, json"}, 60s).exit_code == 0)
        return p;
    }
    return std::nullopt;
  }();
  if (!python) {
    std::cout << "SKIPPED: python3 is not installed, so the fake OpenStack (tests/openstack/fake_openstack.py) cannot "
                 "run and the openstack provider cannot be tested"
              << std::endl;
    std::exit(kSkipped);
  }
  return *python;
}

class FakeOpenStack {
 public:
  explicit FakeOpenStack(const fs::path& dir) : python_(PythonOrSkip()), dir_(dir) {
    fs::create_directories(dir_);
    weft::testing::ProcessOptions o;
    o.stdout_path = dir_ / "fake.log";
    o.stderr_path = dir_ / "fake.log";
    server_ = Process(python_, {kFakeScript.string(), (dir_ / "port").string()}, o);
    if (!WaitFor([&] { return fs::exists(dir_ / "port"); }, 30s))
      throw std::runtime_error("the fake OpenStack did not start:\n" + Logs());
    url_ = "http://127.0.0.1:" + weft::testing::ReadFile(dir_ / "port");
  }

  // The provider's fields: Keystone v3 at the fake, short waits.
  json Fields() const {
    return {{"api_user", "weft"},
            {"api_password", "secret"},
            {"openstack_tenant", "weft-project"},
            {"openstack_auth_url", url_ + "/identity/v3"},
            {"openstack_region", "RegionOne"},
            {"confirm_timeout_s", 30},
            {"confirm_poll_ms", 50},
            {"api_backoff_ms", 20}};
  }
  const std::string& url() const { return url_; }
  // {"servers": [...], "keypairs": [...], "calls": ["METHOD /path STATUS"], "held": [...]}.
  json State() const { return json::parse(Admin("GET", "/_admin/state")); }
  void Faults(const json& rules) const { Admin("POST", "/_admin/faults", rules.dump()); }
  void Config(const json& config) const { Admin("POST", "/_admin/config", config.dump()); }
  void AddKeypair(const std::string& name, const std::string& public_key) const {
    Admin("POST", "/_admin/keypairs", json{{"name", name}, {"public_key", public_key}}.dump());
  }
  std::string Logs() const {
    return "--- fake OpenStack ---\n" + Tail(weft::testing::ReadFile(dir_ / "fake.log"), 3000);
  }

 private:
  std::string Admin(const std::string& method, const std::string& path, const std::string& body = "") const {
    const weft::testing::HttpReply r =
        weft::testing::HttpSend(url_, method, path, body, {{"Content-Type", "application/json"}});
    if (r.status / 100 != 2) throw std::runtime_error("fake OpenStack " + method + " " + path + ": " + r.body);
    return r.body;
  }

  fs::path python_;
  fs::path dir_;
  std::string url_;
  Process server_;
};

int Count(const json& state, const std::string& call) {
  int n = 0;
  for (const json& c : state["calls"]) n += c == call;
  return n;
}

// The fake's servers of a cluster by node, those with `status` ("" for all).
std::map<std::string, json> ByNode(const json& state, const std::string& cluster_id, const std::string& status) {
  std::map<std::string, json> out;
  for (const json& s : state["servers"]) {
    if (s["metadata"].value("weft:cluster-id", "") == cluster_id && (status.empty() || s["status"] == status))
      out[s["metadata"].value("weft:node", "")] = s;
  }
  return out;
}

// ---- weftd, hosts and the catalog ------------------------------------------------

const std::string kFast =
    "[tasks]\nlease_ms = 1500\n[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
    "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 1000\n";

class Env {
 public:
  Env(const std::string& name, int host_count)
      : weftd_(weft::testing::WeftdOptions{.name = name, .extra_toml = kFast, .cli_timeout = 120s}) {
    for (int i = 1; i <= host_count; ++i) {
      hosts_.push_back(std::make_unique<Host>(weft::testing::HostOptions{.dir = weftd_.dir(),
                                                                        .id = "h" + std::to_string(i),
                                                                        .server = weftd_.provisioner(),
                                                                        .capacity = 4,
                                                                        .workers = 1,
                                                                        .shutdown_grace_ms = 1000}));
    }
    for (const auto& h : hosts_) REQUIRE(WaitFor([&] { return weftd_.HostLive(h->id()); }, 30s));
  }
  Weftd& weftd() { return weftd_; }
  Host& host(std::size_t i) { return *hosts_.at(i); }
  std::string Logs() const {
    std::string out = Tail(weftd_.Log(), 3000);
    for (const auto& h : hosts_) out += "--- host " + h->id() + " ---\n" + Tail(h->Log(), 3000);
    return out;
  }
  // The web template on the openstack provider with `fields`, fake services;
  // flavors by name and by id, the image by name (looked up in Glance).
  void ImportCatalog(const json& fields) {
    CatalogDir catalog(weftd_.Path("catalog"));
    catalog.Put("providers", {{"name", kProvider},
                              {"description", "OpenStack as the test's fake serves it"},
                              {"providertype", "openstack"},
                              {"provisioner", fields}});
    for (const auto& [hw, flavor] : {std::pair{"small", "m1.small"}, std::pair{"medium", "3"}}) {
      json doc = catalog.Get("hardwaretypes", hw);
      doc["providermap"][kProvider] = {{"flavor", flavor}};
      catalog.Put("hardwaretypes", doc);
    }
    json image = catalog.Get("imagetypes", "debian12");
    image["providermap"][kProvider] = {{"image", "debian-12"}, {"sshuser", "debian"}};
    catalog.Put("imagetypes", image);
    catalog.DeriveTemplate("web-openstack", {{"defaults", {{"provider", kProvider}}}});
    const RunResult r = weftd_.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  // `weft ARGS... --wait`, which must succeed; the job.
  json RunJob(std::vector<std::string> args, const FakeOpenStack& fake) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    const RunResult r = weftd_.Weft(args);
    INFO("weft " << args[2] << " " << args[3] << ": " << r.out << r.err << Logs() << fake.Logs());
    REQUIRE(r.exit_code == 0);
    const json job = json::parse(r.out)["job"];  // -o json with --wait: {"job"}
    json done = weftd_.WaitJob(job["id"].get<std::string>(), 120s);
    INFO(done.dump(1).substr(0, 6000));
    REQUIRE(done["status"] == "succeeded");
    return done;
  }
  // A raw task, run to `final_state`.
  json RunTask(const json& task, const std::string& final_state) {
    return weftd_.WaitTaskState(weftd_.Enqueue(task), final_state, 60s);
  }

 private:
  Weftd weftd_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

std::set<std::string> Hostnames(const json& cluster) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"]) out.insert(n["hostname"].get<std::string>());
  return out;
}

// A raw task in the shape the job engine hands a provider.
json NodeTaskJson(const json& fields, const std::string& action, const std::string& node,
                  const json& results = json::object(), const std::string& flavor = "m1.small") {
  const std::string hostname = node + ".c1.weft";
  return {{"plugin", "openstack"},
          {"action", action},
          {"cluster_id", "c1"},
          {"node_id", node},
          {"job_id", "job-c1"},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", hostname},
            {"cluster", {{"id", "c1"}, {"name", "errors"}}},
            {"provider", {{"name", kProvider}, {"type", "openstack"}, {"fields", fields}}},
            {"node",
             {{"id", node}, {"hostname", hostname}, {"flavor", flavor}, {"image", "debian-12"}, {"results", results}}},
            {"results", results}}}};
}

std::string Message(const json& task) { return task.value("message", ""); }
std::string Stdout(const json& task) { return task.value("stdout", ""); }

}  // namespace

TEST_CASE("openstack provider: a 3-node cluster is made, scaled and deleted on a fake Nova, its servers carrying "
          "the idempotency metadata",
          "[openstack]") {
  TempDir tmp("weft-openstack-cluster");
  FakeOpenStack fake(tmp / "fake");
  Env env("weft-openstack-cluster", 1);
  json fields = fake.Fields();
  fields["security_groups"] = "default, web";
  env.ImportCatalog(fields);

  const json created = env.RunJob({"cluster", "create", "shop", "--template", "web-openstack", "--size", "3"}, fake);
  json cluster = env.weftd().Call("cluster.get", {{"cluster", "shop"}})["cluster"];
  const std::string cid = cluster["id"];
  json state = fake.State();
  INFO(state.dump(1).substr(0, 8000));
  std::map<std::string, json> live = ByNode(state, cid, "ACTIVE");
  REQUIRE(live.size() == 3);
  CHECK(state["servers"].size() == 3);  // nothing more was made
  std::set<std::string> keys;
  for (const json& n : cluster["nodes"]) {
    const std::string hostname = n["hostname"];
    REQUIRE(live.count(hostname) == 1);
    const json& s = live[hostname];
    CHECK(s["name"] == hostname);
    CHECK(s["metadata"]["weft:cluster"] == "shop");
    CHECK(s["metadata"]["weft:tenant"] == "default");
    keys.insert(s["metadata"].value("weft:idempotency-key", ""));
    CHECK(s["key_name"] == "weft-default-" + cid + "-" + hostname);
    CHECK(s["image"] == "6a8e5a2c-35c1-4b1d-9f4e-6c3f0d1e2a7b");  // debian-12, found by name in Glance
    CHECK((s["flavor"] == "2" || s["flavor"] == "3"));           // m1.small by name, "3" by id
    CHECK(s["security_groups"] == json::array({"default", "web"}));
    CHECK(n["results"].value("provider_id", "") == s["id"]);
    CHECK(n["results"].value("access_v4", "") == s["ip"]);
    CHECK(n["results"]["ssh_auth"]["user"] == "debian");  // the image type's sshuser
    CHECK(n["results"]["host_keys"].size() == 1);
  }
  // Each server has the idempotency key of the CREATE that made it (<cluster id>/<node>/<task id>).
  CHECK(keys.size() == 3);
  int creates = 0;
  for (const json& t : created["tasks"]) {
    if (t["action"] != "CREATE") continue;
    ++creates;
    const std::string node = t["node"];
    INFO("CREATE task " << t.dump().substr(0, 300));
    const std::string key = cid + "/" + node + "/" + std::to_string(t["id"].get<std::int64_t>());
    CHECK(live[node]["metadata"]["weft:idempotency-key"] == key);
  }
  CHECK(creates == 3);
  CHECK(state["keypairs"].size() == 3);

  // Grow by one, then shrink back: the removed node's server is deleted.
  env.RunJob({"cluster", "scale", "shop", "--size", "4"}, fake);
  CHECK(ByNode(fake.State(), cid, "ACTIVE").size() == 4);
  env.RunJob({"cluster", "scale", "shop", "--size", "3"}, fake);
  cluster = env.weftd().Call("cluster.get", {{"cluster", "shop"}})["cluster"];
  state = fake.State();
  live = ByNode(state, cid, "ACTIVE");
  CHECK(ByNode(state, cid, "DELETED").size() == 1);
  std::set<std::string> active_nodes;
  for (const auto& [hostname, s] : live) active_nodes.insert(hostname);
  CHECK(active_nodes == Hostnames(cluster));

  env.RunJob({"cluster", "delete", "shop"}, fake);
  state = fake.State();
  CHECK(ByNode(state, cid, "ACTIVE").empty());
  CHECK(ByNode(state, cid, "DELETED").size() == 4);
  CHECK(state["keypairs"].empty());
  CHECK(Count(state, "POST /compute/v2.1/servers 202") == 4);
  std::cout << "openstack provider against the fake: " << state["calls"].size()
            << " API calls for create 3, grow 1, shrink 1, delete 4" << std::endl;
}

TEST_CASE("openstack provider: a host killed while Nova answers a CREATE leaks no server: the CREATE run again "
          "finds it by its metadata",
          "[openstack]") {
  TempDir tmp("weft-openstack-kill");
  FakeOpenStack fake(tmp / "fake");
  // The fake makes the server at once, then holds the answer to the first creation.
  fake.Faults(json::array({{{"method", "POST"}, {"path", "/servers$"}, {"delay_ms", 8000}, {"times", 1}}}));
  Env env("weft-openstack-kill", 2);
  env.ImportCatalog(fake.Fields());

  const json started =
      env.weftd().Call("cluster.create", {{"name", "leak"}, {"template", "web-openstack"}, {"size", 3}});
  const std::string job_id = started["job"]["id"];
  const std::string cid = started["cluster"]["id"];
  // The held server's node, then the host running its CREATE.
  std::string held_node;
  REQUIRE(WaitFor(
      [&] {
        const json state = fake.State();
        for (const json& s : state["servers"]) {
          for (const json& h : state["held"]) {
            if (h == s["id"]) held_node = s["metadata"].value("weft:node", "");
          }
        }
        return !held_node.empty();
      },
      60s));
  std::string victim;
  const json running = env.weftd().Job(job_id);
  for (const json& t : running["tasks"]) {
    if (t["action"] == "CREATE" && t.value("node", "") == held_node) victim = t.value("host_id", "");
  }
  INFO("held node " << held_node << ", its host " << victim);
  REQUIRE((victim == "h1" || victim == "h2"));
  Host& killed = env.host(victim == "h1" ? 0 : 1);
  killed.process().Signal(SIGKILL);
  REQUIRE(killed.process().Wait(10s).has_value());

  const json job = env.weftd().WaitJob(job_id, 120s);
  INFO(job.dump(1).substr(0, 8000) << env.Logs() << fake.Logs());
  REQUIRE(job["status"] == "succeeded");
  // The held node's CREATE, run again on the other host, found the server the killed one made. (Other
  // CREATEs the killed host held may have been run again too, each finding its own server.)
  bool held_reused = false;
  for (const json& t : job["tasks"]) {
    if (t["action"] == "CREATE" && t.value("node", "") == held_node)
      held_reused = Stdout(t).find("reuses server") != std::string::npos;
  }
  CHECK(held_reused);
  const json state = fake.State();
  INFO(state.dump(1).substr(0, 8000));
  CHECK(state["servers"].size() == 3);  // one per node, never a second
  CHECK(ByNode(state, cid, "ACTIVE").size() == 3);
}

TEST_CASE("openstack provider: retries 5xx and rate limits with Retry-After, never makes a second server after a "
          "lost answer, signs in through Keystone v2.0, and names the fields of a refused credential or quota",
          "[openstack]") {
  TempDir tmp("weft-openstack-retries");
  FakeOpenStack fake(tmp / "fake");
  Env env("weft-openstack-retries", 1);
  const json fields = fake.Fields();

  // 500 then 200 on a read; 429 and 413 with Retry-After; the creation made, then answered 500 (a lost answer).
  fake.Faults(json::array({
      {{"method", "GET"}, {"path", "/servers/detail$"}, {"times", 1}, {"status", 500}},
      {{"method", "GET"}, {"path", "/flavors$"}, {"times", 1}, {"status", 429}, {"retry_after", 1}},
      {{"method", "POST"}, {"path", "/os-keypairs$"}, {"times", 1}, {"status", 413}, {"retry_after", 0},
       {"message", "This request was rate-limited."}},
      {{"method", "POST"}, {"path", "/servers$"}, {"times", 1}, {"status", 500}, {"after", true}},
  }));
  const json created = env.RunTask(NodeTaskJson(fields, "CREATE", "web-1"), "succeeded");
  json state = fake.State();
  INFO(created.dump(1) << state.dump(1).substr(0, 6000) << fake.Logs());
  CHECK(Count(state, "GET /compute/v2.1/servers/detail 500") == 1);
  CHECK(Count(state, "GET /compute/v2.1/flavors 429") == 1);
  CHECK(Count(state, "GET /compute/v2.1/flavors 200") == 1);
  CHECK(Count(state, "POST /compute/v2.1/os-keypairs 413") == 1);
  CHECK(Count(state, "POST /compute/v2.1/os-keypairs 200") == 1);
  CHECK(Count(state, "POST /compute/v2.1/servers 500") == 1);
  CHECK(Count(state, "POST /compute/v2.1/servers 202") == 0);  // never sent again: the look-up found the server
  CHECK_THAT(Stdout(created), Catch::Contains("trying again in 1000 ms") && Catch::Contains("reuses server"));
  REQUIRE(state["servers"].size() == 1);
  CHECK(created["result"]["provider_id"] == state["servers"][0]["id"]);

  // Rate-limited on every try: the CREATE fails once its attempts run out, saying so.
  json few = fields;
  few["api_max_attempts"] = 3;
  fake.Faults(json::array({{{"method", "GET"}, {"path", "/servers/detail$"}, {"status", 429}, {"retry_after", 0}}}));
  const json throttled = env.RunTask(NodeTaskJson(few, "CREATE", "web-2"), "failed");
  CHECK_THAT(Message(throttled), Catch::Contains("Nova kept failing after 3 attempts") && Catch::Contains("HTTP 429"));
  CHECK(Count(fake.State(), "GET /compute/v2.1/servers/detail 429") == 3);
  fake.Faults(json::array());

  // Coopr's v2.0 auth URL: tokens from Keystone v2.0, the same servers.
  json v2 = fields;
  v2["openstack_auth_url"] = fake.url() + "/identity/v2.0/tokens";
  const json made_v2 = env.RunTask(NodeTaskJson(v2, "CREATE", "web-5"), "succeeded");
  state = fake.State();
  CHECK(Count(state, "POST /identity/v2.0/tokens 200") == 1);
  CHECK(ByNode(state, "c1", "").count("web-5") == 1);
  CHECK(made_v2["result"]["ssh_auth"]["user"] == "root");  // Coopr's default without an sshuser
  // A Keystone URL without a version: v3.
  json unversioned = fields;
  unversioned["openstack_auth_url"] = fake.url() + "/identity/";
  env.RunTask(NodeTaskJson(unversioned, "CREATE", "web-6"), "succeeded");
  CHECK(ByNode(fake.State(), "c1", "").count("web-6") == 1);

  // A wrong password, a wrong project: refused, the sentence naming the fields; the password never shown.
  json wrong = fields;
  wrong["api_password"] = "not-the-password";
  const std::string refused = Message(env.RunTask(NodeTaskJson(wrong, "CREATE", "web-3"), "failed"));
  CHECK_THAT(refused, Catch::Contains("refused the credentials") && Catch::Contains("'api_user' ('weft')") &&
                          Catch::Contains("'api_password'") && Catch::Contains("'openstack_tenant'"));
  CHECK(refused.find("not-the-password") == std::string::npos);
  json wrong_v2 = v2;
  wrong_v2["openstack_tenant"] = "nobody";
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(wrong_v2, "CREATE", "web-3"), "failed")),
             Catch::Contains("refused the credentials") && Catch::Contains("'openstack_tenant' ('nobody')"));
  // A flavor the project does not have, and a missing field: each names what to fix.
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(fields, "CREATE", "web-3", json::object(), "m9.huge"), "failed")),
             Catch::Contains("flavor 'm9.huge' (the hardware type's flavor for provider 'openstack-fake')") &&
                 Catch::Contains("m1.tiny, m1.small, m1.medium"));
  json no_url = fields;
  no_url.erase("openstack_auth_url");
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(no_url, "CREATE", "web-3"), "failed")),
             Catch::Contains("required field 'openstack_auth_url' is missing from the task's provider fields"));
  // A 413 for a quota is no rate limit: not retried, and said to be the project's quota.
  fake.Faults(
      json::array({{{"method", "POST"},
                    {"path", "/servers$"},
                    {"status", 413},
                    {"message", "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}}));
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(fields, "CREATE", "web-3"), "failed")),
             Catch::Contains("project 'weft-project' (field 'openstack_tenant') is over its quota") &&
                 Catch::Contains("Quota exceeded for instances"));
  CHECK(Count(fake.State(), "POST /compute/v2.1/servers 413") == 1);
  fake.Faults(json::array());
  CHECK(ByNode(fake.State(), "c1", "").count("web-3") == 0);  // none of them made a server
}

TEST_CASE("openstack provider: CONFIRM times out on a server stuck in BUILD, renews a refused token, fails with "
          "Nova's fault on ERROR, attaches a floating IP once, and a DELETE of a server already gone succeeds",
          "[openstack]") {
  TempDir tmp("weft-openstack-confirm");
  FakeOpenStack fake(tmp / "fake");
  Env env("weft-openstack-confirm", 1);
  const json fields = fake.Fields();

  const json created = env.RunTask(NodeTaskJson(fields, "CREATE", "web-1"), "succeeded");
  const std::string id = created["result"]["provider_id"];
  // A server that never leaves BUILD: CONFIRM gives up after confirm_timeout_s.
  fake.Config({{"stuck", true}});
  json short_wait = fields;
  short_wait["confirm_timeout_s"] = 1;
  const json timed_out = env.RunTask(NodeTaskJson(short_wait, "CONFIRM", "web-1", {{"provider_id", id}}), "failed");
  CHECK_THAT(Message(timed_out), Catch::Contains("server " + id) && Catch::Contains("still BUILD after 1 s") &&
                                     Catch::Contains("'confirm_timeout_s'"));
  fake.Config({{"stuck", false}});
  // Nova refuses the token once (it expired): the plugin gets a new one and asks again.
  fake.Faults(json::array({{{"method", "GET"}, {"path", "/servers/[^/]+$"}, {"times", 1}, {"status", 401}}}));
  const int tokens_before = Count(fake.State(), "POST /identity/v3/auth/tokens 201");
  const json confirmed = env.RunTask(NodeTaskJson(fields, "CONFIRM", "web-1", {{"provider_id", id}}), "succeeded");
  const json after_renewal = fake.State();
  CHECK(Count(after_renewal, "POST /identity/v3/auth/tokens 201") == tokens_before + 2);
  CHECK(Count(after_renewal, "GET /compute/v2.1/servers/" + id + " 401") == 1);
  fake.Faults(json::array());
  CHECK(confirmed["result"].value("access_v4", "").starts_with("10.0.0."));
  CHECK(confirmed["result"]["bind_v4"] == confirmed["result"]["access_v4"]);
  CHECK(confirmed["result"]["host_keys"] == created["result"]["host_keys"]);

  // A server Nova cannot place: ERROR, and CONFIRM fails with Nova's fault message.
  fake.Config({{"fail_build", "No valid host was found. There are not enough hosts available."}});
  const json doomed = env.RunTask(NodeTaskJson(fields, "CREATE", "web-2"), "succeeded");
  const json failed = env.RunTask(
      NodeTaskJson(fields, "CONFIRM", "web-2", {{"provider_id", doomed["result"]["provider_id"]}}), "failed");
  CHECK_THAT(Message(failed), Catch::Contains("failed to build: No valid host was found"));
  fake.Config({{"fail_build", ""}});

  // A floating address from Neutron's external network: attached once, found again by a CONFIRM run again,
  // released by DELETE.
  json floating = fields;
  floating["floating_ip"] = true;
  const json made = env.RunTask(NodeTaskJson(floating, "CREATE", "web-3"), "succeeded");
  const json made_results = {{"provider_id", made["result"]["provider_id"]}};
  const json attached = env.RunTask(NodeTaskJson(floating, "CONFIRM", "web-3", made_results), "succeeded");
  INFO(attached.dump(1));
  CHECK(attached["result"].value("access_v4", "").starts_with("172.24.4."));
  CHECK(attached["result"].value("bind_v4", "").starts_with("10.0.0."));
  const json reattached = env.RunTask(NodeTaskJson(floating, "CONFIRM", "web-3", made_results), "succeeded");
  CHECK(reattached["result"]["access_v4"] == attached["result"]["access_v4"]);
  CHECK(fake.State()["floatingips"].size() == 1);
  env.RunTask(NodeTaskJson(floating, "DELETE", "web-3", made_results), "succeeded");
  CHECK(fake.State()["floatingips"].empty());

  // DELETE deletes; a DELETE again, and one of a server Nova never heard of, succeed.
  env.RunTask(NodeTaskJson(fields, "DELETE", "web-1", {{"provider_id", id}}), "succeeded");
  CHECK(ByNode(fake.State(), "c1", "DELETED").count("web-1") == 1);
  const json again = env.RunTask(NodeTaskJson(fields, "DELETE", "web-1", {{"provider_id", id}}), "succeeded");
  CHECK_THAT(Stdout(again), Catch::Contains("gone already"));
  const json never = env.RunTask(
      NodeTaskJson(fields, "DELETE", "web-9", {{"provider_id", "00000000-0000-0000-0000-00000000dead"}}), "succeeded");
  CHECK_THAT(Stdout(never), Catch::Contains("gone already"));
  // A DELETE that never heard of the server (its CREATE died before reporting) finds it by its metadata.
  const json untold = env.RunTask(NodeTaskJson(fields, "DELETE", "web-2"), "succeeded");
  CHECK_THAT(Stdout(untold), Catch::Contains("deleting server"));
  const json state = fake.State();
  CHECK(ByNode(state, "c1", "DELETED").size() == 3);
  CHECK(state["keypairs"].empty());
}

TEST_CASE("openstack provider: an operator's key pair with its private key from a resource, user data from a "
          "resource, and wrong names refused by field",
          "[openstack]") {
  TempDir tmp("weft-openstack-keypair");
  FakeOpenStack fake(tmp / "fake");
  Env env("weft-openstack-keypair", 1);
  // The operator's key: made here, its public half in Nova, its private half a resource; a boot script too.
  const fs::path key = tmp / "ops-key";
  REQUIRE(weft::testing::Run("/usr/bin/ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-C", "ops", "-f", key.string()})
              .exit_code == 0);
  fake.AddKeypair("ops-key", weft::testing::ReadFile(tmp / "ops-key.pub"));
  weft::testing::WriteFile(tmp / "boot.sh", "#!/bin/sh\necho booted by the operator's script\n");
  for (const auto& [name, file] : {std::pair{"ops-key.pem", key}, std::pair{"boot.sh", tmp / "boot.sh"}}) {
    for (std::vector<std::string> args :
         {std::vector<std::string>{"resource", "upload", "openstack", name, file.string()},
          std::vector<std::string>{"resource", "stage", "openstack", name, "1"}}) {
      const RunResult r = env.weftd().Weft(args);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
    }
  }
  REQUIRE(env.weftd().Weft({"resource", "sync"}).exit_code == 0);
  json fields = fake.Fields();
  fields["ssh_keypair"] = "ops-key";
  fields["ssh_key_resource"] = "ops-key.pem";
  fields["user_data_resource"] = "boot.sh";
  const json created = env.RunTask(NodeTaskJson(fields, "CREATE", "web-1"), "succeeded");
  INFO(created.dump(1) << fake.Logs());
  json state = fake.State();
  REQUIRE(state["servers"].size() == 1);
  const json& server = state["servers"][0];
  CHECK(server["key_name"] == "ops-key");
  CHECK(state["keypairs"] == json::array({"ops-key"}));  // the operator's only: no key pair of the node's own
  // cloud-init gets Weft's host key and the operator's script, as one multipart message.
  const std::string user_data = server["user_data"];
  CHECK_THAT(user_data, Catch::Contains("multipart/mixed") && Catch::Contains("ed25519_public: ssh-ed25519 ") &&
                            Catch::Contains("Content-Type: text/x-shellscript") &&
                            Catch::Contains("echo booted by the operator's script"));
  // DELETE leaves the operator's key pair alone.
  env.RunTask(NodeTaskJson(fields, "DELETE", "web-1", {{"provider_id", created["result"]["provider_id"]}}),
              "succeeded");
  state = fake.State();
  CHECK(state["servers"][0]["status"] == "DELETED");
  CHECK(state["keypairs"] == json::array({"ops-key"}));

  // Wrong names, each refused with the field to fix.
  json no_resource = fields;
  no_resource["ssh_key_resource"] = "missing.pem";
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(no_resource, "CREATE", "web-2"), "failed")),
             Catch::Contains("no active resource named 'missing.pem' (field 'ssh_key_resource')"));
  json no_keypair = fields;
  no_keypair["ssh_keypair"] = "nobody-key";
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(no_keypair, "CREATE", "web-2"), "failed")),
             Catch::Contains("the key pair of field 'ssh_keypair' ('nobody-key') is unknown") &&
                 Catch::Contains("Invalid key_name provided."));
  json without_resource = fields;
  without_resource.erase("ssh_key_resource");
  CHECK_THAT(Message(env.RunTask(NodeTaskJson(without_resource, "CREATE", "web-2"), "failed")),
             Catch::Contains("field 'ssh_key_resource' must name the resource (type 'openstack')"));
  // An image by an id Glance does not have: Nova refuses it, and the sentence names the image type.
  json unknown_image = NodeTaskJson(fake.Fields(), "CREATE", "web-2");
  unknown_image["payload"]["node"]["image"] = "00000000-0000-4000-8000-000000000000";
  CHECK_THAT(Message(env.RunTask(unknown_image, "failed")),
             Catch::Contains("image '00000000-0000-4000-8000-000000000000' (the image type's image for provider "
                             "'openstack-fake') is not usable") &&
                 Catch::Contains("Can not find requested image"));
  CHECK(fake.State()["servers"].size() == 1);  // none of them made a server
}
