// weft-bench planner: how long the planner takes to turn a create of N nodes ×
// 8 services (Hadoop-like dependencies, every service on every node) into its
// task DAG, and how much memory the plan needs. Medians of R runs per size;
// the 100- and 1,000-node cases in the same run show how it scales.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "weft/planner/planner.hpp"

namespace weft::bench {
namespace {

using planner::Action;

planner::ServiceSpec Service(std::string name, std::vector<std::string> install, std::vector<std::string> runtime) {
  planner::ServiceSpec s;
  s.name = std::move(name);
  s.install_requires = std::move(install);
  s.runtime_requires = std::move(runtime);
  s.actions = {Action::kInstall, Action::kConfigure, Action::kInitialize, Action::kStart, Action::kStop};
  return s;
}

planner::PlanRequest HadoopLike(int nodes) {
  planner::PlanRequest r;
  r.operation = planner::Operation::kCreate;
  r.services = {
      Service("base", {}, {}),
      Service("zookeeper", {"base"}, {}),
      Service("hdfs-namenode", {"base"}, {"zookeeper"}),
      Service("hdfs-datanode", {"base"}, {"hdfs-namenode"}),
      Service("yarn-resourcemanager", {"base"}, {"hdfs-namenode"}),
      Service("yarn-nodemanager", {"base"}, {"yarn-resourcemanager", "hdfs-datanode"}),
      Service("hbase-master", {"base"}, {"zookeeper", "hdfs-datanode"}),
      Service("hbase-regionserver", {"base"}, {"hbase-master"}),
  };
  std::vector<std::string> all;
  for (const auto& s : r.services) all.push_back(s.name);
  for (int i = 0; i < nodes; ++i) r.after.push_back({"node-" + std::to_string(i), all});
  return r;
}

long PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;  // kilobytes on Linux
}

int Run(const std::vector<std::string>& args) {
  int runs = 5;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2)
    if (args[i] == "--runs") runs = std::max(1, std::stoi(args[i + 1]));
  for (int nodes : {100, 1000, 10000}) {
    planner::PlanRequest request = HadoopLike(nodes);
    std::vector<double> ms;
    std::size_t tasks = 0, edges = 0;
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      auto plan = planner::MakePlan(request);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!plan.ok()) {
        std::fprintf(stderr, "weft-bench planner: %s\n", plan.status().ToString().c_str());
        return 1;
      }
      tasks = plan->tasks().size();
      edges = 0;
      for (const auto& t : plan->tasks()) edges += t.after.size();
    }
    std::sort(ms.begin(), ms.end());
    nlohmann::json line = {{"bench", "planner"},     {"case", "create-" + std::to_string(nodes)},
                           {"nodes", nodes},          {"services", request.services.size()},
                           {"tasks", tasks},          {"edges", edges},
                           {"runs", runs},            {"median_ms", ms[ms.size() / 2]},
                           {"peak_rss_mb", PeakRssMb()}, {"target_ms", 1000}};
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

WEFT_BENCH("planner", "plan a create of 10,000 nodes x 8 services (median, peak memory)", Run);

}  // namespace weft::bench
