// A child process for integration tests and benches: the real weftd,
// weft-host, weft or sshd. stdout and stderr go to files so a failing test can print them.
// The destructor kills (SIGKILL) and reaps a child that is still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace weft::testing {

struct ProcessOptions {
  std::vector<std::string> env;      // extra "KEY=VALUE" entries
  // The same path for both: one file, the two streams appended in order.
  std::filesystem::path stdout_path; // empty: /dev/null
  std::filesystem::path stderr_path; // empty: /dev/null
  std::filesystem::path cwd;         // empty: inherit
  bool die_with_parent = false;      // PR_SET_PDEATHSIG: killed when the starter dies (benches)
  // setpgid(0, 0): a terminal's Ctrl-C does not reach it; Signal() and Stop() reach the whole group.
  bool own_process_group = false;
};

class Process {
 public:
  Process() = default;
  Process(const std::filesystem::path& program, const std::vector<std::string>& args, ProcessOptions options = {});
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int sig);
  // Waits for exit; returns the exit status as `waitpid` gives it, or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Sends SIGTERM, waits up to `grace`, then SIGKILL. Returns the wait status.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Stdout and stderr captured so far (for failure messages).
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  ProcessOptions options_;
};

// The result of running a program to completion.
struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string out;
  std::string err;
};
RunResult Run(const std::filesystem::path& program, const std::vector<std::string>& args,
              std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Polls `ready` every 20 ms until it returns true or `timeout` passes.
bool WaitFor(const std::function<bool()>& ready, std::chrono::milliseconds timeout);

}  // namespace weft::testing
