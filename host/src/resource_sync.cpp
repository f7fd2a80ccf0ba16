#include "weft/host/resource_sync.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <random>

#include "weft/common/digest.hpp"
#include "weft/common/log.hpp"
#include "weft/host/enrollment.hpp"
#include "weft/host/plugin_loader.hpp"

namespace weft::host {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kLog = "host";
constexpr const char* kLuaPluginType = "lua-plugin";
constexpr std::int64_t kPruneEveryRounds = 30;
constexpr std::int64_t kPruneMarginMs = 90'000;  // the hang grace (at most 30 s) plus a minute

// Copies `from` to `to` through a temporary file in `to`'s directory and a
// rename, so the watcher only ever sees a complete file appear.
Status InstallFile(const fs::path& from, const fs::path& to) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path tmp = to.parent_path() / ("." + to.filename().string() + ".tmp." + std::to_string(rng() % 1000000));
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::Internal("cannot copy " + from.string() + " to " + tmp.string() + ": " + ec.message());
  fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code e;
    fs::remove(tmp, e);
    return Status::Internal("cannot rename " + tmp.string() + " to " + to.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace

ResourceSync::ResourceSync(HostConfig config, zmq::context_t& ctx, TypesFn plugin_types, TenantsFn tenants)
    : config_(std::move(config)),
      ctx_(ctx),
      plugin_types_(std::move(plugin_types)),
      tenants_(std::move(tenants)),
      cache_(ResourceCacheDir(config_)),
      plugin_dir_(ResourcePluginDir(config_)) {}

ResourceSync::~ResourceSync() { Stop(); }

void ResourceSync::Start() {
  for (const fs::path& dir : {cache_.dir(), plugin_dir_}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      WEFT_LOG(kWarn, kLog) << "cannot create " << dir.string() << ": " << ec.message()
                            << "; resources cannot be cached or installed there (set state_dir in weft-host.toml)";
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

void ResourceSync::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ResourceSync::Loop() {
  client::Client client(ctx_, ClientOptions(config_, config_.request_timeout_ms));
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    Status s = RunOnce(client);
    if (!s.ok() && !unreachable_logged_) {
      WEFT_LOG(kWarn, kLog) << "resource sync: " << s.message() << " (retrying every " << config_.resource_sync_ms
                            << " ms)";
      unreachable_logged_ = true;
    } else if (s.ok() && unreachable_logged_) {
      WEFT_LOG(kInfo, kLog) << "resource sync: working again";
      unreachable_logged_ = false;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(config_.resource_sync_ms), [this] { return stop_; });
  }
}

Status ResourceSync::RunOnce(client::Client& client) {
  std::vector<std::string> types = plugin_types_ ? plugin_types_() : std::vector<std::string>();
  types.push_back(kLuaPluginType);
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());

  Status round = Status::Ok();
  std::set<std::string> keep;
  std::map<std::string, ResourceRef> lua;  // file name -> version
  std::vector<std::string> tenants = SyncedTenants(config_);
  auto add = [&tenants](std::string t) {
    if (std::find(tenants.begin(), tenants.end(), t) == tenants.end()) tenants.push_back(std::move(t));
  };
  // A host whose operator pinned its tenants serves only those; any other
  // serves every tenant: those of weftd's split, with work or with an active
  // Lua plugin, and the tenant of every Lua file installed here (asked about
  // before weftd's first reply names them, so a restart removes nothing that
  // is still active).
  if (config_.tenants.empty()) {
    if (tenants_)
      for (std::string& t : tenants_()) add(std::move(t));
    std::error_code ec;
    for (fs::directory_iterator it(plugin_dir_, ec), end; !ec && it != end; it.increment(ec))
      if (std::optional<TenantPluginFile> f = ParseTenantPluginFile(it->path())) add(f->tenant);
  }
  for (const std::string& tenant : tenants) {
    Result<json> reply = client.Call("resource.active", {{"tenant", tenant}, {"types", types}});
    if (!reply.ok()) {
      round = ExplainStatus(config_, reply.status())
                  .WithContext("cannot ask weftd at " + client.endpoint() + " for the active resources of tenant '" +
                               tenant + "'");
      continue;
    }
    const json list = reply->value("resources", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) {
      Result<ResourceRef> ref = ParseResourceRef(list[i], tenant, "resources[" + std::to_string(i) + "]");
      if (!ref.ok()) {
        WEFT_LOG(kWarn, kLog) << "resource sync: weftd sent a bad entry: " << ref.status().message();
        continue;
      }
      keep.insert(ref->digest);
      if (ref->type == kLuaPluginType) {
        // Each tenant's under a name of its own: two tenants' plugins of one type never meet.
        lua.emplace(TenantPluginFileName(ref->tenant, ref->name), *ref);
        continue;  // fetched by Install
      }
      Result<fs::path> path = cache_.Ensure(client, *ref);
      if (!path.ok() && failed_.insert(ref->digest).second) {
        WEFT_LOG(kWarn, kLog) << "resource sync: cannot pre-fetch " << Describe(*ref) << " of tenant '" << tenant
                              << "': " << path.status().message() << " (a task that names it fetches it itself)";
      }
    }
  }
  if (!round.ok()) return round;  // never remove anything on a partial view
  Install(client, lua, std::set<std::string>(tenants.begin(), tenants.end()));
  for (const auto& [name, digest] : installed_) keep.insert(digest);
  if (rounds_++ % kPruneEveryRounds == 0) {
    const std::int64_t unused_ms = static_cast<std::int64_t>(config_.task_timeout_ms) + kPruneMarginMs;
    int removed = cache_.Prune(keep, unused_ms);
    if (removed > 0) {
      WEFT_LOG(kInfo, kLog) << "resource sync: removed " << removed << " cached version(s) unused for more than "
                            << unused_ms << " ms";
    }
  }
  return Status::Ok();
}

void ResourceSync::Install(client::Client& client, const std::map<std::string, ResourceRef>& wanted,
                           const std::set<std::string>& asked) {
  std::error_code ec;
  if (!installed_known_) {
    // What an earlier run left there.
    for (fs::directory_iterator it(plugin_dir_, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() != ".lua" || !it->is_regular_file()) continue;
      Result<digest::FileDigest> d = digest::Sha256OfFile(it->path());
      if (d.ok()) installed_[it->path().filename().string()] = d->digest;
    }
    installed_known_ = true;
  }
  for (const auto& [name, ref] : wanted) {
    auto it = installed_.find(name);
    if (it != installed_.end() && it->second == ref.digest && fs::exists(plugin_dir_ / name, ec)) continue;
    Result<fs::path> cached = cache_.Ensure(client, ref);
    if (!cached.ok()) {
      if (failed_.insert(ref.digest).second) {
        WEFT_LOG(kWarn, kLog) << "resource sync: cannot fetch Lua plugin " << Describe(ref) << " of tenant '"
                              << ref.tenant << "': " << cached.status().message();
      }
      continue;
    }
    Status s = InstallFile(*cached, plugin_dir_ / name);
    if (!s.ok()) {
      WEFT_LOG(kWarn, kLog) << "resource sync: cannot install Lua plugin " << Describe(ref) << ": " << s.message();
      continue;
    }
    installed_[name] = ref.digest;
    WEFT_LOG(kInfo, kLog) << "resource sync: installed Lua plugin " << Describe(ref) << " of tenant '" << ref.tenant
                          << "' as " << (plugin_dir_ / name).string();
  }
  // Lua files no active version stands for any more (recalled or deleted: weftd
  // was asked about their tenant this round), and those of tenants the host
  // does not serve.
  std::vector<std::pair<fs::path, std::string>> gone;  // file, why
  for (fs::directory_iterator it(plugin_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    if (path.extension() != ".lua" || wanted.contains(path.filename().string())) continue;
    const std::optional<TenantPluginFile> f = ParseTenantPluginFile(path);
    if (!f) {
      gone.emplace_back(path, "it is not named <tenant>@<type>.lua, as the host installs a tenant's Lua plugin");
    } else if (asked.contains(f->tenant)) {
      gone.emplace_back(path, "tenant '" + f->tenant + "' has no active version of " + f->type + ".lua any more");
    } else if (!config_.tenants.empty()) {
      gone.emplace_back(path, "this host serves only the tenants in 'tenants' of its configuration, not '" +
                                  f->tenant + "'");
    }
  }
  for (const auto& [path, why] : gone) {
    std::error_code e;
    fs::remove(path, e);
    installed_.erase(path.filename().string());
    if (!e) {
      WEFT_LOG(kInfo, kLog) << "resource sync: removed Lua plugin " << path.string() << ": " << why;
    }
  }
}

}  // namespace weft::host
