#include "weft/host/enrollment.hpp"

#include <algorithm>
#include <ctime>

#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/client/probe.hpp"
#include "weft/common/log.hpp"

namespace weft::host {
namespace {

constexpr const char* kLog = "host";

Status Save(HostConfig& config, const std::string& server_key, const curve::KeyPair& keys) {
  std::error_code ec;
  std::filesystem::create_directories(StateDir(config), ec);
  if (ec) return Status::Unavailable("cannot create " + StateDir(config).string() + ": " + ec.message());
  curve::Credential c;
  c.api = config.server;
  c.server_key = server_key;
  c.keys = keys;
  c.user = config.host_id;
  c.role = "host";
  WEFT_RETURN_IF_ERROR(curve::SaveCredential(CredentialPath(config), c));
  config.curve_server_key = server_key;
  config.curve_keys = keys;
  return Status::Ok();
}

// Sleeps up to 1 s; true if a stop signal came.
bool Stopped(const sigset_t& signals) {
  timespec wait{1, 0};
  return sigtimedwait(&signals, nullptr, &wait) > 0;
}

// Why an enrollment got no answer, from a second look at the endpoint: weftd
// refuses a key it does not take at the handshake, and says nothing.
std::string WhyNoAnswer(zmq::context_t& ctx, const client::Options& options) {
  constexpr int kProbeMs = 3000;
  const std::string& at = options.endpoint;
  const std::string needs = "weft-host needs weftd's provisioner endpoint (\"provisioner\" in weftd's "
                            "<data_dir>/endpoints.json), set as `server` in its configuration";
  using client::Peer;
  const Peer peer = client::ProbePeer(ctx, options, at, std::min(options.timeout_ms, kProbeMs));
  switch (peer) {
    case Peer::kProvisioner:
      return "weftd's provisioner endpoint refused the token's key: the token is unknown, expired or used up; make "
             "a new one with `weft host token create`";
    case Peer::kAuthRefused:
      // The provisioner endpoint takes a key it does not know (a host asking
      // to be accepted) unless host_requests is off; the api endpoint never does.
      return "weftd refused the token's key and a new key alike, so " + at +
             " is most likely weftd's api endpoint, not its provisioner endpoint; " + needs +
             " (or, on a weftd with security.host_requests = false, the token is unknown, expired or used up)";
    case Peer::kRefused:
      return "nothing listens there (connection refused); is weftd running?";
    case Peer::kHttp:
    case Peer::kHttps:
    case Peer::kSilent:
    case Peer::kNotCompatible:
    case Peer::kDropped:
    case Peer::kMechanismMismatch:
      return client::DescribePeer(peer, at) + "; " + needs;
    case Peer::kHandshook:
    case Peer::kUnknown:
      break;
  }
  return "it is unreachable, or the token is unknown, expired or used up (weftd then refuses the connection)";
}

}  // namespace

Status EnsureCredential(HostConfig& config, const sigset_t& stop_signals) {
  WEFT_RETURN_IF_ERROR(LoadHostCredential(config));
  if (config.enroll_token.empty()) {
    if (config.curve_server_key.empty() && !config.server_key.empty()) {
      WEFT_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::Generate());
      WEFT_RETURN_IF_ERROR(Save(config, config.server_key, keys));
      WEFT_LOG(kInfo, kLog) << "made this host's key " << curve::ShortKey(keys.public_key) << " (fingerprint "
                            << curve::Fingerprint(keys.public_key) << ") in " << CredentialPath(config).string()
                            << "; an admin lets it in with `weft host accept " << config.host_id << " --fingerprint "
                            << curve::Fingerprint(keys.public_key) << "`";
    }
    return Status::Ok();
  }
  WEFT_ASSIGN_OR_RETURN(curve::Token token, curve::DecodeToken(config.enroll_token));
  if (config.curve_server_key == token.server_key) return Status::Ok();  // enrolled on an earlier start

  WEFT_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::Generate());
  zmq::context_t ctx(1);
  client::Options options;
  options.endpoint = config.server;
  options.timeout_ms = config.request_timeout_ms;
  options.server_key = token.server_key;
  options.keys = token.keys;
  client::Client client(ctx, options);
  for (int attempt = 0;; ++attempt) {
    Result<client::json> r = client.Call("host.enroll", {{"host_id", config.host_id}, {"public_key", keys.public_key}});
    if (r.ok()) {
      WEFT_RETURN_IF_ERROR(Save(config, token.server_key, keys));
      WEFT_LOG(kInfo, kLog) << "enrolled with weftd at " << config.server << " as '" << config.host_id << "' (key "
                            << curve::ShortKey(keys.public_key) << ", saved in " << CredentialPath(config).string()
                            << "); the token is used up";
      return Status::Ok();
    }
    const Code code = r.status().code();
    if (code != Code::kUnavailable && code != Code::kTimeout)
      return r.status().WithContext("weftd refused the enrollment of host '" + config.host_id + "'");
    if (attempt % 10 == 0) {
      WEFT_LOG(kWarn, kLog) << "no answer from weftd at " << config.server << " to the enrollment: "
                            << WhyNoAnswer(ctx, options) << "; retrying";
    }
    if (Stopped(stop_signals)) return Status::Unavailable("stopped before the host could enroll");
  }
}

}  // namespace weft::host
