#include "weft/web/gateway.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include <utility>  // before Asio: awaitable.hpp uses std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "api.hpp"
#include "static_files.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/digest.hpp"
#include "weft/common/log.hpp"
#include "weft/web/events.hpp"
#include "weftd_pool.hpp"

namespace weft::web {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::redirect_error;
using asio::use_awaitable;

constexpr const char* kLog = "weft-web";
constexpr std::size_t kUploadChunk = 4u << 20;  // what `weft resource upload` sends per request
constexpr std::size_t kReadBuffer = 64u << 10;
constexpr std::size_t kEventsPerBatch = 500;
const std::string kResourcesPrefix = "/api/v1/resources/";
const std::string kEventsPath = "/api/v1/events";

std::chrono::milliseconds Ms(std::int64_t ms) { return std::chrono::milliseconds(ms); }

template <typename Stream>
beast::tcp_stream& Lowest(Stream& stream) {
  return beast::get_lowest_layer(stream);
}

struct Peer {
  std::string addr;
  bool tls = false;
};

// Holds one of a limited number of places (connections, event streams) while it lives.
class Slot {
 public:
  Slot(std::atomic<int>& count, int max) : count_(count), taken_(count_.fetch_add(1) < max) {}
  ~Slot() { count_.fetch_sub(1); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  bool taken() const { return taken_; }

 private:
  std::atomic<int>& count_;
  bool taken_;
};

std::string FormatEvent(const StoredEvent& e) {
  // weftd's JSON is one line (wire::Dump escapes newlines), as a data: field needs.
  return "id: " + std::to_string(e.id) + "\nevent: " + e.type + "\ndata: " + e.data + "\n\n";
}

// Event ids start from the start time in microseconds: ids a browser kept from
// an earlier weft-web are lower than any of this one's, so they get a reset.
std::uint64_t FirstEventId() {
  return static_cast<std::uint64_t>(
             std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
         1000 * 1000;
}

// The resource type and name of "/api/v1/resources/<type>/<name>".
std::optional<std::pair<std::string, std::string>> ResourceOf(const std::string& path) {
  const std::string rest = path.substr(kResourcesPrefix.size());
  const std::size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) return std::nullopt;
  if (rest.find('/', slash + 1) != std::string::npos) return std::nullopt;
  return std::make_pair(rest.substr(0, slash), rest.substr(slash + 1));
}

}  // namespace

struct Gateway::Impl {
  explicit Impl(Config c)
      : config(std::move(c)),
        ssl_ctx(ssl::context::tls_server),
        ring(config.events.buffer, FirstEventId()),
        static_files(config.server.static_dir),
        ioc(config.server.threads),
        acceptor(ioc) {}

  // Members are destroyed in reverse order: the feed and the pool first (their
  // threads stop; calls still queued drop their coroutines while the sockets'
  // io_context lives), then the io_context with every suspended connection,
  // and only then what those connections use.
  Config config;
  ssl::context ssl_ctx;
  zmq::context_t zmq_ctx;
  EventRing ring;
  StaticFiles static_files;
  std::unique_ptr<Api> api;
  std::atomic<int> connections{0};
  std::atomic<int> streams{0};
  std::string url;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  std::unique_ptr<WeftdPool> pool;
  std::unique_ptr<EventFeed> feed;

  Status Start();
  Status LoadTls();
  Status Listen();
  void WriteAddressFile() const;
  void Run();

  awaitable<void> Accept();
  awaitable<void> Connection(tcp::socket socket);
  template <typename Stream>
  awaitable<void> Serve(Stream& stream, const Peer& peer);
  template <typename Stream>
  awaitable<bool> Dispatch(Stream& stream, beast::flat_buffer& buffer, http::request_parser<http::empty_body>& head,
                           const Peer& peer);
  template <typename Stream>
  awaitable<bool> Send(Stream& stream, Response response);
  template <typename Stream>
  awaitable<bool> Continue(Stream& stream, const http::request_header<>& header);
  template <typename Stream>
  awaitable<std::optional<Request>> ReadBody(Stream& stream, beast::flat_buffer& buffer,
                                             http::request_parser<http::empty_body>& head, const Peer& peer);
  template <typename Stream>
  awaitable<bool> Upload(Stream& stream, beast::flat_buffer& buffer, http::request_parser<http::empty_body>& head,
                         const Target& target, const Caller& caller);
  template <typename Stream>
  awaitable<void> Events(Stream& stream, const http::request_header<>& header, const Target& target,
                         const Caller& caller);
  awaitable<bool> MayShow(const Viewer& viewer, const Caller& caller, const StoredEvent& event,
                          std::set<std::string>& owned, std::set<std::string>& others);

  Response Refuse(const Status& status, unsigned version, bool tls) const {
    Response res = ErrorResponse(status, json::object(), version, false, tls);
    return res;
  }
};

Status Gateway::Impl::LoadTls() {
  if (!config.tls.enabled()) return Status::Ok();
  ssl_ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  beast::error_code ec;
  ssl_ctx.use_certificate_chain_file(config.tls.cert.string(), ec);
  if (ec) return Status::Invalid("cannot load the TLS certificate tls.cert = " + config.tls.cert.string() + ": " +
                                 ec.message() + " (a PEM certificate chain is expected)");
  ssl_ctx.use_private_key_file(config.tls.key.string(), ssl::context::pem, ec);
  if (ec) return Status::Invalid("cannot load the TLS key tls.key = " + config.tls.key.string() + ": " +
                                 ec.message() + " (a PEM private key matching tls.cert is expected)");
  return Status::Ok();
}

Status Gateway::Impl::Listen() {
  Result<HostPort> hp = ParseListen(config.server.listen);
  if (!hp.ok()) return hp.status();
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(hp->host, ec);
  if (ec) return Status::Invalid("server.listen: " + hp->host + " is not an IP address");
  const tcp::endpoint endpoint(address, hp->port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Unavailable("cannot listen on " + config.server.listen + ": " + ec.message());
  const tcp::endpoint bound = acceptor.local_endpoint();
  const std::string host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
  url = std::string(config.tls.enabled() ? "https" : "http") + "://" + host + ":" + std::to_string(bound.port());
  return Status::Ok();
}

void Gateway::Impl::WriteAddressFile() const {
  if (config.server.address_file.empty()) return;
  const json doc = {{"url", url}, {"pid", static_cast<std::int64_t>(getpid())}};
  const std::filesystem::path tmp = config.server.address_file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << doc.dump() << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, config.server.address_file, ec);
  if (ec) {
    WEFT_LOG(kWarn, kLog) << "cannot write " << config.server.address_file.string() << ": " << ec.message();
  }
}

Status Gateway::Impl::Start() {
  WEFT_RETURN_IF_ERROR(LoadTls());
  client::Options options;
  options.endpoint = config.weftd.api.empty() ? "tcp://127.0.0.1:7420" : config.weftd.api;
  options.timeout_ms = config.weftd.timeout_ms;
  if (!config.weftd.credentials.empty()) {
    Result<curve::Credential> cred = curve::LoadCredential(config.weftd.credentials);
    if (!cred.ok()) return cred.status().WithContext("weftd.credentials");
    if (!cred->api.empty() && config.weftd.api.empty()) options.endpoint = cred->api;
    options.server_key = cred->server_key;
    options.keys = cred->keys;
  }
  WEFT_RETURN_IF_ERROR(Listen());
  // Open pages learn at once when weftd cannot be reached, and when it is back.
  pool = std::make_unique<WeftdPool>(zmq_ctx, options, config.weftd.clients,
                                     std::chrono::milliseconds(config.weftd.heartbeat_ms),
                                     [this](bool reachable, const std::string& message) {
                                       ring.AppendWeftd(reachable, message);
                                     });
  feed = std::make_unique<EventFeed>(zmq_ctx, EventFeed::Options{.api = options, .endpoint = config.weftd.events},
                                     ring);
  api = std::make_unique<Api>(config, *pool);
  WEFT_LOG(kInfo, kLog) << "serving " << url << " for weftd at " << options.endpoint
                        << (options.server_key.empty() ? " (CurveZMQ off)" : "") << ", UI from "
                        << config.server.static_dir.string();
  WriteAddressFile();
  return Status::Ok();
}

void Gateway::Impl::Run() {
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([this](const beast::error_code& ec, int) {
    if (ec) return;
    WEFT_LOG(kInfo, kLog) << "stopping";
    beast::error_code ignored;
    acceptor.close(ignored);
    ioc.stop();
  });
  asio::co_spawn(ioc, Accept(), asio::detached);
  std::vector<std::thread> threads;
  for (int i = 1; i < config.server.threads; ++i) threads.emplace_back([this] { ioc.run(); });
  ioc.run();
  for (std::thread& t : threads) t.join();
}

awaitable<void> Gateway::Impl::Accept() {
  while (acceptor.is_open()) {
    beast::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(asio::make_strand(ioc), redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors, say: wait a moment instead of spinning on the error.
      WEFT_LOG(kWarn, kLog) << "cannot accept a connection: " << ec.message();
      asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
      co_await pause.async_wait(redirect_error(use_awaitable, ec));
      continue;
    }
    auto executor = socket.get_executor();
    asio::co_spawn(executor, Connection(std::move(socket)), asio::detached);
  }
}

awaitable<void> Gateway::Impl::Connection(tcp::socket socket) {
  Slot slot(connections, config.limits.max_connections);
  if (!slot.taken()) co_return;  // closing it is the answer: too many connections
  beast::error_code ec;
  Peer peer;
  peer.tls = config.tls.enabled();
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) co_return;
  peer.addr = remote.address().to_string();
  socket.set_option(tcp::no_delay(true), ec);
  try {
    if (peer.tls) {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), ssl_ctx);
      Lowest(stream).expires_after(Ms(config.limits.header_timeout_ms));
      co_await stream.async_handshake(ssl::stream_base::server, redirect_error(use_awaitable, ec));
      if (ec) {
        WEFT_LOG(kDebug, kLog) << "TLS handshake with " << peer.addr << " failed: " << ec.message();
        co_return;
      }
      co_await Serve(stream, peer);
      Lowest(stream).expires_after(std::chrono::seconds(1));
      co_await stream.async_shutdown(redirect_error(use_awaitable, ec));
    } else {
      beast::tcp_stream stream(std::move(socket));
      co_await Serve(stream, peer);
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  } catch (const std::exception& e) {
    WEFT_LOG(kWarn, kLog) << "connection from " << peer.addr << " ended: " << e.what();
  }
}

template <typename Stream>
awaitable<void> Gateway::Impl::Serve(Stream& stream, const Peer& peer) {
  beast::flat_buffer buffer;
  bool keep_alive = true;
  while (keep_alive) {
    http::request_parser<http::empty_body> head;
    head.header_limit(static_cast<std::uint32_t>(config.limits.max_header_bytes));
    // Each route sets its own limit before reading a body. (Not boost::none: Beast
    // 1.74 compares a Content-Length with it as if none were smaller than any size.)
    head.body_limit(std::numeric_limits<std::uint64_t>::max());
    // One deadline for the whole request line and headers: a client that
    // trickles them byte by byte is cut off like one that sends nothing.
    Lowest(stream).expires_after(Ms(config.limits.header_timeout_ms));
    beast::error_code ec;
    co_await http::async_read_header(stream, buffer, head, redirect_error(use_awaitable, ec));
    if (ec == http::error::header_limit) {
      Response res = Refuse(Status::TooLarge("the request's headers are larger than weft-web accepts "
                                             "(limits.max_header_bytes)"),
                            11, peer.tls);
      res.result(http::status::request_header_fields_too_large);
      co_await Send(stream, std::move(res));
      co_return;
    }
    if (ec == beast::error::timeout) {
      WEFT_LOG(kDebug, kLog) << "closed a connection from " << peer.addr << ": no complete request within "
                             << config.limits.header_timeout_ms << " ms";
      co_return;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec.category() == asio::error::get_ssl_category() ||
        ec == ssl::error::stream_truncated)
      co_return;
    if (ec) {
      co_await Send(stream, Refuse(Status::Invalid("not a valid HTTP request: " + ec.message()), 11, peer.tls));
      co_return;
    }
    keep_alive = co_await Dispatch(stream, buffer, head, peer);
  }
}

template <typename Stream>
awaitable<bool> Gateway::Impl::Send(Stream& stream, Response response) {
  Lowest(stream).expires_after(Ms(config.limits.write_timeout_ms));
  beast::error_code ec;
  co_await http::async_write(stream, response, redirect_error(use_awaitable, ec));
  co_return !ec && response.keep_alive();
}

template <typename Stream>
awaitable<bool> Gateway::Impl::Continue(Stream& stream, const http::request_header<>& header) {
  if (!beast::iequals(header[http::field::expect], "100-continue")) co_return true;
  http::response<http::empty_body> go{http::status::continue_, header.version()};
  Lowest(stream).expires_after(Ms(config.limits.write_timeout_ms));
  beast::error_code ec;
  co_await http::async_write(stream, go, redirect_error(use_awaitable, ec));
  co_return !ec;
}

template <typename Stream>
awaitable<bool> Gateway::Impl::Dispatch(Stream& stream, beast::flat_buffer& buffer,
                                        http::request_parser<http::empty_body>& head, const Peer& peer) {
  const http::request_header<>& header = head.get();
  const unsigned version = header.version();
  const Target target = ParseTarget(header.target());
  if (!target.ok) {
    co_await Send(stream, Refuse(Status::Invalid("the request's URL is not valid (bad %-encoding)"), version, peer.tls));
    co_return false;
  }
  const Caller caller = CallerOf(header, peer.addr, peer.tls);
  if (target.path == kEventsPath) {
    if (header.method() != http::verb::get || head.content_length().value_or(0) > 0 || head.chunked()) {
      Response res = Refuse(Status::Invalid("use GET without a body on " + kEventsPath), version, peer.tls);
      res.result(http::status::method_not_allowed);
      co_await Send(stream, std::move(res));
      co_return false;
    }
    co_await Events(stream, header, target, caller);
    co_return false;
  }
  if (target.path.rfind(kResourcesPrefix, 0) == 0) co_return co_await Upload(stream, buffer, head, target, caller);

  std::optional<Request> request = co_await ReadBody(stream, buffer, head, peer);
  if (!request) co_return false;
  const bool api_path = target.path.rfind(kApiPrefix, 0) == 0;
  // (Not a conditional expression: GCC 12 miscompiles co_await inside one.)
  Response res;
  if (api_path) {
    res = co_await api->Handle(*request, target, caller);
  } else {
    res = static_files.Serve(*request, target, peer.tls);
  }
  co_return co_await Send(stream, std::move(res));
}

template <typename Stream>
awaitable<std::optional<Request>> Gateway::Impl::ReadBody(Stream& stream, beast::flat_buffer& buffer,
                                                          http::request_parser<http::empty_body>& head,
                                                          const Peer& peer) {
  const std::size_t limit = config.limits.max_body_bytes;
  const unsigned version = head.get().version();
  const Status too_large = Status::TooLarge("the request body is larger than weft-web accepts (" +
                                            std::to_string(limit) + " bytes, limits.max_body_bytes)");
  if (head.content_length().value_or(0) > limit) {
    // Answered at once, without reading the body: the connection closes after it.
    co_await Send(stream, Refuse(too_large, version, peer.tls));
    co_return std::nullopt;
  }
  http::request_parser<http::string_body> parser(std::move(head));
  parser.body_limit(limit);
  if (!parser.is_done()) {
    if (!co_await Continue(stream, parser.get())) co_return std::nullopt;
    Lowest(stream).expires_after(Ms(config.limits.body_timeout_ms));
    beast::error_code ec;
    co_await http::async_read(stream, buffer, parser, redirect_error(use_awaitable, ec));
    if (ec == http::error::body_limit) {
      co_await Send(stream, Refuse(too_large, version, peer.tls));
      co_return std::nullopt;
    }
    if (ec) {
      WEFT_LOG(kDebug, kLog) << "closed a connection from " << peer.addr << " while reading a body: " << ec.message();
      co_return std::nullopt;
    }
  }
  co_return parser.release();
}

template <typename Stream>
awaitable<bool> Gateway::Impl::Upload(Stream& stream, beast::flat_buffer& buffer,
                                      http::request_parser<http::empty_body>& head, const Target& target,
                                      const Caller& caller) {
  const unsigned version = head.get().version();
  const bool tls = caller.tls;
  if (head.get().method() != http::verb::put) {
    Response res = Refuse(Status::Invalid("upload a resource with PUT " + target.path), version, tls);
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "PUT");
    co_await Send(stream, std::move(res));
    co_return false;
  }
  const auto resource = ResourceOf(target.path);
  if (!resource) {
    co_await Send(stream, Refuse(Status::NotFound("upload to /api/v1/resources/<type>/<name>"), version, tls));
    co_return false;
  }
  if (std::optional<Response> refused = api->Refusal(http::verb::put, caller, version)) {
    refused->keep_alive(false);
    co_await Send(stream, std::move(*refused));
    co_return false;
  }
  const std::size_t limit = config.limits.max_upload_bytes;
  const Status too_large = Status::TooLarge("the file is larger than weft-web accepts (" + std::to_string(limit) +
                                            " bytes, limits.max_upload_bytes)");
  if (head.content_length().value_or(0) > limit) {
    co_await Send(stream, Refuse(too_large, version, tls));
    co_return false;
  }
  http::request_parser<http::buffer_body> parser(std::move(head));
  parser.body_limit(limit);
  if (!co_await Continue(stream, parser.get())) co_return false;

  // The body goes to weftd as it arrives, in chunks of resource.upload.
  std::vector<char> piece(kReadBuffer);
  std::string chunk;
  digest::Sha256 sha;
  std::uint64_t offset = 0;
  std::string upload_id;
  auto send_chunk = [&](bool final) -> awaitable<CallResult> {
    json body = {{"type", resource->first}, {"name", resource->second}, {"offset", offset}, {"final", final}};
    if (!upload_id.empty()) body["upload_id"] = upload_id;
    if (final) {
      Result<std::string> digest = sha.Finish();
      body["digest"] = digest.ok() ? *digest : "";
      body["size"] = offset + chunk.size();
    }
    std::vector<std::string> blobs;
    blobs.push_back(std::move(chunk));
    chunk.clear();
    CallResult r = co_await api->Call("resource.upload", std::move(body), caller, std::move(blobs));
    if (r.ToStatus().ok()) {
      upload_id = r.reply.body.value("upload_id", upload_id);
      offset = r.reply.body.value("received", offset);
    }
    co_return r;
  };
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    Lowest(stream).expires_after(Ms(config.limits.body_timeout_ms));
    beast::error_code ec;
    co_await http::async_read(stream, buffer, parser, redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec == http::error::body_limit) {
      co_await Send(stream, Refuse(too_large, version, tls));
      co_return false;
    }
    if (ec) co_return false;
    const std::size_t n = piece.size() - parser.get().body().size;
    chunk.append(piece.data(), n);
    sha.Update(std::string_view(piece.data(), n));
    if (chunk.size() >= kUploadChunk && !parser.is_done()) {
      CallResult r = co_await send_chunk(false);
      if (!r.ToStatus().ok()) {
        Response res = api->ErrorFor(r, version, false, tls);
        co_await Send(stream, std::move(res));
        co_return false;
      }
    }
  }
  CallResult r = co_await send_chunk(true);
  const bool keep = parser.get().keep_alive();
  if (!r.ToStatus().ok()) co_return co_await Send(stream, api->ErrorFor(r, version, keep, tls));
  co_return co_await Send(stream, JsonResponse(http::status::ok, r.reply.body, version, keep, tls));
}

awaitable<bool> Gateway::Impl::MayShow(const Viewer& viewer, const Caller& caller, const StoredEvent& event,
                                       std::set<std::string>& owned, std::set<std::string>& others) {
  switch (Visible(viewer, event)) {
    case Visibility::kShow: co_return true;
    case Visibility::kHide: co_return false;
    case Visibility::kIfOwned: break;
  }
  if (owned.count(event.cluster_id)) co_return true;
  if (others.count(event.cluster_id)) co_return false;
  // A cluster this stream has not seen yet (a new one, most likely): ask
  // weftd, as the user, which clusters are theirs.
  json body = {{"all", true}};  // (GCC 12 refuses a braced list inside co_await)
  CallResult r = co_await api->Call("cluster.list", std::move(body), caller);
  if (!r.transport.ok()) co_return false;  // not known now: ask again at its next event
  if (r.ToStatus().ok()) {
    for (const json& c : r.reply.body.value("clusters", json::array())) {
      if (c.value("owner", "") == viewer.user) owned.insert(c.value("id", ""));
    }
  }
  if (owned.count(event.cluster_id)) co_return true;
  others.insert(event.cluster_id);
  co_return false;
}

template <typename Stream>
awaitable<void> Gateway::Impl::Events(Stream& stream, const http::request_header<>& header, const Target& target,
                                      const Caller& caller) {
  const unsigned version = header.version();
  const bool tls = caller.tls;
  const std::string last_event_id(header["Last-Event-ID"]);
  Api::Identity who = co_await api->WhoIs(caller, version);
  if (who.refusal) {
    who.refusal->keep_alive(false);
    co_await Send(stream, std::move(*who.refusal));
    co_return;
  }
  const Viewer viewer = *who.viewer;
  std::string cluster_filter;
  if (auto it = target.query.find("cluster"); it != target.query.end()) {
    // A name or an id; events name clusters by id.
    json body = {{"cluster", it->second}};
    CallResult r = co_await api->Call("cluster.get", std::move(body), caller);
    if (!r.ToStatus().ok()) {
      co_await Send(stream, api->ErrorFor(r, version, false, tls));
      co_return;
    }
    cluster_filter = r.reply.body["cluster"].value("id", it->second);
  }
  Slot slot(streams, config.events.max_streams);
  if (!slot.taken()) {
    co_await Send(stream, Refuse(Status::Unavailable("weft-web serves as many event streams as it may "
                                                     "(events.max_streams); try again later"),
                                 version, tls));
    co_return;
  }

  // The stream starts from the last event the ring held before the browser
  // learns it is open: a read the browser makes once it is open then sees
  // everything that came before, and every later event is sent.
  std::uint64_t cursor = ring.LastId();

  http::response<http::empty_body> res{http::status::ok, version};
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-store");
  AddSecurityHeaders(res, tls);
  res.keep_alive(false);  // the stream ends when the connection does
  http::response_serializer<http::empty_body> serializer(res);
  Lowest(stream).expires_after(Ms(config.limits.write_timeout_ms));
  beast::error_code ec;
  co_await http::async_write_header(stream, serializer, redirect_error(use_awaitable, ec));
  if (ec) co_return;

  // Woken by every new event; the wake-up is posted to this connection's strand.
  const auto executor = co_await asio::this_coro::executor;
  auto wake = std::make_shared<asio::steady_timer>(executor);
  const int listener = ring.Listen([weak = std::weak_ptr<asio::steady_timer>(wake), executor] {
    asio::post(executor, [weak] {
      if (auto timer = weak.lock()) timer->cancel();
    });
  });
  struct Unlisten {
    EventRing& ring;
    int id;
    ~Unlisten() { ring.Unlisten(id); }
  } unlisten{ring, listener};

  if (!last_event_id.empty()) {
    try {
      cursor = std::stoull(last_event_id);
    } catch (const std::exception&) {
      cursor = 0;  // not one of ours: a reset follows
    }
  }
  std::set<std::string> owned, others;
  using Clock = std::chrono::steady_clock;
  const auto revalidate_every = Ms(config.events.session_check_ms);
  auto revalidate_at = Clock::now() + revalidate_every;
  auto written_at = Clock::now();
  std::string out = "retry: 2000\n\n";
  while (true) {
    EventRing::Batch batch = ring.After(cursor, kEventsPerBatch);
    if (batch.reset) out += "id: " + std::to_string(batch.last) + "\nevent: reset\ndata: {}\n\n";
    for (const EventPtr& event : batch.events) {
      if (event->gap) {
        out += "id: " + std::to_string(event->id) + "\nevent: reset\ndata: {}\n\n";
        continue;
      }
      if (!cluster_filter.empty() && event->cluster_id != cluster_filter && !event->everyone) continue;
      if (co_await MayShow(viewer, caller, *event, owned, others)) out += FormatEvent(*event);
    }
    cursor = batch.last;
    if (Clock::now() >= revalidate_at) {
      // A session that ended (logout, expiry, a deleted user) ends its streams
      // too. A weftd that cannot be asked (down, restarting) has not said so:
      // the stream stays open, and its browser gets weftd's events (after a
      // reset) once it is back, without a reconnection it may never make.
      Api::Identity still = co_await api->WhoIs(caller, version);
      if (!still.viewer && !still.unreachable) co_return;
      revalidate_at = Clock::now() + revalidate_every;
    }
    if (out.empty()) {
      const auto quiet_until = written_at + Ms(config.events.keepalive_ms);
      if (!batch.events.empty() && Clock::now() < quiet_until) continue;  // all for others; read on
      if (batch.events.empty()) {
        wake->expires_at(quiet_until);
        co_await wake->async_wait(redirect_error(use_awaitable, ec));
        if (ec == asio::error::operation_aborted) continue;  // new events
      }
      out = ": keepalive\n\n";
    }
    Lowest(stream).expires_after(Ms(config.limits.write_timeout_ms));
    co_await asio::async_write(stream, asio::buffer(out), redirect_error(use_awaitable, ec));
    if (ec) co_return;
    out.clear();
    written_at = Clock::now();
  }
}

Gateway::Gateway(Config config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Gateway::~Gateway() = default;
Status Gateway::Start() { return impl_->Start(); }
void Gateway::Run() { impl_->Run(); }
std::string Gateway::url() const { return impl_->url; }

}  // namespace weft::web
