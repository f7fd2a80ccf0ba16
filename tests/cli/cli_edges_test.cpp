// The CLI's rough edges a user trial found, each checked with the real `weft`
// against a real weftd (and, where jobs must run, a real weft-host with the fake
// plugins) on ephemeral loopback ports.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/cli/format.hpp"
#include "weft/common/wire.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::BuildPath;
using testing::Process;
using testing::ProcessOptions;
using testing::RunResult;
using testing::TempDir;
using testing::WaitFor;

const fs::path kExamples = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";

RunResult Weft(const std::vector<std::string>& args) { return testing::Run(BuildPath("bin/weft"), args); }

std::size_t Lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// One weft-host with the build's plugins (the fake provider and automator among them), files in dir/edge-host.
testing::HostOptions EdgeHost(const testing::Weftd& server, const fs::path& dir) {
  return {.dir = dir,
          .id = "edge-host",
          .server = server.provisioner(),
          .capacity = 8,
          .workers = 1,
          .shutdown_grace_ms = 1000};
}

void Import(const testing::Weftd& server, const fs::path& dir) {
  RunResult r = server.Weft({"catalog", "import", dir.string()});
  INFO(r.out << r.err << server.Log());
  REQUIRE(r.exit_code == 0);
}

json Job(const testing::Weftd& server, const std::string& id) {
  return server.WeftJson({"job", "show", id})["job"];
}

// weftd (`jobs_toml`: its [jobs] keys), one weft-host and the fake catalog; the host
// is live when this returns.
struct JobsEnv {
  explicit JobsEnv(const std::string& name, const std::string& jobs_toml = "retry_backoff_ms = 50\n",
                   const json& patch = json::object())
      : server(name, "[jobs]\njanitor_interval_ms = 100\n" + jobs_toml +
                         "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n"),
        dir(name + "-files"),
        host(EdgeHost(server, dir.path())) {
    REQUIRE(WaitFor(
        [&] {
          RunResult r = server.Weft({"-o", "json", "host", "list"});
          return r.exit_code == 0 && r.out.find("\"live\": true") != std::string::npos;
        },
        30s));
    testing::CatalogDir catalog(dir.path() / "catalog");
    catalog.PatchActions("", "", patch);
    Import(server, catalog.path());
  }
  std::string HostLog() const { return host.Log(); }

  testing::Weftd server;
  TempDir dir;
  testing::Host host;
};

// A loopback TCP port where a plain socket accepts connections and never says a word.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~SilentListener() { close(fd_); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  int fd_ = -1;
  std::string endpoint_;
};

}  // namespace

// ---- --config ----------------------------------------------------------------------

TEST_CASE("weft cli edges: --config takes inline JSON or a file alike, and says what is wrong with the JSON",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges");
  Import(server, kExamples);
  const std::vector<std::string> plan = {"cluster", "plan", "shop", "--template", "web-fake", "--size", "3"};
  auto with = [&](std::vector<std::string> head, const std::string& config) {
    head.push_back("--config");
    head.push_back(config);
    return server.Weft(head);
  };

  RunResult inline_plan = with(plan, R"({"a":1})");
  INFO(inline_plan.out << inline_plan.err);
  CHECK(inline_plan.exit_code == 0);
  CHECK_THAT(inline_plan.out, Catch::Contains("plan: "));

  testing::WriteFile(server.Path("config.json"), R"({"a":1})");
  CHECK(with(plan, server.Path("config.json").string()).exit_code == 0);

  // Not an object: the same sentence for plan and create, from a file or inline.
  for (const auto& head : {plan, std::vector<std::string>{"cluster", "create", "shop", "--template", "web-fake",
                                                          "--size", "3", "--dry-run"}}) {
    RunResult array = with(head, "[]");
    INFO(array.err);
    CHECK(array.exit_code == 2);
    CHECK(Lines(array.err) == 1);
    CHECK_THAT(array.err, Catch::StartsWith("weft: --config must be a JSON object such as '{\"a\":1}', got []"));
  }
  testing::WriteFile(server.Path("list.json"), "[1]");
  CHECK_THAT(with(plan, server.Path("list.json").string()).err,
             Catch::Contains("--config file " + server.Path("list.json").string() + " must be a JSON object"));

  RunResult broken = with(plan, R"({"a":)");
  CHECK(broken.exit_code == 2);
  CHECK_THAT(broken.err, Catch::StartsWith("weft: --config is not valid JSON: "));
  CHECK_THAT(broken.err, Catch::Contains("line 1, column 6"));
  CHECK_THAT(broken.err, !Catch::Contains("fix the file"));

  RunResult missing = with(plan, "no-such-config.json");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("--config: no file no-such-config.json and not JSON either"));
}

// ---- the server's words --------------------------------------------------------------

TEST_CASE("weft cli edges: errors name what the user typed, not wire fields, and leases read as durations",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges");
  Import(server, kExamples);

  for (const char* verb : {"plan", "create"}) {
    RunResult big = server.Weft({"cluster", verb, "huge", "--template", "web-fake", "--size", "200000"});
    INFO(big.err);
    CHECK(big.exit_code == 1);
    CHECK_THAT(big.err, Catch::Contains("size must be an integer from 1 to 100000, got 200000"));
    CHECK_THAT(big.err, !Catch::Contains("body."));
  }
  RunResult name = server.Weft({"cluster", "create", "bad name", "--template", "web-fake", "--size", "1"});
  CHECK_THAT(name.err, Catch::Contains("a cluster name must be 1 to 128 characters"));
  CHECK_THAT(name.err, !Catch::Contains("body."));

  // web-fake allows leases of up to 7 days.
  RunResult too_long =
      server.Weft({"cluster", "create", "shop", "--template", "web-fake", "--size", "3", "--lease", "30d"});
  INFO(too_long.err);
  CHECK(too_long.exit_code == 1);
  CHECK_THAT(too_long.err, Catch::Contains("a lease of 30d is longer than template 'web-fake' allows (7d, "
                                           "administration.leaseduration.max)"));
  CHECK_THAT(too_long.err, !Catch::Contains(" ms"));
  // Through the api: lease_ms is milliseconds, and 0 asks for no lease at all.
  Result<json> as_text = server.TryCall(
      "cluster.create", {{"name", "shop"}, {"template", "web-fake"}, {"size", 3}, {"lease_ms", "1d"}});
  REQUIRE_FALSE(as_text.ok());
  CHECK_THAT(as_text.status().message(),
             Catch::StartsWith("lease_ms must be a whole number of milliseconds from 0 (no lease) to ") &&
                 Catch::EndsWith("got \"1d\" (a duration such as 1d is what the CLI's --lease takes)"));
  Result<json> none =
      server.TryCall("cluster.create", {{"name", "shop"}, {"template", "web-fake"}, {"size", 3}, {"lease_ms", 0}});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(),
             Catch::StartsWith("no lease (lease_ms 0: a cluster that never expires) is longer than template "
                               "'web-fake' allows (7d"));
  Result<json> fraction = server.TryCall("job.get", {{"job", 1.5}});
  REQUIRE_FALSE(fraction.ok());
  CHECK_THAT(fraction.status().message(), Catch::StartsWith("job must be a job id, a whole number from 1 up"));

  // No host runs the fake plugins, so the create job waits; the lease is the cluster's already.
  REQUIRE(server.Weft({"cluster", "create", "shop", "--template", "web-fake", "--size", "3", "--config",
                       R"({"shop":{"currency":"EUR"}})"})
              .exit_code == 0);
  // The table shows the config the cluster's tasks get.
  RunResult got = server.Weft({"cluster", "get", "shop"});
  INFO(got.out << got.err);
  CHECK_THAT(got.out, Catch::Contains(R"("shop":{"currency":"EUR"})"));
  RunResult extend = server.Weft({"cluster", "extend-lease", "shop", "--lease", "10d"});
  INFO(extend.err);
  CHECK(extend.exit_code == 1);
  CHECK_THAT(extend.err, Catch::Contains("extending to 11d"));
  CHECK_THAT(extend.err, Catch::Contains("passes the template's maximum lease of 7d"));
  CHECK_THAT(extend.err, !Catch::Contains(" ms"));
  // weftd writes durations as the CLI does ("6d 23h 59m", not "6d23h59m58s").
  CHECK_THAT(extend.err, Catch::Matches("[\\s\\S]*it can expire at the latest 6d 23h 5[89]m from now[\\s\\S]*"));
  // Within the maximum: the new expiry keeps its minutes (1d + 1h less the seconds since the create,
  // which round away when the test is fast).
  RunResult hour = server.Weft({"cluster", "extend-lease", "shop", "--lease", "1h"});
  INFO(hour.out << hour.err);
  CHECK(hour.exit_code == 0);
  CHECK_THAT(hour.out, Catch::Matches("cluster 'shop' now expires in 1d (0h 5[89]m|1h)\n"));
}

TEST_CASE("weft cli edges: job watch counts from when the job started, not from when the watch did",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-watch");
  Import(server, kExamples);
  // No host runs the fake plugins, so the create job waits until it is aborted.
  const json created = server.WeftJson({"cluster", "create", "shop", "--template", "web-fake", "--size", "3"});
  INFO(created.dump());
  REQUIRE(created.contains("job"));
  const json& job_id = created["job"]["id"];
  const std::string id = job_id.is_string() ? job_id.get<std::string>() : job_id.dump();
  REQUIRE(!id.empty());
  std::this_thread::sleep_for(1600ms);

  // The duration ends each progress line ("..., 1.6s"): the job's age, at least the wait above.
  const auto last_duration = [](std::string line) {
    while (!line.empty() && line.back() == '\n') line.pop_back();
    return line.substr(line.rfind(", ") + 2);
  };
  testing::Process watch = server.Background("watch", {"job", "watch", id});
  REQUIRE(testing::WaitFor([&] { return server.Err("watch").find('\n') != std::string::npos; }, 30s));
  const std::string first = server.Err("watch").substr(0, server.Err("watch").find('\n') + 1);
  INFO("watch of the running job: " << first);
  const std::string running = last_duration(first);
  CHECK_THAT(running, !Catch::EndsWith("ms"));
  CHECK(std::stod(running) >= 1.6);

  REQUIRE(server.Weft({"job", "abort", id}).exit_code == 0);
  const std::optional<int> ended = watch.Wait(30s);
  REQUIRE(ended.has_value());
  const json job = Job(server, id);
  const std::int64_t took = job["finished_at_ms"].get<std::int64_t>() - job["created_at_ms"].get<std::int64_t>();
  REQUIRE(took >= 1600);

  // A job that ended long before the watch: its own duration, from request to end.
  std::this_thread::sleep_for(1200ms);
  RunResult again = server.Weft({"job", "watch", id});
  INFO(again.out << again.err);
  CHECK(again.exit_code == 1);
  const std::string line = again.err.substr(0, again.err.find('\n') + 1);
  CHECK(last_duration(line) == cli::Duration(took));
}

TEST_CASE("weft cli edges: a token's validity is the ttl asked for", "[cli][integration]") {
  testing::Weftd server("weft-cli-edges", "[security]\ncurve = true\n");
  // The superadmin credential weftd wrote for itself.
  const std::string credential = server.Path("data/credentials/superadmin.json").string();
  RunResult r = server.Weft({"--credentials", credential, "host", "token", "create", "--ttl", "5s"});
  INFO(r.err << server.Log());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::StartsWith("one-time enrollment token for a new host, valid for 5s;"));

  RunResult tiny = server.Weft({"--credentials", credential, "host", "token", "create", "--ttl", "500ms"});
  CHECK(tiny.exit_code == 2);
  CHECK_THAT(tiny.err, Catch::Contains("--ttl needs a duration of 1s or more"));
}

// ---- jobs ------------------------------------------------------------------------------

TEST_CASE("weft cli edges: nothing-to-do changes and finished jobs are refused in plain words",
          "[cli][integration]") {
  JobsEnv env("weft-cli-edges-jobs");
  testing::Weftd& s = env.server;
  RunResult create = s.Weft({"-o", "json", "cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"});
  INFO(create.out << create.err << s.Log() << env.HostLog());
  REQUIRE(create.exit_code == 0);
  const std::string job = json::parse(create.out)["job"]["id"].get<std::string>();
  const std::size_t jobs_before = s.WeftJson({"job", "list", "--cluster", "web"})["jobs"].size();

  RunResult twice = s.Weft({"cluster", "add-services", "web", "fake-redis,fake-redis"});
  INFO(twice.err);
  CHECK(twice.exit_code == 1);
  CHECK_THAT(twice.err, Catch::Contains("the list of services names 'fake-redis' twice"));
  CHECK_THAT(twice.err, !Catch::Contains("already runs"));

  RunResult same = s.Weft({"cluster", "scale", "web", "--size", "3"});
  INFO(same.err);
  CHECK(same.exit_code == 1);
  CHECK_THAT(same.err, Catch::Contains("nothing to do: cluster 'web' already has 3 nodes"));
  CHECK(s.WeftJson({"job", "list", "--cluster", "web"})["jobs"].size() == jobs_before);  // no job started

  RunResult retry = s.Weft({"job", "retry", job});
  CHECK(retry.exit_code == 1);
  CHECK_THAT(retry.err, Catch::Contains("job " + job + " has already succeeded; only a failed or aborted job"));
  RunResult abort = s.Weft({"job", "abort", job});
  CHECK(abort.exit_code == 1);
  CHECK_THAT(abort.err, Catch::Contains("job " + job + " has already succeeded; only a running job can be aborted"));
}

TEST_CASE("weft cli edges: a dry run counts the stages its job then shows, for create and for scale",
          "[cli][integration]") {
  JobsEnv env("weft-cli-edges-stages");
  testing::Weftd& s = env.server;
  // The full plan's stages; its --summary (what the table prints from) must count the same.
  auto stages_of_dry_run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--dry-run");
    RunResult r = s.Weft(args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const json plan = json::parse(r.out);
    json actions = json::object();
    for (const json& t : plan["tasks"]) actions[t["action"].get<std::string>()] = actions.value(t["action"], 0) + 1;
    args.push_back("--summary");
    RunResult counted = s.Weft(args);
    INFO(counted.out << counted.err);
    REQUIRE(counted.exit_code == 0);
    const json summary = json::parse(counted.out);
    CHECK(summary["summary"] == true);
    CHECK(summary["dry_run"] == true);
    CHECK(summary["operation"] == plan["operation"]);
    CHECK(summary["task_count"] == plan["tasks"].size());
    CHECK(summary["stage_count"] == plan["stages"].size());
    CHECK(summary["actions"] == actions);
    CHECK(summary["nodes"] == plan["layout"]["nodes"].size());
    CHECK_FALSE(summary.contains("tasks"));
    CHECK_FALSE(summary.contains("layout"));
    return plan["stages"].size();
  };
  auto stages_of_job = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    RunResult r = s.Weft(args);
    INFO(r.out << r.err << s.Log() << env.HostLog());
    REQUIRE(r.exit_code == 0);
    const json job = Job(s, json::parse(r.out)["job"]["id"].get<std::string>());
    CHECK(job["progress"]["stage"] == job["progress"]["stages"]);  // done: at the last stage
    return job["progress"]["stages"].get<std::size_t>();
  };
  const std::vector<std::string> create = {"cluster", "create", "web", "--template", "web-fake", "--size", "3"};
  const std::size_t planned = stages_of_dry_run(create);
  CHECK(planned > 1);
  CHECK(stages_of_job(create) == planned);

  const std::vector<std::string> grow = {"cluster", "scale", "web", "--size", "5"};
  const std::size_t planned_grow = stages_of_dry_run(grow);
  CHECK(stages_of_job(grow) == planned_grow);

  // A config that names other nodes' addresses makes the job wait for every CONFIRM
  // (a JOIN the engine adds to the plan): the counts still agree.
  {
    const fs::path file = env.dir.path() / "catalog" / "services" / "fake-haproxy.json";
    json doc = json::parse(testing::ReadFile(file));
    doc["provisioner"]["actions"]["configure"]["fields"]["backends"] =
        "%join(map(ip.bind_v4.service.fake-nginx,'$:8080'),',')%";
    testing::WriteFile(file, doc.dump(2));
    Import(s, env.dir.path() / "catalog");
  }
  const std::vector<std::string> addressed = {"cluster", "create", "lb", "--template", "web-fake", "--size", "3"};
  const std::size_t planned_addressed = stages_of_dry_run(addressed);
  CHECK(stages_of_job(addressed) == planned_addressed);
  const std::vector<std::string> grow_addressed = {"cluster", "scale", "lb", "--size", "5"};
  const std::size_t planned_grow_addressed = stages_of_dry_run(grow_addressed);
  CHECK(stages_of_job(grow_addressed) == planned_grow_addressed);

  // The table of a dry run says the same number.
  RunResult table = s.Weft({"cluster", "scale", "web", "--size", "6", "--dry-run"});
  INFO(table.out << table.err);
  CHECK_THAT(table.out, Catch::Contains(" in " + std::to_string(stages_of_dry_run({"cluster", "scale", "web", "--size",
                                                                                   "6"})) + " stages"));
  CHECK_THAT(table.out, Catch::Contains(" × CREATE"));

  // A summary is of a dry run only; without one nothing runs either.
  RunResult alone = s.Weft({"cluster", "scale", "web", "--size", "7", "--summary"});
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.err, Catch::Contains("--summary goes with --dry-run"));
  Result<json> refused = s.TryCall("cluster.scale", {{"cluster", "web"}, {"size", 7}, {"summary", true}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kInvalid);
  CHECK_THAT(refused.status().message(), Catch::Contains("summary is for a dry run"));
  CHECK(s.Call("cluster.get", {{"cluster", "web"}})["cluster"]["size"] == 5);
}

TEST_CASE("weft cli edges: the progress bar shows a retry's wait, and an aborted job where it stopped",
          "[cli][integration]") {
  // Every fake-nginx INSTALL fails its first attempt; the retry waits a minute.
  JobsEnv env("weft-cli-edges-retry", "retry_backoff_ms = 60000\nretry_backoff_max_ms = 60000\n");
  testing::Weftd& s = env.server;
  {
    const fs::path file = env.dir.path() / "catalog" / "services" / "fake-nginx.json";
    json doc = json::parse(testing::ReadFile(file));
    doc["provisioner"]["actions"]["install"]["fields"].merge_patch({{"fail_actions", "INSTALL"}, {"fail_attempts", 1}});
    testing::WriteFile(file, doc.dump(2));
    Import(s, env.dir.path() / "catalog");
  }
  RunResult started = s.Weft({"-o", "json", "cluster", "create", "web", "--template", "web-fake", "--size", "3"});
  INFO(started.out << started.err);
  REQUIRE(started.exit_code == 0);
  const std::string id = json::parse(started.out)["job"]["id"].get<std::string>();

  // `weft job watch`, not on a terminal: one progress line per change on stderr.
  ProcessOptions o;
  o.stdout_path = env.dir.path() / "watch.out";
  o.stderr_path = env.dir.path() / "watch.err";
  Process watch(BuildPath("bin/weft"), {"--server", s.api(), "job", "watch", id}, o);
  const bool waiting = WaitFor(
      [&] { return testing::ReadFile(env.dir.path() / "watch.err").find("waiting to retry") != std::string::npos; },
      60s);
  INFO(testing::ReadFile(env.dir.path() / "watch.err") << s.Log() << env.HostLog());
  REQUIRE(waiting);
  CHECK(Job(s, id)["progress"]["retrying"].get<int>() >= 1);
  RunResult shown = s.Weft({"job", "show", id});
  CHECK_THAT(shown.out, Catch::Contains("waiting to retry"));

  RunResult abort = s.Weft({"job", "abort", id});
  INFO(abort.err);
  REQUIRE(abort.exit_code == 0);
  const std::optional<int> ended = watch.Wait(30s);
  REQUIRE(ended.has_value());
  CHECK(WEXITSTATUS(*ended) == 1);
  const std::string err = testing::ReadFile(env.dir.path() / "watch.err");
  // The last progress line: the stage the job stopped at, not the last one, and why.
  std::smatch m;
  const std::string last = err.substr(err.rfind("job " + id + " create ["));
  REQUIRE(std::regex_search(last, m, std::regex(R"(stage (\d+)/(\d+) \(aborted\))")));
  CHECK(std::stoi(m[1]) < std::stoi(m[2]));
  const json job = Job(s, id);
  CHECK(job["progress"]["stage"].get<int>() == std::stoi(m[1]));
}

TEST_CASE("weft cli edges: a job's duration is its own: milliseconds for an undo, not the whole wait",
          "[cli][integration]") {
  // fake-redis START fails every attempt: the create fails for good and is undone.
  JobsEnv env("weft-cli-edges-undo", "retry_backoff_ms = 50\nmax_attempts = 2\n");
  testing::Weftd& s = env.server;
  {
    const fs::path file = env.dir.path() / "catalog" / "services" / "fake-redis.json";
    json doc = json::parse(testing::ReadFile(file));
    doc["provisioner"]["actions"]["start"]["fields"].merge_patch({{"fail_actions", "START"}});
    testing::WriteFile(file, doc.dump(2));
    Import(s, env.dir.path() / "catalog");
  }
  RunResult r = s.Weft({"cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"});
  INFO(r.out << r.err << s.Log() << env.HostLog());
  CHECK(r.exit_code == 1);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(; undone by job (\d+) in (\S+)\n)")));
  const json undo = Job(s, m[1]);
  const std::int64_t took = undo["finished_at_ms"].get<std::int64_t>() - undo["created_at_ms"].get<std::int64_t>();
  CHECK(m[2] == cli::Duration(took));
}

TEST_CASE("weft cli edges: --wait and job watch of a failed job print that job, with the job that undid it",
          "[cli][integration]") {
  // The fake provider's CONFIRM fails every attempt: the create fails for good and is undone.
  JobsEnv env("weft-cli-edges-failed", "retry_backoff_ms = 50\nmax_attempts = 1\n");
  testing::Weftd& s = env.server;
  testing::CatalogDir failing(env.dir.path() / "failing");
  failing.PatchProvider({{"fail_actions", "CONFIRM"}});
  Import(s, failing.path());

  RunResult r = s.Weft({"-o", "json", "cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"});
  INFO(r.out << r.err << s.Log() << env.HostLog());
  CHECK(r.exit_code == 1);
  const json printed = json::parse(r.out, nullptr, false);
  REQUIRE(printed.is_object());
  REQUIRE(printed.contains("job"));
  const json& job = printed["job"];
  REQUIRE(job.is_object());
  const std::string id = job["id"].get<std::string>();
  CHECK(job["operation"] == "create");
  CHECK(job["status"] == "failed");
  CHECK_THAT(job["message"].get<std::string>(), Catch::Contains("CONFIRM") && Catch::Contains("undoing it"));
  REQUIRE(printed.contains("undo_job"));
  const json& undo = printed["undo_job"];
  REQUIRE(undo.is_object());
  CHECK(undo["operation"] == "undo");
  CHECK(undo["status"] == "succeeded");
  CHECK(undo["parent_job"] == id);
  const std::string undo_id = undo["id"].get<std::string>();
  CHECK(undo_id != id);
  // Nothing but that object on stdout (no error object beside it); the sentence on stderr.
  CHECK_FALSE(printed.contains("error"));
  CHECK_THAT(r.err, Catch::Contains("weft: job " + id + " failed: ") &&
                        Catch::Contains("; undone by job " + undo_id + "\n"));

  // job watch of the failed job, once both have ended: the same.
  RunResult watched = s.Weft({"-o", "json", "job", "watch", id});
  INFO(watched.out << watched.err);
  CHECK(watched.exit_code == 1);
  json again = json::parse(watched.out, nullptr, false);
  REQUIRE(again.is_object());
  CHECK(again["job"]["id"] == id);
  CHECK(again["job"]["status"] == "failed");
  CHECK(again["undo_job"]["id"] == undo_id);

  // The table: one line saying the job failed and which job undid it.
  RunResult table = s.Weft({"job", "watch", id});
  INFO(table.out << table.err);
  CHECK(table.exit_code == 1);
  CHECK(Lines(table.out) == 1);
  CHECK_THAT(table.out, Catch::StartsWith("job " + id + " (create) failed after ") &&
                            Catch::Contains("; undone by job " + undo_id + " in "));

  // The job family's one shape: an object with "job" (and "cluster" where the reply has one).
  CHECK(s.WeftJson({"job", "show", id})["job"]["id"] == id);
  json started = s.WeftJson({"cluster", "create", "other", "--template", "web-fake", "--size", "3"});
  CHECK(started["job"]["operation"] == "create");
  CHECK(started["cluster"]["name"] == "other");
}

TEST_CASE("weft cli edges: deleting a deleted cluster is done, and says so", "[cli][integration]") {
  JobsEnv env("weft-cli-edges-delete");
  testing::Weftd& s = env.server;
  RunResult created = s.Weft({"cluster", "create", "web", "--template", "web-fake", "--size", "3", "--wait"});
  INFO(created.out << created.err << s.Log() << env.HostLog());
  REQUIRE(created.exit_code == 0);
  RunResult deleted = s.Weft({"cluster", "delete", "web", "--wait"});
  INFO(deleted.out << deleted.err);
  REQUIRE(deleted.exit_code == 0);
  const std::string cluster_id = s.WeftJson({"cluster", "get", "web"})["cluster"]["id"].get<std::string>();
  const std::size_t jobs = s.WeftJson({"job", "list", "--cluster", cluster_id})["jobs"].size();

  RunResult twice = s.Weft({"cluster", "delete", "web"});
  INFO(twice.out << twice.err);
  CHECK(twice.exit_code == 0);
  CHECK(twice.out == "cluster 'web' (id " + cluster_id + ") is already deleted (terminated); nothing to do\n");
  CHECK(twice.err.empty());
  RunResult json_twice = s.Weft({"-o", "json", "cluster", "delete", "web", "--wait"});
  INFO(json_twice.out << json_twice.err);
  CHECK(json_twice.exit_code == 0);
  json printed = json::parse(json_twice.out, nullptr, false);
  REQUIRE(printed.is_object());
  CHECK(printed["already_deleted"] == true);
  CHECK(printed["cluster"]["id"] == cluster_id);
  CHECK(printed["cluster"]["status"] == "terminated");
  CHECK(s.WeftJson({"job", "list", "--cluster", cluster_id})["jobs"].size() == jobs);  // no job started

  // A cluster that never was is still an error.
  RunResult missing = s.Weft({"cluster", "delete", "nosuch"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, !Catch::Contains("already deleted"));
}

TEST_CASE("weft cli edges: with -o json an error is a JSON object on stdout with its code and details",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-errors");
  Import(server, kExamples);

  RunResult missing = server.Weft({"-o", "json", "cluster", "get", "nosuch"});
  INFO(missing.out << missing.err);
  CHECK(missing.exit_code == 1);
  json not_found = json::parse(missing.out, nullptr, false);
  REQUIRE(not_found.is_object());
  CHECK(not_found["error"]["code"] == "NOT_FOUND");
  CHECK_THAT(not_found["error"]["message"].get<std::string>(), Catch::Contains("nosuch"));
  CHECK(not_found["error"]["details"].is_object());
  CHECK_THAT(missing.err, Catch::StartsWith("weft: ") && Catch::Contains("nosuch"));  // the sentence stays

  // No host runs the fake plugins: the job waits, and the name is taken.
  const json created = server.WeftJson({"cluster", "create", "shop", "--template", "web-fake", "--size", "3"});
  const std::string cluster_id = created["cluster"]["id"].get<std::string>();
  RunResult taken = server.Weft({"-o", "json", "cluster", "create", "shop", "--template", "web-fake", "--size", "3"});
  INFO(taken.out << taken.err);
  CHECK(taken.exit_code == 1);
  json conflict = json::parse(taken.out, nullptr, false);
  REQUIRE(conflict.is_object());
  CHECK(conflict["error"]["code"] == "CONFLICT");
  CHECK(conflict["error"]["details"]["cluster_id"] == cluster_id);

  // Nothing at the endpoint: UNAVAILABLE, from weft itself (no details).
  RunResult nobody = Weft({"-o", "json", "--server", "tcp://127.0.0.1:1", "--timeout", "2000", "status"});
  INFO(nobody.out << nobody.err);
  CHECK(nobody.exit_code == 1);
  json unavailable = json::parse(nobody.out, nullptr, false);
  REQUIRE(unavailable.is_object());
  CHECK(unavailable["error"]["code"] == "UNAVAILABLE");
  CHECK(unavailable["error"]["details"] == json::object());

  // A usage error too (exit 2).
  RunResult usage = server.Weft({"-o", "json", "cluster", "create", "x", "--template", "web-fake", "--size", "0"});
  CHECK(usage.exit_code == 2);
  CHECK(json::parse(usage.out, nullptr, false)["error"]["code"] == "INVALID");
  // Without -o json, stdout stays empty.
  CHECK(server.Weft({"cluster", "get", "nosuch"}).out.empty());
}

TEST_CASE("weft cli edges: a hint that names a command carries the --tenant given", "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-tenant", "[security]\ncurve = true\n");
  const std::string root = server.Path("data/credentials/superadmin.json").string();
  REQUIRE(server.Weft({"--credentials", root, "tenant", "create", "acme"}).exit_code == 0);
  RunResult user = server.Weft({"--credentials", root, "--tenant", "acme", "user", "create", "erin"});
  INFO(user.out << user.err);
  REQUIRE(user.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(user.out, m, std::regex("`weft (.*) -f FILE`")));
  CHECK(m[1] == "--tenant acme credentials erin");
  // The hint, run as it says (FILE a file), works.
  RunResult made = server.Weft({"--credentials", root, "--tenant", "acme", "credentials", "erin", "-f",
                                server.Path("erin.json").string()});
  INFO(made.out << made.err);
  CHECK(made.exit_code == 0);

  // An empty catalog kind's hint too.
  RunResult empty = server.Weft({"--credentials", root, "--tenant", "acme", "service", "list"});
  INFO(empty.out << empty.err);
  CHECK_THAT(empty.out, Catch::Contains("`weft --tenant acme service put FILE`"));
}

// ---- the server's checks of catalog puts and plans -------------------------------------------

TEST_CASE("weft cli edges: a get reply put back is refused for every catalog kind, and nothing is stored",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-envelope");
  Import(server, kExamples);
  const std::vector<std::pair<std::string, std::string>> entities = {{"provider", "fake"},
                                                                     {"hardwaretype", "small"},
                                                                     {"imagetype", "debian12"},
                                                                     {"service", "fake-base"},
                                                                     {"clustertemplate", "web-fake"}};
  for (const auto& [kind, name] : entities) {
    const json got = server.WeftJson({kind, "get", name});
    REQUIRE(got.contains("entity"));
    const std::int64_t version = got["version"].get<std::int64_t>();
    const fs::path file = server.Path(kind + "-reply.json");
    testing::WriteFile(file, got.dump(2));
    RunResult put = server.Weft({kind, "put", file.string()});
    INFO(kind << ": " << put.out << put.err);
    CHECK(put.exit_code == 1);
    CHECK_THAT(put.err, Catch::Contains("this is a " + kind + ".get reply: put its `entity`"));
    CHECK(server.WeftJson({kind, "get", name})["version"] == version);  // nothing new stored
    // Its entity goes in as it is (unchanged: equal to the latest).
    testing::WriteFile(file, got["entity"].dump(2));
    RunResult entity = server.Weft({"-o", "json", kind, "put", file.string()});
    INFO(entity.out << entity.err);
    CHECK(entity.exit_code == 0);
    CHECK(json::parse(entity.out, nullptr, false)["unchanged"] == true);
  }
}

TEST_CASE("weft cli edges: cluster plan refuses a service named twice, as a create does", "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-plan-twice");
  Import(server, kExamples);
  for (const char* verb : {"plan", "create"}) {
    std::vector<std::string> args = {"cluster", verb, "shop", "--template", "web-fake", "--size", "3",
                                     "--services", "fake-base,fake-base"};
    if (std::string(verb) == "create") args.push_back("--dry-run");
    RunResult r = server.Weft(args);
    INFO(verb << ": " << r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("the list of services names 'fake-base' twice"));
  }
  // Many copies: refused at the second, before anything is solved.
  json services = json::array();
  for (int i = 0; i < 50000; ++i) services.push_back("fake-base");
  Result<json> many = server.TryCall("cluster.plan", {{"name", "shop"}, {"template", "web-fake"}, {"size", 3},
                                                      {"services", services}, {"summary", true}});
  REQUIRE_FALSE(many.ok());
  CHECK(many.status().code() == Code::kInvalid);
  CHECK_THAT(many.status().message(), Catch::Contains("names 'fake-base' twice"));
}

// ---- commands, flags and endpoints ---------------------------------------------------------

TEST_CASE("weft cli edges: a mistyped command or option gets a suggestion", "[cli][integration]") {
  RunResult noun = Weft({"clustr", "list"});
  CHECK(noun.exit_code == 2);
  CHECK(Lines(noun.err) == 1);
  CHECK_THAT(noun.err, Catch::StartsWith("weft: unknown command 'clustr'; did you mean 'cluster'?"));

  RunResult verb = Weft({"cluster", "lsit"});
  CHECK(verb.exit_code == 2);
  CHECK_THAT(verb.err, Catch::StartsWith("weft: 'weft cluster' has no command 'lsit'; did you mean 'list'?"));

  RunResult flag = Weft({"cluster", "create", "x", "--template", "t", "--sise", "3"});
  CHECK(flag.exit_code == 2);
  CHECK_THAT(flag.err, Catch::Contains("has no option '--sise'; did you mean '--size'?"));

  RunResult nothing_close = Weft({"frobnicate"});
  CHECK(nothing_close.exit_code == 2);
  CHECK_THAT(nothing_close.err, !Catch::Contains("did you mean"));
}

TEST_CASE("weft cli edges: weft help lists every global option", "[cli][integration]") {
  RunResult help = Weft({"help"});
  REQUIRE(help.exit_code == 0);
  for (const char* flag : {"--server", "--credentials", "-o, --output", "--timeout", "--tenant", "--help", "--version"})
    CHECK_THAT(help.out, Catch::Contains(flag));
  RunResult one = Weft({"help", "status"});
  CHECK_THAT(one.out, Catch::Contains("--credentials"));
}

TEST_CASE("weft cli edges: a bad --server is refused at once, and a wrong peer is named as such",
          "[cli][integration]") {
  // A long --timeout: a check that waited for it would outlast the run's own limit (30 s).
  RunResult port = Weft({"--server", "tcp://127.0.0.1:99999", "--timeout", "600000", "status"});
  CHECK(port.exit_code == 2);
  CHECK_THAT(port.err, Catch::StartsWith("weft: --server 'tcp://127.0.0.1:99999' has no valid port"));

  RunResult host = Weft({"--server", "tcp://no-such-host.invalid:7420", "--timeout", "600000", "status"});
  CHECK(host.exit_code == 1);
  CHECK_THAT(host.err, Catch::StartsWith("weft: cannot resolve host 'no-such-host.invalid'"));

  testing::Weftd server("weft-cli-edges");
  RunResult events = Weft({"--server", server.endpoints()["events"].get<std::string>(), "--timeout", "300", "status"});
  INFO(events.err);
  CHECK(events.exit_code == 1);
  CHECK(Lines(events.err) == 1);
  CHECK_THAT(events.err, Catch::Contains("is it the api endpoint of a running weftd?"));
  CHECK_THAT(events.err, !Catch::Contains("credential"));

  SilentListener silent;
  RunResult mute = Weft({"--server", silent.endpoint(), "--timeout", "300", "status"});
  INFO(mute.err);
  CHECK(mute.exit_code == 1);
  // The client library's words for a peer that takes the connection and never answers the handshake.
  CHECK_THAT(mute.err, Catch::StartsWith("weft: no reply from " + silent.endpoint() + ": something at " +
                                         silent.endpoint() +
                                         " accepted the connection but did not answer the ZeroMQ handshake within "
                                         "300 ms: a stopped or overloaded weftd, or not weftd"));
  CHECK_THAT(mute.err, !Catch::Contains("does not speak ZeroMQ"));

  // The api endpoint itself still works.
  CHECK(Weft({"--server", server.api(), "status"}).exit_code == 0);
}

TEST_CASE("weft cli edges: a request lost to a weftd restart says so, and that its fate is unknown",
          "[cli][integration]") {
  // A weftd whose commit waits on a lock another connection holds has the request
  // and cannot answer it; it is killed and another starts on the same ports
  // before the client gives up. The client then finds a weftd that answers.
  testing::WeftdOptions options;
  options.name = "weft-cli-edges-lost";
  options.store = "sqlite";  // the lock is SQLite's
  testing::Weftd s(options);
  sqlite3* lock = nullptr;
  REQUIRE(sqlite3_open(s.db().c_str(), &lock) == SQLITE_OK);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closed_at_end(lock, sqlite3_close);
  // weftd writes now and then on its own (its timers): wait for such a write
  // to end rather than fail to take the lock (SQLITE_BUSY).
  sqlite3_busy_timeout(lock, 30000);
  REQUIRE(sqlite3_exec(lock, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  testing::Process lost = s.Background("lost", {"--timeout", "5000", "tenant", "create", "lost"});
  // The request reaches weftd and waits for the lock (weftd's busy_timeout_ms is 5 s).
  std::this_thread::sleep_for(1500ms);
  s.Kill();
  REQUIRE(sqlite3_exec(lock, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  closed_at_end.reset();
  REQUIRE(s.Start().ok());
  const std::optional<int> exit_code = lost.Wait(30s);
  INFO(s.Err("lost") << s.Out("lost"));
  REQUIRE(exit_code);
  CHECK(WIFEXITED(*exit_code));
  CHECK(WEXITSTATUS(*exit_code) == 1);
  CHECK_THAT(s.Err("lost"), Catch::StartsWith("weft: no reply from weftd at " + s.api() + " within 5s, but it "
                                              "answers now (up ") &&
                                Catch::Contains("it was restarted, or too busy to answer in time, while the request "
                                                "waited, so it may or may not have been done; look (weft job list, "
                                                "weft cluster list) before sending it again"));
  CHECK_THAT(s.Err("lost"), !Catch::Contains("is it the api endpoint"));
  CHECK(Lines(s.Err("lost")) == 1);
  // Here it was not done: the killed weftd never committed it.
  RunResult tenants = s.Weft({"-o", "json", "tenant", "list"});
  INFO(tenants.out << tenants.err);
  CHECK(tenants.exit_code == 0);
  CHECK_THAT(tenants.out, !Catch::Contains("\"lost\""));
}

// ---- catalog -----------------------------------------------------------------------------

TEST_CASE("weft cli edges: re-importing an unchanged catalog keeps every version and says unchanged",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges");
  TempDir dir("weft-cli-edges-catalog");
  fs::copy(kExamples, dir.path(), fs::copy_options::recursive);
  Import(server, dir.path());

  RunResult again = server.Weft({"catalog", "import", dir.path().string()});
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("unchanged service 'fake-nginx' (version 1)"));
  CHECK_THAT(again.out, !Catch::Contains("imported "));
  CHECK_THAT(again.out, Catch::Contains("0 entities imported, "));
  const json services = server.WeftJson({"service", "list"});
  for (const json& s : services["entities"]) CHECK(s["version"] == 1);

  // One file changed: that entity alone gets a new version.
  const fs::path file = dir.path() / "services" / "fake-nginx.json";
  json doc = json::parse(testing::ReadFile(file));
  doc["description"] = "nginx, changed";
  testing::WriteFile(file, doc.dump(2));
  json report = server.WeftJson({"catalog", "import", dir.path().string()});
  REQUIRE(report["imported"].size() == 1);
  CHECK(report["imported"][0]["name"] == "fake-nginx");
  CHECK(report["imported"][0]["version"] == 2);
  CHECK(report["unchanged"].size() > 5);
}

TEST_CASE("weft cli edges: re-importing entities with secrets keeps their versions, and the secrets sealed",
          "[cli][integration]") {
  // A live host registers the fake plugins, so weftd seals their sensitive fields.
  testing::Weftd server("weft-cli-edges-sealed", "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 3000\n");
  TempDir dir("weft-cli-edges-sealed-files");
  testing::Host host(EdgeHost(server, dir.path()));
  REQUIRE(WaitFor(
      [&] {
        RunResult r = server.Weft({"-o", "json", "host", "list"});
        return r.exit_code == 0 && r.out.find("\"live\": true") != std::string::npos;
      },
      30s));
  const fs::path catalog = dir.path() / "catalog";
  fs::create_directories(catalog / "providers");
  fs::create_directories(catalog / "services");
  json provider = {{"name", "vault"},
                   {"providertype", "fake-provider"},
                   {"provisioner", {{"api_token", "s3cret"}, {"credentials", {{"user", "u"}, {"key", 7}}}}}};
  json service = {{"name", "db"},
                  {"dependencies", json::object()},
                  {"provisioner",
                   {{"actions",
                     {{"install", {{"type", "fake-automator"}, {"fields", {{"password", "pw"}, {"echo", false}}}}}}}}}};
  testing::WriteFile(catalog / "providers" / "vault.json", provider.dump(2));
  testing::WriteFile(catalog / "services" / "db.json", service.dump(2));
  Import(server, catalog);
  const json stored = server.WeftJson({"provider", "get", "vault"});
  REQUIRE(stored["entity"]["provisioner"]["api_token"].is_string());
  CHECK(stored["entity"]["provisioner"]["api_token"].get<std::string>().rfind("enc:v2:", 0) == 0);
  auto puts = [&] {
    std::size_t n = 0;
    const json audit = server.WeftJson({"audit"});
    for (const json& e : audit["entries"])
      if (e["op"] == "provider.put" || e["op"] == "service.put") ++n;
    return n;
  };
  CHECK(puts() == 2);

  for (int run = 0; run < 2; ++run) {
    RunResult again = server.Weft({"catalog", "import", catalog.string()});
    INFO(again.out << again.err);
    REQUIRE(again.exit_code == 0);
    CHECK_THAT(again.out, Catch::Contains("unchanged provider 'vault' (version 1)"));
    CHECK_THAT(again.out, Catch::Contains("unchanged service 'db' (version 1)"));
    CHECK_THAT(again.out, Catch::Contains("0 entities imported, 2 unchanged"));
  }
  CHECK(puts() == 2);  // nothing changed, nothing recorded
  RunResult put = server.Weft({"provider", "put", (catalog / "providers" / "vault.json").string()});
  CHECK(put.exit_code == 0);
  CHECK_THAT(put.out, Catch::Contains("provider 'vault' unchanged: equal to version 1"));
  CHECK(server.WeftJson({"provider", "get", "vault"})["entity"] == stored["entity"]);

  // A changed secret, and only that, is a new version.
  provider["provisioner"]["api_token"] = "s3cret2";
  testing::WriteFile(catalog / "providers" / "vault.json", provider.dump(2));
  service["provisioner"]["actions"]["install"]["fields"]["password"] = "pw2";
  testing::WriteFile(catalog / "services" / "db.json", service.dump(2));
  json report = server.WeftJson({"catalog", "import", catalog.string()});
  REQUIRE(report["imported"].size() == 2);
  CHECK(report["imported"][0]["version"] == 2);
  CHECK(report["imported"][1]["version"] == 2);
  CHECK(report["unchanged"].empty());
  CHECK(puts() == 4);
}

TEST_CASE("weft cli edges: importing the wrong folder is an error, and a misspelled folder is skipped",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-edges-folders");
  RunResult high = server.Weft({"catalog", "import", kExamples.parent_path().string()});
  INFO(high.out << high.err);
  CHECK(high.exit_code != 0);
  CHECK_THAT(high.err, Catch::Contains("holds none of the catalog folders providers/, hardwaretypes/"));
  CHECK_THAT(high.err, Catch::Contains("did you mean '" + kExamples.string() + "'?"));
  CHECK(server.WeftJson({"provider", "list"})["entities"].empty());

  TempDir dir("weft-cli-edges-folders-catalog");
  fs::create_directories(dir.path() / "providers");
  fs::create_directories(dir.path() / "servics");
  fs::copy(kExamples / "providers" / "fake.json", dir.path() / "providers" / "fake.json");
  fs::copy(kExamples / "services" / "fake-base.json", dir.path() / "servics" / "fake-base.json");
  RunResult typo = server.Weft({"catalog", "import", dir.path().string()});
  INFO(typo.out << typo.err);
  CHECK(typo.exit_code == 0);
  CHECK_THAT(typo.out, Catch::Contains("imported provider 'fake' (version 1)"));
  CHECK_THAT(typo.out, Catch::Contains("skipped servics/: not a catalog folder"));
  CHECK_THAT(typo.out, Catch::Contains("1 entity imported, 0 unchanged, 1 file skipped"));
}

}  // namespace weft
