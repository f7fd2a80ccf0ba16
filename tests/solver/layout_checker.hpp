// Test-only: an independent reading of the constraints (docs/catalog.md), written
// apart from the solver, to check layouts it returns and to enumerate small cases.
#pragma once

#include <string>
#include <vector>

#include "weft/catalog/catalog.hpp"
#include "weft/solver/solver.hpp"

namespace weft::testing {

// Every way `layout` breaks the rules for `request`; empty when it obeys them all.
std::vector<std::string> LayoutViolations(const catalog::Catalog& cat, const catalog::ClusterTemplate& tmpl,
                                          const solver::SolveRequest& request, const catalog::Layout& layout);

// Whether any layout at all exists for a fresh cluster (no existing nodes), by
// enumerating node service sets and multisets of them. Small inputs only.
bool BruteForceSolvable(const catalog::Catalog& cat, const catalog::ClusterTemplate& tmpl,
                        const solver::SolveRequest& request);

}  // namespace weft::testing
