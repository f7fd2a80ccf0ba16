// Every op weftd serves on the api endpoint says what its body takes, so that a
// misspelt option is refused rather than ignored: built by weftd's own
// composition root (server/daemon/components.cpp), security ops included, and
// the api front's router of reads as weftd builds it.
#include <catch2/catch.hpp>

#include <string>

#include "support/temp_dir.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/server/api/router.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/components.hpp"
#include "weft/server/daemon/server_ops.hpp"
#include "weft/server/jobs/cluster_ops.hpp"
#include "weft/server/store/store.hpp"

using namespace weft;
using api::Endpoint;
using api::Fields;

TEST_CASE("api fields: every op on the api endpoint declares its body's fields, and the api front's reads declare "
          "the same",
          "[api]") {
  testing::TempDir dir("weft-api-fields");
  server::Config config;
  config.server.data_dir = dir.path();
  ManualClock clock;
  auto store = store::Store::Open(dir / "weft.db");
  REQUIRE(store.ok());
  server::Components components(config, **store, clock);
  REQUIRE(components.Start().ok());
  auto keys = curve::Generate();
  REQUIRE(keys.ok());
  components.AddSecurityOps(keys->public_key);
  const api::Router& router = components.router();

  const std::vector<std::string> ops = router.OpsOn(Endpoint::kApi);
  CHECK(ops.size() > 60);  // every op of docs/protocol.md's api section
  std::vector<std::string> undeclared, free_form;
  for (const std::string& op : ops) {
    const Fields fields = router.FieldsOf(op);
    if (!fields.declared()) undeclared.push_back(op);
    if (fields.declared() && !fields.checked()) free_form.push_back(op);
  }
  // A new api op is added with its fields (Router::Add's last argument; {} for none).
  CHECK(undeclared == std::vector<std::string>{});
  // Only a catalog entity's put takes a document with keys of its own.
  CHECK(free_form == std::vector<std::string>{"clustertemplate.put", "hardwaretype.put", "imagetype.put",
                                              "provider.put", "service.put"});
  // Only resource.upload takes a payload frame (its chunk); every other op, on either endpoint, refuses one.
  std::vector<std::string> with_payload;
  for (const std::string& op : router.KnownOps())
    if (router.PayloadFramesOf(op) != 0) with_payload.push_back(op + ":" + std::to_string(router.PayloadFramesOf(op)));
  CHECK(with_payload == std::vector<std::string>{"resource.upload:1"});

  // The reads weftd's api front answers on its own thread (server/daemon/daemon.cpp, StartFront).
  api::Router reads;
  jobs::RegisterClusterReads(reads, **store, clock, [](const std::string&) { return std::set<std::string>{}; });
  catalog::RegisterCatalogReads(reads, **store, clock, config);
  server::StatusCounts counts;
  server::RegisterStatusRead(reads, router, counts, **store, clock, components.info(), components.retention(),
                             components.store_health());
  for (const std::string& op : reads.OpsOn(Endpoint::kApi)) {
    INFO(op);
    const Fields fields = reads.FieldsOf(op);
    const Fields same = router.FieldsOf(op);
    CHECK(fields.declared());
    CHECK(fields.checked() == same.checked());
    CHECK(static_cast<const std::vector<std::string>&>(fields) == static_cast<const std::vector<std::string>&>(same));
    CHECK(reads.PayloadFramesOf(op) == router.PayloadFramesOf(op));
  }
}
