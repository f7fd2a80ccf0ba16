// weft_localnode's promise that a stopped node leaves no process behind, put to
// the test with daemons: processes a session starts that leave it (setsid,
// fork) and are reparented to init, so they are no longer descendants of the
// node's sshd. Real sshd nodes; needs root.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "weft/localnode/local_node.hpp"
#include "localnodes/net.hpp"
#include "support/process.hpp"
#include "support/sshd_node.hpp"
#include "support/temp_dir.hpp"
#include "weft/ssh/ssh.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using weft::localnode::Node;
using weft::localnode::NodeOptions;
using weft::localnode::ProcessAlive;
using weft::testing::TargetOf;
using weft::testing::TempDir;
using weft::testing::WaitFor;

namespace {

constexpr std::uint16_t kSshPort = 2022;  // as tests/ssh: a system sshd on port 22 cannot interfere

// Never throws: a /proc file of a process that exits while it is read fails
// with ESRCH, which std::ifstream would turn into an exception.
std::string Slurp(const fs::path& p) {
  std::string out;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

pid_t ParentOf(pid_t pid) {
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = -1;
  in >> state >> ppid;
  return ppid;
}

bool DescendsFrom(pid_t pid, pid_t ancestor) {
  for (int i = 0; i < 64 && pid > 1; ++i) {
    pid = ParentOf(pid);
    if (pid == ancestor) return true;
  }
  return false;
}


// Runs a command on the node over SSH; returns its stdout.
std::string Exec(const Node& n, const std::string& command) {
  auto session = weft::host::ssh::Session::Connect(TargetOf(n), 5000);
  INFO("connect: " << session.status().ToString());
  REQUIRE(session.ok());
  std::string out, err;
  auto r = (*session)->Exec(command, 30000, [&](std::string_view c) { out += c; },
                            [&](std::string_view c) { err += c; });
  INFO("exec of `" << command << "`: " << r.status().ToString() << "; stderr: " << err);
  REQUIRE(r.ok());
  REQUIRE(r->exit_status == 0);
  return out;
}

// Starts a daemon on the node: `setsid -f` forks it into a session of its own,
// so it is reparented to init as soon as the SSH session's shell exits. It
// writes its pid to pid_file (outside the node directory) and execs `program`.
pid_t StartDaemon(const Node& n, const std::string& cwd, const std::string& program, const fs::path& pid_file) {
  Exec(n, "cd " + cwd + " && setsid -f sh -c 'echo $$ >" + pid_file.string() + "; exec " + program +
              "' </dev/null >/dev/null 2>&1");
  REQUIRE(WaitFor([&] { return !Slurp(pid_file).empty(); }, 5s));
  const pid_t pid = static_cast<pid_t>(std::stol(Slurp(pid_file)));
  REQUIRE(WaitFor([&] { return ProcessAlive(pid) && !DescendsFrom(pid, n.pid); }, 5s));
  return pid;
}

}  // namespace

TEST_CASE("localnode: stopping a node ends the daemons its sessions started, even those reparented to init",
          "[localnodes][localnode]") {
  const bool use_cgroup = GENERATE(true, false);
  INFO("use_cgroup " << use_cgroup);
  TempDir state("weft-localnode-cleanup");
  NodeOptions o;
  o.state_dir = state / "nodes";
  o.name = "daemons";
  o.port = kSshPort;
  o.use_cgroup = use_cgroup;
  auto node = weft::localnode::StartNode(o);
  INFO(node.status().ToString());
  REQUIRE(node.ok());
  const Node n = *node;
  INFO("tracking: " << n.tracking);
  const bool has_cgroup = !n.cgroup.empty();
  if (use_cgroup && !has_cgroup) WARN("no writable cgroup on this machine (" << n.tracking << "); testing the fallbacks only");
  if (!use_cgroup) CHECK_FALSE(has_cgroup);
  if (has_cgroup) {
    CHECK(n.cgroup.filename() == n.id);
    CHECK(Slurp(n.cgroup / "cgroup.procs").find(std::to_string(n.pid)) != std::string::npos);
  }

  // Every session knows the node's own directory, which lives in the node's directory.
  const std::string env = Exec(n, "echo \"$WEFT_NODE_ROOT $WEFT_LOCAL_NODE\"");
  CHECK(env == (n.dir / "root").string() + " " + n.id + "\n");
  CHECK(fs::is_directory(n.root));

  std::vector<pid_t> daemons;
  // Found by its working directory under the node's directory (or by the cgroup).
  daemons.push_back(StartDaemon(n, "\"$WEFT_NODE_ROOT\"", "sleep 1001", state / "in-root.pid"));
  // Found by the socket it listens on at the node's address (or by the cgroup).
  const std::string listener = "perl -MIO::Socket::INET -e \"our @s = (IO::Socket::INET->new(LocalAddr => q(" +
                               n.address + "), LocalPort => 8099, Listen => 5, ReuseAddr => 1) or die); sleep 1002\"";
  daemons.push_back(StartDaemon(n, "/", listener, state / "listener.pid"));
  REQUIRE(WaitFor([&] { return weft::testing::Accepts(n.address, 8099); }, 5s));
  if (has_cgroup) {
    // Found only by the cgroup: no file, socket or ancestry ties it to the node.
    daemons.push_back(StartDaemon(n, "/", "sleep 1003", state / "plain.pid"));
  }

  const std::vector<pid_t> listed = weft::localnode::NodeProcesses(n.dir);
  for (pid_t d : daemons) {
    INFO("daemon " << d << " (parent " << ParentOf(d) << ")");
    CHECK(std::find(listed.begin(), listed.end(), d) != listed.end());
  }
  CHECK(std::find(listed.begin(), listed.end(), n.pid) != listed.end());
  CHECK(std::find(listed.begin(), listed.end(), ::getpid()) == listed.end());

  const auto start = std::chrono::steady_clock::now();
  REQUIRE(weft::localnode::StopNode(n.dir).ok());
  CHECK(std::chrono::steady_clock::now() - start < 8s);  // 1 s of SIGTERM grace, then SIGKILL
  for (pid_t d : daemons) {
    INFO("daemon " << d);
    // Reparented to init: init reaps it, which may take a moment after the kill.
    CHECK(WaitFor([&] { return !ProcessAlive(d); }, 2s));
  }
  CHECK_FALSE(ProcessAlive(n.pid));
  CHECK_FALSE(weft::testing::Accepts(n.address, 8099));
  CHECK_FALSE(fs::exists(n.dir));
  if (has_cgroup) CHECK_FALSE(fs::exists(n.cgroup));
  CHECK(weft::localnode::NodeProcesses(n.dir).empty());
}

TEST_CASE("localnode: stopping a node ends a daemon that keeps forking", "[localnodes][localnode]") {
  TempDir state("weft-localnode-cleanup");
  NodeOptions o;
  o.state_dir = state / "nodes";
  o.name = "forks";
  o.port = kSshPort;
  auto node = weft::localnode::StartNode(o);
  REQUIRE(node.ok());
  if (node->cgroup.empty()) {
    WARN("no writable cgroup on this machine (" << node->tracking << "); nothing to test here");
    REQUIRE(weft::localnode::StopNode(node->dir).ok());
    return;
  }
  // A daemon that keeps forking short-lived children: between listing the
  // cgroup and killing what it listed, new processes appear all the time.
  const pid_t forker =
      StartDaemon(*node, "/", "sh -c \"while :; do sleep 0.5 & sleep 0.02; done\"", state / "forker.pid");
  const std::vector<pid_t> listed = weft::localnode::NodeProcesses(node->dir);
  CHECK(std::find(listed.begin(), listed.end(), forker) != listed.end());
  const fs::path cgroup = node->cgroup;
  REQUIRE(weft::localnode::StopNode(node->dir).ok());
  CHECK(WaitFor([&] { return !ProcessAlive(forker); }, 2s));
  CHECK_FALSE(fs::exists(cgroup));
  CHECK_FALSE(fs::exists(node->dir));
}

TEST_CASE("localnode: a node is not started in a state_dir someone other than root could change",
          "[localnodes][localnode]") {
  // Its sshd runs as root on what is there (configuration, host keys, authorized keys).
  TempDir state("weft-localnode-trust");
  NodeOptions o;
  o.name = "untrusted";
  o.port = kSshPort;
  const auto refused = [&](const fs::path& dir) {
    o.state_dir = dir;
    auto node = weft::localnode::StartNode(o);
    REQUIRE_FALSE(node.ok());
    CHECK(fs::is_empty(dir));  // nothing was made there
    return node.status().message();
  };
  const std::string why = "local node untrusted: the state_dir ";
  const std::string reads =
      " holds what the node's sshd reads as root (its configuration, host keys and authorized keys), so no one but "
      "root may be able to change it, but ";
  fs::create_directories(state / "nobodys" / "nodes");
  REQUIRE(chown((state / "nobodys").c_str(), 65534, 65534) == 0);
  const fs::path under_nobodys = state / "nobodys" / "nodes";
  CHECK(refused(under_nobodys) == why + under_nobodys.string() + reads + (state / "nobodys").string() +
                                      " is owned by nobody (uid 65534); chown root " + (state / "nobodys").string() +
                                      " once you have checked it");
  fs::create_directories(state / "open");
  fs::permissions(state / "open", fs::perms::all, fs::perm_options::replace);
  CHECK(refused(state / "open") == why + (state / "open").string() + reads + (state / "open").string() +
                                       " is writable by every user; chmod o-w " + (state / "open").string());
}
