#include "weft/server/api/audit.hpp"

#include <array>
#include <initializer_list>
#include <optional>
#include <string>

#include "weft/common/json_fields.hpp"
#include "weft/server/api/cursor.hpp"

namespace weft::api {
namespace {

constexpr std::size_t kMaxDetailText = 200;   // bytes of one string value
constexpr std::size_t kMaxDetailItems = 50;   // items of one list
constexpr std::int64_t kMaxListed = 100000;
constexpr char kAuditCursor = 'a';

// Parameters worth keeping, none of them secret. A `.put`'s body is an entity's
// document (provider fields may hold credentials), so only its reply counts.
constexpr std::array kBodyDetail = {"template",    "size",       "provider",  "hardwaretype", "imagetype",
                                    "services",    "lease_ms",   "restart",   "keep_on_failure", "role",
                                    "ttl_ms",      "max_clusters", "max_nodes", "max_workers", "version",
                                    "type",        "final",      "force"};
constexpr std::array kReplyDetail = {"version", "state",       "key",     "expires_at_ms", "size",
                                     "digest",  "fingerprint", "retired", "sessions_ended"};

std::string Cut(std::string text) {
  if (text.size() <= kMaxDetailText) return text;
  std::size_t cut = kMaxDetailText;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...";
}

// A scalar, or a list of scalars, bounded; nullopt for anything else.
std::optional<json> Bounded(const json& v) {
  if (v.is_string()) return json(Cut(v.get<std::string>()));
  if (v.is_number() || v.is_boolean()) return v;
  if (!v.is_array()) return std::nullopt;
  json out = json::array();
  for (const json& item : v) {
    if (out.size() == kMaxDetailItems) {
      out.push_back("...");
      break;
    }
    if (item.is_string() || item.is_number() || item.is_boolean()) out.push_back(Bounded(item).value());
  }
  return out;
}

std::string Text(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  if (it == obj.end()) return "";
  if (it->is_string()) return Cut(it->get<std::string>());
  if (it->is_number_integer()) return std::to_string(it->get<std::int64_t>());
  return "";
}

// The first of `keys` that `obj` has as text.
std::string First(const json& obj, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (std::string v = Text(obj, k); !v.empty()) return v;
  return "";
}

void Target(const Call& call, const json& body, const json& reply, store::AuditRecord* e) {
  const std::string& op = call.request->op;
  const std::string noun = op.substr(0, op.find('.'));
  const json job = reply.is_object() && reply.contains("job") ? reply["job"] : json::object();
  const json cluster = reply.is_object() && reply.contains("cluster") ? reply["cluster"] : json::object();
  e->job_id = First(job, {"id"});
  e->cluster_id = First(cluster, {"id"});
  if (e->cluster_id.empty()) e->cluster_id = First(job, {"cluster_id"});
  e->cluster = First(cluster, {"name"});
  if (noun == "cluster") {
    if (e->cluster.empty()) e->cluster = First(body, {"name", "cluster"});
    e->target = "cluster " + e->cluster;
  } else if (noun == "job") {
    if (e->job_id.empty()) e->job_id = First(body, {"job"});
    e->target = "job " + e->job_id;
  } else if (noun == "host") {
    e->tenant = "_system";  // hosts serve every tenant
    const std::string id = First(reply, {"host_id"});
    e->target = id.empty() ? "token " + First(reply, {"key"}) : "host " + id;
  } else if (noun == "tenant") {
    e->tenant = First(body, {"name"});
    e->target = "tenant " + e->tenant;
  } else if (noun == "user" || noun == "credentials") {
    e->target = "user " + First(body, {"name", "user"});
  } else if (noun == "resource") {
    e->target = "resource " + First(body, {"type"}) + "/" + First(body, {"name"});
  } else {
    const std::string name = First(body, {"name", "cluster", "job", "host_id", "user"});
    e->target = name.empty() ? noun : noun + " " + name;
  }
}

json Detail(const std::string& op, const json& body, const json& reply) {
  json detail = json::object();
  const bool document = op.size() > 4 && op.compare(op.size() - 4, 4, ".put") == 0;
  if (!document && body.is_object())
    for (const char* k : kBodyDetail)
      if (auto it = body.find(k); it != body.end())
        if (std::optional<json> v = Bounded(*it)) detail[k] = std::move(*v);
  if (reply.is_object()) {
    for (const char* k : kReplyDetail)
      if (auto it = reply.find(k); it != reply.end())
        if (std::optional<json> v = Bounded(*it)) detail[k] = std::move(*v);
    if (auto job = reply.find("job"); job != reply.end() && job->is_object()) {
      if (std::string v = Text(*job, "operation"); !v.empty()) detail["operation"] = v;
      if (std::string v = Text(*job, "status"); !v.empty()) detail["job_status"] = v;
    }
  }
  return detail;
}

json EntryJson(const store::AuditRecord& a) {
  json detail = json::parse(a.detail_json, nullptr, false);
  return {{"id", a.id},
          {"at_ms", a.at_ms},
          {"actor", a.actor},
          {"actor_tenant", a.actor_tenant},
          {"actor_role", a.actor_role},
          {"op", a.op},
          {"tenant", a.tenant},
          {"target", a.target},
          {"cluster_id", a.cluster_id},
          {"cluster", a.cluster},
          {"job_id", a.job_id},
          {"outcome", a.outcome},
          {"address", a.address},
          {"detail", detail.is_object() ? detail : json::object()}};
}

Response List(store::Store& store, const Call& call) {
  const json& body = call.request->body;
  if (Status s = jsonf::RequireObject(body, "body"); !s.ok()) return Response::Error(s);
  store::AuditQuery q;
  WEFT_TRY_ASSIGN(since, jsonf::Int(body, "since_ms", "", 0, INT64_MAX, 0));
  WEFT_TRY_ASSIGN(limit, jsonf::Int(body, "limit", "", 1, kMaxListed, 1000));
  WEFT_TRY_ASSIGN(before, ReadCursor(body, kAuditCursor, "audit.list"));
  WEFT_TRY_ASSIGN(user, jsonf::String(body, "user", "", ""));
  WEFT_TRY_ASSIGN(cluster, jsonf::String(body, "cluster", "", ""));
  q.since_ms = since;
  q.limit = limit + 1;  // one more than the page: is there an older one?
  q.before_id = before;
  q.actor = user;
  q.cluster = cluster;
  const Principal& p = call.principal;
  switch (p.role) {
    case Role::kSuperadmin:
      q.tenant = call.request->tenant;  // empty: every tenant
      break;
    case Role::kAdmin:
      q.tenant = p.tenant;
      break;
    default:
      // A user reads what they did themselves, nothing of the others'.
      if (!user.empty() && user != p.user)
        return Response::Error(Status::Denied("user '" + p.user + "' may read only their own audit entries, not "
                                              "those of user '" + user + "'; a tenant admin reads the whole tenant's"));
      q.tenant = p.tenant;
      q.actor = p.user;
      q.actor_tenant = p.tenant;
  }
  WEFT_TRY_ASSIGN(entries, store.ListAudit(q));
  // Oldest first within the page; the page is the newest `limit` entries older than the cursor's, and `next`
  // names its oldest entry when an older one follows.
  const bool more = static_cast<std::int64_t>(entries.size()) > limit;
  json list = json::array();
  for (std::size_t i = more ? 1 : 0; i < entries.size(); ++i) list.push_back(EntryJson(entries[i]));
  json reply = {{"entries", std::move(list)}};
  if (more) reply["next"] = MakeCursor(kAuditCursor, entries[1].id);
  return Response::Ok(std::move(reply));
}

}  // namespace

std::optional<store::AuditRecord> AuditEntryOf(const Call& call, const Response& response) {
  const json& body = call.request->body;
  const json& reply = response.body;
  // Neither a dry run nor a put of an entity equal to its latest version changed anything.
  if (reply.is_object() && (reply.value("dry_run", false) || reply.value("unchanged", false))) return std::nullopt;
  const Principal& p = call.principal;
  store::AuditRecord e;
  e.actor = p.user;
  e.actor_tenant = p.user_tenant.empty() ? p.tenant : p.user_tenant;
  e.actor_role = RoleName(p.role);
  e.op = call.request->op;
  e.tenant = p.tenant;
  e.outcome = "ok";
  Target(call, body, reply, &e);
  json detail = Detail(e.op, body, reply);
  // Where: the browser's address when a gateway passed the request on and gave
  // one, else the address of the connection it came on; `via` names the gateway
  // and its own address.
  const std::string peer(call.peer_address);
  if (!p.via_gateway.empty()) detail["via"] = "gateway " + p.via_gateway + (peer.empty() ? "" : " at " + peer);
  e.address = p.client_addr.empty() ? Cut(peer) : Cut(p.client_addr);
  e.detail_json = detail.dump();
  return e;
}

Status RecordAudit(store::Store& store, const Clock& clock, const Call& call, const Response& response) {
  std::optional<store::AuditRecord> entry = AuditEntryOf(call, response);
  if (!entry) return Status::Ok();
  if (entry->cluster.empty() && !entry->cluster_id.empty()) {
    // A job's reply names its cluster by id only; the name is what people filter by.
    WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> c, store.GetCluster(entry->cluster_id));
    if (c.has_value()) entry->cluster = c->name;
  }
  entry->at_ms = clock.NowMs();
  return store.AppendAudit(*entry);
}

void RegisterAuditOps(Router& router, store::Store& store) {
  store::Store* st = &store;
  router.Add("audit.list", {Role::kUser, Role::kAdmin, Role::kSuperadmin}, {Endpoint::kApi},
             [st](const Call& c) { return List(*st, c); }, Effect::kReads,
             {"since_ms", "user", "cluster", "limit", "after"});
}

}  // namespace weft::api
