// The audit log's op side: the entry a successful change leaves (the Router
// calls the recorder for every op whose Effect is kChanges; Ops installs
// RecordAudit as that recorder) and the `audit.list` op.
//
// An entry says who (the principal's user, tenant and role), what (the op and
// its target: cluster, job, entity, host, user, tenant), where (the tenant
// acted in) and when. Its detail holds only parameters from a fixed list
// (sizes, names, roles, versions, short key ids): never a config, an entity's
// document, a token or a key, so no secret reaches the log.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <optional>

#include "weft/server/api/router.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"

namespace weft::api {

// The entry for a successful `call` answered with `response`, without its time;
// nullopt when the call changed nothing after all (a dry run).
std::optional<store::AuditRecord> AuditEntryOf(const Call& call, const Response& response);

// Appends the entry of `call` to the log, in the caller's transaction.
[[nodiscard]] Status RecordAudit(store::Store& store, const Clock& clock, const Call& call, const Response& response);

// `audit.list` (docs/protocol.md): a superadmin reads every entry (or one
// tenant's, with a tenant in the header), a tenant admin their tenant's, a
// user only their own.
void RegisterAuditOps(Router& router, store::Store& store);

}  // namespace weft::api
