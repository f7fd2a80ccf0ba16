#include "weft/host/master.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/common/log.hpp"
#include "weft/common/metrics.hpp"
#include "weft/common/metrics_http.hpp"
#include "weft/common/version.hpp"
#include "weft/host/enrollment.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/probe.hpp"
#include "weft/host/resource_sync.hpp"
#include "weft/host/supervision.hpp"
#include "weft/host/worker_protocol.hpp"

namespace weft::host {
namespace {

// A new value for every process: weftd tells a restart from a re-registration by it.
std::string NewIncarnation() {
  std::random_device random;
  char text[40];
  std::snprintf(text, sizeof text, "%d-%08x%08x", static_cast<int>(getpid()), random(), random());
  return text;
}

// This machine's name, for weftd's message when another process registers under our host id.
std::string MachineName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using TaskKey = std::pair<std::int64_t, std::int64_t>;  // task_id, attempt
constexpr const char* kLog = "host";

constexpr int kBackoffMs = 500;
constexpr int kRefusedRetryMs = 1000;  // register again while another process holds the host id
constexpr int kTickMs = 100;               // memory and hang checks
constexpr int kRescanDebounceMs = 300;     // a copy in progress fires many events
constexpr int kWatchRetryMs = 1000;        // how often an absent plugin directory is looked for
// What plugins print to stdout and stderr goes to the host's log, each line
// labelled with its stream and task; at most this much of each stream per task
// attempt (and per worker while no task runs), then one line says how much was
// dropped.
constexpr std::uint64_t kPluginOutputBytes = 64 * 1024;
// What a worker that dies wrote last, past that bound, is logged all the same
// (up to this much of each stream): a crash report after a flood of output.
constexpr std::size_t kDeathTailBytes = 32 * 1024;
constexpr std::size_t kOutputReadBytes = 1024 * 1024;    // per worker and poll round, so one cannot starve the rest
constexpr auto kDeathWindow = std::chrono::seconds(60);
// Tasks whose attempts all ended that the master still remembers, to refuse a
// late-read older attempt of one of them (about 60 bytes each).
constexpr std::size_t kRememberEndedTasks = 65'536;
constexpr int kMaxNotFoundReports = 5;  // weftd does not know the task: re-registering did not help
constexpr int kLeaveWaitMs = 1000;       // how long a stopping host waits for weftd to answer host.leave

std::int64_t IntOr(const json& obj, const char* key, std::int64_t fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

// How long a task may run past task_timeout_ms after its cancel before the
// master kills its worker: a tenth of the timeout, within 1 s to 30 s.
int HangGraceMs(int task_timeout_ms) { return std::clamp(task_timeout_ms / 10, 1000, 30'000); }

std::string Ms(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// A worker's stdout and stderr: pipes the master reads (see ReadOutput).
enum Stream : std::size_t { kStdout = 0, kStderr = 1 };
constexpr std::array<const char*, 2> kStreamNames = {"stdout", "stderr"};

struct HeldTask {
  std::string plugin;
  std::string action;
  std::string tenant;
  std::string node;  // the task's node_id ("" none)
  Clock::time_point started;
  bool ran = false;  // the plugin returned; the worker is reporting
  std::array<std::uint64_t, 2> out_bytes{};    // by Stream: what the worker printed while this task ran
  std::array<std::uint64_t, 2> out_dropped{};  // of which not logged: past kPluginOutputBytes
};

// "task 42 (plugin 'x' INSTALL, node n1)": names one task of a worker, so that
// messages about a worker's death tell apart tasks of the same plugin type.
std::string TaskLabel(std::int64_t task_id, const HeldTask& t) {
  return "task " + std::to_string(task_id) + " (plugin '" + t.plugin + "' " + t.action +
         (t.node.empty() ? std::string() : ", node " + t.node) + ")";
}

struct Worker {
  pid_t pid = -1;
  int fd = -1;          // channel
  int slot = -1;        // -1: retired (draining after a plugin change)
  std::uint64_t generation = 0;
  std::string tenant;
  int threads = 1;
  Clock::time_point started;
  bool ready = false;
  bool drained = false;  // no more takes (retired workers)
  bool stop_sent = false;
  bool stop_killed = false;
  bool eof = false;  // the channel closed: not polled any more (it would spin)
  KillReason kill_reason = KillReason::kNone;
  TaskKey kill_task{0, 0};
  std::map<TaskKey, HeldTask> tasks;
  LineBuffer buffer;
  // The worker's stdout and stderr (what plugins print), by Stream, read by
  // the master and logged line by line with the task that ran, at most
  // kPluginOutputBytes of each per task.
  struct Output {
    int fd = -1;
    bool eof = false;
    std::string partial;             // an unfinished line
    std::uint64_t idle_bytes = 0;    // printed while no task ran
    std::uint64_t idle_dropped = 0;
    // The last lines dropped (kDeathTailBytes at most), of the tasks that
    // still run: logged if the worker dies, as they hold its last words.
    struct Dropped {
      std::vector<TaskKey> tasks;  // the tasks that ran when it was printed (none: no task ran)
      std::string label;
      std::string text;
    };
    std::deque<Dropped> tail;
    std::size_t tail_bytes = 0;
  };
  std::array<Output, 2> out;
};

// What a worker slot runs: the tenant it serves ("" any) and its threads.
struct Slot {
  SlotSpec spec;
  std::optional<pid_t> pid;  // the live worker of this slot
  Clock::time_point start_at;
  std::deque<Clock::time_point> deaths;
};

// The operator's static split: worker i serves tenants[i % n] (any tenant when
// `tenants` is empty), with capacity / workers threads.
std::vector<SlotSpec> ConfiguredSlots(const HostConfig& config) {
  std::vector<SlotSpec> out;
  for (int i = 0; i < EffectiveWorkers(config); ++i) {
    out.push_back({config.tenants.empty() ? std::string()
                                          : config.tenants[static_cast<std::size_t>(i) % config.tenants.size()],
                   WorkerThreads(config, i)});
  }
  return out;
}

// weftd's split ([{tenant, threads}]) as worker slots: a tenant's threads in
// ceil(threads * workers / capacity) workers, so a worker has about as many
// threads as with the configured split and a tenant with a small share still
// has a process of its own. Empty if `split` says nothing usable.
std::vector<SlotSpec> SlotsFromSplit(const HostConfig& config, const json& split) {
  std::vector<SlotSpec> out;
  if (!split.is_array()) return out;
  const std::int64_t n = EffectiveWorkers(config);
  for (const json& entry : split) {
    if (!entry.is_object() || !entry.contains("tenant") || !entry["tenant"].is_string()) continue;
    const std::int64_t threads = std::clamp<std::int64_t>(IntOr(entry, "threads", 0), 0, config.capacity);
    if (threads == 0) continue;
    const std::int64_t workers = std::min(threads, (threads * n + config.capacity - 1) / config.capacity);
    for (std::int64_t i = 0; i < workers; ++i) {
      out.push_back({entry["tenant"].get<std::string>(),
                     static_cast<int>(threads / workers + (i < threads % workers ? 1 : 0))});
    }
  }
  return out;
}

std::string DescribeSlots(const std::vector<SlotSpec>& slots) {
  std::map<std::string, std::pair<int, int>> by_tenant;  // workers, threads
  for (const SlotSpec& s : slots) {
    ++by_tenant[s.tenant].first;
    by_tenant[s.tenant].second += s.threads;
  }
  std::string out;
  for (const auto& [tenant, n] : by_tenant) {
    out += (out.empty() ? "" : ", ") + (tenant.empty() ? std::string("any tenant") : "'" + tenant + "'") + ": " +
           std::to_string(n.first) + " worker(s), " + std::to_string(n.second) + " thread(s)";
  }
  return out.empty() ? "no workers" : out;
}

struct FileVerdict {
  std::int64_t mtime_ns = 0;
  std::int64_t size = 0;
  std::uint64_t inode = 0;
  ProbeResult probe;
};

}  // namespace

namespace {

// A plugin file the workers load, and the tenant it belongs to ("" for a
// host-wide plugin of the operator's plugin directories).
struct PluginFile {
  std::filesystem::path path;
  std::string tenant;
  bool operator==(const PluginFile&) const = default;
};

}  // namespace

struct Master::Impl {
  Impl(HostConfig c, std::string e) : config(std::move(c)), exe(std::move(e)), ctx(1) {}

  const HostConfig config;
  const std::string exe;
  zmq::context_t ctx;
  // Pre-fetches resources and installs Lua plugin resources into the resource
  // plugin directory, which is the last of config.plugin_dirs (see Master()).
  std::unique_ptr<ResourceSync> resources;

  // ---- owned by the main thread ----
  std::map<pid_t, Worker> workers;
  std::vector<Slot> slots;
  std::uint64_t generation = 1;
  std::vector<PluginFile> plugin_files;  // the good ones, in load order
  std::map<std::filesystem::path, FileVerdict> verdicts;
  int signal_fd = -1;
  int inotify_fd = -1;
  int wake_fd = -1;  // eventfd: the control thread wakes the main loop
  // The master's own stderr (its log), for the workers' log lines: their
  // stderr is a pipe for what plugins write there. -1: workers keep ours.
  int log_fd = -1;
  std::map<int, std::filesystem::path> watches;  // inotify watch -> plugin directory
  std::map<int, std::pair<dev_t, ino_t>> watched_inodes;  // the directory each watch was put on
  // Plugin directories without a watch: absent (not created yet, removed, moved
  // away) or not watchable. Tried again every kWatchRetryMs (see Tick).
  std::set<std::filesystem::path> unwatched;
  Clock::time_point watch_retry_at;
  std::optional<Clock::time_point> rescan_at;
  std::optional<Clock::time_point> register_after_drain_deadline;
  bool stopping = false;
  Clock::time_point stop_deadline;
  bool workers_started = false;
  // The newest attempt of each task the workers started (see OnMessage).
  AttemptGuard attempts{kRememberEndedTasks};
  // When to follow weftd's worker split (ApplySplit).
  SplitHold split_hold{config.split_hold_ms};
  bool split_followed = false;  // a split of weftd's was followed, or matched the workers, once

  // ---- shared with the control thread (mu) ----
  std::mutex mu;
  std::condition_variable cv;
  json plugins_json = json::array();
  json refused_json = json::array();  // the plugin files Scan refused, with why
  std::vector<std::string> plugin_types;
  bool registered = false;
  bool reregister = false;
  bool control_stop = false;
  std::int64_t heartbeat_ms = 2000;
  std::vector<TaskKey> in_flight;   // every worker's tasks, for heartbeats
  struct Report {
    json body;  // task.finish of a task whose worker died
    int not_found = 0;
  };
  std::deque<Report> reports;
  std::vector<TaskKey> stale;       // from heartbeats, for the main thread
  json split;                       // weftd's latest worker split for this host
  json active_tenants = json::array();  // the tenants weftd says have work
  json plugin_tenants = json::array();  // the tenants weftd says have an active Lua plugin
  bool split_changed = false;       // for the main thread
  json reported_workers = json::array();  // for heartbeats
  // Runners ("<pid>.<thread>") of retired workers that start no take any more:
  // the next heartbeat (sent at once) has weftd let go of their held takes.
  json retired_runners = json::array();
  std::thread control;
  // Tells weftd that a new process registers (so it gives up the old one's attempts at once).
  const std::string incarnation = NewIncarnation();
  std::int64_t register_failures = 0;  // control thread only
  // Since when weftd refuses the registration because another live process has
  // this host id, and when that was last logged (control thread only).
  std::optional<Clock::time_point> refused_since;
  Clock::time_point last_refusal_log;
  std::string last_denial;             // control thread only
  // host.register refused for this host's key (revoked): the wait before the next try.
  RefusalBackoff register_refusals{"host", "weftd refuses host.register"};
  std::chrono::milliseconds register_wait{0};  // control thread only

  // ---- metrics (docs/metrics.md): updated by the main thread, rendered by the listener's ----
  metrics::Registry metrics;
  enum TaskOutcome { kSucceeded, kFailed, kCrashed };
  std::map<std::string, std::array<metrics::Counter*, 3>, std::less<>> task_counters;  // plugin -> by outcome
  metrics::Counter* cache_hits = nullptr;
  metrics::Counter* cache_misses = nullptr;
  metrics::Counter* cache_fetched_bytes = nullptr;
  metrics::Gauge* workers_gauge = nullptr;
  metrics::Gauge* in_flight_gauge = nullptr;
  std::unique_ptr<metrics::HttpListener> metrics_listener;  // null when metrics_listen is empty

  // ---- main thread ----
  // Run's phases, in order.
  bool SetUpSignals();
  void Start();
  void StartWorkersOnceRegistered();
  bool Stopped();
  bool WaitAndRead(Clock::time_point next_tick);
  void ReadSignals();
  void ReadPluginDirEvents();
  void Shutdown();

  void Scan(bool initial);
  void Watch();
  bool WatchDir(const std::filesystem::path& dir, std::string* error);
  void RetryWatches();
  void LostWatch(int wd, std::uint32_t mask);
  void StartWorker(int slot);
  void ApplySplit();
  void PublishWorkers();
  void Reap();
  void OnDeath(Worker& w, int status);
  void ReadChannel(Worker& w);
  void ReadOutput(Worker& w, Stream stream, bool final);
  void ReadAllOutput(Worker& w, bool final);
  void EmitOutput(Worker& w, Stream stream, std::string_view line);
  void ReportDroppedOutput(const Worker& w, const TaskKey& key, const HeldTask& t);
  void ForgetDroppedTail(Worker& w, const std::optional<TaskKey>& key);
  void LogDeathTail(Worker& w, bool crashed);
  void OnMessage(Worker& w, const WorkerMessage& m);
  void SendCommand(Worker& w, const WorkerMessage& m);
  void Tick();
  void RollWorkers();
  void PublishInFlight();
  void BeginStop();
  void CancelStale();
  void WakeMain();
  void StartMetrics();
  void CountTask(const std::string& plugin, TaskOutcome outcome);
  void CountCache(std::uint64_t hits, std::uint64_t misses, std::uint64_t bytes);
  void CountCrash(const Worker& w, int status);
  metrics::Counter& CrashCounter(const std::string& kind);

  // ---- control thread ----
  void ControlLoop();
  bool Register(client::Client& client);
  void Heartbeat(client::Client& client);
  void SendReports(client::Client& client);
  void Leave();
  void TakeSplit(const json& reply);
};

// ---- plugin files ----------------------------------------------------------

namespace {

// Why a plugin of `type` from `file` must not be used, or "" when it may; sets
// `tenant` to the tenant a file of the resource plugin directory belongs to.
// `types` holds what is loaded so far: host-wide types by name, a tenant's as
// "<tenant>@<type>". Files come in load order, host-wide directories first.
std::string PluginFileProblem(const std::filesystem::path& file, const std::string& type,
                              const std::filesystem::path& resource_dir,
                              const std::map<std::string, std::filesystem::path>& types, std::string* tenant) {
  tenant->clear();
  if (file.parent_path() == resource_dir) {
    std::optional<TenantPluginFile> owner = ParseTenantPluginFile(file);
    if (!owner) return "not a tenant's Lua plugin (<tenant>@<type>.lua); the resource plugin directory holds only those";
    if (owner->type != type)
      return "declares type '" + type + "', but tenant '" + owner->tenant + "' uploaded it as " + owner->type +
             ".lua; a lua-plugin resource is named after the type it declares";
    *tenant = owner->tenant;
    if (auto wide = types.find(type); wide != types.end())
      return "type '" + type + "' is a host-wide plugin of this host (" + wide->second.string() + "); tenant '" +
             *tenant + "' cannot have a Lua plugin of that type";
  }
  const std::string key = tenant->empty() ? type : *tenant + "@" + type;
  if (auto dup = types.find(key); dup != types.end())
    return "duplicate type name '" + type + "': already loaded from " + dup->second.string();
  return "";
}

// A refused plugin file as weftd shows it (plugin.list, host.list): the file,
// the tenant a file of the resource plugin directory belongs to (by its name),
// the type when known, and why.
json RefusalJson(const std::filesystem::path& file, const std::filesystem::path& resource_dir,
                 const std::string& type, const std::string& reason) {
  json out = {{"file", file.string()}, {"reason", reason}};
  std::string shown = type;  // what the file declares, when it loaded that far
  if (file.parent_path() == resource_dir) {
    // A tenant's file goes by the type it was uploaded as (its name); the reason says what it declares.
    if (std::optional<TenantPluginFile> owner = ParseTenantPluginFile(file)) {
      out["tenant"] = owner->tenant;
      shown = owner->type;
    }
  }
  if (!shown.empty()) out["type"] = shown;
  return out;
}

}  // namespace

void Master::Impl::Scan(bool initial) {
  std::vector<std::filesystem::path> files = ListPluginFiles(config.plugin_dirs);
  std::map<std::filesystem::path, FileVerdict> next;
  std::vector<PluginFile> good;
  const std::filesystem::path resource_dir = ResourcePluginDir(config);
  std::map<std::string, std::filesystem::path> types;
  json infos = json::array();
  json refusals = json::array();  // what weftd is told this host refused (host.register, host.heartbeat)
  std::vector<std::string> type_names;
  bool fresh_good = false;
  // The files new or changed since the last scan are probed, several at a
  // time: a file that hangs while loading costs its probe's timeout once, not
  // once for each file after it. The verdicts are then taken in load order.
  struct Seen {
    std::filesystem::path file;
    FileVerdict verdict;
    bool fresh = true;  // new, changed or newly refused: logged
    bool probe = true;  // to be probed
  };
  std::vector<Seen> seen;
  std::vector<std::filesystem::path> to_probe;
  for (const auto& file : files) {
    // Not even probed (a probe loads the file as this host's user): checked on
    // every scan, as a chown or chmod changes no size or time of the file.
    if (std::string unsafe = UnsafePluginPath(file); !unsafe.empty()) {
      auto old = verdicts.find(file);
      const bool told = old != verdicts.end() && !old->second.probe.ok && old->second.probe.reason == unsafe;
      Seen s{file, {}, !told, false};
      s.verdict.probe.reason = std::move(unsafe);  // no size or time kept: once safe, it is probed afresh
      seen.push_back(std::move(s));
      continue;
    }
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) continue;
    Seen s{file, {}, true, true};
    FileVerdict& v = s.verdict;
    v.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    v.size = st.st_size;
    v.inode = st.st_ino;
    auto old = verdicts.find(file);
    if (old != verdicts.end() && old->second.mtime_ns == v.mtime_ns && old->second.size == v.size &&
        old->second.inode == v.inode) {
      v.probe = old->second.probe;
      s.fresh = false;
      s.probe = false;
    } else {
      to_probe.push_back(file);
    }
    seen.push_back(std::move(s));
  }
  std::vector<ProbeResult> probed = RunProbes(exe, to_probe, config.lua);
  for (std::size_t i = 0, p = 0; i < seen.size(); ++i)
    if (seen[i].probe) seen[i].verdict.probe = std::move(probed[p++]);
  for (auto& [file, v, fresh, probe] : seen) {
    if (v.probe.ok) {
      const std::string type = v.probe.info.value("type", std::string());
      std::string tenant;
      if (std::string problem = PluginFileProblem(file, type, resource_dir, types, &tenant); !problem.empty()) {
        if (fresh) {
          WEFT_LOG(kWarn, kLog) << "refused plugin " << file.string() << ": " << problem;
        }
        refusals.push_back(RefusalJson(file, resource_dir, type, problem));
      } else {
        types[tenant.empty() ? type : tenant + "@" + type] = file;
        good.push_back({file, tenant});
        json info = v.probe.info;
        if (!tenant.empty()) info["tenant"] = tenant;  // weftd gives it only this tenant's tasks
        infos.push_back(std::move(info));
        type_names.push_back(type);
        fresh_good = fresh_good || fresh;
        if (fresh) {
          const std::string version = v.probe.info.value("version", std::string());
          WEFT_LOG(kInfo, kLog) << "loaded plugin '" << type << "' (" << v.probe.info.value("kind", std::string())
                                << (version.empty() ? "" : ", version " + version) << ") from " << file.string()
                                << (initial ? "" : " (new or changed)");
        }
      }
    } else {
      if (fresh) {
        WEFT_LOG(kWarn, kLog) << "refused plugin " << file.string() << ": " << v.probe.reason;
      }
      refusals.push_back(RefusalJson(file, resource_dir, "", v.probe.reason));
    }
    next[file] = std::move(v);
  }
  for (const auto& [file, v] : verdicts) {
    if (!next.contains(file) && v.probe.ok) {
      WEFT_LOG(kInfo, kLog) << "plugin file " << file.string() << " is gone";
    }
  }
  verdicts = std::move(next);
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu);
    changed = infos != plugins_json || good != plugin_files || (!initial && fresh_good);
    if (initial || changed) {
      plugins_json = infos;
      plugin_types = type_names;
    }
    refused_json = std::move(refusals);  // the next heartbeat carries it
  }
  if (initial) {
    plugin_files = good;
    WEFT_LOG(kInfo, kLog) << good.size() << " plugin(s) loaded, "
                          << (verdicts.size() - good.size()) << " refused";
    return;
  }
  if (!changed) return;
  // Also a plugin file rewritten in place: its workers must load it afresh.
  plugin_files = good;
  RollWorkers();
}

void Master::Impl::Watch() {
  inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd < 0) {
    WEFT_LOG(kWarn, kLog) << "cannot watch the plugin directories (inotify: " << std::strerror(errno)
                          << "); plugins dropped in later need a restart";
    return;
  }
  for (const auto& dir : config.plugin_dirs) {
    std::string error;
    if (WatchDir(dir, &error)) continue;
    WEFT_LOG(kWarn, kLog) << "cannot watch plugin directory " << dir.string() << ": " << error
                          << "; watching for it to appear (plugins put there are loaded then)";
    unwatched.insert(dir);
  }
  watch_retry_at = Clock::now() + std::chrono::milliseconds(kWatchRetryMs);
}

// Watches `dir` itself (not what its path names later: see LostWatch).
bool Master::Impl::WatchDir(const std::filesystem::path& dir, std::string* error) {
  const int wd = inotify_add_watch(inotify_fd, dir.c_str(),
                                   IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ATTRIB |
                                       IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
  if (wd < 0) {
    *error = errno == ENOENT ? std::string("it does not exist") : std::strerror(errno);
    return false;
  }
  watches[wd] = dir;
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) watched_inodes[wd] = {st.st_dev, st.st_ino};
  return true;
}

// A watched plugin directory was removed or moved away: the watch followed the
// old directory, so nothing put at the path afterwards would be seen. Drop it
// and watch the path again once a directory is there (RetryWatches); rescan, as
// its plugins are gone.
void Master::Impl::LostWatch(int wd, std::uint32_t mask) {
  auto it = watches.find(wd);
  if (it == watches.end()) return;  // the IN_IGNORED after a removal we handled already
  const std::filesystem::path dir = it->second;
  watches.erase(it);
  watched_inodes.erase(wd);
  if (!(mask & IN_IGNORED)) (void)inotify_rm_watch(inotify_fd, wd);
  WEFT_LOG(kWarn, kLog) << "plugin directory " << dir.string() << " was "
                        << ((mask & IN_MOVE_SELF) ? "moved away" : "removed")
                        << "; its plugins are gone, and it is watched again once a directory is at that path";
  unwatched.insert(dir);
  watch_retry_at = Clock::now();
  rescan_at = Clock::now() + std::chrono::milliseconds(kRescanDebounceMs);
}

// Plugin directories that were absent: watch each one that is there now and
// rescan (files may have been put in before the watch).
void Master::Impl::RetryWatches() {
  if (inotify_fd < 0 || Clock::now() < watch_retry_at) return;
  watch_retry_at = Clock::now() + std::chrono::milliseconds(kWatchRetryMs);
  // A removed directory's IN_DELETE_SELF comes only once nothing holds it open
  // any more: a path that names another directory already is lost now.
  std::vector<int> replaced;
  for (const auto& [wd, inode] : watched_inodes) {
    struct stat st {};
    if (stat(watches[wd].c_str(), &st) != 0 || st.st_dev != inode.first || st.st_ino != inode.second)
      replaced.push_back(wd);
  }
  for (int wd : replaced) LostWatch(wd, IN_DELETE_SELF);
  for (auto it = unwatched.begin(); it != unwatched.end();) {
    std::string error;
    if (!WatchDir(*it, &error)) {
      ++it;
      continue;
    }
    WEFT_LOG(kInfo, kLog) << "plugin directory " << it->string() << " is there; watching it";
    rescan_at = Clock::now() + std::chrono::milliseconds(kRescanDebounceMs);
    it = unwatched.erase(it);
  }
}

void Master::Impl::RollWorkers() {
  ++generation;
  std::string types;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& t : plugin_types) types += (types.empty() ? "" : ", ") + t;
  }
  WEFT_LOG(kInfo, kLog) << "plugin set changed to [" << types << "]; rolling workers (new ones load it, old ones "
                        << "finish their tasks and exit)";
  for (auto& [pid, w] : workers) {
    if (w.slot < 0) continue;
    slots[static_cast<std::size_t>(w.slot)].pid.reset();
    w.slot = -1;
    WorkerMessage drain;
    drain.kind = WorkerMessage::Kind::kDrain;
    SendCommand(w, drain);
  }
  // weftd learns the new set once no old worker can take a task any more, so
  // an old worker is never handed a type it does not have.
  register_after_drain_deadline = Clock::now() + std::chrono::milliseconds(config.take_wait_ms +
                                                                           config.request_timeout_ms + 3000);
  if (!stopping && workers_started) {
    for (std::size_t i = 0; i < slots.size(); ++i) StartWorker(static_cast<int>(i));
  }
}

// ---- workers ---------------------------------------------------------------

void Master::Impl::StartWorker(int slot) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    WEFT_LOG(kError, kLog) << "cannot start a worker: socketpair: " << std::strerror(errno) << "; retrying";
    slots[static_cast<std::size_t>(slot)].start_at = Clock::now() + std::chrono::milliseconds(kBackoffMs);
    return;
  }
  // The worker's stdout and stderr: what plugins print, for ReadOutput.
  // Without a pipe the worker writes to the master's own stream, unlabelled
  // and unbounded. With the stderr pipe the worker logs to log_fd.
  std::array<std::array<int, 2>, 2> out = {{{-1, -1}, {-1, -1}}};
  for (const Stream stream : {kStdout, kStderr}) {
    if (stream == kStderr && log_fd < 0) continue;
    if (pipe2(out[stream].data(), O_CLOEXEC) != 0) {
      WEFT_LOG(kWarn, kLog) << "cannot make a pipe for a worker's " << kStreamNames[stream] << " ("
                            << std::strerror(errno) << "); what its plugins print there goes to this log unlabelled";
      out[stream] = {-1, -1};
    }
  }
  const std::string tenant = slots[static_cast<std::size_t>(slot)].spec.tenant;
  const int threads = slots[static_cast<std::size_t>(slot)].spec.threads;
  ChildSpec spec;
  spec.program = exe;
  spec.args = {"--worker", "--channel-fd", std::to_string(fds[1]), "--threads", std::to_string(threads),
               "--worker-config", WorkerConfigJson(config), "--incarnation", incarnation};
  if (!tenant.empty()) {
    spec.args.push_back("--tenant");
    spec.args.push_back(tenant);
  }
  spec.keep_fds = {fds[1]};
  if (out[kStderr][1] >= 0) {
    spec.args.push_back("--log-fd");
    spec.args.push_back(std::to_string(log_fd));
    spec.keep_fds.push_back(log_fd);
  }
  for (const PluginFile& f : plugin_files) {
    spec.args.push_back(f.tenant.empty() ? "--plugin-file" : "--tenant-plugin-file");
    spec.args.push_back(f.tenant.empty() ? f.path.string() : f.tenant + "=" + f.path.string());
  }
  spec.env = ChildEnvironment();
  spec.stdout_fd = out[kStdout][1];
  spec.stderr_fd = out[kStderr][1];
  Result<pid_t> pid = SpawnChild(spec);
  close(fds[1]);
  for (const auto& p : out)
    if (p[1] >= 0) close(p[1]);
  if (!pid.ok()) {
    close(fds[0]);
    for (const auto& p : out)
      if (p[0] >= 0) close(p[0]);
    WEFT_LOG(kError, kLog) << "cannot start a worker: " << pid.status().message() << "; retrying";
    slots[static_cast<std::size_t>(slot)].start_at = Clock::now() + std::chrono::milliseconds(kBackoffMs);
    return;
  }
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  Worker w;
  w.pid = *pid;
  w.fd = fds[0];
  for (const Stream stream : {kStdout, kStderr}) {
    Worker::Output& o = w.out[stream];
    o.fd = out[stream][0];
    if (o.fd >= 0) fcntl(o.fd, F_SETFL, fcntl(o.fd, F_GETFL) | O_NONBLOCK);
    else o.eof = true;
  }
  w.slot = slot;
  w.generation = generation;
  w.tenant = tenant;
  w.threads = threads;
  w.started = Clock::now();
  slots[static_cast<std::size_t>(slot)].pid = *pid;
  WEFT_LOG(kInfo, kLog) << "started worker " << *pid << " (slot " << slot << ", "
                        << (tenant.empty() ? std::string("any tenant") : "tenant '" + tenant + "'") << ", " << threads
                        << " thread(s), " << plugin_files.size() << " plugin file(s))";
  workers.emplace(*pid, std::move(w));
  PublishWorkers();
}

// Moves the workers to weftd's split: a slot whose tenant and threads stay
// keeps its worker; the others are drained (they finish their tasks and exit)
// and new ones start for the new slots. An operator's `tenants` list pins the
// split instead.
void Master::Impl::ApplySplit() {
  json split;
  std::vector<std::string> active;
  {
    std::lock_guard<std::mutex> lock(mu);
    // A move held back (SplitHold) is looked at again on every turn of the loop.
    if (!split_changed && !split_hold.holding()) return;
    split_changed = false;
    split = this->split;
    for (const json& t : active_tenants)
      if (t.is_string()) active.push_back(t.get<std::string>());
  }
  if (!config.tenants.empty() || stopping) return;
  std::vector<SlotSpec> wanted = SlotsFromSplit(config, split);
  if (wanted.empty()) return;
  std::vector<SlotSpec> current;
  for (const Slot& s : slots) current.push_back(s.spec);
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  const bool held = split_hold.holding();
  if (!split_hold.Due(current, wanted, active, !workers_started || !split_followed, now_ms)) {
    if (!split_hold.holding()) split_followed = true;  // the workers are as weftd asks
    if (split_hold.holding() && !held) {
      WEFT_LOG(kInfo, kLog) << "weftd asks for " << DescribeSlots(wanted) << "; the workers stay as they are ("
                            << DescribeSlots(current) << ") unless that lasts " << config.split_hold_ms
                            << " ms (split_hold_ms)";
    }
    return;
  }
  split_followed = true;

  std::vector<Slot> next;
  std::vector<bool> kept(slots.size(), false);
  for (const SlotSpec& spec : wanted) {
    Slot slot;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (!kept[i] && slots[i].spec == spec) {
        kept[i] = true;
        slot = std::move(slots[i]);
        break;
      }
    }
    if (!slot.pid) {
      slot.spec = spec;
      slot.start_at = Clock::now();
    }
    next.push_back(std::move(slot));
  }
  int retired = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (kept[i] || !slots[i].pid) continue;
    Worker& w = workers.at(*slots[i].pid);
    w.slot = -1;
    WorkerMessage drain;
    drain.kind = WorkerMessage::Kind::kDrain;
    SendCommand(w, drain);
    ++retired;
  }
  WEFT_LOG(kInfo, kLog) << "worker split from weftd: " << DescribeSlots(wanted) << " (was " << DescribeSlots(current)
                        << "); " << retired << " worker(s) finish their tasks and exit";
  slots = std::move(next);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].pid) workers.at(*slots[i].pid).slot = static_cast<int>(i);
  }
  if (workers_started) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].pid) StartWorker(static_cast<int>(i));
    }
  }
  PublishWorkers();
}

// The workers weftd is told about in heartbeats (host.list shows them).
void Master::Impl::PublishWorkers() {
  workers_gauge->Set(static_cast<double>(workers.size()));
  json out = json::array();
  for (const auto& [pid, w] : workers) {
    if (w.slot < 0) continue;
    out.push_back({{"tenant", w.tenant}, {"threads", w.threads}, {"pid", pid}});
  }
  std::lock_guard<std::mutex> lock(mu);
  reported_workers = std::move(out);
}

void Master::Impl::SendCommand(Worker& w, const WorkerMessage& m) {
  std::string line = EncodeWorkerMessage(m) + "\n";
  std::string_view left = line;
  // Commands are tiny and a worker reads its channel all the time; a full
  // socket buffer means the worker is wedged, and the hang check deals with it.
  while (!left.empty()) {
    ssize_t n = send(w.fd, left.data(), left.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      WEFT_LOG(kWarn, kLog) << "worker " << w.pid << ": cannot send it a command: "
                            << (n < 0 ? std::strerror(errno) : "closed");
      return;
    }
    left.remove_prefix(static_cast<std::size_t>(n));
  }
}

void Master::Impl::ReadChannel(Worker& w) {
  char buf[8192];
  while (true) {
    ssize_t n = read(w.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) w.eof = true;  // the worker is exiting; Reap handles it
    if (n <= 0) break;         // EAGAIN or EOF
    w.buffer.Append(std::string_view(buf, static_cast<std::size_t>(n)));
  }
  while (auto line = w.buffer.Next()) {
    Result<WorkerMessage> m = ParseWorkerMessage(*line);
    if (!m.ok()) {
      WEFT_LOG(kError, kLog) << "worker " << w.pid << ": " << m.status().message();
      continue;
    }
    OnMessage(w, *m);
  }
}

// Reads what the worker wrote to one stream. `final` once the worker is gone:
// all that is left in the pipe (a crash report, an unfinished last line).
void Master::Impl::ReadOutput(Worker& w, Stream stream, bool final) {
  Worker::Output& o = w.out[stream];
  const auto emit = [&](std::string_view line) { EmitOutput(w, stream, line); };
  char buf[16384];
  std::size_t total = 0;
  while (o.fd >= 0 && !o.eof && (final || total < kOutputReadBytes)) {
    const ssize_t n = read(o.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) o.eof = true;  // the worker is gone (its children too)
    if (n <= 0) break;         // EAGAIN or EOF
    total += static_cast<std::size_t>(n);
    o.partial.append(buf, static_cast<std::size_t>(n));
    TakeOutputLines(o.partial, false, emit);
  }
  if (final || o.eof) TakeOutputLines(o.partial, true, emit);
}

void Master::Impl::ReadAllOutput(Worker& w, bool final) {
  for (const Stream stream : {kStdout, kStderr}) ReadOutput(w, stream, final);
}

// One line a plugin printed: logged with the task that ran (every task when
// the worker runs several: a line cannot be pinned on one thread) while one of
// them has budget left; counted as dropped otherwise, and kept in the
// worker's tail of dropped lines in case these are its last words.
void Master::Impl::EmitOutput(Worker& w, Stream stream, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::uint64_t bytes = line.size() + 1;
  Worker::Output& o = w.out[stream];
  std::string label;
  std::vector<TaskKey> running;
  bool within = false;
  for (auto& [key, t] : w.tasks) {
    if (t.ran) continue;
    label += (label.empty() ? "" : " or ") + TaskLabel(key.first, t);
    running.push_back(key);
    within = within || t.out_bytes[stream] < kPluginOutputBytes;
  }
  if (label.empty()) {
    within = o.idle_bytes < kPluginOutputBytes;
    o.idle_bytes += bytes;
    if (!within) o.idle_dropped += bytes;
  } else {
    for (auto& [key, t] : w.tasks) {
      if (t.ran) continue;
      t.out_bytes[stream] += bytes;
      if (!within) t.out_dropped[stream] += bytes;
    }
  }
  if (label.empty()) label = "no task running";
  if (!within) {
    o.tail.push_back({std::move(running), std::move(label), PrintableOutputLine(line)});
    o.tail_bytes += o.tail.back().text.size() + 1;
    while (o.tail_bytes > kDeathTailBytes && o.tail.size() > 1) {
      o.tail_bytes -= o.tail.front().text.size() + 1;
      o.tail.pop_front();
    }
    return;
  }
  WEFT_LOG(kInfo, kLog) << "worker " << w.pid << " " << kStreamNames[stream] << ", " << label << ": "
                        << PrintableOutputLine(line);
}

// The dropped lines of a task that ended (of no task when `key` is empty: a
// task starts) are no worker's last words any more.
void Master::Impl::ForgetDroppedTail(Worker& w, const std::optional<TaskKey>& key) {
  for (Worker::Output& o : w.out) {
    std::erase_if(o.tail, [&](const Worker::Output::Dropped& d) {
      const bool forget = key ? std::find(d.tasks.begin(), d.tasks.end(), *key) != d.tasks.end() : d.tasks.empty();
      if (forget) o.tail_bytes -= d.text.size() + 1;
      return forget;
    });
  }
}

// A worker ended: says how much of its output was dropped. When it did not
// exit cleanly, the last lines it printed past the bound, up to
// kDeathTailBytes of each stream, are logged after all (a crash report after a
// flood of output), each with its task, after the line that says how much
// before them was dropped.
void Master::Impl::LogDeathTail(Worker& w, bool crashed) {
  for (const Stream stream : {kStdout, kStderr}) {
    Worker::Output& o = w.out[stream];
    if (!crashed) {
      o.tail.clear();
      o.tail_bytes = 0;
    }
    std::map<TaskKey, std::uint64_t> shown;  // tail bytes by task
    std::uint64_t idle_shown = 0;
    for (const auto& d : o.tail) {
      if (d.tasks.empty()) idle_shown += d.text.size() + 1;
      for (const TaskKey& key : d.tasks) shown[key] += d.text.size() + 1;
    }
    for (const auto& [key, t] : w.tasks) {
      if (t.out_dropped[stream] == 0) continue;
      const std::uint64_t last = shown.contains(key) ? shown[key] : 0;
      WEFT_LOG(kWarn, kLog) << "worker " << w.pid << " " << kStreamNames[stream] << ", " << TaskLabel(key.first, t)
                            << ": ... " << t.out_dropped[stream] - last << " more bytes dropped (at most "
                            << kPluginOutputBytes << " per task are logged)"
                            << (last ? "; the last " + std::to_string(last) + " bytes before its worker died follow"
                                     : std::string());
    }
    if (o.idle_dropped > 0) {
      WEFT_LOG(kWarn, kLog) << "worker " << w.pid << " " << kStreamNames[stream] << " while no task ran: ... "
                            << o.idle_dropped - idle_shown << " more bytes dropped (at most " << kPluginOutputBytes
                            << " are logged)"
                            << (idle_shown ? "; the last " + std::to_string(idle_shown) + " bytes before it died follow"
                                           : std::string());
    }
    for (const auto& d : o.tail)
      WEFT_LOG(kInfo, kLog) << "worker " << w.pid << " " << kStreamNames[stream] << ", " << d.label << ": " << d.text;
    o.tail.clear();
    o.tail_bytes = 0;
  }
}

void Master::Impl::ReportDroppedOutput(const Worker& w, const TaskKey& key, const HeldTask& t) {
  for (const Stream stream : {kStdout, kStderr}) {
    if (t.out_dropped[stream] == 0) continue;
    WEFT_LOG(kWarn, kLog) << "worker " << w.pid << " " << kStreamNames[stream] << ", " << TaskLabel(key.first, t)
                          << ": ... " << t.out_dropped[stream] << " more bytes dropped (at most " << kPluginOutputBytes
                          << " per task are logged)";
  }
}

void Master::Impl::OnMessage(Worker& w, const WorkerMessage& m) {
  const TaskKey key{m.task_id, m.attempt};
  switch (m.kind) {
    case WorkerMessage::Kind::kReady:
      w.ready = true;
      WEFT_LOG(kDebug, kLog) << "worker " << w.pid << " is ready with " << m.plugins << " plugin(s)";
      return;
    case WorkerMessage::Kind::kStart: {
      WorkerMessage answer;
      answer.task_id = m.task_id;
      answer.attempt = m.attempt;
      std::int64_t newest = 0;
      if (!attempts.Start(m.task_id, m.attempt, &newest)) {
        const bool same = newest == m.attempt;
        WEFT_LOG(kWarn, kLog) << "task " << m.task_id << " attempt " << m.attempt << ": not starting it in worker "
                              << w.pid << ": "
                              << (same ? std::string("that attempt already runs on this host")
                                       : "this host already started attempt " + std::to_string(newest) +
                                             " of the task (the take was read late, after weftd handed the task "
                                             "out again)");
        answer.kind = WorkerMessage::Kind::kSkip;
        answer.reason = same ? "attempt " + std::to_string(m.attempt) + " already runs on this host"
                             : "this host started attempt " + std::to_string(newest) + " of the task already";
        SendCommand(w, answer);
        return;
      }
      w.tasks[key] = HeldTask{m.plugin, m.action, m.tenant, m.node, Clock::now(), false, {}, {}};
      ForgetDroppedTail(w, std::nullopt);
      answer.kind = WorkerMessage::Kind::kRun;
      SendCommand(w, answer);
      PublishInFlight();
      return;
    }
    case WorkerMessage::Kind::kRan:
      CountCache(m.cache_hits, m.cache_misses, m.cache_fetched_bytes);
      ReadAllOutput(w, false);  // printed before it returned: its own
      if (auto it = w.tasks.find(key); it != w.tasks.end()) {
        it->second.ran = true;
        CountTask(it->second.plugin, m.outcome == "succeeded" ? kSucceeded : kFailed);
      }
      return;
    case WorkerMessage::Kind::kEnd:
      if (auto it = w.tasks.find(key); it != w.tasks.end()) {
        ReadAllOutput(w, false);  // what it printed last is its own
        ReportDroppedOutput(w, key, it->second);
        ForgetDroppedTail(w, key);
        w.tasks.erase(it);
        attempts.End(key.first, key.second);
      }
      PublishInFlight();
      return;
    case WorkerMessage::Kind::kDraining:
      if (w.slot >= 0) return;  // not a retired worker (a stop): nothing to hurry
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < w.threads; ++i) retired_runners.push_back(std::to_string(w.pid) + "." + std::to_string(i));
      }
      cv.notify_all();
      return;
    case WorkerMessage::Kind::kDrained:
      w.drained = true;
      return;
    default:
      WEFT_LOG(kError, kLog) << "worker " << w.pid << " sent a master command; ignoring it";
  }
}

void Master::Impl::PublishInFlight() {
  std::vector<TaskKey> keys;
  for (const auto& [pid, w] : workers) {
    for (const auto& [key, t] : w.tasks) keys.push_back(key);
  }
  in_flight_gauge->Set(static_cast<double>(keys.size()));
  std::lock_guard<std::mutex> lock(mu);
  in_flight = std::move(keys);
}

void Master::Impl::Reap() {
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = workers.find(pid);
    if (it == workers.end()) continue;  // a probe reaped elsewhere, or not ours
    ReadChannel(it->second);            // events it sent just before dying
    ReadAllOutput(it->second, true);    // what it wrote last: a crash report, std::terminate's message
    OnDeath(it->second, status);
    close(it->second.fd);
    for (const Worker::Output& o : it->second.out)
      if (o.fd >= 0) close(o.fd);
    workers.erase(it);
    PublishInFlight();
    PublishWorkers();
  }
}

void Master::Impl::OnDeath(Worker& w, int status) {
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && w.kill_reason == KillReason::kNone;
  std::string how = w.kill_reason == KillReason::kHung     ? "was killed (a task hung)"
                    : w.kill_reason == KillReason::kMemory ? "was killed (memory limit)"
                                                           : DescribeExit(status);
  // While stopping, a worker that we killed after the grace, or that gave up
  // on a task ignoring its cancel and exited, leaves its tasks here: given up
  // by the stop, not failed. Unreported, they stay leased to this host until
  // host.leave, and weftd queues them again without counting the attempt.
  const bool gave_up = stopping && w.kill_reason == KillReason::kNone &&
                       ((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && w.stop_killed) ||
                        (WIFEXITED(status) && WEXITSTATUS(status) == 0));
  if (clean && w.tasks.empty()) {
    WEFT_LOG(kInfo, kLog) << "worker " << w.pid << " exited";
  } else {
    std::string held;
    for (const auto& [key, t] : w.tasks) held += (held.empty() ? ": " : ", ") + TaskLabel(key.first, t);
    WEFT_LOG(kWarn, kLog) << "worker " << w.pid << " " << how << " holding " << w.tasks.size() << " task(s)" << held
                          << (w.tasks.empty() ? ""
                              : gave_up       ? "; the host stops: giving them up"
                                              : "; reporting them as failed");
    if (!stopping) CountCrash(w, status);
  }
  for (const auto& [key, t] : w.tasks) {
    attempts.End(key.first, key.second);
    if (!t.ran) CountTask(t.plugin, kCrashed);
  }
  LogDeathTail(w, !clean);
  // The message of each task it held.
  std::string culprit_message;
  if (w.kill_reason == KillReason::kHung) {
    if (auto c = w.tasks.find(w.kill_task); c != w.tasks.end()) {
      DeathReport r;
      r.plugin = c->second.plugin;
      r.action = c->second.action;
      r.reason = KillReason::kHung;
      r.task_timeout_ms = config.task_timeout_ms;
      culprit_message = TaskLabel(c->first.first, c->second) + ": " + TaskFailureMessage(r);
    }
  }
  for (const auto& [key, t] : w.tasks) {
    if (gave_up) {
      WEFT_LOG(kWarn, kLog) << "task " << key.first << " attempt " << key.second << " given up: the host stops and "
                            << (t.ran ? "the result of plugin '" + t.plugin + "' " + t.action +
                                            " could not be reported before its worker ended"
                                      : "plugin '" + t.plugin + "' ignored cancellation during " + t.action)
                            << "; not reported (weftd queues it again when this host leaves, without counting the "
                               "attempt)";
      continue;
    }
    std::string message;
    if (w.kill_reason == KillReason::kHung && key != w.kill_task) {
      message = "plugin '" + t.plugin + "' " + t.action + " was lost when its worker was killed: " + culprit_message;
    } else {
      DeathReport r;
      r.plugin = t.plugin;
      r.action = t.action;
      r.wait_status = status;
      r.reason = w.kill_reason;
      r.task_timeout_ms = config.task_timeout_ms;
      r.memory_limit_mb = config.worker_memory_limit_mb;
      r.plugin_returned = t.ran;
      if (w.kill_reason != KillReason::kHung) {
        for (const auto& [other_key, o] : w.tasks) {
          if (other_key != key) r.others.push_back(TaskLabel(other_key.first, o));
        }
      }
      message = TaskFailureMessage(r);
    }
    WEFT_LOG(kWarn, kLog) << "task " << key.first << " attempt " << key.second << " failed: " << message;
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back({json{{"host_id", config.host_id},
                       {"task_id", key.first},
                       {"attempt", key.second},
                       {"status", "failed"},
                       {"message", message},
                       {"result", json::object()},
                       {"stdout", ""},
                       {"stderr", "weft-host: worker " + std::to_string(w.pid) + " " + how + "\n"}}});
  }
  cv.notify_all();

  if (w.slot < 0 || stopping) return;
  Slot& slot = slots[static_cast<std::size_t>(w.slot)];
  slot.pid.reset();
  const auto now = Clock::now();
  slot.deaths.push_back(now);
  while (!slot.deaths.empty() && now - slot.deaths.front() > kDeathWindow) slot.deaths.pop_front();
  const int delay_ms = RestartDelayMs(slot.deaths.size());
  slot.start_at = now + std::chrono::milliseconds(delay_ms);
  WEFT_LOG(kInfo, kLog) << "starting a new worker for slot " << w.slot
                        << (delay_ms ? " in " + std::to_string(delay_ms) + " ms (" +
                                           std::to_string(slot.deaths.size()) + " deaths in the last minute)"
                                     : std::string());
}

void Master::Impl::Tick() {
  const auto now = Clock::now();
  const std::uint64_t limit = static_cast<std::uint64_t>(config.worker_memory_limit_mb) << 20;
  const auto timeout = std::chrono::milliseconds(config.task_timeout_ms);
  const auto grace = std::chrono::milliseconds(HangGraceMs(config.task_timeout_ms));
  for (auto& [pid, w] : workers) {
    if (w.kill_reason != KillReason::kNone) continue;
    if (auto rss = ReadRssBytes(pid); rss && *rss > limit) {
      w.kill_reason = KillReason::kMemory;
      WEFT_LOG(kWarn, kLog) << "worker " << pid << " uses " << (*rss >> 20) << " MiB, more than worker_memory_limit_mb "
                            << config.worker_memory_limit_mb << "; killing it";
      kill(pid, SIGKILL);
      continue;
    }
    for (const auto& [key, t] : w.tasks) {
      if (!t.ran && now - t.started > timeout + grace) {
        w.kill_reason = KillReason::kHung;
        w.kill_task = key;
        WEFT_LOG(kWarn, kLog) << "task " << key.first << " attempt " << key.second << " (plugin '" << t.plugin << "' "
                              << t.action << ") still runs " << Ms(now - t.started - timeout)
                              << " after its timeout and cancel; killing worker " << pid;
        kill(pid, SIGKILL);
        break;
      }
    }
  }
  if (!stopping && workers_started) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].pid && now >= slots[i].start_at) StartWorker(static_cast<int>(i));
    }
  }
  RetryWatches();
  if (rescan_at && now >= *rescan_at && !stopping) {
    rescan_at.reset();
    Scan(false);
  }
  if (register_after_drain_deadline) {
    bool all_drained = true;
    for (const auto& [pid, w] : workers) {
      if (w.slot < 0 && !w.drained) all_drained = false;
    }
    if (all_drained || now >= *register_after_drain_deadline) {
      register_after_drain_deadline.reset();
      {
        std::lock_guard<std::mutex> lock(mu);
        reregister = true;
      }
      cv.notify_all();
    }
  }
}

void Master::Impl::CancelStale() {
  std::vector<TaskKey> keys;
  {
    std::lock_guard<std::mutex> lock(mu);
    keys.swap(stale);
  }
  if (keys.empty()) return;
  // A heartbeat may name an attempt whose finish weftd took just before it:
  // weftd calls that stale, but the worker said "ran" before it sent the finish,
  // so read what the workers said so far before judging.
  for (auto& [pid, w] : workers)
    if (!w.eof) ReadChannel(w);
  for (const TaskKey& key : keys) {
    for (auto& [pid, w] : workers) {
      auto held = w.tasks.find(key);
      if (held == w.tasks.end()) continue;
      if (held->second.ran) {
        // Its result is on its way (or its finish was refused, which the worker logs).
        WEFT_LOG(kDebug, kLog) << "task " << key.first << " attempt " << key.second
                               << " ended in worker " << pid << " as weftd moved on; nothing to cancel";
        continue;
      }
      WEFT_LOG(kWarn, kLog)
          << "task " << key.first << " attempt " << key.second
          << " is stale (weftd cancelled the task, as when its job is aborted, or handed it out again); "
          << "asking worker " << pid << " to cancel it";
      WorkerMessage m;
      m.kind = WorkerMessage::Kind::kCancel;
      m.task_id = key.first;
      m.attempt = key.second;
      m.reason = "attempt " + std::to_string(key.second) + " of task " + std::to_string(key.first) +
                 " is no longer current; weftd cancelled the task or handed it out again";
      SendCommand(w, m);
    }
  }
}

void Master::Impl::BeginStop() {
  if (stopping) return;
  stopping = true;
  std::size_t tasks = 0;
  for (const auto& [pid, w] : workers) tasks += w.tasks.size();
  WEFT_LOG(kInfo, kLog) << "stopping: " << workers.size() << " worker(s) take no new tasks; " << tasks
                        << " running task(s) get up to " << config.shutdown_grace_ms << " ms to finish";
  for (auto& [pid, w] : workers) {
    WorkerMessage stop;
    stop.kind = WorkerMessage::Kind::kStop;
    SendCommand(w, stop);
    w.stop_sent = true;
  }
  // A worker cancels what is left after the grace and reports it; give that
  // time to reach weftd before killing the worker.
  stop_deadline = Clock::now() + std::chrono::milliseconds(config.shutdown_grace_ms +
                                                           2 * config.request_timeout_ms + 3000);
}

void Master::Impl::WakeMain() {
  std::uint64_t one = 1;
  if (wake_fd >= 0) (void)!write(wake_fd, &one, sizeof one);
}

// ---- control thread --------------------------------------------------------

bool Master::Impl::Register(client::Client& client) {
  json plugins;
  json refused;
  std::vector<std::string> types;
  {
    std::lock_guard<std::mutex> lock(mu);
    plugins = plugins_json;
    refused = refused_json;
    types = plugin_types;
    reregister = false;
  }
  Result<json> r = client.Call("host.register", {{"host_id", config.host_id},
                                                 {"capacity", config.capacity},
                                                 {"version", WEFT_VERSION},
                                                 {"incarnation", incarnation},
                                                 {"machine", MachineName()},
                                                 {"pid", static_cast<std::int64_t>(getpid())},
                                                 {"plugins", plugins},
                                                 {"refused", refused}});
  if (!r.ok() && r.status().code() == Code::kConflict) {
    // Another weft-host process holds this host id and is live. Retry: a host
    // restarted after a crash gets in once weftd stops hearing the dead one
    // (hosts.silent_after_ms); a second live process stays out, with no workers.
    const auto now = Clock::now();
    if (!refused_since || now - last_refusal_log >= std::chrono::seconds(30)) {
      WEFT_LOG(kError, kLog) << "weftd refuses to register this host: " << r.status().message()
                             << (refused_since ? " (refused for " + Ms(now - *refused_since) + ")" : std::string())
                             << "; this host runs no task and retries every " << kRefusedRetryMs << " ms";
      last_refusal_log = now;
    }
    if (!refused_since) refused_since = now;
    return false;
  }
  if (!r.ok() && KeyRefused(r.status())) {
    register_wait = register_refusals.Refused(r.status(), RefusedKeyAdvice(config));
    return false;
  }
  register_wait = std::chrono::milliseconds(0);
  if (!r.ok()) {
    if (register_failures++ % 20 == 0) {
      const bool unanswered = r.status().code() == Code::kUnavailable || r.status().code() == Code::kTimeout;
      WEFT_LOG(kWarn, kLog) << "cannot register with weftd at "
                            << (client::SplitEndpoints(config.server).size() > 1 ? "any of " + config.server
                                                                                 : config.server)
                            << ": " << ExplainFailure(config, r.status())
                            << (unanswered && config.curve_server_key.empty()
                                    ? " (if weftd runs with security on, as by default, this host needs an "
                                      "enroll_token or server_key: docs/security.md)"
                                    : "")
                            << " (retrying)";
    }
    return false;
  }
  register_refusals.Accepted();
  std::int64_t hb = std::max<std::int64_t>(IntOr(*r, "heartbeat_ms", 2000), 50);
  TakeSplit(*r);
  std::string list;
  for (const auto& t : types) list += (list.empty() ? "" : ", ") + t;
  // The endpoint that answered, not the whole list of a failover setup.
  WEFT_LOG(kInfo, kLog) << "registered with weftd at " << client.endpoint() << " as '" << config.host_id
                        << "', capacity " << config.capacity << ", " << EffectiveWorkers(config)
                        << " worker(s), plugins [" << list << "], heartbeat every " << hb << " ms"
                        << (refused_since ? " (after " + Ms(Clock::now() - *refused_since) +
                                                " refused: the other process with this host id is gone)"
                                          : std::string());
  refused_since.reset();
  {
    std::lock_guard<std::mutex> lock(mu);
    heartbeat_ms = hb;
    registered = true;
  }
  WakeMain();
  return true;
}

void Master::Impl::Heartbeat(client::Client& client) {
  json in = json::array();
  json running;
  json refused;
  json retired;
  {
    std::lock_guard<std::mutex> lock(mu);
    running = reported_workers;
    refused = refused_json;
    retired.swap(retired_runners);
    for (const auto& k : in_flight) in.push_back({{"task_id", k.first}, {"attempt", k.second}});
    // Tasks of dead workers keep their lease until their failure is reported.
    for (const auto& r : reports) in.push_back({{"task_id", r.body["task_id"]}, {"attempt", r.body["attempt"]}});
  }
  json body = {{"host_id", config.host_id},
               {"incarnation", incarnation},
               {"in_flight", in},
               {"workers", running},
               {"refused", refused}};
  if (!retired.empty()) body["retired_runners"] = retired;
  // Sent once: when weftd does not take it, the held takes end by themselves (take_wait_ms).
  client::DetailedResult r = client.Call("host.heartbeat", std::move(body));
  if (!r.ok()) {
    if (r.status().code() == Code::kNotFound) {
      WEFT_LOG(kWarn, kLog) << "weftd does not know host '" << config.host_id
                            << "' (was it restarted with a fresh store?); registering again";
      std::lock_guard<std::mutex> lock(mu);
      registered = false;
    } else if (ProcessReplaced(r.status(), r.details())) {
      // Another process took this host id while this one was not heard from (paused,
      // cut off): weftd handed this process's attempts out again. Cancel them, take
      // nothing (the runners' takes are refused too) and register again, which weftd
      // refuses while the other process is live (retried every kRefusedRetryMs).
      std::size_t cancelled = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const TaskKey& k : in_flight) stale.push_back(k);
        cancelled = in_flight.size();
        registered = false;
      }
      WEFT_LOG(kError, kLog) << "weftd refused this process's heartbeat: " << r.status().message()
                             << "; cancelling its " << cancelled << " running task(s), taking no task and "
                             << "registering again";
      WakeMain();
    } else if (r.status().code() == Code::kDenied) {
      // Revoked (or a key weftd no longer accepts): say so once, not every heartbeat.
      if (r.status().message() != last_denial) {
        last_denial = r.status().message();
        const std::string advice = RefusedKeyAdvice(config);
        WEFT_LOG(kError, kLog) << "weftd refuses this host: " << last_denial
                               << (advice.empty() ? std::string() : ". " + advice);
      }
    } else {
      WEFT_LOG(kDebug, kLog) << "cannot heartbeat to weftd: " << r.status().ToString();
    }
    return;
  }
  TakeSplit(*r);
  auto s = r->find("stale");
  if (s == r->end() || !s->is_array() || s->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const json& k : *s) {
      if (k.is_object()) stale.emplace_back(IntOr(k, "task_id", -1), IntOr(k, "attempt", -1));
    }
  }
  WakeMain();
}

// Hands weftd's worker split (a register or heartbeat reply) to the main thread.
void Master::Impl::TakeSplit(const json& reply) {
  auto it = reply.find("workers");
  if (it == reply.end() || !it->is_array()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    // The tenants with work, even when the split leaves every slot to any
    // tenant, and those with an active Lua plugin, work or not: their Lua
    // plugins are synced too (ResourceSync).
    if (auto t = reply.find("tenants"); t != reply.end() && t->is_array()) active_tenants = *t;
    if (auto t = reply.find("plugin_tenants"); t != reply.end() && t->is_array()) plugin_tenants = *t;
    if (*it == split) return;
    split = *it;
    split_changed = true;
  }
  WakeMain();
}

void Master::Impl::SendReports(client::Client& client) {
  while (true) {
    json body;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (reports.empty()) return;
      body = reports.front().body;
    }
    const std::string what = "task " + std::to_string(IntOr(body, "task_id", 0)) + " attempt " +
                             std::to_string(IntOr(body, "attempt", 0));
    Result<json> r = client.Call("task.finish", body);
    if (!r.ok()) {
      const Code code = r.status().code();
      std::lock_guard<std::mutex> lock(mu);
      const bool final = code == Code::kConflict || code == Code::kInvalid || code == Code::kDenied ||
                         code == Code::kTooLarge ||
                         (code == Code::kNotFound && ++reports.front().not_found > kMaxNotFoundReports);
      if (!final) {
        // weftd unreachable (kept, and its lease kept alive by the heartbeats),
        // or it does not know the host yet (register first).
        if (code == Code::kNotFound) registered = false;
        return;  // again on the next round
      }
      WEFT_LOG(kWarn, kLog) << "weftd refused the finish of " << what << " (" << r.status().ToString()
                            << "); dropping it";
    }
    std::lock_guard<std::mutex> lock(mu);
    reports.pop_front();
  }
}

// The last word of a clean stop: weftd shows the host as not live at once
// instead of after hosts.silent_after_ms. One short try on a socket of its
// own (the control thread's is gone); silence does the rest.
void Master::Impl::Leave() {
  const int wait_ms = std::min(config.request_timeout_ms, kLeaveWaitMs);
  zmq::context_t leave_ctx(1);
  client::Options options = ClientOptions(config, wait_ms);
  options.probe_ms = 0;  // no second wait to say what answers instead
  client::Client client(leave_ctx, options);
  Result<json> r = client.Call("host.leave", {{"host_id", config.host_id}}, wait_ms);
  if (r.ok()) {
    WEFT_LOG(kInfo, kLog) << "told weftd that this host leaves";
  } else if (r.status().code() == Code::kUnavailable || r.status().code() == Code::kTimeout) {
    WEFT_LOG(kWarn, kLog) << "weftd did not answer host.leave within " << wait_ms << " ms (" << r.status().message()
                          << "); it shows this host as live until hosts.silent_after_ms passes";
  } else {
    WEFT_LOG(kWarn, kLog) << "weftd refused host.leave: " << r.status().ToString();
  }
}

void Master::Impl::ControlLoop() {
  client::Client client(ctx, ClientOptions(config, config.request_timeout_ms));
  auto next_heartbeat = Clock::now();
  while (true) {
    bool need_register;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (control_stop) return;  // Shutdown says host.leave
      need_register = !registered || reregister;
    }
    if (need_register) {
      if (!Register(client)) {
        std::unique_lock<std::mutex> lock(mu);
        const auto wait = refused_since ? std::chrono::milliseconds(kRefusedRetryMs)
                          : register_wait.count() > 0 ? register_wait
                                                      : std::chrono::milliseconds(kBackoffMs);
        cv.wait_for(lock, wait, [this] { return control_stop; });
        continue;
      }
      next_heartbeat = Clock::now();
    }
    SendReports(client);
    bool retiring;
    {
      std::lock_guard<std::mutex> lock(mu);
      retiring = !retired_runners.empty();
    }
    if (retiring || Clock::now() >= next_heartbeat) {
      Heartbeat(client);
      std::lock_guard<std::mutex> lock(mu);
      next_heartbeat = Clock::now() + std::chrono::milliseconds(heartbeat_ms);
    }
    std::unique_lock<std::mutex> lock(mu);
    auto wake = std::min(next_heartbeat, Clock::now() + std::chrono::milliseconds(200));
    cv.wait_until(lock, wake, [this] {
      return control_stop || !reports.empty() || reregister || !registered || !retired_runners.empty();
    });
    if (!reports.empty() && !control_stop) {
      // Failed sends are retried at most every 200 ms.
      cv.wait_for(lock, std::chrono::milliseconds(20), [this] { return control_stop; });
    }
  }
}

// ---- Run -------------------------------------------------------------------

namespace {
// The resource plugin directory is watched and loaded like any other, after
// the configured ones, so a local plugin wins over a resource of the same type.
HostConfig WithResourcePluginDir(HostConfig config) {
  const std::filesystem::path dir = ResourcePluginDir(config);
  if (std::find(config.plugin_dirs.begin(), config.plugin_dirs.end(), dir) == config.plugin_dirs.end())
    config.plugin_dirs.push_back(dir);
  return config;
}
}  // namespace

Master::Master(HostConfig config, std::string exe)
    : impl_(std::make_unique<Impl>(WithResourcePluginDir(std::move(config)), std::move(exe))) {}

Master::~Master() {
  Impl& m = *impl_;
  if (m.resources) m.resources->Stop();
  if (m.control.joinable()) {
    {
      std::lock_guard<std::mutex> lock(m.mu);
      m.control_stop = true;
    }
    m.cv.notify_all();
    m.control.join();
  }
  for (int fd : {m.signal_fd, m.inotify_fd, m.wake_fd, m.log_fd}) {
    if (fd >= 0) close(fd);
  }
}

// Blocks SIGTERM, SIGINT and SIGCHLD so they arrive on signal_fd, and makes the
// eventfd other threads use to wake the main loop.
bool Master::Impl::SetUpSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (signal_fd < 0 || wake_fd < 0) {
    WEFT_LOG(kError, kLog) << "cannot set up signal handling: " << std::strerror(errno);
    return false;
  }
  return true;
}

// ---- metrics ---------------------------------------------------------------

void Master::Impl::CountTask(const std::string& plugin, TaskOutcome outcome) {
  auto it = task_counters.find(plugin);
  if (it == task_counters.end()) {
    std::array<metrics::Counter*, 3> counters{};
    const char* names[] = {"succeeded", "failed", "crashed"};
    for (int i = 0; i < 3; ++i)
      counters[static_cast<std::size_t>(i)] = &metrics.AddCounter(
          "weft_host_tasks_total",
          "Task attempts this host's workers ran, by plugin type and outcome (crashed: the worker died first).",
          {{"plugin", plugin}, {"outcome", names[i]}});
    it = task_counters.emplace(plugin, counters).first;
  }
  it->second[outcome]->Inc();
}

void Master::Impl::CountCache(std::uint64_t hits, std::uint64_t misses, std::uint64_t bytes) {
  cache_hits->Inc(hits);
  cache_misses->Inc(misses);
  cache_fetched_bytes->Inc(bytes);
}

// Why a worker died, as a label: hung, memory, the signal (SIGSEGV), or exit.
void Master::Impl::CountCrash(const Worker& w, int status) {
  const std::string kind = w.kill_reason == KillReason::kHung     ? "hung"
                           : w.kill_reason == KillReason::kMemory ? "memory"
                           : WIFSIGNALED(status)                  ? SignalName(WTERMSIG(status))
                                                                  : "exit";
  CrashCounter(kind).Inc();
}

metrics::Counter& Master::Impl::CrashCounter(const std::string& kind) {
  return metrics.AddCounter("weft_host_plugin_crashes_total",
                            "Worker processes that died other than by a clean exit, by cause: hung (killed after "
                            "task_timeout_ms), memory (killed over worker_memory_limit_mb), the signal, or exit.",
                            {{"kind", kind}});
}

// The registry's fixed metrics, and the listener; its address goes to <state_dir>/metrics.json.
void Master::Impl::StartMetrics() {
  cache_hits = &metrics.AddCounter("weft_host_resource_cache_hits_total",
                                   "Resource versions a task named that were already in the cache.");
  // A miss is any fetch: a task's, or resource sync's pre-fetch of an active version.
  cache_misses = &metrics.AddCounter("weft_host_resource_cache_misses_total",
                                     "Resource versions fetched from weftd because the cache did not have them.");
  cache_fetched_bytes = &metrics.AddCounter("weft_host_resource_fetched_bytes_total",
                                            "Bytes of resources fetched from weftd into the cache.");
  workers_gauge = &metrics.AddGauge("weft_host_worker_processes", "Worker processes running now.");
  in_flight_gauge = &metrics.AddGauge("weft_host_tasks_in_flight", "Task attempts the workers are running now.");
  metrics.AddGauge("weft_host_capacity_threads", "Tasks this host runs at once (capacity in weft-host.toml).")
      .Set(config.capacity);
  // The usual causes from the start, so that rate() and increase() see them go from zero.
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGKILL}) CrashCounter(SignalName(sig));
  for (const char* kind : {"hung", "memory", "exit"}) CrashCounter(kind);
  metrics.AddCollector(metrics::ProcessSnapshot);
  const std::filesystem::path cache_dir = ResourceCacheDir(config);
  metrics.AddCollector([this, cache_dir] {
    // The master's own fetches (resource sync's pre-fetch) are tallied here;
    // not its hits, which every sync round would add: hits are what tasks found.
    const CacheUse own = TakeCacheUse();
    CountCache(0, own.misses, own.fetched_bytes);
    double bytes = 0;
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) bytes += static_cast<double>(it->file_size(ec));
    return metrics::Snapshot{{"weft_host_resource_cache_bytes", "Bytes the resource cache holds on disk.", "gauge",
                              {{{}, bytes}}}};
  });
  if (config.metrics_listen.empty()) return;
  // With `*`, the port of the last start when it is free (metrics.json), as weftd does.
  const std::filesystem::path file = StateDir(config) / "metrics.json";
  std::string previous_url;
  if (std::ifstream in(file); in) {
    const json previous = json::parse(in, nullptr, false);
    if (previous.is_object() && previous.contains("metrics") && previous["metrics"].is_string())
      previous_url = previous["metrics"].get<std::string>();
  }
  Result<std::unique_ptr<metrics::HttpListener>> listener = metrics::HttpListener::StartKeepingPort(
      config.metrics_listen, previous_url, [this] { return metrics.Render(); });
  if (!listener.ok()) {
    WEFT_LOG(kError, kLog) << listener.status().message() << "; serving no metrics";
    return;
  }
  metrics_listener = std::move(*listener);
  const std::string url = "http://" + metrics_listener->address() + "/metrics";
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"metrics", url}, {"pid", getpid()}}.dump() << "\n";
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    WEFT_LOG(kWarn, kLog) << "cannot write " << file.string() << ": " << ec.message();
  }
  WEFT_LOG(kInfo, kLog) << "metrics at " << url;
}

// Resource sync, the plugin directories, the worker slots and the control
// thread (which registers); workers start once the host is registered.
void Master::Impl::Start() {
  StartMetrics();
  resources = std::make_unique<ResourceSync>(
      config, ctx,
      [this] {
        std::lock_guard<std::mutex> lock(mu);
        return plugin_types;
      },
      [this] {
        std::vector<std::string> tenants;
        std::lock_guard<std::mutex> lock(mu);
        for (const json& w : split)
          if (w.is_object() && w.value("tenant", std::string()) != "") tenants.push_back(w["tenant"]);
        for (const json* list : {&active_tenants, &plugin_tenants})
          for (const json& t : *list)
            if (t.is_string() && !t.get<std::string>().empty()) tenants.push_back(t.get<std::string>());
        return tenants;
      });
  resources->Start();  // creates the resource plugin directory, so Watch sees it
  Watch();             // before the scan, so a file dropped in meanwhile is not missed
  Scan(true);
  for (const SlotSpec& spec : ConfiguredSlots(config)) slots.push_back(Slot{spec, {}, {}, {}});
  control = std::thread([this] { ControlLoop(); });
}

void Master::Impl::StartWorkersOnceRegistered() {
  if (workers_started || stopping) return;
  std::lock_guard<std::mutex> lock(mu);
  if (!registered) return;
  workers_started = true;
  for (auto& s : slots) s.start_at = Clock::now();
}

// While stopping: true once every worker is gone and weftd has the reports (or
// they could not be sent in time); kills workers that outlive the deadline.
bool Master::Impl::Stopped() {
  if (!stopping) return false;
  bool reports_done;
  {
    std::lock_guard<std::mutex> lock(mu);
    reports_done = reports.empty();
  }
  if (workers.empty() &&
      (reports_done || Clock::now() >= stop_deadline + std::chrono::milliseconds(2 * config.request_timeout_ms))) {
    return true;
  }
  if (Clock::now() >= stop_deadline) {
    for (auto& [pid, w] : workers) {
      if (w.stop_killed) continue;
      WEFT_LOG(kWarn, kLog) << "worker " << pid << " did not stop in time; killing it";
      kill(pid, SIGKILL);
      w.stop_killed = true;
    }
  }
  return false;
}

// Waits until next_tick for a signal, a wake-up, a plugin directory change or a
// worker message, and handles what arrived. False if poll itself failed.
bool Master::Impl::WaitAndRead(Clock::time_point next_tick) {
  std::vector<pollfd> fds;
  fds.push_back({signal_fd, POLLIN, 0});
  fds.push_back({wake_fd, POLLIN, 0});
  if (inotify_fd >= 0) fds.push_back({inotify_fd, POLLIN, 0});
  std::vector<pid_t> order;
  for (auto& [pid, w] : workers) {
    if (w.eof) continue;
    fds.push_back({w.fd, POLLIN, 0});
    order.push_back(pid);
  }
  std::vector<std::pair<pid_t, Stream>> printing;  // workers' open stdout and stderr
  for (auto& [pid, w] : workers) {
    for (const Stream stream : {kStdout, kStderr}) {
      if (w.out[stream].fd < 0 || w.out[stream].eof) continue;
      fds.push_back({w.out[stream].fd, POLLIN, 0});
      printing.emplace_back(pid, stream);
    }
  }
  int wait_ms = static_cast<int>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now()).count()));
  int n = poll(fds.data(), fds.size(), wait_ms);
  if (n < 0 && errno != EINTR) {
    WEFT_LOG(kError, kLog) << "poll failed: " << std::strerror(errno);
    return false;
  }
  if (n <= 0) return true;
  if (fds[0].revents & POLLIN) ReadSignals();
  if (fds[1].revents & POLLIN) {
    std::uint64_t count;
    (void)!read(wake_fd, &count, sizeof count);
  }
  std::size_t next = 2;
  if (inotify_fd >= 0) {
    if (fds[next].revents & POLLIN) ReadPluginDirEvents();
    ++next;
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!(fds[next + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto it = workers.find(order[i]);
    if (it != workers.end()) ReadChannel(it->second);
  }
  next += order.size();
  for (std::size_t i = 0; i < printing.size(); ++i) {
    if (!(fds[next + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto it = workers.find(printing[i].first);
    if (it != workers.end()) ReadOutput(it->second, printing[i].second, false);
  }
  return true;
}

void Master::Impl::ReadSignals() {
  signalfd_siginfo info;
  while (read(signal_fd, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) {
      WEFT_LOG(kInfo, kLog) << "received " << (info.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
      BeginStop();
    }
  }
}

// A plugin file (.so or .lua) changed in a watched directory: rescan once the
// changes settle (a copy in progress fires many events).
void Master::Impl::ReadPluginDirEvents() {
  alignas(inotify_event) char buf[8192];
  bool relevant = false;
  ssize_t r;
  while ((r = read(inotify_fd, buf, sizeof buf)) > 0) {
    for (char* p = buf; p < buf + r;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
        LostWatch(ev->wd, ev->mask);
        continue;
      }
      // The directory's own owner or mode changed: whether its files may be loaded may have too.
      if (ev->len == 0 && (ev->mask & IN_ATTRIB)) relevant = true;
      std::filesystem::path name = ev->len ? std::filesystem::path(ev->name) : std::filesystem::path();
      const auto ext = name.extension();
      if (ext == ".so" || ext == ".lua") relevant = true;
    }
  }
  if (relevant) rescan_at = Clock::now() + std::chrono::milliseconds(kRescanDebounceMs);
}

// Stops resource sync and the control thread, then says host.leave. When
// weftd is down their calls wait request_timeout_ms each (a heartbeat is
// under way most of the time): shutting their context down ends them at once.
void Master::Impl::Shutdown() {
  metrics_listener.reset();
  bool leave;
  {
    std::lock_guard<std::mutex> lock(mu);
    control_stop = true;
    leave = registered;
  }
  cv.notify_all();
  ctx.shutdown();
  resources->Stop();
  control.join();
  if (leave) Leave();
  WEFT_LOG(kInfo, kLog) << "stopped";
}

int Master::Run() {
  Impl& m = *impl_;
  if (!m.SetUpSignals()) return 1;
  // A copy of our stderr that stays ours when a worker's fd 2 is its pipe.
  m.log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (m.log_fd < 0) {
    WEFT_LOG(kWarn, kLog) << "cannot copy the descriptor of this log for the workers (" << std::strerror(errno)
                          << "); what their plugins write to stderr goes to this log unlabelled";
  }
  m.Start();
  auto next_tick = Clock::now();
  while (true) {
    m.ApplySplit();
    m.StartWorkersOnceRegistered();
    if (m.Stopped()) break;
    if (!m.WaitAndRead(next_tick)) break;
    m.Reap();
    m.CancelStale();
    if (Clock::now() >= next_tick) {
      m.Tick();
      next_tick = Clock::now() + std::chrono::milliseconds(kTickMs);
    }
  }
  m.Shutdown();
  return 0;
}

}  // namespace weft::host
