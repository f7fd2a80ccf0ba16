// weft-bench api: how many requests per second weftd's api endpoint answers
// from N programs at once (a weft_client each), against what lies under it.
//
// One weftd (fresh data directory, durable SQLite store, loopback TCP, no
// per-connection rate limit, metrics on). Each of R runs measures for MS each,
// in five slices alternated with those of the other measurements (a shared
// machine's load changes within a second):
//   * reads: `hardwaretype.get` of one stored entity from N threads, against N
//     DEALER threads doing raw ZeroMQ round trips with a ROUTER that only
//     echoes (the same baseline as the dispatch case). Target ratio >= 0.5.
//   * writes: `hardwaretype.put` of a new entity per call from N threads. A put
//     is answered after the group commit of the reactor turn that handled it,
//     so the clients' puts share commits. Against it, a raw SQLite loop
//     inserting the same entity rows into the same table (its schema read from
//     weftd's store, the store's pragmas) in transactions of as many rows as
//     weftd's commits held in that run (puts / commits, from /metrics). weftd
//     does more per put than the loop: it validates the document, looks up the
//     entity's last version and appends an audit record.
// Medians over the runs are printed, one JSON line for reads, one for writes;
// a line's ratio is the median of the runs' ratios.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "support/web.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::bench {
namespace {

using json = nlohmann::json;

constexpr double kTargetReadRatio = 0.5;
constexpr const char* kReadName = "bench-read";
constexpr int kSlices = 5;

struct Options {
  int clients = 8;
  int ms = 1000;
  int runs = 3;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench api: %s\n"
               "usage: weft-bench api [--clients N] [--ms MS] [--runs R]\n"
               "  --clients N  client threads, one weft_client each (default 8)\n"
               "  --ms MS      length of each measurement, in 5 alternated slices (default 1000)\n"
               "  --runs R     repetitions; medians are reported (default 3)\n",
               problem.c_str());
  return 2;
}

json Hardwaretype(const std::string& name) {
  return json{{"name", name},
              {"description", "weft-bench api"},
              {"providermap", {{"fake", {{"flavor", "fake-small"}}}}}};
}

// Runs `call(thread, n)` (the n-th call of that thread) from `threads` threads
// for `ms`, all released at once; calls per second, or the first failure.
template <typename Call>
Result<double> Rate(zmq::context_t& ctx, const std::string& api, int threads, int ms, Call call) {
  std::atomic<long> done{0};
  std::atomic<bool> stop{false};
  std::mutex error_mu;
  Status first_error;
  std::barrier ready(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      client::Client c(ctx, client::Options{.endpoint = api, .timeout_ms = 10000, .tenant = "", .limits = {}});
      ready.arrive_and_wait();
      long n = 0;
      while (!stop) {
        Status s = call(c, t, n);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (first_error.ok()) first_error = s;
          stop = true;
          break;
        }
        ++n;
      }
      done += n;
    });
  }
  ready.arrive_and_wait();
  const auto start = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  stop = true;
  for (auto& t : pool) t.join();
  if (!first_error.ok()) return first_error;
  return static_cast<double>(done.load()) / std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// weftd's group commits so far, from its /metrics.
Result<double> Commits(const std::string& metrics_url) {
  const std::size_t path = metrics_url.find('/', metrics_url.find("//") + 2);
  testing::HttpReply reply = testing::HttpSend(metrics_url.substr(0, path), "GET", metrics_url.substr(path));
  const std::string key = "\nweft_store_commits_total ";
  const std::size_t at = reply.body.find(key);
  if (reply.status != 200 || at == std::string::npos)
    return Status::Internal("weftd's /metrics has no weft_store_commits_total");
  return std::stod(reply.body.substr(at + key.size()));
}

// A SQLite handle closed when it goes out of scope.
struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
  Status Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) == SQLITE_OK) return Status::Ok();
    std::string message = error ? error : sqlite3_errmsg(db);
    sqlite3_free(error);
    return Status::Internal("SQLite: " + message + " (" + sql + ")");
  }
};

// The catalog's table as weftd's store made it: its CREATE statements, indexes included.
Result<std::vector<std::string>> CatalogSchema(const fs::path& store) {
  Db src;
  if (sqlite3_open_v2(store.c_str(), &src.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return Status::Internal("cannot open " + store.string());
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(src.db,
                         "SELECT sql FROM sqlite_master WHERE tbl_name = 'catalog_entities' AND sql IS NOT NULL "
                         "ORDER BY type DESC",  // the table before its indexes
                         -1, &st, nullptr) != SQLITE_OK)
    return Status::Internal(std::string("cannot read the schema: ") + sqlite3_errmsg(src.db));
  std::vector<std::string> out;
  while (sqlite3_step(st) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  if (out.empty()) return Status::Internal("weftd's store has no catalog_entities table");
  return out;
}

// Rows per second a raw SQLite loop inserts in transactions of `batch` rows
// for `ms`, into a fresh file with the store's schema and pragmas.
Result<double> SqliteRows(const std::vector<std::string>& schema, const fs::path& file, int batch, int ms,
                          const std::string& document) {
  Db db;
  if (sqlite3_open(file.c_str(), &db.db) != SQLITE_OK) return Status::Internal("cannot open " + file.string());
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=NORMAL"));
  for (const std::string& create : schema) WEFT_RETURN_IF_ERROR(db.Exec(create));
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db.db,
                         "INSERT INTO catalog_entities (tenant, kind, name, version, json, created_at_ms, deleted) "
                         "VALUES (?1, ?2, ?3, 1, ?4, ?5, 0)",
                         -1, &raw, nullptr) != SQLITE_OK)
    return Status::Internal(std::string("cannot prepare the insert: ") + sqlite3_errmsg(db.db));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> insert(raw, sqlite3_finalize);
  long rows = 0;
  const auto start = SteadyClock::now();
  const auto until = start + std::chrono::milliseconds(ms);
  while (SteadyClock::now() < until) {
    WEFT_RETURN_IF_ERROR(db.Exec("BEGIN"));
    for (int i = 0; i < batch; ++i, ++rows) {
      const std::string name = "w" + std::to_string(rows);
      const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
      sqlite3_bind_text(insert.get(), 1, "default", -1, SQLITE_STATIC);
      sqlite3_bind_text(insert.get(), 2, "hardwaretype", -1, SQLITE_STATIC);
      sqlite3_bind_text(insert.get(), 3, name.c_str(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(insert.get(), 4, document.c_str(), static_cast<int>(document.size()), SQLITE_STATIC);
      sqlite3_bind_int64(insert.get(), 5, now_ms);
      if (sqlite3_step(insert.get()) != SQLITE_DONE)
        return Status::Internal(std::string("insert failed: ") + sqlite3_errmsg(db.db));
      sqlite3_reset(insert.get());
    }
    WEFT_RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  return static_cast<double>(rows) / std::chrono::duration<double>(SteadyClock::now() - start).count();
}

struct Figures {
  std::vector<double> reads, raw, writes, rows_per_commit, sqlite;
  std::vector<double> read_ratios, write_ratios;  // per run: both sides measured in the same slices
};

// A run: `kSlices` short measurements of each side, alternated (reads, raw
// round trips, puts, SQLite), so that both sides of a ratio see the same
// machine, which on a shared one changes from second to second.
Status OneRun(zmq::context_t& ctx, testing::Weftd& weftd, const fs::path& scratch, const Options& o, int run,
              Figures* f) {
  const std::string api = weftd.api();
  const int slice_ms = std::max(20, o.ms / kSlices);
  // A read's request header, about as large as the ones weft_client sends.
  const std::string payload = R"({"v":1,"id":"1234567890-17","op":"hardwaretype.get","tenant":"","body":{"name":")" +
                              std::string(kReadName) + R"("}})";
  const std::string metrics = weftd.endpoints().value("metrics", std::string());
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> schema, CatalogSchema(weftd.db()));
  double reads = 0, raw = 0, writes = 0, sqlite = 0;
  long puts_all = 0;
  double commits_all = 0;
  std::string document;
  for (int slice = 0; slice < kSlices; ++slice) {
    WEFT_ASSIGN_OR_RETURN(double r, Rate(ctx, api, o.clients, slice_ms, [](client::Client& c, int, long) {
                            return c.Call("hardwaretype.get", json{{"name", kReadName}}).status();
                          }));
    WEFT_ASSIGN_OR_RETURN(double rt, RawRoundTrips(ctx, o.clients, slice_ms, payload));

    WEFT_ASSIGN_OR_RETURN(double commits_before, Commits(metrics));
    const std::string prefix = "w" + std::to_string(run) + "-" + std::to_string(slice) + "-";
    std::atomic<long> puts{0};
    WEFT_ASSIGN_OR_RETURN(double w, Rate(ctx, api, o.clients, slice_ms, [&](client::Client& c, int t, long n) {
                            const std::string name = prefix + std::to_string(t) + "-" + std::to_string(n);
                            Status st = c.Call("hardwaretype.put", Hardwaretype(name)).status();
                            if (st.ok()) ++puts;
                            return st;
                          }));
    WEFT_ASSIGN_OR_RETURN(double commits_after, Commits(metrics));
    puts_all += puts.load();
    commits_all += std::max(1.0, commits_after - commits_before);
    if (document.empty()) {
      // The document exactly as weftd stored it.
      WEFT_ASSIGN_OR_RETURN(json stored, weftd.TryCall("hardwaretype.get", json{{"name", prefix + "0-0"}}));
      if (!stored.contains("entity")) return Status::Internal("hardwaretype.get's reply has no entity");
      document = wire::Dump(stored["entity"]);
    }
    const int batch = std::max(1, static_cast<int>(std::lround(static_cast<double>(puts.load()) /
                                                                std::max(1.0, commits_after - commits_before))));
    const fs::path file = scratch / ("rows-" + std::to_string(run) + "-" + std::to_string(slice) + ".db");
    WEFT_ASSIGN_OR_RETURN(double rows, SqliteRows(schema, file, batch, slice_ms, document));
    reads += r / kSlices;
    raw += rt / kSlices;
    writes += w / kSlices;
    sqlite += rows / kSlices;
  }
  const double per_commit = static_cast<double>(puts_all) / commits_all;
  std::fprintf(stderr,
               "run %d/%d: reads %.0f/s, raw round trips %.0f/s; puts %.0f/s (%.1f per commit), SQLite %.0f rows/s "
               "in batches as large\n",
               run + 1, o.runs, reads, raw, writes, per_commit, sqlite);
  f->reads.push_back(reads);
  f->raw.push_back(raw);
  f->writes.push_back(writes);
  f->rows_per_commit.push_back(per_commit);
  f->sqlite.push_back(sqlite);
  f->read_ratios.push_back(raw > 0 ? reads / raw : 0.0);
  f->write_ratios.push_back(sqlite > 0 ? writes / sqlite : 0.0);
  return Status::Ok();
}

double Round3(double v) { return std::round(v * 1000) / 1000; }

int Api(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      Usage("measures weftd's api requests/s against raw ZeroMQ round trips and SQLite's batched inserts");
      return 0;
    }
    if (i + 1 >= args.size()) return Usage("'" + a + "' needs a value");
    const std::string& v = args[++i];
    const bool ok = a == "--clients" ? ParseInt(v, 1, 256, &o.clients)
                    : a == "--ms"    ? ParseInt(v, 100, 600000, &o.ms)
                    : a == "--runs"  ? ParseInt(v, 1, 100, &o.runs)
                                     : false;
    if (!ok) return Usage("bad option " + a + " " + v);
  }
  Result<Paths> paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench api: %s\n", paths.status().message().c_str());
    return 1;
  }
  ScratchDir scratch("weft-bench-api");
  testing::WeftdOptions wo = BenchWeftd(paths->weftd, scratch.path() / "weftd");
  wo.security_toml = "api_rate_per_s = 0\n";  // the clients are programs as fast as they can be
  testing::Weftd weftd(wo, testing::Weftd::Deferred{});
  if (Status st = StartWeftd(weftd); !st.ok()) {
    std::fprintf(stderr, "weft-bench api: %s\n", st.message().c_str());
    return 1;
  }
  Figures f;
  try {
    zmq::context_t ctx(1);
    Result<json> seeded = weftd.TryCall("hardwaretype.put", Hardwaretype(kReadName));
    if (!seeded.ok()) {
      std::fprintf(stderr, "weft-bench api: %s\n", seeded.status().message().c_str());
      return 1;
    }
    for (int r = 0; r < o.runs; ++r) {
      Status s = OneRun(ctx, weftd, scratch.path(), o, r, &f);
      if (!s.ok()) {
        std::fprintf(stderr, "weft-bench api: %s (weftd log: %s)\n", s.message().c_str(),
                     Tail(weftd.LogPath(), 600).c_str());
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench api: %s\n", e.what());
    return 1;
  }
  const double reads = Median(f.reads), raw = Median(f.raw), writes = Median(f.writes), sqlite = Median(f.sqlite);
  nlohmann::ordered_json line;
  line["bench"] = "api";
  line["mode"] = "reads";
  line["clients"] = o.clients;
  line["runs"] = o.runs;
  line["requests_per_s"] = std::llround(reads);
  line["raw_roundtrips_per_s"] = std::llround(raw);
  line["ratio"] = Round3(Median(f.read_ratios));
  line["target_ratio"] = kTargetReadRatio;
  std::printf("%s\n", line.dump().c_str());
  line = nlohmann::ordered_json();
  line["bench"] = "api";
  line["mode"] = "writes";
  line["clients"] = o.clients;
  line["runs"] = o.runs;
  line["puts_per_s"] = std::llround(writes);
  line["puts_per_commit"] = std::round(Median(f.rows_per_commit) * 10) / 10;
  line["sqlite_rows_per_s"] = std::llround(sqlite);
  line["ratio"] = Round3(Median(f.write_ratios));
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace

WEFT_BENCH("api", "weftd api reads/s vs raw ZeroMQ round trips; catalog puts/s vs SQLite batched inserts", Api);

}  // namespace weft::bench
