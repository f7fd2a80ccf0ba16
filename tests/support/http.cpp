#include "support/http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace weft::testing {

HttpReply HttpGet(const std::string& host_port, const std::string& path) {
  HttpReply reply;
  const std::size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return reply;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) return reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return reply;
  const timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return reply;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host_port + "\r\n\r\n";
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, static_cast<std::size_t>(n));
  close(fd);
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12 || head_end == std::string::npos) return reply;
  reply.status = std::stoi(raw.substr(9, 3));
  reply.body = raw.substr(head_end + 4);
  return reply;
}

std::string HostPortOf(const std::string& url) {
  const std::size_t scheme = url.find("//");
  const std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 2);
  return rest.substr(0, rest.find('/'));
}

HttpReply HttpGetUrl(const std::string& url) {
  const std::string host_port = HostPortOf(url);
  const std::size_t at = url.find(host_port);
  const std::string path = url.substr(at + host_port.size());
  return HttpGet(host_port, path.empty() ? "/" : path);
}

}  // namespace weft::testing
