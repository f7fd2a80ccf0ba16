// Following a job and the events endpoint across a restart of weftd, with the
// real processes: `weft job watch` and `weft events` run in the background
// while weftd is stopped (SIGTERM) and started again on the same store and
// ports. Both must say that weftd went away, keep trying, and go on once it is
// back; neither may exit meanwhile.
#include <set>
#include <string>

#include "options.hpp"

namespace weft::audit_test {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The JSON objects of a `-o json` event stream, one per line.
std::vector<json> Lines(const std::string& text) {
  std::vector<json> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a line still being written
    json j = json::parse(text.substr(start, end - start), nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
    start = end + 1;
  }
  return out;
}

bool HasJobEvent(const std::string& stream, const std::string& job_id, const std::string& status) {
  for (const json& e : Lines(stream))
    if (e.value("type", "") == "job" && e.value("job_id", "") == job_id && e.value("status", "") == status) return true;
  return false;
}

// A catalog whose fake tasks take `latency_ms` each, imported into `s`;
// `provider` is merged into the fake provider's fields.
void Import(Weftd& s, const fs::path& dir, int latency_ms, const json& provider = json::object()) {
  const CatalogDir catalog(dir);
  catalog.PatchActions("", "", {{"latency_ms", latency_ms}});
  catalog.PatchProvider(provider);
  RunResult r = s.Weft({"catalog", "import", catalog.path().string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

const std::string kFast = "[jobs]\nretry_backoff_ms = 50\n[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 5000\n";

}  // namespace

TEST_CASE("follow: weft job watch survives a restart of weftd: it says it is reconnecting and follows the job "
          "to its end",
          "[audit][follow]") {
  testing::TempDir tmp("weft-follow");
  Weftd s(ServerIn(tmp / "server", /*curve=*/false, kFast));
  Host host(HostIn(tmp.path(), "h1", s.provisioner()));
  Import(s, tmp / "catalog", 300);
  const json started = s.WeftJson({"cluster", "create", "w1", "--template", "web-fake", "--size", "3"});
  const std::string job = started["job"]["id"];
  Process watch = s.Background("watch", {"--timeout", "1000", "job", "watch", job});
  REQUIRE(WaitFor([&] { return s.Err("watch").find("job " + job) != std::string::npos; }, 20s));

  s.Stop();
  const bool noticed = WaitFor([&] { return s.Err("watch").find("reconnecting") != std::string::npos; }, 20s);
  INFO(s.Err("watch"));
  REQUIRE(noticed);
  CHECK(watch.running());  // still waiting for weftd, not given up
  REQUIRE(s.Start().ok());
  const auto status = watch.Wait(120s);
  INFO(s.Out("watch") << s.Err("watch") << Tail(s.Log(), 4000) << Tail(host.Log(), 4000));
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK_THAT(s.Err("watch"), Catch::Contains("reconnected to weftd"));
  CHECK(Count(s.Err("watch"), "reconnecting") == 1);  // once per outage, not once per try
  CHECK_THAT(s.Out("watch"), Catch::Contains("job " + job + " (create) succeeded"));
  CHECK(s.WeftJson({"job", "show", job})["job"]["status"] == "succeeded");
}

TEST_CASE("follow: weft events prints a cluster's events, one per line, and goes on after weftd restarts",
          "[audit][follow]") {
  testing::TempDir tmp("weft-follow");
  Weftd s(ServerIn(tmp / "server", /*curve=*/false, kFast));
  Host host(HostIn(tmp.path(), "h1", s.provisioner()));
  Import(s, tmp / "catalog", 100);
  // A cluster to follow, and another whose events must not show.
  const json first = s.WeftJson({"cluster", "create", "e1", "--template", "web-fake", "--size", "3", "--wait"});
  const std::string cluster_id = s.WeftJson({"cluster", "get", "e1"})["cluster"]["id"];
  Process events = s.Background("events", {"-o", "json", "events", "--cluster", "e1"});
  Process lines = s.Background("lines", {"events", "--cluster", "e1"});
  REQUIRE(WaitFor([&] { return s.Err("events").find("following weftd's events") != std::string::npos; }, 20s));
  REQUIRE(WaitFor([&] { return s.Err("lines").find("following weftd's events") != std::string::npos; }, 20s));

  // Job events are published whether or not a subscription reached weftd yet;
  // a job's last one comes after its tasks ran, by then the subscription has.
  const json grow = s.WeftJson({"cluster", "scale", "e1", "--size", "4"});
  const std::string grow_job = grow["job"]["id"];
  (void)s.WeftJson({"cluster", "create", "other", "--template", "web-fake", "--size", "3"});
  REQUIRE(WaitFor([&] { return HasJobEvent(s.Out("events"), grow_job, "succeeded"); }, 60s));

  s.Restart();
  const bool back = WaitFor([&] { return s.Err("events").find("reconnected") != std::string::npos; }, 30s);
  INFO(s.Err("events") << Tail(s.Log(), 4000));
  REQUIRE(back);
  CHECK_THAT(s.Err("events"), Catch::Contains("went away; reconnecting"));
  CHECK(events.running());
  REQUIRE(WaitFor([&] { return s.Err("lines").find("reconnected") != std::string::npos; }, 30s));

  const json shrink = s.WeftJson({"cluster", "scale", "e1", "--size", "3"});
  const std::string shrink_job = shrink["job"]["id"];
  const bool after = WaitFor([&] { return HasJobEvent(s.Out("events"), shrink_job, "succeeded"); }, 60s);
  INFO(s.Out("events") << s.Err("events") << Tail(s.Log(), 4000));
  REQUIRE(after);
  // The restarted weftd numbers its events afresh: the command says events may be missed.
  CHECK_THAT(s.Err("events"), Catch::Contains("events were missed (weftd's numbering started anew"));
  CHECK_THAT(s.Err("events"), Catch::Contains("read the state again"));
  // Every event is one JSON object of cluster e1, with its topic.
  for (const json& e : Lines(s.Out("events"))) {
    INFO(e.dump());
    CHECK(e["topic"].get<std::string>().find("/" + cluster_id + "/") != std::string::npos);
    CHECK(e.value("cluster_id", "") == cluster_id);
  }
  // The same for people: one line per event.
  REQUIRE(WaitFor([&] { return s.Out("lines").find("job " + shrink_job + " scale succeeded") != std::string::npos; },
                  30s));
  CHECK_THAT(s.Out("lines"), Catch::Contains("job " + grow_job + " scale succeeded") &&
                                 Catch::Contains("cluster e1 (" + cluster_id + ") active"));
  (void)first;
}

TEST_CASE("follow: weft events --job shows that job's events and its tasks', not the cluster's next job's",
          "[audit][follow]") {
  testing::TempDir tmp("weft-follow");
  Weftd s(ServerIn(tmp / "server", /*curve=*/false, "[jobs]\nretry_backoff_ms = 50\nmax_attempts = 2\n"));
  Host host(HostIn(tmp.path(), "h1", s.provisioner()));
  // Node j1-2's CREATE fails twice: the create fails for good, and its retry (followed here) succeeds.
  Import(s, tmp / "catalog", 20, {{"fail_actions", "CREATE"}, {"fail_nodes", "j1-2"}, {"fail_attempts", 2}});
  RunResult failed = s.Weft({"cluster", "create", "j1", "--template", "web-fake", "--size", "3", "--keep-on-failure",
                             "--wait"});
  REQUIRE(failed.exit_code == 1);
  const std::string job = s.WeftJson({"cluster", "get", "j1"})["cluster"]["latest_job"];
  Process only_job = s.Background("job", {"-o", "json", "events", "--job", job});
  Process whole = s.Background("cluster", {"-o", "json", "events", "--cluster", "j1"});
  REQUIRE(WaitFor([&] { return s.Err("job").find("following weftd's events") != std::string::npos; }, 20s));
  REQUIRE(WaitFor([&] { return s.Err("cluster").find("following weftd's events") != std::string::npos; }, 20s));

  RunResult retried = s.Weft({"job", "retry", job, "--wait"});
  INFO(retried.out << retried.err);
  REQUIRE(retried.exit_code == 0);
  REQUIRE(WaitFor([&] { return HasJobEvent(s.Out("job"), job, "succeeded"); }, 60s));
  const json grow = s.WeftJson({"cluster", "scale", "j1", "--size", "4"});
  const std::string next = grow["job"]["id"];
  REQUIRE(WaitFor([&] { return HasJobEvent(s.Out("cluster"), next, "succeeded"); }, 60s));

  std::set<std::int64_t> tasks;
  const json shown = s.WeftJson({"job", "show", job});
  for (const json& t : shown["job"]["tasks"]) tasks.insert(t["id"].get<std::int64_t>());
  int task_events = 0;
  for (const json& e : Lines(s.Out("job"))) {
    INFO(e.dump());
    if (e["type"] == "job") CHECK(e["job_id"] == job);
    if (e["type"] != "task" && e["type"] != "task.progress") continue;
    ++task_events;
    CHECK(tasks.count(e["task_id"].get<std::int64_t>()) == 1);  // the next job's progress included
  }
  CHECK(task_events > 0);
  // The cluster's stream has its tasks' progress (the next job's too).
  int progress = 0;
  for (const json& e : Lines(s.Out("cluster"))) progress += e["type"] == "task.progress";
  CHECK(progress > 0);
  CHECK(!HasJobEvent(s.Out("job"), next, "succeeded"));
}

}  // namespace weft::audit_test
