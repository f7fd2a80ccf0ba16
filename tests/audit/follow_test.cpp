// Following a job and the events endpoint across a restart of weftd, with the
// real processes: `weft job watch` and `weft events` run in the background
// while weftd is stopped (SIGTERM) and started again on the same store and
// ports. Both must say that weftd went away, keep trying, and go on once it is
// back; neither may exit meanwhile.
#include <string>

#include "harness.hpp"

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

// A catalog whose fake tasks take `latency_ms` each, imported into `s`.
void Import(Server& s, const fs::path& dir, int latency_ms) {
  const fs::path catalog = CopyExamples(dir);
  PatchFakeServices(catalog, {{"latency_ms", latency_ms}});
  RunResult r = s.Weft({"catalog", "import", catalog.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

const std::string kFast = "[jobs]\nretry_backoff_ms = 50\n[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 5000\n";

}  // namespace

TEST_CASE("follow: weft job watch survives a restart of weftd: it says it is reconnecting and follows the job "
          "to its end",
          "[audit][follow]") {
  testing::TempDir tmp("weft-follow");
  Server s(tmp / "server", /*curve=*/false, kFast);
  Host host(tmp.path(), "h1", s.provisioner());
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
  s.Start();
  const auto status = watch.Wait(120s);
  INFO(s.Out("watch") << s.Err("watch") << Tail(s.Log()) << Tail(host.Log()));
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
  Server s(tmp / "server", /*curve=*/false, kFast);
  Host host(tmp.path(), "h1", s.provisioner());
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
  INFO(s.Err("events") << Tail(s.Log()));
  REQUIRE(back);
  CHECK_THAT(s.Err("events"), Catch::Contains("went away; reconnecting"));
  CHECK(events.running());
  REQUIRE(WaitFor([&] { return s.Err("lines").find("reconnected") != std::string::npos; }, 30s));

  const json shrink = s.WeftJson({"cluster", "scale", "e1", "--size", "3"});
  const std::string shrink_job = shrink["job"]["id"];
  const bool after = WaitFor([&] { return HasJobEvent(s.Out("events"), shrink_job, "succeeded"); }, 60s);
  INFO(s.Out("events") << s.Err("events") << Tail(s.Log()));
  REQUIRE(after);
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

}  // namespace weft::audit_test
