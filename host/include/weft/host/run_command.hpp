// `weft-host run PLUGIN ACTION --task FILE`: the plugin author's test harness.
// Runs one action of one plugin file (.so or .lua) against a task read from a
// JSON file, without weftd, and prints what the host would report for it: the
// progress reports and log lines as they happen, then the status, the message
// and the result (docs/plugin-abi.md, "Trying a plugin").
//
// The plugin runs in a child process (`weft-host --run-child ...`), loaded and
// checked exactly as a worker loads it, so a plugin that crashes, exits, hangs
// past the timeout or grows past the memory limit is reported the way the host
// reports it ("plugin 'x' crashed with SIGSEGV during INSTALL"), not fatal to
// the harness.
#pragma once

namespace weft::host {

// argv[1] is "run". Exit status: 0 when the action succeeded, 1 when it failed,
// the plugin was refused or its process died, 2 for a usage error.
int RunCommandMain(int argc, char** argv);

// argv[1] is "--run-child": the child side, started by RunCommandMain. Writes
// one JSON object per line on stdout (loaded, refused, log, progress, finish).
int RunChildMain(int argc, char** argv);

}  // namespace weft::host
