// /metrics of the real weftd and weft-host: the text passes `promtool check
// metrics`, its values agree with server.status and `weft job show`, and a
// real Prometheus on loopback scrapes both and answers the same through its
// HTTP API. weftd, weft-host (with the fake plugins) and Prometheus run on
// ephemeral loopback ports in a temp directory.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/web.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::Host;
using testing::Process;
using testing::RunResult;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

using testing::HttpReply;

// GET http://HOST:PORT<path> on a fresh connection; status 0 when it could not connect.
HttpReply HttpGet(const std::string& host_port, const std::string& path) {
  try {
    return testing::HttpSend("http://" + host_port, "GET", path);
  } catch (const std::exception&) {
    return HttpReply{};
  }
}

// "http://127.0.0.1:4711/metrics" -> "127.0.0.1:4711"
std::string HostPort(const std::string& url) {
  const std::size_t scheme = url.find("//");
  const std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 2);
  return rest.substr(0, rest.find('/'));
}

// The value of one sample line (`name{labels}` exactly as rendered); nullopt when absent.
std::optional<double> Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

// The sum of every sample of `name` whose labels contain `having` (a `k="v"` pair; "" for all).
double SumOf(const std::string& text, const std::string& name, const std::string& having) {
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0 || line.find(having) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// A query string's value: every byte but letters and digits as %XX.
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%%%02X", c);
    out += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(hex);
  }
  return out;
}

// The family names of a text exposition ("# TYPE <name> <type>" lines).
std::set<std::string> Families(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("# TYPE ", 0) == 0) out.insert(line.substr(7, line.find(' ', 7) - 7));
  return out;
}

// `promtool check metrics` on `text`; its exit code and what it said.
RunResult Promtool(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path file = dir / (name + ".prom");
  testing::WriteFile(file, text);
  return testing::Run("/bin/sh", {"-c", "promtool check metrics < '" + file.string() + "' 2>&1"});
}

// weftd with fast jobs, one weft-host with the fake plugins, a catalog with the fake services.
struct Env {
  explicit Env(const std::string& name)
      : dir(name),
        server(testing::WeftdOptions{.dir = dir.path(),
                                     .extra_toml = "[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
                                                   "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n",
                                     .cli_timeout = 90s}),
        host(testing::HostOptions{.dir = dir.path(),
                                  .id = "h1",
                                  .server = server.provisioner(),
                                  .capacity = 4,
                                  .workers = 2,
                                  .shutdown_grace_ms = 1000}) {
    CatalogDir catalog(dir.path() / "catalog");
    catalog.PatchActions("", "", {{"latency_ms", 5}});
    // Each nginx INSTALL fails its first attempt, so the job retries.
    catalog.PatchActions("fake-nginx", "install", {{"fail_actions", "INSTALL"}, {"fail_attempts", 1}});
    RunResult r = server.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }

  std::string WeftdMetricsUrl() const { return server.endpoints().value("metrics", std::string()); }
  // The address weft-host wrote to its state directory once its listener was up.
  std::string HostMetricsUrl() const {
    std::string url;
    WaitFor(
        [&] {
          const json j = json::parse(testing::ReadFile(host.dir() / "state" / "metrics.json"), nullptr, false);
          if (j.is_object()) url = j.value("metrics", std::string());
          return !url.empty();
        },
        30s);
    return url;
  }
  // Creates a 3-node cluster and waits for it; `weft job show` of its job.
  json CreateCluster(const std::string& name) {
    RunResult r =
        server.Weft({"-o", "json", "cluster", "create", name, "--template", "web-fake", "--size", "3", "--wait"});
    INFO(r.out << r.err << Tail(server.Log()) << Tail(host.Log()));
    REQUIRE(r.exit_code == 0);
    const json reply = json::parse(r.out, nullptr, false);
    REQUIRE(reply.is_object());
    const json& job = reply["job"];  // -o json with --wait: {"job"}
    REQUIRE(job["status"] == "succeeded");
    json shown = server.WeftJson({"job", "show", job["id"].get<std::string>()});
    INFO("weft job show: " << shown.dump().substr(0, 4000));
    REQUIRE(shown.contains("job"));
    REQUIRE(shown["job"].contains("tasks"));
    REQUIRE(shown["job"].contains("finished_at_ms"));
    return shown["job"];
  }

  TempDir dir;
  Weftd server;
  Host host;
};

// The tasks of a job that a host ran (every task with a plugin), and their attempts.
std::int64_t PluginTasks(const json& job) {
  std::int64_t n = 0;
  for (const json& t : job["tasks"]) n += t.value("plugin", std::string()).empty() ? 0 : 1;
  return n;
}
std::int64_t Attempts(const json& job) {
  std::int64_t n = 0;
  for (const json& t : job["tasks"])
    if (!t.value("plugin", std::string()).empty()) n += t.value("attempt", 0);
  return n;
}

}  // namespace

TEST_CASE("metrics: weftd's and weft-host's /metrics pass promtool and agree with server.status and job show",
          "[metrics][integration]") {
  Env env("weft-metrics");
  const std::string weftd_url = env.WeftdMetricsUrl();
  INFO("endpoints.json: " << env.server.endpoints().dump());
  REQUIRE(weftd_url.rfind("http://127.0.0.1:", 0) == 0);
  const std::string host_url = env.HostMetricsUrl();
  INFO(Tail(env.host.Log()));
  REQUIRE(host_url.rfind("http://127.0.0.1:", 0) == 0);
  // The host's workers are counted from their start, before any task.
  std::string idle_host;
  const bool counted = WaitFor(
      [&] {
        idle_host = HttpGet(HostPort(host_url), "/metrics").body;
        return Sample(idle_host, "weft_host_worker_processes") == 2.0;
      },
      30s);
  INFO(idle_host);
  CHECK(counted);
  CHECK(Sample(idle_host, "weft_host_tasks_in_flight") == 0.0);

  const json job = env.CreateCluster("web");
  const std::int64_t tasks = PluginTasks(job);
  const std::int64_t attempts = Attempts(job);
  REQUIRE(attempts > tasks);  // the nginx installs were retried

  // weftd publishes the state it owns about once a second: wait until the
  // scrape shows what server.status says, then compare every figure.
  std::string text;
  json status;
  const bool agreed = WaitFor(
      [&] {
        HttpReply r = HttpGet(HostPort(weftd_url), "/metrics");
        text = r.body;
        status = env.server.Call("server.status", json::object());
        return r.status == 200 &&
               Sample(text, "weft_tasks_ended{state=\"succeeded\"}") == status["tasks"]["succeeded"].get<double>() &&
               Sample(text, "weft_hosts_live") == status["hosts"]["live"].get<double>() &&
               Sample(text, "weft_jobs_finished_total{operation=\"create\",outcome=\"succeeded\"}") == 1.0;
      },
      30s);
  INFO(text);
  REQUIRE(agreed);
  CHECK(Sample(text, "weft_hosts_registered") == status["hosts"]["registered"].get<double>());
  CHECK(Sample(text, "weft_tasks_ended{state=\"failed\"}") == status["tasks"]["failed"].get<double>());
  CHECK(Sample(text, "weft_api_requests_total{op=\"cluster.create\",outcome=\"ok\"}") == 1.0);
  CHECK(Sample(text, "weft_clusters{status=\"active\",tenant=\"default\"}") == 1.0);
  CHECK(Sample(text, "weft_nodes{status=\"active\",tenant=\"default\"}") == 3.0);
  CHECK(Sample(text, "weft_cluster_creation_seconds_count") == 1.0);
  const double seconds =
      static_cast<double>(job["finished_at_ms"].get<std::int64_t>() - job["created_at_ms"].get<std::int64_t>()) /
      1000.0;
  CHECK(std::fabs(Sample(text, "weft_cluster_creation_seconds_sum").value_or(-1) - seconds) < 1e-9);
  // Every attempt the host finished was timed from taken to finished, and counted for the host.
  CHECK(SumOf(text, "weft_task_run_seconds_count", "") == static_cast<double>(attempts));
  CHECK(Sample(text, "weft_host_tasks_finished_total{host=\"h1\"}") == static_cast<double>(attempts));
  CHECK(Sample(text, "weft_task_retries_total") == static_cast<double>(attempts - tasks));
  CHECK(Sample(text, "weft_store_commits_total").value_or(0) > 0);
  CHECK(Sample(text, "process_open_fds").value_or(0) > 0);
  RunResult check = Promtool(env.dir.path(), "weftd", text);
  INFO("promtool on weftd's metrics: " << check.out);
  CHECK(check.exit_code == 0);

  HttpReply host = HttpGet(HostPort(host_url), "/metrics");
  REQUIRE(host.status == 200);
  INFO(host.body);
  CHECK(SumOf(host.body, "weft_host_tasks_total", "outcome=\"succeeded\"") == static_cast<double>(tasks));
  CHECK(SumOf(host.body, "weft_host_tasks_total", "outcome=\"failed\"") == static_cast<double>(attempts - tasks));
  CHECK(Sample(host.body, "weft_host_capacity_threads") == 4.0);
  CHECK(Sample(host.body, "weft_host_worker_processes") == 2.0);
  check = Promtool(env.dir.path(), "weft-host", host.body);
  INFO("promtool on weft-host's metrics: " << check.out);
  CHECK(check.exit_code == 0);

  // Anything but GET /metrics is refused.
  CHECK(HttpGet(HostPort(weftd_url), "/").status == 404);

  // docs/metrics.md explains every family either process serves, and the
  // example dashboard asks only for families that exist.
  std::set<std::string> families = Families(text);
  families.merge(Families(host.body));
  const std::string doc = testing::ReadFile(fs::path(WEFT_SOURCE_DIR) / "docs" / "metrics.md");
  for (const std::string& name : families) {
    INFO("family " << name);
    CHECK((doc.find("`" + name + "`") != std::string::npos || name.rfind("process_", 0) == 0));
  }
  const std::string dashboard = testing::ReadFile(fs::path(WEFT_SOURCE_DIR) / "examples" / "grafana-dashboard.json");
  static const std::regex metric(R"(\b(weft_[a-z_]+|process_[a-z_]+)\b)");
  int asked = 0;
  for (std::sregex_iterator it(dashboard.begin(), dashboard.end(), metric), end; it != end; ++it) {
    std::string name = (*it)[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (name.size() > std::strlen(suffix) && name.ends_with(suffix) && !families.count(name))
        name.resize(name.size() - std::strlen(suffix));
    ++asked;
    INFO("the dashboard asks for " << name);
    CHECK(families.count(name) == 1);
  }
  CHECK(asked > 20);
}

TEST_CASE("metrics: weftd and weft-host keep their metrics ports across a restart, so a scrape configuration stays "
          "valid",
          "[metrics][integration]") {
  Env env("weft-metrics-port");
  const std::string weftd_before = env.WeftdMetricsUrl();
  REQUIRE(weftd_before.rfind("http://127.0.0.1:", 0) == 0);
  env.server.Restart();
  CHECK(env.WeftdMetricsUrl() == weftd_before);

  const std::string before = env.HostMetricsUrl();
  REQUIRE(before.rfind("http://127.0.0.1:", 0) == 0);
  const fs::path file = env.host.dir() / "state" / "metrics.json";
  const json first = json::parse(testing::ReadFile(file));
  REQUIRE(env.host.Stop() == 0);
  env.host.Start();
  // The new process wrote its address (its pid tells the file apart from the old one's).
  json again;
  REQUIRE(WaitFor(
      [&] {
        again = json::parse(testing::ReadFile(file), nullptr, false);
        return again.is_object() && again.value("pid", 0) != first.value("pid", 0);
      },
      30s));
  INFO(Tail(env.host.Log()));
  CHECK(again.value("metrics", std::string()) == before);
  CHECK(HttpGet(HostPort(before), "/metrics").status == 200);
}

TEST_CASE("metrics: with [metrics] enabled = false weftd serves none, and weft-host none with metrics_listen empty",
          "[metrics][integration]") {
  TempDir dir("weft-metrics-off");
  Weftd server(testing::WeftdOptions{.dir = dir.path(), .extra_toml = "[metrics]\nenabled = false\n"});
  CHECK_FALSE(server.endpoints().contains("metrics"));
  Host host(testing::HostOptions{.dir = dir.path(),
                                 .id = "h1",
                                 .server = server.provisioner(),
                                 .extra_toml = "metrics_listen = \"\"\n"});
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  CHECK_FALSE(fs::exists(host.dir() / "state" / "metrics.json"));
}

TEST_CASE("metrics: an idle weftd serves 0 for the gauges of tasks, running jobs, clusters and nodes, and for its "
          "counters of requests and jobs",
          "[metrics][integration]") {
  // A dashboard's sum over a gauge with no series shows "No data", not 0.
  TempDir dir("weft-metrics-idle");
  Weftd server(testing::WeftdOptions{.dir = dir.path()});
  const std::string url = HostPort(server.endpoints()["metrics"].get<std::string>());
  std::string text;
  // The first scrape asks the reactor for its snapshot; wait until one is published.
  const bool published = WaitFor(
      [&] {
        text = HttpGet(url, "/metrics").body;
        return Sample(text, "weft_hosts_registered").has_value();
      },
      30s);
  INFO(text);
  REQUIRE(published);
  for (const char* state : {"queued", "leased"})
    CHECK(Sample(text, "weft_tasks{state=\"" + std::string(state) + "\",tenant=\"default\"}") == 0.0);
  for (const char* operation : {"create", "delete", "scale", "undo"}) {
    CHECK(Sample(text, "weft_jobs_running{operation=\"" + std::string(operation) + "\"}") == 0.0);
    for (const char* outcome : {"succeeded", "failed", "aborted"})
      CHECK(Sample(text, "weft_jobs_finished_total{operation=\"" + std::string(operation) + "\",outcome=\"" +
                             outcome + "\"}") == 0.0);
  }
  // Every op's requests by outcome start at 0 too (counters, so that rate() sees the first ones).
  for (const char* op : {"cluster.create", "session.login", "task.take", "unknown"})
    for (const char* outcome : {"ok", "invalid", "denied", "unavailable", "internal"})
      CHECK(Sample(text, "weft_api_requests_total{op=\"" + std::string(op) + "\",outcome=\"" + outcome + "\"}") ==
            0.0);
  for (const char* status : {"pending", "active", "stopped", "incomplete", "inconsistent", "terminated"}) {
    const std::string labels = "{status=\"" + std::string(status) + "\",tenant=\"default\"}";
    CHECK(Sample(text, "weft_clusters" + labels) == 0.0);
    CHECK(Sample(text, "weft_nodes" + labels) == 0.0);
  }
  RunResult check = Promtool(dir.path(), "weftd", text);
  INFO("promtool: " << check.out);
  CHECK(check.exit_code == 0);
}

TEST_CASE("metrics: failed and crashed tasks are counted by weftd and by the host that ran them, crashes by kind",
          "[metrics][integration]") {
  TempDir dir("weft-metrics-crash");
  Weftd server(testing::WeftdOptions{.dir = dir.path()});
  const fs::path plugins = fs::path(WEFT_BUILD_DIR) / "plugins";
  Host host(testing::HostOptions{.dir = dir.path(),
                                 .id = "h1",
                                 .server = server.provisioner(),
                                 .capacity = 2,
                                 .workers = 2,
                                 .plugin_dirs = {plugins / "crashers", plugins / "automators"}});
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  const std::string weftd_url = server.endpoints().value("metrics", std::string());
  std::string host_url;
  REQUIRE(WaitFor(
      [&] {
        const json j = json::parse(testing::ReadFile(host.dir() / "state" / "metrics.json"), nullptr, false);
        if (j.is_object()) host_url = j.value("metrics", std::string());
        return !host_url.empty();
      },
      30s));

  // A fake task that fails, and two crashers.
  const std::int64_t failing =
      server.Enqueue({{"plugin", "fake-automator"},
                      {"action", "INSTALL"},
                      {"max_attempts", 1},
                      {"payload", {{"service", {{"action", {{"fields", {{"fail_actions", "INSTALL"}}}}}}}}}});
  const std::int64_t segv =
      server.Enqueue({{"plugin", "crash-segv"}, {"action", "INSTALL"}, {"max_attempts", 1}, {"node_id", "n1"}});
  const std::int64_t exits =
      server.Enqueue({{"plugin", "crash-exit"}, {"action", "CONFIGURE"}, {"max_attempts", 1}, {"node_id", "n2"}});
  for (std::int64_t id : {failing, segv, exits}) server.WaitTaskState(id, "failed", 60s);

  std::string weftd_text, host_text;
  const bool counted = WaitFor(
      [&] {
        weftd_text = HttpGet(HostPort(weftd_url), "/metrics").body;
        host_text = HttpGet(HostPort(host_url), "/metrics").body;
        return Sample(weftd_text, "weft_tasks_ended{state=\"failed\"}") == 3.0 &&
               Sample(host_text, "weft_host_tasks_total{plugin=\"crash-exit\",outcome=\"crashed\"}") == 1.0;
      },
      30s);
  INFO(weftd_text);
  INFO(host_text);
  REQUIRE(counted);
  // The master reports the crashed workers' tasks as failed finishes of its host.
  CHECK(Sample(weftd_text, "weft_host_tasks_finished_total{host=\"h1\"}") == 3.0);
  CHECK(Sample(host_text, "weft_host_tasks_total{plugin=\"fake-automator\",outcome=\"failed\"}") == 1.0);
  CHECK(Sample(host_text, "weft_host_tasks_total{plugin=\"crash-segv\",outcome=\"crashed\"}") == 1.0);
  CHECK(Sample(host_text, "weft_host_plugin_crashes_total{kind=\"SIGSEGV\"}") == 1.0);
  CHECK(Sample(host_text, "weft_host_plugin_crashes_total{kind=\"exit\"}") == 1.0);
  CHECK(Sample(host_text, "weft_host_plugin_crashes_total{kind=\"SIGABRT\"}") == 0.0);
}

TEST_CASE("metrics: weft-host counts resource cache hits, misses and the bytes it fetched and keeps",
          "[metrics][integration]") {
  TempDir dir("weft-metrics-cache");
  Weftd server(testing::WeftdOptions{.dir = dir.path(), .cli_timeout = 60s});
  Host host(testing::HostOptions{.dir = dir.path(),
                                 .id = "h1",
                                 .server = server.provisioner(),
                                 .plugin_dirs = {fs::path(WEFT_BUILD_DIR) / "plugins" / "resource-fixtures"}});
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 30s));
  const std::string content = "a resource of forty bytes, more or less\n";
  testing::WriteFile(dir.path() / "hello.txt", content);
  for (std::vector<std::string> args : {std::vector<std::string>{"resource", "upload", "resource-echo", "hello.txt",
                                                                 (dir.path() / "hello.txt").string()},
                                        {"resource", "stage", "resource-echo", "hello.txt", "1"},
                                        {"resource", "sync"}}) {
    RunResult r = server.Weft(args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  // Two tasks name the version: the second finds it cached (the first, or the host's pre-fetch, fetched it).
  for (int i = 0; i < 2; ++i) {
    const std::int64_t id = server.Enqueue({{"plugin", "resource-echo"}, {"action", "INSTALL"}, {"max_attempts", 1}});
    server.WaitTaskState(id, "succeeded", 60s);
  }
  std::string url;
  REQUIRE(WaitFor(
      [&] {
        const json j = json::parse(testing::ReadFile(host.dir() / "state" / "metrics.json"), nullptr, false);
        if (j.is_object()) url = j.value("metrics", std::string());
        return !url.empty();
      },
      30s));
  const std::string text = HttpGet(HostPort(url), "/metrics").body;
  INFO(text);
  CHECK(Sample(text, "weft_host_resource_cache_hits_total").value_or(0) >= 1.0);
  CHECK(Sample(text, "weft_host_resource_cache_misses_total").value_or(0) >= 1.0);
  // Fetched at least once (twice only if the pre-fetch and the first task raced), and kept once.
  const double fetched = Sample(text, "weft_host_resource_fetched_bytes_total").value_or(0);
  CHECK((fetched == static_cast<double>(content.size()) || fetched == 2.0 * static_cast<double>(content.size())));
  CHECK(Sample(text, "weft_host_resource_cache_bytes") == static_cast<double>(content.size()));
}

TEST_CASE("metrics: requests refused by the api rate limit are counted", "[metrics][integration]") {
  TempDir dir("weft-metrics-rate");
  Weftd server(testing::WeftdOptions{.dir = dir.path(), .security_toml = "api_rate_per_s = 1\napi_burst = 2\n"});
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    Result<json> r = server.TryCall("server.status", json::object());
    if (!r.ok()) {
      INFO(r.status().message());
      CHECK(r.status().message().find("rate limit") != std::string::npos);
      ++refused;
    }
  }
  REQUIRE(refused > 0);
  const std::string text = HttpGet(HostPort(server.endpoints()["metrics"].get<std::string>()), "/metrics").body;
  INFO(text);
  CHECK(Sample(text, "weft_api_rate_limited_total") == static_cast<double>(refused));
}

TEST_CASE(
    "metrics: a real Prometheus scrapes weftd and weft-host and its API returns the job counters and the "
    "cluster creation histogram that job show gives",
    "[metrics][integration][slow]") {
  Env env("weft-metrics-prom");
  const std::string weftd_target = HostPort(env.WeftdMetricsUrl());
  const std::string host_target = HostPort(env.HostMetricsUrl());

  // A free loopback port for Prometheus's own web listener.
  int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(probe);
  const std::string prometheus = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  const fs::path dir = env.dir.path() / "prometheus";
  fs::create_directories(dir / "data");
  testing::WriteFile(dir / "prometheus.yml",
                     "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                     "scrape_configs:\n"
                     "  - job_name: weftd\n    static_configs:\n      - targets: ['" +
                         weftd_target +
                         "']\n"
                         "  - job_name: weft-host\n    static_configs:\n      - targets: ['" +
                         host_target + "']\n");
  testing::ProcessOptions logged;
  logged.stdout_path = logged.stderr_path = dir / "prometheus.log";
  Process prom("/usr/bin/prometheus",
               {"--config.file=" + (dir / "prometheus.yml").string(), "--storage.tsdb.path=" + (dir / "data").string(),
                "--web.listen-address=" + prometheus},
               logged);
  const auto prom_log = [&] { return Tail(testing::ReadFile(dir / "prometheus.log")); };
  INFO(prom_log());
  REQUIRE(WaitFor([&] { return HttpGet(prometheus, "/-/ready").status == 200; }, 60s));

  // One instant query's value; nullopt until the series exists.
  const auto query = [&](const std::string& promql) -> std::optional<double> {
    const json reply =
        json::parse(HttpGet(prometheus, "/api/v1/query?query=" + UrlEncode(promql)).body, nullptr, false);
    if (!reply.is_object() || reply.value("status", "") != "success") return std::nullopt;
    const json& result = reply["data"]["result"];
    if (!result.is_array() || result.empty()) return std::nullopt;
    return std::stod(result[0]["value"][1].get<std::string>());
  };
  const std::string finished = "weft_jobs_finished_total{job=\"weftd\",operation=\"create\",outcome=\"succeeded\"}";
  const std::string created = "weft_api_requests_total{job=\"weftd\",op=\"cluster.create\",outcome=\"ok\"}";
  // Before anything happened Prometheus has the counters, at 0: an increment
  // of a series that appears only then would be lost to rate() and increase().
  REQUIRE(WaitFor([&] { return query(finished) == 0.0 && query(created) == 0.0; }, 60s));

  const json job = env.CreateCluster("web");
  const double seconds =
      static_cast<double>(job["finished_at_ms"].get<std::int64_t>() - job["created_at_ms"].get<std::int64_t>()) /
      1000.0;
  const std::int64_t tasks = PluginTasks(job);

  const std::string host_tasks = "sum(weft_host_tasks_total{job=\"weft-host\",outcome=\"succeeded\"})";
  // The job has ended: these counts are final.
  const json status = env.server.Call("server.status", json::object());
  const double succeeded = status["tasks"]["succeeded"].get<double>();
  // Prometheus has the values once it scraped after the job ended. Counters are
  // read when scraped; the gauges of the reactor's snapshot may be a second or
  // so older, so the first scrape after the job may not have them yet.
  const bool scraped = WaitFor(
      [&] {
        return query(finished) == 1.0 && query("weft_cluster_creation_seconds_count") == 1.0 &&
               query(host_tasks) == static_cast<double>(tasks) &&
               query("weft_tasks_ended{state=\"succeeded\"}") == succeeded;
      },
      60s);
  INFO(prom_log());
  CHECK(scraped);
  CHECK(query(finished) == 1.0);
  // So the documented rates see the first job and the first request after a start.
  CHECK(query("increase(" + finished + "[5m])").value_or(0) > 0.5);
  CHECK(query("sum by (op, outcome) (rate(" + created + "[5m]))").value_or(0) > 0);
  CHECK(query("weft_jobs_running{operation=\"create\"}").value_or(0) == 0.0);
  CHECK(query("weft_cluster_creation_seconds_count") == 1.0);
  CHECK(std::fabs(query("weft_cluster_creation_seconds_sum").value_or(-1) - seconds) < 1e-6);
  // The bucket that holds the creation time counts it; the one below does not.
  CHECK(query("weft_cluster_creation_seconds_bucket{le=\"+Inf\"}") == 1.0);
  CHECK(query(host_tasks) == static_cast<double>(tasks));
  CHECK(query("weft_tasks_ended{state=\"succeeded\"}") == succeeded);
  CHECK(query("up{job=\"weftd\"}") == 1.0);
  CHECK(query("up{job=\"weft-host\"}") == 1.0);

  // Every query of the example dashboard is valid PromQL that Prometheus evaluates.
  const json dashboard =
      json::parse(testing::ReadFile(fs::path(WEFT_SOURCE_DIR) / "examples" / "grafana-dashboard.json"));
  int exprs = 0;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel.value("targets", json::array())) {
      std::string expr = target["expr"].get<std::string>();
      for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
               {"$weftd_job", "weftd"}, {"$host_job", "weft-host"}, {"$__rate_interval", "1m"}})
        for (std::size_t at; (at = expr.find(var)) != std::string::npos;) expr.replace(at, var.size(), value);
      const json reply =
          json::parse(HttpGet(prometheus, "/api/v1/query?query=" + UrlEncode(expr)).body, nullptr, false);
      INFO("panel '" << panel.value("title", "") << "': " << expr << " -> " << reply.dump());
      CHECK((reply.is_object() && reply.value("status", "") == "success"));
      ++exprs;
    }
  }
  CHECK(exprs > 20);
}

}  // namespace weft
