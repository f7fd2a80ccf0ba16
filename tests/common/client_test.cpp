#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

using nlohmann::json;
using namespace weft;

namespace {

constexpr std::size_t kBigReplyBytes = std::size_t{3} << 20;

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
    // A reply like job.get's of a 450-node job: a header frame of more than 1 MiB.
    if (req.ok() && req->op == "big") reply = wire::Reply::Success(id, {{"data", std::string(kBigReplyBytes, 'x')}});
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

TEST_CASE("client: a reply of several MiB (job.get of a large job) is read under the default limits", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] {
    server.ServeOne();
    server.ServeOne();
  });
  client::Client designated(ctx, client::Options{.endpoint = server.endpoint(), .timeout_ms = 5000});
  auto first = designated.Call("big");
  // Options built the way the benches and tests do, limits left `{}`.
  client::Client positional(ctx, {server.endpoint(), 5000, "", {}});
  auto second = positional.Call("big");
  t.join();
  REQUIRE(first.ok());
  CHECK((*first)["data"].get<std::string>().size() == kBigReplyBytes);
  REQUIRE(second.ok());
  CHECK((*second)["data"].get<std::string>().size() == kBigReplyBytes);
}

TEST_CASE("client: a reply over the limits the caller set is TOO_LARGE, saying it is the client's limit", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] {
    server.ServeOne();
    server.ServeOne();
  });
  client::Options options{.endpoint = server.endpoint(), .timeout_ms = 5000};
  options.limits.max_header_bytes = 64 * 1024;
  client::Client c(ctx, options);
  auto r = c.Call("big");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kTooLarge);
  CHECK_THAT(r.status().message(), Catch::Contains("is larger than this client accepts") &&
                                       Catch::Contains("the limit is 65536") && Catch::Contains("Options::limits") &&
                                       !Catch::Contains("malformed"));
  // The socket still works: the next call is answered.
  auto next = c.Call("after");
  t.join();
  REQUIRE(next.ok());
  CHECK((*next)["op"] == "after");
}
