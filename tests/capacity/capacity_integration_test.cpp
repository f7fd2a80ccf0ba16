// server.capacity and `weft capacity` end to end: a real weftd and weft-host
// run the fake automator at a known latency while the test enqueues tasks at a
// known rate; the advice must be what the M/M/c (Erlang C) model, computed
// here independently (the textbook sum, not weftd's Erlang B recurrence),
// says for that load.
//
// Tolerance: the arrival rate weftd measures must equal the test's own count
// over the same window (within 1%), and the mean service time it measures must
// lie between the plugin's latency and 20% above it (weft-host's and the
// network's share). The load below is chosen so that the model's answer is the
// same anywhere in that band (the test checks this too), so the advised
// threads must equal the model's exactly.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"

namespace {

using namespace weft::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

constexpr int kLatencyMs = 200;                // what every task sleeps in the fake automator
constexpr double kRate = 8;                    // tasks enqueued per second
constexpr auto kArrivals = std::chrono::seconds(10);
constexpr int kTargetWaitMs = 20;              // the mean queue wait to keep under
constexpr double kServiceBand = 0.20;          // measured service time: latency .. latency * (1 + band)

double Factorial(int n) { return n <= 1 ? 1 : n * Factorial(n - 1); }

// P(wait) for `c` servers offered `a` erlangs: the textbook sum,
// (a^c / c! * c / (c - a)) / (sum_{k<c} a^k / k! + a^c / c! * c / (c - a)).
double ErlangCBySum(int c, double a) {
  const double top = std::pow(a, c) / Factorial(c) * c / (c - a);
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += std::pow(a, k) / Factorial(k);
  return top / (sum + top);
}

// The fewest servers whose M/M/c mean queue wait C / (c mu - lambda) is at most `target_s`.
int ModelThreads(double lambda, double service_s, double target_s) {
  const double a = lambda * service_s;
  for (int c = static_cast<int>(a) + 1;; ++c)
    if (ErlangCBySum(c, a) / (c / service_s - lambda) <= target_s) return c;
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json FakeTask() {
  return {{"plugin", "fake-automator"},
          {"action", "INSTALL"},
          {"node_id", "n1"},
          {"max_attempts", 1},
          {"payload", {{"fields", {{"latency_ms", kLatencyMs}}}}}};
}

// Waits until the host is live and runs as many threads as it has.
void WaitForWorkers(Weftd& server, Host& host, int threads) {
  json last;
  const bool ready = WaitFor(
      [&] {
        const json list = server.Call("host.list", json::object());
        for (const json& h : list["hosts"]) {
          if (h["id"] != host.id()) continue;
          last = h;
          std::int64_t reported = 0;
          for (const json& w : h["reported_workers"]) reported += w.value("threads", std::int64_t{0});
          return h["live"] == true && reported == threads;
        }
        return false;
      },
      30s);
  INFO("host listed as " << last.dump() << "\n" << host.Log());
  REQUIRE(ready);
}

struct Measured {
  int enqueued = 0;
  std::int64_t window_ms = 0;
  json advice;       // server.capacity over exactly the window
  std::string table;  // `weft capacity` over a window a second longer
};

// Enqueues kRate tasks a second for kArrivals (paced by deadlines, so a late
// tick is made up), then asks for the advice over exactly that window.
Measured Measure(Weftd& server) {
  Measured run;
  const std::int64_t start_ms = NowMs();
  const auto start = std::chrono::steady_clock::now();
  const auto every = std::chrono::duration<double>(1.0 / kRate);
  const int total = static_cast<int>(kRate * std::chrono::duration<double>(kArrivals).count());
  for (; run.enqueued < total; ++run.enqueued) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              every * run.enqueued));
    server.Enqueue(FakeTask());
  }
  // The window reaches back a little before the first task (weftd's clock
  // reads a moment after the test's), and nothing was enqueued before it.
  run.window_ms = NowMs() - start_ms + 250;
  const std::string target = std::to_string(kTargetWaitMs) + "ms";
  run.advice = server.Call("server.capacity", {{"window_ms", run.window_ms}, {"target_wait_ms", kTargetWaitMs}});
  // The CLI starts a process first (slow under a sanitizer): its window reaches
  // a second further back, which changes the rate a little and the advice not
  // at all at this load (CheckAgainstModel checks rates well below this one).
  const std::string window = std::to_string(run.window_ms + 1000) + "ms";
  RunResult table = server.Weft({"capacity", "--window", window, "--target-wait", target});
  INFO(table.out << table.err);
  REQUIRE(table.exit_code == 0);
  run.table = table.out;
  return run;
}

const json& Tenant(const json& advice, const std::string& name) {
  for (const json& t : advice["tenants"])
    if (t["tenant"] == name) return t;
  FAIL("no advice for tenant " << name << " in " << advice.dump());
  static const json none;
  return none;
}

// The checks both cases share; returns the model's threads for the load.
int CheckAgainstModel(const Measured& run, const json& t) {
  INFO("advice " << run.advice.dump(2));
  const double lambda = run.enqueued / (static_cast<double>(run.window_ms) / 1000);
  const double service_s = kLatencyMs / 1000.0;
  const double target_s = kTargetWaitMs / 1000.0;
  const int model = ModelThreads(lambda, service_s, target_s);
  // The design point: the model's answer does not move anywhere in the tolerance band.
  for (double l : {lambda * 0.85, lambda * 0.99, lambda * 1.01})
    for (double s : {service_s, service_s * (1 + kServiceBand / 2), service_s * (1 + kServiceBand)})
      REQUIRE(ModelThreads(l, s, target_s) == model);

  CHECK(t["tasks_enqueued"] == run.enqueued);
  CHECK_THAT(t["arrivals_per_s"].get<double>(), Catch::Matchers::WithinRel(lambda, 0.01));
  CHECK(t["mean_service_ms"].get<double>() >= kLatencyMs);
  CHECK(t["mean_service_ms"].get<double>() <= kLatencyMs * (1 + kServiceBand));
  CHECK(t["threads_needed"] == model);
  CHECK(t["wait_needed_ms"].get<double>() <= kTargetWaitMs);
  CHECK(run.advice["target"]["wait_ms"] == kTargetWaitMs);
  CHECK(run.advice["target"]["measure"] == "mean");
  return model;
}

}  // namespace

TEST_CASE("capacity: too few worker threads for the load -> add what the Erlang C model says",
          "[integration][capacity][slow]") {
  TempDir tmp("weft-capacity");
  Weftd server(ServerIn(tmp / "server"));
  constexpr int kThreads = 3;
  Host host(HostIn(tmp / "hosts", "h1", server.provisioner(), {}, kThreads));
  WaitForWorkers(server, host, kThreads);

  const Measured run = Measure(server);
  const json& t = Tenant(run.advice, "default");
  const int model = CheckAgainstModel(run, t);
  REQUIRE(model > kThreads);  // the case is about adding
  CHECK(t["threads_now"] == kThreads);
  CHECK(t["verdict"] == "add");
  CHECK(t["change"] == model - kThreads);
  CHECK(t["hosts_change"] == 1);
  const std::string sentence = "Tenant default needs " + std::to_string(model) +
                               " worker threads to keep its mean queue wait under 20ms and has 3";
  CHECK_THAT(t["advice"].get<std::string>(), Catch::StartsWith(sentence));
  CHECK_THAT(t["advice"].get<std::string>(), Catch::Contains(": add 1 worker thread (1 more host of 3 threads)."));
  CHECK(run.advice["total"]["verdict"] == "add");
  CHECK(run.advice["total"]["hosts_change"] == 1);
  // The table says the same to a person.
  CHECK_THAT(run.table, Catch::Contains(sentence));
  CHECK_THAT(run.table, Catch::Contains("add 1 host of 3 threads"));
}

TEST_CASE("capacity: more worker threads than the load needs -> remove the excess",
          "[integration][capacity][slow]") {
  TempDir tmp("weft-capacity");
  Weftd server(ServerIn(tmp / "server"));
  constexpr int kThreads = 8;
  Host host(HostIn(tmp / "hosts", "h1", server.provisioner(), {}, kThreads));
  WaitForWorkers(server, host, kThreads);

  const Measured run = Measure(server);
  const json& t = Tenant(run.advice, "default");
  const int model = CheckAgainstModel(run, t);
  REQUIRE(model < kThreads);  // the case is about removing
  CHECK(t["threads_now"] == kThreads);
  CHECK(t["verdict"] == "remove");
  CHECK(t["change"] == model - kThreads);
  CHECK_THAT(t["advice"].get<std::string>(),
             Catch::Contains("and has 8: remove " + std::to_string(kThreads - model) + " worker threads"));
  // Fewer threads than a whole host: no host to remove.
  CHECK(t["hosts_change"] == 0);
  CHECK(run.advice["total"]["verdict"] == "keep");
  CHECK_THAT(run.table, Catch::Contains("remove " + std::to_string(kThreads - model) + " worker threads"));
}

TEST_CASE("capacity: the window and the target are checked, and with no task there is no advice",
          "[integration][capacity]") {
  TempDir tmp("weft-capacity");
  Weftd server(ServerIn(tmp / "server"));
  auto bad = server.TryCall("server.capacity", {{"window_ms", 10}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("the window must be"));
  bad = server.TryCall("server.capacity", {{"quantile", 1.5}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("the quantile must be a number between 0 and 1"));
  RunResult cli = server.Weft({"capacity", "--window", "soon"});
  CHECK(cli.exit_code == 2);
  CHECK_THAT(cli.err, Catch::Contains("--window"));
  cli = server.Weft({"capacity", "--window", "500ms"});
  CHECK(cli.exit_code == 2);
  CHECK_THAT(cli.err, Catch::Contains("--window needs a duration from 1s to 30d"));

  // Nothing ran: no tenant to advise, and the total says so.
  const json empty = server.Call("server.capacity", json::object());
  CHECK(empty["tenants"].empty());
  CHECK(empty["window_ms"] == 600000);
  CHECK(empty["target"]["wait_ms"] == 5000);
  CHECK(empty["total"]["verdict"] == "unknown");
  // A quantile target, from the CLI.
  const json tail = server.WeftJson({"capacity", "--target-wait", "2s", "--quantile", "0.95"});
  CHECK(tail["target"]["measure"] == "quantile");
  CHECK(tail["target"]["wait_ms"] == 2000);
  CHECK(tail["target"]["text"] == "95th-percentile queue wait");
  RunResult text = server.Weft({"capacity"});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("nothing to advise on"));
}

TEST_CASE("capacity: a tenant admin is advised on their tenant only and a user may not ask",
          "[integration][capacity][security]") {
  TempDir tmp("weft-capacity");
  WeftdOptions options = ServerIn(tmp / "server");
  options.curve = true;
  Weftd server(options);
  for (const std::string tenant : {"acme", "globex"}) {
    REQUIRE(server.Weft({"tenant", "create", tenant}).exit_code == 0);
    // The superadmin puts a task on each tenant's queue (acting in it).
    auto credential = weft::curve::LoadCredential(server.superadmin());
    REQUIRE(credential.ok());
    weft::client::Options o = weft::client::FromCredential(*credential, 3000);
    o.endpoint = server.api();
    o.tenant = tenant;
    zmq::context_t ctx;
    weft::client::Client as_tenant(ctx, o);
    REQUIRE(as_tenant.Call("debug.enqueue", {{"tasks", json::array({FakeTask()})}}).ok());
  }
  auto make_user = [&](const std::string& name, const std::string& role) {
    REQUIRE(server.Weft({"--tenant", "acme", "user", "create", name, "--role", role}).exit_code == 0);
    const auto file = tmp / (name + ".json");
    REQUIRE(server.Weft({"--tenant", "acme", "credentials", name, "-f", file.string()}).exit_code == 0);
    return file;
  };
  const auto bob = make_user("bob", "admin");
  const auto alice = make_user("alice", "user");

  std::set<std::string> seen;
  const json all = server.WeftJson({"capacity"});
  for (const json& t : all["tenants"]) seen.insert(t["tenant"].get<std::string>());
  CHECK(seen == std::set<std::string>{"acme", "globex"});
  CHECK(all.contains("total"));

  const json mine = server.WeftJson({"capacity"}, bob);
  REQUIRE(mine["tenants"].size() == 1);
  CHECK(mine["tenants"][0]["tenant"] == "acme");
  CHECK(mine["tenants"][0]["tasks_enqueued"] == 1);
  CHECK_FALSE(mine.contains("total"));  // the hosts serve tenants bob does not see

  RunResult denied = server.Weft({"capacity"}, alice);
  CHECK(denied.exit_code != 0);
  CHECK_THAT(denied.err, Catch::Contains("server.capacity"));
}
