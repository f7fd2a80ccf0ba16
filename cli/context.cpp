#include "context.hpp"

#include "weft/common/wire.hpp"

namespace weft::cli {

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
    client::Options copts;
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
      return Status::Unavailable("no answer from weftd at " + options_.server + " within " +
                                 std::to_string(timeout_ms) +
                                 " ms; is weftd running? (set --server or WEFT_SERVER)");
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
