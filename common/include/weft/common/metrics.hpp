// weft::metrics: counters, gauges and histograms rendered in the Prometheus
// text exposition format (version 0.0.4), written by hand: Weft needs a few
// dozen families, and the hot paths must cost one relaxed atomic add each,
// with no lock, lookup or string built per event.
//
// A metric (one family plus one set of label values) is registered once, at
// start-up or the first time a new label value appears, and the caller keeps
// the reference: registration takes the registry's mutex, updating never does.
// State that one thread owns (the reactor's queue, hosts, clusters) is
// published as a whole Snapshot now and then and rendered as it was last
// published. Collectors run on the rendering thread at each scrape (the
// process's own figures from /proc).
//
// Counter, Gauge and Histogram are thread-safe; so is Registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::metrics {

// Label names and values, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Fixed upper bounds (ascending, in the metric's base unit) plus +Inf.
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket, not cumulative; the last is +Inf.
  std::vector<std::uint64_t> counts() const;
  std::uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// Bucket bounds, in seconds, for what Weft measures.
namespace buckets {
// A request handled in the reactor, a commit: 50 µs to 2.5 s.
inline constexpr double kFast[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                   0.01,    0.025,  0.05,    0.1,    0.25,  0.5,   1,     2.5};
// A task waiting in the queue or running on a host: 1 ms to 30 min.
inline constexpr double kTask[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};
// A job or a cluster's creation: 100 ms to 4 h.
inline constexpr double kJob[] = {0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400};
}  // namespace buckets

// Values computed elsewhere and handed over whole (gauges, or counters kept by their owner).
struct Sample {
  Labels labels;
  double value = 0;
};
struct Family {
  std::string name;
  std::string help;
  std::string type = "gauge";  // "gauge" or "counter"
  std::vector<Sample> samples;
};
using Snapshot = std::vector<Family>;

class Registry {
 public:
  // The same name and labels twice give the same metric. A name registered
  // with another type or other bucket bounds is a programming error (abort).
  Counter& AddCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& AddGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& AddHistogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                          const Labels& labels = {});

  // Replaces what `source` published before.
  void Publish(const std::string& source, Snapshot snapshot);
  // Runs at every Render, on the rendering thread.
  void AddCollector(std::function<Snapshot()> collector);

  // Every family, sorted by name, in the text exposition format.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Child {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Entry {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> bounds;
    std::map<std::string, Child> children;  // rendered labels -> metric
  };
  Child& Add(Type type, std::string_view name, std::string_view help, const Labels& labels,
             std::span<const double> bounds);

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, Snapshot> published_;
  std::vector<std::function<Snapshot()>> collectors_;
};

// `{a="x",b="y"}` with the values escaped; "" for no labels.
std::string RenderLabels(const Labels& labels);

// process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds,
// process_max_fds and process_start_time_seconds of this process, from /proc.
Snapshot ProcessSnapshot();

}  // namespace weft::metrics
