// weft::auth: who may talk to weftd, and as whom (docs/security.md).
//
// Every endpoint serves CurveZMQ. A client proves a public key at the
// handshake; libzmq asks the ZAP handler (a thread of its own, ZapHandler)
// whether that key may connect, and the handler answers from an immutable
// snapshot of the keys in force. The accepted key becomes the connection's
// User-Id, which the reactor reads off every request and looks up in the
// Registry to build the request's principal, so a revocation takes effect on
// the very next request, not only on the next connection.
//
// Registry: the security state (principals, tenants, users, host requests) in
// memory, written through to the store inside the reactor's transaction.
// Reactor thread only; it publishes each change to the KeySnapshot the ZAP
// thread reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/log_tally.hpp"
#include "weft/common/status.hpp"

namespace weft::auth {

enum class Kind { kUser, kHost, kToken };

// What is known of a public key in force.
struct KeyEntry {
  Kind kind = Kind::kUser;
  std::string tenant;
  std::string user;
  std::string role;  // user, admin, superadmin, gateway
  std::string host_id;
  std::int64_t expires_at_ms = 0;  // tokens
  bool revoked = false;            // kept so that a revoked key is refused, not taken for a new one
};

using KeyMap = std::map<std::string, KeyEntry>;
// The entry of a key of `keys` that may be used at `now_ms` (not revoked, not
// expired); null otherwise.
const KeyEntry* FindInForce(const KeyMap& keys, const std::string& public_key, std::int64_t now_ms);
// Whether `keys` knows the key but it may no longer be used (revoked, used up or expired).
bool SpentIn(const KeyMap& keys, const std::string& public_key, std::int64_t now_ms);

// The keys in force, shared between the reactor (writer) and the ZAP thread.
class KeySnapshot {
 public:
  void Set(std::shared_ptr<const KeyMap> keys);
  std::shared_ptr<const KeyMap> Get() const;
  // When a known key last passed the handshake (the ZAP thread records it),
  // since this weftd started; 0 when it has not.
  void Seen(const std::string& public_key, std::int64_t now_ms);
  std::int64_t LastSeen(const std::string& public_key) const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const KeyMap> keys_ = std::make_shared<KeyMap>();
  std::map<std::string, std::int64_t> seen_;  // known keys only, so bounded by the principals
};

// What a thread other than the reactor needs to resolve an api request's
// principal exactly as the reactor does (auth_ops.hpp Resolve): the keys in
// force and the tenants, as of the reactor's last commit. Immutable once made.
struct AuthView {
  KeyMap keys;
  std::map<std::string, store::TenantRecord> tenants;
  // As Registry::Find and Registry::Spent, at `now_ms`.
  const KeyEntry* Find(const std::string& public_key, std::int64_t now_ms) const;
  bool Spent(const std::string& public_key, std::int64_t now_ms) const;
};

// Valid names of tenants and users: 1-64 of [a-z0-9_-], starting with a letter or digit.
bool ValidName(std::string_view name);

class Registry {
 public:
  Registry(store::Store& store, const Clock& clock, KeySnapshot& snapshot);

  // Reads everything from the store (at start, and after a rolled-back batch).
  [[nodiscard]] Status Load();

  // A key in force (not revoked, not expired), or nullptr.
  const KeyEntry* Find(const std::string& public_key) const;
  // A key that was revoked, or a token that expired or was used.
  bool Spent(const std::string& public_key) const;

  // The superadmin key of the local credential file (created at first start).
  [[nodiscard]] Status EnsureSuperadmin(const std::string& public_key);

  // Host enrollment: a one-time token (a key pair whose public half is stored
  // with an expiry), spent by host.enroll for the host's own key. A token is
  // made for one host id (`for_host`), or, without one, for a new host only:
  // it never takes over an id that has a key in force. Even a token made for
  // the host does not replace a live host's key unless made with `replace`.
  struct NewToken {
    curve::KeyPair keys;
    std::int64_t expires_at_ms = 0;
  };
  [[nodiscard]] Result<NewToken> CreateToken(std::int64_t ttl_ms, const std::string& created_by,
                                             const std::string& for_host = "", bool replace = false);
  // `live`: whether the host is live now (weftd heard from it lately).
  [[nodiscard]] Status EnrollHost(const std::string& token_key, const std::string& host_id,
                                  const std::string& host_key, bool live);
  // A host with an unknown key asked to join (host.register); an admin accepts
  // it by the key's fingerprint. Several keys may ask for one host id; the
  // requests are capped, in all and per host id, and new ones rate limited.
  // True when the request is new (not the same key asking again).
  // One too many at once is UNAVAILABLE: RequestRetryAfterMs() says when to ask again.
  [[nodiscard]] Result<bool> RequestHost(const std::string& host_id, const std::string& host_key,
                                   const std::string& address);
  // How long until RequestHost takes a new request, in ms (at least 1).
  std::int64_t RequestRetryAfterMs() const;
  // `live`: as for EnrollHost; a live host with a key in force is replaced only with `force`.
  [[nodiscard]] Status AcceptHost(const std::string& host_id, const std::string& fingerprint, bool force, bool live,
                                  const std::string& by);
  // Revokes every key of the host; NOT_FOUND when it has none in force.
  [[nodiscard]] Status RevokeHost(const std::string& host_id, const std::string& by);
  bool HostRevoked(const std::string& host_id) const { return revoked_hosts_.count(host_id) > 0; }
  // Whether the host has a key in force.
  bool HostEnrolled(const std::string& host_id) const;

  // Tenants and users. Deleting either revokes its keys.
  [[nodiscard]] Status CreateTenant(const store::TenantRecord& tenant);
  [[nodiscard]] Status UpdateTenant(const store::TenantRecord& tenant);
  [[nodiscard]] Status DeleteTenant(const std::string& name, const std::string& by);
  [[nodiscard]] Status CreateUser(const store::UserRecord& user);
  [[nodiscard]] Status DeleteUser(const std::string& tenant, const std::string& name, const std::string& by);
  [[nodiscard]] Status AddUserKey(const std::string& tenant, const std::string& user, const std::string& public_key,
                                  const std::string& by);
  // A user's keys, revoked and expired ones included, oldest first. The
  // superadmin's: tenant "" and user "superadmin". Gateways' keys are not a user's.
  std::vector<store::PrincipalRecord> UserKeys(const std::string& tenant, const std::string& user) const;
  // Rotation: `new_key` becomes a key of the user (of the superadmin with
  // tenant "" and user "superadmin"), and the user's other keys in force
  // (only the one with fingerprint `only` when it is not empty) are revoked
  // at once (`grace_ms` 0) or expire `grace_ms` from now. Checks everything
  // before it writes anything. The fingerprints of the keys it retired.
  [[nodiscard]] Result<std::vector<std::string>> RotateUserKey(const std::string& tenant, const std::string& user,
                                                               const std::string& new_key, std::int64_t grace_ms,
                                                               const std::string& only, const std::string& by);
  // Whether RotateUserKey would succeed (no write).
  [[nodiscard]] Status CheckRotate(const std::string& tenant, const std::string& user, const std::string& new_key,
                                   const std::string& only) const;
  // Revokes the user's key with `fingerprint` at once (also one in its grace
  // period). The superadmin's last key in force, and `pinned` (the key of
  // weftd's own superadmin credential file, which a restart would put back),
  // are refused: rotate those. The revoked key.
  [[nodiscard]] Result<std::string> RevokeUserKey(const std::string& tenant, const std::string& user,
                                                  const std::string& fingerprint, const std::string& pinned,
                                                  const std::string& by);
  // A gateway's key (role "gateway", no tenant): it may log users in and act for them.
  [[nodiscard]] Status AddGatewayKey(const std::string& name, const std::string& public_key, const std::string& by);
  // Revokes every key of gateway `name` (its next request is refused); NOT_FOUND when it has none.
  [[nodiscard]] Status RevokeGateway(const std::string& name, const std::string& by);

  const std::map<std::string, store::TenantRecord>& tenants() const { return tenants_; }
  const std::map<std::pair<std::string, std::string>, store::UserRecord>& users() const { return users_; }
  // Pending host requests by key.
  const std::map<std::string, store::HostRequestRecord>& requests() const { return requests_; }
  // Principals in force of a kind (not revoked, not expired).
  std::vector<store::PrincipalRecord> Principals(Kind kind) const;
  // When the key last passed the handshake since weftd started (0: not yet).
  std::int64_t LastSeen(const std::string& public_key) const { return snapshot_.LastSeen(public_key); }
  // Every principal weftd keeps, revoked ones included (none is ever removed), by kind
  // ("user", "host", "token") and whether it is revoked; counted at each key change.
  const std::map<std::pair<std::string, bool>, std::int64_t>& principal_counts() const { return principal_counts_; }
  // Moves whenever the keys or the tenants change (View() would differ).
  std::uint64_t generation() const { return generation_; }
  std::shared_ptr<const AuthView> View() const;

 private:
  void Publish();
  [[nodiscard]] Status Revoke(store::PrincipalRecord& p, const std::string& by);
  [[nodiscard]] Status PutHostKey(const std::string& host_id, const std::string& host_key, const std::string& by);
  [[nodiscard]] Status ForgetRequests(const std::string& host_id);
  // The user's key with `fingerprint` (any state), or null.
  store::PrincipalRecord* UserKey(const std::string& tenant, const std::string& user, const std::string& fingerprint);
  bool InForce(const store::PrincipalRecord& p) const;
  // Whether a new request may be taken now (a token bucket over all unknown keys).
  bool AdmitRequest();
  double request_tokens_ = 0;
  std::int64_t request_tokens_at_ms_ = 0;

  store::Store& store_;
  const Clock& clock_;
  KeySnapshot& snapshot_;
  std::map<std::string, store::PrincipalRecord> principals_;  // by key, revoked included
  std::map<std::string, store::TenantRecord> tenants_;
  std::map<std::pair<std::string, std::string>, store::UserRecord> users_;
  std::map<std::string, store::HostRequestRecord> requests_;  // by key
  std::set<std::string> revoked_hosts_;  // hosts with a revoked key and none in force
  KeyMap in_force_;
  std::map<std::pair<std::string, bool>, std::int64_t> principal_counts_;
  std::uint64_t generation_ = 0;
};

// The ZAP handler (RFC 27) on inproc://zeromq.zap.01 of `ctx`. Start it before
// binding any CURVE server socket of that context (without a handler libzmq
// lets every key in). Domains: "api" and "events" accept user keys;
// "provisioner" accepts host and token keys, and, with `host_requests`, any
// other key too (that principal may only ask to be accepted). A refused key is
// logged once.
// It answers no handshake until Open(): until weftd loaded the keys from the
// store, an empty snapshot would refuse every key as unknown. Handshakes that
// arrive meanwhile wait (libzmq holds them until the answer comes).
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& ctx, KeySnapshot& keys, const Clock& clock, bool host_requests);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  [[nodiscard]] Status Start();
  // The keys are loaded: answer handshakes from now on (idempotent).
  void Open() { open_ = true; }
  void Stop();
  // Also logs, rate limited, each client at `endpoint` ("api", "provisioner")
  // of `socket` whose CurveZMQ handshake fails before the ZAP handler is asked:
  // its HELLO cannot be decrypted (a client configured with another server
  // key), which the peer alone would never learn. Before Start. The socket's
  // connections must all be served by one I/O thread (its ZMQ_AFFINITY names
  // one, as weftd's Transport::Bind sets it, or the context has one): a
  // failure's event is then followed at once by its connection's DISCONNECTED,
  // which is how the two are paired.
  [[nodiscard]] Status Watch(zmq::socket_t& socket, const std::string& endpoint);

 private:
  void Run();
  // Reads the watched sockets' monitor events that are waiting (never blocks).
  void DrainWatched();
  // A monitor event received and not handled yet; for ACCEPTED, the peer's address once read.
  struct Event {
    std::uint16_t event = 0;
    std::uint32_t value = 0;  // ACCEPTED, DISCONNECTED: the descriptor; HANDSHAKE_FAILED_PROTOCOL: the error
    bool read = false;
    std::string peer;
  };
  struct Watched {
    std::string endpoint;
    zmq::socket_t monitor;                  // the PAIR that receives the socket's events
    std::vector<Event> received;            // in the order the socket's I/O thread sent them
    std::map<std::uint32_t, std::string> peers;  // connection's descriptor -> peer address, while connected
    std::uint32_t failed = 0;               // the protocol error of the event just before, if it was a failure
  };
  // Receives the events waiting on `w`'s monitor (never blocks).
  static void Receive(Watched& w);
  void Handle(Watched& w, const Event& e);
  std::vector<std::unique_ptr<Watched>> watched_;

  zmq::context_t& ctx_;
  KeySnapshot& keys_;
  const Clock& clock_;
  const bool host_requests_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> open_{false};
  std::thread thread_;
  std::set<std::string> logged_;
  log::Tally tally_;
};

}  // namespace weft::auth
