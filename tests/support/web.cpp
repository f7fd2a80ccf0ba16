#include "support/web.hpp"

#include <poll.h>
#include <signal.h>

#include <limits>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace weft::testing {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void MakeCertificate(const fs::path& dir) {
  RunResult r = Run("/usr/bin/openssl",
                    {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                     (dir / "key.pem").string(), "-out", (dir / "cert.pem").string(), "-days", "2", "-subj",
                     "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
  if (r.exit_code != 0) throw std::runtime_error("openssl could not make a test certificate: " + r.err);
}

std::string Quote(const std::string& s) { return json(s).dump(); }

}  // namespace

WebGateway::WebGateway(const Weftd& weftd, WebOptions options)
    : options_(std::move(options)), temp_(options_.name), dir_(temp_.path()) {
  fs::path static_dir = options_.static_dir;
  if (static_dir.empty()) {
    static_dir = dir_ / "ui";
    fs::create_directories(static_dir);
    WriteFile(static_dir / "index.html",
              "<!doctype html><title>Weft</title><script type=\"module\" src=\"/app.js\"></script>\n");
    WriteFile(static_dir / "app.js", "export const app = 'weft';\n");
  }
  std::string toml = "[server]\nlisten = \"127.0.0.1:0\"\nstatic_dir = " + Quote(static_dir.string()) +
                     "\naddress_file = " + Quote((dir_ / "address.json").string()) +
                     "\nrequire_login = " + (options_.require_login ? "true" : "false") + "\n" +
                     options_.server_toml;
  if (options_.tls) {
    MakeCertificate(dir_);
    toml += "[tls]\ncert = " + Quote(cert().string()) + "\nkey = " + Quote((dir_ / "key.pem").string()) + "\n";
  }
  toml += "[weftd]\napi = " + Quote(options_.api.empty() ? weftd.api() : options_.api) + "\n";
  if (!options_.events.empty()) toml += "events = " + Quote(options_.events) + "\n";
  if (!options_.credentials.empty()) toml += "credentials = " + Quote(options_.credentials.string()) + "\n";
  toml += options_.weftd_toml;
  toml += "[limits]\n" + options_.limits_toml + "[events]\n" + options_.events_toml;
  WriteFile(dir_ / "weft-web.toml", toml);

  ProcessOptions o;
  o.stdout_path = dir_ / "weft-web.log";
  o.stderr_path = o.stdout_path;
  o.die_with_parent = options_.die_with_parent;
  proc_ = Process(BuildPath("bin/weft-web"), {"--config", (dir_ / "weft-web.toml").string()}, o);
  bool exited = false;
  const bool up = WaitFor(
      [&] {
        if (!proc_.running()) return exited = true;
        json j = json::parse(ReadFile(dir_ / "address.json"), nullptr, false);
        if (!j.is_object() || j.value("pid", 0) != proc_.pid()) return false;
        url_ = j.value("url", "");
        return true;
      },
      std::chrono::seconds(30));
  if (exited || !up) throw std::runtime_error("weft-web did not start; its log:\n" + Tail(Log(), 4000));
}

WebGateway::~WebGateway() = default;  // the Process dies of SIGKILL

std::string WebGateway::Log() const { return ReadFile(dir_ / "weft-web.log"); }

std::string HttpReply::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

json HttpReply::Json() const {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error("not JSON (status " + std::to_string(status) + "): " + body);
  return j;
}

struct HttpConnection::Impl {
  asio::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> stream;
  bool tls = false;
  std::string host;
  beast::flat_buffer buffer;
  std::string pending;  // bytes read past what was parsed (events)

  template <typename F>
  auto With(F f) {
    return tls ? f(*stream) : f(stream->next_layer());
  }

  // Reads what arrives within `timeout` into `pending`; false on timeout, end or error.
  bool ReadMore(std::chrono::milliseconds timeout) {
    if (!tls || SSL_pending(stream->native_handle()) == 0) {
      pollfd p{stream->next_layer().native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    }
    char data[16384];
    beast::error_code ec;
    const std::size_t n = With([&](auto& s) { return s.read_some(asio::buffer(data), ec); });
    if (ec || n == 0) return false;
    pending.append(data, n);
    return true;
  }
};

HttpConnection::HttpConnection(const std::string& url, const fs::path& ca) : impl_(std::make_unique<Impl>()) {
  impl_->tls = url.rfind("https://", 0) == 0;
  const std::string rest = url.substr(url.find("://") + 3);
  const std::size_t colon = rest.rfind(':');
  impl_->host = rest;
  if (impl_->tls) {
    if (!ca.empty()) impl_->ctx.load_verify_file(ca.string());
    impl_->ctx.set_verify_mode(ssl::verify_peer);
  }
  impl_->stream = std::make_unique<ssl::stream<tcp::socket>>(impl_->ioc, impl_->ctx);
  tcp::resolver resolver(impl_->ioc);
  asio::connect(impl_->stream->next_layer(), resolver.resolve(rest.substr(0, colon), rest.substr(colon + 1)));
  if (impl_->tls) impl_->stream->handshake(ssl::stream_base::client);
}

HttpConnection::~HttpConnection() = default;

HttpReply HttpConnection::Send(const std::string& method, const std::string& target, const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, impl_->host);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  if (!body.empty() || method == "POST" || method == "PUT") req.prepare_payload();
  impl_->With([&](auto& s) { http::write(s, req); });
  std::optional<http::response_parser<http::string_body>> parser;
  do {  // past any "100 Continue"
    parser.emplace();
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // (boost::none refuses any Content-Length)
    impl_->With([&](auto& s) { http::read(s, impl_->buffer, *parser); });
  } while (parser->get().result_int() / 100 == 1);
  HttpReply out;
  const auto& res = parser->get();
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) out.headers.emplace(Lower(std::string(field.name_string())), std::string(field.value()));
  out.body = res.body();
  return out;
}

void HttpConnection::Write(std::string_view bytes) {
  impl_->With([&](auto& s) { asio::write(s, asio::buffer(bytes.data(), bytes.size())); });
}

bool HttpConnection::WaitClosed(std::chrono::milliseconds timeout, std::string* received) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{impl_->stream->next_layer().native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 1))) <= 0) continue;
    if (!impl_->ReadMore(std::chrono::milliseconds(0))) {
      if (received) *received = impl_->pending;
      return true;  // end of stream (or reset)
    }
  }
  if (received) *received = impl_->pending;
  return false;
}

HttpReply HttpConnection::OpenEvents(const std::string& target, const std::map<std::string, std::string>& headers) {
  std::string text = "GET " + target + " HTTP/1.1\r\nHost: " + impl_->host + "\r\nAccept: text/event-stream\r\n";
  for (const auto& [k, v] : headers) text += k + ": " + v + "\r\n";
  Write(text + "\r\n");
  std::size_t end;
  while ((end = impl_->pending.find("\r\n\r\n")) == std::string::npos) {
    if (!impl_->ReadMore(std::chrono::seconds(30))) throw std::runtime_error("no reply headers to " + target);
  }
  const std::string head = impl_->pending.substr(0, end);
  impl_->pending.erase(0, end + 4);
  HttpReply out;
  out.status = std::stoi(head.substr(9, 3));
  std::size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    const std::size_t next = head.find("\r\n", pos + 2);
    const std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos)
      out.headers.emplace(Lower(line.substr(0, colon)), line.substr(line.find_first_not_of(' ', colon + 1)));
    pos = next;
  }
  if (out.status != 200) {
    const std::size_t length = std::stoul(out.Header("content-length").empty() ? "0" : out.Header("content-length"));
    while (impl_->pending.size() < length && impl_->ReadMore(std::chrono::seconds(30))) {
    }
    out.body = impl_->pending;
  }
  return out;
}

std::optional<SseEvent> HttpConnection::NextEvent(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::size_t end;
    while ((end = impl_->pending.find("\n\n")) != std::string::npos) {
      const std::string block = impl_->pending.substr(0, end + 1);
      impl_->pending.erase(0, end + 2);
      SseEvent e;
      bool any = false;
      std::size_t start = 0;
      while (start < block.size()) {
        const std::size_t nl = block.find('\n', start);
        const std::string line = block.substr(start, nl - start);
        start = nl + 1;
        auto value = [&](std::size_t n) { return line.size() > n && line[n] == ' ' ? line.substr(n + 1) : line.substr(n); };
        if (line.rfind("id:", 0) == 0) e.id = value(3), any = true;
        else if (line.rfind("event:", 0) == 0) e.type = value(6), any = true;
        else if (line.rfind("data:", 0) == 0) e.data += value(5), any = true;
      }
      if (any && !e.type.empty()) return e;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !impl_->ReadMore(left)) return std::nullopt;
  }
}

HttpReply HttpSend(const std::string& url, const std::string& method, const std::string& target,
                   const std::string& body, const std::map<std::string, std::string>& headers, const fs::path& ca) {
  HttpConnection c(url, ca);
  return c.Send(method, target, body, headers);
}

}  // namespace weft::testing
