// The connections from weft-web to weftd's api endpoint: a few threads, each
// with a weft::Client of its own (a Client is not thread-safe), taking calls
// from one queue. An HTTP handler hands its request over and is resumed on its
// own executor with the reply, so the I/O threads never block on weftd.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <utility>  // before Asio: awaitable.hpp uses std::exchange without it

#include <boost/asio/async_result.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

namespace weft::web {

// What a call to weftd gave: a reply (ok or an error reply), or a status
// saying weftd could not be reached.
struct CallResult {
  Status transport;
  wire::Reply reply;
  // The reply's error, or the transport failure, as one Status.
  Status ToStatus() const { return transport.ok() ? reply.ToStatus() : transport; }
};

class WeftdPool {
 public:
  WeftdPool(zmq::context_t& ctx, client::Options options, int threads);
  ~WeftdPool();
  WeftdPool(const WeftdPool&) = delete;
  WeftdPool& operator=(const WeftdPool&) = delete;

  // Runs `job` on one of the pool's threads with that thread's client.
  void Submit(std::function<void(client::Client&)> job);

  // Sends `request` from a pool thread; completes with a CallResult on the
  // handler's executor.
  template <typename Token>
  auto AsyncCall(wire::Request request, Token&& token) {
    return boost::asio::async_initiate<Token, void(CallResult)>(
        [this](auto handler, wire::Request req) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          Submit([shared, req = std::move(req)](client::Client& client) {
            CallResult out;
            Result<wire::Reply> reply = client.CallRaw(req);
            if (reply.ok()) {
              out.reply = std::move(reply).value();
            } else {
              out.transport = reply.status();
            }
            auto ex = boost::asio::get_associated_executor(*shared);
            boost::asio::post(ex, [shared, out = std::move(out)]() mutable { (*shared)(std::move(out)); });
          });
        },
        token, std::move(request));
  }

 private:
  void Run(client::Client& client);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void(client::Client&)>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace weft::web
