// weft-bench dispatch: how many tasks per second a real weftd hands out and takes
// back, against how many plain ZeroMQ DEALER->ROUTER round trips this machine
// does with the same number of client threads.
//
// Each run starts weftd (found next to weft-bench) with a fresh data directory and
// ephemeral loopback ports, enqueues M tasks with debug.enqueue, then lets N
// simulated hosts (one thread and one DEALER each, host ids bench-0..N-1, plugin
// type "bench") do task.take -> task.finish as fast as they can. The clock runs
// from the moment all hosts are registered until the last finish is answered.
// Every run is followed by a raw round-trip run with N DEALER threads against a
// ROUTER that echoes. Medians over R runs are printed as one JSON line.
// The simulated hosts are as cheap as the raw clients: they write their
// requests from a template and read only what they need of a reply (see
// LeanHost), so that on a small machine the cores go to weftd and the
// transport, as in the raw runs, not to the hosts' own JSON.
//
// A task costs two round trips (take, finish), so ratio 0.5 would be the
// transport's limit; the target is 0.4 (it was 0.25). A second line measures
// the same runs with finish+take in one round trip (task.finish's "take"),
// which real hosts use: there a task costs one round trip, so that line's
// "transport_limit" is 1.0 and its target 0.8.
// A third line compares finish+take with metrics on (the default, and scraped
// once a second the way Prometheus would) and off ([metrics] enabled = false)
// in the same invocation, alternating which goes first: its "ratio" is on/off,
// and the cost of metrics must not show (target 0.97).
// With --store postgres it measures finish+take instead with weftd's store on
// SQLite and on a local throwaway PostgreSQL (tests/support/postgres.hpp) in
// the same invocation, alternating which goes first; its "ratio" is
// postgres/sqlite (target 0.5: every commit crosses a socket).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <barrier>
#include <condition_variable>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
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

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr double kTargetRatio = 0.4;           // take,finish
constexpr double kCombinedTargetRatio = 0.8;   // finish+take
constexpr double kMetricsTargetRatio = 0.97;
constexpr double kPostgresTargetRatio = 0.5;
constexpr int kEnqueueBatch = 1000;            // debug.enqueue accepts up to 10,000
constexpr int kTakeWaitMs = 500;               // how long an idle host's take is held
constexpr auto kRunDeadline = std::chrono::seconds(120);

struct Options {
  int hosts = 4;
  // About a second at today's rate, as long as a raw run: at 4,000 a run was
  // half start-up (7 runs here spread 5.8k-9.3k tasks/s; at 10,000, 8.3k-9.4k).
  int tasks = 10000;
  int runs = 5;
  int raw_ms = 1000;  // length of one raw round-trip run
  std::string store;  // "postgres": compare the store backends instead
  int idle_spin_us = -1;  // weftd's [server] idle_spin_us; -1 leaves its default
  std::string window_hook;  // a shell command run as `HOOK start|stop PID` around each timed run
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench dispatch: %s\n"
               "usage: weft-bench dispatch [--hosts N] [--tasks M] [--runs R] [--raw-ms MS] [--store postgres]\n"
               "                           [--idle-spin-us US] [--window-hook CMD]\n"
               "  --hosts N    simulated hosts, one thread each (default 4)\n"
               "  --tasks M    tasks dispatched per run (default 10000)\n"
               "  --runs R     repetitions; medians are reported (default 5)\n"
               "  --raw-ms MS  length of each raw ZeroMQ round-trip run (default 1000)\n"
               "  --store postgres  finish+take with the store on PostgreSQL against SQLite\n"
               "  --idle-spin-us US  weftd's [server] idle_spin_us (default: weftd's own)\n"
               "  --window-hook CMD  run `CMD start PID` as each dispatch run's clock starts (the tasks\n"
               "               enqueued, the hosts registered) and `CMD stop PID` once its hosts are done,\n"
               "               PID weftd's (e.g. a script running callgrind_control -z / -d when weftd\n"
               "               is a script exec'ing valgrind); the run waits for it\n",
               problem.c_str());
  return 2;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// --window-hook: `hook what pid`, waited for.
void RunHook(const std::string& hook, const char* what, pid_t pid) {
  if (hook.empty()) return;
  const std::string command = hook + " " + what + " " + std::to_string(pid);
  if (int rc = std::system(command.c_str()); rc != 0)
    std::fprintf(stderr, "weft-bench dispatch: --window-hook: `%s` exited with status %d\n", command.c_str(), rc);
}



json BenchPlugin() {
  return json{{"type", "bench"},
              {"kind", "automator"},
              {"version", "1.0"},
              {"description", "weft-bench dispatch: finishes every task at once"},
              {"actions", json::array({"INSTALL"})},
              {"fields", json::array()},
              {"resource_types", json::array()}};
}

Status Enqueue(zmq::context_t& ctx, const std::string& api, int tasks) {
  client::Client api_client(ctx, client::Options{.endpoint = api, .timeout_ms = 30000, .tenant = "", .limits = {}});
  for (int first = 0; first < tasks; first += kEnqueueBatch) {
    json batch = json::array();
    for (int i = first; i < std::min(tasks, first + kEnqueueBatch); ++i) {
      batch.push_back({{"plugin", "bench"}, {"action", "INSTALL"}, {"node_id", std::string("n").append(std::to_string(i))}});
    }
    Result<json> reply = api_client.Call("debug.enqueue", json{{"tasks", std::move(batch)}});
    if (!reply.ok()) return reply.status().WithContext("debug.enqueue");
  }
  return Status::Ok();
}

// The task a reply hands out: task_id 0 when none.
struct TaskRef {
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
};

// The number after `key` in `text`, searched from `from`; -1 when there is none.
std::int64_t NumberAfter(std::string_view text, std::string_view key, std::size_t from) {
  const std::size_t at = text.find(key, from);
  if (at == std::string_view::npos) return -1;
  std::int64_t v = -1;
  const char* begin = text.data() + at + key.size();
  auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v);
  return ec == std::errc() && end != begin ? v : -1;
}

// One simulated host's DEALER. Requests are written from a template, and a
// reply is read only as far as a host of the bench needs: its id, whether it
// is ok, and the task_id and attempt of the task it carries. weftd writes a
// reply's keys in order and without spaces ({"body":{"task":{...}},"id":..,
// "ok":true,"v":1}), so finding them is enough.
class LeanHost {
 public:
  LeanHost(zmq::context_t& ctx, const std::string& endpoint, std::string host_id)
      : socket_(ctx, zmq::socket_type::dealer), host_id_(std::move(host_id)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, kTakeWaitMs + 10000);
    socket_.connect(endpoint);
  }

  Result<TaskRef> Take() {
    body_.assign("{\"host_id\":\"").append(host_id_).append("\",\"wait_ms\":").append(std::to_string(kTakeWaitMs));
    body_ += '}';
    return Call("task.take");
  }

  // With `take`, the finish asks for the next task too (not held).
  Result<TaskRef> Finish(const TaskRef& done, bool take) {
    body_.assign("{\"attempt\":").append(std::to_string(done.attempt));
    body_.append(",\"host_id\":\"").append(host_id_);
    body_.append("\",\"message\":\"\",\"result\":{},\"status\":\"succeeded\",");
    if (take) body_.append("\"take\":{\"wait_ms\":0},");
    body_.append("\"task_id\":").append(std::to_string(done.task_id));
    body_ += '}';
    return Call("task.finish");
  }

 private:
  Result<TaskRef> Call(std::string_view op) {
    const std::string id = std::to_string(++next_id_);
    std::string text = "{\"body\":";
    text.append(body_).append(",\"id\":\"").append(id).append("\",\"op\":\"").append(op).append("\",\"v\":1}");
    if (!socket_.send(zmq::buffer(text), zmq::send_flags::none)) return Status::Unavailable("could not send");
    zmq::message_t reply;
    if (!socket_.recv(reply, zmq::recv_flags::none)) return Status::Timeout("no reply to " + std::string(op));
    const std::string_view r(static_cast<const char*>(reply.data()), reply.size());
    if (r.find(",\"id\":\"" + id + "\",\"ok\":true,") == std::string_view::npos)
      return Status::Internal(std::string(op) + " failed: " + std::string(r));
    TaskRef task;
    constexpr std::string_view kTask = "{\"body\":{\"task\":{";
    if (!r.starts_with(kTask)) return task;  // {"task":null}, or a finish without a take
    task.attempt = NumberAfter(r, "\"attempt\":", kTask.size());
    task.task_id = NumberAfter(r, "\"task_id\":", kTask.size());
    if (task.attempt < 1 || task.task_id < 1) return Status::Internal("a task without task_id and attempt: " + std::string(r));
    return task;
  }

  zmq::socket_t socket_;
  std::string host_id_;
  std::string body_;
  std::int64_t next_id_ = 0;
};

struct DispatchResult {
  double tasks_per_s = 0;
  double weftd_cpu_us_per_task = 0;  // all weftd threads, over the timed part
  double postgres_cpu_us_per_task = 0;  // the PostgreSQL server's processes, when the store is there
};

// Scrapes weftd's /metrics about once a second, as Prometheus would, until destroyed.
class Scraper {
 public:
  explicit Scraper(const std::string& url) {
    if (url.empty()) return;
    thread_ = std::thread([this, url] {
      std::unique_lock lock(mu_);
      while (!stop_) {
        lock.unlock();
        try {
          // "http://127.0.0.1:PORT/metrics": the server part, then the path.
          const std::size_t path = url.find('/', url.find("//") + 2);
          (void)testing::HttpSend(url.substr(0, path), "GET", url.substr(path));
        } catch (const std::exception&) {
          // weftd is stopping; the next turn of the loop ends
        }
        lock.lock();
        cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
      }
    });
  }
  ~Scraper() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// One dispatch run against a fresh weftd (with its metrics on and scraped, or off).
Result<DispatchResult> DispatchRun(zmq::context_t& ctx, const fs::path& weftd_bin, const Options& opts,
                                   bool combined, bool metrics = true, const std::string& store = "sqlite") {
  ScratchDir dir("weft-bench");
  testing::WeftdOptions options = BenchWeftd(
      weftd_bin, dir.path(), opts.idle_spin_us < 0 ? "" : "idle_spin_us = " + std::to_string(opts.idle_spin_us) + "\n");
  if (!metrics) options.extra_toml = "[metrics]\nenabled = false\n";
  options.store = store;
  testing::Weftd weftd(options, testing::Weftd::Deferred{});
  WEFT_RETURN_IF_ERROR(StartWeftd(weftd));
  WEFT_RETURN_IF_ERROR(Enqueue(ctx, weftd.api(), opts.tasks));
  Scraper scraper(weftd.endpoints().value("metrics", std::string()));

  std::atomic<int> finished{0};
  std::atomic<bool> abort{false};
  std::mutex error_mu;
  Status first_error;
  SteadyClock::time_point start;
  SteadyClock::time_point end;
  std::mutex end_mu;
  std::int64_t cpu_start_ns = 0;
  std::int64_t cpu_end_ns = 0;
  // PostgreSQL's server is not weftd's child: its CPU is counted apart.
  const pid_t postgres = weftd.postgres() ? weftd.postgres()->pid() : 0;
  std::int64_t postgres_start_ns = 0;
  std::int64_t postgres_end_ns = 0;
  std::barrier registered(opts.hosts, [&]() noexcept {
    RunHook(opts.window_hook, "start", weftd.pid());
    cpu_start_ns = TreeCpuNs(weftd.pid());
    if (postgres > 0) postgres_start_ns = TreeCpuNs(postgres);
    start = SteadyClock::now();
  });
  const auto deadline = SteadyClock::now() + kRunDeadline;

  auto fail = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.ok()) first_error = st;
    abort = true;
  };

  auto host = [&](int index) {
    std::string host_id = "bench-";
    host_id += std::to_string(index);
    client::Client c(ctx, client::Options{
                              .endpoint = weftd.provisioner(), .timeout_ms = 10000, .tenant = "", .limits = {}});
    Result<json> reg = c.Call("host.register", json{{"host_id", host_id},
                                                   {"capacity", 1},
                                                   {"version", "0.1.0"},
                                                   {"plugins", json::array({BenchPlugin()})}});
    if (!reg.ok()) fail(reg.status().WithContext(host_id + " host.register"));
    LeanHost lean(ctx, weftd.provisioner(), host_id);
    registered.arrive_and_wait();
    TaskRef next;  // a task handed out with the last finish (combined mode)
    while (!abort && finished.load() < opts.tasks) {
      if (SteadyClock::now() > deadline) {
        std::string message = "the run did not finish within 120 s (";
        message += std::to_string(finished.load()) + " of " + std::to_string(opts.tasks) + " tasks done)";
        fail(Status::Timeout(message));
        return;
      }
      if (next.task_id == 0) {
        Result<TaskRef> took = lean.Take();
        if (!took.ok()) {
          fail(took.status().WithContext(host_id + " task.take"));
          return;
        }
        next = *took;
        if (next.task_id == 0) continue;
      }
      // The last tasks are not waited for: a held take would only delay the end of the run.
      Result<TaskRef> done = lean.Finish(next, combined);
      if (!done.ok()) {
        fail(done.status().WithContext(host_id + " task.finish"));
        return;
      }
      next = combined ? *done : TaskRef{};
      if (finished.fetch_add(1) + 1 == opts.tasks) {
        std::lock_guard<std::mutex> lock(end_mu);
        end = SteadyClock::now();
        cpu_end_ns = TreeCpuNs(weftd.pid());
        if (postgres > 0) postgres_end_ns = TreeCpuNs(postgres);
      }
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < opts.hosts; ++i) threads.emplace_back(host, i);
  for (auto& t : threads) t.join();
  RunHook(opts.window_hook, "stop", weftd.pid());
  if (!first_error.ok()) return first_error.WithContext("dispatch run (weftd log: " + Tail(weftd.LogPath(), 600) + ")");
  weftd.Stop(std::chrono::seconds(15));
  double seconds = Seconds(end - start);
  DispatchResult result;
  result.tasks_per_s = seconds > 0 ? opts.tasks / seconds : 0.0;
  result.weftd_cpu_us_per_task = static_cast<double>(cpu_end_ns - cpu_start_ns) / 1000.0 / opts.tasks;
  result.postgres_cpu_us_per_task = static_cast<double>(postgres_end_ns - postgres_start_ns) / 1000.0 / opts.tasks;
  return result;
}

// About the size of a task.take request header.
constexpr const char* kRawPayload =
    R"({"v":1,"id":"1234567890-17","op":"task.take","tenant":"","body":{"host_id":"bench-0","wait_ms":500}})";

// finish+take on SQLite and on PostgreSQL, alternating which goes first.
int CompareStores(const fs::path& weftd_bin, const Options& opts) {
  std::vector<double> sqlite_per_s, postgres_per_s, sqlite_cpu, postgres_cpu, server_cpu;
  try {
    zmq::context_t ctx(1);
    for (int r = 0; r < opts.runs; ++r) {
      std::vector<std::string> stores = {"sqlite", "postgres"};
      if (r % 2 == 1) std::swap(stores[0], stores[1]);
      for (const std::string& store : stores) {
        Result<DispatchResult> d = DispatchRun(ctx, weftd_bin, opts, true, true, store);
        if (!d.ok()) {
          std::fprintf(stderr, "weft-bench dispatch: %s\n", d.status().message().c_str());
          return 1;
        }
        (store == "postgres" ? postgres_per_s : sqlite_per_s).push_back(d->tasks_per_s);
        (store == "postgres" ? postgres_cpu : sqlite_cpu).push_back(d->weftd_cpu_us_per_task);
        if (store == "postgres") server_cpu.push_back(d->postgres_cpu_us_per_task);
        std::fprintf(stderr, "run %d/%d finish+take on %s: %.0f tasks/s (weftd CPU %.1f us/task", r + 1, opts.runs,
                     store.c_str(), d->tasks_per_s, d->weftd_cpu_us_per_task);
        if (store == "postgres") std::fprintf(stderr, ", PostgreSQL CPU %.1f us/task", d->postgres_cpu_us_per_task);
        std::fprintf(stderr, ")\n");
      }
    }
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "weft-bench dispatch: ZeroMQ failed: %s\n", e.what());
    return 1;
  }
  const double sqlite = Median(sqlite_per_s), postgres = Median(postgres_per_s);
  nlohmann::ordered_json line;
  line["bench"] = "dispatch";
  line["mode"] = "finish+take, postgres/sqlite";
  line["hosts"] = opts.hosts;
  line["tasks"] = opts.tasks;
  line["runs"] = opts.runs;
  line["tasks_per_s_sqlite"] = std::llround(sqlite);
  line["tasks_per_s_postgres"] = std::llround(postgres);
  line["ratio"] = sqlite > 0 ? std::round(postgres / sqlite * 1000) / 1000 : 0.0;
  line["target_ratio"] = kPostgresTargetRatio;
  // Medians: weftd's CPU with each store, and the PostgreSQL server's own.
  line["weftd_cpu_us_per_task_sqlite"] = std::round(Median(sqlite_cpu) * 10) / 10;
  line["weftd_cpu_us_per_task_postgres"] = std::round(Median(postgres_cpu) * 10) / 10;
  line["postgres_cpu_us_per_task"] = std::round(Median(server_cpu) * 10) / 10;
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

int Dispatch(const std::vector<std::string>& args) {
  Options opts;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](int min, int max, int* out) {
      return i + 1 < args.size() && ParseInt(args[++i], min, max, out);
    };
    if (a == "--hosts") {
      if (!value(1, 256, &opts.hosts)) return Usage("--hosts needs a number from 1 to 256");
    } else if (a == "--tasks") {
      if (!value(1, 10'000'000, &opts.tasks)) return Usage("--tasks needs a number from 1 to 10000000");
    } else if (a == "--runs") {
      if (!value(1, 100, &opts.runs)) return Usage("--runs needs a number from 1 to 100");
    } else if (a == "--raw-ms") {
      if (!value(100, 60'000, &opts.raw_ms)) return Usage("--raw-ms needs a number from 100 to 60000");
    } else if (a == "--store") {
      if (i + 1 >= args.size() || args[++i] != "postgres") return Usage("--store takes postgres");
      opts.store = args[i];
    } else if (a == "--idle-spin-us") {
      if (!value(0, 10'000, &opts.idle_spin_us)) return Usage("--idle-spin-us needs a number from 0 to 10000");
    } else if (a == "--window-hook") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return Usage("--window-hook needs a command");
      opts.window_hook = args[++i];
    } else if (a == "--help" || a == "-h") {
      Usage("measures weftd's task dispatch against raw ZeroMQ round trips");
      return 0;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }

  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path weftd_bin = self.parent_path() / "weftd";
  if (ec || !fs::exists(weftd_bin)) {
    std::fprintf(stderr, "weft-bench dispatch: %s not found; build the weftd target first\n", weftd_bin.c_str());
    return 1;
  }

  if (opts.store == "postgres") return CompareStores(weftd_bin, opts);

  std::vector<double> tasks_per_s, combined_per_s, raw_per_s, raw_own_io_per_s, metrics_off_per_s;
  try {
    zmq::context_t ctx(1);
    for (int r = 0; r < opts.runs; ++r) {
      // finish+take with metrics off goes before the runs with metrics on in
      // every other repetition, so that a drift of the machine favours neither.
      const bool off_first = r % 2 == 1;
      struct Case {
        bool combined;
        bool metrics;
      };
      std::vector<Case> cases = {{false, true}, {true, true}};
      cases.insert(off_first ? cases.begin() : cases.end(), Case{true, false});
      for (const Case& c : cases) {
        Result<DispatchResult> d = DispatchRun(ctx, weftd_bin, opts, c.combined, c.metrics);
        if (!d.ok()) {
          std::fprintf(stderr, "weft-bench dispatch: %s\n", d.status().message().c_str());
          return 1;
        }
        (!c.metrics ? metrics_off_per_s : c.combined ? combined_per_s : tasks_per_s).push_back(d->tasks_per_s);
        std::fprintf(stderr, "run %d/%d %s%s: %.0f tasks/s (weftd CPU %.1f us/task)\n", r + 1, opts.runs,
                     c.combined ? "finish+take" : "take, finish", c.metrics ? "" : ", metrics off", d->tasks_per_s,
                     d->weftd_cpu_us_per_task);
      }
      Result<double> raw = RawRoundTrips(ctx, opts.hosts, opts.raw_ms, kRawPayload);
      if (!raw.ok()) {
        std::fprintf(stderr, "weft-bench dispatch: %s\n", raw.status().message().c_str());
        return 1;
      }
      raw_per_s.push_back(*raw);
      Result<double> raw_own = RawRoundTrips(ctx, opts.hosts, opts.raw_ms, kRawPayload, /*echo_own_io=*/true);
      if (!raw_own.ok()) {
        std::fprintf(stderr, "weft-bench dispatch: %s\n", raw_own.status().message().c_str());
        return 1;
      }
      raw_own_io_per_s.push_back(*raw_own);
      std::fprintf(stderr, "run %d/%d: %.0f raw round trips/s, %.0f with the echo's own I/O thread\n", r + 1,
                   opts.runs, *raw, *raw_own);
    }
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "weft-bench dispatch: ZeroMQ failed: %s\n", e.what());
    return 1;
  }

  const double raw = Median(raw_per_s);
  const double raw_own_io = Median(raw_own_io_per_s);
  for (bool combined : {false, true}) {
    const double tps = Median(combined ? combined_per_s : tasks_per_s);
    const double ratio = raw > 0 ? tps / raw : 0;
    // Keys in a fixed order, so the line reads the same in every report.
    nlohmann::ordered_json line;
    line["bench"] = "dispatch";
    line["mode"] = combined ? "finish+take" : "take,finish";
    line["hosts"] = opts.hosts;
    line["tasks"] = opts.tasks;
    line["runs"] = opts.runs;
    line["tasks_per_s"] = std::llround(tps);
    line["raw_roundtrips_per_s"] = std::llround(raw);
    line["ratio"] = std::round(ratio * 1000) / 1000;
    line["transport_limit"] = combined ? 1.0 : 0.5;
    line["target_ratio"] = combined ? kCombinedTargetRatio : kTargetRatio;
    // Context, not the target: the same echo with an I/O thread of its own, as weftd has.
    line["raw_echo_own_io_per_s"] = std::llround(raw_own_io);
    line["ratio_vs_echo_own_io"] = raw_own_io > 0 ? std::round(tps / raw_own_io * 1000) / 1000 : 0.0;
    std::printf("%s\n", line.dump().c_str());
  }
  const double on = Median(combined_per_s), off = Median(metrics_off_per_s);
  nlohmann::ordered_json line;
  line["bench"] = "dispatch";
  line["mode"] = "finish+take, metrics on/off";
  line["hosts"] = opts.hosts;
  line["tasks"] = opts.tasks;
  line["runs"] = opts.runs;
  line["tasks_per_s_metrics_on"] = std::llround(on);
  line["tasks_per_s_metrics_off"] = std::llround(off);
  line["ratio"] = off > 0 ? std::round(on / off * 1000) / 1000 : 0.0;
  line["target_ratio"] = kMetricsTargetRatio;
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace

WEFT_BENCH("dispatch", "weftd take->finish tasks/s vs raw ZeroMQ round trips/s", Dispatch);

}  // namespace weft::bench
