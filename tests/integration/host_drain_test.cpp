// What weftd keeps of a host across its own restarts, with the real weftd and
// weft-host: the host's process (its incarnation), so a host killed and started
// again gives its old attempts up as before the restart, and an operator's
// drain (weft host drain / undrain). Checked through the tasks' records and the
// CLI's output, never through timing.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/store_rows.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace weft::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
using weft::testing::TempDir;

// Enqueues `count` fake-automator tasks that each take `latency_ms`; their ids.
std::vector<std::int64_t> EnqueueSome(Weftd& server, int count, int latency_ms, const std::string& prefix) {
  json batch = json::array();
  for (int i = 0; i < count; ++i)
    batch.push_back({{"plugin", "fake-automator"},
                     {"action", "INSTALL"},
                     {"node_id", prefix + std::to_string(i)},
                     {"payload", {{"fields", {{"latency_ms", latency_ms}}}}}});
  const json reply = server.Call("debug.enqueue", {{"tasks", batch}});
  std::vector<std::int64_t> ids;
  for (const json& id : reply["task_ids"]) ids.push_back(id.get<std::int64_t>());
  return ids;
}

json HostListed(Weftd& server, const std::string& id) {
  const json hosts = server.Call("host.list", json::object())["hosts"];
  for (const json& h : hosts)
    if (h["id"] == id) return h;
  FAIL("host " << id << " is not listed");
  return json();
}

// weftd restarts while h1 runs (h1 does not register again), then h1 is killed
// mid-task and started again at once. `forget_incarnations`: the hosts' rows
// lose the process they name, as when the weftd before the restart did not store it.
void KilledAfterRestartOfWeftd(bool forget_incarnations) {
  TempDir tmp("weft-hosts");
  // A lease far longer than the test may take: the killed process's attempt can
  // only end because weftd knows that process is gone (it refuses the new one
  // while it still hears the old one, and gives the attempt up when the old one
  // falls silent or the new one registers). Hosts fall silent only after 20 s,
  // far longer than weft-host takes to start again: a new process that weftd
  // let in at once would keep the killed one from ever falling silent.
  WeftdOptions options = ServerIn(tmp / "server", json(), /*lease_ms=*/300000);
  options.silent_after_ms = 20000;
  Weftd server(options);
  auto host = std::make_unique<Host>(HostIn(tmp / "host", "h1", server.provisioner()));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));
  if (forget_incarnations) {
    server.Stop();
    REQUIRE(ExecSql(server, "UPDATE hosts SET incarnation = ''") == "");
    REQUIRE(server.Start().ok());
  } else {
    server.Restart();
  }
  // h1 speaks to the new weftd (a heartbeat) without registering again.
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));
  const std::int64_t registered = HostListed(server, "h1")["registered_at_ms"].get<std::int64_t>();
  const std::int64_t first = EnqueueSome(server, 1, 8000, "n")[0];
  server.WaitTaskState(first, "leased", 20s);
  CHECK(HostListed(server, "h1")["registered_at_ms"] == registered);

  host->process().Signal(SIGKILL);
  REQUIRE(host->process().Wait(10s).has_value());
  host.reset();
  host = std::make_unique<Host>(HostIn(tmp / "host", "h1", server.provisioner()));
  // The old attempt ends long before its lease could run out (5 minutes).
  const bool ended = WaitFor([&] { return server.Task(first)["attempts"][0]["status"] != "running"; }, 90s);
  const json t = server.Task(first);
  INFO(t.dump(1) << "\nweftd:\n" << Tail(server.Log(), 4000) << "\nhost:\n" << Tail(host->Log(), 3000));
  REQUIRE(ended);
  CHECK(t["attempts"][0]["status"] == "expired");
  const std::string why = t["attempts"][0]["message"].get<std::string>();
  CHECK((why.find("started again") != std::string::npos || why.find("is silent") != std::string::npos));
  const json done = server.WaitTaskState(first, "succeeded", 90s);
  CHECK(done["attempt"] == 2);
}

}  // namespace

TEST_CASE("hosts: after a restart of weftd, a host killed mid-task and started again gives up its old attempts",
          "[integration][hosts]") {
  KilledAfterRestartOfWeftd(/*forget_incarnations=*/false);
}

TEST_CASE("hosts: after an upgrade from a weftd that stored no incarnations, a host killed mid-task and started "
          "again gives up its old attempts",
          "[integration][hosts]") {
  KilledAfterRestartOfWeftd(/*forget_incarnations=*/true);
}

TEST_CASE("hosts: a drained host finishes its running task and takes no new one until undrained",
          "[integration][hosts]") {
  TempDir tmp("weft-hosts");
  Weftd server(ServerIn(tmp / "server", json(), /*lease_ms=*/300000));
  Host h1(HostIn(tmp / "hosts", "h1", server.provisioner()));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));
  // h1 runs a task when it is drained (h2 is not there yet to take it).
  const std::int64_t running = EnqueueSome(server, 1, 30000, "long")[0];
  server.WaitTaskState(running, "leased", 20s);

  const RunResult drained = server.Weft({"host", "drain", "h1"});
  INFO(drained.out << drained.err);
  REQUIRE(drained.exit_code == 0);
  CHECK_THAT(drained.out, Catch::Contains("host 'h1' is draining: weftd hands it no new task; its 1 running task(s) "
                                          "finish"));
  const RunResult listed = server.Weft({"host", "list"});
  INFO(listed.out);
  CHECK_THAT(listed.out, Catch::Contains("yes, draining"));
  json h = HostListed(server, "h1");
  CHECK(h["draining"] == true);
  CHECK(h["in_flight"] == 1);
  auto h2 = std::make_unique<Host>(HostIn(tmp / "hosts", "h2", server.provisioner()));
  REQUIRE(WaitFor([&] { return server.HostLive("h2"); }, 20s));
  CHECK(HostListed(server, "h2")["draining"] == false);

  // New tasks all go to h2; h1's running one finishes there, at its first attempt.
  for (std::int64_t id : EnqueueSome(server, 6, 0, "a")) {
    const json t = server.WaitTaskState(id, "succeeded", 60s);
    CHECK(t["host_id"] == "h2");
  }
  const json finished = server.WaitTaskState(running, "succeeded", 60s);
  CHECK(finished["host_id"] == "h1");
  CHECK(finished["attempt"] == 1);
  CHECK(HostListed(server, "h1")["in_flight"] == 0);

  // Drained it stays across a restart of weftd, and of the host (an upgrade).
  server.Restart();
  REQUIRE(WaitFor([&] { return server.HostLive("h1") && server.HostLive("h2"); }, 20s));
  REQUIRE(ExitCodeOf(h1.Stop()) == 0);
  h1.Start();
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));
  CHECK(server.WeftJson({"host", "show", "h1"})["draining"] == true);
  for (std::int64_t id : EnqueueSome(server, 4, 0, "b")) CHECK(server.WaitTaskState(id, "succeeded", 60s)["host_id"] == "h2");

  // Undrained, with h2 gone, h1 takes the tasks again.
  const RunResult undrained = server.Weft({"host", "undrain", "h1"});
  INFO(undrained.out << undrained.err);
  REQUIRE(undrained.exit_code == 0);
  CHECK_THAT(undrained.out, Catch::Contains("host 'h1' is no longer draining"));
  CHECK(HostListed(server, "h1")["draining"] == false);
  REQUIRE(ExitCodeOf(h2->Stop()) == 0);
  h2.reset();
  for (std::int64_t id : EnqueueSome(server, 4, 0, "c")) CHECK(server.WaitTaskState(id, "succeeded", 60s)["host_id"] == "h1");

  // An unknown host is named as such.
  const RunResult unknown = server.Weft({"host", "drain", "nope"});
  CHECK(unknown.exit_code != 0);
  CHECK_THAT(unknown.err, Catch::Contains("host 'nope' is not registered"));
}
