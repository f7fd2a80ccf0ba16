// weft::CallWatchdog: a deadline for blocking calls on a socket that the
// caller cannot give one (libpq's PQexec and PQgetResult wait for as long as
// the server takes; a stopped server answers never).
//
// A CallWatchdog::Guard made around such a call arms it: when the guard is
// still alive `deadline_ms` later (give or take the 50 ms between the
// watcher's looks), one thread of the process logs
// "<peer> did not answer within N ms; closing the connection" and shuts the
// socket down (shutdown(SHUT_RDWR), which does not close the descriptor), so
// the blocked call returns an error and the caller's handling of a lost
// connection runs. After the guard's destructor returns, the socket is never
// touched again. A deadline of 0 or less arms nothing.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

class CallWatchdog {
 public:
  // One armed call, as the watching thread sees it.
  struct Armed {
    int fd = -1;
    std::int64_t deadline_ms = 0;
    std::int64_t due_ms = 0;  // steady clock
    const std::string* peer = nullptr;
    bool fired = false;  // guarded by the watchdog's mutex
  };

  class Guard {
   public:
    // `peer` ("PostgreSQL at db1:5432") must outlive the guard.
    Guard(int fd, std::int64_t deadline_ms, const std::string& peer);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    // Whether the deadline passed and the socket was shut down.
    bool fired() const;

   private:
    Armed armed_;
    bool watched_ = false;
  };
};

}  // namespace weft
