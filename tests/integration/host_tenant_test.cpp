// weft-host's workers each serve one tenant and say so in task.take. weftd
// does not filter takes by tenant yet, so this test stands in for it: a
// ROUTER socket that answers the provisioner ops and records every take.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/common/wire.hpp"

namespace {
using json = nlohmann::json;
using namespace std::chrono_literals;
}  // namespace

TEST_CASE("tenants: each worker sends its own tenant in task.take", "[integration][host][tenant]") {
  weft::testing::TempDir tmp("weft-it");
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::rcvtimeo, 100);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = weft::wire::LastEndpoint(router);

  weft::testing::Host host(weft::testing::HostIn(tmp / "host", "h1", endpoint, {}, 3,
                                                "workers = 3\ntenants = [\"acme\", \"globex\"]\n"));
  std::map<std::string, int> takes_by_tenant;  // "" for a take without a tenant
  std::set<std::string> host_ids;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline &&
         (takes_by_tenant["acme"] < 2 || takes_by_tenant["globex"] < 2)) {
    weft::wire::Frames frames, envelope;
    if (!weft::wire::RecvMultipart(router, frames)) continue;
    weft::wire::SplitEnvelope(frames, envelope);
    std::string id;
    auto request = weft::wire::DecodeRequest(frames, weft::wire::Limits{}, &id);
    REQUIRE(request.ok());
    json reply = json::object();
    if (request->op == "host.register") {
      reply = {{"heartbeat_ms", 200}, {"lease_ms", 30000}};
    } else if (request->op == "host.heartbeat") {
      reply = {{"renewed", 0}, {"stale", json::array()}};
    } else if (request->op == "task.take") {
      host_ids.insert(request->body.value("host_id", std::string()));
      takes_by_tenant[request->body.value("tenant", std::string())]++;
      reply = {{"task", nullptr}};
    }
    weft::wire::Frames out = weft::wire::WithEnvelope(envelope, weft::wire::EncodeReply(
                                                                    weft::wire::Reply::Success(id, reply)));
    weft::wire::SendMultipart(router, out);
  }
  INFO(host.Log());
  // Workers 0 and 2 serve acme, worker 1 globex; none takes for "any tenant".
  CHECK(takes_by_tenant["acme"] >= 2);
  CHECK(takes_by_tenant["globex"] >= 2);
  CHECK(takes_by_tenant[""] == 0);
  CHECK(host_ids == std::set<std::string>{"h1"});
  CHECK_THAT(host.Log(), Catch::Contains("serving tenant 'acme' with 1 thread(s)"));
  CHECK_THAT(host.Log(), Catch::Contains("serving tenant 'globex' with 1 thread(s)"));
}
