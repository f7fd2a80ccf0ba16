// What a follower weftd answers (docs/failover.md, docs/protocol.md): it
// serves no op but server.status; every other request gets a NOT_LEADER
// reply, an UNAVAILABLE error whose details name the leader's endpoints, so
// that clients move to the leader by themselves (weft::client does).
// Not thread-safe: the reactor's.
#pragma once

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/leader/leadership.hpp"
#include "weft/common/wire.hpp"

namespace weft::server::leader {

// The reply to `request`, received on `endpoint`, while this weftd follows.
// `status` is what server.status says about this process (pid, endpoints, ...).
api::Response AnswerAsFollower(Leadership& leadership, api::Endpoint endpoint, const wire::Request& request,
                               nlohmann::json status);

// The details of a NOT_LEADER reply: {"not_leader":true,"leader":ENDPOINT,"epoch":N,"node":..}
// with ENDPOINT the leader's endpoint of the same kind as `endpoint` (absent while none is known).
nlohmann::json NotLeaderDetails(const Leadership& leadership, api::Endpoint endpoint);
// The NOT_LEADER error's sentence.
Status NotLeaderStatus(const Leadership& leadership, api::Endpoint endpoint);

}  // namespace weft::server::leader
