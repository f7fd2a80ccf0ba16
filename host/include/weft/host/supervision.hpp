// What the master needs to supervise worker and probe processes: starting
// them (re-exec of weft-host with PR_SET_PDEATHSIG so they die with the
// master), naming how they ended, and reading their memory use.
// Free functions, safe from any thread except SpawnChild (see there).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::host {

// "SIGSEGV" for SIGSEGV, "signal 77" for a number without a name.
std::string SignalName(int sig);

// How a process ended, from a waitpid status: "crashed with SIGSEGV",
// "exited with status 3", "was killed with SIGKILL".
std::string DescribeExit(int wait_status);

// Why the master ended a worker (or did not: kNone).
enum class KillReason { kNone = 1, kHung, kMemory };

// The finish message of a task whose worker died. `others` lists the other
// tasks that worker held, as "plugin 'y' (START)", so a reader can tell the
// culprit may be another plugin.
struct DeathReport {
  std::string plugin;
  std::string action;
  int wait_status = 0;
  KillReason reason = KillReason::kNone;
  int task_timeout_ms = 0;
  int memory_limit_mb = 0;
  bool plugin_returned = false;  // the plugin had returned; the worker died while reporting
  std::vector<std::string> others;
};
std::string TaskFailureMessage(const DeathReport& report);

// What a child process printed (a worker's, a probe's stdout or stderr), cut
// into the lines the host logs: each complete line, and a longer one in pieces
// of kOutputLineBytes. `partial` keeps an unfinished line between calls;
// `final` (the writer is gone) gives that out too.
inline constexpr std::size_t kOutputLineBytes = 4096;
void TakeOutputLines(std::string& partial, bool final, const std::function<void(std::string_view)>& emit);

// A line a child printed as the host logs it: without a trailing '\r', and
// every control character but a tab as '?'.
std::string PrintableOutputLine(std::string_view line);

// Resident set size of `pid` in bytes, from /proc/<pid>/statm; nullopt if the
// process is gone. `statm_text` variant parses given text (for tests).
std::optional<std::uint64_t> ReadRssBytes(pid_t pid);
std::optional<std::uint64_t> ParseStatmRssBytes(const std::string& statm_text, long page_size);

// How long to wait before restarting a worker slot whose workers died
// `recent_deaths` times in the last minute (this death included): at once for
// the first, then 0.5 s, 1 s, 2 s ... capped at 30 s, so a plugin that kills
// every worker at once does not make the master fork in a tight loop.
int RestartDelayMs(std::size_t recent_deaths);

// A worker slot: the tenant its worker serves ("" for any tenant) and its
// runner threads.
struct SlotSpec {
  std::string tenant;
  int threads = 1;
  bool operator==(const SlotSpec&) const = default;
};

// When the master moves its workers to weftd's worker split. weftd splits again
// whenever a tenant becomes active or idle, and every move drains and restarts
// workers, so a tenant busy now and then would make the host churn. A move is
// made at once when `free` (no worker started yet, or no split followed yet),
// when only thread counts move between the same tenants (a host joined or
// left), or when a tenant with work (`active`, or named in `wanted`) has no
// worker that serves it. Any other move (a tenant gains or loses workers of its
// own while every tenant with work is served) is made only once the workers
// have differed from weftd's split for `hold_ms` without a break: a tenant idle
// for less keeps its workers, and one busy for less does without its own.
// `hold_ms` 0: every move at once. Not thread-safe (the master's main thread owns it).
class SplitHold {
 public:
  explicit SplitHold(std::int64_t hold_ms) : hold_ms_(hold_ms) {}
  // Whether to move from `current` to `wanted` now; false also when they are the same.
  bool Due(const std::vector<SlotSpec>& current, const std::vector<SlotSpec>& wanted,
           const std::vector<std::string>& active, bool free, std::int64_t now_ms);
  // Whether a move is being held back.
  bool holding() const { return since_ms_ >= 0; }

 private:
  const std::int64_t hold_ms_;
  std::int64_t since_ms_ = -1;  // when the workers first differed from the split, while held back
};

// The newest attempt of each task that this host's workers started, so the
// master never starts an older attempt after a newer one. A runner may read
// its take reply late (a busy machine, a weftd restart in between): by then
// the lease ran out and weftd handed the task to another runner, maybe in
// another worker process. Only the master sees every runner's starts.
// Bounded: a task is remembered while one of its attempts runs, and for the
// last `remember_ended` tasks whose attempts all ended (older ones are
// forgotten first). Not thread-safe (the master's main thread owns it).
class AttemptGuard {
 public:
  explicit AttemptGuard(std::size_t remember_ended) : remember_ended_(remember_ended) {}

  // Whether `attempt` of `task_id` may start. No when this host started a
  // newer attempt of the task, or the same attempt runs already; `newest` is
  // then that attempt. When yes, the attempt counts as running until End.
  bool Start(std::int64_t task_id, std::int64_t attempt, std::int64_t* newest);
  // An attempt that Start let run ended (finished, given up, or its worker died).
  void End(std::int64_t task_id, std::int64_t attempt);
  // Tasks remembered now (running or ended recently).
  std::size_t size() const { return tasks_.size(); }

 private:
  struct Task {
    std::int64_t newest = 0;    // the newest attempt started
    bool newest_running = false;
    int running = 0;            // attempts started and not ended
    std::uint64_t ended = 0;    // when its attempts last all ended (an End count)
  };
  const std::size_t remember_ended_;
  std::uint64_t ends_ = 0;
  std::unordered_map<std::int64_t, Task> tasks_;
  // Tasks whose attempts all ended, oldest first, with the End count of that moment.
  std::deque<std::pair<std::int64_t, std::uint64_t>> ended_;
};

struct ChildSpec {
  std::string program;             // usually /proc/self/exe
  std::vector<std::string> args;   // argv[1..]
  std::vector<std::string> env;    // extra KEY=VALUE (replacing same-named ones)
  int stdout_fd = -1;              // dup'ed onto 1 when >= 0
  int stderr_fd = -1;              // dup'ed onto 2 when >= 0
  std::vector<int> keep_fds;       // stay open in the child (its channel, ...), close-on-exec cleared
  bool die_with_parent = true;     // PR_SET_PDEATHSIG(SIGKILL) + getppid check
};
// fork + exec. Call it from the thread that lives as long as the master:
// PR_SET_PDEATHSIG fires when the forking THREAD exits, not only the process.
// The child gets an empty signal mask and default dispositions.
Result<pid_t> SpawnChild(const ChildSpec& spec);

}  // namespace weft::host
