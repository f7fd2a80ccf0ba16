// The static provider end to end: a pool of real sshd nodes (weft_localnode,
// needs root), the real weftd and weft-host loading <build>/plugins/providers,
// tasks enqueued with debug.enqueue in the shape the job engine hands out.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/sshd_node.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::kBuild;
using weft::testing::ServerIn;
using weft::testing::Weftd;
using weft::testing::SshdNode;
using weft::testing::TempDir;
using weft::testing::WaitFor;

namespace {

json PoolEntry(const weft::localnode::Node& n, const std::vector<std::string>& host_keys) {
  return {{"address", n.address}, {"port", n.port}, {"user", n.user}, {"host_keys", host_keys}};
}

std::string IdOf(const weft::localnode::Node& n) { return n.address + ":" + std::to_string(n.port); }

// A task as the job engine hands it out: the node's earlier results both in
// `results` and in `node.results`, their SSH key opened. (weftd opens sealed
// values only where it sealed them, in the tasks its job engine builds, and
// refuses sealed text from a client: a task by hand carries the clear key,
// which is the pool's.)
json NodeTask(const json& provider, const std::string& action, const std::string& cluster, const std::string& node,
              json results = json::object()) {
  if (results.contains("ssh_auth") && results["ssh_auth"].contains("private_key"))
    results["ssh_auth"]["private_key"] = provider["fields"]["ssh_key"];
  const std::string hostname = node + "." + cluster + ".weft";
  return {{"plugin", "static"},
          {"action", action},
          {"cluster_id", cluster},
          {"node_id", node},
          {"job_id", "job-" + cluster},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", hostname},
            {"provider", provider},
            {"node", {{"id", node}, {"hostname", hostname}, {"results", results}}},
            {"results", results}}}};
}

// The private key's base64 body, as it would appear if anything printed the key.
std::string KeyBody(const std::string& private_key) {
  std::istringstream in(private_key);
  std::string line, body;
  while (std::getline(in, line)) {
    if (line.find("PRIVATE KEY") == std::string::npos) body = line;  // the last full line of base64
  }
  REQUIRE(body.size() > 20);
  return body;
}

// A real weftd and one weft-host that loads the built provider plugins.
struct Cluster {
  explicit Cluster(const fs::path& dir) : dir_(dir) {
    server = std::make_unique<Weftd>(ServerIn(dir / "server"));
    StartHost();
  }
  void StartHost() {
    host = std::make_unique<Host>(HostIn(dir_ / ("host-" + std::to_string(++host_starts_)), "h1", server->provisioner(),
                                  std::vector<fs::path>{kBuild / "plugins/providers"}));
    REQUIRE(WaitFor([&] { return server->HostLive("h1"); }, 15s));
  }
  // Kills weftd and weft-host and starts both again on the same store and ports.
  void Restart() {
    const json endpoints = server->endpoints();
    host->process().Signal(SIGKILL);
    REQUIRE(host->process().Wait(5s).has_value());
    host.reset();
    server->process().Signal(SIGKILL);
    REQUIRE(server->process().Wait(5s).has_value());
    server.reset();
    server = std::make_unique<Weftd>(ServerIn(dir_ / "server", endpoints));
    StartHost();
  }
  json Run(const json& task, const std::string& state) {
    const std::int64_t id = server->Enqueue(task);
    json t = server->WaitTaskState(id, state, 60s);
    INFO(t.dump(2));
    return t;
  }
  std::string Logs() const { return server->Log() + host->Log(); }

  std::unique_ptr<Weftd> server;
  std::unique_ptr<Host> host;

 private:
  fs::path dir_;
  int host_starts_ = 0;
};

}  // namespace

TEST_CASE("static provider: allocates each pool host to one node, exclusively and across restarts",
          "[static][ssh]") {
  SshdNode a("pool-a");
  SshdNode b("pool-b");
  // One key for the whole pool: a's user key logs in to b as well.
  {
    std::ofstream keys(b.node().dir / "authorized_keys", std::ios::app);
    keys << a.node().public_key << "\n";
  }
  TempDir tmp("weft-static");
  const json provider = {
      {"name", "pool"},
      {"type", "static"},
      {"fields",
       {{"hosts", json::array({PoolEntry(a.node(), a.node().host_keys), PoolEntry(b.node(), b.node().host_keys)})},
        {"ssh_key", a.node().private_key},
        {"state_dir", (tmp / "allocations").string()}}}};
  Cluster c(tmp.path());

  // The descriptor the host registered: the key is a secret, the pool a JSON field.
  json plugins = c.server->Call("plugin.list", json::object());
  json fields;
  for (const json& p : plugins["plugins"]) {
    if (p["type"] == "static") fields = p["fields"];
  }
  REQUIRE(fields.is_array());
  REQUIRE(fields.size() == 3);
  CHECK(fields[0]["name"] == "hosts");
  CHECK(fields[0]["type"] == "json");
  CHECK(fields[0]["required"] == true);
  CHECK(fields[1]["name"] == "ssh_key");
  CHECK(fields[1]["sensitive"] == true);
  CHECK(fields[2]["name"] == "state_dir");
  CHECK(fields[2]["default"] == "/var/lib/weft/static-pool");

  // Two CREATEs take the two hosts.
  json web1 = c.Run(NodeTask(provider, "CREATE", "c1", "web-1"), "succeeded");
  json web2 = c.Run(NodeTask(provider, "CREATE", "c1", "web-2"), "succeeded");
  CHECK(web1["result"]["provider_id"] == IdOf(a.node()));
  CHECK(web2["result"]["provider_id"] == IdOf(b.node()));
  CHECK(web1["result"]["ssh_auth"]["user"] == "root");
  // The pool's key comes back sealed: weftd stores no private key in the clear (docs/security.md).
  const std::string sealed = web1["result"]["ssh_auth"]["private_key"];
  CHECK(sealed.rfind("enc:v2:", 0) == 0);
  CHECK(sealed.find(a.node().private_key) == std::string::npos);
  CHECK(fs::exists(tmp / "allocations" / ("claim-" + a.node().address + "-2022.json")));

  // A third finds the pool exhausted and says who holds what.
  const std::string exhausted = "static pool exhausted: all 2 hosts are allocated (" + IdOf(a.node()) +
                                " to cluster c1 node web-1, " + IdOf(b.node()) + " to cluster c1 node web-2)";
  json web3 = c.Run(NodeTask(provider, "CREATE", "c1", "web-3"), "failed");
  CHECK_THAT(web3["message"].get<std::string>(), Catch::Contains(exhausted));

  // A retried CREATE of web-1 keeps its host instead of failing or taking another.
  json retry = c.Run(NodeTask(provider, "CREATE", "c1", "web-1"), "succeeded");
  CHECK(retry["result"]["provider_id"] == IdOf(a.node()));
  CHECK_THAT(retry["stdout"].get<std::string>(), Catch::Contains("stays allocated to cluster c1 node web-1"));

  // CONFIRM reports the host and has reached it over SSH: the command's
  // $SSH_CONNECTION ends with the pool entry's address and port.
  json confirm = c.Run(NodeTask(provider, "CONFIRM", "c1", "web-1", web1["result"]), "succeeded");
  CHECK(confirm["result"]["access_v4"] == a.node().address);
  CHECK(confirm["result"]["bind_v4"] == a.node().address);
  CHECK(confirm["result"]["ssh_port"] == 2022);
  CHECK(confirm["result"]["hostname"] == "web-1.c1.weft");
  CHECK(confirm["result"]["host_keys"] == json(a.node().host_keys));
  CHECK_THAT(confirm["stdout"].get<std::string>(),
             Catch::Contains("answers over SSH as root (connection ") &&
                 Catch::Contains(" " + a.node().address + " 2022)"));
  json confirm2 = c.Run(NodeTask(provider, "CONFIRM", "c1", "web-2", web2["result"]), "succeeded");
  CHECK(confirm2["result"]["host_keys"] == json(b.node().host_keys));

  // CONFIRM of a node that does not hold the host is refused.
  json wrong_node = c.Run(NodeTask(provider, "CONFIRM", "c1", "web-9", web1["result"]), "failed");
  CHECK_THAT(wrong_node["message"].get<std::string>(),
             Catch::Contains("host " + IdOf(a.node()) +
                             " is not allocated to cluster c1 node web-9 (it is allocated to cluster c1 node web-1)"));

  // Allocations are files: after weftd and weft-host restart the pool is still full.
  c.Restart();
  json web4 = c.Run(NodeTask(provider, "CREATE", "c1", "web-4"), "failed");
  CHECK_THAT(web4["message"].get<std::string>(), Catch::Contains(exhausted));

  // DELETE frees web-1's host (twice is fine), and the next CREATE gets it.
  json del = c.Run(NodeTask(provider, "DELETE", "c1", "web-1", web1["result"]), "succeeded");
  CHECK_THAT(del["stdout"].get<std::string>(), Catch::Contains("freed " + IdOf(a.node()) + " (cluster c1 node web-1)"));
  CHECK_FALSE(fs::exists(tmp / "allocations" / ("claim-" + a.node().address + "-2022.json")));
  json del_again = c.Run(NodeTask(provider, "DELETE", "c1", "web-1", web1["result"]), "succeeded");
  CHECK_THAT(del_again["stdout"].get<std::string>(), Catch::Contains("nothing to free"));
  json never_created = c.Run(NodeTask(provider, "DELETE", "c1", "web-3"), "succeeded");
  CHECK_THAT(never_created["stdout"].get<std::string>(), Catch::Contains("nothing is allocated to cluster c1 node web-3"));
  json db1 = c.Run(NodeTask(provider, "CREATE", "c2", "db-1"), "succeeded");
  CHECK(db1["result"]["provider_id"] == IdOf(a.node()));
  // The old node's DELETE, arriving late, does not free the host's new holder.
  json late = c.Run(NodeTask(provider, "DELETE", "c1", "web-1", web1["result"]), "succeeded");
  CHECK_THAT(late["stdout"].get<std::string>(),
             Catch::Contains(IdOf(a.node()) + " is allocated to cluster c2 node db-1 now and stays so"));
  CHECK(fs::exists(tmp / "allocations" / ("claim-" + a.node().address + "-2022.json")));

  // CONFIRM really connects: with b's sshd gone, web-2's CONFIRM fails.
  b.Stop();
  json down = c.Run(NodeTask(provider, "CONFIRM", "c1", "web-2", web2["result"]), "failed");
  CHECK_THAT(down["message"].get<std::string>(),
             Catch::Contains("static provider: host " + IdOf(b.node()) +
                             " of cluster c1 node web-2 does not answer over SSH"));

  // The pool's private key is in results only, never in a log line.
  for (const json& t : {web1, web2, web3, retry, confirm, confirm2, del, db1, down}) {
    CHECK(t["stdout"].get<std::string>().find(KeyBody(a.node().private_key)) == std::string::npos);
    CHECK(t["stderr"].get<std::string>().find(KeyBody(a.node().private_key)) == std::string::npos);
    CHECK(t["message"].get<std::string>().find(KeyBody(a.node().private_key)) == std::string::npos);
  }
  CHECK(c.Logs().find(KeyBody(a.node().private_key)) == std::string::npos);
}

TEST_CASE("static provider: a wrong host key in the pool makes CONFIRM fail before anything runs", "[static][ssh]") {
  SshdNode a("pool-a");
  TempDir tmp("weft-static");
  // A well-formed ed25519 key that is not a's host key: a's user key.
  const std::string wrong = a.node().public_key.substr(0, a.node().public_key.rfind(' '));
  REQUIRE(wrong != a.node().host_keys.at(0));
  const json provider = {{"name", "pool"},
                         {"type", "static"},
                         {"fields",
                          {{"hosts", json::array({PoolEntry(a.node(), {wrong})}).dump()},  // the string form
                           {"ssh_key", a.node().private_key},
                           {"state_dir", (tmp / "allocations").string()}}}};
  Cluster c(tmp.path());

  json create = c.Run(NodeTask(provider, "CREATE", "c1", "web-1"), "succeeded");
  CHECK(create["result"]["provider_id"] == IdOf(a.node()));
  json confirm = c.Run(NodeTask(provider, "CONFIRM", "c1", "web-1", create["result"]), "failed");
  CHECK_THAT(confirm["message"].get<std::string>(),
             Catch::Contains("does not answer over SSH") && Catch::Contains("host key mismatch"));
  CHECK_FALSE((confirm["result"].is_object() && confirm["result"].contains("host_keys")));

  // The failed CONFIRM keeps the allocation (the rollback's DELETE frees it).
  CHECK(fs::exists(tmp / "allocations" / ("claim-" + a.node().address + "-2022.json")));
  c.Run(NodeTask(provider, "DELETE", "c1", "web-1", create["result"]), "succeeded");
  CHECK_FALSE(fs::exists(tmp / "allocations" / ("claim-" + a.node().address + "-2022.json")));
}
