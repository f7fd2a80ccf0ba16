// The audit log end to end: a real weftd with CurveZMQ on, real weft-host
// processes (one enrolling with a token, one accepted by an admin), and the
// real weft CLI acting as a superadmin, a tenant admin and plain users. Every
// kind of change a user trial asked about is made from the outside and must
// show in `weft audit` with who made it; reads do not; the log is
// append-only in the store file itself, and no secret reaches it.

#include <map>
#include <set>
#include <string>
#include <thread>

#include "options.hpp"
#include "support/store_rows.hpp"
#include "weft/common/curve.hpp"

namespace weft::audit_test {
namespace {

// The audit entries whose op is `op`.
std::vector<json> Entries(const json& list, const std::string& op) {
  std::vector<json> out;
  for (const json& e : list["entries"])
    if (e["op"] == op) out.push_back(e);
  return out;
}

void Ok(const RunResult& r) {
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

// Checks that exactly one entry of `op` on `target` exists in `list`, made by `actor` of `actor_tenant` as `role`
// in `tenant`; returns it.
json One(const json& list, const std::string& op, const std::string& target, const std::string& actor,
         const std::string& actor_tenant, const std::string& role, const std::string& tenant) {
  std::vector<json> found;
  for (const json& e : Entries(list, op))
    if (e["target"] == target) found.push_back(e);
  INFO(op << " on " << target << " in:\n" << list.dump(1));
  REQUIRE(found.size() == 1);
  const json& e = found[0];
  CHECK(e["actor"] == actor);
  CHECK(e["actor_tenant"] == actor_tenant);
  CHECK(e["actor_role"] == role);
  CHECK(e["tenant"] == tenant);
  CHECK(e["outcome"] == "ok");
  CHECK(e["at_ms"].get<std::int64_t>() > 0);
  CHECK(e["address"] == "127.0.0.1");  // where: every request came over loopback TCP
  return e;
}

}  // namespace

TEST_CASE("audit: every change is recorded with who made it, when and where, reads are not, each role sees "
          "what it may, the log is append-only and holds no secret",
          "[audit][security]") {
  testing::TempDir tmp("weft-audit");
  Weftd s(ServerIn(tmp / "server", /*curve=*/true));
  const fs::path catalog = CatalogDir(tmp / "catalog").path();
  // A template whose clusters have a lease, so that it can be extended.
  json lease_template = json::parse(ReadFile(catalog / "clustertemplates" / "web-fake.json"));
  lease_template["name"] = "web-lease";
  lease_template["administration"] = {{"leaseduration", {{"initial", "1h"}, {"max", "1d"}, {"step", "1h"}}}};
  WriteFile(tmp / "web-lease.json", lease_template.dump());
  WriteFile(tmp / "tiny.json", R"({"name":"tiny","providermap":{"fake":{"flavor":"fake-tiny"}}})");
  const fs::path bob = tmp / "bob.json", alice = tmp / "alice.json", carol = tmp / "carol.json";

  // The superadmin makes a tenant and its admin.
  Ok(s.Weft({"tenant", "create", "acme", "--max-clusters", "5"}));
  Ok(s.Weft({"tenant", "create", "acme", "--max-nodes", "40", "--update"}));
  Ok(s.Weft({"--tenant", "acme", "user", "create", "bob", "--role", "admin"}));
  Ok(s.Weft({"--tenant", "acme", "credentials", "bob", "-f", bob.string()}));
  // The admin: users, the catalog.
  Ok(s.Weft({"user", "create", "alice"}, bob));
  Ok(s.Weft({"credentials", "alice", "-f", alice.string()}, bob));
  Ok(s.Weft({"user", "create", "carol"}, bob));
  Ok(s.Weft({"credentials", "carol", "-f", carol.string()}, bob));
  Ok(s.Weft({"catalog", "import", catalog.string()}, bob));
  Ok(s.Weft({"clustertemplate", "put", (tmp / "web-lease.json").string()}, bob));
  Ok(s.Weft({"hardwaretype", "put", (tmp / "tiny.json").string()}, bob));
  Ok(s.Weft({"hardwaretype", "delete", "tiny"}, bob));
  // A user: a cluster (no host runs its tasks: its job stays running), abort, retry, lease.
  Ok(s.Weft({"cluster", "create", "a1", "--template", "web-lease", "--size", "3"}, alice));
  const json a1 = s.WeftJson({"cluster", "get", "a1"}, alice)["cluster"];
  const std::string job = a1["latest_job"];
  Ok(s.Weft({"job", "abort", job}, alice));
  Ok(s.Weft({"job", "retry", job}, alice));
  Ok(s.Weft({"cluster", "extend-lease", "a1"}, alice));
  Ok(s.Weft({"cluster", "create", "c1", "--template", "web-fake", "--size", "3", "--dry-run"}, carol));
  Ok(s.Weft({"cluster", "list"}, carol));  // a read
  // Hosts: a token and the host that enrolls with it; a host an admin lets in, then cuts off.
  RunResult token = s.Weft({"host", "token", "create"});
  Ok(token);
  const std::string token_text = token.out.substr(0, token.out.find('\n'));
  Host h1(HostIn(tmp.path(), "h1", s.provisioner(), "enroll_token = \"" + token_text + "\"\n"));
  auto server_key = curve::LoadCredential(s.superadmin());
  REQUIRE(server_key.ok());
  Host h2(HostIn(tmp.path(), "h2", s.provisioner(), "server_key = \"" + server_key->server_key + "\"\n"));
  REQUIRE(WaitFor([&] { return !s.WeftJson({"host", "requests"})["requests"].empty(); }, 20s));
  const std::string fingerprint = s.WeftJson({"host", "requests"})["requests"][0]["fingerprint"];
  Ok(s.Weft({"host", "accept", "h2", "--fingerprint", fingerprint}));
  Ok(s.Weft({"host", "revoke", "h2"}));
  REQUIRE(WaitFor(
      [&] {
        const json hosts = s.WeftJson({"host", "list"});
        for (const json& h : hosts["hosts"])
          if (h["id"] == "h1") return true;
        return false;
      },
      20s));
  // Removing a user keeps what she did in the log.
  Ok(s.Weft({"user", "delete", "alice"}, bob));

  const json all = s.WeftJson({"audit"});
  One(all, "tenant.create", "tenant acme", "superadmin", "_system", "superadmin", "acme");
  One(all, "tenant.update", "tenant acme", "superadmin", "_system", "superadmin", "acme");
  One(all, "user.create", "user bob", "superadmin", "_system", "superadmin", "acme");
  One(all, "credentials.add", "user bob", "superadmin", "_system", "superadmin", "acme");
  const json made_alice = One(all, "user.create", "user alice", "bob", "acme", "admin", "acme");
  CHECK(made_alice["detail"]["role"] == "user");
  One(all, "credentials.add", "user alice", "bob", "acme", "admin", "acme");
  const json put = One(all, "clustertemplate.put", "clustertemplate web-lease", "bob", "acme", "admin", "acme");
  CHECK(put["detail"].contains("version"));
  One(all, "hardwaretype.put", "hardwaretype tiny", "bob", "acme", "admin", "acme");
  One(all, "hardwaretype.delete", "hardwaretype tiny", "bob", "acme", "admin", "acme");
  CHECK(Entries(all, "service.put").size() >= 5);  // the import, one entry per entity
  const json create = One(all, "cluster.create", "cluster a1", "alice", "acme", "user", "acme");
  CHECK(create["job_id"] == job);
  CHECK(create["cluster_id"] == a1["id"]);
  CHECK(create["detail"]["size"] == 3);
  CHECK(create["detail"]["template"] == "web-lease");
  for (const char* op : {"job.abort", "job.retry"}) {
    const json e = One(all, op, "job " + job, "alice", "acme", "user", "acme");
    CHECK(e["job_id"] == job);
    CHECK(e["cluster"] == "a1");  // named although the reply gives only the cluster's id
  }
  CHECK(One(all, "cluster.extend_lease", "cluster a1", "alice", "acme", "user", "acme")["cluster_id"] == a1["id"]);
  const json minted = Entries(all, "host.token.create").at(0);
  CHECK(minted["actor"] == "superadmin");
  CHECK(minted["tenant"] == "_system");
  CHECK_THAT(minted["target"].get<std::string>(), Catch::StartsWith("token "));
  const json enrolled = One(all, "host.enroll", "host h1", minted["target"], "_system", "enrolling host", "_system");
  (void)enrolled;
  One(all, "host.accept", "host h2", "superadmin", "_system", "superadmin", "_system");
  One(all, "host.revoke", "host h2", "superadmin", "_system", "superadmin", "_system");
  One(all, "user.delete", "user alice", "bob", "acme", "admin", "acme");
  // Reads, dry runs and the hosts' own traffic leave nothing.
  std::set<std::string> ops;
  for (const json& e : all["entries"]) ops.insert(e["op"]);
  for (const char* op : {"cluster.list", "cluster.get", "host.list", "host.requests", "audit.list", "host.register",
                         "host.heartbeat", "task.take"})
    CHECK(ops.count(op) == 0);
  CHECK(Entries(all, "cluster.create").size() == 1);  // carol's was a dry run
  // Oldest first, each later than or as late as the one before.
  for (std::size_t i = 1; i < all["entries"].size(); ++i)
    CHECK(all["entries"][i]["id"].get<std::int64_t>() > all["entries"][i - 1]["id"].get<std::int64_t>());

  // The table names who, as user@tenant.
  RunResult table = s.Weft({"audit", "--cluster", "a1"});
  Ok(table);
  CHECK_THAT(table.out, Catch::Contains("alice@acme") && Catch::Contains("job.retry") &&
                            Catch::Contains("cluster.extend_lease") && !Catch::Contains("hardwaretype"));
  // ... and from where.
  CHECK_THAT(table.out, Catch::Contains(" FROM ") && Catch::Contains("  127.0.0.1  "));

  // Filters: a cluster (by name or id), a user, a time.
  const json on_a1 = s.WeftJson({"audit", "--cluster", "a1"});
  CHECK(on_a1["entries"].size() == 4);  // create, abort, retry, extend_lease
  CHECK(s.WeftJson({"audit", "--cluster", a1["id"]})["entries"] == on_a1["entries"]);
  const json by_bob = s.WeftJson({"audit", "--user", "bob"});
  CHECK(!by_bob["entries"].empty());
  for (const json& e : by_bob["entries"]) CHECK(e["actor"] == "bob");
  CHECK(s.WeftJson({"audit", "--since", "1h"})["entries"].size() == all["entries"].size());
  CHECK(s.WeftJson({"audit", "--since", "2999-01-01"})["entries"].empty());
  CHECK(s.WeftJson({"--tenant", "acme", "audit"})["entries"].size() < all["entries"].size());
  RunResult bad = s.Weft({"audit", "--since", "yesterday"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--since needs a duration"));

  // A tenant admin sees the tenant (alice's actions too), nothing of hosts or other tenants.
  const json bobs = s.WeftJson({"audit"}, bob);
  CHECK(!Entries(bobs, "job.retry").empty());
  for (const json& e : bobs["entries"]) CHECK(e["tenant"] == "acme");
  // A user sees what they did, and may not ask for someone else's.
  Ok(s.Weft({"cluster", "create", "c2", "--template", "web-fake", "--size", "3"}, carol));
  const json carols = s.WeftJson({"audit"}, carol);
  REQUIRE(carols["entries"].size() == 1);
  CHECK(carols["entries"][0]["actor"] == "carol");
  CHECK(carols["entries"][0]["op"] == "cluster.create");
  RunResult nosy = s.Weft({"audit", "--user", "bob"}, carol);
  CHECK(nosy.exit_code == 1);
  CHECK_THAT(nosy.err, Catch::Contains("only their own audit entries"));

  // Append-only in the file itself, and across a restart.
  CHECK_THAT(testing::ExecSql(s, "UPDATE audit_log SET actor = 'nobody'"), Catch::Contains("append-only"));
  CHECK_THAT(testing::ExecSql(s, "DELETE FROM audit_log"), Catch::Contains("append-only"));
  s.Restart();
  CHECK(s.WeftJson({"audit"})["entries"].size() == all["entries"].size() + 1);
  // The token's secret and the users' keys are nowhere in it.
  const std::string secret = token_text.substr(6, 64);
  CHECK(testing::CountRows(s, "SELECT COUNT(*) FROM audit_log WHERE detail LIKE '%" + secret + "%' OR target LIKE '%" +
                          secret + "%'") == 0);
  const auto bob_key = curve::LoadCredential(bob);
  REQUIRE(bob_key.ok());
  CHECK(testing::CountRows(s, "SELECT COUNT(*) FROM audit_log WHERE detail LIKE '%" + bob_key->keys.public_key + "%'") == 0);
}

}  // namespace weft::audit_test
