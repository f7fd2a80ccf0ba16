#include <algorithm>

#include "weft/ssh/ssh.hpp"
#include "weft/ssh/ssh_services.hpp"

namespace weft::host::ssh {

Pool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), key_(std::move(other.key_)), session_(std::move(other.session_)), reused_(other.reused_) {
  other.pool_ = nullptr;
}

Pool::Lease& Pool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = other.pool_;
    key_ = std::move(other.key_);
    session_ = std::move(other.session_);
    reused_ = other.reused_;
    other.pool_ = nullptr;
  }
  return *this;
}

Pool::Lease::~Lease() { Release(); }

void Pool::Lease::Release() {
  if (pool_) pool_->Return(key_, std::move(session_));
  pool_ = nullptr;
}

Pool::Pool() : Pool(Options{}) {}
Pool::Pool(Options options) : options_(options) {}

Pool::~Pool() { Clear(); }

namespace {
std::mutex g_default_mu;
Pool::Options g_default_options;
bool g_default_made = false;
}  // namespace

Pool& Pool::Default() {
  // Leaked on purpose: leases may be returned during static destruction.
  static Pool* pool = [] {
    std::lock_guard<std::mutex> lock(g_default_mu);
    g_default_made = true;
    return new Pool(g_default_options);
  }();
  return *pool;
}

Status ConfigureDefaultPool(const Pool::Options& options) {
  std::lock_guard<std::mutex> lock(g_default_mu);
  if (g_default_made) {
    return Status::Conflict("the SSH session pool is already in use; set its limits before the first SSH call");
  }
  if (options.max_sessions < 1 || options.max_idle_per_node < 0 || options.idle_timeout_ms < 0) {
    return Status::Invalid("SSH pool limits: max_sessions must be at least 1, the others at least 0");
  }
  g_default_options = options;
  return Status::Ok();
}

std::string Pool::KeyOf(const Target& t) {
  // The key material itself never sits in the map: only its digest.
  std::string host_keys;
  for (const std::string& k : t.host_keys) host_keys += k + "\n";
  return t.address + "|" + std::to_string(t.port) + "|" + t.user + "|" +
         Sha256Hex(t.private_key + "\n" + t.private_key_path + "\n" + t.passphrase) + "|" + Sha256Hex(host_keys);
}

Result<Pool::Lease> Pool::Acquire(const Target& target, int connect_timeout_ms) {
  const std::string key = KeyOf(target);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(connect_timeout_ms, 1));
  std::vector<std::unique_ptr<Session>> expired;  // closed outside the lock
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (now - it->second.since > std::chrono::milliseconds(options_.idle_timeout_ms)) {
        expired.push_back(std::move(it->second.session));
        it = idle_.erase(it);
        --open_;
      } else {
        ++it;
      }
    }
    auto it = idle_.find(key);
    if (it != idle_.end()) {
      Lease lease;
      lease.pool_ = this;
      lease.key_ = key;
      lease.session_ = std::move(it->second.session);
      lease.reused_ = true;
      idle_.erase(it);
      return lease;
    }
    while (open_ >= options_.max_sessions) {
      // Make room by closing an idle session of another node, else wait.
      if (!idle_.empty()) {
        expired.push_back(std::move(idle_.begin()->second.session));
        idle_.erase(idle_.begin());
        --open_;
        break;
      }
      if (freed_.wait_until(lock, deadline) == std::cv_status::timeout) {
        return Status::Timeout("SSH to node " + target.Name() + ": all " + std::to_string(options_.max_sessions) +
                               " SSH sessions of this host are busy; waited " + std::to_string(connect_timeout_ms) +
                               " ms (raise the session limit)");
      }
    }
    ++open_;
  }
  expired.clear();
  int left = static_cast<int>(std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count()));
  auto session = Session::Connect(target, left);
  if (!session.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
    freed_.notify_one();
    return session.status();
  }
  Lease lease;
  lease.pool_ = this;
  lease.key_ = key;
  lease.session_ = std::move(session).value();
  return lease;
}

void Pool::Return(const std::string& key, std::unique_ptr<Session> session) {
  std::unique_ptr<Session> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (session && session->healthy() &&
        static_cast<int>(idle_.count(key)) < options_.max_idle_per_node) {
      idle_.emplace(key, Idle{std::move(session), std::chrono::steady_clock::now()});
    } else {
      drop = std::move(session);
      --open_;
    }
    freed_.notify_one();
  }
}

void Pool::Clear() {
  std::multimap<std::string, Idle> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ -= static_cast<int>(idle_.size());
    idle.swap(idle_);
    freed_.notify_all();
  }
}

std::size_t Pool::idle_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

}  // namespace weft::host::ssh
