#include "server/api/workers.hpp"

#include <algorithm>

namespace weft::api {

WorkerSplit AllocateWorkers(std::vector<HostCapacity> hosts, const std::set<std::string>& active) {
  std::sort(hosts.begin(), hosts.end(), [](const HostCapacity& a, const HostCapacity& b) { return a.id < b.id; });
  WorkerSplit split;
  std::int64_t total = 0;
  for (const HostCapacity& h : hosts) total += std::max<std::int64_t>(h.capacity, 0);
  const std::int64_t tenants = static_cast<std::int64_t>(active.size());
  // One tenant alone gains nothing from pinning; leaving its slots to any
  // tenant lets a newcomer's first tasks start before the next heartbeat.
  if (tenants <= 1 || total < tenants) {
    for (const HostCapacity& h : hosts)
      if (h.capacity > 0) split[h.id][""] = h.capacity;
    return split;
  }
  // Deal the tenants out like cards over every host's slots in turn: each host
  // gets a run of the cycle, so with capacity for it every tenant is on every host.
  std::vector<std::string> order(active.begin(), active.end());
  std::size_t next = 0;
  for (const HostCapacity& h : hosts)
    for (std::int64_t slot = 0; slot < h.capacity; ++slot) ++split[h.id][order[next++ % order.size()]];
  return split;
}

}  // namespace weft::api
