#include "static_files.hpp"

#include <fstream>
#include <sstream>
#include <string_view>

namespace weft::web {
namespace {

std::string_view ContentType(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".woff2") return "font/woff2";
  if (ext == ".txt" || ext == ".md") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

bool HasDotDot(const std::string& path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) return true;
    start = end + 1;
  }
  return false;
}

Response Plain(http::status status, std::string text, const Request& request, bool tls) {
  Response res{status, request.version()};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  AddSecurityHeaders(res, tls);
  res.keep_alive(request.keep_alive());
  res.body() = std::move(text);
  res.prepare_payload();
  return res;
}

}  // namespace

StaticFiles::StaticFiles(std::filesystem::path root) {
  std::error_code ec;
  root_ = std::filesystem::weakly_canonical(root, ec);
  if (ec) root_ = std::move(root);
}

Response StaticFiles::Serve(const Request& request, const Target& target, bool tls) const {
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    Response res = Plain(http::status::method_not_allowed, "use GET\n", request, tls);
    res.set(http::field::allow, "GET, HEAD");
    return res;
  }
  const std::string& path = target.path;
  if (path.empty() || path.front() != '/' || HasDotDot(path))
    return Plain(http::status::bad_request, "bad path\n", request, tls);
  std::filesystem::path file = root_ / path.substr(1);
  std::error_code ec;
  if (path.back() == '/' || std::filesystem::is_directory(file, ec)) file /= "index.html";
  // The UI routes in the page: a path without an extension that is no file is one of its screens.
  if (!std::filesystem::is_regular_file(file, ec) && !file.has_extension()) file = root_ / "index.html";
  const std::filesystem::path real = std::filesystem::weakly_canonical(file, ec);
  const std::string prefix = root_.string() + "/";
  if (ec || real.string().rfind(prefix, 0) != 0 || !std::filesystem::is_regular_file(real, ec))
    return Plain(http::status::not_found, "not found\n", request, tls);
  std::ifstream in(real, std::ios::binary);
  if (!in) return Plain(http::status::not_found, "not found\n", request, tls);
  std::ostringstream bytes;
  bytes << in.rdbuf();

  Response res{http::status::ok, request.version()};
  res.set(http::field::content_type, ContentType(real));
  // Revalidated on every load: a new release's modules are never mixed with old ones.
  res.set(http::field::cache_control, "no-cache");
  AddSecurityHeaders(res, tls);
  res.keep_alive(request.keep_alive());
  res.body() = bytes.str();
  res.prepare_payload();
  if (request.method() == http::verb::head) res.body().clear();  // Content-Length stays the file's
  return res;
}

}  // namespace weft::web
