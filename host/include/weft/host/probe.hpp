// Probing: the master learns a plugin file's descriptor without loading it
// itself. It re-executes weft-host as `weft-host --probe FILE`; the child loads
// the file with the ordinary loader (PluginSet::LoadFile), writes one JSON line
// to a pipe of its own and exits. The master takes that line once the child
// exited (or at the pipe's end), never waiting for the end of file a daemon the
// plugin forked (holding the pipe open) would keep off. What the file prints to the probe's stdout
// and stderr meanwhile goes to the host's log, labelled and bounded. A plugin whose entry or init crashes or hangs takes down
// only that short-lived child.
//
// Free functions; RunProbe forks, so call it from the master's main thread
// (see SpawnChild).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/host/plugin_loader.hpp"

namespace weft::host {

inline constexpr int kProbeTimeoutMs = 10'000;
// How many probes run at once: files that hang while loading cost about one
// kProbeTimeoutMs per this many, not one each.
inline constexpr int kProbeParallel = 8;

struct ProbeResult {
  bool ok = false;
  nlohmann::json info;  // ok: the descriptor as host.register wants it
  std::string reason;   // !ok: a sentence, as the loader's refusals
};

// Runs `exe --probe file` (a Lua file loads with `lua`'s budget) and reads its
// verdict; never throws.
ProbeResult RunProbe(const std::string& exe, const std::filesystem::path& file, const LuaBudget& lua = {},
                     int timeout_ms = kProbeTimeoutMs);

// Probes `files` (up to `parallel` at a time, each with its own timeout);
// the results in the order of `files`.
std::vector<ProbeResult> RunProbes(const std::string& exe, const std::vector<std::filesystem::path>& files,
                                   const LuaBudget& lua = {}, int timeout_ms = kProbeTimeoutMs,
                                   int parallel = kProbeParallel);

// What the master logs of each of a probe's stdout and stderr (what the
// plugin file writes while it loads), labelled `probe of plugin file X
// stderr: ...`; past it one line says how much was dropped.
inline constexpr std::uint64_t kProbeOutputBytes = 64 * 1024;

// The child's side: loads `file`, writes the verdict line to `verdict_fd`
// (stdout when -1), returns the exit code.
int ProbeMain(const std::filesystem::path& file, const LuaBudget& lua, int verdict_fd = -1);

// Extra environment for every child of the master. Under AddressSanitizer a
// plugin's SIGSEGV would otherwise become an ASan report and exit status 1;
// handle_segv=0 lets the signal kill the child so the master can name it.
std::vector<std::string> ChildEnvironment();


}  // namespace weft::host
