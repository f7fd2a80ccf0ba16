// weft::Event: one transition weftd publishes on its `events` endpoint (PUB):
// a topic that subscribers match by prefix ("<tenant>/job/<cluster>/", ...)
// and a JSON payload (docs/protocol.md, "Events"). The job engine, the host
// registry and the queue's task transitions all produce this one type.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace weft {

struct Event {
  std::string topic;
  nlohmann::json payload;
};

}  // namespace weft
