// The metrics registry and its text exposition format, in-process.
#include <string>

#include <catch2/catch.hpp>

#include "weft/common/metrics.hpp"

namespace weft::metrics {
namespace {

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

}  // namespace

TEST_CASE("metrics: counters and gauges render with HELP, TYPE and escaped labels", "[metrics]") {
  Registry r;
  Counter& c = r.AddCounter("weft_things_total", "Things.\nCounted.", {{"kind", "a \"b\" \\ c"}});
  c.Inc();
  c.Inc(4);
  r.AddGauge("weft_level", "A level.").Set(2.5);
  // The same name and labels are the same counter.
  REQUIRE(&r.AddCounter("weft_things_total", "Things.", {{"kind", "a \"b\" \\ c"}}) == &c);
  const std::string text = r.Render();
  CHECK(Has(text, "# HELP weft_things_total Things.\\nCounted."));
  CHECK(Has(text, "# TYPE weft_things_total counter"));
  CHECK(Has(text, "weft_things_total{kind=\"a \\\"b\\\" \\\\ c\"} 5"));
  CHECK(Has(text, "# TYPE weft_level gauge"));
  CHECK(Has(text, "weft_level 2.5"));
  // Families come sorted by name.
  CHECK(text.find("weft_level") < text.find("weft_things_total"));
}

TEST_CASE("metrics: a histogram's buckets are cumulative and end with +Inf, _count and _sum", "[metrics]") {
  Registry r;
  const double bounds[] = {0.1, 1, 10};
  Histogram& h = r.AddHistogram("weft_wait_seconds", "Waits.", bounds, {{"op", "x"}});
  h.Observe(0.05);
  h.Observe(0.1);  // on a bound: in that bucket (le means "less or equal")
  h.Observe(5);
  h.Observe(50);
  const std::string text = r.Render();
  CHECK(Has(text, "# TYPE weft_wait_seconds histogram"));
  CHECK(Has(text, "weft_wait_seconds_bucket{op=\"x\",le=\"0.1\"} 2"));
  CHECK(Has(text, "weft_wait_seconds_bucket{op=\"x\",le=\"1\"} 2"));
  CHECK(Has(text, "weft_wait_seconds_bucket{op=\"x\",le=\"10\"} 3"));
  CHECK(Has(text, "weft_wait_seconds_bucket{op=\"x\",le=\"+Inf\"} 4"));
  CHECK(Has(text, "weft_wait_seconds_count{op=\"x\"} 4"));
  CHECK(text.find("weft_wait_seconds_sum{op=\"x\"} 55.1") != std::string::npos);
  CHECK(h.count() == 4);
}

TEST_CASE("metrics: published snapshots replace the last one and merge with collectors by family", "[metrics]") {
  Registry r;
  r.Publish("reactor", {{"weft_hosts_live", "Live hosts.", "gauge", {{{}, 3}}}});
  r.Publish("reactor", {{"weft_hosts_live", "Live hosts.", "gauge", {{{}, 2}}}});
  r.AddCollector([] {
    return Snapshot{{"weft_tasks", "Tasks.", "gauge", {{{{"state", "queued"}}, 7}}}};
  });
  r.Publish("other", {{"weft_tasks", "Tasks.", "gauge", {{{{"state", "leased"}}, 1}}}});
  const std::string text = r.Render();
  CHECK(Has(text, "weft_hosts_live 2"));
  CHECK(text.find("weft_hosts_live 3") == std::string::npos);
  // One HELP and TYPE for a family, whoever gives its samples.
  const std::size_t first = text.find("# TYPE weft_tasks gauge");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("# TYPE weft_tasks gauge", first + 1) == std::string::npos);
  CHECK(Has(text, "weft_tasks{state=\"leased\"} 1"));
  CHECK(Has(text, "weft_tasks{state=\"queued\"} 7"));
}

TEST_CASE("metrics: the process's own figures come from /proc", "[metrics]") {
  Registry r;
  r.AddCollector(ProcessSnapshot);
  const std::string text = r.Render();
  CHECK(text.find("\nprocess_cpu_seconds_total ") != std::string::npos);
  CHECK(text.find("\nprocess_resident_memory_bytes ") != std::string::npos);
  CHECK(text.find("\nprocess_open_fds ") != std::string::npos);
  CHECK(text.find("\nprocess_start_time_seconds ") != std::string::npos);
}

}  // namespace weft::metrics
