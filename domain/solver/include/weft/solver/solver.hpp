// The layout solver: template + catalog + size (+ overrides, + existing nodes) ->
// a layout of nodes with their hardware, image and services, or a Status whose
// sentence names the constraint(s) that cannot be met and the numbers.
//
// Semantics (docs/catalog.md, "Solver"): services on the cluster come from the
// request or the template defaults, all within compatibility.services; every
// `requires` (install and runtime) must be met by a service on the cluster or one
// that `provides` the name; no two services on the cluster may conflict; every
// service runs on at least max(1, quantities.min) and at most quantities.max nodes;
// mustcoexist applies to the services present (not transitive across groups whose
// shared service is absent); cantcoexist forbids the whole set on one node; every
// node's hardware and image type are in compatibility, have a providermap entry for
// the provider, satisfy the overrides and every per-service restriction of its
// services. Services named by no constraint go on every node. Every node runs at
// least one service.
//
// Solve is a pure function: thread-safe, deterministic (same input, same layout),
// and bounded (SolveOptions) so it never runs away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/catalog/catalog.hpp"
#include "weft/catalog/layout.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/status.hpp"

namespace weft::solver {

using json = nlohmann::json;

struct Overrides {
  std::optional<std::string> provider;
  std::optional<std::string> hardwaretype;  // every node uses it
  std::optional<std::string> imagetype;     // every node uses it
  std::optional<std::vector<std::string>> services;  // replaces defaults.services
};

struct SolveRequest {
  std::string cluster_name;  // hostnames are <cluster_name>-<n>[.<dnsSuffix>]
  std::int64_t size = 0;     // total nodes wanted, existing ones included
  Overrides overrides;
  // The cluster's current nodes, when it grows, shrinks or gains services. They keep
  // hostname, hardware and image; they keep their services and may only gain services
  // the cluster did not run before (or that a mustcoexist group ties to theirs). When
  // shrinking, whole nodes are removed (the highest-numbered of a kind first).
  std::vector<catalog::LayoutNode> existing;
  // Hostnames of nodes that are not in the layout but still exist (a node a failed
  // job was to delete, which this change deletes): new nodes are numbered past them.
  std::vector<std::string> taken;
};

struct SolveOptions {
  // Upper bound on search steps; past it Solve returns kTimeout instead of deciding.
  std::int64_t max_steps = 2'000'000;
  // Optional wall-clock bound, read from `clock` (injected; nullptr: no time bound).
  const Clock* clock = nullptr;
  std::int64_t max_time_ms = 0;
};

// The layout for `request`, or:
//  kInvalid   the request names something wrong (unknown provider, service not in the
//             template, size outside constraints.size, a requirement not met...);
//  kConflict  the constraints cannot all hold; the sentence names them and the numbers;
//  kTimeout   the search bound was reached before an answer was found.
Result<catalog::Layout> Solve(const catalog::Catalog& catalog, const catalog::ClusterTemplate& tmpl,
                              const SolveRequest& request, const SolveOptions& options = {});

}  // namespace weft::solver
