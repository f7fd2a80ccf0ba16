// The shell automator .so, loaded through its descriptor with services wired
// to the SSH host services exactly as weft-host wires them, against real sshd
// nodes (needs root).
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_host.hpp"
#include "support/sshd_node.hpp"

using json = nlohmann::json;
using namespace weft;
using weft::testing::FakeTask;
using weft::testing::LoadedPlugin;
using weft::testing::SshdNode;

namespace {

constexpr const char* kShellSo = "plugins/automators/shell_automator.so";

json TaskFor(const SshdNode& node, json fields = json::object()) {
  const localnode::Node& n = node.node();
  return {{"task_id", 42},
          {"cluster_id", "c1"},
          {"node_id", n.name},
          {"hostname", n.name + ".c1.weft"},
          {"service", {{"name", "web"}, {"action", {{"type", "shell"}, {"fields", fields}}}}},
          {"config", {{"greeting", "hello from config"}}},
          {"nodes", json::array({{{"hostname", n.name + ".c1.weft"}}, {{"hostname", "other.c1.weft"}}})},
          {"results",
           {{"provider_id", n.id},
            {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
            {"access_v4", n.address},
            {"ssh_port", n.port},
            {"host_keys", n.host_keys}}}};
}

// Runs a probe command on the node through the same service.
std::string Probe(const SshdNode& node, const std::string& command) {
  std::string out;
  int status = -1;
  char err[512] = {0};
  const std::string task = TaskFor(node).dump();
  auto sink = [](void* self, const char* d, size_t n) { static_cast<std::string*>(self)->append(d, n); };
  REQUIRE(host::ssh::ServiceExec(task.c_str(), {}, command.c_str(), 5000, sink, nullptr, &out, &status, err,
                                 sizeof err) == WEFT_OK);
  return out;
}

}  // namespace

TEST_CASE("shell automator: an inline command with args, facts and the config file", "[ssh][shell]") {
  SshdNode node("shell");
  LoadedPlugin plugin(kShellSo);
  CHECK(std::string(plugin.descriptor()->type_name) == "shell");
  const json fields = {{"command", "echo \"args=$# $1|$2\"; echo \"node=$WEFT_HOSTNAME at $WEFT_ACCESS_V4 "
                                   "action=$WEFT_ACTION service=$WEFT_SERVICE hosts=$WEFT_CLUSTER_HOSTS\"; "
                                   "cat \"$WEFT_CONFIG_FILE\"; echo warn >&2"},
                       {"args", {"one", "two words"}}};
  FakeTask task(TaskFor(node, fields).dump());
  std::string err;
  REQUIRE(plugin.Run(task, WEFT_ACTION_INSTALL, &err) == WEFT_OK);
  INFO(task.AllLogs());
  const std::string logs = task.AllLogs();
  CHECK(logs.find("args=2 one|two words") != std::string::npos);
  CHECK(logs.find("node=shell.c1.weft at " + node.node().address + " action=INSTALL service=web "
                  "hosts=shell.c1.weft other.c1.weft") != std::string::npos);
  CHECK(logs.find("\"greeting\": \"hello from config\"") != std::string::npos);
  CHECK(logs.find("warn") != std::string::npos);
  CHECK(task.results.at("exit_status") == 0);
  // The key reached the node only as the login; never a log line.
  CHECK(logs.find("PRIVATE KEY") == std::string::npos);
  CHECK(logs.find(node.node().private_key.substr(40, 30)) == std::string::npos);
}

TEST_CASE("shell automator: a script is uploaded and run, a failing one fails the task with its output", "[ssh][shell]") {
  SshdNode node("script");
  LoadedPlugin plugin(kShellSo);
  weft::testing::TempDir local("weft-shell");
  weft::testing::WriteFile(local / "ok.sh", "#!/bin/sh\necho \"script got $1\"\n");
  weft::testing::WriteFile(local / "bad.sh", "#!/bin/sh\necho 'about to fail' >&2\nexit 7\n");

  FakeTask ok(TaskFor(node, {{"script", (local / "ok.sh").string()}, {"args", {"x"}}}).dump());
  std::string err;
  REQUIRE(plugin.Run(ok, WEFT_ACTION_START, &err) == WEFT_OK);
  CHECK(ok.AllLogs().find("script got x") != std::string::npos);

  FakeTask bad(TaskFor(node, {{"script", (local / "bad.sh").string()}}).dump());
  CHECK(plugin.Run(bad, WEFT_ACTION_START, &err) == WEFT_ERR_FAILED);
  CHECK(err.find("exited with status 7") != std::string::npos);
  CHECK(err.find("about to fail") != std::string::npos);
  CHECK(bad.results.at("exit_status") == 7);

  // The work directories are gone from the node (where the automator makes
  // them: the node's own disk when it has one, else /tmp).
  CHECK(Probe(node, "d=${WEFT_NODE_ROOT:+$WEFT_NODE_ROOT/tmp}; ls -d ${d:-/tmp}/weft-task-42-* 2>/dev/null | wc -l") ==
        "0\n");

  FakeTask slow(TaskFor(node, {{"command", "sleep 10"}, {"timeout_ms", 300}}).dump());
  CHECK(plugin.Run(slow, WEFT_ACTION_START, &err) == WEFT_ERR_TIMEOUT);
  CHECK(err == "command timed out after 300 ms on node script.c1.weft");
}

TEST_CASE("shell automator: bad fields and a host without SSH services are refused", "[ssh][shell]") {
  SshdNode node("shellbad");
  LoadedPlugin plugin(kShellSo);
  std::string err;
  FakeTask both(TaskFor(node, {{"command", "true"}, {"script", "/x"}}).dump());
  CHECK(plugin.Run(both, WEFT_ACTION_START, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("exactly one") != std::string::npos);
  // A value not of its declared type is refused as a worker refuses it, before the plugin runs.
  FakeTask mistyped(TaskFor(node, {{"command", "true"}, {"timeout_ms", true}}).dump());
  CHECK(plugin.Run(mistyped, WEFT_ACTION_START, &err) == WEFT_ERR_INVALID);
  CHECK_THAT(err, Catch::StartsWith("field 'timeout_ms' must be ") &&
                      Catch::EndsWith("; fix it in the task's service action fields"));

  LoadedPlugin old_host(kShellSo, /*with_ssh=*/false);
  FakeTask task(TaskFor(node, {{"command", "true"}}).dump());
  CHECK(old_host.Run(task, WEFT_ACTION_START, &err) == WEFT_ERR_UNSUPPORTED);
  CHECK(err.find("upgrade weft-host") != std::string::npos);
}
