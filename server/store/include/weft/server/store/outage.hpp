// What a PostgreSQL store tells its owner while it waits for a lost
// connection to come back (StoreOptions::reconnect_timeout_ms), so that the
// owner (weftd's reactor) can answer its clients meanwhile instead of
// leaving them without a reply (docs/failover.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace weft::store {

struct StoreOutage {
  std::string server;             // HOST:PORT of the server it was connected to
  std::string why;                // libpq's reason for the last failed attempt, one line
  std::int64_t lost_ms_ago = 0;   // since the connection was found lost
  std::int64_t left_ms = 0;       // until the statement gives up waiting
};

// Called between two attempts to connect again, in place of a sleep of
// `pause_ms`; it may wait that long itself. False: stop waiting now (the
// statement fails with UNAVAILABLE, as when the time runs out).
using ReconnectWait = std::function<bool(const StoreOutage& outage, int pause_ms)>;

}  // namespace weft::store
