#include "weft/server/leader/follower.hpp"

#include <string>
#include <utility>

namespace weft::server::leader {
namespace {

using json = nlohmann::json;

// A field of the leader as last seen: `fallback` while none was ever read
// (known_leader() is null until this weftd has read the row, e.g. when its
// first attempts failed on a connection error).
template <typename T>
T Known(const Leadership& leadership, const char* key, T fallback) {
  const json& known = leadership.known_leader();
  return known.is_object() ? known.value(key, std::move(fallback)) : fallback;
}

// The leader's endpoint of the kind `endpoint` is ("" while none is known).
std::string LeaderEndpoint(const Leadership& leadership, api::Endpoint endpoint) {
  const json& known = leadership.known_leader();
  if (!known.is_object() || known.value("node", std::string()).empty()) return "";
  // This weftd as it led last: it stepped down, and no other is known to lead yet.
  if (known.value("node", std::string()) == leadership.node() && !leadership.leader()) return "";
  const json endpoints = known.value("endpoints", json::object());
  const char* kind = endpoint == api::Endpoint::kProvisioner ? "provisioner" : "api";
  return endpoints.is_object() ? endpoints.value(kind, std::string()) : std::string();
}

}  // namespace

json NotLeaderDetails(const Leadership& leadership, api::Endpoint endpoint) {
  json details = {{"not_leader", true}, {"epoch", Known(leadership, "epoch", std::int64_t{0})}};
  const std::string where = LeaderEndpoint(leadership, endpoint);
  if (!where.empty()) {
    details["leader"] = where;
    details["node"] = Known(leadership, "node", std::string());
  }
  return details;
}

Status NotLeaderStatus(const Leadership& leadership, api::Endpoint endpoint) {
  const std::string where = LeaderEndpoint(leadership, endpoint);
  if (where.empty()) {
    // The database is out of reach: no weftd can lead on it meanwhile.
    if (const std::string unreachable = leadership.ConnectError(); !unreachable.empty())
      return Status::Unavailable("this weftd ('" + leadership.node() + "') is a follower and no leader is known: " +
                                 unreachable + "; retry once the database is back");
    return Status::Unavailable("this weftd ('" + leadership.node() +
                               "') is a follower and no leader is known yet; retry in a moment");
  }
  return Status::Unavailable("this weftd ('" + leadership.node() + "') is a follower; the leader is '" +
                             Known(leadership, "node", std::string()) + "' at " + where +
                             ": send the request there");
}

api::Response AnswerAsFollower(Leadership& leadership, api::Endpoint endpoint, const wire::Request& request,
                               json status) {
  if (request.op != "server.status")
    return api::Response::Error(NotLeaderStatus(leadership, endpoint), NotLeaderDetails(leadership, endpoint));
  Result<json> view = leadership.View();
  if (!view.ok()) return api::Response::Error(view.status());
  status["leadership"] = std::move(*view);
  return api::Response::Ok(std::move(status));
}

}  // namespace weft::server::leader
