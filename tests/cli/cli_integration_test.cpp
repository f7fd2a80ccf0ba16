// The real `weft` binary against the real weftd on ephemeral loopback ports.
// Hosts are registered with a raw host.register call, so no weft-host is needed.
#include <algorithm>
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using testing::BuildPath;
using testing::RunResult;

std::size_t Lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }


json TestPlugin() {
  return json{
      {"type", "cli-test-provider"},
      {"kind", "provider"},
      {"version", "1.2"},
      {"description", "a plugin made up by the CLI test"},
      {"actions", {"CREATE", "DELETE"}},
      {"fields",
       {{{"name", "region"},
         {"label", "Region"},
         {"type", "string"},
         {"required", true},
         {"sensitive", false},
         {"default", "eu-west"},
         {"description", "where nodes go"}},
        {{"name", "api_key"},
         {"label", "API key"},
         {"type", "string"},
         {"required", false},
         {"sensitive", true},
         {"default", "not-a-real-secret"},
         {"description", "credentials"}},
        {{"name", "latency_ms"},
         {"label", "Latency (ms)"},
         {"type", "integer"},
         {"required", false},
         {"sensitive", false},
         {"description", "no default on purpose"}}}},
      {"resource_types", json::array()}};
}


// A loopback port nothing listens on: bound by the system, then released.
std::string DeadEndpoint() {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind("tcp://127.0.0.1:*");
  std::string endpoint = wire::LastEndpoint(s);
  s.close();
  return endpoint;
}

}  // namespace

TEST_CASE("weft status: a readable table, and JSON that matches the server", "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  RunResult table = server.Weft({"status"});
  INFO(table.err << server.Log());
  REQUIRE(table.exit_code == 0);
  CHECK(table.err.empty());
  CHECK_THAT(table.out, Catch::Contains("weftd 0.1.0 (protocol 1)"));
  CHECK_THAT(table.out, Catch::Contains(server.api()));
  CHECK_THAT(table.out, Catch::Contains(server.provisioner()));
  CHECK_THAT(table.out, Catch::Contains("0 registered, 0 live"));

  RunResult as_json = server.Weft({"-o", "json", "status"});
  REQUIRE(as_json.exit_code == 0);
  json body = json::parse(as_json.out, nullptr, false);
  REQUIRE(body.is_object());
  CHECK(body["protocol"] == 1);
  CHECK(body["pid"] == server.endpoints()["pid"]);
  CHECK(body["endpoints"]["api"] == server.api());
  CHECK(body["hosts"]["registered"] == 0);
}

TEST_CASE("weft status: the table shows the metrics endpoint and the requests served per op", "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  for (const char* noun : {"host", "cluster", "job", "tenant", "plugin", "provider", "service"})
    REQUIRE(server.Weft({noun, "list"}).exit_code == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(server.Weft({"-o", "json", "status"}).exit_code == 0);
  RunResult table = server.Weft({"status"});
  INFO(table.out << table.err);
  REQUIRE(table.exit_code == 0);
  const std::string metrics = server.endpoints().value("metrics", std::string());
  REQUIRE(!metrics.empty());
  CHECK_THAT(table.out, Catch::Matches("[\\s\\S]*\\nmetrics +" + metrics + "\\n[\\s\\S]*"));
  // The total, then the busiest ops first: server.status was asked 4 times, each list once.
  std::smatch m;
  static const std::regex line(R"(\nrequests +(\d+): ([^\n]*)\n)");
  REQUIRE(std::regex_search(table.out, m, line));
  const std::string ops = m[2];
  CHECK_THAT(ops, Catch::Contains("server.status 4, "));
  CHECK_THAT(ops, Catch::Contains("cluster.list 1"));
  // What -o json says next (its own server.status one more), op by op.
  const json requests = server.WeftJson({"status"})["requests"];
  REQUIRE(requests.is_object());
  std::int64_t total = 0;
  for (const auto& [op, n] : requests.items()) total += n.get<std::int64_t>();
  CHECK(std::stoll(m[1]) == total - 1);
  // Six ops are named; the others are summed up: every request is counted once.
  REQUIRE(requests.size() > 6);
  static const std::regex named(R"(([a-z_.]+) (\d+)(, |$))");
  std::int64_t shown = 0, named_ops = 0, previous = total;
  for (std::sregex_iterator it(ops.begin(), ops.end(), named), end; it != end; ++it, ++named_ops) {
    const std::int64_t n = std::stoll((*it)[2]);
    CHECK(n <= previous);  // the busiest first
    previous = n;
    shown += n;
  }
  CHECK(named_ops == 6);
  std::smatch other;
  REQUIRE(std::regex_search(ops, other, std::regex(R"(, (\d+) other ops? (\d+) \(-o json lists every op\)$)")));
  CHECK(std::stoull(other[1]) == requests.size() - 6);
  CHECK(shown + std::stoll(other[2]) == total - 1);
}

TEST_CASE("weft status: WEFT_SERVER is used, and --server overrides it", "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  const std::string weft = BuildPath("bin/weft").string();
  RunResult via_env = testing::Run("/usr/bin/env", {"WEFT_SERVER=" + server.api(), weft, "-o", "json", "status"});
  INFO(via_env.err);
  REQUIRE(via_env.exit_code == 0);
  CHECK(json::parse(via_env.out, nullptr, false)["endpoints"]["api"] == server.api());

  RunResult overridden = testing::Run(
      "/usr/bin/env", {"WEFT_SERVER=" + DeadEndpoint(), weft, "--server", server.api(), "--timeout", "3000", "status"});
  INFO(overridden.err);
  CHECK(overridden.exit_code == 0);
}

TEST_CASE("weft host list: shows a host registered through host.register", "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  RunResult empty = server.Weft({"host", "list"});
  REQUIRE(empty.exit_code == 0);
  CHECK_THAT(empty.out, Catch::Contains("no hosts registered"));

  server.RegisterHost("cli-host-1", json::array({TestPlugin()}), 3);

  RunResult table = server.Weft({"host", "list"});
  INFO(table.err << server.Log());
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::StartsWith("ID "));
  CHECK_THAT(table.out, Catch::Contains("cli-host-1"));
  CHECK_THAT(table.out, Catch::Contains("cli-test-provider"));
  CHECK(Lines(table.out) == 2);  // header + one host

  RunResult as_json = server.Weft({"host", "list", "-o", "json"});
  REQUIRE(as_json.exit_code == 0);
  json body = json::parse(as_json.out, nullptr, false);
  REQUIRE(body["hosts"].is_array());
  REQUIRE(body["hosts"].size() == 1);
  CHECK(body["hosts"][0]["id"] == "cli-host-1");
  CHECK(body["hosts"][0]["capacity"] == 3);
  CHECK(body["hosts"][0]["live"] == true);
  CHECK(body["hosts"][0]["plugins"] == json::array({"cli-test-provider"}));

  RunResult status = server.Weft({"status"});
  CHECK_THAT(status.out, Catch::Contains("1 registered, 1 live"));
}

TEST_CASE("weft plugin list: shows the registered plugin's fields, hiding sensitive defaults", "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  RunResult empty = server.Weft({"plugin", "list"});
  REQUIRE(empty.exit_code == 0);
  CHECK_THAT(empty.out, Catch::Contains("no plugin types registered"));

  server.RegisterHost("cli-host-2", json::array({TestPlugin()}), 3);

  RunResult table = server.Weft({"plugin", "list"});
  INFO(table.out << table.err << server.Log());
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::StartsWith("cli-test-provider  (provider, version 1.2)"));
  CHECK_THAT(table.out, Catch::Contains("CREATE DELETE"));
  {
    // A plugin without a version: no empty "version " in its line.
    testing::Weftd other("weft-cli-test");
    json plugin = TestPlugin();
    plugin.erase("version");
    other.RegisterHost("cli-host-3", json::array({plugin}), 1);
    RunResult unversioned = other.Weft({"plugin", "list"});
    INFO(unversioned.out << unversioned.err);
    CHECK_THAT(unversioned.out, Catch::StartsWith("cli-test-provider  (provider)\n"));
  }
  CHECK_THAT(table.out, Catch::Contains("cli-host-2 (1 of 1 live)"));
  CHECK_THAT(table.out, Catch::Contains("NAME        TYPE     REQUIRED  SENSITIVE  DEFAULT    LABEL"));
  CHECK_THAT(table.out, Catch::Contains("region      string   yes       no         \"eu-west\"  Region"));
  CHECK_THAT(table.out, Catch::Contains("api_key     string   no        yes        (hidden)   API key"));
  CHECK_THAT(table.out, Catch::Contains("latency_ms  integer  no        no                    Latency (ms)"));
  CHECK_THAT(table.out, !Catch::Contains("not-a-real-secret"));

  RunResult as_json = server.Weft({"-o", "json", "plugin", "list"});
  REQUIRE(as_json.exit_code == 0);
  json body = json::parse(as_json.out, nullptr, false);
  REQUIRE(body["plugins"].size() == 1);
  const json& p = body["plugins"][0];
  CHECK(p["type"] == "cli-test-provider");
  REQUIRE(p["fields"].size() == 3);
  CHECK(p["fields"][0]["name"] == "region");
  CHECK(p["fields"][0]["required"] == true);
  CHECK(p["fields"][0]["default"] == "eu-west");
  CHECK(p["hosts"] == json::array({"cli-host-2"}));

  RunResult only = server.Weft({"plugin", "list", "--type", "cli-test-provider", "-o", "json"});
  REQUIRE(only.exit_code == 0);
  CHECK(json::parse(only.out, nullptr, false)["plugins"].size() == 1);

  RunResult filtered = server.Weft({"plugin", "list", "--type", "no-such-type"});
  CHECK(filtered.exit_code == 1);
  CHECK(Lines(filtered.err) == 1);
  CHECK_THAT(filtered.err, Catch::Contains("no registered host offers plugin type 'no-such-type'"));
}

TEST_CASE("weft plugin list and weft host show: the plugin files a host refused, with the reason",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  zmq::context_t ctx(1);
  client::Client host(ctx, client::Options{.endpoint = server.provisioner(), .timeout_ms = 5000, .tenant = "",
                                           .limits = {}});
  const json refused = {{{"file", "/plugins/broken.so"}, {"reason", "no entry symbol weft_plugin_entry"}},
                        {{"file", "/state/plugins/acme@gx.lua"},
                         {"reason", "cannot load the Lua plugin: [string]:1: unexpected symbol"},
                         {"tenant", "acme"},
                         {"type", "gx"}}};
  Result<json> reply = host.Call("host.register", {{"host_id", "cli-host-4"},
                                                   {"capacity", 1},
                                                   {"plugins", json::array({TestPlugin()})},
                                                   {"refused", refused}});
  REQUIRE(reply.ok());

  // The default tenant sees the host-wide refusal, not acme's own.
  RunResult list = server.Weft({"plugin", "list"});
  INFO(list.out << list.err);
  REQUIRE(list.exit_code == 0);
  CHECK_THAT(list.out, Catch::StartsWith("cli-test-provider  (provider, version 1.2)"));
  CHECK_THAT(list.out, Catch::Contains("refused plugin files (the host does not run them):\n"
                                       "  REFUSED /plugins/broken.so on host cli-host-4: no entry symbol "
                                       "weft_plugin_entry\n"));
  CHECK_THAT(list.out, !Catch::Contains("acme@gx.lua"));
  RunResult show = server.Weft({"host", "show", "cli-host-4"});
  INFO(show.out << show.err);
  REQUIRE(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::StartsWith("host ") && Catch::Contains("cli-test-provider"));
  CHECK_THAT(show.out, Catch::Contains("refused plugin files (1):\n  REFUSED /plugins/broken.so: no entry symbol"));
  CHECK(server.Weft({"host", "show", "no-such-host"}).exit_code == 1);

  // A heartbeat carries the list too, and replaces it: the file was fixed.
  REQUIRE(host.Call("host.heartbeat", {{"host_id", "cli-host-4"}, {"refused", json::array()}}).ok());
  RunResult after = server.Weft({"-o", "json", "plugin", "list"});
  REQUIRE(after.exit_code == 0);
  CHECK(json::parse(after.out, nullptr, false)["refused"] == json::array());
}

TEST_CASE("weft: a usage error exits 2 with one line and a hint", "[cli][integration]") {
  RunResult r = testing::Run(BuildPath("bin/weft"), {"host", "lsit"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(Lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("weft: 'weft host' has no command 'lsit'"));
  CHECK_THAT(r.err, Catch::Contains("run 'weft help host'"));
}

TEST_CASE("weft: an unreachable server exits 1 with one sentence naming the endpoint", "[cli][integration]") {
  const std::string dead = DeadEndpoint();
  RunResult r = testing::Run(BuildPath("bin/weft"), {"--server", dead, "--timeout", "300", "status"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(Lines(r.err) == 1);
  // Nothing listens there: the connection is refused, so the credential is not the question.
  CHECK_THAT(r.err, Catch::StartsWith("weft: nothing listens at " + dead +
                                      " (connection refused); is weftd running? (set --server or WEFT_SERVER)"));
}

TEST_CASE("weft: a server that never answers is named with the wait as durations read", "[cli][integration]") {
  // A ZeroMQ socket takes the connection and never replies.
  zmq::context_t ctx(1);
  zmq::socket_t mute(ctx, zmq::socket_type::router);
  mute.set(zmq::sockopt::linger, 0);
  mute.bind("tcp://127.0.0.1:*");
  const std::string endpoint = wire::LastEndpoint(mute);
  RunResult r = testing::Run(BuildPath("bin/weft"), {"--server", endpoint, "--timeout", "1500", "status"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(endpoint + " within 1.5s"));
  CHECK_THAT(r.err, !Catch::Contains(" ms"));
}

TEST_CASE("weft plugin list: hosts running different versions of a plugin show each version with its hosts",
          "[cli][integration]") {
  testing::Weftd server("weft-cli-test");
  json newer = TestPlugin();
  newer["version"] = "2.0";
  server.RegisterHost("cli-host-a", json::array({TestPlugin()}), 1);
  server.RegisterHost("cli-host-b", json::array({newer}), 1);
  server.RegisterHost("cli-host-c", json::array({newer}), 1);

  RunResult table = server.Weft({"plugin", "list"});
  INFO(table.out << table.err);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::StartsWith("cli-test-provider  (provider, 2 versions on the hosts: 1.2, 2.0)\n"));
  CHECK_THAT(table.out, Catch::Contains("version 1.2  cli-host-a (1 of 1 live)"));
  CHECK_THAT(table.out, Catch::Contains("version 2.0  cli-host-b, cli-host-c (2 of 2 live)"));
  CHECK_THAT(table.out, Catch::Contains("actions and fields of version 1.2"));

  RunResult as_json = server.Weft({"-o", "json", "plugin", "list"});
  REQUIRE(as_json.exit_code == 0);
  const json p = json::parse(as_json.out)["plugins"][0];
  REQUIRE(p["versions"].size() == 2);
  CHECK(p["versions"][0] == json({{"version", "1.2"}, {"hosts", {"cli-host-a"}}, {"live_hosts", {"cli-host-a"}}}));
  CHECK(p["versions"][1]["version"] == "2.0");
  CHECK(p["versions"][1]["hosts"] == json({"cli-host-b", "cli-host-c"}));

  // One version on every host: one line as before.
  testing::Weftd same("weft-cli-test");
  same.RegisterHost("cli-host-a", json::array({TestPlugin()}), 1);
  same.RegisterHost("cli-host-b", json::array({TestPlugin()}), 1);
  RunResult one = same.Weft({"plugin", "list"});
  INFO(one.out);
  CHECK_THAT(one.out, Catch::StartsWith("cli-test-provider  (provider, version 1.2)\n"));
  CHECK_THAT(one.out, !Catch::Contains("version 1.2  "));
}

}  // namespace weft
