#include "weft/server/daemon/subscriptions.hpp"

#include <charconv>
#include <cstdio>
#include <random>

#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {
namespace {

constexpr const char* kLog = "weftd";
constexpr std::int64_t kSubscriptionCheckMs = 20;
// Topics numbered at most in one incarnation (a few per cluster): beyond that the numbering
// starts again, so that the table of deleted clusters' topics does not grow for ever.
constexpr std::size_t kMaxNumberedTopics = 1 << 16;

std::string NewIncarnation() {
  std::random_device random;
  const std::uint64_t v = (std::uint64_t{random()} << 32) ^ random();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

// What a subscription to `prefix` by `key` may deliver (security on): a
// superadmin or a gateway anything; a tenant admin their tenant's topics; a user the topics
// of the clusters they own when they subscribe, and their owner topic
// (`<tenant>/owner/<user>/`), where a cluster they make later is told: the
// subscriber sends its subscription again then, and it covers that cluster
// too. A prefix broader than what the key may see becomes the topics it may;
// one outside them, nothing.
std::vector<std::string> Subscriptions::AllowedTopics(const std::string& key, const std::string& prefix) {
  const auth::KeyEntry* e = registry_.Find(key);
  if (!e || e->kind != auth::Kind::kUser) return {};
  // A gateway passes each browser only what the browser's user may see (docs/web.md).
  if (e->role == "superadmin" || e->role == "gateway") return {prefix};
  const std::string mine = e->tenant + "/";
  if (e->role == "admin") {
    if (prefix.rfind(mine, 0) == 0) return {prefix};
    if (mine.rfind(prefix, 0) == 0) return {mine};
    return {};
  }
  std::vector<std::string> out;
  auto allow = [&](const std::string& topic) {
    if (topic.rfind(prefix, 0) == 0) {
      out.push_back(topic);
    } else if (prefix.rfind(topic, 0) == 0) {
      out.push_back(prefix);
    }
  };
  allow(mine + "owner/" + e->user + "/");
  Result<std::vector<store::ClusterRecord>> clusters = store_.ListClusters(e->tenant, false);
  if (!clusters.ok()) return out;
  for (const store::ClusterRecord& c : *clusters) {
    if (c.owner != e->user) continue;
    for (const char* kind : {"job/", "cluster/", "task/"}) allow(mine + kind + c.id + "/");
  }
  return out;
}

void Subscriptions::Read() {
  // Without security XPUB passes on the first subscription to a topic and the
  // last unsubscription from it: a set of prefixes is exact. With security it
  // runs in manual mode: every (un)subscription comes here with the
  // subscriber's key and is applied, narrowed to what the key may see, to
  // that subscriber's pipe alone.
  while (true) {
    zmq::message_t m;
    try {
      if (!events_.recv(m, zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t& e) {
      WEFT_LOG(kWarn, kLog) << "events endpoint: cannot read subscriptions: " << e.what();
      return;
    }
    if (m.size() == 0) continue;
    const char* data = static_cast<const char*>(m.data());
    std::string prefix(data + 1, m.size() - 1);
    if (config_.security.curve) {
      if (data[0] != 0 && data[0] != 1) continue;
      std::string key;
      try {
        key = m.gets("User-Id");
      } catch (const zmq::error_t&) {
        continue;  // libzmq's own unsubscription of a pipe that closed
      }
      for (const std::string& topic : AllowedTopics(key, prefix)) {
        try {
          if (data[0] == 1) {
            events_.set(zmq::sockopt::subscribe, topic);
          } else {
            events_.set(zmq::sockopt::unsubscribe, topic);
          }
        } catch (const zmq::error_t& e) {
          WEFT_LOG(kWarn, kLog) << "events endpoint: cannot apply a subscription: " << e.what();
        }
      }
      continue;
    }
    if (data[0] == 1) {
      subscriptions_.insert(std::move(prefix));
    } else if (data[0] == 0) {
      subscriptions_.erase(prefix);
    }
  }
}

void Subscriptions::Restart() {
  seq_.clear();
  incarnation_ = NewIncarnation();
  incarnation_tail_ = ",\"incarnation\":\"" + incarnation_ + "\"}";
}

void Subscriptions::Check() {
  // Checked now and then, not every turn: an empty receive costs a system
  // call, and a new subscriber misses the first moments anyway (PUB/SUB).
  const std::int64_t now = clock_.NowMs();
  if (now < next_check_ms_) return;
  Read();
  next_check_ms_ = now + kSubscriptionCheckMs;
  // Without a subscriber, events are not even built (nor numbered): whoever
  // subscribes next finds the numbering started again under a new incarnation.
  if (subscriptions_.empty() && !config_.security.curve && !seq_.empty()) Restart();
  // (In manual mode, with security, weftd does not see subscribers leave: events are always built.)
  components_.set_events_wanted(!subscriptions_.empty() || config_.security.curve);
}

void Subscriptions::Publish(std::vector<Event> committed) {
  Check();
  if (subscriptions_.empty() && !config_.security.curve) {
    components_.DiscardEvents();
    return;
  }
  ServerMetrics* metrics = components_.metrics();
  for (Event& e : components_.DrainEvents()) committed.push_back(std::move(e));
  for (Event& e : committed) {
    if (metrics) {
      auto type = e.payload.find("type");
      metrics->events(type != e.payload.end() && type->is_string()
                          ? std::string_view(type->get_ref<const std::string&>())
                          : std::string_view())
          .Inc();
    }
    // The topic's next number, and the incarnation, spliced into the payload
    // object's text: no JSON member is added, no string allocated per event.
    auto seq = seq_.find(std::string_view(e.topic));
    if (seq == seq_.end()) {
      if (seq_.size() >= kMaxNumberedTopics) Restart();
      seq = seq_.emplace(e.topic, 0).first;
    }
    const std::uint64_t number = ++seq->second;
    body_.clear();
    wire::AppendJson(body_, e.payload);
    if (body_.size() >= 2 && body_.back() == '}') {
      body_.pop_back();
      char digits[24];
      const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, number);
      (void)ec;  // 24 characters hold any 64-bit number
      body_.append(body_.size() > 1 ? ",\"seq\":" : "\"seq\":").append(digits, end).append(incarnation_tail_);
    }
    try {
      zmq::message_t topic(e.topic.data(), e.topic.size());
      zmq::message_t payload(body_.data(), body_.size());
      // PUB never blocks: a slow subscriber loses messages at its high-water mark.
      if (!events_.send(topic, zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
          !events_.send(payload, zmq::send_flags::dontwait)) {
        WEFT_LOG(kDebug, kLog) << "event " << e.topic << " not published";
      }
    } catch (const zmq::error_t& err) {
      WEFT_LOG(kWarn, kLog) << "cannot publish event " << e.topic << ": " << err.what();
    }
  }
}

}  // namespace weft::server
