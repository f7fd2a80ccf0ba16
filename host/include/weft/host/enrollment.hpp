// How weft-host gets the key it talks to weftd with (docs/security.md):
//   * a credential in <state_dir>/credential.json from an earlier start: used as is,
//     unless an enroll_token not yet spent on that credential is configured and
//     weftd refuses the stored key (a revoked host): the file is then moved aside
//     (credential.json.refused-<UTC time>) and the host enrolls with the token;
//     <state_dir>/enrollment.json records which token enrolled which key;
//   * enroll_token: a fresh key pair is made, and host.enroll, sent with the
//     token's one-time key, records it with weftd; the credential is then saved;
//   * server_key alone: a fresh key pair is saved, and host.register asks an
//     admin to accept it (`weft host accept ID`) until one does;
//   * none of these: weftd runs without security; nothing to do.
// Called by the master's main thread before anything else connects.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"
#include "weft/host/config.hpp"

namespace weft::host {

// Fills config.curve_*; waits (retrying every second) while weftd does not
// answer, until one of `stop_signals` arrives (then UNAVAILABLE).
[[nodiscard]] Status EnsureCredential(HostConfig& config, const sigset_t& stop_signals);

// What weftd's refusal of the stored key means and what to do about it, for
// the log: whether the configured enroll_token would be used at a restart, or
// a new one is needed.
std::string RefusedKeyAdvice(const HostConfig& config);

// A failed call to weftd as the log says it: a handshake that failed with
// CurveZMQ on says the server key may be wrong, naming its fingerprint and
// where the right one is found; anything else as status.ToString().
std::string ExplainFailure(const HostConfig& config, const Status& status);
// The same as a Status (UNAVAILABLE with that message), or `status` itself.
Status ExplainStatus(const HostConfig& config, const Status& status);

// Whether a failed call means weftd refuses this host's key: refused at the
// handshake (the client found so when it looked again), or denied (but not a
// key that waits for an admin to accept it).
bool KeyRefused(const Status& status);

// Whether weftd refused a host.heartbeat or task.take because another process registered
// under this host id after this one was not heard from for a while (docs/protocol.md,
// host.heartbeat: CONFLICT with details reason "process_replaced"): this process no
// longer acts for the host until it registers again.
bool ProcessReplaced(const Status& status, const nlohmann::json& details);

// How long callers wait after weftd refused this host's key: 1 s, doubling up
// to 30 s while refusals go on, so a revoked host does not retry in a storm.
// One log line per change of the wait, one when a call goes through again.
// Thread-safe: a worker's runners share one.
class RefusalBackoff {
 public:
  RefusalBackoff(std::string component, std::string what) : component_(std::move(component)), what_(std::move(what)) {}
  // A refused call; the wait before the next one. `advice` ends the log line.
  std::chrono::milliseconds Refused(const Status& status, const std::string& advice);
  // A call that went through.
  void Accepted();

  static constexpr std::chrono::milliseconds kFirst{1000};
  static constexpr std::chrono::milliseconds kMax{30'000};

 private:
  const std::string component_;
  const std::string what_;
  std::mutex mu_;
  std::chrono::milliseconds wait_{0};  // 0: not refused
  std::chrono::steady_clock::time_point changed_{};
  std::int64_t refusals_ = 0;
};

}  // namespace weft::host
