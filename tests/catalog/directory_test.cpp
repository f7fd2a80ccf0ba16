#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>

#include "support/temp_dir.hpp"
#include "weft/catalog/directory.hpp"

using nlohmann::json;
using namespace weft::catalog;
namespace fs = std::filesystem;

namespace {
const fs::path kExamples = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";
}

TEST_CASE("catalog dir: examples/catalog imports cleanly and has no dangling references", "[catalog][dir]") {
  auto r = ImportDirectory(kExamples);
  REQUIRE(r.ok());
  for (const auto& s : r->report.skipped) INFO(s.file << ": " << s.reason);
  CHECK(r->report.skipped.empty());
  for (const auto& e : r->report.imported) CHECK(e.warnings.empty());
  CHECK(r->catalog.providers.size() == 4);
  CHECK(r->catalog.FindClusterTemplate("web") != nullptr);
  CHECK(r->catalog.FindClusterTemplate("web-fake") != nullptr);
  CHECK(r->catalog.FindImageType("debian12")->providermap.at("local").sshuser == "root");
  CHECK(CheckReferences(r->catalog).empty());
  auto providers = ProviderTypesInUse(r->catalog);
  CHECK(providers["fake-provider"] == std::vector<std::string>{"provider 'fake'"});
  CHECK(providers["local"] == std::vector<std::string>{"provider 'local'"});
  CHECK(providers["aws"] == std::vector<std::string>{"provider 'aws-us-east-1'"});
  CHECK(providers["openstack"] == std::vector<std::string>{"provider 'openstack-example'"});
  auto automators = AutomatorTypesInUse(r->catalog);
  REQUIRE(automators.size() == 4);
  CHECK(automators["shell"].size() == 7);  // haproxy-puppet and haproxy-ansible are shell too
  CHECK(automators["ansible"].size() == 2);
  CHECK(automators["puppet"].size() == 2);
  CHECK(automators["fake-automator"].front() == "service 'fake-base' (configure, install)");
}

TEST_CASE("catalog dir: export then import round-trips with no change", "[catalog][dir]") {
  auto first = ImportDirectory(kExamples);
  REQUIRE(first.ok());
  weft::testing::TempDir tmp("weft-catalog");
  REQUIRE(ExportDirectory(first->catalog, tmp.path()).ok());
  auto second = ImportDirectory(tmp.path());
  REQUIRE(second.ok());
  CHECK(second->report.skipped.empty());
  CHECK(second->report.imported.size() == first->report.imported.size());
  CHECK(second->catalog == first->catalog);
  // Every file is identical as JSON to the source file.
  for (const auto& e : first->report.imported) {
    json a = json::parse(weft::testing::ReadFile(kExamples / e.file));
    json b = json::parse(weft::testing::ReadFile(tmp.path() / e.file));
    CHECK(a == b);
  }
  // And a second export writes the same bytes.
  weft::testing::TempDir tmp2("weft-catalog");
  REQUIRE(ExportDirectory(second->catalog, tmp2.path()).ok());
  for (const auto& e : first->report.imported)
    CHECK(weft::testing::ReadFile(tmp.path() / e.file) == weft::testing::ReadFile(tmp2.path() / e.file));
}

TEST_CASE("catalog dir: import reports skipped files and why", "[catalog][dir]") {
  weft::testing::TempDir tmp("weft-catalog");
  fs::create_directories(tmp / "services");
  fs::create_directories(tmp / "providers");
  weft::testing::WriteFile(tmp / "services" / "good.json", R"({"name": "good", "extra": 1})");
  weft::testing::WriteFile(tmp / "services" / "broken.json", R"({"name": )");
  weft::testing::WriteFile(tmp / "services" / "renamed.json", R"({"name": "other"})");
  weft::testing::WriteFile(tmp / "services" / "README.txt", "notes");
  weft::testing::WriteFile(tmp / "providers" / "p.json", R"({"name": "p"})");
  auto r = ImportDirectory(tmp.path());
  REQUIRE(r.ok());
  REQUIRE(r->report.imported.size() == 1);
  CHECK(r->report.imported[0].name == "good");
  CHECK(r->report.imported[0].file == "services/good.json");
  CHECK(r->report.imported[0].warnings.size() == 1);
  std::map<std::string, std::string> skipped;
  for (const auto& s : r->report.skipped) skipped[s.file] = s.reason;
  REQUIRE(skipped.size() == 4);
  CHECK_THAT(skipped["providers/p.json"], Catch::Contains("provider 'p': providertype: is required"));
  CHECK_THAT(skipped["services/broken.json"], Catch::Contains("services/broken.json: malformed JSON"));
  CHECK_THAT(skipped["services/renamed.json"], Catch::Contains("rename the file to 'other.json'"));
  CHECK_THAT(skipped["services/README.txt"], Catch::Contains("not a .json file"));
  CHECK(ImportDirectory(tmp / "missing").status().code() == weft::Code::kNotFound);
}

TEST_CASE("catalog dir: a folder with no kind folder is refused, and other folders are skipped", "[catalog][dir]") {
  weft::testing::TempDir tmp("weft-catalog");
  fs::create_directories(tmp / "catalog" / "services");
  fs::create_directories(tmp / "notes");
  auto high = ImportDirectory(tmp.path());
  REQUIRE_FALSE(high.ok());
  CHECK(high.status().code() == weft::Code::kNotFound);
  CHECK_THAT(high.status().message(),
             Catch::Contains("holds none of the catalog folders providers/, hardwaretypes/, imagetypes/, services/ "
                             "or clustertemplates/") &&
                 Catch::Contains("did you mean '" + (tmp / "catalog").string() + "'?"));
  auto empty = ImportDirectory(tmp / "notes");
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("give the folder that holds them"));

  weft::testing::WriteFile(tmp / "catalog" / "services" / "good.json", R"({"name": "good"})");
  fs::create_directories(tmp / "catalog" / "servics");
  weft::testing::WriteFile(tmp / "catalog" / "servics" / "typo.json", R"({"name": "typo"})");
  fs::create_directories(tmp / "catalog" / ".git");
  auto r = ImportDirectory(tmp / "catalog");
  REQUIRE(r.ok());
  REQUIRE(r->report.imported.size() == 1);
  REQUIRE(r->report.skipped.size() == 1);
  CHECK(r->report.skipped[0].file == "servics/");
  CHECK_THAT(r->report.skipped[0].reason, Catch::Contains("not a catalog folder"));
}

TEST_CASE("catalog dir: unknown fields anywhere in the examples survive parse and ToJson", "[catalog][dir]") {
  auto r = ImportDirectory(kExamples);
  REQUIRE(r.ok());
  int objects = 0;
  for (const auto& e : r->report.imported) {
    json doc = json::parse(weft::testing::ReadFile(kExamples / e.file));
    // Add an unknown key to every object of the document (free-form ones included),
    // except maps whose keys are names (providermap, constraints.services, actions).
    std::function<void(json&, const std::string&)> salt = [&](json& v, const std::string& key) {
      if (v.is_object()) {
        for (auto& [k, child] : v.items()) salt(child, k);
        if (key == "providermap" || key == "services" || key == "actions") return;
        v["x-unknown"] = json::array({1, "two", nullptr});
        ++objects;
      } else if (v.is_array()) {
        for (auto& child : v) salt(child, "");
      }
    };
    salt(doc, "");
    Catalog one;
    std::vector<std::string> warnings;
    auto name = one.PutJson(e.kind, doc, &warnings);
    INFO(e.file << ": " << name.status().ToString());
    REQUIRE(name.ok());
    CHECK_FALSE(warnings.empty());
    CHECK(*one.GetJson(e.kind, *name) == doc);
  }
  CHECK(objects > 50);
}
