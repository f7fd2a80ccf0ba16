#include "weft/host/resource_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "weft/common/digest.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/wire.hpp"

namespace weft::host {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::int64_t kChunkBytes = 4 << 20;

// Ensure's tallies, for TakeCacheUse (any thread).
std::atomic<std::uint64_t> g_hits{0};
std::atomic<std::uint64_t> g_misses{0};
std::atomic<std::uint64_t> g_fetched_bytes{0};
constexpr int kFetchAttempts = 3;
constexpr int kRetryMs = 500;

std::string RandomHex() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          static_cast<std::uint64_t>(getpid()) << 32};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 12; ++i) out.push_back(kHex[rng() & 0xF]);
  return out;
}

std::string HexOf(const std::string& digest) {
  return digest.substr(digest::kSha256Prefix.size());
}

bool SafeName(std::string_view name) {
  return !name.empty() && name.size() <= 128 && name[0] != '.' && name[0] != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '+' || c == '-';
         });
}

// Marks the version's directory as used now.
void Touch(const fs::path& dir) { (void)utimensat(AT_FDCWD, dir.c_str(), nullptr, 0); }

}  // namespace

std::string Describe(const ResourceRef& ref) {
  return ref.type + "/" + ref.name + " version " + std::to_string(ref.version);
}

Result<ResourceRef> ParseResourceRef(const json& entry, const std::string& tenant, std::string_view path) {
  if (!entry.is_object()) return jsonf::RequireObject(entry, path);
  ResourceRef ref;
  ref.tenant = tenant;
  WEFT_ASSIGN_OR_RETURN(std::string type, jsonf::String(entry, "type", path));
  WEFT_ASSIGN_OR_RETURN(std::string name, jsonf::String(entry, "name", path));
  if (!SafeName(type) || !SafeName(name))
    return Status::Invalid(std::string(path) + " names resource \"" + type + "/" + name +
                           "\", which is not a valid type and file name");
  WEFT_ASSIGN_OR_RETURN(std::int64_t version, jsonf::Int(entry, "version", path, 1, INT64_MAX));
  WEFT_ASSIGN_OR_RETURN(std::string d, jsonf::String(entry, "digest", path));
  WEFT_ASSIGN_OR_RETURN(std::string digest, digest::NormalizeSha256(d, std::string(path) + ".digest"));
  WEFT_ASSIGN_OR_RETURN(std::int64_t size, jsonf::Int(entry, "size", path, 0, INT64_MAX));
  ref.type = std::move(type);
  ref.name = std::move(name);
  ref.version = version;
  ref.digest = std::move(digest);
  ref.size_bytes = size;
  return ref;
}

CacheUse TakeCacheUse() {
  return CacheUse{g_hits.exchange(0, std::memory_order_relaxed), g_misses.exchange(0, std::memory_order_relaxed),
                  g_fetched_bytes.exchange(0, std::memory_order_relaxed)};
}

fs::path ResourceCache::PathOf(const ResourceRef& ref) const { return dir_ / HexOf(ref.digest) / ref.name; }

Result<fs::path> ResourceCache::Ensure(client::Client& client, const ResourceRef& ref,
                                       const std::function<bool()>& cancelled) {
  const fs::path path = PathOf(ref);
  const fs::path version_dir = path.parent_path();
  Touch(version_dir);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == ref.size_bytes) {
    g_hits.fetch_add(1, std::memory_order_relaxed);
    return path;
  }
  g_misses.fetch_add(1, std::memory_order_relaxed);

  std::error_code ec;
  fs::create_directories(version_dir, ec);
  if (ec) return Status::Internal("cannot create the resource cache directory " + version_dir.string() + ": " +
                                  ec.message() + "; check resource_cache_dir in weft-host.toml");
  const fs::path tmp = version_dir / ("." + ref.name + ".tmp." + RandomHex());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot create " + tmp.string() + ": " + std::strerror(errno));
  auto fail = [&](Status s) {
    close(fd);
    unlink(tmp.c_str());
    return s;
  };
  digest::Sha256 hash;
  std::int64_t offset = 0;
  while (true) {
    if (cancelled && cancelled())
      return fail(Status::Unavailable("the fetch of resource " + Describe(ref) + " was cancelled"));
    wire::Request request;
    request.op = "resource.fetch";
    request.body = {{"tenant", ref.tenant}, {"type", ref.type},  {"name", ref.name},
                    {"version", ref.version}, {"offset", offset}, {"max_bytes", kChunkBytes}};
    Result<wire::Reply> reply = Status::Unavailable("not sent");
    for (int attempt = 1; attempt <= kFetchAttempts; ++attempt) {
      reply = client.CallRaw(request);
      if (reply.ok() || attempt == kFetchAttempts) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
    }
    if (!reply.ok())
      return fail(reply.status().WithContext("cannot fetch resource " + Describe(ref) + " from weftd"));
    if (!reply->ok)
      return fail(reply->ToStatus().WithContext("weftd refused to send resource " + Describe(ref)));
    const json& body = reply->body;
    if (reply->blobs.size() != 1 || !body.is_object())
      return fail(Status::Internal("weftd's reply to resource.fetch of " + Describe(ref) +
                                   " has no payload frame; is weftd older than this host?"));
    const std::string server_digest = body.value("digest", std::string());
    if (server_digest != ref.digest)
      return fail(Status::Invalid("digest mismatch for resource " + Describe(ref) + ": the task names " + ref.digest +
                                  " but weftd holds " + server_digest +
                                  " for that version; the version was replaced on the server"));
    const std::string& bytes = reply->blobs[0];
    if (offset + static_cast<std::int64_t>(bytes.size()) > ref.size_bytes)
      return fail(Status::Invalid("resource " + Describe(ref) + " is longer than the " +
                                  std::to_string(ref.size_bytes) + " bytes the task names"));
    g_fetched_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
    std::string_view left = bytes;
    while (!left.empty()) {
      ssize_t n = write(fd, left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail(Status::Internal("cannot write " + tmp.string() + ": " + std::strerror(errno)));
      left.remove_prefix(static_cast<std::size_t>(n));
    }
    hash.Update(bytes);
    offset += static_cast<std::int64_t>(bytes.size());
    if (body.value("eof", false)) break;
    if (bytes.empty())
      return fail(Status::Internal("weftd sent an empty chunk of resource " + Describe(ref) + " before its end"));
  }
  Result<std::string> got = hash.Finish();
  if (!got.ok()) return fail(got.status());
  if (offset != ref.size_bytes || *got != ref.digest)
    return fail(Status::Invalid("digest mismatch for resource " + Describe(ref) + ": the task names " + ref.digest +
                                " (" + std::to_string(ref.size_bytes) + " bytes) but the " + std::to_string(offset) +
                                " bytes weftd sent have " + *got +
                                "; the server's copy is damaged or was changed behind its back"));
  if (close(fd) != 0) {
    unlink(tmp.c_str());
    return Status::Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Status::Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + std::strerror(errno));
  }
  Touch(version_dir);
  return path;
}

int ResourceCache::Prune(const std::set<std::string>& keep, std::int64_t unused_for_ms) {
  int removed = 0;
  const auto now = std::chrono::system_clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string hex = it->path().filename().string();
    if (keep.contains(std::string(digest::kSha256Prefix) + hex)) continue;
    struct stat st {};
    if (stat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const auto mtime = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::seconds(st.st_mtim.tv_sec)));
    if (std::chrono::duration_cast<std::chrono::milliseconds>(now - mtime).count() <= unused_for_ms) continue;
    std::error_code e;
    fs::remove_all(it->path(), e);
    if (!e) ++removed;
  }
  return removed;
}

Status ResolveTaskResources(client::Client& client, ResourceCache& cache, json& task,
                            const std::function<bool()>& cancelled,
                            const std::function<void(const std::string&)>& log) {
  auto list = task.find("resources");
  if (list == task.end() || list->is_null()) return Status::Ok();
  if (!list->is_array())
    return Status::Invalid("the task's \"resources\" must be an array, got " + jsonf::Brief(*list));
  const std::string tenant = task.value("tenant", std::string("default"));
  for (std::size_t i = 0; i < list->size(); ++i) {
    json& entry = (*list)[i];
    WEFT_ASSIGN_OR_RETURN(ResourceRef ref, ParseResourceRef(entry, tenant, "resources[" + std::to_string(i) + "]"));
    WEFT_ASSIGN_OR_RETURN(fs::path path, cache.Ensure(client, ref, cancelled));
    entry["path"] = path.string();
    if (log) log("resource " + Describe(ref) + " (" + ref.digest + ") at " + path.string());
  }
  return Status::Ok();
}

}  // namespace weft::host
