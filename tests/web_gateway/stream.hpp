// What the web_gateway tests share: events made on weftd's queue, and waiting
// for the first one on a stream (PUB/SUB joins take a moment).
#pragma once

#include <chrono>
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

}  // namespace weft::testing
