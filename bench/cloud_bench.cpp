// weft-bench cloud: a 50-node cluster create (then its delete) through the aws
// provider against moto_server, behind the proxy that counts EC2 calls
// (tests/support/moto.hpp). Prints the time and the EC2 calls per node, by
// action, next to the fewest calls the EC2 API needs for the same result.
//
// RunInstances is not batched: each node is a CREATE task of its own, with its
// own idempotency key (ClientToken) and tags, retried and undone on its own,
// so each makes one instance. EC2 could start all 50 in one RunInstances
// (MinCount = MaxCount = 50) and report them in one DescribeInstances.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "support/catalog_dir.hpp"
#include "support/moto.hpp"

namespace weft::bench {
namespace {

using json = nlohmann::json;

// The fewest EC2 calls that make `nodes` running instances and see their
// addresses: one ImportKeyPair, one RunInstances for all, one DescribeInstances
// that finds them running (in the best case). Deleting: one TerminateInstances.
constexpr int kMinCreateCalls = 3;
constexpr int kMinDeleteCalls = 1;

// A template of `fake-base` nodes (the fake automator: no SSH, no work) on the moto provider.
json Template() {
  return {{"name", "cloud-bench"},
          {"description", "fake-base nodes on moto's EC2, for weft-bench cloud"},
          {"administration", {{"leaseduration", {{"initial", "0"}, {"max", "0"}, {"step", "0"}}}}},
          {"compatibility", {{"hardwaretypes", {"small"}}, {"imagetypes", {"debian12"}}, {"services", {"fake-base"}}}},
          {"constraints", {{"size", {{"min", 1}, {"max", 1000}}}}},
          {"defaults",
           {{"provider", "aws-moto"},
            {"hardwaretype", "small"},
            {"imagetype", "debian12"},
            {"services", {"fake-base"}},
            {"dnsSuffix", "weft.test"}}}};
}

void ImportCatalog(testing::Weftd& weftd, const testing::Moto& moto, const fs::path& dir) {
  testing::CatalogDir catalog(dir);
  catalog.Put("providers", {{"name", "aws-moto"}, {"providertype", "aws"}, {"provisioner", moto.Fields()}});
  json small = catalog.Get("hardwaretypes", "small");
  small["providermap"]["aws-moto"] = {{"flavor", "t3.small"}};
  catalog.Put("hardwaretypes", small);
  json image = catalog.Get("imagetypes", "debian12");
  image["providermap"]["aws-moto"] = {{"image", moto.image()}, {"sshuser", "admin"}};
  catalog.Put("imagetypes", image);
  catalog.Put("clustertemplates", Template());
  const testing::RunResult r = weftd.Weft({"catalog", "import", catalog.path().string()});
  if (r.exit_code != 0) throw std::runtime_error("catalog import failed: " + r.out + r.err);
}

// Calls by action ("RunInstances 200" lines; retries and errors counted too).
std::map<std::string, int> ByAction(const std::vector<std::string>& calls) {
  std::map<std::string, int> out;
  for (const std::string& c : calls) ++out[c.substr(0, c.find(' '))];
  return out;
}

json Line(const std::string& what, int nodes, double ms, const std::vector<std::string>& calls, int minimum) {
  const double per_node = static_cast<double>(calls.size()) / nodes;
  return {{"bench", "cloud"},
          {"case", what + "-" + std::to_string(nodes)},
          {"nodes", nodes},
          {"ms", ms},
          {"ec2_calls", calls.size()},
          {"ec2_calls_per_node", per_node},
          {"by_action", ByAction(calls)},
          {"min_ec2_calls", minimum},
          {"min_ec2_calls_per_node", static_cast<double>(minimum) / nodes},
          {"run_instances_batched", false}};
}

int Run(const std::vector<std::string>& args) {
  int nodes = 50, capacity = 25;
  bool keep = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--keep") {
      keep = true;
    } else if (i + 1 < args.size() && args[i] == "--nodes" && ParseInt(args[i + 1], 1, 1000, &nodes)) {
      ++i;
    } else if (i + 1 < args.size() && args[i] == "--capacity" && ParseInt(args[i + 1], 1, 256, &capacity)) {
      ++i;
    } else {
      std::fprintf(stderr, "usage: weft-bench cloud [--nodes N (50)] [--capacity C (25)] [--keep]\n");
      return 2;
    }
  }
  const std::optional<testing::MotoTools> tools = testing::FindMoto();
  if (!tools) {
    std::fprintf(stderr, "weft-bench cloud: moto_server is not installed (pip install 'moto[server]'); not run\n");
    return 1;
  }
  auto paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench cloud: %s\n", paths.status().message().c_str());
    return 1;
  }
  const fs::path aws_so = paths->provider_so.parent_path() / "aws_provider.so";
  if (!fs::exists(aws_so)) {
    std::fprintf(stderr, "weft-bench cloud: %s not found; build the aws_provider target first\n", aws_so.c_str());
    return 1;
  }
  try {
    ScratchDir dir("weft-bench-cloud", keep);
    const fs::path plugins = dir.path() / "plugins";
    fs::create_directories(plugins);
    fs::copy_file(aws_so, plugins / "aws_provider.so");
    fs::copy_file(paths->automator_so, plugins / "fake_automator.so");

    std::fprintf(stderr, "weft-bench cloud: starting moto_server, weftd and one weft-host (capacity %d)\n", capacity);
    testing::Moto moto(*tools, dir.path() / "moto");
    testing::Weftd weftd(BenchWeftd(paths->weftd, dir.path() / "weftd"), testing::Weftd::Deferred{});
    if (Status st = StartWeftd(weftd); !st.ok()) throw std::runtime_error(st.message());
    testing::Host host(BenchHost(paths->host, dir.path(), "h1", weftd.provisioner(), capacity, 2, plugins, "warn"));
    host.Start();
    if (!testing::WaitFor([&] { return weftd.HostLive("h1"); }, std::chrono::seconds(30)))
      throw std::runtime_error("weft-host did not register:\n" + Tail(host.log()));
    ImportCatalog(weftd, moto, dir.path() / "catalog");

    auto run_job = [&](const std::string& op, const json& body) {
      const std::size_t before = moto.Calls().size();
      const auto start = SteadyClock::now();
      const json started = weftd.Call(op, body);
      const json job = weftd.WaitJob(started["job"]["id"].get<std::string>(), std::chrono::minutes(10));
      const double ms = MsSince(start);
      if (job["status"] != "succeeded") throw std::runtime_error(op + " ended " + job["status"].dump() + ": " + job.dump().substr(0, 2000));
      std::vector<std::string> calls = moto.Calls();
      calls.erase(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(before));
      return std::pair{ms, calls};
    };
    std::fprintf(stderr, "weft-bench cloud: creating %d nodes\n", nodes);
    const auto [create_ms, create_calls] =
        run_job("cluster.create", {{"name", "cloud"}, {"template", "cloud-bench"}, {"size", nodes}});
    std::printf("%s\n", Line("create", nodes, create_ms, create_calls, kMinCreateCalls).dump().c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "weft-bench cloud: deleting them\n");
    const auto [delete_ms, delete_calls] = run_job("cluster.delete", {{"cluster", "cloud"}});
    std::printf("%s\n", Line("delete", nodes, delete_ms, delete_calls, kMinDeleteCalls).dump().c_str());
    const json state = moto.State();
    const auto running = std::count_if(state["instances"].begin(), state["instances"].end(),
                                       [](const json& i) { return i["state"] != "terminated"; });
    std::fprintf(stderr, "weft-bench cloud: moto holds %zu instances, %ld not terminated\n", state["instances"].size(),
                 static_cast<long>(running));
    return running == 0 && state["instances"].size() == static_cast<std::size_t>(nodes) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench cloud: %s\n", e.what());
    return 1;
  }
}

}  // namespace

WEFT_BENCH("cloud", "a 50-node create and delete through the aws provider against moto: time, EC2 calls per node", Run);

}  // namespace weft::bench
