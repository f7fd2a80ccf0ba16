// Retention's counts (server/daemon/retention.cpp) with the real store on
// both backends: a batch counts in server.status, /metrics and the round's
// log line only once its transaction committed; one rolled back counts for
// nothing, and its rows are removed (and counted) again by the next batch.
// With PostgreSQL a commit is confirmed while the next transaction is open:
// that one's batch waits for its own commit.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/retention.hpp"
#include "weft/server/store/store.hpp"

using weft::server::Retention;
using weft::server::RetentionConfig;
using weft::store::AuditRecord;
using weft::store::Store;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::QueryStoreInt;
using weft::testing::TempDir;

namespace {

constexpr std::int64_t kNow = 1'000'000;

// Only the audit log's age is set: every batch removes audit entries, at most two.
RetentionConfig AuditOnly() {
  RetentionConfig c;
  c.ended_after_ms = 0;
  c.tokens_after_ms = 0;
  c.audit_after_ms = 1000;
  c.vacuum_pages = 0;
  c.batch_rows = 2;
  c.interval_ms = 3'600'000;
  return c;
}

void OldAuditEntries(Store& s, int n) {
  REQUIRE(s.Begin().ok());
  for (int i = 0; i < n; ++i) {
    AuditRecord a;
    a.at_ms = 100 + i;
    a.actor = "alice";
    a.actor_tenant = "default";
    a.actor_role = "user";
    a.op = "cluster.create";
    a.tenant = "default";
    a.target = "cluster c" + std::to_string(i);
    a.outcome = "ok";
    a.detail_json = "{}";
    REQUIRE(s.AppendAudit(a).ok());
  }
  REQUIRE(s.Commit().ok());
}

std::int64_t Removed(const Retention& r) { return r.Json()["removed"]["audit"].get<std::int64_t>(); }

}  // namespace

TEST_CASE("retention: a batch whose transaction was rolled back counts for nothing, the next one removes and counts "
          "its rows",
          "[retention]") {
  TempDir dir("retention-counts");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  OldAuditEntries(s, 3);
  const RetentionConfig config = AuditOnly();
  Retention r(config, s);

  // First batch: two entries, committed.
  REQUIRE(r.Due(kNow));
  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow).ok());
  REQUIRE(s.Commit().ok());
  r.Committed();
  CHECK(Removed(r) == 2);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 1);

  // Second batch (the round's last): rolled back, the entry stays and is not counted, nor the round ended.
  REQUIRE(r.Due(kNow + 1));
  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow + 1).ok());
  REQUIRE(s.Rollback().ok());
  r.RolledBack();
  CHECK(Removed(r) == 2);
  CHECK_FALSE(r.Json().contains("last_round_at_ms"));
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 1);

  // The round goes on at once and removes it.
  REQUIRE(r.Due(kNow + 2));
  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow + 2).ok());
  REQUIRE(s.Commit().ok());
  r.Committed();
  CHECK(Removed(r) == 3);
  CHECK(r.Json().value("last_round_at_ms", std::int64_t{0}) == kNow + 2);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 0);
  CHECK_FALSE(r.Due(kNow + 3));
}

TEST_CASE("retention: a commit confirmed while the next transaction is open counts only its own batch", "[retention]") {
  TempDir dir("retention-counts-flight");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  OldAuditEntries(s, 3);
  const RetentionConfig config = AuditOnly();
  Retention r(config, s);

  // Batch one's commit goes out (PostgreSQL: in flight; SQLite: done), batch two runs behind it.
  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow).ok());
  REQUIRE(s.SendCommit().ok());
  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow + 1).ok());
  REQUIRE(s.AwaitCommit().ok());
  r.Committed();  // batch one's commit, with batch two's transaction open
  CHECK(Removed(r) == 2);
  CHECK_FALSE(r.Json().contains("last_round_at_ms"));

  // Batch two is rolled back: nothing more counts.
  REQUIRE(s.Rollback().ok());
  r.RolledBack();
  CHECK(Removed(r) == 2);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 1);

  REQUIRE(s.Begin().ok());
  REQUIRE(r.Batch(kNow + 2).ok());
  REQUIRE(s.Commit().ok());
  r.Committed();
  CHECK(Removed(r) == 3);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 0);
}
