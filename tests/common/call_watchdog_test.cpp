// CallWatchdog: a blocking call past its deadline has its socket shut down,
// so the call returns; a call that returns in time leaves the socket alone.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "weft/common/call_watchdog.hpp"

namespace {

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0); }
  ~SocketPair() {
    close(fd[0]);
    close(fd[1]);
  }
};

}  // namespace

TEST_CASE("a blocking call past its deadline returns, its socket shut down", "[watchdog]") {
  const std::string peer = "a test peer";
  SocketPair s;
  weft::CallWatchdog::Guard guard(s.fd[0], 200, peer);
  char c = 0;
  // Nothing is ever sent: only the watchdog can end this read.
  CHECK(recv(s.fd[0], &c, 1, 0) == 0);
  CHECK(guard.fired());
}

TEST_CASE("a call that returns before its deadline leaves its socket alone", "[watchdog]") {
  const std::string peer = "a test peer";
  SocketPair s;
  {
    weft::CallWatchdog::Guard guard(s.fd[0], 200, peer);
    REQUIRE(send(s.fd[1], "x", 1, 0) == 1);
    char c = 0;
    CHECK(recv(s.fd[0], &c, 1, 0) == 1);
    CHECK_FALSE(guard.fired());
  }
  // Well past the deadline of the guard that is gone, the socket still works.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  REQUIRE(send(s.fd[1], "y", 1, 0) == 1);
  char c = 0;
  CHECK(recv(s.fd[0], &c, 1, 0) == 1);
  CHECK(c == 'y');
  // A deadline of 0 arms nothing.
  weft::CallWatchdog::Guard none(s.fd[0], 0, peer);
  CHECK_FALSE(none.fired());
}
