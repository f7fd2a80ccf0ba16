#include "weft/host/enrollment.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/client/probe.hpp"
#include "weft/common/log.hpp"

namespace weft::host {
namespace {

constexpr const char* kLog = "host";

// <state_dir>/enrollment.json: which token's key enrolled which host key, so
// a token already spent on the credential is not tried again, and a new one
// (after `weft host revoke`) is.
std::filesystem::path EnrollmentPath(const HostConfig& config) { return StateDir(config) / "enrollment.json"; }

void RecordEnrollment(const HostConfig& config, const std::string& token_key, const std::string& host_key) {
  const nlohmann::json record = {{"token_key", token_key}, {"host_key", host_key}};
  if (Status s = curve::WritePrivateFile(EnrollmentPath(config), record.dump() + "\n"); !s.ok()) {
    WEFT_LOG(kWarn, kLog) << "cannot record which token enrolled this host: " << s.message();
  }
}

// The token key recorded for the host key `host_key`, or "".
std::string EnrolledWith(const HostConfig& config, const std::string& host_key) {
  std::ifstream in(EnrollmentPath(config));
  if (!in) return "";
  const nlohmann::json record = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object() || record.value("host_key", std::string()) != host_key) return "";
  return record.value("token_key", std::string());
}

// Moves credential.json aside (credential.json.refused-<UTC time>); the new path.
Result<std::filesystem::path> SetAside(const HostConfig& config) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::filesystem::path from = CredentialPath(config);
  const std::filesystem::path to = from.string() + ".refused-" + stamp;
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  if (ec) return Status::Unavailable("cannot move " + from.string() + " aside to " + to.string() + ": " + ec.message());
  return to;
}

enum class KeyVerdict { kTaken, kRefused, kUnknown };

// Whether weftd's handshake takes the stored key: a refusal there is what a
// revoked host meets.
KeyVerdict StoredKeyTaken(const HostConfig& config) {
  constexpr int kProbeMs = 3000;
  zmq::context_t ctx(1);
  const client::Options options = ClientOptions(config, config.request_timeout_ms);
  switch (client::ProbePeer(ctx, options, config.server, std::min(config.request_timeout_ms, kProbeMs))) {
    case client::Peer::kHandshook: return KeyVerdict::kTaken;
    case client::Peer::kAuthRefused:
    case client::Peer::kProvisioner: return KeyVerdict::kRefused;
    default: return KeyVerdict::kUnknown;
  }
}

std::string KeyName(const std::string& public_key) {
  return curve::ShortKey(public_key) + " (fingerprint " + curve::Fingerprint(public_key) + ")";
}

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
  if (config.enroll_token.empty() && !config.server_key.empty() && !config.curve_server_key.empty() &&
      config.curve_server_key != config.server_key) {
    // server_key corrected after a start with a wrong one: the key pair stays
    // (weftd never saw it), weftd's key is the configured one.
    WEFT_LOG(kWarn, kLog) << "server_key in the configuration (fingerprint " << curve::Fingerprint(config.server_key)
                          << ") is not the one in " << CredentialPath(config).string() << " (fingerprint "
                          << curve::Fingerprint(config.curve_server_key)
                          << "); using the configured one and keeping this host's key "
                          << KeyName(config.curve_keys.public_key);
    WEFT_RETURN_IF_ERROR(Save(config, config.server_key, config.curve_keys));
  }
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
  if (!config.curve_server_key.empty()) {
    const std::string host_key = config.curve_keys.public_key;
    if (config.curve_server_key == token.server_key) {
      // Enrolled on an earlier start with this very token: it is spent, the credential is what counts.
      if (EnrolledWith(config, host_key) == token.keys.public_key) return Status::Ok();
      // A token not used for this credential: it is for when weftd no longer
      // takes the stored key (revoked, or weftd's store started over).
      switch (StoredKeyTaken(config)) {
        case KeyVerdict::kTaken:
          WEFT_LOG(kInfo, kLog) << "weftd takes this host's key " << KeyName(host_key) << " from "
                                << CredentialPath(config).string()
                                << "; the configured enroll_token is not needed and not used";
          return Status::Ok();
        case KeyVerdict::kUnknown:
          WEFT_LOG(kWarn, kLog) << "cannot tell whether weftd at " << config.server << " takes this host's key "
                                << KeyName(host_key) << " (no answer); using it, not the configured enroll_token";
          return Status::Ok();
        case KeyVerdict::kRefused: break;
      }
    }
    WEFT_ASSIGN_OR_RETURN(std::filesystem::path aside, SetAside(config));
    WEFT_LOG(kWarn, kLog) << (config.curve_server_key == token.server_key
                                  ? "weftd at " + config.server + " refuses this host's key " + KeyName(host_key) +
                                        " (revoked with `weft host revoke`?)"
                                  : std::string("the configured enroll_token is for another weftd than the stored "
                                                "credential"))
                          << "; enrolling with the configured enroll_token, which was not used for this key; the old "
                             "credential is kept as "
                          << aside.string();
    config.curve_server_key.clear();
    config.curve_keys = {};
  }

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
      RecordEnrollment(config, token.keys.public_key, keys.public_key);
      WEFT_LOG(kInfo, kLog) << "enrolled with weftd at " << client.endpoint() << " as '" << config.host_id << "' (key "
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

std::string RefusedKeyAdvice(const HostConfig& config) {
  if (config.curve_keys.public_key.empty()) return "";
  const std::string credential = CredentialPath(config).string();
  std::string advice = "weftd refuses this host's key " + KeyName(config.curve_keys.public_key) + " from " +
                       credential + " (revoked with `weft host revoke`, or weftd's store started over). ";
  bool token_used = false;
  if (!config.enroll_token.empty()) {
    Result<curve::Token> token = curve::DecodeToken(config.enroll_token);
    token_used = token.ok() && EnrolledWith(config, config.curve_keys.public_key) == token->keys.public_key;
    if (!token_used)
      return advice + "The configured enroll_token was not used for this key: restart weft-host to enroll with it "
                      "(the old credential.json is kept aside)";
  }
  return advice + (token_used ? "The configured enroll_token was already spent on this key, so it is not used "
                                "again. "
                              : std::string()) +
         "To let the host in again, make a new token with `weft host token create`, set it as enroll_token and "
         "restart weft-host: it keeps the old credential.json aside and enrolls with the token";
}

bool KeyRefused(const Status& status) {
  // A key waiting for an admin's `weft host accept` is retried as often as before:
  // the host gets in soon after the accept.
  if (status.code() == Code::kDenied) return status.message().find("not accepted yet") == std::string::npos;
  if (status.code() != Code::kUnavailable && status.code() != Code::kTimeout) return false;
  // What the client says when it looked at the endpoint again (client::DescribePeer).
  return status.message().find("refused this client's key") != std::string::npos;
}

bool ProcessReplaced(const Status& status, const nlohmann::json& details) {
  return status.code() == Code::kConflict && details.is_object() && details.value("reason", "") == "process_replaced";
}

std::chrono::milliseconds RefusalBackoff::Refused(const Status& status, const std::string& advice) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  ++refusals_;
  // Raised once per wait: the callers that were refused together after a wait
  // raise it once, not once each.
  if (wait_.count() == 0 || (wait_ < kMax && now - changed_ >= wait_)) {
    wait_ = wait_.count() == 0 ? kFirst : std::min(wait_ * 2, kMax);
    changed_ = now;
    WEFT_LOG(kError, component_) << what_ << ": " << status.message() << " (" << refusals_
                                 << " refused so far; next try in " << wait_.count() / 1000 << " s"
                                 << (wait_ == kMax ? ", and every " + std::to_string(kMax.count() / 1000) + " s after"
                                                   : std::string())
                                 << ")" << (advice.empty() ? std::string() : ". " + advice);
  }
  return wait_;
}

void RefusalBackoff::Accepted() {
  std::lock_guard<std::mutex> lock(mu_);
  if (wait_.count() == 0) return;
  WEFT_LOG(kInfo, component_) << what_ << ": weftd takes this host's key again (after " << refusals_ << " refusal(s))";
  wait_ = std::chrono::milliseconds(0);
  refusals_ = 0;
}

Status ExplainStatus(const HostConfig& config, const Status& status) {
  // What the client says when the peer dropped or failed the handshake
  // (client::DescribePeer): with CurveZMQ, what a wrong server key looks like.
  if (config.curve_server_key.empty() ||
      (status.code() != Code::kUnavailable && status.code() != Code::kTimeout) ||
      status.message().find("is not one a client can talk to") == std::string::npos)
    return status;
  const bool configured = config.curve_server_key == config.server_key;
  return Status::Unavailable(
      "the CurveZMQ handshake with " + config.server + " failed: the server key this host uses, " +
      curve::ShortKey(config.curve_server_key) + " (fingerprint " + curve::Fingerprint(config.curve_server_key) +
      ", " + (configured ? "server_key in the configuration" : "from " + CredentialPath(config).string()) +
      "), may be wrong: weftd's public key is \"server_key\" in its <data_dir>/endpoints.json and the last part "
      "of every token `weft host token create` prints (weftd's log names this host's address: \"sent a CurveZMQ "
      "handshake weftd cannot decrypt\"). "
      "Or " + config.server + " is not weftd's provisioner endpoint (\"provisioner\" in endpoints.json)");
}

std::string ExplainFailure(const HostConfig& config, const Status& status) {
  return ExplainStatus(config, status).ToString();
}

}  // namespace weft::host
