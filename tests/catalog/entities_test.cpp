#include <catch2/catch.hpp>

#include "weft/catalog/catalog.hpp"

using nlohmann::json;
using namespace weft::catalog;

namespace {

json Template() {
  return json::parse(R"({
    "name": "lamp",
    "compatibility": {"hardwaretypes": ["small"], "imagetypes": ["debian12"],
                      "services": ["base", "apache", "mysql", "php"]},
    "defaults": {"services": ["base", "apache", "mysql"], "provider": "fake"},
    "constraints": {
      "size": {"min": 1, "max": "10"},
      "layout": {"mustcoexist": [["apache", "php"]], "cantcoexist": [["apache", "mysql"]]},
      "services": {"mysql": {"hardwaretypes": ["small"], "quantities": {"min": 1, "max": 1}}}
    },
    "administration": {"leaseduration": {"initial": "1d", "max": 0, "step": "12h"}}
  })");
}

std::string ErrorOf(const json& doc) {
  auto r = ParseClusterTemplate(doc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == weft::Code::kInvalid);
  return r.status().message();
}

}  // namespace

TEST_CASE("catalog: a valid template parses into typed fields", "[catalog]") {
  auto r = ParseClusterTemplate(Template());
  REQUIRE(r.ok());
  const auto& t = r->entity;
  CHECK(r->warnings.empty());
  CHECK(t.name == "lamp");
  CHECK(t.defaults.provider == "fake");
  CHECK(t.constraints.size_max == 10);
  REQUIRE(t.constraints.mustcoexist.size() == 1);
  CHECK(t.constraints.cantcoexist[0] == std::vector<std::string>{"apache", "mysql"});
  CHECK(t.constraints.services.at("mysql").quantities.max == 1);
  REQUIRE(t.lease);
  CHECK(t.lease->initial_ms == 86'400'000);
  CHECK(t.lease->max_ms == 0);
  CHECK(t.lease->step_ms == 43'200'000);
}

TEST_CASE("catalog: min more than max names the entity and the path", "[catalog]") {
  json doc = Template();
  doc["constraints"]["services"]["mysql"]["quantities"] = {{"min", 3}, {"max", 1}};
  CHECK(ErrorOf(doc) == "clustertemplate 'lamp': constraints.services.mysql.quantities: min 3 is more than max 1");
  doc = Template();
  doc["constraints"]["size"] = {{"min", 5}, {"max", 2}};
  CHECK_THAT(ErrorOf(doc), Catch::Contains("clustertemplate 'lamp': constraints.size: min 5 is more than max 2"));
}

TEST_CASE("catalog: a constraint naming a service outside compatibility is an error", "[catalog]") {
  json doc = Template();
  doc["constraints"]["services"]["redis"] = {{"quantities", {{"max", 1}}}};
  CHECK_THAT(ErrorOf(doc), Catch::Contains("constraints.services.redis: 'redis' is not in compatibility.services"));
  doc = Template();
  doc["constraints"]["layout"]["cantcoexist"] = json::array({json::array({"apache", "nosuch"})});
  CHECK_THAT(ErrorOf(doc), Catch::Contains("constraints.layout.cantcoexist[0][1]: 'nosuch' is not in compatibility"));
  doc = Template();
  doc["defaults"]["services"] = {"base", "ghost"};
  CHECK_THAT(ErrorOf(doc), Catch::Contains("defaults.services[1]: 'ghost' is not in compatibility.services"));
  doc = Template();
  doc["constraints"]["services"]["mysql"]["hardwaretypes"] = {"huge"};
  CHECK_THAT(ErrorOf(doc), Catch::Contains("constraints.services.mysql.hardwaretypes[0]: 'huge' is not in "
                                           "compatibility.hardwaretypes"));
}

TEST_CASE("catalog: wrong types, empty names and bad leases are errors with paths", "[catalog]") {
  json doc = Template();
  doc["name"] = "";
  CHECK_THAT(ErrorOf(doc), Catch::Contains("clustertemplate (unnamed): name: must not be empty"));
  doc = Template();
  doc["name"] = "bad name/x";
  CHECK_THAT(ErrorOf(doc), Catch::Contains("name: 'bad name/x' is not a valid name"));
  doc = Template();
  doc["compatibility"]["services"] = "base";
  CHECK_THAT(ErrorOf(doc), Catch::Contains("compatibility.services: must be a list of names, got \"base\""));
  doc = Template();
  doc["constraints"]["services"]["mysql"]["quantities"]["max"] = "one";
  CHECK_THAT(ErrorOf(doc), Catch::Contains("constraints.services.mysql.quantities.max: must be an integer of at "
                                           "least 1, got \"one\""));
  doc = Template();
  doc["administration"]["leaseduration"]["initial"] = "soon";
  CHECK_THAT(ErrorOf(doc), Catch::Contains("clustertemplate 'lamp': administration.leaseduration.initial: cannot "
                                           "read \"soon\" as a duration"));
  doc = Template();
  doc["administration"]["leaseduration"]["max"] = -5;
  CHECK_THAT(ErrorOf(doc), Catch::Contains("administration.leaseduration.max"));
  doc = Template();
  doc["constraints"]["layout"]["cantcoexist"] = json::array({json::array({"apache"})});
  CHECK_THAT(ErrorOf(doc), Catch::Contains("cantcoexist[0]: needs at least 2 different services"));
  // Several problems are all reported.
  doc = Template();
  doc["defaults"].erase("provider");
  doc["constraints"]["size"]["min"] = true;
  std::string msg = ErrorOf(doc);
  CHECK_THAT(msg, Catch::Contains("defaults.provider: is required"));
  CHECK_THAT(msg, Catch::Contains("constraints.size.min: must be an integer"));
}

TEST_CASE("catalog: malformed JSON text names the file", "[catalog]") {
  auto r = ParseJsonText("{\"name\": ", "services/x.json");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::StartsWith("services/x.json: malformed JSON"));
  CHECK_FALSE(ParseService(json::array()).ok());
}

TEST_CASE("catalog: durations accept milliseconds, numeric strings and units", "[catalog]") {
  CHECK(ParseDurationMs(json(0)) == 0);
  CHECK(ParseDurationMs(json("0")) == 0);
  CHECK(ParseDurationMs(json("86400000")) == 86'400'000);
  CHECK(ParseDurationMs(json("30m")) == 1'800'000);
  CHECK(ParseDurationMs(json("1d12h")) == 129'600'000);
  CHECK(ParseDurationMs(json("500ms")) == 500);
  CHECK_FALSE(ParseDurationMs(json("")).has_value());
  CHECK_FALSE(ParseDurationMs(json("12x")).has_value());
  CHECK_FALSE(ParseDurationMs(json("h")).has_value());
  CHECK_FALSE(ParseDurationMs(json(-1)).has_value());
  CHECK_FALSE(ParseDurationMs(json(1.5)).has_value());
  CHECK_FALSE(ParseDurationMs(json("99999999999999999d")).has_value());
}

TEST_CASE("catalog: unknown fields are kept and warned about, and round-trip", "[catalog]") {
  json doc = Template();
  doc["owner_team"] = "infra";
  doc["constraints"]["services"]["mysql"]["anti_affinity"] = true;
  auto r = ParseClusterTemplate(doc);
  REQUIRE(r.ok());
  REQUIRE(r->warnings.size() == 2);
  CHECK_THAT(r->warnings[0] + r->warnings[1], Catch::Contains("clustertemplate 'lamp': owner_team: unknown field"));
  CHECK_THAT(r->warnings[0] + r->warnings[1],
             Catch::Contains("constraints.services.mysql.anti_affinity: unknown field, kept"));
  CHECK(ToJson(r->entity) == doc);

  json svc = json::parse(R"({"name": "nginx", "dependencies": {"install": {"requires": ["base"]},
    "provides": ["http"], "weight": 3}, "provisioner": {"actions": {"install": {"type": "shell",
    "fields": {"script": "x.sh"}}, "reboot": {"type": "shell"}}}, "x-extra": [1, 2]})");
  auto s = ParseService(svc);
  REQUIRE(s.ok());
  CHECK(s->warnings.size() == 3);  // weight, reboot, x-extra
  CHECK(s->entity.dependencies.install.required == std::vector<std::string>{"base"});
  CHECK(s->entity.actions.at("install").fields.at("script") == "x.sh");
  CHECK(ToJson(s->entity) == svc);
}

TEST_CASE("catalog: ToJson reflects edits but keeps the original spelling of equal values", "[catalog]") {
  auto r = ParseClusterTemplate(Template());
  REQUIRE(r.ok());
  auto t = r->entity;
  json same = ToJson(t);
  CHECK(same["constraints"]["size"]["max"] == "10");  // as written
  CHECK(same["administration"]["leaseduration"]["initial"] == "1d");
  t.constraints.size_max = 12;
  t.description = "edited";
  json edited = ToJson(t);
  CHECK(edited["constraints"]["size"]["max"] == 12);
  CHECK(edited["description"] == "edited");
  t.original = nullptr;  // canonical form
  json canonical = ToJson(t);
  CHECK(canonical["administration"]["leaseduration"]["initial"] == 86'400'000);
  auto again = ParseClusterTemplate(canonical);
  REQUIRE(again.ok());
  CHECK(again->entity.lease->step_ms == 43'200'000);
}

TEST_CASE("catalog: providers, hardware and image types validate their providermap", "[catalog]") {
  CHECK_THAT(ParseProvider(json{{"name", "p"}}).status().message(),
             Catch::Contains("provider 'p': providertype: is required"));
  auto hw = ParseHardwareType(json{{"name", "small"}, {"providermap", {{"fake", {{"cpus", 1}}}}}});
  REQUIRE_FALSE(hw.ok());
  CHECK_THAT(hw.status().message(), Catch::Contains("hardwaretype 'small': providermap.fake.flavor: is required"));
  auto img = ParseImageType(json{{"name", "deb"}, {"providermap", {{"fake", {{"image", "d"}, {"sshuser", "root"},
                                                                            {"region", "x"}}}}}});
  REQUIRE(img.ok());
  CHECK(img->entity.providermap.at("fake").sshuser == "root");
  CHECK(ToJson(img->entity)["providermap"]["fake"]["region"] == "x");
  CHECK_THAT(ParseImageType(json{{"name", "deb"}}).status().message(), Catch::Contains("providermap: is required"));
}

TEST_CASE("catalog: the reference checker lists dangling references, allowing provides", "[catalog]") {
  Catalog c;
  REQUIRE(c.PutJson(Kind::kProvider, {{"name", "fake"}, {"providertype", "fake-provider"}}).ok());
  REQUIRE(c.PutJson(Kind::kHardwareType, {{"name", "small"}, {"providermap", {{"fake", {{"flavor", "s"}}},
                                                                              {"gone", {{"flavor", "s"}}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "base"}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "mysql"}, {"dependencies", {{"provides", {"sql"}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kService, {{"name", "apache"},
                                     {"dependencies", {{"runtime", {{"requires", {"sql", "memcache"}}}}}}}).ok());
  REQUIRE(c.PutJson(Kind::kClusterTemplate, Template()).ok());
  auto refs = CheckReferences(c);
  std::vector<std::string> got;
  for (const auto& r : refs) got.push_back(std::string(KindName(r.kind)) + ":" + r.name + ":" + r.path + "->" + r.target);
  CHECK(got == std::vector<std::string>{
                   "hardwaretype:small:providermap.gone->gone",
                   "service:apache:dependencies.runtime.requires[1]->memcache",
                   "clustertemplate:lamp:compatibility.imagetypes[0]->debian12",
                   "clustertemplate:lamp:compatibility.services[3]->php",
               });
  CHECK_THAT(refs[1].message, Catch::Contains("service 'apache': dependencies.runtime.requires[1] names service "
                                              "'memcache', which is not in the catalog"));
}

TEST_CASE("catalog: Catalog puts, gets, lists and erases by kind", "[catalog]") {
  Catalog c;
  std::vector<std::string> warnings;
  auto name = c.PutJson(Kind::kService, {{"name", "base"}, {"colour", "red"}}, &warnings);
  REQUIRE(name.ok());
  CHECK(*name == "base");
  CHECK(warnings.size() == 1);
  CHECK(c.Names(Kind::kService) == std::vector<std::string>{"base"});
  CHECK(c.GetJson(Kind::kService, "base")->at("colour") == "red");
  CHECK(c.GetJson(Kind::kService, "nope").status().code() == weft::Code::kNotFound);
  CHECK(KindFromName("services") == Kind::kService);
  CHECK(KindFromName("clustertemplate") == Kind::kClusterTemplate);
  CHECK_FALSE(KindFromName("cluster").has_value());
  CHECK(c.Erase(Kind::kService, "base"));
  CHECK(c.size() == 0);
}
