#include <catch2/catch.hpp>

#include "weft/server/queue/task_queue.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"

using weft::Code;
using weft::ManualClock;
using weft::queue::AttemptRef;
using weft::queue::Conflict;
using weft::queue::FinishRequest;
using weft::queue::NewTask;
using weft::queue::TaskQueue;
using weft::store::Store;
using weft::store::TaskState;

namespace {

struct Fixture {
  weft::testing::TempDir dir;
  std::unique_ptr<Store> store;
  ManualClock clock;
  std::unique_ptr<TaskQueue> queue;

  Fixture() {
    auto s = weft::testing::OpenStore(dir / "weft.db");
    REQUIRE(s.ok());
    store = std::move(s.value());
    queue = std::make_unique<TaskQueue>(*store, clock, weft::queue::QueueOptions{1000});
    REQUIRE(queue->Load().ok());
  }

  std::int64_t Enqueue(const std::string& tenant, const std::string& plugin, std::int64_t max_attempts = 3) {
    NewTask t;
    t.plugin = plugin;
    t.action = "CREATE";
    t.max_attempts = max_attempts;
    auto ids = queue->Enqueue(tenant, {t});
    REQUIRE(ids.ok());
    return ids->at(0);
  }

  std::optional<weft::store::TaskRecord> Take(const std::string& host, std::set<std::string> plugins) {
    auto t = queue->Take(host, plugins);
    REQUIRE(t.ok());
    return *t;
  }

  static FinishRequest Request(const std::string& host, std::int64_t id, std::int64_t attempt, bool ok = true) {
    FinishRequest f;
    f.host_id = host;
    f.task_id = id;
    f.attempt = attempt;
    f.succeeded = ok;
    return f;
  }

  weft::Status Finish(const FinishRequest& f, Conflict* conflict = nullptr) {
    Conflict c;
    return queue->Finish(f, conflict ? conflict : &c);
  }

  weft::Status Finish(const std::string& host, std::int64_t id, std::int64_t attempt, bool ok = true,
                      Conflict* conflict = nullptr) {
    return Finish(Request(host, id, attempt, ok), conflict);
  }

  // From now on, every task that ends is appended to `ended` (what the job engine is told).
  std::vector<weft::queue::Ended> ended;
  void CollectEnded() {
    queue->set_end_observer([this](const weft::queue::Ended& e) {
      ended.push_back(e);
      return weft::Status::Ok();
    });
  }
};

const std::set<std::string> kProvider = {"fake-provider"};

}  // namespace

TEST_CASE("queue: a taken task starts attempt 1 and its finish is recorded", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  auto t = f.Take("h1", kProvider);
  REQUIRE(t);
  CHECK(t->id == id);
  CHECK(t->attempt == 1);
  CHECK(t->state == TaskState::kLeased);
  CHECK(f.queue->leased() == 1);
  REQUIRE(f.Finish("h1", id, 1).ok());
  auto stored = f.store->GetTask(id);
  REQUIRE(stored.ok());
  CHECK((*stored)->state == TaskState::kSucceeded);
  CHECK(f.queue->leased() == 0);
  CHECK_FALSE(f.Take("h1", kProvider));
}

TEST_CASE("queue: a stale attempt's finish is refused", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  f.clock.AdvanceMs(1001);
  REQUIRE(f.queue->ExpireDue().ok());
  auto second = f.Take("h2", kProvider);
  REQUIRE(second);
  CHECK(second->attempt == 2);
  Conflict c;
  weft::Status late = f.Finish("h1", id, 1, true, &c);
  CHECK(late.code() == Code::kConflict);
  CHECK(c.current_attempt == 2);
  CHECK(c.state == TaskState::kLeased);
  CHECK(c.host_id == "h2");
  // The right attempt from the wrong host is refused too.
  CHECK(f.Finish("h1", id, 2).code() == Code::kConflict);
  CHECK(f.Finish("h2", id, 2).ok());
}

TEST_CASE("queue: a finish after the lease expired but before the next take is refused", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  f.clock.AdvanceMs(1001);
  REQUIRE(f.queue->ExpireDue().ok());
  Conflict c;
  CHECK(f.Finish("h1", id, 1, true, &c).code() == Code::kConflict);
  CHECK(c.state == TaskState::kQueued);
  CHECK(f.queue->queued() == 1);
}

TEST_CASE("queue: an expired lease puts the task back for attempt 2", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  f.clock.AdvanceMs(999);
  REQUIRE(f.queue->ExpireDue().ok());
  CHECK_FALSE(f.Take("h2", kProvider));  // not yet expired
  f.clock.AdvanceMs(2);
  REQUIRE(f.queue->ExpireDue().ok());
  CHECK(f.queue->TakeReadyChanged());
  auto again = f.Take("h2", kProvider);
  REQUIRE(again);
  CHECK(again->id == id);
  CHECK(again->attempt == 2);
  auto attempts = f.store->ListAttempts(id);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK(attempts->at(0).status == "expired");
}

TEST_CASE("queue: renewing a lease keeps the task, and stale attempts are reported", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  f.clock.AdvanceMs(800);
  auto renewed = f.queue->Renew("h1", {{id, 1}, {id, 7}, {999, 1}});
  REQUIRE(renewed.ok());
  CHECK(renewed->renewed == 1);
  CHECK(renewed->stale.size() == 2);
  f.clock.AdvanceMs(800);  // past the first lease, within the renewed one
  REQUIRE(f.queue->ExpireDue().ok());
  CHECK(f.queue->leased() == 1);
  CHECK(f.Finish("h1", id, 1).ok());
}

TEST_CASE("queue: a host only gets tasks of plugin types it registered", "[queue]") {
  Fixture f;
  std::int64_t automator = f.Enqueue("default", "fake-automator");
  CHECK_FALSE(f.Take("h1", kProvider));
  CHECK_FALSE(f.Take("h1", {}));
  auto t = f.Take("h2", {"fake-automator", "other"});
  REQUIRE(t);
  CHECK(t->id == automator);
}

TEST_CASE("queue: tenants are served round-robin, each oldest first", "[queue]") {
  Fixture f;
  std::int64_t a1 = f.Enqueue("a", "fake-provider");
  std::int64_t a2 = f.Enqueue("a", "fake-provider");
  std::int64_t a3 = f.Enqueue("a", "fake-provider");
  std::int64_t b1 = f.Enqueue("b", "fake-provider");
  std::int64_t b2 = f.Enqueue("b", "fake-provider");
  std::vector<std::int64_t> order;
  while (auto t = f.Take("h1", kProvider)) order.push_back(t->id);
  CHECK(order == std::vector<std::int64_t>{a1, b1, a2, b2, a3});
}

TEST_CASE("queue: a take that names a tenant gets only that tenant's tasks", "[queue]") {
  Fixture f;
  std::int64_t a1 = f.Enqueue("a", "fake-provider");
  std::int64_t b_automator = f.Enqueue("b", "fake-automator");
  std::int64_t b1 = f.Enqueue("b", "fake-provider");
  CHECK(f.queue->HasReady(kProvider, "b"));
  CHECK_FALSE(f.queue->HasReady(kProvider, "c"));
  CHECK_FALSE(f.queue->HasReady({"fake-automator"}, "a"));

  // b's provider task, though a's was enqueued first and b's automator task is older.
  auto t = f.queue->Take("h1", kProvider, "b");
  REQUIRE(t.ok());
  REQUIRE(t->has_value());
  CHECK((*t)->id == b1);
  CHECK((*t)->tenant == "b");
  CHECK_FALSE(f.queue->HasReady(kProvider, "b"));

  // Nothing of b is left for this host's plugin types; a's task stays queued.
  t = f.queue->Take("h1", kProvider, "b");
  REQUIRE(t.ok());
  CHECK_FALSE(t->has_value());
  t = f.queue->Take("h1", kProvider, "c");
  REQUIRE(t.ok());
  CHECK_FALSE(t->has_value());
  CHECK(f.queue->queued() == 2);

  // A take without a tenant still serves any tenant.
  auto any = f.Take("h1", {"fake-provider", "fake-automator"});
  REQUIRE(any);
  CHECK(any->id == a1);
  any = f.Take("h1", {"fake-provider", "fake-automator"});
  REQUIRE(any);
  CHECK(any->id == b_automator);
}

TEST_CASE("queue: repeating the accepted finish is ok, a different status is a conflict", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  REQUIRE(f.Finish("h1", id, 1, false).ok());
  CHECK(f.Finish("h1", id, 1, false).ok());
  Conflict c;
  CHECK(f.Finish("h1", id, 1, true, &c).code() == Code::kConflict);
  CHECK(c.state == TaskState::kFailed);
  CHECK(f.Finish("h1", 4242, 1).code() == Code::kNotFound);
}

TEST_CASE("queue: a task fails after max_attempts expired leases, saying why", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider", 2);
  for (int i = 1; i <= 2; ++i) {
    auto t = f.Take("h1", kProvider);
    REQUIRE(t);
    CHECK(t->attempt == i);
    f.clock.AdvanceMs(1001);
    REQUIRE(f.queue->ExpireDue().ok());
  }
  CHECK_FALSE(f.Take("h1", kProvider));
  auto stored = f.store->GetTask(id);
  REQUIRE(stored.ok());
  CHECK((*stored)->state == TaskState::kFailed);
  CHECK_THAT((*stored)->message, Catch::Contains("expired") && Catch::Contains("2 attempts"));
  auto events = f.queue->TakeEvents();
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().state == TaskState::kFailed);
}

TEST_CASE("queue: Load rebuilds ready and leased tasks from the store", "[queue]") {
  Fixture f;
  std::int64_t leased = f.Enqueue("default", "fake-provider");
  std::int64_t queued = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  TaskQueue fresh(*f.store, f.clock, weft::queue::QueueOptions{1000});
  REQUIRE(fresh.Load().ok());
  CHECK(fresh.queued() == 1);
  CHECK(fresh.leased() == 1);
  CHECK(fresh.InFlight("h1") == 1);
  auto t_result = fresh.Take("h2", kProvider);
  REQUIRE(t_result.ok());
  auto t = *t_result;
  REQUIRE(t);
  CHECK(t->id == queued);
  f.clock.AdvanceMs(1001);
  REQUIRE(fresh.ExpireDue().ok());
  auto again_result = fresh.Take("h2", kProvider);
  REQUIRE(again_result.ok());
  auto again = *again_result;
  REQUIRE(again);
  CHECK(again->id == leased);
  CHECK(again->attempt == 2);
}

TEST_CASE("queue: after a restart a lease that ran out meanwhile gets a full lease from the load", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  // weftd is down for longer than the lease; the host still runs the attempt.
  f.clock.AdvanceMs(5000);
  TaskQueue fresh(*f.store, f.clock, weft::queue::QueueOptions{1000});
  REQUIRE(fresh.Load().ok());
  REQUIRE(fresh.ExpireDue().ok());
  CHECK(fresh.leased() == 1);
  CHECK_FALSE(fresh.Take("h2", kProvider).value());
  // The host's heartbeat keeps it...
  f.clock.AdvanceMs(900);
  auto renewed = fresh.Renew("h1", {{id, 1}});
  REQUIRE(renewed.ok());
  CHECK(renewed->renewed == 1);
  // ...and without one it goes out again a lease later.
  f.clock.AdvanceMs(1001);
  REQUIRE(fresh.ExpireDue().ok());
  auto again = fresh.Take("h2", kProvider);
  REQUIRE(again.ok());
  REQUIRE(*again);
  CHECK((*again)->attempt == 2);
}

TEST_CASE("queue: an undelivered take is released for the next attempt", "[queue]") {
  Fixture f;
  std::int64_t id = f.Enqueue("default", "fake-provider");
  auto t = f.Take("h1", kProvider);
  REQUIRE(t);
  REQUIRE(f.queue->Release({id, 1}, "reply lost").ok());
  auto again = f.Take("h2", kProvider);
  REQUIRE(again);
  CHECK(again->attempt == 2);
}

TEST_CASE("queue: a result over the limit fails its attempt for good, saying the task, size and limit", "[queue]") {
  Fixture f;
  f.CollectEnded();
  const std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  FinishRequest fin = Fixture::Request("h1", id, 1);
  fin.result_json = "{\"blob\":\"" + std::string(weft::queue::kMaxResultBytes, 'b') + "\"}";
  REQUIRE(f.Finish(fin).ok());
  REQUIRE(f.ended.size() == 1);
  CHECK_FALSE(f.ended[0].succeeded);
  CHECK(f.ended[0].final);
  CHECK(f.ended[0].result_json == "{}");
  CHECK_THAT(f.ended[0].message, Catch::Contains("task " + std::to_string(id) + " attempt 1 returned a result of " +
                                               std::to_string(fin.result_json.size()) + " bytes") &&
                                   Catch::Contains("over the limit of 262144 bytes") &&
                                   Catch::Contains("not kept"));
  auto stored = f.store->GetTask(id);
  REQUIRE(stored.ok());
  CHECK((*stored)->state == TaskState::kFailed);
  CHECK((*stored)->result_json == "{}");
  CHECK((*stored)->message == f.ended[0].message);

  // A result at the limit is kept.
  const std::int64_t ok_id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  fin.task_id = ok_id;
  fin.result_json = "{\"blob\":\"" + std::string(weft::queue::kMaxResultBytes - 11, 'b') + "\"}";
  REQUIRE(fin.result_json.size() == weft::queue::kMaxResultBytes);
  REQUIRE(f.Finish(fin).ok());
  REQUIRE(f.ended.size() == 2);
  CHECK(f.ended[1].succeeded);
  CHECK(f.ended[1].result_json == fin.result_json);
}

TEST_CASE("queue: the result check refuses a result: the attempt fails for good with its message", "[queue]") {
  Fixture f;
  f.CollectEnded();
  f.queue->set_result_check([](std::int64_t task_id, const std::string& result) {
    return result.size() > 10 ? weft::Status::TooLarge("task " + std::to_string(task_id) + " is too big for its node")
                              : weft::Status::Ok();
  });
  const std::int64_t id = f.Enqueue("default", "fake-provider");
  REQUIRE(f.Take("h1", kProvider));
  FinishRequest fin = Fixture::Request("h1", id, 1);
  fin.result_json = "{\"a\":\"0123456789\"}";
  REQUIRE(f.Finish(fin).ok());
  REQUIRE(f.ended.size() == 1);
  CHECK_FALSE(f.ended[0].succeeded);
  CHECK(f.ended[0].final);
  CHECK_THAT(f.ended[0].message, Catch::StartsWith("task " + std::to_string(id) + " is too big for its node"));
}

TEST_CASE("queue: a failure coded INVALID or UNSUPPORTED is final, FAILED or none is not", "[queue]") {
  Fixture f;
  f.CollectEnded();
  for (const char* code : {"INVALID", "UNSUPPORTED", "TOO_LARGE", "FAILED", "TIMEOUT", ""}) {
    const std::int64_t id = f.Enqueue("default", "fake-provider");
    REQUIRE(f.Take("h1", kProvider));
    FinishRequest fin = Fixture::Request("h1", id, 1, false);
    fin.code = code;
    REQUIRE(f.Finish(fin).ok());
  }
  REQUIRE(f.ended.size() == 6);
  CHECK(f.ended[0].final);
  CHECK(f.ended[1].final);
  CHECK(f.ended[2].final);
  CHECK_FALSE(f.ended[3].final);
  CHECK_FALSE(f.ended[4].final);
  CHECK_FALSE(f.ended[5].final);
}
