#include <catch2/catch.hpp>

#include <filesystem>

#include "layout_checker.hpp"
#include "weft/catalog/directory.hpp"
#include "weft/solver/solver.hpp"

using nlohmann::json;
using namespace weft;
using namespace weft::solver;
using catalog::Catalog;
using catalog::ClusterTemplate;
using catalog::Kind;
using catalog::Layout;
using catalog::LayoutFromJson;
using catalog::LayoutNode;
using catalog::LayoutSummary;
using catalog::LayoutToJson;

namespace {

// A catalog with provider "fake", hardware "small"/"large" and image "deb", and
// services a..h (plus whatever the test adds).
Catalog Base() {
  Catalog c;
  auto put = [&](Kind k, const json& doc) { REQUIRE(c.PutJson(k, doc).ok()); };
  put(Kind::kProvider, {{"name", "fake"}, {"providertype", "fake-provider"}});
  put(Kind::kProvider, {{"name", "other"}, {"providertype", "fake-provider"}});
  put(Kind::kHardwareType, {{"name", "small"}, {"providermap", {{"fake", {{"flavor", "f-small"}}}}}});
  put(Kind::kHardwareType, {{"name", "large"}, {"providermap", {{"fake", {{"flavor", "f-large"}}},
                                                                {"other", {{"flavor", "o-large"}}}}}});
  put(Kind::kImageType, {{"name", "deb"}, {"providermap", {{"fake", {{"image", "debian"}, {"sshuser", "root"}}},
                                                           {"other", {{"image", "o-deb"}}}}}});
  put(Kind::kImageType, {{"name", "alma"}, {"providermap", {{"fake", {{"image", "alma9"}}}}}});
  for (std::string s : {"a", "b", "c", "d", "e", "f", "g", "h"}) put(Kind::kService, {{"name", s}});
  return c;
}

// A template over services a..h with the given defaults.services and constraints.
ClusterTemplate Tmpl(std::vector<std::string> services, json constraints = json::object()) {
  json doc = {{"name", "t"},
              {"compatibility", {{"hardwaretypes", {"small", "large"}},
                                 {"imagetypes", {"deb", "alma"}},
                                 {"services", {"a", "b", "c", "d", "e", "f", "g", "h"}}}},
              {"defaults", {{"services", services}, {"provider", "fake"}, {"hardwaretype", "small"}, {"imagetype", "deb"}}},
              {"constraints", constraints}};
  auto r = catalog::ParseClusterTemplate(doc);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r->entity;
}

SolveRequest Req(std::int64_t size, std::string name = "c") {
  SolveRequest r;
  r.cluster_name = std::move(name);
  r.size = size;
  return r;
}

Layout MustSolve(const Catalog& c, const ClusterTemplate& t, const SolveRequest& req) {
  auto r = Solve(c, t, req);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto bad = testing::LayoutViolations(c, t, req, *r);
  std::string all;
  for (const auto& v : bad) all += v + "\n";
  CHECK(all == "");
  return *r;
}

std::string Fails(const Catalog& c, const ClusterTemplate& t, const SolveRequest& req, Code code = Code::kConflict) {
  auto r = Solve(c, t, req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  // The brute force agrees that nothing exists (small cases only).
  if (code == Code::kConflict && req.existing.empty() && req.size <= 6) CHECK_FALSE(testing::BruteForceSolvable(c, t, req));
  return r.status().message();
}

std::int64_t CountWith(const Layout& l, const std::string& s) {
  std::int64_t n = 0;
  for (const auto& node : l.nodes)
    if (std::find(node.services.begin(), node.services.end(), s) != node.services.end()) ++n;
  return n;
}

bool Has(const LayoutNode& n, const std::string& s) {
  return std::find(n.services.begin(), n.services.end(), s) != n.services.end();
}

}  // namespace

TEST_CASE("solver: the web example gives one balancer with redis and nginx elsewhere", "[solver]") {
  auto imported = catalog::ImportDirectory(std::filesystem::path(WEFT_SOURCE_DIR) / "examples" / "catalog");
  REQUIRE(imported.ok());
  const Catalog& c = imported->catalog;
  for (std::string name : {"web", "web-fake"}) {
    const auto& t = *c.FindClusterTemplate(name);
    auto l = MustSolve(c, t, Req(5, "shop"));
    std::string p = name == "web" ? "" : "fake-";
    REQUIRE(l.nodes.size() == 5);
    CHECK(l.nodes[0].hostname == "shop-1.weft.test");
    CHECK(l.nodes[0].services == std::vector<std::string>{p + "base", p + "haproxy", p + "redis"});
    CHECK(l.nodes[0].hardwaretype == "medium");  // redis may only run on medium
    // web runs a monitoring collector beside each nginx (mustcoexist); web-fake has none.
    const std::vector<std::string> web_node = name == "web" ? std::vector<std::string>{"base", "monitoring", "nginx"}
                                                            : std::vector<std::string>{p + "base", p + "nginx"};
    for (std::size_t i = 1; i < 5; ++i) {
      CHECK(l.nodes[i].services == web_node);
      CHECK(l.nodes[i].hardwaretype == "small");  // the template default
      CHECK(l.nodes[i].imagetype == "debian12");
      CHECK(l.nodes[i].sshuser == "root");
    }
    CHECK(l.nodes[4].hostname == "shop-5.weft.test");
  }
  CHECK(LayoutSummary(MustSolve(c, *c.FindClusterTemplate("web"), Req(4))) ==
        std::vector<std::string>{"1 × medium debian12 [base, haproxy, redis]",
                                 "3 × small debian12 [base, monitoring, nginx]"});
  // Monitoring rides along with nginx (mustcoexist) and nowhere else.
  SolveRequest req = Req(4);
  req.overrides.services = {"base", "haproxy", "nginx", "redis", "monitoring"};
  auto l = MustSolve(c, *c.FindClusterTemplate("web"), req);
  CHECK(CountWith(l, "monitoring") == 3);
  for (const auto& n : l.nodes) CHECK(Has(n, "monitoring") == Has(n, "nginx"));
}

TEST_CASE("solver: unconstrained services go on every node", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a", "b", "c"}, {{"services", {{"c", {{"quantities", {{"max", 1}}}}}}}});
  auto l = MustSolve(c, t, Req(4));
  CHECK(CountWith(l, "a") == 4);
  CHECK(CountWith(l, "b") == 4);
  CHECK(CountWith(l, "c") == 1);
  CHECK(l.nodes[0].flavor == "f-small");
  CHECK(l.nodes[0].image == "debian");
}

TEST_CASE("solver: quantities min and max are met", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a", "b", "c"}, {{"services", {{"a", {{"quantities", {{"min", 2}, {"max", 2}}}}},
                                                {"b", {{"quantities", {{"min", 3}}}}},
                                                {"c", {{"quantities", {{"max", 1}}}}}}}});
  auto l = MustSolve(c, t, Req(5));
  CHECK(CountWith(l, "a") == 2);
  CHECK(CountWith(l, "b") >= 3);
  CHECK(CountWith(l, "c") == 1);
  std::string msg = Fails(c, t, Req(2));
  CHECK_THAT(msg, Catch::Contains("service 'b' needs at least 3 nodes (constraints.services.b.quantities.min), but "
                                  "the cluster has 2 nodes"));
}

TEST_CASE("solver: every node needs a service, so bounded services limit the size", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a", "b"}, {{"services", {{"a", {{"quantities", {{"max", 1}}}}}, {"b", {{"quantities", {{"max", 2}}}}}}}});
  MustSolve(c, t, Req(3));
  std::string msg = Fails(c, t, Req(4));
  CHECK_THAT(msg, Catch::Contains("size 4 needs a service on every node"));
  CHECK_THAT(msg, Catch::Contains("at most 3 nodes (a at most 1, b at most 2)"));
  // A mustcoexist group shares the bound of its tightest service.
  auto tied = Tmpl({"a", "b"}, {{"layout", {{"mustcoexist", json::array({json::array({"a", "b"})})}}},
                                {"services", {{"a", {{"quantities", {{"max", 1}}}}}}}});
  CHECK_THAT(Fails(c, tied, Req(3)),
             Catch::Contains("size 3 needs a service on every node, but every service has a quantities.max and together "
                             "they cover at most 1 node (a at most 1, with [a, b] (joined by mustcoexist [a, b]) on the "
                             "same nodes)"));
}

TEST_CASE("solver: cantcoexist forbids the whole set, not pairs", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"cantcoexist", json::array({json::array({"a", "b", "c"})})}}},
              {"services", {{"a", {{"quantities", {{"max", 1}}}}}, {"b", {{"quantities", {{"max", 1}}}}},
                            {"c", {{"quantities", {{"max", 1}}}}}}}};
  // Two nodes: pairs may share, the triple may not.
  auto l = MustSolve(c, Tmpl({"a", "b", "c"}, con), Req(2));
  for (const auto& n : l.nodes) CHECK_FALSE((Has(n, "a") && Has(n, "b") && Has(n, "c")));
  // One node cannot hold all three...
  std::string msg = Fails(c, Tmpl({"a", "b", "c"}, con), Req(1));
  CHECK_THAT(msg, Catch::Contains("cantcoexist [a, b, c]"));
  // ...but a pair of them is fine on one node.
  auto pair = MustSolve(c, Tmpl({"a", "b"}, con), Req(1));
  CHECK(pair.nodes[0].services == std::vector<std::string>{"a", "b"});
}

TEST_CASE("solver: cantcoexist pigeonhole names the sets and the numbers", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"cantcoexist", json::array({json::array({"a", "b"})})}}},
              {"services", {{"a", {{"quantities", {{"min", 3}}}}}, {"b", {{"quantities", {{"min", 2}}}}}}}};
  auto l = MustSolve(c, Tmpl({"a", "b"}, con), Req(5));
  CHECK(CountWith(l, "a") + CountWith(l, "b") == 5);
  std::string msg = Fails(c, Tmpl({"a", "b"}, con), Req(4));
  CHECK_THAT(msg, Catch::Contains("cantcoexist [a, b] keeps those services from sharing a node; they need 5 "
                                  "placements (a at least 3, b at least 2) but 4 nodes hold at most 4"));
}

TEST_CASE("solver: services kept apart pairwise need a node each", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"cantcoexist", json::array({json::array({"a", "b"}), json::array({"b", "c"}),
                                                       json::array({"a", "c"})})}}},
              {"services", {{"a", {{"quantities", {{"min", 2}}}}}, {"b", {{"quantities", {{"min", 1}}}}}}}};
  auto t = Tmpl({"a", "b", "c", "d"}, con);
  auto l = MustSolve(c, t, Req(4));
  for (const auto& n : l.nodes) CHECK(Has(n, "a") + Has(n, "b") + Has(n, "c") <= 1);
  CHECK_THAT(Fails(c, t, Req(3)), Catch::Contains("cantcoexist pairs keep every two of [a, b, c] off the same node, "
                                                  "so each of their nodes runs at most one of them; their minimums "
                                                  "need 4 nodes (a 2, b 1, c 1) but the size is 3"));
}

TEST_CASE("solver: mustcoexist keeps services together and only counts services present", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"mustcoexist", json::array({json::array({"a", "b"}), json::array({"b", "c"})})}}},
              {"services", {{"a", {{"quantities", {{"max", 1}}}}}, {"c", {{"quantities", {{"min", 2}}}}}}}};
  // b absent: a and c are not tied (not transitive through an absent service).
  auto l = MustSolve(c, Tmpl({"a", "c", "d"}, con), Req(3));
  CHECK(CountWith(l, "a") == 1);
  CHECK(CountWith(l, "c") >= 2);
  // b present: a, b, c share nodes, and a's max of 1 clashes with c's min of 2.
  std::string msg = Fails(c, Tmpl({"a", "b", "c", "d"}, con), Req(3));
  CHECK_THAT(msg, Catch::Contains("service 'a': at most 1 node (constraints.services.a.quantities.max), but "
                                  "mustcoexist puts it on every node of 'c', which needs at least 2"));
  CHECK_THAT(msg, Catch::Contains("[a, b, c] (joined by mustcoexist [a, b], [b, c])"));
  // Without the clash, every node with one of them has all three.
  json loose = {{"layout", con["layout"]}};
  auto l2 = MustSolve(c, Tmpl({"a", "b", "c", "d"}, loose), Req(3));
  for (const auto& n : l2.nodes) CHECK((Has(n, "a") == Has(n, "b") && Has(n, "b") == Has(n, "c")));
}

TEST_CASE("solver: mustcoexist against cantcoexist is reported", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"mustcoexist", json::array({json::array({"a", "b"})})},
                          {"cantcoexist", json::array({json::array({"a", "b"})})}}}};
  CHECK_THAT(Fails(c, Tmpl({"a", "b"}, con), Req(2)),
             Catch::Contains("cantcoexist [a, b] forbids these services on one node, but mustcoexist forces them"));
}

TEST_CASE("solver: per-service hardware and image restrictions pick the node types", "[solver]") {
  Catalog c = Base();
  json con = {{"services", {{"a", {{"hardwaretypes", {"large"}}, {"quantities", {{"max", 1}}}}},
                            {"b", {{"imagetypes", {"alma"}}, {"quantities", {{"max", 1}}}}}}}};
  auto l = MustSolve(c, Tmpl({"a", "b", "c"}, con), Req(3));
  for (const auto& n : l.nodes) {
    if (Has(n, "a")) CHECK(n.hardwaretype == "large");
    if (Has(n, "b")) CHECK(n.imagetype == "alma");
    if (!Has(n, "a")) CHECK(n.hardwaretype == "small");  // the template default
    if (!Has(n, "b")) CHECK(n.imagetype == "deb");       // the template default
  }
  // a restriction nobody can meet with this provider
  json bad = {{"services", {{"a", {{"hardwaretypes", {"large"}}}}}}};
  SolveRequest req = Req(2);
  req.overrides.hardwaretype = "small";
  CHECK_THAT(Fails(c, Tmpl({"a", "b"}, bad), req),
             Catch::Contains("service 'a' may only run on hardwaretypes [large] (constraints.services.a.hardwaretypes)"));
}

TEST_CASE("solver: compatibility needs a providermap entry for the provider", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a"});
  SolveRequest req = Req(2);
  req.overrides.provider = "other";  // only "large" and "deb" know it
  auto l = MustSolve(c, t, req);
  for (const auto& n : l.nodes) {
    CHECK(n.hardwaretype == "large");
    CHECK(n.flavor == "o-large");
    CHECK(n.image == "o-deb");
    CHECK(n.sshuser.empty());
  }
  req.overrides.hardwaretype = "small";
  CHECK_THAT(Fails(c, t, req, Code::kInvalid),
             Catch::Contains("hardwaretype 'small' has no providermap entry for provider 'other'"));
  req.overrides.hardwaretype = "huge";
  CHECK_THAT(Fails(c, t, req, Code::kInvalid), Catch::Contains("hardwaretype 'huge' is not in compatibility.hardwaretypes"));
  req.overrides.hardwaretype.reset();
  req.overrides.provider = "nosuch";
  CHECK_THAT(Fails(c, t, req, Code::kInvalid), Catch::Contains("provider 'nosuch' is not in the catalog"));
}

TEST_CASE("solver: overrides replace provider, hardware, image and services", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a"});
  SolveRequest req = Req(2);
  req.overrides.hardwaretype = "large";
  req.overrides.imagetype = "alma";
  req.overrides.services = {"b", "c", "b"};
  auto l = MustSolve(c, t, req);
  for (const auto& n : l.nodes) {
    CHECK(n.hardwaretype == "large");
    CHECK(n.imagetype == "alma");
    CHECK(n.services == std::vector<std::string>{"b", "c"});
  }
  req.overrides.services = {"a", "zzz"};
  CHECK_THAT(Fails(c, t, req, Code::kInvalid), Catch::Contains("service 'zzz' is not in compatibility.services"));
}

TEST_CASE("solver: requires are met directly or through provides, conflicts refuse", "[solver]") {
  Catalog c = Base();
  REQUIRE(c.PutJson(Kind::kService, {{"name", "a"}, {"dependencies", {{"runtime", {{"requires", {"db"}}}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "b"}, {"dependencies", {{"provides", {"db"}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "c"}, {"dependencies", {{"conflicts", {"db"}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "d"}, {"dependencies", {{"install", {{"requires", {"e"}}, {"uses", {"h"}}}}}}}).ok());
  MustSolve(c, Tmpl({"a", "b"}), Req(1));
  MustSolve(c, Tmpl({"d", "e"}), Req(1));  // uses only orders: h need not be there
  CHECK_THAT(Fails(c, Tmpl({"a"}), Req(1), Code::kInvalid),
             Catch::Contains("service 'a' runtime-requires 'db', but no service of the cluster [a] is or provides 'db'"));
  CHECK_THAT(Fails(c, Tmpl({"d"}), Req(1), Code::kInvalid), Catch::Contains("'d' install-requires 'e'"));
  CHECK_THAT(Fails(c, Tmpl({"a", "b", "c"}), Req(1), Code::kInvalid),
             Catch::Contains("service 'c' conflicts with 'db' (provided by 'b'), and both are in the cluster"));
}

TEST_CASE("solver: size outside constraints.size is refused", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a"}, {{"size", {{"min", 2}, {"max", 4}}}});
  MustSolve(c, t, Req(2));
  CHECK_THAT(Fails(c, t, Req(5), Code::kInvalid),
             Catch::Contains("size 5 is outside constraints.size (min 2, max 4)"));
  CHECK_THAT(Fails(c, t, Req(0), Code::kInvalid), Catch::Contains("size must be at least 1"));
}

TEST_CASE("solver: the same request gives the same layout, whatever the list order", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"mustcoexist", json::array({json::array({"a", "b"})})},
                          {"cantcoexist", json::array({json::array({"a", "c"}), json::array({"d", "e"})})}}},
              {"services", {{"c", {{"quantities", {{"min", 2}, {"max", 3}}}}}, {"d", {{"quantities", {{"max", 2}}}}},
                            {"a", {{"hardwaretypes", {"large"}}}}}}};
  auto t1 = Tmpl({"a", "b", "c", "d", "e", "f"}, con);
  auto l1 = MustSolve(c, t1, Req(7));
  CHECK(MustSolve(c, t1, Req(7)) == l1);
  auto t2 = t1;
  std::reverse(t2.defaults.services.begin(), t2.defaults.services.end());
  std::reverse(t2.compatibility.hardwaretypes.begin(), t2.compatibility.hardwaretypes.end());
  std::reverse(t2.constraints.cantcoexist.begin(), t2.constraints.cantcoexist.end());
  CHECK(MustSolve(c, t2, Req(7)) == l1);
  CHECK(LayoutFromJson(LayoutToJson(l1)).value() == l1);
}

TEST_CASE("solver: growing keeps the existing nodes and numbers the new ones after them", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"cantcoexist", json::array({json::array({"a", "b"})})}}},
              {"services", {{"a", {{"quantities", {{"min", 1}, {"max", 1}}}}}}}};
  auto t = Tmpl({"a", "b", "c"}, con);
  auto l3 = MustSolve(c, t, Req(3, "g"));
  SolveRequest grow = Req(6, "g");
  grow.existing = l3.nodes;
  auto l6 = MustSolve(c, t, grow);
  REQUIRE(l6.nodes.size() == 6);
  for (std::size_t i = 0; i < 3; ++i) CHECK(l6.nodes[i] == l3.nodes[i]);
  CHECK(l6.nodes[3].hostname == "g-4");
  CHECK(l6.nodes[5].hostname == "g-6");
  CHECK(CountWith(l6, "a") == 1);
  // Growth with existing nodes that already hold the only allowed 'a': new nodes get b.
  for (std::size_t i = 3; i < 6; ++i) CHECK(l6.nodes[i].services == std::vector<std::string>{"b", "c"});
}

TEST_CASE("solver: adding services places them on existing nodes when the constraints allow", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"mustcoexist", json::array({json::array({"b", "d"})})},
                          {"cantcoexist", json::array({json::array({"a", "e"})})}}},
              {"services", {{"a", {{"quantities", {{"max", 1}}}}}, {"e", {{"quantities", {{"max", 1}}}}}}}};
  auto t = Tmpl({"a", "b", "c"}, con);
  auto before = MustSolve(c, t, Req(3));
  SolveRequest add = Req(3);
  add.existing = before.nodes;
  add.overrides.services = {"a", "b", "c", "d", "e"};
  auto after = MustSolve(c, t, add);
  REQUIRE(after.nodes.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(after.nodes[i].hostname == before.nodes[i].hostname);
    CHECK(Has(after.nodes[i], "d") == Has(after.nodes[i], "b"));  // d follows b
    CHECK_FALSE((Has(after.nodes[i], "a") && Has(after.nodes[i], "e")));
  }
  CHECK(CountWith(after, "e") == 1);
}

TEST_CASE("solver: shrinking removes the highest-numbered nodes of a kind and keeps constraints", "[solver]") {
  Catalog c = Base();
  json con = {{"layout", {{"cantcoexist", json::array({json::array({"a", "b"})})}}},
              {"services", {{"a", {{"quantities", {{"min", 1}, {"max", 1}}}}}, {"b", {{"quantities", {{"min", 2}}}}}}}};
  auto t = Tmpl({"a", "b", "c"}, con);
  auto l6 = MustSolve(c, t, Req(6, "s"));
  SolveRequest shrink = Req(3, "s");
  shrink.existing = l6.nodes;
  auto l3 = MustSolve(c, t, shrink);
  REQUIRE(l3.nodes.size() == 3);
  CHECK(CountWith(l3, "a") == 1);
  CHECK(l3.nodes[0].hostname == "s-1");
  CHECK(l3.nodes[1].hostname == "s-2");
  CHECK(l3.nodes[2].hostname == "s-3");
  CHECK(MustSolve(c, t, shrink) == l3);
  // Below what the constraints need: a on 1 node and b on 2 that cannot share.
  shrink.size = 2;
  CHECK_THAT(Fails(c, t, shrink), Catch::Contains("cantcoexist [a, b]"));
}

TEST_CASE("solver: existing nodes that the request cannot keep are refused with a reason", "[solver]") {
  Catalog c = Base();
  auto t = Tmpl({"a", "b"}, {{"services", {{"a", {{"quantities", {{"max", 2}}}}}}}});
  auto l = MustSolve(c, t, Req(2, "e"));
  SolveRequest fewer = Req(2, "e");
  fewer.existing = l.nodes;
  fewer.overrides.services = {"a"};
  CHECK_THAT(Fails(c, t, fewer, Code::kInvalid),
             Catch::Contains("existing node 'e-1' runs 'b', which is not among the requested services [a]; removing "
                             "services from a cluster is not supported"));
  auto tighter = Tmpl({"a", "b"}, {{"services", {{"a", {{"quantities", {{"max", 1}}}}}}}});
  SolveRequest grow = Req(3, "e");
  grow.existing = l.nodes;
  CHECK_THAT(Fails(c, tighter, grow), Catch::Contains("service 'a' already runs on 2 existing nodes, more than its "
                                                      "quantities.max 1"));
  // A new service tied by mustcoexist to 'b' must fit the existing nodes' hardware.
  auto tied = Tmpl({"a", "b"}, {{"layout", {{"mustcoexist", json::array({json::array({"b", "d"})})}}},
                                {"services", {{"a", {{"quantities", {{"max", 2}}}}}, {"d", {{"hardwaretypes", {"large"}}}}}}});
  SolveRequest join = Req(2, "e");
  join.existing = l.nodes;
  join.overrides.services = {"a", "b", "d"};
  CHECK_THAT(Fails(c, tied, join), Catch::Contains("new service 'd' must join existing node 'e-1'"));
  // A new unconstrained service lands on the existing nodes too.
  SolveRequest add = Req(2, "e");
  add.existing = l.nodes;
  add.overrides.services = {"a", "b", "c"};
  auto added = MustSolve(c, t, add);
  CHECK(CountWith(added, "c") == 2);
}

TEST_CASE("solver: shrinking a large web cluster keeps the balancer and removes web servers", "[solver]") {
  auto imported = catalog::ImportDirectory(std::filesystem::path(WEFT_SOURCE_DIR) / "examples" / "catalog");
  REQUIRE(imported.ok());
  const Catalog& c = imported->catalog;
  const auto& t = *c.FindClusterTemplate("web");
  auto big = MustSolve(c, t, Req(20, "w"));
  SolveRequest shrink = Req(3, "w");
  shrink.existing = big.nodes;
  auto small = MustSolve(c, t, shrink);
  REQUIRE(small.nodes.size() == 3);
  CHECK(small.nodes[0] == big.nodes[0]);  // haproxy + redis
  CHECK(small.nodes[1].hostname == "w-2.weft.test");
  CHECK(small.nodes[2].hostname == "w-3.weft.test");
  // And back up: the new nodes continue the numbering after the kept ones.
  SolveRequest grow = Req(5, "w");
  grow.existing = small.nodes;
  auto again = MustSolve(c, t, grow);
  CHECK(again.nodes[4].hostname == "w-5.weft.test");
}

TEST_CASE("solver: a search that cannot finish within its bound says so", "[solver]") {
  Catalog c = Base();
  // Many cantcoexist pairs around a tight size: hard for a tiny step budget.
  json cc = json::array();
  std::vector<std::string> s = {"a", "b", "c", "d", "e", "f", "g", "h"};
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = i + 1; j < s.size(); ++j)
      if ((i + j) % 3 == 0) cc.push_back(json::array({s[i], s[j]}));
  json q = json::object();
  for (const auto& n : s) q[n] = {{"quantities", {{"min", 2}, {"max", 3}}}};
  auto t = Tmpl(s, {{"layout", {{"cantcoexist", cc}}}, {"services", q}});
  SolveOptions tiny;
  tiny.max_steps = 3;
  auto r = Solve(c, t, Req(6), tiny);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kTimeout);
  CHECK_THAT(r.status().message(), Catch::Contains("the solver stopped after"));
  CHECK_THAT(r.status().message(), Catch::Contains("raise the search bound"));

  // The time bound uses the injected clock: one that jumps 1 s per reading.
  class JumpingClock final : public Clock {
   public:
    std::int64_t NowMs() const override { return now_ += 1000; }
    mutable std::int64_t now_ = 0;
  } clock;
  SolveOptions timed;
  timed.clock = &clock;
  timed.max_time_ms = 1;
  timed.max_steps = INT64_MAX;
  auto late = Solve(c, t, Req(6), timed);
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == Code::kTimeout);
  // Without bounds the same request is decided.
  auto decided = Solve(c, t, Req(6));
  CHECK((decided.ok() || decided.status().code() == Code::kConflict));
}

TEST_CASE("solver: layout JSON has the documented fields", "[solver]") {
  Catalog c = Base();
  auto l = MustSolve(c, Tmpl({"a"}), Req(1, "x"));
  json j = LayoutToJson(l);
  CHECK(j == json::parse(R"({"nodes":[{"hostname":"x-1","hardwaretype":"small","imagetype":"deb","flavor":"f-small",
                             "image":"debian","sshuser":"root","services":["a"]}]})"));
  CHECK_FALSE(LayoutFromJson(json::parse(R"({"nodes":[{"services":["a"]}]})")).ok());
  CHECK_THAT(Fails(c, Tmpl({"a"}), Req(1, "bad name"), Code::kInvalid),
             Catch::Contains("cluster name 'bad name' cannot start a hostname"));
}
