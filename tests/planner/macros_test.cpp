#include <catch2/catch.hpp>

#include "weft/planner/macros.hpp"

using namespace weft::planner;
using nlohmann::json;

namespace {

MacroContext Layout(const std::string& self = "n2") {
  MacroContext c;
  c.nodes = {{"n1", "zk-1.example", "10.0.0.1", "192.168.0.1", {"zookeeper", "base"}},
             {"n2", "zk-2.example", "10.0.0.2", "192.168.0.2", {"zookeeper", "base", "kafka"}},
             {"n3", "web-1.example", "10.0.0.3", "", {"base"}}};
  c.self = self;
  c.owner = "alice";
  return c;
}

std::string X(const std::string& text, const MacroContext& c = Layout()) {
  auto r = ExpandString(text, c);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("macros: node, service and cluster facts expand", "[macros]") {
  CHECK(X("%host.self%") == "zk-2.example");
  CHECK(X("%ip.self%") == "192.168.0.2");
  CHECK(X("%ip.access_v4.self%") == "10.0.0.2");
  CHECK(X("%host.service.zookeeper%") == "zk-1.example,zk-2.example");
  CHECK(X("%ip.bind_v4.service.zookeeper%") == "192.168.0.1,192.168.0.2");
  CHECK(X("%ip.access_v4.service.base%") == "10.0.0.1,10.0.0.2,10.0.0.3");
  CHECK(X("%ip.bind_v4.service.base%") == "192.168.0.1,192.168.0.2,10.0.0.3");  // no bind address: access
  CHECK(X("%num.service.zookeeper%") == "2");
  CHECK(X("%num.service.absent%") == "0");
  CHECK(X("%instance.self.service.zookeeper%") == "2");
  CHECK(X("%cluster.owner%") == "alice");
}

TEST_CASE("macros: indexing, join and map", "[macros]") {
  CHECK(X("%host.service.zookeeper[0]%") == "zk-1.example");
  CHECK(X("%join(map(host.service.zookeeper,'$:2181'),',')%") == "zk-1.example:2181,zk-2.example:2181");
  CHECK(X("%join(ip.access_v4.service.base,' ')%") == "10.0.0.1 10.0.0.2 10.0.0.3");
  CHECK(X("zk=%host.service.zookeeper[1]%:2181/%cluster.owner%") == "zk=zk-2.example:2181/alice");
}

TEST_CASE("macros: text that is not macro-shaped stays as it is", "[macros]") {
  CHECK(X("100% of 50%") == "100% of 50%");
  CHECK(X("50% %host.self%") == "50% zk-2.example");
  CHECK(X("no macros") == "no macros");
  CHECK(X("%") == "%");
}

TEST_CASE("macros: unknown names and bad syntax are errors that name the macro", "[macros]") {
  auto bad = ExpandString("%hosts.service.zk%", Layout());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("config macro %hosts.service.zk%: unknown macro 'hosts.service.zk'") == 0);
  auto idx = ExpandString("%host.service.zookeeper[5]%", Layout());
  REQUIRE_FALSE(idx.ok());
  CHECK(idx.status().message().find("index [5] but 'host.service.zookeeper' has 2 value(s)") != std::string::npos);
  CHECK_FALSE(ExpandString("%join(host.service.zookeeper)%", Layout()).ok());
  auto not_on = ExpandString("%instance.self.service.kafka%", Layout("n1"));
  REQUIRE_FALSE(not_on.ok());
  CHECK(not_on.status().message().find("does not run service 'kafka'") != std::string::npos);
}

TEST_CASE("macros: a whole config expands, and CheckMacros finds errors before any layout exists", "[macros]") {
  json config = {{"zk", {{"servers", "%join(map(host.service.zookeeper,'$:2181'),',')%"}, {"port", 2181}}},
                 {"list", {"%host.self%", "plain"}}};
  auto out = ExpandMacros(config, Layout());
  REQUIRE(out.ok());
  CHECK((*out)["zk"]["servers"] == "zk-1.example:2181,zk-2.example:2181");
  CHECK((*out)["zk"]["port"] == 2181);
  CHECK((*out)["list"] == json::array({"zk-2.example", "plain"}));
  CHECK(CheckMacros(config).ok());
  auto bad = CheckMacros(json{{"a", {{"b", json::array({"ok", "%nope.self%"})}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("config.a.b[1]: config macro %nope.self%") == 0);
}
