#include "weft/static_pool/static_pool.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

namespace weft::staticpool {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kClaimPrefix = "claim-";
constexpr const char* kClaimSuffix = ".json";
constexpr const char* kTempPrefix = ".tmp-";
// How many holders the "pool exhausted" sentence names before "and N more".
constexpr std::size_t kHoldersNamed = 10;

std::string Errno(int e) { return std::strerror(e); }

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsBase64(const std::string& s) {
  if (s.empty() || s.size() % 4 != 0) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) return false;
  }
  return true;
}

bool IsKeyType(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '@')) return false;
  }
  return true;
}

bool IsUser(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '-') return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

// "ssh-ed25519 AAAA... comment" -> "ssh-ed25519 AAAA...": the comment is the
// operator's note, not part of the key the SSH service compares.
Result<std::string> NormalizeHostKey(const json& v, const std::string& where) {
  const std::string fix = where + " must be an OpenSSH public key \"type base64\", such as the contents of "
                                  "/etc/ssh/ssh_host_ed25519_key.pub on that host (or `ssh-keyscan` output "
                                  "without the address)";
  if (!v.is_string()) return Status::Invalid(fix);
  std::istringstream in(v.get<std::string>());
  std::string type, blob;
  in >> type >> blob;
  if (!IsKeyType(type) || !IsBase64(blob)) return Status::Invalid(fix);
  return type + " " + blob;
}

Result<PoolHost> ParseEntry(const json& e, std::size_t i) {
  std::string where = "static pool: hosts[" + std::to_string(i) + "]";
  if (!e.is_object()) {
    return Status::Invalid(where + " must be an object {address, port?, user?, host_keys}");
  }
  static const std::set<std::string> kKeys = {"address", "port", "user", "host_keys"};
  for (const auto& [k, v] : e.items()) {
    if (!kKeys.count(k)) {
      return Status::Invalid(where + " has an unknown key '" + k + "'; the keys are address, port, user and host_keys");
    }
  }
  PoolHost h;
  auto a = e.find("address");
  in_addr ignored{};
  if (a == e.end() || !a->is_string() || ::inet_pton(AF_INET, a->get<std::string>().c_str(), &ignored) != 1) {
    return Status::Invalid(where + ".address must be the host's IPv4 address, like \"10.0.0.5\"");
  }
  h.address = a->get<std::string>();
  where += " (" + h.address + ")";
  if (auto p = e.find("port"); p != e.end() && !p->is_null()) {
    if (!p->is_number_integer() || p->get<std::int64_t>() < 1 || p->get<std::int64_t>() > 65535) {
      return Status::Invalid(where + ": port must be an integer 1-65535 (default 22)");
    }
    h.port = static_cast<std::uint16_t>(p->get<std::int64_t>());
  }
  if (auto u = e.find("user"); u != e.end() && !u->is_null()) {
    if (!u->is_string() || !IsUser(u->get<std::string>())) {
      return Status::Invalid(where + ": user must be an account name of letters, digits, '-', '_' or '.' "
                                     "(default \"root\")");
    }
    h.user = u->get<std::string>();
  }
  auto keys = e.find("host_keys");
  if (keys == e.end() || keys->is_null() || (keys->is_array() && keys->empty())) {
    return Status::Invalid(where + " has no host_keys; Weft never connects without checking the host key, so list "
                                   "the host's public keys (the contents of /etc/ssh/ssh_host_*_key.pub there)");
  }
  if (keys->is_string()) {
    WEFT_ASSIGN_OR_RETURN(auto k, NormalizeHostKey(*keys, where + ": host_keys"));
    h.host_keys.push_back(k);
  } else if (keys->is_array()) {
    for (std::size_t j = 0; j < keys->size(); ++j) {
      WEFT_ASSIGN_OR_RETURN(auto k, NormalizeHostKey((*keys)[j], where + ": host_keys[" + std::to_string(j) + "]"));
      h.host_keys.push_back(k);
    }
  } else {
    return Status::Invalid(where + ": host_keys must be a list of \"type base64\" strings");
  }
  return h;
}

// Holds an exclusive flock on <state_dir>/.lock while alive. flock locks
// belong to the open file description, so two threads of one process exclude
// each other as two processes do (each Take opens the file anew).
class DirLock {
 public:
  static Result<std::unique_ptr<DirLock>> Take(const fs::path& dir, int timeout_ms) {
    const fs::path file = dir / ".lock";
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int e = errno;
      return Status::Unavailable("static pool: cannot open " + file.string() + ": " + Errno(e));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      if (e == EINTR) continue;
      if (e != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
        ::close(fd);
        if (e == EWOULDBLOCK) {
          return Status::Timeout("static pool: " + file.string() + " stayed locked for " + std::to_string(timeout_ms) +
                                 " ms; another process holds it (a stuck weft-host worker?)");
        }
        return Status::Unavailable("static pool: cannot lock " + file.string() + ": " + Errno(e));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto lock = std::unique_ptr<DirLock>(new DirLock());
    lock->fd_ = fd;
    return lock;
  }
  ~DirLock() {
    (void)::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  DirLock() = default;
  int fd_ = -1;
};

Status EnsureDir(const fs::path& dir) {
  if (!dir.is_absolute()) {
    return Status::Invalid("static pool: state_dir '" + dir.string() + "' must be an absolute path");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::Unavailable("static pool: cannot create the state directory " + dir.string() + ": " +
                               ec.message() + "; create it or choose another state_dir");
  }
  return Status::Ok();
}

// Makes a link or unlink in dir durable, so an allocation survives a power cut.
void SyncDir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

json ToJson(const Claim& c) {
  return {{"host", c.host_id},   {"tenant", c.holder.tenant}, {"cluster_id", c.holder.cluster_id},
          {"node_id", c.holder.node_id}, {"job_id", c.job_id}, {"task_id", c.task_id},
          {"claimed_at_ms", c.claimed_at_ms}};
}

Claim ReadClaim(const fs::path& file) {
  Claim c;
  c.file = file.string();
  std::ifstream in(file, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  auto str = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!j.is_object() || str("host").empty() || str("node_id").empty()) {
    c.readable = false;
    return c;
  }
  c.host_id = str("host");
  c.holder = Holder{str("tenant"), str("cluster_id"), str("node_id")};
  c.job_id = str("job_id");
  if (auto t = j.find("task_id"); t != j.end() && t->is_number_integer()) c.task_id = t->get<std::int64_t>();
  if (auto t = j.find("claimed_at_ms"); t != j.end() && t->is_number_integer()) {
    c.claimed_at_ms = t->get<std::int64_t>();
  }
  return c;
}

bool IsClaimName(const std::string& name) {
  const std::string p = kClaimPrefix, s = kClaimSuffix;
  return name.size() > p.size() + s.size() && name.compare(0, p.size(), p) == 0 &&
         name.compare(name.size() - s.size(), s.size(), s) == 0;
}

// Writes the claim under a temporary name, then links it into place: link(2)
// fails with EEXIST if the name exists, so the claim appears whole or not at
// all, and never replaces another. Returns false (no error) if it exists.
Result<bool> CreateClaim(const fs::path& dir, const fs::path& path, const Claim& c) {
  static std::atomic<std::uint64_t> counter{0};
  const fs::path tmp = dir / (std::string(kTempPrefix) + std::to_string(::getpid()) + "-" +
                              std::to_string(counter.fetch_add(1)));
  const std::string text = ToJson(c).dump(2) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    return Status::Unavailable("static pool: cannot create " + tmp.string() + ": " + Errno(e));
  }
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      (void)::unlink(tmp.c_str());
      return Status::Unavailable("static pool: cannot write " + tmp.string() + ": " + Errno(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    (void)::unlink(tmp.c_str());
    return Status::Unavailable("static pool: cannot write " + tmp.string() + ": " + Errno(e));
  }
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int e = errno;
  (void)::unlink(tmp.c_str());
  if (rc == 0) {
    SyncDir(dir);
    return true;
  }
  if (e == EEXIST) return false;
  return Status::Unavailable("static pool: cannot create the allocation file " + path.string() + ": " + Errno(e));
}

}  // namespace

Result<std::vector<PoolHost>> ParseHosts(const json& hosts) {
  const std::string shape = "a list of {address, port?, user?, host_keys}";
  json list = hosts;
  if (hosts.is_string()) {
    list = json::parse(hosts.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (list.is_discarded()) {
      return Status::Invalid("static pool: field 'hosts' is a string that is not JSON; give " + shape +
                             ", as a JSON list or as a string holding one");
    }
  }
  if (list.is_null()) return Status::Invalid("static pool: field 'hosts' is required: " + shape);
  if (!list.is_array() || list.empty()) {
    return Status::Invalid("static pool: field 'hosts' must be a non-empty list: " + shape);
  }
  std::vector<PoolHost> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(auto h, ParseEntry(list[i], i));
    if (!seen.insert(h.Id()).second) {
      return Status::Invalid("static pool: hosts[" + std::to_string(i) + "] (" + h.Id() +
                             ") is listed twice; each address and port may appear once");
    }
    out.push_back(std::move(h));
  }
  return out;
}

Allocations::Allocations(fs::path state_dir, int lock_timeout_ms)
    : state_dir_(std::move(state_dir)), lock_timeout_ms_(lock_timeout_ms) {}

fs::path Allocations::ClaimPath(const std::string& address, std::uint16_t port) const {
  // address is a validated IPv4 address, so the name cannot leave state_dir.
  return state_dir_ / (std::string(kClaimPrefix) + address + "-" + std::to_string(port) + kClaimSuffix);
}

Result<std::vector<Claim>> Allocations::List() const {
  std::vector<Claim> out;
  std::error_code ec;
  if (!fs::exists(state_dir_, ec)) return out;
  for (fs::directory_iterator it(state_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsClaimName(name)) out.push_back(ReadClaim(it->path()));
  }
  if (ec) return Status::Unavailable("static pool: cannot list " + state_dir_.string() + ": " + ec.message());
  return out;
}

Result<std::optional<Claim>> Allocations::Find(const std::string& host_id) const {
  WEFT_ASSIGN_OR_RETURN(auto all, List());
  for (Claim& c : all) {
    if (c.readable && c.host_id == host_id) return std::optional<Claim>(std::move(c));
  }
  return std::optional<Claim>();
}

Result<Allocation> Allocations::Allocate(const std::vector<PoolHost>& pool, const Claim& request) const {
  if (pool.empty()) return Status::Invalid("static pool: the pool has no hosts; list some in the field 'hosts'");
  WEFT_RETURN_IF_ERROR(EnsureDir(state_dir_));
  WEFT_ASSIGN_OR_RETURN(auto lock, DirLock::Take(state_dir_, lock_timeout_ms_));

  // Temporary files exist only inside this locked section; any seen now were
  // left by a process that died in it.
  std::error_code ec;
  for (fs::directory_iterator it(state_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(kTempPrefix, 0) == 0) (void)::unlink(it->path().c_str());
  }

  // A retried CREATE of the same node gets the host it already holds.
  for (const PoolHost& h : pool) {
    if (!fs::exists(ClaimPath(h.address, h.port), ec)) continue;
    Claim c = ReadClaim(ClaimPath(h.address, h.port));
    if (c.readable && c.host_id == h.Id() && c.holder == request.holder) return Allocation{h, true};
  }

  std::vector<std::string> holders;
  for (const PoolHost& h : pool) {
    Claim c = request;
    c.host_id = h.Id();
    c.claimed_at_ms = NowMs();
    const fs::path path = ClaimPath(h.address, h.port);
    WEFT_ASSIGN_OR_RETURN(auto created, CreateClaim(state_dir_, path, c));
    if (created) return Allocation{h, false};
    const Claim held = ReadClaim(path);
    holders.push_back(held.readable ? h.Id() + " to " + held.holder.Describe()
                                    : h.Id() + " to an unreadable allocation file " + path.string() +
                                          " (remove it if no cluster uses that host)");
  }
  std::string named;
  for (std::size_t i = 0; i < holders.size() && i < kHoldersNamed; ++i) named += (i ? ", " : "") + holders[i];
  if (holders.size() > kHoldersNamed) named += ", and " + std::to_string(holders.size() - kHoldersNamed) + " more";
  return Status::Conflict("static pool exhausted: all " + std::to_string(pool.size()) +
                          (pool.size() == 1 ? " host is" : " hosts are") + " allocated (" + named +
                          "); delete a cluster that uses the pool or add hosts to the provider's 'hosts' field");
}

Result<std::vector<std::string>> Allocations::Release(const Holder& holder) const {
  std::vector<std::string> freed;
  std::error_code ec;
  if (!fs::exists(state_dir_, ec)) return freed;  // nothing was ever allocated here
  WEFT_ASSIGN_OR_RETURN(auto lock, DirLock::Take(state_dir_, lock_timeout_ms_));
  WEFT_ASSIGN_OR_RETURN(auto all, List());
  for (const Claim& c : all) {
    if (!c.readable || !(c.holder == holder)) continue;
    if (::unlink(c.file.c_str()) != 0 && errno != ENOENT) {
      const int e = errno;
      return Status::Unavailable("static pool: cannot remove the allocation file " + c.file + ": " + Errno(e));
    }
    freed.push_back(c.host_id);
  }
  if (!freed.empty()) SyncDir(state_dir_);
  return freed;
}

}  // namespace weft::staticpool
