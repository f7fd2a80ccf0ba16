// weftd on PostgreSQL when PostgreSQL goes away for a moment: the real weftd,
// weft-host (fake plugins) and weft, and a throwaway PostgreSQL restarted
// (a fast shutdown, as `pg_ctl restart -m fast` does) while a job runs.
#include <chrono>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/postgres.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::CatalogDir;
using weft::testing::Host;
using weft::testing::RunResult;
using weft::testing::Tail;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::size_t Succeeded(const json& job) {
  std::size_t n = 0;
  for (const json& t : job["tasks"]) n += t["state"] == "succeeded" ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("postgres store: PostgreSQL restarted while a job runs: weftd waits, says so once, and the job finishes",
          "[store][postgres]") {
  TempDir dir("pg-restart");
  Weftd server(weft::testing::WeftdOptions{
      .dir = dir.path(),
      .extra_toml = "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n[hosts]\nheartbeat_ms = 200\n"
                    "silent_after_ms = 5000\n",
      .cli_timeout = 60s,
      .store = "postgres"});
  Host host({.dir = dir.path(), .id = "h1", .server = server.provisioner(), .capacity = 4, .workers = 2,
             .shutdown_grace_ms = 1000});
  CatalogDir catalog(dir / "catalog");
  // Slow enough tasks that the job is still running when PostgreSQL goes away.
  catalog.PatchActions("", "", {{"latency_ms", 150}});
  catalog.PatchProvider({{"latency_ms", 150}});
  REQUIRE(server.Weft({"catalog", "import", catalog.path().string()}).exit_code == 0);

  RunResult created = server.Weft({"-o", "json", "cluster", "create", "web", "--template", "web-fake", "--size", "3"});
  INFO(created.out << created.err);
  REQUIRE(created.exit_code == 0);
  const std::string job_id = json::parse(created.out)["job"]["id"].get<std::string>();
  REQUIRE(WaitFor([&] { return Succeeded(server.Job(job_id)) >= 2; }, 60s));
  REQUIRE(server.Job(job_id, false)["status"] == "running");

  const pid_t weftd = server.pid();
  const auto restarted = server.postgres()->Restart();
  INFO(server.postgres()->Log());
  REQUIRE(restarted.ok());

  const json job = server.WaitJob(job_id, 120s);
  INFO(Tail(server.Log()) << Tail(host.Log()));
  CHECK(job["status"] == "succeeded");
  for (const json& t : job["tasks"]) CHECK(t["state"] == "succeeded");
  CHECK(server.Cluster("web")["status"] == "active");
  // The same weftd all along. Which of its connections notices the restart first
  // decides what it says, once each: the store's (it lost PostgreSQL and waited
  // for it), or the leader election's (it stepped down and took over again).
  CHECK(server.process().running());
  CHECK(server.pid() == weftd);
  CHECK(server.starts() == 1);
  const std::string log = server.Log();
  if (Count(log, "stepped down") == 0) {
    CHECK(Count(log, "lost the connection to PostgreSQL") == 1);
    CHECK(Count(log, "the connection to PostgreSQL is back") == 1);
  } else {
    CHECK(Count(log, "stepped down") == 1);
    CHECK(Count(log, "took over as leader (epoch 2)") == 1);
  }
}

TEST_CASE("postgres store: weftd idle leaves no transaction open on PostgreSQL", "[store][postgres]") {
  TempDir dir("pg-idle");
  Weftd server(weft::testing::WeftdOptions{.dir = dir.path(), .extra_toml = "", .cli_timeout = 60s, .store = "postgres"});
  CatalogDir catalog(dir / "catalog");
  // Writes, each committed with nothing behind it: the transaction its COMMIT
  // began waits for a next turn, which does not come.
  for (int i = 0; i < 3; ++i) REQUIRE(server.Weft({"catalog", "import", catalog.path().string()}).exit_code == 0);
  // weftd's sessions in a transaction on the server.
  const auto open = [&] {
    return server.postgres()
        ->Query("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'weftd' AND xact_start IS NOT NULL")
        .value();
  };
  // weftd ends it before it sleeps.
  CHECK(WaitFor([&] { return open() == "0"; }, 10s));
  INFO(Tail(server.Log()));
  CHECK(server.process().running());
}
