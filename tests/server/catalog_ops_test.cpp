// The catalog ops on a Router over a real Store, with an injected clock:
// roles, tenants, error codes and host liveness in catalog.check.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "weft/server/catalog/catalog_ops.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using namespace weft::api;
using weft::catalog::RegisterCatalogOps;
using weft::Code;

namespace {

struct Fixture {
  weft::testing::TempDir dir{"weft-catalog-ops"};
  std::unique_ptr<weft::store::Store> store;
  weft::ManualClock clock;
  weft::server::Config config;
  Router router;

  Fixture() {
    auto s = weft::testing::OpenStore(dir / "weft.db");
    REQUIRE(s.ok());
    store = std::move(s.value());
    RegisterCatalogOps(router, *store, clock, config);
  }

  Response Call(const std::string& op, json body, Role role = Role::kSuperadmin, const std::string& tenant = "default",
                Endpoint endpoint = Endpoint::kApi) {
    weft::wire::Request req;
    req.id = "1";
    req.op = op;
    req.body = std::move(body);
    ::weft::api::Call c;
    c.endpoint = endpoint;
    c.principal = Principal{tenant, role};
    c.request = &req;
    return router.Route(c);
  }

  void MustPut(const std::string& kind, json entity, const std::string& tenant = "default") {
    Response r = Call(kind + ".put", std::move(entity), Role::kAdmin, tenant);
    INFO(r.status.ToString());
    REQUIRE(r.status.ok());
  }

  // A small catalog: one provider, hardware and image type, two services, a template.
  void PutSmallCatalog() {
    MustPut("provider", {{"name", "p"}, {"providertype", "fake-provider"}, {"provisioner", json::object()}});
    MustPut("hardwaretype", {{"name", "hw"}, {"providermap", {{"p", {{"flavor", "f"}}}}}});
    MustPut("imagetype", {{"name", "img"}, {"providermap", {{"p", {{"image", "i"}, {"sshuser", "root"}}}}}});
    json action = {{"type", "fake-automator"}, {"fields", json::object()}};
    MustPut("service", {{"name", "base"}, {"provisioner", {{"actions", {{"install", action}}}}}});
    MustPut("service", {{"name", "db"},
                        {"dependencies", {{"install", {{"requires", {"base"}}}}}},
                        {"provisioner", {{"actions", {{"install", action}, {"start", action}}}}}});
    MustPut("clustertemplate",
            {{"name", "t"},
             {"compatibility", {{"hardwaretypes", {"hw"}}, {"imagetypes", {"img"}}, {"services", {"base", "db"}}}},
             {"defaults", {{"services", {"base", "db"}}, {"provider", "p"}}},
             {"constraints", {{"services", {{"db", {{"quantities", {{"max", 1}}}}}}}}}});
  }
};

}  // namespace

TEST_CASE("catalog ops: users read, only admins put and delete, hosts get nothing", "[api][catalog]") {
  Fixture f;
  json p = {{"name", "p"}, {"providertype", "fake-provider"}};
  CHECK(f.Call("provider.put", p, Role::kUser).status.code() == Code::kDenied);
  CHECK(f.Call("provider.put", p, Role::kHost, "default", Endpoint::kProvisioner).status.code() == Code::kDenied);
  CHECK(f.Call("provider.put", p, Role::kAdmin).status.ok());
  CHECK(f.Call("provider.list", json::object(), Role::kUser).status.ok());
  CHECK(f.Call("provider.get", {{"name", "p"}}, Role::kUser).status.ok());
  CHECK(f.Call("catalog.check", json::object(), Role::kUser).status.ok());
  CHECK(f.Call("provider.delete", {{"name", "p"}}, Role::kUser).status.code() == Code::kDenied);
  CHECK(f.Call("provider.delete", {{"name", "p"}}, Role::kAdmin).status.ok());
  CHECK(f.Call("provider.list", json::object(), Role::kHost, "default", Endpoint::kProvisioner).status.code() ==
        Code::kDenied);
}

TEST_CASE("catalog ops: put validates with the library's messages and keeps unknown fields as warnings",
          "[api][catalog]") {
  Fixture f;
  Response bad = f.Call("clustertemplate.put",
                        {{"name", "t"},
                         {"compatibility", {{"services", {"a"}}}},
                         {"constraints", {{"size", {{"min", 5}, {"max", 2}}}}}});
  REQUIRE(bad.status.code() == Code::kInvalid);
  CHECK_THAT(bad.status.message(), Catch::Contains("clustertemplate 't'") && Catch::Contains("constraints.size"));
  CHECK(bad.details["kind"] == "clustertemplate");
  CHECK(f.Call("clustertemplate.get", {{"name", "t"}}).status.code() == Code::kNotFound);  // nothing stored

  Response ok = f.Call("provider.put", {{"name", "p"}, {"providertype", "x"}, {"colour", "blue"}});
  REQUIRE(ok.status.ok());
  CHECK(ok.body["version"] == 1);
  REQUIRE(ok.body["warnings"].size() == 1);
  CHECK_THAT(ok.body["warnings"][0].get<std::string>(), Catch::Contains("colour"));
  Response got = f.Call("provider.get", {{"name", "p"}});
  REQUIRE(got.status.ok());
  CHECK(got.body["entity"]["colour"] == "blue");

  CHECK(f.Call("provider.get", {{"name", "p"}, {"version", 0}}).status.code() == Code::kInvalid);
  CHECK(f.Call("provider.get", json::object()).status.code() == Code::kInvalid);
}

TEST_CASE("catalog ops: the principal's tenant scopes every op", "[api][catalog]") {
  Fixture f;
  f.MustPut("provider", {{"name", "p"}, {"providertype", "acme-type"}}, "acme");
  CHECK(f.Call("provider.get", {{"name", "p"}}, Role::kUser, "acme").status.ok());
  CHECK(f.Call("provider.get", {{"name", "p"}}, Role::kUser, "globex").status.code() == Code::kNotFound);
  CHECK(f.Call("provider.list", json::object(), Role::kUser, "globex").body["entities"].empty());
  CHECK(f.Call("provider.delete", {{"name", "p"}}, Role::kAdmin, "globex").status.code() == Code::kNotFound);
  Response check = f.Call("catalog.check", json::object(), Role::kUser, "globex");
  REQUIRE(check.status.ok());
  CHECK(check.body["problems"] == 0);  // acme's provider type is not globex's problem
}

TEST_CASE("catalog ops: catalog.check counts only live hosts, by the injected clock", "[api][catalog]") {
  Fixture f;
  f.PutSmallCatalog();
  weft::store::HostRecord h;
  h.id = "h1";
  h.plugins_json = R"([{"type":"fake-provider","kind":"provider"},{"type":"fake-automator","kind":"automator"}])";
  h.registered_at_ms = h.last_seen_ms = f.clock.NowMs();
  REQUIRE(f.store->UpsertHost(h).ok());
  Response live = f.Call("catalog.check", json::object());
  REQUIRE(live.status.ok());
  CHECK(live.body["problems"] == 0);

  f.clock.AdvanceMs(f.config.hosts.silent_after_ms + 1);
  Response silent = f.Call("catalog.check", json::object());
  REQUIRE(silent.status.ok());
  CHECK(silent.body["unrunnable"].size() == 2);
  CHECK_THAT(silent.body["unrunnable"][0]["message"].get<std::string>(), Catch::Contains("not live"));
}

TEST_CASE("catalog ops: cluster.plan solves and plans, and says CONFLICT with the solver's sentence",
          "[api][catalog]") {
  Fixture f;
  f.PutSmallCatalog();
  Response plan = f.Call("cluster.plan", {{"name", "c"}, {"template", "t"}, {"size", 3}}, Role::kUser);
  INFO(plan.status.ToString());
  REQUIRE(plan.status.ok());
  REQUIRE(plan.body["layout"]["nodes"].size() == 3);
  int db = 0;
  for (const json& n : plan.body["layout"]["nodes"]) db += n["services"].size() == 2 ? 1 : 0;
  CHECK(db == 1);
  // db's INSTALL waits for base's INSTALL on every node (install requires), through the planner.
  bool db_install_waits = false;
  for (const json& t : plan.body["tasks"])
    if (t["action"] == "INSTALL" && t["service"] == "db") db_install_waits = !t["after"].empty();
  CHECK(db_install_waits);
  CHECK_FALSE(plan.body["stages"].empty());

  // Every node must run a service, the only one is base, and base is at most 1.
  f.MustPut("clustertemplate",
            {{"name", "solo"},
             {"compatibility", {{"hardwaretypes", {"hw"}}, {"imagetypes", {"img"}}, {"services", {"base"}}}},
             {"defaults", {{"services", {"base"}}, {"provider", "p"}}},
             {"constraints", {{"services", {{"base", {{"quantities", {{"max", 1}}}}}}}}}});
  Response conflict = f.Call("cluster.plan", {{"name", "c"}, {"template", "solo"}, {"size", 3}});
  CHECK(conflict.status.code() == Code::kConflict);
  CHECK_THAT(conflict.status.message(), Catch::Contains("template 'solo'") && Catch::Contains("base"));
  CHECK(conflict.details["template"] == "solo");

  CHECK(f.Call("cluster.plan", {{"name", "c"}, {"template", "nope"}, {"size", 3}}).status.code() == Code::kNotFound);
  CHECK(f.Call("cluster.plan", {{"name", "c"}, {"template", "t"}, {"size", 0}}).status.code() == Code::kInvalid);
  CHECK(f.Call("cluster.plan", {{"name", "c"}, {"template", "t"}, {"size", 2}, {"config", {{"x", "%nope.macro%"}}}})
            .status.code() == Code::kInvalid);
}

TEST_CASE("catalog ops: cluster.plan names each task's plugin, and BOOTSTRAP only goes to an automator that declares it",
          "[api][catalog]") {
  Fixture f;
  f.PutSmallCatalog();
  auto plan_with = [&](const char* automator_actions) {
    weft::store::HostRecord h;
    h.id = "h1";
    h.plugins_json = std::string(R"([{"type":"fake-provider","kind":"provider","actions":["CREATE","CONFIRM","DELETE"]},)") +
                     R"({"type":"fake-automator","kind":"automator","actions":)" + automator_actions + "}]";
    h.registered_at_ms = h.last_seen_ms = f.clock.NowMs();
    REQUIRE(f.store->UpsertHost(h).ok());
    Response plan = f.Call("cluster.plan", {{"name", "c"}, {"template", "t"}, {"size", 2}}, Role::kUser);
    INFO(plan.status.ToString());
    REQUIRE(plan.status.ok());
    return plan.body;
  };

  // The automator declares only INSTALL and START (as hello.lua): no node gets a BOOTSTRAP.
  json plan = plan_with(R"(["INSTALL","START"])");
  REQUIRE(plan["layout"]["nodes"].size() == 2);
  const std::string n1 = plan["layout"]["nodes"][0]["hostname"].get<std::string>();
  const std::string n2 = plan["layout"]["nodes"][1]["hostname"].get<std::string>();
  std::map<std::string, std::string> plugin;  // task id -> plugin
  for (const json& t : plan["tasks"]) plugin[t["id"].get<std::string>()] = t["plugin"].get<std::string>();
  CHECK(plugin.count(n1 + "/BOOTSTRAP") == 0);
  CHECK(plugin.count(n2 + "/BOOTSTRAP") == 0);
  CHECK(plugin[n1 + "/CREATE"] == "fake-provider");
  CHECK(plugin[n1 + "/CONFIRM"] == "fake-provider");
  CHECK(plugin[n1 + "/INSTALL/base"] == "fake-automator");
  for (const json& t : plan["tasks"])
    if (t["id"] == n1 + "/INSTALL/base") CHECK(t["after"] == json::array({n1 + "/CONFIRM"}));
  CHECK(plan["warnings"].empty());

  // Declared: every node gets its BOOTSTRAP, run by that automator.
  plan = plan_with(R"(["BOOTSTRAP","INSTALL","START"])");
  plugin.clear();
  for (const json& t : plan["tasks"]) plugin[t["id"].get<std::string>()] = t["plugin"].get<std::string>();
  CHECK(plugin[n1 + "/BOOTSTRAP"] == "fake-automator");
  CHECK(plugin[n2 + "/BOOTSTRAP"] == "fake-automator");

  // A service action the plugin does not declare is a task that would fail: the plan warns.
  plan = plan_with(R"(["INSTALL"])");
  REQUIRE(plan["warnings"].size() == 1);
  CHECK_THAT(plan["warnings"][0].get<std::string>(),
             Catch::Contains("'fake-automator' does not declare action START") && Catch::Contains("service 'db'"));
}

TEST_CASE("catalog ops: catalog.check reports a service action's unknown fields, as a provider's", "[api][catalog]") {
  Fixture f;
  weft::store::HostRecord h;
  h.id = "h1";
  h.plugins_json =
      R"([{"type":"greeter","kind":"automator","actions":["INSTALL","START"],"fields":[{"name":"n","type":"integer"}]},)"
      R"({"type":"trial-auto","kind":"automator","fields":[{"name":"mode","type":"string"}]},)"
      R"({"type":"quiet","kind":"automator","fields":[]}])";
  h.registered_at_ms = h.last_seen_ms = f.clock.NowMs();
  REQUIRE(f.store->UpsertHost(h).ok());
  f.MustPut("service", {{"name", "s"},
                        {"provisioner",
                         {{"actions",
                           {{"install", {{"type", "greeter"}, {"fields", {{"n", "three"}, {"greting", "typo"}}}}},
                            {"start", {{"type", "trial-auto"}, {"fields", {{"modee", "crash"}}}}},
                            {"stop", {{"type", "quiet"}, {"fields", {{"anything", 1}}}}}}}}}});
  Response check = f.Call("catalog.check", json::object(), Role::kUser);
  REQUIRE(check.status.ok());
  std::set<std::string> found;
  for (const json& p : check.body["fields"])
    found.insert(p["action"].get<std::string>() + ":" + p["field"].get<std::string>() + ":" +
                 p["problem"].get<std::string>());
  // quiet declares no field at all: what it is given is not judged.
  CHECK(found == std::set<std::string>{"install:n:type", "install:greting:unknown", "start:modee:unknown"});
  for (const json& p : check.body["fields"])
    if (p["field"] == "greting")
      CHECK_THAT(p["message"].get<std::string>(),
                 Catch::Contains("service 's' (action install): provisioner.actions.install.fields.greting is not a "
                                 "field of plugin 'greeter' (it knows: n)"));
}

TEST_CASE("catalog ops: catalog.check reports a provider naming an automator and a service action naming a provider",
          "[api][catalog]") {
  Fixture f;
  weft::store::HostRecord h;
  h.id = "h1";
  h.plugins_json = R"([{"type":"cloud","kind":"provider","actions":["CREATE","CONFIRM","DELETE"],"fields":[]},)"
                   R"({"type":"shell","kind":"automator","actions":["INSTALL"],"fields":[]}])";
  h.registered_at_ms = h.last_seen_ms = f.clock.NowMs();
  REQUIRE(f.store->UpsertHost(h).ok());
  f.MustPut("provider", {{"name", "wrong"}, {"providertype", "shell"}, {"provisioner", json::object()}});
  f.MustPut("provider", {{"name", "right"}, {"providertype", "cloud"}, {"provisioner", json::object()}});
  f.MustPut("service", {{"name", "s"},
                        {"provisioner",
                         {{"actions",
                           {{"install", {{"type", "cloud"}, {"fields", json::object()}}},
                            {"start", {{"type", "shell"}, {"fields", json::object()}}}}}}}});
  Response check = f.Call("catalog.check", json::object(), Role::kUser);
  REQUIRE(check.status.ok());
  std::vector<std::string> messages;
  for (const json& p : check.body["fields"]) {
    CHECK(p["problem"] == "kind");
    messages.push_back(p["message"].get<std::string>());
  }
  CHECK(messages ==
        std::vector<std::string>{
            "provider 'wrong': providertype 'shell' is an automator plugin, not a provider; name a provider "
            "plugin (see `weft plugin list`)",
            "service 's' (action install): provisioner.actions.install.type 'cloud' is a provider plugin, "
            "not an automator; name an automator plugin (see `weft plugin list`)"});
  CHECK(check.body["problems"] == 2);
}
