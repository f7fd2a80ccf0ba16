#include "weft/common/metrics_http.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft::metrics {
namespace {

// A request's head larger than this is refused: a scrape's is a few hundred bytes.
constexpr std::size_t kMaxRequestBytes = 8192;
// How long a client may take to send its request, and to read the answer.
constexpr int kClientTimeoutMs = 5000;

std::string Response(std::string_view status, std::string_view content_type, const std::string& body) {
  return "HTTP/1.1 " + std::string(status) + "\r\nContent-Type: " + std::string(content_type) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// Splits HOST:PORT; brackets around an IPv6 host are removed; `*` as the port is 0.
Status SplitAddress(std::string_view address, std::string* host, std::string* port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size())
    return Status::Invalid("the metrics address '" + std::string(address) +
                           "' must be HOST:PORT, such as 127.0.0.1:9464 (PORT may be * for any free port)");
  std::string_view h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = std::string(h);
  *port = std::string(address.substr(colon + 1));
  if (*port == "*") *port = "0";
  return Status::Ok();
}

std::string BoundAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
}

void SendAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client left or was too slow (SO_SNDTIMEO)
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

Result<std::unique_ptr<HttpListener>> HttpListener::StartKeepingPort(std::string_view address,
                                                                     std::string_view previous_url,
                                                                     std::function<std::string()> render) {
  constexpr std::string_view kScheme = "http://", kPath = "/metrics";
  if (address.size() > 2 && address.ends_with(":*") && previous_url.starts_with(kScheme) &&
      previous_url.ends_with(kPath) && previous_url.size() > kScheme.size() + kPath.size()) {
    const std::string_view was =
        previous_url.substr(kScheme.size(), previous_url.size() - kScheme.size() - kPath.size());
    const std::size_t colon = was.rfind(':');
    if (colon != std::string_view::npos && was.substr(0, colon) == address.substr(0, address.size() - 2)) {
      auto again = Start(was, render);
      if (again.ok()) return again;
    }
  }
  return Start(address, std::move(render));
}

Result<std::unique_ptr<HttpListener>> HttpListener::Start(std::string_view address,
                                                          std::function<std::string()> render) {
  std::string host, port;
  WEFT_RETURN_IF_ERROR(SplitAddress(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return Status::Invalid("the metrics address '" + std::string(address) + "' does not resolve: " + gai_strerror(rc));
  int fd = -1;
  std::string why;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    return Status::Unavailable("cannot listen for metrics on " + std::string(address) + ": " + why +
                               "; choose another [metrics] listen address");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(fd);
    return Status::Internal(std::string("cannot make a pipe for the metrics listener: ") + std::strerror(errno));
  }
  std::unique_ptr<HttpListener> listener(
      new HttpListener(fd, pipe_fds[0], pipe_fds[1], BoundAddress(fd), std::move(render)));
  listener->thread_ = std::thread([l = listener.get()] { l->Run(); });
  return listener;
}

HttpListener::HttpListener(int fd, int stop_read, int stop_write, std::string address,
                           std::function<std::string()> render)
    : fd_(fd),
      stop_read_(stop_read),
      stop_write_(stop_write),
      address_(std::move(address)),
      render_(std::move(render)) {}

HttpListener::~HttpListener() {
  const char byte = 0;
  (void)!write(stop_write_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  close(fd_);
  close(stop_read_);
  close(stop_write_);
}

void HttpListener::Run() {
  while (true) {
    pollfd items[] = {{fd_, POLLIN, 0}, {stop_read_, POLLIN, 0}};
    if (poll(items, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (items[1].revents != 0) return;
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Serve(client);
    close(client);
  }
}

void HttpListener::Serve(int client) {
  const timeval timeout{kClientTimeoutMs / 1000, 0};
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      SendAll(client, Response("431 Request Header Fields Too Large", "text/plain", "request too large\n"));
      return;
    }
    const ssize_t n = recv(client, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed, or too slow
    request.append(buf, static_cast<std::size_t>(n));
  }
  const std::size_t line_end = request.find_first_of("\r\n");
  const std::string line = request.substr(0, line_end);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = line.find(' ', sp1 == std::string::npos ? sp1 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    SendAll(client, Response("400 Bad Request", "text/plain", "malformed request line\n"));
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") {
    SendAll(client, Response("405 Method Not Allowed", "text/plain", "only GET is served\n"));
    return;
  }
  if (path != "/metrics") {
    SendAll(client, Response("404 Not Found", "text/plain", "metrics are served at /metrics\n"));
    return;
  }
  SendAll(client, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_()));
}

}  // namespace weft::metrics
