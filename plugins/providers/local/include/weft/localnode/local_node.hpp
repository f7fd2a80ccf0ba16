// weft::localnode: real SSH nodes on this machine. Each node is an OpenSSH
// sshd of its own, listening on a loopback address of its own (127.0.x.y; all
// of 127/8 reaches `lo` on Linux, so nothing is added to any interface), with
// a host key and a user key pair generated for it.
//
//   localnode::NodeOptions o;
//   o.state_dir = "/var/lib/weft/local-nodes";
//   o.name = "web-1";
//   auto node = localnode::StartNode(o);    // sshd runs, port accepts
//   ... ssh root@node->address with node->private_key, host key node->host_keys ...
//   localnode::StopNode(node->dir);         // process, directory and address gone
//
// Everything a node owns lives in one directory, <state_dir>/<id>/, plus one
// claim file <claims_dir>/<address> that reserves its address among every
// user of the same claims_dir (tests and hosts running at once; an address
// with a socket of another program bound to it is skipped), plus a cgroup
// of its own when one can be made. StopNode removes all three, and every
// process of the node.
//
// Processes: the sshd is moved into <cgroup mount>/weft-local-nodes/<id>
// (cgroup v2 if a writable cgroup2 mount exists, else a writable v1 hierarchy,
// pids or freezer preferred) before it accepts a connection, so everything a
// session starts stays in it, even daemons that fork twice and are reparented
// to init. StopNode kills what is in that cgroup, plus, in every case, the
// sshd's descendants and every process with a socket bound to the node's
// address, plus, when there is no cgroup, every process whose cwd, root or an
// open file lies under the node directory.
//
// The node's "disk": <dir>/root/, exported to every session as
// $WEFT_NODE_ROOT (sshd_config SetEnv), for the state of what runs on the
// node; it goes away with the node, as a VM's disk does.
//
// Needs root: sshd's privilege separation and logging in as other users need
// it. Thread-safety: all functions may be called from any thread; allocation
// of addresses is serialised by a lock file, so separate processes may start
// nodes at once too. The sshd is a child of the calling process (its own
// session, so signals to the caller's process group do not reach it); the
// library reaps an sshd it started as soon as it exits (a thread of its own
// waits for exactly those pids, no other child of the caller), and any other
// child it started whenever it is called again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::localnode {

inline constexpr const char* kDefaultStateDir = "/var/lib/weft/local-nodes";
inline constexpr const char* kDefaultClaimsDir = "/run/weft/local-addresses";
// Not 22: the nodes share this machine with its own sshd (openssh-server, which
// the nodes need, starts one on 0.0.0.0:22), which would hold port 22 on every
// loopback address.
inline constexpr std::uint16_t kDefaultSshPort = 2222;
inline constexpr const char* kSshd = "/usr/sbin/sshd";
inline constexpr const char* kSshKeygen = "/usr/bin/ssh-keygen";

struct NodeOptions {
  std::filesystem::path state_dir = kDefaultStateDir;    // node directories go here
  std::filesystem::path claims_dir = kDefaultClaimsDir;  // address claims, shared machine-wide
  std::string name = "node";  // for messages, comments and the directory name; [A-Za-z0-9_.-]
  std::uint16_t port = kDefaultSshPort;
  std::string user = "root";  // the account automators log in as (must exist)
  int start_timeout_ms = 5000;
  // Put the node's processes into a cgroup of their own. Tests turn it off to
  // exercise the fallbacks that find a node's processes without one.
  bool use_cgroup = true;
};

struct Node {
  std::string id;  // unique: the directory name, "<name>-<random>"
  std::string name;
  std::string address;  // 127.0.x.y
  std::uint16_t port = 22;
  std::string user;
  std::filesystem::path dir;
  std::filesystem::path root;    // <dir>/root: the node's own files ($WEFT_NODE_ROOT in its sessions)
  std::filesystem::path cgroup;  // the node's cgroup directory; empty when none could be made
  std::string tracking;          // a sentence: the cgroup its processes are in, or why none and what stop does instead
  // Sentences about the address claim: addresses skipped because a program
  // outside Weft listens on them, and ports that listeners on every address
  // (0.0.0.0, ::) hold on this node's address too.
  std::vector<std::string> address_notes;
  pid_t pid = 0;  // the listening sshd
  std::string private_key;             // SENSITIVE: the user key, OpenSSH format. Never log it.
  std::string public_key;              // "ssh-ed25519 AAAA... comment"
  std::vector<std::string> host_keys;  // "ssh-ed25519 AAAA..." (no comment)
};

// Creates and starts a node; on failure removes whatever it made.
Result<Node> StartNode(const NodeOptions& options);

// Reads a running (or dead) node back from its directory.
Result<Node> LoadNode(const std::filesystem::path& dir);

// Stops every process of the node (SIGTERM, SIGKILL after 1 s), removes its
// cgroup and directory and releases its address. A directory that does not
// exist is fine (already stopped). Fails, naming them, if processes survive.
Status StopNode(const std::filesystem::path& dir);

// The live processes StopNode would stop now (for tests and diagnostics).
std::vector<pid_t> NodeProcesses(const std::filesystem::path& dir);

// True if pid names a live process (not a zombie).
bool ProcessAlive(pid_t pid);

// True while the node's own sshd runs: its pid is alive and is still the sshd
// of this node's sshd_config (the library reaps a dead sshd at once, after
// which its pid may be given to another process).
bool SshdRunning(const Node& node);

}  // namespace weft::localnode
