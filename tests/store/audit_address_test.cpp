// The audit log's address column (migration 20) on the backend the run asks
// for: what is appended is read back, and an entry without one (weftd's own,
// or one written before the column existed) reads as "".
#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using weft::store::AuditQuery;
using weft::store::AuditRecord;
using weft::store::Store;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::TempDir;

namespace {

AuditRecord Entry(std::int64_t at_ms, const std::string& address) {
  AuditRecord a;
  a.at_ms = at_ms;
  a.actor = "alice";
  a.actor_tenant = "acme";
  a.actor_role = "user";
  a.op = "cluster.create";
  a.tenant = "acme";
  a.target = "cluster web1";
  a.outcome = "ok";
  a.address = address;
  return a;
}

}  // namespace

TEST_CASE("store audit log: each entry keeps the address its request came from", "[store]") {
  TempDir dir("store-audit-address");
  {
    auto opened = OpenStore(dir / "weft.db");
    Store& store = Opened(opened);
    REQUIRE(store.schema_version() >= 20);
    REQUIRE(store.Begin().ok());
    REQUIRE(store.AppendAudit(Entry(1000, "198.51.100.7")).ok());
    REQUIRE(store.AppendAudit(Entry(2000, "")).ok());
    REQUIRE(store.AppendAudit(Entry(3000, "2001:db8::5")).ok());
    REQUIRE(store.Commit().ok());
  }
  // Reopened: what was written is what the file (or database) holds.
  auto opened = OpenStore(dir / "weft.db");
  Store& store = Opened(opened);
  auto entries = store.ListAudit(AuditQuery{});
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].address == "198.51.100.7");
  CHECK((*entries)[1].address == "");
  CHECK((*entries)[2].address == "2001:db8::5");
  CHECK((*entries)[2].actor == "alice");
  CHECK((*entries)[2].at_ms == 3000);
}
