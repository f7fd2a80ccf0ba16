// weftd (SQLite) whose data directory is on a small file system that fills up:
// a tmpfs mounted on the data directory, filled by a file beside the store, as
// an operator's disk fills. Clients are told that the disk is full, where, and
// what to do; the log says so once, not once per rolled-back batch; weft
// status and /metrics show it; once space is freed commits land again without
// a restart. A weftd started on the full disk says the disk is full, not
// "disk I/O error".
//
// Mounting needs root (CI runs as root): without it every case says so in one
// line and exits 77, which ctest shows as skipped.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"
#include "support/metrics_text.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::MetricValue;
using weft::testing::ScrapeMetrics;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;
using weft::testing::WeftdOptions;

namespace {

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt

// A tmpfs of `bytes` mounted on `at` while the object lives (the case exits 77 when it cannot be mounted).
class SmallDisk {
 public:
  SmallDisk(fs::path at, std::size_t bytes) : at_(std::move(at)) {
    fs::create_directories(at_);
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
    if (::mount("tmpfs", at_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      std::cout << "SKIPPED: cannot mount a tmpfs on " << at_.string() << " (" << std::strerror(errno)
                << "): this test needs root (CI runs it as root)" << std::endl;
      std::exit(kSkipped);
    }
  }
  ~SmallDisk() { (void)::umount2(at_.c_str(), MNT_DETACH); }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  // Writes a file there until the file system has no byte left.
  void Fill() {
    const int fd = ::open((at_ / "filler").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    REQUIRE(fd >= 0);
    const std::vector<char> chunk(64 * 1024, 'x');
    for (std::size_t size = chunk.size(); size > 0; size /= 2)
      while (::write(fd, chunk.data(), size) == static_cast<ssize_t>(size)) {
      }
    ::close(fd);
    REQUIRE(fs::space(at_).available == 0);
  }
  void Free() { fs::remove(at_ / "filler"); }

 private:
  fs::path at_;
};

// debug.enqueue of `n` tasks with a payload of `pad` bytes each: more than the
// WAL file holds already, so that its commit must grow it.
json BigEnqueue(int n, std::size_t pad) {
  json tasks = json::array();
  for (int i = 0; i < n; ++i)
    tasks.push_back({{"plugin", "p"}, {"action", "CREATE"}, {"payload", {{"pad", std::string(pad, 'a' + i % 26)}}}});
  return {{"tasks", std::move(tasks)}};
}


int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

WeftdOptions OnSmallDisk(const TempDir& dir) {
  WeftdOptions options;
  options.dir = dir.path();
  options.store = "sqlite";
  return options;
}

}  // namespace

TEST_CASE("disk full: clients are told the disk is full and what to do, the log says it once, weft status and "
          "metrics show it, and commits land again once space is freed",
          "[diskfull]") {
  TempDir dir("diskfull");
  SmallDisk disk(dir / "data", 24u << 20);  // the data directory, not weftd's log beside it
  Weftd s(OnSmallDisk(dir));
  const std::string data = s.data().string();
  s.Enqueue({{"plugin", "p"}, {"action", "CREATE"}});
  const std::string before = ScrapeMetrics(s);
  const double commits_before = MetricValue(before, "weft_store_commits_total");
  REQUIRE(commits_before > 0);
  CHECK(MetricValue(before, "weft_store_commit_failures_total{reason=\"disk_full\"}") == 0);
  CHECK(s.Call("server.status", json::object())["store"].value("health", json::object()).value("state", "") == "ok");

  disk.Fill();
  constexpr int kFailed = 5;
  for (int i = 0; i < kFailed; ++i) {
    weft::Result<json> r = s.TryCall("debug.enqueue", BigEnqueue(200, 4000));
    REQUIRE_FALSE(r.ok());
    INFO(r.status().ToString());
    CHECK(r.status().code() == weft::Code::kUnavailable);
    CHECK_THAT(r.status().message(), Catch::StartsWith("weftd cannot write its store: the disk holding " + data +
                                                       " is full (statvfs: "));
    CHECK_THAT(r.status().message(), Catch::EndsWith("; free space there, then retry"));
  }
  // weft status says so first, with since when and how many batches were rolled back.
  const json status = s.Call("server.status", json::object());
  const json health = status["store"].value("health", json::object());
  INFO(health.dump());
  CHECK(health.value("state", "") == "failing");
  CHECK(health.value("disk_full", false));
  CHECK(health.value("batches_rolled_back", 0) >= kFailed);
  CHECK(health.value("requests_rolled_back", 0) >= kFailed);
  CHECK(health.value("since_ms", std::int64_t{0}) > 0);
  CHECK_THAT(health.value("last_failure", ""), Catch::StartsWith("the disk holding " + data + " is full"));
  const weft::testing::RunResult cli = s.Weft({"status"});
  INFO(cli.out + cli.err);
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.out, Catch::StartsWith("WARNING") && Catch::Contains("weftd cannot commit to its store: FAILING") &&
                          Catch::Contains("the disk holding " + data + " is full"));
  // /metrics: the failures by reason; the commits only those that landed; the
  // rolled-back requests not counted ok.
  const std::string during = ScrapeMetrics(s);
  CHECK(MetricValue(during, "weft_store_commit_failures_total{reason=\"disk_full\"}") >= kFailed);
  CHECK(MetricValue(during, "weft_api_requests_total{op=\"debug.enqueue\",outcome=\"unavailable\"}") == kFailed);
  CHECK(MetricValue(during, "weft_api_requests_total{op=\"debug.enqueue\",outcome=\"ok\"}") == 1);
  // The log said it once with its cause (a line a minute at most after that), not once per batch.
  const std::string log = s.Log();
  INFO(weft::testing::Tail(log));
  CHECK(Occurrences(log, "the store cannot commit: the disk holding " + data + " is full") == 1);
  CHECK(Occurrences(log, "rolled back:") == 0);
  CHECK(Occurrences(log, "the store still cannot commit") <= 1);

  disk.Free();
  const json ids = s.Call("debug.enqueue", BigEnqueue(200, 4000));
  CHECK(ids["task_ids"].size() == 200);
  // Failures have ended once a commit lands a while after the last one (StoreHealth::kQuietMs).
  const auto health_now = [&] { return s.Call("server.status", json::object())["store"].value("health", json::object()); };
  REQUIRE(WaitFor([&] { return health_now().value("state", "") == "ok"; }, 60s));
  const json after = health_now();
  CHECK(after.contains("recovered_at_ms"));
  CHECK_THAT(s.Log(), Catch::Contains("the store commits again, after "));
  const std::string landed = ScrapeMetrics(s);
  CHECK(MetricValue(landed, "weft_api_requests_total{op=\"debug.enqueue\",outcome=\"ok\"}") == 2);
  CHECK(MetricValue(landed, "weft_store_commits_total") > commits_before);
  CHECK_THAT(s.Weft({"status"}).out, Catch::Contains("store health") && !Catch::Contains("WARNING"));
}

TEST_CASE("disk full: weftd started on a full disk says the disk is full and where, not disk I/O error",
          "[diskfull]") {
  TempDir dir("diskfull-start");
  SmallDisk disk(dir / "data", 8u << 20);
  Weftd s(OnSmallDisk(dir));
  s.Enqueue({{"plugin", "p"}, {"action", "CREATE"}});
  REQUIRE(s.Stop() == 0);
  disk.Fill();
  const weft::testing::RunResult r =
      weft::testing::Run(weft::testing::BuildPath("bin/weftd"), {"--config", s.Path("weftd.toml").string()});
  INFO(r.out + r.err);
  CHECK(r.exit_code == 1);
  const std::string data = s.data().string();
  CHECK_THAT(r.err, Catch::Contains("cannot open the store " + s.db().string() + ": the disk holding " + data +
                                    " is full (statvfs: 0 bytes free"));
  CHECK_THAT(r.err, Catch::Contains("free space there"));
  CHECK_THAT(r.err, !Catch::Contains("disk I/O error"));
  // Once there is room again it starts on the same store.
  disk.Free();
  s.Restart();
  CHECK(s.Call("server.status", json::object())["store"].value("health", json::object()).value("state", "") == "ok");
}
