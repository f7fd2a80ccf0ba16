// weft::api::Router: op name -> handler, with the role and endpoint checks
// every op shares.
//
// The caller (weftd's reactor) builds a Principal for each request from the
// CurveZMQ key it arrived with (server/auth): a user of a tenant with a role,
// a host, a host enrolling with a one-time token, or a host waiting for an
// admin. With security off every `api` caller is superadmin of the header's
// tenant and every `provisioner` caller a host. An unknown op is INVALID and
// the reply lists the known ops; an op the principal may not call is DENIED.
// An `api` op added with its body's fields refuses a body with any other
// top-level key (INVALID, naming it and the nearest field); one added as
// free-form, or without a declaration, takes any body. Every op says how many
// payload frames (frames after the JSON header) it takes, none unless it is
// added with some: a request with another count is INVALID on both endpoints.
//
// Not thread-safe; handlers run on the reactor thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/metrics/server_metrics.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::api {

using json = nlohmann::json;

enum class Endpoint : int { kApi = 1, kProvisioner };
// kEnroll: a host holding an enrollment token (may only call host.enroll);
// kPending: a host whose key is not known (may only ask to be accepted);
// kGateway: a gateway's key on a request that acts for nobody (may only log in).
enum class Role : int { kHost = 1, kUser, kAdmin, kSuperadmin, kEnroll, kPending, kGateway };
std::string_view EndpointName(Endpoint endpoint);
std::string_view RoleName(Role role);

struct Principal {
  std::string tenant = "default";
  Role role = Role::kUser;
  std::string user = "admin";  // who asked, for the audit trail
  std::string user_tenant = {};  // the user's own tenant when it differs from `tenant` (a superadmin acting in another)
  std::string key = {};        // the CurveZMQ public key (Z85); empty with security off
  std::string host_id = {};    // role host: the host the key belongs to
  // A request a gateway passed on for a session or an API token acts as that
  // session's or token's user; these say how it came, for the audit trail.
  std::string via_gateway = {};  // the gateway's name ("" when it came straight from the user)
  std::string client_addr = {};  // the browser's address the gateway gave
  bool by_session = false;       // it carried a session (not an API token)
  // The tenant's quotas (0: no limit), checked at cluster.create and scale.
  std::int64_t max_clusters = 0;
  std::int64_t max_nodes = 0;
};

struct Call {
  Endpoint endpoint = Endpoint::kApi;
  Principal principal;
  const wire::Request* request = nullptr;
  // Where the request came from: the peer's IP address as ZeroMQ gives it
  // (Peer-Address, TCP only; empty otherwise), for the audit log. It points into
  // what the reactor keeps of the request, which outlives the call.
  std::string_view peer_address = {};
};

// What a handler answers: a reply now, or `held` (task.take with nothing
// ready: the reactor keeps the request and answers it later).
struct Response {
  Status status;                  // ok: `body` is the reply body
  json body = json::object();
  json details = json::object();  // with an error
  bool held = false;
  std::string held_host_id;       // for held takes
  std::string held_tenant;        // the take's tenant; empty: any
  std::string held_runner;        // the take's runner; empty: none named
  std::string held_incarnation;   // the process that asked; empty: not said
  std::int64_t held_until_ms = 0;
  std::vector<std::string> blobs;  // payload frames after a success reply's header (resource chunks)
  // When not empty, the success's body already as JSON text, sent instead of
  // `body` (a take's reply: the task is written straight out, never a json tree).
  std::string body_text;
  // A take's reply that hands out an attempt: which one (task 0: none).
  std::int64_t hands_out_task_id = 0;
  std::int64_t hands_out_attempt = 0;
  // With an error: the handler refused before it changed anything (a rate
  // refusal: UNAVAILABLE, to be retried later), so the batch's other requests
  // still commit. Any other UNAVAILABLE or INTERNAL error rolls the batch back
  // (server/daemon/group_commit.cpp).
  bool changed_nothing = false;
  // A reply whose outcome its router left to count when it is sent
  // (Router::set_outcomes_at_reply): the op's series, or null.
  const server::OpMetrics* outcome = nullptr;

  static Response Ok(json body) {
    Response r;
    r.body = std::move(body);
    return r;
  }
  static Response Error(Status status, json details = json::object()) {
    Response r;
    r.status = std::move(status);
    r.details = std::move(details);
    return r;
  }
  // An error answered before anything was changed (changed_nothing).
  static Response Refusal(Status status, json details = json::object()) {
    Response r = Error(std::move(status), std::move(details));
    r.changed_nothing = true;
    return r;
  }
};

using Handler = std::function<Response(const Call&)>;

// What an op does, for the audit log. A successful call of an op that changes
// state is recorded (the default, so that a new op is covered unless it says
// otherwise). Reads are not, nor a host's own traffic (register, heartbeat,
// take, finish, progress: thousands a second, and the tasks and their
// attempts are already that record). Ops that only read are also answered
// ahead of a batch's writes (Router::ReadOnly), so kReads must mean it: a
// handler that changes anything another request could observe is kChanges.
enum class Effect : int { kChanges = 1, kReads, kHostTraffic };

// Writes the audit entry of a successful call that changed state, in the
// call's transaction; an error fails the call (and so rolls the change back).
using AuditRecorder = std::function<Status(const Call&, const Response&)>;

// In a handler: `var` is the value of a Result, or the handler answers its error.
#define WEFT_TRY_ASSIGN(var, expr)                                       \
  auto var##_result = (expr);                                            \
  if (!var##_result.ok()) return Response::Error(var##_result.status()); \
  auto var = std::move(var##_result.value())

// The top-level keys an op's body may have, given at Router::Add. A list
// (`{"cluster", "size"}`, or `{}` for an op that takes none) is checked: on the
// `api` endpoint any other key is refused. Fields::FreeForm() is for an op whose
// body is a document of the caller's with keys of its own (a catalog entity's
// put); Fields::Undeclared(), Add's default, only for ops no `api` caller can
// send (a test refuses an `api` op added without fields). Nested objects are
// never checked here: only the body's own keys.
class Fields : public std::vector<std::string> {
 public:
  using std::vector<std::string>::vector;
  Fields() = default;
  Fields(std::vector<std::string> names) : std::vector<std::string>(std::move(names)) {}  // NOLINT: a list converts
  static Fields FreeForm() { return Fields(Kind::kFreeForm); }
  static Fields Undeclared() { return Fields(Kind::kUndeclared); }
  // Whether the router refuses keys not in the list.
  bool checked() const { return kind_ == Kind::kChecked; }
  // Whether the op said what its body takes (a list, or free-form).
  bool declared() const { return kind_ != Kind::kUndeclared; }

 private:
  enum class Kind : int { kChecked, kFreeForm, kUndeclared };
  explicit Fields(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::kChecked;
};

class Router {
 public:
  // `roles` may call the op; `endpoints` serve it. With `fields`, a request on
  // the `api` endpoint whose body has another top-level key is INVALID before
  // the handler runs (a misspelt `dry_run` must never be ignored). A request
  // with more or fewer than `payload_frames` payload frames is INVALID too (a
  // frame sent to an op that takes none must never be ignored).
  void Add(std::string op, std::set<Role> roles, std::set<Endpoint> endpoints, Handler handler,
           Effect effect = Effect::kChanges, Fields fields = Fields::Undeclared(), std::size_t payload_frames = 0);
  void set_audit_recorder(AuditRecorder recorder) { recorder_ = std::move(recorder); }
  Response Route(const Call& call) const;
  // Replaces an op's handler with `wrap(old handler)` (server/auth seals secrets this way).
  void Wrap(const std::string& op, const std::function<Handler(Handler)>& wrap);
  std::vector<std::string> KnownOps() const;
  // The ops served on `endpoint`.
  std::vector<std::string> OpsOn(Endpoint endpoint) const;
  // The body fields `op` was added with (Fields::Undeclared() for an op not known).
  Fields FieldsOf(const std::string& op) const;
  // How many payload frames `op` takes (0 for an op not known).
  std::size_t PayloadFramesOf(const std::string& op) const;
  // Whether `op` was added as one that only reads (Effect::kReads): it changes
  // nothing in the store and nothing another request could observe, so weftd
  // answers it ahead of a batch's writes, from committed state.
  bool ReadOnly(const std::string& op) const;
  // Whether a tenant exists (server/auth's registry). Once set, an `api`
  // request acting in any other tenant is refused before its handler runs, so
  // a misspelt --tenant never creates a phantom tenant.
  void SetTenantExists(std::function<bool(const std::string&)> exists) { tenant_exists_ = std::move(exists); }
  // How many requests of each op reached its handler since start (ops with none left out).
  // Thread-safe once the ops are added: another thread may read the counts
  // while this router's thread routes (server.status on weftd's api front).
  std::map<std::string, std::int64_t> Served() const;
  // Counts every routed request by op and outcome, and times it (null: nothing is measured).
  // Requests for ops the router does not know count as op "unknown".
  void set_metrics(server::ServerMetrics* metrics);
  // Outcomes are counted by whoever sends the replies (weftd's reactor, after
  // the commit, so a request whose batch was rolled back is not counted ok):
  // Route times the request and leaves its op's series in Response::outcome.
  // A held take is still counted at once.
  void set_outcomes_at_reply(bool at_reply) { outcomes_at_reply_ = at_reply; }

 private:
  struct Entry {
    std::set<Role> roles;
    std::set<Endpoint> endpoints;
    Handler handler;
    Effect effect = Effect::kChanges;
    Fields fields = Fields::Undeclared();  // sorted
    std::size_t payload_frames = 0;
    mutable std::shared_ptr<std::atomic<std::int64_t>> served = std::make_shared<std::atomic<std::int64_t>>(0);
    const server::OpMetrics* metrics = nullptr;
  };
  Response Dispatch(const Call& call, const Entry* entry) const;
  static Response CheckFields(const Call& call, const Entry& entry);
  // The refusal of a request whose payload frames are not as many as the op takes.
  static Response RefusePayloadFrames(const Call& call, const Entry& entry);
  static Response Invoke(const Handler& handler, const Call& call);
  Response Record(const Call& call, Response response) const;

  std::map<std::string, Entry> ops_;
  std::function<bool(const std::string&)> tenant_exists_;
  AuditRecorder recorder_;
  server::ServerMetrics* metrics_ = nullptr;
  const server::OpMetrics* unknown_op_metrics_ = nullptr;
  bool outcomes_at_reply_ = false;
};

}  // namespace weft::api
