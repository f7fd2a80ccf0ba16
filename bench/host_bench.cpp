// weft-bench host: ONE real weft-host at scale.
//
// Starts weftd (durable SQLite store in a temporary data dir, ephemeral loopback
// ports) and one weft-host process whose plugin directory holds the fake
// plugins and a minimal Lua automator (written by the bench, kLuaAutomator), then
// measures two cases in the same run:
//
// Case "inflight": --tasks tasks (default 1,000) of fake-automator that each wait
// --latency-ms (default 2,000) are enqueued at once (debug.enqueue) on a host of
// --capacity (default 1,000) runner threads in --workers (default 8) worker
// processes. Reported: the most tasks the host held at once (host.list
// "in_flight", sampled every 20 ms), how long it took to get there, tasks/s and
// wall time from the enqueue to the last success, and the memory it cost: peak
// RSS (VmHWM) of the master and of each worker, and the largest sum of the
// workers' VmRSS seen in one sample. Target: every task in flight at once (1,000
// on this 2-core machine). The log's warning and error lines are counted, so a
// host that copes only by complaining shows it.
//
// Case "lua_overhead": the per-task cost of the Lua runtime against a native
// plugin. Rounds of --lua-tasks zero-latency tasks (default 2,000) go through
// fake-automator (latency 0) and through kLuaAutomator, which does the same work
// through the Lua task API (two log lines, progress 100), alternating which goes
// first. Same host, same capacity, same payload, so what differs is the plugin
// runtime. Per round: wall time per task (enqueue -> last success) and the CPU
// the host (master and workers) spent per task; then --alone-tasks (default 100)
// tasks one at a time, whose median enqueue -> success latency shows what the
// runtime adds to one task without 1,000 runners hiding it. Medians over
// --rounds (default 5) and the differences Lua minus native. Target: < 1 ms per
// task, both at full capacity and alone.
//
// Binaries are found next to weft-bench (weftd, weft-host) and the fake plugins
// under <build>/plugins/. One JSON line per case goes to stdout; progress and
// per-round figures go to stderr.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"

namespace weft::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

constexpr int kTargetInFlight = 1000;
constexpr double kTargetLuaOverheadMs = 1.0;
constexpr int kEnqueueBatch = 5000;  // debug.enqueue accepts up to 10,000
constexpr int kSampleMs = 20;        // case inflight: host.list and /proc sampling
constexpr int kRoundPollMs = 2;      // case lua_overhead: how often a round asks whether it is done
constexpr auto kCaseDeadline = std::chrono::minutes(3);
constexpr const char* kHostId = "bench-host";
constexpr const char* kNative = "fake-automator";
constexpr const char* kLua = "bench-lua";

// The Lua twin of fake-automator at latency 0: the same host services per task
// (two log lines into the task's output, one progress report to weftd), so the
// comparison is about the runtime, not about different work.
constexpr const char* kLuaAutomator = R"lua(-- weft-bench host: the Lua twin of fake-automator at latency 0.
return {
  type = "bench-lua",
  kind = "automator",
  version = "1.0",
  description = "weft-bench host: does what fake-automator does at latency 0, in Lua",
  fields = {
    latency_ms = { label = "Latency (ms)", type = "integer", default = 0 },
  },
  actions = {
    install = function(task)
      task:log("info", "bench-lua INSTALL on node " .. tostring(task.json.node_id or "?"))
      task:log("info", "bench-lua: waits " .. task.fields.latency_ms .. " ms")
      task:progress(100, "INSTALL done")
    end,
  },
}
)lua";

struct Options {
  int tasks = 1000;
  int latency_ms = 2000;
  int capacity = 1000;
  int workers = 8;
  int rounds = 5;
  int lua_tasks = 2000;
  int alone_tasks = 100;
  bool inflight_case = true;
  bool lua_case = true;
  bool keep_dir = false;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench host: %s\n"
               "usage: weft-bench host [--tasks N] [--latency-ms MS] [--capacity K] [--workers W]\n"
               "                       [--rounds R] [--lua-tasks M] [--alone-tasks A] [--only inflight|lua]\n"
               "                       [--keep-dir]\n"
               "  --tasks N        tasks in flight at once in case \"inflight\" (default 1000)\n"
               "  --latency-ms MS  how long each of them waits (default 2000)\n"
               "  --capacity K     the host's capacity: runner threads, so tasks in flight (default 1000)\n"
               "  --workers W      worker processes sharing the capacity (default 8)\n"
               "  --rounds R       rounds of case \"lua_overhead\", each plugin once per round (default 5)\n"
               "  --lua-tasks M    zero-latency tasks per plugin and round, all at once (default 2000)\n"
               "  --alone-tasks A  then zero-latency tasks one at a time, per plugin and round (default 100)\n"
               "  --only CASE      run only case \"inflight\" or \"lua\"\n"
               "  --keep-dir       keep the temporary directory (logs, data) and print its path\n",
               problem.c_str());
  return 2;
}

double Round1(double v) { return std::round(v * 10) / 10; }
double Round3(double v) { return std::round(v * 1000) / 1000; }

// ---- /proc ------------------------------------------------------------------

// A "VmXXX:   1234 kB" line of /proc/<pid>/status, in bytes; 0 when unknown.
std::int64_t StatusBytes(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    std::int64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

double Mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// ---- processes --------------------------------------------------------------

// A fresh weftd and one weft-host with the fake plugins and kLuaAutomator, in one
// temporary directory. Stops the host, then weftd, then removes the directory.
class Rig {
 public:
  Rig(zmq::context_t& ctx, const Paths& paths, const Options& opts)
      : dir_("weft-bench-host", opts.keep_dir),
        ctx_(ctx),
        paths_(paths),
        opts_(opts),
        weftd_(BenchWeftd(paths.weftd, dir_.path()), testing::Weftd::Deferred{}) {}
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;
  ~Rig() {
    api_.reset();
    if (host_) host_->Stop(std::chrono::seconds(15));
    weftd_.Stop(std::chrono::seconds(15));
  }

  Status Start() {
    const fs::path plugins = dir_.path() / "plugins";
    std::error_code ec;
    fs::create_directories(plugins, ec);
    fs::copy_file(paths_.provider_so, plugins / "fake_provider.so", ec);
    if (!ec) fs::copy_file(paths_.automator_so, plugins / "fake_automator.so", ec);
    if (ec) return Status::Internal("cannot copy the fake plugins into " + plugins.string() + ": " + ec.message());
    {
      std::ofstream out(plugins / "bench_lua.lua");
      out << kLuaAutomator;
      if (!out) return Status::Internal("cannot write " + (plugins / "bench_lua.lua").string());
    }

    WEFT_RETURN_IF_ERROR(StartWeftd(weftd_));
    api_endpoint_ = weftd_.api();
    provisioner_ = weftd_.provisioner();
    api_ = std::make_unique<client::Client>(
        ctx_, client::Options{.endpoint = api_endpoint_, .timeout_ms = 60000, .tenant = "", .limits = {}});
    std::fprintf(stderr, "  weftd pid %d in %s\n", weftd_.pid(), dir_.path().c_str());

    // The whole log (info), to see that it stays readable at this scale.
    testing::HostOptions host = BenchHost(paths_.host, dir_.path(), kHostId, provisioner_, opts_.capacity,
                                          opts_.workers, plugins, "info");
    host_ = std::make_unique<testing::Host>(host);
    host_->Start();
    WEFT_RETURN_IF_ERROR(WaitForHost());
    std::fprintf(stderr, "  weft-host pid %d: capacity %d in %d worker(s)\n", host_->process().pid(), opts_.capacity,
                 static_cast<int>(Children(host_->process().pid()).size()));
    return Status::Ok();
  }

  client::Client& api() { return *api_; }
  pid_t host_pid() const { return host_->process().pid(); }
  pid_t weftd_pid() const { return weftd_.pid(); }
  fs::path host_log() const { return host_->log(); }

  std::string Logs() const {
    return "\n--- weftd log ends:\n" + Tail(weftd_.LogPath(), 1500) + "\n--- weft-host log ends:\n" +
           (host_ ? Tail(host_->log(), 2500) : std::string());
  }
  Status Alive() {
    if (!weftd_.process().running()) return Status::Internal("weftd exited" + Logs());
    if (!host_->process().running()) return Status::Internal("weft-host exited" + Logs());
    return Status::Ok();
  }

  // Enqueues `n` INSTALL tasks of `plugin` with `fields`, max one attempt each.
  Status Enqueue(const std::string& plugin, int n, const json& fields, const std::string& prefix) {
    for (int first = 0; first < n; first += kEnqueueBatch) {
      json batch = json::array();
      for (int i = first; i < std::min(n, first + kEnqueueBatch); ++i) {
        batch.push_back({{"plugin", plugin},
                         {"action", "INSTALL"},
                         {"node_id", prefix + std::to_string(i)},
                         {"max_attempts", 1},
                         {"payload", {{"fields", fields}}}});
      }
      Result<json> r = api_->Call("debug.enqueue", {{"tasks", std::move(batch)}});
      if (!r.ok()) return r.status().WithContext("debug.enqueue");
    }
    return Status::Ok();
  }

  struct Counts {
    std::int64_t succeeded = 0;
    std::int64_t failed = 0;
    std::int64_t leased = 0;
  };
  Result<Counts> Tasks() {
    Result<json> s = api_->Call("server.status", json::object());
    if (!s.ok()) return s.status().WithContext("server.status");
    const json& t = (*s)["tasks"];
    return Counts{t.value("succeeded", std::int64_t{0}), t.value("failed", std::int64_t{0}),
                  t.value("leased", std::int64_t{0})};
  }

  // Waits until `n` more tasks than `base` succeeded; fails on any failure.
  Status WaitDone(const Counts& base, std::int64_t n, int poll_ms) {
    const auto deadline = SteadyClock::now() + kCaseDeadline;
    while (SteadyClock::now() < deadline) {
      WEFT_ASSIGN_OR_RETURN(Counts c, Tasks());
      if (c.failed > base.failed) return Status::Internal("a task failed" + Logs());
      if (c.succeeded - base.succeeded >= n) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    }
    WEFT_RETURN_IF_ERROR(Alive());
    return Status::Timeout(std::to_string(n) + " tasks did not finish within 3 minutes" + Logs());
  }

 private:
  // Registered with all three plugins, and every worker started.
  Status WaitForHost() {
    auto deadline = SteadyClock::now() + std::chrono::seconds(30);
    while (SteadyClock::now() < deadline) {
      WEFT_RETURN_IF_ERROR(Alive());
      Result<json> r = api_->Call("host.list", json::object());
      if (!r.ok()) return r.status().WithContext("host.list");
      for (const json& h : (*r)["hosts"]) {
        const json plugins = h.value("plugins", json::array());
        auto has = [&](const char* type) { return std::find(plugins.begin(), plugins.end(), type) != plugins.end(); };
        if (h.value("live", false) && has("fake-provider") && has(kNative) && has(kLua) &&
            static_cast<int>(Children(host_->process().pid()).size()) >= std::min(opts_.workers, opts_.capacity))
          return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::Timeout("weft-host did not register fake-provider, fake-automator and bench-lua with all its "
                           "workers within 30 s" +
                           Logs());
  }

  ScratchDir dir_;  // first member: removed after the processes stopped
  zmq::context_t& ctx_;
  const Paths& paths_;
  const Options& opts_;
  testing::Weftd weftd_;
  std::unique_ptr<testing::Host> host_;
  std::string api_endpoint_;
  std::string provisioner_;
  std::unique_ptr<client::Client> api_;
};

// `n` instant tasks of `plugin` through every runner, so that every runner has
// its connections and the plugin its state before anything is timed.
Status WarmUp(Rig& rig, const std::string& plugin, int n) {
  WEFT_ASSIGN_OR_RETURN(Rig::Counts base, rig.Tasks());
  WEFT_RETURN_IF_ERROR(rig.Enqueue(plugin, n, {{"latency_ms", 0}}, "warmup-" + plugin + "-"));
  return rig.WaitDone(base, n, 20);
}

// Warning and error lines of a log (the format is "<time> WARN  <component>: ...").
std::pair<int, int> CountProblems(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  int warnings = 0, errors = 0;
  while (std::getline(in, line)) {
    if (line.find(" WARN ") != std::string::npos) ++warnings;
    if (line.find(" ERROR ") != std::string::npos) ++errors;
  }
  return {warnings, errors};
}

// ---- case "inflight" -----------------------------------------------------------

Result<ojson> InFlightCase(Rig& rig, const Options& opts) {
  std::fprintf(stderr, "case inflight: %d tasks of %d ms on capacity %d (%d workers)\n", opts.tasks, opts.latency_ms,
               opts.capacity, opts.workers);
  const std::vector<pid_t> workers = Children(rig.host_pid());
  WEFT_ASSIGN_OR_RETURN(Rig::Counts base, rig.Tasks());
  const std::int64_t host_cpu_start = TreeCpuNs(rig.host_pid());
  const std::int64_t weftd_cpu_start = TreeCpuNs(rig.weftd_pid());

  const auto start = SteadyClock::now();
  WEFT_RETURN_IF_ERROR(rig.Enqueue(kNative, opts.tasks, {{"latency_ms", opts.latency_ms}}, "inflight-"));
  const double enqueue_ms = MsSince(start);
  std::int64_t peak = 0;
  double peak_at_ms = 0;
  std::int64_t workers_rss_sum_peak = 0;
  const auto deadline = start + kCaseDeadline;
  double wall_ms = 0;
  while (true) {
    if (SteadyClock::now() > deadline) {
      WEFT_RETURN_IF_ERROR(rig.Alive());
      return Status::Timeout("case inflight did not finish within 3 minutes" + rig.Logs());
    }
    Result<json> hosts = rig.api().Call("host.list", json::object());
    if (!hosts.ok()) return hosts.status().WithContext("host.list");
    for (const json& h : (*hosts)["hosts"]) {
      const std::int64_t in_flight = h.value("in_flight", std::int64_t{0});
      if (h.value("id", "") == kHostId && in_flight > peak) {
        peak = in_flight;
        peak_at_ms = MsSince(start);
      }
    }
    std::int64_t rss_sum = 0;
    for (pid_t w : workers) rss_sum += StatusBytes(w, "VmRSS");
    workers_rss_sum_peak = std::max(workers_rss_sum_peak, rss_sum);
    WEFT_ASSIGN_OR_RETURN(Rig::Counts c, rig.Tasks());
    if (c.failed > base.failed) return Status::Internal("a task failed" + rig.Logs());
    if (c.succeeded - base.succeeded >= opts.tasks) {
      wall_ms = MsSince(start);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kSampleMs));
  }
  const double host_cpu_ms = static_cast<double>(TreeCpuNs(rig.host_pid()) - host_cpu_start) / 1e6;
  const double weftd_cpu_ms = static_cast<double>(TreeCpuNs(rig.weftd_pid()) - weftd_cpu_start) / 1e6;

  // VmHWM: the peak since each process started (the workers' includes the
  // native warm-up, which runs fewer tasks at once than this case).
  std::int64_t workers_hwm_sum = 0, workers_hwm_max = 0;
  for (pid_t w : workers) {
    const std::int64_t hwm = StatusBytes(w, "VmHWM");
    workers_hwm_sum += hwm;
    workers_hwm_max = std::max(workers_hwm_max, hwm);
  }
  const std::int64_t master_hwm = StatusBytes(rig.host_pid(), "VmHWM");
  const std::int64_t weftd_hwm = StatusBytes(rig.weftd_pid(), "VmHWM");
  const auto [warnings, errors] = CountProblems(rig.host_log());

  std::fprintf(stderr,
               "  peak %lld in flight after %.0f ms (enqueue took %.0f ms); all done in %.0f ms; host CPU %.0f ms, "
               "weftd CPU %.0f ms\n",
               static_cast<long long>(peak), peak_at_ms, enqueue_ms, wall_ms, host_cpu_ms, weftd_cpu_ms);

  ojson line;
  line["bench"] = "host";
  line["case"] = "inflight";
  line["tasks"] = opts.tasks;
  line["latency_ms"] = opts.latency_ms;
  line["capacity"] = opts.capacity;
  line["workers"] = static_cast<int>(workers.size());
  line["peak_in_flight"] = peak;
  line["peak_reached_ms"] = std::llround(peak_at_ms);
  line["wall_ms"] = std::llround(wall_ms);
  line["tasks_per_s"] = Round1(opts.tasks / (wall_ms / 1000));
  line["master_rss_peak_mib"] = Round1(Mib(master_hwm));
  line["workers_rss_peak_sum_mib"] = Round1(Mib(workers_hwm_sum));
  line["workers_rss_peak_max_mib"] = Round1(Mib(workers_hwm_max));
  line["workers_rss_sampled_sum_peak_mib"] = Round1(Mib(workers_rss_sum_peak));
  line["weftd_rss_peak_mib"] = Round1(Mib(weftd_hwm));
  line["host_cpu_ms"] = std::llround(host_cpu_ms);
  line["weftd_cpu_ms"] = std::llround(weftd_cpu_ms);
  line["host_log_warnings"] = warnings;
  line["host_log_errors"] = errors;
  line["target_in_flight"] = std::min(kTargetInFlight, opts.tasks);
  line["target_met"] = peak >= std::min<std::int64_t>(kTargetInFlight, opts.tasks);
  return line;
}

// ---- case "lua_overhead" -------------------------------------------------------

struct Round {
  double ms_per_task = 0;
  double host_cpu_us_per_task = 0;
  double one_at_a_time_ms = 0;  // median latency of a task alone on the host
};

// Runs `n` tasks one after the other (each enqueued once the previous one
// succeeded) and returns the median enqueue -> success time in ms: with one
// task in flight, what a task pays for its plugin's runtime is not hidden by
// the other runners.
Result<double> OneAtATime(Rig& rig, const std::string& plugin, int n, int index) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    WEFT_ASSIGN_OR_RETURN(Rig::Counts base, rig.Tasks());
    const auto start = SteadyClock::now();
    WEFT_RETURN_IF_ERROR(rig.Enqueue(plugin, 1, {{"latency_ms", 0}},
                                     "alone-" + std::to_string(index) + "-" + std::to_string(i) + "-"));
    WEFT_RETURN_IF_ERROR(rig.WaitDone(base, 1, 0));
    ms.push_back(MsSince(start));
  }
  return Median(ms);
}

Result<Round> RunRound(Rig& rig, const std::string& plugin, int n, int alone, int index) {
  WEFT_ASSIGN_OR_RETURN(Rig::Counts base, rig.Tasks());
  const std::int64_t cpu_start = TreeCpuNs(rig.host_pid());
  const auto start = SteadyClock::now();
  WEFT_RETURN_IF_ERROR(rig.Enqueue(plugin, n, {{"latency_ms", 0}}, "round-" + std::to_string(index) + "-"));
  WEFT_RETURN_IF_ERROR(rig.WaitDone(base, n, kRoundPollMs));
  const double wall_ms = MsSince(start);
  const double cpu_us = static_cast<double>(TreeCpuNs(rig.host_pid()) - cpu_start) / 1e3;
  WEFT_ASSIGN_OR_RETURN(double one, OneAtATime(rig, plugin, alone, index));
  return Round{wall_ms / n, cpu_us / n, one};
}

Result<ojson> LuaOverheadCase(Rig& rig, const Options& opts) {
  std::fprintf(stderr, "case lua_overhead: %d round(s) of %d tasks per plugin\n", opts.rounds, opts.lua_tasks);
  // The Lua plugin's sandboxes are made on first use; make them before timing.
  WEFT_RETURN_IF_ERROR(WarmUp(rig, kLua, opts.capacity));
  std::map<std::string, std::vector<double>> ms, cpu, alone;
  for (int r = 0; r < opts.rounds; ++r) {
    // Alternate the order, so neither plugin always runs on a warmer (or more
    // loaded) machine.
    const std::vector<std::string> order =
        r % 2 ? std::vector<std::string>{kLua, kNative} : std::vector<std::string>{kNative, kLua};
    for (const std::string& plugin : order) {
      WEFT_RETURN_IF_ERROR(rig.Alive());
      WEFT_ASSIGN_OR_RETURN(Round round, RunRound(rig, plugin, opts.lua_tasks, opts.alone_tasks, r));
      ms[plugin].push_back(round.ms_per_task);
      cpu[plugin].push_back(round.host_cpu_us_per_task);
      alone[plugin].push_back(round.one_at_a_time_ms);
      std::fprintf(stderr,
                   "  round %d/%d %-14s %.3f ms/task (%.0f tasks/s), host CPU %.0f us/task; alone %.3f ms/task\n",
                   r + 1, opts.rounds, plugin.c_str(), round.ms_per_task, 1000 / round.ms_per_task,
                   round.host_cpu_us_per_task, round.one_at_a_time_ms);
    }
  }
  const double native_ms = Median(ms[kNative]), lua_ms = Median(ms[kLua]);
  const double native_cpu = Median(cpu[kNative]), lua_cpu = Median(cpu[kLua]);
  const double native_alone = Median(alone[kNative]), lua_alone = Median(alone[kLua]);
  ojson line;
  line["bench"] = "host";
  line["case"] = "lua_overhead";
  line["tasks_per_round"] = opts.lua_tasks;
  line["rounds"] = opts.rounds;
  line["capacity"] = opts.capacity;
  line["native_ms_per_task"] = Round3(native_ms);
  line["lua_ms_per_task"] = Round3(lua_ms);
  line["native_tasks_per_s"] = std::llround(1000 / native_ms);
  line["lua_tasks_per_s"] = std::llround(1000 / lua_ms);
  line["overhead_ms_per_task"] = Round3(lua_ms - native_ms);
  line["native_host_cpu_us_per_task"] = Round1(native_cpu);
  line["lua_host_cpu_us_per_task"] = Round1(lua_cpu);
  line["overhead_host_cpu_us_per_task"] = Round1(lua_cpu - native_cpu);
  line["alone_tasks_per_round"] = opts.alone_tasks;
  line["native_alone_ms"] = Round3(native_alone);
  line["lua_alone_ms"] = Round3(lua_alone);
  line["overhead_alone_ms"] = Round3(lua_alone - native_alone);
  line["target_overhead_ms"] = kTargetLuaOverheadMs;
  // Both views must be under the target: throughput at full capacity, and the
  // latency of a task alone.
  line["target_met"] = lua_ms - native_ms < kTargetLuaOverheadMs && lua_alone - native_alone < kTargetLuaOverheadMs;
  return line;
}

int Host(const std::vector<std::string>& args) {
  Options opts;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](int min, int max, int* out) {
      return i + 1 < args.size() && ParseInt(args[++i], min, max, out);
    };
    if (a == "--tasks") {
      if (!value(1, 100'000, &opts.tasks)) return Usage("--tasks needs a number from 1 to 100000");
    } else if (a == "--latency-ms") {
      if (!value(0, 600'000, &opts.latency_ms)) return Usage("--latency-ms needs a number from 0 to 600000");
    } else if (a == "--capacity") {
      if (!value(1, 4096, &opts.capacity)) return Usage("--capacity needs a number from 1 to 4096");
    } else if (a == "--workers") {
      if (!value(1, 256, &opts.workers)) return Usage("--workers needs a number from 1 to 256");
    } else if (a == "--rounds") {
      if (!value(1, 100, &opts.rounds)) return Usage("--rounds needs a number from 1 to 100");
    } else if (a == "--lua-tasks") {
      if (!value(1, 1'000'000, &opts.lua_tasks)) return Usage("--lua-tasks needs a number from 1 to 1000000");
    } else if (a == "--alone-tasks") {
      if (!value(1, 100'000, &opts.alone_tasks)) return Usage("--alone-tasks needs a number from 1 to 100000");
    } else if (a == "--only") {
      if (i + 1 >= args.size()) return Usage("--only needs \"inflight\" or \"lua\"");
      const std::string which = args[++i];
      if (which != "inflight" && which != "lua") return Usage("--only needs \"inflight\" or \"lua\"");
      opts.inflight_case = which == "inflight";
      opts.lua_case = which == "lua";
    } else if (a == "--keep-dir") {
      opts.keep_dir = true;
    } else if (a == "--help" || a == "-h") {
      Usage("one real weft-host: tasks in flight at once, and the Lua runtime's cost per task");
      return 0;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }
  Result<Paths> paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench host: %s\n", paths.status().message().c_str());
    return 1;
  }
  try {
    zmq::context_t ctx(1);
    Rig rig(ctx, *paths, opts);
    Status s = rig.Start();
    // Connections and plugin state first: every runner once, at once.
    if (s.ok()) s = WarmUp(rig, kNative, opts.capacity);
    if (!s.ok()) {
      std::fprintf(stderr, "weft-bench host: %s\n", s.message().c_str());
      return 1;
    }
    std::vector<ojson> lines;
    if (opts.inflight_case) {
      Result<ojson> line = InFlightCase(rig, opts);
      if (!line.ok()) {
        std::fprintf(stderr, "weft-bench host: %s\n", line.status().message().c_str());
        return 1;
      }
      std::printf("%s\n", line->dump().c_str());
      std::fflush(stdout);
    }
    if (opts.lua_case) {
      Result<ojson> line = LuaOverheadCase(rig, opts);
      if (!line.ok()) {
        std::fprintf(stderr, "weft-bench host: %s\n", line.status().message().c_str());
        return 1;
      }
      std::printf("%s\n", line->dump().c_str());
    }
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "weft-bench host: ZeroMQ failed: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench host: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

WEFT_BENCH("host", "one weft-host: 1,000 tasks in flight at once; Lua plugin cost per task vs native", Host);

}  // namespace weft::bench
