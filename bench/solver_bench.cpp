// `weft-bench solver [--repeat N] [--naive-cap-ms MS]`: the layout solver on a
// Hadoop-like template (10 .. 10,000 nodes) and on synthetic templates with 10 .. 40
// constrained services, against a naive Coopr-style solver (every subset of the
// constrained services as a node layout, then a search over counts) where that one
// finishes within the cap. One JSON line per case; medians over repeated runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench.hpp"
#include "weft/solver/solver.hpp"

namespace {

using nlohmann::json;
using weft::catalog::Catalog;
using weft::catalog::ClusterTemplate;
using weft::catalog::Kind;
using Clock = std::chrono::steady_clock;

constexpr double kTargetMs = 100.0;

struct BenchCase {
  std::string name;
  Catalog catalog;
  ClusterTemplate tmpl;
  std::int64_t size = 0;
};

Catalog BaseCatalog(const std::vector<std::string>& services) {
  Catalog c;
  auto put = [&](Kind k, const json& doc) {
    auto r = c.PutJson(k, doc);
    if (!r.ok()) std::fprintf(stderr, "solver bench: %s\n", r.status().ToString().c_str());
  };
  put(Kind::kProvider, {{"name", "fake"}, {"providertype", "fake-provider"}});
  put(Kind::kHardwareType, {{"name", "standard-large"}, {"providermap", {{"fake", {{"flavor", "l"}}}}}});
  put(Kind::kHardwareType, {{"name", "standard-xlarge"}, {"providermap", {{"fake", {{"flavor", "xl"}}}}}});
  put(Kind::kImageType, {{"name", "debian12"}, {"providermap", {{"fake", {{"image", "d12"}, {"sshuser", "root"}}}}}});
  for (const auto& s : services) put(Kind::kService, {{"name", s}});
  return c;
}

ClusterTemplate ParseOrDie(const json& doc) {
  auto r = weft::catalog::ParseClusterTemplate(doc);
  if (!r.ok()) {
    std::fprintf(stderr, "solver bench: bad template: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return r->entity;
}

BenchCase Hadoop(std::int64_t size) {
  std::vector<std::string> s = {"base",           "hdfs-namenode", "hdfs-secondarynamenode", "yarn-resourcemanager",
                                "hbase-master",   "zookeeper",     "hdfs-datanode",          "yarn-nodemanager",
                                "hbase-regionserver", "hive-metastore"};
  json doc = {
      {"name", "hadoop-distributed"},
      {"compatibility", {{"hardwaretypes", {"standard-large", "standard-xlarge"}}, {"imagetypes", {"debian12"}},
                         {"services", s}}},
      {"defaults", {{"services", s}, {"provider", "fake"}, {"hardwaretype", "standard-large"}, {"dnsSuffix", "b.test"}}},
      {"constraints",
       {{"layout",
         {{"mustcoexist", json::array({json::array({"hdfs-datanode", "yarn-nodemanager", "hbase-regionserver"})})},
          {"cantcoexist", json::array({json::array({"hdfs-namenode", "hdfs-datanode"}),
                                       json::array({"yarn-resourcemanager", "yarn-nodemanager"}),
                                       json::array({"hdfs-namenode", "hdfs-secondarynamenode"}),
                                       json::array({"hbase-master", "hbase-regionserver"})})}}},
        {"services",
         {{"hdfs-namenode", {{"hardwaretypes", {"standard-xlarge"}}, {"quantities", {{"min", 1}, {"max", 1}}}}},
          {"hdfs-secondarynamenode", {{"quantities", {{"min", 1}, {"max", 1}}}}},
          {"yarn-resourcemanager", {{"quantities", {{"min", 1}, {"max", 1}}}}},
          {"hbase-master", {{"quantities", {{"min", 1}, {"max", 1}}}}},
          {"zookeeper", {{"quantities", {{"min", 1}, {"max", 3}}}}},
          {"hive-metastore", {{"quantities", {{"max", 1}}}}},
          {"hdfs-datanode", {{"quantities", {{"min", 1}}}}}}}}}};
  return {"hadoop-" + std::to_string(size), BaseCatalog(s), ParseOrDie(doc), size};
}

// n constrained services: mustcoexist pairs, cantcoexist pairs and triples, bounded
// and unbounded quantities, a few hardware restrictions. Built to be solvable.
BenchCase Synthetic(int n, std::int64_t size) {
  std::vector<std::string> s;
  for (int i = 0; i < n; ++i) s.push_back("svc" + std::to_string(i));
  json must = json::array(), cant = json::array(), svcs = json::object();
  for (int i = 0; i + 1 < n; i += 5) must.push_back({s[i], s[i + 1]});
  for (int i = 0; i + 3 < n; i += 3) cant.push_back({s[i + 1], s[i + 3]});
  for (int i = 0; i + 6 < n; i += 7) cant.push_back({s[i], s[i + 2], s[i + 6]});
  for (int i = 0; i < n; ++i) {
    json body = json::object();
    if (i % 5 == 1) body["quantities"] = {{"min", 1}};  // the partner in a mustcoexist pair
    else if (i % 4 == 2) body["quantities"] = {{"min", 1}, {"max", 1 + i % 3}};
    else if (i % 4 == 3) body["quantities"] = {{"min", 2}};
    else body["quantities"] = {{"min", 1}};
    if (i % 9 == 4) body["hardwaretypes"] = {"standard-xlarge"};
    svcs[s[i]] = body;
  }
  json doc = {{"name", "synthetic-" + std::to_string(n)},
              {"compatibility", {{"hardwaretypes", {"standard-large", "standard-xlarge"}}, {"imagetypes", {"debian12"}},
                                 {"services", s}}},
              {"defaults", {{"services", s}, {"provider", "fake"}}},
              {"constraints", {{"layout", {{"mustcoexist", must}, {"cantcoexist", cant}}}, {"services", svcs}}}};
  return {"synthetic-" + std::to_string(n), BaseCatalog(s), ParseOrDie(doc), size};
}

// ---- The naive, Coopr-style solver: 2^N node layouts, then counts per layout. ----

class NaiveSolver {
 public:
  NaiveSolver(const BenchCase& c, double cap_ms) : c_(c), deadline_(Clock::now() + Ms(cap_ms)) {}

  // True when a layout was found; nullopt when the cap was reached.
  std::optional<bool> Run() {
    const auto& t = c_.tmpl;
    std::set<std::string> named;
    for (const auto& g : t.constraints.mustcoexist) named.insert(g.begin(), g.end());
    for (const auto& g : t.constraints.cantcoexist) named.insert(g.begin(), g.end());
    for (const auto& [n, sc] : t.constraints.services) named.insert(n);
    for (const auto& n : t.defaults.services)
      if (named.count(n)) svc_.push_back(n);
    const std::size_t n = svc_.size();
    if (n >= 63) return std::nullopt;
    for (std::size_t i = 0; i < n; ++i) {
      auto it = t.constraints.services.find(svc_[i]);
      lo_.push_back(1);
      hi_.push_back(c_.size);
      std::set<std::string> hw(t.compatibility.hardwaretypes.begin(), t.compatibility.hardwaretypes.end());
      if (it != t.constraints.services.end()) {
        if (it->second.quantities.min) lo_[i] = std::max<std::int64_t>(1, *it->second.quantities.min);
        if (it->second.quantities.max) hi_[i] = std::min(c_.size, *it->second.quantities.max);
        if (!it->second.hardwaretypes.empty()) hw = {it->second.hardwaretypes.begin(), it->second.hardwaretypes.end()};
      }
      hw_.push_back(hw);
    }
    auto index = [&](const std::string& name) {
      return static_cast<int>(std::find(svc_.begin(), svc_.end(), name) - svc_.begin());
    };
    std::vector<std::uint64_t> must, cant;
    for (const auto& g : t.constraints.mustcoexist) {
      std::uint64_t m = 0;
      for (const auto& x : g)
        if (index(x) < static_cast<int>(n)) m |= 1ULL << index(x);
      must.push_back(m);
    }
    for (const auto& g : t.constraints.cantcoexist) {
      std::uint64_t m = 0;
      for (const auto& x : g) m |= 1ULL << index(x);
      cant.push_back(m);
    }
    // Every subset is a candidate node layout.
    for (std::uint64_t mask = 1; mask < (1ULL << n); ++mask) {
      if ((mask & 0xFFFF) == 0 && Clock::now() > deadline_) return std::nullopt;
      bool ok = true;
      for (auto m : must)
        if ((mask & m) && (mask & m) != m) ok = false;
      for (auto m : cant)
        if ((mask & m) == m) ok = false;
      if (!ok) continue;
      std::set<std::string> hw = {"standard-large", "standard-xlarge"};
      for (std::size_t i = 0; i < n && !hw.empty(); ++i) {
        if (!(mask & (1ULL << i))) continue;
        std::set<std::string> both;
        for (const auto& h : hw)
          if (hw_[i].count(h)) both.insert(h);
        hw = both;
      }
      if (!hw.empty()) layouts_.push_back(mask);
    }
    // Larger layouts first, as Coopr prefers fewer, fuller nodes.
    std::stable_sort(layouts_.begin(), layouts_.end(),
                     [](std::uint64_t a, std::uint64_t b) { return __builtin_popcountll(a) > __builtin_popcountll(b); });
    count_.assign(n, 0);
    chosen_.assign(layouts_.size(), 0);
    bool found = Counts(0, c_.size);
    if (timed_out_) return std::nullopt;
    if (found) Materialize();
    return found;
  }

 private:
  static Clock::duration Ms(double ms) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }

  bool Counts(std::size_t i, std::int64_t left) {
    if ((++steps_ & 0x3FF) == 0 && Clock::now() > deadline_) timed_out_ = true;
    if (timed_out_) return false;
    if (left == 0) {
      for (std::size_t k = 0; k < svc_.size(); ++k)
        if (count_[k] < lo_[k]) return false;
      return true;
    }
    if (i == layouts_.size()) return false;
    const std::uint64_t m = layouts_[i];
    std::int64_t top = left;
    for (std::size_t k = 0; k < svc_.size(); ++k)
      if (m & (1ULL << k)) top = std::min(top, hi_[k] - count_[k]);
    for (std::int64_t v = top; v >= 0; --v) {
      for (std::size_t k = 0; k < svc_.size(); ++k)
        if (m & (1ULL << k)) count_[k] += v;
      chosen_[i] = v;
      bool found = Counts(i + 1, left - v);
      for (std::size_t k = 0; k < svc_.size(); ++k)
        if (m & (1ULL << k)) count_[k] -= v;
      if (found) return true;
      if (timed_out_) return false;
    }
    return false;
  }

  // The same output the real solver builds: one node per count, with names.
  void Materialize() {
    std::set<std::string> unconstrained;
    for (const auto& n : c_.tmpl.defaults.services)
      if (std::find(svc_.begin(), svc_.end(), n) == svc_.end()) unconstrained.insert(n);
    std::int64_t host = 1;
    for (std::size_t i = 0; i < layouts_.size(); ++i) {
      std::vector<std::string> services(unconstrained.begin(), unconstrained.end());
      for (std::size_t k = 0; k < svc_.size(); ++k)
        if (layouts_[i] & (1ULL << k)) services.push_back(svc_[k]);
      std::sort(services.begin(), services.end());
      for (std::int64_t k = 0; k < chosen_[i]; ++k) {
        weft::catalog::LayoutNode node;
        node.hostname = "bench-" + std::to_string(host++);
        node.hardwaretype = "standard-large";
        node.imagetype = "debian12";
        node.services = services;
        nodes_.push_back(std::move(node));
      }
    }
  }

  const BenchCase& c_;
  Clock::time_point deadline_;
  std::vector<std::int64_t> chosen_;
  std::vector<weft::catalog::LayoutNode> nodes_;
  std::vector<std::string> svc_;
  std::vector<std::int64_t> lo_, hi_, count_;
  std::vector<std::set<std::string>> hw_;
  std::vector<std::uint64_t> layouts_;
  std::int64_t steps_ = 0;
  bool timed_out_ = false;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double ElapsedMs(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string Num(std::optional<double> v) {
  if (!v) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", *v);
  return buf;
}

int RunSolverBench(const std::vector<std::string>& args) {
  int repeat = 7;
  bool show = false;
  double naive_cap_ms = 2000;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    if (args[i] == "--show") {
      show = true;
      --i;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "usage: weft-bench solver [--repeat N] [--naive-cap-ms MS] [--show]\n");
      return 2;
    }
    if (args[i] == "--repeat") repeat = std::max(1, std::stoi(args[i + 1]));
    else if (args[i] == "--naive-cap-ms") naive_cap_ms = std::stod(args[i + 1]);
    else {
      std::fprintf(stderr, "usage: weft-bench solver [--repeat N] [--naive-cap-ms MS] [--show]\n");
      return 2;
    }
  }
  std::vector<BenchCase> cases;
  for (std::int64_t size : {10, 100, 1000, 10000}) cases.push_back(Hadoop(size));
  for (int n : {10, 20, 30, 40}) cases.push_back(Synthetic(n, 100));
  cases.push_back(Synthetic(40, 10000));
  cases.back().name = "synthetic-40-10000";

  bool all_ok = true;
  for (const auto& c : cases) {
    weft::solver::SolveRequest req;
    req.cluster_name = "bench";
    req.size = c.size;
    std::vector<double> ours;
    std::string error;
    std::size_t node_kinds = 0;
    for (int r = 0; r < repeat; ++r) {
      auto start = Clock::now();
      auto layout = weft::solver::Solve(c.catalog, c.tmpl, req);
      ours.push_back(ElapsedMs(start));
      if (!layout.ok()) {
        error = layout.status().ToString();
        break;
      }
      auto summary = weft::catalog::LayoutSummary(*layout);
      node_kinds = summary.size();
      if (show && r == 0)
        for (const auto& line : summary) std::fprintf(stderr, "%s: %s\n", c.name.c_str(), line.c_str());
    }
    std::vector<double> naive;
    bool naive_capped = false;
    for (int r = 0; r < repeat && !naive_capped; ++r) {
      auto start = Clock::now();
      auto found = NaiveSolver(c, naive_cap_ms).Run();
      if (!found) naive_capped = true;
      else naive.push_back(ElapsedMs(start));
    }
    double med = Median(ours);
    std::optional<double> naive_med, speedup;
    if (!naive_capped && !naive.empty()) {
      naive_med = Median(naive);
      speedup = med > 0 ? *naive_med / med : std::optional<double>();
    }
    if (!error.empty() || med >= kTargetMs) all_ok = false;
    std::printf(
        "{\"bench\":\"solver\",\"case\":\"%s\",\"nodes\":%lld,\"services\":%zu,\"median_ms\":%s,"
        "\"naive_median_ms\":%s,\"speedup\":%s,\"target_ms\":%.0f,\"node_kinds\":%zu,\"ok\":%s%s}\n",
        c.name.c_str(), static_cast<long long>(c.size), c.tmpl.defaults.services.size(), Num(med).c_str(),
        Num(naive_med).c_str(), Num(speedup).c_str(), kTargetMs, node_kinds, error.empty() ? "true" : "false",
        error.empty() ? "" : (",\"error\":" + json(error).dump()).c_str());
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}

}  // namespace

WEFT_BENCH("solver", "layout solver vs naive subset enumeration (Hadoop-like and synthetic templates)",
           RunSolverBench);
