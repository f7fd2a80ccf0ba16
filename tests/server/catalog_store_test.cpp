#include <catch2/catch.hpp>

#include "weft/server/store/store.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using weft::store::CatalogEntityRecord;
using weft::store::Store;

namespace {

std::unique_ptr<Store> OpenStore(const weft::testing::TempDir& dir) {
  auto store = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(store.ok());
  return std::move(store.value());
}

std::int64_t Put(Store& store, const std::string& tenant, const std::string& kind, const std::string& name,
                 const std::string& json, std::int64_t now_ms = 1000) {
  auto v = store.PutCatalogEntity(tenant, kind, name, json, now_ms);
  REQUIRE(v.ok());
  return *v;
}

std::vector<std::string> Names(const std::vector<CatalogEntityRecord>& records) {
  std::vector<std::string> names;
  for (const auto& r : records) names.push_back(r.name);
  return names;
}

}  // namespace

TEST_CASE("catalog store: every put makes a new version, get gives the latest or the one asked for",
          "[store][catalog]") {
  weft::testing::TempDir dir;
  auto store = OpenStore(dir);
  CHECK(Put(*store, "default", "provider", "fake", R"({"v":1})", 1000) == 1);
  CHECK(Put(*store, "default", "provider", "fake", R"({"v":2})", 2000) == 2);
  CHECK(Put(*store, "default", "provider", "fake", R"({"v":2})", 3000) == 3);  // same JSON, still a new version

  auto latest = store->GetCatalogEntity("default", "provider", "fake");
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->version == 3);
  CHECK((*latest)->json == R"({"v":2})");
  CHECK((*latest)->created_at_ms == 3000);
  CHECK_FALSE((*latest)->deleted);

  auto first = store->GetCatalogEntity("default", "provider", "fake", 1);
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->json == R"({"v":1})");
  CHECK((*first)->created_at_ms == 1000);

  auto missing_version = store->GetCatalogEntity("default", "provider", "fake", 9);
  REQUIRE(missing_version.ok());
  CHECK_FALSE(missing_version->has_value());
  auto missing_name = store->GetCatalogEntity("default", "provider", "nope");
  REQUIRE(missing_name.ok());
  CHECK_FALSE(missing_name->has_value());

  auto list = store->ListCatalogEntities("default", "provider");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].version == 3);
}

TEST_CASE("catalog store: kinds are separate namespaces, list gives the latest per name, sorted", "[store][catalog]") {
  weft::testing::TempDir dir;
  auto store = OpenStore(dir);
  Put(*store, "default", "service", "nginx", "{}");
  Put(*store, "default", "service", "base", "{}");
  Put(*store, "default", "service", "nginx", R"({"x":1})");
  Put(*store, "default", "hardwaretype", "nginx", "{}");
  auto services = store->ListCatalogEntities("default", "service");
  REQUIRE(services.ok());
  CHECK(Names(*services) == std::vector<std::string>{"base", "nginx"});
  CHECK((*services)[1].version == 2);
  CHECK((*services)[1].json == R"({"x":1})");
  auto hw = store->ListCatalogEntities("default", "hardwaretype");
  REQUIRE(hw.ok());
  REQUIRE(hw->size() == 1);
  CHECK((*hw)[0].version == 1);
}

TEST_CASE("catalog store: delete leaves a tombstone, a later put takes the next version", "[store][catalog]") {
  weft::testing::TempDir dir;
  auto store = OpenStore(dir);
  Put(*store, "default", "imagetype", "debian12", R"({"a":1})");
  Put(*store, "default", "imagetype", "debian12", R"({"a":2})");

  auto deleted = store->DeleteCatalogEntity("default", "imagetype", "debian12", 5000);
  REQUIRE(deleted.ok());
  REQUIRE(deleted->has_value());
  CHECK(**deleted == 3);

  auto latest = store->GetCatalogEntity("default", "imagetype", "debian12");
  REQUIRE(latest.ok());
  CHECK_FALSE(latest->has_value());
  auto tombstone = store->GetCatalogEntity("default", "imagetype", "debian12", 3);
  REQUIRE(tombstone.ok());
  CHECK_FALSE(tombstone->has_value());
  auto history = store->GetCatalogEntity("default", "imagetype", "debian12", 2);  // history stays readable
  REQUIRE(history.ok());
  REQUIRE(history->has_value());
  CHECK((*history)->json == R"({"a":2})");
  auto list = store->ListCatalogEntities("default", "imagetype");
  REQUIRE(list.ok());
  CHECK(list->empty());

  auto again = store->DeleteCatalogEntity("default", "imagetype", "debian12", 6000);
  REQUIRE(again.ok());
  CHECK_FALSE(again->has_value());  // nothing live to delete

  CHECK(Put(*store, "default", "imagetype", "debian12", R"({"a":4})") == 4);
  auto back = store->GetCatalogEntity("default", "imagetype", "debian12");
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->version == 4);
  CHECK((*back)->json == R"({"a":4})");
}

TEST_CASE("catalog store: tenants are isolated", "[store][catalog]") {
  weft::testing::TempDir dir;
  auto store = OpenStore(dir);
  Put(*store, "acme", "provider", "fake", R"({"t":"acme"})");
  Put(*store, "acme", "provider", "fake", R"({"t":"acme2"})");
  CHECK(Put(*store, "globex", "provider", "fake", R"({"t":"globex"})") == 1);  // its own numbering

  auto globex = store->GetCatalogEntity("globex", "provider", "fake");
  REQUIRE(globex.ok());
  REQUIRE(globex->has_value());
  CHECK((*globex)->json == R"({"t":"globex"})");
  CHECK((*globex)->tenant == "globex");

  auto other = store->GetCatalogEntity("initech", "provider", "fake");
  REQUIRE(other.ok());
  CHECK_FALSE(other->has_value());
  auto other_list = store->ListCatalogEntities("initech", "provider");
  REQUIRE(other_list.ok());
  CHECK(other_list->empty());

  auto del = store->DeleteCatalogEntity("globex", "provider", "fake", 2000);
  REQUIRE(del.ok());
  REQUIRE(del->has_value());
  auto acme = store->GetCatalogEntity("acme", "provider", "fake");
  REQUIRE(acme.ok());
  REQUIRE(acme->has_value());  // globex's delete does not touch acme
  CHECK((*acme)->version == 2);
}

TEST_CASE("catalog store: entities survive reopening the file", "[store][catalog]") {
  weft::testing::TempDir dir;
  {
    auto store = OpenStore(dir);
    Put(*store, "default", "clustertemplate", "web", R"({"name":"web"})");
  }
  auto store = OpenStore(dir);
  auto got = store->GetCatalogEntity("default", "clustertemplate", "web");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->json == R"({"name":"web"})");
}
