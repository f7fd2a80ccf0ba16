// weft::host::ssh: the libssh2 client behind Weft's SSH host services.
//
//   ssh::Target t;
//   t.node = "web-1"; t.address = "127.0.2.1"; t.user = "root";
//   t.private_key = key_pem;                    // sensitive: never logged
//   t.host_keys = {"ssh-ed25519 AAAAC3Nz..."};  // what the node reported at CONFIRM
//   auto session = ssh::Session::Connect(t, 5000);
//   auto status = (*session)->Exec("uname -a", 10000, on_out, on_err);
//
// Every network step has a deadline (the socket is non-blocking and every wait
// is a poll with a timeout). The server's host key is always checked against
// Target::host_keys before authentication; a Target without host keys is
// refused. Errors are sentences that name the node and, where there is one,
// the fix. Nothing here ever writes key material into a message or a log.
//
// Thread-safety: a Session is NOT thread-safe (libssh2 sessions are not); use
// one from one thread at a time. Pool is thread-safe and hands each session to
// one thread at a time (a Pool::Lease is exclusive), which is how the host
// services use it: a worker reuses a connection per node, never concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::host::ssh {

// Where and how to reach one node.
struct Target {
  std::string node;     // a name for messages ("web-1"); the address if empty
  std::string address;  // IPv4 address or name
  std::uint16_t port = 22;
  std::string user = "root";
  // Exactly one of private_key (the key text, OpenSSH or PEM format) and
  // private_key_path. Sensitive: never logged, never part of an error.
  std::string private_key;
  std::string private_key_path;
  std::string passphrase;  // sensitive; empty for an unencrypted key
  // Accepted host keys, OpenSSH style: "ssh-ed25519 AAAAC3Nz... [comment]".
  // Required: a connection whose server key is not one of these is refused.
  std::vector<std::string> host_keys;

  std::string Name() const { return node.empty() ? address : node; }
};

// Receives output as it arrives (chunks, not lines).
using OutputFn = std::function<void(std::string_view chunk)>;
// Polled while waiting (about every 100 ms); returning true stops the command
// (Session::Exec then fails with Code::kConflict, "... cancelled ...").
using CancelledFn = std::function<bool()>;

struct ExecResult {
  int exit_status = 0;      // the command's exit status; 128+N if killed by signal N
  std::string exit_signal;  // "TERM", "KILL", ... when the command died of a signal
};

class Session {
 public:
  // Connects, checks the host key, authenticates. The whole sequence must
  // finish within timeout_ms.
  static Result<std::unique_ptr<Session>> Connect(const Target& target, int timeout_ms);

  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs `command` through the login shell of the target user. Streams stdout
  // and stderr to the callbacks (either may be empty). A nonzero exit status
  // is not an error: it is in the result. Errors: kTimeout "command timed out
  // after N ms on node X" (the channel is closed and the session marked
  // broken), kUnavailable for transport failures, kConflict when cancelled.
  Result<ExecResult> Exec(const std::string& command, int timeout_ms, const OutputFn& on_stdout = {},
                          const OutputFn& on_stderr = {}, const CancelledFn& cancelled = {});

  // Writes `bytes` to remote_path (SCP) with the given mode (e.g. 0644). `op`
  // names the operation in errors ("write to node-1: ...", "upload to ...").
  Status Write(std::string_view bytes, const std::string& remote_path, int mode, int timeout_ms,
               std::string_view op = "write");
  // Copies the local file at local_path to remote_path (SCP).
  Status Upload(const std::string& local_path, const std::string& remote_path, int mode, int timeout_ms);

  // False once a transport error or a timeout left the session unusable.
  bool healthy() const { return healthy_; }
  // Whether the last Exec got as far as starting its command: a failure
  // before that point (say, a pooled connection the node had closed) is safe
  // to retry on a fresh connection.
  bool command_started() const { return command_started_; }
  const Target& target() const { return target_; }

 private:
  Session() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Target target_;
  bool healthy_ = true;
  bool command_started_ = false;
};

// A small pool of authenticated sessions, keyed by (address, port, user,
// private-key fingerprint, host keys). Thread-safe. A Lease gives one thread
// exclusive use of a session; it goes back to the pool when the Lease is
// destroyed, unless it became unhealthy. At most max_sessions exist at once
// (leased or idle); Acquire waits for one to free up, up to its timeout.
class Pool {
 public:
  struct Options {
    int max_sessions = 64;          // across all nodes
    int max_idle_per_node = 2;      // idle sessions kept per key
    int idle_timeout_ms = 60000;    // idle sessions older than this are closed
  };

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    Session* operator->() const { return session_.get(); }
    Session& operator*() const { return *session_; }
    // True if the session came from the pool rather than a fresh connect.
    bool reused() const { return reused_; }

   private:
    friend class Pool;
    void Release();
    Pool* pool_ = nullptr;
    std::string key_;
    std::unique_ptr<Session> session_;
    bool reused_ = false;
  };

  Pool();
  explicit Pool(Options options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // An idle session for the target's key, or a new connection (connect_timeout_ms).
  Result<Lease> Acquire(const Target& target, int connect_timeout_ms);
  // Closes every idle session (leased ones close when returned unhealthy or
  // when the pool is destroyed after them).
  void Clear();
  std::size_t idle_count() const;

  // The process-wide pool the host services use (never destroyed).
  static Pool& Default();

 private:
  struct Idle {
    std::unique_ptr<Session> session;
    std::chrono::steady_clock::time_point since;
  };
  void Return(const std::string& key, std::unique_ptr<Session> session);
  static std::string KeyOf(const Target& target);

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  int open_ = 0;  // sessions in existence: leased + idle
  std::multimap<std::string, Idle> idle_;
};

// The digest of a key or any secret as lowercase hex (SHA-256), for pool keys
// and for telling keys apart in messages without showing them.
std::string Sha256Hex(std::string_view data);

// Splits "type base64 [comment]"; false if it does not look like one.
bool ParseHostKey(std::string_view line, std::string* type, std::string* blob);

}  // namespace weft::host::ssh
