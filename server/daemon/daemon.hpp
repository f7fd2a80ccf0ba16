// weft::server::Daemon: weftd's reactor.
//
// One thread owns the three sockets (api and provisioner ROUTERs, events PUB),
// the store and the queue. Each turn of the loop drains up to
// server.batch_max_messages ready requests from both ROUTERs, handles them
// inside ONE SQLite transaction together with lease expiries and held takes
// that can now be served, commits, and only then sends the replies and
// publishes the events: a reply never reports a change that is not durable
// (group commit). Timers (lease expiry, held-take deadlines, host silence)
// set the poll timeout; nothing polls in a busy loop.
//
// Run() blocks until SIGTERM or SIGINT (which the caller must have blocked in
// every thread and handed over as a signalfd), then shuts down cleanly.
// Not thread-safe: construct and run it on one thread.
#pragma once

#include <filesystem>

#include "server/config/config.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

// Takes the data directory for this process: creates it, locks
// <data_dir>/weftd.lock (flock) so that a second weftd refuses to start, and
// keeps the lock until the process exits.
[[nodiscard]] Status LockDataDir(const std::filesystem::path& data_dir);

// Runs weftd until a signal arrives on `signal_fd`. Returns ok on a clean shutdown.
[[nodiscard]] Status RunDaemon(const Config& config, int signal_fd);

}  // namespace weft::server
