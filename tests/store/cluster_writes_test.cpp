// The clusters a writer's commits wrote (Store::TakeCommittedClusterWrites),
// handed to a reader's Store that keeps cluster summaries, as weftd's reactor
// hands them to its api front: the reader shows a cluster as its last commit
// left it once told, and never the state of a transaction not committed.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/server/store/store.hpp"

using weft::store::ClusterRecord;
using weft::store::Store;
using weft::testing::OpenStore;
using weft::testing::Opened;
using weft::testing::PostgresStoreOptions;
using weft::testing::StartPostgres;
using weft::testing::TempDir;

namespace {

ClusterRecord NewCluster(const std::string& tenant, const std::string& name) {
  ClusterRecord c;
  c.tenant = tenant;
  c.name = name;
  c.owner = "alice";
  c.status = "pending";
  c.spec_json = R"({"template":{"name":"web"},"provider":{"name":"cloud"}})";
  c.layout_json = R"({"nodes":[{"hostname":"a","services":["db"]}]})";
  c.created_at_ms = 100;
  return c;
}

std::int64_t IdOf(const ClusterRecord& c) { return std::stoll(c.id); }

// The reader's summaries of `tenant`, as name:status, every status.
std::vector<std::string> Listed(Store& reader, const std::string& tenant) {
  std::vector<std::string> out;
  const weft::Status s = reader.VisitClusterSummaries(
      tenant, true, [&](const ClusterRecord& c) { out.push_back(c.name + ":" + c.status); });
  REQUIRE(s.ok());
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("cluster writes: a reader's summaries learn of a cluster from the commit that wrote it", "[store]") {
  TempDir dir("cluster-writes");
  auto w = OpenStore(dir / "weft.db");
  Store& writer = Opened(w);
  weft::store::StoreOptions reads;
  reads.reader = true;
  auto r = OpenStore(dir / "weft.db", reads);
  Store& reader = Opened(r);
  CHECK(Listed(reader, "default").empty());  // the reader keeps its summaries from here on

  // Nothing of a transaction still open is handed over.
  REQUIRE(writer.Begin().ok());
  ClusterRecord one = NewCluster("default", "one");
  REQUIRE(writer.InsertCluster(&one).ok());
  CHECK(writer.TakeCommittedClusterWrites().empty());
  REQUIRE(writer.Commit().ok());
  Store::ClusterWrites written = writer.TakeCommittedClusterWrites();
  CHECK(written.ids == std::set<std::int64_t>{IdOf(one)});
  CHECK(!written.all);
  CHECK(writer.TakeCommittedClusterWrites().empty());  // handed over once

  // Untold, the reader lists what it kept; told, what was committed.
  CHECK(Listed(reader, "default").empty());
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:pending"});
  CHECK(Listed(reader, "other").empty());  // tenants stay apart

  // A change, and a cluster of another tenant, in one commit.
  REQUIRE(writer.Begin().ok());
  one.status = "active";
  REQUIRE(writer.UpdateCluster(one).ok());
  ClusterRecord two = NewCluster("other", "two");
  REQUIRE(writer.InsertCluster(&two).ok());
  REQUIRE(writer.Commit().ok());
  written = writer.TakeCommittedClusterWrites();
  CHECK(written.ids == std::set<std::int64_t>{IdOf(one), IdOf(two)});
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:active"});
  CHECK(Listed(reader, "other") == Names{"two:pending"});

  // A rolled back change is handed over too, and reads as it was committed.
  REQUIRE(writer.Begin().ok());
  one.status = "stopped";
  REQUIRE(writer.UpdateCluster(one).ok());
  REQUIRE(writer.Rollback().ok());
  written = writer.TakeCommittedClusterWrites();
  CHECK(written.ids == std::set<std::int64_t>{IdOf(one)});
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:active"});

  // Forgetting every summary (a rollback, a takeover) tells the reader to read them all again.
  ClusterRecord three = NewCluster("default", "three");
  REQUIRE(writer.InsertCluster(&three).ok());  // outside a transaction: committed at once
  writer.ForgetClusterSummaries();
  written = writer.TakeCommittedClusterWrites();
  CHECK(written.all);
  CHECK(written.ids.empty());
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:active", "three:pending"});
}

TEST_CASE("postgres store: a commit in flight hands over its clusters once it succeeded", "[store][postgres]") {
  TempDir dir("cluster-writes-pg");
  auto server = StartPostgres(dir.path());
  weft::store::StoreOptions options = PostgresStoreOptions(*server);
  auto w = Store::Open(dir / "unused.db", options);
  Store& writer = Opened(w);
  options.reader = true;
  auto r = Store::Open(dir / "unused.db", options);
  Store& reader = Opened(r);
  CHECK(Listed(reader, "default").empty());

  REQUIRE(writer.Begin().ok());
  ClusterRecord one = NewCluster("default", "one");
  REQUIRE(writer.InsertCluster(&one).ok());
  REQUIRE(writer.SendCommit().ok());
  // The next transaction begins behind the commit in flight; neither is handed over yet.
  REQUIRE(writer.Begin().ok());
  ClusterRecord two = NewCluster("default", "two");
  REQUIRE(writer.InsertCluster(&two).ok());
  CHECK(writer.TakeCommittedClusterWrites().empty());
  REQUIRE(writer.AwaitCommit().ok());
  // Only the first: the second commits later, and is handed over with its own commit.
  Store::ClusterWrites written = writer.TakeCommittedClusterWrites();
  CHECK(written.ids == std::set<std::int64_t>{IdOf(one)});
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:pending"});
  REQUIRE(writer.Commit().ok());
  written = writer.TakeCommittedClusterWrites();
  CHECK(written.ids == std::set<std::int64_t>{IdOf(two)});
  reader.ClustersWrittenElsewhere(written);
  CHECK(Listed(reader, "default") == Names{"one:pending", "two:pending"});
}
