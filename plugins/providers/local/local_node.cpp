#include "weft/localnode/local_node.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "weft/common/file_trust.hpp"

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

// Reaps a node's sshd as soon as it exits (killed by hand, by the OOM killer,
// by another process's StopNode), not when the library is next entered: one
// thread of this process polls a pidfd of each sshd it started and reaps that
// pid alone (waitpid of that pid, WNOHANG), never another child of the process
// that loaded the library. Started with the first sshd; it lives as long as
// the process (plugins are never unloaded). Without pidfds (Linux before 5.3)
// the sshd is reaped when the library is next entered, as every child is.
class Reaper {
 public:
  static Reaper& Get() {
    static Reaper* reaper = new Reaper();  // never destroyed: its thread may outlive static destructors
    return *reaper;
  }

  void Watch(pid_t pid) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        ::close(fd);
        return;
      }
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    watched_.push_back({pid, fd});
    const char c = 1;
    (void)!::write(wake_[1], &c, 1);
  }

 private:
  struct Watched {
    pid_t pid;
    int fd;
  };

  void Loop() {
    // No signal of the host's is handled on this thread.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::vector<pollfd> fds;
    std::vector<Watched> polled;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        polled = watched_;
        fds.assign(1, pollfd{wake_[0], POLLIN, 0});
        for (const Watched& w : polled) fds.push_back(pollfd{w.fd, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof buf) > 0) {
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        // Readable: the process exited. It is a zombie until reaped, so the pid is still its own.
        ReapIfOurs(polled[i - 1].pid);
        std::lock_guard<std::mutex> lock(mu_);
        watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                      [&](const Watched& w) { return w.fd == polled[i - 1].fd; }),
                       watched_.end());
        ::close(polled[i - 1].fd);
      }
    }
  }

  std::mutex mu_;
  bool started_ = false;
  int wake_[2] = {-1, -1};
  std::vector<Watched> watched_;
};

// The whole file, or what could be read of it; never throws. Files in /proc
// of a process that exits while they are read fail with ESRCH, which an
// std::ifstream would turn into an exception.
std::string ReadFile(const fs::path& p) {
  std::string out;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
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
  WEFT_ASSIGN_OR_RETURN(auto pid, Spawn(argv, out_file));
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return Status::Internal("waitpid(" + argv[0] + ") failed: " + std::strerror(errno));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::Ok();
  return Status::Unavailable(argv[0] + " failed (status " + std::to_string(st) + "): " + Trim(Tail(ReadFile(out_file), 400)));
}

// Every process now (a snapshot of /proc; readdir, so nothing throws when a
// process exits meanwhile).
std::vector<pid_t> AllPids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
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
  for (pid_t pid : AllPids()) procs.emplace_back(pid, ParentOf(pid));
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

// ---- what listens on this machine ----------------------------------------

std::string CommOf(pid_t p) { return Trim(ReadFile("/proc/" + std::to_string(p) + "/comm")); }

// A socket waiting for others on this machine (from /proc/net): a listening
// TCP socket, or an unconnected bound UDP one.
struct Listener {
  std::string address;  // "127.0.2.7"; an IPv4-mapped IPv6 address as IPv4; "0.0.0.0" or "::" for every address
  std::uint16_t port = 0;
  std::string protocol;  // "tcp" or "udp"
  std::string inode;     // the socket's inode, to find its process
  bool wildcard() const { return address == "0.0.0.0" || address == "::"; }
};

// The kernel prints an address as the hex of its 32-bit words in host order.
bool ParseProcAddress(const std::string& hex, std::string* out) {
  char text[INET6_ADDRSTRLEN] = {};
  auto word = [&](std::size_t at) { return static_cast<std::uint32_t>(std::stoul(hex.substr(at, 8), nullptr, 16)); };
  try {
    if (hex.size() == 8) {
      in_addr a{};
      a.s_addr = word(0);
      if (!::inet_ntop(AF_INET, &a, text, sizeof text)) return false;
    } else if (hex.size() == 32) {
      in6_addr a{};
      for (std::size_t i = 0; i < 4; ++i) {
        const std::uint32_t w = word(8 * i);
        std::memcpy(a.s6_addr + 4 * i, &w, 4);
      }
      if (IN6_IS_ADDR_V4MAPPED(&a)) {
        if (!::inet_ntop(AF_INET, a.s6_addr + 12, text, sizeof text)) return false;
      } else if (!::inet_ntop(AF_INET6, &a, text, sizeof text)) {
        return false;
      }
    } else {
      return false;
    }
  } catch (const std::exception&) {
    return false;
  }
  *out = text;
  return true;
}

// One row of /proc/net/{tcp,udp}[6], the fields read here as the kernel prints them.
struct ProcSocket {
  std::string protocol;  // "tcp" or "udp"
  std::string local;     // "0100007F:0016": the address's hex, a colon, the port's hex
  std::string remote;
  std::string state;  // "0A": a listening TCP socket; "07": an unconnected UDP one
  std::string inode;  // the socket's inode, to find its process
};

// Every row of the given tables, each read as the protocol paired with it.
std::vector<ProcSocket> ProcSockets(std::initializer_list<std::pair<const char*, const char*>> tables) {
  std::vector<ProcSocket> out;
  for (const auto& [table, protocol] : tables) {
    std::istringstream in(ReadFile(table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, queues, timer, retrans, uid, timeout;
      ProcSocket s;
      s.protocol = protocol;
      f >> sl >> s.local >> s.remote >> s.state >> queues >> timer >> retrans >> uid >> timeout >> s.inode;
      out.push_back(std::move(s));
    }
  }
  return out;
}

// Every TCP listener and bound UDP socket of this network namespace, IPv4 and IPv6.
std::vector<Listener> Listeners() {
  std::vector<Listener> out;
  for (const ProcSocket& s : ProcSockets({{"/proc/net/tcp", "tcp"},
                                          {"/proc/net/tcp6", "tcp"},
                                          {"/proc/net/udp", "udp"},
                                          {"/proc/net/udp6", "udp"}})) {
    const bool udp = s.protocol == "udp";
    const std::size_t colon = s.local.find(':');
    if (s.state != (udp ? "07" : "0A") || colon == std::string::npos) continue;
    // A UDP socket with a peer is a client's, not one waiting on the address.
    if (udp && s.remote.find_first_not_of("0:") != std::string::npos) continue;
    Listener l;
    l.protocol = s.protocol;
    l.inode = s.inode;
    if (!ParseProcAddress(s.local.substr(0, colon), &l.address)) continue;
    try {
      l.port = static_cast<std::uint16_t>(std::stoul(s.local.substr(colon + 1), nullptr, 16));
    } catch (const std::exception&) {
      continue;
    }
    out.push_back(std::move(l));
  }
  return out;
}

// "nginx (pid 812)" for each socket inode of `wanted` some process holds.
std::map<std::string, std::string> SocketOwners(const std::set<std::string>& wanted) {
  std::map<std::string, std::string> out;
  if (wanted.empty()) return out;
  for (pid_t pid : AllPids()) {
    const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;
    while (const dirent* e = ::readdir(fds)) {
      if (e->d_name[0] == '.') continue;
      char buf[64];
      const ssize_t n = ::readlink((fd_dir + "/" + e->d_name).c_str(), buf, sizeof buf);
      if (n <= 9) continue;
      const std::string target(buf, static_cast<std::size_t>(n));  // "socket:[12345]"
      if (target.rfind("socket:[", 0) != 0) continue;
      const std::string inode = target.substr(8, target.size() - 9);
      if (wanted.count(inode) && !out.count(inode)) out[inode] = CommOf(pid) + " (pid " + std::to_string(pid) + ")";
    }
    ::closedir(fds);
  }
  return out;
}

std::string Describe(const Listener& l, const std::map<std::string, std::string>& owners) {
  auto owner = owners.find(l.inode);
  const std::string at = l.address.find(':') != std::string::npos ? "[" + l.address + "]" : l.address;
  return (owner == owners.end() ? "a process" : owner->second) + " on " + l.protocol + " " + at + ":" +
         std::to_string(l.port);
}

// What claiming an address found besides the address.
struct Claim {
  std::string address;
  std::vector<std::pair<std::string, Listener>> skipped;  // addresses in use by programs outside Weft
  std::vector<Listener> wildcards;                        // TCP listeners on every address (0.0.0.0, ::)
};

constexpr std::size_t kMaxSkipped = 1000;  // addresses in use before CREATE gives up

// Claims a free 127.0.x.y (x 2..254, y 1..254) for node_dir: an O_EXCL file
// named after the address, written under the claims lock, so concurrent
// creates (threads, hosts, tests) never get one address. A claim whose node
// directory no longer exists is stale (its owner died) and is taken over.
//
// An address is free only if nothing else uses it either: no TCP listener and
// no bound UDP socket on that very address (IPv4, or IPv4-mapped IPv6), from
// /proc/net, read once under the lock. Those addresses are skipped and
// reported. A listener on every address (0.0.0.0:P, or [::]:P, which takes
// IPv4 too unless it is IPv6-only) holds port P on each of them alike, so no
// choice of address avoids it: on the ssh port that fails the create, naming
// the listener; on other ports it is reported, since the services on the node
// cannot bind them (the catalog does not say which ports a service uses).
Result<Claim> ClaimAddress(const fs::path& claims_dir, const fs::path& node_dir, std::uint16_t port) {
  WEFT_ASSIGN_OR_RETURN(auto lock, ClaimsLock::Take(claims_dir));
  Claim claim;
  std::map<std::string, std::vector<Listener>> on_address;
  for (Listener& l : Listeners()) {
    if (!l.wildcard()) {
      on_address[l.address].push_back(std::move(l));
    } else if (l.protocol == "tcp") {
      if (l.address == "0.0.0.0" && l.port == port) {
        return Status::Unavailable("port " + std::to_string(port) + " is taken on every address by " +
                                   Describe(l, SocketOwners({l.inode})) +
                                   ", so no node's sshd can listen on it; stop that or choose another ssh_port");
      }
      claim.wildcards.push_back(std::move(l));
    }
  }
  int busy_ports = 0;
  for (int x = 2; x <= 254; ++x) {
    for (int y = 1; y <= 254; ++y) {
      const std::string address = "127.0." + std::to_string(x) + "." + std::to_string(y);
      const fs::path file = claims_dir / address;
      int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0 && errno == EEXIST) {
        const std::string owner = Trim(ReadFile(file));
        std::error_code ec;
        if (!owner.empty() && fs::exists(owner, ec)) continue;  // in use
        (void)::unlink(file.c_str());                           // stale: its node is gone
        fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      }
      if (fd < 0) {
        return Status::Unavailable("cannot claim address " + address + " in " + claims_dir.string() + ": " +
                                   std::strerror(errno));
      }
      ::close(fd);
      if (auto used = on_address.find(address); used != on_address.end()) {  // a program outside Weft uses it
        (void)::unlink(file.c_str());
        claim.skipped.emplace_back(address, used->second.front());
        if (claim.skipped.size() >= kMaxSkipped) {
          return Status::Unavailable("the first " + std::to_string(kMaxSkipped) +
                                     " free loopback addresses are all in use by programs outside Weft (" + address +
                                     " was the last); stop some of them");
        }
        continue;
      }
      // A socket bound since /proc was read, or one /proc does not show.
      if (!PortFree(address, port)) {
        (void)::unlink(file.c_str());
        if (++busy_ports >= 16) {
          return Status::Unavailable("port " + std::to_string(port) + " is taken on every loopback address tried (" +
                                     address + " was the last); is a service listening on [::]:" +
                                     std::to_string(port) + "? choose another ssh_port");
        }
        continue;
      }
      WEFT_RETURN_IF_ERROR(WriteFile(file, node_dir.string() + "\n", 0600));
      claim.address = address;
      return claim;
    }
  }
  return Status::Unavailable("every loopback address 127.0.2.1-127.0.254.254 is claimed in " + claims_dir.string() +
                             " or in use; delete nodes you no longer need");
}

// Sentences for CREATE's output: the addresses skipped, the ports held on every address.
std::vector<std::string> ClaimNotes(const Claim& claim) {
  std::set<std::string> inodes;
  for (const auto& [address, l] : claim.skipped) inodes.insert(l.inode);
  for (const Listener& l : claim.wildcards) inodes.insert(l.inode);
  const std::map<std::string, std::string> owners = SocketOwners(inodes);
  std::vector<std::string> notes;
  constexpr std::size_t kNamed = 5;
  for (std::size_t i = 0; i < claim.skipped.size() && i < kNamed; ++i) {
    notes.push_back("address " + claim.skipped[i].first + " skipped: in use by " +
                    Describe(claim.skipped[i].second, owners));
  }
  if (claim.skipped.size() > kNamed) {
    notes.push_back(std::to_string(claim.skipped.size() - kNamed) + " more addresses skipped: in use outside Weft");
  }
  std::set<std::uint16_t> seen;
  std::string held;
  for (const Listener& l : claim.wildcards) {
    if (!seen.insert(l.port).second) continue;
    held += (held.empty() ? "" : ", ") + Describe(l, owners);
  }
  if (!held.empty()) {
    notes.push_back("listeners on every address hold their ports on " + claim.address +
                    " too, so services on this node cannot bind those ports: " + held);
  }
  return notes;
}

void ReleaseAddress(const fs::path& claims_dir, const std::string& address, const fs::path& node_dir) {
  if (address.empty()) return;
  auto lock = ClaimsLock::Take(claims_dir);
  const fs::path claim = claims_dir / address;
  if (Trim(ReadFile(claim)) == node_dir.string()) (void)::unlink(claim.c_str());
}

bool IsSshd(pid_t p) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/" + std::to_string(p) + "/exe", ec);
  return !ec && exe == kSshd;
}

// ---- cgroups -------------------------------------------------------------
//
// A node's processes live in <mount>/weft-local-nodes/<id>. Tried in order:
// every cgroup2 mount, then v1 hierarchies with the pids or the freezer
// controller (never a named one such as name=systemd, which systemd uses to
// track its units). The first where mkdir and the move of the sshd succeed wins.

constexpr const char* kCgroupParent = "weft-local-nodes";

// mountinfo escapes blanks in paths as \040 and friends.
std::string UnescapeMountPath(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto octal = [&](std::size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

struct CgroupMount {
  fs::path path;
  std::string kind;  // "v2", "v1 pids", "v1 freezer"
};

std::vector<CgroupMount> CgroupMounts() {
  std::vector<CgroupMount> v2, pids, freezer;
  std::istringstream in(ReadFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // "36 25 0:31 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids"
    const std::size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream pre(line.substr(0, sep));
    std::string id, parent, dev, root, mount_point;
    pre >> id >> parent >> dev >> root >> mount_point;
    std::istringstream post(line.substr(sep + 3));
    std::string fstype, source, options;
    post >> fstype >> source >> options;
    const fs::path path = UnescapeMountPath(mount_point);
    if (fstype == "cgroup2") {
      v2.push_back({path, "v2"});
    } else if (fstype == "cgroup") {
      std::set<std::string> opts;
      std::istringstream o(options);
      for (std::string opt; std::getline(o, opt, ',');) opts.insert(opt);
      if (opts.count("pids")) {
        pids.push_back({path, "v1 pids"});
      } else if (opts.count("freezer")) {
        freezer.push_back({path, "v1 freezer"});
      }
    }
  }
  std::vector<CgroupMount> out = v2;
  out.insert(out.end(), pids.begin(), pids.end());
  out.insert(out.end(), freezer.begin(), freezer.end());
  return out;
}

bool WriteSmall(const fs::path& p, const std::string& text) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, text.data(), text.size());
  bool ok = n == static_cast<ssize_t>(text.size());
  return ::close(fd) == 0 && ok;
}

// Makes the node's cgroup and moves pid into it; returns its directory, or an
// empty path (with the reason in *why) when no hierarchy would take it.
fs::path JoinCgroup(const std::string& id, pid_t pid, std::string* why) {
  std::vector<CgroupMount> mounts = CgroupMounts();
  if (mounts.empty()) {
    *why = "no cgroup for its processes (no cgroup2, pids or freezer mount in /proc/self/mountinfo)";
    return {};
  }
  std::string reasons;
  for (const CgroupMount& m : mounts) {
    const fs::path parent = m.path / kCgroupParent;
    const fs::path dir = parent / id;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      reasons += (reasons.empty() ? "" : "; ") + parent.string() + ": " + std::strerror(errno);
      continue;
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      reasons += (reasons.empty() ? "" : "; ") + dir.string() + ": " + std::strerror(errno);
      continue;
    }
    if (!WriteSmall(dir / "cgroup.procs", std::to_string(pid))) {
      reasons += (reasons.empty() ? "" : "; ") + (dir / "cgroup.procs").string() + ": " + std::strerror(errno);
      (void)::rmdir(dir.c_str());
      continue;
    }
    *why = "processes tracked in cgroup " + m.kind + " " + dir.string();
    return dir;
  }
  *why = "no cgroup for its processes (none writable: " + reasons + ")";
  return {};
}

std::vector<pid_t> CgroupProcs(const fs::path& cgroup) {
  std::vector<pid_t> out;
  std::istringstream in(ReadFile(cgroup / "cgroup.procs"));
  for (long p = 0; in >> p;) out.push_back(static_cast<pid_t>(p));
  return out;
}

// SIGKILLs everything in the cgroup, so that nothing forked meanwhile escapes:
// cgroup.kill where the kernel has it (v2, 5.14+); else the v1 freezer
// (freeze, kill, thaw) and pids.max = 0 (no more forks) where present.
void CgroupKill(const fs::path& cgroup) {
  std::error_code ec;
  if (fs::exists(cgroup / "cgroup.kill", ec) && WriteSmall(cgroup / "cgroup.kill", "1")) return;
  (void)WriteSmall(cgroup / "pids.max", "0");
  const bool freezer = fs::exists(cgroup / "freezer.state", ec) && WriteSmall(cgroup / "freezer.state", "FROZEN");
  if (freezer) {
    for (int i = 0; i < 100 && Trim(ReadFile(cgroup / "freezer.state")) != "FROZEN"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (pid_t p : CgroupProcs(cgroup)) (void)::kill(p, SIGKILL);
  if (freezer) (void)WriteSmall(cgroup / "freezer.state", "THAWED");
}

// ---- finding a node's processes without a cgroup ------------------------

// "socket:[inode]" of every IPv4 TCP and UDP socket bound to address.
std::set<std::string> SocketsOn(const std::string& address) {
  std::set<std::string> out;
  in_addr a{};
  if (address.empty() || ::inet_pton(AF_INET, address.c_str(), &a) != 1) return out;
  // The kernel prints the address as the hex of its 32-bit value in host order.
  char want[16];
  std::snprintf(want, sizeof want, "%08X", static_cast<unsigned>(a.s_addr));
  for (const ProcSocket& s : ProcSockets({{"/proc/net/tcp", "tcp"}, {"/proc/net/udp", "udp"}}))
    if (s.local.compare(0, 8, want) == 0 && !s.inode.empty() && s.inode != "0") out.insert("socket:[" + s.inode + "]");
  return out;
}

bool UnderDir(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.compare(0, dir.size(), dir) == 0 && (path.size() == dir.size() || path[dir.size()] == '/');
}

// Processes holding one of `sockets`, or (when dir is not empty) with their
// cwd, root or an open file under dir.
std::set<pid_t> Holders(const std::set<std::string>& sockets, const std::string& dir) {
  std::set<pid_t> out;
  if (sockets.empty() && dir.empty()) return out;
  auto link = [](const std::string& p) {
    char buf[4096];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  };
  for (pid_t pid : AllPids()) {
    const std::string proc = "/proc/" + std::to_string(pid);
    bool hit = !dir.empty() && (UnderDir(link(proc + "/cwd"), dir) || UnderDir(link(proc + "/root"), dir));
    if (DIR* fds = hit ? nullptr : ::opendir((proc + "/fd").c_str())) {
      while (const dirent* e = ::readdir(fds)) {
        if (e->d_name[0] == '.') continue;
        const std::string target = link(proc + "/fd/" + e->d_name);
        if (sockets.count(target) > 0 || UnderDir(target, dir)) {
          hit = true;
          break;
        }
      }
      ::closedir(fds);
    }
    if (hit) out.insert(pid);
  }
  return out;
}

// What StopNode needs to know of a node (from node.json, or a half-made node).
struct Footprint {
  fs::path dir;
  pid_t sshd = 0;
  std::string address;
  fs::path cgroup;
};

// Every live process of the node, never the caller.
std::set<pid_t> Collect(const Footprint& f) {
  std::set<pid_t> out;
  if (!f.cgroup.empty()) {
    for (pid_t p : CgroupProcs(f.cgroup)) out.insert(p);
  }
  if (f.sshd > 0 && ProcessAlive(f.sshd) && IsSshd(f.sshd)) {
    out.insert(f.sshd);
    for (pid_t p : Descendants(f.sshd)) out.insert(p);
  }
  // Without a cgroup a daemon that left its session is found by what it holds.
  for (pid_t p : Holders(SocketsOn(f.address), f.cgroup.empty() ? f.dir.string() : std::string())) out.insert(p);
  out.erase(::getpid());
  for (auto it = out.begin(); it != out.end();) it = ProcessAlive(*it) ? std::next(it) : out.erase(it);
  return out;
}

// SIGTERM to every process of the node, up to 1 s to go, then SIGKILL until
// none is left (up to 5 s). Removes the cgroup. Fails naming any survivor.
Status KillNode(const Footprint& f) {
  std::set<pid_t> procs = Collect(f);
  if (!procs.empty()) {
    for (pid_t p : procs) (void)::kill(p, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      ReapIfOurs(f.sshd);
      if (std::none_of(procs.begin(), procs.end(), [](pid_t p) { return ProcessAlive(p); })) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (int round = 0; round < 250; ++round) {
    procs = Collect(f);
    if (procs.empty()) break;
    if (!f.cgroup.empty()) CgroupKill(f.cgroup);
    for (pid_t p : procs) (void)::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ReapIfOurs(f.sshd);
  }
  ReapIfOurs(f.sshd);
  procs = Collect(f);
  if (!procs.empty()) {
    std::string names;
    for (pid_t p : procs) names += (names.empty() ? "" : ", ") + std::to_string(p) + " (" + CommOf(p) + ")";
    return Status::Unavailable("local node in " + f.dir.string() + ": processes " + names +
                               " survived SIGKILL for 5 s; remove them by hand");
  }
  std::error_code ec;
  if (!f.cgroup.empty() && fs::exists(f.cgroup, ec)) {
    // An emptied cgroup may report busy for a moment while its last tasks exit.
    int i = 0;
    while (::rmdir(f.cgroup.c_str()) != 0 && errno != ENOENT) {
      if (errno != EBUSY || ++i > 100) {
        return Status::Unavailable("cannot remove the cgroup " + f.cgroup.string() + " of local node " +
                                   f.dir.string() + ": " + std::strerror(errno));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return Status::Ok();
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
    // Every session (and what it starts) knows its node and the node's own directory.
    << "SetEnv WEFT_LOCAL_NODE=" << n.id << " WEFT_NODE_ROOT=" << n.root.string() << "\n"
    << "Subsystem sftp /usr/lib/openssh/sftp-server\n";
  return c.str();
}

Status WriteNodeJson(const Node& n, const fs::path& claims_dir) {
  json j = {{"id", n.id},     {"name", n.name},    {"address", n.address},
            {"port", n.port}, {"user", n.user},    {"pid", n.pid},
            {"claims_dir", claims_dir.string()}, {"root", n.root.string()}, {"cgroup", n.cgroup.string()},
            {"tracking", n.tracking}};
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

bool SshdRunning(const Node& node) {
  if (!ProcessAlive(node.pid)) return false;
  // `sshd -D -f <dir>/sshd_config ...`, NUL-separated, or as sshd retitles
  // itself (`sshd: /usr/sbin/sshd -D -f ... [listener] ...`): the node's id
  // (its directory's name, unique) names its config whatever the state_dir's spelling.
  const std::string cmdline = ReadFile("/proc/" + std::to_string(node.pid) + "/cmdline");
  return !node.id.empty() && cmdline.find("/" + node.id + "/sshd_config") != std::string::npos;
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
  // The node's sshd runs as root on what is there: its config, host keys and authorized_keys.
  if (std::string problem = OthersMayChange(o.state_dir); !problem.empty())
    return Status::Invalid("local node " + o.name + ": the state_dir " + o.state_dir.string() +
                           " holds what the node's sshd reads as root (its configuration, host keys and authorized "
                           "keys), so no one but root may be able to change it, but " + problem);
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
    if (n.pid > 0) (void)KillNode({n.dir, n.pid, n.address, n.cgroup});
    ReleaseAddress(o.claims_dir, n.address, n.dir);
    std::error_code ignored;
    fs::remove_all(n.dir, ignored);
    return s.WithContext("local node " + o.name);
  };

  auto claim = ClaimAddress(o.claims_dir, n.dir, o.port);
  if (!claim.ok()) return fail(claim.status());
  n.address = claim->address;
  n.address_notes = ClaimNotes(*claim);  // outside the claims lock: it reads every process's descriptors

  // The node's own files: others may pass through the node directory (0711:
  // a web server's workers read what the node serves) but not list it, and
  // the keys in it stay 0600.
  n.root = n.dir / "root";
  if (::chmod(n.dir.c_str(), 0711) != 0 || ::mkdir(n.root.c_str(), 0755) != 0 || ::chmod(n.root.c_str(), 0755) != 0) {
    return fail(Status::Unavailable("cannot set up " + n.root.string() + ": " + std::strerror(errno)));
  }
  if (n.user != "root") {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(n.user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return fail(Status::Invalid("user '" + n.user + "' does not exist on this machine"));
    }
    if (::chown(n.root.c_str(), pw.pw_uid, pw.pw_gid) != 0) {
      return fail(Status::Unavailable("cannot chown " + n.root.string() + " to " + n.user + ": " + std::strerror(errno)));
    }
  }

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
  Reaper::Get().Watch(n.pid);
  // Into the node's cgroup before the port accepts: sshd -D forks only for a
  // connection, so every session and what it starts is born inside.
  if (o.use_cgroup) {
    n.cgroup = JoinCgroup(n.id, n.pid, &n.tracking);
  } else {
    n.tracking = "no cgroup for its processes (turned off)";
  }
  if (n.cgroup.empty()) {
    n.tracking += "; stopping it finds them as the sshd's descendants, by sockets on its address and by files under " +
                  n.dir.string();
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
  n.root = j.value("root", (dir / "root").string());
  n.cgroup = j.value("cgroup", std::string());
  n.tracking = j.value("tracking", std::string());
  n.private_key = ReadFile(dir / "id_ed25519");
  n.public_key = Trim(ReadFile(dir / "id_ed25519.pub"));
  std::istringstream hp(ReadFile(dir / "ssh_host_ed25519_key.pub"));
  std::string type, b64;
  hp >> type >> b64;
  if (!b64.empty()) n.host_keys = {type + " " + b64};
  return n;
}

namespace {

// The footprint node.json records. A cgroup is trusted only if it is named
// like one this library makes for this very node, so a damaged node.json can
// never aim the kill at a cgroup of others.
Footprint ReadFootprint(const fs::path& dir, fs::path* claims_dir) {
  Footprint f;
  f.dir = dir;
  json j = json::parse(ReadFile(dir / "node.json"), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return f;
  f.sshd = j.value("pid", pid_t{0});
  f.address = j.value("address", std::string());
  const fs::path cgroup = j.value("cgroup", std::string());
  if (!cgroup.empty() && cgroup.is_absolute() && cgroup.filename() == dir.filename() &&
      cgroup.parent_path().filename() == kCgroupParent) {
    f.cgroup = cgroup;
  }
  if (claims_dir) *claims_dir = j.value("claims_dir", std::string(kDefaultClaimsDir));
  return f;
}

}  // namespace

std::vector<pid_t> NodeProcesses(const fs::path& dir) {
  ReapChildren();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  std::set<pid_t> procs = Collect(ReadFootprint(dir, nullptr));
  return {procs.begin(), procs.end()};
}

Status StopNode(const fs::path& dir) {
  ReapChildren();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  fs::path claims_dir = kDefaultClaimsDir;
  const Footprint f = ReadFootprint(dir, &claims_dir);
  WEFT_RETURN_IF_ERROR(KillNode(f));
  ReleaseAddress(claims_dir, f.address, dir);
  fs::remove_all(dir, ec);
  if (ec) return Status::Unavailable("cannot remove the node directory " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace weft::localnode
