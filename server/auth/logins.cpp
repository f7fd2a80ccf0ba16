#include "weft/server/auth/logins.hpp"

#include <sodium.h>

#include <algorithm>
#include <cmath>

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

constexpr std::size_t kIdBytes = 32;               // a session id's and a token secret's randomness
constexpr std::size_t kMinPassword = 8;
constexpr std::size_t kMaxPassword = 1024;         // bytes; crypto_pwhash takes any, weftd need not
constexpr std::size_t kMaxBuckets = 100'000;       // failed-login counters kept at most
constexpr std::int64_t kTouchEveryMs = 60'000;     // a session's last use is written at most this often
constexpr std::size_t kMaxSessionsPerUser = 100;   // past this, a login ends the user's oldest session
constexpr std::int64_t kDefaultTokenTtlMs = 30LL * 24 * 3600 * 1000;
constexpr std::int64_t kMaxTokenTtlMs = 5LL * 365 * 24 * 3600 * 1000;
constexpr const char* kTokenPrefix = "weft_";

std::string Base64Url(const unsigned char* data, std::size_t size) {
  std::string out(sodium_base64_encoded_len(size, sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(out.data(), out.size(), data, size, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::string RandomText(std::size_t bytes) {
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  return Base64Url(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

std::string RandomHex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  std::string hex(bytes * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  hex.resize(bytes * 2);
  return hex;
}

// What the store keeps of a session id or a token secret.
std::string HashOf(const std::string& secret) {
  unsigned char out[crypto_generichash_BYTES];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), nullptr, 0);
  return Base64Url(out, sizeof out);
}

bool SameText(const std::string& a, const std::string& b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

json TokenJson(const store::ApiTokenRecord& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"tenant", t.tenant},
          {"user", t.user},
          {"created_at_ms", t.created_at_ms},
          {"expires_at_ms", t.expires_at_ms}};
}

json SessionJson(const Logins::Session& s) {
  return {{"user", s.user},
          {"tenant", s.tenant},
          // Where its requests act when they name no tenant: the superadmin's
          // own tenant (_system) has no clusters.
          {"acting_tenant", s.role == "superadmin" ? kSuperadminActsIn : s.tenant},
          {"role", s.role},
          {"csrf_token", s.csrf_token},
          {"expires_at_ms", s.expires_at_ms}};
}

}  // namespace

Logins::Logins(store::Store& store, const Clock& clock, const Registry& registry, LoginOptions options)
    : store_(store), clock_(clock), registry_(registry), options_(options) {
  if (options_.pwhash_ops == 0) options_.pwhash_ops = crypto_pwhash_OPSLIMIT_INTERACTIVE;
  if (options_.pwhash_mem == 0) options_.pwhash_mem = crypto_pwhash_MEMLIMIT_INTERACTIVE;
}

Status Logins::Load() {
  if (sodium_init() < 0) return Status::Internal("libsodium cannot start");
  sessions_.clear();
  tokens_.clear();
  WEFT_ASSIGN_OR_RETURN(std::vector<store::SessionRecord> sessions, store_.ListSessions());
  const std::int64_t now = clock_.NowMs();
  for (store::SessionRecord& s : sessions) {
    if (s.expires_at_ms <= now || s.last_used_ms + options_.session_idle_ms <= now) {
      WEFT_RETURN_IF_ERROR(store_.DeleteSession(s.id_hash));
      continue;
    }
    const std::int64_t used = s.last_used_ms;
    std::string key = s.id_hash;
    sessions_[key] = Live{std::move(s), used};
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ApiTokenRecord> tokens, store_.ListApiTokens());
  for (store::ApiTokenRecord& t : tokens) tokens_[t.secret_hash] = std::move(t);
  return Status::Ok();
}

std::string Logins::RoleOf(const std::string& tenant, const std::string& user, std::int64_t since_ms) const {
  if (tenant == kSystemTenant) return user == kSuperadminUser ? "superadmin" : "";
  auto it = registry_.users().find({tenant, user});
  // A user deleted and made again is someone else: what was made for the first one is void.
  if (it == registry_.users().end() || it->second.created_at_ms > since_ms) return "";
  return it->second.role;
}

Status Logins::SetPassword(const std::string& tenant, const std::string& user, const std::string& password) {
  if (RoleOf(tenant, user, clock_.NowMs()).empty())
    return Status::NotFound("no user '" + user + "' in tenant '" + tenant + "'");
  if (password.size() < kMinPassword)
    return Status::Invalid("a password must be at least " + std::to_string(kMinPassword) + " characters long");
  if (password.size() > kMaxPassword)
    return Status::Invalid("a password must be at most " + std::to_string(kMaxPassword) + " bytes long");
  std::string hash(crypto_pwhash_STRBYTES, '\0');
  if (crypto_pwhash_str(hash.data(), password.data(), password.size(), options_.pwhash_ops, options_.pwhash_mem) != 0)
    return Status::Internal("could not hash the password (out of memory)");
  hash.resize(std::char_traits<char>::length(hash.c_str()));
  WEFT_RETURN_IF_ERROR(store_.PutPassword({tenant, user, hash, clock_.NowMs()}));
  // A new password ends the sessions the old one opened.
  WEFT_RETURN_IF_ERROR(EndSessions(tenant, user).status());
  WEFT_LOG(kInfo, "auth") << "password of user '" << tenant << "/" << user << "' set";
  return Status::Ok();
}

Result<int> Logins::EndSessions(const std::string& tenant, const std::string& user) {
  int ended = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.record.tenant != tenant || it->second.record.user != user) {
      ++it;
      continue;
    }
    WEFT_RETURN_IF_ERROR(store_.DeleteSession(it->first));
    it = sessions_.erase(it);
    ++ended;
  }
  return ended;
}

Status Logins::VerifyPassword(const std::string& tenant, const std::string& user, const std::string& password) {
  const Status wrong = Status::Denied("wrong user name or password");
  if (password.empty() || password.size() > kMaxPassword) return wrong;
  WEFT_ASSIGN_OR_RETURN(std::optional<store::PasswordRecord> stored, store_.GetPassword(tenant, user));
  const bool usable = stored.has_value() && !RoleOf(tenant, user, stored->set_at_ms).empty();
  if (!usable && dummy_hash_.empty()) {
    dummy_hash_.assign(crypto_pwhash_STRBYTES, '\0');
    const std::string filler = RandomText(16);
    if (crypto_pwhash_str(dummy_hash_.data(), filler.data(), filler.size(), options_.pwhash_ops,
                          options_.pwhash_mem) != 0)
      return Status::Internal("could not hash a password (out of memory)");
  }
  // A user without a password costs as much time as a wrong one: the answer's timing tells nothing.
  const char* hash = usable ? stored->hash.c_str() : dummy_hash_.c_str();
  const bool match = crypto_pwhash_str_verify(hash, password.data(), password.size()) == 0;
  return usable && match ? Status::Ok() : wrong;
}

Logins::Bucket& Logins::BucketOf(const std::string& key, std::int64_t now) {
  if (buckets_.size() >= kMaxBuckets && !buckets_.count(key)) {
    // Full buckets carry no information: forget them.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      Bucket& b = it->second;
      const double refilled = b.tokens + (options_.login_interval_ms > 0
                                              ? static_cast<double>(now - b.at_ms) / options_.login_interval_ms
                                              : options_.login_burst);
      it = refilled >= static_cast<double>(options_.login_burst) ? buckets_.erase(it) : std::next(it);
    }
    if (buckets_.size() >= kMaxBuckets) buckets_.erase(buckets_.begin());
  }
  auto [it, fresh] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = static_cast<double>(options_.login_burst);
  } else if (options_.login_interval_ms <= 0) {
    b.tokens = static_cast<double>(options_.login_burst);
  } else {
    b.tokens = std::min<double>(static_cast<double>(options_.login_burst),
                                b.tokens + static_cast<double>(now - b.at_ms) / options_.login_interval_ms);
  }
  b.at_ms = now;
  return b;
}

bool Logins::MayTry(const std::string& key, std::int64_t now, std::int64_t* wait_ms) {
  Bucket& b = BucketOf(key, now);
  if (b.tokens >= 1.0) return true;
  *wait_ms = static_cast<std::int64_t>(std::ceil((1.0 - b.tokens) * static_cast<double>(options_.login_interval_ms)));
  return false;
}

void Logins::Failed(const std::string& key, std::int64_t now) { BucketOf(key, now).tokens -= 1.0; }

std::string Logins::CsrfOf(const std::string& session_id, const std::string& salt) const {
  unsigned char out[crypto_generichash_BYTES];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(salt.data()), salt.size(),
                     reinterpret_cast<const unsigned char*>(session_id.data()),
                     std::min<std::size_t>(session_id.size(), crypto_generichash_KEYBYTES_MAX));
  return Base64Url(out, sizeof out);
}

Status Logins::Prune(const std::string& tenant, const std::string& user, std::int64_t now) {
  // Sessions nobody uses again would stay forever: each login sweeps the ended
  // ones, and keeps the user's count bounded (a script that logs in and never
  // logs out ends its own oldest sessions, nobody else's).
  std::vector<std::pair<std::int64_t, std::string>> users;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const store::SessionRecord& r = it->second.record;
    if (r.expires_at_ms > now && r.last_used_ms + options_.session_idle_ms > now) {
      if (r.tenant == tenant && r.user == user) users.emplace_back(r.last_used_ms, it->first);
      ++it;
      continue;
    }
    WEFT_RETURN_IF_ERROR(store_.DeleteSession(it->first));
    it = sessions_.erase(it);
  }
  if (users.size() < kMaxSessionsPerUser) return Status::Ok();
  std::sort(users.begin(), users.end());
  for (std::size_t i = 0; i + kMaxSessionsPerUser <= users.size(); ++i) {
    WEFT_RETURN_IF_ERROR(store_.DeleteSession(users[i].second));
    sessions_.erase(users[i].second);
  }
  return Status::Ok();
}

Result<Logins::Session> Logins::Issue(const std::string& tenant, const std::string& user, const std::string& role,
                                      const std::string& gateway, const std::string& client_addr,
                                      const store::ApiTokenRecord* token) {
  const std::int64_t now = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(Prune(tenant, user, now));
  Session out;
  out.id = RandomText(kIdBytes);
  store::SessionRecord r;
  r.id_hash = HashOf(out.id);
  r.tenant = tenant;
  r.user = user;
  r.csrf_salt = RandomText(16);
  r.gateway = gateway;
  r.client_addr = client_addr;
  r.created_at_ms = now;
  r.last_used_ms = now;
  r.expires_at_ms = now + options_.session_max_ms;
  if (token) {
    // A session made from an API token is that token's: it never outlives it.
    r.token_hash = token->secret_hash;
    if (token->expires_at_ms > 0) r.expires_at_ms = std::min(r.expires_at_ms, token->expires_at_ms);
  }
  WEFT_RETURN_IF_ERROR(store_.PutSession(r));
  out.csrf_token = CsrfOf(out.id, r.csrf_salt);
  out.tenant = tenant;
  out.user = user;
  out.role = role;
  out.expires_at_ms = std::min(r.expires_at_ms, now + options_.session_idle_ms);
  const std::string key = r.id_hash;
  sessions_[key] = Live{std::move(r), now};
  return out;
}

Result<Logins::Session> Logins::Login(const json& body, const std::string& gateway, const std::string& client_addr,
                                      json* details, bool* refused) {
  WEFT_RETURN_IF_ERROR(jsonf::RequireObject(body, "body"));
  const std::int64_t now = clock_.NowMs();
  WEFT_ASSIGN_OR_RETURN(std::string token, jsonf::String(body, "token", "", ""));
  std::string tenant, user;
  if (token.empty()) {
    WEFT_ASSIGN_OR_RETURN(tenant, jsonf::String(body, "tenant", "", "default"));
    WEFT_ASSIGN_OR_RETURN(user, jsonf::String(body, "user", ""));
  }
  // Failed logins are limited per user and per browser address: guessing one
  // user's password from many addresses, or many users' from one, both stall.
  const std::string user_key = token.empty() ? "user:" + tenant + "/" + user : "";
  const std::string addr_key = client_addr.empty() ? "" : "addr:" + client_addr;
  std::int64_t wait_ms = 0;
  for (const std::string& key : {user_key, addr_key}) {
    if (key.empty() || MayTry(key, now, &wait_ms)) continue;
    // A rate, not a size: UNAVAILABLE with the pause after which a login is tried again.
    if (details) (*details)["retry_after_ms"] = wait_ms;
    if (refused) *refused = true;
    return Status::Unavailable("too many failed logins " +
                               std::string(key == user_key ? "for this user" : "from this address") +
                               "; nothing was tried: retry in " + DurationText(wait_ms));
  }
  auto fail = [&](Status s) {
    for (const std::string& key : {user_key, addr_key})
      if (!key.empty()) Failed(key, now);
    WEFT_LOG(kInfo, "auth") << "failed login" << (user.empty() ? " with an API token" : " of '" + tenant + "/" + user + "'")
                            << (client_addr.empty() ? "" : " from " + client_addr)
                            << (gateway.empty() ? "" : " via gateway '" + gateway + "'");
    return s;
  };
  if (!token.empty()) {
    const store::ApiTokenRecord* t = FindToken(token);
    if (!t) return fail(Status::Denied("the API token is not valid (revoked, expired or never made)"));
    const std::string role = RoleOf(t->tenant, t->user, t->created_at_ms);
    return Issue(t->tenant, t->user, role, gateway, client_addr, t);
  }
  WEFT_ASSIGN_OR_RETURN(std::string password, jsonf::String(body, "password", ""));
  Status verified = VerifyPassword(tenant, user, password);
  if (!verified.ok()) return verified.code() == Code::kDenied ? fail(verified) : verified;
  return Issue(tenant, user, RoleOf(tenant, user, now), gateway, client_addr);
}

Status Logins::Logout(const std::string& session_id) {
  const std::string key = HashOf(session_id);
  if (!sessions_.count(key)) return Status::Ok();
  WEFT_RETURN_IF_ERROR(store_.DeleteSession(key));
  sessions_.erase(key);
  return Status::Ok();
}

Result<Logins::Session> Logins::Describe(const std::string& session_id) const {
  auto it = sessions_.find(HashOf(session_id));
  if (it == sessions_.end()) return Status::Denied("not logged in");
  const store::SessionRecord& r = it->second.record;
  Session out;
  out.csrf_token = CsrfOf(session_id, r.csrf_salt);
  out.tenant = r.tenant;
  out.user = r.user;
  out.role = RoleOf(r.tenant, r.user, r.created_at_ms);
  out.expires_at_ms = std::min(r.expires_at_ms, r.last_used_ms + options_.session_idle_ms);
  return out;
}

const store::ApiTokenRecord* Logins::FindToken(const std::string& secret) const {
  if (secret.rfind(kTokenPrefix, 0) != 0) return nullptr;
  auto it = tokens_.find(HashOf(secret));
  if (it == tokens_.end()) return nullptr;
  const store::ApiTokenRecord& t = it->second;
  if (t.revoked_at_ms || (t.expires_at_ms && t.expires_at_ms <= clock_.NowMs())) return nullptr;
  if (RoleOf(t.tenant, t.user, t.created_at_ms).empty()) return nullptr;
  return &t;
}

std::string Logins::TokenEnded(const store::SessionRecord& session, std::int64_t now) const {
  if (session.token_hash.empty()) return "";
  auto it = tokens_.find(session.token_hash);
  // Retention forgets tokens only once they were revoked or expired.
  if (it == tokens_.end()) return "the API token it was made from was revoked or expired";
  const store::ApiTokenRecord& t = it->second;
  if (t.revoked_at_ms) return "the API token it was made from (" + t.id + ") was revoked";
  if (t.expires_at_ms && t.expires_at_ms <= now) return "the API token it was made from (" + t.id + ") expired";
  return "";
}

void Logins::Quotas(api::Principal& principal) const {
  auto t = registry_.tenants().find(principal.tenant);
  if (t == registry_.tenants().end()) return;
  principal.max_clusters = t->second.max_clusters;
  principal.max_nodes = t->second.max_nodes;
}

Result<api::Principal> Logins::ActFor(const api::Principal& sender, const wire::Request& request, bool read_only,
                                      bool security_on, json* details) {
  const wire::OnBehalf& behalf = request.on_behalf;
  if (security_on && sender.role != Role::kGateway)
    return Status::Denied("op '" + request.op + "': only a gateway's requests may carry a session or an API token; "
                          "this key is " + std::string(api::RoleName(sender.role)) + " '" + sender.user + "'");
  if (!behalf.session.empty() && !behalf.token.empty())
    return Status::Invalid("a request carries a session or an API token, not both");
  auto login_required = [details](Status s) {
    if (details) (*details)["login_required"] = true;
    return s;
  };
  const std::int64_t now = clock_.NowMs();
  std::string tenant, user, role;
  if (!behalf.session.empty()) {
    auto it = sessions_.find(HashOf(behalf.session));
    if (it == sessions_.end()) return login_required(Status::Denied("not logged in (no such session); log in again"));
    Live& live = it->second;
    store::SessionRecord& r = live.record;
    const bool idle = r.last_used_ms + options_.session_idle_ms <= now;
    role = RoleOf(r.tenant, r.user, r.created_at_ms);
    const std::string token_ended = TokenEnded(r, now);
    if (idle || r.expires_at_ms <= now || role.empty() || !token_ended.empty()) {
      const std::string why = role.empty()           ? "its user no longer exists"
                              : !token_ended.empty() ? token_ended
                              : idle                 ? "it was not used for " + DurationText(options_.session_idle_ms)
                                                     : "it is older than " + DurationText(options_.session_max_ms);
      WEFT_RETURN_IF_ERROR(store_.DeleteSession(it->first));
      sessions_.erase(it);
      return login_required(Status::Denied("the session ended (" + why + "); log in again"));
    }
    if (!read_only && !SameText(behalf.csrf, CsrfOf(behalf.session, r.csrf_salt)))
      return Status::Denied("op '" + request.op + "' changes state and its CSRF token is " +
                            (behalf.csrf.empty() ? "missing" : "wrong") +
                            "; a request through a session must carry the csrf_token its login returned");
    r.last_used_ms = now;
    if (now - live.stored_last_used_ms >= std::min(kTouchEveryMs, options_.session_idle_ms / 10)) {
      WEFT_RETURN_IF_ERROR(store_.PutSession(r));
      live.stored_last_used_ms = now;
    }
    tenant = r.tenant;
    user = r.user;
  } else {
    const store::ApiTokenRecord* t = FindToken(behalf.token);
    if (!t) return login_required(Status::Denied("the API token is not valid (revoked, expired or never made)"));
    tenant = t->tenant;
    user = t->user;
    role = RoleOf(tenant, user, t->created_at_ms);
  }
  api::Principal p;
  p.key = sender.key;
  p.user = user;
  p.via_gateway = sender.role == Role::kGateway ? sender.user : "";
  p.client_addr = behalf.client_addr;
  p.by_session = !behalf.session.empty();
  if (role == "superadmin") {
    p.role = Role::kSuperadmin;
    p.user_tenant = kSystemTenant;
    p.tenant = request.tenant.empty() ? kSuperadminActsIn : request.tenant;
  } else {
    p.role = role == "admin" ? Role::kAdmin : Role::kUser;
    p.tenant = tenant;
    if (!request.tenant.empty() && request.tenant != tenant)
      return Status::Denied("op '" + request.op + "' in tenant '" + request.tenant + "': user '" + user +
                            "' belongs to tenant '" + tenant + "'");
  }
  Quotas(p);
  return p;
}

Result<Logins::NewToken> Logins::CreateToken(const std::string& tenant, const std::string& user,
                                             const std::string& name, std::int64_t ttl_ms) {
  if (name.size() > 64) return Status::Invalid("a token's name is at most 64 characters");
  const std::int64_t now = clock_.NowMs();
  NewToken out;
  store::ApiTokenRecord& t = out.record;
  t.id = RandomHex(6);
  out.secret = kTokenPrefix + t.id + "_" + RandomText(kIdBytes);
  t.secret_hash = HashOf(out.secret);
  t.tenant = tenant;
  t.user = user;
  t.name = name;
  t.created_at_ms = now;
  t.expires_at_ms = ttl_ms > 0 ? now + ttl_ms : 0;
  WEFT_RETURN_IF_ERROR(store_.PutApiToken(t));
  tokens_[t.secret_hash] = t;
  return out;
}

std::vector<store::ApiTokenRecord> Logins::Tokens(const std::string& tenant, const std::string& user) const {
  std::vector<store::ApiTokenRecord> out;
  const std::int64_t now = clock_.NowMs();
  for (const auto& [hash, t] : tokens_) {
    if (t.tenant != tenant || (!user.empty() && t.user != user) || t.revoked_at_ms) continue;
    if ((t.expires_at_ms && t.expires_at_ms <= now) || RoleOf(t.tenant, t.user, t.created_at_ms).empty()) continue;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.created_at_ms < b.created_at_ms; });
  return out;
}

Status Logins::RevokeToken(const std::string& id, const std::string& tenant, const std::string& user) {
  for (auto& [hash, t] : tokens_) {
    if (t.id != id || t.tenant != tenant || t.revoked_at_ms) continue;
    if (!user.empty() && t.user != user)
      return Status::Denied("token " + id + " belongs to user '" + t.user + "'; only they or a tenant admin revoke it");
    t.revoked_at_ms = clock_.NowMs();
    WEFT_RETURN_IF_ERROR(store_.PutApiToken(t));
    // The browser sessions the token logged in end with it.
    const std::string token_hash = t.secret_hash;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second.record.token_hash != token_hash) {
        ++it;
        continue;
      }
      WEFT_RETURN_IF_ERROR(store_.DeleteSession(it->first));
      it = sessions_.erase(it);
    }
    return Status::Ok();
  }
  return Status::NotFound("no API token " + id + " in force in tenant '" + tenant + "' (weft token list shows them)");
}

void Logins::ForgetSpentTokens(std::int64_t cutoff_ms) {
  std::erase_if(tokens_, [cutoff_ms](const auto& entry) {
    const store::ApiTokenRecord& t = entry.second;
    return (t.revoked_at_ms > 0 && t.revoked_at_ms < cutoff_ms) || (t.expires_at_ms > 0 && t.expires_at_ms < cutoff_ms);
  });
}

Status Logins::Forget(const std::string& tenant, const std::string& user) {
  WEFT_RETURN_IF_ERROR(store_.ForgetLogins(tenant, user));
  std::erase_if(sessions_, [&](const auto& s) {
    return s.second.record.tenant == tenant && (user.empty() || s.second.record.user == user);
  });
  std::erase_if(tokens_, [&](const auto& t) { return t.second.tenant == tenant && (user.empty() || t.second.user == user); });
  return Status::Ok();
}

bool Logins::HasPassword(const std::string& tenant, const std::string& user) {
  Result<std::optional<store::PasswordRecord>> stored = store_.GetPassword(tenant, user);
  return stored.ok() && stored->has_value() && !RoleOf(tenant, user, (*stored)->set_at_ms).empty();
}

void RegisterLoginOps(api::Router& router, Logins& logins, const Registry& registry) {
  const std::set<Role> people = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  Logins* l = &logins;
  const Registry* reg = &registry;
  // A deleted user's (or tenant's) password, sessions and tokens go with them.
  for (const char* op : {"user.delete", "tenant.delete"}) {
    const bool whole_tenant = std::string(op) == "tenant.delete";
    router.Wrap(op, [l, whole_tenant](api::Handler next) -> api::Handler {
      return [l, whole_tenant, next](const Call& c) {
        Response r = next(c);
        if (!r.status.ok()) return r;
        auto it = c.request->body.find("name");
        const std::string name = it != c.request->body.end() && it->is_string() ? it->get<std::string>() : "";
        Status s = whole_tenant ? l->Forget(name, "") : l->Forget(c.principal.tenant, name);
        return s.ok() ? r : Response::Error(s);
      };
    });
  }
  // user.list says who may log in through a browser.
  router.Wrap("user.list", [l](api::Handler next) -> api::Handler {
    return [l, next](const Call& c) {
      Response r = next(c);
      if (!r.status.ok() || !r.body.contains("users") || !r.body["users"].is_array()) return r;
      for (json& u : r.body["users"])
        if (u.is_object() && u.contains("name") && u["name"].is_string())
          u["password"] = l->HasPassword(c.principal.tenant, u["name"].get<std::string>());
      return r;
    };
  });

  router.Add("session.login", {Role::kGateway, Role::kUser, Role::kAdmin, Role::kSuperadmin}, api,
             [l](const Call& c) {
               json details = json::object();
               bool refused = false;
               const std::string gateway = c.principal.role == Role::kGateway ? c.principal.user : "";
               Result<Logins::Session> s = l->Login(c.request->body, gateway, c.request->on_behalf.client_addr,
                                                    &details, &refused);
               if (!s.ok()) return refused ? Response::Refusal(s.status(), details)
                                           : Response::Error(s.status(), details);
               json body = SessionJson(*s);
               body["session"] = s->id;
               return Response::Ok(std::move(body));
             }, api::Effect::kChanges, {"tenant", "user", "password", "token"});
  router.Add("session.get", people, api, [l](const Call& c) {
    if (c.request->on_behalf.session.empty())
      return Response::Error(Status::Invalid("session.get needs the request to carry a session"));
    WEFT_TRY_ASSIGN(s, l->Describe(c.request->on_behalf.session));
    return Response::Ok(SessionJson(s));
  }, api::Effect::kReads, {});
  router.Add("session.logout", people, api, [l](const Call& c) {
    if (c.request->on_behalf.session.empty())
      return Response::Error(Status::Invalid("session.logout needs the request to carry a session"));
    Status s = l->Logout(c.request->on_behalf.session);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"user", c.principal.user}});
  }, api::Effect::kChanges, {});

  // A user sets their own password; a tenant admin any of the tenant's users'; the superadmin its own too.
  router.Add("user.password", people, api, [l, reg](const Call& c) {
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", ""));
    WEFT_TRY_ASSIGN(password, jsonf::String(c.request->body, "password", ""));
    const api::Principal& p = c.principal;
    std::string tenant = p.tenant;
    if (p.role == Role::kSuperadmin && name == kSuperadminUser && !reg->users().count({tenant, name}))
      tenant = kSystemTenant;
    const bool self = name == p.user && tenant == (p.user_tenant.empty() ? p.tenant : p.user_tenant);
    if (p.role == Role::kUser && !self)
      return Response::Error(Status::Denied("user '" + p.user + "' may set only their own password, not user '" +
                                            name + "''s; a tenant admin sets anyone's"));
    Status s = l->SetPassword(tenant, name, password);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"tenant", tenant}, {"name", name}});
  }, api::Effect::kChanges, {"name", "password"});

  router.Add("token.create", people, api, [l](const Call& c) {
    const api::Principal& p = c.principal;
    if (!c.request->on_behalf.token.empty())
      return Response::Error(Status::Denied("an API token cannot make API tokens; log in, or use weft"));
    WEFT_TRY_ASSIGN(name, jsonf::String(c.request->body, "name", "", ""));
    WEFT_TRY_ASSIGN(ttl, jsonf::Int(c.request->body, "ttl_ms", "", 0, kMaxTokenTtlMs, kDefaultTokenTtlMs));
    const std::string tenant = p.role == Role::kSuperadmin ? kSystemTenant : p.tenant;
    WEFT_TRY_ASSIGN(made, l->CreateToken(tenant, p.user, name, ttl));
    json body = TokenJson(made.record);
    body["token"] = made.secret;
    return Response::Ok(std::move(body));
  }, api::Effect::kChanges, {"name", "ttl_ms"});
  router.Add("token.list", people, api, [l](const Call& c) {
    const api::Principal& p = c.principal;
    json list = json::array();
    // A user sees their own tokens; an admin the tenant's; the superadmin its own and the tenant's.
    const std::string only = p.role == Role::kUser ? p.user : "";
    for (const auto& t : l->Tokens(p.tenant, only)) list.push_back(TokenJson(t));
    if (p.role == Role::kSuperadmin)
      for (const auto& t : l->Tokens(kSystemTenant, p.user)) list.push_back(TokenJson(t));
    return Response::Ok({{"tokens", std::move(list)}});
  }, api::Effect::kReads, {});
  router.Add("token.revoke", people, api, [l](const Call& c) {
    WEFT_TRY_ASSIGN(id, jsonf::String(c.request->body, "id", ""));
    const api::Principal& p = c.principal;
    Status s = l->RevokeToken(id, p.tenant, p.role == Role::kUser ? p.user : "");
    if (s.code() == Code::kNotFound && p.role == Role::kSuperadmin) s = l->RevokeToken(id, kSystemTenant, p.user);
    if (!s.ok()) return Response::Error(s);
    return Response::Ok({{"id", id}});
  }, api::Effect::kChanges, {"id"});
}

}  // namespace weft::auth
