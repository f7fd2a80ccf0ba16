// What several weft-bench cases share: argument parsing, medians, scratch
// directories, log tails, /proc CPU time, and how a case runs weftd and
// weft-host (started by tests/support) from the build it belongs to.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "support/host.hpp"
#include "support/weftd.hpp"
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

// weftd as every case runs it (tests/support starts it): in `dir`, every
// endpoint on an ephemeral loopback port, CurveZMQ off (the figures are for
// weftd's work, not for encryption), log level warn; `server_extra` adds lines
// to its [server] table. It dies with the bench; Stop() sends SIGTERM, then
// SIGKILL after 15 s.
testing::WeftdOptions BenchWeftd(const fs::path& binary, const fs::path& dir, const std::string& server_extra = "");
// Starts it; the error names what failed with the end of weftd's log.
Status StartWeftd(testing::Weftd& weftd);

// weft-host `id` as the cases run it: files in dir/id, only the plugins in
// `plugins`, `workers` worker processes, long waits (take 5 s, requests 30 s),
// dying with the bench.
testing::HostOptions BenchHost(const fs::path& binary, const fs::path& dir, const std::string& id,
                               const std::string& provisioner, int capacity, int workers, const fs::path& plugins,
                               const std::string& log_level);

// weftd, weft-host and the fake plugins of the build weft-bench belongs to.
struct Paths {
  fs::path weftd;
  fs::path host;
  fs::path provider_so;
  fs::path automator_so;
};
Result<Paths> FindPaths();

// The transport's own rate, the baseline of the cases that measure weftd's
// requests: `clients` DEALER threads each sending `payload` and waiting for its
// echo from a ROUTER that only echoes, over loopback TCP like weftd's
// endpoints, for `ms`. Round trips per second. The echo shares `ctx`, and so
// the clients' ZeroMQ I/O thread, unless `echo_own_io`: then it has a context
// (an I/O thread) of its own, as a server in another process has, and each
// round trip crosses the wake-ups of two I/O threads, as a request to weftd does.
Result<double> RawRoundTrips(zmq::context_t& ctx, int clients, int ms, const std::string& payload,
                             bool echo_own_io = false);

}  // namespace weft::bench
