// What the master needs to supervise worker and probe processes: starting
// them (re-exec of weft-host with PR_SET_PDEATHSIG so they die with the
// master), naming how they ended, and reading their memory use.
// Free functions, safe from any thread except SpawnChild (see there).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
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

// Resident set size of `pid` in bytes, from /proc/<pid>/statm; nullopt if the
// process is gone. `statm_text` variant parses given text (for tests).
std::optional<std::uint64_t> ReadRssBytes(pid_t pid);
std::optional<std::uint64_t> ParseStatmRssBytes(const std::string& statm_text, long page_size);

// How long to wait before restarting a worker slot whose workers died
// `recent_deaths` times in the last minute (this death included): at once for
// the first, then 0.5 s, 1 s, 2 s ... capped at 30 s, so a plugin that kills
// every worker at once does not make the master fork in a tight loop.
int RestartDelayMs(std::size_t recent_deaths);

struct ChildSpec {
  std::string program;             // usually /proc/self/exe
  std::vector<std::string> args;   // argv[1..]
  std::vector<std::string> env;    // extra KEY=VALUE (replacing same-named ones)
  int stdout_fd = -1;              // dup'ed onto 1 when >= 0
  int keep_fd = -1;                // stays open in the child (its channel), close-on-exec cleared
  bool die_with_parent = true;     // PR_SET_PDEATHSIG(SIGKILL) + getppid check
};
// fork + exec. Call it from the thread that lives as long as the master:
// PR_SET_PDEATHSIG fires when the forking THREAD exits, not only the process.
// The child gets an empty signal mask and default dispositions.
Result<pid_t> SpawnChild(const ChildSpec& spec);

}  // namespace weft::host
