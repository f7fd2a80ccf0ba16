// The host side of the SSH host services of plugin ABI 1.1 (ssh_exec,
// ssh_upload, ssh_write in weft_host_services). The host's services table
// calls these with the task's JSON text and a way to ask whether the task was
// cancelled; everything else (finding the node in the task, connecting,
// host-key checking, reusing connections, timeouts, error sentences) is here.
//
// Thread-safety: every function may be called from any thread at once; they
// share Pool::Default(), which gives each call a connection of its own.
// Nothing here logs; no key material ever reaches an error message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"
#include "weft/plugin.h"
#include "weft/ssh/ssh.hpp"

namespace weft::host::ssh {

inline constexpr std::uint32_t kDefaultExecTimeoutMs = 10 * 60 * 1000;
inline constexpr std::uint32_t kDefaultUploadTimeoutMs = 5 * 60 * 1000;
inline constexpr int kConnectTimeoutMs = 10000;

// Where a task says how to reach its node (docs/ssh.md): each key is looked up
// at the top level of the task, then in "results", "node" and "node.results".
//   access_v4 (required), ssh_port (default 22), ssh_auth {user (default
//   "root"), private_key (required), passphrase}, host_keys (required: array of
//   "type base64" strings, or one such string), hostname or node_id (for messages).
Result<Target> TargetFromTask(const nlohmann::json& task);

// Receives output as it arrives; the same type as weft_output_fn of ABI 1.1,
// so the host passes the plugin's callbacks straight through.
using OutputCallback = void (*)(void* user_data, const char* data, std::size_t len);

// Asked about every 100 ms while a call waits; true stops it (WEFT_ERR_CANCELLED).
using CancelledFn = std::function<bool()>;

// The bodies of the three services. Each returns a WEFT_* code and writes a
// sentence into err (err_len bytes including the NUL) on failure; noexcept.
int ServiceExec(const char* task_json, const CancelledFn& cancelled, const char* command, std::uint32_t timeout_ms,
                OutputCallback on_stdout, OutputCallback on_stderr, void* user_data, int* exit_status, char* err,
                std::size_t err_len) noexcept;
int ServiceUpload(const char* task_json, const CancelledFn& cancelled, const char* local_path,
                  const char* remote_path, std::uint32_t mode, std::uint32_t timeout_ms, char* err,
                  std::size_t err_len) noexcept;
int ServiceWrite(const char* task_json, const CancelledFn& cancelled, const void* data, std::size_t len,
                 const char* remote_path, std::uint32_t mode, std::uint32_t timeout_ms, char* err,
                 std::size_t err_len) noexcept;

// Sets the limits of Pool::Default() (max SSH sessions per host process, idle
// sessions kept per node). Call before the first SSH call; later calls fail
// with kConflict.
Status ConfigureDefaultPool(const Pool::Options& options);

}  // namespace weft::host::ssh
