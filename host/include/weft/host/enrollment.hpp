// How weft-host gets the key it talks to weftd with (docs/security.md):
//   * a credential in <state_dir>/credential.json from an earlier start: used as is;
//   * enroll_token: a fresh key pair is made, and host.enroll, sent with the
//     token's one-time key, records it with weftd; the credential is then saved;
//   * server_key alone: a fresh key pair is saved, and host.register asks an
//     admin to accept it (`weft host accept ID`) until one does;
//   * none of these: weftd runs without security; nothing to do.
// Called by the master's main thread before anything else connects.
#pragma once

#include <signal.h>

#include "weft/common/status.hpp"
#include "weft/host/config.hpp"

namespace weft::host {

// Fills config.curve_*; waits (retrying every second) while weftd does not
// answer, until one of `stop_signals` arrives (then UNAVAILABLE).
[[nodiscard]] Status EnsureCredential(HostConfig& config, const sigset_t& stop_signals);

}  // namespace weft::host
