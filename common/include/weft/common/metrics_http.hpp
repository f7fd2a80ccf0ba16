// weft::metrics::HttpListener: the small HTTP/1.1 server behind `/metrics`.
//
// It runs on a thread of its own and serves one connection at a time, which
// is what a Prometheus scraper needs: GET /metrics answers the text that
// `render` returns (called on the listener's thread, so it must be
// thread-safe); any other path is 404, any other method 405. A connection is
// closed after each answer, and a client that sends no complete request
// within a few seconds is cut off, so a stuck client cannot block scrapes.
//
// Thread-safe; the destructor stops the thread and closes the socket.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "weft/common/status.hpp"

namespace weft::metrics {

class HttpListener {
 public:
  // `address` is HOST:PORT, PORT a number or `*` (any free port); an IPv6
  // host goes in brackets ([::1]:9100).
  static Result<std::unique_ptr<HttpListener>> Start(std::string_view address, std::function<std::string()> render);
  // Start, except that with PORT `*` it first tries the port of `previous_url`
  // ("http://HOST:PORT/metrics", the listener's last start; "" for none) when its
  // HOST is the same: a scrape configuration then stays valid across restarts.
  static Result<std::unique_ptr<HttpListener>> StartKeepingPort(std::string_view address,
                                                                std::string_view previous_url,
                                                                std::function<std::string()> render);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // The address bound, with the port chosen: "127.0.0.1:38211".
  const std::string& address() const { return address_; }

 private:
  HttpListener(int fd, int stop_read, int stop_write, std::string address, std::function<std::string()> render);
  void Run();
  void Serve(int client);

  int fd_;
  int stop_read_;
  int stop_write_;
  std::string address_;
  std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace weft::metrics
