#include "server/auth/auth_ops.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "server/auth/secrets.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/log.hpp"

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
    Result<std::int64_t> v = jsonf::Int(body, key, "body", 0, kMaxQuota, *out);
    if (!v.ok()) return v.status();
    *out = *v;
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

void RegisterOps(api::Ops& ops, Registry& registry, OpsOptions options) {
  api::Router& router = ops.router();
  const std::set<Role> superadmin = {Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  Registry* reg = &registry;
  api::Ops* o = &ops;
  ops.set_worker_caps([reg] {
    std::map<std::string, std::int64_t> caps;
    for (const auto& [name, t] : reg->tenants())
      if (t.max_workers > 0) caps[name] = t.max_workers;
    return caps;
  });

  router.Add("host.token.create", superadmin, api, [reg, options](const Call& c) {
    const json& body = c.request->body;
    WEFT_TRY_ASSIGN(ttl, jsonf::Int(body, "ttl_ms", "body", 1000, 365LL * 24 * 3600 * 1000, options.token_ttl_ms));
    WEFT_TRY_ASSIGN(for_host, jsonf::String(body, "host_id", "body", ""));
    WEFT_TRY_ASSIGN(replace, jsonf::Bool(body, "force", "body", false));
    WEFT_TRY_ASSIGN(token, reg->CreateToken(ttl, Who(c), for_host, replace));
    return Response::Ok({{"token", curve::EncodeToken({token.keys, options.server_key})},
                         {"key", curve::ShortKey(token.keys.public_key)},
                         {"host_id", for_host},
                         {"force", replace},
                         {"expires_at_ms", token.expires_at_ms}});
  });
  router.Add("host.enroll", {Role::kEnroll}, {Endpoint::kProvisioner}, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", "body"));
    WEFT_TRY_ASSIGN(key, jsonf::String(c.request->body, "public_key", "body"));
    Status s = reg->EnrollHost(c.principal.key, host_id, key, o->HostLive(host_id));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}});
  });
  router.Add("host.accept", superadmin, api, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", "body"));
    WEFT_TRY_ASSIGN(fingerprint, jsonf::String(c.request->body, "fingerprint", "body", ""));
    WEFT_TRY_ASSIGN(force, jsonf::Bool(c.request->body, "force", "body", false));
    Status s = reg->AcceptHost(host_id, fingerprint, force, o->HostLive(host_id), Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}, {"fingerprint", fingerprint}});
  });
  router.Add("host.revoke", superadmin, api, [reg, o](const Call& c) {
    WEFT_TRY_ASSIGN(host_id, jsonf::String(c.request->body, "host_id", "body"));
    Status s = reg->RevokeHost(host_id, Who(c));
    if (!s.ok()) return Response::Error(s);
    s = o->ForgetHost(host_id, "host '" + host_id + "' was revoked by " + Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"host_id", host_id}});
  });
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
  });

  router.Add("tenant.create", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "body"));
    store::TenantRecord t;
    t.name = name;
    Status s = ReadQuotas(c.request->body, &t);
    if (s.ok()) s = reg->CreateTenant(t);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", TenantJson(reg->tenants().at(name))}});
  });
  router.Add("tenant.update", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "body"));
    auto it = reg->tenants().find(name);
    if (it == reg->tenants().end()) return Response::Error(Status::NotFound("no tenant '" + name + "'"));
    store::TenantRecord t = it->second;
    Status s = ReadQuotas(c.request->body, &t);
    if (s.ok()) s = reg->UpdateTenant(t);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", TenantJson(reg->tenants().at(name))}});
  });
  router.Add("tenant.list", superadmin, api, [reg](const Call&) {
    json list = json::array();
    for (const auto& [name, t] : reg->tenants()) list.push_back(TenantJson(t));
    return Response::Ok({{"tenants", list}});
  });
  router.Add("tenant.delete", superadmin, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "body"));
    Status s = reg->DeleteTenant(name, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"name", name}});
  });

  // Users of the request's tenant (a tenant admin's own; a superadmin's header tenant).
  router.Add("user.create", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "body"));
    WEFT_TRY_ASSIGN(role, jsonf::String(c.request->body, "role", "body", "user"));
    Status s = reg->CreateUser({c.principal.tenant, name, role, 0});
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant}, {"name", name}, {"role", role}});
  });
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
  });
  router.Add("user.delete", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "body"));
    Status s = reg->DeleteUser(c.principal.tenant, name, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant}, {"name", name}});
  });
  router.Add("credentials.add", admins, api, [reg](const Call& c) {
    WEFT_TRY_ASSIGN(user, jsonf::String(c.request->body, "user", "body"));
    WEFT_TRY_ASSIGN(key, jsonf::String(c.request->body, "public_key", "body"));
    Status s = reg->AddUserKey(c.principal.tenant, user, key, Who(c));
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", c.principal.tenant},
                         {"user", user},
                         {"role", reg->users().at({c.principal.tenant, user}).role},
                         {"key", curve::ShortKey(key)}});
  });
}

Status InstallSecrets(api::Ops& ops, store::Store& store, const std::filesystem::path& key_file) {
  Result<SecretBox> opened = SecretBox::Open(key_file);
  if (!opened.ok()) return opened.status().WithContext("cannot open the secrets key");
  auto box = std::make_shared<const SecretBox>(std::move(*opened));
  api::Ops* o = &ops;
  // A call whose request body is `body` instead.
  auto with_body = [](const Call& call, json body, const api::Handler& next) {
    wire::Request copy = *call.request;
    copy.body = std::move(body);
    Call sealed = call;
    sealed.request = &copy;
    return next(sealed);
  };
  ops.router().Wrap("task.finish", [box, with_body](api::Handler next) -> api::Handler {
    return [box, with_body, next](const Call& c) {
      auto result = c.request->body.find("result");
      auto auth = result == c.request->body.end() || !result->is_object() ? nullptr : &*result;
      if (!auth || !auth->contains("ssh_auth")) return next(c);
      json body = c.request->body;
      box->SealResult(body["result"]);
      return with_body(c, std::move(body), next);
    };
  });
  ops.router().Wrap("provider.put", [box, o, with_body](api::Handler next) -> api::Handler {
    return [box, o, with_body, next](const Call& c) {
      const json& body = c.request->body;  // the provider entity itself
      if (!body.is_object() || !body.contains("provisioner") || !body["provisioner"].is_object()) return next(c);
      auto type = body.find("providertype");
      if (type == body.end() || !type->is_string()) return next(c);
      const std::set<std::string> sensitive = o->SensitiveFields(type->get<std::string>());
      if (sensitive.empty()) return next(c);
      json sealed = body;
      box->SealFields(sealed["provisioner"], sensitive);
      return with_body(c, std::move(sealed), next);
    };
  });
  // A plugin registered after its provider was stored: seal what it declares sensitive, in place.
  store::Store* st = &store;
  ops.router().Wrap("host.register", [box, st](api::Handler next) -> api::Handler {
    return [box, st, next](const Call& c) {
      Response r = next(c);
      auto plugins = c.request->body.find("plugins");
      if (!r.status.ok() || plugins == c.request->body.end() || !plugins->is_array()) return r;
      for (const json& d : *plugins) {
        if (!d.is_object() || !d.contains("type") || !d["type"].is_string() || !d.contains("fields") ||
            !d["fields"].is_array())
          continue;
        std::set<std::string> sensitive;
        for (const json& f : d["fields"])
          if (f.is_object() && f.value("sensitive", false) && f.contains("name") && f["name"].is_string())
            sensitive.insert(f["name"].get<std::string>());
        if (sensitive.empty()) continue;
        Status s = st->RewriteProviderFields(d["type"].get<std::string>(), [&](json& fields) {
          const json before = fields;
          box->SealFields(fields, sensitive);
          return fields != before;
        });
        if (!s.ok()) return Response::Error(s);
      }
      return r;
    };
  });
  ops.AddTakeDecorator([box](const store::TaskRecord&, json& task) { return box->OpenAll(task); });
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

Result<api::Principal> Resolve(const Registry& registry, Endpoint endpoint, const std::string& key,
                               const wire::Request& request) {
  const KeyEntry* entry = key.empty() ? nullptr : registry.Find(key);
  api::Principal p;
  p.key = key;
  auto quotas = [&registry](api::Principal& principal) {
    auto t = registry.tenants().find(principal.tenant);
    if (t == registry.tenants().end()) return;
    principal.max_clusters = t->second.max_clusters;
    principal.max_nodes = t->second.max_nodes;
  };
  if (endpoint == Endpoint::kApi) {
    if (!entry || entry->kind != Kind::kUser)
      return Status::Denied("op '" + request.op + "': weftd does not know this client's key " + curve::ShortKey(key) +
                            " (revoked, or its user or tenant deleted)");
    p.user = entry->user;
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
  if (!entry && registry.Spent(key))
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
  auto id = request.body.find("host_id");
  if (id != request.body.end() && id->is_string() && id->get<std::string>() != entry->host_id)
    return Status::Denied("op '" + request.op + "' for host '" + id->get<std::string>() + "': this key belongs to host '" +
                          entry->host_id + "'");
  return p;
}

}  // namespace weft::auth
