// weft-host: a Weft provisioner host. See docs/protocol.md and
// docs/configuration.md (weft-host.toml) and docs/plugin-abi.md.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weft/common/log.hpp"
#include "weft/host/config.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/runtime.hpp"

namespace {

constexpr int kExitUsage = 2;

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: weft-host [--config FILE] [--server ENDPOINT] [--host-id ID] [--capacity N]\n"
               "                 [--plugin-dir DIR]...\n"
               "Runs Weft tasks for weftd with the native plugins found in the plugin directories.\n"
               "--plugin-dir replaces the configured plugin_dirs (repeat it for several).\n");
}

std::filesystem::path ExeDir(const char* argv0) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) exe = std::filesystem::absolute(argv0, ec);
  return exe.parent_path();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::optional<std::string> server, host_id;
  std::optional<int> capacity;
  std::vector<std::filesystem::path> plugin_dirs;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::string_view flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "weft-host: %.*s needs a value\n", static_cast<int>(flag.size()), flag.data());
        std::exit(kExitUsage);
      }
      return argv[++i];
    };
    if (arg == "--config") {
      config_path = value(arg);
    } else if (arg == "--server") {
      server = value(arg);
    } else if (arg == "--host-id") {
      host_id = value(arg);
    } else if (arg == "--capacity") {
      const char* v = value(arg);
      char* end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (!*v || *end || n < 1 || n > 4096) {
        std::fprintf(stderr, "weft-host: --capacity must be an integer from 1 to 4096, got '%s'\n", v);
        return kExitUsage;
      }
      capacity = static_cast<int>(n);
    } else if (arg == "--plugin-dir") {
      plugin_dirs.emplace_back(std::filesystem::absolute(value(arg)));
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
  if (capacity) config.capacity = *capacity;
  if (!plugin_dirs.empty()) config.plugin_dirs = plugin_dirs;
  if (weft::Status s = weft::host::ValidateConfig(config); !s.ok()) {
    std::fprintf(stderr, "weft-host: %s\n", s.message().c_str());
    return 1;
  }
  weft::log::Level level = weft::log::Level::kInfo;
  (void)weft::log::ParseLevel(config.log_level, &level);
  weft::log::SetLevel(level);

  // Signals are taken by one thread with sigwait; every other thread (and
  // every plugin thread they start) inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // internal: wakes the signal thread at exit
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  WEFT_LOG(kInfo, "host") << "weft-host " << WEFT_VERSION << " starting as '" << config.host_id << "', server "
                          << config.server;
  weft::host::PluginSet plugins;
  plugins.LoadDirectories(config.plugin_dirs);
  WEFT_LOG(kInfo, "host") << plugins.plugins().size() << " plugin(s) loaded, " << plugins.refusals().size()
                          << " refused";

  int code = 0;
  {
    weft::host::Runtime runtime(config, plugins);
    std::thread signal_thread([&] {
      int sig = 0;
      if (sigwait(&signals, &sig) == 0 && sig != SIGUSR1) {
        WEFT_LOG(kInfo, "host") << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT");
      }
      runtime.RequestStop();
    });
    code = runtime.Run();
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();
  }
  return code;
}
