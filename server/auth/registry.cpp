#include <algorithm>
#include <cmath>
#include <tuple>

#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/common/log.hpp"

namespace weft::auth {
namespace {

// Pending host requests: in all, and per host id (several keys may ask for one id).
constexpr std::size_t kMaxHostRequests = 100;
constexpr std::size_t kMaxRequestsPerHost = 4;
// A request nobody accepted for this long makes room for a new one when the list is full.
constexpr std::int64_t kRequestStaleMs = 3600 * 1000;
// New requests over all unknown keys: this many per second, in bursts of kRequestBurst.
constexpr double kRequestsPerSecond = 2.0;
constexpr double kRequestBurst = 20.0;
// The token's role when it may replace the key of a live host.
constexpr const char* kReplace = "replace";

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

const KeyEntry* FindInForce(const KeyMap& keys, const std::string& public_key, std::int64_t now_ms) {
  auto it = keys.find(public_key);
  if (it == keys.end() || it->second.revoked) return nullptr;
  if (it->second.expires_at_ms && it->second.expires_at_ms <= now_ms) return nullptr;
  return &it->second;
}

bool SpentIn(const KeyMap& keys, const std::string& public_key, std::int64_t now_ms) {
  return keys.count(public_key) > 0 && FindInForce(keys, public_key, now_ms) == nullptr;
}

void KeySnapshot::Set(std::shared_ptr<const KeyMap> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(keys);
}

std::shared_ptr<const KeyMap> KeySnapshot::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

void KeySnapshot::Seen(const std::string& public_key, std::int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!keys_->count(public_key)) return;  // only keys weftd knows, so an unknown key cannot grow the map
  seen_[public_key] = now_ms;
}

std::int64_t KeySnapshot::LastSeen(const std::string& public_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(public_key);
  return it == seen_.end() ? 0 : it->second;
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
  for (store::HostRequestRecord& r : *requests) requests_[r.public_key] = std::move(r);
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
  ++generation_;
  auto keys = std::make_shared<KeyMap>();
  std::set<std::string> hosts_in_force, hosts_revoked;
  principal_counts_.clear();
  for (const auto& [key, p] : principals_) {
    ++principal_counts_[{p.kind, p.revoked_at_ms != 0}];
    if (p.kind == "host") (p.revoked_at_ms ? hosts_revoked : hosts_in_force).insert(p.host_id);
    (*keys)[key] = KeyEntry{KindOf(p.kind), p.tenant, p.user, p.role, p.host_id, p.expires_at_ms, p.revoked_at_ms != 0};
  }
  revoked_hosts_.clear();
  for (const std::string& h : hosts_revoked)
    if (!hosts_in_force.count(h)) revoked_hosts_.insert(h);
  in_force_ = *keys;
  snapshot_.Set(std::move(keys));
}

std::shared_ptr<const AuthView> Registry::View() const {
  auto view = std::make_shared<AuthView>();
  view->keys = in_force_;
  view->tenants = tenants_;
  return view;
}

const KeyEntry* AuthView::Find(const std::string& public_key, std::int64_t now_ms) const {
  return FindInForce(keys, public_key, now_ms);
}

bool AuthView::Spent(const std::string& public_key, std::int64_t now_ms) const {
  return SpentIn(keys, public_key, now_ms);
}

const KeyEntry* Registry::Find(const std::string& public_key) const {
  return FindInForce(in_force_, public_key, clock_.NowMs());
}

bool Registry::Spent(const std::string& public_key) const { return SpentIn(in_force_, public_key, clock_.NowMs()); }

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
                          << (p.user.empty() ? ""
                              : p.tenant.empty() ? " of user '" + p.user + "'"  // the superadmin belongs to no tenant
                                                 : " of user '" + p.tenant + "/" + p.user + "'")
                          << " revoked by "
                          << by;
  return store_.PutPrincipal(p);
}

Result<Registry::NewToken> Registry::CreateToken(std::int64_t ttl_ms, const std::string& created_by,
                                                 const std::string& for_host, bool replace) {
  if (ttl_ms <= 0) return Status::Invalid("a token's ttl must be positive");
  if (!for_host.empty() && !hosts::ValidHostId(for_host))
    return Status::Invalid("a host id is 1 to 128 characters of A-Z a-z 0-9 _ . -, got '" + for_host + "'");
  if (replace && for_host.empty())
    return Status::Invalid("a token that may replace a live host must name that host (--host)");
  WEFT_ASSIGN_OR_RETURN(curve::KeyPair pair, curve::Generate());
  store::PrincipalRecord p;
  p.public_key = pair.public_key;
  p.kind = "token";
  p.host_id = for_host;
  p.role = replace ? kReplace : "";
  p.created_by = created_by;
  p.created_at_ms = clock_.NowMs();
  p.expires_at_ms = p.created_at_ms + ttl_ms;
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[p.public_key] = p;
  Publish();
  return NewToken{pair, p.expires_at_ms};
}

Status Registry::EnrollHost(const std::string& token_key, const std::string& host_id, const std::string& host_key,
                            bool live) {
  if (!hosts::ValidHostId(host_id))
    return Status::Invalid("a host id is 1 to 128 characters of A-Z a-z 0-9 _ . -");
  if (!curve::IsKey(host_key)) return Status::Invalid("the host's public key must be a 40-character Z85 CURVE key");
  if (principals_.count(host_key)) return Status::Conflict("that public key is already registered; make a new one");
  auto token = principals_.find(token_key);
  if (token == principals_.end() || token->second.kind != "token" || token->second.revoked_at_ms)
    return Status::Denied("the enrollment token was already used");
  const store::PrincipalRecord& t = token->second;
  if (!t.host_id.empty() && t.host_id != host_id)
    return Status::Denied("this enrollment token was made for host '" + t.host_id + "', not '" + host_id + "'");
  if (t.host_id.empty() && HostEnrolled(host_id))
    return Status::Denied("host '" + host_id + "' is already enrolled and this token is for a new host; to give '" +
                          host_id + "' a new key, make a token for it: `weft host token create --host " + host_id + "`");
  if (live && t.role != kReplace && HostEnrolled(host_id))
    return Status::Conflict("host '" + host_id + "' is live: enrolling would cut it off; stop it first, or make the "
                            "token with `weft host token create --host " + host_id + " --force`");
  WEFT_RETURN_IF_ERROR(Revoke(token->second, "its use by host '" + host_id + "'"));
  WEFT_RETURN_IF_ERROR(PutHostKey(host_id, host_key, "token " + curve::ShortKey(token_key)));
  WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' enrolled with key " << curve::ShortKey(host_key);
  return Status::Ok();
}

bool Registry::HostEnrolled(const std::string& host_id) const {
  for (const auto& [key, p] : principals_)
    if (p.kind == "host" && p.host_id == host_id && !p.revoked_at_ms) return true;
  return false;
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
  WEFT_RETURN_IF_ERROR(ForgetRequests(host_id));
  Publish();
  return Status::Ok();
}

Status Registry::ForgetRequests(const std::string& host_id) {
  bool any = false;
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second.host_id != host_id) {
      ++it;
      continue;
    }
    any = true;
    it = requests_.erase(it);
  }
  return any ? store_.DeleteHostRequest(host_id) : Status::Ok();
}

bool Registry::AdmitRequest() {
  const std::int64_t now = clock_.NowMs();
  if (request_tokens_at_ms_ == 0) request_tokens_ = kRequestBurst;
  request_tokens_ = std::min(kRequestBurst, request_tokens_ + static_cast<double>(now - request_tokens_at_ms_) *
                                                                  kRequestsPerSecond / 1000.0);
  request_tokens_at_ms_ = now;
  if (request_tokens_ < 1.0) return false;
  request_tokens_ -= 1.0;
  return true;
}

std::int64_t Registry::RequestRetryAfterMs() const {
  const double missing = std::max(0.0, 1.0 - request_tokens_);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(missing * 1000.0 / kRequestsPerSecond)));
}

Result<bool> Registry::RequestHost(const std::string& host_id, const std::string& host_key,
                                   const std::string& address) {
  if (!hosts::ValidHostId(host_id))
    return Status::Invalid("a host id is 1 to 128 characters of A-Z a-z 0-9 _ . -");
  auto mine = requests_.find(host_key);
  if (mine != requests_.end() && mine->second.host_id == host_id) return false;  // it asks again
  if (mine == requests_.end()) {
    if (requests_.size() >= kMaxHostRequests) {
      // Requests nobody accepted for an hour make room.
      const std::int64_t stale_before = clock_.NowMs() - kRequestStaleMs;
      for (auto it = requests_.begin(); it != requests_.end();) {
        if (it->second.requested_at_ms >= stale_before) {
          ++it;
          continue;
        }
        WEFT_RETURN_IF_ERROR(store_.DeleteHostRequestKey(it->first));
        it = requests_.erase(it);
      }
    }
    if (requests_.size() >= kMaxHostRequests)
      return Status::TooLarge("too many hosts wait for an admin (" + std::to_string(kMaxHostRequests) +
                              "); accept or revoke some first, or enroll this host with a token");
    const auto same_id = std::count_if(requests_.begin(), requests_.end(),
                                       [&](const auto& r) { return r.second.host_id == host_id; });
    if (static_cast<std::size_t>(same_id) >= kMaxRequestsPerHost)
      return Status::TooLarge("too many keys ask to join as host '" + host_id + "' (" +
                              std::to_string(kMaxRequestsPerHost) + "); an admin accepts one or runs `weft host revoke " +
                              host_id + "`");
    // A rate, not a size: the same request succeeds a moment later.
    if (!AdmitRequest())
      return Status::Unavailable("too many hosts ask to join at once (weftd records " +
                                 std::to_string(static_cast<int>(kRequestsPerSecond)) +
                                 " new requests a second from keys it does not know); nothing was recorded: retry "
                                 "after " + std::to_string(RequestRetryAfterMs()) + " ms");
  }
  store::HostRequestRecord r{host_id, host_key, address, clock_.NowMs()};
  WEFT_RETURN_IF_ERROR(store_.PutHostRequest(r));
  requests_[host_key] = r;
  return true;
}

Status Registry::AcceptHost(const std::string& host_id, const std::string& fingerprint, bool force, bool live,
                            const std::string& by) {
  std::vector<const store::HostRequestRecord*> asking;
  for (const auto& [key, r] : requests_)
    if (r.host_id == host_id) asking.push_back(&r);
  if (asking.empty())
    return Status::NotFound("no host '" + host_id + "' waits to be accepted (see `weft host requests`)");
  std::string fingerprints;
  const store::HostRequestRecord* chosen = nullptr;
  for (const store::HostRequestRecord* r : asking) {
    const std::string fp = curve::Fingerprint(r->public_key);
    fingerprints += (fingerprints.empty() ? "" : ", ") + fp;
    if (!fingerprint.empty() && fp == fingerprint) chosen = r;
  }
  if (fingerprint.empty())
    return Status::Invalid("say which key to accept for host '" + host_id + "': `weft host accept " + host_id +
                           " --fingerprint FP`, with the fingerprint the host itself logged (asking: " +
                           fingerprints + ")");
  if (!chosen)
    return Status::NotFound("no key with fingerprint " + fingerprint + " asks to join as host '" + host_id +
                            "' (asking: " + fingerprints + ")");
  if (live && !force && HostEnrolled(host_id))
    return Status::Conflict("host '" + host_id + "' is live with another key: accepting this one would cut it off; "
                            "add --force to replace it anyway");
  const std::string key = chosen->public_key;
  WEFT_RETURN_IF_ERROR(PutHostKey(host_id, key, by));
  WEFT_LOG(kInfo, "auth") << "host '" << host_id << "' (key " << curve::ShortKey(key) << ", fingerprint "
                          << curve::Fingerprint(key) << ") accepted by " << by;
  return Status::Ok();
}

Status Registry::RevokeHost(const std::string& host_id, const std::string& by) {
  int revoked = 0;
  for (auto& [key, p] : principals_) {
    if (p.kind != "host" || p.host_id != host_id || p.revoked_at_ms) continue;
    WEFT_RETURN_IF_ERROR(Revoke(p, by));
    ++revoked;
  }
  WEFT_RETURN_IF_ERROR(ForgetRequests(host_id));
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
  ++generation_;
  return Status::Ok();
}

Status Registry::UpdateTenant(const store::TenantRecord& tenant) {
  auto it = tenants_.find(tenant.name);
  if (it == tenants_.end()) return Status::NotFound("no tenant '" + tenant.name + "'");
  store::TenantRecord t = tenant;
  t.created_at_ms = it->second.created_at_ms;
  WEFT_RETURN_IF_ERROR(store_.PutTenant(t));
  it->second = t;
  ++generation_;
  return Status::Ok();
}

Status Registry::DeleteTenant(const std::string& name, const std::string& by) {
  if (name == "default") return Status::Invalid("the tenant 'default' cannot be deleted");
  if (!tenants_.count(name)) return Status::NotFound("no tenant '" + name + "'");
  // Its clusters would be left with no tenant to act in (every op on them refused).
  Result<std::vector<store::ClusterRecord>> live = store_.ListClusterSummaries(name, /*include_terminated=*/false);
  if (!live.ok()) return live.status().WithContext("cannot list the clusters of tenant '" + name + "'");
  if (!live->empty()) {
    constexpr std::size_t kNamed = 5;
    std::string names;
    for (std::size_t i = 0; i < live->size() && i < kNamed; ++i)
      names += (i ? ", " : "") + (*live)[i].name;
    if (live->size() > kNamed) names += " and " + std::to_string(live->size() - kNamed) + " more";
    return Status::Conflict("tenant '" + name + "' still has " + std::to_string(live->size()) + " live cluster" +
                            (live->size() == 1 ? "" : "s") + " (" + names +
                            "); delete them first (weft --tenant " + name + " cluster delete NAME)");
  }
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

Status Registry::AddGatewayKey(const std::string& name, const std::string& public_key, const std::string& by) {
  if (!ValidName(name))
    return Status::Invalid("a gateway name is 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit; got '" +
                           name + "'");
  if (!curve::IsKey(public_key)) return Status::Invalid("the gateway's public key must be a 40-character Z85 CURVE key");
  if (principals_.count(public_key)) return Status::Conflict("that public key is already registered; make a new one");
  store::PrincipalRecord p;
  p.public_key = public_key;
  p.kind = "user";  // the api and events endpoints admit it
  p.user = name;
  p.role = "gateway";
  p.created_by = by;
  p.created_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[public_key] = p;
  Publish();
  WEFT_LOG(kInfo, "auth") << "gateway '" << name << "' key " << curve::ShortKey(public_key) << " added by " << by;
  return Status::Ok();
}

Status Registry::RevokeGateway(const std::string& name, const std::string& by) {
  int revoked = 0;
  for (auto& [key, p] : principals_) {
    if (p.kind != "user" || p.role != "gateway" || p.user != name || p.revoked_at_ms) continue;
    WEFT_RETURN_IF_ERROR(Revoke(p, by));
    ++revoked;
  }
  if (!revoked) return Status::NotFound("gateway '" + name + "' has no key in force");
  Publish();
  return Status::Ok();
}

std::vector<store::PrincipalRecord> Registry::Principals(Kind kind) const {
  std::vector<store::PrincipalRecord> out;
  for (const auto& [key, p] : principals_)
    if (InForce(p) && KindOf(p.kind) == kind) out.push_back(p);
  return out;
}

namespace {

// Whether `p` is a key of the user (the superadmin's: tenant "", user "superadmin").
bool OfUser(const store::PrincipalRecord& p, const std::string& tenant, const std::string& user) {
  return p.kind == "user" && p.role != "gateway" && p.tenant == tenant && p.user == user;
}

std::string Owner(const std::string& tenant, const std::string& user) {
  return tenant.empty() ? "the superadmin" : "user '" + user + "' of tenant '" + tenant + "'";
}

}  // namespace

bool Registry::InForce(const store::PrincipalRecord& p) const {
  return !p.revoked_at_ms && (!p.expires_at_ms || p.expires_at_ms > clock_.NowMs());
}

std::vector<store::PrincipalRecord> Registry::UserKeys(const std::string& tenant, const std::string& user) const {
  std::vector<store::PrincipalRecord> out;
  for (const auto& [key, p] : principals_)
    if (OfUser(p, tenant, user)) out.push_back(p);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created_at_ms, a.public_key) < std::tie(b.created_at_ms, b.public_key);
  });
  return out;
}

store::PrincipalRecord* Registry::UserKey(const std::string& tenant, const std::string& user,
                                          const std::string& fingerprint) {
  for (auto& [key, p] : principals_)
    if (OfUser(p, tenant, user) && curve::Fingerprint(key) == fingerprint) return &p;
  return nullptr;
}

Status Registry::CheckRotate(const std::string& tenant, const std::string& user, const std::string& new_key,
                             const std::string& only) const {
  if (!tenant.empty() && !users_.count({tenant, user}))
    return Status::NotFound("no user '" + user + "' in tenant '" + tenant + "' (weft user list shows them)");
  if (!curve::IsKey(new_key)) return Status::Invalid("the new public key must be a 40-character Z85 CURVE key");
  if (principals_.count(new_key)) return Status::Conflict("that public key is already registered; make a new one");
  if (only.empty()) return Status::Ok();
  for (const auto& [key, p] : principals_)
    if (OfUser(p, tenant, user) && curve::Fingerprint(key) == only) {
      if (!InForce(p))
        return Status::Conflict("the key with fingerprint " + only + " of " + Owner(tenant, user) +
                                " is no longer in force; nothing to rotate");
      return Status::Ok();
    }
  return Status::NotFound(Owner(tenant, user) + " has no key with fingerprint " + only +
                          " (weft user key list shows them)");
}

Result<std::vector<std::string>> Registry::RotateUserKey(const std::string& tenant, const std::string& user,
                                                         const std::string& new_key, std::int64_t grace_ms,
                                                         const std::string& only, const std::string& by) {
  WEFT_RETURN_IF_ERROR(CheckRotate(tenant, user, new_key, only));
  const std::int64_t now = clock_.NowMs();
  std::vector<std::string> retired;
  for (auto& [key, p] : principals_) {
    if (!OfUser(p, tenant, user) || !InForce(p)) continue;
    if (!only.empty() && curve::Fingerprint(key) != only) continue;
    retired.push_back(curve::Fingerprint(key));
    if (grace_ms <= 0) {
      WEFT_RETURN_IF_ERROR(Revoke(p, by + " (rotated)"));
      continue;
    }
    // It expires, as a token does: refused at the handshake and on its next request after that.
    const std::int64_t until = now + grace_ms;
    if (!p.expires_at_ms || p.expires_at_ms > until) p.expires_at_ms = until;
    WEFT_LOG(kInfo, "auth") << "key " << curve::ShortKey(key) << " of " << Owner(tenant, user) << " expires in "
                            << grace_ms / 1000 << " s (rotated by " << by << ")";
    WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  }
  store::PrincipalRecord p;
  p.public_key = new_key;
  p.kind = "user";
  p.tenant = tenant;
  p.user = user;
  p.role = tenant.empty() ? "superadmin" : users_.at({tenant, user}).role;
  p.created_by = by;
  p.created_at_ms = now;
  WEFT_RETURN_IF_ERROR(store_.PutPrincipal(p));
  principals_[new_key] = p;
  Publish();
  WEFT_LOG(kInfo, "auth") << "new key " << curve::ShortKey(new_key) << " (fingerprint " << curve::Fingerprint(new_key)
                          << ") of " << Owner(tenant, user) << " made by " << by;
  return retired;
}

Result<std::string> Registry::RevokeUserKey(const std::string& tenant, const std::string& user,
                                            const std::string& fingerprint, const std::string& pinned,
                                            const std::string& by) {
  if (!tenant.empty() && !users_.count({tenant, user}))
    return Status::NotFound("no user '" + user + "' in tenant '" + tenant + "' (weft user list shows them)");
  store::PrincipalRecord* p = UserKey(tenant, user, fingerprint);
  if (!p)
    return Status::NotFound(Owner(tenant, user) + " has no key with fingerprint " + fingerprint +
                            " (weft user key list shows them)");
  if (p->revoked_at_ms)
    return Status::Conflict("the key with fingerprint " + fingerprint + " of " + Owner(tenant, user) +
                            " is already revoked");
  if (tenant.empty()) {
    if (p->public_key == pinned)
      return Status::Conflict("the key with fingerprint " + fingerprint +
                              " is the one of weftd's own superadmin credential (<data_dir>/credentials/"
                              "superadmin.json), which weftd records again at its next start: rotate it instead, "
                              "with `weft user key rotate superadmin`");
    int others = 0;
    for (const auto& [key, q] : principals_)
      if (key != p->public_key && OfUser(q, tenant, user) && InForce(q)) ++others;
    if (!others && InForce(*p))
      return Status::Conflict("the key with fingerprint " + fingerprint +
                              " is the superadmin's last key in force: nobody could administer weftd without it; "
                              "rotate it instead, with `weft user key rotate superadmin`");
  }
  WEFT_RETURN_IF_ERROR(Revoke(*p, by));
  Publish();
  return p->public_key;
}

}  // namespace weft::auth
