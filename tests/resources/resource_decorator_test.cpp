// The resource take decorator over a real SQLite store, task queue and
// dispatcher: a task whose plugin type has no active resource is handed out
// with "resources": [] (docs/protocol.md), whether its payload left the key
// out or set it to null.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/resources/resource_ops.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/common/wire.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using json = nlohmann::json;

TEST_CASE("resource decorator: a task of a type without active resources gets an empty resources list",
          "[resources][dispatcher]") {
  weft::testing::TempDir dir;
  auto opened = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(opened.ok());
  std::unique_ptr<weft::store::Store> store = std::move(opened.value());
  weft::ManualClock clock;
  weft::queue::TaskQueue queue(*store, clock, weft::queue::QueueOptions{1000});
  REQUIRE(queue.Load().ok());
  weft::server::Config config;
  weft::hosts::HostRegistry hosts(*store, queue, clock, config);
  weft::hosts::Dispatcher dispatcher(hosts, queue);
  auto resources = weft::resources::FileResourceStore::Open(dir / "resources", clock);
  REQUIRE(resources.ok());
  weft::api::Router router;
  const weft::wire::Limits limits;
  weft::resources::RegisterResourceOps(router, {**resources, hosts, dispatcher, limits});
  weft::hosts::Host host;
  host.record.id = "h1";
  host.record.capacity = 2;
  host.plugins.shared = {"fp"};
  hosts.Put(host);
  weft::queue::NewTask left_out;
  left_out.plugin = "fp";
  left_out.action = "CREATE";
  left_out.payload_json = R"({"zeta":1})";
  weft::queue::NewTask null_list = left_out;
  null_list.payload_json = R"({"resources":null,"zeta":2})";
  REQUIRE(queue.Enqueue("acme", {left_out, null_list}).ok());

  for (int i = 0; i < 2; ++i) {
    auto taken = dispatcher.TryTake("h1", "");
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
