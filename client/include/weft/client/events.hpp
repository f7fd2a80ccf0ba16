// weft::client::EventStream: follows weftd's `events` endpoint
// (docs/protocol.md, `events`) for a program, the way Client drives its `api`.
//
// It asks weftd (server.status, through a Client with the same options)
// where the leader publishes its events, connects a SUB socket there with the
// same keys, subscribes to the prefixes given, and hands out one event at a
// time. Each event says whether events were missed before it: its topic's
// sequence number is not the one after the last seen (a slow subscriber
// whose messages ZeroMQ dropped, a reconnect), or its incarnation is not the
// last seen one (weftd restarted, another weftd took the lead). Either way
// the caller reads the state again (job.get, cluster.get) and goes on.
//
// It follows the clusters a user creates after subscribing: weftd decides
// which clusters a user's subscription covers when it receives it, and tells
// of a new cluster with a `cluster.created` event on the owner's topic. On
// each such event the stream sends the prefixes that covered it again, so
// the new cluster's events come from then on (EventOptions::follow_created;
// those published before, the create job's first ones, are read with job.get).
//
// It moves by itself: when the connection drops, a handshake fails, or no
// event came for EventOptions::check_ms, it asks again where the events are and
// reconnects there if that changed (a new leader, a weftd restarted on
// another port) or if its socket gave up (a failed handshake, no connection
// made for check_ms; while weftd does not answer, it opens such a socket
// anew where it was, every check_ms). A caller that tells its user what the connection does
// (lost, back, moved) gets each change through EventOptions::on_change; the
// events missed meanwhile show in the next event's `seen` as ever. When weftd
// no longer knows the key, Next returns DENIED and the caller decides
// (`weft events` stops).
//
// Not thread-safe: one EventStream per thread. The zmq::context_t must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/common/status.hpp"

namespace weft::client {

// Keeps the last sequence number seen on each topic and says, for each new
// event, whether any were missed before it. Used by EventStream and `weft events`.
class EventSequence {
 public:
  struct Seen {
    // The first numbered event seen (or the first since Reset).
    bool first = false;
    // Its incarnation is not the last one seen: weftd restarted, or another
    // weftd took the lead, or weftd went a while with no subscriber at all.
    // What happened before this event is unknown.
    bool restarted = false;
    // Events of this topic missed just before this one (same incarnation).
    std::uint64_t missed = 0;
    // The event carries no sequence number (a weftd older than this client).
    bool unnumbered = false;
    // Whether the state must be read again.
    bool gap() const { return restarted || missed > 0; }
  };
  Seen Check(std::string_view topic, const nlohmann::json& event);
  // Forgets what was seen (the next event counts as a first one).
  void Reset();
  const std::string& incarnation() const { return incarnation_; }

 private:
  std::string incarnation_;
  std::map<std::string, std::uint64_t, std::less<>> last_;
};

// Where weftd's events are published, from a `server.status` reply that
// `api` (the api endpoint that answered) gave: the leader's events endpoint
// when several weftd share a database, with an address bound to every
// interface ("tcp://0.0.0.0:7422") made the api's host. NotFound when the
// reply names none.
Result<std::string> EventsEndpointOf(const nlohmann::json& status, std::string api);

struct ReceivedEvent {
  std::string topic;
  nlohmann::json event;  // the JSON object, its `seq` and `incarnation` included
  EventSequence::Seen seen;
};

// A change of the stream's connection to the events endpoint (EventOptions::on_change).
struct StreamChange {
  enum class Kind {
    // A handshake succeeded at `endpoint`: events flow (the first time, or
    // again after kLost or kMoved).
    kConnected,
    // The connection went away (`why` empty: weftd stopped, the network
    // dropped), or a handshake failed (`why` says how: the key refused, a
    // server key that does not match). The stream reconnects by itself; the
    // events published meanwhile are missed.
    kLost,
    // weftd names another events endpoint (another weftd leads, weftd came
    // back on another port): the stream opened a new socket at `endpoint`.
    // `was_connected` tells whether the old one still had its connection up
    // (a follower that lost the lead stays connected and publishes nothing).
    kMoved,
  };
  Kind kind = Kind::kConnected;
  std::string endpoint = {};
  std::string why = {};
  bool was_connected = false;
};

struct EventOptions {
  // How long without an event before asking weftd again where its events are
  // (a follower that lost the lead stays connected and publishes nothing).
  int check_ms = 1000;
  // The SUB socket's receive high-water mark (messages); 0: ZeroMQ's default.
  int rcvhwm = 0;
  // The SUB socket's kernel receive buffer (SO_RCVBUF, bytes); 0: the system's,
  // which grows with the connection. A small one makes a slow reader miss events
  // (and be told so) rather than have the kernel hold megabytes of them.
  int rcvbuf = 0;
  // An events endpoint to follow instead of the one weftd names (a proxy, an
  // address weftd cannot know); "" asks weftd, and so follows the leader.
  std::string endpoint = {};
  // On a `cluster.created` event, send again the prefixes that covered it, so
  // that a user's subscription covers the new cluster too (docs/protocol.md,
  // `events`). Harmless for an admin's subscription, which covers it already.
  bool follow_created = true;
  // Called from Next on each change of the connection (StreamChange), in the
  // order the stream reads them, before the events it receives after them;
  // nothing is called when empty. It must not call the stream.
  std::function<void(const StreamChange&)> on_change = {};
};

class EventStream {
 public:
  // `options` as for Client (api endpoint(s), keys, tenant); `prefixes` the topic prefixes.
  EventStream(zmq::context_t& ctx, Options options, std::vector<std::string> prefixes, EventOptions events = {});
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // Finds the events endpoint and subscribes. Subscribe before starting what
  // you want to follow; read the state after (events before it are not sent).
  Status Open();
  // The next event, waiting up to `timeout_ms` (longer while it asks weftd
  // where its events are, at most every check_ms: up to a second, and up to
  // twice Options::probe_ms more when weftd does not answer); nullopt when
  // none came (or a signal cut the wait short). An error when the events socket cannot be
  // opened or fails (UNAVAILABLE): the next call looks for the endpoint again.
  // weftd not answering where its events are is no error: Next keeps asking.
  // weftd refusing to say because it no longer knows the key (revoked, its
  // user or tenant deleted) is DENIED, in weftd's words: asking again will
  // not help (the next call asks all the same).
  Result<std::optional<ReceivedEvent>> Next(int timeout_ms);
  // Adds a prefix, or sends one again: weftd decides what a subscription
  // covers when it receives it, so a user subscribes again to follow a
  // cluster created since (docs/protocol.md, `events`); the stream does so
  // itself on each `cluster.created` event it hands out (follow_created).
  void Subscribe(const std::string& prefix);

  // The events endpoint followed now ("" before Open).
  const std::string& endpoint() const { return endpoint_; }
  // How many times the stream moved to another events endpoint or reopened its socket.
  int reopened() const { return reopened_; }

 private:
  Result<std::string> Locate(int timeout_ms);
  Status Connect(const std::string& endpoint);
  // Next, throwing ZeroMQ's errors.
  Result<std::optional<ReceivedEvent>> Wait(int timeout_ms);
  // Sends again each prefix that covers `topic` (a `cluster.created` event's).
  void Resubscribe(const std::string& topic);
  // Reads the monitor: false when the connection dropped or a handshake failed.
  bool Healthy();
  // Asks where the events are, and reconnects there if that moved or this
  // socket gave up. DENIED when weftd refuses the key.
  Status Relocate(std::int64_t now);
  void Tell(StreamChange change);

  zmq::context_t& ctx_;
  Options options_;
  std::vector<std::string> prefixes_;
  EventOptions events_;
  Client api_;
  std::unique_ptr<zmq::socket_t> monitor_;
  std::unique_ptr<zmq::socket_t> sub_;
  std::string endpoint_;
  EventSequence sequence_;
  bool connected_ = false;
  bool tcp_ = false;   // a TCP connection is up (its handshake may still be under way)
  bool dead_ = false;  // a handshake failed: this socket does not try again
  std::int64_t opened_ms_ = 0;
  std::int64_t quiet_since_ms_ = 0;
  std::int64_t next_locate_ms_ = 0;  // when to ask again at the soonest: every check_ms, across calls
  int reopened_ = 0;
};

}  // namespace weft::client
