#include "weft/server/resources/resource_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "weft/common/digest.hpp"
#include "weft/common/log.hpp"

namespace weft::resources {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kLog = "resources";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kUploads = "uploads";
constexpr const char* kTrashPrefix = ".trash-";
constexpr int kManifestFormat = 1;

// `var` is the value of a Result, or the function returns its error.
#define WEFT_TRY_ASSIGN_RES(var, expr)                    \
  auto var##_result = (expr);                             \
  if (!var##_result.ok()) return var##_result.status();   \
  auto var = std::move(*var##_result)

std::string Errno() { return std::strerror(errno); }

bool IsLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }


// A tenant is any string of at most 128 bytes; as a directory name it keeps
// [A-Za-z0-9_-] and writes every other byte (and so any '.') as %XX.
std::string EncodeTenant(std::string_view tenant) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : tenant) {
    if (IsAlnum(c) || c == '_' || c == '-') {
      out.push_back(c);
    } else {
      const auto b = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xF]);
    }
  }
  return out;
}

std::optional<std::string> DecodeTenant(std::string_view dir) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < dir.size(); ++i) {
    if (dir[i] != '%') {
      out.push_back(dir[i]);
      continue;
    }
    if (i + 2 >= dir.size()) return std::nullopt;
    int hi = hex(dir[i + 1]), lo = hex(dir[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

Status FsyncPath(const fs::path& path, bool directory) {
  int fd = open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + path.string() + " to sync it: " + Errno());
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc != 0) return Status::Internal("cannot sync " + path.string() + ": " + std::strerror(e));
  return Status::Ok();
}

Status WriteAll(int fd, std::string_view bytes, const fs::path& path) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Internal("cannot write " + path.string() + ": " + Errno());
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

// Writes `content` to a temporary file next to `path`, syncs it, renames it
// over `path` and syncs the directory: a reader sees the old file or the new
// one, never a mix, and the new one survives a crash once this returns.
Status ReplaceFileDurably(const fs::path& path, std::string_view content) {
  fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp." + RandomHex(8));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot create " + tmp.string() + ": " + Errno());
  Status s = WriteAll(fd, content, tmp);
  if (s.ok() && fsync(fd) != 0) s = Status::Internal("cannot sync " + tmp.string() + ": " + Errno());
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + Errno());
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  return FsyncPath(path.parent_path(), true);
}

VersionState StateFromName(std::string_view name, bool* ok) {
  *ok = true;
  if (name == "inactive") return VersionState::kInactive;
  if (name == "staged") return VersionState::kStaged;
  if (name == "active") return VersionState::kActive;
  if (name == "retired") return VersionState::kRetired;
  *ok = false;
  return VersionState::kInactive;
}

json VersionJson(const VersionInfo& v) {
  return {{"version", v.version},
          {"state", VersionStateName(v.state)},
          {"size", v.size_bytes},
          {"digest", v.digest},
          {"created_at_ms", v.created_at_ms},
          {"created_by", v.created_by},
          {"activated_at_ms", v.activated_at_ms},
          {"retired_at_ms", v.retired_at_ms}};
}

std::string VersionText(std::string_view type, std::string_view name, std::int64_t version) {
  return "version " + std::to_string(version) + " of resource " + ResourceName(type, name);
}

// A version that is staged and then unstaged goes back to what it was.
VersionState Unstaged(const VersionInfo& v) {
  return v.activated_at_ms > 0 ? VersionState::kRetired : VersionState::kInactive;
}

}  // namespace

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kInactive: return "inactive";
    case VersionState::kStaged: return "staged";
    case VersionState::kActive: return "active";
    case VersionState::kRetired: return "retired";
  }
  return "inactive";
}

std::string RandomHex(std::size_t digits) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < digits; ++i) out.push_back(kHex[rng() & 0xF]);
  return out;
}

bool ValidUploadId(std::string_view id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) { return IsLower(c) && !(c > 'f'); });
}

std::string ResourceName(std::string_view type, std::string_view name) {
  return std::string(type) + "/" + std::string(name);
}

Status ValidateType(std::string_view type, std::string_view path) {
  bool ok = !type.empty() && type.size() <= 64 && IsLower(type[0]) &&
            std::all_of(type.begin(), type.end(), [](char c) { return IsLower(c) || c == '_' || c == '.' || c == '-'; });
  if (ok) return Status::Ok();
  return Status::Invalid(std::string(path) + " must be a plugin type name: 1 to 64 characters [a-z0-9_.-] starting "
                         "with a letter or digit (e.g. \"shell\", or \"" + std::string(kLuaPluginType) +
                         "\" for a Lua plugin), got \"" + std::string(type.substr(0, 100)) + "\"");
}

Status ValidateName(std::string_view type, std::string_view name, std::string_view path) {
  bool ok = !name.empty() && name.size() <= 128 && (IsAlnum(name[0]) || name[0] == '_') &&
            std::all_of(name.begin(), name.end(),
                        [](char c) { return IsAlnum(c) || c == '_' || c == '.' || c == '+' || c == '-'; });
  if (!ok)
    return Status::Invalid(std::string(path) + " must be a file name: 1 to 128 characters [A-Za-z0-9_.+-] not "
                           "starting with '.', '+' or '-' (e.g. \"install-nginx.sh\"), got \"" +
                           std::string(name.substr(0, 100)) + "\"");
  if (type == kLuaPluginType && (name.size() <= 4 || name.substr(name.size() - 4) != ".lua"))
    return Status::Invalid(std::string(path) + " of a " + std::string(kLuaPluginType) +
                           " resource must end in \".lua\" (hosts load it as a Lua plugin file), got \"" +
                           std::string(name) + "\"");
  return Status::Ok();
}

// ---- FileResourceStore -----------------------------------------------------

FileResourceStore::FileResourceStore(fs::path root, const Clock& clock, FileStoreOptions options)
    : root_(std::move(root)), clock_(clock), options_(options) {}

Result<std::unique_ptr<FileResourceStore>> FileResourceStore::Open(const fs::path& root, const Clock& clock,
                                                                   FileStoreOptions options) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return Status::Unavailable("cannot create the resource directory " + root.string() + ": " + ec.message() +
                               "; check the permissions of the data directory");
  std::unique_ptr<FileResourceStore> store(new FileResourceStore(root, clock, options));
  WEFT_RETURN_IF_ERROR(store->Load());
  return store;
}

fs::path FileResourceStore::Dir(const Key& key) const {
  return root_ / EncodeTenant(std::get<0>(key)) / std::get<1>(key) / std::get<2>(key);
}

fs::path FileResourceStore::VersionPath(const std::string& tenant, const std::string& type, const std::string& name,
                                        std::int64_t version) const {
  return Dir({tenant, type, name}) / ("v" + std::to_string(version));
}

Status FileResourceStore::Load() {
  resources_.clear();
  deleted_.clear();
  const std::int64_t now = clock_.NowMs();
  std::error_code ec;
  auto subdirs = [&](const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code e;
    for (fs::directory_iterator it(dir, e), end; !e && it != end; it.increment(e))
      if (it->is_directory(e)) out.push_back(it->path());
    return out;
  };
  auto trash = [](const fs::path& p) {
    std::error_code e;
    if (p.filename().string().rfind(kTrashPrefix, 0) == 0) {
      fs::remove_all(p, e);  // a delete interrupted after its rename
      return true;
    }
    return false;
  };
  for (const fs::path& tenant_dir : subdirs(root_)) {
    std::optional<std::string> tenant = DecodeTenant(tenant_dir.filename().string());
    if (!tenant || EncodeTenant(*tenant) != tenant_dir.filename().string()) {
      WEFT_LOG(kWarn, kLog) << "ignoring " << tenant_dir.string() << ": not a tenant directory of the resource store";
      continue;
    }
    for (const fs::path& type_dir : subdirs(tenant_dir)) {
      const std::string type = type_dir.filename().string();
      if (!ValidateType(type, "type").ok()) {
        WEFT_LOG(kWarn, kLog) << "ignoring " << type_dir.string() << ": not a resource type directory";
        continue;
      }
      for (const fs::path& dir : subdirs(type_dir)) {
        if (trash(dir)) continue;
        const std::string name = dir.filename().string();
        if (!ValidateName(type, name, "name").ok()) {
          WEFT_LOG(kWarn, kLog) << "ignoring " << dir.string() << ": not a resource directory";
          continue;
        }
        // Uploads nobody finished.
        const fs::path uploads = dir / kUploads;
        for (fs::directory_iterator it(uploads, ec), end; !ec && it != end; it.increment(ec)) {
          struct stat st {};
          if (stat(it->path().c_str(), &st) != 0) continue;
          const std::int64_t mtime_ms = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000;
          if (now - mtime_ms > options_.abandoned_upload_ms) {
            std::error_code e;
            fs::remove(it->path(), e);
            WEFT_LOG(kInfo, kLog) << "removed the abandoned upload " << it->path().string();
          }
        }
        ec.clear();
        std::error_code e;
        fs::remove(uploads, e);  // only if empty
        const fs::path manifest = dir / kManifest;
        Resource r;
        bool deleted = false;  // a resource deleted whole: its manifest keeps only the counter
        bool has_manifest = fs::exists(manifest, e);
        if (has_manifest) {
          std::ifstream in(manifest, std::ios::binary);
          std::stringstream text;
          text << in.rdbuf();
          json m = json::parse(text.str(), nullptr, false);
          auto bad = [&](const std::string& why) {
            return Status::Internal("the resource manifest " + manifest.string() + " is unreadable (" + why +
                                    "); restore it from a backup or remove the directory " + dir.string());
          };
          if (!m.is_object() || !m.contains("versions") || !m["versions"].is_array()) return bad("not a manifest");
          try {
            if (m.value("format", 0) != kManifestFormat) return bad("unknown format");
            r.next_version = m.at("next_version").get<std::int64_t>();
            deleted = m.value("deleted", false);
            for (const json& j : m["versions"]) {
              VersionInfo v;
              v.version = j.at("version").get<std::int64_t>();
              bool ok = false;
              v.state = StateFromName(j.at("state").get<std::string>(), &ok);
              if (!ok) return bad("unknown state of version " + std::to_string(v.version));
              v.size_bytes = j.at("size").get<std::int64_t>();
              v.digest = j.at("digest").get<std::string>();
              v.created_at_ms = j.value("created_at_ms", std::int64_t{0});
              v.created_by = j.value("created_by", std::string());
              v.activated_at_ms = j.value("activated_at_ms", std::int64_t{0});
              v.retired_at_ms = j.value("retired_at_ms", std::int64_t{0});
              r.versions.push_back(std::move(v));
            }
          } catch (const json::exception& ex) {
            return bad(ex.what());
          }
          std::sort(r.versions.begin(), r.versions.end(),
                    [](const VersionInfo& a, const VersionInfo& b) { return a.version < b.version; });
        }
        // Files no manifest entry owns: a version whose manifest write never
        // happened (crash), a deleted version's file, temporary manifests.
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
          const std::string f = it->path().filename().string();
          if (f == kManifest || f == kUploads) continue;
          bool owned = false;
          if (f.size() > 1 && f[0] == 'v') {
            for (const VersionInfo& v : r.versions)
              if (f == "v" + std::to_string(v.version)) owned = true;
          }
          if (!owned) {
            fs::remove_all(it->path(), e);
            WEFT_LOG(kInfo, kLog) << "removed " << it->path().string() << ": no version of the manifest owns it";
          }
        }
        ec.clear();
        if (!has_manifest) {
          fs::remove(dir, e);  // only if empty (an upload may still be in progress)
          continue;
        }
        for (const VersionInfo& v : r.versions) r.next_version = std::max(r.next_version, v.version + 1);
        if (deleted) {
          deleted_[Key{*tenant, type, name}] = r.next_version;
          continue;
        }
        resources_[Key{*tenant, type, name}] = std::move(r);
      }
    }
  }
  WEFT_LOG(kInfo, kLog) << resources_.size() << " resource(s) in " << root_.string();
  return Status::Ok();
}

Result<FileResourceStore::Resource*> FileResourceStore::Find(const Key& key) {
  WEFT_RETURN_IF_ERROR(ValidateType(std::get<1>(key), "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(std::get<1>(key), std::get<2>(key), "name"));
  auto it = resources_.find(key);
  if (it == resources_.end())
    return Status::NotFound("resource " + ResourceName(std::get<1>(key), std::get<2>(key)) +
                            " does not exist in tenant '" + std::get<0>(key) + "'; upload it first");
  return &it->second;
}

Status FileResourceStore::WriteManifest(const Key& key, const Resource& resource, bool deleted) {
  json versions = json::array();
  for (const VersionInfo& v : resource.versions) versions.push_back(VersionJson(v));
  json m = {{"format", kManifestFormat},
            {"tenant", std::get<0>(key)},
            {"type", std::get<1>(key)},
            {"name", std::get<2>(key)},
            {"next_version", resource.next_version},
            {"versions", std::move(versions)}};
  if (deleted) m["deleted"] = true;
  return ReplaceFileDurably(Dir(key) / kManifest, m.dump(2) + "\n");
}

Result<UploadProgress> FileResourceStore::Upload(const UploadChunk& chunk) {
  WEFT_RETURN_IF_ERROR(ValidateType(chunk.type, "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(chunk.type, chunk.name, "name"));
  const Key key{chunk.tenant, chunk.type, chunk.name};
  const std::string what = ResourceName(chunk.type, chunk.name);
  const fs::path uploads = Dir(key) / kUploads;
  const auto size = static_cast<std::int64_t>(chunk.bytes.size());
  if (chunk.offset < 0) return Status::Invalid("offset must not be negative");
  if (chunk.offset + size > options_.max_size_bytes) {
    if (!chunk.upload_id.empty() && ValidUploadId(chunk.upload_id)) {
      std::error_code e;
      fs::remove(uploads / (chunk.upload_id + ".part"), e);
    }
    return Status::TooLarge("resource " + what + " would be larger than " + std::to_string(options_.max_size_bytes) +
                            " bytes, the most one version may hold; the upload was discarded");
  }
  std::string id = chunk.upload_id;
  fs::path part;
  if (id.empty()) {
    if (chunk.offset != 0)
      return Status::Invalid("a new upload of " + what + " starts at offset 0, not " + std::to_string(chunk.offset) +
                             "; to continue an upload, send its upload_id");
    std::error_code ec;
    fs::create_directories(uploads, ec);
    if (ec) return Status::Internal("cannot create " + uploads.string() + ": " + ec.message());
    id = RandomHex(16);
    part = uploads / (id + ".part");
    const std::int64_t now = clock_.NowMs();
    std::erase_if(pending_, [&](const auto& p) { return now - p.second.touched_ms > options_.abandoned_upload_ms; });
    int fd = open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::Internal("cannot create " + part.string() + ": " + Errno());
    Status s = WriteAll(fd, chunk.bytes, part);
    close(fd);
    if (!s.ok()) {
      unlink(part.c_str());
      return s;
    }
    Pending& p = pending_[id];
    p.hash.Update(chunk.bytes);
    p.received = size;
    p.touched_ms = now;
  } else {
    if (!ValidUploadId(id))
      return Status::Invalid("upload_id must be the 16 hex digits the first chunk's reply gave, got \"" +
                             id.substr(0, 100) + "\"");
    part = uploads / (id + ".part");
    struct stat st {};
    if (stat(part.c_str(), &st) != 0) {
      // A repeated final chunk (its reply was lost) gets the same answer again.
      auto done = finished_.find(id);
      if (done != finished_.end() && done->second.key == key && chunk.final) {
        Result<std::string> digest = digest::NormalizeSha256(chunk.digest, "digest");
        if (digest.ok() && *digest == done->second.digest) {
          Result<VersionInfo> v = Get(chunk.tenant, chunk.type, chunk.name, done->second.version);
          if (v.ok()) return UploadProgress{id, v->size_bytes, *v};
        }
      }
      return Status::NotFound("upload " + id + " of " + what + " is not in progress: it was finished, discarded, " +
                              "or abandoned; start the upload again without upload_id");
    }
    if (st.st_size != chunk.offset)
      return Status::Conflict("upload " + id + " of " + what + " has received " + std::to_string(st.st_size) +
                              " bytes, so the next chunk starts at offset " + std::to_string(st.st_size) + ", not " +
                              std::to_string(chunk.offset));
    int fd = open(part.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return Status::Internal("cannot open " + part.string() + ": " + Errno());
    Status s = WriteAll(fd, chunk.bytes, part);
    close(fd);
    if (!s.ok()) {
      // A partial append would shift every later chunk: drop the upload.
      unlink(part.c_str());
      pending_.erase(id);
      return s.WithContext("upload " + id + " of " + what + " was discarded");
    }
    auto p = pending_.find(id);
    if (p != pending_.end() && p->second.received == chunk.offset) {
      p->second.hash.Update(chunk.bytes);
      p->second.received += size;
      p->second.touched_ms = clock_.NowMs();
    } else if (p != pending_.end()) {
      pending_.erase(p);  // out of step: the final chunk reads the file instead
    }
  }
  const std::int64_t received = chunk.offset + size;
  if (!chunk.final) return UploadProgress{id, received, std::nullopt};
  return Finish(key, id, part, chunk, received);
}

Result<UploadProgress> FileResourceStore::Finish(const Key& key, const std::string& upload_id, const fs::path& part,
                                                 const UploadChunk& chunk, std::int64_t received) {
  const std::string what = ResourceName(chunk.type, chunk.name);
  auto discard = [&](Status s) {
    unlink(part.c_str());
    pending_.erase(upload_id);
    return s;
  };
  if (chunk.digest.empty())
    return discard(Status::Invalid("the final chunk of an upload must carry \"digest\", the SHA-256 of the whole "
                                   "file (\"sha256:<hex>\"); upload " + upload_id + " of " + what +
                                   " was discarded"));
  Result<std::string> claimed = digest::NormalizeSha256(chunk.digest, "digest");
  if (!claimed.ok()) return discard(claimed.status());
  WEFT_RETURN_IF_ERROR(FsyncPath(part, false));
  Result<digest::FileDigest> got = Status::Internal("not computed");
  auto p = pending_.find(upload_id);
  if (p != pending_.end() && p->second.received == received) {
    struct stat st {};
    Result<std::string> d = p->second.hash.Finish();
    if (d.ok() && stat(part.c_str(), &st) == 0) got = digest::FileDigest{*d, static_cast<std::int64_t>(st.st_size)};
    pending_.erase(p);
  }
  if (!got.ok()) got = digest::Sha256OfFile(part);  // weftd restarted during the upload
  if (!got.ok()) return discard(got.status());
  if (got->size_bytes != received)
    return discard(Status::Internal("upload " + upload_id + " of " + what + " holds " +
                                    std::to_string(got->size_bytes) + " bytes but " + std::to_string(received) +
                                    " were received; it was discarded"));
  if (chunk.size_bytes && *chunk.size_bytes != got->size_bytes)
    return discard(Status::Invalid("the upload of " + what + " was announced as " +
                                   std::to_string(*chunk.size_bytes) + " bytes but " +
                                   std::to_string(got->size_bytes) +
                                   " arrived: chunks were lost; the upload was discarded, upload the file again"));
  if (got->digest != *claimed)
    return discard(Status::Invalid("digest mismatch for the upload of " + what + ": the server computed " +
                                   got->digest + " over the " + std::to_string(got->size_bytes) +
                                   " bytes it received, the client said " + *claimed +
                                   "; the file changed or was damaged on the way. The upload was discarded; upload "
                                   "the file again"));

  auto existing = resources_.find(key);
  Resource next = existing != resources_.end() ? existing->second : Resource{};
  // A name deleted whole goes on from its counter: a number never names two contents.
  if (existing == resources_.end()) next.next_version = NextVersion(chunk.tenant, chunk.type, chunk.name);
  const std::int64_t version = next.next_version;
  const fs::path data = Dir(key) / ("v" + std::to_string(version));
  if (rename(part.c_str(), data.c_str()) != 0)
    return discard(Status::Internal("cannot rename " + part.string() + " to " + data.string() + ": " + Errno()));
  Status s = FsyncPath(Dir(key), true);
  VersionInfo v;
  v.version = version;
  v.state = VersionState::kInactive;
  v.size_bytes = got->size_bytes;
  v.digest = got->digest;
  v.created_at_ms = clock_.NowMs();
  v.created_by = chunk.user;
  next.versions.push_back(v);
  next.next_version = version + 1;
  if (s.ok()) s = WriteManifest(key, next);
  if (!s.ok()) {
    unlink(data.c_str());
    return s.WithContext("the upload of " + what + " could not be recorded");
  }
  resources_[key] = std::move(next);
  deleted_.erase(key);
  std::error_code ec;
  fs::remove(Dir(key) / kUploads, ec);  // only if empty
  finished_[upload_id] = Finished{key, version, got->digest};
  finished_order_.push_back(upload_id);
  if (finished_order_.size() > options_.remembered_uploads) {
    finished_.erase(finished_order_.front());
    finished_order_.erase(finished_order_.begin());
  }
  WEFT_LOG(kInfo, kLog) << "tenant '" << chunk.tenant << "': resource " << what << " version " << version << " ("
                        << v.size_bytes << " bytes, " << v.digest << ") uploaded by " << chunk.user;
  return UploadProgress{upload_id, received, v};
}

std::vector<std::string> FileResourceStore::Tenants() const {
  std::vector<std::string> out;
  for (const auto& [key, resource] : resources_)
    if (out.empty() || out.back() != std::get<0>(key)) out.push_back(std::get<0>(key));
  return out;
}

std::int64_t FileResourceStore::NextVersion(const std::string& tenant, const std::string& type,
                                            const std::string& name) const {
  const Key key{tenant, type, name};
  if (auto it = resources_.find(key); it != resources_.end()) return it->second.next_version;
  auto gone = deleted_.find(key);
  return gone == deleted_.end() ? 1 : gone->second;
}

std::vector<FileResourceStore::DeletedName> FileResourceStore::DeletedNames() const {
  std::vector<DeletedName> out;
  for (const auto& [key, next] : deleted_)
    out.push_back(DeletedName{std::get<0>(key), std::get<1>(key), std::get<2>(key), next});
  return out;
}

Status FileResourceStore::KeepNumbering(const std::string& tenant, const std::string& type, const std::string& name,
                                        std::int64_t next_version) {
  WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(type, name, "name"));
  const Key key{tenant, type, name};
  if (next_version <= NextVersion(tenant, type, name)) return Status::Ok();
  if (auto it = resources_.find(key); it != resources_.end()) {
    Resource r = it->second;
    r.next_version = next_version;
    WEFT_RETURN_IF_ERROR(WriteManifest(key, r));
    it->second = std::move(r);
    return Status::Ok();
  }
  std::error_code ec;
  fs::create_directories(Dir(key), ec);
  if (ec) return Status::Internal("cannot create " + Dir(key).string() + ": " + ec.message());
  Resource gone;
  gone.next_version = next_version;
  WEFT_RETURN_IF_ERROR(WriteManifest(key, gone, /*deleted=*/true));
  deleted_[key] = next_version;
  return Status::Ok();
}

const std::vector<VersionInfo>* FileResourceStore::Versions(const std::string& tenant, const std::string& type,
                                                            const std::string& name) const {
  auto it = resources_.find(Key{tenant, type, name});
  return it == resources_.end() ? nullptr : &it->second.versions;
}

Status FileResourceStore::Adopt(const std::string& tenant, const std::string& type, const std::string& name,
                                std::vector<VersionInfo> versions, std::int64_t next_version,
                                const std::function<Status(const VersionInfo& v, const ContentWriter& write)>& content) {
  WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  WEFT_RETURN_IF_ERROR(ValidateName(type, name, "name"));
  const Key key{tenant, type, name};
  std::sort(versions.begin(), versions.end(),
            [](const VersionInfo& a, const VersionInfo& b) { return a.version < b.version; });
  const std::vector<VersionInfo>* had = Versions(tenant, type, name);
  std::error_code ec;
  fs::create_directories(Dir(key), ec);
  if (ec) return Status::Internal("cannot create " + Dir(key).string() + ": " + ec.message());
  std::vector<fs::path> written;
  auto undo = [&](Status s) {
    for (const fs::path& p : written) unlink(p.c_str());
    return s;
  };
  for (const VersionInfo& v : versions) {
    const std::string what = VersionText(type, name, v.version) + " of tenant '" + tenant + "'";
    bool kept = false;
    for (const VersionInfo& h : had ? *had : std::vector<VersionInfo>()) {
      if (h.version != v.version) continue;
      if (h.digest != v.digest)
        return undo(Status::Conflict(what + " is " + h.digest + " under " + root_.string() + " but " + v.digest +
                                     " in the store it comes from"));
      kept = true;
    }
    if (kept) continue;
    const fs::path data = Dir(key) / ("v" + std::to_string(v.version));
    const fs::path part = Dir(key) / (".v" + std::to_string(v.version) + ".tmp." + RandomHex(8));
    int fd = open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return undo(Status::Internal("cannot create " + part.string() + ": " + Errno()));
    written.push_back(part);
    digest::Sha256 hash;
    std::int64_t size = 0;
    Status s = content(v, [&](std::string_view bytes) {
      hash.Update(bytes);
      size += static_cast<std::int64_t>(bytes.size());
      return WriteAll(fd, bytes, part);
    });
    if (s.ok() && fsync(fd) != 0) s = Status::Internal("cannot sync " + part.string() + ": " + Errno());
    close(fd);
    if (!s.ok()) return undo(s.WithContext("cannot write " + what));
    Result<std::string> got = hash.Finish();
    if (!got.ok()) return undo(got.status());
    if (*got != v.digest || size != v.size_bytes)
      return undo(Status::Internal(what + " has " + std::to_string(size) + " bytes with the digest " + *got +
                                   " in the store it comes from, which records " + std::to_string(v.size_bytes) +
                                   " bytes and " + v.digest + "; its rows were changed behind weftd's back"));
    if (rename(part.c_str(), data.c_str()) != 0)
      return undo(Status::Internal("cannot rename " + part.string() + " to " + data.string() + ": " + Errno()));
    written.back() = data;
  }
  Resource r;
  r.versions = std::move(versions);
  r.next_version = std::max(next_version, NextVersion(tenant, type, name));
  for (const VersionInfo& v : r.versions) r.next_version = std::max(r.next_version, v.version + 1);
  Status s = FsyncPath(Dir(key), true);
  if (s.ok()) s = WriteManifest(key, r);
  if (!s.ok()) return undo(s);
  resources_[key] = std::move(r);
  deleted_.erase(key);
  return Status::Ok();
}

Result<std::vector<ResourceInfo>> FileResourceStore::List(const std::string& tenant, const std::string& type) {
  if (!type.empty()) WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  std::vector<ResourceInfo> out;
  for (auto it = resources_.lower_bound(Key{tenant, type, ""});
       it != resources_.end() && std::get<0>(it->first) == tenant; ++it) {
    if (!type.empty() && std::get<1>(it->first) != type) break;
    out.push_back(ResourceInfo{std::get<1>(it->first), std::get<2>(it->first), it->second.versions});
  }
  return out;
}

Result<VersionInfo> FileResourceStore::Get(const std::string& tenant, const std::string& type,
                                           const std::string& name, std::int64_t version) {
  WEFT_TRY_ASSIGN_RES(r, Find(Key{tenant, type, name}));
  for (const VersionInfo& v : r->versions)
    if (v.version == version) return v;
  std::string have;
  for (const VersionInfo& v : r->versions) have += (have.empty() ? "" : ", ") + std::to_string(v.version);
  return Status::NotFound(VersionText(type, name, version) + " does not exist in tenant '" + tenant +
                          "' (it has " + (have.empty() ? std::string("none") : "versions " + have) + ")");
}

Result<VersionInfo> FileResourceStore::Stage(const std::string& tenant, const std::string& type,
                                             const std::string& name, std::int64_t version) {
  const Key key{tenant, type, name};
  WEFT_TRY_ASSIGN_RES(r, Find(key));
  WEFT_TRY_ASSIGN_RES(target, Get(tenant, type, name, version));
  if (target.state == VersionState::kStaged) return target;  // staging twice changes nothing
  if (target.state == VersionState::kActive)
    return Status::Conflict(VersionText(type, name, version) + " is already active; there is nothing to stage");
  Resource next = *r;
  VersionInfo staged;
  for (VersionInfo& v : next.versions) {
    if (v.state == VersionState::kStaged) v.state = Unstaged(v);  // one staged version per resource
    if (v.version == version) {
      v.state = VersionState::kStaged;
      staged = v;
    }
  }
  WEFT_RETURN_IF_ERROR(WriteManifest(key, next));
  *r = std::move(next);
  return staged;
}

Result<VersionInfo> FileResourceStore::Recall(const std::string& tenant, const std::string& type,
                                              const std::string& name) {
  const Key key{tenant, type, name};
  WEFT_TRY_ASSIGN_RES(r, Find(key));
  Resource next = *r;
  for (VersionInfo& v : next.versions) {
    if (v.state != VersionState::kActive) continue;
    v.state = VersionState::kRetired;
    v.retired_at_ms = clock_.NowMs();
    VersionInfo recalled = v;
    WEFT_RETURN_IF_ERROR(WriteManifest(key, next));
    *r = std::move(next);
    WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << ResourceName(type, name) << " version "
                          << recalled.version << " recalled";
    return recalled;
  }
  return Status::Conflict("resource " + ResourceName(type, name) + " of tenant '" + tenant +
                          "' has no active version to recall");
}

Result<std::vector<Activation>> FileResourceStore::Sync(const std::string& tenant) {
  std::vector<Activation> out;
  const std::int64_t now = clock_.NowMs();
  for (auto it = resources_.lower_bound(Key{tenant, "", ""});
       it != resources_.end() && std::get<0>(it->first) == tenant; ++it) {
    Resource next = it->second;
    Activation a;
    bool staged = false;
    for (VersionInfo& v : next.versions) {
      if (v.state == VersionState::kActive) {
        v.state = VersionState::kRetired;
        v.retired_at_ms = now;
        a.retired = v.version;
      }
    }
    for (VersionInfo& v : next.versions) {
      if (v.state != VersionState::kStaged) continue;
      v.state = VersionState::kActive;
      v.activated_at_ms = now;
      a.version = v.version;
      staged = true;
    }
    if (!staged) continue;
    // Each resource's manifest is replaced on its own: a crash part-way leaves
    // the rest staged, and the next sync finishes them.
    WEFT_RETURN_IF_ERROR(WriteManifest(it->first, next));
    it->second = std::move(next);
    a.type = std::get<1>(it->first);
    a.name = std::get<2>(it->first);
    WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << ResourceName(a.type, a.name) << " version "
                          << a.version << " is active"
                          << (a.retired ? " (version " + std::to_string(*a.retired) + " retired)" : std::string());
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<std::int64_t>> FileResourceStore::Delete(const std::string& tenant, const std::string& type,
                                                            const std::string& name,
                                                            std::optional<std::int64_t> version) {
  const Key key{tenant, type, name};
  WEFT_TRY_ASSIGN_RES(r, Find(key));
  const std::string what = ResourceName(type, name);
  if (version) {
    WEFT_TRY_ASSIGN_RES(v, Get(tenant, type, name, *version));
    if (v.state == VersionState::kActive)
      return Status::Conflict(VersionText(type, name, *version) +
                              " is active; recall it first (weft resource recall " + type + " " + name + ")");
    Resource next = *r;
    std::erase_if(next.versions, [&](const VersionInfo& x) { return x.version == *version; });
    WEFT_RETURN_IF_ERROR(WriteManifest(key, next));
    *r = std::move(next);
    std::error_code ec;
    fs::remove(Dir(key) / ("v" + std::to_string(*version)), ec);  // an orphan left here goes at the next Open
    return std::vector<std::int64_t>{*version};
  }
  std::vector<std::int64_t> removed;
  for (const VersionInfo& v : r->versions) {
    if (v.state == VersionState::kActive)
      return Status::Conflict("resource " + what + " has an active version (" + std::to_string(v.version) +
                              "); recall it first (weft resource recall " + type + " " + name + ")");
    removed.push_back(v.version);
  }
  // The manifest first: once it says the resource is deleted (keeping its
  // counter, so that an upload of the name later goes on from it), the files
  // are no version's, and any left here go at the next Open.
  Resource gone;
  gone.next_version = r->next_version;
  WEFT_RETURN_IF_ERROR(WriteManifest(key, gone, /*deleted=*/true));
  resources_.erase(key);
  deleted_[key] = gone.next_version;
  const fs::path dir = Dir(key);
  std::error_code ec;
  for (std::int64_t v : removed) fs::remove(dir / ("v" + std::to_string(v)), ec);
  fs::remove_all(dir / kUploads, ec);
  if (ec) {
    WEFT_LOG(kWarn, kLog) << "cannot remove the uploads of " << dir.string() << ": " << ec.message();
  }
  WEFT_LOG(kInfo, kLog) << "tenant '" << tenant << "': resource " << what << " deleted";
  return removed;
}

Result<std::vector<ActiveVersion>> FileResourceStore::Active(const std::string& tenant,
                                                             const std::vector<std::string>& types) {
  std::vector<ActiveVersion> out;
  auto collect = [&](const std::string& type) {
    for (auto it = resources_.lower_bound(Key{tenant, type, ""});
         it != resources_.end() && std::get<0>(it->first) == tenant; ++it) {
      if (!type.empty() && std::get<1>(it->first) != type) break;
      for (const VersionInfo& v : it->second.versions)
        if (v.state == VersionState::kActive)
          out.push_back(ActiveVersion{std::get<1>(it->first), std::get<2>(it->first), v.version, v.digest,
                                      v.size_bytes});
    }
  };
  if (types.empty()) {
    collect("");
  } else if (types.size() == 1) {
    // A take's one type: sorted already, nothing to copy.
    if (!types[0].empty()) collect(types[0]);
  } else {
    std::vector<std::string> sorted = types;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (const std::string& t : sorted)
      if (!t.empty()) collect(t);
  }
  return out;
}

Result<Chunk> FileResourceStore::Read(const std::string& tenant, const std::string& type, const std::string& name,
                                      std::int64_t version, std::int64_t offset, std::int64_t max_bytes) {
  WEFT_TRY_ASSIGN_RES(v, Get(tenant, type, name, version));
  if (offset < 0 || offset > v.size_bytes)
    return Status::Invalid("offset " + std::to_string(offset) + " is outside " + VersionText(type, name, version) +
                           ", which has " + std::to_string(v.size_bytes) + " bytes");
  if (max_bytes < 1) return Status::Invalid("max_bytes must be at least 1");
  Chunk c;
  c.offset = offset;
  c.size_bytes = v.size_bytes;
  c.digest = v.digest;
  const std::int64_t want = std::min(max_bytes, v.size_bytes - offset);
  const fs::path path = VersionPath(tenant, type, name, version);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + path.string() + ": " + Errno());
  c.bytes.resize(static_cast<std::size_t>(want));
  std::size_t got = 0;
  while (got < c.bytes.size()) {
    ssize_t n = pread(fd, c.bytes.data() + got, c.bytes.size() - got, static_cast<off_t>(offset) + got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fd);
  if (got != c.bytes.size())
    return Status::Internal(path.string() + " is shorter than the " + std::to_string(v.size_bytes) +
                            " bytes its manifest records; the store's files were changed behind its back");
  c.eof = offset + want == v.size_bytes;
  return c;
}

}  // namespace weft::resources
