// Master: weft-host's supervising process. It never runs plugin code itself.
//
//   main thread     (Run) probes plugin files in child processes, starts and
//                   reaps worker processes, reads their channels, polls their
//                   memory, kills hung or bloated ones, watches the plugin
//                   directories (inotify) and rolls workers when the plugin
//                   set changes, handles SIGTERM/SIGINT (signalfd).
//   control thread  host.register (again on NOT_FOUND and after a plugin
//                   change), host.heartbeat with the union of every worker's
//                   in-flight tasks, and task.finish for the tasks of workers
//                   that died.
//
// See docs/host.md for the whole design and what a crash costs.
// Thread-safety: construct and Run on the main thread (it forks: see
// SpawnChild); the signals SIGTERM, SIGINT and SIGCHLD must be blocked in
// every thread before Run (main() does it first thing).
#pragma once

#include <memory>
#include <string>

#include "weft/host/config.hpp"

namespace weft::host {

class Master {
 public:
  // `exe` is the weft-host binary workers and probes are started from.
  Master(HostConfig config, std::string exe);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Runs until SIGTERM or SIGINT; returns the process exit code.
  int Run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::host
