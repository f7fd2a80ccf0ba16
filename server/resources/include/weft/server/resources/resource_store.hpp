// weft::resources::ResourceStore: the server's store of plugin resources
// (scripts, archives, playbooks, Lua plugins), and FileResourceStore, the
// default backend that keeps them as files under <data_dir>/resources/.
//
// A resource is named by tenant, type (the plugin type that uses it, e.g.
// "shell", or "lua-plugin" for a Lua plugin file) and name
// ("install-nginx.sh"). Every upload makes a new numbered version, inactive.
// Stage marks a version to become active; Sync makes every staged version of a
// tenant active (retiring the one that was active); Recall retires the active
// version; Delete removes a version that is not active, or a whole resource
// that has none. At most one version of a resource is active and at most one
// is staged. Versions are immutable and carry their size and SHA-256 digest.
//
// Two backends: FileResourceStore (below), files outside the SQL store that
// the server's transactions do not cover, for a single weftd; and
// DatabaseResourceStore (database_resource_store.hpp), rows of the SQL store
// written in weftd's transactions, which every weftd on one PostgreSQL shares.
// Every change a method makes is durable when it returns ok (in weftd's
// transaction: when that commits, before the reply), and every method leaves
// the store consistent if the process dies at any point.
//
// Thread-safety: none. weftd calls a store only from its reactor thread. The
// store must outlive the ops registered on it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "weft/common/clock.hpp"
#include "weft/common/digest.hpp"
#include "weft/common/status.hpp"

namespace weft::resources {

// The resource type whose files are Lua plugins: a host that serves the tenant
// installs its active versions into its watched resource plugin directory.
inline constexpr std::string_view kLuaPluginType = "lua-plugin";

enum class VersionState : int { kInactive = 1, kStaged, kActive, kRetired };
std::string_view VersionStateName(VersionState state);

struct VersionInfo {
  std::int64_t version = 0;
  VersionState state = VersionState::kInactive;
  std::int64_t size_bytes = 0;
  std::string digest;  // "sha256:<64 hex>"
  std::int64_t created_at_ms = 0;
  std::string created_by;
  std::int64_t activated_at_ms = 0;  // last time it became active; 0: never
  std::int64_t retired_at_ms = 0;    // last time it stopped being active; 0: never
};

struct ResourceInfo {
  std::string type;
  std::string name;
  std::vector<VersionInfo> versions;  // ascending by version
};

// One active version, as a task or a host needs it.
struct ActiveVersion {
  std::string type;
  std::string name;
  std::int64_t version = 0;
  std::string digest;
  std::int64_t size_bytes = 0;
};

// One request of a chunked upload.
struct UploadChunk {
  std::string tenant;
  std::string type;
  std::string name;
  std::string upload_id;  // empty: a new upload (offset must be 0)
  std::int64_t offset = 0;
  std::string_view bytes;
  bool final = false;
  std::string digest;                    // required with final: what the client computed
  std::optional<std::int64_t> size_bytes;  // optional with final: the total the client sent
  std::string user;                      // who uploads, recorded with the version
};

struct UploadProgress {
  std::string upload_id;
  std::int64_t received_bytes = 0;
  std::optional<VersionInfo> version;  // set by the final chunk
};

struct Activation {
  std::string type;
  std::string name;
  std::int64_t version = 0;
  std::optional<std::int64_t> retired;  // the version that was active before
};

struct Chunk {
  std::string bytes;
  std::int64_t offset = 0;
  std::int64_t size_bytes = 0;  // of the whole version
  std::string digest;
  bool eof = false;  // the chunk ends at the end of the file
};

// Checks of the names that become directory names. Errors name `path` (e.g. "body.type").
// type: [a-z0-9][a-z0-9_.-]*, at most 64 bytes (a plugin type name).
Status ValidateType(std::string_view type, std::string_view path);
// name: [A-Za-z0-9_][A-Za-z0-9_.+-]*, at most 128 bytes; a lua-plugin's name ends in ".lua".
Status ValidateName(std::string_view type, std::string_view name, std::string_view path);

// `digits` random lowercase hex digits: upload ids (16) and other names a store makes.
std::string RandomHex(std::size_t digits);
// Whether `id` has the form of an upload id (16 lowercase hex digits).
bool ValidUploadId(std::string_view id);

class ResourceStore {
 public:
  virtual ~ResourceStore() = default;

  // Appends one chunk. A chunk's offset must equal the bytes received so far
  // (CONFLICT otherwise, with the count in the message, so a client can resume).
  // The final chunk checks the digest (INVALID on a mismatch: the upload is
  // discarded) and turns the upload into the resource's next version, inactive.
  [[nodiscard]] virtual Result<UploadProgress> Upload(const UploadChunk& chunk) = 0;
  // Resources of the tenant, sorted by type and name; `type` empty: every type.
  [[nodiscard]] virtual Result<std::vector<ResourceInfo>> List(const std::string& tenant,
                                                               const std::string& type) = 0;
  [[nodiscard]] virtual Result<VersionInfo> Get(const std::string& tenant, const std::string& type,
                                                const std::string& name, std::int64_t version) = 0;
  [[nodiscard]] virtual Result<VersionInfo> Stage(const std::string& tenant, const std::string& type,
                                                  const std::string& name, std::int64_t version) = 0;
  // Retires the active version; returns it.
  [[nodiscard]] virtual Result<VersionInfo> Recall(const std::string& tenant, const std::string& type,
                                                   const std::string& name) = 0;
  // Makes every staged version of the tenant active.
  [[nodiscard]] virtual Result<std::vector<Activation>> Sync(const std::string& tenant) = 0;
  // Removes one version (not the active one), or, without a version, the whole
  // resource (none of its versions may be active). Returns the removed versions.
  [[nodiscard]] virtual Result<std::vector<std::int64_t>> Delete(const std::string& tenant, const std::string& type,
                                                                 const std::string& name,
                                                                 std::optional<std::int64_t> version) = 0;
  // The active versions of the tenant, of the given types (empty: every type),
  // sorted by type and name.
  [[nodiscard]] virtual Result<std::vector<ActiveVersion>> Active(const std::string& tenant,
                                                                  const std::vector<std::string>& types) = 0;
  // Up to `max_bytes` of a version's content from `offset` (any existing
  // version, active or not: a running task may hold an older one).
  [[nodiscard]] virtual Result<Chunk> Read(const std::string& tenant, const std::string& type,
                                           const std::string& name, std::int64_t version, std::int64_t offset,
                                           std::int64_t max_bytes) = 0;
  // Drops what it keeps in memory of a database that may have changed behind
  // it (a rollback undid a change, or another weftd led meanwhile).
  virtual void ForgetCached() {}
};

struct FileStoreOptions {
  std::int64_t max_size_bytes = std::int64_t{1} << 30;          // one version, 1 GiB
  std::int64_t abandoned_upload_ms = 24LL * 60 * 60 * 1000;     // unfinished uploads are removed after this
  std::size_t remembered_uploads = 1024;                        // finished uploads whose final may be repeated
};

// Files under `root` (weftd: <data_dir>/resources):
//
//   <root>/<tenant>/<type>/<name>/manifest.json   versions and their states
//   <root>/<tenant>/<type>/<name>/v<N>            the content of version N
//   <root>/<tenant>/<type>/<name>/uploads/<id>.part   an upload in progress
//
// (<tenant> is percent-encoded where it is not [A-Za-z0-9_-].) A version exists
// only once manifest.json lists it. The final chunk makes the part file
// durable, renames it to v<N>, then replaces manifest.json (written to a
// temporary file, fsynced, renamed): a crash before the rename of the manifest
// leaves an orphan v<N> that the next Open removes, never a version with
// half its bytes. Deletes remove the manifest entry first, then the file; a
// resource deleted whole keeps its manifest, marked "deleted", with no version
// but its counter, so that a later upload of the name numbers on from it.
// Open also removes uploads untouched for abandoned_upload_ms.
//
// The manifests are read once at Open and kept in memory: this process must be
// the only writer (weftd holds <data_dir>/weftd.lock).
class FileResourceStore final : public ResourceStore {
 public:
  [[nodiscard]] static Result<std::unique_ptr<FileResourceStore>> Open(const std::filesystem::path& root,
                                                                      const Clock& clock,
                                                                      FileStoreOptions options = {});

  Result<UploadProgress> Upload(const UploadChunk& chunk) override;
  Result<std::vector<ResourceInfo>> List(const std::string& tenant, const std::string& type) override;
  Result<VersionInfo> Get(const std::string& tenant, const std::string& type, const std::string& name,
                          std::int64_t version) override;
  Result<VersionInfo> Stage(const std::string& tenant, const std::string& type, const std::string& name,
                            std::int64_t version) override;
  Result<VersionInfo> Recall(const std::string& tenant, const std::string& type, const std::string& name) override;
  Result<std::vector<Activation>> Sync(const std::string& tenant) override;
  Result<std::vector<std::int64_t>> Delete(const std::string& tenant, const std::string& type,
                                           const std::string& name, std::optional<std::int64_t> version) override;
  Result<std::vector<ActiveVersion>> Active(const std::string& tenant, const std::vector<std::string>& types) override;
  Result<Chunk> Read(const std::string& tenant, const std::string& type, const std::string& name,
                     std::int64_t version, std::int64_t offset, std::int64_t max_bytes) override;

  const std::filesystem::path& root() const { return root_; }
  // The tenants that have resources, sorted (an import's walk).
  std::vector<std::string> Tenants() const;
  // The versions of a resource, ascending; null when it does not exist here.
  const std::vector<VersionInfo>* Versions(const std::string& tenant, const std::string& type,
                                           const std::string& name) const;
  // The number the resource's next version gets here (1 when the name never
  // had one): above every version it ever had, deleted ones included, and
  // those of the resource deleted whole.
  std::int64_t NextVersion(const std::string& tenant, const std::string& type, const std::string& name) const;
  // The resources deleted whole here, whose counters stay: tenant, type,
  // name and the number the name's next version gets.
  struct DeletedName {
    std::string tenant, type, name;
    std::int64_t next_version = 1;
  };
  std::vector<DeletedName> DeletedNames() const;
  // Makes the number the name's next version gets at least `next_version`:
  // a resource here keeps its versions; a name it does not have is recorded
  // as deleted whole (an export of one the database deleted).
  [[nodiscard]] Status KeepNumbering(const std::string& tenant, const std::string& type, const std::string& name,
                                     std::int64_t next_version);
  // Writes a resource as another store keeps it (an export from the
  // database): the file of every version it does not have yet, its content
  // from `content` (which calls `write` with the bytes in order) checked
  // against the version's size and digest and synced, then the manifest with
  // `versions` (their states and times as given) and `next_version`. A
  // version it has already must have the same digest (its file is kept). A
  // crash before the manifest leaves the resource as it was (Open removes the
  // files no manifest owns).
  using ContentWriter = std::function<Status(std::string_view bytes)>;
  [[nodiscard]] Status Adopt(const std::string& tenant, const std::string& type, const std::string& name,
                             std::vector<VersionInfo> versions, std::int64_t next_version,
                             const std::function<Status(const VersionInfo& v, const ContentWriter& write)>& content);
  // The file that holds a version's content (for tests and tools).
  std::filesystem::path VersionPath(const std::string& tenant, const std::string& type, const std::string& name,
                                    std::int64_t version) const;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // tenant, type, name
  struct Resource {
    std::int64_t next_version = 1;
    std::vector<VersionInfo> versions;  // ascending
  };
  struct Finished {
    Key key;
    std::int64_t version = 0;
    std::string digest;
  };
  // The digest of an upload in progress, updated chunk by chunk so the final
  // chunk need not read the whole file again (after a restart it must).
  struct Pending {
    digest::Sha256 hash;
    std::int64_t received = 0;
    std::int64_t touched_ms = 0;
  };

  FileResourceStore(std::filesystem::path root, const Clock& clock, FileStoreOptions options);
  Status Load();
  std::filesystem::path Dir(const Key& key) const;
  Result<Resource*> Find(const Key& key);
  // `deleted`: the manifest of a resource deleted whole, which keeps its counter.
  Status WriteManifest(const Key& key, const Resource& resource, bool deleted = false);
  Result<UploadProgress> Finish(const Key& key, const std::string& upload_id, const std::filesystem::path& part,
                                const UploadChunk& chunk, std::int64_t received);

  std::filesystem::path root_;
  const Clock& clock_;
  FileStoreOptions options_;
  std::map<Key, Resource> resources_;
  std::map<Key, std::int64_t> deleted_;       // resources deleted whole -> their next version's number
  std::map<std::string, Pending> pending_;    // upload id -> digest so far
  std::map<std::string, Finished> finished_;  // upload id -> what it became
  std::vector<std::string> finished_order_;
};

// "<type>/<name>", for messages.
std::string ResourceName(std::string_view type, std::string_view name);

}  // namespace weft::resources
