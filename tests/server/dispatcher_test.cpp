// The dispatcher's take over a real store and task queue (support/dispatch_fixture.hpp): what a host
// gets is the task's own members, the payload's and the decorators' (tree or
// text), written as one JSON object in key order.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/common/wire.hpp"
#include "support/dispatch_fixture.hpp"

using json = nlohmann::json;
using weft::hosts::TaskTexts;
using weft::testing::DispatchFixture;

namespace {

std::shared_ptr<const std::string> Text(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

TEST_CASE("dispatcher: a decorator's text members are written in key order beside the tree's and the task's own",
          "[dispatcher]") {
  DispatchFixture f;
  f.hosts.Put(DispatchFixture::FpHost("h1", 1));
  REQUIRE(f.queue.Enqueue("acme", {DispatchFixture::FpTask("CREATE", R"({"zeta":1})")}).ok());

  f.dispatcher.AddTakeDecorator([](const weft::store::TaskRecord&, json& tree, TaskTexts& texts) {
    tree["beta"] = "from the tree";
    texts.Add("alpha", Text("[1,2]"));
    texts.Add("beta", Text(R"("from a text")"));   // the tree's member wins
    texts.Add("attempt", Text("99"));              // the task's own member wins
    texts.Add("cluster_x", Text(R"({"k":"v"})"));  // between cluster_id and idempotency_key
    return weft::Status::Ok();
  });
  f.dispatcher.AddTakeDecorator([](const weft::store::TaskRecord&, json& tree) {
    tree["omega"] = true;
    return weft::Status::Ok();
  });
  auto taken = f.dispatcher.TryTake("h1", "");
  REQUIRE(taken.ok());
  REQUIRE(taken->task_id > 0);
  const json sent = json::parse(taken->json);
  // One object, each key once, in the order a json object writes them.
  CHECK(taken->json == weft::wire::Dump(sent));
  CHECK(sent["alpha"] == json{1, 2});
  CHECK(sent["beta"] == "from the tree");
  CHECK(sent["attempt"] == 1);
  CHECK(sent["cluster_x"] == json{{"k", "v"}});
  CHECK(sent["zeta"] == 1);
  CHECK(sent["omega"] == true);
  CHECK(sent["tenant"] == "acme");
  CHECK(sent["action"] == "CREATE");
}

TEST_CASE("dispatcher: a task too large to hand out fails for good, saying its size, the limit and its largest parts",
          "[dispatcher]") {
  DispatchFixture f;
  std::vector<weft::queue::Ended> ended;
  f.queue.set_end_observer([&](const weft::queue::Ended& e) {
    ended.push_back(e);
    return weft::Status::Ok();
  });
  f.dispatcher.set_max_task_bytes(64 * 1024);
  f.hosts.Put(DispatchFixture::FpHost("h1", 1));
  weft::queue::NewTask task = DispatchFixture::FpTask("CREATE");
  task.max_attempts = 3;
  auto ids = f.queue.Enqueue("acme", {task});
  REQUIRE(ids.ok());
  const std::string big(80 * 1024, 'r');
  f.dispatcher.AddTakeDecorator([&big](const weft::store::TaskRecord&, json&, TaskTexts& texts) {
    texts.Add("results", Text("{\"blob\":\"" + big + "\"}"));
    texts.Add("config", Text("{}"));
    return weft::Status::Ok();
  });
  auto taken = f.dispatcher.TryTake("h1", "", "7.1");
  REQUIRE(taken.ok());
  CHECK(taken->task_id == 0);  // nothing handed out: the host would drop it unread and ask again
  REQUIRE(ended.size() == 1);
  CHECK_FALSE(ended[0].succeeded);
  CHECK(ended[0].final);  // no second attempt: it would be as large
  CHECK_THAT(ended[0].message, Catch::Contains("task " + std::to_string(ids->at(0)) +
                                               " attempt 1 could not be handed out: it is ") &&
                                   Catch::Contains("over the 65536 bytes a reply may carry") &&
                                   Catch::Contains("largest parts: results 81931 bytes"));
  auto stored = f.store->GetTask(ids->at(0));
  REQUIRE(stored.ok());
  CHECK((*stored)->state == weft::store::TaskState::kFailed);
  CHECK((*stored)->attempt == 1);
  // Nothing is left to take, and the runner's next take releases nothing.
  CHECK_FALSE(f.dispatcher.CanServe("h1", ""));
  REQUIRE(f.dispatcher.RunnerTakes("h1", "7.1").ok());
  CHECK((*f.store->GetTask(ids->at(0)))->state == weft::store::TaskState::kFailed);
}

TEST_CASE("dispatcher: a task's own members that need escapes are written as a json object writes them, and the "
          "record kept between takes carries nothing over",
          "[dispatcher]") {
  DispatchFixture f;
  f.hosts.Put(DispatchFixture::FpHost("h1", 2));
  // Quotes, a backslash, control characters, UTF-8 and a byte that is not
  // UTF-8; a cluster (its idempotency key is cluster/node/id); payload members
  // written from the tree between the task's own.
  weft::queue::NewTask odd;
  odd.plugin = "fp";
  odd.action = "CREATE \"x\"\\";
  odd.cluster_id = "c\t1";
  odd.node_id = std::string("n\x01\n-\xc3\xa9-\xff");
  odd.job_id = "job-1";
  odd.payload_json = R"({"b_member":"\u0007","zz":[1,{"k":"v\"w"}]})";
  weft::queue::NewTask plain;
  plain.plugin = "fp";
  plain.action = "INSTALL";
  auto ids = f.queue.Enqueue("acme", {odd, plain});
  REQUIRE(ids.ok());

  auto first = f.dispatcher.TryTake("h1", "");
  REQUIRE(first.ok());
  REQUIRE(first->task_id == ids->at(0));
  const json sent = json::parse(first->json);
  CHECK(first->json == weft::wire::Dump(sent));
  CHECK(sent["action"] == odd.action);
  CHECK(sent["cluster_id"] == odd.cluster_id);
  CHECK(sent["node_id"] == std::string("n\x01\n-\xc3\xa9-\xef\xbf\xbd"));  // the byte that is not UTF-8 replaced
  CHECK(sent["idempotency_key"] == odd.cluster_id + "/" + std::string("n\x01\n-\xc3\xa9-\xef\xbf\xbd") + "/" +
                                       std::to_string(ids->at(0)));
  CHECK(sent["b_member"] == "\a");
  CHECK(sent["zz"] == json::parse(R"([1,{"k":"v\"w"}])"));
  CHECK(sent["job_id"] == "job-1");

  // The next take reuses the record: none of the first task's members stays.
  auto second = f.dispatcher.TryTake("h1", "");
  REQUIRE(second.ok());
  REQUIRE(second->task_id == ids->at(1));
  const json next = json::parse(second->json);
  CHECK(second->json == weft::wire::Dump(next));
  CHECK(next == json{{"action", "INSTALL"},
                     {"attempt", 1},
                     {"cluster_id", ""},
                     {"idempotency_key", "task/" + std::to_string(ids->at(1))},
                     {"job_id", ""},
                     {"lease_ms", 1000},
                     {"node_id", ""},
                     {"plugin", "fp"},
                     {"task_id", ids->at(1)},
                     {"tenant", "acme"}});
}
