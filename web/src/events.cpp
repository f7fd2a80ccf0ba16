#include "weft/web/events.hpp"

#include <chrono>
#include <optional>
#include <thread>

#include "weft/client/events.hpp"
#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::web {
namespace {

constexpr const char* kLog = "weft-web";

std::string StringField(const nlohmann::json& payload, const char* key) {
  auto it = payload.find(key);
  if (it == payload.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<std::int64_t>());
  return "";
}

// The payload's cluster_id, or else the one a topic "<tenant>/<kind>/<cluster_id>/..." names.
std::string ClusterOf(const nlohmann::json& payload, const std::string& topic) {
  std::string cluster = StringField(payload, "cluster_id");
  if (!cluster.empty()) return cluster;
  const std::size_t a = topic.find('/');
  const std::size_t b = a == std::string::npos ? a : topic.find('/', a + 1);
  const std::size_t c = b == std::string::npos ? b : topic.find('/', b + 1);
  if (c != std::string::npos && c > b + 1) cluster = topic.substr(b + 1, c - b - 1);
  return cluster;
}

}  // namespace

EventRing::EventRing(std::size_t capacity, std::uint64_t first_id)
    : capacity_(capacity == 0 ? 1 : capacity), first_id_(first_id), next_id_(first_id) {}

EventPtr EventRing::Push(std::shared_ptr<StoredEvent> event) {
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    event->id = next_id_++;
    events_.push_back(event);
    if (events_.size() > capacity_) events_.pop_front();
    for (const auto& [id, fn] : listeners_) wake.push_back(fn);
  }
  for (const auto& fn : wake) fn();
  return event;
}

EventPtr EventRing::Append(const std::string& topic, const nlohmann::json& payload) {
  auto event = std::make_shared<StoredEvent>();
  event->type = StringField(payload, "type");
  event->tenant = topic.substr(0, topic.find('/'));
  event->data = wire::Dump(payload);
  event->cluster_id = ClusterOf(payload, topic);
  return Push(std::move(event));
}

EventPtr EventRing::AppendGap() {
  auto gap = std::make_shared<StoredEvent>();
  gap->gap = true;
  return Push(std::move(gap));
}

EventPtr EventRing::AppendWeftd(bool reachable, const std::string& message) {
  auto event = std::make_shared<StoredEvent>();
  event->type = "weftd";
  event->everyone = true;
  event->data = wire::Dump(nlohmann::json{{"type", "weftd"},
                                          {"reachable", reachable},
                                          {"message", message},
                                          {"at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        std::chrono::system_clock::now().time_since_epoch())
                                                        .count()}});
  return Push(std::move(event));
}

EventRing::Batch EventRing::After(std::uint64_t after, std::size_t max) const {
  Batch batch;
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t newest = next_id_ - 1;
  const std::uint64_t oldest = events_.empty() ? next_id_ : events_.front()->id;
  // `after` must be an id this process handed out (or the one just before the
  // first), and what follows it must still be kept.
  if (after > newest || after + 1 < oldest || after + 1 < first_id_) {
    batch.reset = true;
    batch.last = newest;
    return batch;
  }
  batch.last = after;
  std::size_t index = static_cast<std::size_t>(after + 1 - oldest);
  for (; index < events_.size() && batch.events.size() < max; ++index) {
    batch.events.push_back(events_[index]);
    batch.last = events_[index]->id;
  }
  return batch;
}

std::uint64_t EventRing::LastId() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_ - 1;
}

int EventRing::Listen(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_listener_++;
  listeners_[id] = std::move(wake);
  return id;
}

void EventRing::Unlisten(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.erase(id);
}

Visibility Visible(const Viewer& viewer, const StoredEvent& event) {
  if (event.everyone) return Visibility::kShow;
  if (viewer.role == "superadmin") return Visibility::kShow;
  if (event.type == "host") return viewer.role == "admin" ? Visibility::kShow : Visibility::kHide;
  if (event.tenant != viewer.tenant) return Visibility::kHide;
  if (viewer.role == "admin") return Visibility::kShow;
  return event.cluster_id.empty() ? Visibility::kHide : Visibility::kIfOwned;
}

EventFeed::EventFeed(zmq::context_t& ctx, Options options, EventRing& ring)
    : ctx_(ctx), options_(std::move(options)), ring_(ring), thread_([this] { Run(); }) {}

EventFeed::~EventFeed() {
  stop_ = true;
  thread_.join();
}

void EventFeed::Run() {
  // Far more than a browser falls behind by: weft-web drains it at once.
  client::EventOptions events{.check_ms = 1000, .rcvhwm = 100000, .endpoint = options_.endpoint};
  client::EventStream stream(ctx_, options_.api, {""}, events);
  std::string followed;
  std::string last_error;
  while (!stop_) {
    Result<std::optional<client::ReceivedEvent>> next = stream.Next(100);
    if (!next.ok()) {
      // Said once per kind of failure; the next call looks for the endpoint again.
      if (next.status().message() != last_error) {
        WEFT_LOG(kWarn, kLog) << next.status().message();
        last_error = next.status().message();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (stream.endpoint() != followed && !stream.endpoint().empty()) {
      WEFT_LOG(kInfo, kLog) << "following weftd's events at " << stream.endpoint();
      followed = stream.endpoint();
      last_error.clear();
    }
    if (!next->has_value()) continue;
    client::ReceivedEvent& e = **next;
    // What weftd published before this event may be missing: browsers read their state again.
    if (e.seen.gap() && !e.seen.first) ring_.AppendGap();
    ring_.Append(e.topic, e.event);
  }
}

}  // namespace weft::web
