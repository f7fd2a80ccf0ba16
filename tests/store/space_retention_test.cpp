// The audit log and retention beyond what ended (server/store/retention_store.cpp),
// on both backends: each audit entry keeps its request's address (migration 20),
// spent API tokens go after their age, audit entries only when an age is set (and
// the log stays append-only for everything else), and SQLite gives free pages back
// to the file system in small steps.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using weft::store::ApiTokenRecord;
using weft::store::AuditRecord;
using weft::store::Store;
using weft::store::StoreSpace;
using weft::testing::ExecStore;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::QueryStoreInt;
using weft::testing::TempDir;
using weft::testing::TestStoreIsPostgres;

namespace {

ApiTokenRecord Token(const std::string& id, std::int64_t expires_ms, std::int64_t revoked_ms) {
  return ApiTokenRecord{id, "hash-" + id, "acme", "alice", "", 10, expires_ms, revoked_ms};
}

std::vector<std::string> TokenIds(Store& s) {
  auto tokens = s.ListApiTokens();
  REQUIRE(tokens.ok());
  std::vector<std::string> ids;
  for (const ApiTokenRecord& t : *tokens) ids.push_back(t.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::int64_t PruneTokens(Store& s, std::int64_t cutoff_ms, std::int64_t max_rows) {
  REQUIRE(s.Begin().ok());
  auto gone = s.PruneSpentApiTokens(cutoff_ms, max_rows);
  if (!gone.ok()) FAIL(gone.status().ToString());
  REQUIRE(s.Commit().ok());
  return *gone;
}

std::int64_t PruneAudit(Store& s, std::int64_t cutoff_ms, std::int64_t max_rows) {
  REQUIRE(s.Begin().ok());
  auto gone = s.PruneAudit(cutoff_ms, max_rows);
  if (!gone.ok()) FAIL(gone.status().ToString());
  REQUIRE(s.Commit().ok());
  return *gone;
}

AuditRecord Entry(std::int64_t at_ms, const std::string& target, const std::string& address = "") {
  AuditRecord a;
  a.at_ms = at_ms;
  a.actor = "alice";
  a.actor_tenant = "acme";
  a.actor_role = "user";
  a.op = "cluster.create";
  a.tenant = "acme";
  a.target = target;
  a.outcome = "ok";
  a.detail_json = "{}";
  a.address = address;
  return a;
}

std::vector<std::string> AuditTargets(Store& s) {
  weft::store::AuditQuery q;
  auto entries = s.ListAudit(q);
  REQUIRE(entries.ok());
  std::vector<std::string> out;
  for (const AuditRecord& a : *entries) out.push_back(a.target);
  return out;
}

}  // namespace

TEST_CASE("store audit log: each entry keeps the address its request came from", "[store]") {
  TempDir dir("store-audit-address");
  {
    auto opened = OpenStore(dir / "weft.db");
    Store& s = Opened(opened);
    REQUIRE(s.schema_version() >= 20);
    REQUIRE(s.Begin().ok());
    REQUIRE(s.AppendAudit(Entry(1000, "cluster web1", "198.51.100.7")).ok());
    REQUIRE(s.AppendAudit(Entry(2000, "cluster web1")).ok());  // weftd's own, or one from before the column
    REQUIRE(s.AppendAudit(Entry(3000, "cluster web1", "2001:db8::5")).ok());
    REQUIRE(s.Commit().ok());
  }
  // Reopened: what was written is what the file (or database) holds.
  auto opened = OpenStore(dir / "weft.db");
  Store& s = Opened(opened);
  auto entries = s.ListAudit(weft::store::AuditQuery{});
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].address == "198.51.100.7");
  CHECK((*entries)[1].address == "");
  CHECK((*entries)[2].address == "2001:db8::5");
  CHECK((*entries)[2].actor == "alice");
  CHECK((*entries)[2].at_ms == 3000);
}

TEST_CASE("retention: API tokens revoked or expired before the cutoff go, those in force or spent later stay",
          "[store][retention]") {
  TempDir dir("retention-tokens");
  auto opened = OpenStore(dir / "weft.db");
  Store& s = Opened(opened);
  constexpr std::int64_t kCutoff = 5000;
  REQUIRE(s.Begin().ok());
  REQUIRE(s.PutApiToken(Token("a-forever", 0, 0)).ok());             // in force, no expiry
  REQUIRE(s.PutApiToken(Token("b-expires-later", 9000, 0)).ok());    // in force until after the cutoff
  REQUIRE(s.PutApiToken(Token("c-revoked-long-ago", 0, 1000)).ok());  // goes
  REQUIRE(s.PutApiToken(Token("d-revoked-lately", 0, 6000)).ok());    // spent after the cutoff: stays
  REQUIRE(s.PutApiToken(Token("e-expired-long-ago", 2000, 0)).ok());  // goes
  REQUIRE(s.PutApiToken(Token("f-expired-lately", 5500, 0)).ok());    // stays
  // Expired long ago, revoked lately: spent since its expiry, so it goes.
  REQUIRE(s.PutApiToken(Token("g-expired-then-revoked", 1500, 7000)).ok());
  REQUIRE(s.Commit().ok());

  // At most max_rows a batch; the next batch goes on.
  CHECK(PruneTokens(s, kCutoff, 2) == 2);
  CHECK(PruneTokens(s, kCutoff, 2) == 1);
  CHECK(PruneTokens(s, kCutoff, 2) == 0);
  CHECK(TokenIds(s) == std::vector<std::string>{"a-forever", "b-expires-later", "d-revoked-lately", "f-expired-lately"});
  // Later, the recent ones are due too; a token in force never is.
  CHECK(PruneTokens(s, 100'000, 500) == 3);
  CHECK(TokenIds(s) == std::vector<std::string>{"a-forever"});
}

TEST_CASE("retention: audit entries older than the cutoff go, oldest first, and the log stays append-only",
          "[store][retention]") {
  TempDir dir("retention-audit");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  REQUIRE(s.Begin().ok());
  for (std::int64_t at : {100, 200, 300, 400, 5000, 6000}) REQUIRE(s.AppendAudit(Entry(at, "t" + std::to_string(at))).ok());
  REQUIRE(s.Commit().ok());

  // Nothing due: nothing removed, nothing touched.
  CHECK(PruneAudit(s, 50, 500) == 0);
  CHECK(PruneAudit(s, 1000, 3) == 3);
  CHECK(AuditTargets(s) == std::vector<std::string>{"t400", "t5000", "t6000"});
  CHECK(PruneAudit(s, 1000, 3) == 1);
  CHECK(PruneAudit(s, 1000, 3) == 0);
  CHECK(AuditTargets(s) == std::vector<std::string>{"t5000", "t6000"});

  // Outside retention the log still refuses to lose or change an entry.
  CHECK_THAT(ExecStore(path, "DELETE FROM audit_log"), Catch::Contains("append-only"));
  CHECK_THAT(ExecStore(path, "UPDATE audit_log SET actor = 'mallory'"), Catch::Contains("append-only"));
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 2);
  // And a batch that fails after lifting the trigger leaves it in place: the
  // rollback puts it back.
  REQUIRE(s.Begin().ok());
  REQUIRE(s.PruneAudit(5500, 500).ok());
  REQUIRE(s.Rollback().ok());
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM audit_log") == 2);
  CHECK_THAT(ExecStore(path, "DELETE FROM audit_log"), Catch::Contains("append-only"));
  // New entries still append after the pruned ones, with larger ids.
  REQUIRE(s.Begin().ok());
  REQUIRE(s.AppendAudit(Entry(7000, "t7000")).ok());
  REQUIRE(s.Commit().ok());
  CHECK(AuditTargets(s) == std::vector<std::string>{"t5000", "t6000", "t7000"});
}

TEST_CASE("retention: a new SQLite store gives free pages back to the file system a step at a time",
          "[store][retention]") {
  TempDir dir("retention-space");
  const auto path = dir / "weft.db";
  auto opened = OpenStore(path);
  Store& s = Opened(opened);
  if (TestStoreIsPostgres()) {
    // PostgreSQL's autovacuum looks after its files: nothing to report or do.
    auto space = s.Space();
    REQUIRE(space.ok());
    CHECK(space->pages == 0);
    REQUIRE(s.Begin().ok());
    auto reclaimed = s.ReclaimSpace(100);
    REQUIRE(s.Commit().ok());
    REQUIRE(reclaimed.ok());
    CHECK(reclaimed->free_pages == 0);
    return;
  }
  CHECK(QueryStoreInt(path, "PRAGMA auto_vacuum") == 2);  // incremental
  // Rows enough for a few hundred pages, then most of them removed.
  REQUIRE(s.Begin().ok());
  const std::string big(1000, 'x');
  for (int i = 0; i < 2000; ++i) {
    ApiTokenRecord t = Token("tok-" + std::to_string(i), 0, i % 5 == 0 ? 0 : 100);
    t.name = big;
    REQUIRE(s.PutApiToken(t).ok());
  }
  REQUIRE(s.Commit().ok());
  CHECK(PruneTokens(s, 1000, 100'000) == 1600);
  auto before = s.Space();
  REQUIRE(before.ok());
  CHECK(before->incremental);
  INFO("pages " << before->pages << ", free " << before->free_pages);
  REQUIRE(before->free_pages > 300);

  REQUIRE(s.Begin().ok());
  auto step = s.ReclaimSpace(64);
  REQUIRE(step.ok());
  REQUIRE(s.Commit().ok());
  CHECK(step->free_pages == before->free_pages - 64);
  CHECK(step->pages == before->pages - 64);
  int steps = 1;
  while (step->free_pages > 0) {
    REQUIRE(steps < 1000);
    REQUIRE(s.Begin().ok());
    step = s.ReclaimSpace(64);
    REQUIRE(step.ok());
    REQUIRE(s.Commit().ok());
    ++steps;
  }
  CHECK(step->pages == before->pages - before->free_pages);
  // The rows that stayed are whole.
  CHECK(TokenIds(s).size() == 400);
  CHECK(QueryStoreInt(path, "SELECT COUNT(*) FROM api_tokens WHERE length(name) = 1000") == 400);
}

TEST_CASE("retention: an older SQLite store switches to incremental vacuum with one VACUUM",
          "[store][retention][sqlite]") {
  TempDir dir("retention-vacuum");
  const auto path = dir / "weft.db";
  // A store made before auto_vacuum: a file that already has a page.
  REQUIRE(ExecStore(path, "PRAGMA auto_vacuum=NONE; CREATE TABLE before_weft (a INTEGER)").empty());
  {
    auto opened = OpenStore(path);
    Store& s = Opened(opened);
    auto space = s.Space();
    REQUIRE(space.ok());
    CHECK_FALSE(space->incremental);
    // Without it, a step gives nothing back (and changes nothing).
    REQUIRE(s.Begin().ok());
    REQUIRE(s.PutApiToken(Token("t", 0, 100)).ok());
    REQUIRE(s.Commit().ok());
    REQUIRE(s.Begin().ok());
    auto step = s.ReclaimSpace(64);
    REQUIRE(step.ok());
    REQUIRE(s.Commit().ok());
    CHECK(step->pages == space->pages);
    REQUIRE(s.Vacuum().ok());
    auto after = s.Space();
    REQUIRE(after.ok());
    CHECK(after->incremental);
    CHECK(after->free_pages == 0);
    CHECK(TokenIds(s) == std::vector<std::string>{"t"});
  }
  CHECK(QueryStoreInt(path, "PRAGMA auto_vacuum") == 2);
}
