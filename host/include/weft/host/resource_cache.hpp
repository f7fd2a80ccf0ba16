// ResourceCache: weft-host's local copies of resource versions (docs/host.md,
// "Resources"), fetched from weftd with resource.fetch and checked against
// the digest the task (or resource.active) names before anyone sees them.
//
// Layout: <dir>/<hex sha256>/<name>. The content decides the place, so a file
// once there is never rewritten, and two tenants or versions with the same
// bytes share it. A fetch writes <dir>/<hex>/.<name>.tmp.<random>, verifies
// size and digest, then renames it into place: a reader (another worker, a
// plugin) sees the whole verified file or nothing. Every use touches the
// version's directory, whose mtime is thus its last use; Prune removes what was
// not used for longer than a task may run.
//
// Thread-safety: every method may be called from any thread and from several
// processes on the same directory at once (master and workers do).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/client/client.hpp"
#include "weft/common/status.hpp"

namespace weft::host {

// One version a task uses (an element of the task's "resources").
struct ResourceRef {
  std::string tenant;
  std::string type;
  std::string name;
  std::int64_t version = 0;
  std::string digest;  // "sha256:<hex>"
  std::int64_t size_bytes = 0;
};

// Reads task["resources"][i] (path names it in errors); `tenant` is the task's.
Result<ResourceRef> ParseResourceRef(const nlohmann::json& entry, const std::string& tenant, std::string_view path);
// "shell/install.sh version 2", for messages.
std::string Describe(const ResourceRef& ref);

class ResourceCache {
 public:
  explicit ResourceCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  const std::filesystem::path& dir() const { return dir_; }
  // Where the version lives (whether cached or not).
  std::filesystem::path PathOf(const ResourceRef& ref) const;

  // The cached file of `ref`, fetched through `client` (connected to weftd's
  // provisioner endpoint) first when it is not cached. A fetched file whose
  // size or digest differs from `ref` is discarded and the error says so.
  // `cancelled` is asked between chunks.
  [[nodiscard]] Result<std::filesystem::path> Ensure(client::Client& client, const ResourceRef& ref,
                                                     const std::function<bool()>& cancelled = {});

  // Removes every cached version whose digest is not in `keep` and that was
  // not used for `unused_for_ms`. Returns how many.
  int Prune(const std::set<std::string>& keep, std::int64_t unused_for_ms);

 private:
  std::filesystem::path dir_;
};

// What ResourceCache::Ensure did in this process since the last call: versions
// found cached, versions fetched, and the bytes fetched. For metrics.
struct CacheUse {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t fetched_bytes = 0;
};
CacheUse TakeCacheUse();

// Fetches every version task["resources"] names (the task's tenant) and adds
// "path" to each entry. On error the task must not run; the message names the
// resource and what went wrong. `log` gets one line per resource.
[[nodiscard]] Status ResolveTaskResources(client::Client& client, ResourceCache& cache, nlohmann::json& task,
                                          const std::function<bool()>& cancelled,
                                          const std::function<void(const std::string&)>& log = {});

}  // namespace weft::host
