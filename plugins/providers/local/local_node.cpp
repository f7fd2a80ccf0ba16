#include "local_node.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

extern char** environ;

namespace weft::localnode {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Children this process started; reaped whenever the library is entered, so a
// node stopped by another process does not stay a zombie of ours.
std::mutex g_children_mu;
std::set<pid_t> g_children;

void ReapChildren() {
  std::lock_guard<std::mutex> lock(g_children_mu);
  for (auto it = g_children.begin(); it != g_children.end();) {
    int st = 0;
    pid_t r = ::waitpid(*it, &st, WNOHANG);
    if (r == *it || (r < 0 && errno == ECHILD)) {
      it = g_children.erase(it);
    } else {
      ++it;
    }
  }
}

// Reaps pid if it is our child and has exited.
void ReapIfOurs(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_children_mu);
  if (!g_children.count(pid)) return;
  int st = 0;
  pid_t r = ::waitpid(pid, &st, WNOHANG);
  if (r == pid || (r < 0 && errno == ECHILD)) g_children.erase(pid);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Status WriteFile(const fs::path& p, const std::string& data, mode_t mode) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable("cannot write " + p.string() + ": " + std::strerror(errno));
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Status::Unavailable("cannot write " + p.string() + ": " + std::strerror(e));
    }
    off += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return Status::Unavailable("cannot write " + p.string() + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Tail(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(s.size() - n); }

// Runs argv with stdin from /dev/null and stdout+stderr into out_file.
// Returns the pid (setsid: its own session and process group).
Result<pid_t> Spawn(const std::vector<std::string>& argv, const fs::path& out_file) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&fa) != 0) return Status::Internal("posix_spawn_file_actions_init failed");
  if (posix_spawnattr_init(&attr) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return Status::Internal("posix_spawnattr_init failed");
  }
  int rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // The caller's descriptors (a worker's sockets and pipes to its master) must
  // not live on in a long-running sshd: a master waiting for a pipe's EOF would
  // never see it. OpenSSH's sshd closes them itself today; this does not rely on it.
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // A default signal mask and dispositions: the caller may block signals in its threads.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (rc == 0) rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::Unavailable("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

// Runs a short command to completion; on failure the message carries its output.
Status RunTool(const std::vector<std::string>& argv, const fs::path& out_file) {
  auto pid = Spawn(argv, out_file);
  if (!pid.ok()) return pid.status();
  int st = 0;
  while (::waitpid(*pid, &st, 0) < 0) {
    if (errno != EINTR) return Status::Internal("waitpid(" + argv[0] + ") failed: " + std::strerror(errno));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::Ok();
  return Status::Unavailable(argv[0] + " failed (status " + std::to_string(st) + "): " + Trim(Tail(ReadFile(out_file), 400)));
}

// Parent pid of a process, from /proc; -1 if it is gone.
pid_t ParentOf(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = -1;
  in >> state >> ppid;
  return ppid;
}

// Every descendant of root (children first found, then theirs).
std::vector<pid_t> Descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> procs;  // pid, ppid
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string n = entry.path().filename().string();
    if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(n));
    procs.emplace_back(pid, ParentOf(pid));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    pid_t p = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, ppid] : procs) {
      if (ppid == p && std::find(out.begin(), out.end(), pid) == out.end()) {
        out.push_back(pid);
        frontier.push_back(pid);
      }
    }
  }
  return out;
}

bool ValidName(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::string RandomSuffix() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

// Holds an exclusive flock on <claims_dir>/.lock while alive.
class ClaimsLock {
 public:
  static Result<std::unique_ptr<ClaimsLock>> Take(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create the address claims directory " + dir.string() + ": " + ec.message());
    int fd = ::open((dir / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Unavailable("cannot open " + (dir / ".lock").string() + ": " + std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        int e = errno;
        ::close(fd);
        return Status::Unavailable("cannot lock " + (dir / ".lock").string() + ": " + std::strerror(e));
      }
    }
    auto lock = std::unique_ptr<ClaimsLock>(new ClaimsLock());
    lock->fd_ = fd;
    return lock;
  }
  ~ClaimsLock() {
    (void)::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  ClaimsLock() = default;
  int fd_ = -1;
};

// True if nothing listens on (or holds) address:port right now.
bool PortFree(const std::string& address, std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  (void)::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

bool PortAccepts(const std::string& address, std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  (void)::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

// Claims a free 127.0.x.y (x 2..254, y 1..254) for node_dir: an O_EXCL file
// named after the address, written under the claims lock. A claim whose node
// directory no longer exists is stale (its owner died) and is taken over.
Result<std::string> ClaimAddress(const fs::path& claims_dir, const fs::path& node_dir, std::uint16_t port) {
  auto lock = ClaimsLock::Take(claims_dir);
  if (!lock.ok()) return lock.status();
  int busy_ports = 0;
  for (int x = 2; x <= 254; ++x) {
    for (int y = 1; y <= 254; ++y) {
      const std::string address = "127.0." + std::to_string(x) + "." + std::to_string(y);
      const fs::path claim = claims_dir / address;
      int fd = ::open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0 && errno == EEXIST) {
        const std::string owner = Trim(ReadFile(claim));
        std::error_code ec;
        if (!owner.empty() && fs::exists(owner, ec)) continue;  // in use
        (void)::unlink(claim.c_str());                          // stale: its node is gone
        fd = ::open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      }
      if (fd < 0) {
        return Status::Unavailable("cannot claim address " + address + " in " + claims_dir.string() + ": " +
                                   std::strerror(errno));
      }
      ::close(fd);
      if (!PortFree(address, port)) {  // something outside Weft holds it
        (void)::unlink(claim.c_str());
        if (++busy_ports >= 16) {
          return Status::Unavailable("port " + std::to_string(port) + " is taken on every loopback address tried (" +
                                     address + " was the last); is a service listening on 0.0.0.0:" +
                                     std::to_string(port) + "? choose another ssh_port");
        }
        continue;
      }
      WEFT_RETURN_IF_ERROR(WriteFile(claim, node_dir.string() + "\n", 0600));
      return address;
    }
  }
  return Status::Unavailable("every loopback address 127.0.2.1-127.0.254.254 is claimed in " + claims_dir.string() +
                             "; delete nodes you no longer need");
}

void ReleaseAddress(const fs::path& claims_dir, const std::string& address, const fs::path& node_dir) {
  if (address.empty()) return;
  auto lock = ClaimsLock::Take(claims_dir);
  const fs::path claim = claims_dir / address;
  if (Trim(ReadFile(claim)) == node_dir.string()) (void)::unlink(claim.c_str());
}

// Signals pid and its descendants, waits for them, then kills what is left.
void KillTree(pid_t pid) {
  if (pid <= 0) return;
  std::vector<pid_t> all = Descendants(pid);
  all.insert(all.begin(), pid);
  for (pid_t p : all) (void)::kill(p, SIGTERM);
  auto gone = [&] {
    ReapIfOurs(pid);
    return std::none_of(all.begin(), all.end(), [](pid_t p) { return ProcessAlive(p); });
  };
  for (int i = 0; i < 100 && !gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!gone()) {
    for (pid_t p : all) (void)::kill(p, SIGKILL);
    for (int i = 0; i < 200 && !gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string SshdConfig(const Node& n) {
  const std::string d = n.dir.string();
  std::ostringstream c;
  c << "# Written by weft localnode for node " << n.name << "; removed with the node.\n"
    << "ListenAddress " << n.address << ":" << n.port << "\n"
    << "HostKey " << d << "/ssh_host_ed25519_key\n"
    << "PidFile " << d << "/sshd.pid\n"
    << "AuthorizedKeysFile " << d << "/authorized_keys\n"
    << "AllowUsers " << n.user << "\n"
    << "PermitRootLogin prohibit-password\n"
    << "PubkeyAuthentication yes\n"
    << "PasswordAuthentication no\n"
    << "KbdInteractiveAuthentication no\n"
    << "HostbasedAuthentication no\n"
    << "UsePAM no\n"
    << "StrictModes no\n"
    << "UseDNS no\n"
    << "PrintMotd no\n"
    << "X11Forwarding no\n"
    << "MaxStartups 200:30:400\n"
    << "MaxSessions 64\n"
    << "LogLevel INFO\n"
    << "Subsystem sftp /usr/lib/openssh/sftp-server\n";
  return c.str();
}

Status WriteNodeJson(const Node& n, const fs::path& claims_dir) {
  json j = {{"id", n.id},     {"name", n.name},    {"address", n.address},
            {"port", n.port}, {"user", n.user},    {"pid", n.pid},
            {"claims_dir", claims_dir.string()}};
  return WriteFile(n.dir / "node.json", j.dump(2) + "\n", 0600);
}

}  // namespace

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return false;
  // A zombie still answers kill(pid, 0) but is not running.
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

Result<Node> StartNode(const NodeOptions& o) {
  ReapChildren();
  if (::geteuid() != 0) {
    return Status::Denied("the local provider must run as root: each node is an sshd of its own (privilege "
                          "separation) that automators log in to; run weft-host as root, or use the static provider "
                          "for existing SSH hosts");
  }
  for (const char* tool : {kSshd, kSshKeygen}) {
    if (::access(tool, X_OK) != 0) {
      return Status::Unavailable(std::string("the local provider needs ") + tool +
                                 " (Debian package openssh-server / openssh-client); install it");
    }
  }
  if (!ValidName(o.name)) {
    return Status::Invalid("local node name '" + o.name + "' must be 1-64 characters of [A-Za-z0-9_.-]");
  }
  if (o.port == 0) return Status::Invalid("local node " + o.name + ": ssh_port must be 1-65535");
  if (!o.state_dir.is_absolute() || !o.claims_dir.is_absolute()) {
    return Status::Invalid("local node " + o.name + ": state_dir and claims_dir must be absolute paths (sshd needs them)");
  }
  std::error_code ec;
  fs::create_directories(o.state_dir, ec);
  if (ec) return Status::Unavailable("cannot create the state_dir " + o.state_dir.string() + ": " + ec.message());
  // sshd refuses to start without its privilege separation directory.
  fs::create_directories("/run/sshd", ec);
  if (ec) return Status::Unavailable("cannot create /run/sshd (sshd's privilege separation directory): " + ec.message());
  ::chmod("/run/sshd", 0755);

  Node n;
  n.name = o.name;
  n.port = o.port;
  n.user = o.user;
  for (int i = 0;; ++i) {
    n.id = o.name + "-" + RandomSuffix();
    n.dir = o.state_dir / n.id;
    if (::mkdir(n.dir.c_str(), 0700) == 0) break;
    if (errno != EEXIST || i > 10) {
      return Status::Unavailable("cannot create the node directory " + n.dir.string() + ": " + std::strerror(errno));
    }
  }
  // From here on every failure removes what was made.
  auto fail = [&](Status s) -> Result<Node> {
    if (n.pid > 0) KillTree(n.pid);
    ReleaseAddress(o.claims_dir, n.address, n.dir);
    std::error_code ignored;
    fs::remove_all(n.dir, ignored);
    return s.WithContext("local node " + o.name);
  };

  auto address = ClaimAddress(o.claims_dir, n.dir, o.port);
  if (!address.ok()) return fail(address.status());
  n.address = *address;

  const fs::path tool_log = n.dir / "keygen.log";
  const std::string comment = "weft-" + n.id;
  Status st = RunTool({kSshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f",
                       (n.dir / "ssh_host_ed25519_key").string()},
                      tool_log);
  if (st.ok()) {
    st = RunTool({kSshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", (n.dir / "id_ed25519").string()},
                 tool_log);
  }
  if (!st.ok()) return fail(st);
  n.private_key = ReadFile(n.dir / "id_ed25519");
  n.public_key = Trim(ReadFile(n.dir / "id_ed25519.pub"));
  std::string host_pub = Trim(ReadFile(n.dir / "ssh_host_ed25519_key.pub"));
  // "type base64 comment" → "type base64": the comment is ours, not the node's.
  std::istringstream hp(host_pub);
  std::string type, b64;
  hp >> type >> b64;
  if (n.private_key.empty() || n.public_key.empty() || b64.empty()) {
    return fail(Status::Internal("ssh-keygen left no usable keys in " + n.dir.string()));
  }
  n.host_keys = {type + " " + b64};
  st = WriteFile(n.dir / "authorized_keys", n.public_key + "\n", 0600);
  if (st.ok()) st = WriteFile(n.dir / "sshd_config", SshdConfig(n), 0600);
  if (!st.ok()) return fail(st);

  const fs::path log = n.dir / "sshd.log";
  auto pid = Spawn({kSshd, "-D", "-f", (n.dir / "sshd_config").string(), "-E", log.string()}, n.dir / "sshd.out");
  if (!pid.ok()) return fail(pid.status());
  n.pid = *pid;
  {
    std::lock_guard<std::mutex> lock(g_children_mu);
    g_children.insert(n.pid);
  }
  st = WriteNodeJson(n, o.claims_dir);
  if (!st.ok()) return fail(st);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.start_timeout_ms);
  for (;;) {
    if (PortAccepts(n.address, n.port)) break;
    int wst = 0;
    if (::waitpid(n.pid, &wst, WNOHANG) == n.pid) {
      {
        std::lock_guard<std::mutex> lock(g_children_mu);
        g_children.erase(n.pid);
      }
      n.pid = 0;
      return fail(Status::Unavailable("sshd exited at start: " +
                                      Trim(Tail(ReadFile(log) + ReadFile(n.dir / "sshd.out"), 400))));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(Status::Timeout("sshd did not accept connections on " + n.address + ":" + std::to_string(n.port) +
                                  " within " + std::to_string(o.start_timeout_ms) + " ms; see " + log.string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return n;
}

Result<Node> LoadNode(const fs::path& dir) {
  json j = json::parse(ReadFile(dir / "node.json"), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::NotFound("no local node in " + dir.string() + " (node.json missing or unreadable)");
  Node n;
  n.dir = dir;
  n.id = j.value("id", std::string());
  n.name = j.value("name", std::string());
  n.address = j.value("address", std::string());
  n.port = j.value("port", std::uint16_t{22});
  n.user = j.value("user", std::string("root"));
  n.pid = j.value("pid", pid_t{0});
  n.private_key = ReadFile(dir / "id_ed25519");
  n.public_key = Trim(ReadFile(dir / "id_ed25519.pub"));
  std::istringstream hp(ReadFile(dir / "ssh_host_ed25519_key.pub"));
  std::string type, b64;
  hp >> type >> b64;
  if (!b64.empty()) n.host_keys = {type + " " + b64};
  return n;
}

Status StopNode(const fs::path& dir) {
  ReapChildren();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  json j = json::parse(ReadFile(dir / "node.json"), nullptr, /*allow_exceptions=*/false);
  pid_t pid = 0;
  std::string address;
  fs::path claims_dir = kDefaultClaimsDir;
  if (j.is_object()) {
    pid = j.value("pid", pid_t{0});
    address = j.value("address", std::string());
    claims_dir = j.value("claims_dir", std::string(kDefaultClaimsDir));
  }
  // The pid file is sshd's own word; node.json is ours. Trust a pid only if it
  // is still an sshd (pids are reused).
  auto is_sshd = [](pid_t p) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/" + std::to_string(p) + "/exe", ec);
    return !ec && exe == kSshd;
  };
  if (pid > 0 && ProcessAlive(pid) && is_sshd(pid)) KillTree(pid);
  ReapIfOurs(pid);
  if (pid > 0 && ProcessAlive(pid) && is_sshd(pid)) {
    return Status::Unavailable("local node in " + dir.string() + ": sshd pid " + std::to_string(pid) +
                               " survived SIGKILL; remove it by hand");
  }
  ReleaseAddress(claims_dir, address, dir);
  fs::remove_all(dir, ec);
  if (ec) return Status::Unavailable("cannot remove the node directory " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace weft::localnode
