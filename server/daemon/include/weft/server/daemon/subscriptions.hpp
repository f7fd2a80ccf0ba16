// weft::server::Subscriptions: the events endpoint (XPUB). It reads who
// subscribed to what, tells the components whether anyone listens (with
// nobody listening, task transitions are not even built), and publishes a
// turn's events after its commit. With security on it runs XPUB in manual
// mode and narrows each subscription to the topics its key may see.
// Every event leaves with a sequence number, one more than the last of its
// topic, and the incarnation of that numbering, which changes whenever the
// numbering starts again (docs/protocol.md, `events`).
// Part of weftd's reactor.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <cstdint>
#include <set>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "weft/server/auth/auth.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/components.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::server {

class Subscriptions {
 public:
  Subscriptions(const Config& config, const Clock& clock, zmq::socket_t& events, store::Store& store,
                const auth::Registry& registry, Components& components)
      : config_(config), clock_(clock), events_(events), store_(store), registry_(registry), components_(components) {
    Restart();
  }

  // Reads new subscriptions now and then and tells the components whether events are wanted.
  void Check();
  // Sends `committed` (events of commits confirmed late: GroupCommit::TakeEvents) and the events the
  // components piled up since the last commit (or forgets them: nobody listens).
  void Publish(std::vector<Event> committed = {});
  // Starts the numbering again under a new incarnation (weftd took the lead: the
  // events published meanwhile came from another weftd, or none were).
  void Restart();

 private:
  void Read();
  // What a subscription to `prefix` by `key` may deliver (security on).
  std::vector<std::string> AllowedTopics(const std::string& key, const std::string& prefix);

  const Config& config_;
  const Clock& clock_;
  zmq::socket_t& events_;
  store::Store& store_;
  const auth::Registry& registry_;
  Components& components_;
  // Topic prefixes someone subscribed to. The events socket is an XPUB so
  // that, with nobody listening, events are not even built.
  std::set<std::string> subscriptions_;
  std::int64_t next_check_ms_ = 0;

  struct TopicHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // The last sequence number of each topic in this incarnation.
  std::unordered_map<std::string, std::uint64_t, TopicHash, std::equal_to<>> seq_;
  std::string incarnation_;
  std::string incarnation_tail_;  // what ends every payload: `,"incarnation":"..."}`
  std::string body_;  // an event's JSON, reused from one event to the next
};

}  // namespace weft::server
