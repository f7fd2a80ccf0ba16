#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

using nlohmann::json;
using namespace weft;

namespace {

// A ROUTER that answers each request with its op echoed back, after an
// optional delay, and can first send a bogus reply with a foreign id.
class EchoServer {
 public:
  explicit EchoServer(zmq::context_t& ctx) : socket_(ctx, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = wire::LastEndpoint(socket_);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Serves one request. delay_ms: answer late; stale_first: send a reply with another id first.
  void ServeOne(int delay_ms = 0, bool stale_first = false) {
    wire::Frames frames, envelope;
    REQUIRE(wire::RecvMultipart(socket_, frames));
    wire::SplitEnvelope(frames, envelope);
    std::string id;
    auto req = wire::DecodeRequest(frames, wire::Limits{}, &id);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (stale_first) {
      auto stale = wire::WithEnvelope(envelope, wire::EncodeReply(wire::Reply::Success("someone-else", {{"op", "stale"}})));
      wire::SendMultipart(socket_, stale);
    }
    wire::Reply reply = req.ok() ? wire::Reply::Success(id, {{"op", req->op},
                                                             {"tenant", req->tenant},
                                                             {"session", req->on_behalf.session},
                                                             {"csrf", req->on_behalf.csrf},
                                                             {"token", req->on_behalf.token},
                                                             {"client_addr", req->on_behalf.client_addr}})
                                 : wire::Reply::Failure(id, req.status());
    if (req.ok() && req->op == "fail") reply = wire::Reply::Failure(id, Status::NotFound("no such thing"));
    auto out = wire::WithEnvelope(envelope, wire::EncodeReply(reply));
    wire::SendMultipart(socket_, out);
  }

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
};

}  // namespace

TEST_CASE("client: a call returns the reply body and carries the tenant", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] { server.ServeOne(); });
  client::Client c(ctx, {server.endpoint(), 2000, "acme", {}});
  auto r = c.Call("server.status");
  t.join();
  REQUIRE(r.ok());
  CHECK((*r)["op"] == "server.status");
  CHECK((*r)["tenant"] == "acme");
}

TEST_CASE("client: a call carries the session, csrf, token and client address it acts for", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] {
    server.ServeOne();
    server.ServeOne();
    server.ServeOne();
  });
  client::Options options{.endpoint = server.endpoint(), .timeout_ms = 2000};
  options.on_behalf.token = "tok-default";
  client::Client c(ctx, options);
  auto by_default = c.Call("cluster.list");
  auto per_call = c.CallAs({.session = "s1", .csrf = "c1", .client_addr = "192.0.2.7"}, "cluster.create");
  c.set_on_behalf({});
  auto none = c.Call("cluster.list");
  t.join();
  REQUIRE(by_default.ok());
  CHECK((*by_default)["token"] == "tok-default");
  CHECK((*by_default)["session"] == "");
  REQUIRE(per_call.ok());
  CHECK((*per_call)["session"] == "s1");
  CHECK((*per_call)["csrf"] == "c1");
  CHECK((*per_call)["token"] == "");
  CHECK((*per_call)["client_addr"] == "192.0.2.7");
  REQUIRE(none.ok());
  CHECK((*none)["token"] == "");
}

TEST_CASE("client: an error reply becomes a Status with the server's code", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] { server.ServeOne(); });
  client::Client c(ctx, {server.endpoint(), 2000, "", {}});
  auto r = c.Call("fail");
  t.join();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kNotFound);
  CHECK(r.status().message() == "no such thing");
}

TEST_CASE("client: a reply to another request id is ignored", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] { server.ServeOne(0, /*stale_first=*/true); });
  client::Client c(ctx, {server.endpoint(), 2000, "", {}});
  auto r = c.Call("task.take");
  t.join();
  REQUIRE(r.ok());
  CHECK((*r)["op"] == "task.take");
}

TEST_CASE("client: a timeout is UNAVAILABLE and the next call works on a fresh socket", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  client::Client c(ctx, {server.endpoint(), 2000, "", {}});
  // The server answers the first request only after the client gave up.
  std::thread t([&] {
    server.ServeOne(300);
    server.ServeOne();
  });
  auto first = c.Call("slow", json::object(), 50);
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == Code::kUnavailable);
  CHECK(first.status().message().find("no answer from weftd") != std::string::npos);
  auto second = c.Call("again");
  t.join();
  REQUIRE(second.ok());
  CHECK((*second)["op"] == "again");
}
