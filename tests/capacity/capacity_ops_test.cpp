// server.capacity on a Router over a real Store, TaskQueue and HostRegistry,
// with a clock the test moves: the threads a tenant is sized against are the
// share the worker split gives it while it has tasks, even when it went quiet.
#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <string>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/capacity/capacity_ops.hpp"
#include "weft/server/queue/task_queue.hpp"

namespace {

using namespace weft::api;
using json = nlohmann::json;

struct Fixture {
  weft::testing::TempDir dir{"weft-capacity-ops"};
  std::unique_ptr<weft::store::Store> store;
  weft::ManualClock clock{1'800'000'000'000};
  weft::server::Config config;
  std::unique_ptr<weft::queue::TaskQueue> queue;
  std::unique_ptr<weft::hosts::HostRegistry> hosts;
  Router router;

  Fixture() {
    auto s = weft::testing::OpenStore(dir / "weft.db");
    REQUIRE(s.ok());
    store = std::move(s.value());
    queue = std::make_unique<weft::queue::TaskQueue>(*store, clock, weft::queue::QueueOptions{30000});
    REQUIRE(queue->Load().ok());
    hosts = std::make_unique<weft::hosts::HostRegistry>(*store, *queue, clock, config);
    weft::capacity::RegisterCapacityOps(router, {*store, *hosts, clock});
  }

  void AddHost(const std::string& id, std::int64_t capacity) {
    weft::hosts::Host h;
    h.record.id = id;
    h.record.capacity = capacity;
    h.record.last_seen_ms = clock.NowMs();
    hosts->Put(std::move(h));
  }
  void HostsSpeak() {
    for (const auto& [id, h] : hosts->all()) hosts->Find(id)->record.last_seen_ms = clock.NowMs();
    (void)hosts->ActiveTenants();  // as every heartbeat's split does
  }

  std::int64_t Enqueue(const std::string& tenant) {
    weft::queue::NewTask t;
    t.plugin = "fake";
    t.action = "INSTALL";
    auto ids = queue->Enqueue(tenant, {t});
    REQUIRE(ids.ok());
    return ids->at(0);
  }
  // A task of `tenant` waits `wait_ms` and runs `run_ms` on h1.
  void RunOne(const std::string& tenant, std::int64_t wait_ms, std::int64_t run_ms) {
    Enqueue(tenant);
    clock.AdvanceMs(wait_ms);
    auto taken = queue->Take("h1", std::set<std::string>{"fake"}, tenant);
    REQUIRE(taken.ok());
    REQUIRE(taken->has_value());
    clock.AdvanceMs(run_ms);
    weft::queue::FinishRequest f;
    f.host_id = "h1";
    f.task_id = (*taken)->id;
    f.attempt = (*taken)->attempt;
    weft::queue::Conflict conflict;
    REQUIRE(queue->Finish(f, &conflict).ok());
  }

  json Capacity(json body, Role role = Role::kSuperadmin, const std::string& tenant = "default") {
    weft::wire::Request req;
    req.id = "1";
    req.op = "server.capacity";
    req.body = std::move(body);
    ::weft::api::Call c;
    c.principal = Principal{tenant, role};
    c.request = &req;
    Response r = router.Route(c);
    INFO(r.status.message());
    REQUIRE(r.status.ok());
    return r.body;
  }
};

const json& Tenant(const json& reply, const std::string& name) {
  for (const json& t : reply["tenants"])
    if (t["tenant"] == name) return t;
  FAIL("no tenant " << name << " in " << reply.dump());
  static const json none;
  return none;
}

}  // namespace

TEST_CASE("capacity ops: a tenant that went quiet is sized against the share it gets when busy", "[unit][capacity]") {
  Fixture f;
  f.AddHost("h1", 4);
  // globex ran ten tasks two minutes ago, then went quiet (weftd keeps a
  // tenant's threads for a minute after its last task); acme has a task now.
  for (int i = 0; i < 10; ++i) f.RunOne("globex", 0, 200);
  f.HostsSpeak();
  f.clock.AdvanceMs(120000);
  f.Enqueue("acme");
  f.HostsSpeak();
  REQUIRE(f.hosts->ActiveTenants() == std::set<std::string>{"acme"});

  const json reply = f.Capacity({{"window_ms", 600000}, {"target_wait_ms", 1000}});
  INFO(reply.dump(2));
  // Were globex busy too, the split would give each tenant 2 of h1's 4 threads.
  const json& globex = Tenant(reply, "globex");
  CHECK(globex["threads_now"] == 2);
  CHECK(globex["tasks_enqueued"] == 10);
  CHECK(globex["attempts_finished"] == 10);
  CHECK(globex["mean_service_ms"] == 200);
  CHECK(globex["threads_needed"] == 1);
  CHECK(globex["verdict"] == "remove");
  const json& acme = Tenant(reply, "acme");
  CHECK(acme["threads_now"] == 2);
  CHECK(acme["verdict"] == "unknown");  // nothing of acme has run yet
  CHECK(reply["hosts"]["threads"] == 4);
  CHECK(reply["hosts"]["live"] == 1);
  // What weftd asks the host to run now is unchanged: acme alone is active.
  const json now = f.hosts->WorkersFor("h1");
  REQUIRE(now.size() == 1);
  CHECK(now[0]["tenant"] == "");
  CHECK(now[0]["threads"] == 4);

  // A tenant admin gets their tenant only, and no total.
  const json mine = f.Capacity(json::object(), Role::kAdmin, "globex");
  REQUIRE(mine["tenants"].size() == 1);
  CHECK(mine["tenants"][0]["tenant"] == "globex");
  CHECK_FALSE(mine.contains("total"));
}
