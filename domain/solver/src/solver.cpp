#include "weft/solver/solver.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace weft::solver {
namespace {

using catalog::ClusterTemplate;
using catalog::Layout;
using catalog::LayoutNode;
using catalog::NaturalLess;
constexpr std::int64_t kUnbounded = INT64_MAX / 4;

// A small dynamic bitset: blocks, hardware types and image types are indexed.
class Bits {
 public:
  Bits() = default;
  explicit Bits(std::size_t n) : words_((n + 63) / 64, 0) {}
  static Bits All(std::size_t n) {
    Bits b(n);
    for (std::size_t i = 0; i < n; ++i) b.Set(i);
    return b;
  }
  void Set(std::size_t i) { words_[i / 64] |= (1ULL << (i % 64)); }
  bool Test(std::size_t i) const { return i < words_.size() * 64 && ((words_[i / 64] >> (i % 64)) & 1ULL); }
  bool Any() const {
    return std::any_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w != 0; });
  }
  bool Intersects(const Bits& o) const {
    for (std::size_t i = 0; i < words_.size(); ++i)
      if (words_[i] & o.words_[i]) return true;
    return false;
  }
  Bits& operator&=(const Bits& o) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= o.words_[i];
    return *this;
  }
  // this is a subset of (o plus bit j)
  bool SubsetOfWith(const Bits& o, std::size_t j) const {
    for (std::size_t i = 0; i < words_.size(); ++i) {
      std::uint64_t extra = (j / 64 == i) ? (1ULL << (j % 64)) : 0;
      if (words_[i] & ~(o.words_[i] | extra)) return false;
    }
    return true;
  }
  std::size_t First() const {
    for (std::size_t i = 0; i < words_.size() * 64; ++i)
      if (Test(i)) return i;
    return SIZE_MAX;
  }
  auto operator<=>(const Bits&) const = default;

 private:
  std::vector<std::uint64_t> words_;
};

std::string ListText(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
  return out + "]";
}

std::string Plural(std::int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Services that always share nodes (joined by mustcoexist groups of present services).
struct Block {
  std::vector<std::string> services;  // sorted
  std::int64_t lo = 1;
  std::int64_t hi = kUnbounded;
  std::string lo_service, hi_service;  // who set the bounds
  Bits hw, img;
  bool old = false;        // runs on existing nodes already
  std::vector<int> cc;     // indices into Problem::cc that contain this block
  std::vector<std::string> groups;  // mustcoexist groups that formed it, as text
};

struct CantSet {
  Bits blocks;
  std::vector<std::string> services;
};

// A set of identical nodes: same blocks, same allowed hardware/image, same origin.
struct Cls {
  Bits content;
  Bits hw, img;
  std::int64_t count = 0;
  bool fixed = false;        // existing nodes
  std::vector<int> nodes;    // existing node indices, sorted by hostname
  auto Key() const { return std::tie(fixed, content, hw, img); }
};

struct Problem {
  std::vector<Block> blocks;
  std::vector<CantSet> cc;
  std::vector<int> order;  // block search order
  bool has_unconstrained = false;
};

class Search {
 public:
  Search(const Problem& p, const SolveOptions& opt) : p_(p), opt_(opt) {
    if (opt_.clock) start_ms_ = opt_.clock->NowMs();
  }

  // True: found (result in `out`); false: proven impossible or out of budget (see exhausted()).
  bool Run(std::vector<Cls> classes, std::vector<Cls>& out) { return Dfs(0, std::move(classes), out); }
  bool exhausted() const { return exhausted_; }
  std::int64_t steps() const { return steps_; }

  bool Tick() {
    if (exhausted_) return false;
    ++steps_;
    if (steps_ > opt_.max_steps) exhausted_ = true;
    if (opt_.clock && opt_.max_time_ms > 0 && (steps_ & 255) == 1 &&
        opt_.clock->NowMs() - start_ms_ > opt_.max_time_ms)
      exhausted_ = true;
    return !exhausted_;
  }

  bool CanAdd(const Bits& content, const Bits& hw, const Bits& img, bool fixed, int j) const {
    const Block& b = p_.blocks[j];
    if (content.Test(j)) return false;
    if (fixed && b.old) return false;
    if (!hw.Intersects(b.hw) || !img.Intersects(b.img)) return false;
    for (int c : b.cc) {
      if (p_.cc[c].blocks.SubsetOfWith(content, j)) return false;
    }
    return true;
  }
  bool CanAdd(const Cls& c, int j) const { return CanAdd(c.content, c.hw, c.img, c.fixed, j); }

  std::int64_t CountWith(const std::vector<Cls>& classes, int j) const {
    std::int64_t n = 0;
    for (const auto& c : classes)
      if (c.content.Test(j)) n += c.count;
    return n;
  }

 private:
  static void Normalize(std::vector<Cls>& classes) {
    std::sort(classes.begin(), classes.end(), [](const Cls& a, const Cls& b) { return a.Key() < b.Key(); });
    std::vector<Cls> out;
    for (auto& c : classes) {
      if (c.count == 0) continue;
      if (!out.empty() && out.back().Key() == c.Key()) {
        out.back().count += c.count;
        out.back().nodes.insert(out.back().nodes.end(), c.nodes.begin(), c.nodes.end());
        std::sort(out.back().nodes.begin(), out.back().nodes.end());
      } else {
        out.push_back(std::move(c));
      }
    }
    classes = std::move(out);
  }

  std::vector<Cls> Apply(const std::vector<Cls>& classes, const std::vector<int>& valid,
                         const std::vector<std::int64_t>& x, int j) const {
    std::vector<Cls> next = classes;
    for (std::size_t t = 0; t < valid.size(); ++t) {
      if (x[t] == 0) continue;
      Cls& src = next[valid[t]];
      Cls moved = src;
      moved.count = x[t];
      moved.content.Set(j);
      moved.hw &= p_.blocks[j].hw;
      moved.img &= p_.blocks[j].img;
      if (src.fixed) {
        moved.nodes.assign(src.nodes.begin(), src.nodes.begin() + x[t]);
        src.nodes.erase(src.nodes.begin(), src.nodes.begin() + x[t]);
      }
      src.count -= x[t];
      next.push_back(std::move(moved));
    }
    Normalize(next);
    return next;
  }

  // Necessary conditions for the blocks after position k.
  bool Promising(const std::vector<Cls>& classes, std::size_t k) const {
    std::int64_t later_cap = 0;
    for (std::size_t t = k; t < p_.order.size(); ++t) {
      int j = p_.order[t];
      const Block& b = p_.blocks[j];
      std::int64_t have = CountWith(classes, j);
      std::int64_t slots = 0;
      for (const auto& c : classes)
        if (CanAdd(c, j)) slots += c.count;
      if (have + slots < b.lo || have > b.hi) return false;
      later_cap += std::max<std::int64_t>(0, std::min(b.hi - have, slots));
    }
    if (!p_.has_unconstrained) {
      std::int64_t empty = 0;
      for (const auto& c : classes)
        if (!c.fixed && !c.content.Any()) empty += c.count;
      if (empty > later_cap) return false;
    }
    return true;
  }

  bool Dfs(std::size_t k, std::vector<Cls> classes, std::vector<Cls>& out) {
    if (!Tick()) return false;
    if (k == p_.order.size()) {
      if (!p_.has_unconstrained) {
        for (const auto& c : classes)
          if (!c.fixed && !c.content.Any()) return false;
      }
      out = std::move(classes);
      return true;
    }
    const int j = p_.order[k];
    const Block& b = p_.blocks[j];
    const std::int64_t have = CountWith(classes, j);
    const std::int64_t need_lo = std::max<std::int64_t>(0, b.lo - have);
    const std::int64_t need_hi = b.hi - have;
    if (need_hi < 0) return false;

    std::vector<int> valid;
    for (std::size_t i = 0; i < classes.size(); ++i)
      if (CanAdd(classes[i], j)) valid.push_back(static_cast<int>(i));
    // Preferred order: classes that already run something (co-locate), then empty ones.
    std::stable_sort(valid.begin(), valid.end(), [&](int a, int c) {
      bool ea = !classes[a].content.Any(), ec = !classes[c].content.Any();
      if (ea != ec) return !ea;
      return classes[a].fixed && !classes[c].fixed;
    });
    std::vector<std::int64_t> avail(valid.size() + 1, 0);  // suffix sums of counts
    for (std::size_t t = valid.size(); t-- > 0;) avail[t] = avail[t + 1] + classes[valid[t]].count;
    if (avail[0] < need_lo) return false;

    // 1) The greedy candidate.
    std::vector<std::int64_t> first = Greedy(classes, valid, k, need_lo, need_hi);
    bool have_first = !first.empty();
    if (have_first) {
      auto next = Apply(classes, valid, first, j);
      if (Promising(next, k + 1) && Dfs(k + 1, std::move(next), out)) return true;
      if (exhausted_) return false;
    }
    // 2) Every other distribution, most placements first.
    std::vector<std::int64_t> x(valid.size(), 0);
    return Enumerate(0, 0, k, classes, valid, avail, need_lo, need_hi, x, have_first ? &first : nullptr, out);
  }

  bool Enumerate(std::size_t t, std::int64_t sum, std::size_t k, const std::vector<Cls>& classes,
                 const std::vector<int>& valid, const std::vector<std::int64_t>& avail, std::int64_t need_lo,
                 std::int64_t need_hi, std::vector<std::int64_t>& x, const std::vector<std::int64_t>* skip,
                 std::vector<Cls>& out) {
    if (!Tick()) return false;
    if (sum + avail[t] < need_lo) return false;
    if (t == valid.size()) {
      if (skip && x == *skip) return false;
      auto next = Apply(classes, valid, x, p_.order[k]);
      if (!Promising(next, k + 1)) return false;
      return Dfs(k + 1, std::move(next), out);
    }
    std::int64_t top = std::min(classes[valid[t]].count, need_hi - sum);
    for (std::int64_t v = top; v >= 0; --v) {
      x[t] = v;
      if (Enumerate(t + 1, sum + v, k, classes, valid, avail, need_lo, need_hi, x, skip, out)) return true;
      if (exhausted_) return false;
    }
    x[t] = 0;
    return false;
  }

  // One distribution chosen with bounds: bounded blocks get their minimum, co-located
  // where possible; unbounded ones go wherever they may. Later blocks keep enough
  // room for their minimum, and empty nodes keep enough services to fill them.
  std::vector<std::int64_t> Greedy(const std::vector<Cls>& classes, const std::vector<int>& valid, std::size_t k,
                                   std::int64_t need_lo, std::int64_t need_hi) const {
    const int j = p_.order[k];
    const Block& b = p_.blocks[j];
    std::int64_t total_nodes = 0;
    for (const auto& c : classes) total_nodes += c.count;
    const bool unbounded = b.hi >= total_nodes;
    std::int64_t target = unbounded ? need_hi : need_lo;

    // Room the later blocks need: slack_l = slots_l + have_l - lo_l.
    std::vector<int> later(p_.order.begin() + static_cast<std::ptrdiff_t>(k) + 1, p_.order.end());
    std::vector<std::int64_t> slack(later.size(), 0);
    std::int64_t later_cap = 0;
    for (std::size_t l = 0; l < later.size(); ++l) {
      std::int64_t slots = 0;
      for (const auto& c : classes)
        if (CanAdd(c, later[l])) slots += c.count;
      std::int64_t have = CountWith(classes, later[l]);
      slack[l] = slots + have - p_.blocks[later[l]].lo;
      later_cap += std::max<std::int64_t>(0, std::min(p_.blocks[later[l]].hi - have, slots));
    }
    // Empty free nodes that later blocks cannot fill must take this block.
    std::int64_t forced_empty = 0;
    int empty_idx = -1;
    for (std::size_t t = 0; t < valid.size(); ++t) {
      const Cls& c = classes[valid[t]];
      if (!c.fixed && !c.content.Any()) empty_idx = static_cast<int>(t);
    }
    if (!p_.has_unconstrained) {
      std::int64_t empty = 0;
      for (const auto& c : classes)
        if (!c.fixed && !c.content.Any()) empty += c.count;
      forced_empty = std::max<std::int64_t>(0, empty - later_cap);
      if (forced_empty > 0 && empty_idx < 0) return {};
    }
    if (forced_empty > need_hi) return {};
    target = std::min(std::max(target, forced_empty), need_hi);

    std::vector<std::int64_t> x(valid.size(), 0);
    std::int64_t placed = 0;
    auto place = [&](std::size_t t, std::int64_t want) {
      const Cls& c = classes[valid[t]];
      Bits with = c.content;
      with.Set(j);
      Bits hw = c.hw, img = c.img;
      hw &= b.hw;
      img &= b.img;
      std::int64_t cap = std::min(want, c.count - x[t]);
      std::vector<std::size_t> killed;
      for (std::size_t l = 0; l < later.size(); ++l) {
        if (CanAdd(c, later[l]) && !CanAdd(with, hw, img, c.fixed, later[l])) {
          killed.push_back(l);
          cap = std::min(cap, slack[l]);
        }
      }
      cap = std::max<std::int64_t>(0, cap);
      for (auto l : killed) slack[l] -= cap;
      x[t] += cap;
      placed += cap;
    };
    if (forced_empty > 0) place(static_cast<std::size_t>(empty_idx), forced_empty);
    for (std::size_t t = 0; t < valid.size() && placed < target; ++t) place(t, target - placed);
    if (placed < need_lo || placed < forced_empty) return {};
    return x;
  }

  const Problem& p_;
  const SolveOptions& opt_;
  std::int64_t steps_ = 0;
  std::int64_t start_ms_ = 0;
  bool exhausted_ = false;
};

// Everything Solve needs, resolved from names.
struct Setup {
  std::string tmpl_name;
  std::string provider;
  std::vector<std::string> services;      // sorted
  std::vector<std::string> unconstrained;  // sorted
  std::vector<std::string> hw_names, img_names;  // index spaces; first n_hw/n_img are usable
  std::size_t n_hw = 0, n_img = 0;
  int preferred_hw = -1, preferred_img = -1;
  Problem problem;
  std::map<std::string, int> block_of;  // service -> block
};

Status Bad(const Setup& s, const std::string& what) {
  return Status::Invalid("template '" + s.tmpl_name + "': " + what);
}
Status Impossible(const Setup& s, const std::string& what) {
  return Status::Conflict("template '" + s.tmpl_name + "': " + what);
}

std::string BlockText(const Block& b) {
  if (b.services.size() == 1) return "'" + b.services[0] + "'";
  return ListText(b.services) + " (joined by mustcoexist " + [&] {
    std::string g;
    for (std::size_t i = 0; i < b.groups.size(); ++i) g += (i ? ", " : "") + b.groups[i];
    return g;
  }() + ")";
}

std::string Bound(std::int64_t v) { return v >= kUnbounded ? "any number of" : std::to_string(v); }

// Index of `name` in the sorted `services`, or -1.
int IndexOf(const std::vector<std::string>& services, const std::string& name) {
  auto it = std::lower_bound(services.begin(), services.end(), name);
  return it != services.end() && *it == name ? static_cast<int>(it - services.begin()) : -1;
}

// The provider every node uses: the request's, else the template's default.
Status ResolveProvider(const catalog::Catalog& cat, const ClusterTemplate& t, const Overrides& ov, Setup& s) {
  s.provider = ov.provider ? *ov.provider : t.defaults.provider;
  if (s.provider.empty()) return Bad(s, "no provider: the template has no defaults.provider and none was asked for");
  if (!cat.FindProvider(s.provider))
    return Bad(s, "provider '" + s.provider + "' is not in the catalog; import it or ask for another provider");
  return Status::Ok();
}

// The cluster's services (the request's, else the template's defaults) and their
// dependencies: every requirement met by a service of the cluster, no conflict.
Status ResolveServices(const catalog::Catalog& cat, const ClusterTemplate& t, const Overrides& ov, Setup& s) {
  std::vector<std::string> services = ov.services ? *ov.services : t.defaults.services;
  std::sort(services.begin(), services.end());
  services.erase(std::unique(services.begin(), services.end()), services.end());
  if (services.empty()) return Bad(s, "no services: defaults.services is empty and none were asked for");
  for (const auto& name : services) {
    if (!t.compatibility.services.empty() &&
        std::find(t.compatibility.services.begin(), t.compatibility.services.end(), name) ==
            t.compatibility.services.end())
      return Bad(s, "service '" + name + "' is not in compatibility.services " + ListText(t.compatibility.services) +
                        "; pick services from that list");
    if (!cat.FindService(name)) return Bad(s, "service '" + name + "' is not in the catalog; import it first");
  }
  s.services = services;
  auto present = [&](const std::string& dep, const std::string& except) -> std::string {
    for (const auto& n : services) {
      if (n == except) continue;
      if (n == dep) return n;
      const auto& prov = cat.FindService(n)->dependencies.provides;
      if (std::find(prov.begin(), prov.end(), dep) != prov.end()) return n;
    }
    return {};
  };
  for (const auto& name : services) {
    const auto& d = cat.FindService(name)->dependencies;
    for (auto [kind, list] : {std::pair{"install", &d.install.required}, std::pair{"runtime", &d.runtime.required}}) {
      for (const auto& r : *list) {
        if (present(r, "").empty())
          return Bad(s, "service '" + name + "' " + kind + "-requires '" + r + "', but no service of the cluster " +
                            ListText(services) + " is or provides '" + r + "'; add one");
      }
    }
    for (const auto& c : d.conflicts) {
      std::string other = present(c, name);
      if (!other.empty())
        return Bad(s, "service '" + name + "' conflicts with '" + c + "'" +
                          (other == c ? std::string() : " (provided by '" + other + "')") +
                          ", and both are in the cluster; drop one of them");
    }
  }
  return Status::Ok();
}

// Hardware and image types usable with this provider: the override, or every
// compatible one with a providermap entry; the preferred one is the default's index.
Status ResolveMachineTypes(const catalog::Catalog& cat, const ClusterTemplate& t, const Overrides& ov, Setup& s) {
  auto usable = [&](bool hw, const std::string& name) {
    if (hw) {
      const auto* h = cat.FindHardwareType(name);
      return h && h->providermap.count(s.provider) > 0;
    }
    const auto* im = cat.FindImageType(name);
    return im && im->providermap.count(s.provider) > 0;
  };
  for (int pass = 0; pass < 2; ++pass) {
    const bool hw = pass == 0;
    const char* what = hw ? "hardwaretype" : "imagetype";
    const auto& compat = hw ? t.compatibility.hardwaretypes : t.compatibility.imagetypes;
    const auto& override_name = hw ? ov.hardwaretype : ov.imagetype;
    std::vector<std::string> candidates = compat;
    if (candidates.empty()) candidates = cat.Names(hw ? catalog::Kind::kHardwareType : catalog::Kind::kImageType);
    std::vector<std::string> names;
    if (override_name) {
      if (std::find(candidates.begin(), candidates.end(), *override_name) == candidates.end())
        return Bad(s, std::string(what) + " '" + *override_name + "' is not in compatibility." + what + "s " +
                          ListText(candidates) + "; pick one from that list");
      if (!usable(hw, *override_name))
        return Bad(s, std::string(what) + " '" + *override_name + "' has no providermap entry for provider '" +
                          s.provider + "' (or is not in the catalog); add one or pick another " + what);
      names.push_back(*override_name);
    } else {
      // A default outside the compatible ones is imported with a warning (Coopr
      // accepted it); it fails here, once a cluster really uses it.
      const std::string& fallback = hw ? t.defaults.hardwaretype : t.defaults.imagetype;
      if (!fallback.empty() && !compat.empty() && std::find(compat.begin(), compat.end(), fallback) == compat.end())
        return Bad(s, std::string("its default ") + what + " '" + fallback + "' is not in compatibility." + what +
                          "s " + ListText(compat) + "; name one of those (--" + what + ") or fix the template");
      for (const auto& n : candidates)
        if (usable(hw, n)) names.push_back(n);
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
    }
    if (names.empty())
      return Bad(s, std::string("no ") + what + " of compatibility." + what + "s " + ListText(candidates) +
                        " has a providermap entry for provider '" + s.provider + "'; add one to a " + what);
    const std::string& preferred =
        override_name ? *override_name : (hw ? t.defaults.hardwaretype : t.defaults.imagetype);
    int pref = -1;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == preferred) pref = static_cast<int>(i);
    (hw ? s.hw_names : s.img_names) = names;
    (hw ? s.n_hw : s.n_img) = names.size();
    (hw ? s.preferred_hw : s.preferred_img) = pref;
  }
  return Status::Ok();
}

// Which services constraints name, and the blocks mustcoexist makes of them; the
// others are unconstrained and go on every node.
void BuildBlocks(const ClusterTemplate& t, Setup& s) {
  const auto& con = t.constraints;
  const std::vector<std::string>& services = s.services;
  std::set<std::string> constrained;
  for (const auto& g : con.mustcoexist) constrained.insert(g.begin(), g.end());
  for (const auto& g : con.cantcoexist) constrained.insert(g.begin(), g.end());
  for (const auto& [name, sc] : con.services) constrained.insert(name);
  std::vector<int> parent(services.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int a) {
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
  };
  for (const auto& g : con.mustcoexist) {
    int first = -1;
    for (const auto& n : g) {
      int i = IndexOf(services, n);
      if (i < 0) continue;
      if (first < 0) first = i;
      else parent[find(i)] = find(first);
    }
  }
  std::map<int, int> root_to_block;
  Problem& p = s.problem;
  for (std::size_t i = 0; i < services.size(); ++i) {
    if (!constrained.count(services[i])) {
      s.unconstrained.push_back(services[i]);
      continue;
    }
    int r = find(static_cast<int>(i));
    auto [it, inserted] = root_to_block.emplace(r, static_cast<int>(p.blocks.size()));
    if (inserted) {
      Block b;
      b.hw = Bits::All(s.n_hw);
      b.img = Bits::All(s.n_img);
      p.blocks.push_back(std::move(b));
    }
    Block& b = p.blocks[it->second];
    b.services.push_back(services[i]);
    s.block_of[services[i]] = it->second;
  }
  p.has_unconstrained = !s.unconstrained.empty();
  for (std::size_t gi = 0; gi < con.mustcoexist.size(); ++gi) {
    std::vector<std::string> here;
    for (const auto& n : con.mustcoexist[gi])
      if (IndexOf(services, n) >= 0) here.push_back(n);
    if (here.size() < 2) continue;
    Block& b = p.blocks[s.block_of[here[0]]];
    b.groups.push_back(ListText(con.mustcoexist[gi]));
  }
}

// Each block's node bounds (quantities) and hardware/image masks (per-service
// restrictions), each checked against the others and the size.
Status BoundBlocks(const ClusterTemplate& t, std::int64_t nodes, Setup& s) {
  const auto& con = t.constraints;
  for (auto& b : s.problem.blocks) {
    for (const auto& n : b.services) {
      auto it = con.services.find(n);
      if (it == con.services.end()) continue;
      const auto& sc = it->second;
      std::int64_t lo = std::max<std::int64_t>(1, sc.quantities.min.value_or(0));
      std::int64_t hi = sc.quantities.max.value_or(kUnbounded);
      if (lo > b.lo) b.lo = lo, b.lo_service = n;
      if (hi < b.hi) b.hi = hi, b.hi_service = n;
      for (int pass = 0; pass < 2; ++pass) {
        const auto& allowed = pass == 0 ? sc.hardwaretypes : sc.imagetypes;
        if (allowed.empty()) continue;
        const auto& names = pass == 0 ? s.hw_names : s.img_names;
        Bits mask(names.size());
        for (std::size_t i = 0; i < names.size(); ++i)
          if (std::find(allowed.begin(), allowed.end(), names[i]) != allowed.end()) mask.Set(i);
        (pass == 0 ? b.hw : b.img) &= mask;
        if (!(pass == 0 ? b.hw : b.img).Any()) {
          const char* what = pass == 0 ? "hardwaretypes" : "imagetypes";
          if (b.services.size() == 1 || !mask.Any())
            return Impossible(s, "service '" + n + "' may only run on " + what + " " + ListText(allowed) +
                                     " (constraints.services." + n + "." + what + "), but none of them is usable here " +
                                     ListText(names) + " with provider '" + s.provider +
                                     "'; add a providermap entry or change the restriction");
          return Impossible(s, "services " + BlockText(b) + " must share nodes, but their " + what +
                                   " restrictions have none in common; loosen constraints.services." + n + "." + what);
        }
      }
    }
    if (b.lo > b.hi) {
      return Impossible(s, "service '" + b.hi_service + "': at most " + std::to_string(b.hi) + " node" +
                               (b.hi == 1 ? "" : "s") + " (constraints.services." + b.hi_service +
                               ".quantities.max), but mustcoexist puts it on every node of '" + b.lo_service +
                               "', which needs at least " + std::to_string(b.lo) + " (" + BlockText(b) +
                               "); change the quantities or the mustcoexist group");
    }
    if (b.lo > nodes) {
      std::string who = b.services.size() == 1 ? "service '" + b.lo_service + "'"
                                               : "service '" + b.lo_service + "' (with " + BlockText(b) + ")";
      return Impossible(s, who + " needs at least " + std::to_string(b.lo) + " nodes (constraints.services." +
                               b.lo_service + ".quantities.min), but the cluster has " + Plural(nodes, "node") +
                               "; ask for a larger size");
    }
    b.hi = std::min(b.hi, nodes);
  }
  return Status::Ok();
}

// The cantcoexist sets whose services are all on the cluster, each checked against
// mustcoexist and against the room the size leaves.
Status AddCantcoexist(const ClusterTemplate& t, std::int64_t nodes, Setup& s) {
  Problem& p = s.problem;
  for (const auto& g : t.constraints.cantcoexist) {
    bool all = std::all_of(g.begin(), g.end(), [&](const std::string& n) { return IndexOf(s.services, n) >= 0; });
    if (!all) continue;
    CantSet c;
    c.blocks = Bits(p.blocks.size());
    c.services = g;
    std::set<int> bs;
    for (const auto& n : g) {
      c.blocks.Set(s.block_of[n]);
      bs.insert(s.block_of[n]);
    }
    if (bs.size() == 1) {
      return Impossible(s, "cantcoexist " + ListText(g) + " forbids these services on one node, but mustcoexist " +
                               "forces them onto the same nodes (" + BlockText(p.blocks[*bs.begin()]) +
                               "); drop one of the two constraints");
    }
    // A node holds at most |set|-1 of these blocks.
    std::int64_t need = 0;
    std::vector<std::string> parts;
    for (int bi : bs) {
      need += p.blocks[bi].lo;
      parts.push_back(p.blocks[bi].services[0] + " at least " + std::to_string(p.blocks[bi].lo));
    }
    std::int64_t room = static_cast<std::int64_t>(bs.size() - 1) * nodes;
    if (need > room) {
      return Impossible(s, "cantcoexist " + ListText(g) + " keeps those services from sharing a node; they need " +
                               std::to_string(need) + " placements (" + [&] {
                                 std::string t2;
                                 for (std::size_t i = 0; i < parts.size(); ++i) t2 += (i ? ", " : "") + parts[i];
                                 return t2;
                               }() + ") but " + Plural(nodes, "node") + " hold at most " + std::to_string(room) +
                               "; ask for more nodes or lower the minimums");
    }
    int ci = static_cast<int>(p.cc.size());
    for (int bi : bs) p.blocks[bi].cc.push_back(ci);
    p.cc.push_back(std::move(c));
  }
  return Status::Ok();
}

// Blocks that cantcoexist pairs keep apart pairwise need a node each: a greedy clique
// of such blocks whose minimums add up past the size is a short, exact reason.
Status CheckPairwiseApart(std::int64_t nodes, const Setup& s) {
  const Problem& p = s.problem;
  const std::size_t nb = p.blocks.size();
  std::vector<std::vector<char>> apart(nb, std::vector<char>(nb, 0));
  for (const auto& c : p.cc) {
    std::vector<std::size_t> in;
    for (std::size_t bi = 0; bi < nb; ++bi)
      if (c.blocks.Test(bi)) in.push_back(bi);
    if (in.size() == 2) apart[in[0]][in[1]] = apart[in[1]][in[0]] = 1;
  }
  std::vector<std::size_t> by_lo(nb);
  std::iota(by_lo.begin(), by_lo.end(), 0);
  std::stable_sort(by_lo.begin(), by_lo.end(),
                   [&](std::size_t a, std::size_t b) { return p.blocks[a].lo > p.blocks[b].lo; });
  for (std::size_t seed : by_lo) {
    std::vector<std::size_t> clique = {seed};
    std::int64_t need = p.blocks[seed].lo;
    for (std::size_t c : by_lo) {
      if (c == seed) continue;
      if (std::all_of(clique.begin(), clique.end(), [&](std::size_t m) { return apart[m][c] != 0; })) {
        clique.push_back(c);
        need += p.blocks[c].lo;
      }
    }
    if (clique.size() > 2 && need > nodes) {
      std::vector<std::string> names, parts;
      for (std::size_t m : clique) {
        names.push_back(p.blocks[m].services[0]);
        parts.push_back(p.blocks[m].services[0] + " " + std::to_string(p.blocks[m].lo));
      }
      std::string t2;
      for (std::size_t i = 0; i < parts.size(); ++i) t2 += (i ? ", " : "") + parts[i];
      return Impossible(s, "cantcoexist pairs keep every two of " + ListText(names) +
                               " off the same node, so each of their nodes runs at most one of them; their "
                               "minimums need " + Plural(need, "node") + " (" + t2 + ") but the size is " +
                               std::to_string(nodes) + "; ask for more nodes or loosen those constraints");
    }
  }
  return Status::Ok();
}

// Every node needs a service: without unconstrained services, the bounded ones must reach.
Status CheckEveryNodeCovered(std::int64_t nodes, const Setup& s) {
  const Problem& p = s.problem;
  if (p.has_unconstrained) return Status::Ok();
  std::int64_t reach = 0;
  std::vector<std::string> parts;
  for (const auto& b : p.blocks) {
    reach += b.hi;
    if (b.services.size() == 1) {
      parts.push_back(b.services[0] + " at most " + Bound(b.hi));
    } else {
      parts.push_back(b.hi_service + " at most " + Bound(b.hi) + ", with " + BlockText(b) + " on the same nodes");
    }
  }
  if (reach < nodes) {
    std::string t2;
    for (std::size_t i = 0; i < parts.size(); ++i) t2 += (i ? ", " : "") + parts[i];
    return Impossible(s, "size " + std::to_string(nodes) +
                             " needs a service on every node, but every service has a quantities.max and "
                             "together they cover at most " + Plural(reach, "node") + " (" + t2 +
                             "); lower the size, raise a max, or add a service without constraints");
  }
  return Status::Ok();
}

// Search order: the most bounded blocks first, those in many cantcoexist sets next.
void OrderBlocks(Problem& p) {
  p.order.resize(p.blocks.size());
  std::iota(p.order.begin(), p.order.end(), 0);
  std::sort(p.order.begin(), p.order.end(), [&](int a, int b) {
    const Block& x = p.blocks[a];
    const Block& y = p.blocks[b];
    return std::make_tuple(x.hi, -x.lo, -static_cast<std::int64_t>(x.cc.size()), x.services[0]) <
           std::make_tuple(y.hi, -y.lo, -static_cast<std::int64_t>(y.cc.size()), y.services[0]);
  });
}

// Resolves services, dependencies, provider, hardware/image types and blocks.
Status Prepare(const catalog::Catalog& cat, const ClusterTemplate& t, const SolveRequest& req, std::int64_t nodes,
               Setup& s) {
  s.tmpl_name = t.name;
  WEFT_RETURN_IF_ERROR(ResolveProvider(cat, t, req.overrides, s));
  WEFT_RETURN_IF_ERROR(ResolveServices(cat, t, req.overrides, s));
  WEFT_RETURN_IF_ERROR(ResolveMachineTypes(cat, t, req.overrides, s));
  BuildBlocks(t, s);
  WEFT_RETURN_IF_ERROR(BoundBlocks(t, nodes, s));
  WEFT_RETURN_IF_ERROR(AddCantcoexist(t, nodes, s));
  WEFT_RETURN_IF_ERROR(CheckPairwiseApart(nodes, s));
  WEFT_RETURN_IF_ERROR(CheckEveryNodeCovered(nodes, s));
  OrderBlocks(s.problem);
  return Status::Ok();
}

std::string Summary(const Setup& s, std::int64_t nodes) {
  std::vector<std::string> parts;
  for (const auto& b : s.problem.blocks) {
    std::string q = BlockText(b) + " on " + (b.lo == b.hi ? std::to_string(b.lo) : std::to_string(b.lo) + ".." +
                                                                                     (b.hi >= nodes ? "all" : std::to_string(b.hi))) +
                    " nodes";
    std::vector<std::string> hw;
    for (std::size_t i = 0; i < s.n_hw; ++i)
      if (b.hw.Test(i)) hw.push_back(s.hw_names[i]);
    if (hw.size() < s.n_hw) q += " of " + ListText(hw);
    parts.push_back(q);
  }
  for (const auto& c : s.problem.cc) parts.push_back("cantcoexist " + ListText(c.services));
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

std::string Hostname(const std::string& cluster, std::int64_t n, const std::string& suffix) {
  std::string h = cluster + "-" + std::to_string(n);
  if (!suffix.empty()) h += "." + suffix;
  return h;
}

// The request itself: a cluster name that can start a hostname, a size in range.
Status CheckRequest(const ClusterTemplate& t, const SolveRequest& req) {
  const std::int64_t nodes = req.size;
  const auto& con = t.constraints;
  if (req.cluster_name.empty() || req.cluster_name.size() > 48 || req.cluster_name.front() == '-' ||
      !std::all_of(req.cluster_name.begin(), req.cluster_name.end(),
                   [](unsigned char ch) { return std::isalnum(ch) || ch == '-'; })) {
    return Status::Invalid("cluster name '" + req.cluster_name +
                           "' cannot start a hostname; use 1 to 48 letters, digits and '-', not starting with '-'");
  }
  if (nodes < 1) return Status::Invalid("template '" + t.name + "': size must be at least 1, got " + std::to_string(nodes));
  if ((con.size_min && nodes < *con.size_min) || (con.size_max && nodes > *con.size_max)) {
    return Status::Invalid("template '" + t.name + "': size " + std::to_string(nodes) + " is outside constraints.size (" +
                           (con.size_min ? "min " + std::to_string(*con.size_min) : std::string("no min")) + ", " +
                           (con.size_max ? "max " + std::to_string(*con.size_max) : std::string("no max")) +
                           "); ask for a size in that range");
  }
  if (nodes > 1'000'000) return Status::TooLarge("template '" + t.name + "': size " + std::to_string(nodes) +
                                                 " is more than the solver's limit of 1000000 nodes");
  return Status::Ok();
}

// The cluster's current nodes, as the search sees them.
struct Existing {
  std::vector<LayoutNode> nodes;        // sorted by hostname
  std::set<std::string> old_services;  // what they run
  std::vector<Cls> fixed;               // one class per (blocks, hardware, image)
};

// Existing nodes: fixed classes. A hardware or image type no longer usable keeps its
// node and gets an index of its own past the usable ones.
Status FixExisting(const SolveRequest& req, Setup& s, Existing& e) {
  const Problem& p = s.problem;
  e.nodes = req.existing;
  std::sort(e.nodes.begin(), e.nodes.end(),
            [](const LayoutNode& a, const LayoutNode& b) { return NaturalLess(a.hostname, b.hostname); });
  std::map<std::tuple<Bits, std::string, std::string>, std::size_t> by_key;
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    const auto& n = e.nodes[i];
    Cls c;
    c.content = Bits(p.blocks.size());
    for (const auto& svc : n.services) {
      if (!std::binary_search(s.services.begin(), s.services.end(), svc))
        return Bad(s, "existing node '" + n.hostname + "' runs '" + svc +
                          "', which is not among the requested services " + ListText(s.services) +
                          "; removing services from a cluster is not supported");
      e.old_services.insert(svc);
      if (auto it = s.block_of.find(svc); it != s.block_of.end()) c.content.Set(it->second);
    }
    for (int pass = 0; pass < 2; ++pass) {
      auto& names = pass == 0 ? s.hw_names : s.img_names;
      const std::string& name = pass == 0 ? n.hardwaretype : n.imagetype;
      auto it = std::find(names.begin(), names.end(), name);
      std::size_t idx = static_cast<std::size_t>(it - names.begin());
      if (it == names.end()) names.push_back(name);
      (pass == 0 ? c.hw : c.img) = Bits(std::max<std::size_t>(names.size(), 1) + 64);
      (pass == 0 ? c.hw : c.img).Set(idx);
    }
    auto key = std::make_tuple(c.content, n.hardwaretype, n.imagetype);
    auto [it, inserted] = by_key.emplace(key, e.fixed.size());
    if (inserted) {
      c.fixed = true;
      e.fixed.push_back(std::move(c));
    }
    e.fixed[it->second].count += 1;
    e.fixed[it->second].nodes.push_back(static_cast<int>(i));
  }
  return Status::Ok();
}

// `b`'s first n_old bits in a mask `width` bits wide.
Bits Widen(const Bits& b, std::size_t n_old, std::size_t width) {
  Bits w(width);
  for (std::size_t i = 0; i < n_old; ++i)
    if (b.Test(i)) w.Set(i);
  return w;
}

// Mask widths once existing nodes added their types to the index spaces.
std::size_t HwBits(const Setup& s) { return s.hw_names.size() + 64; }
std::size_t ImgBits(const Setup& s) { return s.img_names.size() + 64; }

// Bit widths must agree: size every hardware/image mask to the final index spaces.
// Blocks an existing node runs a service of are `old`.
void WidenMasks(Setup& s, Existing& e) {
  for (auto& b : s.problem.blocks) {
    b.hw = Widen(b.hw, s.n_hw, HwBits(s));
    b.img = Widen(b.img, s.n_img, ImgBits(s));
    b.old = std::any_of(b.services.begin(), b.services.end(),
                        [&](const std::string& n) { return e.old_services.count(n) > 0; });
  }
  for (auto& c : e.fixed) {
    c.hw = Widen(c.hw, s.hw_names.size(), HwBits(s));
    c.img = Widen(c.img, s.img_names.size(), ImgBits(s));
  }
}

// A new service that mustcoexist ties to what an existing node runs joins that node,
// so its hardware/image restrictions must allow the node.
Status CheckJoinsExisting(const Setup& s, const Existing& e) {
  const Problem& p = s.problem;
  for (const auto& c : e.fixed) {
    for (std::size_t bi = 0; bi < p.blocks.size(); ++bi) {
      const Block& b = p.blocks[bi];
      if (!c.content.Test(bi)) continue;
      for (const auto& svc : b.services) {
        if (e.old_services.count(svc)) continue;
        if (!c.hw.Intersects(b.hw) || !c.img.Intersects(b.img)) {
          const auto& node = e.nodes[static_cast<std::size_t>(c.nodes.front())];
          return Impossible(s, "new service '" + svc + "' must join existing node '" + node.hostname + "' (" +
                                   BlockText(b) + "), but its hardware/image restrictions do not allow " +
                                   node.hardwaretype + "/" + node.imagetype +
                                   "; change constraints.services." + svc + " or the mustcoexist group");
        }
      }
    }
  }
  return Status::Ok();
}

// Growing (or keeping the size): no block may already exceed its maximum on the
// existing nodes.
Status CheckExistingWithinMax(const Setup& s, const Existing& e) {
  const Problem& p = s.problem;
  for (const auto& b : p.blocks) {
    std::int64_t on = 0;
    for (const auto& c : e.fixed)
      if (c.content.Test(static_cast<std::size_t>(&b - p.blocks.data()))) on += c.count;
    if (on > b.hi)
      return Impossible(s, "service '" + b.services[0] + "' already runs on " + Plural(on, "existing node") +
                               ", more than its quantities.max " + std::to_string(b.hi) +
                               "; fix the template before changing the cluster");
  }
  return Status::Ok();
}

// Growing (or keeping the size): the existing nodes plus one class of new, empty nodes.
bool SearchGrow(Search& search, const Setup& s, const Existing& e, std::int64_t nodes, std::vector<Cls>& solved) {
  const std::int64_t n_existing = static_cast<std::int64_t>(e.nodes.size());
  std::vector<Cls> start = e.fixed;
  if (nodes > n_existing) {
    Cls free;
    free.content = Bits(s.problem.blocks.size());
    free.hw = Widen(Bits::All(s.n_hw), s.n_hw, HwBits(s));
    free.img = Widen(Bits::All(s.n_img), s.n_img, ImgBits(s));
    free.count = nodes - n_existing;
    start.push_back(std::move(free));
  }
  return search.Run(std::move(start), solved);
}

// Shrink: choose how many nodes of each fixed class stay, then place new services.
// Small kinds (masters) are decided first and kept whole when they can be; the
// big kinds absorb the removal.
bool SearchShrink(Search& search, const Problem& p, std::vector<Cls> fixed, std::int64_t nodes,
                  std::vector<Cls>& solved) {
  std::stable_sort(fixed.begin(), fixed.end(), [](const Cls& a, const Cls& b) { return a.count < b.count; });
  std::vector<std::int64_t> keep(fixed.size(), 0);
  std::function<bool(std::size_t, std::int64_t)> choose = [&](std::size_t i, std::int64_t left) -> bool {
    if (!search.Tick()) return false;
    if (i == fixed.size()) {
      if (left != 0) return false;
      std::vector<Cls> kept;
      for (std::size_t k = 0; k < fixed.size(); ++k) {
        if (keep[k] == 0) continue;
        Cls c = fixed[k];
        c.count = keep[k];
        c.nodes.resize(static_cast<std::size_t>(keep[k]));  // the lowest-numbered stay
        kept.push_back(std::move(c));
      }
      for (std::size_t bi = 0; bi < p.blocks.size(); ++bi) {
        std::int64_t on = search.CountWith(kept, static_cast<int>(bi));
        if (p.blocks[bi].old && (on < p.blocks[bi].lo || on > p.blocks[bi].hi)) return false;
      }
      return search.Run(std::move(kept), solved);
    }
    std::int64_t rest = 0;
    for (std::size_t k = i + 1; k < fixed.size(); ++k) rest += fixed[k].count;
    std::int64_t top = std::min(fixed[i].count, left);
    for (std::int64_t v = top; v >= std::max<std::int64_t>(0, left - rest); --v) {
      keep[i] = v;
      if (choose(i + 1, left - v)) return true;
      if (search.exhausted()) return false;
    }
    return false;
  };
  return choose(0, nodes);
}

// Why no layout came out: the search bound, or constraints that cannot all hold.
Status NoLayout(const Search& search, const ClusterTemplate& t, const Setup& s, std::int64_t nodes,
                bool has_existing) {
  if (search.exhausted()) {
    return Status::Timeout("template '" + t.name + "': the solver stopped after " +
                           std::to_string(search.steps()) + " search steps without finding a layout of " +
                           Plural(nodes, "node") + " or proving that none exists; relax the constraints (" +
                           Summary(s, nodes) + ") or raise the search bound");
  }
  return Impossible(s, "no layout of " + Plural(nodes, "node") + (has_existing ? " that keeps the existing nodes" : "") +
                           " meets all constraints together: " + Summary(s, nodes) +
                           "; relax one of them or change the size");
}

// New nodes are numbered after the highest <cluster>-<n> among the existing ones
// and the taken hostnames (and after their count).
std::int64_t FirstNewIndex(const std::string& cluster_name, const std::vector<LayoutNode>& existing,
                           const std::vector<std::string>& taken) {
  std::int64_t next_index = 0;
  const std::string prefix = cluster_name + "-";
  auto number = [&](const std::string& hostname) {
    std::string label = hostname.substr(0, hostname.find('.'));
    if (label.rfind(prefix, 0) == 0 && label.size() > prefix.size() &&
        std::all_of(label.begin() + static_cast<std::ptrdiff_t>(prefix.size()), label.end(),
                    [](unsigned char ch) { return std::isdigit(ch); }) &&
        label.size() - prefix.size() < 12)
      next_index = std::max<std::int64_t>(next_index, std::stoll(label.substr(prefix.size())));
  };
  for (const auto& n : existing) number(n.hostname);
  for (const std::string& hostname : taken) number(hostname);
  return std::max(next_index, static_cast<std::int64_t>(existing.size() + taken.size())) + 1;
}

// A class's services: the unconstrained ones, its blocks', and `base` (what an
// existing node already runs), sorted.
std::vector<std::string> ServicesOf(const Setup& s, const Cls& c, const std::vector<std::string>* base) {
  std::set<std::string> out(s.unconstrained.begin(), s.unconstrained.end());
  if (base) out.insert(base->begin(), base->end());
  for (std::size_t bi = 0; bi < s.problem.blocks.size(); ++bi)
    if (c.content.Test(bi)) out.insert(s.problem.blocks[bi].services.begin(), s.problem.blocks[bi].services.end());
  return std::vector<std::string>(out.begin(), out.end());
}

// Build the layout: existing nodes keep their hostnames and gain their new services;
// new nodes get the next numbers and the preferred hardware and image their class allows.
Layout BuildLayout(const catalog::Catalog& cat, const ClusterTemplate& t, const SolveRequest& req, const Setup& s,
                   const std::vector<LayoutNode>& existing, const std::vector<Cls>& solved) {
  Layout layout;
  std::int64_t next_index = FirstNewIndex(req.cluster_name, existing, req.taken);
  std::vector<std::pair<std::vector<std::string>, const Cls*>> free_classes;
  for (const auto& c : solved) {
    if (c.fixed) {
      for (int idx : c.nodes) {
        LayoutNode n = existing[static_cast<std::size_t>(idx)];
        n.services = ServicesOf(s, c, &n.services);
        layout.nodes.push_back(std::move(n));
      }
    } else {
      free_classes.emplace_back(ServicesOf(s, c, nullptr), &c);
    }
  }
  // Small groups (masters) get the low numbers.
  std::sort(free_classes.begin(), free_classes.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->count, a.first) < std::tie(b.second->count, b.first);
  });
  for (const auto& [svcs, c] : free_classes) {
    std::size_t hw = (s.preferred_hw >= 0 && c->hw.Test(static_cast<std::size_t>(s.preferred_hw)))
                         ? static_cast<std::size_t>(s.preferred_hw)
                         : c->hw.First();
    std::size_t img = (s.preferred_img >= 0 && c->img.Test(static_cast<std::size_t>(s.preferred_img)))
                          ? static_cast<std::size_t>(s.preferred_img)
                          : c->img.First();
    const auto& hwm = cat.FindHardwareType(s.hw_names[hw])->providermap.at(s.provider);
    const auto& imm = cat.FindImageType(s.img_names[img])->providermap.at(s.provider);
    for (std::int64_t k = 0; k < c->count; ++k) {
      LayoutNode n;
      n.hostname = Hostname(req.cluster_name, next_index++, t.defaults.dns_suffix);
      n.hardwaretype = s.hw_names[hw];
      n.imagetype = s.img_names[img];
      n.flavor = hwm.flavor;
      n.image = imm.image;
      n.sshuser = imm.sshuser;
      n.services = svcs;
      layout.nodes.push_back(std::move(n));
    }
  }
  auto by_host = [](const LayoutNode& a, const LayoutNode& b) { return NaturalLess(a.hostname, b.hostname); };
  if (!std::is_sorted(layout.nodes.begin(), layout.nodes.end(), by_host))
    std::sort(layout.nodes.begin(), layout.nodes.end(), by_host);
  return layout;
}

}  // namespace

Result<Layout> Solve(const catalog::Catalog& cat, const ClusterTemplate& t, const SolveRequest& req,
                     const SolveOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckRequest(t, req));
  const std::int64_t nodes = req.size;
  Setup s;
  WEFT_RETURN_IF_ERROR(Prepare(cat, t, req, nodes, s));
  Existing e;
  WEFT_RETURN_IF_ERROR(FixExisting(req, s, e));
  WidenMasks(s, e);
  WEFT_RETURN_IF_ERROR(CheckJoinsExisting(s, e));

  Search search(s.problem, options);
  std::vector<Cls> solved;
  bool found = false;
  if (nodes >= static_cast<std::int64_t>(e.nodes.size())) {
    WEFT_RETURN_IF_ERROR(CheckExistingWithinMax(s, e));
    found = SearchGrow(search, s, e, nodes, solved);
  } else {
    found = SearchShrink(search, s.problem, std::move(e.fixed), nodes, solved);
  }
  if (!found) return NoLayout(search, t, s, nodes, !e.nodes.empty());
  return BuildLayout(cat, t, req, s, e.nodes, solved);
}

}  // namespace weft::solver
