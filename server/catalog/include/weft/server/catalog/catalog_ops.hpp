// The catalog ops of docs/protocol.md: <kind>.put/get/list/delete for the five
// catalog kinds, catalog.check, and cluster.plan (solver + planner over the
// tenant's latest catalog, nothing run).
//
// The handlers borrow the Store, the Clock and the Config (all must outlive the
// Router they are added to), keep no state of their own and never open a
// transaction (weftd's reactor wraps each batch in one). Not thread-safe: they
// run on the reactor thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/server/api/router.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/server/store/store.hpp"
#include "weft/catalog/catalog.hpp"
#include "weft/common/clock.hpp"
#include "weft/planner/planner.hpp"

namespace weft::catalog {

// Solves run on the reactor thread (cluster.plan here, the cluster ops' creates and
// scales): one that cannot decide within this bound answers TIMEOUT rather than
// stall every other request.
inline constexpr std::int64_t kSolveTimeMs = 1000;
// The largest cluster a request may ask for.
inline constexpr std::int64_t kMaxClusterSize = 100000;

// What bounds a plan's reply (cluster.plan and every dry run): a plan of more
// nodes than `max_nodes` (jobs.max_plan_nodes) is refused before it is made,
// and one whose reply would pass `max_reply_bytes` (limits.max_message_bytes,
// less room for the header) after it is made. Both TOO_LARGE, saying the limit
// and how to raise it.
struct PlanBounds {
  std::int64_t max_nodes = 10000;
  std::size_t max_reply_bytes = (64u << 20) - 4096;
  // limits.max_header_bytes: what a task handed out, and so a cluster's config, may be
  // (server::MaxTaskBytes, server::MaxClusterConfigBytes).
  std::size_t max_header_bytes = wire::Limits{}.max_header_bytes;
  static PlanBounds Of(const server::Config& config);
  // A cluster's config (the template's defaults.config with the request's merged
  // over it), as cluster.create, cluster.plan, cluster.reconfigure and
  // cluster.upgrade set it: its macros (planner::CheckMacros), and its size,
  // which every task of the cluster carries: over server::MaxClusterConfigBytes it is
  // INVALID, naming the size, the limit and what to do, rather than a cluster
  // whose tasks fail when they are handed out.
  Status CheckConfig(const nlohmann::json& config) const;
  // A cluster template's defaults.config, at <kind>.put (and so at `weft catalog
  // import`): over server::MaxClusterConfigBytes every create from the template
  // would be refused, so the template is INVALID, naming the template, both sizes,
  // where the limit comes from and what to do.
  Status CheckTemplateConfig(const ClusterTemplate& tmpl) const;
  Status CheckNodes(std::int64_t nodes) const;
  // The answer to a request for a plan of `nodes` nodes past max_nodes: TOO_LARGE
  // (CheckNodes), its details naming the count under `key` ("size" as asked,
  // "nodes" as planned) and max_plan_nodes; nullopt within the bound.
  std::optional<api::Response> RefuseNodes(std::int64_t nodes, const char* key) const;
  // A reply body of `bytes` (as sent): ok, or TOO_LARGE (in `details`, the sizes).
  Status CheckReply(std::size_t bytes, std::int64_t nodes, nlohmann::json* details) const;
};

// A plan's counts, as the replies with `"summary": true` give them (cluster.plan's
// and every dry run's): task_count, stage_count, actions (tasks by action) and
// bootstrap (nodes by the plugin that runs their BOOTSTRAP). `plan` has the
// full reply's "tasks" and "stages".
nlohmann::json PlanCounts(const nlohmann::json& plan);

// The tenant's latest catalog, parsed. Entities were validated when they were put,
// so one that no longer parses (a newer weftd wrote it) is an internal error.
Result<Catalog> LoadCatalog(store::Store& store, const std::string& tenant);

// The tenants' catalogs as LoadCatalog reads them, kept between requests: a
// cluster create would otherwise read and parse every entity of its tenant. A
// copy is used while the store's catalog generation has not moved since it
// was read (store.hpp), so a put, delete or rollback is seen by the next read.
// Not thread-safe: for the reactor thread.
class CatalogCache {
 public:
  explicit CatalogCache(store::Store& store) : store_(store) {}
  Result<std::shared_ptr<const Catalog>> Get(const std::string& tenant);

 private:
  store::Store& store_;
  std::uint64_t generation_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const Catalog>> tenants_;
};

// A request's list of service names under `key` ("services"), as cluster.plan and
// every cluster op take it: strings, none empty, none named twice (INVALID says
// which); absent or null is an empty list, refused when `required`.
Result<std::vector<std::string>> ServiceNameList(const nlohmann::json& body, const char* key, bool required);

// A request's `services` where leaving them out means "every service" (of the
// template, of the cluster): ServiceNameList's list, nullopt when the body has
// none (absent or null). An empty list is INVALID, "services is empty: leave it
// out to <left_out>, or name at least one": a client that builds its list from
// a filter that matched nothing must not act on everything.
Result<std::optional<std::vector<std::string>>> OptionalServiceList(const nlohmann::json& body,
                                                                    const std::string& left_out);

// The services a cluster.create or cluster.plan asks for instead of those of
// `tmpl` (its defaults.services): ServiceNameList's list, nullopt when the body
// has none (absent or null). An empty list is INVALID: a cluster needs a
// service (the solver refuses none), and taking the template's instead would
// hide what was likely a mistake; the message names the template's services.
Result<std::optional<std::vector<std::string>>> RequestedServices(const nlohmann::json& body,
                                                                  const ClusterTemplate& tmpl);

// Adds the actions a plugin descriptor (as a host registered it) declares to
// `into` (OR of weft_action bits by type), unless it is another tenant's own.
void AddDeclaredActions(planner::DeclaredActions& into, const nlohmann::json& descriptor, const std::string& tenant);

// Adds every catalog op to `router`: puts and deletes for admins, reads and
// cluster.plan for users too, all on the api endpoint. catalog.check looks up
// the resources fields name in `resources` (when given; it must outlive the router).
void RegisterCatalogOps(api::Router& router, store::Store& store, const Clock& clock, const server::Config& config,
                        resources::ResourceStore* resources = nullptr);
// Only `<kind>.get` and `<kind>.list`, which read nothing but the store: for a
// router of another thread than the reactor's, on a connection that only reads.
void RegisterCatalogReads(api::Router& router, store::Store& store, const Clock& clock, const server::Config& config);

}  // namespace weft::catalog
