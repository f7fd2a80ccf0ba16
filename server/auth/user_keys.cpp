// user.key.list, user.key.rotate, user.key.revoke: a user's CurveZMQ keys,
// one at a time (docs/security.md, "Rotating and revoking keys").
#include <string>
#include <vector>

#include "weft/server/auth/auth_ops.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/log.hpp"

namespace weft::auth {
namespace {

using api::Call;
using api::Endpoint;
using api::Response;
using api::Role;
using json = nlohmann::json;

// The longest grace an old key may keep after a rotation.
constexpr std::int64_t kMaxGraceMs = 24LL * 3600 * 1000;

// Whose keys a request names: a user of the request's tenant, or the superadmin itself.
struct Owner {
  std::string tenant;  // "" for the superadmin
  std::string user;
  bool superadmin() const { return tenant.empty(); }
  // Sessions of the superadmin live in tenant _system.
  std::string session_tenant() const { return tenant.empty() ? kSystemTenant : tenant; }
};

std::string Who(const Call& call) {
  return call.principal.user + (call.principal.tenant.empty() ? "" : "@" + call.principal.tenant);
}

// A user sees and changes only their own keys; a tenant admin those of the
// tenant's users; the superadmin anyone's in the request's tenant, and its own
// as user "superadmin" (unless that tenant has a user of that name).
Result<Owner> OwnerOf(const Registry& reg, const Call& c, const std::string& op) {
  WEFT_ASSIGN_OR_RETURN(std::string name, jsonf::String(c.request->body, "name", ""));
  const api::Principal& p = c.principal;
  if (p.role == Role::kSuperadmin && name == kSuperadminUser && !reg.users().count({p.tenant, name}))
    return Owner{"", name};
  const bool self = p.role != Role::kSuperadmin && name == p.user;  // a user or admin acts in their own tenant only
  if (p.role == Role::kUser && !self)
    return Status::Denied("op '" + op + "': user '" + p.user + "' may manage only their own keys, not user '" + name +
                          "''s; a tenant admin manages those of the tenant's users");
  if (!reg.users().count({p.tenant, name}))
    return Status::NotFound("no user '" + name + "' in tenant '" + p.tenant + "' (weft user list shows them)");
  return Owner{p.tenant, name};
}

std::string StateOf(const store::PrincipalRecord& k, std::int64_t now) {
  if (k.revoked_at_ms) return "revoked";
  if (k.expires_at_ms && k.expires_at_ms <= now) return "expired";
  if (k.expires_at_ms) return "expiring";
  return "in force";
}

}  // namespace

void RegisterUserKeyOps(api::Router& router, Registry& registry, Logins& logins, UserKeyOptions options) {
  const std::set<Role> people = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  Registry* reg = &registry;
  Logins* l = &logins;

  router.Add("user.key.list", people, api, [reg, options](const Call& c) {
    WEFT_TRY_ASSIGN(owner, OwnerOf(*reg, c, "user.key.list"));
    const std::int64_t now = options.clock->NowMs();
    json keys = json::array();
    for (const store::PrincipalRecord& k : reg->UserKeys(owner.tenant, owner.user)) {
      json entry = {{"fingerprint", curve::Fingerprint(k.public_key)},
                    {"key", curve::ShortKey(k.public_key)},
                    {"state", StateOf(k, now)},
                    {"created_at_ms", k.created_at_ms},
                    {"created_by", k.created_by},
                    {"expires_at_ms", k.expires_at_ms},
                    {"revoked_at_ms", k.revoked_at_ms},
                    {"last_seen_ms", reg->LastSeen(k.public_key)},
                    {"yours", k.public_key == c.principal.key}};
      keys.push_back(std::move(entry));
    }
    return Response::Ok({{"tenant", owner.session_tenant()}, {"name", owner.user}, {"keys", std::move(keys)}});
  }, api::Effect::kReads, {"name"});

  router.Add("user.key.rotate", people, api, [reg, l, options](const Call& c) {
    if (!c.request->on_behalf.session.empty() || !c.request->on_behalf.token.empty())
      return Response::Error(Status::Denied(
          "op 'user.key.rotate': a key is rotated with weft and a credential, not through a browser session or an API "
          "token"));
    WEFT_TRY_ASSIGN(owner, OwnerOf(*reg, c, "user.key.rotate"));
    const json& body = c.request->body;
    WEFT_TRY_ASSIGN(grace, jsonf::Int(body, "grace_ms", "", 0, kMaxGraceMs, 0));
    WEFT_TRY_ASSIGN(only, jsonf::String(body, "fingerprint", "", ""));
    std::string new_key;
    curve::Credential file;
    if (owner.superadmin()) {
      // weftd makes the superadmin's key itself: its credential file must hold
      // the key in force, or the next start would record the old one again.
      if (body.contains("public_key"))
        return Response::Error(Status::Invalid(
            "the superadmin's new key is made by weftd and written to its credential file " +
            options.superadmin_file.string() + "; send no public_key"));
      if (!only.empty())
        return Response::Error(Status::Invalid(
            "the superadmin's rotation replaces the key of weftd's credential file; revoke other superadmin keys "
            "with `weft user key revoke superadmin FP`"));
      Result<curve::Credential> old = curve::LoadCredential(options.superadmin_file);
      if (!old.ok()) return Response::Error(old.status().WithContext("cannot read the superadmin credential"));
      file = *old;
      only = curve::Fingerprint(file.keys.public_key);
      WEFT_TRY_ASSIGN(pair, curve::Generate());
      file.keys = pair;
      new_key = pair.public_key;
    } else {
      WEFT_TRY_ASSIGN(key, jsonf::String(body, "public_key", ""));
      new_key = key;
    }
    // Nothing is written unless all of it can be.
    Status s = reg->CheckRotate(owner.tenant, owner.user, new_key, only);
    if (!s.ok()) return Response::Error(s);
    json reply = {{"tenant", owner.session_tenant()},
                  {"name", owner.user},
                  {"role", owner.superadmin() ? std::string("superadmin")
                                              : reg->users().at({owner.tenant, owner.user}).role},
                  {"key", curve::ShortKey(new_key)},
                  {"fingerprint", curve::Fingerprint(new_key)}};
    if (owner.superadmin()) {
      // Written before the store is: should weftd stop before its commit, it
      // records this file's key at its next start and the old key is still in
      // force. The replaced credential stays beside it, for a commit the store
      // refused (its key then still in force).
      const std::filesystem::path previous = options.superadmin_file.string() + ".previous";
      Result<curve::Credential> old = curve::LoadCredential(options.superadmin_file);
      s = old.ok() ? curve::SaveCredential(previous, *old) : old.status();
      if (s.ok()) s = curve::SaveCredential(options.superadmin_file, file);
      if (!s.ok())
        return Response::Error(s.WithContext("cannot write the superadmin's new credential; its key is unchanged"));
      reply["file"] = options.superadmin_file.string();
      WEFT_LOG(kInfo, "auth") << "wrote the superadmin's new credential " << options.superadmin_file.string()
                              << " (the one it replaces is kept as " << previous.string() << ")";
    }
    Result<std::vector<std::string>> retired = reg->RotateUserKey(owner.tenant, owner.user, new_key, grace, only, Who(c));
    if (!retired.ok()) return Response::Error(retired.status());
    reply["retired"] = *retired;
    if (grace > 0 && !retired->empty()) reply["expires_at_ms"] = options.clock->NowMs() + grace;
    Result<int> ended = l->EndSessions(owner.session_tenant(), owner.user);
    if (!ended.ok()) return Response::Error(ended.status());
    reply["sessions_ended"] = *ended;
    return Response::Ok(std::move(reply));
  }, api::Effect::kChanges, {"name", "public_key", "grace_ms", "fingerprint"});

  router.Add("user.key.revoke", people, api, [reg, l, options](const Call& c) {
    WEFT_TRY_ASSIGN(owner, OwnerOf(*reg, c, "user.key.revoke"));
    WEFT_TRY_ASSIGN(fingerprint, jsonf::String(c.request->body, "fingerprint", ""));
    std::string pinned;
    if (owner.superadmin()) {
      Result<curve::Credential> file = curve::LoadCredential(options.superadmin_file);
      if (file.ok()) pinned = file->keys.public_key;
    }
    Result<std::string> revoked = reg->RevokeUserKey(owner.tenant, owner.user, fingerprint, pinned, Who(c));
    if (!revoked.ok()) return Response::Error(revoked.status());
    // A browser session is the user's, not a key's: whoever held the key may have opened one.
    Result<int> ended = l->EndSessions(owner.session_tenant(), owner.user);
    if (!ended.ok()) return Response::Error(ended.status());
    return Response::Ok({{"tenant", owner.session_tenant()},
                         {"name", owner.user},
                         {"fingerprint", fingerprint},
                         {"key", curve::ShortKey(*revoked)},
                         {"sessions_ended", *ended}});
  }, api::Effect::kChanges, {"name", "fingerprint"});
}

}  // namespace weft::auth
