#include "weft/server/daemon/api_front.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "weft/server/auth/auth_ops.hpp"
#include "weft/server/daemon/transport.hpp"
#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {
namespace {

using api::Endpoint;
using api::Role;

constexpr const char* kLog = "weftd";
// Requests taken off the ROUTER before the front looks at the reactor's replies again.
constexpr int kTakeAtOnce = 64;

}  // namespace

ApiFront::ApiFront(const Config& config, const Clock& clock, RateLimits& limits)
    : config_(config), clock_(clock), limits_(limits), tally_(log::Level::kWarn, kLog, 10'000) {}

ApiFront::~ApiFront() {
  Stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status ApiFront::Bind(zmq::context_t& ctx) {
  try {
    pipe_ = zmq::socket_t(ctx, zmq::socket_type::pair);
    // Requests wait in the front (and then in ZeroMQ's queues) while the reactor
    // falls behind, as they waited in the ROUTER before the front existed.
    pipe_.set(zmq::sockopt::sndhwm, 1000);
    pipe_.set(zmq::sockopt::linger, 0);
    pipe_.bind(kPipe);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot bind the api front's pipe: ") + e.what());
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Status::Internal(std::string("cannot make an eventfd: ") + std::strerror(errno));
  return Status::Ok();
}

Status ApiFront::Start(zmq::socket_t router, std::unique_ptr<store::Store> store, std::unique_ptr<api::Router> reads) {
  router_ = std::move(router);
  store_ = std::move(store);
  reads_ = std::move(reads);
  // The tenant check of the front's ops: the tenants of the view the request is checked against.
  reads_->SetTenantExists([this](const std::string& tenant) { return serving_view_->tenants.count(tenant) != 0; });
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ApiFront::Stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) {
    WEFT_LOG(kWarn, kLog) << "cannot tell the api front to stop: " << std::strerror(errno);
  }
  thread_.join();
}

void ApiFront::SetServing(bool serving) {
  if (serving) {
    store::Store::ClusterWrites all;
    all.all = true;
    std::lock_guard<std::mutex> lock(mu_);
    cluster_writes_.Merge(std::move(all));
  }
  serving_.store(serving, std::memory_order_release);
}

void ApiFront::ClustersWritten(store::Store::ClusterWrites writes) {
  if (writes.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  cluster_writes_.Merge(std::move(writes));
}

void ApiFront::SetAuth(std::shared_ptr<const auth::AuthView> view) {
  std::lock_guard<std::mutex> lock(mu_);
  auth_ = std::move(view);
}

std::shared_ptr<const auth::AuthView> ApiFront::View() const {
  std::lock_guard<std::mutex> lock(mu_);
  return auth_;
}

void ApiFront::SetLivePlugins(std::map<std::string, std::set<std::string>> by_tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  live_plugins_ = std::move(by_tenant);
}

std::set<std::string> ApiFront::LivePlugins(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_plugins_.find(tenant);
  return it == live_plugins_.end() ? std::set<std::string>() : it->second;
}

void ApiFront::Run() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                             {pipe_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, stop_fd_, ZMQ_POLLIN, 0}};
  while (true) {
    tally_.Flush(clock_.NowMs());
    try {
      // Woken at least once a second, so that a tally's summary is written when its interval is over.
      zmq::poll(items, 3, std::chrono::milliseconds(1000));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      WEFT_LOG(kError, kLog) << "the api front stopped: " << e.what();
      break;
    }
    if (items[2].revents) break;
    while (PassBack()) {
    }
    for (int i = 0; i < kTakeAtOnce && TakeRequest(); ++i) {
    }
  }
  // What the reactor sent before it stopped the front (the replies of its shutdown).
  while (PassBack()) {
  }
}

bool ApiFront::PassBack() {
  wire::Frames frames;
  try {
    if (!wire::RecvMultipart(pipe_, frames, zmq::recv_flags::dontwait)) return false;
  } catch (const zmq::error_t&) {
    return false;
  }
  if (frames.empty()) return true;
  const std::string rid = frames.front().to_string();
  auto it = with_reactor_.find(rid);
  if (it != with_reactor_.end() && --it->second <= 0) with_reactor_.erase(it);
  // A client that went away gets nothing (ROUTER_MANDATORY refuses); its replies carry no task.
  Delivered(SendRouted(router_, frames), "");
  return true;
}

bool ApiFront::TakeRequest() {
  wire::Frames frames;
  std::size_t bytes = 0;
  bool over = false;
  // The same bounds as the reactor kept: routing id, REQ's delimiter, then the message's own frames.
  const FrameBound bound{config_.limits.max_frames + 2, config_.limits.max_total_bytes + 1024};
  try {
    if (!ReceiveWithin(router_, [&](zmq::message_t&) { return bound; }, frames, &bytes, &over)) return false;
  } catch (const zmq::error_t& e) {
    WEFT_LOG(kWarn, kLog) << "receive failed on api: " << e.what();
    return false;
  }
  std::string key;
  if (config_.security.curve && frames.size() > 1) {
    // The ZAP handler's User-Id (the client's public key) rides on every frame of the message.
    try {
      key = frames.back().gets("User-Id");
    } catch (const zmq::error_t&) {
    }
  }
  if (!over) {
    // A gateway's connection carries many browsers' requests, which the gateway
    // limits per browser itself: the per-connection limit would throttle them all.
    const std::shared_ptr<const auth::AuthView> view = View();
    const auth::KeyEntry* entry = view && !key.empty() ? view->Find(key, clock_.NowMs()) : nullptr;
    const bool gateway = entry && entry->role == "gateway";
    if (!gateway && !limits_.Admit(frames.front().to_string())) {
      Pending p;
      wire::SplitEnvelope(frames, p.envelope);
      std::string id;
      (void)wire::DecodeRequest(frames, config_.limits, &id);
      p.id = id;
      // UNAVAILABLE: nothing was done and the same request succeeds later. This
      // reply never passes through a batch, so it rolls nothing back.
      const std::int64_t retry_after_ms = limits_.RetryAfterMs(frames.front().to_string());
      p.response = api::Response::Refusal(
          Status::Unavailable("rate limit: this connection made more than " +
                              std::to_string(config_.security.api_rate_per_s) +
                              " requests per second (security.api_rate_per_s); nothing was done: retry after " +
                              std::to_string(retry_after_ms) + " ms"),
          api::json{{"retry_after_ms", retry_after_ms}});
      if (!p.envelope.empty()) Delivered(SendReply(router_, p), p.id);
      return true;
    }
    if (serving_.load(std::memory_order_acquire) && !with_reactor_.count(frames.front().to_string()) &&
        Serve(frames, key))
      return true;
  }
  // Where the request came from, for the audit log (TCP only; nothing on other transports).
  std::string address;
  if (frames.size() > 1) {
    try {
      address = frames.back().gets("Peer-Address");
    } catch (const zmq::error_t&) {
    }
  }
  PassOn(std::move(frames), over, key, std::move(address));
  return true;
}

bool ApiFront::Serve(wire::Frames& frames, const std::string& key) {
  serving_view_ = View();
  if (!serving_view_) return false;
  Pending p;
  p.endpoint = Endpoint::kApi;
  wire::SplitEnvelope(frames, p.envelope);
  // Whatever the front does not answer goes on whole.
  const auto give_back = [&] {
    frames = wire::WithEnvelope(p.envelope, std::move(frames));
    return false;
  };
  if (p.envelope.empty()) return give_back();
  Result<wire::Request> request = wire::DecodeRequest(frames, config_.limits, &p.id);
  if (!request.ok() || !reads_->ReadOnly(request->op) || !request->on_behalf.empty()) return give_back();
  api::Call call;
  call.endpoint = Endpoint::kApi;
  call.request = &*request;
  if (!config_.security.curve) {
    // No authentication: every api caller is superadmin of the tenant it names.
    call.principal.tenant = request->tenant.empty() ? "default" : request->tenant;
    call.principal.role = Role::kSuperadmin;
  } else {
    Result<api::Principal> principal = auth::Resolve(*serving_view_, clock_.NowMs(), Endpoint::kApi, key, *request);
    // A refusal is the reactor's to say (and to log), as it always did.
    if (!principal.ok()) return give_back();
    const Role role = principal->role;
    if (role != Role::kUser && role != Role::kAdmin && role != Role::kSuperadmin) return give_back();
    call.principal = std::move(*principal);
  }
  // One read transaction: every statement of the reply sees the same commit.
  if (!store_->BeginRead().ok()) {
    store_->EndRead();
    return give_back();
  }
  // Taken before the transaction's first read, whose snapshot then holds their commits.
  store::Store::ClusterWrites written;
  {
    std::lock_guard<std::mutex> lock(mu_);
    written = std::exchange(cluster_writes_, store::Store::ClusterWrites());
  }
  if (!written.empty()) store_->ClustersWrittenElsewhere(written);
  p.response = reads_->Route(call);
  store_->EndRead();
  Delivered(SendReply(router_, p), p.id);
  return true;
}

void ApiFront::Delivered(Delivery delivery, const std::string& id) {
  // A client that went away is no news; one that sends and does not read loses replies, and must hear of it.
  if (delivery != Delivery::kBacklogged) return;
  if (tally_.Count("replies dropped for clients that did not read them", clock_.NowMs())) {
    WEFT_LOG(kWarn, kLog) << "dropped the reply to "
                          << (id.empty() ? std::string("a request") : "request '" + id + "'")
                          << " on the api endpoint: its client has " << kRepliesQueued
                          << " replies waiting that it has not read; a client must read its replies, and keep "
                             "fewer requests than that in flight on one connection";
  }
}

void ApiFront::PassOn(wire::Frames frames, bool over, const std::string& key, std::string address) {
  const std::string rid = frames.front().to_string();
  zmq::message_t meta = EncodeApiMeta(ApiMeta{over, key, std::move(address)});
  try {
    // Blocks while the reactor is behind by the pipe's high-water mark: the front stops taking requests.
    if (!pipe_.send(meta, zmq::send_flags::sndmore)) return;
    if (!wire::SendMultipart(pipe_, frames)) return;
  } catch (const zmq::error_t& e) {
    WEFT_LOG(kWarn, kLog) << "cannot pass a request on to the reactor: " << e.what();
    return;
  }
  ++with_reactor_[rid];
}

}  // namespace weft::server
