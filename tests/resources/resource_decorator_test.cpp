// The resource take decorator over a real store, task queue and dispatcher
// (support/dispatch_fixture.hpp): a task whose plugin type has no active resource is handed out
// with "resources": [] (docs/protocol.md), whether its payload left the key
// out or set it to null.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/resources/resource_ops.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/common/wire.hpp"
#include "support/dispatch_fixture.hpp"

using json = nlohmann::json;

TEST_CASE("resource decorator: a task of a type without active resources gets an empty resources list",
          "[resources][dispatcher]") {
  weft::testing::DispatchFixture f;
  auto resources = weft::resources::FileResourceStore::Open(f.dir / "resources", f.clock);
  REQUIRE(resources.ok());
  weft::api::Router router;
  const weft::wire::Limits limits;
  weft::resources::RegisterResourceOps(router, {**resources, f.hosts, f.dispatcher, limits});
  f.hosts.Put(weft::testing::DispatchFixture::FpHost("h1", 2));
  const weft::queue::NewTask left_out = weft::testing::DispatchFixture::FpTask("CREATE", R"({"zeta":1})");
  const weft::queue::NewTask null_list =
      weft::testing::DispatchFixture::FpTask("CREATE", R"({"resources":null,"zeta":2})");
  REQUIRE(f.queue.Enqueue("acme", {left_out, null_list}).ok());

  for (int i = 0; i < 2; ++i) {
    auto taken = f.dispatcher.TryTake("h1", "");
    REQUIRE(taken.ok());
    REQUIRE(taken->task_id > 0);
    INFO(taken->json);
    const json task = json::parse(taken->json);
    REQUIRE(task.contains("resources"));
    CHECK(task["resources"] == json::array());
    CHECK(task["zeta"] == i + 1);
    // One object, each key once, in the order a json object writes them.
    CHECK(taken->json == weft::wire::Dump(task));
  }
}
