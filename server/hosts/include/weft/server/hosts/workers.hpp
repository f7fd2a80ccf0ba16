// How many worker threads each tenant gets on each provisioner host: the
// server decides it, not the hosts. A pure function, recomputed whenever it is asked for, so a host
// that joins or goes silent changes the split at the next heartbeat.
//
// Rule: the live hosts' capacity (threads) is shared equally among the active
// tenants (tenants with tasks queued, running or waiting in a job), the
// remainder going to the first tenants by name; each tenant's slots are spread
// across hosts round-robin, so losing a host costs every tenant a little
// rather than one tenant everything. With at most one active tenant, or fewer
// slots than active tenants, every slot serves any tenant (the queue's own
// round-robin over tenants is then the fairest split). Deterministic.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace weft::hosts {

struct HostCapacity {
  std::string id;
  std::int64_t capacity = 1;
};

// host id -> tenant -> threads; the tenant "" means "any tenant".
using WorkerSplit = std::map<std::string, std::map<std::string, std::int64_t>>;

// `caps`: a tenant's quota of threads over all hosts (max_workers; absent or 0:
// none). A capped tenant never gets more; slots nobody may use stay out of the split.
WorkerSplit AllocateWorkers(std::vector<HostCapacity> live_hosts, const std::set<std::string>& active_tenants,
                            const std::map<std::string, std::int64_t>& caps = {});

}  // namespace weft::hosts
