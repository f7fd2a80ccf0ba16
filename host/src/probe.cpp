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
#include <optional>

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

namespace {

// One probe child: its pipe, what it printed so far, and when it is given up.
struct Running {
  std::size_t index = 0;
  pid_t pid = -1;
  int fd = -1;
  std::string text;
  Clock::time_point deadline;
};

// Starts `exe --probe file`; nullopt, with the reason in `out`, when it cannot.
std::optional<Running> StartProbe(const std::string& exe, const std::filesystem::path& file, const LuaBudget& lua,
                                  ProbeResult& out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.reason = std::string("cannot probe: pipe failed: ") + std::strerror(errno);
    return std::nullopt;
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
    return std::nullopt;
  }
  Running r;
  r.pid = *pid;
  r.fd = fds[0];
  return r;
}

// Reaps a probe child (killed first when it ran out of time) and judges what it printed.
ProbeResult EndProbe(Running& r, const std::filesystem::path& file, int timeout_ms, bool timed_out) {
  ProbeResult out;
  const std::string name = file.filename().string();
  close(r.fd);
  if (timed_out) kill(r.pid, SIGKILL);
  int status = 0;
  while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
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
  auto nl = r.text.find('\n');
  json verdict = json::parse(r.text.substr(0, nl), nullptr, /*allow_exceptions=*/false);
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

}  // namespace

std::vector<ProbeResult> RunProbes(const std::string& exe, const std::vector<std::filesystem::path>& files,
                                   const LuaBudget& lua, int timeout_ms, int parallel) {
  std::vector<ProbeResult> out(files.size());
  std::vector<Running> running;
  std::size_t next = 0;
  parallel = std::max(parallel, 1);
  while (next < files.size() || !running.empty()) {
    // Each probe has its own timeout from its start: a file that hangs costs
    // its slot that long, not the files after it.
    while (next < files.size() && running.size() < static_cast<std::size_t>(parallel)) {
      if (std::optional<Running> r = StartProbe(exe, files[next], lua, out[next])) {
        r->index = next;
        r->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        running.push_back(std::move(*r));
      }
      ++next;
    }
    if (running.empty()) continue;
    auto soonest = running.front().deadline;
    for (const Running& r : running) soonest = std::min(soonest, r.deadline);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(soonest - Clock::now()).count();
    std::vector<pollfd> fds;
    for (const Running& r : running) fds.push_back({r.fd, POLLIN, 0});
    const int n = poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 1000)));
    if (n < 0 && errno != EINTR) {
      // Cannot wait on the pipes (should not happen): give up on these probes now.
      for (Running& r : running) out[r.index] = EndProbe(r, files[r.index], timeout_ms, /*timed_out=*/true);
      running.clear();
      continue;
    }
    const auto now = Clock::now();
    std::vector<Running> still;
    for (std::size_t i = 0; i < running.size(); ++i) {
      Running& r = running[i];
      bool ended = false;
      if (n > 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        const ssize_t got = read(r.fd, buf, sizeof buf);
        if (got > 0) r.text.append(buf, static_cast<std::size_t>(got));
        // EOF: the child exited (or closed stdout).
        ended = (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) || r.text.size() > (4u << 20);
      }
      if (ended) {
        out[r.index] = EndProbe(r, files[r.index], timeout_ms, /*timed_out=*/false);
      } else if (now >= r.deadline) {
        out[r.index] = EndProbe(r, files[r.index], timeout_ms, /*timed_out=*/true);
      } else {
        still.push_back(std::move(r));
      }
    }
    running = std::move(still);
  }
  return out;
}

ProbeResult RunProbe(const std::string& exe, const std::filesystem::path& file, const LuaBudget& lua, int timeout_ms) {
  return RunProbes(exe, {file}, lua, timeout_ms, 1).front();
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
