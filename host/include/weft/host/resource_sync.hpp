// ResourceSync: the master's resource thread (docs/host.md, "Resources").
//
// Every resource_sync_ms it asks weftd (resource.active) for the active
// versions of the tenants the host serves (pinned: `tenants` of its
// configuration; else "default", the tenants of weftd's current worker split
// for this host, those weftd says have work or an active Lua plugin, and the
// tenant of every Lua file in the resource plugin directory), of the plugin
// types the host runs plus "lua-plugin", and
//   * pre-fetches them into the resource cache, so a task rarely waits for a fetch;
//   * installs every active "lua-plugin" version into the resource plugin
//     directory as "<tenant>@<name>" (written to a temporary file, then
//     renamed; the master gives it that tenant's tasks only), and removes the
//     Lua files there whose tenant weftd says has no active version of them
//     (a file is never removed for want of asking about its tenant). That directory is one of the
//     master's watched plugin directories, so the ordinary inotify machinery
//     probes the new file, rolls the workers and registers the new plugin set;
//   * prunes cached versions that are neither active nor used for longer than
//     a task may run (task_timeout_ms plus the hang grace plus a minute), so a
//     running task never loses the version it started with.
// Nothing is removed after a round in which weftd could not be asked.
//
// Thread-safety: Start and Stop from one thread (the master's main thread);
// RunOnce is for tests and must not race with a started thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/host/config.hpp"
#include "weft/host/resource_cache.hpp"

namespace weft::host {

class ResourceSync {
 public:
  // `plugin_types` returns the types the host runs now (called from the sync thread).
  using TypesFn = std::function<std::vector<std::string>()>;
  // `tenants` (optional) returns tenants served besides SyncedTenants(config).
  using TenantsFn = std::function<std::vector<std::string>()>;
  ResourceSync(HostConfig config, zmq::context_t& ctx, TypesFn plugin_types, TenantsFn tenants = nullptr);
  ~ResourceSync();
  ResourceSync(const ResourceSync&) = delete;
  ResourceSync& operator=(const ResourceSync&) = delete;

  // Creates the cache and plugin directories (so the master can watch the
  // latter before it scans) and starts the thread.
  void Start();
  void Stop();

  // One round through `client`; ok when every tenant was asked successfully.
  [[nodiscard]] Status RunOnce(client::Client& client);

 private:
  void Loop();
  // Installs `wanted` (file name -> version); removes the other Lua files of
  // the tenants in `asked` (weftd said they have no active version) and, on a
  // host with pinned tenants, those of other tenants.
  void Install(client::Client& client, const std::map<std::string, ResourceRef>& wanted,
               const std::set<std::string>& asked);

  const HostConfig config_;
  zmq::context_t& ctx_;
  const TypesFn plugin_types_;
  const TenantsFn tenants_;
  ResourceCache cache_;
  const std::filesystem::path plugin_dir_;
  std::map<std::string, std::string> installed_;  // file name in plugin_dir_ -> digest
  bool installed_known_ = false;
  std::set<std::string> failed_;  // digests whose pre-fetch failure was logged
  std::int64_t rounds_ = 0;
  bool unreachable_logged_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft::host
