#include "weft/server/api/router.hpp"

#include <algorithm>
#include <chrono>

#include "weft/common/text.hpp"

namespace weft::api {
namespace {

// A name as the user typed it, in quotes; JSON-escaped when it holds
// characters a terminal would not show as they are.
std::string Quoted(const std::string& name) {
  for (unsigned char c : name)
    if (c < 0x20 || c >= 0x7f) return json(name).dump(-1, ' ', false, json::error_handler_t::replace);
  return "'" + name + "'";
}

}  // namespace

std::string_view EndpointName(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kApi: return "api";
    case Endpoint::kProvisioner: return "provisioner";
  }
  return "unknown";
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kHost: return "host";
    case Role::kUser: return "user";
    case Role::kAdmin: return "admin";
    case Role::kSuperadmin: return "superadmin";
    case Role::kEnroll: return "enrolling host";
    case Role::kPending: return "unaccepted host";
    case Role::kGateway: return "gateway";
  }
  return "unknown";
}

void Router::Add(std::string op, std::set<Role> roles, std::set<Endpoint> endpoints, Handler handler,
                 Effect effect, Fields fields, std::size_t payload_frames) {
  const server::OpMetrics* metrics = metrics_ ? metrics_->ForOp(op) : nullptr;
  Entry& e = ops_[std::move(op)];
  e = Entry{};
  e.roles = std::move(roles);
  e.endpoints = std::move(endpoints);
  e.handler = std::move(handler);
  e.effect = effect;
  std::sort(fields.begin(), fields.end());
  e.fields = std::move(fields);
  e.payload_frames = payload_frames;
  e.metrics = metrics;
}

void Router::set_metrics(server::ServerMetrics* metrics) {
  metrics_ = metrics;
  unknown_op_metrics_ = metrics ? metrics->ForOp("unknown") : nullptr;
  for (auto& [name, entry] : ops_) entry.metrics = metrics ? metrics->ForOp(name) : nullptr;
}

void Router::Wrap(const std::string& op, const std::function<Handler(Handler)>& wrap) {
  auto it = ops_.find(op);
  if (it != ops_.end()) it->second.handler = wrap(std::move(it->second.handler));
}

std::map<std::string, std::int64_t> Router::Served() const {
  std::map<std::string, std::int64_t> out;
  for (const auto& [name, entry] : ops_)
    if (const std::int64_t n = entry.served->load(std::memory_order_relaxed); n > 0) out.emplace(name, n);
  return out;
}

bool Router::ReadOnly(const std::string& op) const {
  auto it = ops_.find(op);
  return it != ops_.end() && it->second.effect == Effect::kReads;
}

std::vector<std::string> Router::OpsOn(Endpoint endpoint) const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : ops_)
    if (entry.endpoints.count(endpoint)) out.push_back(name);
  return out;
}

Fields Router::FieldsOf(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? Fields::Undeclared() : it->second.fields;
}

std::size_t Router::PayloadFramesOf(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? 0 : it->second.payload_frames;
}

std::vector<std::string> Router::KnownOps() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : ops_) out.push_back(name);
  return out;
}

Response Router::Route(const Call& call) const {
  auto it = ops_.find(call.request->op);
  const Entry* entry = it == ops_.end() ? nullptr : &it->second;
  if (!metrics_) return Dispatch(call, entry);
  // In a lambda whose only return is `response`: the reply is built in the
  // caller's object (the lambda's return is elided), so no Response is moved
  // or destroyed per request.
  auto timed = [&] {
    const auto start = std::chrono::steady_clock::now();
    Response response = Dispatch(call, entry);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    const server::OpMetrics* m = entry ? entry->metrics : unknown_op_metrics_;
    if (outcomes_at_reply_ && !response.held) {
      m->Observe(took.count());
      response.outcome = m;
    } else {
      m->Record(response.status.code(), took.count());
    }
    return response;
  };
  return timed();
}

Response Router::Dispatch(const Call& call, const Entry* entry) const {
  const std::string& op = call.request->op;
  if (!entry) {
    // The ops this caller may send here, not every op weftd has (hosts' and internal ones).
    Fields mine;
    std::string known;
    for (const auto& [name, other] : ops_) {
      if (!other.endpoints.count(call.endpoint) || !other.roles.count(call.principal.role)) continue;
      mine.push_back(name);
      known += (known.empty() ? "" : ", ") + name;
    }
    const std::string nearest = NearestName(op, mine);
    json details = {{"op", op}, {"known_ops", mine}};
    if (!nearest.empty()) details["did_you_mean"] = nearest;
    return Response::Error(Status::Invalid("unknown op '" + op + "'" +
                                           (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                                           (known.empty() ? std::string()
                                                          : "; the ops you may send here are " + known)),
                           std::move(details));
  }
  const Entry& e = *entry;
  if (!e.endpoints.count(call.endpoint)) {
    std::string where;
    for (Endpoint ep : e.endpoints) {
      if (!where.empty()) where += " or ";
      where += EndpointName(ep);
    }
    return Response::Error(Status::Denied("op '" + op + "' is not served on the " +
                                          std::string(EndpointName(call.endpoint)) + " endpoint; send it to the " +
                                          where + " endpoint"));
  }
  if (!e.roles.count(call.principal.role)) {
    std::string needs;
    for (Role r : e.roles) needs += std::string(needs.empty() ? "" : " or ") + std::string(RoleName(r));
    return Response::Error(Status::Denied("op '" + op + "' needs role " + needs + "; the caller is " +
                                          std::string(RoleName(call.principal.role)) +
                                          (call.principal.tenant.empty() || call.principal.tenant == "_system"
                                               ? std::string()
                                               : " of tenant '" + call.principal.tenant + "'")),
                           json{{"op", op}, {"role", RoleName(call.principal.role)}});
  }
  if (call.endpoint == Endpoint::kApi && tenant_exists_ && !tenant_exists_(call.principal.tenant))
    return Response::Error(Status::NotFound("tenant " + Quoted(call.principal.tenant) +
                                            " does not exist (weft tenant list shows the tenants)"),
                           json{{"tenant", call.principal.tenant}});
  if (call.request->blobs.size() != e.payload_frames) return RefusePayloadFrames(call, e);
  if (e.fields.checked() && call.endpoint == Endpoint::kApi)
    if (Response refused = CheckFields(call, e); !refused.status.ok()) return refused;
  e.served->fetch_add(1, std::memory_order_relaxed);
  // One return of one named Response (see Route).
  auto invoke = [&] {
    Response response = Invoke(e.handler, call);
    if (e.effect == Effect::kChanges && recorder_ && response.status.ok() && !response.held)
      response = Record(call, std::move(response));
    return response;
  };
  return invoke();
}

// A body key the op does not declare is refused, never ignored: a misspelt
// `dry_run` on cluster.delete would otherwise delete the cluster.
Response Router::CheckFields(const Call& call, const Entry& entry) {
  const wire::Request& request = *call.request;
  const json tree = request.body_text.empty() ? json() : wire::BodyTree(request);
  const json& body = request.body_text.empty() ? request.body : tree;
  if (!body.is_object()) return Response::Ok(json::object());  // the handler says what is wrong with it
  json unknown = json::array();
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!std::binary_search(entry.fields.begin(), entry.fields.end(), it.key())) unknown.push_back(it.key());
  if (unknown.empty()) return Response::Ok(json::object());
  const std::string& op = request.op;
  const std::string first = unknown.front().get<std::string>();
  const std::string nearest = NearestName(first, entry.fields);
  std::string known;
  for (const std::string& f : entry.fields) known += (known.empty() ? "" : ", ") + f;
  std::string message = json(first).dump(-1, ' ', false, json::error_handler_t::replace) + " is not a field of " + op;
  message += !nearest.empty()      ? "; did you mean \"" + nearest + "\"?"
             : entry.fields.empty() ? std::string("; it takes no fields (its body is {})")
                                    : "; its fields are " + known;
  if (unknown.size() > 1) message += " (" + std::to_string(unknown.size() - 1) + " more unknown field(s), in details)";
  const std::vector<std::string>& fields = entry.fields;
  json details = {{"op", op}, {"field", first}, {"unknown_fields", std::move(unknown)}, {"known_fields", fields}};
  if (!nearest.empty()) details["did_you_mean"] = nearest;
  return Response::Error(Status::Invalid(std::move(message)), std::move(details));
}

// A payload frame the op does not take is refused, never ignored: here, for
// every op, as what each op takes is declared at Add.
Response Router::RefusePayloadFrames(const Call& call, const Entry& entry) {
  const std::size_t sent = call.request->blobs.size();
  const std::size_t takes = entry.payload_frames;
  const std::string op = json(call.request->op).dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string were = std::to_string(sent) + (sent == 1 ? " was sent" : " were sent");
  std::string message =
      takes == 0 ? "op " + op + " takes no payload frame, and " + were + "; send the JSON header alone"
                 : "op " + op + " takes exactly " +
                       (takes == 1 ? std::string("one payload frame") : std::to_string(takes) + " payload frames") +
                       " after the JSON header, and " + were;
  return Response::Error(Status::Invalid(std::move(message)),
                         json{{"op", call.request->op}, {"payload_frames", sent}, {"takes", takes}});
}

Response Router::Invoke(const Handler& handler, const Call& call) {
  try {
    return handler(call);
  } catch (const std::exception& ex) {
    // nlohmann::json throws on misuse; a handler bug must not take the server down.
    return Response::Error(Status::Internal("op '" + call.request->op + "' failed unexpectedly: " + ex.what()));
  }
}

// Here, in one place, so that every op that changes state is recorded, not a list of them.
Response Router::Record(const Call& call, Response response) const {
  Status s;
  try {
    s = recorder_(call, response);
  } catch (const std::exception& ex) {
    s = Status::Internal(ex.what());
  }
  // INTERNAL rolls the whole batch back: no change is committed without its entry.
  if (!s.ok())
    return Response::Error(Status::Internal("op '" + call.request->op +
                                            "' was not done: its audit log entry could not be written (" +
                                            s.message() + ")"));
  return response;
}

}  // namespace weft::api
