// Small blocking TCP helpers for the real-node tests: does an address:port
// accept, an HTTP/1.0 GET, a redis PING. Every call has a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace weft::testing {

// A connected socket, or -1 (refused, unreachable, or not within timeout_ms).
inline int TcpConnect(const std::string& address, std::uint16_t port, int timeout_ms = 2000) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    ::close(fd);
    return -1;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, timeout_ms) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

inline bool Accepts(const std::string& address, std::uint16_t port) {
  int fd = TcpConnect(address, port, 1000);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Sends `request`, then reads until the peer closes (or stop_at is seen).
inline std::optional<std::string> Exchange(const std::string& address, std::uint16_t port, const std::string& request,
                                           const std::string& stop_at = "", int timeout_ms = 5000) {
  int fd = TcpConnect(address, port, timeout_ms);
  if (fd < 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left_ms = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, ms.count()));
  };
  std::size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms()) != 1) break;
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string reply;
  bool closed = false;
  while (sent == request.size() && left_ms() > 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms()) != 1) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = n == 0;
      break;
    }
    reply.append(buf, static_cast<std::size_t>(n));
    if (!stop_at.empty() && reply.find(stop_at) != std::string::npos) {
      closed = true;
      break;
    }
  }
  ::close(fd);
  if (!closed) return std::nullopt;
  return reply;
}

// The body of a 200 reply to GET path, or nullopt.
inline std::optional<std::string> HttpGet(const std::string& address, std::uint16_t port, const std::string& path) {
  auto reply = Exchange(address, port, "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\n\r\n");
  if (!reply || reply->rfind("HTTP/1.", 0) != 0 || reply->find(" 200 ") == std::string::npos) return std::nullopt;
  auto body = reply->find("\r\n\r\n");
  return body == std::string::npos ? std::string() : reply->substr(body + 4);
}

// Redis's answer to PING ("+PONG"), or nullopt.
inline std::optional<std::string> RedisPing(const std::string& address, std::uint16_t port = 6379) {
  auto reply = Exchange(address, port, "PING\r\n", "\r\n");
  if (!reply) return std::nullopt;
  return reply->substr(0, reply->find("\r\n"));
}

}  // namespace weft::testing
