// What the web_gateway tests share: events made on weftd's queue, and waiting
// for the first one on a stream (PUB/SUB joins take a moment).
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "support/web.hpp"
#include "support/weftd.hpp"

namespace weft::testing {

// Puts `n` raw tasks on the default tenant's queue: n task events.
inline void Enqueue(Weftd& weftd, int n) {
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < n; ++i) tasks.push_back({{"plugin", "nobody-runs-this"}, {"action", "INSTALL"}});
  weftd.Call("debug.enqueue", {{"tasks", tasks}});
}

// Makes events until one arrives on `stream`, so the gateway's subscription
// to weftd is known to be in place; that event.
inline SseEvent FirstEvent(Weftd& weftd, HttpConnection& stream) {
  for (int i = 0; i < 300; ++i) {
    Enqueue(weftd, 1);
    if (auto e = stream.NextEvent(std::chrono::milliseconds(100))) return *e;
  }
  throw std::runtime_error("no event reached the stream");
}

// After weftd restarted or another weftd took the lead: makes events on
// `weftd` until one arrives on `stream` after a reset (what happened in between
// came in no event, so a page must read its state again); that event. weft-web's
// own news that weftd can be reached again (`weftd`) may come before or after
// the reset, and is not one of weftd's events: it is passed over.
inline SseEvent ResetThenEvent(Weftd& weftd, HttpConnection& stream) {
  bool reset = false;
  for (int i = 0; i < 300; ++i) {
    Enqueue(weftd, 1);
    while (std::optional<SseEvent> e = stream.NextEvent(std::chrono::milliseconds(100))) {
      if (e->type == "reset") reset = true;
      else if (reset && e->type != "weftd") return *e;
    }
  }
  throw std::runtime_error(reset ? "no event reached the stream after its reset" : "the stream got no reset");
}

}  // namespace weft::testing
