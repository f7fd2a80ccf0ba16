// What the store measures for the capacity advice: arrivals, attempts and
// their run times over a window, per tenant, from real SQLite rows.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/server/store/store.hpp"

namespace {

using weft::store::Store;
using weft::store::TaskRecord;
using weft::store::TaskState;
using weft::store::TenantLoad;

constexpr std::int64_t kSince = 100000;  // the window starts here

std::int64_t Insert(Store& s, const std::string& tenant, std::int64_t created_ms, const std::string& plugin = "fake",
                    const std::string& after = "[]") {
  TaskRecord t;
  t.tenant = tenant;
  t.plugin = plugin;
  t.action = plugin.empty() ? "JOIN" : "INSTALL";
  t.created_at_ms = t.updated_at_ms = created_ms;
  t.after_json = after;
  REQUIRE(s.InsertTask(&t).ok());
  return t.id;
}

// Attempt `attempt` of `task` ran from `taken` to `finished` and ended as `status`.
void Ran(Store& s, std::int64_t task, std::int64_t attempt, std::int64_t taken, std::int64_t finished,
         weft::AttemptStatus status = weft::AttemptStatus::kSucceeded) {
  REQUIRE(s.LeaseTask(task, attempt, "h1", taken + 30000, taken).ok());
  const TaskState state = status == weft::AttemptStatus::kSucceeded ? TaskState::kSucceeded
                          : status == weft::AttemptStatus::kFailed  ? TaskState::kFailed
                                                                    : TaskState::kQueued;
  REQUIRE(s.EndAttempt(task, attempt, state, status, "", "{}", "", "", finished).ok());
}

std::map<std::string, TenantLoad> ByTenant(Store& s, const std::string& tenant = "") {
  auto loads = s.MeasureLoad(kSince, tenant);
  REQUIRE(loads.ok());
  std::map<std::string, TenantLoad> out;
  for (const TenantLoad& l : *loads) out[l.tenant] = l;
  return out;
}

}  // namespace

TEST_CASE("capacity store: arrivals, attempts and run times over the window, per tenant", "[unit][capacity][store]") {
  weft::testing::TempDir dir;
  auto opened = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(opened.ok());
  Store& s = **opened;
  REQUIRE(s.Begin().ok());

  // Before the window: created and run; one of them retried inside it.
  const std::int64_t old_done = Insert(s, "acme", 1000);
  Ran(s, old_done, 1, 2000, 3000);
  const std::int64_t old_retried = Insert(s, "acme", 1500);
  Ran(s, old_retried, 1, 2000, 90000, weft::AttemptStatus::kExpired);
  Ran(s, old_retried, 2, 100500, 100900);  // 400 ms, started in the window: a retry
  // In the window: two run (100 and 300 ms, waited 50 and 0 ms), one queued, one
  // with a predecessor (its wait is not measured), a JOIN and a never-run cancel
  // (neither counts).
  const std::int64_t a = Insert(s, "acme", 101000);
  Ran(s, a, 1, 101050, 101150);
  const std::int64_t b = Insert(s, "acme", 102000);
  Ran(s, b, 1, 102000, 102300, weft::AttemptStatus::kFailed);
  Insert(s, "acme", 103000);
  const std::int64_t after = Insert(s, "acme", 104000, "fake", "[7]");
  Ran(s, after, 1, 109000, 109200);
  Insert(s, "acme", 105000, "");
  const std::int64_t cancelled = Insert(s, "acme", 106000);
  REQUIRE(s.SetTaskState(cancelled, TaskState::kCancelled, "job aborted", 0, 106500).ok());
  // Another tenant.
  const std::int64_t g = Insert(s, "globex", 107000);
  Ran(s, g, 1, 107010, 107510);
  REQUIRE(s.Commit().ok());

  auto first = s.FirstTaskSince(kSince);
  REQUIRE(first.ok());
  CHECK(*first == a);
  auto none = s.FirstTaskSince(200000);
  REQUIRE(none.ok());
  CHECK(*none > g);

  auto loads = ByTenant(s);
  REQUIRE(loads.size() == 2);
  const TenantLoad& acme = loads["acme"];
  CHECK(acme.enqueued == 4);  // a, b, the queued one, `after`
  CHECK(acme.started == 4);   // the retry, a, b, `after`
  CHECK(acme.retried == 1);
  CHECK(acme.served == 4);    // the expired attempt is not a run time
  CHECK(acme.service_ms_sum == Approx(400 + 100 + 300 + 200));
  CHECK(acme.service_ms_squares == Approx(400 * 400 + 100 * 100 + 300 * 300 + 200 * 200));
  CHECK(acme.waited == 2);    // a and b: first attempts with no predecessor
  CHECK(acme.wait_ms_sum == Approx(50 + 0));
  const TenantLoad& globex = loads["globex"];
  CHECK(globex.enqueued == 1);
  CHECK(globex.served == 1);
  CHECK(globex.service_ms_sum == Approx(500));

  // One tenant only.
  auto one = ByTenant(s, "globex");
  REQUIRE(one.size() == 1);
  CHECK(one.count("globex") == 1);
}

TEST_CASE("capacity store: an empty store measures nothing", "[unit][capacity][store]") {
  weft::testing::TempDir dir;
  auto opened = weft::testing::OpenStore(dir / "weft.db");
  REQUIRE(opened.ok());
  auto first = (*opened)->FirstTaskSince(kSince);
  REQUIRE(first.ok());
  auto loads = (*opened)->MeasureLoad(kSince);
  REQUIRE(loads.ok());
  CHECK(loads->empty());
}
