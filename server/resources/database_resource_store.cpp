#include "weft/server/resources/database_resource_store.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "weft/common/log.hpp"

namespace weft::resources {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLog = "resources";

VersionState StateOf(const std::string& name) {
  if (name == "staged") return VersionState::kStaged;
  if (name == "active") return VersionState::kActive;
  if (name == "retired") return VersionState::kRetired;
  return VersionState::kInactive;
}

VersionInfo Info(const store::ResourceVersionRecord& r) {
  VersionInfo v;
  v.version = r.version;
  v.state = StateOf(r.state);
  v.size_bytes = r.size_bytes;
  v.digest = r.digest;
  v.created_at_ms = r.created_at_ms;
  v.created_by = r.created_by;
  v.activated_at_ms = r.activated_at_ms;
  v.retired_at_ms = r.retired_at_ms;
  return v;
}

std::string VersionText(std::string_view type, std::string_view name, std::int64_t version) {
  return "version " + std::to_string(version) + " of resource " + ResourceName(type, name);
}

// A version that is staged and then unstaged goes back to what it was.
std::string Unstaged(const store::ResourceVersionRecord& v) { return v.activated_at_ms > 0 ? "retired" : "inactive"; }

bool StoreError(const Status& s) { return s.code() == Code::kInternal || s.code() == Code::kUnavailable; }

// Runs `body` in the store's open transaction, or in one of its own that
// commits unless `body` failed with a store error (a refusal may have written
// what it says, a discarded upload's removal).
template <typename Body>
auto InTransaction(store::Store& store, DatabaseResourceStore& self, Body&& body) -> decltype(body()) {
  if (store.in_transaction()) return body();
  WEFT_RETURN_IF_ERROR(store.Begin());
  auto result = body();
  Status status = result.ok() ? Status::Ok() : result.status();
  Status ended = StoreError(status) ? store.Rollback() : store.Commit();
  if (!ended.ok()) {
    if (!StoreError(status)) (void)store.Rollback();
    self.ForgetCached();
    return StoreError(status) ? status : ended;
  }
  if (StoreError(status)) self.ForgetCached();
  return result;
}

// "v1 active, v2 inactive", for messages.
std::string VersionsText(const std::vector<VersionInfo>& versions) {
  std::string out;
  for (const VersionInfo& v : versions)
    out += (out.empty() ? "v" : ", v") + std::to_string(v.version) + " " + std::string(VersionStateName(v.state));
  return out.empty() ? "no version" : out;
}

// The last time a version of `versions` became or stopped being active.
std::int64_t LastChangeMs(const std::vector<VersionInfo>& versions) {
  std::int64_t last = 0;
  for (const VersionInfo& v : versions) last = std::max({last, v.created_at_ms, v.activated_at_ms, v.retired_at_ms});
  return last;
}

// How copy `a` of a resource stands to copy `b` (the store's and a
// directory's): kOlder when every version of `a` is one of `b`'s, with the
// same digest, and `b` has more, or the same ones changed later.
enum class Copy { kSame, kOlder, kNewer, kDifferent };
Copy Compare(const std::vector<VersionInfo>& a, const std::vector<VersionInfo>& b) {
  auto within = [](const std::vector<VersionInfo>& x, const std::vector<VersionInfo>& y) {
    for (const VersionInfo& v : x) {
      auto it = std::find_if(y.begin(), y.end(), [&](const VersionInfo& w) { return w.version == v.version; });
      if (it == y.end() || it->digest != v.digest) return false;
    }
    return true;
  };
  const bool a_in_b = within(a, b);
  const bool b_in_a = within(b, a);
  if (a_in_b && b_in_a) {
    bool same = true;
    for (const VersionInfo& v : a) {
      auto it = std::find_if(b.begin(), b.end(), [&](const VersionInfo& w) { return w.version == v.version; });
      if (it->state != v.state || it->activated_at_ms != v.activated_at_ms || it->retired_at_ms != v.retired_at_ms)
        same = false;
    }
    if (same) return Copy::kSame;
    const std::int64_t a_last = LastChangeMs(a), b_last = LastChangeMs(b);
    if (a_last == b_last) return Copy::kDifferent;
    return a_last < b_last ? Copy::kOlder : Copy::kNewer;
  }
  if (a_in_b) return Copy::kOlder;
  if (b_in_a) return Copy::kNewer;
  return Copy::kDifferent;
}

}  // namespace

DatabaseResourceStore::DatabaseResourceStore(store::Store& store, const Clock& clock, FileStoreOptions options)
    : store_(store), clock_(clock), options_(options) {}

void DatabaseResourceStore::ForgetCached() {
  active_.clear();
  pending_.clear();
}

Result<std::vector<store::ResourceVersionRecord>> DatabaseResourceStore::Versions(const std::string& tenant,
                                                                                  const std::string& type,
                                                                                  const std::string& name) {
  WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(type, name, "name"));
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> versions,
                        store_.ListResourceVersions(tenant, type, name));
  if (versions.empty()) {
    WEFT_ASSIGN_OR_RETURN(bool exists, store_.ResourceExists(tenant, type, name));
    if (!exists)
      return Status::NotFound("resource " + ResourceName(type, name) + " does not exist in tenant '" + tenant +
                              "'; upload it first");
  }
  return versions;
}

Result<store::ResourceVersionRecord> DatabaseResourceStore::Version(const std::string& tenant, const std::string& type,
                                                                    const std::string& name, std::int64_t version) {
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> versions, Versions(tenant, type, name));
  std::string have;
  for (store::ResourceVersionRecord& v : versions) {
    if (v.version == version) return std::move(v);
    have += (have.empty() ? "" : ", ") + std::to_string(v.version);
  }
  return Status::NotFound(VersionText(type, name, version) + " does not exist in tenant '" + tenant + "' (it has " +
                          (have.empty() ? std::string("none") : "versions " + have) + ")");
}

Result<UploadProgress> DatabaseResourceStore::Upload(const UploadChunk& chunk) {
  return InTransaction(store_, *this, [&] { return UploadIn(chunk); });
}

Result<UploadProgress> DatabaseResourceStore::UploadIn(const UploadChunk& chunk) {
  WEFT_RETURN_IF_ERROR(ValidateType(chunk.type, "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(chunk.type, chunk.name, "name"));
  const std::string what = ResourceName(chunk.type, chunk.name);
  const auto size = static_cast<std::int64_t>(chunk.bytes.size());
  const std::int64_t now = clock_.NowMs();
  if (chunk.offset < 0) return Status::Invalid("offset must not be negative");
  if (chunk.offset + size > options_.max_size_bytes) {
    if (ValidUploadId(chunk.upload_id)) {
      WEFT_ASSIGN_OR_RETURN(std::optional<store::ResourceUploadRecord> u, store_.GetResourceUpload(chunk.upload_id));
      if (u && u->version == 0 && u->tenant == chunk.tenant && u->type == chunk.type && u->name == chunk.name) {
        WEFT_RETURN_IF_ERROR(store_.DeleteResourceUpload(chunk.upload_id));
        pending_.erase(chunk.upload_id);
      }
    }
    return Status::TooLarge("resource " + what + " would be larger than " + std::to_string(options_.max_size_bytes) +
                            " bytes, the most one version may hold; the upload was discarded");
  }
  store::ResourceUploadRecord upload;
  if (chunk.upload_id.empty()) {
    if (chunk.offset != 0)
      return Status::Invalid("a new upload of " + what + " starts at offset 0, not " + std::to_string(chunk.offset) +
                             "; to continue an upload, send its upload_id");
    // Uploads nobody finished (and finished ones no final chunk will repeat) go.
    WEFT_ASSIGN_OR_RETURN(std::int64_t pruned, store_.PruneResourceUploads(now - options_.abandoned_upload_ms));
    if (pruned > 0) {
      WEFT_LOG(kInfo, kLog) << "removed " << pruned << " abandoned or finished upload(s)";
    }
    upload.id = RandomHex(16);
    upload.tenant = chunk.tenant;
    upload.type = chunk.type;
    upload.name = chunk.name;
    upload.received = size;
    upload.touched_ms = now;
    WEFT_RETURN_IF_ERROR(store_.PutResourceUpload(upload));
    WEFT_RETURN_IF_ERROR(store_.AppendResourceContent(upload.id, 0, chunk.bytes));
    Pending& p = pending_[upload.id];
    p.hash.Update(chunk.bytes);
    p.received = size;
  } else {
    const std::string& id = chunk.upload_id;
    if (!ValidUploadId(id))
      return Status::Invalid("upload_id must be the 16 hex digits the first chunk's reply gave, got \"" +
                             id.substr(0, 100) + "\"");
    WEFT_ASSIGN_OR_RETURN(std::optional<store::ResourceUploadRecord> found, store_.GetResourceUpload(id));
    const bool ours = found && found->tenant == chunk.tenant && found->type == chunk.type && found->name == chunk.name;
    if (ours && found->version > 0 && chunk.final) {
      // A repeated final chunk (its reply was lost) gets the same answer again.
      Result<std::string> digest = digest::NormalizeSha256(chunk.digest, "digest");
      if (digest.ok() && *digest == found->digest) {
        Result<store::ResourceVersionRecord> v = Version(chunk.tenant, chunk.type, chunk.name, found->version);
        if (v.ok()) return UploadProgress{id, v->size_bytes, Info(*v)};
      }
    }
    if (!ours || found->version > 0)
      return Status::NotFound("upload " + id + " of " + what + " is not in progress: it was finished, discarded, " +
                              "or abandoned; start the upload again without upload_id");
    upload = std::move(*found);
    if (upload.received != chunk.offset)
      return Status::Conflict("upload " + id + " of " + what + " has received " + std::to_string(upload.received) +
                              " bytes, so the next chunk starts at offset " + std::to_string(upload.received) +
                              ", not " + std::to_string(chunk.offset));
    WEFT_RETURN_IF_ERROR(store_.AppendResourceContent(id, chunk.offset, chunk.bytes));
    upload.received += size;
    upload.touched_ms = now;
    WEFT_RETURN_IF_ERROR(store_.PutResourceUpload(upload));
    auto p = pending_.find(id);
    if (p != pending_.end() && p->second.received == chunk.offset) {
      p->second.hash.Update(chunk.bytes);
      p->second.received += size;
    } else if (p != pending_.end()) {
      pending_.erase(p);  // out of step: the final chunk reads the content instead
    }
  }
  if (!chunk.final) return UploadProgress{upload.id, upload.received, std::nullopt};
  return Finish(std::move(upload), chunk);
}

Result<UploadProgress> DatabaseResourceStore::Finish(store::ResourceUploadRecord upload, const UploadChunk& chunk) {
  const std::string what = ResourceName(chunk.type, chunk.name);
  const std::string id = upload.id;
  auto discard = [&](Status s) -> Status {
    pending_.erase(id);
    Status removed = store_.DeleteResourceUpload(id);
    return removed.ok() ? s : removed;
  };
  if (chunk.digest.empty())
    return discard(Status::Invalid("the final chunk of an upload must carry \"digest\", the SHA-256 of the whole "
                                   "file (\"sha256:<hex>\"); upload " + id + " of " + what + " was discarded"));
  Result<std::string> claimed = digest::NormalizeSha256(chunk.digest, "digest");
  if (!claimed.ok()) return discard(claimed.status());
  std::string got;
  std::int64_t got_size = -1;
  auto p = pending_.find(id);
  if (p != pending_.end() && p->second.received == upload.received) {
    Result<std::string> d = p->second.hash.Finish();
    if (d.ok()) {
      got = *d;
      got_size = upload.received;
    }
  }
  pending_.erase(id);
  if (got_size < 0) {
    // Another weftd received the first chunks, or this one lost its digest (a rollback, a restart).
    digest::Sha256 hash;
    WEFT_ASSIGN_OR_RETURN(got_size, store_.VisitResourceContent(id, [&](std::string_view b) { hash.Update(b); }));
    WEFT_ASSIGN_OR_RETURN(got, hash.Finish());
  }
  if (got_size != upload.received)
    return discard(Status::Internal("upload " + id + " of " + what + " holds " + std::to_string(got_size) +
                                    " bytes but " + std::to_string(upload.received) +
                                    " were received; it was discarded"));
  if (chunk.size_bytes && *chunk.size_bytes != got_size)
    return discard(Status::Invalid("the upload of " + what + " was announced as " + std::to_string(*chunk.size_bytes) +
                                   " bytes but " + std::to_string(got_size) +
                                   " arrived: chunks were lost; the upload was discarded, upload the file again"));
  if (got != *claimed)
    return discard(Status::Invalid("digest mismatch for the upload of " + what + ": the server computed " + got +
                                   " over the " + std::to_string(got_size) + " bytes it received, the client said " +
                                   *claimed +
                                   "; the file changed or was damaged on the way. The upload was discarded; upload "
                                   "the file again"));
  WEFT_ASSIGN_OR_RETURN(std::int64_t version, store_.TakeResourceVersion(chunk.tenant, chunk.type, chunk.name));
  store::ResourceVersionRecord row;
  row.tenant = chunk.tenant;
  row.type = chunk.type;
  row.name = chunk.name;
  row.version = version;
  row.state = "inactive";
  row.size_bytes = got_size;
  row.digest = got;
  row.created_at_ms = clock_.NowMs();
  row.created_by = chunk.user;
  row.content_id = id;
  WEFT_RETURN_IF_ERROR(store_.InsertResourceVersion(row));
  upload.version = version;
  upload.digest = got;
  upload.touched_ms = row.created_at_ms;
  WEFT_RETURN_IF_ERROR(store_.PutResourceUpload(upload));
  WEFT_LOG(kInfo, kLog) << "tenant '" << chunk.tenant << "': resource " << what << " version " << version << " ("
                        << got_size << " bytes, " << got << ") uploaded by " << chunk.user;
  return UploadProgress{id, upload.received, Info(row)};
}

Result<std::vector<ResourceInfo>> DatabaseResourceStore::List(const std::string& tenant, const std::string& type) {
  if (!type.empty()) WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> rows, store_.ListResourceVersions(tenant, type, ""));
  std::vector<ResourceInfo> out;
  for (const store::ResourceVersionRecord& r : rows) {
    if (out.empty() || out.back().type != r.type || out.back().name != r.name)
      out.push_back(ResourceInfo{r.type, r.name, {}});
    out.back().versions.push_back(Info(r));
  }
  return out;
}

Result<VersionInfo> DatabaseResourceStore::Get(const std::string& tenant, const std::string& type,
                                               const std::string& name, std::int64_t version) {
  WEFT_ASSIGN_OR_RETURN(store::ResourceVersionRecord v, Version(tenant, type, name, version));
  return Info(v);
}

Result<VersionInfo> DatabaseResourceStore::Stage(const std::string& tenant, const std::string& type,
                                                 const std::string& name, std::int64_t version) {
  return InTransaction(store_, *this, [&]() -> Result<VersionInfo> {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> versions, Versions(tenant, type, name));
    WEFT_ASSIGN_OR_RETURN(store::ResourceVersionRecord target, Version(tenant, type, name, version));
    if (target.state == "staged") return Info(target);  // staging twice changes nothing
    if (target.state == "active")
      return Status::Conflict(VersionText(type, name, version) + " is already active; there is nothing to stage");
    // One staged version per resource: the one there was goes back first.
    for (store::ResourceVersionRecord& v : versions) {
      if (v.state != "staged") continue;
      v.state = Unstaged(v);
      WEFT_RETURN_IF_ERROR(store_.UpdateResourceVersion(v));
    }
    target.state = "staged";
    WEFT_RETURN_IF_ERROR(store_.UpdateResourceVersion(target));
    return Info(target);
  });
}

Result<VersionInfo> DatabaseResourceStore::Recall(const std::string& tenant, const std::string& type,
                                                  const std::string& name) {
  return InTransaction(store_, *this, [&]() -> Result<VersionInfo> {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> versions, Versions(tenant, type, name));
    for (store::ResourceVersionRecord& v : versions) {
      if (v.state != "active") continue;
      v.state = "retired";
      v.retired_at_ms = clock_.NowMs();
      active_.erase(tenant);
      WEFT_RETURN_IF_ERROR(store_.UpdateResourceVersion(v));
      WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << ResourceName(type, name) << " version "
                            << v.version << " recalled";
      return Info(v);
    }
    return Status::Conflict("resource " + ResourceName(type, name) + " of tenant '" + tenant +
                            "' has no active version to recall");
  });
}

Result<std::vector<Activation>> DatabaseResourceStore::Sync(const std::string& tenant) {
  return InTransaction(store_, *this, [&]() -> Result<std::vector<Activation>> {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> rows, store_.ListResourceVersions(tenant, "", ""));
    std::vector<Activation> out;
    const std::int64_t now = clock_.NowMs();
    active_.erase(tenant);
    // Rows come by type, name and version: one resource's rows are together.
    for (std::size_t begin = 0; begin < rows.size();) {
      std::size_t end = begin;
      while (end < rows.size() && rows[end].type == rows[begin].type && rows[end].name == rows[begin].name) ++end;
      store::ResourceVersionRecord* staged = nullptr;
      store::ResourceVersionRecord* active = nullptr;
      for (std::size_t i = begin; i < end; ++i) {
        if (rows[i].state == "staged") staged = &rows[i];
        if (rows[i].state == "active") active = &rows[i];
      }
      if (staged) {
        Activation a;
        a.type = staged->type;
        a.name = staged->name;
        a.version = staged->version;
        // The active one retires first: at most one is active at any statement.
        if (active) {
          active->state = "retired";
          active->retired_at_ms = now;
          a.retired = active->version;
          WEFT_RETURN_IF_ERROR(store_.UpdateResourceVersion(*active));
        }
        staged->state = "active";
        staged->activated_at_ms = now;
        WEFT_RETURN_IF_ERROR(store_.UpdateResourceVersion(*staged));
        WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << ResourceName(a.type, a.name) << " version "
                              << a.version << " is active"
                              << (a.retired ? " (version " + std::to_string(*a.retired) + " retired)" : std::string());
        out.push_back(std::move(a));
      }
      begin = end;
    }
    return out;
  });
}

Result<std::vector<std::int64_t>> DatabaseResourceStore::Delete(const std::string& tenant, const std::string& type,
                                                                const std::string& name,
                                                                std::optional<std::int64_t> version) {
  return InTransaction(store_, *this, [&]() -> Result<std::vector<std::int64_t>> {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> versions, Versions(tenant, type, name));
    const std::string what = ResourceName(type, name);
    if (version) {
      WEFT_ASSIGN_OR_RETURN(store::ResourceVersionRecord v, Version(tenant, type, name, *version));
      if (v.state == "active")
        return Status::Conflict(VersionText(type, name, *version) +
                                " is active; recall it first (weft resource recall " + type + " " + name + ")");
      WEFT_RETURN_IF_ERROR(store_.DeleteResourceVersion(v));
      return std::vector<std::int64_t>{*version};
    }
    std::vector<std::int64_t> removed;
    for (const store::ResourceVersionRecord& v : versions) {
      if (v.state == "active")
        return Status::Conflict("resource " + what + " has an active version (" + std::to_string(v.version) +
                                "); recall it first (weft resource recall " + type + " " + name + ")");
      removed.push_back(v.version);
    }
    WEFT_RETURN_IF_ERROR(store_.DeleteResource(tenant, type, name));
    WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << what << " deleted";
    return removed;
  });
}

Result<std::vector<ActiveVersion>*> DatabaseResourceStore::ActiveOf(const std::string& tenant) {
  auto it = active_.find(tenant);
  if (it != active_.end()) return &it->second;
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> rows, store_.ListActiveResourceVersions(tenant));
  std::vector<ActiveVersion> list;
  list.reserve(rows.size());
  for (store::ResourceVersionRecord& r : rows)
    list.push_back(ActiveVersion{std::move(r.type), std::move(r.name), r.version, std::move(r.digest), r.size_bytes});
  return &active_.emplace(tenant, std::move(list)).first->second;
}

Result<std::vector<ActiveVersion>> DatabaseResourceStore::Active(const std::string& tenant,
                                                                 const std::vector<std::string>& types) {
  WEFT_ASSIGN_OR_RETURN(std::vector<ActiveVersion> * all, ActiveOf(tenant));
  if (types.empty()) return *all;
  std::vector<ActiveVersion> out;
  auto collect = [&](const std::string& type) {
    if (type.empty()) return;
    auto first = std::lower_bound(all->begin(), all->end(), type,
                                  [](const ActiveVersion& a, const std::string& t) { return a.type < t; });
    for (auto it = first; it != all->end() && it->type == type; ++it) out.push_back(*it);
  };
  if (types.size() == 1) {
    // A take's one type: nothing to sort or copy (and, when it has none, nothing allocated).
    collect(types[0]);
    return out;
  }
  std::vector<std::string> sorted = types;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (const std::string& type : sorted) collect(type);
  return out;
}

Result<Chunk> DatabaseResourceStore::Read(const std::string& tenant, const std::string& type, const std::string& name,
                                          std::int64_t version, std::int64_t offset, std::int64_t max_bytes) {
  WEFT_ASSIGN_OR_RETURN(store::ResourceVersionRecord v, Version(tenant, type, name, version));
  if (offset < 0 || offset > v.size_bytes)
    return Status::Invalid("offset " + std::to_string(offset) + " is outside " + VersionText(type, name, version) +
                           ", which has " + std::to_string(v.size_bytes) + " bytes");
  if (max_bytes < 1) return Status::Invalid("max_bytes must be at least 1");
  Chunk c;
  c.offset = offset;
  c.size_bytes = v.size_bytes;
  c.digest = v.digest;
  const std::int64_t want = std::min(max_bytes, v.size_bytes - offset);
  if (want > 0) {
    WEFT_ASSIGN_OR_RETURN(c.bytes, store_.ReadResourceContent(v.content_id, offset, want));
  }
  if (static_cast<std::int64_t>(c.bytes.size()) != want)
    return Status::Internal("the content of " + VersionText(type, name, version) + " of tenant '" + tenant +
                            "' in the store is shorter than the " + std::to_string(v.size_bytes) +
                            " bytes its version records; its rows were changed behind weftd's back");
  c.eof = offset + want == v.size_bytes;
  return c;
}

Result<DatabaseResourceStore::Imported> DatabaseResourceStore::ImportFiles(const fs::path& root) {
  Imported report;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return report;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<FileResourceStore> files, FileResourceStore::Open(root, clock_, options_));
  const std::vector<std::string> tenants = files->Tenants();
  Status copied = InTransaction(store_, *this, [&]() -> Result<bool> {
    for (const std::string& tenant : tenants) {
      WEFT_ASSIGN_OR_RETURN(std::vector<ResourceInfo> resources, files->List(tenant, ""));
      for (const ResourceInfo& r : resources) {
        const std::string what = "tenant '" + tenant + "': " + ResourceName(r.type, r.name) + " (" +
                                 std::to_string(r.versions.size()) + " version(s))";
        WEFT_ASSIGN_OR_RETURN(bool exists, store_.ResourceExists(tenant, r.type, r.name));
        std::string replaced;
        if (exists) {
          // The store's copy is kept unless it is an older one of the files' (an export's, since changed).
          WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> rows,
                                store_.ListResourceVersions(tenant, r.type, r.name));
          std::vector<VersionInfo> stored;
          for (const store::ResourceVersionRecord& row : rows) stored.push_back(Info(row));
          if (Compare(stored, r.versions) != Copy::kOlder) {
            report.skipped.push_back(what);
            continue;
          }
          replaced = ", replacing the store's older copy (" + VersionsText(stored) + ")";
          WEFT_RETURN_IF_ERROR(store_.DeleteResource(tenant, r.type, r.name));
        }
        // After the highest number the files ever gave, not only the highest they still have.
        std::int64_t next = files->NextVersion(tenant, r.type, r.name);
        for (const VersionInfo& v : r.versions) {
          store::ResourceVersionRecord row;
          row.tenant = tenant;
          row.type = r.type;
          row.name = r.name;
          row.version = v.version;
          row.state = std::string(VersionStateName(v.state));
          row.size_bytes = v.size_bytes;
          row.digest = v.digest;
          row.created_at_ms = v.created_at_ms;
          row.created_by = v.created_by;
          row.activated_at_ms = v.activated_at_ms;
          row.retired_at_ms = v.retired_at_ms;
          row.content_id = RandomHex(16);
          digest::Sha256 hash;
          std::int64_t at = 0;
          while (at < v.size_bytes || (at == 0 && v.size_bytes == 0)) {
            WEFT_ASSIGN_OR_RETURN(Chunk c, files->Read(tenant, r.type, r.name, v.version, at,
                                                       store::Store::kResourceRowBytes));
            WEFT_RETURN_IF_ERROR(store_.AppendResourceContent(row.content_id, at, c.bytes));
            hash.Update(c.bytes);
            at += static_cast<std::int64_t>(c.bytes.size());
            if (c.eof) break;
          }
          WEFT_ASSIGN_OR_RETURN(std::string got, hash.Finish());
          if (got != v.digest)
            return Status::Invalid("the file of " + VersionText(r.type, r.name, v.version) + " of tenant '" + tenant +
                                   "' under " + root.string() + " has the digest " + got + ", not the " + v.digest +
                                   " its manifest records; restore the file or delete the version, then start "
                                   "weftd again");
          WEFT_RETURN_IF_ERROR(store_.InsertResourceVersion(row));
          next = std::max(next, v.version + 1);
        }
        WEFT_RETURN_IF_ERROR(store_.RaiseResourceVersion(tenant, r.type, r.name, next));
        report.imported.push_back(what + replaced);
      }
    }
    // The names deleted whole there keep their counters here too.
    for (const FileResourceStore::DeletedName& d : files->DeletedNames())
      WEFT_RETURN_IF_ERROR(store_.KeepResourceNumbering(d.tenant, d.type, d.name, d.next_version));
    return true;
  }).status();
  if (!copied.ok())
    return copied.WithContext("cannot import the resource files under " + root.string() + " into the store");
  active_.clear();
  if (report.imported.empty() && report.skipped.empty()) return report;
  fs::path moved = root;
  moved += ".imported";
  if (fs::exists(moved, ec)) moved += "-" + std::to_string(clock_.NowMs());
  fs::rename(root, moved, ec);
  if (ec)
    return Status::Internal("imported the resource files under " + root.string() +
                            " into the store, but cannot rename the directory to " + moved.string() + ": " +
                            ec.message() + "; move it away yourself, or weftd imports what the store lacks again");
  report.moved_to = moved;
  return report;
}

Result<DatabaseResourceStore::Exported> DatabaseResourceStore::ExportFiles(FileResourceStore& files) {
  Exported report;
  const fs::path root = files.root();
  const fs::path marker = root / kExportMarker;
  std::error_code ec;
  if (fs::exists(marker, ec)) return report;
  struct Planned {
    std::string tenant, type, name, what;
    std::vector<VersionInfo> versions;
    std::map<std::int64_t, std::string> content;  // version -> content id
    Copy copy = Copy::kSame;
    std::int64_t next_version = 1;  // the store's counter: numbers deleted from the top stay given
  };
  std::vector<Planned> plan;
  std::vector<std::string> differ;
  // One read transaction: the store's resources as one commit left them.
  Status done = InTransaction(store_, *this, [&]() -> Result<bool> {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::TenantRecord> tenants, store_.ListTenants());
    for (const store::TenantRecord& t : tenants) {
      WEFT_ASSIGN_OR_RETURN(std::vector<store::ResourceVersionRecord> rows, store_.ListResourceVersions(t.name, "", ""));
      for (const store::ResourceVersionRecord& r : rows) {
        if (plan.empty() || plan.back().tenant != t.name || plan.back().type != r.type || plan.back().name != r.name)
          plan.push_back(Planned{t.name, r.type, r.name, "", {}, {}, Copy::kSame, 1});
        plan.back().versions.push_back(Info(r));
        plan.back().content[r.version] = r.content_id;
      }
    }
    for (Planned& p : plan) {
      WEFT_ASSIGN_OR_RETURN(p.next_version, store_.ResourceNextVersion(p.tenant, p.type, p.name));
      p.what = "tenant '" + p.tenant + "': " + ResourceName(p.type, p.name) + " (" + std::to_string(p.versions.size()) +
               " version(s))";
      const std::vector<VersionInfo>* have = files.Versions(p.tenant, p.type, p.name);
      if (!have) {
        p.copy = Copy::kOlder;  // none at all
        continue;
      }
      p.copy = Compare(*have, p.versions);
      if (p.copy == Copy::kNewer) p.what += " (the directory's copy is newer: " + VersionsText(*have) + ")";
      if (p.copy == Copy::kDifferent)
        differ.push_back("tenant '" + p.tenant + "': " + ResourceName(p.type, p.name) + " (the store: " +
                         VersionsText(p.versions) + "; the directory: " + VersionsText(*have) + ")");
    }
    if (!differ.empty()) return true;
    for (const Planned& p : plan) {
      if (p.copy == Copy::kSame || p.copy == Copy::kNewer) {
        report.same.push_back(p.what);
        continue;
      }
      const std::vector<VersionInfo>* have = files.Versions(p.tenant, p.type, p.name);
      const std::string had = have ? VersionsText(*have) : std::string();
      WEFT_RETURN_IF_ERROR(files.Adopt(
          p.tenant, p.type, p.name, p.versions, p.next_version,
          [&](const VersionInfo& v, const FileResourceStore::ContentWriter& write) -> Status {
            Status written;
            WEFT_ASSIGN_OR_RETURN(std::int64_t bytes,
                                  store_.VisitResourceContent(p.content.at(v.version), [&](std::string_view b) {
                                    if (written.ok()) written = write(b);
                                  }));
            (void)bytes;
            return written;
          }));
      if (had.empty()) {
        report.exported.push_back(p.what);
      } else {
        report.replaced.push_back(p.what + ", replacing the directory's older copy (" + had + ")");
      }
    }
    // The names deleted whole in the store keep their counters in the files too.
    for (const store::TenantRecord& t : tenants) {
      WEFT_ASSIGN_OR_RETURN(auto deleted, store_.ListDeletedResourceNames(t.name));
      for (const auto& [type_name, next] : deleted)
        WEFT_RETURN_IF_ERROR(files.KeepNumbering(t.name, type_name.first, type_name.second, next));
    }
    return true;
  }).status();
  if (!done.ok()) return done.WithContext("cannot export the store's resources into " + root.string());
  if (!differ.empty()) {
    std::string list;
    for (const std::string& d : differ) list += (list.empty() ? "" : "; ") + d;
    return Status::Conflict(
        "weftd keeps resources as files ([store] resources = \"files\") and copies those of the store's tables "
        "into " + root.string() + " when the directory lacks them or has an older copy, but the store and the "
        "directory hold different copies of " + std::to_string(differ.size()) + " resource(s), neither older than "
        "the other: " + list + ". weftd will not choose: to keep the store's copy, move the resource's directory "
        "(" + root.string() + "/<tenant>/<type>/<name>) out of " + root.string() + "; to keep the directory's "
        "copies, create the file " + marker.string() + " (weftd then compares nothing and copies nothing more from "
        "the store); or start with [store] resources = \"database\" to serve the store's. Nothing was copied; "
        "then start weftd again");
  }
  if (plan.empty()) return report;
  nlohmann::json record = {{"exported_at_ms", clock_.NowMs()},
                           {"exported", report.exported},
                           {"replaced", report.replaced},
                           {"same", report.same}};
  std::ofstream out(marker, std::ios::binary | std::ios::trunc);
  out << record.dump(2) << "\n";
  out.close();
  if (!out)
    return Status::Internal("exported the store's resources into " + root.string() + " but cannot write " +
                            marker.string() + "; create it yourself, or weftd compares the two again at its next "
                            "start");
  report.marked = marker;
  return report;
}

}  // namespace weft::resources
