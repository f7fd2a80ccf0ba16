// The daemon that tests/host/crashers/probe_forks.so starts when it is loaded,
// found by the pid it writes to WEFT_TEST_FORK_PIDFILE, and killed when this
// goes (it would otherwise live until the process that loaded it is gone).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <utility>

namespace weft::testing {

class ForkedDaemon {
 public:
  explicit ForkedDaemon(std::filesystem::path pidfile) : pidfile_(std::move(pidfile)) {}
  ~ForkedDaemon() {
    if (const pid_t p = pid(); p > 0) kill(p, SIGKILL);
  }
  ForkedDaemon(const ForkedDaemon&) = delete;
  ForkedDaemon& operator=(const ForkedDaemon&) = delete;

  const std::filesystem::path& pidfile() const { return pidfile_; }
  // The daemon's pid; -1 while none wrote it (nothing loaded the plugin).
  pid_t pid() const {
    std::ifstream in(pidfile_);
    long p = 0;
    return in >> p ? static_cast<pid_t>(p) : -1;
  }

 private:
  std::filesystem::path pidfile_;
};

}  // namespace weft::testing
