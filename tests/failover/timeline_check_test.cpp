// The judgement of the timeline check (server/leader/timeline_check.hpp) on
// what the listed PostgreSQL servers said, and how a conninfo is split into
// its servers; the real servers are in timeline_test.cpp.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "weft/server/leader/timeline_check.hpp"

namespace weft::server::leader {
namespace {

ServerState Primary(const std::string& where, std::int64_t timeline, const std::string& started,
                    const std::string& system_id = "7712") {
  return {.where = where, .reached = true, .timeline = timeline, .system_id = system_id, .started = started};
}

ServerState Standby(const std::string& where) {
  return {.where = where, .reached = true, .in_recovery = true, .system_id = "7712", .started = "s2"};
}

using Kind = TimelineVerdict::Kind;

TEST_CASE("timeline check: a primary on a higher timeline supersedes the one this weftd uses", "[unit]") {
  const ServerState own = Primary("db1:5432", 1, "s1");
  const TimelineVerdict v = JudgeTimelines("a", own, {own, Primary("db2:5432", 2, "s2")});
  CHECK(v.kind == Kind::kSuperseded);
  CHECK(v.message.find("this weftd ('a') must not lead on the PostgreSQL at db1:5432: it is a primary on timeline 1, "
                       "but the PostgreSQL at db2:5432") != std::string::npos);
  CHECK(v.message.find("Fence db1:5432") != std::string::npos);
}

TEST_CASE("timeline check: a standby, an unreachable server and this one itself do not count", "[unit]") {
  const ServerState own = Primary("db1:5432", 3, "s1");
  ServerState down{.where = "db3:5432", .error = "connection refused"};
  // The same server under another name: same start time and timeline.
  const TimelineVerdict v =
      JudgeTimelines("a", own, {own, Standby("db2:5432"), down, Primary("10.0.0.1:5432", 3, "s1")});
  CHECK(v.kind == Kind::kOk);
  CHECK(v.message.empty());
}

TEST_CASE("timeline check: another primary on the same timeline blocks a takeover", "[unit]") {
  const ServerState own = Primary("db2:5432", 2, "s2");
  const TimelineVerdict v = JudgeTimelines("a", own, {Primary("db3:5432", 2, "s3"), own});
  CHECK(v.kind == Kind::kSameTimeline);
  CHECK(v.message.find("are both primaries of the same database cluster on timeline 2") != std::string::npos);
}

TEST_CASE("timeline check: an older primary and another cluster are warned about, not judged", "[unit]") {
  const ServerState own = Primary("db2:5432", 2, "s2");
  const TimelineVerdict v =
      JudgeTimelines("a", own, {Primary("db1:5432", 1, "s1"), own, Primary("other:5432", 9, "s9", "9999")});
  CHECK(v.kind == Kind::kOk);
  CHECK(v.message.find("the PostgreSQL at db1:5432, in this weftd's conninfo, is a primary on timeline 1, older than "
                       "timeline 2") != std::string::npos);
  CHECK(v.message.find("is another database cluster (system identifier 9999, not 7712)") != std::string::npos);
}

TEST_CASE("timeline check: the servers of a conninfo, one or several", "[unit]") {
  Result<std::vector<ListedServer>> one = ListServers("host=db1 dbname=weft");
  REQUIRE(one.ok());
  CHECK(one->empty());
  Result<std::vector<ListedServer>> two = ListServers("host=db1,db2 port=5433 dbname=weft target_session_attrs=read-write");
  REQUIRE(two.ok());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].where == "db1:5433");
  CHECK((*two)[1].where == "db2:5433");
  CHECK((*two)[1].params == std::vector<std::pair<std::string, std::string>>{{"host", "db2"}, {"port", "5433"}});
  Result<std::vector<ListedServer>> uri = ListServers("postgresql://db1:5432,db2:5434/weft");
  REQUIRE(uri.ok());
  REQUIRE(uri->size() == 2);
  CHECK((*uri)[1].where == "db2:5434");
  CHECK(!ListServers("host=db1 nonsense").ok());
}

}  // namespace
}  // namespace weft::server::leader
