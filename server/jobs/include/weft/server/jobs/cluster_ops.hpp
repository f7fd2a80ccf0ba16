// The cluster and job ops of docs/protocol.md: cluster.create, delete, scale,
// add_services, remove_services, start, stop, restart, reconfigure, upgrade,
// rollback, extend_lease, list, get; job.list, get, abort, retry.
//
// Each operation that changes a cluster solves (when the layout changes),
// plans, and hands the job to the JobEngine; with "dry_run": true it answers
// the plan (layout, tasks, stages) and changes nothing.
//
// The handlers borrow the Store, the JobEngine, the Clock and the Config (all
// must outlive the Router), never open a transaction, and run on the reactor
// thread. Not thread-safe.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "weft/server/api/router.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/jobs/job_engine.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::jobs {

// The plugin types some live host runs now for a tenant's tasks (for job.get's `waiting_for_plugins`).
using LivePlugins = std::function<std::set<std::string>(const std::string& tenant)>;

// `plan_bounds` bound the dry runs' replies (catalog::PlanBounds::Of(config)).
void RegisterClusterOps(api::Router& router, store::Store& store, JobEngine& engine, const Clock& clock,
                        LivePlugins live_plugins, catalog::PlanBounds plan_bounds = {});
// Only cluster.list, cluster.get, job.list and job.get, for a router of
// another thread than the reactor's, on a store connection of its own that
// only reads (committed state); `live_plugins` must be safe to call there.
void RegisterClusterReads(api::Router& router, store::Store& store, const Clock& clock, LivePlugins live_plugins);

// A copy of a node's task results fit to show: ssh_auth's private key and
// passphrase are replaced by "<redacted>".
json RedactResults(json results);

}  // namespace weft::jobs
