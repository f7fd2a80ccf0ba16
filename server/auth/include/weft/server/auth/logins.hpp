// weft::auth::Logins: passwords, browser sessions and API tokens
// (docs/security.md, "Browsers, the gateway and sessions").
//
// A browser never holds a CurveZMQ key. It logs in through a gateway
// (weft-web), whose own key may do nothing but log users in: session.login
// checks a user's password (libsodium crypto_pwhash) or an API token and
// issues a session. Every later request the gateway passes on carries the
// session (or an API token) in its header, and weftd serves it as that user
// exactly as if the user had sent it: role, tenant and ownership. A session
// request that changes anything must also carry the session's CSRF token.
//
// Nothing secret is stored as it is: passwords as crypto_pwhash strings,
// session ids and token secrets as BLAKE2b hashes, and a session's CSRF token
// is recomputed from its id. Sessions and tokens are kept in memory, written
// through to the store in the reactor's transaction, and read again by Load()
// (at start, and after a rolled-back batch), so a restart keeps them.
//
// Not thread-safe: the reactor thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::auth {

struct LoginOptions {
  std::int64_t session_idle_ms = 30LL * 60 * 1000;
  std::int64_t session_max_ms = 12LL * 3600 * 1000;
  std::int64_t login_burst = 5;
  std::int64_t login_interval_ms = 12'000;
  // crypto_pwhash's cost; the defaults are libsodium's "interactive" ones.
  std::uint64_t pwhash_ops = 0;
  std::size_t pwhash_mem = 0;
};

// The tenant and name the superadmin logs in with.
inline constexpr const char* kSystemTenant = "_system";
inline constexpr const char* kSuperadminUser = "superadmin";
// The tenant the superadmin's requests through a gateway act in when they name none.
inline constexpr const char* kSuperadminActsIn = "default";

class Logins {
 public:
  Logins(store::Store& store, const Clock& clock, const Registry& registry, LoginOptions options);

  [[nodiscard]] Status Load();

  // Sets a user's password (the superadmin's: tenant _system, user superadmin)
  // and ends the user's sessions.
  [[nodiscard]] Status SetPassword(const std::string& tenant, const std::string& user, const std::string& password);

  // Ends the user's sessions (the superadmin's: tenant _system, user superadmin); how many.
  [[nodiscard]] Result<int> EndSessions(const std::string& tenant, const std::string& user);

  // Forgets a user's password, sessions and tokens (every user's of the tenant when `user` is empty).
  [[nodiscard]] Status Forget(const std::string& tenant, const std::string& user);
  // Whether the user has a password (may log in with one).
  bool HasPassword(const std::string& tenant, const std::string& user);

  struct Session {
    std::string id;  // the secret the gateway keeps in a cookie
    std::string csrf_token;
    std::string tenant, user, role;
    std::int64_t expires_at_ms = 0;
  };
  // session.login: a password (or an API token) for a session. `gateway`:
  // the gateway's name; `client_addr`: the browser's address it gave. Failed
  // logins are limited per (tenant, user) and per client address;
  // `details` then gets retry_after_ms, and `*refused` (when given) is set:
  // that refusal changed nothing.
  [[nodiscard]] Result<Session> Login(const nlohmann::json& body, const std::string& gateway,
                                      const std::string& client_addr, nlohmann::json* details,
                                      bool* refused = nullptr);
  [[nodiscard]] Status Logout(const std::string& session_id);
  // The session's own view (session.get): who, the CSRF token, until when.
  [[nodiscard]] Result<Session> Describe(const std::string& session_id) const;

  // The principal a request that carries a session or an API token acts as,
  // from the principal that sent it (`sender`: a gateway; anyone with
  // security off). `read_only`: the op changes nothing (no CSRF token
  // needed). On error, `details` gets login_required when the caller must
  // log in (again).
  [[nodiscard]] Result<api::Principal> ActFor(const api::Principal& sender, const wire::Request& request,
                                              bool read_only, bool security_on, nlohmann::json* details);

  struct NewToken {
    store::ApiTokenRecord record;
    std::string secret;  // shown once
  };
  [[nodiscard]] Result<NewToken> CreateToken(const std::string& tenant, const std::string& user,
                                             const std::string& name, std::int64_t ttl_ms);
  // Tokens in force of `tenant` (of one user when `user` is not empty).
  std::vector<store::ApiTokenRecord> Tokens(const std::string& tenant, const std::string& user) const;
  // Revokes a token of `tenant` (of `user` when not empty), and ends the sessions it logged in.
  [[nodiscard]] Status RevokeToken(const std::string& id, const std::string& tenant, const std::string& user);
  // Retention removed the tokens revoked or expired before `cutoff_ms` from
  // the store (Store::PruneSpentApiTokens): they go from memory too. Refused
  // as before: an unknown token gets the words of a revoked one.
  void ForgetSpentTokens(std::int64_t cutoff_ms);

 private:
  struct Live {
    store::SessionRecord record;
    std::int64_t stored_last_used_ms = 0;  // what the store has; written again now and then
  };
  struct Bucket {
    double tokens = 0;
    std::int64_t at_ms = 0;
  };
  // The role of a user in force, or "" when there is none (deleted since).
  std::string RoleOf(const std::string& tenant, const std::string& user, std::int64_t since_ms) const;
  // `token`: the API token the login gave (null: a password), which the session never outlives.
  Result<Session> Issue(const std::string& tenant, const std::string& user, const std::string& role,
                        const std::string& gateway, const std::string& client_addr,
                        const store::ApiTokenRecord* token = nullptr);
  // Ends the sessions that ended by time, and the user's oldest beyond a bound.
  Status Prune(const std::string& tenant, const std::string& user, std::int64_t now);
  Status VerifyPassword(const std::string& tenant, const std::string& user, const std::string& password);
  // Failed logins: whether `key` may try once more now, and how long to wait if not.
  bool MayTry(const std::string& key, std::int64_t now, std::int64_t* wait_ms);
  void Failed(const std::string& key, std::int64_t now);
  Bucket& BucketOf(const std::string& key, std::int64_t now);
  std::string CsrfOf(const std::string& session_id, const std::string& salt) const;
  void Quotas(api::Principal& principal) const;
  const store::ApiTokenRecord* FindToken(const std::string& secret) const;
  // Why a session made from an API token has ended with it ("": in force, or made with a password).
  std::string TokenEnded(const store::SessionRecord& session, std::int64_t now) const;

  store::Store& store_;
  const Clock& clock_;
  const Registry& registry_;
  LoginOptions options_;
  std::map<std::string, Live> sessions_;                    // by id hash
  std::map<std::string, store::ApiTokenRecord> tokens_;     // by secret hash, revoked included
  std::map<std::string, Bucket> buckets_;                   // failed logins by "user:" / "addr:" key
  std::string dummy_hash_;  // verified against when the user has no password, so timing tells nothing
};

// session.login, session.get, session.logout, user.password and token.create/list/revoke.
void RegisterLoginOps(api::Router& router, Logins& logins, const Registry& registry);

}  // namespace weft::auth
