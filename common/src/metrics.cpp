#include "weft/common/metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace weft::metrics {
namespace {

// A family's HELP line and its samples, gathered from wherever they come.
struct Text {
  std::string header;
  std::string body;
};

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
  // The shortest of 15 or 17 digits that reads back as the same double ("0.1", not "0.10000000000000001").
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string Header(const std::string& name, std::string_view help, std::string_view type) {
  return "# HELP " + name + " " + EscapeHelp(help) + "\n# TYPE " + name + " " + std::string(type) + "\n";
}

// Labels already rendered (`{a="x"}` or ""), with one more appended.
std::string WithLabel(const std::string& rendered, std::string_view name, const std::string& value) {
  const std::string extra = std::string(name) + "=\"" + value + "\"";
  if (rendered.empty()) return "{" + extra + "}";
  return rendered.substr(0, rendered.size() - 1) + "," + extra + "}";
}

void Abort(const std::string& why) {
  std::cerr << "weft metrics: " << why << "\n";
  std::abort();
}

}  // namespace

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), counts_(new std::atomic<std::uint64_t>[bounds.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // A dozen bounds: a linear scan beats a binary search.
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::counts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

std::uint64_t Histogram::count() const {
  std::uint64_t n = 0;
  for (std::uint64_t c : counts()) n += c;
  return n;
}

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ",";
    out += name + "=\"";
    for (char c : value) {
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    out += "\"";
  }
  return out + "}";
}

Registry::Child& Registry::Add(Type type, std::string_view name, std::string_view help, const Labels& labels,
                               std::span<const double> bounds) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    Entry e;
    e.type = type;
    e.help = std::string(help);
    e.bounds.assign(bounds.begin(), bounds.end());
    it = entries_.emplace(std::string(name), std::move(e)).first;
  } else if (it->second.type != type || !std::equal(bounds.begin(), bounds.end(), it->second.bounds.begin(),
                                                     it->second.bounds.end())) {
    Abort("metric " + std::string(name) + " registered twice with different types or buckets");
  }
  Child& child = it->second.children[RenderLabels(labels)];
  switch (type) {
    case Type::kCounter:
      if (!child.counter) child.counter = std::make_unique<Counter>();
      break;
    case Type::kGauge:
      if (!child.gauge) child.gauge = std::make_unique<Gauge>();
      break;
    case Type::kHistogram:
      if (!child.histogram) child.histogram = std::make_unique<Histogram>(bounds);
      break;
  }
  return child;
}

Counter& Registry::AddCounter(std::string_view name, std::string_view help, const Labels& labels) {
  return *Add(Type::kCounter, name, help, labels, {}).counter;
}

Gauge& Registry::AddGauge(std::string_view name, std::string_view help, const Labels& labels) {
  return *Add(Type::kGauge, name, help, labels, {}).gauge;
}

Histogram& Registry::AddHistogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                                  const Labels& labels) {
  return *Add(Type::kHistogram, name, help, labels, bounds).histogram;
}

void Registry::Publish(const std::string& source, Snapshot snapshot) {
  std::lock_guard lock(mu_);
  published_[source] = std::move(snapshot);
}

void Registry::AddCollector(std::function<Snapshot()> collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  std::map<std::string, Text> texts;
  auto add_family = [&](const Family& f) {
    Text& t = texts[f.name];
    if (t.header.empty()) t.header = Header(f.name, f.help, f.type);
    for (const Sample& s : f.samples) t.body += f.name + RenderLabels(s.labels) + " " + Number(s.value) + "\n";
  };
  std::vector<std::function<Snapshot()>> collectors;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, e] : entries_) {
      Text& t = texts[name];
      static constexpr std::string_view kTypes[] = {"counter", "gauge", "histogram"};
      t.header = Header(name, e.help, kTypes[static_cast<int>(e.type)]);
      for (const auto& [labels, child] : e.children) {
        if (child.counter) t.body += name + labels + " " + Number(static_cast<double>(child.counter->value())) + "\n";
        if (child.gauge) t.body += name + labels + " " + Number(child.gauge->value()) + "\n";
        if (!child.histogram) continue;
        const Histogram& h = *child.histogram;
        const std::vector<std::uint64_t> counts = h.counts();
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < counts.size(); ++i) {
          cumulative += counts[i];
          const std::string le = i < h.bounds().size() ? Number(h.bounds()[i]) : "+Inf";
          t.body += name + "_bucket" + WithLabel(labels, "le", le) + " " + std::to_string(cumulative) + "\n";
        }
        t.body += name + "_sum" + labels + " " + Number(h.sum()) + "\n";
        t.body += name + "_count" + labels + " " + std::to_string(cumulative) + "\n";
      }
    }
    for (const auto& [source, snapshot] : published_)
      for (const Family& f : snapshot) add_family(f);
    collectors = collectors_;
  }
  for (const auto& collect : collectors)
    for (const Family& f : collect()) add_family(f);
  std::string out;
  for (const auto& [name, t] : texts) out += t.header + t.body;
  return out;
}

Snapshot ProcessSnapshot() {
  Snapshot out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command name may hold spaces: the fields that follow start after its ')'.
  const std::size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string v; fields >> v;) f.push_back(v);
    // Here f[0] is field 3 (state): utime is field 14, stime 15, starttime 22, rss 24.
    if (f.size() > 21) {
      const double cpu = (std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr)) / ticks;
      out.push_back({"process_cpu_seconds_total", "User and system CPU time the process used, in seconds.",
                     "counter", {{{}, cpu}}});
      out.push_back({"process_resident_memory_bytes", "Resident memory of the process, in bytes.", "gauge",
                     {{{}, std::strtod(f[21].c_str(), nullptr) * page}}});
      std::ifstream boot("/proc/stat");
      for (std::string line; std::getline(boot, line);) {
        if (line.rfind("btime ", 0) != 0) continue;
        const double start = std::strtod(line.c_str() + 6, nullptr) + std::strtod(f[19].c_str(), nullptr) / ticks;
        out.push_back({"process_start_time_seconds", "When the process started, in seconds since the epoch.",
                       "gauge", {{{}, start}}});
      }
    }
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  out.push_back({"process_open_fds", "Open file descriptors of the process.", "gauge", {{{}, fds}}});
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    out.push_back({"process_max_fds", "The most file descriptors the process may open.", "gauge",
                   {{{}, static_cast<double>(limit.rlim_cur)}}});
  return out;
}

}  // namespace weft::metrics
