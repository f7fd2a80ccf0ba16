// What several weft-bench cases share: argument parsing, medians, scratch
// directories, log tails, /proc CPU time, and the child processes (weftd,
// weft-host) a case starts from the build it belongs to.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::bench {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// An integer argument within [min, max]; false leaves *out alone.
bool ParseInt(const std::string& text, int min, int max, int* out);
double Median(std::vector<double> v);
double MsSince(SteadyClock::time_point t);
// The last `max_bytes` of a (log) file.
std::string Tail(const fs::path& path, std::size_t max_bytes = 2000);

// The children of every thread of `pid` (/proc lists children per thread).
std::vector<pid_t> Children(pid_t pid);
// CPU time (ns) of a process and, recursively, of its children, from
// /proc/<pid>/task/*/schedstat; 0 when unknown.
std::int64_t TreeCpuNs(pid_t pid);

// A scratch directory "<tmp>/<prefix>-XXXXXX", removed when done unless kept
// (then its path is printed on stderr).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix, bool keep = false);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool keep_;
};

// A child process (weftd or weft-host) logging to a file. It dies with the
// bench (PR_SET_PDEATHSIG); Stop() sends SIGTERM, then SIGKILL after 15 s.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }

  Status Start(const fs::path& binary, const std::vector<std::string>& args, const fs::path& log);
  bool Running();
  void Stop();
  pid_t pid() const { return pid_; }
  const fs::path& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  fs::path log_;
};

// A weftd started by StartWeftd: where it listens.
struct WeftdEndpoints {
  std::string api;
  std::string provisioner;
  std::string events;
};

// Writes <dir>/weftd.toml (data in <dir>/data, every endpoint on an ephemeral
// loopback port, CurveZMQ off: the figures are for weftd's work, not for
// encryption; `server_extra` adds lines to its [server] table), starts
// `binary` as `weftd` logging to <dir>/weftd.log, and waits up to 15 s for
// the endpoints.json that this very process writes.
Result<WeftdEndpoints> StartWeftd(Child& weftd, const fs::path& binary, const fs::path& dir,
                                  const std::string& server_extra = "");

// weftd, weft-host and the fake plugins of the build weft-bench belongs to.
struct Paths {
  fs::path weftd;
  fs::path host;
  fs::path provider_so;
  fs::path automator_so;
};
Result<Paths> FindPaths();

}  // namespace weft::bench
