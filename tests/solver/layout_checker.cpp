#include "layout_checker.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace weft::testing {
namespace {

using catalog::ClusterTemplate;

struct Rules {
  std::string provider;
  std::vector<std::string> services;  // requested, sorted, unique
  std::map<std::string, long long> lo, hi;
  std::vector<std::string> hw_ok, img_ok;  // usable for the cluster (before per-service limits)
};

bool In(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

Rules MakeRules(const catalog::Catalog& cat, const ClusterTemplate& t, const solver::SolveRequest& req) {
  Rules r;
  r.provider = req.overrides.provider.value_or(t.defaults.provider);
  r.services = req.overrides.services.value_or(t.defaults.services);
  std::sort(r.services.begin(), r.services.end());
  r.services.erase(std::unique(r.services.begin(), r.services.end()), r.services.end());
  for (const auto& s : r.services) {
    long long lo = 1, hi = 1LL << 40;
    auto it = t.constraints.services.find(s);
    if (it != t.constraints.services.end()) {
      if (it->second.quantities.min) lo = std::max(lo, static_cast<long long>(*it->second.quantities.min));
      if (it->second.quantities.max) hi = *it->second.quantities.max;
    }
    r.lo[s] = lo;
    r.hi[s] = hi;
  }
  for (const auto& [name, h] : cat.hardwaretypes) {
    if (!t.compatibility.hardwaretypes.empty() && !In(t.compatibility.hardwaretypes, name)) continue;
    if (req.overrides.hardwaretype && *req.overrides.hardwaretype != name) continue;
    if (!h.providermap.count(r.provider)) continue;
    r.hw_ok.push_back(name);
  }
  for (const auto& [name, im] : cat.imagetypes) {
    if (!t.compatibility.imagetypes.empty() && !In(t.compatibility.imagetypes, name)) continue;
    if (req.overrides.imagetype && *req.overrides.imagetype != name) continue;
    if (!im.providermap.count(r.provider)) continue;
    r.img_ok.push_back(name);
  }
  return r;
}

// Problems of one node's service set, ignoring hardware and image.
std::vector<std::string> SetViolations(const ClusterTemplate& t, const Rules& r, const std::set<std::string>& node) {
  std::vector<std::string> out;
  if (node.empty()) out.push_back("runs no service");
  for (const auto& g : t.constraints.mustcoexist) {
    std::vector<std::string> present;
    for (const auto& s : g)
      if (In(r.services, s)) present.push_back(s);
    bool any = std::any_of(present.begin(), present.end(), [&](const auto& s) { return node.count(s) > 0; });
    bool all = std::all_of(present.begin(), present.end(), [&](const auto& s) { return node.count(s) > 0; });
    if (any && !all) out.push_back("breaks a mustcoexist group");
  }
  for (const auto& g : t.constraints.cantcoexist) {
    if (std::all_of(g.begin(), g.end(), [&](const auto& s) { return node.count(s) > 0; }))
      out.push_back("holds a whole cantcoexist set");
  }
  return out;
}

bool TypeAllowed(const ClusterTemplate& t, const std::set<std::string>& node, const std::string& type, bool hw) {
  for (const auto& s : node) {
    auto it = t.constraints.services.find(s);
    if (it == t.constraints.services.end()) continue;
    const auto& allowed = hw ? it->second.hardwaretypes : it->second.imagetypes;
    if (!allowed.empty() && !In(allowed, type)) return false;
  }
  return true;
}

bool NodeSetValid(const ClusterTemplate& t, const Rules& r, const std::set<std::string>& node) {
  if (!SetViolations(t, r, node).empty()) return false;
  bool hw = std::any_of(r.hw_ok.begin(), r.hw_ok.end(), [&](const auto& h) { return TypeAllowed(t, node, h, true); });
  bool img =
      std::any_of(r.img_ok.begin(), r.img_ok.end(), [&](const auto& i) { return TypeAllowed(t, node, i, false); });
  return hw && img;
}

}  // namespace

std::vector<std::string> LayoutViolations(const catalog::Catalog& cat, const ClusterTemplate& t,
                                          const solver::SolveRequest& req, const catalog::Layout& layout) {
  std::vector<std::string> out;
  Rules r = MakeRules(cat, t, req);
  if (static_cast<long long>(layout.nodes.size()) != req.size)
    out.push_back("has " + std::to_string(layout.nodes.size()) + " nodes, not " + std::to_string(req.size));
  std::set<std::string> hostnames;
  std::map<std::string, long long> count;
  for (const auto& n : layout.nodes) {
    std::string who = "node " + n.hostname + ": ";
    if (!hostnames.insert(n.hostname).second) out.push_back(who + "duplicate hostname");
    std::set<std::string> svcs(n.services.begin(), n.services.end());
    if (svcs.size() != n.services.size()) out.push_back(who + "lists a service twice");
    for (const auto& s : svcs) {
      if (!In(r.services, s)) out.push_back(who + "runs '" + s + "', which was not asked for");
      ++count[s];
    }
    for (const auto& v : SetViolations(t, r, svcs)) out.push_back(who + v);
    if (!In(r.hw_ok, n.hardwaretype)) out.push_back(who + "hardwaretype '" + n.hardwaretype + "' not usable");
    if (!In(r.img_ok, n.imagetype)) out.push_back(who + "imagetype '" + n.imagetype + "' not usable");
    if (!TypeAllowed(t, svcs, n.hardwaretype, true)) out.push_back(who + "a service forbids its hardwaretype");
    if (!TypeAllowed(t, svcs, n.imagetype, false)) out.push_back(who + "a service forbids its imagetype");
    bool is_existing = std::any_of(req.existing.begin(), req.existing.end(),
                                   [&](const auto& e) { return e.hostname == n.hostname; });
    if (!is_existing) {
      const auto* h = cat.FindHardwareType(n.hardwaretype);
      const auto* im = cat.FindImageType(n.imagetype);
      if (h && h->providermap.count(r.provider) && h->providermap.at(r.provider).flavor != n.flavor)
        out.push_back(who + "wrong flavor");
      if (im && im->providermap.count(r.provider) &&
          (im->providermap.at(r.provider).image != n.image || im->providermap.at(r.provider).sshuser != n.sshuser))
        out.push_back(who + "wrong image or sshuser");
    }
  }
  for (const auto& s : r.services) {
    if (count[s] < r.lo[s]) out.push_back("'" + s + "' on " + std::to_string(count[s]) + " nodes, fewer than its minimum");
    if (count[s] > r.hi[s]) out.push_back("'" + s + "' on " + std::to_string(count[s]) + " nodes, more than its maximum");
    const auto* svc = cat.FindService(s);
    if (!svc) {
      out.push_back("'" + s + "' is not in the catalog");
      continue;
    }
    auto satisfied = [&](const std::string& dep) {
      for (const auto& o : r.services) {
        if (o == dep) return true;
        const auto* os = cat.FindService(o);
        if (os && In(os->dependencies.provides, dep)) return true;
      }
      return false;
    };
    for (const auto& d : svc->dependencies.install.required)
      if (!satisfied(d)) out.push_back("'" + s + "' requires missing '" + d + "'");
    for (const auto& d : svc->dependencies.runtime.required)
      if (!satisfied(d)) out.push_back("'" + s + "' requires missing '" + d + "'");
  }
  // Existing nodes keep hardware, image and services when the cluster grows.
  if (req.size >= static_cast<long long>(req.existing.size())) {
    for (const auto& e : req.existing) {
      auto it = std::find_if(layout.nodes.begin(), layout.nodes.end(),
                             [&](const auto& n) { return n.hostname == e.hostname; });
      if (it == layout.nodes.end()) {
        out.push_back("existing node " + e.hostname + " was dropped");
        continue;
      }
      if (it->hardwaretype != e.hardwaretype || it->imagetype != e.imagetype)
        out.push_back("existing node " + e.hostname + " changed hardware or image");
      for (const auto& s : e.services)
        if (!In(it->services, s)) out.push_back("existing node " + e.hostname + " lost '" + s + "'");
    }
  } else {
    for (const auto& n : layout.nodes) {
      auto it = std::find_if(req.existing.begin(), req.existing.end(),
                             [&](const auto& e) { return e.hostname == n.hostname; });
      if (it == req.existing.end()) out.push_back("shrinking added node " + n.hostname);
    }
  }
  return out;
}

bool BruteForceSolvable(const catalog::Catalog& cat, const ClusterTemplate& t, const solver::SolveRequest& req) {
  Rules r = MakeRules(cat, t, req);
  const std::size_t n = r.services.size();
  std::vector<std::vector<int>> kinds;  // valid node service sets, as service indices
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::set<std::string> node;
    std::vector<int> idx;
    for (std::size_t i = 0; i < n; ++i)
      if (mask & (1u << i)) node.insert(r.services[i]), idx.push_back(static_cast<int>(i));
    if (NodeSetValid(t, r, node)) kinds.push_back(idx);
  }
  std::vector<long long> count(n, 0);
  std::function<bool(std::size_t, long long)> pick = [&](std::size_t from, long long left) {
    if (left == 0) {
      for (std::size_t i = 0; i < n; ++i)
        if (count[i] < r.lo[r.services[i]]) return false;
      return true;
    }
    for (std::size_t k = from; k < kinds.size(); ++k) {
      bool ok = true;
      for (int i : kinds[k])
        if (count[i] + 1 > r.hi[r.services[i]]) ok = false;
      if (!ok) continue;
      for (int i : kinds[k]) ++count[i];
      bool found = pick(k, left - 1);
      for (int i : kinds[k]) --count[i];
      if (found) return true;
    }
    return false;
  };
  return pick(0, req.size);
}

}  // namespace weft::testing
