// The events weft-web relays to browsers (docs/web.md, "Events").
//
// One subscription to weftd's events (client::EventStream: it asks weftd where
// the leader publishes, and moves when another weftd takes the lead or weftd
// restarts) feeds an EventRing: every event gets the next number and is kept
// until `capacity` newer ones push it out, so a browser that reconnects with
// Last-Event-ID gets what it missed, or a reset when that is no longer kept.
// Events weftd published while weft-web was not subscribed (a takeover, a
// restart, a slow moment) are a gap in the ring, which every stream passes on
// as a reset. Each browser's stream shows only what its user may see
// (Visible): the same rule weftd applies to its own subscribers.
//
// EventRing is thread-safe (the feed thread appends, I/O threads read).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"

namespace weft::web {

struct StoredEvent {
  std::uint64_t id = 0;
  std::string type;        // the payload's "type": task, job, cluster, task.progress, host; weftd (weft-web's own)
  std::string tenant;      // the topic's first segment ("_system" for hosts)
  std::string cluster_id;  // "" when the event belongs to no cluster
  std::string data;        // the payload as weftd sent it (JSON text)
  bool gap = false;        // not an event: weftd's events before the next one may be missing
  bool everyone = false;   // weft-web's own (type "weftd"): for every stream, whatever its filter
};

using EventPtr = std::shared_ptr<const StoredEvent>;

class EventRing {
 public:
  // Numbers start after `first_id` - 1 (a start-time based number, so ids of
  // an earlier weft-web process are never mistaken for this one's).
  EventRing(std::size_t capacity, std::uint64_t first_id);

  // Numbers and keeps one event, then wakes every listener.
  EventPtr Append(const std::string& topic, const nlohmann::json& payload);
  // Numbers and keeps a gap: readers that pass it read their state again.
  EventPtr AppendGap();
  // Numbers and keeps an event of weft-web's own, shown on every stream:
  // {"type":"weftd","reachable":bool,"message":...} when weftd cannot be
  // reached and when it is back.
  EventPtr AppendWeftd(bool reachable, const std::string& message);

  struct Batch {
    std::vector<EventPtr> events;  // oldest first
    bool reset = false;            // what follows `after` is no longer (or was never) kept
    std::uint64_t last = 0;        // the id a reader has seen after this batch
  };
  // At most `max` events numbered after `after`.
  Batch After(std::uint64_t after, std::size_t max) const;
  // The newest id handed out (first_id - 1 before any).
  std::uint64_t LastId() const;

  // Listeners are called (on the appending thread, without the lock held)
  // after every Append; they must only schedule work.
  int Listen(std::function<void()> wake);
  void Unlisten(int id);

 private:
  // Numbers `event`, keeps it (the oldest goes past capacity) and wakes the listeners.
  EventPtr Push(std::shared_ptr<StoredEvent> event);

  const std::size_t capacity_;
  const std::uint64_t first_id_;
  mutable std::mutex mu_;
  std::deque<EventPtr> events_;
  std::uint64_t next_id_;
  std::map<int, std::function<void()>> listeners_;
  int next_listener_ = 1;
};

// Who looks at a stream.
struct Viewer {
  std::string tenant;
  std::string user;
  std::string role;  // superadmin, admin, user
};

enum class Visibility { kShow, kHide, kIfOwned };
// weft-web's own events are for everyone. A superadmin sees everything; a
// tenant admin their tenant's events and the host events; a user the events of the clusters they own (kIfOwned: the
// caller checks ownership) and nothing else.
Visibility Visible(const Viewer& viewer, const StoredEvent& event);

// The thread that follows weftd's events into a ring.
class EventFeed {
 public:
  struct Options {
    client::Options api;  // weftd's api endpoint(s) and keys: where to ask for the events endpoint
    std::string endpoint;  // a fixed events endpoint instead ("" asks weftd, and follows the leader)
  };
  EventFeed(zmq::context_t& ctx, Options options, EventRing& ring);
  ~EventFeed();
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

 private:
  void Run();

  zmq::context_t& ctx_;
  Options options_;
  EventRing& ring_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace weft::web
