#include "weft/server/hosts/workers.hpp"

#include <algorithm>

namespace weft::hosts {

WorkerSplit AllocateWorkers(std::vector<HostCapacity> hosts, const std::set<std::string>& active,
                            const std::map<std::string, std::int64_t>& caps) {
  std::sort(hosts.begin(), hosts.end(), [](const HostCapacity& a, const HostCapacity& b) { return a.id < b.id; });
  WorkerSplit split;
  std::int64_t total = 0;
  for (const HostCapacity& h : hosts) total += std::max<std::int64_t>(h.capacity, 0);
  const std::int64_t tenants = static_cast<std::int64_t>(active.size());
  auto cap = [&caps](const std::string& t) {
    auto it = caps.find(t);
    return it == caps.end() || it->second <= 0 ? std::int64_t{-1} : it->second;
  };
  bool capped = false;
  for (const std::string& t : active) capped = capped || (cap(t) >= 0 && cap(t) < total);
  // One tenant alone gains nothing from pinning; leaving its slots to any
  // tenant lets a newcomer's first tasks start before the next heartbeat.
  if (!capped && (tenants <= 1 || total < tenants)) {
    for (const HostCapacity& h : hosts)
      if (h.capacity > 0) split[h.id][""] = h.capacity;
    return split;
  }
  // Deal the tenants out like cards over every host's slots in turn: each host
  // gets a run of the cycle, so with capacity for it every tenant is on every host.
  std::vector<std::string> order(active.begin(), active.end());
  std::map<std::string, std::int64_t> dealt;
  std::size_t next = 0;
  for (const HostCapacity& h : hosts) {
    for (std::int64_t slot = 0; slot < h.capacity; ++slot) {
      // The next tenant in turn still under its cap; none: the slot stays idle.
      for (std::size_t tried = 0; tried < order.size(); ++tried) {
        const std::string& t = order[next++ % order.size()];
        if (cap(t) >= 0 && dealt[t] >= cap(t)) continue;
        ++dealt[t];
        ++split[h.id][t];
        break;
      }
    }
  }
  return split;
}

}  // namespace weft::hosts
