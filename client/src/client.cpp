#include "weft/client/client.hpp"

#include <chrono>
#include <random>

namespace weft::client {

Options FromCredential(const curve::Credential& credential, int timeout_ms) {
  Options o;
  o.endpoint = credential.api;
  o.timeout_ms = timeout_ms;
  o.server_key = credential.server_key;
  o.keys = credential.keys;
  return o;
}

Client::Client(zmq::context_t& ctx, Options options) : ctx_(ctx), options_(std::move(options)) {
  std::random_device rd;
  id_prefix_ = std::to_string(rd()) + "-";
}

Client::~Client() = default;

void Client::Connect() {
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
  if (!options_.server_key.empty()) curve::SetClientKeys(*socket_, options_.server_key, options_.keys);
  socket_->connect(options_.endpoint);
}

std::string Client::NextId() { return id_prefix_ + std::to_string(next_id_++); }

Result<json> Client::Call(std::string_view op, json body, int timeout_ms) {
  return CallAs(wire::OnBehalf{}, op, std::move(body), timeout_ms);
}

Result<json> Client::CallAs(const wire::OnBehalf& on_behalf, std::string_view op, json body, int timeout_ms) {
  wire::Request req;
  req.op = std::string(op);
  req.on_behalf = on_behalf;
  req.body = std::move(body);
  WEFT_ASSIGN_OR_RETURN(wire::Reply reply, Exchange(req, timeout_ms));
  if (!reply.ok) return reply.ToStatus();
  return std::move(reply.body);
}

Result<wire::Reply> Client::CallRaw(const wire::Request& request, int timeout_ms) {
  wire::Request req = request;
  return Exchange(req, timeout_ms);
}

Result<wire::Reply> Client::Exchange(wire::Request& req, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = options_.timeout_ms;
  try {
    if (!socket_) Connect();
    req.id = NextId();
    if (req.tenant.empty()) req.tenant = options_.tenant;
    if (req.on_behalf.empty()) req.on_behalf = options_.on_behalf;
    wire::Frames frames = wire::EncodeRequest(req);
    if (!wire::SendMultipart(*socket_, frames)) {
      socket_.reset();
      return Status::Unavailable("could not send '" + req.op + "' to " + options_.endpoint);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      // A blocking receive with a timeout, not zmq::poll and a receive: the
      // poll asks the socket for its events before and after it sleeps, a
      // poll(2) and a getpid(2) each time, on every call of a busy host.
      socket_->set(zmq::sockopt::rcvtimeo, static_cast<int>(left.count()));
      wire::Frames in;
      if (!wire::RecvMultipart(*socket_, in, zmq::recv_flags::none)) continue;
      Result<wire::Reply> reply = wire::DecodeReply(in, options_.limits);
      if (!reply.ok()) return reply.status().WithContext("malformed reply from " + options_.endpoint);
      if (reply->id != req.id) continue;  // a late answer to an abandoned call
      return reply;
    }
    socket_.reset();
    return Status::Unavailable("no answer from weftd at " + options_.endpoint + " within " +
                               std::to_string(timeout_ms) + " ms to '" + req.op + "'; is the server running?");
  } catch (const zmq::error_t& e) {
    socket_.reset();
    return Status::Unavailable("cannot reach " + options_.endpoint + ": " + e.what());
  }
}

}  // namespace weft::client
