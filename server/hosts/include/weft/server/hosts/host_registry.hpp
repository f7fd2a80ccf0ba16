// weft::hosts::HostRegistry: the in-memory view of the provisioner hosts that
// registered (their plugins, liveness, what they report running), backed by
// the store's hosts table, and the worker split the server wants on each.
//
// Borrows the Store, the TaskQueue, the Clock and the Config (all must
// outlive it) and never opens a transaction: weftd's reactor wraps every call
// in one. Host transitions (registered, live, silent, left, revoked) and task
// progress pile up as events until TakeEvents(), which the reactor calls only
// after a successful commit.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/config/config.hpp"
#include "weft/server/hosts/workers.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/event.hpp"
#include "weft/common/status.hpp"

namespace weft::hosts {

using json = nlohmann::json;

// A host id: 1 to 128 of A-Z a-z 0-9 _ . -
bool ValidHostId(const std::string& id);

struct Host {
  store::HostRecord record;
  queue::HostPlugins plugins;  // plugin types: host-wide, and tenants' own
  json descriptors = json::array();
  bool silent = false;
  // Said goodbye (host.leave): not live until it registers again.
  bool left = false;
  // Heard from by this weftd process: false for a host loaded from the store
  // until it speaks, so a host that left (or died) before a restart of weftd
  // does not show live meanwhile; kept across a Reset().
  bool heard = true;
  // The process that registered last (host.register's `incarnation`), stored with the host
  // (record.incarnation); a host stored without one (registered before weftd stored them)
  // gets it from the first heartbeat or take that names one (Learn).
  std::string incarnation;
  // Where that process says it runs (host.register's optional `machine` and `pid`), for
  // the refusal of a second process under the same id; kept in memory only.
  std::string machine;
  std::int64_t pid = 0;
  std::string key;  // the CurveZMQ key that process registered with ("" with security off)
  // The last process refused under this id (CheckNewProcess), so weftd logs each one once.
  std::string refused_incarnation;
  // The last earlier process whose heartbeat or take was refused (Replaced), likewise.
  std::string replaced_incarnation;
  json reported_workers = json::array();  // what the host says it runs: [{tenant, threads, pid}]
  // The plugin files the host refused: [{file, reason, type?, tenant?}] (host.register's and
  // host.heartbeat's optional `refused`); kept in memory only, every heartbeat resends it.
  json refused = json::array();
};

// host.register's or host.heartbeat's optional `refused` list, checked and
// bounded (at most 1000 entries, reasons cut to 2000 bytes); null when the body has none.
Result<json> ParseRefused(const json& body);
// The entries of `refused` a caller of `tenant` may see: the host-wide ones and that tenant's.
json RefusedFor(const json& refused, const std::string& tenant);

class HostRegistry {
 public:
  HostRegistry(store::Store& store, queue::TaskQueue& queue, const Clock& clock, const server::Config& config);

  // Loads the registered hosts from the store.
  [[nodiscard]] Status Load();
  // After a failed commit: forget unpublished events and reload.
  [[nodiscard]] Status Reset();

  const std::map<std::string, Host>& all() const { return hosts_; }
  Host* Find(const std::string& host_id);
  const Host* Find(const std::string& host_id) const;
  // The host id a provisioner request's `body` names, or INVALID saying, in an
  // operator's words, that the request does not say which host sent it.
  [[nodiscard]] static Result<std::string> HostIdOf(const json& body);
  // The host named by `body`'s host_id; NOT_FOUND when it never registered.
  [[nodiscard]] Result<Host*> Known(const json& body);
  // Records `host` (a new registration or a new process of a known host).
  void Put(Host host);
  // CONFLICT when a process with another `incarnation` holds `host_id` and is
  // live: two weft-host processes under one id would take each other's tasks
  // away. A registration without an incarnation, or of a host that left or
  // went silent, is never refused (a restart after a crash gets in once the
  // old process is silent), nor one with another key than the live process's
  // (the host got a new key, which revoked the old one: the old process is cut off).
  // `*first` says whether this process was not refused before (to log it once).
  [[nodiscard]] Status CheckNewProcess(const std::string& host_id, const std::string& incarnation,
                                       const std::string& key, bool* first);

  // A registration of `host_id` from another machine than its previous process's (both
  // named in host.register): a warning that names both, else "". Two machines given one
  // id take each other's place whenever one falls silent; with security off weftd has
  // nothing else to tell them apart by, with it on they share a key (a copied
  // credential.json) unless the host got a new one.
  // A heartbeat or take that names `incarnation` (its process's, as registered) from a
  // process that is no longer `host`'s registered one: another process registered under
  // the id after this one fell silent. CONFLICT (HostOps adds the details weft-host goes
  // by), so that process stops and registers again (refused while the other one is live); OK when the
  // request names none (an older weft-host) or weftd knows none (it restarted since).
  // `*first` says whether this process was not refused before (to log it once).
  [[nodiscard]] Status Replaced(Host& host, std::string_view incarnation, bool* first) const;

  // A heartbeat or take that Replaced let through names `incarnation`: when weftd knows no
  // process for `host` (it was registered before weftd stored incarnations, and has not
  // registered since), that one is its process from now on, with the `key` it speaks with,
  // so that a new process under its id is refused while it is live and its attempts are
  // given up when one registers. Kept in memory only: the next registration stores it.
  void Learn(Host& host, std::string_view incarnation, const std::string& key) const;
  // weft host drain / undrain: a draining host is handed no new task (Dispatcher), its
  // running ones finish; stored with the host, so it holds across restarts of weftd and of
  // the host, until undrained.
  [[nodiscard]] Status SetDraining(Host& host, bool draining);

  std::string MachineChange(const std::string& host_id, const std::string& machine, std::int64_t pid,
                            const std::string& key) const;

  // Whether this weftd heard from the host, within hosts.silent_after_ms, and
  // it did not leave since.
  bool Live(const Host& host) const;
  // Whether the host was heard from within hosts.silent_after_ms by this weftd
  // or before its restart, and did not leave since: it may be live. The worker
  // split and the plugin types jobs may use count these, so that neither
  // changes while hosts speak to a restarted weftd for the first time.
  bool MaybeLive(const Host& host) const;
  bool HostLive(const std::string& host_id) const;
  // The host just spoke: it is live again.
  void Seen(Host& host);
  // The host said goodbye: its leases are released and it is not live until it registers again.
  [[nodiscard]] Status Leave(Host& host);
  // Publishes "silent" for hosts that stopped reporting and gives their tasks back to the queue.
  [[nodiscard]] Status MarkSilent();
  // A revoked host: its tasks go back to the queue at once and it is forgotten.
  [[nodiscard]] Status Forget(const std::string& host_id, const std::string& reason);

  // The plugin types of `host` that tasks of `tenant` may use, sorted.
  static std::set<std::string> TypesFor(const Host& host, const std::string& tenant);
  // The plugin types some host that may be live (MaybeLive) runs for `tenant`'s tasks (host-wide and the tenant's own).
  std::set<std::string> LivePluginTypes(const std::string& tenant) const;
  // The registered hosts that run a host-wide plugin (from the operator's
  // plugin directories) of `type`; a tenant may not take that type for a Lua plugin.
  std::vector<std::string> HostsWithHostWidePlugin(const std::string& type) const;
  // The fields a registered plugin of `type` declares sensitive.
  std::set<std::string> SensitiveFields(const std::string& type) const;

  // Each tenant's max_workers quota, for the worker split (the composition root
  // hands in server/auth's tenants).
  using WorkerCaps = std::function<std::map<std::string, std::int64_t>()>;
  void set_worker_caps(WorkerCaps caps) { worker_caps_ = std::move(caps); }
  // The worker split the server wants on `host_id`: [{"tenant" ("" = any), "threads"}].
  json WorkersFor(const std::string& host_id);
  // The split over every live host were the tenants `also` active too (the
  // capacity advice sizes a tenant by the threads it gets while it has tasks).
  WorkerSplit SplitWith(const std::set<std::string>& also);
  // The tenants with tasks now or within the last minute: they share the split,
  // and hosts sync their resources (Lua plugins) even when the split names none.
  std::set<std::string> ActiveTenants();
  // The tenants that have an active Lua plugin ("lua-plugin" resource), whether
  // or not they have work: every host that may serve them installs those
  // plugins (the composition root hands in server/resources' lookup).
  using PluginTenants = std::function<std::set<std::string>()>;
  void set_plugin_tenants(PluginTenants f) { plugin_tenants_ = std::move(f); }
  std::set<std::string> TenantsWithLuaPlugins() const {
    return plugin_tenants_ ? plugin_tenants_() : std::set<std::string>{};
  }

  void HostEvent(const std::string& host_id, const char* what);
  // Whether anyone listens: when not, task progress is not even recorded as an event.
  bool events_wanted() const { return events_wanted_; }
  void set_events_wanted(bool wanted) { events_wanted_ = wanted; }
  void AddEvent(Event event) { events_.push_back(std::move(event)); }
  std::vector<Event> TakeEvents() { return std::exchange(events_, {}); }

 private:
  store::Store& store_;
  queue::TaskQueue& queue_;
  const Clock& clock_;
  const server::Config& config_;
  std::map<std::string, Host> hosts_;
  std::vector<Event> events_;
  bool events_wanted_ = true;
  // When each tenant last had a live task: a tenant keeps its workers for a
  // minute after its last task, so that the split does not flap between jobs.
  std::map<std::string, std::int64_t> tenant_seen_ms_;
  WorkerCaps worker_caps_;
  PluginTenants plugin_tenants_;
};

}  // namespace weft::hosts
