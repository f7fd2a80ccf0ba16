// weft_static_pool on its own: parsing the pool and the allocation files,
// including exclusivity between processes (no root, no sshd).
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "weft/static_pool/static_pool.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::staticpool::Allocations;
using weft::staticpool::Claim;
using weft::staticpool::Holder;
using weft::staticpool::ParseHosts;
using weft::staticpool::PoolHost;
using weft::testing::TempDir;

namespace {

const std::string kKeyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyForTestsOnlyAAAAAAAAAAAAAAAAAAAA";
const std::string kKeyB = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY=";

std::vector<PoolHost> Pool(int n) {
  json hosts = json::array();
  for (int i = 1; i <= n; ++i) hosts.push_back({{"address", "10.0.0." + std::to_string(i)}, {"host_keys", {kKeyA}}});
  auto pool = ParseHosts(hosts);
  REQUIRE(pool.ok());
  return *pool;
}

Claim For(const std::string& cluster, const std::string& node, std::int64_t task_id = 1) {
  Claim c;
  c.holder = Holder{"acme", cluster, node};
  c.job_id = "job-" + cluster;
  c.task_id = task_id;
  return c;
}

std::string ParseError(const json& hosts) {
  auto r = ParseHosts(hosts);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("static pool: hosts parse as a list or a JSON string, with defaults", "[static]") {
  const json hosts = {{{"address", "10.0.0.5"}, {"host_keys", {kKeyA + " root@web"}}},
                      {{"address", "10.0.0.6"}, {"port", 2222}, {"user", "deploy"}, {"host_keys", {kKeyA, kKeyB}}}};
  for (const json& form : {hosts, json(hosts.dump())}) {
    auto pool = ParseHosts(form);
    INFO(form.dump());
    REQUIRE(pool.ok());
    REQUIRE(pool->size() == 2);
    CHECK((*pool)[0].Id() == "10.0.0.5:22");
    CHECK((*pool)[0].user == "root");
    // The comment is the operator's note, not part of the key.
    CHECK((*pool)[0].host_keys == std::vector<std::string>{kKeyA});
    CHECK((*pool)[1].Id() == "10.0.0.6:2222");
    CHECK((*pool)[1].user == "deploy");
    CHECK((*pool)[1].host_keys.size() == 2);
  }
}

TEST_CASE("static pool: a bad pool is refused with a sentence naming the entry and the fix", "[static]") {
  CHECK_THAT(ParseError(json()), Catch::Contains("field 'hosts' is required"));
  CHECK_THAT(ParseError(json::array()), Catch::Contains("must be a non-empty list"));
  CHECK_THAT(ParseError(json("[{not json")), Catch::Contains("is a string that is not JSON"));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}}})),
             Catch::Contains("hosts[0] (10.0.0.5) has no host_keys; Weft never connects without checking"));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}, {"host_keys", json::array()}}})),
             Catch::Contains("has no host_keys"));
  CHECK_THAT(ParseError(json::array({{{"address", "web.example"}, {"host_keys", {kKeyA}}}})),
             Catch::Contains("hosts[0].address must be the host's IPv4 address"));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}, {"host_keys", {"AAAA"}}}})),
             Catch::Contains("host_keys[0] must be an OpenSSH public key \"type base64\""));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}, {"port", 0}, {"host_keys", {kKeyA}}}})),
             Catch::Contains("port must be an integer 1-65535"));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}, {"hostkeys", {kKeyA}}}})),
             Catch::Contains("unknown key 'hostkeys'"));
  CHECK_THAT(ParseError(json::array({{{"address", "10.0.0.5"}, {"host_keys", {kKeyA}}},
                                     {{"address", "10.0.0.5"}, {"port", 22}, {"host_keys", {kKeyA}}}})),
             Catch::Contains("hosts[1] (10.0.0.5:22) is listed twice"));
}

TEST_CASE("static pool: each host goes to one node, a retry keeps its host, exhaustion names the holders",
          "[static]") {
  TempDir tmp("weft-static-pool");
  const Allocations a(tmp / "state");
  const auto pool = Pool(2);

  auto web1 = a.Allocate(pool, For("c1", "web-1"));
  REQUIRE(web1.ok());
  CHECK_FALSE(web1->reused);
  auto web2 = a.Allocate(pool, For("c1", "web-2"));
  REQUIRE(web2.ok());
  CHECK(web1->host.Id() != web2->host.Id());

  // A retried CREATE of web-1 (a later attempt, another task) gets its own host back.
  auto retry = a.Allocate(pool, For("c1", "web-1", 7));
  REQUIRE(retry.ok());
  CHECK(retry->reused);
  CHECK(retry->host.Id() == web1->host.Id());

  // The same node id in another cluster, or another tenant, is another holder.
  auto other = a.Allocate(pool, For("c2", "web-1"));
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().code() == weft::Code::kConflict);
  CHECK(other.status().message() ==
        "static pool exhausted: all 2 hosts are allocated (10.0.0.1:22 to cluster c1 node web-1, 10.0.0.2:22 to "
        "cluster c1 node web-2); delete a cluster that uses the pool or add hosts to the provider's 'hosts' field");
  Claim other_tenant = For("c1", "web-1");
  other_tenant.holder.tenant = "globex";
  CHECK_FALSE(a.Allocate(pool, other_tenant).ok());

  // The file records who took the host, for operators and for the next process.
  auto found = a.Find(web1->host.Id());
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->holder == Holder{"acme", "c1", "web-1"});
  CHECK((*found)->job_id == "job-c1");
  CHECK((*found)->task_id == 1);
  CHECK(json::parse(weft::testing::ReadFile((*found)->file))["node_id"] == "web-1");
}

TEST_CASE("static pool: allocations are files: another object sees them, release frees only the holder's", "[static]") {
  TempDir tmp("weft-static-pool");
  const auto pool = Pool(2);
  {
    const Allocations first(tmp / "state");
    REQUIRE(first.Allocate(pool, For("c1", "web-1")).ok());
    REQUIRE(first.Allocate(pool, For("c1", "web-2")).ok());
  }
  // As a restarted weft-host would: a new object on the same directory.
  const Allocations second(tmp / "state");
  auto listed = second.List();
  REQUIRE(listed.ok());
  CHECK(listed->size() == 2);
  CHECK_FALSE(second.Allocate(pool, For("c2", "db-1")).ok());

  auto freed = second.Release(Holder{"acme", "c1", "web-1"});
  REQUIRE(freed.ok());
  CHECK(*freed == std::vector<std::string>{"10.0.0.1:22"});
  // Idempotent: nothing left to free is a success with nothing freed.
  auto again = second.Release(Holder{"acme", "c1", "web-1"});
  REQUIRE(again.ok());
  CHECK(again->empty());
  // Releasing in a directory that never existed is fine too.
  auto never = Allocations(tmp / "never").Release(Holder{"acme", "c1", "web-1"});
  REQUIRE(never.ok());
  CHECK(never->empty());

  auto db = second.Allocate(pool, For("c2", "db-1"));
  REQUIRE(db.ok());
  CHECK(db->host.Id() == "10.0.0.1:22");
  auto web2 = second.Find("10.0.0.2:22");
  REQUIRE(web2.ok());
  REQUIRE(web2->has_value());
  CHECK((*web2)->holder.node_id == "web-2");
}

TEST_CASE("static pool: an unreadable allocation file is never handed out and is named", "[static]") {
  TempDir tmp("weft-static-pool");
  const Allocations a(tmp / "state");
  const auto pool = Pool(1);
  weft::testing::WriteFile(tmp / "state" / "claim-10.0.0.1-22.json", "{trunc");
  auto r = a.Allocate(pool, For("c1", "web-1"));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(),
             Catch::Contains("all 1 host is allocated (10.0.0.1:22 to an unreadable allocation file " +
                             (tmp / "state" / "claim-10.0.0.1-22.json").string() + " (remove it if no cluster"));
}

TEST_CASE("static pool: processes allocating at once never share a host", "[static]") {
  TempDir tmp("weft-static-pool");
  const auto pool = Pool(3);
  constexpr int kProcs = 8;
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Every child blocks until the parent closes the pipe, so all race at once.
      ::close(go[1]);
      char c;
      while (::read(go[0], &c, 1) > 0) {
      }
      const Allocations a(tmp / "state");
      auto r = a.Allocate(pool, For("c1", "n" + std::to_string(i)));
      if (!r.ok()) ::_exit(r.status().message().rfind("static pool exhausted", 0) == 0 ? 1 : 2);
      for (std::size_t h = 0; h < pool.size(); ++h) {
        if (pool[h].Id() == r->host.Id()) ::_exit(10 + static_cast<int>(h));
      }
      ::_exit(3);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  std::map<int, int> outcomes;  // exit code -> how many
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    ++outcomes[WEXITSTATUS(status)];
  }
  INFO("exit code -> processes");
  CHECK(outcomes == std::map<int, int>{{1, kProcs - 3}, {10, 1}, {11, 1}, {12, 1}});
  auto listed = Allocations(tmp / "state").List();
  REQUIRE(listed.ok());
  std::set<std::string> nodes;
  for (const Claim& c : *listed) nodes.insert(c.holder.node_id);
  CHECK(nodes.size() == 3);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(tmp / "state")) {
    CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
  }
}
