#include <algorithm>

#include "server/auth/auth.hpp"
#include "weft/common/log.hpp"

namespace weft::auth {
namespace {

constexpr std::size_t kMaxHostRequests = 1000;

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kUser: return "user";
    case Kind::kHost: return "host";
    case Kind::kToken: return "token";
  }
  return "user";
}

Kind KindOf(const std::string& name) {
  if (name == "host") return Kind::kHost;
  if (name == "token") return Kind::kToken;
  return Kind::kUser;
}

}  // namespace

void KeySnapshot::Set(std::shared_ptr<const KeyMap> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(keys);
}

std::shared_ptr<const KeyMap> KeySnapshot::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '-' && c != '_'))) return false;
  }
  return true;
}

Registry::Registry(store::Store& store, const Clock& clock, KeySnapshot& snapshot)
    : store_(store), clock_(clock), snapshot_(snapshot) {}

Status Registry::Load() {
  principals_.clear();
  tenants_.clear();
  users_.clear();
  requests_.clear();
  Result<std::vector<store::PrincipalRecord>> principals = store_.ListPrincipals();
  if (!principals.ok()) return principals.status().WithContext("cannot load the principals");
  for (store::PrincipalRecord& p : *principals) principals_[p.public_key] = std::move(p);
  Result<std::vector<store::TenantRecord>> tenants = store_.ListTenants();
  if (!tenants.ok()) return tenants.status().WithContext("cannot load the tenants");
  for (store::TenantRecord& t : *tenants) tenants_[t.name] = std::move(t);
  Result<std::vector<store::UserRecord>> users = store_.ListUsers();
  if (!users.ok()) return users.status().WithContext("cannot load the users");
  for (store::UserRecord& u : *users) users_[{u.tenant, u.name}] = std::move(u);
  Result<std::vector<store::HostRequestRecord>> requests = store_.ListHostRequests();
  if (!requests.ok()) return requests.status().WithContext("cannot load the host requests");
  for (store::HostRequestRecord& r : *requests) requests_[r.host_id] = std::move(r);
  if (!tenants_.count("default")) {
    // Every fresh store has the tenant that requests without one act in.
    store::TenantRecord t{"default", clock_.NowMs(), 0, 0, 0};
    WEFT_RETURN_IF_ERROR(store_.PutTenant(t));
    tenants_[t.name] = t;
  }
  Publish();
  return Status::Ok();
}

void Registry::Publish() {
  auto keys = std::make_shared<KeyMap>();
  std::set<std::string> hosts_in_force, hosts_revoked;
  for (const auto& [key, p] : principals_) {
    if (p.kind == "host") (p.revoked_at_ms ? hosts_revoked : hosts_in_force).insert(p.host_id);
    (*keys)[key] = KeyEntry{KindOf(p.kind), p.tenant, p.user, p.role, p.host_id, p.expires_at_ms, p.revoked_at_ms != 0};
  }
  revoked_hosts_.clear();
  for (const std::string& h : hosts_revoked)
    if (!hosts_in_force.count(h)) revoked_hosts_.insert(h);
  in_force_ = *keys;
  snapshot_.Set(std::move(keys));
}

const KeyEntry* Registry::Find(const std::string& public_key) const {
  auto it = in_force_.find(public_key);
  if (it == in_force_.end() || it->second.revoked) return nullptr;
  if (it->second.expires_at_ms && it->second.expires_at_ms <= clock_.NowMs()) return nullptr;
  return &it->second;
}

bool Registry::Spent(const std::string& public_key) const {
  auto it = in_force_.find(public_key);
  return it != in_force_.end() && Find(public_key) == nullptr;
}

Status Registry::EnsureSuperadmin(const std::string& public_key) {
  auto it = principals_.find(public_key);
  if (it != principals_.end() && !it->second.revoked_at_ms) return Status::Ok();
  store::PrincipalRecord p;
  p.public_key = public_key;
  p.kind = "user";
  p.user = "superadmin";
  p.role = "superadmin";
  p.created_by = "weftd";
  p.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[public_key] = p;
  Publish();
  return Status::Ok();
}

Status Registry::Revoke(store::PrincipalRecord& p, const std::string& by) {
  p.revoked_at_ms = clock_.NowMs();
  WEFT_LOG(kInfo, "auth") << KindName(KindOf(p.kind)) << " key " << curve::ShortKey(p.public_key)
                          << (p.host_id.empty() ? "" : " of host '" + p.host_id + "'")
                          << (p.user.empty() ? "" : " of user '" + p.tenant + "/" + p.user + "'") << " revoked by "
                          << by;
  return store_.PutPrincipal(p);
}

Result<Registry::NewToken> Registry::CreateToken(std::int64_t ttl_ms, const std::string& created_by) {
  if (ttl_ms <= 0) return Status::Invalid("a token's ttl must be positive");
  Result<curve::KeyPair> pair = curve::Generate();
  if (!pair.ok()) return pair.status();
  store::PrincipalRecord p;
  p.public_key = pair->public_key;
  p.kind = "token";
  p.created_by = created_by;
  p.created_at_ms = clock_.NowMs();
  p.expires_at_ms = p.created_at_ms + ttl_ms;
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[p.public_key] = p;
  Publish();
  return NewToken{*pair, p.expires_at_ms};
}

Status Registry::EnrollHost(const std::string& token_key, const std::string& host_id, const std::string& host_key) {
  if (host_id.empty()) return Status::Invalid("body.host_id must be a non-empty string");
  if (!curve::IsKey(host_key)) return Status::Invalid("body.public_key must be a 40-character Z85 CURVE public key");
  if (principals_.count(host_key)) return Status::Conflict("that public key is already registered; make a new one");
  auto token = principals_.find(token_key);
  if (token == principals_.end() || token->second.kind != "token" || token->second.revoked_at_ms)
    return Status::Denied("the enrollment token was already used");
  WEFT_RETURN_IF_ERROR(Revoke(token->second, "its use by host '" + host_id + "'"));
  WEFT_RETURN_IF_ERROR(PutHostKey(host_id, host_key, "token " + curve::ShortKey(token_key)));
  WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' enrolled with key " << curve::ShortKey(host_key);
  return Status::Ok();
}

// The host's one key in force from now on: earlier ones are revoked, a request is answered.
Status Registry::PutHostKey(const std::string& host_id, const std::string& host_key, const std::string& by) {
  for (auto& [key, p] : principals_) {
    if (p.kind == "host" && p.host_id == host_id && !p.revoked_at_ms)
      WEFT_RETURN_IF_ERROR(Revoke(p, "the host's new key"));
  }
  store::PrincipalRecord p;
  p.public_key = host_key;
  p.kind = "host";
  p.host_id = host_id;
  p.created_by = by;
  p.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[host_key] = p;
  if (requests_.erase(host_id)) WEFT_RETURN_IF_ERROR(store_.DeleteHostRequest(host_id));
  Publish();
  return Status::Ok();
}

Status Registry::RequestHost(const std::string& host_id, const std::string& host_key, const std::string& address) {
  if (host_id.empty()) return Status::Invalid("body.host_id must be a non-empty string");
  auto it = requests_.find(host_id);
  if (it != requests_.end() && it->second.public_key == host_key) return Status::Ok();
  if (it == requests_.end() && requests_.size() >= kMaxHostRequests)
    return Status::TooLarge("too many hosts wait for an admin (" + std::to_string(kMaxHostRequests) +
                            "); accept or revoke some first");
  store::HostRequestRecord r{host_id, host_key, address, clock_.NowMs()};
  WEFT_RETURN_IF_ERROR(store_.PutHostRequest(r));
  requests_[host_id] = r;
  WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' with unknown key " << curve::ShortKey(host_key) << " from "
                          << (address.empty() ? "?" : address) << " asks to join; `weft host accept " << host_id
                          << "` lets it in";
  return Status::Ok();
}

Status Registry::AcceptHost(const std::string& host_id, const std::string& by) {
  auto it = requests_.find(host_id);
  if (it == requests_.end())
    return Status::NotFound("no host '" + host_id + "' waits to be accepted (see `weft host requests`)");
  WEFT_RETURN_IF_ERROR(PutHostKey(host_id, it->second.public_key, by));
  WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' accepted by " << by;
  return Status::Ok();
}

Status Registry::RevokeHost(const std::string& host_id, const std::string& by) {
  int revoked = 0;
  for (auto& [key, p] : principals_) {
    if (p.kind != "host" || p.host_id != host_id || p.revoked_at_ms) continue;
    WEFT_RETURN_IF_ERROR(Revoke(p, by));
    ++revoked;
  }
  if (requests_.erase(host_id)) WEFT_RETURN_IF_ERROR(store_.DeleteHostRequest(host_id));
  if (!revoked) return Status::NotFound("host '" + host_id + "' has no key in force");
  Publish();
  return Status::Ok();
}

Status Registry::CreateTenant(const store::TenantRecord& tenant) {
  if (!ValidName(tenant.name))
    return Status::Invalid("a tenant name is 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit; got '" +
                           tenant.name + "'");
  if (tenants_.count(tenant.name)) return Status::Conflict("tenant '" + tenant.name + "' already exists");
  store::TenantRecord t = tenant;
  t.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutTenant(t));
  tenants_[t.name] = t;
  return Status::Ok();
}

Status Registry::UpdateTenant(const store::TenantRecord& tenant) {
  auto it = tenants_.find(tenant.name);
  if (it == tenants_.end()) return Status::NotFound("no tenant '" + tenant.name + "'");
  store::TenantRecord t = tenant;
  t.created_at_ms = it->second.created_at_ms;
  WEFT_RETURN_IF_ERROR(store_.PutTenant(t));
  it->second = t;
  return Status::Ok();
}

Status Registry::DeleteTenant(const std::string& name, const std::string& by) {
  if (name == "default") return Status::Invalid("the tenant 'default' cannot be deleted");
  if (!tenants_.count(name)) return Status::NotFound("no tenant '" + name + "'");
  for (auto& [key, p] : principals_) {
    if (p.kind == "user" && p.tenant == name && !p.revoked_at_ms)
      WEFT_RETURN_IF_ERROR(Revoke(p, by + " (tenant deleted)"));
  }
  for (auto it = users_.begin(); it != users_.end();) {
    if (it->first.first != name) {
      ++it;
      continue;
    }
    WEFT_RETURN_IF_ERROR(store_.DeleteUser(it->first.first, it->first.second));
    it = users_.erase(it);
  }
  WEFT_RETURN_IF_ERROR(store_.DeleteTenant(name));
  tenants_.erase(name);
  Publish();
  return Status::Ok();
}

Status Registry::CreateUser(const store::UserRecord& user) {
  if (!tenants_.count(user.tenant)) return Status::NotFound("no tenant '" + user.tenant + "'");
  if (!ValidName(user.name))
    return Status::Invalid("a user name is 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit; got '" +
                           user.name + "'");
  if (user.role != "user" && user.role != "admin")
    return Status::Invalid("a user's role is 'user' or 'admin', got '" + user.role + "'");
  if (users_.count({user.tenant, user.name}))
    return Status::Conflict("user '" + user.name + "' already exists in tenant '" + user.tenant + "'");
  store::UserRecord u = user;
  u.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutUser(u));
  users_[{u.tenant, u.name}] = u;
  return Status::Ok();
}

Status Registry::DeleteUser(const std::string& tenant, const std::string& name, const std::string& by) {
  if (!users_.count({tenant, name})) return Status::NotFound("no user '" + name + "' in tenant '" + tenant + "'");
  for (auto& [key, p] : principals_) {
    if (p.kind == "user" && p.tenant == tenant && p.user == name && !p.revoked_at_ms)
      WEFT_RETURN_IF_ERROR(Revoke(p, by + " (user deleted)"));
  }
  WEFT_RETURN_IF_ERROR(store_.DeleteUser(tenant, name));
  users_.erase({tenant, name});
  Publish();
  return Status::Ok();
}

Status Registry::AddUserKey(const std::string& tenant, const std::string& user, const std::string& public_key,
                            const std::string& by) {
  auto u = users_.find({tenant, user});
  if (u == users_.end()) return Status::NotFound("no user '" + user + "' in tenant '" + tenant + "'");
  if (!curve::IsKey(public_key)) return Status::Invalid("body.public_key must be a 40-character Z85 CURVE public key");
  if (principals_.count(public_key)) return Status::Conflict("that public key is already registered; make a new one");
  store::PrincipalRecord p;
  p.public_key = public_key;
  p.kind = "user";
  p.tenant = tenant;
  p.user = user;
  p.role = u->second.role;
  p.created_by = by;
  p.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[public_key] = p;
  Publish();
  return Status::Ok();
}

std::vector<store::PrincipalRecord> Registry::Principals(Kind kind) const {
  std::vector<store::PrincipalRecord> out;
  for (const auto& [key, p] : principals_)
    if (!p.revoked_at_ms && KindOf(p.kind) == kind) out.push_back(p);
  return out;
}

}  // namespace weft::auth
