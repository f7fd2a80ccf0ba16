// The local provider plugin, loaded from its built .so and driven through its
// descriptor with a stand-in for the host services (needs root).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_host.hpp"
#include "support/process.hpp"
#include "support/sshd_node.hpp"
#include "support/temp_dir.hpp"
#include "weft/plugin.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace weft;

using weft::testing::FakeTask;
using LoadedProvider = weft::testing::LoadedPlugin;
constexpr const char* kLocalSo = "plugins/providers/local_provider.so";

TEST_CASE("local provider: CREATE, CONFIRM and DELETE a real node with no leftovers", "[ssh][local]") {
  LoadedProvider plugin(kLocalSo);
  const weft_plugin_descriptor* d = plugin.descriptor();
  CHECK(std::string(d->type_name) == "local");
  CHECK(d->kind == WEFT_KIND_PROVIDER);
  CHECK(d->actions == (WEFT_ACTION_CREATE | WEFT_ACTION_CONFIRM | WEFT_ACTION_DELETE));

  weft::testing::TempDir state("weft-local-provider");
  const json provider = {{"providertype", "local"},
                         {"fields", {{"state_dir", (state / "nodes").string()},
                                     {"ssh_port", weft::testing::kTestSshPort}}}};
  json base = {{"task_id", 7}, {"cluster_id", "c1"}, {"node_id", "n1"}, {"hostname", "n1.c1.weft"},
               {"provider", provider}};

  FakeTask create{base.dump()};
  std::string err;
  REQUIRE(plugin.Run(create, WEFT_ACTION_CREATE, &err) == WEFT_OK);
  INFO(err);
  const std::string provider_id = create.results.at("provider_id").get<std::string>();
  const json auth = create.results.at("ssh_auth");
  CHECK(auth.at("user") == "root");
  const std::string private_key = auth.at("private_key").get<std::string>();
  CHECK(private_key.find("PRIVATE KEY") != std::string::npos);
  const fs::path dir = state / "nodes" / provider_id;
  CHECK(fs::exists(dir));

  json later = base;
  later["results"] = create.results;
  FakeTask confirm{later.dump()};
  REQUIRE(plugin.Run(confirm, WEFT_ACTION_CONFIRM, &err) == WEFT_OK);
  const std::string address = confirm.results.at("access_v4").get<std::string>();
  CHECK(address.rfind("127.0.", 0) == 0);
  CHECK(confirm.results.at("bind_v4") == address);
  CHECK(confirm.results.at("hostname") == "n1.c1.weft");
  CHECK(confirm.results.at("ssh_port") == weft::testing::kTestSshPort);
  REQUIRE(confirm.results.at("host_keys").size() == 1);

  // What CREATE and CONFIRM returned is enough to reach the node over SSH.
  host::ssh::Target t;
  t.node = "n1";
  t.address = address;
  t.port = weft::testing::kTestSshPort;
  t.user = auth.at("user");
  t.private_key = private_key;
  t.host_keys = confirm.results.at("host_keys").get<std::vector<std::string>>();
  pid_t sshd_pid = 0;
  {
    auto s = host::ssh::Session::Connect(t, 5000);
    REQUIRE(s.ok());
    std::string out;
    REQUIRE((*s)->Exec("echo $PPID", 5000, [&](std::string_view c) { out += c; }).ok());
    CHECK_FALSE(out.empty());
    auto node = localnode::LoadNode(dir);
    REQUIRE(node.ok());
    sshd_pid = node->pid;
    CHECK(localnode::ProcessAlive(sshd_pid));
  }

  later["results"].update(confirm.results);
  FakeTask del{later.dump()};
  REQUIRE(plugin.Run(del, WEFT_ACTION_DELETE, &err) == WEFT_OK);
  CHECK_FALSE(fs::exists(dir));
  CHECK(::kill(sshd_pid, 0) != 0);
  // The address is free again (another test may have claimed it since, but not for this node).
  const fs::path claim = fs::path(localnode::kDefaultClaimsDir) / address;
  const bool still_ours = fs::exists(claim) && weft::testing::ReadFile(claim).find(dir.string()) != std::string::npos;
  CHECK_FALSE(still_ours);
  // A second DELETE (a retry) succeeds: nothing left to remove.
  FakeTask del2{later.dump()};
  CHECK(plugin.Run(del2, WEFT_ACTION_DELETE, &err) == WEFT_OK);

  // No log line of any task carries the private key (or any line of it).
  std::vector<std::string> key_lines;
  for (std::size_t at = 0, nl; (nl = private_key.find('\n', at)) != std::string::npos; at = nl + 1) {
    std::string line = private_key.substr(at, nl - at);
    if (line.size() > 20 && line.find("PRIVATE KEY") == std::string::npos) key_lines.push_back(line);
  }
  REQUIRE_FALSE(key_lines.empty());
  for (const FakeTask* task : {&create, &confirm, &del, &del2}) {
    for (const std::string& log : task->logs) {
      CHECK(log.find("PRIVATE KEY") == std::string::npos);
      for (const std::string& kl : key_lines) CHECK(log.find(kl) == std::string::npos);
    }
  }
}

TEST_CASE("local provider: a retried CREATE replaces the node an earlier attempt left", "[ssh][local]") {
  LoadedProvider plugin(kLocalSo);
  weft::testing::TempDir state("weft-local-provider");
  json task = {{"task_id", 8}, {"cluster_id", "c2"}, {"node_id", "n1"},
               {"provider", {{"fields", {{"state_dir", (state / "nodes").string()},
                                          {"ssh_port", weft::testing::kTestSshPort}}}}}};
  FakeTask first{task.dump()};
  REQUIRE(plugin.Run(first, WEFT_ACTION_CREATE) == WEFT_OK);
  const fs::path first_dir = state / "nodes" / first.results.at("provider_id").get<std::string>();
  const pid_t first_pid = localnode::LoadNode(first_dir)->pid;
  FakeTask second{task.dump()};
  REQUIRE(plugin.Run(second, WEFT_ACTION_CREATE) == WEFT_OK);
  CHECK_FALSE(fs::exists(first_dir));
  CHECK(::kill(first_pid, 0) != 0);
  const fs::path second_dir = state / "nodes" / second.results.at("provider_id").get<std::string>();
  CHECK(fs::exists(second_dir));
  CHECK(localnode::StopNode(second_dir).ok());
}

TEST_CASE("local provider: a node's sshd that dies is reaped at once, no other child of the process is, and CONFIRM "
          "says it is not running",
          "[ssh][local]") {
  LoadedProvider plugin(kLocalSo);
  weft::testing::TempDir state("weft-local-provider");
  json task = {{"task_id", 9}, {"cluster_id", "c3"}, {"node_id", "n1"},
               {"provider", {{"fields", {{"state_dir", (state / "nodes").string()},
                                          {"ssh_port", weft::testing::kTestSshPort}}}}}};
  FakeTask create{task.dump()};
  REQUIRE(plugin.Run(create, WEFT_ACTION_CREATE) == WEFT_OK);
  const fs::path dir = state / "nodes" / create.results.at("provider_id").get<std::string>();
  const pid_t sshd = localnode::LoadNode(dir)->pid;
  REQUIRE(localnode::ProcessAlive(sshd));

  // A child of this process that is not the plugin's: it exits, and stays ours to reap.
  const pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) ::_exit(7);
  REQUIRE(weft::testing::WaitFor([&] { return !localnode::ProcessAlive(other); }, std::chrono::seconds(20)));

  // The sshd killed by hand: gone (reaped), not a zombie, while nothing enters the plugin.
  REQUIRE(::kill(sshd, SIGKILL) == 0);
  const bool reaped = weft::testing::WaitFor(
      [&] { return !fs::exists("/proc/" + std::to_string(sshd)); }, std::chrono::seconds(20));
  INFO(weft::testing::ReadFile("/proc/" + std::to_string(sshd) + "/stat"));
  CHECK(reaped);
  int status = 0;
  CHECK(::waitpid(other, &status, WNOHANG) == other);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 7));

  // The provider notices the sshd is gone.
  json later = task;
  later["results"] = create.results;
  FakeTask confirm{later.dump()};
  std::string err;
  CHECK(plugin.Run(confirm, WEFT_ACTION_CONFIRM, &err) == WEFT_ERR_FAILED);
  CHECK_THAT(err, Catch::Contains("is not running"));
  FakeTask del{later.dump()};
  CHECK(plugin.Run(del, WEFT_ACTION_DELETE, &err) == WEFT_OK);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("local provider: bad fields and a provider_id outside state_dir are refused", "[ssh][local]") {
  LoadedProvider plugin(kLocalSo);
  std::string err;
  FakeTask rel{json({{"provider", {{"fields", {{"state_dir", "relative"}}}}}}).dump()};
  CHECK(plugin.Run(rel, WEFT_ACTION_CREATE, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("absolute") != std::string::npos);

  FakeTask port{json({{"provider", {{"fields", {{"ssh_port", 70000}}}}}}).dump()};
  CHECK(plugin.Run(port, WEFT_ACTION_CREATE, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("ssh_port") != std::string::npos);

  FakeTask escape{json({{"provider_id", "../../etc"}, {"provider", {{"fields", {{"state_dir", "/tmp/x"}}}}}}).dump()};
  CHECK(plugin.Run(escape, WEFT_ACTION_DELETE, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("not a local node id") != std::string::npos);
}
