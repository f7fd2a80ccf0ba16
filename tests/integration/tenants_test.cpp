// Tenants end to end: a tenant must exist before anything acts in it, and what
// one tenant uploads never runs another tenant's tasks. Real weftd, weft-host
// and weft processes on loopback ports (security off: every api caller is
// superadmin, which is the case the tenant check must hold for).
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/fast.hpp"
#include "support/store_rows.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::ServerIn;
using weft::testing::Weftd;
using weft::testing::RunResult;

const fs::path kCatalog = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";

// weftd as these tests run it; `weft` waits up to 5 s for a reply.
weft::testing::WeftdOptions TenantsServer(const fs::path& dir) {
  weft::testing::WeftdOptions o = ServerIn(dir);
  o.cli_args = {"--timeout", "5000"};
  return o;
}

// Rows of the store (read-only, beside the running weftd) that belong to a tenant other than `default`.
int RowsOutsideDefault(const fs::path& db_file, const std::string& table) {
  return weft::testing::CountRows(db_file, "SELECT COUNT(*) FROM " + table + " WHERE tenant <> 'default'");
}

std::string Refusal(const std::string& tenant) {
  return "tenant '" + tenant + "' does not exist (weft tenant list shows the tenants)";
}

}  // namespace

TEST_CASE("tenants: an unknown tenant is refused by every op with a sentence, and nothing is written",
          "[integration][tenant]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));

  // A misspelt --tenant: the CLI says so instead of filling a phantom tenant.
  RunResult r = server.Weft({"--tenant", "nosuch", "catalog", "import", kCatalog.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
  r = server.Weft({"--tenant", "nosuch", "cluster", "create", "c1", "--template", "web-fake", "--size", "1"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
  r = server.Weft({"--tenant", "nosuch", "provider", "list"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));

  // The superadmin cannot write into a tenant that does not exist, whatever the name looks like.
  const fs::path provider = kCatalog / "providers" / "fake.json";
  const fs::path script = tmp / "a.sh";
  weft::testing::WriteFile(script, "echo a\n");
  zmq::context_t ctx(1);
  for (const std::string tenant : {"nosuch", "a b", "../../x"}) {
    INFO("tenant " << tenant);
    r = server.Weft({"--tenant", tenant, "provider", "put", provider.string()});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(Refusal(tenant)));
    r = server.Weft({"--tenant", tenant, "resource", "upload", "shell", "a.sh", script.string()});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(Refusal(tenant)));
    weft::client::Client api(ctx, weft::client::Options{server.endpoints()["api"], 3000, tenant, {}});
    auto enqueued = api.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                        {"action", "INSTALL"}}})}});
    REQUIRE_FALSE(enqueued.ok());
    CHECK(enqueued.status().code() == weft::Code::kNotFound);
    CHECK(enqueued.status().message() == Refusal(tenant));
  }
  CHECK(RowsOutsideDefault(server.db(), "catalog_entities") == 0);
  CHECK(RowsOutsideDefault(server.db(), "task_specs") == 0);
  CHECK(RowsOutsideDefault(server.db(), "clusters") == 0);
  CHECK_FALSE(fs::exists(tmp / "server" / "data" / "resources" / "nosuch"));
  CHECK_FALSE(fs::exists(tmp / "server" / "data" / "x"));
  json tenants = server.WeftJson({"tenant", "list"});
  REQUIRE(tenants["tenants"].size() == 1);
  CHECK(tenants["tenants"][0]["name"] == "default");

  // The default tenant works with and without naming it, and a created tenant works at once.
  CHECK(server.Weft({"catalog", "import", kCatalog.string()}).exit_code == 0);
  const std::size_t providers = static_cast<std::size_t>(
      std::distance(fs::directory_iterator(kCatalog / "providers"), fs::directory_iterator()));
  CHECK(server.WeftJson({"--tenant", "default", "provider", "list"})["entities"].size() == providers);
  REQUIRE(server.Weft({"tenant", "create", "nosuch"}).exit_code == 0);
  r = server.Weft({"--tenant", "nosuch", "catalog", "import", kCatalog.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(server.WeftJson({"--tenant", "nosuch", "provider", "list"})["entities"].size() == providers);
  // Deleted, it is unknown again.
  REQUIRE(server.Weft({"tenant", "delete", "nosuch"}).exit_code == 0);
  r = server.Weft({"--tenant", "nosuch", "provider", "list"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
}

#ifdef WEFT_TEST_LUA
namespace {

using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::WaitFor;

// An automator of type gx-auto that says whose code ran.
std::string GxAuto(const std::string& who) {
  return "return {\n"
         "  type = \"gx-auto\", kind = \"automator\", version = \"1\",\n"
         "  actions = { install = function(task) task:set_result(\"ran\", \"" + who + "\") end },\n"
         "}\n";
}

// Uploads a Lua plugin into a tenant and makes it active.
void UploadLua(Weftd& server, const fs::path& dir, const std::string& tenant, const std::string& name,
               const std::string& text) {
  const fs::path file = dir / (tenant + "-" + name);
  weft::testing::WriteFile(file, text);
  for (std::vector<std::string> args : {std::vector<std::string>{"resource", "upload", "lua-plugin", name, file.string()},
                                        std::vector<std::string>{"resource", "stage", "lua-plugin", name, "1"},
                                        std::vector<std::string>{"resource", "sync"}}) {
    args.insert(args.begin(), {"--tenant", tenant});
    RunResult r = server.Weft(args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
}

// A client of the api endpoint acting in one tenant.
class TenantClient {
 public:
  TenantClient(Weftd& server, const std::string& tenant)
      : api_(ctx_, weft::client::Options{server.endpoints()["api"], 3000, tenant, {}}) {}

  std::int64_t Enqueue(const std::string& plugin) {
    auto enqueued = api_.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", plugin},
                                                                         {"action", "INSTALL"},
                                                                         {"max_attempts", 1}}})}});
    INFO(enqueued.status().ToString());
    REQUIRE(enqueued.ok());
    return (*enqueued)["task_ids"][0].get<std::int64_t>();
  }
  // `op` in the tenant, which must succeed.
  json Call(const std::string& op, const json& body) {
    auto r = api_.Call(op, body);
    INFO(op << ": " << r.status().ToString());
    REQUIRE(r.ok());
    return *r;
  }
  // The task's record once it ended.
  json WaitEnded(std::int64_t id) {
    json task;
    const bool ended = WaitFor(
        [&] {
          auto t = api_.Call("task.get", {{"task_id", id}});
          if (t.ok()) task = *t;
          return t.ok() && (task["state"] == "succeeded" || task["state"] == "failed");
        },
        90s);
    INFO(task.dump());
    REQUIRE(ended);
    return task;
  }

 private:
  zmq::context_t ctx_{1};
  weft::client::Client api_;
};

// An automator of type acme-auto that serves INSTALL only (no BOOTSTRAP); `mark` tells versions apart.
std::string AcmeAuto(const std::string& mark) {
  return "return {\n"
         "  type = \"acme-auto\", kind = \"automator\", version = \"" + mark + "\",\n"
         "  actions = { install = function(task) task:set_result(\"acme_ran\", \"" + mark + "\") end },\n"
         "}\n";
}

// Runs `weft --tenant TENANT ARGS...`, which must succeed.
void WeftIn(Weftd& server, const std::string& tenant, std::vector<std::string> args) {
  args.insert(args.begin(), {"--tenant", tenant});
  RunResult r = server.Weft(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

// The hosts that `tenant`'s `weft plugin list` shows running `type` (empty: none).
json PluginHosts(Weftd& server, const std::string& tenant, const std::string& type) {
  const json plugins = server.WeftJson({"--tenant", tenant, "plugin", "list"})["plugins"];
  for (const json& p : plugins)
    if (p.value("type", "") == type) return p["hosts"];
  return json::array();
}

// `weft catalog check -o json` in a tenant: the plugin types it reports no live host runs.
std::set<std::string> Unrunnable(Weftd& server, const std::string& tenant) {
  RunResult r = server.Weft({"--tenant", tenant, "-o", "json", "catalog", "check"});
  INFO(r.out << r.err);
  json reply = json::parse(r.out, nullptr, false);
  REQUIRE(reply.is_object());
  std::set<std::string> out;
  for (const json& u : reply["unrunnable"]) out.insert(u["type"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("tenants: a tenant's Lua plugin runs only that tenant's tasks, even when another tenant declares its type",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  for (const char* tenant : {"acme", "globex"}) REQUIRE(server.Weft({"tenant", "create", tenant}).exit_code == 0);
  // One host for every tenant (no pinning): it follows weftd's worker split.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {weft::testing::BuildPath("plugins/automators")}, 4,
            "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));

  // globex runs gx-auto; acme uploads a plugin declaring the same type.
  UploadLua(server, tmp.path(), "globex", "gx-auto.lua", GxAuto("globex"));
  UploadLua(server, tmp.path(), "acme", "gx-auto.lua", GxAuto("acme"));
  // Both tenants have work waiting, so weftd's split gives the host to both.
  TenantClient globex_api(server, "globex"), acme_api(server, "acme");
  const std::int64_t globex_task = globex_api.Enqueue("gx-auto");
  const std::int64_t acme_task = acme_api.Enqueue("gx-auto");
  json globex = globex_api.WaitEnded(globex_task);
  json acme = acme_api.WaitEnded(acme_task);
  INFO(host.Log());
  CHECK(globex["state"] == "succeeded");
  CHECK(globex["result"]["ran"] == "globex");
  CHECK(acme["state"] == "succeeded");
  CHECK(acme["result"]["ran"] == "acme");
  // Both are installed side by side, each under its tenant's name.
  CHECK(weft::testing::ReadFile(host.dir() / "state" / "plugins" / "globex@gx-auto.lua") == GxAuto("globex"));
  CHECK(weft::testing::ReadFile(host.dir() / "state" / "plugins" / "acme@gx-auto.lua") == GxAuto("acme"));

  // The default tenant has no gx-auto: none of the other tenants' runs its tasks, and
  // catalog.check and plugin.list say so, while globex's own check finds it.
  const fs::path service = tmp / "gx.json";
  weft::testing::WriteFile(service, R"({"name":"gx","dependencies":{},)"
                                    R"("provisioner":{"actions":{"install":{"type":"gx-auto","fields":{}}}}})");
  for (const char* tenant : {"default", "globex"})
    REQUIRE(server.Weft({"--tenant", tenant, "service", "put", service.string()}).exit_code == 0);
  CHECK(Unrunnable(server, "default") == std::set<std::string>{"gx-auto"});
  CHECK(Unrunnable(server, "globex").empty());
  json plugins = server.WeftJson({"plugin", "list"});
  for (const json& p : plugins["plugins"]) CHECK(p["type"] != "gx-auto");
  plugins = server.WeftJson({"--tenant", "globex", "plugin", "list", "--type", "gx-auto"});
  REQUIRE(plugins["plugins"].size() == 1);
  CHECK(plugins["plugins"][0]["hosts"] == json::array({"h1"}));
}

TEST_CASE("tenants: a tenant's Lua plugin the host cannot load is shown refused with the reason, to that tenant",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  for (const char* tenant : {"acme", "globex"}) REQUIRE(server.Weft({"tenant", "create", tenant}).exit_code == 0);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {weft::testing::BuildPath("plugins/automators")}, 2,
            "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));

  // A syntax error, and a file whose declared type is not the name it was uploaded under:
  // weftd takes both (it does not run Lua), the host refuses both.
  UploadLua(server, tmp.path(), "acme", "gx-broken.lua", "return { type = \n");
  UploadLua(server, tmp.path(), "acme", "gx-named.lua", GxAuto("acme"));
  // acme has work waiting, so the host syncs acme's Lua plugins.
  TenantClient acme_api(server, "acme");
  const std::int64_t waiting = acme_api.Enqueue("gx-broken");
  json refused;
  const bool shown = WaitFor(
      [&] {
        refused = server.WeftJson({"--tenant", "acme", "plugin", "list"})["refused"];
        return refused.is_array() && refused.size() == 2;
      },
      60s);
  INFO(refused.dump(1) << "\n" << host.Log());
  REQUIRE(shown);
  std::map<std::string, json> by_type;
  for (const json& r : refused) by_type[r.value("type", "")] = r;
  REQUIRE(by_type.count("gx-broken"));
  REQUIRE(by_type.count("gx-named"));
  for (const auto& [type, r] : by_type) {
    CHECK(r["host_id"] == "h1");
    CHECK(r["tenant"] == "acme");
    CHECK_THAT(r["file"].get<std::string>(), Catch::EndsWith("acme@" + type + ".lua"));
  }
  CHECK_THAT(by_type["gx-broken"]["reason"].get<std::string>(), Catch::Contains("cannot load the Lua plugin"));
  CHECK_THAT(by_type["gx-named"]["reason"].get<std::string>(),
             Catch::Contains("declares type 'gx-auto', but tenant 'acme' uploaded it as gx-named.lua"));
  // Neither is a plugin anyone can use.
  const json usable = server.WeftJson({"--tenant", "acme", "plugin", "list"})["plugins"];
  for (const json& p : usable) CHECK(p["type"].get<std::string>().rfind("gx-", 0) == std::string::npos);

  // What the operator reads: weft plugin list and weft host show, in the tenant.
  RunResult list = server.Weft({"--tenant", "acme", "plugin", "list"});
  INFO(list.out << list.err);
  CHECK(list.exit_code == 0);
  CHECK_THAT(list.out, Catch::Contains("acme@gx-broken.lua (tenant acme, type gx-broken) on host h1: cannot load "
                                       "the Lua plugin"));
  CHECK_THAT(list.out, Catch::Contains("REFUSED "));
  RunResult show = server.Weft({"--tenant", "acme", "host", "show", "h1"});
  INFO(show.out << show.err);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains("refused plugin files (2):"));
  CHECK_THAT(show.out, Catch::Contains("acme@gx-named.lua (tenant acme, type gx-named): declares type 'gx-auto'"));
  // Another tenant sees none of acme's refusals.
  CHECK(server.WeftJson({"--tenant", "globex", "plugin", "list"})["refused"].empty());
  CHECK(server.WeftJson({"--tenant", "globex", "host", "show", "h1"})["refused"].empty());
  (void)waiting;
}

TEST_CASE("tenants: a Lua plugin upload is refused when its type is a host-wide plugin or its name is not its type",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  REQUIRE(server.Weft({"tenant", "create", "acme"}).exit_code == 0);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {weft::testing::BuildPath("plugins/automators")}, 2,
            "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));

  const fs::path file = tmp / "takeover.lua";
  weft::testing::WriteFile(file, "return { type = \"fake-automator\", kind = \"automator\",\n"
                                 "  actions = { install = function(task) end } }\n");
  RunResult r = server.Weft({"--tenant", "acme", "resource", "upload", "lua-plugin", "fake-automator.lua", file.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("plugin type 'fake-automator' is a host-wide plugin of host 'h1'"));
  CHECK_THAT(r.err, Catch::Contains("a tenant's Lua plugin needs a type of its own"));
  r = server.Weft({"--tenant", "acme", "resource", "upload", "lua-plugin", "Takeover.lua", file.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is named after the plugin type the file declares"));
  CHECK(server.WeftJson({"--tenant", "acme", "resource", "list"})["resources"].empty());

  // A type of its own is fine, and runs although acme is the only tenant with work
  // (weftd's split then leaves every slot to any tenant, and names no tenant).
  UploadLua(server, tmp.path(), "acme", "gx-auto.lua", GxAuto("acme"));
  TenantClient acme(server, "acme");
  json task = acme.WaitEnded(acme.Enqueue("gx-auto"));
  INFO(host.Log());
  CHECK(task["state"] == "succeeded");
  CHECK(task["result"]["ran"] == "acme");
}

TEST_CASE("tenants: a synced Lua plugin of a tenant with no work is installed on the host and shown to the tenant",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  REQUIRE(server.Weft({"tenant", "create", "acme"}).exit_code == 0);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {weft::testing::BuildPath("plugins/automators")}, 2,
            "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));

  // acme has nothing queued, ever: upload, stage, sync, as a plugin author does first.
  UploadLua(server, tmp.path(), "acme", "acme-auto.lua", AcmeAuto("1"));
  const bool shown = WaitFor([&] { return PluginHosts(server, "acme", "acme-auto") == json::array({"h1"}); }, 60s);
  INFO(host.Log());
  REQUIRE(shown);
  CHECK(weft::testing::ReadFile(host.dir() / "state" / "plugins" / "acme@acme-auto.lua") == AcmeAuto("1"));
  CHECK(server.WeftJson({"--tenant", "acme", "plugin", "list"})["refused"].empty());
  // A service of acme's that uses it is runnable, as catalog check says.
  const fs::path service = tmp / "acme-svc.json";
  weft::testing::WriteFile(service, R"({"name":"acme-svc","dependencies":{},)"
                                    R"("provisioner":{"actions":{"install":{"type":"acme-auto","fields":{}}}}})");
  WeftIn(server, "acme", {"service", "put", service.string()});
  CHECK(Unrunnable(server, "acme").empty());
}

TEST_CASE("tenants: a tenant's active Lua plugin stays installed across a weft-host restart",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  REQUIRE(server.Weft({"tenant", "create", "acme"}).exit_code == 0);
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {weft::testing::BuildPath("plugins/automators")}, 2,
            "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  // acme has work waiting (of a type no host runs, so it stays queued): the host
  // syncs acme's plugins whichever way it learns of acme.
  TenantClient acme_api(server, "acme");
  acme_api.Enqueue("acme-nothing");
  UploadLua(server, tmp.path(), "acme", "acme-auto.lua", AcmeAuto("1"));
  const fs::path installed = host.dir() / "state" / "plugins" / "acme@acme-auto.lua";
  REQUIRE(WaitFor([&] { return PluginHosts(server, "acme", "acme-auto") == json::array({"h1"}); }, 60s));
  REQUIRE(weft::testing::ReadFile(installed) == AcmeAuto("1"));

  // The host starts again (its log starts over). Its first resource round runs
  // before weftd has told it which tenants there are.
  REQUIRE(host.Stop() == 0);
  host.Start();
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  // A second version, installed by a later round of the new process: every round
  // before it has run, including the first.
  const fs::path v2 = tmp / "acme-auto-v2.lua";
  weft::testing::WriteFile(v2, AcmeAuto("2"));
  WeftIn(server, "acme", {"resource", "upload", "lua-plugin", "acme-auto.lua", v2.string()});
  WeftIn(server, "acme", {"resource", "stage", "lua-plugin", "acme-auto.lua", "2"});
  WeftIn(server, "acme", {"resource", "sync"});
  const bool replaced = WaitFor(
      [&] { return host.Log().find("installed Lua plugin lua-plugin/acme-auto.lua version 2") != std::string::npos; },
      60s);
  const std::string log = host.Log();
  INFO(log);
  REQUIRE(replaced);
  // Version 1 was active all along: nothing was removed, and nothing said it had no active version.
  CHECK(log.find("removed Lua plugin") == std::string::npos);
  CHECK(log.find("no active version") == std::string::npos);
  CHECK(weft::testing::ReadFile(installed) == AcmeAuto("2"));
}

TEST_CASE("tenants: a create planned before any host loaded its automator succeeds when that automator has no "
          "BOOTSTRAP",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(TenantsServer(tmp / "server"));
  REQUIRE(server.Weft({"tenant", "create", "acme"}).exit_code == 0);
  // weft-host's own plugin directories: the fake provider creates the node.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, 2, "resource_sync_ms = 200\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  // acme's catalog: one service, installed by acme's own Lua automator.
  weft::testing::CatalogDir catalog(tmp / "catalog");
  catalog.Put("services", {{"name", "acme-svc"},
                           {"dependencies", json::object()},
                           {"provisioner", {{"actions", {{"install", {{"type", "acme-auto"}, {"fields", json::object()}}}}}}}});
  catalog.DeriveTemplate("acme-t", {{"compatibility", {{"services", {"acme-svc"}}}},
                                    {"constraints", {{"layout", nullptr}, {"services", nullptr},
                                                     {"size", {{"min", 1}, {"max", 1}}}}},
                                    {"defaults", {{"services", {"acme-svc"}}, {"config", nullptr}}},
                                    {"links", nullptr}});
  WeftIn(server, "acme", {"catalog", "import", catalog.path().string()});
  const fs::path file = tmp / "acme-auto.lua";
  weft::testing::WriteFile(file, AcmeAuto("1"));
  WeftIn(server, "acme", {"resource", "upload", "lua-plugin", "acme-auto.lua", file.string()});
  WeftIn(server, "acme", {"resource", "stage", "lua-plugin", "acme-auto.lua", "1"});

  // No host has loaded acme-auto yet (it is not even synced): the plan cannot know
  // that it has no BOOTSTRAP, and gives it the node's.
  TenantClient acme_api(server, "acme");
  const json plan = acme_api.Call("cluster.create", {{"name", "c1"}, {"template", "acme-t"}, {"size", 1},
                                                     {"dry_run", true}});
  bool bootstrap_planned = false;
  for (const json& t : plan["tasks"])
    if (t["action"] == "BOOTSTRAP" && t["plugin"] == "acme-auto") bootstrap_planned = true;
  INFO(plan.dump(1));
  REQUIRE(bootstrap_planned);
  const json created = acme_api.Call("cluster.create", {{"name", "c1"}, {"template", "acme-t"}, {"size", 1}});
  const std::string job_id = created["job"]["id"];
  // Now the sync: the host loads acme-auto, and the job's BOOTSTRAP reaches it.
  WeftIn(server, "acme", {"resource", "sync"});
  json job;
  const bool ended = WaitFor(
      [&] {
        job = acme_api.Call("job.get", {{"job", job_id}, {"details", true}})["job"];
        const std::string status = job.value("status", "");
        return status != "running" && status != "failing";
      },
      120s);
  INFO(job.dump(1) << "\n" << host.Log());
  REQUIRE(ended);
  CHECK(job["status"] == "succeeded");
  // The BOOTSTRAP succeeded without calling the plugin, and said why.
  const std::string log = host.Log();
  CHECK(log.find("plugin 'acme-auto' does not declare BOOTSTRAP: nothing to prepare on the node") !=
        std::string::npos);
  CHECK(log.find("does not implement action BOOTSTRAP") == std::string::npos);
}
#endif
