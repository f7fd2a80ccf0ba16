// weft::server::Daemon: weftd's reactor.
//
// One thread owns the three sockets (api and provisioner ROUTERs, events PUB),
// the store and the queue. Each turn of the loop drains up to
// server.batch_max_messages ready requests from both ROUTERs, handles them
// inside ONE SQLite transaction together with lease expiries and held takes
// that can now be served, commits, and only then sends the replies and
// publishes the events: a reply never reports a change that is not durable
// (group commit). Read-only api requests (cluster.list, job.get, ...) are
// answered first, before anything of the turn is handled, so they see only
// committed state and need not wait for the writes or the commit (a read
// behind a queued request of the same peer keeps its place). A turn handles
// writes, then held takes, for a few milliseconds each at most and leaves the
// rest for the next turn, so a long burst (many creates, hundreds of takes
// served at once) does not hold back the reads that arrive meanwhile.
// Timers (lease expiry, held-take deadlines, host silence) set the poll
// timeout; nothing polls in a busy loop.
//
// Run() blocks until SIGTERM or SIGINT (which the caller must have blocked in
// every thread and handed over as a signalfd), then shuts down cleanly.
// Not thread-safe: construct and run it on one thread.
#pragma once

#include <filesystem>

#include "weft/server/config/config.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

// Takes the data directory for this process: creates it, locks
// <data_dir>/weftd.lock (flock) so that a second weftd refuses to start, and
// keeps the lock until the process exits.
[[nodiscard]] Status LockDataDir(const std::filesystem::path& data_dir);

// Runs weftd until a signal arrives on `signal_fd`. Returns ok on a clean shutdown.
// A store that is not new whose key files (<data_dir>/keys/) are missing stops
// it at start, unless `new_keys` (--new-keys) says to make new ones.
[[nodiscard]] Status RunDaemon(const Config& config, int signal_fd, bool new_keys = false);

}  // namespace weft::server
