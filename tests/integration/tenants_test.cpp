// Tenants end to end: a tenant must exist before anything acts in it, and what
// one tenant uploads never runs another tenant's tasks. Real weftd, weft-host
// and weft processes on loopback ports (security off: every api caller is
// superadmin, which is the case the tenant check must hold for).
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "host_harness.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::integration::Server;
using weft::testing::BuildPath;
using weft::testing::RunResult;

const fs::path kCatalog = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";

RunResult Weft(Server& server, std::vector<std::string> args) {
  args.insert(args.begin(), {"--server", server.endpoints()["api"].get<std::string>(), "--timeout", "5000"});
  return weft::testing::Run(BuildPath("bin/weft"), args);
}

json WeftJson(Server& server, std::vector<std::string> args) {
  args.insert(args.begin(), {"-o", "json"});
  RunResult r = Weft(server, args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

// Rows of the store (read-only, beside the running weftd) that belong to a tenant other than `default`.
int RowsOutsideDefault(const fs::path& db_file, const std::string& table) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  const std::string query = "SELECT COUNT(*) FROM " + table + " WHERE tenant <> 'default'";
  REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

std::string Refusal(const std::string& tenant) {
  return "tenant '" + tenant + "' does not exist (weft tenant list shows the tenants)";
}

}  // namespace

TEST_CASE("tenants: an unknown tenant is refused by every op with a sentence, and nothing is written",
          "[integration][tenant]") {
  weft::testing::TempDir tmp("weft-it");
  Server server(tmp / "server");

  // A misspelt --tenant: the CLI says so instead of filling a phantom tenant.
  RunResult r = Weft(server, {"--tenant", "nosuch", "catalog", "import", kCatalog.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
  r = Weft(server, {"--tenant", "nosuch", "cluster", "create", "c1", "--template", "web-fake", "--size", "1"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
  r = Weft(server, {"--tenant", "nosuch", "provider", "list"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));

  // The superadmin cannot write into a tenant that does not exist, whatever the name looks like.
  const fs::path provider = kCatalog / "providers" / "fake.json";
  const fs::path script = tmp / "a.sh";
  weft::testing::WriteFile(script, "echo a\n");
  zmq::context_t ctx(1);
  for (const std::string tenant : {"nosuch", "a b", "../../x"}) {
    INFO("tenant " << tenant);
    r = Weft(server, {"--tenant", tenant, "provider", "put", provider.string()});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(Refusal(tenant)));
    r = Weft(server, {"--tenant", tenant, "resource", "upload", "shell", "a.sh", script.string()});
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
  CHECK(RowsOutsideDefault(server.db(), "tasks") == 0);
  CHECK(RowsOutsideDefault(server.db(), "clusters") == 0);
  CHECK_FALSE(fs::exists(tmp / "server" / "data" / "resources" / "nosuch"));
  CHECK_FALSE(fs::exists(tmp / "server" / "data" / "x"));
  json tenants = WeftJson(server, {"tenant", "list"});
  REQUIRE(tenants["tenants"].size() == 1);
  CHECK(tenants["tenants"][0]["name"] == "default");

  // The default tenant works with and without naming it, and a created tenant works at once.
  CHECK(Weft(server, {"catalog", "import", kCatalog.string()}).exit_code == 0);
  CHECK(WeftJson(server, {"--tenant", "default", "provider", "list"})["entities"].size() == 2);
  REQUIRE(Weft(server, {"tenant", "create", "nosuch"}).exit_code == 0);
  r = Weft(server, {"--tenant", "nosuch", "catalog", "import", kCatalog.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(WeftJson(server, {"--tenant", "nosuch", "provider", "list"})["entities"].size() == 2);
  // Deleted, it is unknown again.
  REQUIRE(Weft(server, {"tenant", "delete", "nosuch"}).exit_code == 0);
  r = Weft(server, {"--tenant", "nosuch", "provider", "list"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(Refusal("nosuch")));
}

#ifdef WEFT_TEST_LUA
namespace {

using weft::integration::Host;
using weft::testing::WaitFor;

// An automator of type gx-auto that says whose code ran.
std::string GxAuto(const std::string& who) {
  return "return {\n"
         "  type = \"gx-auto\", kind = \"automator\", version = \"1\",\n"
         "  actions = { install = function(task) task:set_result(\"ran\", \"" + who + "\") end },\n"
         "}\n";
}

// Uploads a Lua plugin into a tenant and makes it active.
void UploadLua(Server& server, const fs::path& dir, const std::string& tenant, const std::string& name,
               const std::string& text) {
  const fs::path file = dir / (tenant + "-" + name);
  weft::testing::WriteFile(file, text);
  for (std::vector<std::string> args : {std::vector<std::string>{"resource", "upload", "lua-plugin", name, file.string()},
                                        std::vector<std::string>{"resource", "stage", "lua-plugin", name, "1"},
                                        std::vector<std::string>{"resource", "sync"}}) {
    args.insert(args.begin(), {"--tenant", tenant});
    RunResult r = Weft(server, args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
}

// A client of the api endpoint acting in one tenant.
class TenantClient {
 public:
  TenantClient(Server& server, const std::string& tenant)
      : api_(ctx_, weft::client::Options{server.endpoints()["api"], 3000, tenant, {}}) {}

  std::int64_t Enqueue(const std::string& plugin) {
    auto enqueued = api_.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", plugin},
                                                                         {"action", "INSTALL"},
                                                                         {"max_attempts", 1}}})}});
    INFO(enqueued.status().ToString());
    REQUIRE(enqueued.ok());
    return (*enqueued)["task_ids"][0].get<std::int64_t>();
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

// `weft catalog check -o json` in a tenant: the plugin types it reports no live host runs.
std::set<std::string> Unrunnable(Server& server, const std::string& tenant) {
  RunResult r = Weft(server, {"--tenant", tenant, "-o", "json", "catalog", "check"});
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
  Server server(tmp / "server");
  for (const char* tenant : {"acme", "globex"}) REQUIRE(Weft(server, {"tenant", "create", tenant}).exit_code == 0);
  // One host for every tenant (no pinning): it follows weftd's worker split.
  Host host(tmp / "host", "h1", server.provisioner(), {BuildPath("plugins/automators")}, 4,
            "state_dir = \"" + (tmp / "host" / "state").string() + "\"\nresource_sync_ms = 200\n");
  REQUIRE(WaitFor([&] { return weft::integration::HostLive(server, "h1"); }, 30s));

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
  CHECK(weft::testing::ReadFile(tmp / "host" / "state" / "plugins" / "globex@gx-auto.lua") == GxAuto("globex"));
  CHECK(weft::testing::ReadFile(tmp / "host" / "state" / "plugins" / "acme@gx-auto.lua") == GxAuto("acme"));

  // The default tenant has no gx-auto: none of the other tenants' runs its tasks, and
  // catalog.check and plugin.list say so, while globex's own check finds it.
  const fs::path service = tmp / "gx.json";
  weft::testing::WriteFile(service, R"({"name":"gx","dependencies":{},)"
                                    R"("provisioner":{"actions":{"install":{"type":"gx-auto","fields":{}}}}})");
  for (const char* tenant : {"default", "globex"})
    REQUIRE(Weft(server, {"--tenant", tenant, "service", "put", service.string()}).exit_code == 0);
  CHECK(Unrunnable(server, "default") == std::set<std::string>{"gx-auto"});
  CHECK(Unrunnable(server, "globex").empty());
  json plugins = WeftJson(server, {"plugin", "list"});
  for (const json& p : plugins["plugins"]) CHECK(p["type"] != "gx-auto");
  plugins = WeftJson(server, {"--tenant", "globex", "plugin", "list", "--type", "gx-auto"});
  REQUIRE(plugins["plugins"].size() == 1);
  CHECK(plugins["plugins"][0]["hosts"] == json::array({"h1"}));
}

TEST_CASE("tenants: a Lua plugin upload is refused when its type is a host-wide plugin or its name is not its type",
          "[integration][tenant][lua]") {
  weft::testing::TempDir tmp("weft-it");
  Server server(tmp / "server");
  REQUIRE(Weft(server, {"tenant", "create", "acme"}).exit_code == 0);
  Host host(tmp / "host", "h1", server.provisioner(), {BuildPath("plugins/automators")}, 2,
            "state_dir = \"" + (tmp / "host" / "state").string() + "\"\nresource_sync_ms = 200\n");
  REQUIRE(WaitFor([&] { return weft::integration::HostLive(server, "h1"); }, 30s));

  const fs::path file = tmp / "takeover.lua";
  weft::testing::WriteFile(file, "return { type = \"fake-automator\", kind = \"automator\",\n"
                                 "  actions = { install = function(task) end } }\n");
  RunResult r = Weft(server, {"--tenant", "acme", "resource", "upload", "lua-plugin", "fake-automator.lua", file.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("plugin type 'fake-automator' is a host-wide plugin of host 'h1'"));
  CHECK_THAT(r.err, Catch::Contains("a tenant's Lua plugin needs a type of its own"));
  r = Weft(server, {"--tenant", "acme", "resource", "upload", "lua-plugin", "Takeover.lua", file.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is named after the plugin type the file declares"));
  CHECK(WeftJson(server, {"--tenant", "acme", "resource", "list"})["resources"].empty());

  // A type of its own is fine, and runs although acme is the only tenant with work
  // (weftd's split then leaves every slot to any tenant, and names no tenant).
  UploadLua(server, tmp.path(), "acme", "gx-auto.lua", GxAuto("acme"));
  TenantClient acme(server, "acme");
  json task = acme.WaitEnded(acme.Enqueue("gx-auto"));
  INFO(host.Log());
  CHECK(task["state"] == "succeeded");
  CHECK(task["result"]["ran"] == "acme");
}
#endif
