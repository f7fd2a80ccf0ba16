// The ZAP handler: libzmq sends it one request per CURVE handshake on a
// socket of the context, and waits for the answer before it lets the peer in.
#include <chrono>
#include <thread>
#include <vector>

#include "weft/server/auth/auth.hpp"
#include "weft/common/log.hpp"
#include "weft/common/probe_key.hpp"

namespace weft::auth {
namespace {

constexpr const char* kLog = "auth";
constexpr std::size_t kMaxLogged = 10000;  // refused keys remembered, so each is logged once
// Refused keys beyond the first of an interval are only counted (log::Tally).
constexpr std::int64_t kTallyMs = 5000;

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& ctx, KeySnapshot& keys, const Clock& clock, bool host_requests)
    : ctx_(ctx), keys_(keys), clock_(clock), host_requests_(host_requests), tally_(log::Level::kWarn, kLog, kTallyMs) {}

ZapHandler::~ZapHandler() { Stop(); }

Status ZapHandler::Start() {
  try {
    socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::rep);
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::rcvtimeo, 100);  // so Stop is noticed
    socket_->bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("cannot start the ZAP handler: ") + e.what());
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ZapHandler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  socket_.reset();
}

void ZapHandler::Run() {
  while (!stop_) {
    if (!open_) {
      // Not reading leaves each handshake waiting for its answer, not refused.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    tally_.Flush(clock_.NowMs());
    std::vector<zmq::message_t> frames;
    try {
      zmq::message_t part;
      if (!socket_->recv(part)) continue;
      frames.push_back(std::move(part));
      while (frames.back().more()) {
        zmq::message_t next;
        (void)socket_->recv(next);
        frames.push_back(std::move(next));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      continue;
    }
    // version, request id, domain, address, identity, mechanism, credentials...
    // (A REP socket must answer even a malformed request before the next one.)
    auto frame = [&](std::size_t i) { return i < frames.size() ? frames[i].to_string() : std::string(); };
    const std::string request_id = frame(1);
    const std::string domain = frame(2);
    const std::string address = frame(3);
    const std::string mechanism = frame(5);
    std::string code = "400", text = "unknown key", user_id;
    if (mechanism != "CURVE" || frames.size() < 7) {
      text = "CURVE is required";
    } else {
      const std::string key = curve::Z85FromBinary(frames[6].to_string_view());
      const std::shared_ptr<const KeyMap> keys = keys_.Get();
      const std::int64_t now = clock_.NowMs();
      const KeyEntry* entry = FindInForce(*keys, key, now);
      const bool spent = SpentIn(*keys, key, now);
      bool ok = false;
      if (domain == "provisioner") {
        ok = (entry && (entry->kind == Kind::kHost || entry->kind == Kind::kToken)) ||
             (!entry && !spent && host_requests_);
      } else {
        ok = entry && entry->kind == Kind::kUser;
      }
      if (ok) {
        code = "200";
        text = "OK";
        user_id = key;
        if (entry) keys_.Seen(key, now);
      } else if (!entry && key == curve::kProbePublicKey) {
        // A client checking what this endpoint is after its own key got no answer: no intrusion.
        if (logged_.size() < kMaxLogged && logged_.insert(domain + "/" + key).second) {
          WEFT_LOG(kInfo, kLog) << "a client at " << address << " checked what the " << domain
                                << " endpoint is, with weft's probe key (a client does so when its own key gets "
                                   "no answer; logged once)";
        }
      } else if (logged_.size() < kMaxLogged && logged_.insert(domain + "/" + key).second &&
                 tally_.Count("keys refused at the handshake", clock_.NowMs())) {
        WEFT_LOG(kWarn, kLog) << "refused key " << curve::ShortKey(key) << " from " << address << " on the " << domain
                              << " endpoint: "
                              << (entry ? "it is not a key for this endpoint"
                                        : spent ? "revoked, used up or expired"
                                                : "unknown")
                              << " (logged once per key); other keys refused in the next " << kTallyMs / 1000
                              << " s are counted in one line";
      }
    }
    try {
      std::vector<zmq::message_t> reply;
      reply.emplace_back(std::string("1.0"));
      reply.emplace_back(request_id);
      reply.emplace_back(code);
      reply.emplace_back(text);
      reply.emplace_back(user_id);
      reply.emplace_back();  // metadata
      for (std::size_t i = 0; i < reply.size(); ++i)
        (void)socket_->send(reply[i], i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
    }
  }
}

}  // namespace weft::auth
