// weft::resources::DatabaseResourceStore: the ResourceStore that keeps
// resources in weftd's SQL store (SQLite or PostgreSQL, migration 22), so
// that every weftd on one PostgreSQL serves the same ones (docs/failover.md).
// weftd's default with `[store] backend = "postgres"`; `[store] resources`
// chooses (docs/configuration.md).
//
// A version's metadata is a row of resource_versions; its content is rows of
// at most 1 MiB (store::Store::kResourceRowBytes) by byte offset, written as
// the chunks of its upload arrive, so a large archive is never one value and
// Read fetches only the rows it needs. An upload in progress is a row of
// resource_uploads; its final chunk checks the digest and adds the version
// row that names the upload's content.
//
// Every method runs in the caller's transaction when one is open (weftd's
// batch, whose commit carries the leader's fence on PostgreSQL: a stale leader
// cannot change resources, and the reply goes out only once it committed);
// otherwise in a transaction of its own, committed before it returns. Either
// way a change is all or nothing: a crash at any point leaves the store as it
// was before the method, or as it is after. A method that refuses (INVALID,
// CONFLICT, ...) may still have written what it says (a discarded upload is
// removed); a store error (INTERNAL, UNAVAILABLE) leaves the transaction to
// be rolled back.
//
// It keeps in memory the active versions of the tenants asked about (a take
// asks for every task) and the digests of uploads in progress; ForgetCached()
// drops both, which weftd does after a rollback and when it takes over.
//
// Thread-safety: none; the reactor thread's, as the Store it borrows.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/common/clock.hpp"
#include "weft/common/digest.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "weft/server/store/store.hpp"

namespace weft::resources {

class DatabaseResourceStore final : public ResourceStore {
 public:
  // Borrows `store` and `clock`, which must outlive it. Of the options,
  // max_size_bytes and abandoned_upload_ms apply (a finished upload's final
  // chunk may be repeated until it is abandoned).
  DatabaseResourceStore(store::Store& store, const Clock& clock, FileStoreOptions options = {});

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
  void ForgetCached() override;

  // What ImportFiles did.
  struct Imported {
    std::vector<std::string> imported;  // "<tenant>: <type>/<name> (N versions)"
    std::vector<std::string> skipped;   // the same, for resources the database had already
    std::filesystem::path moved_to;     // where the directory went ("" when there was none)
  };
  // Once, when weftd starts on this store: copies every resource of the
  // FileResourceStore directory `root` that the database does not have
  // (versions, states, metadata and content, each digest checked) in one
  // transaction, then renames `root` to `<root>.imported` (or
  // `<root>.imported-<ms>` when that exists) so that it is not imported again.
  // A resource the database has already is left out (and named in the log),
  // unless the database's copy is an older one of the files' (every version
  // it has is theirs, with the same digest, and they have more, or the same
  // ones changed later: an export's, changed since): then the files' replaces it.
  // Nothing to do when `root` does not exist or holds no resource.
  [[nodiscard]] Result<Imported> ImportFiles(const std::filesystem::path& root);

  // What ExportFiles did.
  struct Exported {
    std::vector<std::string> exported;  // "<tenant>: <type>/<name> (N versions)": the directory lacked it
    std::vector<std::string> replaced;  // the same, with what the directory had: an older copy
    std::vector<std::string> same;      // the directory has the same copy, or a newer one
    std::filesystem::path marked;       // the file that records the export ("" when nothing was compared)
  };
  // The reverse of ImportFiles, when weftd starts with its resources kept as
  // files (`[store] resources = "files"`) on a store whose tables hold
  // resources (kept there by `"database"` before): writes each resource the
  // directory of `files` lacks, or has an older copy of (every version it
  // has is the store's, with the same digest, and the store has more, or the
  // same with states changed later), into it: versions, states, times and
  // content, each digest checked. Refuses (CONFLICT, naming each resource and
  // what to do) and writes nothing when the two hold different copies of a
  // resource, neither older than the other. Done, it writes the file
  // <root>/exported-from-database.json, and from then on the directory is
  // this weftd's resources: a later start compares nothing (an upload or
  // delete made with files is never undone by the store's old copy).
  // Nothing to do when the store holds no resource.
  [[nodiscard]] Result<Exported> ExportFiles(FileResourceStore& files);
  static constexpr const char* kExportMarker = "exported-from-database.json";

 private:
  struct Pending {
    digest::Sha256 hash;
    std::int64_t received = 0;
  };

  Result<std::vector<store::ResourceVersionRecord>> Versions(const std::string& tenant, const std::string& type,
                                                             const std::string& name);
  Result<store::ResourceVersionRecord> Version(const std::string& tenant, const std::string& type,
                                               const std::string& name, std::int64_t version);
  Result<UploadProgress> UploadIn(const UploadChunk& chunk);
  Result<UploadProgress> Finish(store::ResourceUploadRecord upload, const UploadChunk& chunk);
  Result<std::vector<ActiveVersion>*> ActiveOf(const std::string& tenant);

  store::Store& store_;
  const Clock& clock_;
  FileStoreOptions options_;
  std::map<std::string, std::vector<ActiveVersion>> active_;  // tenant -> its active versions, by type and name
  std::map<std::string, Pending> pending_;                    // upload id -> digest so far
};

}  // namespace weft::resources
