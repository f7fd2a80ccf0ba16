// weft-web beside several weftd on one PostgreSQL (docs/failover.md): given
// their api endpoints and no events endpoint, it follows the events of
// whichever weftd leads, and tells its browsers to read their state again
// after a takeover. Real weftd, weft-web and a throwaway PostgreSQL.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "stream.hpp"
#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"

using namespace weft::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Weftd> StartWeftd(const TempDir& dir, const PostgresServer& pg, const std::string& node) {
  std::filesystem::create_directories(dir.path() / node);
  const std::string toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json(pg.conninfo()).dump() +
                           "\n[leader]\nnode = \"" + node + "\"\nlease_ms = 1000\npoll_ms = 100\n";
  return std::make_unique<Weftd>(WeftdOptions{.dir = dir.path() / node,
                                              .name = node,
                                              .extra_toml = toml,
                                              .store = "sqlite"});  // its [store] says postgres
}

std::string Role(Weftd& w) {
  weft::Result<json> s = w.TryCall("server.status", json::object(), 2000);
  if (!s.ok() || !s->contains("leadership")) return "";
  return (*s)["leadership"].value("role", std::string());
}

}  // namespace

TEST_CASE("weft-web follows the events of the weftd that leads, with a reset after a takeover",
          "[integration][failover]") {
  TempDir dir("web-failover");
  weft::Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir.path() / "pg");
  if (!started.ok()) FAIL("cannot start PostgreSQL: " << started.status().message());
  std::unique_ptr<PostgresServer> pg = std::move(*started);
  std::unique_ptr<Weftd> a = StartWeftd(dir, *pg, "a");
  REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 20s));
  // Every weftd on one database has the first one's keys (docs/failover.md).
  std::filesystem::create_directories(dir.path() / "b" / "data");
  std::filesystem::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys",
                        std::filesystem::copy_options::recursive);
  std::unique_ptr<Weftd> b = StartWeftd(dir, *pg, "b");
  REQUIRE(WaitFor([&] { return Role(*b) == "follower"; }, 20s));

  WebOptions o;
  o.name = "web-failover";
  o.require_login = false;
  o.api = a->api() + "," + b->api();
  o.weftd_toml = "timeout_ms = 2000\n";
  WebGateway web(*a, o);
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events").status == 200);
  FirstEvent(*a, events);

  a->Kill();
  INFO(web.Log());
  REQUIRE(WaitFor([&] { return Role(*b) == "leader"; }, 20s));
  // The same stream carries the new leader's events, after a reset.
  CHECK(ResetThenEvent(*b, events).type == "task");
  CHECK_THAT(web.Log(), Catch::Contains("following weftd's events at " + b->events()));
}
