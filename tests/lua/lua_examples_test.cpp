// The example Lua plugins of scripts/lua (pool.lua, a provider; shell.lua, an
// automator) against real sshd nodes (needs root): first through their
// descriptors with the host's services table, then loaded by a real weft-host
// from its plugin directory and handed tasks by a real weftd.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include "support/fast.hpp"
#include "lua_ssh_util.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace weft::lua_test;
using namespace std::chrono_literals;
using Catch::Contains;
using weft::testing::SshdNode;
using weft::testing::TempDir;

namespace {

const fs::path kScripts = fs::path(WEFT_SOURCE_DIR) / "scripts" / "lua";

const weft_plugin_descriptor* LoadExample(const std::string& file) {
  auto d = weft::host::lua::LoadLuaPlugin(kScripts / file);
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  return *d;
}

json PoolEntry(const weft::localnode::Node& n) {
  return {{"address", n.address}, {"port", n.port}, {"user", n.user}, {"host_keys", n.host_keys}};
}

std::string PoolId(const weft::localnode::Node& n) { return "static-pool:" + n.address + ":2022"; }

// One key logs in to every machine of the pool: a's user key is added to b.
void ShareKey(const SshdNode& from, const SshdNode& to) {
  std::ofstream keys(to.node().dir / "authorized_keys", std::ios::app);
  keys << from.node().public_key << "\n";
}

// A provider task as the job engine hands it out.
json ProviderTask(const json& provider, const std::string& action, const std::string& node, const json& nodes,
                  const json& results = json::object()) {
  json t = DefaultTask();
  t.erase("service");
  t["action"] = action;
  t["cluster_id"] = "c1";
  t["node_id"] = node;
  t["hostname"] = node + ".c1.weft";
  t["provider"] = provider;
  t["nodes"] = nodes;
  t["results"] = results;
  t["node"] = {{"id", node}, {"hostname", node + ".c1.weft"}, {"results", results}};
  return t;
}

json Merged(json a, const json& b) {
  a.update(b);
  return a;
}

}  // namespace

TEST_CASE("lua examples: pool.lua gives each node its own machine and checks it over SSH", "[lua][ssh][examples]") {
  SshdNode a("lpool-a");
  SshdNode b("lpool-b");
  ShareKey(a, b);
  weft::testing::WriteFile(a.node().root / "installed", "something the cluster put there\n");
  const json provider = {
      {"name", "lab"},
      {"type", "static-pool"},
      {"fields",
       {{"hosts", json::array({PoolEntry(a.node()), PoolEntry(b.node())})},
        {"ssh_key", a.node().private_key},
        {"release_command", "rm -f \"$WEFT_NODE_ROOT/installed\" && echo cleaned up"}}}};
  Plugin p(LoadExample("pool.lua"));
  CHECK(p.descriptor().kind == WEFT_KIND_PROVIDER);

  // Two nodes created at once, in either order, each get their own machine.
  const json pending = json::array({{{"id", "web-1"}, {"access_v4", ""}}, {{"id", "web-2"}, {"access_v4", ""}}});
  RunResult c2 = p.Run(WEFT_ACTION_CREATE, ProviderTask(provider, "CREATE", "web-2", pending));
  RunResult c1 = p.Run(WEFT_ACTION_CREATE, ProviderTask(provider, "CREATE", "web-1", pending));
  INFO(c1.err << c2.err);
  REQUIRE(c1.rc == WEFT_OK);
  REQUIRE(c2.rc == WEFT_OK);
  CHECK(c1.result["provider_id"] == PoolId(a.node()));
  CHECK(c2.result["provider_id"] == PoolId(b.node()));
  CHECK(c1.result["ssh_auth"] == json({{"user", "root"}, {"private_key", a.node().private_key}}));
  CHECK(c1.result["access_v4"] == a.node().address);
  CHECK(c1.result["host_keys"] == json(a.node().host_keys));
  CHECK(c1.result["ssh_port"] == 2022);
  // web-2 seen after web-1 got its machine still picks the same one.
  const json after = json::array({{{"id", "web-1"}, {"access_v4", a.node().address}}, {{"id", "web-2"}, {"access_v4", ""}}});
  CHECK(p.Run(WEFT_ACTION_CREATE, ProviderTask(provider, "CREATE", "web-2", after)).result["provider_id"] ==
        PoolId(b.node()));
  // A third node finds the pool exhausted.
  const json full = json::array({{{"id", "web-1"}, {"access_v4", a.node().address}},
                                 {{"id", "web-2"}, {"access_v4", b.node().address}},
                                 {{"id", "web-3"}, {"access_v4", ""}}});
  RunResult c3 = p.Run(WEFT_ACTION_CREATE, ProviderTask(provider, "CREATE", "web-3", full));
  CHECK(c3.rc == WEFT_ERR_FAILED);
  CHECK_THAT(c3.err, Contains("static pool exhausted: its 2 machines cannot serve 1 more node(s) besides those "
                              "already placed: ") &&
                         Contains(a.node().address + " (web-1)") && Contains(b.node().address + " (web-2)"));

  // CONFIRM logs in to the machine (host key checked) and reports it.
  RunResult f1 = p.Run(WEFT_ACTION_CONFIRM, ProviderTask(provider, "CONFIRM", "web-1", after, c1.result));
  INFO(f1.err);
  REQUIRE(f1.rc == WEFT_OK);
  CHECK(f1.result["access_v4"] == a.node().address);
  CHECK(f1.result["bind_v4"] == a.node().address);
  CHECK(f1.result["hostname"] == "web-1.c1.weft");
  CHECK(f1.result["host_keys"] == json(a.node().host_keys));
  CHECK_THAT(f1.result["facts"]["kernel"].get<std::string>(), Catch::StartsWith("Linux "));
  CHECK(f1.result["facts"]["cpus"].get<int>() >= 1);
  RunResult f2 = p.Run(WEFT_ACTION_CONFIRM, ProviderTask(provider, "CONFIRM", "web-2", after, c2.result));
  INFO(f2.err);
  CHECK(f2.rc == WEFT_OK);

  // DELETE runs the release command on the machine.
  json all = Merged(c1.result, f1.result);
  RunResult d1 = p.Run(WEFT_ACTION_DELETE, ProviderTask(provider, "DELETE", "web-1", after, all));
  INFO(d1.err);
  REQUIRE(d1.rc == WEFT_OK);
  CHECK_FALSE(fs::exists(a.node().root / "installed"));
  CHECK_THAT(d1.out, Contains("cleaned up") && Contains("released " + PoolId(a.node()) + " back to the pool"));
  // Nothing printed the key.
  for (const RunResult* r : {&c1, &c2, &f1, &f2, &d1}) {
    CHECK_THAT(r->out + r->log_errors + r->err, !Contains(KeyBodyLine(a.node())));
  }
}

TEST_CASE("lua examples: pool.lua refuses a machine whose host key is not the pool's", "[lua][ssh][examples]") {
  SshdNode a("lpool-mitm");
  json entry = PoolEntry(a.node());
  std::string key = a.node().host_keys.at(0);
  key[key.find(' ') + 40] = key[key.find(' ') + 40] == 'A' ? 'B' : 'A';
  entry["host_keys"] = json::array({key});
  const json provider = {{"name", "lab"},
                         {"type", "static-pool"},
                         {"fields", {{"hosts", json::array({entry})}, {"ssh_key", a.node().private_key}}}};
  Plugin p(LoadExample("pool.lua"));
  const json nodes = json::array({{{"id", "db-1"}, {"access_v4", ""}}});
  RunResult c = p.Run(WEFT_ACTION_CREATE, ProviderTask(provider, "CREATE", "db-1", nodes));
  REQUIRE(c.rc == WEFT_OK);
  RunResult f = p.Run(WEFT_ACTION_CONFIRM, ProviderTask(provider, "CONFIRM", "db-1", nodes, c.result));
  CHECK(f.rc == WEFT_ERR_FAILED);
  CHECK_THAT(f.err, Contains("Lua plugin 'static-pool' failed during CONFIRM: pool.lua:") &&
                        Contains("SSH to node db-1.c1.weft") && Contains("host key mismatch"));
  CHECK_THAT(f.err + f.out + f.log_errors, !Contains(KeyBodyLine(a.node())));

  // A pool entry without host keys is refused before anything connects.
  json keyless = provider;
  keyless["fields"]["hosts"][0].erase("host_keys");
  RunResult k = p.Run(WEFT_ACTION_CREATE, ProviderTask(keyless, "CREATE", "db-1", nodes));
  CHECK(k.rc == WEFT_ERR_FAILED);
  CHECK_THAT(k.err, Contains("field 'hosts' entry 1 has no host_keys"));
}

TEST_CASE("lua examples: shell.lua runs the command on the node with facts, config and results",
          "[lua][ssh][examples]") {
  SshdNode node("luash");
  Plugin p(LoadExample("shell.lua"));
  CHECK(p.descriptor().kind == WEFT_KIND_AUTOMATOR);
  const std::string root = node.node().root.string();

  SECTION("a command that succeeds") {
    json task = SshTaskFor(node, {{"command",
                                   "echo \"node=$WEFT_NODE_ID host=$WEFT_HOSTNAME addr=$WEFT_ACCESS_V4 "
                                   "svc=$WEFT_SERVICE hosts=$WEFT_CLUSTER_HOSTS port=$PORT args=$#:$1:$2\"\n"
                                   "cp \"$WEFT_CONFIG_FILE\" \"$WEFT_NODE_ROOT/config.json\"\n"
                                   "pwd > \"$WEFT_NODE_ROOT/workdir\"\n"
                                   "echo WEFT_RESULT version=1.2.3\n"
                                   "echo a warning >&2"},
                                  {"args", {"a b", "c"}},
                                  {"env", {{"PORT", "8080"}}}});
    RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK(r.result["exit_status"] == 0);
    CHECK(r.result["version"] == "1.2.3");
    CHECK_THAT(r.out, Contains("node=luash host=luash.c1.weft addr=" + node.node().address +
                               " svc=web hosts=luash.c1.weft other.c1.weft port=8080 args=2:a b:c"));
    CHECK_THAT(r.log_errors, Contains("a warning"));
    CHECK(json::parse(weft::testing::ReadFile(root + "/config.json")) == task["config"]);
    // The private work directory is gone once the command ended.
    std::string workdir = weft::testing::ReadFile(root + "/workdir");
    CHECK_THAT(workdir, Catch::StartsWith("/tmp/weft-lua-7-"));
    CHECK_FALSE(fs::exists(workdir.substr(0, workdir.size() - 1)));
    CHECK_FALSE(r.progress.empty());
  }
  SECTION("a command that fails: its status and last lines") {
    RunResult r = p.Run(WEFT_ACTION_START, SshTaskFor(node, {{"command", "echo one; echo two >&2; exit 7"}}));
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("Lua plugin 'shell-lua' failed during START: shell.lua:") &&
                          Contains("START on node luash.c1.weft exited with status 7; last output:\n  two"));
    CHECK(r.result["exit_status"] == 7);
  }
  SECTION("a script resource is uploaded and run") {
    TempDir local("weft-lua-shell");
    weft::testing::WriteFile(local / "hello.sh", "#!/bin/sh\necho \"hello $1 from $(basename \"$0\")\"\n");
    json task = SshTaskFor(node, {{"script", "hello.sh"}, {"args", {"world"}}});
    task["resources"] = json::array({{{"type", "scripts"}, {"name", "hello.sh"}, {"path", (local / "hello.sh").string()}}});
    RunResult r = p.Run(WEFT_ACTION_CONFIGURE, task);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK_THAT(r.out, Contains("hello world from script"));
    task["service"]["action"]["fields"]["script"] = "missing.sh";
    RunResult m = p.Run(WEFT_ACTION_CONFIGURE, task);
    CHECK(m.rc == WEFT_ERR_FAILED);
    CHECK_THAT(m.err, Contains("field 'script' names 'missing.sh', which is not a resource of this task"));
  }
  SECTION("a command past timeout_ms fails the task as TIMEOUT") {
    RunResult r = p.Run(WEFT_ACTION_INSTALL, SshTaskFor(node, {{"command", "sleep 10"}, {"timeout_ms", 300}}));
    CHECK(r.rc == WEFT_ERR_TIMEOUT);
    CHECK_THAT(r.err, Contains("command timed out after 300 ms on node luash.c1.weft"));
  }
}

TEST_CASE("lua examples: a real weft-host runs pool.lua and shell.lua from its plugin directory",
          "[lua][ssh][examples][integration]") {
  using weft::testing::Host;
  using weft::testing::HostIn;
  using weft::testing::ServerIn;
  using weft::testing::Weftd;
  SshdNode a("lhost-a");
  TempDir tmp("weft-lua-host");
  fs::create_directories(tmp / "plugins");
  fs::copy_file(kScripts / "pool.lua", tmp / "plugins" / "pool.lua");
  fs::copy_file(kScripts / "shell.lua", tmp / "plugins" / "shell.lua");
  Weftd server(ServerIn(tmp / "server"));
  Host host(HostIn(tmp / "host", "h1", server.provisioner(), {tmp / "plugins"}));
  REQUIRE(weft::testing::WaitFor([&] { return server.HostLive("h1"); }, 15s));

  // Registered like native plugins, the key a secret.
  json plugins = server.Call("plugin.list", json::object());
  json pool_fields;
  bool have_shell = false;
  for (const json& pl : plugins["plugins"]) {
    if (pl["type"] == "static-pool") pool_fields = pl["fields"];
    if (pl["type"] == "shell-lua") have_shell = true;
  }
  CHECK(have_shell);
  REQUIRE(pool_fields.is_array());
  bool key_sensitive = false;
  for (const json& f : pool_fields) {
    if (f["name"] == "ssh_key") key_sensitive = f.value("sensitive", false);
  }
  CHECK(key_sensitive);

  const json provider = {{"name", "lab"},
                         {"type", "static-pool"},
                         {"fields", {{"hosts", json::array({PoolEntry(a.node())})}, {"ssh_key", a.node().private_key}}}};
  const json nodes = json::array({{{"id", "web-1"}, {"hostname", "web-1.c1.weft"}, {"access_v4", ""}}});
  auto run = [&](const std::string& plugin, const std::string& action, json payload, const std::string& state) {
    payload["hostname"] = "web-1.c1.weft";
    payload["nodes"] = nodes;
    json task = {{"plugin", plugin}, {"action", action},       {"cluster_id", "c1"}, {"node_id", "web-1"},
                 {"job_id", "j1"},   {"max_attempts", 1},      {"payload", payload}};
    std::int64_t id = server.Enqueue(task);
    json t = server.WaitTaskState(id, state, 60s);
    INFO(t.dump(2));
    return t;
  };
  json created = run("static-pool", "CREATE", {{"provider", provider}}, "succeeded");
  CHECK(created["result"]["provider_id"] == PoolId(a.node()));
  json results = created["result"];
  // A task by hand carries the clear key (weftd opens the sealed one only in the tasks its job engine builds).
  results["ssh_auth"]["private_key"] = a.node().private_key;
  json confirmed = run("static-pool", "CONFIRM", {{"provider", provider}, {"results", results}}, "succeeded");
  CHECK(confirmed["result"]["access_v4"] == a.node().address);
  CHECK_THAT(confirmed["result"]["facts"]["kernel"].get<std::string>(), Catch::StartsWith("Linux "));
  results.update(confirmed["result"]);

  json service = {{"name", "web"},
                  {"action",
                   {{"type", "shell-lua"},
                    {"fields", {{"command", "echo \"installing on $WEFT_HOSTNAME\" > \"$WEFT_NODE_ROOT/web\"; "
                                            "cat \"$WEFT_NODE_ROOT/web\"; echo WEFT_RESULT web_port=8080"}}}}}};
  json installed = run("shell-lua", "INSTALL", {{"service", service}, {"results", results}}, "succeeded");
  CHECK(installed["result"]["web_port"] == "8080");
  CHECK(installed["result"]["exit_status"] == 0);
  CHECK_THAT(installed["stdout"].get<std::string>(), Contains("installing on web-1.c1.weft"));
  CHECK(weft::testing::ReadFile(a.node().root / "web") == "installing on web-1.c1.weft\n");

  json failing = {{"name", "web"}, {"action", {{"type", "shell-lua"}, {"fields", {{"command", "exit 3"}}}}}};
  json failed = run("shell-lua", "START", {{"service", failing}, {"results", results}}, "failed");
  CHECK_THAT(failed["message"].get<std::string>(), Contains("START on node web-1.c1.weft exited with status 3"));

  json deleted = run("static-pool", "DELETE", {{"provider", provider}, {"results", results}}, "succeeded");
  CHECK_THAT(deleted["stdout"].get<std::string>(), Contains("released " + PoolId(a.node())));

  // The key went into results (the server's business to keep secret), never into output or logs.
  for (const json* t : {&created, &confirmed, &installed, &failed, &deleted}) {
    CHECK_THAT(t->value("stdout", std::string()) + t->value("stderr", std::string()) +
                   t->value("message", std::string()),
               !Contains(KeyBodyLine(a.node())));
  }
  CHECK_THAT(host.Log(), !Contains(KeyBodyLine(a.node())));
}
