#include "weft/host/supervision.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

extern char** environ;

namespace weft::host {

std::string SignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "signal " + std::to_string(sig);
  }
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP) return "was killed with " + SignalName(sig);
    return "crashed with " + SignalName(sig);
  }
  return "ended with wait status " + std::to_string(wait_status);
}

std::string TaskFailureMessage(const DeathReport& r) {
  std::string who = "plugin '" + r.plugin + "'";
  std::string during = r.plugin_returned ? " after its " + r.action + " returned, before the result was reported"
                                         : " during " + r.action;
  std::string msg;
  switch (r.reason) {
    case KillReason::kHung:
      msg = who + " hung past the task timeout of " + std::to_string(r.task_timeout_ms) + " ms" + during +
            "; its worker was killed";
      break;
    case KillReason::kMemory:
      msg = who + " used more than " + std::to_string(r.memory_limit_mb) + " MiB" + during + "; its worker was killed";
      break;
    case KillReason::kNone:
      msg = who + " " + DescribeExit(r.wait_status) + during;
      break;
  }
  if (!r.others.empty()) {
    std::string list;
    for (const auto& o : r.others) list += (list.empty() ? "" : ", ") + o;
    msg += " (the worker also ran " + list + " at the time, so the fault may be theirs; all its tasks failed)";
  }
  return msg;
}

bool SplitHold::Due(const std::vector<SlotSpec>& current, const std::vector<SlotSpec>& wanted,
                    const std::vector<std::string>& active, bool free, std::int64_t now_ms) {
  auto sorted = [](std::vector<SlotSpec> v) {
    std::sort(v.begin(), v.end(),
              [](const SlotSpec& a, const SlotSpec& b) { return std::tie(a.tenant, a.threads) < std::tie(b.tenant, b.threads); });
    return v;
  };
  if (sorted(current) == sorted(wanted)) {
    since_ms_ = -1;
    return false;
  }
  std::set<std::string> have, want;
  for (const SlotSpec& s : current) have.insert(s.tenant);
  for (const SlotSpec& s : wanted) want.insert(s.tenant);
  auto unserved = [&](const std::string& tenant) { return !tenant.empty() && !have.count(tenant) && !have.count(""); };
  const bool starved = std::any_of(want.begin(), want.end(), unserved) || std::any_of(active.begin(), active.end(), unserved);
  if (free || starved || have == want || hold_ms_ <= 0) {
    since_ms_ = -1;
    return true;
  }
  if (since_ms_ < 0) since_ms_ = now_ms;
  if (now_ms - since_ms_ < hold_ms_) return false;
  since_ms_ = -1;
  return true;
}

int RestartDelayMs(std::size_t recent_deaths) {
  if (recent_deaths <= 1) return 0;
  const std::size_t doublings = std::min<std::size_t>(recent_deaths - 2, 6);
  return std::min(500 << doublings, 30'000);
}

std::optional<std::uint64_t> ParseStatmRssBytes(const std::string& text, long page_size) {
  std::istringstream in(text);
  std::uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident) || page_size <= 0) return std::nullopt;
  return resident * static_cast<std::uint64_t>(page_size);
}

void TakeOutputLines(std::string& partial, bool final, const std::function<void(std::string_view)>& emit) {
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
    emit(std::string_view(partial).substr(start, nl - start));
  partial.erase(0, start);
  while (partial.size() >= kOutputLineBytes) {
    emit(std::string_view(partial).substr(0, kOutputLineBytes));
    partial.erase(0, kOutputLineBytes);
  }
  if (final && !partial.empty()) {
    emit(partial);
    partial.clear();
  }
}

std::string PrintableOutputLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::string text(line);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = '?';
  return text;
}

std::optional<std::uint64_t> ReadRssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);
  return ParseStatmRssBytes(text, sysconf(_SC_PAGESIZE));
}

bool AttemptGuard::Start(std::int64_t task_id, std::int64_t attempt, std::int64_t* newest) {
  auto [it, fresh] = tasks_.try_emplace(task_id);
  Task& t = it->second;
  if (!fresh && (attempt < t.newest || (attempt == t.newest && t.newest_running))) {
    *newest = t.newest;
    return false;
  }
  t.newest = attempt;
  t.newest_running = true;
  ++t.running;
  return true;
}

void AttemptGuard::End(std::int64_t task_id, std::int64_t attempt) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second.running == 0) return;
  Task& t = it->second;
  if (attempt == t.newest) t.newest_running = false;
  if (--t.running > 0) return;
  t.ended = ++ends_;
  ended_.emplace_back(task_id, t.ended);
  while (ended_.size() > remember_ended_) {
    const auto [oldest, when] = ended_.front();
    ended_.pop_front();
    // A task started again since is in the queue again, further back.
    if (auto o = tasks_.find(oldest); o != tasks_.end() && o->second.running == 0 && o->second.ended == when)
      tasks_.erase(o);
  }
}

Result<pid_t> SpawnChild(const ChildSpec& spec) {
  // Everything the child needs is built before fork: between fork and exec a
  // child of a threaded process may only make async-signal-safe calls.
  std::vector<std::string> args;
  args.push_back(spec.program);
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& extra : spec.env) {
      auto eq = extra.find('=');
      if (entry.substr(0, entry.find('=')) == std::string_view(extra).substr(0, eq)) replaced = true;
    }
    if (!replaced) env_strings.emplace_back(entry);
  }
  env_strings.insert(env_strings.end(), spec.env.begin(), spec.env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return Status::Internal(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (spec.die_with_parent) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(126);
      // The parent may have died between fork and prctl.
      if (getppid() != parent) _exit(126);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (spec.stdout_fd >= 0 && spec.stdout_fd != 1) {
      if (dup2(spec.stdout_fd, 1) < 0) _exit(126);
    }
    if (spec.stderr_fd >= 0 && spec.stderr_fd != 2) {
      if (dup2(spec.stderr_fd, 2) < 0) _exit(126);
    }
    for (const int fd : spec.keep_fds) {
      int flags = fcntl(fd, F_GETFD);
      if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) _exit(126);
    }
    execve(spec.program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

}  // namespace weft::host
