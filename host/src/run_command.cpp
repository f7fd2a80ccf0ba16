#include "weft/host/run_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/log.hpp"
#include "weft/common/status.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/probe.hpp"
#include "weft/host/supervision.hpp"
#include "weft/host/task_context.hpp"

namespace weft::host {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kDefaultTimeoutMs = 300000;
constexpr int kDefaultMemoryLimitMb = 1024;
// When the harness says what it waits for: a file that has not loaded after
// kLoadNoticeMs, an action silent (no log line, no progress) for kQuietNoticeMs,
// and again every kQuietNoticeMs while it stays silent.
constexpr int kLoadNoticeMs = 2000;
constexpr int kQuietNoticeMs = 10000;

void RunUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: weft-host run PLUGIN_FILE ACTION --task TASK.json [--timeout-ms N] [--memory-limit-mb N]\n"
               "                     [--lua-memory-mb N] [--lua-instructions N] [--json]\n"
               "Runs one action (CREATE, CONFIRM, BOOTSTRAP, INSTALL, CONFIGURE, INITIALIZE, START, STOP,\n"
               "REMOVE, DELETE) of a plugin file (.so, or .lua) against the task in TASK.json, without\n"
               "weftd, in a child process as a worker would, and prints its progress, log lines, status\n"
               "and result. --json prints one JSON object at the end instead (status, message, result,\n"
               "stdout, stderr, progress). Defaults: --timeout-ms %d, --memory-limit-mb %d; a Lua plugin's\n"
               "--lua-memory-mb and --lua-instructions as weft-host.toml's lua_memory_mb and lua_instructions\n"
               "(64 and 2000000000).\n"
               "Bounds, as on a host: loading the file (its entry point, init and describe) gets %d s, as a\n"
               "host's probe does, then the file is refused; the action gets --timeout-ms (a host's\n"
               "task_timeout_ms) from its start, is cancelled then, and killed a tenth of it later (1 s to\n"
               "30 s) if it does not return. A load still going after %d s, and an action with no log line or\n"
               "progress for %d s, are said on stderr with what is waited for; Ctrl-C stops the run.\n"
               "Exit status: 0 succeeded, 1 failed (or refused, or its process died), 2 usage error.\n",
               kDefaultTimeoutMs, kDefaultMemoryLimitMb, kProbeTimeoutMs / 1000, kLoadNoticeMs / 1000,
               kQuietNoticeMs / 1000);
}

struct RunOptions {
  std::filesystem::path plugin_file;
  std::string action;
  std::filesystem::path task_file;
  int timeout_ms = kDefaultTimeoutMs;
  int memory_limit_mb = kDefaultMemoryLimitMb;
  LuaBudget lua;
  bool json_output = false;
};

std::optional<int> ParsePositive(const char* v, long max) {
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < 1 || n > max) return std::nullopt;
  return static_cast<int>(n);
}

// nullopt after printing why (usage errors).
std::optional<RunOptions> ParseRunArgs(int argc, char** argv) {
  RunOptions o;
  std::vector<std::string> positional;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "weft-host run: %s needs a value\n", argv[i]);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      RunUsage(stdout);
      std::exit(0);
    } else if (arg == "--json") {
      o.json_output = true;
    } else if (arg == "--lua-memory-mb" || arg == "--lua-instructions") {
      const char* v = value();
      if (!v) return std::nullopt;
      const bool memory = arg == "--lua-memory-mb";
      char* end = nullptr;
      const long long n = std::strtoll(v, &end, 10);
      const long long min = memory ? LuaBudget::kMinMemoryMb : LuaBudget::kMinInstructions;
      const long long max = memory ? LuaBudget::kMaxMemoryMb : LuaBudget::kMaxInstructions;
      if (!*v || *end || n < min || n > max) {
        std::fprintf(stderr, "weft-host run: %s must be an integer from %lld to %lld, got '%s'\n", argv[i - 1], min,
                     max, v);
        return std::nullopt;
      }
      if (memory) {
        o.lua.memory_mb = static_cast<int>(n);
      } else {
        o.lua.instructions = n;
      }
    } else if (arg == "--task" || arg == "--timeout-ms" || arg == "--memory-limit-mb") {
      const char* v = value();
      if (!v) return std::nullopt;
      if (arg == "--task") {
        o.task_file = v;
        continue;
      }
      std::optional<int> n = ParsePositive(v, arg == "--timeout-ms" ? 86400000L : 1L << 20);
      if (!n) {
        std::fprintf(stderr, "weft-host run: %s must be a positive integer, got '%s'\n", argv[i - 1], v);
        return std::nullopt;
      }
      (arg == "--timeout-ms" ? o.timeout_ms : o.memory_limit_mb) = *n;
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "weft-host run: unknown option '%s'\n", argv[i]);
      return std::nullopt;
    } else {
      positional.emplace_back(arg);
    }
  }
  if (positional.size() != 2 || o.task_file.empty()) {
    std::fprintf(stderr, "weft-host run: needs a plugin file, an action and --task FILE\n");
    RunUsage(stderr);
    return std::nullopt;
  }
  o.plugin_file = positional[0];
  o.action = positional[1];
  for (char& c : o.action) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (ActionFromName(o.action) == 0) {
    std::fprintf(stderr,
                 "weft-host run: unknown action '%s'; one of CREATE CONFIRM BOOTSTRAP INSTALL CONFIGURE "
                 "INITIALIZE START STOP REMOVE DELETE\n",
                 positional[1].c_str());
    return std::nullopt;
  }
  return o;
}

// The task file as the plugin will see it: the file's object, with the action
// asked for and the fields weftd always sets filled in when the file lacks them.
Result<json> ReadTask(const std::filesystem::path& file, const std::string& action) {
  std::ifstream in(file);
  if (!in) return Status::Invalid("cannot read the task file " + file.string() + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  json task = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (task.is_discarded()) return Status::Invalid("the task file " + file.string() + " is not valid JSON");
  if (!task.is_object()) return Status::Invalid("the task file " + file.string() + " must hold a JSON object");
  task["action"] = action;
  if (!task.contains("task_id")) task["task_id"] = 1;
  if (!task.contains("attempt")) task["attempt"] = 1;
  if (!task.contains("tenant")) task["tenant"] = "default";
  if (!task.contains("idempotency_key") && task["task_id"].is_number_integer())
    task["idempotency_key"] = "task/" + std::to_string(task["task_id"].get<std::int64_t>());
  return task;
}

// ---------------------------------------------------------------- the child

// One JSON object per line on the events descriptor, from any thread the plugin
// logs from. The descriptor is the child's original stdout; what the plugin
// itself prints goes to stderr instead (see RunChildMain), so it cannot break a line.
class EventPipe {
 public:
  void set_fd(int fd) { fd_ = fd; }
  void Emit(const json& event) {
    const std::string line = event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t n = write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the harness is gone; nobody to tell
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  std::mutex mu_;
  int fd_ = STDOUT_FILENO;
};

EventPipe& Events() {
  static EventPipe pipe;
  return pipe;
}

const char* LevelName(int level) {
  return level >= WEFT_LOG_ERROR ? "error" : level == WEFT_LOG_WARN ? "warn" : level == WEFT_LOG_INFO ? "info" : "debug";
}

// The host's log service, plus a copy of each line to the harness as it is written.
const weft_host_services* HarnessServices() {
  static weft_host_services services = [] {
    weft_host_services s = *HostServices();
    s.log = [](weft_task* task, int level, const char* message) {
      if (message) Events().Emit({{"event", "log"}, {"level", LevelName(level)}, {"message", message}});
      HostServices()->log(task, level, message);
    };
    return s;
  }();
  return &services;
}

// Cancels the task when it runs past the timeout, as a worker does; the parent
// kills this process if the plugin ignores the cancel.
class Watchdog {
 public:
  Watchdog(TaskContext& context, int timeout_ms)
      : thread_([this, &context, timeout_ms] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return done_; }))
            context.Cancel("task timed out after " + std::to_string(timeout_ms) + " ms");
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

json RunLoaded(const LoadedPlugin& plugin, json task, const std::string& action, int timeout_ms) {
  task["plugin"] = plugin.type_name;
  TaskContext context(task.dump(), [](int percent, const std::string& message) {
    Events().Emit({{"event", "progress"}, {"percent", percent}, {"message", message}});
  });
  const std::uint32_t bit = ActionFromName(action);
  std::string status = "failed", message;
  if (!(plugin.descriptor->actions & bit)) {
    message = "plugin '" + plugin.type_name + "' does not implement action " + action;
  } else {
    Watchdog watchdog(context, timeout_ms);
    const ActionOutcome outcome =
        RunAction(plugin.descriptor, plugin.instance, HarnessServices(), context, bit, plugin.type_name, action);
    if (outcome.succeeded) status = "succeeded";
    message = outcome.message;
    if (outcome.succeeded) {
      // What weftd would refuse in task.finish fails here too, as in a worker.
      if (const ResultCheck check = CheckTaskResult(context.result(), /*node_facts=*/true); !check.ok()) {
        status = "failed";
        message =
            plugin.type_name + " " + action + " " + check.what + "; weftd would fail the attempt and not retry it";
      }
    }
  }
  return {{"event", "finish"},     {"status", status},
          {"message", message},    {"result", context.result()},
          {"stdout", context.stdout_tail()}, {"stderr", context.stderr_tail()}};
}

// ---------------------------------------------------------------- the parent

struct Report {
  std::string plugin;  // the type name, once loaded
  bool finished = false;
  json finish;
  json progress = json::array();
};

class Printer {
 public:
  explicit Printer(bool json_output) : json_output_(json_output) {}

  void Event(const json& e, Report& report) {
    const std::string kind = e.value("event", "");
    if (kind == "loaded") {
      report.plugin = e.value("type", "");
      const std::string version = e.value("version", "");
      Say("loaded plugin '" + report.plugin + "' " + (version.empty() ? "" : version + " ") + "(" +
          e.value("kind", "") + ") from " + e.value("file", ""));
    } else if (kind == "refused") {
      report.finished = true;
      report.finish = {{"status", "failed"}, {"message", "refused: " + e.value("reason", "")}};
    } else if (kind == "log") {
      Say("log " + e.value("level", "") + ": " + e.value("message", ""));
    } else if (kind == "progress") {
      report.progress.push_back({{"percent", e.value("percent", 0)}, {"message", e.value("message", "")}});
      Say("progress " + std::to_string(e.value("percent", 0)) + "%: " + e.value("message", ""));
    } else if (kind == "finish") {
      report.finished = true;
      report.finish = e;
      report.finish.erase("event");
    }
  }

  void Final(const Report& report) {
    if (json_output_) {
      json out = report.finish;
      out["plugin"] = report.plugin;
      out["progress"] = report.progress;
      std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } else {
      const std::string status = report.finish.value("status", "failed");
      const std::string message = report.finish.value("message", "");
      std::printf("%s%s\n", status.c_str(), message.empty() ? "" : (": " + message).c_str());
      if (auto r = report.finish.find("result"); r != report.finish.end() && !r->empty())
        std::printf("result: %s\n", r->dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    }
    std::fflush(stdout);
  }

 private:
  void Say(const std::string& line) {
    if (json_output_) return;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

  bool json_output_;
};

// The message of a run whose child died before it finished, as a worker's death
// is reported: by the plugin and action, or by the file when it died loading.
std::string DeathMessage(const RunOptions& o, const Report& report, int wait_status, KillReason reason) {
  if (report.plugin.empty()) {
    const std::string name = o.plugin_file.filename().string();
    if (reason == KillReason::kHung)
      return "plugin file " + name + " hung while loading (no answer within " + std::to_string(kProbeTimeoutMs) +
             " ms, the bound a host's probe has); it was killed, and a host would refuse the file";
    if (reason == KillReason::kMemory) return "plugin file " + name + " used too much memory while loading";
    return "plugin file " + name + " " + DescribeExit(wait_status) + " while loading";
  }
  DeathReport death;
  death.plugin = report.plugin;
  death.action = o.action;
  death.wait_status = wait_status;
  death.reason = reason;
  death.task_timeout_ms = o.timeout_ms;
  death.memory_limit_mb = o.memory_limit_mb;
  return TaskFailureMessage(death);
}

// A plugin that ignores the cancel gets a tenth of the timeout more (1 s to 30 s), as on a host.
int KillGraceMs(int timeout_ms) { return std::clamp(timeout_ms / 10, 1000, 30000); }

long long Seconds(Clock::duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

int Supervise(const RunOptions& o, pid_t pid, int events_fd) {
  Printer printer(o.json_output);
  Report report;
  std::string buffer;
  KillReason reason = KillReason::kNone;
  const std::string file_name = o.plugin_file.filename().string();
  // As on a host: loading the file (its entry point, init and describe) is
  // bounded as a probe is; the action runs up to --timeout-ms from its start
  // (task_timeout_ms), is cancelled then and killed a grace later.
  const auto started = Clock::now();
  auto kill_at = started + std::chrono::milliseconds(kProbeTimeoutMs);
  bool loaded = false;
  bool load_noticed = false;
  auto action_started = started;
  auto last_event = started;
  auto last_notice = started;
  bool open = true;  // the child's event pipe; it may close before the child ends
  int status = 0;
  while (true) {
    pollfd p{events_fd, POLLIN, 0};
    const int n = poll(&p, open ? 1 : 0, 100);
    if (n < 0 && errno != EINTR) open = false;  // cannot read it: just wait for the child
    if (n > 0) {
      char chunk[4096];
      const ssize_t r = read(events_fd, chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) open = false;
      if (r > 0) buffer.append(chunk, static_cast<std::size_t>(r));
      for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
        const json e = json::parse(buffer.substr(0, nl), nullptr, /*allow_exceptions=*/false);
        buffer.erase(0, nl + 1);
        if (!e.is_object()) continue;
        printer.Event(e, report);
        last_event = Clock::now();
        if (!loaded && (e.value("event", "") == "loaded" || report.finished)) {
          loaded = true;
          action_started = last_event;
          kill_at = action_started + std::chrono::milliseconds(o.timeout_ms + KillGraceMs(o.timeout_ms));
        }
      }
    }
    if (!open && waitpid(pid, &status, WNOHANG) == pid) break;
    const auto now = Clock::now();
    if (!loaded && !load_noticed && now - started >= std::chrono::milliseconds(kLoadNoticeMs)) {
      load_noticed = true;
      std::fprintf(stderr,
                   "weft-host run: plugin file %s has not loaded after %lld s (its entry point, init or describe "
                   "has not returned); it is given up %d s after it started, as a host's probe is. Ctrl-C stops "
                   "it now.\n",
                   file_name.c_str(), Seconds(now - started), kProbeTimeoutMs / 1000);
    } else if (loaded && !report.finished && now - last_event >= std::chrono::milliseconds(kQuietNoticeMs) &&
               now - last_notice >= std::chrono::milliseconds(kQuietNoticeMs)) {
      last_notice = now;
      std::fprintf(stderr,
                   "weft-host run: plugin '%s' %s has run %lld s, with no log line or progress for %lld s; it is "
                   "cancelled at --timeout-ms (%d ms, a host's task_timeout_ms) and killed %d ms after that if "
                   "it does not return. Ctrl-C stops it now.\n",
                   report.plugin.c_str(), o.action.c_str(), Seconds(now - action_started), Seconds(now - last_event),
                   o.timeout_ms, KillGraceMs(o.timeout_ms));
    }
    if (now >= kill_at) {
      reason = KillReason::kHung;
    } else if (std::optional<std::uint64_t> rss = ReadRssBytes(pid);
               rss && *rss > static_cast<std::uint64_t>(o.memory_limit_mb) << 20) {
      reason = KillReason::kMemory;
    }
    if (reason != KillReason::kNone) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
  }
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!report.finished || !clean_exit || reason != KillReason::kNone) {
    report.finish = {{"status", "failed"}, {"message", DeathMessage(o, report, status, reason)}};
  }
  printer.Final(report);
  return report.finish.value("status", "") == "succeeded" ? 0 : kExitFailed;
}

}  // namespace

int RunCommandMain(int argc, char** argv) {
  std::optional<RunOptions> o = ParseRunArgs(argc, argv);
  if (!o) return kExitUsage;
  // Checked here, so a bad task file is a usage error and not a plugin failure.
  if (Result<json> task = ReadTask(o->task_file, o->action); !task.ok()) {
    std::fprintf(stderr, "weft-host run: %s\n", task.status().message().c_str());
    return kExitUsage;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o->plugin_file, ec)) {
    std::fprintf(stderr, "weft-host run: no plugin file %s\n", o->plugin_file.c_str());
    return kExitUsage;
  }
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "weft-host run: pipe failed: %s\n", std::strerror(errno));
    return kExitFailed;
  }
  ChildSpec spec;
  spec.program = "/proc/self/exe";
  spec.args = {"--run-child",
               std::filesystem::absolute(o->plugin_file).string(),
               o->action,
               std::filesystem::absolute(o->task_file).string(),
               std::to_string(o->timeout_ms),
               std::to_string(o->lua.memory_mb),
               std::to_string(o->lua.instructions)};
  spec.env = ChildEnvironment();
  spec.stdout_fd = fds[1];
  Result<pid_t> pid = SpawnChild(spec);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    std::fprintf(stderr, "weft-host run: cannot start the plugin's process: %s\n", pid.status().message().c_str());
    return kExitFailed;
  }
  const int code = Supervise(*o, *pid, fds[0]);
  close(fds[0]);
  return code;
}

int RunChildMain(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "weft-host --run-child is internal; use weft-host run\n");
    return kExitUsage;
  }
  const std::filesystem::path file = argv[2];
  const std::string action = argv[3];
  const int timeout_ms = ParsePositive(argv[5], 86400000L).value_or(kDefaultTimeoutMs);
  Result<json> task = ReadTask(argv[4], action);
  if (!task.ok()) {
    Events().Emit({{"event", "refused"}, {"reason", task.status().message()}});
    return 0;
  }
  log::SetLevel(log::Level::kError);  // refusals are reported as events, not log lines
  // Events keep the original stdout; the plugin's own prints go to stderr.
  if (const int events = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3); events >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0)
    Events().set_fd(events);
  PluginSet plugins;
  LuaBudget lua;
  lua.memory_mb = static_cast<int>(std::strtol(argv[6], nullptr, 10));
  lua.instructions = std::strtoll(argv[7], nullptr, 10);
  plugins.set_lua_budget(lua);
  if (!plugins.LoadFile(file)) {
    const std::string reason = plugins.refusals().empty() ? "refused" : plugins.refusals().front().reason;
    Events().Emit({{"event", "refused"}, {"reason", reason}});
    return 0;
  }
  const LoadedPlugin& plugin = plugins.plugins().front();
  Events().Emit({{"event", "loaded"},
                 {"type", plugin.type_name},
                 {"kind", plugin.info.value("kind", "")},
                 {"version", plugin.info.value("version", "")},
                 {"file", file.string()}});
  Events().Emit(RunLoaded(plugin, std::move(task).value(), action, timeout_ms));
  return 0;
}

}  // namespace weft::host
