// weft-bench jobs: the job engine end to end, with a real weftd and real
// weft-host processes running the fake plugins.
//
// Case "create": a cluster of N nodes (default 1,000) is created from a template
// whose services and provider have uneven latencies (different per action, plus
// a jitter fixed per task key). The job's makespan (job created -> finished, the
// server's clock) is compared with
//  * the critical-path lower bound: the longest path through the job's DAG
//    (`after` edges) where each task costs what its attempt really took
//    (taken_at -> finished_at; JOINs cost nothing). Target: ratio <= 1.2.
//  * a stage-barrier schedule of the same plan on the same weftd and hosts, right
//    after the job: the plan's stages (longest path from the roots, as
//    `cluster.plan` / `dry_run` reports them) are enqueued one at a time as raw
//    tasks (`debug.enqueue`) for the same plugins with the same knobs and the
//    same task keys, so the fake plugins wait exactly as long per task
//    (`jitter_by = "task_key"`); each stage starts when the previous one is done.
// Also reported: the critical path through what the fake plugins slept alone
// (nominal_critical_path_ms, read from their "fake: waits N ms" log lines), the
// sum of each stage's longest sleep (barrier_ideal_ms), the most tasks running
// at once, and how long tasks stayed ready before a host took them.
//
// Case "create10k" (only when named): a create of N nodes (default 10,000, about
// 80,000 tasks) with zero fake latency, after as many raw tasks (debug.enqueue,
// no job) through the same hosts and plugins: the job's tasks per second against
// the raw ones' is what the job engine costs on top of dispatch (target >= 0.5).
// weftd's peak RSS is reported (target <= 1 GiB).
//
// Case "clusters1000" (only when named): case "clusters" with 1,000 clusters and
// zero fake latency. --hog keeps a busy process on the second CPU meanwhile.
//
// Case "clusters": C clusters of S nodes (default 100 x 10) are created at once
// on a fresh weftd; the total time until every job is done is reported, and the
// latency of api reads (`cluster.list` and `job.get` with details, what
// `weft cluster list` and `weft job show` send) that one client issues in a loop
// meanwhile. Target: p99 < 50 ms.
//
// Both cases also say where the CPU went while they ran: weftd's CPU per task,
// the hosts' (the fake plugins poll for cancellation every 10 ms, so on one
// machine the hosts compete with weftd), and how long weftd's reactor thread was
// runnable but waiting for a CPU (reactor_runqueue_wait_ms): on a loaded machine
// that, not weftd's own work, is often what a slow read waited for.
//
// Binaries are found next to weft-bench (weftd, weft-host) and the fake plugins
// under <build>/plugins/. Every run has its own temporary directory, data dir and
// ephemeral loopback ports. One JSON line per case goes to stdout (medians over
// --runs where it says so); progress and per-run figures go to stderr.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

constexpr double kTargetRatio = 1.2;
constexpr double kTargetReadP99Ms = 50;
constexpr int kEnqueueBatch = 5000;  // debug.enqueue accepts up to 10,000
constexpr int kBarrierPollMs = 5;    // how often the barrier run asks whether a stage is done
constexpr int kJobPollMs = 50;       // how often a job's status is read while it runs
// How often case "clusters" asks whether any task is left (server.status), and
// once none is, lists the jobs to see whether all are done.
constexpr int kClustersPollMs = 500;
constexpr auto kJobDeadline = std::chrono::minutes(5);
constexpr const char* kTemplate = "bench";

struct Options {
  int nodes = 1000;
  int clusters = 100;
  int cluster_size = 10;
  int runs = 3;
  int hosts = 2;
  int capacity = 600;  // per host: runner threads, so tasks in flight
  int workers = 6;     // per host: worker processes sharing the capacity
  int read_gap_ms = 10;
  int submitters = 10;  // client threads issuing the cluster.create calls of case "clusters"
  int weftd_batch = 0;  // weftd's server.batch_max_messages; 0: its default
  int idle_spin_us = -1;  // weftd's server.idle_spin_us; -1: its default
  double latency_scale = 1.0;
  bool runs_set = false;     // --runs given: create10k repeats too (else once)
  bool latency_set = false;  // --latency-scale given: the new cases keep it instead of 0
  bool create_case = true;
  bool barrier = true;
  bool clusters_case = true;
  bool create10k_case = false;
  bool clusters1000_case = false;
  bool hog = false;  // a busy process on the second CPU while a case runs
  std::string window_hook;  // a shell command run as `HOOK start|stop PID` around each timed window
  std::string clusters_name = "clusters";
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench jobs: %s\n"
               "usage: weft-bench jobs [--nodes N] [--clusters C] [--cluster-size S] [--runs R]\n"
               "                       [--hosts H] [--capacity K] [--workers W] [--latency-scale X]\n"
               "                       [--read-gap-ms MS] [--weftd-batch N] [--idle-spin-us US]\n"
               "                       [--no-barrier] [--hog] [--window-hook CMD]\n"
               "                       [--only create|clusters|create10k|clusters1000]\n"
               "  --nodes N          nodes of the big create (default 1000)\n"
               "  --clusters C       clusters created at once in case \"clusters\" (default 100)\n"
               "  --cluster-size S   nodes per cluster there (default 10)\n"
               "  --runs R           repetitions of each case; medians are reported (default 3)\n"
               "  --hosts H          weft-host processes (default 2)\n"
               "  --capacity K       capacity (tasks in flight) per host (default 600)\n"
               "  --workers W        worker processes per host (default 6)\n"
               "  --latency-scale X  multiplies every fake latency and jitter (default 1.0)\n"
               "  --read-gap-ms MS   pause between two api reads of the reader (default 10)\n"
               "  --weftd-batch N    weftd's server.batch_max_messages (default: weftd's own, 256)\n"
               "  --idle-spin-us US  weftd's server.idle_spin_us (default: weftd's own, 200)\n"
               "  --only CASE        run only this case; create10k (a 10,000-node create against raw\n"
               "                     tasks through the same hosts) and clusters1000 (1,000 clusters of\n"
               "                     10 nodes at once) run only when named, with zero fake latency\n"
               "                     unless --latency-scale is given\n"
               "  --no-barrier       skip the stage-barrier run of case \"create\"\n"
               "  --hog              keep a busy-looping process on the second CPU while the cases run\n"
               "  --window-hook CMD  run `CMD start PID` as each timed window starts and `CMD stop PID` as it\n"
               "                     ends, PID weftd's (e.g. a script running callgrind_control -z / -d\n"
               "                     when weftd is a script exec'ing valgrind); the case waits for it\n",
               problem.c_str());
  return 2;
}

// Nearest-rank percentile (p in 0..100) of an unsorted sample.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Round1(double v) { return std::round(v * 10) / 10; }
double Round3(double v) { return std::round(v * 1000) / 1000; }

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double LoadAverage1m() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

// How long a thread ran and how long it was runnable but waited for a CPU
// (ns), from /proc/<pid>/task/<tid>/schedstat; zeros when unknown.
std::pair<std::int64_t, std::int64_t> ThreadSched(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat");
  std::int64_t run_ns = 0, wait_ns = 0;
  in >> run_ns >> wait_ns;
  return {run_ns, wait_ns};
}

wire::Limits BigReplies() {
  // A 1,000-node job with details, or its plan, is several MiB of JSON.
  wire::Limits limits;
  limits.max_header_bytes = std::size_t{256} << 20;
  limits.max_frame_bytes = std::size_t{256} << 20;
  limits.max_total_bytes = std::size_t{512} << 20;
  return limits;
}

std::unique_ptr<client::Client> NewClient(zmq::context_t& ctx, const std::string& endpoint, int timeout_ms) {
  return std::make_unique<client::Client>(
      ctx, client::Options{.endpoint = endpoint, .timeout_ms = timeout_ms, .tenant = "", .limits = BigReplies()});
}

// ---- the catalog ------------------------------------------------------------

// How long a fake action waits: latency_ms plus 0..jitter_ms fixed per task key.
struct Wait {
  int latency_ms;
  int jitter_ms;
};

// The provider's wait applies to CREATE and CONFIRM alike (one set of fields).
constexpr Wait kProviderWait{400, 1200};

struct ServiceAction {
  const char* service;
  const char* action;  // as the catalog spells it
  Wait wait;
};

// Uneven on purpose: a slow single database on the critical path, a fast and
// very jittery application tier on every other node, a small load balancer.
constexpr ServiceAction kServiceActions[] = {
    {"bench-base", "install", {300, 600}},   {"bench-base", "configure", {100, 200}},
    {"bench-db", "install", {1500, 500}},    {"bench-db", "configure", {200, 200}},
    {"bench-db", "initialize", {1000, 500}}, {"bench-db", "start", {500, 200}},
    {"bench-app", "install", {800, 1600}},   {"bench-app", "configure", {200, 400}},
    {"bench-app", "start", {300, 600}},      {"bench-lb", "install", {400, 400}},
    {"bench-lb", "configure", {100, 100}},   {"bench-lb", "start", {200, 200}},
};

json Knobs(Wait w, double scale) {
  return {{"latency_ms", std::llround(w.latency_ms * scale)},
          {"jitter_ms", std::llround(w.jitter_ms * scale)},
          {"jitter_by", "task_key"}};
}

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// The fields a task of the plan gets from the catalog: the provider's for
// provider actions, the service action's for service actions, none for
// BOOTSTRAP (it has no service, so the fake automator waits 0 ms).
json FieldsFor(const std::string& action, const std::string& service, double scale) {
  if (action == "CREATE" || action == "CONFIRM" || action == "DELETE") return Knobs(kProviderWait, scale);
  for (const ServiceAction& a : kServiceActions)
    if (service == a.service && Lower(action) == a.action) return Knobs(a.wait, scale);
  return json::object();
}

Status PutCatalog(client::Client& api, double scale) {
  std::vector<std::pair<std::string, json>> puts;
  puts.push_back({"provider.put",
                  {{"name", "bench"},
                   {"description", "weft-bench jobs: fake nodes with uneven create and confirm times"},
                   {"providertype", "fake-provider"},
                   {"provisioner", Knobs(kProviderWait, scale)}}});
  puts.push_back({"hardwaretype.put", {{"name", "bench-hw"}, {"providermap", {{"bench", {{"flavor", "f1"}}}}}}});
  puts.push_back({"imagetype.put",
                  {{"name", "bench-img"}, {"providermap", {{"bench", {{"image", "i1"}, {"sshuser", "root"}}}}}}});
  const std::map<std::string, json> dependencies = {
      {"bench-base", json::object()},
      {"bench-db", {{"install", {{"requires", {"bench-base"}}}}}},
      {"bench-app", {{"install", {{"requires", {"bench-base"}}}}, {"runtime", {{"requires", {"bench-db"}}}}}},
      {"bench-lb", {{"install", {{"requires", {"bench-base"}}}}, {"runtime", {{"requires", {"bench-app"}}}}}},
  };
  for (const auto& [service, deps] : dependencies) {
    json actions = json::object();
    for (const ServiceAction& a : kServiceActions)
      if (service == a.service) actions[a.action] = {{"type", "fake-automator"}, {"fields", Knobs(a.wait, scale)}};
    puts.push_back({"service.put", {{"name", service}, {"dependencies", deps}, {"provisioner", {{"actions", actions}}}}});
  }
  puts.push_back(
      {"clustertemplate.put",
       {{"name", kTemplate},
        {"description", "weft-bench jobs: one database, one load balancer, the application on every other node"},
        {"compatibility",
         {{"hardwaretypes", {"bench-hw"}},
          {"imagetypes", {"bench-img"}},
          {"services", {"bench-base", "bench-db", "bench-app", "bench-lb"}}}},
        {"defaults",
         {{"services", {"bench-base", "bench-db", "bench-app", "bench-lb"}},
          {"provider", "bench"},
          {"hardwaretype", "bench-hw"},
          {"imagetype", "bench-img"},
          {"config", json::object()}}},
        {"constraints",
         {{"size", {{"min", 3}, {"max", 100000}}},
          {"layout",
           {{"cantcoexist", json::array({json::array({"bench-db", "bench-app"}), json::array({"bench-lb", "bench-app"}),
                                         json::array({"bench-db", "bench-lb"})})}}},
          {"services",
           {{"bench-db", {{"quantities", {{"min", 1}, {"max", 1}}}}},
            {"bench-lb", {{"quantities", {{"min", 1}, {"max", 1}}}}}}}}}}});
  for (const auto& [op, body] : puts) {
    Result<json> r = api.Call(op, body);
    if (!r.ok()) return r.status().WithContext(op + " " + body.value("name", ""));
  }
  return Status::Ok();
}

// ---- weftd and its hosts ----------------------------------------------------

// weftd's [server] keys the bench sets.
std::string ServerToml(const Options& opts) {
  std::string toml;
  if (opts.weftd_batch > 0) toml += "batch_max_messages = " + std::to_string(opts.weftd_batch) + "\n";
  if (opts.idle_spin_us >= 0) toml += "idle_spin_us = " + std::to_string(opts.idle_spin_us) + "\n";
  return toml;
}

// weftd as the cases run it, given a minute to start: long enough for one run
// under a profiler (a weftd that is a script exec'ing valgrind) on a busy machine.
testing::WeftdOptions WeftdFor(const Paths& paths, const fs::path& dir, const Options& opts) {
  testing::WeftdOptions o = BenchWeftd(paths.weftd, dir, ServerToml(opts));
  o.start_timeout = std::chrono::seconds(60);
  return o;
}

// A fresh weftd, H weft-host processes and the bench catalog, in one temporary
// directory. Stops the hosts, then weftd, then removes the directory.
class Rig {
 public:
  Rig(zmq::context_t& ctx, const Paths& paths, const Options& opts)
      : ctx_(ctx),
        paths_(paths),
        opts_(opts),
        weftd_(WeftdFor(paths, dir_.path(), opts), testing::Weftd::Deferred{}) {}
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;
  ~Rig() {
    api_.reset();
    for (auto& h : hosts_) h->Stop(std::chrono::seconds(15));
    weftd_.Stop(std::chrono::seconds(15));
  }

  Status Start() {
    const fs::path plugins = dir_.path() / "plugins";
    std::error_code ec;
    fs::create_directories(plugins, ec);
    // Only the fake plugins: the hosts probe and load nothing else.
    fs::copy_file(paths_.provider_so, plugins / "fake_provider.so", ec);
    if (!ec) fs::copy_file(paths_.automator_so, plugins / "fake_automator.so", ec);
    if (ec) return Status::Internal("cannot copy the fake plugins into " + plugins.string() + ": " + ec.message());

    WEFT_RETURN_IF_ERROR(StartWeftd(weftd_));
    api_endpoint_ = weftd_.api();
    provisioner_ = weftd_.provisioner();
    api_ = NewClient(ctx_, api_endpoint_, 60000);
    std::fprintf(stderr, "  weftd pid %d in %s\n", weftd_.pid(), dir_.path().c_str());

    for (int i = 0; i < opts_.hosts; ++i) {
      hosts_.push_back(std::make_unique<testing::Host>(BenchHost(paths_.host, dir_.path(), "bench-host-" + std::to_string(i),
                                                                 provisioner_, opts_.capacity, opts_.workers, plugins,
                                                                 "warn")));
      hosts_.back()->Start();
    }
    WEFT_RETURN_IF_ERROR(WaitForHosts());
    WEFT_RETURN_IF_ERROR(PutCatalog(*api_, opts_.latency_scale));
    return WarmUp();
  }

  client::Client& api() { return *api_; }
  const std::string& api_endpoint() const { return api_endpoint_; }
  pid_t WeftdPid() const { return weftd_.pid(); }
  std::int64_t WeftdCpuNs() const { return weftd_.pid() > 0 ? TreeCpuNs(weftd_.pid()) : 0; }
  std::int64_t HostsCpuNs() const {
    std::int64_t total = 0;
    for (const auto& h : hosts_)
      if (h->process().pid() > 0) total += TreeCpuNs(h->process().pid());
    return total;
  }
  // weftd's peak resident memory so far (VmHWM), MiB; 0 when unknown.
  double WeftdPeakRssMib() const {
    std::ifstream in("/proc/" + std::to_string(weftd_.pid()) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024;
    return 0;
  }
  // weftd's reactor is its main thread.
  std::pair<std::int64_t, std::int64_t> ReactorSched() const {
    return weftd_.pid() > 0 ? ThreadSched(weftd_.pid(), weftd_.pid()) : std::pair<std::int64_t, std::int64_t>{0, 0};
  }
  // The end of each log, for an error message.
  std::string Logs() const {
    std::string out = "\n--- weftd log ends:\n" + Tail(weftd_.LogPath(), 1500);
    for (const auto& h : hosts_) out += "\n--- " + h->id() + " log ends:\n" + Tail(h->log(), 800);
    return out;
  }
  // Fails when weftd or a host is gone.
  Status Alive() {
    if (!weftd_.process().running()) return Status::Internal("weftd exited" + Logs());
    for (auto& h : hosts_)
      if (!h->process().running()) return Status::Internal(h->id() + " exited" + Logs());
    return Status::Ok();
  }

 private:
  Status WaitForHosts() {
    auto deadline = SteadyClock::now() + std::chrono::seconds(30);
    while (SteadyClock::now() < deadline) {
      WEFT_RETURN_IF_ERROR(Alive());
      Result<json> r = api_->Call("host.list", json::object());
      if (!r.ok()) return r.status().WithContext("host.list");
      int ready = 0;
      for (const json& h : (*r)["hosts"]) {
        const json plugins = h.value("plugins", json::array());
        auto has = [&](const char* type) { return std::find(plugins.begin(), plugins.end(), type) != plugins.end(); };
        ready += h.value("live", false) && has("fake-provider") && has("fake-automator");
      }
      if (ready == opts_.hosts) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::Timeout("the weft-host processes did not register both fake plugins within 30 s" + Logs());
  }

  // Instant tasks through every worker, so workers are up and plugins loaded
  // before anything is timed.
  Status WarmUp() {
    const int tasks = opts_.hosts * opts_.capacity;
    Result<json> before = api_->Call("server.status", json::object());
    if (!before.ok()) return before.status().WithContext("server.status");
    const std::int64_t base = (*before)["tasks"].value("succeeded", std::int64_t{0});
    json batch = json::array();
    for (int i = 0; i < tasks; ++i)
      batch.push_back({{"plugin", i % 2 ? "fake-provider" : "fake-automator"},
                       {"action", i % 2 ? "CREATE" : "INSTALL"},
                       {"node_id", "warmup-" + std::to_string(i)},
                       {"max_attempts", 1}});
    for (std::size_t first = 0; first < batch.size(); first += kEnqueueBatch) {
      json part(batch.begin() + static_cast<std::ptrdiff_t>(first),
                batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), first + kEnqueueBatch)));
      Result<json> r = api_->Call("debug.enqueue", {{"tasks", std::move(part)}});
      if (!r.ok()) return r.status().WithContext("debug.enqueue (warm-up)");
    }
    auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (SteadyClock::now() < deadline) {
      Result<json> s = api_->Call("server.status", json::object());
      if (!s.ok()) return s.status().WithContext("server.status");
      if ((*s)["tasks"].value("failed", std::int64_t{0}) > 0)
        return Status::Internal("a warm-up task failed" + Logs());
      if ((*s)["tasks"].value("succeeded", std::int64_t{0}) - base >= tasks) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::Timeout("the warm-up tasks did not finish within 60 s" + Logs());
  }

  ScratchDir dir_{"weft-bench-jobs"};  // first member: removed after the processes stopped
  zmq::context_t& ctx_;
  const Paths& paths_;
  const Options& opts_;
  testing::Weftd weftd_;
  std::vector<std::unique_ptr<testing::Host>> hosts_;
  std::string api_endpoint_;
  std::string provisioner_;
  std::unique_ptr<client::Client> api_;
};

// Where the CPU went during a timed window: weftd (all threads), its reactor
// thread's time waiting for a CPU while runnable (the machine's contention),
// and the weft-host processes with their workers.
struct CpuUse {
  double weftd_ms = 0;
  double reactor_ms = 0;
  double reactor_runqueue_wait_ms = 0;
  double hosts_ms = 0;
  double wall_ms = 0;
};

class CpuWindow {
 public:
  // `hook`: --window-hook, run before the window starts and before it stops.
  CpuWindow(const Rig& rig, const std::string& hook)
      : rig_(rig), hook_(hook), weftd_((RunHook("start"), rig.WeftdCpuNs())), reactor_(rig.ReactorSched()),
        hosts_(rig.HostsCpuNs()), start_(SteadyClock::now()) {}
  CpuUse Stop() const {
    RunHook("stop");
    const auto reactor = rig_.ReactorSched();
    CpuUse u;
    u.weftd_ms = static_cast<double>(rig_.WeftdCpuNs() - weftd_) / 1e6;
    u.reactor_ms = static_cast<double>(reactor.first - reactor_.first) / 1e6;
    u.reactor_runqueue_wait_ms = static_cast<double>(reactor.second - reactor_.second) / 1e6;
    u.hosts_ms = static_cast<double>(rig_.HostsCpuNs() - hosts_) / 1e6;
    u.wall_ms = MsSince(start_);
    return u;
  }

 private:
  void RunHook(const char* what) const {
    if (hook_.empty()) return;
    const std::string command = hook_ + " " + what + " " + std::to_string(rig_.WeftdPid());
    if (int rc = std::system(command.c_str()); rc != 0)
      std::fprintf(stderr, "  --window-hook: `%s` exited with status %d\n", command.c_str(), rc);
  }

  const Rig& rig_;
  const std::string& hook_;
  std::int64_t weftd_;
  std::pair<std::int64_t, std::int64_t> reactor_;
  std::int64_t hosts_;
  SteadyClock::time_point start_;
};

void PrintCpu(const CpuUse& u) {
  std::fprintf(stderr,
               "  CPU over %.1f s: weftd %.0f ms (reactor %.0f ms, and %.0f ms runnable but waiting for a CPU), "
               "hosts %.0f ms (%.2f cores); load average %.1f\n",
               u.wall_ms / 1000, u.weftd_ms, u.reactor_ms, u.reactor_runqueue_wait_ms, u.hosts_ms,
               u.hosts_ms / std::max(1.0, u.wall_ms), LoadAverage1m());
}

// Waits until job `job_id` is done; returns its summary. It polls the tenant's
// newest jobs rather than the cluster's: naming the cluster makes weftd read the
// cluster's spec and layout, megabytes for 10,000 nodes, twenty times a second.
// `on_poll` runs about once a second (progress lines).
Result<json> WaitForJob(Rig& rig, client::Client& api, const std::string& job_id, const std::function<void()>& on_poll) {
  const auto deadline = SteadyClock::now() + kJobDeadline;
  auto next_report = SteadyClock::now() + std::chrono::seconds(1);
  while (SteadyClock::now() < deadline) {
    Result<json> r = api.Call("job.list", {{"limit", 20}});
    if (!r.ok()) return r.status().WithContext("job.list");
    json job;
    for (const json& j : (*r)["jobs"])
      if (j.value("id", "") == job_id) job = j;
    if (job.is_null()) return Status::Internal("job " + job_id + " is not among the newest jobs");
    const std::string status = job.value("status", "");
    if (status == "succeeded") return job;
    if (status == "failed" || status == "aborted")
      return Status::Internal("job " + job.value("id", "") + " " + status + ": " + job.value("message", "") +
                              rig.Logs());
    if (SteadyClock::now() >= next_report) {
      WEFT_RETURN_IF_ERROR(rig.Alive());
      on_poll();
      next_report += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kJobPollMs));
  }
  return Status::Timeout("job " + job_id + " did not finish within 5 minutes" + rig.Logs());
}

void PrintQueue(client::Client& api, SteadyClock::time_point start) {
  Result<json> s = api.Call("server.status", json::object());
  if (!s.ok()) return;
  const json& t = (*s)["tasks"];
  std::fprintf(stderr, "  %5.1f s: %lld running, %lld queued, %lld succeeded\n", MsSince(start) / 1000,
               static_cast<long long>(t.value("leased", 0LL)), static_cast<long long>(t.value("queued", 0LL)),
               static_cast<long long>(t.value("succeeded", 0LL)));
}

// ---- case "create": the job, its critical path, its barrier twin --------------

struct JobTask {
  std::int64_t id = 0;
  std::string key;
  std::string plugin;  // empty: a JOIN, no work
  std::string action;
  std::string node;
  std::string service;
  std::vector<std::int64_t> after;
  std::int64_t taken_ms = 0;
  std::int64_t finished_ms = 0;
  std::int64_t waited_ms = -1;  // what the fake plugin slept ("fake: waits N ms"), -1 unknown
};

std::int64_t WaitFromStdout(const std::string& out) {
  static const std::string kMark = "fake: waits ";
  std::size_t at = out.rfind(kMark);
  if (at == std::string::npos) return -1;
  std::int64_t v = -1;
  const char* begin = out.data() + at + kMark.size();
  auto [end, ec] = std::from_chars(begin, out.data() + out.size(), v);
  return ec == std::errc() ? v : -1;
}

Result<std::vector<JobTask>> ReadJobTasks(const json& job) {
  std::vector<JobTask> out;
  for (const json& t : job["tasks"]) {
    JobTask task;
    task.id = t.value("id", std::int64_t{0});
    task.key = t.value("key", "");
    task.plugin = t.value("plugin", "");
    task.action = t.value("action", "");
    task.node = t.value("node", "");
    task.service = t.value("service", "");
    for (const json& a : t.value("after", json::array())) task.after.push_back(a.get<std::int64_t>());
    if (t.value("state", "") != "succeeded")
      return Status::Internal("task " + task.key + " is " + t.value("state", "") + " in a succeeded job");
    if (!task.plugin.empty()) {
      const json attempts = t.value("attempts", json::array());
      if (attempts.empty()) return Status::Internal("task " + task.key + " has no attempt");
      const json& last = attempts.back();
      task.taken_ms = last.value("taken_at_ms", std::int64_t{0});
      task.finished_ms = last.value("finished_at_ms", std::int64_t{0});
      task.waited_ms = WaitFromStdout(t.value("stdout", ""));
    }
    out.push_back(std::move(task));
  }
  return out;
}

// Longest path through the DAG where task i costs cost(i); JOINs cost 0.
std::int64_t LongestPath(const std::vector<JobTask>& tasks, const std::function<std::int64_t(const JobTask&)>& cost) {
  std::unordered_map<std::int64_t, std::size_t> index;
  for (std::size_t i = 0; i < tasks.size(); ++i) index[tasks[i].id] = i;
  std::vector<std::int64_t> memo(tasks.size(), -1);
  std::function<std::int64_t(std::size_t)> finish = [&](std::size_t i) -> std::int64_t {
    if (memo[i] >= 0) return memo[i];
    std::int64_t start = 0;
    for (std::int64_t a : tasks[i].after)
      if (auto p = index.find(a); p != index.end()) start = std::max(start, finish(p->second));
    return memo[i] = start + (tasks[i].plugin.empty() ? 0 : cost(tasks[i]));
  };
  std::int64_t best = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) best = std::max(best, finish(i));
  return best;
}

// For every task with work: how long it stayed ready before a host took it
// (ready = its last predecessor done, or the job's start for a root).
std::vector<double> DispatchWaits(const std::vector<JobTask>& tasks, std::int64_t job_start_ms) {
  std::unordered_map<std::int64_t, std::size_t> index;
  for (std::size_t i = 0; i < tasks.size(); ++i) index[tasks[i].id] = i;
  std::vector<std::int64_t> done(tasks.size(), -1);
  std::function<std::int64_t(std::size_t)> ready_at = [&](std::size_t i) -> std::int64_t {
    std::int64_t r = job_start_ms;
    for (std::int64_t a : tasks[i].after)
      if (auto p = index.find(a); p != index.end()) {
        std::size_t j = p->second;
        if (done[j] < 0) done[j] = tasks[j].plugin.empty() ? ready_at(j) : tasks[j].finished_ms;
        r = std::max(r, done[j]);
      }
    return r;
  };
  std::vector<double> waits;
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (!tasks[i].plugin.empty()) waits.push_back(static_cast<double>(tasks[i].taken_ms - ready_at(i)));
  return waits;
}

// The most tasks that ran at once (taken -> finished).
int PeakRunning(const std::vector<JobTask>& tasks) {
  std::vector<std::pair<std::int64_t, int>> events;
  for (const JobTask& t : tasks)
    if (!t.plugin.empty()) {
      events.push_back({t.taken_ms, +1});
      events.push_back({t.finished_ms, -1});
    }
  std::sort(events.begin(), events.end());  // at equal times the ends (-1) come first
  int now = 0, peak = 0;
  for (const auto& e : events) peak = std::max(peak, now += e.second);
  return peak;
}

struct BarrierResult {
  double makespan_ms = 0;         // first enqueue -> last task finished (server clock)
  double client_makespan_ms = 0;  // as the bench saw it
  std::int64_t ideal_ms = 0;      // sum over stages of the stage's longest wait
  int checked = 0;                // tasks whose wait was compared with the job's
  int mismatched = 0;
};

// Replays `stages` (task keys) as raw tasks, one stage at a time.
Result<BarrierResult> RunBarrier(Rig& rig, const json& stages, const std::map<std::string, const JobTask*>& by_key,
                                 const Options& opts) {
  client::Client& api = rig.api();
  Result<json> status = api.Call("server.status", json::object());
  if (!status.ok()) return status.status().WithContext("server.status");
  const std::int64_t base_ok = (*status)["tasks"].value("succeeded", std::int64_t{0});
  const std::int64_t base_failed = (*status)["tasks"].value("failed", std::int64_t{0});
  BarrierResult out;
  std::int64_t target = 0;
  const std::int64_t start_ms = WallMs();
  const auto start = SteadyClock::now();
  const auto deadline = start + kJobDeadline;
  for (const json& stage : stages) {
    json batch = json::array();
    std::int64_t longest = 0;
    for (const json& k : stage) {
      auto t = by_key.find(k.get<std::string>());
      if (t == by_key.end()) return Status::Internal("the plan's task " + k.dump() + " is not in the job");
      const JobTask& task = *t->second;
      if (task.plugin.empty()) continue;
      longest = std::max(longest, task.waited_ms);
      batch.push_back({{"plugin", task.plugin},
                       {"action", task.action},
                       {"node_id", task.node},
                       {"max_attempts", 1},
                       {"payload",
                        {{"task_key", task.key}, {"fields", FieldsFor(task.action, task.service, opts.latency_scale)}}}});
    }
    out.ideal_ms += longest;
    target += static_cast<std::int64_t>(batch.size());
    for (std::size_t first = 0; first < batch.size(); first += kEnqueueBatch) {
      json part(batch.begin() + static_cast<std::ptrdiff_t>(first),
                batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), first + kEnqueueBatch)));
      Result<json> r = api.Call("debug.enqueue", {{"tasks", std::move(part)}});
      if (!r.ok()) return r.status().WithContext("debug.enqueue");
    }
    while (true) {
      Result<json> s = api.Call("server.status", json::object());
      if (!s.ok()) return s.status().WithContext("server.status");
      if ((*s)["tasks"].value("failed", std::int64_t{0}) > base_failed)
        return Status::Internal("a task of the barrier run failed" + rig.Logs());
      if ((*s)["tasks"].value("succeeded", std::int64_t{0}) - base_ok >= target) break;
      if (SteadyClock::now() > deadline) return Status::Timeout("the barrier run did not finish within 5 minutes");
      std::this_thread::sleep_for(std::chrono::milliseconds(kBarrierPollMs));
    }
  }
  out.client_makespan_ms = MsSince(start);

  // The server's view: the newest `target` succeeded tasks are the barrier's.
  Result<json> list = api.Call("task.list", {{"state", "succeeded"}, {"limit", std::min<std::int64_t>(target, 10000)}});
  if (!list.ok()) return list.status().WithContext("task.list");
  std::int64_t last_ms = 0;
  std::vector<std::int64_t> ids;
  for (const json& t : (*list)["tasks"]) {
    last_ms = std::max(last_ms, t.value("updated_at_ms", std::int64_t{0}));
    ids.push_back(t.value("task_id", std::int64_t{0}));
  }
  out.makespan_ms = target <= 10000 ? static_cast<double>(last_ms - start_ms) : out.client_makespan_ms;

  // The same keys must have waited as long as in the job: compare a sample.
  const std::size_t step = std::max<std::size_t>(1, ids.size() / 40);
  for (std::size_t i = 0; i < ids.size(); i += step) {
    Result<json> t = api.Call("task.get", {{"task_id", ids[i]}});
    if (!t.ok()) return t.status().WithContext("task.get");
    const std::string key = (*t)["payload"].value("task_key", "");
    auto job_task = by_key.find(key);
    if (job_task == by_key.end()) continue;
    ++out.checked;
    out.mismatched += WaitFromStdout((*t).value("stdout", "")) != job_task->second->waited_ms;
  }
  return out;
}

struct CreateRun {
  double makespan_ms = 0;
  std::int64_t critical_path_ms = 0;
  std::int64_t nominal_critical_path_ms = 0;
  std::size_t tasks = 0;
  std::size_t edges = 0;
  std::size_t stages = 0;
  int peak_running = 0;
  double wait_p50_ms = 0;
  double wait_p99_ms = 0;
  double wait_max_ms = 0;
  double weftd_cpu_us_per_task = 0;
  double hosts_cpu_us_per_task = 0;
  CpuUse cpu;
  std::optional<BarrierResult> barrier;
};

Result<CreateRun> RunCreate(zmq::context_t& ctx, const Paths& paths, const Options& opts, int run) {
  Rig rig(ctx, paths, opts);
  WEFT_RETURN_IF_ERROR(rig.Start());
  client::Client& api = rig.api();
  const std::string name = "big-" + std::to_string(run);

  Result<json> plan = api.Call("cluster.create", {{"name", name}, {"template", kTemplate}, {"size", opts.nodes},
                                                  {"dry_run", true}});
  if (!plan.ok()) return plan.status().WithContext("cluster.create dry_run");
  const json stages = (*plan)["stages"];

  const CpuWindow window(rig, opts.window_hook);
  const auto start = SteadyClock::now();
  Result<json> created = api.Call("cluster.create", {{"name", name}, {"template", kTemplate}, {"size", opts.nodes}});
  if (!created.ok()) return created.status().WithContext("cluster.create");
  const std::string job_id = (*created)["job"].value("id", "");
  std::fprintf(stderr, "  create answered in %.0f ms (job %s)\n", MsSince(start), job_id.c_str());
  WEFT_ASSIGN_OR_RETURN(json done, WaitForJob(rig, api, job_id, [&] { PrintQueue(api, start); }));
  const CpuUse cpu = window.Stop();

  Result<json> job = api.Call("job.get", {{"job", done.value("id", "")}, {"details", true}}, 120000);
  if (!job.ok()) return job.status().WithContext("job.get");
  WEFT_ASSIGN_OR_RETURN(std::vector<JobTask> tasks, ReadJobTasks((*job)["job"]));

  CreateRun out;
  const json& j = (*job)["job"];
  out.makespan_ms = static_cast<double>(j.value("finished_at_ms", std::int64_t{0}) - j.value("created_at_ms", std::int64_t{0}));
  out.tasks = tasks.size();
  for (const JobTask& t : tasks) out.edges += t.after.size();
  out.stages = stages.size();
  out.critical_path_ms = LongestPath(tasks, [](const JobTask& t) { return t.finished_ms - t.taken_ms; });
  out.nominal_critical_path_ms =
      LongestPath(tasks, [](const JobTask& t) { return t.waited_ms >= 0 ? t.waited_ms : t.finished_ms - t.taken_ms; });
  out.peak_running = PeakRunning(tasks);
  std::vector<double> waits = DispatchWaits(tasks, j.value("created_at_ms", std::int64_t{0}));
  out.wait_p50_ms = Percentile(waits, 50);
  out.wait_p99_ms = Percentile(waits, 99);
  out.wait_max_ms = Percentile(waits, 100);
  std::size_t with_work = waits.size();
  out.cpu = cpu;
  out.weftd_cpu_us_per_task = with_work ? cpu.weftd_ms * 1000 / static_cast<double>(with_work) : 0;
  out.hosts_cpu_us_per_task = with_work ? cpu.hosts_ms * 1000 / static_cast<double>(with_work) : 0;
  std::fprintf(stderr,
               "  job: %zu tasks, makespan %.0f ms, critical path %lld ms (nominal %lld ms), ratio %.3f; "
               "peak %d running; ready->taken p50 %.0f ms p99 %.0f ms max %.0f ms; CPU per task: weftd %.0f us, "
               "hosts %.0f us\n",
               out.tasks, out.makespan_ms, static_cast<long long>(out.critical_path_ms),
               static_cast<long long>(out.nominal_critical_path_ms),
               out.makespan_ms / static_cast<double>(std::max<std::int64_t>(1, out.critical_path_ms)), out.peak_running,
               out.wait_p50_ms, out.wait_p99_ms, out.wait_max_ms, out.weftd_cpu_us_per_task, out.hosts_cpu_us_per_task);
  PrintCpu(cpu);

  if (opts.barrier) {
    std::map<std::string, const JobTask*> by_key;
    for (const JobTask& t : tasks) by_key[t.key] = &t;
    std::fprintf(stderr, "  stage-barrier run of the same plan: %zu stages\n", stages.size());
    WEFT_ASSIGN_OR_RETURN(BarrierResult b, RunBarrier(rig, stages, by_key, opts));
    std::fprintf(stderr,
                 "  barrier: makespan %.0f ms (client %.0f ms; sum of the stages' longest waits %lld ms); waits "
                 "checked on %d tasks, %d differ\n",
                 b.makespan_ms, b.client_makespan_ms, static_cast<long long>(b.ideal_ms), b.checked, b.mismatched);
    if (b.mismatched > 0)
      return Status::Internal("the barrier run's tasks did not wait as long as the job's (jitter_by task_key?)");
    out.barrier = b;
  }
  return out;
}

int CaseCreate(zmq::context_t& ctx, const Paths& paths, const Options& opts) {
  std::vector<CreateRun> runs;
  const double load_before = LoadAverage1m();
  for (int r = 0; r < opts.runs; ++r) {
    std::fprintf(stderr, "create run %d/%d: %d nodes, %d hosts x capacity %d\n", r + 1, opts.runs, opts.nodes,
                 opts.hosts, opts.capacity);
    Result<CreateRun> run = RunCreate(ctx, paths, opts, r);
    if (!run.ok()) {
      std::fprintf(stderr, "weft-bench jobs: %s\n", run.status().message().c_str());
      return 1;
    }
    runs.push_back(*run);
  }
  auto median = [&](const std::function<double(const CreateRun&)>& f) {
    std::vector<double> v;
    for (const CreateRun& r : runs) v.push_back(f(r));
    return Median(v);
  };
  const CreateRun& first = runs.front();
  ojson line;
  line["bench"] = "jobs";
  line["case"] = "create";
  line["nodes"] = opts.nodes;
  line["latency_scale"] = opts.latency_scale;
  line["cpu_hog"] = opts.hog;
  line["tasks"] = first.tasks;
  line["edges"] = first.edges;
  line["stages"] = first.stages;
  line["hosts"] = opts.hosts;
  line["capacity_per_host"] = opts.capacity;
  if (opts.weftd_batch > 0) line["weftd_batch_max_messages"] = opts.weftd_batch;
  if (opts.idle_spin_us >= 0) line["weftd_idle_spin_us"] = opts.idle_spin_us;
  line["runs"] = opts.runs;
  line["makespan_ms"] = std::llround(median([](const CreateRun& r) { return r.makespan_ms; }));
  line["critical_path_ms"] = std::llround(median([](const CreateRun& r) { return double(r.critical_path_ms); }));
  line["ratio"] = Round3(median([](const CreateRun& r) { return r.makespan_ms / double(std::max<std::int64_t>(1, r.critical_path_ms)); }));
  line["target_ratio"] = kTargetRatio;
  line["nominal_critical_path_ms"] =
      std::llround(median([](const CreateRun& r) { return double(r.nominal_critical_path_ms); }));
  if (opts.barrier) {
    line["barrier_makespan_ms"] = std::llround(median([](const CreateRun& r) { return r.barrier->makespan_ms; }));
    line["barrier_ideal_ms"] = std::llround(median([](const CreateRun& r) { return double(r.barrier->ideal_ms); }));
    line["ratio_vs_barrier"] =
        Round3(median([](const CreateRun& r) { return r.makespan_ms / std::max(1.0, r.barrier->makespan_ms); }));
  }
  line["peak_running"] = std::llround(median([](const CreateRun& r) { return double(r.peak_running); }));
  line["ready_to_taken_p50_ms"] = std::llround(median([](const CreateRun& r) { return r.wait_p50_ms; }));
  line["ready_to_taken_p99_ms"] = std::llround(median([](const CreateRun& r) { return r.wait_p99_ms; }));
  line["weftd_cpu_us_per_task"] = std::llround(median([](const CreateRun& r) { return r.weftd_cpu_us_per_task; }));
  line["hosts_cpu_us_per_task"] = std::llround(median([](const CreateRun& r) { return r.hosts_cpu_us_per_task; }));
  line["reactor_runqueue_wait_ms"] =
      std::llround(median([](const CreateRun& r) { return r.cpu.reactor_runqueue_wait_ms; }));
  line["loadavg_1m_before"] = Round1(load_before);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return 0;
}

// ---- case "clusters": many small creates at once, api reads meanwhile ---------

// One api read: when it was sent (ms after the creates started), which op, how long it took.
struct Read {
  double at_ms;
  int op;  // index into kReadOps
  double ms;
};

// What the reader sends in turn: the two reads the target is about, and
// server.status, which does next to nothing in weftd, so its latency is the
// time a request waits for the reactor (the other requests ahead of it).
constexpr const char* kReadOps[] = {"cluster.list", "job.get", "server.status"};

// Issues reads in turn until `stop`, `gap_ms` apart; job.get names a job of
// `jobs` (with details, as `weft job show` does) once there is one.
void ReadLoop(client::Client& c, const std::atomic<bool>& stop, std::mutex& mu, const std::vector<std::string>& jobs,
              SteadyClock::time_point origin, int gap_ms, int max_reads, std::vector<Read>* out, int* errors) {
  std::size_t turn = 0;
  while (!stop && (max_reads < 0 || static_cast<int>(out->size()) < max_reads)) {
    std::string job;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!jobs.empty()) job = jobs[(turn / 3) % jobs.size()];
    }
    int op = static_cast<int>(turn++ % 3);
    if (op == 1 && job.empty()) op = 0;
    const auto t0 = SteadyClock::now();
    Result<json> r = op == 0   ? c.Call("cluster.list", json::object())
                     : op == 1 ? c.Call("job.get", {{"job", job}, {"details", true}})
                               : c.Call("server.status", json::object());
    const double ms = MsSince(t0);
    if (r.ok()) {
      out->push_back(Read{std::chrono::duration<double, std::milli>(t0 - origin).count(), op, ms});
    } else {
      ++*errors;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
}

std::vector<double> Latencies(const std::vector<Read>& reads, std::initializer_list<int> ops) {
  std::vector<double> out;
  for (const Read& r : reads)
    if (std::find(ops.begin(), ops.end(), r.op) != ops.end()) out.push_back(r.ms);
  return out;
}

struct ClustersRun {
  std::int64_t total_ms = 0;    // first create sent -> last job finished (server clock)
  double creates_answered_ms = 0;
  std::vector<double> create_ms;
  std::vector<Read> reads;      // while the jobs ran
  std::vector<Read> idle;       // the same reads afterwards, weftd idle
  int read_errors = 0;
  std::int64_t tasks = 0;
  double weftd_cpu_ms = 0;
  CpuUse cpu;
};

Result<ClustersRun> RunClusters(zmq::context_t& ctx, const Paths& paths, const Options& opts) {
  Rig rig(ctx, paths, opts);
  WEFT_RETURN_IF_ERROR(rig.Start());
  Result<json> before = rig.api().Call("server.status", json::object());
  if (!before.ok()) return before.status().WithContext("server.status");
  const std::int64_t base_tasks = (*before)["tasks"].value("succeeded", std::int64_t{0});

  ClustersRun out;
  std::mutex mu;
  std::vector<std::string> job_ids;
  Status first_error;
  std::atomic<bool> stop_reading{false};
  const auto start = SteadyClock::now();
  std::thread reader([&] {
    std::unique_ptr<client::Client> c = NewClient(ctx, rig.api_endpoint(), 30000);
    ReadLoop(*c, stop_reading, mu, job_ids, start, opts.read_gap_ms, -1, &out.reads, &out.read_errors);
  });
  // Joins the reader on every way out.
  struct StopReader {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~StopReader() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } stop_reader{stop_reading, reader};

  const CpuWindow window(rig, opts.window_hook);
  const std::int64_t start_ms = WallMs();
  std::vector<std::thread> submitters;
  const int threads = std::min(opts.submitters, opts.clusters);
  for (int s = 0; s < threads; ++s) {
    submitters.emplace_back([&, s] {
      std::unique_ptr<client::Client> c = NewClient(ctx, rig.api_endpoint(), 60000);
      for (int i = s; i < opts.clusters; i += threads) {
        const auto t0 = SteadyClock::now();
        Result<json> r = c->Call("cluster.create", {{"name", "many-" + std::to_string(i)},
                                                   {"template", kTemplate},
                                                   {"size", opts.cluster_size}});
        std::lock_guard<std::mutex> lock(mu);
        if (!r.ok()) {
          if (first_error.ok()) first_error = r.status().WithContext("cluster.create many-" + std::to_string(i));
          return;
        }
        out.create_ms.push_back(MsSince(t0));
        job_ids.push_back((*r)["job"].value("id", ""));
      }
    });
  }
  for (auto& t : submitters) t.join();
  out.creates_answered_ms = MsSince(start);
  if (!first_error.ok()) return first_error;
  std::fprintf(stderr, "  %zu creates answered in %.0f ms\n", job_ids.size(), out.creates_answered_ms);

  // Every job is done when each of ours has succeeded. The jobs are listed
  // only once no task is queued or running (server.status costs weftd next to
  // nothing): listing a thousand jobs costs weftd's reactor tens of
  // milliseconds, and twice a second the measured reads waited behind it, the
  // bench's own bookkeeping rather than what a user's read meets.
  const std::set<std::string> ours(job_ids.begin(), job_ids.end());
  const auto deadline = start + kJobDeadline;
  auto next_report = start + std::chrono::seconds(1);
  std::size_t done = 0;
  while (true) {
    Result<json> s = rig.api().Call("server.status", json::object());
    if (!s.ok()) return s.status().WithContext("server.status");
    const json& tasks = (*s)["tasks"];
    if (tasks.value("queued", std::int64_t{0}) == 0 && tasks.value("leased", std::int64_t{0}) == 0) {
      Result<json> r = rig.api().Call("job.list", {{"limit", opts.clusters + 100}});
      if (!r.ok()) return r.status().WithContext("job.list");
      done = 0;
      std::int64_t last_finish_ms = 0;
      for (const json& j : (*r)["jobs"]) {
        if (!ours.count(j.value("id", ""))) continue;
        const std::string st = j.value("status", "");
        if (st == "failed" || st == "aborted")
          return Status::Internal("job " + j.value("id", "") + " " + st + ": " + j.value("message", "") + rig.Logs());
        if (st == "succeeded") {
          ++done;
          last_finish_ms = std::max(last_finish_ms, j.value("finished_at_ms", std::int64_t{0}));
        }
      }
      if (done == ours.size()) {
        out.total_ms = last_finish_ms - start_ms;
        break;
      }
    }
    if (SteadyClock::now() > deadline)
      return Status::Timeout("the " + std::to_string(ours.size()) + " jobs did not finish within 5 minutes (" +
                             std::to_string(done) + " done when last listed)" + rig.Logs());
    if (SteadyClock::now() >= next_report) {
      WEFT_RETURN_IF_ERROR(rig.Alive());
      PrintQueue(rig.api(), start);
      next_report += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kClustersPollMs));
  }
  stop_reading = true;
  reader.join();
  out.cpu = window.Stop();
  out.weftd_cpu_ms = out.cpu.weftd_ms;
  PrintCpu(out.cpu);
  Result<json> after = rig.api().Call("server.status", json::object());
  if (after.ok()) out.tasks = (*after)["tasks"].value("succeeded", std::int64_t{0}) - base_tasks;

  // The same reads of the same clusters and jobs with weftd idle: the baseline.
  std::atomic<bool> never{false};
  std::unique_ptr<client::Client> c = NewClient(ctx, rig.api_endpoint(), 30000);
  ReadLoop(*c, never, mu, job_ids, SteadyClock::now(), opts.read_gap_ms, 150, &out.idle, &out.read_errors);

  const auto p = [](const std::vector<Read>& r, std::initializer_list<int> ops, double q) {
    return Percentile(Latencies(r, ops), q);
  };
  std::fprintf(stderr,
               "  done in %lld ms; reads while busy: cluster.list p50 %.1f p99 %.1f max %.1f ms; job.get p50 %.1f p99 "
               "%.1f max %.1f ms; server.status p50 %.1f p99 %.1f max %.1f ms (%zu reads, %d errors)\n"
               "  the same reads idle: cluster.list p50 %.1f p99 %.1f; job.get p50 %.1f p99 %.1f; server.status p50 "
               "%.1f p99 %.1f ms; weftd CPU %.0f ms\n",
               static_cast<long long>(out.total_ms), p(out.reads, {0}, 50), p(out.reads, {0}, 99),
               p(out.reads, {0}, 100), p(out.reads, {1}, 50), p(out.reads, {1}, 99), p(out.reads, {1}, 100),
               p(out.reads, {2}, 50), p(out.reads, {2}, 99), p(out.reads, {2}, 100), out.reads.size(),
               out.read_errors, p(out.idle, {0}, 50), p(out.idle, {0}, 99), p(out.idle, {1}, 50),
               p(out.idle, {1}, 99), p(out.idle, {2}, 50), p(out.idle, {2}, 99), out.weftd_cpu_ms);
  std::vector<Read> slowest = out.reads;
  std::sort(slowest.begin(), slowest.end(), [](const Read& x, const Read& y) { return x.ms > y.ms; });
  for (std::size_t i = 0; i < std::min<std::size_t>(3, slowest.size()); ++i)
    std::fprintf(stderr, "  slow read: %s sent %.0f ms after the first create, took %.1f ms\n",
                 kReadOps[slowest[i].op], slowest[i].at_ms, slowest[i].ms);
  return out;
}

int CaseClusters(zmq::context_t& ctx, const Paths& paths, const Options& opts) {
  const double load_before = LoadAverage1m();
  std::vector<ClustersRun> runs;
  for (int r = 0; r < opts.runs; ++r) {
    std::fprintf(stderr, "clusters run %d/%d: %d clusters x %d nodes at once, %d hosts x capacity %d\n", r + 1,
                 opts.runs, opts.clusters, opts.cluster_size, opts.hosts, opts.capacity);
    Result<ClustersRun> run = RunClusters(ctx, paths, opts);
    if (!run.ok()) {
      std::fprintf(stderr, "weft-bench jobs: %s\n", run.status().message().c_str());
      return 1;
    }
    runs.push_back(std::move(*run));
  }
  // Latencies are pooled over the runs; times are medians.
  std::vector<Read> reads, idle;
  std::vector<double> create_ms, total_ms, answered_ms, cpu_per_task, runqueue_wait_ms;
  int errors = 0;
  for (const ClustersRun& r : runs) {
    reads.insert(reads.end(), r.reads.begin(), r.reads.end());
    idle.insert(idle.end(), r.idle.begin(), r.idle.end());
    create_ms.insert(create_ms.end(), r.create_ms.begin(), r.create_ms.end());
    total_ms.push_back(static_cast<double>(r.total_ms));
    answered_ms.push_back(r.creates_answered_ms);
    cpu_per_task.push_back(r.tasks > 0 ? r.weftd_cpu_ms * 1000 / static_cast<double>(r.tasks) : 0);
    runqueue_wait_ms.push_back(r.cpu.reactor_runqueue_wait_ms);
    errors += r.read_errors;
  }
  const std::vector<double> busy = Latencies(reads, {0, 1});
  const std::vector<double> at_rest = Latencies(idle, {0, 1});
  ojson line;
  line["bench"] = "jobs";
  line["case"] = opts.clusters_name;
  line["clusters"] = opts.clusters;
  line["latency_scale"] = opts.latency_scale;
  line["cpu_hog"] = opts.hog;
  line["nodes_per_cluster"] = opts.cluster_size;
  line["tasks"] = runs.front().tasks;
  line["hosts"] = opts.hosts;
  line["capacity_per_host"] = opts.capacity;
  if (opts.weftd_batch > 0) line["weftd_batch_max_messages"] = opts.weftd_batch;
  if (opts.idle_spin_us >= 0) line["weftd_idle_spin_us"] = opts.idle_spin_us;
  line["runs"] = opts.runs;
  line["total_ms"] = std::llround(Median(total_ms));
  line["creates_answered_ms"] = std::llround(Median(answered_ms));
  line["create_p99_ms"] = Round1(Percentile(create_ms, 99));
  line["reads"] = busy.size();
  line["read_errors"] = errors;
  line["read_p50_ms"] = Round1(Percentile(busy, 50));
  line["read_p99_ms"] = Round1(Percentile(busy, 99));
  line["read_max_ms"] = Round1(Percentile(busy, 100));
  line["target_read_p99_ms"] = kTargetReadP99Ms;
  line["cluster_list_p99_ms"] = Round1(Percentile(Latencies(reads, {0}), 99));
  line["job_get_p99_ms"] = Round1(Percentile(Latencies(reads, {1}), 99));
  line["status_p99_ms"] = Round1(Percentile(Latencies(reads, {2}), 99));
  line["idle_read_p50_ms"] = Round1(Percentile(at_rest, 50));
  line["idle_read_p99_ms"] = Round1(Percentile(at_rest, 99));
  line["weftd_cpu_us_per_task"] = std::llround(Median(cpu_per_task));
  line["reactor_runqueue_wait_ms"] = std::llround(Median(runqueue_wait_ms));
  line["loadavg_1m_before"] = Round1(load_before);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return 0;
}

// A process that spins on the second CPU (or the only one) until destroyed: the
// cases' figures with a CPU-bound neighbour, as on a shared machine.
class CpuHog {
 public:
  CpuHog() {
    pid_ = fork();
    if (pid_ != 0) {
      if (pid_ > 0) std::fprintf(stderr, "CPU hog pid %d busy on CPU %d\n", pid_, Cpu());
      return;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(Cpu(), &set);
    sched_setaffinity(0, sizeof(set), &set);
    volatile std::uint64_t spin = 0;
    while (true) spin = spin + 1;
  }
  ~CpuHog() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  static int Cpu() { return std::thread::hardware_concurrency() > 1 ? 1 : 0; }
  pid_t pid_ = -1;
};

// ---- case "create10k": a big job against raw tasks through the same hosts -----

// Enqueues `count` raw tasks for the fake plugins at zero latency (debug.enqueue,
// no job) and waits until the hosts finished them all; returns tasks per second
// (first enqueue -> last finish, the server's clock).
Result<double> RunRawTasks(Rig& rig, std::int64_t count) {
  client::Client& api = rig.api();
  Result<json> status = api.Call("server.status", json::object());
  if (!status.ok()) return status.status().WithContext("server.status");
  const std::int64_t base_ok = (*status)["tasks"].value("succeeded", std::int64_t{0});
  const std::int64_t start_ms = WallMs();
  const auto start = SteadyClock::now();
  for (std::int64_t first = 0; first < count; first += kEnqueueBatch) {
    json batch = json::array();
    for (std::int64_t i = first; i < std::min<std::int64_t>(count, first + kEnqueueBatch); ++i)
      batch.push_back({{"plugin", i % 8 < 3 ? "fake-provider" : "fake-automator"},
                       {"action", i % 8 < 3 ? "CREATE" : "INSTALL"},
                       {"node_id", "raw-" + std::to_string(i / 8)},
                       {"max_attempts", 1}});
    Result<json> r = api.Call("debug.enqueue", {{"tasks", std::move(batch)}});
    if (!r.ok()) return r.status().WithContext("debug.enqueue");
  }
  auto next_report = start + std::chrono::seconds(1);
  while (true) {
    Result<json> s = api.Call("server.status", json::object());
    if (!s.ok()) return s.status().WithContext("server.status");
    if ((*s)["tasks"].value("failed", std::int64_t{0}) > 0) return Status::Internal("a raw task failed" + rig.Logs());
    if ((*s)["tasks"].value("succeeded", std::int64_t{0}) - base_ok >= count) break;
    if (SteadyClock::now() > start + kJobDeadline)
      return Status::Timeout("the raw tasks did not finish within 5 minutes" + rig.Logs());
    if (SteadyClock::now() >= next_report) {
      WEFT_RETURN_IF_ERROR(rig.Alive());
      PrintQueue(api, start);
      next_report += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kJobPollMs));
  }
  // The last to finish is among the newest tasks (the hosts take the oldest
  // first and run at most 2 x capacity at once): the latest finish among them.
  Result<json> list = api.Call("task.list", {{"state", "succeeded"}, {"limit", 10000}});
  if (!list.ok()) return list.status().WithContext("task.list");
  std::int64_t last_ms = 0;
  for (const json& t : (*list)["tasks"]) last_ms = std::max(last_ms, t.value("updated_at_ms", std::int64_t{0}));
  if (last_ms == 0) last_ms = WallMs();
  return static_cast<double>(count) * 1000 / static_cast<double>(std::max<std::int64_t>(1, last_ms - start_ms));
}

struct Create10kRun {
  double raw_tasks_per_s = 0;
  double job_tasks_per_s = 0;
  std::int64_t tasks = 0;
  double makespan_ms = 0;
  double create_answered_ms = 0;
  double weftd_cpu_us_per_task = 0;
  double raw_weftd_cpu_us_per_task = 0;
  double weftd_rss_peak_mib = 0;
};

Result<Create10kRun> RunCreate10k(zmq::context_t& ctx, const Paths& paths, const Options& opts) {
  Rig rig(ctx, paths, opts);
  WEFT_RETURN_IF_ERROR(rig.Start());
  client::Client& api = rig.api();
  Create10kRun out;
  // The baseline first: as many raw tasks as the job will have (8 per node, near
  // enough), through the same hosts and plugins, without the job engine.
  const std::int64_t raw = static_cast<std::int64_t>(opts.nodes) * 8;
  const CpuWindow raw_window(rig, opts.window_hook);
  WEFT_ASSIGN_OR_RETURN(out.raw_tasks_per_s, RunRawTasks(rig, raw));
  out.raw_weftd_cpu_us_per_task = raw_window.Stop().weftd_ms * 1000 / static_cast<double>(raw);
  std::fprintf(stderr, "  raw: %lld tasks at %.0f tasks/s, weftd %.0f us CPU per task\n", static_cast<long long>(raw),
               out.raw_tasks_per_s, out.raw_weftd_cpu_us_per_task);

  Result<json> before = api.Call("server.status", json::object());
  if (!before.ok()) return before.status().WithContext("server.status");
  const std::int64_t base_ok = (*before)["tasks"].value("succeeded", std::int64_t{0});
  const CpuWindow window(rig, opts.window_hook);
  const auto start = SteadyClock::now();
  Result<json> created =
      api.Call("cluster.create", {{"name", "huge"}, {"template", kTemplate}, {"size", opts.nodes}}, 300000);
  if (!created.ok()) return created.status().WithContext("cluster.create");
  out.create_answered_ms = MsSince(start);
  const std::string job_id = (*created)["job"].value("id", "");
  std::fprintf(stderr, "  create answered in %.0f ms (job %s)\n", out.create_answered_ms, job_id.c_str());
  WEFT_ASSIGN_OR_RETURN(json done, WaitForJob(rig, api, job_id, [&] { PrintQueue(api, start); }));
  const CpuUse cpu = window.Stop();
  out.weftd_rss_peak_mib = rig.WeftdPeakRssMib();
  Result<json> after = api.Call("server.status", json::object());
  if (!after.ok()) return after.status().WithContext("server.status");
  out.tasks = (*after)["tasks"].value("succeeded", std::int64_t{0}) - base_ok;
  out.makespan_ms =
      static_cast<double>(done.value("finished_at_ms", std::int64_t{0}) - done.value("created_at_ms", std::int64_t{0}));
  out.job_tasks_per_s = static_cast<double>(out.tasks) * 1000 / std::max(1.0, out.makespan_ms);
  out.weftd_cpu_us_per_task = cpu.weftd_ms * 1000 / static_cast<double>(std::max<std::int64_t>(1, out.tasks));
  std::fprintf(stderr,
               "  job: %lld tasks (JOINs included) in %.0f ms, %.0f tasks/s, ratio %.3f to raw; weftd %.0f us CPU per "
               "task, peak RSS %.0f MiB\n",
               static_cast<long long>(out.tasks), out.makespan_ms, out.job_tasks_per_s,
               out.job_tasks_per_s / std::max(1.0, out.raw_tasks_per_s), out.weftd_cpu_us_per_task,
               out.weftd_rss_peak_mib);
  PrintCpu(cpu);
  return out;
}

int CaseCreate10k(zmq::context_t& ctx, const Paths& paths, const Options& opts) {
  const double load_before = LoadAverage1m();
  std::vector<Create10kRun> runs;
  const int count = opts.runs_set ? opts.runs : 1;
  for (int r = 0; r < count; ++r) {
    std::fprintf(stderr, "create10k run %d/%d: %d nodes, %d hosts x capacity %d, latency scale %.2f\n", r + 1, count,
                 opts.nodes, opts.hosts, opts.capacity, opts.latency_scale);
    Result<Create10kRun> run = RunCreate10k(ctx, paths, opts);
    if (!run.ok()) {
      std::fprintf(stderr, "weft-bench jobs: %s\n", run.status().message().c_str());
      return 1;
    }
    runs.push_back(*run);
  }
  auto median = [&](double Create10kRun::*field) {
    std::vector<double> v;
    for (const Create10kRun& r : runs) v.push_back(r.*field);
    return Median(v);
  };
  std::vector<double> ratios, peaks;
  for (const Create10kRun& r : runs) ratios.push_back(r.job_tasks_per_s / std::max(1.0, r.raw_tasks_per_s));
  ojson line;
  line["bench"] = "jobs";
  line["case"] = "create10k";
  line["nodes"] = opts.nodes;
  line["tasks"] = runs.front().tasks;
  line["hosts"] = opts.hosts;
  line["capacity_per_host"] = opts.capacity;
  line["latency_scale"] = opts.latency_scale;
  line["cpu_hog"] = opts.hog;
  line["runs"] = count;
  line["create_answered_ms"] = std::llround(median(&Create10kRun::create_answered_ms));
  line["makespan_ms"] = std::llround(median(&Create10kRun::makespan_ms));
  line["tasks_per_s"] = std::llround(median(&Create10kRun::job_tasks_per_s));
  line["raw_tasks_per_s"] = std::llround(median(&Create10kRun::raw_tasks_per_s));
  line["ratio"] = Round3(Median(ratios));
  line["target_ratio"] = 0.5;
  line["weftd_cpu_us_per_task"] = std::llround(median(&Create10kRun::weftd_cpu_us_per_task));
  line["raw_weftd_cpu_us_per_task"] = std::llround(median(&Create10kRun::raw_weftd_cpu_us_per_task));
  line["weftd_rss_peak_mib"] = Round1(median(&Create10kRun::weftd_rss_peak_mib));
  line["target_rss_mib"] = 1024;
  line["loadavg_1m_before"] = Round1(load_before);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return 0;
}

int Jobs(const std::vector<std::string>& args) {
  Options opts;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](int min, int max, int* out) { return i + 1 < args.size() && ParseInt(args[++i], min, max, out); };
    if (a == "--nodes") {
      if (!value(3, 100000, &opts.nodes)) return Usage("--nodes needs a number from 3 to 100000");
    } else if (a == "--clusters") {
      if (!value(1, 10000, &opts.clusters)) return Usage("--clusters needs a number from 1 to 10000");
    } else if (a == "--cluster-size") {
      if (!value(3, 10000, &opts.cluster_size)) return Usage("--cluster-size needs a number from 3 to 10000");
    } else if (a == "--runs") {
      if (!value(1, 100, &opts.runs)) return Usage("--runs needs a number from 1 to 100");
      opts.runs_set = true;
    } else if (a == "--hosts") {
      if (!value(1, 64, &opts.hosts)) return Usage("--hosts needs a number from 1 to 64");
    } else if (a == "--capacity") {
      if (!value(1, 4096, &opts.capacity)) return Usage("--capacity needs a number from 1 to 4096");
    } else if (a == "--workers") {
      if (!value(1, 256, &opts.workers)) return Usage("--workers needs a number from 1 to 256");
    } else if (a == "--weftd-batch") {
      if (!value(1, 100000, &opts.weftd_batch)) return Usage("--weftd-batch needs a number from 1 to 100000");
    } else if (a == "--idle-spin-us") {
      if (!value(0, 10000, &opts.idle_spin_us)) return Usage("--idle-spin-us needs a number from 0 to 10000");
    } else if (a == "--read-gap-ms") {
      if (!value(0, 10000, &opts.read_gap_ms)) return Usage("--read-gap-ms needs a number from 0 to 10000");
    } else if (a == "--latency-scale") {
      if (i + 1 >= args.size()) return Usage("--latency-scale needs a number");
      char* end = nullptr;
      opts.latency_scale = std::strtod(args[++i].c_str(), &end);
      opts.latency_set = true;
      if (*end != '\0' || !(opts.latency_scale >= 0 && opts.latency_scale <= 100))
        return Usage("--latency-scale needs a number from 0 to 100");
    } else if (a == "--only") {
      constexpr const char* kCases = "--only needs \"create\", \"clusters\", \"create10k\" or \"clusters1000\"";
      if (i + 1 >= args.size()) return Usage(kCases);
      const std::string which = args[++i];
      if (which != "create" && which != "clusters" && which != "create10k" && which != "clusters1000")
        return Usage(kCases);
      opts.create_case = which == "create";
      opts.clusters_case = which == "clusters";
      opts.create10k_case = which == "create10k";
      opts.clusters1000_case = which == "clusters1000";
    } else if (a == "--no-barrier") {
      opts.barrier = false;
    } else if (a == "--hog") {
      opts.hog = true;
    } else if (a == "--window-hook") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return Usage("--window-hook needs a command");
      opts.window_hook = args[++i];
    } else if (a == "--help" || a == "-h") {
      Usage("job makespan against the critical path and a stage-barrier schedule; api reads under load");
      return 0;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }
  Result<Paths> paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench jobs: %s\n", paths.status().message().c_str());
    return 1;
  }
  try {
    zmq::context_t ctx(1);
    ctx.set(zmq::ctxopt::max_sockets, 4096);
    std::optional<CpuHog> hog;
    if (opts.hog) hog.emplace();
    int rc = 0;
    if (opts.create_case) rc = CaseCreate(ctx, *paths, opts);
    if (rc == 0 && opts.clusters_case) rc = CaseClusters(ctx, *paths, opts);
    Options big = opts;
    if (!opts.latency_set) big.latency_scale = 0;
    if (rc == 0 && opts.create10k_case) {
      if (big.nodes == 1000) big.nodes = 10000;
      rc = CaseCreate10k(ctx, *paths, big);
    }
    if (rc == 0 && opts.clusters1000_case) {
      big.clusters = 1000;
      big.clusters_name = "clusters1000";
      rc = CaseClusters(ctx, *paths, big);
    }
    return rc;
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "weft-bench jobs: ZeroMQ failed: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench jobs: %s\n", e.what());
    return 1;
  }
}

}  // namespace

WEFT_BENCH("jobs", "job makespan vs critical path and a stage-barrier run; api read latency under load", Jobs);

}  // namespace weft::bench
