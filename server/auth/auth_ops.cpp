#include "weft/server/auth/auth_ops.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "weft/server/auth/secrets.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::auth {
namespace {

using api::Call;
using api::Endpoint;
using api::Response;
using api::Role;
using json = nlohmann::json;

constexpr std::int64_t kMaxQuota = 1'000'000'000;

json TenantJson(const store::TenantRecord& t) {
  return {{"name", t.name},
          {"created_at_ms", t.created_at_ms},
          {"max_clusters", t.max_clusters},
          {"max_nodes", t.max_nodes},
          {"max_workers", t.max_workers}};
}

// Quota fields of a tenant.create/update body over `t`.
Status ReadQuotas(const json& body, store::TenantRecord* t) {
  auto field = [&](const char* key, std::int64_t* out) -> Status {
    WEFT_ASSIGN_OR_RETURN(std::int64_t v, jsonf::Int(body, key, "", 0, kMaxQuota, *out));
    *out = v;
    return Status::Ok();
  };
  WEFT_RETURN_IF_ERROR(field("max_clusters", &t->max_clusters));
  WEFT_RETURN_IF_ERROR(field("max_nodes", &t->max_nodes));
  return field("max_workers", &t->max_workers);
}

std::string Who(const Call& call) {
  return call.principal.user + (call.principal.tenant.empty() ? "" : "@" + call.principal.tenant);
}

}  // namespace

void RegisterTenantOps(api::Router& router, Registry& registry) {
  const std::set<Role> superadmin = {Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  Registry* reg = &registry;
  router.SetTenantExists([reg](const std::string& tenant) { return reg->tenants().count(tenant) != 0; });

  router.Add("tenant.create", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    store::TenantRecord t;
    t.name = name;
    Status s = ReadQuotas(c.request->body, &t);
    if (s.ok()) s = reg->CreateTenant(t);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", TenantJson(reg->tenants().at(name))}});
  }, api::Effect::kChanges, {"name", "max_clusters", "max_nodes", "max_workers"});
  router.Add("tenant.update", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    auto it = reg->tenants().find(name);
    if (it == reg->tenants().end()) return Response::Error(Status::NotFound("no tenant '" + name + "'"));
    store::TenantRecord t = it->second;
    Status s = ReadQuotas(c.request->body, &t);
    if (s.ok()) s = reg->UpdateTenant(t);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", TenantJson(reg->tenants().at(name))}});
  }, api::Effect::kChanges, {"name", "max_clusters", "max_nodes", "max_workers"});
  router.Add("tenant.list", superadmin, api, [reg](const Call&) {
    json list = json::array();
    for (const auto& [name, t] : reg->tenants()) list.push_back(TenantJson(t));
    return Response::Ok({{"tenants", list}});
  }, api::Effect::kReads, {});
  router.Add("tenant.delete", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    Status s = reg->DeleteTenant(name, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"name", name}});
  }, api::Effect::kChanges, {"name"});

  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  // Users of the request's tenant (a tenant admin's own; a superadmin's header tenant).
  router.Add("user.create", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    WEFT_TRY_ASSIGN(role, jsonf::String(c.request->body, "role", "", "user"));
    Status s = reg->CreateUser({c.principal.tenant, name, role, 0});
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant}, {"name", name}, {"role", role}});
  }, api::Effect::kChanges, {"name", "role"});
  router.Add("user.list", admins, api, [reg](const Call& c) {
    json list = json::array();
    std::map<std::string, int> keys;
    for (const auto& p : reg->Principals(Kind::kUser))
      if (p.tenant == c.principal.tenant) ++keys[p.user];
    for (const auto& [id, u] : reg->users()) {
      if (u.tenant != c.principal.tenant) continue;
      list.push_back({{"name", u.name}, {"role", u.role}, {"keys", keys[u.name]}, {"created_at_ms", u.created_at_ms}});
    }
    return Response::Ok({{"tenant", c.principal.tenant}, {"users", list}});
  }, api::Effect::kReads, {});
  router.Add("user.delete", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    Status s = reg->DeleteUser(c.principal.tenant, name, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant}, {"name", name}});
  }, api::Effect::kChanges, {"name"});
}

void RegisterAuthOps(api::Router& router, Registry& registry, hosts::HostRegistry& hosts, OpsOptions options) {
  const std::set<Role> superadmin = {Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  Registry* reg = &registry;
  hosts::HostRegistry* o = &hosts;

  router.Add("host.token.create", superadmin, api, [reg, options](const Call& c) {
    const json& body = c.request->body;
    WEFT_TRY_ASSIGN(ttl, jsonf::Int(body, "ttl_ms", "", 1000, 365LL * 24 * 3600 * 1000, options.token_ttl_ms));
    WEFT_TRY_ASSIGN(for_host, jsonf::String(body, "host_id", "", ""));
    WEFT_TRY_ASSIGN(replace, jsonf::Bool(body, "force", "", false));
    WEFT_TRY_ASSIGN(token, reg->CreateToken(ttl, Who(c), for_host, replace));
    return Response::Ok({{"token", curve::EncodeToken({token.keys, options.server_key})},
                         {"key", curve::ShortKey(token.keys.public_key)},
                         {"host_id", for_host},
                         {"force", replace},
                         {"expires_at_ms", token.expires_at_ms}});
  }, api::Effect::kChanges, {"ttl_ms", "host_id", "force"});
  router.Add("host.enroll", {Role::kEnroll}, {Endpoint::kProvisioner}, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", "body"));
    WEFT_TRY_ASSIGN(key, jsonf::String(c.request->body, "public_key", "body"));
    Status s = reg->EnrollHost(c.principal.key, host_id, key, o->HostLive(host_id));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}});
  });
  router.Add("host.accept", superadmin, api, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", ""));
    WEFT_TRY_ASSIGN(fingerprint, jsonf::String(c.request->body, "fingerprint", "", ""));
    WEFT_TRY_ASSIGN(force, jsonf::Bool(c.request->body, "force", "", false));
    Status s = reg->AcceptHost(host_id, fingerprint, force, o->HostLive(host_id), Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}, {"fingerprint", fingerprint}});
  }, api::Effect::kChanges, {"host_id", "fingerprint", "force"});
  router.Add("host.revoke", superadmin, api, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", ""));
    Status s = reg->RevokeHost(host_id, Who(c));
    if (!s.ok()) return Response::Error(s);
    s = o->Forget(host_id, "host '" + host_id + "' was revoked by " + Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}});
  }, api::Effect::kChanges, {"host_id"});
  router.Add("host.requests", superadmin, api, [reg](const Call&) {
    std::vector<const store::HostRequestRecord*> sorted;
    for (const auto& [key, r] : reg->requests()) sorted.push_back(&r);
    std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
      return std::tie(a->host_id, a->requested_at_ms) < std::tie(b->host_id, b->requested_at_ms);
    });
    json list = json::array();
    for (const store::HostRequestRecord* r : sorted)
      list.push_back({{"host_id", r->host_id},
                      {"key", curve::ShortKey(r->public_key)},
                      {"fingerprint", curve::Fingerprint(r->public_key)},
                      {"address", r->address},
                      {"requested_at_ms", r->requested_at_ms}});
    return Response::Ok({{"requests", list}});
  }, api::Effect::kReads, {});

  // A gateway (weft-web): a key that may only log users in, and then act for them (server/auth/logins.hpp).
  router.Add("gateway.credentials", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    WEFT_TRY_ASSIGN(key, jsonf::String(c.request->body, "public_key", ""));
    Status s = reg->AddGatewayKey(name, key, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"name", name}, {"key", curve::ShortKey(key)}});
  }, api::Effect::kChanges, {"name", "public_key"});
  router.Add("gateway.revoke", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    Status s = reg->RevokeGateway(name, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"name", name}});
  }, api::Effect::kChanges, {"name"});
  router.Add("credentials.add", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(user, jsonf::String(c.request->body, "user", ""));
    WEFT_TRY_ASSIGN(key, jsonf::String(c.request->body, "public_key", ""));
    Status s = reg->AddUserKey(c.principal.tenant, user, key, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant},
                         {"user", user},
                         {"role", reg->users().at({c.principal.tenant, user}).role},
                         {"key", curve::ShortKey(key)}});
  }, api::Effect::kChanges, {"user", "public_key"});
}

namespace {

// The ops whose wrappers below seal what they may and refuse any other sealed text themselves.
const std::set<std::string> kSealingPuts = {"provider.put", "service.put"};

// o[key] when it is a string, else "" (what clients send is not trusted to have the right types).
std::string Str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::set<std::string> SensitiveOf(const json& descriptor) {
  std::set<std::string> out;
  if (!descriptor.contains("fields") || !descriptor["fields"].is_array()) return out;
  for (const json& f : descriptor["fields"])
    if (f.is_object() && f.contains("sensitive") && f["sensitive"] == true && f.contains("name") &&
        f["name"].is_string())
      out.insert(f["name"].get<std::string>());
  return out;
}

Status RefuseSealedText(const json& value, const std::string& what) {
  std::optional<std::string> at = SecretBox::FindSealedText(value, "");
  if (!at) return Status::Ok();
  return Status::Invalid(what + " holds sealed text (enc:...) at '" + *at +
                         "'; weftd opens no sealed text a client sends: give the clear value (in a field the "
                         "plugin declares sensitive, weftd seals it)");
}

// A provider entity: its sensitive fields sealed for it; no other sealed text.
// A value equal to the one `previous` (its latest stored version, or null) holds keeps its sealed text.
Status SealProvider(const SecretBox& box, const hosts::HostRegistry& hosts, const std::string& tenant, json& entity,
                    const json& previous) {
  json rest = entity;
  rest.erase("provisioner");
  WEFT_RETURN_IF_ERROR(RefuseSealedText(rest, "provider '" + Str(entity, "name") + "'"));
  auto fields = entity.find("provisioner");
  if (fields == entity.end() || !fields->is_object()) return Status::Ok();
  const json* before = previous.is_object() && previous.contains("provisioner") ? &previous["provisioner"] : nullptr;
  return box.SealFields(*fields, hosts.SensitiveFields(Str(entity, "providertype")),
                        {tenant, "provider", Str(entity, "name"), ""}, before);
}

// The actions of a service entity ({"install": {"type", "fields"}, ...}), or nullptr.
template <typename Json>  // json, or const json for a read-only look
Json* Actions(Json& service) {
  auto p = service.find("provisioner");
  if (p == service.end() || !p->is_object()) return nullptr;
  auto a = p->find("actions");
  return a == p->end() || !a->is_object() ? nullptr : &*a;
}

// A service entity: each action's fields its automator declares sensitive sealed for it; no other sealed text.
// A value equal to the one `previous` (its latest stored version, or null) holds keeps its sealed text.
Status SealService(const SecretBox& box, const hosts::HostRegistry& hosts, const std::string& tenant, json& entity,
                   const json& previous) {
  const std::string name = Str(entity, "name");
  json rest = entity;
  if (json* actions = Actions(rest))
    for (auto& [key, action] : actions->items())
      if (action.is_object()) action.erase("fields");
  WEFT_RETURN_IF_ERROR(RefuseSealedText(rest, "service '" + name + "'"));
  json* actions = Actions(entity);
  if (!actions) return Status::Ok();
  const json* before_actions = Actions(previous);
  for (auto& [key, action] : actions->items()) {
    if (!action.is_object() || !action.contains("fields")) continue;
    // The same action's fields in the latest version, when the same automator runs it.
    const json* before = nullptr;
    if (before_actions) {
      auto b = before_actions->find(key);
      if (b != before_actions->end() && b->is_object() && Str(*b, "type") == Str(action, "type"))
        if (auto f = b->find("fields"); f != b->end()) before = &*f;
    }
    WEFT_RETURN_IF_ERROR(box.SealFields(action["fields"], hosts.SensitiveFields(Str(action, "type")),
                                        {tenant, "service", name, key}, before));
  }
  return Status::Ok();
}

// Seals, in place, what a plugin newly registered declares sensitive in a
// service entity (or a cluster's copy of one). Whether it changed anything.
bool ResealService(const SecretBox& box, const std::string& type, const std::set<std::string>& sensitive,
                   const std::string& tenant, json& entity) {
  json* actions = Actions(entity);
  if (!actions) return false;
  const std::string name = Str(entity, "name");
  bool changed = false;
  for (auto& [key, action] : actions->items())
    if (action.is_object() && Str(action, "type") == type && action.contains("fields"))
      changed = box.ResealFields(action["fields"], sensitive, {tenant, "service", name, key}) || changed;
  return changed;
}

// Plugin types some host has registered, live or not: weftd knows which of their fields are secrets.
Result<std::set<std::string>> RegisteredTypes(store::Store& store) {
  WEFT_ASSIGN_OR_RETURN(std::vector<store::HostRecord> hosts, store.ListHosts());
  std::set<std::string> types;
  for (const store::HostRecord& h : hosts) {
    const json list = json::parse(h.plugins_json, nullptr, false);
    if (!list.is_array()) continue;
    for (const json& d : list)
      if (d.is_object() && !Str(d, "type").empty()) types.insert(Str(d, "type"));
  }
  return types;
}

bool HasFields(const json& entity, const char* key) {
  auto f = entity.find(key);
  return f != entity.end() && f->is_object() && !f->empty();
}

// The plugin types of a put entity whose fields weftd could not look at for
// secrets: their plugin is registered by no host yet, so those fields are stored
// as they came until one registers (ResealFor). Provider: its providertype;
// service: each action's automator.
std::set<std::string> UnsealableTypes(const std::string& op, const json& entity, const std::set<std::string>& known) {
  std::set<std::string> out;
  if (op == "provider.put") {
    if (HasFields(entity, "provisioner") && !known.count(Str(entity, "providertype")))
      out.insert(Str(entity, "providertype"));
    return out;
  }
  const auto p = entity.find("provisioner");
  if (p == entity.end() || !p->is_object() || !p->contains("actions") || !(*p)["actions"].is_object()) return out;
  for (const auto& [key, action] : (*p)["actions"].items())
    if (action.is_object() && HasFields(action, "fields") && !known.count(Str(action, "type")))
      out.insert(Str(action, "type"));
  return out;
}

// A put's reply says which fields could not be sealed, and when they will be.
Status WarnUnsealed(store::Store& store, const std::string& op, const json& entity, Response& reply) {
  WEFT_ASSIGN_OR_RETURN(std::set<std::string> known, RegisteredTypes(store));
  const std::string what = op == "provider.put" ? "provider '" + Str(entity, "name") + "'"
                                                : "service '" + Str(entity, "name") + "'";
  for (const std::string& type : UnsealableTypes(op, entity, known)) {
    if (!reply.body.contains("warnings") || !reply.body["warnings"].is_array()) reply.body["warnings"] = json::array();
    reply.body["warnings"].push_back(
        "no host has registered plugin '" + type + "' yet, so weftd cannot tell which fields of " + what +
        " are secrets: they are stored unsealed until a weft-host with that plugin registers, which seals them "
        "(register a host before putting secrets; see docs/security.md, \"Secrets\")");
  }
  return Status::Ok();
}

// A plugin registered after entities that use it were stored: seal what it declares sensitive, in place.
Status ResealFor(const SecretBox& box, store::Store& store, const json& descriptor) {
  if (!descriptor.is_object() || !descriptor.contains("type") || !descriptor["type"].is_string()) return Status::Ok();
  const std::string type = descriptor["type"].get<std::string>();
  const std::set<std::string> sensitive = SensitiveOf(descriptor);
  if (sensitive.empty()) return Status::Ok();
  WEFT_RETURN_IF_ERROR(store.RewriteCatalogEntities("provider", type, [&](const std::string& tenant, json& e) {
    if (Str(e, "providertype") != type || !e.contains("provisioner")) return false;
    return box.ResealFields(e["provisioner"], sensitive, {tenant, "provider", Str(e, "name"), ""});
  }));
  WEFT_RETURN_IF_ERROR(store.RewriteCatalogEntities("service", type, [&](const std::string& tenant, json& e) {
    return ResealService(box, type, sensitive, tenant, e);
  }));
  // Cluster specs keep a copy of their provider's fields and of their services.
  return store.RewriteClusterSpecs(type, [&](const std::string& tenant, json& spec) {
    bool changed = false;
    if (spec.contains("provider") && spec["provider"].is_object() && Str(spec["provider"], "type") == type &&
        spec["provider"].contains("fields"))
      changed = box.ResealFields(spec["provider"]["fields"], sensitive,
                                 {tenant, "provider", Str(spec["provider"], "name"), ""});
    if (spec.contains("services") && spec["services"].is_object())
      for (auto& [name, service] : spec["services"].items())
        changed = ResealService(box, type, sensitive, tenant, service) || changed;
    return changed;
  });
}

// Opens, in a task about to be handed out, the sealed values at the places
// they were sealed for, in the task's own tenant: its provider's fields, its
// service action's fields and its node's SSH secrets. Nothing else is opened:
// the cluster config and anything else a client wrote stay as they are.
Status OpenForTask(const SecretBox& box, const store::TaskRecord& record, json& task) {
  if (auto p = task.find("provider"); p != task.end() && p->is_object() && p->contains("fields"))
    WEFT_RETURN_IF_ERROR(box.OpenFields((*p)["fields"], {record.tenant, "provider", Str(*p, "name"), ""}));
  if (auto s = task.find("service"); s != task.end() && s->is_object() && s->contains("action") &&
                                     (*s)["action"].is_object() && (*s)["action"].contains("fields"))
    WEFT_RETURN_IF_ERROR(box.OpenFields((*s)["action"]["fields"],
                                        {record.tenant, "service", Str(*s, "name"), AsciiLower(record.action)},
                                        /*open_v1=*/false));
  // The node's place is made only for a task that carries results: most
  // tasks (every raw one) carry none, and it cost two strings per take.
  auto r = task.find("results");
  auto n = task.find("node");
  const bool node_results = n != task.end() && n->is_object() && n->contains("results");
  if (r == task.end() && !node_results) return Status::Ok();
  const SealPlace node{record.tenant, "node", record.cluster_id + "/" + record.node_id, ""};
  if (r != task.end()) WEFT_RETURN_IF_ERROR(box.OpenResult(*r, node));
  if (node_results) WEFT_RETURN_IF_ERROR(box.OpenResult((*n)["results"], node));
  return Status::Ok();
}

}  // namespace

void RefuseSealedRequests(api::Router& router) {
  // No client request may carry sealed text: weftd would store it where it
  // might later be opened. (Catalog puts of sealable entities check in InstallSecrets.)
  for (const std::string& op : router.KnownOps()) {
    if (kSealingPuts.count(op)) continue;
    router.Wrap(op, [op](api::Handler next) -> api::Handler {
      return [op, next](const Call& c) {
        if (c.endpoint != Endpoint::kApi) return next(c);
        Status s = RefuseSealedText(c.request->body, "op '" + op + "': the request");
        return s.ok() ? next(c) : Response::Error(s);
      };
    });
  }
}

Status InstallSecrets(api::Router& router, SecretsDeps deps, const std::filesystem::path& key_file) {
  Result<SecretBox> opened = SecretBox::Open(key_file);
  if (!opened.ok()) return opened.status().WithContext("cannot open the secrets key");
  auto box = std::make_shared<const SecretBox>(std::move(*opened));
  const hosts::HostRegistry* o = &deps.hosts;
  store::Store* st = &deps.store;
  // A call whose request body is `body` instead.
  auto with_body = [](const Call& call, json body, const api::Handler& next) {
    wire::Request copy = *call.request;
    copy.body = std::move(body);
    Call sealed = call;
    sealed.request = &copy;
    return next(sealed);
  };
  RefuseSealedRequests(router);
  router.Wrap("task.finish", [box, st, with_body](api::Handler next) -> api::Handler {
    auto seal = [box, st, with_body, next](const Call& c) {
      auto result = c.request->body.find("result");
      if (result == c.request->body.end() || !result->is_object() || !result->contains("ssh_auth")) return next(c);
      // Sealed for the node of the task it finishes (an unknown task is refused by the handler).
      SealPlace node{"", "node", "", ""};
      auto id = c.request->body.find("task_id");
      if (id != c.request->body.end() && id->is_number_integer()) {
        Result<std::optional<store::TaskRecord>> t = st->GetTask(id->get<std::int64_t>());
        if (!t.ok()) return Response::Error(t.status());
        if (t->has_value()) node = {(**t).tenant, "node", (**t).cluster_id + "/" + (**t).node_id, ""};
      }
      json body = c.request->body;
      box->SealResult(body["result"], node);
      return with_body(c, std::move(body), next);
    };
    return [seal, next](const Call& c) {
      if (c.request->body_text.empty()) return seal(c);
      // A body left as text (wire::Request::body_text, which never holds a \u
      // escape) has an ssh_auth only if the word is in it.
      if (c.request->body_text.find("ssh_auth") == std::string::npos) return next(c);
      wire::Request treed = *c.request;
      treed.body = wire::BodyTree(treed);
      treed.body_text.clear();
      Call with_tree = c;
      with_tree.request = &treed;
      return seal(with_tree);
    };
  });
  using Sealer = Status (*)(const SecretBox&, const hosts::HostRegistry&, const std::string&, json&, const json&);
  for (const auto& [op, seal] : {std::pair<std::string, Sealer>{"provider.put", &SealProvider},
                                 std::pair<std::string, Sealer>{"service.put", &SealService}}) {
    router.Wrap(op, [box, o, st, op = op, with_body, seal = seal](api::Handler next) -> api::Handler {
      return [box, o, st, op, with_body, seal, next](const Call& c) {
        if (!c.request->body.is_object()) return next(c);  // the handler says what is wrong
        json sealed = c.request->body;  // the entity itself
        // Its latest stored version: a secret put again as it was keeps its sealed
        // text, so an entity put again unchanged stays equal to it (and keeps its version).
        json previous;
        const std::string kind = op.substr(0, op.find('.'));
        if (const std::string name = Str(c.request->body, "name"); !name.empty()) {
          Result<std::optional<store::CatalogEntityRecord>> latest =
              st->GetCatalogEntity(c.principal.tenant, kind, name);
          if (!latest.ok()) return Response::Error(latest.status());
          if (latest->has_value()) previous = json::parse((**latest).json, nullptr, false);
        }
        Status s = seal(*box, *o, c.principal.tenant, sealed, previous);
        if (!s.ok()) return Response::Error(s);
        Response r = with_body(c, std::move(sealed), next);
        if (!r.status.ok()) return r;
        s = WarnUnsealed(*st, op, c.request->body, r);
        return s.ok() ? r : Response::Error(s);
      };
    });
  }
  router.Wrap("host.register", [box, st](api::Handler next) -> api::Handler {
    return [box, st, next](const Call& c) {
      Response r = next(c);
      auto plugins = c.request->body.find("plugins");
      if (!r.status.ok() || plugins == c.request->body.end() || !plugins->is_array()) return r;
      for (const json& d : *plugins) {
        Status s = ResealFor(*box, *st, d);
        if (!s.ok()) return Response::Error(s);
      }
      return r;
    };
  });
  deps.dispatcher.AddTakeDecorator([box](const store::TaskRecord& r, json& task) { return OpenForTask(*box, r, task); });
  return Status::Ok();
}

api::Response HandlePending(Registry& registry, log::Tally& tally, std::int64_t now_ms, const std::string& key,
                            const std::string& address, const wire::Request& request) {
  auto id = request.body.find("host_id");
  if (request.op != "host.register" || id == request.body.end() || !id->is_string())
    return Response::Error(Status::Denied(
        "op '" + request.op + "': this host's key is not accepted yet; register to ask an admin, or enroll with a token"));
  const std::string host_id = id->get<std::string>();
  const std::string fingerprint = curve::Fingerprint(key);
  Result<bool> fresh = registry.RequestHost(host_id, key, address);
  if (!fresh.ok()) {
    if (tally.Count("host requests refused", now_ms)) {
      WEFT_LOG(kWarn, "auth") << "refused the request of host " << jsonf::Brief(*id) << " (key fingerprint "
                              << fingerprint << ") to join: " << fresh.status().message();
    }
    if (fresh.status().code() == Code::kUnavailable)  // too many at once: worth asking again after that pause
      return Response::Refusal(fresh.status(), {{"retry_after_ms", registry.RequestRetryAfterMs()}});
    return Response::Error(fresh.status());
  }
  if (*fresh && tally.Count("hosts asked to join", now_ms)) {
    WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' with unknown key " << curve::ShortKey(key) << " (fingerprint "
                            << fingerprint << ") from " << (address.empty() ? "?" : address)
                            << " asks to join; `weft host requests` lists the hosts that wait";
  }
  return Response::Error(Status::Denied("host '" + host_id + "' (key fingerprint " + fingerprint +
                                        ") is not accepted yet: an admin runs `weft host accept " + host_id +
                                        " --fingerprint " + fingerprint +
                                        "`, or give the host an enrollment token (`weft host token create`)"));
}

namespace {

// Resolve's rules over any source of keys and tenants: the Registry on the
// reactor thread, an AuthView elsewhere.
template <typename Find, typename Spent>
Result<api::Principal> ResolveWith(const Find& find, const Spent& spent,
                                   const std::map<std::string, store::TenantRecord>& tenants, Endpoint endpoint,
                                   const std::string& key, const wire::Request& request) {
  const KeyEntry* entry = key.empty() ? nullptr : find(key);
  api::Principal p;
  p.key = key;
  auto quotas = [&tenants](api::Principal& principal) {
    auto t = tenants.find(principal.tenant);
    if (t == tenants.end()) return;
    principal.max_clusters = t->second.max_clusters;
    principal.max_nodes = t->second.max_nodes;
  };
  if (endpoint == Endpoint::kApi) {
    if (!entry || entry->kind != Kind::kUser)
      return Status::Denied("op '" + request.op + "': weftd does not know this client's key " + curve::ShortKey(key) +
                            " (revoked, expired, or its user or tenant deleted)");
    p.user = entry->user;
    p.user_tenant = entry->tenant.empty() ? "_system" : entry->tenant;  // a superadmin belongs to no tenant
    if (entry->role == "gateway") {
      // On its own it may only log users in; a request it passes on for a
      // session or an API token acts as that user (Logins::ActFor).
      p.role = Role::kGateway;
      p.tenant = request.tenant.empty() ? "default" : request.tenant;
      return p;
    }
    if (entry->role == "superadmin") {
      p.role = Role::kSuperadmin;
      p.tenant = request.tenant.empty() ? "default" : request.tenant;
      quotas(p);
      return p;
    }
    p.role = entry->role == "admin" ? Role::kAdmin : Role::kUser;
    p.tenant = entry->tenant;
    if (!request.tenant.empty() && request.tenant != entry->tenant)
      return Status::Denied("op '" + request.op + "' in tenant '" + request.tenant + "': user '" + entry->user +
                            "' belongs to tenant '" + entry->tenant + "'");
    quotas(p);
    return p;
  }
  p.tenant = "_system";
  if (!entry && spent(key))
    return Status::Denied("op '" + request.op + "': this key " + curve::ShortKey(key) +
                          " was revoked, used up or has expired");
  if (!entry) {
    p.role = Role::kPending;
    p.user = "host key " + curve::ShortKey(key);
    return p;
  }
  if (entry->kind == Kind::kToken) {
    p.role = Role::kEnroll;
    p.user = "token " + curve::ShortKey(key);
    return p;
  }
  if (entry->kind != Kind::kHost)
    return Status::Denied("op '" + request.op + "': a user's key cannot act as a host");
  p.role = Role::kHost;
  p.host_id = entry->host_id;
  p.user = "host " + entry->host_id;
  const std::optional<std::string> id = wire::BodyString(request, "host_id");
  if (id && *id != entry->host_id)
    return Status::Denied("op '" + request.op + "' for host '" + *id + "': this key belongs to host '" +
                          entry->host_id + "'");
  return p;
}

}  // namespace

Result<api::Principal> Resolve(const Registry& registry, Endpoint endpoint, const std::string& key,
                               const wire::Request& request) {
  return ResolveWith([&](const std::string& k) { return registry.Find(k); },
                     [&](const std::string& k) { return registry.Spent(k); }, registry.tenants(), endpoint, key,
                     request);
}

Result<api::Principal> Resolve(const AuthView& view, std::int64_t now_ms, Endpoint endpoint, const std::string& key,
                               const wire::Request& request) {
  return ResolveWith([&](const std::string& k) { return view.Find(k, now_ms); },
                     [&](const std::string& k) { return view.Spent(k, now_ms); }, view.tenants, endpoint, key,
                     request);
}

}  // namespace weft::auth
