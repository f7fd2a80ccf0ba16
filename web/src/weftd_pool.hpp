// The connections from weft-web to weftd's api endpoint: a few threads, each
// with a weft::Client of its own (a Client is not thread-safe), taking calls
// from one queue. An HTTP handler hands its request over and is resumed on its
// own executor with the reply, so the I/O threads never block on weftd.
//
// While weftd does not answer (down, or refusing the gateway's key) each call
// takes the whole timeout, and browsers keep asking: a call that already
// waited a timeout's length in the queue is answered at once, unsent (its
// browser got or gets a 503 either way), so that no backlog is left to work
// through once weftd answers again. When a failed call finds nothing listening
// at weftd's address (connection refused: weftd is stopped), the calls after it
// look first and are answered at once, unsent, while that lasts, instead of
// each waiting the whole timeout. The first failure and the recovery are
// logged once each; failures in between at most once a minute, as counts.
//
// A call need not fail first: a watcher keeps a connection of its own to each
// of weftd's endpoints and follows it (a ZeroMQ socket monitor). When every
// one is lost and cannot be made again (weftd stopped), weftd is known to be
// unreachable before any browser asks, so the first call after a stop is
// answered at once too; when one is made again, weftd is back. The watcher's
// connections send ZeroMQ heartbeats, which weftd's I/O thread answers however
// busy its requests keep it: when they go unanswered and no new connection
// completes its handshake either, weftd hangs (SIGSTOP, or stuck), and is
// known to not answer before a call times out on it. Each change
// (from the watcher or from calls) is told to a listener once: weft-web tells
// the browsers' event streams.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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
  // The transport failed because nothing listens at weftd's address: weftd is down.
  bool unreachable = false;
  // The reply's error, or the transport failure, as one Status.
  Status ToStatus() const { return transport.ok() ? reply.ToStatus() : transport; }
};

class WeftdPool {
 public:
  // Told each time weftd becomes unreachable (stopped, or it does not answer)
  // and reachable again, with a sentence for people; on the watcher's or a
  // pool thread, without the pool's lock held.
  using Listener = std::function<void(bool reachable, const std::string& message)>;

  // `heartbeat`: how often the watcher's connections send a ZeroMQ heartbeat
  // (three unanswered, and a connection not made again within as long: weftd hangs).
  WeftdPool(zmq::context_t& ctx, client::Options options, int threads, std::chrono::milliseconds heartbeat,
            Listener listener = {});
  ~WeftdPool();
  WeftdPool(const WeftdPool&) = delete;
  WeftdPool& operator=(const WeftdPool&) = delete;

  // Runs `job` on one of the pool's threads with that thread's client; or,
  // when it waited in the queue longer than a call's timeout, `unsent(false)`
  // instead, and `unsent(true)` when nothing listens at weftd's address.
  void Submit(std::function<void(client::Client&)> job, std::function<void(bool refused)> unsent = {});

  // Sends `request` from a pool thread; completes with a CallResult on the
  // handler's executor.
  template <typename Token>
  auto AsyncCall(wire::Request request, Token&& token) {
    return boost::asio::async_initiate<Token, void(CallResult)>(
        [this](auto handler, wire::Request req) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          auto complete = [shared](CallResult out) {
            auto ex = boost::asio::get_associated_executor(*shared);
            boost::asio::post(ex, [shared, out = std::move(out)]() mutable { (*shared)(std::move(out)); });
          };
          const std::string op = req.op;
          Submit(
              [this, complete, req = std::move(req)](client::Client& client) {
                CallResult out;
                Result<wire::Reply> reply = client.CallRaw(req);
                if (reply.ok()) {
                  out.reply = std::move(reply).value();
                } else {
                  out.transport = reply.status();
                }
                out.unreachable = Note(out.transport);
                complete(std::move(out));
              },
              [this, complete, op](bool refused) {
                CallResult out;
                out.transport = refused ? Refused(op) : Expired(op);
                out.unreachable = refused;
                complete(std::move(out));
              });
        },
        token, std::move(request));
  }

 private:
  struct Job {
    std::chrono::steady_clock::time_point queued_at;
    std::function<void(client::Client&)> run;
    std::function<void(bool refused)> unsent;
  };
  void Run(client::Client& client);
  // The watcher's thread: a connection to each endpoint, and their monitors' events.
  void Watch(zmq::context_t& ctx, const client::Options& options, std::chrono::milliseconds heartbeat);
  // Whether nothing listens at weftd's address (a connection to each of its
  // endpoints is refused).
  bool Refuses();
  // weftd cannot be reached (`refused`: nothing listens there) or does not
  // answer, for `why`: logged and told the first time; `call`: a call failed.
  void Failing(bool refused, const std::string& why, bool call);
  // weftd answers again (a call succeeded) or can be connected to again
  // (the watcher): logged and told once after a failure.
  void Back(bool call);
  // A call's outcome: logs when weftd stops answering and when it answers
  // again. True when the call failed because nothing listens at weftd's address.
  bool Note(const Status& transport);
  // Counts a failed call; logs how many failed, at most once a minute.
  void CountFailure(std::chrono::steady_clock::time_point now);
  // What a call that waited too long in the queue gets.
  Status Expired(const std::string& op);
  // What a call gets, unsent, while nothing listens at weftd's address.
  Status Refused(const std::string& op);

  std::string endpoint_;
  std::vector<std::string> endpoints_;  // endpoint_'s list (one, or several weftd to fail over between)
  Listener listener_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  // Since when calls fail (none: they succeed), and how many failed or expired since.
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  std::int64_t failed_ = 0;
  // The last failed call found nothing listening at weftd's address.
  bool refused_ = false;
  // When failures were last logged, and how many there were by then.
  std::chrono::steady_clock::time_point logged_at_;
  std::int64_t logged_failed_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_watching_{false};
  std::thread watcher_;
};

}  // namespace weft::web
