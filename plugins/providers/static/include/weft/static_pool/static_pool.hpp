// weft::staticpool: a pool of existing SSH hosts, and the allocation files
// that say which cluster node holds which host.
//
//   auto pool = staticpool::ParseHosts(fields["hosts"]);       // validated entries
//   staticpool::Allocations a("/var/lib/weft/static-pool");
//   auto got = a.Allocate(*pool, claim);                        // exclusive, or "pool exhausted: ..."
//   a.Release(claim.holder);                                    // frees what that node holds
//
// An allocation is one file per pool entry, <state_dir>/claim-<address>-<port>.json,
// holding the tenant, cluster id, node id, job id and task id that took it. The
// file appears atomically (written under a temporary name, then link(2)ed into
// place, which fails if the name exists), and every read-decide-write runs
// under an flock on <state_dir>/.lock, so worker processes and weft-host
// processes on one machine that share the state directory never hand out a
// host twice. Because allocations are files, they outlive every process.
//
// Thread-safety: all members may be called from any thread and any process at
// once; an Allocations object holds no state besides its directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::staticpool {

inline constexpr const char* kDefaultStateDir = "/var/lib/weft/static-pool";

// One entry of the pool, as the operator listed it.
struct PoolHost {
  std::string address;                 // IPv4 address
  std::uint16_t port = 22;
  std::string user = "root";
  std::vector<std::string> host_keys;  // "type base64", comments removed
  // "address:port": the provider_id of a node on this host.
  std::string Id() const { return address + ":" + std::to_string(port); }
};

// Parses the provider's `hosts` field: a JSON array of entries, or a string
// holding one. Every entry needs `address` and `host_keys`; `port` (22) and
// `user` ("root") are optional; other keys are refused so a typo is not
// silently ignored. Errors are sentences naming the entry and the fix.
Result<std::vector<PoolHost>> ParseHosts(const nlohmann::json& hosts);

// Who an allocation belongs to: one node of one cluster.
struct Holder {
  std::string tenant;
  std::string cluster_id;
  std::string node_id;

  bool operator==(const Holder&) const = default;
  // "cluster c1 node web-1"
  std::string Describe() const { return "cluster " + cluster_id + " node " + node_id; }
};

// The content of one allocation file.
struct Claim {
  std::string host_id;  // PoolHost::Id()
  Holder holder;
  std::string job_id;
  std::int64_t task_id = 0;
  std::int64_t claimed_at_ms = 0;  // wall clock, for operators reading the file
  std::string file;                // where it was read from (not stored in the file)
  bool readable = true;            // false: the file exists but does not parse (never reused)
};

struct Allocation {
  PoolHost host;
  bool reused = false;  // the holder already had this host (a retried CREATE)
};

class Allocations {
 public:
  explicit Allocations(std::filesystem::path state_dir, int lock_timeout_ms = 10000);

  // The host allocated to `request.holder`: the one it already holds if that
  // host is still in the pool, else the first free entry of `pool`, recorded
  // with `request`'s job and task ids. Fails with kConflict and the sentence
  // "static pool exhausted: all N hosts are allocated (...)" when none is free.
  Result<Allocation> Allocate(const std::vector<PoolHost>& pool, const Claim& request) const;

  // The allocation of host_id, if there is one.
  Result<std::optional<Claim>> Find(const std::string& host_id) const;

  // Every allocation file in the state directory.
  Result<std::vector<Claim>> List() const;

  // Frees every host `holder` holds; returns their ids (empty: it held none).
  Result<std::vector<std::string>> Release(const Holder& holder) const;

  const std::filesystem::path& state_dir() const { return state_dir_; }

 private:
  std::filesystem::path ClaimPath(const std::string& address, std::uint16_t port) const;

  std::filesystem::path state_dir_;
  int lock_timeout_ms_;
};

}  // namespace weft::staticpool
