// The security ops (docs/protocol.md, "Security"): enrollment tokens, host
// accept/revoke, tenants, users and their keys; and how a request's key
// becomes its principal.
//
// Reactor thread only, like the Registry and the host registry they use.
#pragma once

#include <filesystem>
#include <string>

#include "weft/server/api/router.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/auth/logins.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/log_tally.hpp"
#include "weft/common/wire.hpp"

namespace weft::auth {

struct OpsOptions {
  std::string server_key;             // weftd's public key, put into tokens
  std::int64_t token_ttl_ms = 3600000;  // default lifetime of an enrollment token
};

// The tenant and user ops and the router's check that a request's tenant
// exists. Registered with security on or off: without CurveZMQ every api
// caller is superadmin, and tenants still have to be created before anything
// acts in them (and users, to log in through a gateway).
void RegisterTenantOps(api::Router& router, Registry& registry);

// The ops that need CurveZMQ: enrollment, host accept/revoke, users' and
// gateways' keys. `hosts`: whether a host is live (enrollment, accept) and forgetting a revoked one.
void RegisterAuthOps(api::Router& router, Registry& registry, hosts::HostRegistry& hosts, OpsOptions options);

struct UserKeyOptions {
  std::filesystem::path superadmin_file;  // <data_dir>/credentials/superadmin.json
  const Clock* clock = nullptr;
};

// user.key.list, user.key.rotate and user.key.revoke (docs/security.md,
// "Rotating and revoking keys"): a user lists, rotates and revokes their own
// keys, a tenant admin those of the tenant's users, the superadmin anyone's
// and its own (whose new key weftd makes and writes to `superadmin_file`,
// which must hold the key in force: weftd records that file's key at start).
// A rotation or revocation ends the user's browser sessions.
void RegisterUserKeyOps(api::Router& router, Registry& registry, Logins& logins, UserKeyOptions options);

// What the secrets at rest need: the store (sealing in place), the plugins'
// sensitive fields (from the registered hosts) and the take path (opening).
struct SecretsDeps {
  store::Store& store;
  const hosts::HostRegistry& hosts;
  hosts::Dispatcher& dispatcher;
};

// Secrets at rest (server/auth/secrets.hpp): task.finish seals a result's SSH
// secrets before anything stores them, provider.put seals the fields the
// provider's plugin declares sensitive (and when a host registers a plugin,
// those fields already stored in the clear are sealed in place), and a take
// decorator (added last) opens them in the task handed to the host. Wraps the
// ops `router` knows when it is called: register every op group but the
// CurveZMQ ones (which take no sealable input) before.
// The first part of InstallSecrets: every api op `router` knows refuses a request that carries sealed text.
void RefuseSealedRequests(api::Router& router);
[[nodiscard]] Status InstallSecrets(api::Router& router, SecretsDeps deps, const std::filesystem::path& key_file);

// The principal of a request that arrived with `key` (the connection's
// User-Id) on `endpoint`; DENIED with a sentence when the key may not act as
// the request asks (unknown or revoked key, another tenant, another host).
[[nodiscard]] Result<api::Principal> Resolve(const Registry& registry, api::Endpoint endpoint, const std::string& key,
                                             const wire::Request& request);
// The same from a view of the keys and tenants (another thread than the reactor's), at `now_ms`.
[[nodiscard]] Result<api::Principal> Resolve(const AuthView& view, std::int64_t now_ms, api::Endpoint endpoint,
                                             const std::string& key, const wire::Request& request);

// What a key weftd does not know may do on the provisioner endpoint (role
// pending): its host.register files a request an admin may accept, logged
// through `tally`; anything else is DENIED.
api::Response HandlePending(Registry& registry, log::Tally& tally, std::int64_t now_ms, const std::string& key,
                            const std::string& address, const wire::Request& request);

}  // namespace weft::auth
