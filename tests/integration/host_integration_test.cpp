// weftd + weft-host + plugins, as separate processes, driven through the api.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/fast.hpp"
#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Process;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::HostOptions;
using weft::testing::kBuild;
using weft::testing::ServerIn;
using weft::testing::Weftd;

// Reads one task row straight from the store file, read-only, as an operator would.
struct StoredTask {
  std::string state;
  std::int64_t attempt = 0;
  json result;
  std::string host_id;
};
StoredTask ReadStoredTask(const std::filesystem::path& db, std::int64_t id) {
  sqlite3* conn = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &conn, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(conn, "SELECT state, attempt, result, host_id FROM tasks WHERE id = ?", -1, &stmt,
                             nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_bind_int64(stmt, 1, id) == SQLITE_OK);
  StoredTask out;
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  out.state = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  out.attempt = sqlite3_column_int64(stmt, 1);
  out.result = json::parse(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 2)));
  out.host_id = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
  REQUIRE(sqlite3_finalize(stmt) == SQLITE_OK);
  REQUIRE(sqlite3_close(conn) == SQLITE_OK);
  return out;
}

int ExitCode(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

}  // namespace

TEST_CASE("integration: a task goes take -> fake plugin -> finish and into the store", "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner()));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));

  const std::int64_t create = server.Enqueue({{"plugin", "fake-provider"},
                                              {"action", "CREATE"},
                                              {"node_id", "n1"},
                                              {"payload", {{"provider", {{"fields", {{"latency_ms", 50}}}}}}}});
  const std::int64_t confirm =
      server.Enqueue({{"plugin", "fake-provider"}, {"action", "CONFIRM"}, {"node_id", "n1"}});
  const std::int64_t broken = server.Enqueue({{"plugin", "fake-automator"},
                                              {"action", "START"},
                                              {"node_id", "n1"},
                                              {"max_attempts", 1},
                                              {"payload", {{"fields", {{"fail_actions", "INSTALL, START"}}}}}});

  json t = server.WaitTaskState(create, "succeeded", 15s);
  INFO(t.dump());
  CHECK(t["host_id"] == "h1");
  CHECK(t["attempt"] == 1);
  CHECK(t["result"]["provider_id"] == "fake-n1");
  CHECK(t["result"]["ssh_auth"] == json({{"user", "fake"}}));
  CHECK_THAT(t["stdout"].get<std::string>(), Catch::Contains("fake-provider CREATE node n1"));

  json c = server.WaitTaskState(confirm, "succeeded", 15s);
  CHECK_THAT(c["result"]["access_v4"].get<std::string>(), Catch::StartsWith("10."));
  CHECK(c["result"]["access_v4"] == c["result"]["bind_v4"]);
  CHECK(c["result"]["hostname"] == "n1.fake.weft");

  json b = server.WaitTaskState(broken, "failed", 15s);
  CHECK_THAT(b["message"].get<std::string>(), Catch::Contains("fail_actions"));

  // The store file itself holds the outcome (opened read-only, beside the running server).
  StoredTask stored = ReadStoredTask(server.db(), create);
  CHECK(stored.state == "succeeded");
  CHECK(stored.attempt == 1);
  CHECK(stored.host_id == "h1");
  CHECK(stored.result["provider_id"] == "fake-n1");

  CHECK(ExitCode(host.process().Stop(10s)) == 0);
  CHECK_THAT(host.Log(), Catch::Contains("stopped"));
  // At the default level (info) a task that succeeds at its first attempt logs no
  // line (its start and finish are DEBUG); a failure logs one, with what ran.
  const std::string log = host.Log();
  INFO(log);
  for (std::int64_t quiet : {create, confirm}) CHECK(log.find("task " + std::to_string(quiet) + " ") == std::string::npos);
  const std::string failed = "task " + std::to_string(broken) + " ";
  CHECK(log.find(failed) != std::string::npos);
  CHECK(log.find(failed) == log.rfind(failed));  // one line
  CHECK_THAT(log, Catch::Contains("task " + std::to_string(broken) + " attempt 1 failed in ") &&
                      Catch::Contains(" ms (fake-automator START): "));
}

TEST_CASE("integration: a busy runner gets its next task with the finish, one round trip per task",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, /*capacity=*/1));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  auto served = [&](const char* op) { return server.Call("server.status", json::object())["requests"].value(op, 0); };
  const int takes_before = served("task.take");
  const int finishes_before = served("task.finish");

  constexpr int kTasks = 20;
  json batch = json::array();
  for (int i = 0; i < kTasks; ++i)
    batch.push_back({{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n" + std::to_string(i)}});
  const json ids = server.Call("debug.enqueue", {{"tasks", batch}})["task_ids"];
  for (const json& id : ids) CHECK(server.WaitTaskState(id.get<std::int64_t>(), "succeeded", 15s)["host_id"] == "h1");

  // One runner, so every task needed a request that handed it out: the first
  // came with a (held) take, the others with the finish of the one before.
  // Without that, each task would have cost a take of its own.
  const int takes = served("task.take") - takes_before;
  const int finishes = served("task.finish") - finishes_before;
  INFO("task.take " << takes << ", task.finish " << finishes);
  CHECK(finishes == kTasks);
  CHECK(takes <= 4);  // the one that got the first task, and held takes while idle before and after
}

TEST_CASE("integration: progress a plugin reports as it returns is not sent after the task's finish",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, /*capacity=*/1));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  auto served = [&](const char* op) { return server.Call("server.status", json::object())["requests"].value(op, 0); };
  const int progress_before = served("task.progress");

  // The fake automator reports 100 % as its last step: with no latency, that
  // report is still queued when the runner sends the finish. Sent after it,
  // weftd would refuse it (the attempt is over), a wasted request per task.
  constexpr int kTasks = 20;
  json batch = json::array();
  for (int i = 0; i < kTasks; ++i)
    batch.push_back({{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n" + std::to_string(i)}});
  const json ids = server.Call("debug.enqueue", {{"tasks", batch}})["task_ids"];
  for (const json& id : ids) CHECK(server.WaitTaskState(id.get<std::int64_t>(), "succeeded", 15s)["host_id"] == "h1");
  std::this_thread::sleep_for(300ms);  // the control thread sends what it holds within 100 ms

  // Only a report the control thread picked up before the plugin returned may
  // still go (a race of two threads, rare); before, every task sent one.
  const int progress = served("task.progress") - progress_before;
  INFO("task.progress " << progress << " for " << kTasks << " tasks");
  CHECK(progress <= kTasks / 4);
}

TEST_CASE("integration: bad plugins are refused by name, plugin.list shows exactly the good ones",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(),
            {kBuild / "plugins/fixtures", kBuild / "plugins/providers", kBuild / "plugins/automators"}));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));

  json plugins = server.Call("plugin.list", json::object());
  std::vector<std::string> types;
  for (const auto& p : plugins["plugins"]) types.push_back(p["type"]);
  // Exactly the good fixture of the fixtures; the fake plugins, and any other
  // real plugin the build puts into providers/ and automators/, beside it.
  std::vector<std::string> fixture_types;
  for (const auto& t : types) {
    if (t.rfind("fixture-", 0) == 0) fixture_types.push_back(t);
  }
  CHECK(fixture_types == std::vector<std::string>{"fixture-good"});
  CHECK(std::find(types.begin(), types.end(), "fake-automator") != types.end());
  CHECK(std::find(types.begin(), types.end(), "fake-provider") != types.end());

  const std::string log = host.Log();
  const std::string fixtures = (kBuild / "plugins/fixtures").string();
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures + "/fixture_no_entry.so: no entry symbol"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures +
                                  "/fixture_major2.so: built for plugin ABI 2.2; this host supports 1.2"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures + "/fixture_minor1.so: built for plugin ABI 1.3"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures + "/fixture_oversized.so: oversized descriptor"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures + "/fixture_init_throws.so: plugin "
                                                                 "'fixture-init-throws': init threw a C++ exception"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures + "/fixture_good_dup.so: duplicate type name"));
  CHECK_THAT(log, Catch::Contains("refused plugin " + fixtures +
                                  "/fixture_create_only.so: provider 'fixture-create-only' does not declare "
                                  "CONFIRM, DELETE"));
  // plugin.list (weft plugin list) shows the refusal with its reason.
  bool listed = false;
  for (const auto& r : plugins["refused"]) {
    if (r["file"] == fixtures + "/fixture_create_only.so") {
      listed = true;
      CHECK_THAT(r["reason"].get<std::string>(), Catch::Contains("does not declare CONFIRM, DELETE"));
    }
  }
  CHECK(listed);

  // The host kept going: a task for the good fixture runs.
  const std::int64_t id = server.Enqueue({{"plugin", "fixture-good"}, {"action", "INSTALL"}});
  json t = server.WaitTaskState(id, "succeeded", 15s);
  CHECK(t["result"]["ran"] == true);
}

TEST_CASE("integration: a task of a SIGKILLed host is handed out again after its lease", "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host first(HostIn(tmp / "h1", "h1", server.provisioner(), {}, 1));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));

  const std::int64_t id = server.Enqueue({{"plugin", "fake-provider"},
                                          {"action", "CREATE"},
                                          {"node_id", "n7"},
                                          {"max_attempts", 3},
                                          {"payload", {{"provider", {{"fields", {{"latency_ms", 2500}}}}}}}});
  json leased = server.WaitTaskState(id, "leased", 10s);
  CHECK(leased["host_id"] == "h1");
  CHECK(leased["attempt"] == 1);
  first.process().Signal(SIGKILL);
  REQUIRE(first.process().Wait(5s).has_value());

  Host second(HostIn(tmp / "h2", "h2", server.provisioner(), {}, 1));
  json done = server.WaitTaskState(id, "succeeded", 30s);
  INFO(done.dump());
  CHECK(done["attempt"] == 2);
  CHECK(done["host_id"] == "h2");
  CHECK(done["result"]["provider_id"] == "fake-n7");
  REQUIRE(done["attempts"].size() == 2);
  CHECK(done["attempts"][0]["host_id"] == "h1");
  CHECK(done["attempts"][1]["host_id"] == "h2");
  CHECK(done["attempts"][1]["status"] == "succeeded");
}

TEST_CASE("integration: weftd restarted on the same ports, the host reconnects by itself", "[integration][host]") {
  TempDir tmp("weft-it");
  auto first = std::make_unique<Weftd>(ServerIn(tmp / "server"));
  const json endpoints = first->endpoints();
  Host host(HostIn(tmp / "host", "h1", first->provisioner()));
  REQUIRE(WaitFor([&] { return first->HostLive("h1"); }, 10s));
  const std::int64_t before = first->Enqueue({{"plugin", "fake-provider"}, {"action", "CREATE"}, {"node_id", "a"}});
  first->WaitTaskState(before, "succeeded", 15s);

  first->process().Signal(SIGKILL);
  REQUIRE(first->process().Wait(5s).has_value());
  first.reset();

  bool fresh_store = GENERATE(false, true);
  INFO("fresh store: " << fresh_store);
  // A fresh store does not know the host: weft-host must notice (NOT_FOUND) and register again.
  Weftd second(ServerIn(fresh_store ? tmp / "server-fresh" : tmp / "server", endpoints));
  REQUIRE(second.endpoints()["provisioner"] == endpoints["provisioner"]);
  const std::int64_t after = second.Enqueue({{"plugin", "fake-provider"}, {"action", "CREATE"}, {"node_id", "b"}});
  json t = second.WaitTaskState(after, "succeeded", 30s);
  CHECK(t["host_id"] == "h1");
  CHECK(t["result"]["provider_id"] == "fake-b");
  CHECK(host.process().running());
  if (fresh_store) CHECK_THAT(host.Log(), Catch::Contains("registering again"));
}

TEST_CASE("integration: a task running while weftd is down keeps its attempt, it is not handed out twice",
          "[integration][host]") {
  TempDir tmp("weft-it");
  constexpr int kLeaseMs = 3000;
  auto first = std::make_unique<Weftd>(ServerIn(tmp / "server", json(), kLeaseMs));
  const json endpoints = first->endpoints();
  Host host(HostIn(tmp / "host", "h1", first->provisioner()));
  REQUIRE(WaitFor([&] { return first->HostLive("h1"); }, 10s));
  const std::int64_t id = first->Enqueue({{"plugin", "fake-provider"},
                                          {"action", "CREATE"},
                                          {"node_id", "a"},
                                          {"payload", {{"provider", {{"fields", {{"latency_ms", 7000}}}}}}}});
  first->WaitTaskState(id, "leased", 15s);

  // Down for longer than the lease: the stored lease has run out when weftd comes back.
  first->process().Signal(SIGKILL);
  REQUIRE(first->process().Wait(5s).has_value());
  first.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 1000));
  Weftd second(ServerIn(tmp / "server", endpoints, kLeaseMs));

  json t = second.WaitTaskState(id, "succeeded", 30s);
  CHECK(t["attempt"] == 1);
  CHECK(t["host_id"] == "h1");
  CHECK_THAT(host.Log(), !Catch::Contains("attempt 2"));
}

TEST_CASE("integration: SIGTERM lets a short task finish, gives up a long one after the grace without using up "
          "its attempt",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // A grace far longer than the quick task, even on a loaded machine, and far shorter than the slow one.
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, 2, "shutdown_grace_ms = 3000\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  auto task = [](const char* node, int latency_ms) {
    return json{{"plugin", "fake-provider"},
                {"action", "CREATE"},
                {"node_id", node},
                {"max_attempts", 1},
                {"payload", {{"provider", {{"fields", {{"latency_ms", latency_ms}}}}}}}};
  };
  const std::int64_t quick = server.Enqueue(task("quick", 300));
  const std::int64_t slow = server.Enqueue(task("slow", 60000));
  server.WaitTaskState(quick, "leased", 10s);
  server.WaitTaskState(slow, "leased", 10s);

  const auto stop_started = std::chrono::steady_clock::now();
  CHECK(ExitCode(host.process().Stop(20s)) == 0);
  CHECK(std::chrono::steady_clock::now() - stop_started < 10s);

  json q = server.WaitTaskState(quick, "succeeded", 5s);
  CHECK(q["result"]["provider_id"] == "fake-quick");
  // The long one is given up by the stop, not failed: host.leave queues it
  // again, and that attempt does not count against its max_attempts of 1.
  json s = server.WaitTaskState(slow, "queued", 5s);
  CHECK(s["max_attempts"] == 2);
  REQUIRE(s["attempts"].size() == 1);
  CHECK(s["attempts"][0]["status"] == "expired");
  CHECK_THAT(s["attempts"][0]["message"].get<std::string>(),
             Catch::Contains("attempt 1 on host 'h1' was given up: host 'h1' stopped (host.leave); this attempt does "
                             "not count against max_attempts"));
  CHECK_THAT(host.Log(), Catch::Contains("task " + std::to_string(slow) + " attempt 1 given up after"));
  CHECK_THAT(host.Log(), Catch::Contains("told weftd that this host leaves"));

  // A host that comes back runs it.
  Host again(HostIn(tmp / "again", "h2", server.provisioner(), {}, 1));
  json done = server.WaitTaskState(slow, "leased", 15s);
  CHECK(done["attempt"] == 2);
}

TEST_CASE("integration: a plugin run longer than task_timeout_ms is cancelled and fails", "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, 1, "task_timeout_ms = 300\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  const std::int64_t id = server.Enqueue({{"plugin", "fake-automator"},
                                          {"action", "INSTALL"},
                                          {"max_attempts", 1},
                                          {"payload", {{"service", {{"action", {{"fields", {{"latency_ms", 30000}}}}}}}}}});
  json t = server.WaitTaskState(id, "failed", 10s);
  CHECK_THAT(t["message"].get<std::string>(), Catch::Contains("timed out after 300 ms"));
  CHECK(host.process().running());
}

TEST_CASE("integration: a host given several weftd endpoints logs the one it registered with, not the list",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // A second endpoint nobody listens on, as a failover list names a standby that is down.
  const std::string list = server.provisioner() + ",tcp://127.0.0.1:9";
  Host host(HostIn(tmp / "host", "h1", list));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 20s));
  REQUIRE(WaitFor([&] { return host.Log().find("registered with weftd at ") != std::string::npos; }, 10s));
  const std::string log = host.Log();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("registered with weftd at " + server.provisioner() + " as 'h1'"));
  CHECK_THAT(log, !Catch::Contains("weftd at " + list));
}

TEST_CASE(
    "integration: a task that returned and waits past task_timeout_ms to report to a frozen weftd is not "
    "said to be cancelled",
    "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {}, 1, "task_timeout_ms = 8000\n"));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  // Returns after 5 s, within its 8 s; weftd is frozen before that, so the
  // finish waits, and the task's timeout passes while it does.
  const std::int64_t id = server.Enqueue({{"plugin", "fake-provider"},
                                          {"action", "CREATE"},
                                          {"node_id", "late"},
                                          {"payload", {{"provider", {{"fields", {{"latency_ms", 5000}}}}}}}});
  server.WaitTaskState(id, "leased", 10s);
  server.process().Signal(SIGSTOP);
  const std::string waits = "task " + std::to_string(id) +
                            " attempt 1 has returned and still waits to report its result to weftd, past 8000 ms "
                            "(task_timeout_ms); nothing to cancel";
  const bool said = WaitFor([&] { return host.Log().find(waits) != std::string::npos; }, 60s);
  server.process().Signal(SIGCONT);
  const std::string log = host.Log();
  INFO(log);
  CHECK(said);
  CHECK_THAT(log, !Catch::Contains("task " + std::to_string(id) + " attempt 1 ran longer than"));
  CHECK_THAT(log, !Catch::Contains("cancelling"));
}

TEST_CASE("integration: a host frozen past its lease cancels the stale attempt and its finish is refused",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host first(HostIn(tmp / "h1", "h1", server.provisioner(), {}, 1));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  const std::int64_t id = server.Enqueue({{"plugin", "fake-provider"},
                                          {"action", "CREATE"},
                                          {"node_id", "n9"},
                                          {"max_attempts", 3},
                                          {"payload", {{"provider", {{"fields", {{"latency_ms", 20000}}}}}}}});
  server.WaitTaskState(id, "leased", 10s);
  first.process().Signal(SIGSTOP);  // no heartbeats: the lease runs out

  Host second(HostIn(tmp / "h2", "h2", server.provisioner(), {}, 1));
  REQUIRE(WaitFor(
      [&] {
        auto t = server.TryCall("task.get", {{"task_id", id}});
        return t.ok() && (*t)["attempt"] == 2 && (*t)["host_id"] == "h2";
      },
      15s));
  first.process().Signal(SIGCONT);

  // h1's next heartbeat names attempt 1, which weftd reports stale: h1 cancels the
  // plugin, reports, and weftd refuses that late finish. h2 keeps the task.
  REQUIRE(WaitFor([&] { return first.Log().find("weftd refused the finish of task") != std::string::npos; }, 10s));
  CHECK_THAT(first.Log(), Catch::Contains("attempt 1 is stale"));
  CHECK_THAT(first.Log(), Catch::Contains("dropping it: attempt 1 was superseded: weftd handed the task out again as "
                                          "attempt 2 (to host 'h2')"));
  json t = server.Task(id);
  CHECK(t["attempt"] == 2);
  CHECK(t["state"] == "leased");
  CHECK(t["host_id"] == "h2");
  CHECK(first.process().running());
}

namespace {

// The pids of the workers the master started, from its log ("started worker 1234 (slot ...").
std::vector<pid_t> StartedWorkerPids(const std::string& log) {
  std::vector<pid_t> out;
  const std::string marker = "started worker ";
  for (auto at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1))
    out.push_back(static_cast<pid_t>(std::stol(log.substr(at + marker.size()))));
  return out;
}

// The line of `text` that holds `what` (its first), without the newline.
std::string LineWith(const std::string& text, const std::string& what) {
  const auto at = text.find(what);
  if (at == std::string::npos) return "";
  const auto begin = text.rfind('\n', at);
  const auto end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     (end == std::string::npos ? text.size() : end) - (begin == std::string::npos ? 0 : begin + 1));
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("integration: a take read late never starts an older attempt after the host started a newer one",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));  // 1.5 s leases
  // Two workers of one thread each. Takes are held long, so the take of a
  // frozen worker is still waited for when it thaws.
  // DEBUG: a task's start is logged, with the worker that starts it.
  weft::testing::HostOptions options =
      HostIn(tmp / "host", "h1", server.provisioner(), {}, 2, "workers = 2\nlog_level = \"debug\"\n");
  options.take_wait_ms = 30000;
  Host host(options);
  REQUIRE(WaitFor([&] { return Occurrences(host.Log(), "serving any tenant with 1 thread(s)") == 2; }, 20s));
  const std::vector<pid_t> workers = StartedWorkerPids(host.Log());
  REQUIRE(workers.size() == 2);
  // Both runners' takes are held by weftd before a task is queued (weftd counts
  // each request it receives); a fixed sleep lost this race on a loaded machine.
  REQUIRE(WaitFor(
      [&] { return server.Call("server.status", json::object())["requests"].value("task.take", 0) >= 2; }, 20s));
  auto task = [](const char* node, int latency_ms) {
    return json{{"plugin", "fake-provider"},
                {"action", "CREATE"},
                {"node_id", node},
                {"max_attempts", 3},
                {"payload", {{"provider", {{"fields", {{"latency_ms", latency_ms}}}}}}}};
  };

  // One worker (busy) runs a long task; the other (late) is frozen holding its take.
  const std::int64_t long_id = server.Enqueue(task("long", 5000));
  REQUIRE(WaitFor([&] { return host.Log().find("task " + std::to_string(long_id) + " attempt 1: ") != std::string::npos; },
                  10s));
  const std::string line = LineWith(host.Log(), "task " + std::to_string(long_id) + " attempt 1: ");
  const pid_t busy = line.find("worker " + std::to_string(workers[0]) + ":") != std::string::npos ? workers[0]
                                                                                                  : workers[1];
  REQUIRE(line.find("worker " + std::to_string(busy) + ":") != std::string::npos);
  const pid_t late = busy == workers[0] ? workers[1] : workers[0];
  REQUIRE(kill(late, SIGSTOP) == 0);

  // Attempt 1 goes to the frozen worker's held take; its lease runs out (the
  // host never names it), and attempt 2 goes to the busy worker once it is free.
  const std::int64_t id = server.Enqueue(task("t", 3000));
  const std::string second = "task " + std::to_string(id) + " attempt 2: fake-provider CREATE";
  const bool handed_again = WaitFor([&] { return host.Log().find(second) != std::string::npos; }, 30s);
  kill(late, SIGCONT);
  INFO(host.Log());
  REQUIRE(handed_again);
  CHECK(host.Log().find("worker " + std::to_string(busy) + ": " + second) != std::string::npos);

  // The thawed worker reads attempt 1 now: the master refuses to start it.
  const std::string refused = "task " + std::to_string(id) + " attempt 1: not starting it in worker " +
                              std::to_string(late) + ": this host already started attempt 2 of the task";
  const std::string first = "task " + std::to_string(id) + " attempt 1: fake-provider CREATE";
  CHECK(WaitFor(
      [&] { return host.Log().find(refused) != std::string::npos || host.Log().find(first) != std::string::npos; },
      20s));
  json t = server.WaitTaskState(id, "succeeded", 20s);
  CHECK(t["attempt"] == 2);
  CHECK(t["attempts"][0]["status"] == "expired");
  CHECK(t["attempts"][1]["status"] == "succeeded");
  CHECK(Occurrences(host.Log(), refused) == 1);
  CHECK(host.Log().find(first) == std::string::npos);
  // The refused runner takes again, and its worker still serves.
  const std::int64_t after = server.Enqueue(task("after", 0));
  server.WaitTaskState(after, "succeeded", 20s);
  CHECK(kill(late, 0) == 0);
}

TEST_CASE("integration: with weftd down a host stops about as fast as its workers: host.leave waits at most 1 s",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // Calls to a weftd that is down wait this long: far more than a stop may take.
  weft::testing::HostOptions options = HostIn(tmp / "host", "h1", server.provisioner());
  options.request_timeout_ms = 20000;
  Host host(options);
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));
  server.Kill();
  std::this_thread::sleep_for(1s);  // a heartbeat is under way, unanswered

  const auto stop_started = std::chrono::steady_clock::now();
  CHECK(ExitCode(host.process().Stop(60s)) == 0);
  const auto took = std::chrono::steady_clock::now() - stop_started;
  INFO(host.Log());
  // Before: the heartbeat under way, then host.leave, each waited request_timeout_ms.
  CHECK(took < 10s);
  CHECK_THAT(host.Log(), Catch::Contains("weftd did not answer host.leave within 1000 ms"));
  CHECK_THAT(host.Log(), Catch::Contains("host: stopped"));
}

TEST_CASE("integration: workers set above capacity is warned about at start, naming both, a defaulted one is not",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  // Set in the file: the host runs, with capacity workers, and says why.
  Host over(HostIn(tmp / "over", "h1", server.provisioner(), {}, /*capacity=*/2, "workers = 5\n"));
  // Defaulted (2) above a capacity of 1: nothing to warn about.
  Host one(HostIn(tmp / "one", "h2", server.provisioner(), {}, /*capacity=*/1));
  REQUIRE(WaitFor([&] { return server.HostLive("h1") && server.HostLive("h2"); }, 15s));
  REQUIRE(WaitFor([&] { return over.Log().find("registered with weftd") != std::string::npos; }, 10s));
  INFO(over.Log());
  CHECK_THAT(over.Log(), Catch::Contains("'workers' = 5 is more than 'capacity' = 2: only 2 worker(s) run"));
  CHECK_THAT(over.Log(), Catch::Contains("capacity 2, 2 worker(s)"));
  CHECK(one.Log().find("is more than 'capacity'") == std::string::npos);
  // --workers on the command line counts as set too (a configuration of its
  // own: every host on a machine has its own state_dir).
  HostOptions flagged_options = HostIn(tmp / "flagged", "h3", server.provisioner());
  flagged_options.start = false;
  Host flagged_files(flagged_options);
  weft::testing::ProcessOptions output;
  output.stdout_path = output.stderr_path = tmp / "h3.log";
  Process flagged(kBuild / "bin/weft-host",
                  {"--config", flagged_files.config().string(), "--capacity", "1", "--workers", "3"}, output);
  REQUIRE(WaitFor([&] { return server.HostLive("h3"); }, 15s));
  CHECK_THAT(weft::testing::ReadFile(tmp / "h3.log"),
             Catch::Contains("'workers' = 3 is more than 'capacity' = 1: only 1 worker(s) run"));
}

TEST_CASE("integration: a second weft-host on a state directory in use is refused, naming the first, which serves on",
          "[integration][host]") {
  TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Host first(HostIn(tmp / "host", "h1", server.provisioner()));
  REQUIRE(WaitFor([&] { return server.HostLive("h1"); }, 10s));

  // The same file again (a second unit, or a start by hand beside the
  // service), and the same state_dir under another host id.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--host-id", "h9"}}) {
    std::vector<std::string> args = {"--config", first.config().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    weft::testing::RunResult second = weft::testing::Run(kBuild / "bin/weft-host", args, 20s);
    INFO(second.out << second.err);
    CHECK(second.exit_code == 1);
    CHECK_THAT(second.out + second.err,
               Catch::Contains("another weft-host (pid " + std::to_string(first.process().pid()) +
                               ") is already using the state directory " + (first.dir() / "state").string()));
    CHECK_THAT(second.out + second.err, Catch::Contains("give this one its own host_id or state_dir"));
  }
  CHECK_FALSE(server.HostLive("h9"));

  // The first still serves: a task goes through it.
  const std::int64_t id = server.Enqueue({{"plugin", "fake-provider"}, {"action", "CREATE"}, {"node_id", "n1"}});
  CHECK(server.WaitTaskState(id, "succeeded", 15s)["state"] == "succeeded");
  // Once it stops, the directory is free for the next one.
  CHECK(ExitCode(first.Stop()) == 0);
  first.Start();
  CHECK(WaitFor([&] { return first.Log().find("registered with weftd") != std::string::npos; }, 15s));
}

namespace {

// Stands in for weftd's provisioner endpoint where a test needs what the real
// one cannot be made to do on cue: it hands out the tasks the test queues,
// holds every task.finish unanswered until the test lets them through, and
// names the attempts the test says in each heartbeat's `stale`. Every other
// op is answered ok.
class FakeProvisioner {
 public:
  FakeProvisioner() : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = weft::wire::LastEndpoint(router_);
  }
  const std::string& endpoint() const { return endpoint_; }
  void Queue(json task) { tasks_.push_back(std::move(task)); }
  // From now on finishes are answered, the held ones first.
  void AnswerFinishes() {
    answer_finishes_ = true;
    for (Held& h : held_finishes_) Answer(h, {{"task", nullptr}});
    held_finishes_.clear();
  }
  // The bodies of every task.finish received, answered or held, in order.
  const std::vector<json>& finishes() const { return finishes_; }
  json stale = json::array();

  // Answers requests until `done` holds (checked between them, at least every
  // 20 ms) or `timeout` passes; false on timeout.
  bool ServeUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      zmq::pollitem_t item{static_cast<void*>(router_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (item.revents & ZMQ_POLLIN) ServeOne();
      while (!tasks_.empty() && !held_takes_.empty()) {
        Answer(held_takes_.front(), {{"task", tasks_.front()}});
        held_takes_.pop_front();
        tasks_.pop_front();
      }
    }
    return true;
  }

 private:
  struct Held {
    weft::wire::Frames envelope;
    std::string id;
  };

  void ServeOne() {
    weft::wire::Frames frames;
    Held h;
    if (!weft::wire::RecvMultipart(router_, frames, zmq::recv_flags::dontwait)) return;
    weft::wire::SplitEnvelope(frames, h.envelope);
    auto request = weft::wire::DecodeRequest(frames, weft::wire::Limits{}, &h.id);
    REQUIRE(request.ok());
    const json body = weft::wire::BodyTree(*request);
    if (request->op == "host.register") {
      Answer(h, {{"heartbeat_ms", 200}, {"lease_ms", 60000}});
    } else if (request->op == "host.heartbeat") {
      Answer(h, {{"renewed", body.value("in_flight", json::array()).size()}, {"stale", stale}});
    } else if (request->op == "task.take") {
      held_takes_.push_back(std::move(h));  // answered when a task is queued
    } else if (request->op == "task.finish") {
      finishes_.push_back(body);
      if (answer_finishes_) {
        Answer(h, {{"task", nullptr}});
      } else {
        held_finishes_.push_back(std::move(h));
      }
    } else {
      Answer(h, json::object());
    }
  }

  void Answer(Held& h, json reply) {
    weft::wire::Frames out = weft::wire::WithEnvelope(
        h.envelope, weft::wire::EncodeReply(weft::wire::Reply::Success(h.id, std::move(reply))));
    weft::wire::SendMultipart(router_, out);
  }

  zmq::context_t ctx_{1};
  zmq::socket_t router_;
  std::string endpoint_;
  std::deque<json> tasks_;
  std::deque<Held> held_takes_;
  std::vector<Held> held_finishes_;
  std::vector<json> finishes_;
  bool answer_finishes_ = false;
};

// A fake-automator INSTALL whose result is {"password_length": 6}.
json ReturningTask(std::int64_t task_id, int latency_ms) {
  return {{"task_id", task_id},
          {"attempt", 1},
          {"plugin", "fake-automator"},
          {"action", "INSTALL"},
          {"service", {{"action", {{"fields", {{"latency_ms", latency_ms}, {"password", "secret"}}}}}}}};
}

// The worker side of the master's channel, played by a test: reads the
// worker's events (one JSON object a line) and writes commands.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) { fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK); }
  ~Channel() { close(fd_); }
  // The events that arrived since the last call.
  std::vector<json> Read() {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) partial_.append(buf, static_cast<std::size_t>(n));
    std::vector<json> events;
    for (std::size_t nl; (nl = partial_.find('\n')) != std::string::npos; partial_.erase(0, nl + 1))
      events.push_back(json::parse(partial_.substr(0, nl)));
    return events;
  }
  void Send(const json& command) {
    const std::string line = command.dump() + "\n";
    REQUIRE(write(fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  }

 private:
  int fd_;
  std::string partial_;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("integration: a master's cancel that reaches a worker after its plugin returned cancels nothing, and the "
          "result is reported as it was",
          "[integration][host]") {
  // The master asks a worker to cancel an attempt weftd calls stale unless the
  // worker said that its plugin returned; a cancel sent just before that word
  // arrives reaches a worker whose task only waits to report. The test plays
  // the master (the channel) and weftd (FakeProvisioner, holding the finish).
  TempDir tmp("weft-it");
  FakeProvisioner weftd;
  weftd.Queue(ReturningTask(7, 0));
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  REQUIRE(fcntl(fds[1], F_SETFD, 0) == 0);  // the worker's end, inherited
  const json config = {{"server", weftd.endpoint()},
                       {"host_id", "h1"},
                       {"capacity", 1},
                       {"take_wait_ms", 1000},
                       {"request_timeout_ms", 60000},  // the held finish is one request
                       {"task_timeout_ms", 60000},
                       {"shutdown_grace_ms", 2000},
                       {"log_level", "info"},
                       {"workers", 1},
                       {"worker_memory_limit_mb", 1024},
                       {"lua_memory_mb", 64},
                       {"lua_instructions", 2000000000},
                       {"tenants", json::array()},
                       {"resource_cache_dir", (tmp / "cache").string()},
                       {"state_dir", (tmp / "state").string()}};
  const std::filesystem::path log = tmp / "worker.log";
  weft::testing::ProcessOptions output;
  output.stdout_path = log;
  output.stderr_path = log;
  Process worker(kBuild / "bin/weft-host",
                 {"--worker", "--channel-fd", std::to_string(fds[1]), "--threads", "1", "--worker-config",
                  config.dump(), "--incarnation", "test-1", "--plugin-file",
                  (kBuild / "plugins/automators/fake_automator.so").string()},
                 output);
  close(fds[1]);
  Channel master(fds[0]);
  bool ran = false, cancel_sent = false, ended = false;
  auto as_master = [&] {
    for (const json& e : master.Read()) {
      const std::string ev = e.value("ev", "");
      if (ev == "start") master.Send({{"cmd", "run"}, {"task_id", e["task_id"]}, {"attempt", e["attempt"]}});
      if (ev == "ran") ran = true;
      if (ev == "end") ended = true;
    }
    // Once the plugin returned and its finish waits at weftd.
    if (ran && !weftd.finishes().empty() && !cancel_sent) {
      master.Send({{"cmd", "cancel"},
                   {"task_id", 7},
                   {"attempt", 1},
                   {"reason", "attempt 1 of task 7 is no longer current; weftd cancelled the task or handed it out "
                              "again"}});
      cancel_sent = true;
    }
  };
  const std::string not_cancelled =
      "task 7 attempt 1: not cancelled (attempt 1 of task 7 is no longer current; weftd cancelled the task or "
      "handed it out again): its plugin had returned already; only its report to weftd was pending";
  const std::string cancelling = "task 7 attempt 1: cancelling";
  REQUIRE(weftd.ServeUntil(
      [&] {
        as_master();
        const std::string text = ReadFile(log);
        return cancel_sent && (text.find(not_cancelled) != std::string::npos ||
                               text.find(cancelling) != std::string::npos);
      },
      30s));
  // weftd answers now: the finish sent is the plugin's own.
  weftd.AnswerFinishes();
  REQUIRE(weftd.ServeUntil(
      [&] {
        as_master();
        return ended;
      },
      30s));
  master.Send({{"cmd", "stop"}});
  REQUIRE(weftd.ServeUntil([&] { return !worker.running(); }, 30s));
  const std::string text = ReadFile(log);
  INFO(text);
  CHECK(weft::testing::ExitCodeOf(*worker.Wait(0ms)) == 0);
  CHECK_THAT(text, Catch::Contains(not_cancelled));
  CHECK_THAT(text, !Catch::Contains(cancelling));
  REQUIRE(weftd.finishes().size() == 1);
  const json& finish = weftd.finishes()[0];
  CHECK(finish["task_id"] == 7);
  CHECK(finish["status"] == "succeeded");
  CHECK(finish["result"] == json{{"password_length", 6}});
}

TEST_CASE("integration: at the end of a stop's grace only the tasks still running are cancelled, not one that "
          "returned and waits to report",
          "[integration][host]") {
  TempDir tmp("weft-it");
  FakeProvisioner weftd;
  weftd.Queue(ReturningTask(11, 0));  // returns at once; its finish is held
  // Runs until cancelled, and then writes down that its plugin saw the cancel.
  const std::filesystem::path cancels = tmp / "cancels";
  weftd.Queue({{"task_id", 12},
               {"attempt", 1},
               {"plugin", "cancel-recorder"},
               {"action", "INSTALL"},
               {"cancel_file", cancels.string()}});
  // One worker with two threads, so both tasks are in the same stop's grace.
  HostOptions options = HostIn(tmp / "host", "h1", weftd.endpoint(),
                               {kBuild / "plugins/automators", kBuild / "plugins/cancel_recorder"}, 2,
                               "workers = 1\nshutdown_grace_ms = 300\nlog_level = \"debug\"\n");
  options.request_timeout_ms = 60000;  // the held finish is one request
  options.take_wait_ms = 1000;
  Host host(options);
  REQUIRE(weftd.ServeUntil(
      [&] {
        return !weftd.finishes().empty() &&
               host.Log().find("task 12 attempt 1: cancel-recorder INSTALL") != std::string::npos;
      },
      30s));
  host.process().Signal(SIGTERM);
  const std::string grace =
      "grace period over: cancelling 1 running task(s); they are given up, not reported: weftd queues them again when "
      "this host leaves, without counting the attempt; 1 task(s) that returned still wait to report to weftd";
  REQUIRE(weftd.ServeUntil([&] { return host.Log().find("grace period over: ") != std::string::npos; }, 30s));
  // weftd answers now: the task that returned is reported as it was.
  weftd.AnswerFinishes();
  REQUIRE(weftd.ServeUntil([&] { return !host.process().running(); }, 60s));
  const std::string log = host.Log();
  INFO(log);
  CHECK(weft::testing::ExitCodeOf(*host.process().Wait(0ms)) == 0);
  CHECK_THAT(log, Catch::Contains(grace));
  CHECK_THAT(log, Catch::Contains("task 12 attempt 1 given up after "));
  CHECK_THAT(log, !Catch::Contains("task 11 attempt 1 given up"));
  // The running task was given up because its plugin saw the cancel, once; the returned one was not touched.
  CHECK(ReadFile(cancels) == "task 12 attempt 1: the plugin saw the cancel\n");
  REQUIRE_FALSE(weftd.finishes().empty());
  for (const json& finish : weftd.finishes()) {
    INFO(finish.dump());
    CHECK(finish["task_id"] == 11);
    CHECK(finish["attempt"] == 1);
    CHECK(finish["status"] == "succeeded");
    CHECK(finish["result"] == json{{"password_length", 6}});
  }
}
