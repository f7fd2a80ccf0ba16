#include "weft/host/probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "weft/common/log.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/supervision.hpp"

namespace weft::host {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  if (kAddressSanitizer) {
    const char* current = std::getenv("ASAN_OPTIONS");
    std::string options = current && *current ? std::string(current) + ":" : std::string();
    env.push_back("ASAN_OPTIONS=" + options + "handle_segv=0:handle_sigbus=0:handle_sigfpe=0");
  }
  return env;
}

ProbeResult RunProbe(const std::string& exe, const std::filesystem::path& file, const LuaBudget& lua,
                     int timeout_ms) {
  ProbeResult out;
  const std::string name = file.filename().string();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.reason = std::string("cannot probe: pipe failed: ") + std::strerror(errno);
    return out;
  }
  ChildSpec spec;
  spec.program = exe;
  spec.args = {"--probe", file.string(), std::to_string(lua.memory_mb), std::to_string(lua.instructions)};
  spec.env = ChildEnvironment();
  spec.stdout_fd = fds[1];
  Result<pid_t> pid = SpawnChild(spec);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    out.reason = "cannot probe: " + pid.status().message();
    return out;
  }
  std::string text;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // EOF: the child exited (or closed stdout)
    text.append(buf, static_cast<std::size_t>(r));
    if (text.size() > (4u << 20)) break;
  }
  close(fds[0]);
  if (timed_out) kill(*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    out.reason = "plugin file " + name + " hung while loading (no answer within " + std::to_string(timeout_ms) +
                 " ms); its probe was killed";
    return out;
  }
  if (WIFSIGNALED(status)) {
    out.reason = "plugin file " + name + " crashed while loading (" + SignalName(WTERMSIG(status)) + ")";
    return out;
  }
  auto nl = text.find('\n');
  json verdict = json::parse(text.substr(0, nl), nullptr, /*allow_exceptions=*/false);
  if (!verdict.is_object() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.reason = "plugin file " + name + " " + DescribeExit(status) + " while loading";
    return out;
  }
  if (verdict.value("ok", false) && verdict.contains("info") && verdict["info"].is_object()) {
    out.ok = true;
    out.info = verdict["info"];
  } else {
    out.reason = verdict.value("reason", std::string("the probe gave no reason"));
  }
  return out;
}

int ProbeMain(const std::filesystem::path& file, const LuaBudget& lua) {
  // The master logs the verdict; the loader's own lines would repeat it.
  log::SetLevel(log::Level::kError);
  PluginSet set;
  set.set_lua_budget(lua);
  json verdict;
  if (set.LoadFile(file)) {
    verdict = {{"ok", true}, {"info", set.plugins().front().info}};
  } else {
    verdict = {{"ok", false}, {"reason", set.refusals().empty() ? "refused" : set.refusals().front().reason}};
  }
  std::string line = verdict.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  // No destructors: a plugin's destroy is not part of what a probe judges,
  // and the libraries stay loaded until exit anyway.
  std::_Exit(0);
}

}  // namespace weft::host
