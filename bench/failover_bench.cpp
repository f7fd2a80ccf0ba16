// weft-bench failover: several weftd on one PostgreSQL (docs/failover.md).
// Two weftd share a throwaway PostgreSQL; one weft-host and the bench's
// client know both. Each round starts a cluster create, kills the leader
// (SIGKILL) at a random point of the running job, and measures the time from
// the kill to the first task the new leader hands out (the earliest attempt
// taken after the kill), then whether the job finished with every task taking
// effect once (the fake plugins record each effect). The killed weftd starts
// again as a follower for the next round. One JSON line: the takeover time's
// p50 and max, tasks lost (not succeeded, or without an effect), tasks run
// twice (more than one effect) and tasks with more than one attempt (what
// attempt fencing reports).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "support/catalog_dir.hpp"
#include "support/postgres.hpp"
#include "support/process.hpp"
#include "weft/client/client.hpp"

namespace weft::bench {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct Options {
  int rounds = 10;
  int size = 12;  // nodes per cluster: about 6 tasks each
  int latency_ms = 40;
  bool keep = false;
};

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::map<std::int64_t, int> EffectsByTask(const fs::path& file) {
  std::map<std::int64_t, int> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::int64_t task = 0;
    if (fields >> task) ++out[task];
  }
  return out;
}

std::string Toml(const std::string& conninfo, const std::string& node) {
  // The default lease and poll: the figure is for weftd as it ships.
  return "[store]\nbackend = \"postgres\"\nconninfo = " + json(conninfo).dump() + "\n[leader]\nnode = \"" + node +
         "\"\n[tasks]\nlease_ms = 5000\n[hosts]\nheartbeat_ms = 500\n";
}

class Rig {
 public:
  Rig(const Paths& paths, const Options& o) : paths_(paths), o_(o), dir_("weft-bench-failover", o.keep) {}

  Status Start() {
    WEFT_ASSIGN_OR_RETURN(pg_, testing::PostgresServer::Start(dir_.path() / "pg"));
    for (const char* node : {"a", "b"}) {
      fs::create_directories(dir_.path() / node);
      // Every weftd on one database has the first one's keys (docs/failover.md).
      if (!weftd_.empty()) {
        std::error_code ec;
        fs::create_directories(dir_.path() / node / "data", ec);
        fs::copy(weftd_[0]->data() / "keys", dir_.path() / node / "data" / "keys", fs::copy_options::recursive, ec);
        if (ec) return Status::Internal("cannot copy the first weftd's keys: " + ec.message());
      }
      testing::WeftdOptions w = BenchWeftd(paths_.weftd, dir_.path() / node);
      w.name = node;
      w.store = "sqlite";  // the [store] table below says postgres
      w.extra_toml = Toml(pg_->conninfo(), node);
      w.stop_on_destroy = false;
      weftd_.push_back(std::make_unique<testing::Weftd>(w, testing::Weftd::Deferred{}));
      WEFT_RETURN_IF_ERROR(StartWeftd(*weftd_.back()));
      if (weftd_.size() == 1) WEFT_RETURN_IF_ERROR(WaitRole(0, "leader"));
    }
    apis_ = weftd_[0]->api() + "," + weftd_[1]->api();
    testing::CatalogDir catalog(dir_.path() / "catalog");
    const json knobs = {{"latency_ms", o_.latency_ms}, {"jitter_ms", o_.latency_ms}, {"effects_file", Effects().string()}};
    catalog.PatchActions("", "", knobs);
    catalog.PatchProvider(knobs);
    catalog.DeriveTemplate("web-big", {{"constraints", {{"size", {{"max", 500}}}}}});
    testing::RunResult r = weftd_[0]->Weft({"catalog", "import", catalog.path().string()});
    if (r.exit_code != 0) return Status::Internal("catalog import failed: " + r.out + r.err);
    testing::HostOptions h;
    h.dir = dir_.path();
    h.id = "h1";
    h.server = weftd_[0]->provisioner() + "," + weftd_[1]->provisioner();
    h.capacity = 16;
    h.workers = 2;
    h.take_wait_ms = 2000;
    h.request_timeout_ms = 2000;
    h.die_with_parent = true;
    h.binary = paths_.host;
    host_ = std::make_unique<testing::Host>(h);
    client_ = std::make_unique<client::Client>(ctx_, client::Options{.endpoint = apis_, .timeout_ms = 3000});
    return Status::Ok();
  }

  fs::path Effects() const { return dir_.path() / "effects.log"; }

  // Which of the two leads now (-1: neither says so).
  int Leader() {
    for (int i = 0; i < 2; ++i) {
      Result<json> s = weftd_[static_cast<std::size_t>(i)]->TryCall("server.status", json::object(), 2000);
      if (s.ok() && s->contains("leadership") && (*s)["leadership"].value("role", "") == "leader") return i;
    }
    return -1;
  }

  Status WaitRole(int i, const std::string& role) {
    const bool ok = testing::WaitFor(
        [&] {
          Result<json> s = weftd_[static_cast<std::size_t>(i)]->TryCall("server.status", json::object(), 2000);
          return s.ok() && s->contains("leadership") && (*s)["leadership"].value("role", "") == role;
        },
        30s);
    return ok ? Status::Ok() : Status::Timeout("weftd " + std::to_string(i) + " never became " + role);
  }

  struct Round {
    double takeover_ms = -1;
    int lost = 0, twice = 0, reattempted = 0, tasks = 0;
  };

  Result<Round> RunRound(int n, std::mt19937& rng) {
    const int leader = Leader();
    if (leader < 0) return Status::Unavailable("no leader before round " + std::to_string(n));
    WEFT_ASSIGN_OR_RETURN(json created, client_->Call("cluster.create", {{"name", "r" + std::to_string(n)},
                                                                         {"template", "web-big"},
                                                                         {"size", o_.size}}));
    const std::string job = created["job"]["id"].get<std::string>();
    // A random point of the running job: after 10% to 70% of its tasks succeeded.
    const double fraction = std::uniform_real_distribution<double>(0.1, 0.7)(rng);
    testing::WaitFor(
        [&] {
          Result<json> r = client_->Call("job.get", {{"job", job}});
          if (!r.ok()) return false;
          const json& p = (*r)["job"]["progress"];
          return p.value("succeeded", 0.0) >= fraction * p.value("total", 1.0);
        },
        60s);
    const std::int64_t killed_at = NowMs();
    weftd_[static_cast<std::size_t>(leader)]->Kill();
    json ended;
    testing::WaitFor(
        [&] {
          Result<json> r = client_->Call("job.get", {{"job", job}, {"details", true}});
          if (!r.ok()) return false;
          ended = (*r)["job"];
          const std::string s = ended.value("status", "");
          return s != "running" && s != "failing";
        },
        120s);
    Round out;
    std::int64_t first_take = 0;
    const std::map<std::int64_t, int> effects = EffectsByTask(Effects());
    for (const json& t : ended.value("tasks", json::array())) {
      // JOIN runs no plugin; BOOTSTRAP has no service, so no fields to ask for the record.
      if (t.value("action", "") == "JOIN" || t.value("action", "") == "BOOTSTRAP") continue;
      ++out.tasks;
      const json& id = t["id"];
      const auto e = effects.find(id.is_string() ? std::stoll(id.get<std::string>()) : id.get<std::int64_t>());
      if (t.value("state", "") != "succeeded" || e == effects.end()) ++out.lost;
      if (e != effects.end() && e->second > 1) ++out.twice;
      const json attempts = t.value("attempts", json::array());
      if (attempts.size() > 1) ++out.reattempted;
      for (const json& a : attempts) {
        const std::int64_t taken = a.value("taken_at_ms", std::int64_t{0});
        if (taken >= killed_at && (first_take == 0 || taken < first_take)) first_take = taken;
      }
    }
    if (first_take > 0) out.takeover_ms = static_cast<double>(first_take - killed_at);
    // The killed one comes back as a follower.
    WEFT_RETURN_IF_ERROR(StartWeftd(*weftd_[static_cast<std::size_t>(leader)]));
    WEFT_RETURN_IF_ERROR(WaitRole(leader, "follower"));
    return out;
  }

 private:
  Paths paths_;
  Options o_;
  ScratchDir dir_;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::vector<std::unique_ptr<testing::Weftd>> weftd_;
  std::unique_ptr<testing::Host> host_;
  zmq::context_t ctx_;
  std::unique_ptr<client::Client> client_;
  std::string apis_;
};

int Failover(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--rounds" && has_value && ParseInt(args[i + 1], 1, 1000, &o.rounds)) {
      ++i;
    } else if (args[i] == "--size" && has_value && ParseInt(args[i + 1], 1, 500, &o.size)) {
      ++i;
    } else if (args[i] == "--keep") {
      o.keep = true;
    } else {
      std::fprintf(stderr, "usage: weft-bench failover [--rounds N (10)] [--size NODES (12)] [--keep]\n");
      return 2;
    }
  }
  Result<Paths> paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench failover: %s\n", paths.status().message().c_str());
    return 1;
  }
  Rig rig(*paths, o);
  if (Status s = rig.Start(); !s.ok()) {
    std::fprintf(stderr, "weft-bench failover: %s\n", s.message().c_str());
    return 1;
  }
  std::mt19937 rng(20261126);
  std::vector<double> takeovers;
  int lost = 0, twice = 0, reattempted = 0, tasks = 0, unmeasured = 0;
  for (int n = 1; n <= o.rounds; ++n) {
    Result<Rig::Round> r = rig.RunRound(n, rng);
    if (!r.ok()) {
      std::fprintf(stderr, "weft-bench failover: round %d: %s\n", n, r.status().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "round %d: takeover %.0f ms, %d tasks, %d lost, %d run twice, %d reattempted\n", n,
                 r->takeover_ms, r->tasks, r->lost, r->twice, r->reattempted);
    if (r->takeover_ms >= 0) takeovers.push_back(r->takeover_ms);
    unmeasured += r->takeover_ms < 0 ? 1 : 0;
    lost += r->lost;
    twice += r->twice;
    reattempted += r->reattempted;
    tasks += r->tasks;
  }
  const double max = takeovers.empty() ? -1 : *std::max_element(takeovers.begin(), takeovers.end());
  json line = {{"case", "failover"},
               {"rounds", o.rounds},
               {"nodes_per_job", o.size},
               {"tasks", tasks},
               {"kill_to_first_task_ms_p50", takeovers.empty() ? -1 : Median(takeovers)},
               {"kill_to_first_task_ms_max", max},
               {"rounds_unmeasured", unmeasured},
               {"tasks_lost", lost},
               {"tasks_run_twice", twice},
               {"tasks_reattempted", reattempted},
               {"target", "p50 and max < 5000 ms, 0 lost, 0 run twice"}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace

WEFT_BENCH("failover", "kill -9 of the leader of two weftd on one PostgreSQL, 10 times: takeover time, tasks lost",
           Failover);

}  // namespace weft::bench
