// Retention in a real weftd (server/daemon/retention.cpp): the audit log's
// opt-in age, and SQLite's space given back to the file system after a
// round; `weftd --vacuum` switching an older store to incremental vacuum,
// under the data directory's lock.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/store_rows.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"
#include "support/metrics_text.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::BuildPath;
using weft::testing::CountRows;
using weft::testing::Run;
using weft::testing::RunResult;
using weft::testing::MetricValue;
using weft::testing::ScrapeMetrics;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;
using weft::testing::WeftdOptions;

namespace {

// Waits up to 20 s for `query` to count `want` rows; the last count.
int WaitForRows(const Weftd& s, const std::string& query, int want) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  int n = CountRows(s, query);
  while (n != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    n = CountRows(s, query);
  }
  return n;
}

// Runs `sql` on the SQLite file beside weftd (as an operator's sqlite3 would).
void Sqlite(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
  sqlite3_busy_timeout(h, 10000);
  char* error = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(h);
  INFO(message);
  REQUIRE(rc == SQLITE_OK);
}

std::int64_t SqliteInt(const fs::path& db, const std::string& query) {
  sqlite3* h = nullptr;
  sqlite3_stmt* st = nullptr;
  std::int64_t v = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(h, query.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

// server.status's retention.store, once the first round published it.
json StoreSpace(Weftd& s) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (true) {
    const json r = s.Call("server.status", json::object())["retention"];
    if (r.contains("store") || std::chrono::steady_clock::now() > deadline) return r.value("store", json::object());
    std::this_thread::sleep_for(100ms);
  }
}

}  // namespace

TEST_CASE("retention: weftd keeps the audit log by default and removes old entries once audit_after_ms is set",
          "[retention]") {
  TempDir dir("retention-audit-daemon");
  WeftdOptions options;
  options.dir = dir.path();
  options.extra_toml = "[retention]\ninterval_ms = 100\n";
  Weftd s(options);
  for (const char* tenant : {"acme", "globex"}) s.Call("tenant.create", {{"name", tenant}});
  const std::string audited = "SELECT COUNT(*) FROM audit_log WHERE op = 'tenant.create'";
  REQUIRE(CountRows(s, audited) == 2);
  // The default: rounds run (every 100 ms here), the log stays whole.
  std::this_thread::sleep_for(1500ms);
  CHECK(CountRows(s, audited) == 2);
  CHECK(s.Call("server.status", json::object())["retention"]["audit_after_ms"] == 0);

  // Opted in: what is older than the age goes, what is newer stays.
  s.Stop();
  s.SetExtraToml("[retention]\ninterval_ms = 100\naudit_after_ms = 4000\n");
  REQUIRE(s.Start().ok());
  s.Call("tenant.create", {{"name", "initech"}});
  CHECK(WaitForRows(s, "SELECT COUNT(*) FROM audit_log WHERE op = 'tenant.create' AND target LIKE '%acme%'", 0) == 0);
  // globex's came a moment after acme's: a round may fall between the two.
  CHECK(WaitForRows(s, "SELECT COUNT(*) FROM audit_log WHERE op = 'tenant.create' AND target LIKE '%globex%'", 0) == 0);
  CHECK(CountRows(s, "SELECT COUNT(*) FROM audit_log WHERE op = 'tenant.create' AND target LIKE '%initech%'") == 1);
  // Counted once weftd learns its commit went through (with PostgreSQL, a moment after the rows are gone).
  json status;
  const bool counted = WaitFor(
      [&] {
        status = s.Call("server.status", json::object());
        return status["retention"]["removed"]["audit"].get<std::int64_t>() >= 2;
      },
      10s);
  INFO(status["retention"].dump());
  CHECK(counted);
  CHECK(status["retention"]["audit_after_ms"] == 4000);
  // audit.list shows what is left.
  const json listed = s.Call("audit.list", json::object());
  bool initech = false;
  for (const json& e : listed["entries"]) {
    CHECK(e.dump().find("acme") == std::string::npos);
    initech = initech || e.dump().find("initech") != std::string::npos;
  }
  CHECK(initech);
}

TEST_CASE("retention: weftd gives a SQLite store's free pages back after a round, and weftd --vacuum switches an "
          "older store",
          "[retention][sqlite]") {
  TempDir dir("retention-vacuum-daemon");
  WeftdOptions options;
  options.dir = dir.path();
  options.store = "sqlite";
  options.extra_toml = "[retention]\ninterval_ms = 200\naudit_after_ms = 60000\nbatch_rows = 2000\n";
  Weftd s(options);
  const fs::path db = s.db();
  REQUIRE(SqliteInt(db, "PRAGMA auto_vacuum") == 2);  // a new store is incremental
  // Old audit entries, large, written beside weftd: several MiB that retention removes.
  Sqlite(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000) "
             "INSERT INTO audit_log (at_ms, actor, actor_tenant, actor_role, op, tenant, outcome, detail) "
             "SELECT 1000 + i, 'filler', 'default', 'user', 'test.fill', 'default', 'ok', "
             "'{\"pad\":\"' || hex(randomblob(500)) || '\"}' FROM n");
  const std::int64_t pages_full = SqliteInt(db, "PRAGMA page_count");
  REQUIRE(pages_full > 1000);
  // Gone, and the space with it: the free list is emptied step by step.
  CHECK(WaitForRows(s, "SELECT COUNT(*) FROM audit_log WHERE op = 'test.fill'", 0) == 0);
  json store;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    std::this_thread::sleep_for(200ms);
    const json status = s.Call("server.status", json::object());
    store = status["retention"].value("store", json::object());
  } while ((store.value("free_pages", -1) != 0 || store.value("pages", pages_full) >= pages_full / 2) &&
           std::chrono::steady_clock::now() < deadline);
  INFO(store.dump() << " of " << pages_full << " pages");
  CHECK(store["auto_vacuum"] == "incremental");
  CHECK(store["free_pages"] == 0);
  CHECK(store["pages"].get<std::int64_t>() < pages_full / 2);
  CHECK(s.Call("server.status", json::object())["retention"]["removed"]["freed_pages"].get<std::int64_t>() >
        pages_full / 2);
  // weft status says so.
  RunResult shown = s.Weft({"status"});
  CHECK_THAT(shown.out, Catch::Contains(" free, counted ") && Catch::Contains("ago (auto_vacuum incremental)"));
  s.Stop();
  CHECK(static_cast<std::int64_t>(fs::file_size(db)) < pages_full * 4096 / 2);

  // An older store (no auto_vacuum) keeps its free pages until one VACUUM.
  TempDir old_dir("retention-vacuum-old");
  const fs::path data = old_dir / "data";
  fs::create_directories(data);
  Sqlite(data / "weft.db", "PRAGMA auto_vacuum = NONE; PRAGMA journal_mode = WAL; CREATE TABLE before_weft (a)");
  WeftdOptions old_options;
  old_options.dir = old_dir.path();
  old_options.store = "sqlite";
  old_options.extra_toml = "[retention]\ninterval_ms = 100\n";
  Weftd old(old_options);
  CHECK(StoreSpace(old).value("auto_vacuum", "") == "none");
  // Refused while weftd runs: it holds the data directory.
  const std::string weftd_bin = BuildPath("bin/weftd").string();
  RunResult busy = Run(weftd_bin, {"--data-dir", data.string(), "--vacuum"});
  CHECK(busy.exit_code == 1);
  CHECK(SqliteInt(data / "weft.db", "PRAGMA auto_vacuum") == 0);
  old.Stop();
  RunResult vacuumed = Run(weftd_bin, {"--data-dir", data.string(), "--vacuum"});
  INFO(vacuumed.out << vacuumed.err);
  CHECK(vacuumed.exit_code == 0);
  CHECK_THAT(vacuumed.out, Catch::Contains("auto_vacuum is incremental"));
  CHECK(SqliteInt(data / "weft.db", "PRAGMA auto_vacuum") == 2);
  REQUIRE(old.Start().ok());
  CHECK(StoreSpace(old).value("auto_vacuum", "") == "incremental");
}


TEST_CASE("retention: /metrics exports the SQLite store's pages and free pages and what retention removed, as they "
          "move",
          "[retention][sqlite][metrics]") {
  TempDir dir("retention-metrics");
  WeftdOptions options;
  options.dir = dir.path();
  options.store = "sqlite";
  // The first round runs as weftd starts, the next 5 s later: the filler below is
  // in, and seen, before a round removes it.
  options.extra_toml = "[retention]\ninterval_ms = 5000\naudit_after_ms = 60000\nbatch_rows = 2000\n";
  Weftd s(options);
  const fs::path db = s.db();
  Sqlite(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
             "INSERT INTO audit_log (at_ms, actor, actor_tenant, actor_role, op, tenant, outcome, detail) "
             "SELECT 1000 + i, 'filler', 'default', 'user', 'test.fill', 'default', 'ok', "
             "'{\"pad\":\"' || hex(randomblob(500)) || '\"}' FROM n");
  const std::int64_t pages_full = SqliteInt(db, "PRAGMA page_count");
  REQUIRE(pages_full > 500);
  // The file as it is now, before a round removed the filler.
  std::string text;
  REQUIRE(WaitFor(
      [&] { return MetricValue(text = ScrapeMetrics(s), "weft_store_pages") >= static_cast<double>(pages_full); },
      20s));
  INFO(text);
  CHECK(MetricValue(text, "weft_store_page_size_bytes") == static_cast<double>(SqliteInt(db, "PRAGMA page_size")));
  CHECK(MetricValue(text, "weft_retention_removed_total{kind=\"audit\"}") == 0);
  const double freed_before = MetricValue(text, "weft_store_freed_pages_total");  // the first round's (a page or so)
  CHECK(freed_before >= 0);
  // Removed, then the free pages it left given back: every figure moves.
  double removed = 0, free_pages = -1, freed = 0, pages = -1;
  const bool moved = WaitFor(
      [&] {
        text = ScrapeMetrics(s);
        removed = MetricValue(text, "weft_retention_removed_total{kind=\"audit\"}");
        free_pages = MetricValue(text, "weft_store_free_pages");
        freed = MetricValue(text, "weft_store_freed_pages_total");
        pages = MetricValue(text, "weft_store_pages");
        return removed >= 3000 && free_pages == 0 && pages < static_cast<double>(pages_full) / 2;
      },
      30s);
  INFO("removed " << removed << ", free " << free_pages << ", freed " << freed << ", pages " << pages << " of "
                  << pages_full);
  CHECK(moved);
  CHECK(freed - freed_before > static_cast<double>(pages_full) / 2);
  CHECK(MetricValue(text, "weft_retention_removed_total{kind=\"tasks\"}") == 0);
}
