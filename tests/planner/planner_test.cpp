#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "weft/planner/planner.hpp"

using namespace weft::planner;
using nlohmann::json;

namespace {

constexpr std::initializer_list<Action> kAll = {Action::kInstall, Action::kConfigure, Action::kInitialize,
                                                Action::kStart,   Action::kStop,      Action::kRemove};

ServiceSpec Svc(std::string name, std::vector<std::string> install_req = {}, std::vector<std::string> runtime_req = {},
                std::vector<Action> actions = kAll) {
  ServiceSpec s;
  s.name = std::move(name);
  s.install_requires = std::move(install_req);
  s.runtime_requires = std::move(runtime_req);
  s.actions = std::move(actions);
  return s;
}

// id -> set of predecessor ids, from the plan's JSON.
std::map<std::string, std::set<std::string>> Edges(const Plan& plan) {
  std::map<std::string, std::set<std::string>> out;
  const json j = plan.ToJson();
  for (const auto& t : j["tasks"]) {
    auto& preds = out[t["id"].get<std::string>()];
    for (const auto& p : t["after"]) preds.insert(p.get<std::string>());
  }
  return out;
}

// True when `from` must finish before `to` (a path of edges), computed here
// independently of the planner.
bool Precedes(const Plan& plan, const std::string& from, const std::string& to) {
  auto edges = Edges(plan);
  std::set<std::string> seen;
  std::vector<std::string> todo{to};
  while (!todo.empty()) {
    std::string at = todo.back();
    todo.pop_back();
    for (const auto& p : edges[at]) {
      if (p == from) return true;
      if (seen.insert(p).second) todo.push_back(p);
    }
  }
  return false;
}

Plan MustPlan(const PlanRequest& r) {
  auto plan = MakePlan(r);
  INFO(plan.status().ToString());
  REQUIRE(plan.ok());
  return std::move(plan).value();
}

}  // namespace

TEST_CASE("planner: create of one node gives the exact per-node chain", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"n1", {"web"}}};
  r.services = {Svc("web")};
  Plan plan = MustPlan(r);
  std::map<std::string, std::set<std::string>> expected = {
      {"n1/CREATE", {}},
      {"n1/CONFIRM", {"n1/CREATE"}},
      {"n1/BOOTSTRAP", {"n1/CONFIRM"}},
      {"n1/INSTALL/web", {"n1/BOOTSTRAP"}},
      {"n1/CONFIGURE/web", {"n1/INSTALL/web"}},
      {"n1/INITIALIZE/web", {"n1/CONFIGURE/web"}},
      {"n1/START/web", {"n1/INITIALIZE/web"}},
  };
  CHECK(Edges(plan) == expected);
  json j = plan.ToJson();
  REQUIRE(j["stages"].size() == 7);
  CHECK(j["stages"][0] == json::array({"n1/CREATE"}));
  CHECK(j["stages"][6] == json::array({"n1/START/web"}));
}

TEST_CASE("planner: install and runtime dependencies order tasks across nodes", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"db", {"mysql"}}, {"app", {"php"}}};
  r.services = {Svc("mysql"), Svc("php", {"mysql"}, {"mysql"})};
  Plan plan = MustPlan(r);
  auto e = Edges(plan);
  CHECK(e["app/INSTALL/php"] == std::set<std::string>{"app/BOOTSTRAP", "db/INSTALL/mysql"});
  CHECK(e["app/INITIALIZE/php"] == std::set<std::string>{"app/CONFIGURE/php", "db/START/mysql"});
  CHECK(e["app/START/php"] == std::set<std::string>{"app/INITIALIZE/php", "db/START/mysql"});
  // No stage barrier: php's CONFIGURE does not wait for anything on the db node but its install.
  CHECK_FALSE(Precedes(plan, "db/START/mysql", "app/CONFIGURE/php"));
}

TEST_CASE("planner: a name resolves through provides", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  ServiceSpec maria = Svc("mariadb");
  maria.provides = {"sql"};
  r.after = {{"a", {"mariadb"}}, {"b", {"app"}}};
  r.services = {maria, Svc("app", {}, {"sql"})};
  Plan plan = MustPlan(r);
  CHECK(Edges(plan)["b/START/app"].count("a/START/mariadb") == 1);
}

TEST_CASE("planner: a dependency lacking the action is walked through to its own dependencies", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  // lib has no START; app's runtime dependency on lib becomes one on base.
  r.after = {{"n1", {"base"}}, {"n2", {"lib"}}, {"n3", {"app"}}};
  r.services = {Svc("base"), Svc("lib", {}, {"base"}, {Action::kInstall, Action::kConfigure}),
                Svc("app", {}, {"lib"})};
  Plan plan = MustPlan(r);
  auto e = Edges(plan);
  CHECK(e.count("n2/START/lib") == 0);  // tasks a service does not define are dropped
  CHECK(e["n3/START/app"].count("n1/START/base") == 1);
  CHECK(e["n3/INITIALIZE/app"].count("n1/START/base") == 1);
}

TEST_CASE("planner: stop runs in reverse dependency order and pulls in dependents", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kStop;
  r.before = r.after = {{"db", {"mysql"}}, {"app", {"php"}}, {"lb", {"haproxy"}}};
  r.services = {Svc("mysql"), Svc("php", {}, {"mysql"}), Svc("haproxy", {}, {"php"})};
  r.only_services = {"php"};
  Plan plan = MustPlan(r);
  auto e = Edges(plan);
  CHECK(e.size() == 2);  // php and haproxy, not mysql
  CHECK(e["app/STOP/php"] == std::set<std::string>{"lb/STOP/haproxy"});
}

TEST_CASE("planner: start pulls in runtime dependencies", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kStart;
  r.before = r.after = {{"db", {"mysql"}}, {"app", {"php"}}, {"lb", {"haproxy"}}};
  r.services = {Svc("mysql"), Svc("php", {}, {"mysql"}), Svc("haproxy", {}, {"php"})};
  r.only_services = {"php"};
  auto e = Edges(MustPlan(r));
  CHECK(e.size() == 2);  // php and mysql, not haproxy
  CHECK(e["app/START/php"] == std::set<std::string>{"db/START/mysql"});
}

TEST_CASE("planner: many-to-many dependencies go through one JOIN, not n*m edges", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  for (int i = 0; i < 50; ++i) r.after.push_back({"n" + std::to_string(i), {"base", "app"}});
  r.services = {Svc("base"), Svc("app", {"base"})};
  Plan plan = MustPlan(r);
  auto e = Edges(plan);
  REQUIRE(e.count("join/INSTALL/base") == 1);
  CHECK(e["join/INSTALL/base"].size() == 50);
  CHECK(e["n7/INSTALL/app"] == std::set<std::string>{"n7/BOOTSTRAP", "join/INSTALL/base"});
  CHECK(Precedes(plan, "n3/INSTALL/base", "n40/INSTALL/app"));
  // JOINs are not part of any stage.
  const json j = plan.ToJson();
  for (const auto& stage : j["stages"])
    for (const auto& id : stage) CHECK(id.get<std::string>().rfind("join/", 0) != 0);
}

TEST_CASE("planner: scale grows new nodes, reconfigures kept ones after the new nodes confirm", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kScale;
  r.before = {{"n1", {"web"}}};
  r.after = {{"n1", {"web"}}, {"n2", {"web"}}};
  r.services = {Svc("web")};
  r.restart = true;
  auto e = Edges(MustPlan(r));
  CHECK(e.count("n2/CREATE") == 1);
  CHECK(e.count("n1/CREATE") == 0);
  CHECK(e["n1/CONFIGURE/web"] == std::set<std::string>{"n2/CONFIRM"});
  CHECK(e["n1/STOP/web"] == std::set<std::string>{"n1/CONFIGURE/web"});
  CHECK(e["n1/START/web"] == std::set<std::string>{"n1/STOP/web"});
}

TEST_CASE("planner: when macros name addresses, every BOOTSTRAP and service task waits for every CONFIRM",
          "[planner]") {
  CHECK(NamesAddresses(json{{"backends", "%join(map(ip.bind_v4.service.web,'$:80'),',')%"}}));
  CHECK(NamesAddresses(json::array({json{{"a", "%ip.access_v4.self%"}}})));
  CHECK_FALSE(NamesAddresses(json{{"a", "%host.service.web%"}, {"ip.x", "100% of it"}}));

  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"n1", {"web"}}, {"n2", {"web"}}};
  r.services = {Svc("web")};
  CHECK(Edges(MustPlan(r)).count("join/CONFIRM/nodes") == 0);
  r.wait_for_addresses = true;
  auto e = Edges(MustPlan(r));
  CHECK(e["join/CONFIRM/nodes"] == std::set<std::string>{"n1/CONFIRM", "n2/CONFIRM"});
  CHECK(e["n1/BOOTSTRAP"] == std::set<std::string>{"n1/CONFIRM", "join/CONFIRM/nodes"});
  CHECK(e["n2/INSTALL/web"] == std::set<std::string>{"n2/BOOTSTRAP"});  // after its BOOTSTRAP, so after the JOIN

  // Growing by one node: the kept node's service tasks wait for the new node's CONFIRM.
  PlanRequest grow;
  grow.operation = Operation::kScale;
  grow.before = {{"n1", {"web"}}};
  grow.after = {{"n1", {"web"}}, {"n2", {"web"}}};
  grow.services = {Svc("web")};
  grow.restart = true;
  grow.wait_for_addresses = true;
  auto g = Edges(MustPlan(grow));
  CHECK(g.count("join/CONFIRM/nodes") == 0);
  CHECK(g["n1/CONFIGURE/web"] == std::set<std::string>{"n2/CONFIRM"});
  CHECK(g["n1/STOP/web"] == std::set<std::string>{"n1/CONFIGURE/web", "n2/CONFIRM"});
  CHECK(g["n2/BOOTSTRAP"] == std::set<std::string>{"n2/CONFIRM"});
}

TEST_CASE("planner: scale down stops the removed node's services before deleting it", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kScale;
  r.before = {{"n1", {"web"}}, {"n2", {"web"}}};
  r.after = {{"n1", {"web"}}};
  r.services = {Svc("web")};
  auto e = Edges(MustPlan(r));
  CHECK(e["n2/DELETE"] == std::set<std::string>{"n2/STOP/web"});
  CHECK(e.count("n1/STOP/web") == 0);
  CHECK(e.count("n1/CONFIGURE/web") == 1);
}

TEST_CASE("planner: add-services installs only the new ones, remove-services stops then removes", "[planner]") {
  PlanRequest add;
  add.operation = Operation::kAddServices;
  add.before = {{"n1", {"web"}}};
  add.after = {{"n1", {"web", "cache"}}};
  add.services = {Svc("web"), Svc("cache")};
  auto e = Edges(MustPlan(add));
  CHECK(e.count("n1/INSTALL/cache") == 1);
  CHECK(e.count("n1/INSTALL/web") == 0);
  CHECK(e.count("n1/CONFIGURE/web") == 1);

  PlanRequest rm;
  rm.operation = Operation::kRemoveServices;
  rm.before = add.after;
  rm.after = add.before;
  rm.services = add.services;
  auto f = Edges(MustPlan(rm));
  CHECK(f["n1/REMOVE/cache"] == std::set<std::string>{"n1/STOP/cache"});
  CHECK(f.count("n1/STOP/web") == 0);
}

TEST_CASE("planner: delete deletes every node", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kDelete;
  r.before = {{"n1", {"web"}}, {"n2", {}}};
  r.services = {Svc("web")};
  auto e = Edges(MustPlan(r));
  CHECK(e == std::map<std::string, std::set<std::string>>{{"n1/DELETE", {}}, {"n2/DELETE", {}}});
}

TEST_CASE("planner: a dependency cycle is an error naming the services", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"n1", {"a"}}, {"n2", {"b"}}};
  r.services = {Svc("a", {"b"}), Svc("b", {"a"})};
  auto plan = MakePlan(r);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find("cycle") != std::string::npos);
  CHECK(plan.status().message().find("'a'") != std::string::npos);
  CHECK(plan.status().message().find("'b'") != std::string::npos);
}

TEST_CASE("planner: a cycle's message names each step once, a join as the step it joins", "[planner]") {
  const std::vector<std::vector<NodeSpec>> layouts = {
      {{"n1", {"a"}}, {"n2", {"b"}}}, {{"n1", {"a", "b"}}, {"n2", {"a", "b"}}}, {{"n1", {"a", "b"}}}};
  for (const auto& layout : layouts) {
    PlanRequest r;
    r.operation = Operation::kCreate;
    r.after = layout;
    r.services = {Svc("a", {"b"}), Svc("b", {"a"})};
    auto plan = MakePlan(r);
    REQUIRE_FALSE(plan.ok());
    const std::string message = plan.status().message();
    INFO(message);
    const std::size_t open = message.find("cycle (");
    REQUIRE(open != std::string::npos);
    const std::size_t close = message.find(')', open);
    REQUIRE(close != std::string::npos);
    const std::string steps = message.substr(open + 7, close - open - 7);
    std::vector<std::string> named;
    for (std::size_t at = 0;;) {
      const std::size_t next = steps.find(" ← ", at);
      named.push_back(steps.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + std::string(" ← ").size();
    }
    CHECK(std::set<std::string>(named.begin(), named.end()).size() == named.size());
    CHECK(std::set<std::string>(named.begin(), named.end()) ==
          std::set<std::string>{"INSTALL of 'a'", "INSTALL of 'b'"});
  }
}

TEST_CASE("planner: unknown services and operations are refused with a sentence", "[planner]") {
  PlanRequest r;
  r.after = {{"n1", {"ghost"}}};
  auto plan = MakePlan(r);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message() == "node 'n1' runs service 'ghost', which the plan request does not describe");
  CHECK_FALSE(ParseOperation("explode").ok());
  CHECK(ParseAction("INSTALL").value() == Action::kInstall);
}

TEST_CASE("planner: plans are deterministic", "[planner]") {
  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"a", {"x", "y"}}, {"b", {"y"}}};
  r.services = {Svc("x"), Svc("y", {"x"}, {"x"})};
  CHECK(MustPlan(r).ToJson() == MustPlan(r).ToJson());
}

// Property: on random acyclic service graphs and layouts, every dependency
// rule holds in the plan, checked by reachability over the emitted edges.
TEST_CASE("planner: random plans respect every dependency edge", "[planner][property][slow]") {
  std::mt19937 rng(20261122);
  for (int round = 0; round < 60; ++round) {
    int n_services = 2 + static_cast<int>(rng() % 6);
    std::vector<ServiceSpec> services;
    for (int s = 0; s < n_services; ++s) {
      ServiceSpec spec = Svc("s" + std::to_string(s));
      spec.actions.clear();
      for (Action a : kAll)
        if (rng() % 4 != 0) spec.actions.push_back(a);
      // Dependencies only on lower-numbered services: acyclic by construction.
      for (int d = 0; d < s; ++d) {
        if (rng() % 3 == 0) spec.install_requires.push_back("s" + std::to_string(d));
        if (rng() % 3 == 0) spec.runtime_requires.push_back("s" + std::to_string(d));
      }
      services.push_back(spec);
    }
    PlanRequest r;
    r.operation = Operation::kCreate;
    r.services = services;
    int n_nodes = 1 + static_cast<int>(rng() % 5);
    for (int n = 0; n < n_nodes; ++n) {
      NodeSpec node{"n" + std::to_string(n), {}};
      for (int s = 0; s < n_services; ++s)
        if (rng() % 2) node.services.push_back("s" + std::to_string(s));
      r.after.push_back(node);
    }
    Plan plan = MustPlan(r);
    auto defines = [&](int s, Action a) {
      const auto& acts = services[s].actions;
      return std::find(acts.begin(), acts.end(), a) != acts.end();
    };
    std::map<std::string, std::vector<std::string>> hosts;  // service -> nodes
    for (const auto& node : r.after)
      for (const auto& s : node.services) hosts[s].push_back(node.id);
    // Direct edges where both sides define the action (the walk-through case is covered above).
    for (int s = 0; s < n_services; ++s) {
      for (const auto& dep : services[s].install_requires) {
        int d = std::stoi(dep.substr(1));
        if (!defines(s, Action::kInstall) || !defines(d, Action::kInstall)) continue;
        for (const auto& dn : hosts[dep])
          for (const auto& sn : hosts["s" + std::to_string(s)])
            CHECK(Precedes(plan, dn + "/INSTALL/" + dep, sn + "/INSTALL/s" + std::to_string(s)));
      }
      for (const auto& dep : services[s].runtime_requires) {
        int d = std::stoi(dep.substr(1));
        if (!defines(s, Action::kStart) || !defines(d, Action::kStart)) continue;
        for (const auto& dn : hosts[dep])
          for (const auto& sn : hosts["s" + std::to_string(s)])
            CHECK(Precedes(plan, dn + "/START/" + dep, sn + "/START/s" + std::to_string(s)));
      }
    }
    // Every task comes after its predecessors in the emitted order, and each node's chain holds.
    json j = plan.ToJson();
    std::set<std::string> emitted;
    for (const auto& t : j["tasks"]) {
      for (const auto& p : t["after"]) CHECK(emitted.count(p.get<std::string>()) == 1);
      emitted.insert(t["id"].get<std::string>());
      if (t["action"] == "INSTALL") CHECK(Precedes(plan, t["node"].get<std::string>() + "/BOOTSTRAP", t["id"]));
    }
  }
}

TEST_CASE("planner: an undo reconfigures only what the undone job reconfigured, and restarts nothing", "[planner]") {
  // Undoing a grow: n3 goes, n1 and n2 stay; only n1's web was reconfigured by the grow.
  PlanRequest r;
  r.operation = Operation::kScale;
  r.before = {{"n1", {"web", "db"}}, {"n2", {"web"}}, {"n3", {"web"}}};
  r.after = {{"n1", {"web", "db"}}, {"n2", {"web"}}};
  r.services = {Svc("web"), Svc("db")};
  r.reconfigure_only = std::set<std::string>{"n1/web"};
  auto e = Edges(MustPlan(r));
  CHECK(e.count("n1/CONFIGURE/web") == 1);
  CHECK(e.count("n1/CONFIGURE/db") == 0);
  CHECK(e.count("n2/CONFIGURE/web") == 0);
  for (const auto& [id, preds] : e) {
    INFO(id);
    CHECK(id.find("/START/") == std::string::npos);
    if (id.find("/STOP/") != std::string::npos) CHECK(id.rfind("n3/", 0) == 0);
  }
  CHECK(e.count("n3/DELETE") == 1);
  // Nothing reconfigured by the undone job: nothing to do on the kept nodes.
  r.reconfigure_only = std::set<std::string>{};
  for (const auto& [id, preds] : Edges(MustPlan(r))) CHECK(id.rfind("n3/", 0) == 0);
}

TEST_CASE("planner: a changed service that stays is installed again in any operation (going back from an upgrade)",
          "[planner]") {
  // A rollback of an upgrade that changed web and added cache: cache goes, web gets its old version back.
  PlanRequest r;
  r.operation = Operation::kRemoveServices;
  r.before = {{"n1", {"web", "cache"}}};
  r.after = {{"n1", {"web"}}};
  r.services = {Svc("web"), Svc("cache")};
  r.changed_services = {"web"};
  r.restart = true;
  auto e = Edges(MustPlan(r));
  CHECK(e.count("n1/INSTALL/web") == 1);
  CHECK(e["n1/CONFIGURE/web"] == std::set<std::string>{"n1/INSTALL/web"});
  CHECK(e["n1/STOP/web"] == std::set<std::string>{"n1/CONFIGURE/web"});
  CHECK(e["n1/START/web"] == std::set<std::string>{"n1/STOP/web"});
  CHECK(e.count("n1/REMOVE/cache") == 1);
  CHECK(e.count("n1/INSTALL/cache") == 0);
  // Same nodes and services (a plain reconfigure back): only the changed one is installed.
  r.operation = Operation::kReconfigure;
  r.before = {{"n1", {"web", "cache"}}};
  r.after = r.before;
  e = Edges(MustPlan(r));
  CHECK(e.count("n1/INSTALL/web") == 1);
  CHECK(e.count("n1/INSTALL/cache") == 0);
  CHECK(e.count("n1/START/cache") == 1);  // a rollback restarts what it reconfigures
}

TEST_CASE("planner: a node without an automator that runs BOOTSTRAP gets none", "[planner]") {
  // Which automator runs a node's BOOTSTRAP: the first that declares it; else
  // the first no host registered (it may); else none.
  auto bit = [](Action a) { return 1u << (static_cast<int>(a) - 1); };  // weft_action's bits
  const DeclaredActions declared = {{"hello", bit(Action::kInstall) | bit(Action::kStart)},
                                    {"shell", bit(Action::kBootstrap) | bit(Action::kInstall)}};
  CHECK(BootstrapPlugin({"hello", "shell"}, &declared) == "shell");
  CHECK(BootstrapPlugin({"hello"}, &declared).empty());
  CHECK(BootstrapPlugin({"hello", "unregistered", "shell"}, &declared) == "shell");
  CHECK(BootstrapPlugin({"hello", "unregistered"}, &declared) == "unregistered");
  CHECK(BootstrapPlugin({"hello"}, nullptr) == "hello");  // nothing known: as before
  CHECK(BootstrapPlugin({}, nullptr).empty());

  PlanRequest r;
  r.operation = Operation::kCreate;
  r.after = {{"n1", {"web"}}, {"n2", {"web"}}};
  r.services = {Svc("web")};
  r.without_bootstrap = {"n2"};
  auto e = Edges(MustPlan(r));
  CHECK(e.count("n1/BOOTSTRAP") == 1);
  CHECK(e.count("n2/BOOTSTRAP") == 0);
  CHECK(e["n2/INSTALL/web"] == std::set<std::string>{"n2/CONFIRM"});

  // Addresses named: the node's service tasks wait for every CONFIRM themselves.
  r.wait_for_addresses = true;
  e = Edges(MustPlan(r));
  CHECK(e["n2/INSTALL/web"] == std::set<std::string>{"n2/CONFIRM", "join/CONFIRM/nodes"});
  CHECK(e["n1/INSTALL/web"] == std::set<std::string>{"n1/BOOTSTRAP"});
}
