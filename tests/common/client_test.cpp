#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <thread>

#include "weft/client/client.hpp"
#include "weft/client/events.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/log.hpp"
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

  // Receives one request and never answers it.
  void TakeOne() {
    wire::Frames frames;
    REQUIRE(wire::RecvMultipart(socket_, frames));
  }

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
    if (req.ok() && req->op == "stale")
      reply = wire::Reply::Failure(id, Status::Conflict("attempt 2 is not the current one"), {{"current_attempt", 3}});
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

TEST_CASE("client: a timeout is TIMEOUT (the request may have run) and the next call works on a fresh socket",
          "[client]") {
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
  // Not UNAVAILABLE, weftd's "not done; retry": the server did get this request.
  CHECK(first.status().code() == Code::kTimeout);
  CHECK(first.status().message().find("no answer from weftd") != std::string::npos);
  CHECK(first.status().message().find("may or may not have been carried out") != std::string::npos);
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

TEST_CASE("client: Call keeps an error reply's details, and its result still converts to a Result<json>", "[client]") {
  zmq::context_t ctx;
  EchoServer server(ctx);
  std::thread t([&] {
    server.ServeOne();
    server.ServeOne();
  });
  client::Client c(ctx, client::Options{.endpoint = server.endpoint(), .timeout_ms = 5000});
  client::DetailedResult r = c.Call("stale");
  Result<json> plain = c.Call("stale");
  t.join();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kConflict);
  REQUIRE(r.details().is_object());
  CHECK(r.details().value("current_attempt", 0) == 3);
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.status().code() == Code::kConflict);
}

TEST_CASE("client: a peer that accepts connections and never answers (a stopped weftd) is checked within about "
          "twice probe_ms, and named as such",
          "[client]") {
  // A listening socket nobody accepts on: the kernel completes the connections, nothing answers.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 64) == 0);
  socklen_t size = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  zmq::context_t ctx;
  constexpr int kMs = 1500;
  client::Options options{.endpoint = endpoint, .timeout_ms = kMs};
  options.probe_ms = kMs;
  client::Client c(ctx, options);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.Call("server.status");
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kTimeout);
  CHECK_THAT(r.status().message(),
             Catch::Contains("accepted the connection but did not answer the ZeroMQ handshake within 1500 ms") &&
                 Catch::Contains("stopped or overloaded weftd"));
  // The call's own 1.5 s and the check's 3 s at most (it took 1.5 s per look, three looks, before).
  CHECK(took < std::chrono::milliseconds(kMs + 2 * kMs + 900));
}

TEST_CASE("client: a credential file whose public key is not its secret key's is refused, saying so", "[client]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("weft-client-cred-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto mine = curve::Generate();
  auto other = curve::Generate();
  auto server = curve::Generate();
  REQUIRE(mine.ok());
  REQUIRE(other.ok());
  REQUIRE(server.ok());
  curve::Credential good{.api = "tcp://127.0.0.1:7420",
                         .server_key = server->public_key,
                         .keys = *mine,
                         .tenant = "acme",
                         .user = "ann",
                         .role = "user"};
  REQUIRE(curve::SaveCredential(dir / "good.json", good).ok());
  auto loaded = curve::LoadCredential(dir / "good.json");
  REQUIRE(loaded.ok());
  CHECK(loaded->keys.public_key == mine->public_key);

  curve::Credential mixed = good;
  mixed.keys.secret_key = other->secret_key;
  REQUIRE(curve::SaveCredential(dir / "mixed.json", mixed).ok());
  auto refused = curve::LoadCredential(dir / "mixed.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kInvalid);
  CHECK_THAT(refused.status().message(), Catch::Contains("mixed.json") &&
                                             Catch::Contains("public_key is not the public half of secret_key"));
  std::filesystem::remove_all(dir);
}

namespace {

// What `fn` writes to stderr (the log's lines).
template <class Fn>
std::string Stderr(const std::filesystem::path& file, Fn fn) {
  std::fflush(stderr);
  const int saved = dup(2);
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  dup2(fd, 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("client: loading a credential file others may read warns, naming the fix", "[client]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("weft-client-mode-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto keys = curve::Generate();
  auto server = curve::Generate();
  REQUIRE(keys.ok());
  REQUIRE(server.ok());
  const std::filesystem::path file = dir / "ann.json";
  REQUIRE(curve::SaveCredential(file, {.api = "tcp://127.0.0.1:7420",
                                       .server_key = server->public_key,
                                       .keys = *keys,
                                       .tenant = "acme",
                                       .user = "ann",
                                       .role = "user"})
              .ok());
  const log::Level level = log::CurrentLevel();
  log::SetLevel(log::Level::kInfo);
  const std::string private_file = Stderr(dir / "err1", [&] { REQUIRE(curve::LoadCredential(file).ok()); });
  chmod(file.c_str(), 0644);
  const std::string shared_file = Stderr(dir / "err2", [&] { REQUIRE(curve::LoadCredential(file).ok()); });
  log::SetLevel(level);
  CHECK(private_file.find("credential file") == std::string::npos);
  CHECK_THAT(shared_file, Catch::Contains("ann.json may be read by other users (mode 0644)") &&
                              Catch::Contains("chmod 600"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("client: a server that drops the connection after taking the request gives TIMEOUT, not UNAVAILABLE",
          "[client]") {
  zmq::context_t ctx;
  auto first = std::make_unique<EchoServer>(ctx);
  EchoServer second(ctx);
  // Several endpoints: the client watches the connection and notices the drop at once.
  client::Client c(ctx, client::Options{.endpoint = first->endpoint() + "," + second.endpoint(), .timeout_ms = 10000});
  std::thread t([&] {
    first->TakeOne();
    first.reset();  // the server goes away with the request taken and unanswered
  });
  auto r = c.Call("cluster.create");
  t.join();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kTimeout);
  CHECK_THAT(r.status().message(), Catch::Contains("closed the connection before it answered 'cluster.create'") &&
                                       Catch::Contains("may or may not have been carried out"));
}

TEST_CASE("client: the events endpoint is the leader's, with an address on every interface made the api's host",
          "[client][events]") {
  // One weftd bound to every interface, asked over one of the machine's addresses.
  json alone = {{"endpoints", {{"api", "tcp://0.0.0.0:7420"}, {"events", "tcp://0.0.0.0:7422"}}}};
  Result<std::string> one = client::EventsEndpointOf(alone, "tcp://10.1.2.3:7420");
  REQUIRE(one.ok());
  CHECK(*one == "tcp://10.1.2.3:7422");
  // Several weftd: a follower answered; the leader's events, on the leader's host.
  json followed = {{"endpoints", {{"api", "tcp://0.0.0.0:7420"}, {"events", "tcp://0.0.0.0:7422"}}},
                   {"leadership",
                    {{"role", "follower"},
                     {"leader", {{"endpoints", {{"api", "tcp://10.1.2.4:7420"}, {"events", "tcp://*:7522"}}}}}}}};
  Result<std::string> leader = client::EventsEndpointOf(followed, "tcp://10.1.2.3:7420");
  REQUIRE(leader.ok());
  CHECK(*leader == "tcp://10.1.2.4:7522");
  // The leader bound to every interface too: its host is not known, the answering api's is used.
  followed["leadership"]["leader"]["endpoints"]["api"] = "tcp://0.0.0.0:7420";
  Result<std::string> unknown = client::EventsEndpointOf(followed, "tcp://10.1.2.3:7420");
  REQUIRE(unknown.ok());
  CHECK(*unknown == "tcp://10.1.2.3:7522");
  CHECK(client::EventsEndpointOf(json::object(), "tcp://10.1.2.3:7420").status().code() == Code::kNotFound);
}
