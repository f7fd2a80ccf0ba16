// A cluster inserted with its spec and layout documents (what cluster.create
// does) gets the summary its texts give: template and provider names, node
// count, services; documents of unexpected shapes included. Run on SQLite and,
// with WEFT_TEST_STORE=postgres, on PostgreSQL.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using nlohmann::json;
using weft::store::ClusterRecord;
using weft::store::Store;
using weft::testing::Opened;
using weft::testing::OpenStore;
using weft::testing::TempDir;

namespace {

// Inserts a cluster of these documents, by their texts or by the documents; its summary as read back.
ClusterRecord Inserted(Store& store, const std::string& name, const json& spec, const json& layout, bool docs) {
  ClusterRecord c;
  c.tenant = "default";
  c.name = name;
  c.owner = "admin";
  c.status = "pending";
  c.spec_json = spec.dump();
  c.layout_json = layout.dump();
  c.created_at_ms = 1000;
  const weft::Status s = docs ? store.InsertCluster(&c, spec, layout) : store.InsertCluster(&c);
  INFO(s.ToString());
  REQUIRE(s.ok());
  auto got = store.GetClusterSummary(c.id);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  return **got;
}

}  // namespace

TEST_CASE("cluster summary: a cluster inserted with its documents is summarized as from its texts, whatever their shape",
          "[store]") {
  TempDir dir("cluster-summary");
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  const json node = {{"hostname", "n1"}, {"services", {"web", "db", 7, "web"}}};
  const std::vector<std::pair<json, json>> docs = {
      {{{"template", {{"name", "hadoop"}}}, {"provider", {{"name", "aws"}, {"type", "fake"}}}},
       {{"nodes", {node, {{"hostname", "n2"}, {"services", {"zk"}}}, {{"hostname", "n3"}}}}}},
      // Names that are no strings, a template that is no object, nodes that are no objects.
      {{{"template", "hadoop"}, {"provider", {{"name", 3}}}},
       {{"nodes", {"n1", node, json::array(), {{"services", "web"}}}}}},
      // A spec and a layout that are no objects; nodes that are no array.
      {json::array({1, 2}), {{"nodes", {{"n1", node}}}}},
      {json("text"), json::array({node})},
      {json::object(), json::object()},
  };
  int k = 0;
  for (const auto& [spec, layout] : docs) {
    INFO("documents " << k << ": " << spec.dump() << " " << layout.dump());
    const ClusterRecord texts = Inserted(store, "t" + std::to_string(k), spec, layout, false);
    const ClusterRecord from_docs = Inserted(store, "d" + std::to_string(k), spec, layout, true);
    CHECK(from_docs.template_name == texts.template_name);
    CHECK(from_docs.provider_name == texts.provider_name);
    CHECK(from_docs.size == texts.size);
    CHECK(from_docs.services == texts.services);
    ++k;
  }
  // The first documents' summary, as the texts give it.
  const ClusterRecord first = Inserted(store, "first", docs[0].first, docs[0].second, true);
  CHECK(first.template_name == "hadoop");
  CHECK(first.provider_name == "aws");
  CHECK(first.size == 3);
  CHECK(first.services == std::vector<std::string>{"db", "web", "zk"});
}
