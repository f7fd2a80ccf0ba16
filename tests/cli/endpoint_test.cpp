// A wrong endpoint, told apart: the real `weft` CLI and weft::client::Client
// pointed at weftd's provisioner endpoint or at weft-web's HTTP(S) port say
// what answered there, instead of only that weftd did not.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/client/probe.hpp"
#include "weft/common/curve.hpp"

namespace weft {
namespace {

using testing::BuildPath;
using testing::RunResult;

RunResult Weft(const std::vector<std::string>& args) { return testing::Run(BuildPath("bin/weft"), args); }

// "http://127.0.0.1:4242" or "https://..." as a ZeroMQ endpoint.
std::string TcpOf(const std::string& url) { return "tcp://" + url.substr(url.find("://") + 3); }

// One call through the client library at `endpoint`; its error message.
std::string LibraryError(client::Options options, const std::string& endpoint) {
  zmq::context_t ctx(1);
  options.endpoint = endpoint;
  options.timeout_ms = 1000;
  client::Client c(ctx, options);
  Result<nlohmann::json> r = c.Call("server.status");
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("weft endpoint: weftd's provisioner endpoint given as --server is named as such", "[cli][integration]") {
  testing::Weftd server(testing::WeftdOptions{.name = "weft-endpoint-test", .curve = true});
  const std::string credential = server.superadmin().string();
  RunResult r = Weft({"--server", server.provisioner(), "--credentials", credential, "--timeout", "1000", "status"});
  INFO(r.err << server.Log());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("weft: " + server.provisioner() + " answered as weftd's provisioner endpoint "
                                      "(the one weft-host uses), not its api endpoint; weft needs weftd's api "
                                      "endpoint"));
  // The api endpoint itself still works with that credential.
  CHECK(Weft({"--server", server.api(), "--credentials", credential, "status"}).exit_code == 0);

  Result<curve::Credential> c = curve::LoadCredential(server.superadmin());
  REQUIRE(c.ok());
  CHECK_THAT(LibraryError(client::FromCredential(*c), server.provisioner()),
             Catch::Contains("answered as weftd's provisioner endpoint"));
}

TEST_CASE("weft endpoint: weft-web's port given as --server is named an HTTP or HTTPS server", "[cli][integration]") {
  testing::Weftd server("weft-endpoint-test");
  for (const bool tls : {false, true}) {
    testing::WebOptions options;
    options.require_login = false;
    options.tls = tls;
    testing::WebGateway web(server, options);
    const std::string endpoint = TcpOf(web.url());
    const std::string what = tls ? "an HTTPS server (weft-web?)" : "an HTTP server (weft-web?)";
    RunResult r = Weft({"--server", endpoint, "--timeout", "1000", "status"});
    INFO(r.err << web.Log());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("weft: " + endpoint + " answered as " + what +
                                        ", not as weftd's api endpoint, which speaks ZeroMQ"));
    CHECK_THAT(LibraryError(client::Options{}, endpoint), Catch::Contains("answered as " + what));
  }
}

}  // namespace weft

namespace weft {

TEST_CASE("weft endpoint: the greeting of weftd's api endpoint names its security mechanism", "[cli][integration]") {
  // What the CLI asks when a client without a credential is cut off before
  // libzmq reports the mismatch: the answer must not depend on that race.
  testing::Weftd curve(testing::WeftdOptions{.name = "weft-endpoint-test", .curve = true});
  CHECK(client::PeerMechanism(curve.api(), 2000) == "CURVE");
  testing::Weftd plain("weft-endpoint-test");
  CHECK(client::PeerMechanism(plain.api(), 2000) == "NULL");
}

}  // namespace weft
