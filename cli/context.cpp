#include "context.hpp"

#include <cstdlib>
#include <filesystem>

#include "weft/common/wire.hpp"

namespace weft::cli {

Status Context::LoadCredential() {
  std::vector<std::filesystem::path> candidates;
  if (!options_.credentials.empty()) {
    candidates.push_back(options_.credentials);
  } else {
    if (const char* home = std::getenv("HOME"); home && *home)
      candidates.push_back(std::filesystem::path(home) / ".config/weft/credentials.json");
    candidates.push_back("/var/lib/weft/credentials/superadmin.json");
  }
  for (const auto& path : candidates) {
    std::error_code ec;
    if (options_.credentials.empty() && !std::filesystem::exists(path, ec)) continue;
    Result<curve::Credential> c = curve::LoadCredential(path);
    if (!c.ok()) return c.status();
    credential_ = *c;
    credential_path_ = path.string();
    if (!options_.server_given && !c->api.empty()) options_.server = c->api;
    return Status::Ok();
  }
  return Status::Ok();
}

Context::Context(GlobalOptions options, std::ostream& out, std::ostream& err)
    : options_(std::move(options)), out_(out), err_(err) {}

Context::~Context() {
  client_.reset();  // the socket must close before its context
  zmq_.reset();
}

Result<json> Context::Call(std::string_view op, json body) { return Call(op, std::move(body), {}); }

Result<json> Context::Call(std::string_view op, json body, std::vector<std::string> blobs, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = options_.timeout_ms;
  if (!client_) {
    try {
      zmq_ = std::make_unique<zmq::context_t>(1);
    } catch (const zmq::error_t& e) {
      return Status::Internal(std::string("cannot start ZeroMQ: ") + e.what());
    }
    WEFT_RETURN_IF_ERROR(LoadCredential());
    client::Options copts;
    if (credential_) {
      copts.server_key = credential_->server_key;
      copts.keys = credential_->keys;
    }
    copts.endpoint = options_.server;
    copts.timeout_ms = options_.timeout_ms;
    copts.tenant = options_.tenant;
    // The CLI trusts its server's replies: `job show` of a 1,000-node job is several MiB of JSON.
    copts.limits.max_header_bytes = 256u << 20;
    copts.limits.max_total_bytes = 512u << 20;
    client_ = std::make_unique<client::Client>(*zmq_, copts);
  }
  wire::Request request;
  request.op = std::string(op);
  request.body = std::move(body);
  request.blobs = std::move(blobs);
  Result<wire::Reply> reply = client_->CallRaw(request, timeout_ms);
  if (!reply.ok()) {
    // The request never got an answer: say where we looked and how to look elsewhere.
    const Status& st = reply.status();
    if (st.code() == Code::kUnavailable && st.message().rfind("no answer", 0) == 0) {
      return Status::Unavailable(
          "no answer from weftd at " + options_.server + " within " + std::to_string(timeout_ms) +
          " ms; is weftd running? (set --server or WEFT_SERVER)" +
          (credential_ ? "; if it is, it may not know the key of " + credential_path_
                       : std::string("; if it is, it needs a credential: pass --credentials FILE (a local weftd "
                                     "writes <data_dir>/credentials/superadmin.json)")));
    }
    return Status(st.code(), st.message() + " (set --server or WEFT_SERVER)");
  }
  if (!reply->ok) return reply->ToStatus();
  return std::move(reply->body);
}

void Context::PrintJson(const json& value) {
  const json& shown = value.is_null() ? json::object() : value;
  out_ << shown.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

Status Context::UsageError(std::string message) {
  usage_error_ = true;
  return Status::Invalid(std::move(message));
}

}  // namespace weft::cli
