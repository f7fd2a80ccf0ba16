// A weftd must not lead on a PostgreSQL that a promotion superseded
// (docs/failover.md, server/leader/timeline_check.hpp), with the real
// processes: a throwaway primary with a streaming standby (pg_basebackup -R),
// the standby promoted while the old primary keeps running as a primary (the
// split brain an operator trial met), and weftd given both in its conninfo.
#include <filesystem>
#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::PostgresServer;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// Both servers, `first` first, as docs/failover.md has it (host=db1,db2 target_session_attrs=read-write).
std::string Conninfo(const PostgresServer& first, const PostgresServer& second) {
  return "host=" + first.dir().string() + "," + second.dir().string() +
         " port=5432 user=postgres dbname=postgres target_session_attrs=read-write";
}

std::unique_ptr<Weftd> StartWeftd(const fs::path& dir, const std::string& node, const std::string& conninfo,
                                  std::int64_t timeline_check_ms = 200) {
  fs::create_directories(dir / node);
  return std::make_unique<Weftd>(testing::WeftdOptions{
      .dir = dir / node,
      .name = node,
      .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json(conninfo).dump() + "\n[leader]\nnode = \"" +
                    node + "\"\nlease_ms = 2000\npoll_ms = 100\ntimeline_check_ms = " +
                    std::to_string(timeline_check_ms) + "\n",
      .store = "sqlite"});  // its [store] says postgres
}

// What `w` says it is ("leader", "follower"; "" when it does not answer).
std::string Role(Weftd& w) {
  Result<json> s = w.TryCall("server.status", json::object(), 2000);
  if (!s.ok() || !s->contains("leadership")) return "";
  return (*s)["leadership"].value("role", std::string());
}

// The leader `w` names in server.status ("" when none).
std::string NamedLeader(Weftd& w) {
  Result<json> s = w.TryCall("server.status", json::object(), 2000);
  if (!s.ok() || !s->contains("leadership")) return "";
  const json& leader = (*s)["leadership"]["leader"];
  return leader.is_object() ? leader.value("node", std::string()) : "";
}

TEST_CASE("timeline: after a promotion, no weftd leads on the old primary that still takes writes, "
          "one on the promoted server leads",
          "[failover][integration]") {
  TempDir dir("timeline-superseded");
  Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg1");
  if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
  std::unique_ptr<PostgresServer> old_primary = std::move(*started);
  started = PostgresServer::StartStandby(*old_primary, dir.path() / "pg2");
  if (!started.ok()) FAIL("cannot start the standby: " << started.status().message());
  std::unique_ptr<PostgresServer> standby = std::move(*started);

  // a leads on the primary; the standby follows it.
  std::unique_ptr<Weftd> a = StartWeftd(dir.path(), "a", Conninfo(*old_primary, *standby));
  INFO("--- a ---\n" << Tail(a->AllLogs(), 4000));
  REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 20s));
  REQUIRE(a->TryCall("tenant.create", {{"name", "before"}}).ok());
  REQUIRE(WaitFor(
      [&] {
        Result<std::string> n = standby->Query("SELECT count(*) FROM tenants WHERE name = 'before'");
        return n.ok() && *n == "1";
      },
      20s));

  // The standby is promoted (timeline 2); the old primary keeps running as a
  // primary on timeline 1. The leader on it steps down and says why.
  REQUIRE(standby->Promote().ok());
  const std::string old_where = old_primary->dir().string() + ":5432";
  const std::string new_where = standby->dir().string() + ":5432";
  const std::string refusal = "must not lead on the PostgreSQL at " + old_where + ": it is a primary on timeline 1";
  REQUIRE(WaitFor([&] { return Role(*a) == "follower"; }, 20s));
  CHECK(a->Log().find(refusal) != std::string::npos);
  CHECK(a->Log().find("the PostgreSQL at " + new_where) != std::string::npos);

  // A weftd started now, listing the old primary first, connects there and
  // refuses to lead, saying what to do; nobody takes over there.
  fs::create_directories(dir.path() / "b" / "data");
  fs::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  std::unique_ptr<Weftd> b = StartWeftd(dir.path(), "b", Conninfo(*old_primary, *standby));
  INFO("--- b ---\n" << Tail(b->AllLogs(), 4000));
  REQUIRE(WaitFor([&] { return b->Log().find(refusal) != std::string::npos; }, 20s));
  const std::string log = b->Log();
  CHECK(log.find("is a primary of the same database cluster on timeline 2") != std::string::npos);
  CHECK(log.find("Fence " + old_where) != std::string::npos);
  CHECK(Role(*b) == "follower");

  // A weftd that lists the promoted server first leads there, with the next epoch.
  fs::create_directories(dir.path() / "c" / "data");
  fs::copy(a->data() / "keys", dir.path() / "c" / "data" / "keys", fs::copy_options::recursive);
  std::unique_ptr<Weftd> c = StartWeftd(dir.path(), "c", Conninfo(*standby, *old_primary));
  INFO("--- c ---\n" << Tail(c->AllLogs(), 4000));
  REQUIRE(WaitFor([&] { return Role(*c) == "leader"; }, 20s));
  CHECK(c->TryCall("tenant.create", {{"name", "after"}}).ok());
  Result<std::string> epoch = standby->Query("SELECT epoch FROM weft_leader");
  REQUIRE(epoch.ok());
  CHECK(*epoch == "2");
  // It warns that the old primary must be fenced, and leads on.
  CHECK(WaitFor([&] { return c->Log().find("is a primary on timeline 1, older than timeline 2") != std::string::npos; },
                20s));

  // On the old primary nobody took over again, and nothing was written there after the promotion.
  CHECK(Role(*a) == "follower");
  CHECK(Role(*b) == "follower");
  epoch = old_primary->Query("SELECT epoch FROM weft_leader");
  REQUIRE(epoch.ok());
  CHECK(*epoch == "1");
  Result<std::string> after = old_primary->Query("SELECT count(*) FROM tenants WHERE name = 'after'");
  REQUIRE(after.ok());
  CHECK(*after == "0");
  // The weftd on the old primary send clients to the leader on the promoted one.
  CHECK(WaitFor([&] { return NamedLeader(*b) == "c" && NamedLeader(*a) == "c"; }, 20s));

  // a saw timeline 2 and recorded it in its data directory: started again with
  // only the old primary in its conninfo, where no other server can be asked,
  // it still refuses to lead there.
  a->Stop();
  a->SetExtraToml("[store]\nbackend = \"postgres\"\nconninfo = " +
                  json("host=" + old_primary->dir().string() + " port=5432 user=postgres dbname=postgres").dump() +
                  "\n[leader]\nnode = \"a\"\nlease_ms = 2000\npoll_ms = 100\ntimeline_check_ms = 200\n");
  REQUIRE(a->Start().ok());
  REQUIRE(WaitFor([&] { return a->Log().find("but this weftd saw the same database cluster") != std::string::npos; },
                  20s));
  CHECK(a->Log().find(refusal) != std::string::npos);
  CHECK(a->Log().find("on timeline 2 at " + new_where) != std::string::npos);
  CHECK(Role(*a) == "follower");
  epoch = old_primary->Query("SELECT epoch FROM weft_leader");
  REQUIRE(epoch.ok());
  CHECK(*epoch == "1");
}

// A follower's last round of the check can predate the promotion (rounds
// run every timeline_check_ms, here once an hour): it took over on the old
// primary when the leader died. A takeover now waits for a round of its own.
TEST_CASE("timeline: a follower whose last round predates the promotion does not take over on the old primary",
          "[failover][integration]") {
  TempDir dir("timeline-stale-round");
  Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg1");
  if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
  std::unique_ptr<PostgresServer> old_primary = std::move(*started);
  started = PostgresServer::StartStandby(*old_primary, dir.path() / "pg2");
  if (!started.ok()) FAIL("cannot start the standby: " << started.status().message());
  std::unique_ptr<PostgresServer> standby = std::move(*started);

  const std::int64_t hour = 3'600'000;
  std::unique_ptr<Weftd> a = StartWeftd(dir.path(), "a", Conninfo(*old_primary, *standby), hour);
  REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 20s));
  fs::create_directories(dir.path() / "b" / "data");
  fs::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  std::unique_ptr<Weftd> b = StartWeftd(dir.path(), "b", Conninfo(*old_primary, *standby), hour);
  INFO("--- a ---\n" << Tail(a->AllLogs(), 3000) << "--- b ---\n" << Tail(b->AllLogs(), 4000));
  REQUIRE(WaitFor([&] { return Role(*b) == "follower"; }, 20s));

  // Promoted while the old primary runs on; then the leader dies and its lock is free.
  REQUIRE(standby->Promote().ok());
  a->Kill();
  const std::string old_where = old_primary->dir().string() + ":5432";
  const std::string refusal = "must not lead on the PostgreSQL at " + old_where + ": it is a primary on timeline 1";
  REQUIRE(WaitFor([&] { return b->Log().find(refusal) != std::string::npos; }, 30s));
  CHECK(Role(*b) == "follower");
  Result<std::string> epoch = old_primary->Query("SELECT epoch FROM weft_leader");
  REQUIRE(epoch.ok());
  CHECK(*epoch == "1");
}

}  // namespace
}  // namespace weft
