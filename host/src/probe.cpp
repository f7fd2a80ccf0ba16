#include "weft/host/probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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

constexpr std::array<const char*, 2> kStreamNames = {"stdout", "stderr"};

// What a probe's plugin file writes to the probe's stdout or stderr (its entry
// point, init, describe): a pipe read into the host's log, labelled with the
// file and the stream, at most kProbeOutputBytes of each per probe.
struct ProbeOutput {
  int fd = -1;  // -1 once at its end
  std::string partial;
  std::uint64_t bytes = 0;
  std::uint64_t dropped = 0;
};

// One probe child: its verdict pipe, what it wrote there so far, its stdout
// and stderr, and when it is given up. The verdict is one line: it is complete
// at its newline, or when the child exited. Neither waits for the pipe's end of
// file, which a process the plugin forked while it loaded (a daemon) holds off
// for as long as it lives: a fork keeps every descriptor, close-on-exec or not.
struct Running {
  std::size_t index = 0;
  pid_t pid = -1;
  int fd = -1;
  // Readable once the child exited (-1: no pidfd, Linux before 5.3; the wait
  // below then looks at the child once per round, at least once a second).
  int pidfd = -1;
  std::string text;
  std::array<ProbeOutput, 2> out;
  Clock::time_point deadline;
  bool exited = false;  // reaped: `status` is its wait status
  int status = 0;
};

// Reads what the verdict pipe holds now (it never blocks); false at its end or on an error.
bool ReadVerdict(Running& r) {
  char buf[4096];
  while (r.fd >= 0 && r.text.size() <= (4u << 20)) {
    const ssize_t got = read(r.fd, buf, sizeof buf);
    if (got > 0) {
      r.text.append(buf, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

// Reaps the child if it exited; true once it did.
bool Reaped(Running& r) {
  if (r.exited) return true;
  pid_t got = 0;
  while ((got = waitpid(r.pid, &r.status, WNOHANG)) < 0 && errno == EINTR) {
  }
  r.exited = got == r.pid;
  return r.exited;
}

void EmitProbeOutput(const std::filesystem::path& file, std::size_t stream, ProbeOutput& o, std::string_view line) {
  const bool within = o.bytes < kProbeOutputBytes;
  o.bytes += line.size() + 1;
  if (!within) {
    o.dropped += line.size() + 1;
    return;
  }
  WEFT_LOG(kInfo, "host") << "probe of plugin file " << file.string() << " " << kStreamNames[stream] << ": "
                          << PrintableOutputLine(line);
}

// Reads what the probe wrote to one stream so far; `final` once it is gone:
// its unfinished last line too, and how much was dropped.
void ReadProbeOutput(const std::filesystem::path& file, std::size_t stream, ProbeOutput& o, bool final) {
  const auto emit = [&](std::string_view line) { EmitProbeOutput(file, stream, o, line); };
  char buf[16384];
  std::size_t total = 0;
  while (o.fd >= 0 && (final || total < (1u << 20))) {
    const ssize_t n = read(o.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        close(o.fd);  // at its end: not polled any more
        o.fd = -1;
        final = true;
      }
      break;
    }
    total += static_cast<std::size_t>(n);
    o.partial.append(buf, static_cast<std::size_t>(n));
    TakeOutputLines(o.partial, false, emit);
  }
  if (!final) return;
  TakeOutputLines(o.partial, true, emit);
  if (o.dropped > 0) {
    WEFT_LOG(kWarn, "host") << "probe of plugin file " << file.string() << " " << kStreamNames[stream] << ": ... "
                            << o.dropped << " more bytes dropped (at most " << kProbeOutputBytes
                            << " per probe are logged)";
    o.dropped = 0;
  }
}

// Starts `exe --probe file`; nullopt, with the reason in `out`, when it cannot.
std::optional<Running> StartProbe(const std::string& exe, const std::filesystem::path& file, const LuaBudget& lua,
                                  ProbeResult& out) {
  // The verdict, and the probe's stdout and stderr (what the plugin writes while it loads).
  std::array<std::array<int, 2>, 3> pipes = {{{-1, -1}, {-1, -1}, {-1, -1}}};
  for (auto& p : pipes) {
    if (pipe2(p.data(), O_CLOEXEC) == 0) continue;
    out.reason = std::string("cannot probe: pipe failed: ") + std::strerror(errno);
    for (const auto& made : pipes)
      for (const int fd : made)
        if (fd >= 0) close(fd);
    return std::nullopt;
  }
  const int verdict = pipes[0][1];
  ChildSpec spec;
  spec.program = exe;
  spec.args = {"--probe", file.string(), std::to_string(lua.memory_mb), std::to_string(lua.instructions),
               std::to_string(verdict)};
  spec.env = ChildEnvironment();
  spec.keep_fds = {verdict};
  spec.stdout_fd = pipes[1][1];
  spec.stderr_fd = pipes[2][1];
  Result<pid_t> pid = SpawnChild(spec);
  for (const auto& p : pipes) close(p[1]);
  if (!pid.ok()) {
    for (const auto& p : pipes) close(p[0]);
    out.reason = "cannot probe: " + pid.status().message();
    return std::nullopt;
  }
  Running r;
  r.pid = *pid;
  r.fd = pipes[0][0];
  fcntl(r.fd, F_SETFL, fcntl(r.fd, F_GETFL) | O_NONBLOCK);
  r.pidfd = static_cast<int>(syscall(SYS_pidfd_open, r.pid, 0));
  for (std::size_t stream = 0; stream < 2; ++stream) {
    r.out[stream].fd = pipes[stream + 1][0];
    fcntl(r.out[stream].fd, F_SETFL, fcntl(r.out[stream].fd, F_GETFL) | O_NONBLOCK);
  }
  return r;
}

// Reaps a probe child (killed first when it ran out of time), logs the rest of
// what it printed, and judges its verdict.
ProbeResult EndProbe(Running& r, const std::filesystem::path& file, int timeout_ms, bool timed_out) {
  ProbeResult out;
  const std::string name = file.filename().string();
  close(r.fd);
  if (r.pidfd >= 0) close(r.pidfd);
  if (timed_out && !r.exited) kill(r.pid, SIGKILL);
  int status = r.status;
  if (!r.exited) {
    while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // What is left in the pipes (a child it started may hold them open: no end is waited for).
  for (std::size_t stream = 0; stream < 2; ++stream) {
    ReadProbeOutput(file, stream, r.out[stream], /*final=*/true);
    if (r.out[stream].fd >= 0) close(r.out[stream].fd);
    r.out[stream].fd = -1;
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
    // Per probe: its verdict pipe, then its pidfd (or a placeholder poll skips).
    std::vector<pollfd> fds;
    for (const Running& r : running) {
      fds.push_back({r.fd, POLLIN, 0});
      fds.push_back({r.pidfd, POLLIN, 0});
    }
    std::vector<std::pair<std::size_t, std::size_t>> printing;  // running index, stream
    for (std::size_t i = 0; i < running.size(); ++i) {
      for (std::size_t stream = 0; stream < 2; ++stream) {
        if (running[i].out[stream].fd < 0) continue;
        fds.push_back({running[i].out[stream].fd, POLLIN, 0});
        printing.emplace_back(i, stream);
      }
    }
    const int n = poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 1000)));
    if (n < 0 && errno != EINTR) {
      // Cannot wait on the pipes (should not happen): give up on these probes now.
      for (Running& r : running) out[r.index] = EndProbe(r, files[r.index], timeout_ms, /*timed_out=*/true);
      running.clear();
      continue;
    }
    // Output first: a probe's verdict may end it in this round.
    const std::size_t first_output = 2 * running.size();
    for (std::size_t k = 0; n > 0 && k < printing.size(); ++k) {
      if (!(fds[first_output + k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Running& r = running[printing[k].first];
      ReadProbeOutput(files[r.index], printing[k].second, r.out[printing[k].second], /*final=*/false);
    }
    const auto now = Clock::now();
    std::vector<Running> still;
    for (std::size_t i = 0; i < running.size(); ++i) {
      Running& r = running[i];
      // At the pipe's end the child is gone (or closed it): EndProbe waits for it.
      bool ended = !ReadVerdict(r) || r.text.size() > (4u << 20);
      // The child exited: what it wrote before is all in the pipe, whoever still holds the pipe open.
      if (!ended && Reaped(r)) {
        (void)ReadVerdict(r);
        ended = true;
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

int ProbeMain(const std::filesystem::path& file, const LuaBudget& lua, int verdict_fd) {
  // The master logs the verdict; the loader's own lines would repeat it.
  log::SetLevel(log::Level::kError);
  // The verdict has a descriptor of its own, so what the plugin prints to
  // stdout while it loads is only output (the master logs it, labelled).
  std::FILE* verdict_out = stdout;
  if (verdict_fd >= 0) {
    verdict_out = fcntl(verdict_fd, F_SETFD, FD_CLOEXEC) == 0 ? fdopen(verdict_fd, "w") : nullptr;
    if (verdict_out == nullptr) {
      std::fprintf(stderr, "weft-host --probe: descriptor %d is not usable for the verdict: %s\n", verdict_fd,
                   std::strerror(errno));
      return 1;
    }
    // Line by line, as in a worker: what the plugin printed before a crash is not lost in a buffer.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
  }
  PluginSet set;
  set.set_lua_budget(lua);
  json verdict;
  if (set.LoadFile(file)) {
    verdict = {{"ok", true}, {"info", set.plugins().front().info}};
  } else {
    verdict = {{"ok", false}, {"reason", set.refusals().empty() ? "refused" : set.refusals().front().reason}};
  }
  std::string line = verdict.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::fflush(stdout);  // what the plugin printed without a newline
  std::fwrite(line.data(), 1, line.size(), verdict_out);
  std::fflush(verdict_out);
  // No destructors: a plugin's destroy is not part of what a probe judges,
  // and the libraries stay loaded until exit anyway.
  std::_Exit(0);
}

}  // namespace weft::host
