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
// user of the same claims_dir (tests and hosts running at once). StopNode
// removes both, and every process of the node.
//
// Needs root: sshd's privilege separation and logging in as other users need
// it. Thread-safety: all functions may be called from any thread; allocation
// of addresses is serialised by a lock file, so separate processes may start
// nodes at once too. The sshd is a child of the calling process (its own
// session, so signals to the caller's process group do not reach it); the
// library reaps children it started whenever it is called again.
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
inline constexpr const char* kSshd = "/usr/sbin/sshd";
inline constexpr const char* kSshKeygen = "/usr/bin/ssh-keygen";

struct NodeOptions {
  std::filesystem::path state_dir = kDefaultStateDir;    // node directories go here
  std::filesystem::path claims_dir = kDefaultClaimsDir;  // address claims, shared machine-wide
  std::string name = "node";  // for messages, comments and the directory name; [A-Za-z0-9_.-]
  std::uint16_t port = 22;
  std::string user = "root";  // the account automators log in as (must exist)
  int start_timeout_ms = 5000;
};

struct Node {
  std::string id;  // unique: the directory name, "<name>-<random>"
  std::string name;
  std::string address;  // 127.0.x.y
  std::uint16_t port = 22;
  std::string user;
  std::filesystem::path dir;
  pid_t pid = 0;  // the listening sshd
  std::string private_key;             // SENSITIVE: the user key, OpenSSH format. Never log it.
  std::string public_key;              // "ssh-ed25519 AAAA... comment"
  std::vector<std::string> host_keys;  // "ssh-ed25519 AAAA..." (no comment)
};

// Creates and starts a node; on failure removes whatever it made.
Result<Node> StartNode(const NodeOptions& options);

// Reads a running (or dead) node back from its directory.
Result<Node> LoadNode(const std::filesystem::path& dir);

// Stops every process of the node, removes its directory and releases its
// address. A directory that does not exist is fine (already stopped).
Status StopNode(const std::filesystem::path& dir);

// True if pid names a live process (not a zombie).
bool ProcessAlive(pid_t pid);

}  // namespace weft::localnode
