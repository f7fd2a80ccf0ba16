// api reads answered on weftd's api front thread while its reactor is stuck
// in a write turn: the real weftd, real CurveZMQ clients, the real SQLite file.
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/weftd.hpp"
#include "support/write_lock.hpp"
#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Weftd;
using weft::testing::WriteLock;

namespace {

zmq::context_t& Ctx() {
  static zmq::context_t ctx(1);
  return ctx;
}

// A client of its own with the superadmin's credential, acting in `tenant`.
std::unique_ptr<weft::client::Client> Superadmin(const Weftd& weftd, const std::string& tenant = "") {
  weft::Result<weft::curve::Credential> c = weft::curve::LoadCredential(weftd.superadmin());
  REQUIRE(c.ok());
  weft::client::Options o = weft::client::FromCredential(*c, 30000);
  o.endpoint = weftd.api();
  o.tenant = tenant;
  o.probe_ms = 0;
  return std::make_unique<weft::client::Client>(Ctx(), o);
}

}  // namespace

TEST_CASE("api reads are answered while the reactor waits in a write turn", "[reads]") {
  weft::testing::WeftdOptions o;
  o.name = "api-reads";
  o.curve = true;
  o.stop_on_destroy = true;
  // The reactor's write waits this long for the lock the test holds.
  o.extra_toml = "[store]\nbusy_timeout_ms = 120000\n";
  Weftd weftd(o);

  std::optional<WriteLock> lock;
  lock.emplace(weftd.db());
  // A write: the reactor's turn waits for the store's write lock.
  weft::Result<json> created = weft::Status::Internal("not answered");
  std::thread writer([&] { created = Superadmin(weftd)->Call("tenant.create", {{"name", "later"}}, 240000); });
  struct Join {
    std::thread& t;
    std::optional<WriteLock>& lock;
    ~Join() {
      lock.reset();
      if (t.joinable()) t.join();
    }
  } join{writer, lock};

  // The reactor is stuck once it no longer answers what only it answers
  // (server.ops): each try that times out is a request it has not taken yet.
  bool stuck = false;
  for (int i = 0; i < 100 && !stuck; ++i) {
    weft::Result<json> ops = Superadmin(weftd)->Call("server.ops", json::object(), 500);
    stuck = !ops.ok();
  }
  INFO(weftd.Log());
  REQUIRE(stuck);

  // Reads are answered all the same, from what is committed: no tenant "later" yet.
  std::unique_ptr<weft::client::Client> reader = Superadmin(weftd);
  weft::Result<json> clusters = reader->Call("cluster.list", json::object());
  REQUIRE(clusters.ok());
  CHECK((*clusters)["clusters"] == json::array());
  weft::Result<json> job = reader->Call("job.get", {{"job", "12345"}});
  REQUIRE_FALSE(job.ok());
  CHECK(job.status().code() == weft::Code::kNotFound);
  // The tenant check applies on the front too.
  weft::Result<json> nowhere = Superadmin(weftd, "later")->Call("cluster.list", json::object());
  REQUIRE_FALSE(nowhere.ok());
  CHECK(nowhere.status().code() == weft::Code::kNotFound);
  CHECK_THAT(nowhere.status().message(), Catch::Contains("tenant 'later' does not exist"));
  // server.status too, with the counts the reactor's last turn left.
  weft::Result<json> status = reader->Call("server.status", json::object());
  REQUIRE(status.ok());
  CHECK((*status)["tasks"]["queued"] == 0);
  CHECK((*status)["hosts"]["registered"] == 0);
  CHECK((*status).contains("data_dir"));  // the superadmin's view

  // The write commits once the lock is gone; its tenant is there for the next read at once.
  lock.reset();
  writer.join();
  REQUIRE(created.ok());
  weft::Result<json> there = Superadmin(weftd, "later")->Call("cluster.list", json::object());
  REQUIRE(there.ok());
  CHECK((*there)["clusters"] == json::array());
}

namespace {

// A catalog of one provider and one service, enough for cluster.create (its jobs wait: no host runs them).
void PutCatalog(weft::client::Client& c) {
  const std::vector<std::pair<std::string, json>> puts = {
      {"provider.put", {{"name", "p"}, {"providertype", "fake-provider"}, {"provisioner", json::object()}}},
      {"hardwaretype.put", {{"name", "hw"}, {"providermap", {{"p", {{"flavor", "f1"}}}}}}},
      {"imagetype.put", {{"name", "img"}, {"providermap", {{"p", {{"image", "i1"}, {"sshuser", "root"}}}}}}},
      {"service.put", {{"name", "base"}, {"dependencies", json::object()}, {"provisioner", {{"actions", json::object()}}}}},
      {"clustertemplate.put",
       {{"name", "t"},
        {"compatibility", {{"hardwaretypes", {"hw"}}, {"imagetypes", {"img"}}, {"services", {"base"}}}},
        {"defaults",
         {{"services", {"base"}}, {"provider", "p"}, {"hardwaretype", "hw"}, {"imagetype", "img"},
          {"config", json::object()}}}}}};
  for (const auto& [op, body] : puts) {
    weft::Result<json> r = c.Call(op, body);
    INFO(op << ": " << (r.ok() ? std::string() : r.status().ToString()));
    REQUIRE(r.ok());
  }
}

// The names of the clusters cluster.list gives, as name:status.
std::vector<std::string> Listed(weft::client::Client& c) {
  weft::Result<json> r = c.Call("cluster.list", json::object());
  INFO((r.ok() ? std::string() : r.status().ToString()));
  REQUIRE(r.ok());
  std::vector<std::string> out;
  for (const json& cluster : (*r)["clusters"])
    out.push_back(cluster["name"].get<std::string>() + ":" + cluster["status"].get<std::string>());
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("api reads: the front lists a cluster the reactor wrote once its commit is done, never before",
          "[reads]") {
  weft::testing::WeftdOptions o;
  o.name = "api-reads-clusters";
  o.curve = true;
  o.stop_on_destroy = true;
  o.extra_toml = "[store]\nbusy_timeout_ms = 120000\n";
  Weftd weftd(o);
  std::unique_ptr<weft::client::Client> admin = Superadmin(weftd);
  PutCatalog(*admin);
  REQUIRE(admin->Call("tenant.create", {{"name", "other"}}).ok());
  std::unique_ptr<weft::client::Client> other = Superadmin(weftd, "other");
  PutCatalog(*other);

  // The front has read the clusters (none) before any is created: what it keeps must learn of the creates.
  std::unique_ptr<weft::client::Client> reader = Superadmin(weftd);
  CHECK(Listed(*reader).empty());
  weft::Result<json> first = admin->Call("cluster.create", {{"name", "first"}, {"template", "t"}, {"size", 1}});
  REQUIRE(first.ok());
  CHECK(Listed(*reader) == Names{"first:pending"});
  REQUIRE(other->Call("cluster.create", {{"name", "elsewhere"}, {"template", "t"}, {"size", 1}}).ok());
  // Tenants stay apart, on the front as on the reactor.
  CHECK(Listed(*reader) == Names{"first:pending"});
  CHECK(Listed(*Superadmin(weftd, "other")) == Names{"elsewhere:pending"});

  // A change of a cluster listed already shows at once too: its aborted create leaves it incomplete.
  REQUIRE(admin->Call("job.abort", {{"job", (*first)["job"]["id"]}}).ok());
  CHECK(Listed(*reader) == Names{"first:incomplete"});

  // A create the reactor cannot commit yet (another writer holds the lock) is not listed until it is.
  std::optional<WriteLock> lock;
  lock.emplace(weftd.db());
  weft::Result<json> second = weft::Status::Internal("not answered");
  std::thread writer([&] {
    second = Superadmin(weftd)->Call("cluster.create", {{"name", "second"}, {"template", "t"}, {"size", 1}}, 240000);
  });
  struct Join {
    std::thread& t;
    std::optional<WriteLock>& lock;
    ~Join() {
      lock.reset();
      if (t.joinable()) t.join();
    }
  } join{writer, lock};
  bool stuck = false;
  for (int i = 0; i < 100 && !stuck; ++i) stuck = !Superadmin(weftd)->Call("server.ops", json::object(), 500).ok();
  INFO(weftd.Log());
  REQUIRE(stuck);
  CHECK(Listed(*reader) == Names{"first:incomplete"});
  lock.reset();
  writer.join();
  REQUIRE(second.ok());
  CHECK(Listed(*reader) == Names{"first:incomplete", "second:pending"});
}
