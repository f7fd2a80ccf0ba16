// weft-host: a Weft provisioner host. See docs/host.md, docs/protocol.md,
// docs/configuration.md (weft-host.toml) and docs/plugin-abi.md.
//
// One binary, three roles:
//   weft-host [options]            the master (what operators start)
//   weft-host run PLUGIN ACTION --task FILE   run one action of one plugin, without weftd
//   weft-host --probe FILE [LUA_MEMORY_MB LUA_INSTRUCTIONS [VERDICT_FD]]
//                                  internal: load one plugin file, print its verdict
//   weft-host --worker ...         internal: one worker process, started by the master
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weft/common/log.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/dir_lock.hpp"
#include "weft/common/version.hpp"
#include "weft/host/config.hpp"
#include "weft/host/enrollment.hpp"
#include "weft/host/master.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/probe.hpp"
#include "weft/host/run_command.hpp"
#include "weft/host/runtime.hpp"

namespace {

constexpr int kExitUsage = 2;

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: weft-host [--config FILE] [--server ENDPOINT] [--host-id ID] [--capacity N]\n"
               "                 [--workers N] [--plugin-dir DIR]... [--enroll-token TOKEN]\n"
               "       weft-host run PLUGIN_FILE ACTION --task TASK.json   (try a plugin; see --help there)\n"
               "Runs Weft tasks for weftd with the plugins found in the plugin directories, in worker\n"
               "processes supervised by this one (see docs/host.md).\n"
               "--plugin-dir replaces the configured plugin_dirs (repeat it for several).\n"
               "--enroll-token: a one-time token from `weft host token create` (docs/security.md).\n");
}

std::filesystem::path ExeDir(const char* argv0) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) exe = std::filesystem::absolute(argv0, ec);
  return exe.parent_path();
}

[[noreturn]] void NeedValue(std::string_view flag) {
  std::fprintf(stderr, "weft-host: %.*s needs a value\n", static_cast<int>(flag.size()), flag.data());
  std::exit(kExitUsage);
}

std::optional<long> ParseLong(const char* v, long min, long max) {
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < min || n > max) return std::nullopt;
  return n;
}

std::optional<int> ParseInt(const char* v, int min, int max) {
  std::optional<long> n = ParseLong(v, min, max);
  return n ? std::optional<int>(static_cast<int>(*n)) : std::nullopt;
}

// Every runner thread of a worker keeps two connections to weftd (take and
// finish), each a descriptor plus libzmq's own eventfds, so a host of capacity
// 1,000 needs several thousand descriptors: more than the usual soft limit of
// 1,024. Raise the soft limit towards the hard one (capped: plugins and the
// programs they start may walk every possible descriptor). Workers inherit it.
void RaiseOpenFileLimit() {
  constexpr rlim_t kWanted = 65536;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= kWanted) return;
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? kWanted : std::min(kWanted, limit.rlim_max);
  if (wanted <= limit.rlim_cur) return;
  limit.rlim_cur = wanted;
  (void)setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the old limit still works for smaller hosts
}

// Signals are taken by one thread with sigwait; every other thread (and every
// plugin thread they start) inherits the blocked mask.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // internal: wakes the signal thread at exit
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

int WorkerMain(int argc, char** argv) {
  // The master set PR_SET_PDEATHSIG before exec; if it died before that took
  // effect we were re-parented already and must not run unsupervised.
  if (getppid() == 1) return 1;
  int channel_fd = -1;
  int log_fd = -1;
  int threads = 1;
  std::string tenant, config_json, incarnation;
  std::vector<std::pair<std::filesystem::path, std::string>> files;  // plugin file, its tenant ("": host-wide)
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) NeedValue(arg);
      return argv[++i];
    };
    if (arg == "--channel-fd") {
      channel_fd = ParseInt(value(), 0, 1 << 20).value_or(-1);
    } else if (arg == "--log-fd") {
      log_fd = ParseInt(value(), 0, 1 << 20).value_or(-1);
    } else if (arg == "--threads") {
      threads = ParseInt(value(), 1, 4096).value_or(1);
    } else if (arg == "--tenant") {
      tenant = value();
    } else if (arg == "--worker-config") {
      config_json = value();
    } else if (arg == "--incarnation") {
      incarnation = value();
    } else if (arg == "--plugin-file") {
      files.emplace_back(value(), std::string());
    } else if (arg == "--tenant-plugin-file") {
      // TENANT=PATH: a Lua plugin from that tenant's resources (tenant names hold no '=').
      const std::string v = value();
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "weft-host --worker: --tenant-plugin-file wants TENANT=PATH, got '%s'\n", v.c_str());
        return kExitUsage;
      }
      files.emplace_back(v.substr(eq + 1), v.substr(0, eq));
    } else {
      std::fprintf(stderr, "weft-host --worker: unknown argument '%s'\n", argv[i]);
      return kExitUsage;
    }
  }
  // stdout and stderr are pipes the master reads and labels with the task that
  // runs; this process's own log lines go to the master's log as they are,
  // through the descriptor it hands over (not left to plugins' children).
  if (log_fd >= 0) {
    std::FILE* log_out = fcntl(log_fd, F_SETFD, FD_CLOEXEC) == 0 ? fdopen(log_fd, "w") : nullptr;
    if (log_out == nullptr) {
      std::fprintf(stderr, "weft-host --worker: --log-fd %d is not a usable descriptor: %s\n", log_fd,
                   std::strerror(errno));
      return 1;
    }
    weft::log::SetOutput(log_out);
  }
  weft::Result<weft::host::HostConfig> config = weft::host::WorkerConfigFromJson(config_json);
  if (!config.ok()) {
    std::fprintf(stderr, "weft-host --worker: %s\n", config.status().message().c_str());
    return 1;
  }
  weft::log::Level level = weft::log::Level::kInfo;
  (void)weft::log::ParseLevel(config->log_level, &level);
  weft::log::SetLevel(level);
  const std::string component = "worker " + std::to_string(getpid());
  sigset_t signals = BlockStopSignals();
  // Line by line, a plugin's printf reaches the master while that task still
  // runs (stderr is unbuffered already).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  weft::host::PluginSet plugins;
  plugins.set_log_loaded(false);
  plugins.set_lua_budget(config->lua);
  for (const auto& [file, owner] : files) plugins.LoadFile(file, owner);
  WEFT_LOG(kInfo, component) << "serving " << (tenant.empty() ? std::string("any tenant") : "tenant '" + tenant + "'")
                             << " with " << threads << " thread(s) and " << plugins.plugins().size() << " plugin(s)";
  weft::host::WorkerOptions options;
  options.threads = threads;
  options.tenant = tenant;
  options.channel_fd = channel_fd;
  options.log_component = component;
  options.incarnation = incarnation;
  int code = 0;
  {
    weft::host::Runtime runtime(*config, plugins, options);
    std::thread signal_thread([&] {
      int sig = 0;
      if (sigwait(&signals, &sig) == 0 && sig != SIGUSR1) {
        WEFT_LOG(kInfo, component) << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT");
      }
      runtime.RequestStop();
    });
    code = runtime.Run();
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "--probe") {
    weft::host::LuaBudget lua;
    using Budget = weft::host::LuaBudget;
    std::optional<int> memory_mb =
        argc >= 5 ? ParseInt(argv[3], Budget::kMinMemoryMb, Budget::kMaxMemoryMb) : lua.memory_mb;
    std::optional<long> instructions =
        argc >= 5 ? ParseLong(argv[4], Budget::kMinInstructions, Budget::kMaxInstructions) : lua.instructions;
    std::optional<int> verdict_fd = argc == 6 ? ParseInt(argv[5], 0, 1 << 20) : -1;
    if ((argc != 3 && argc != 5 && argc != 6) || !memory_mb || !instructions || !verdict_fd) {
      std::fprintf(stderr, "usage: weft-host --probe FILE [LUA_MEMORY_MB LUA_INSTRUCTIONS [VERDICT_FD]]\n");
      return kExitUsage;
    }
    lua.memory_mb = *memory_mb;
    lua.instructions = *instructions;
    return weft::host::ProbeMain(argv[2], lua, *verdict_fd);
  }
  if (argc >= 2 && std::string_view(argv[1]) == "run") return weft::host::RunCommandMain(argc, argv);
  if (argc >= 2 && std::string_view(argv[1]) == "--run-child") return weft::host::RunChildMain(argc, argv);
  RaiseOpenFileLimit();
  if (argc >= 2 && std::string_view(argv[1]) == "--worker") return WorkerMain(argc, argv);

  std::string config_path;
  std::optional<std::string> server, host_id, enroll_token;
  std::optional<int> capacity, workers;
  std::vector<std::filesystem::path> plugin_dirs;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) NeedValue(arg);
      return argv[++i];
    };
    if (arg == "--config") {
      config_path = value();
    } else if (arg == "--server") {
      server = value();
    } else if (arg == "--host-id") {
      host_id = value();
    } else if (arg == "--enroll-token") {
      enroll_token = value();
    } else if (arg == "--capacity") {
      const char* v = value();
      capacity = ParseInt(v, 1, 4096);
      if (!capacity) {
        std::fprintf(stderr, "weft-host: --capacity must be an integer from 1 to 4096, got '%s'\n", v);
        return kExitUsage;
      }
    } else if (arg == "--workers") {
      const char* v = value();
      workers = ParseInt(v, 1, 256);
      if (!workers) {
        std::fprintf(stderr, "weft-host: --workers must be an integer from 1 to 256, got '%s'\n", v);
        return kExitUsage;
      }
    } else if (arg == "--plugin-dir") {
      plugin_dirs.emplace_back(std::filesystem::absolute(value()));
    } else if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "weft-host: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return kExitUsage;
    }
  }

  const std::filesystem::path exe_dir = ExeDir(argv[0]);
  weft::Result<weft::host::HostConfig> loaded =
      config_path.empty() ? weft::Result<weft::host::HostConfig>(weft::host::DefaultConfig(exe_dir))
                          : weft::host::LoadConfigFile(config_path, exe_dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "weft-host: %s\n", loaded.status().message().c_str());
    return 1;
  }
  weft::host::HostConfig config = std::move(loaded).value();
  if (server) config.server = *server;
  if (host_id) config.host_id = *host_id;
  if (enroll_token) {
    if (weft::Result<weft::curve::Token> t = weft::curve::DecodeToken(*enroll_token); !t.ok()) {
      std::fprintf(stderr, "weft-host: --enroll-token is %s\n", t.status().message().c_str());
      return kExitUsage;
    }
    config.enroll_token = *enroll_token;
  }
  if (capacity) config.capacity = *capacity;
  if (workers) {
    config.workers = *workers;
    config.workers_set = true;
  }
  if (!plugin_dirs.empty()) config.plugin_dirs = plugin_dirs;
  if (weft::Status s = weft::host::ValidateConfig(config); !s.ok()) {
    std::fprintf(stderr, "weft-host: %s\n", s.message().c_str());
    return 1;
  }
  weft::log::Level level = weft::log::Level::kInfo;
  (void)weft::log::ParseLevel(config.log_level, &level);
  weft::log::SetLevel(level);

  // The master takes SIGTERM, SIGINT and SIGCHLD through a signalfd; they are
  // blocked before any thread starts so no thread takes them instead.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  WEFT_LOG(kInfo, "host") << "weft-host " << WEFT_VERSION << " starting as '" << config.host_id << "' (master pid "
                          << getpid() << "), server " << config.server;
  for (const std::string& warning : weft::host::ConfigWarnings(config)) {
    WEFT_LOG(kWarn, "host") << warning;
  }
  // Two masters on one state directory would share its credential and
  // enrollment, and weftd would take them for one host.
  if (weft::Status s = weft::LockDirectory(weft::host::StateDir(config), "weft-host.lock", "weft-host",
                                           "the state directory");
      !s.ok()) {
    WEFT_LOG(kError, "host") << s.message()
                             << (s.code() == weft::Code::kConflict
                                     ? "; stop it first, or give this one its own host_id or state_dir"
                                     : "; set state_dir in the configuration to a directory weft-host may write");
    return 1;
  }
  if (weft::Status s = weft::host::EnsureCredential(config, signals); !s.ok()) {
    WEFT_LOG(kError, "host") << s.message();
    return 1;
  }
  weft::host::Master master(config, "/proc/self/exe");
  return master.Run();
}
