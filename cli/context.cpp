#include "weft/cli/context.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "weft/cli/format.hpp"
#include "weft/client/probe.hpp"
#include "weft/common/text.hpp"
#include "weft/common/wire.hpp"

namespace weft::cli {
namespace {

// The host of a tcp:// endpoint, without IPv6 brackets; "" for other transports.
std::string TcpHost(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return "";
  std::string address = endpoint.substr(6);
  if (auto semi = address.find(';'); semi != std::string::npos) address = address.substr(semi + 1);
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// A host name that does not resolve would only show as a server that never answers.
Status CheckResolves(const std::string& endpoint) {
  const std::string host = TcpHost(endpoint);
  if (host.empty()) return Status::Ok();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (rc == 0) return Status::Ok();
  return Status::Unavailable("cannot resolve host '" + host + "' of " + endpoint + " (" + gai_strerror(rc) +
                             "); check --server or WEFT_SERVER");
}

}  // namespace

Status Context::LoadCredential() {
  if (options_.no_credentials) return Status::Ok();
  if (!options_.credentials.empty()) {
    // Named by the user: used for whatever server they point weft at.
    WEFT_ASSIGN_OR_RETURN(curve::Credential c, curve::LoadCredential(options_.credentials));
    credential_ = c;
    credential_path_ = options_.credentials;
    if (!options_.server_given && !c.api.empty()) options_.server = c.api;
    return Status::Ok();
  }
  // Found by weft itself: each is for the weftd it was made for (the local weftd's
  // superadmin credential for the local weftd) and goes to no other, so that a request
  // to a server the user named never acts as an identity they did not choose.
  std::vector<std::filesystem::path> candidates;
  if (const char* home = std::getenv("HOME"); home && *home)
    candidates.push_back(std::filesystem::path(home) / ".config/weft/credentials.json");
  candidates.push_back(std::filesystem::path(options_.data_dir) / "credentials" / "superadmin.json");
  for (const auto& path : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    WEFT_ASSIGN_OR_RETURN(curve::Credential c, curve::LoadCredential(path));
    if (options_.server_given && !SameWeftd(c.api, options_.server)) {
      skipped_.push_back({path.string(), c.api});
      continue;
    }
    credential_ = c;
    credential_path_ = path.string();
    if (!options_.server_given && !c.api.empty()) options_.server = c.api;
    return Status::Ok();
  }
  return Status::Ok();
}

std::string Context::CredentialAdvice() const {
  if (options_.no_credentials)
    return ", and --no-credentials sends none (an anonymous client cannot talk to it): leave --no-credentials "
           "out, or pass --credentials FILE";
  std::string skipped;
  for (const Skipped& s : skipped_)
    skipped += (skipped.empty() ? " (weft did not send " : ", nor ") + s.path + ", which is for the weftd at " +
               (s.api.empty() ? std::string("an endpoint it does not name") : s.api);
  if (!skipped.empty()) skipped += ")";
  return skipped + ": pass --credentials FILE or set WEFT_CREDENTIALS to a credential of this weftd (its admin "
                   "makes one with `weft credentials USER -f FILE`; on its own machine weftd writes "
                   "<data_dir>/credentials/superadmin.json)";
}

Context::Context(GlobalOptions options, std::ostream& out, std::ostream& err)
    : options_(std::move(options)), out_(out), err_(err) {}

Context::~Context() {
  client_.reset();  // the socket must close before its context
  zmq_.reset();
}

client::Options Context::ClientOptions() const {
  client::Options o;
  if (credential_) {
    o.server_key = credential_->server_key;
    o.keys = credential_->keys;
  }
  o.endpoint = options_.server;
  o.timeout_ms = options_.timeout_ms;
  o.tenant = options_.tenant;
  // NoAnswer looks at the peer itself, with the credential in mind; an event
  // stream, while weftd is away, asks again and again without a look meanwhile.
  o.probe_ms = 0;
  // The CLI trusts its server's replies: `job show` of a 1,000-node job is several MiB of JSON.
  o.limits.max_header_bytes = 256u << 20;
  o.limits.max_total_bytes = 512u << 20;
  return o;
}

Result<json> Context::Call(std::string_view op, json body) { return Call(op, std::move(body), {}); }

Result<json> Context::Call(std::string_view op, json body, std::vector<std::string> blobs, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = options_.timeout_ms;
  if (!client_) {
    try {
      zmq_ = std::make_unique<zmq::context_t>(1);
    } catch (const zmq::error_t& e) {
      return Status::Internal(std::string("cannot start ZeroMQ: ") + e.what());
    }
    WEFT_RETURN_IF_ERROR(LoadCredential());
    // The endpoint may come from a credential file: check it as --server is checked.
    for (const std::string& one : client::SplitEndpoints(options_.server)) {
      if (Status port = CheckEndpointPort(one); !port.ok())
        return Status::Invalid("the server endpoint " + port.message() + " (set --server or WEFT_SERVER)");
      WEFT_RETURN_IF_ERROR(CheckResolves(one));
    }
    client_ = std::make_unique<client::Client>(*zmq_, ClientOptions());
  }
  wire::Request request;
  request.op = std::string(op);
  request.body = std::move(body);
  request.blobs = std::move(blobs);
  Result<wire::Reply> reply = client_->CallRaw(request, timeout_ms);
  if (!reply.ok()) {
    // The request never got an answer: say where we looked and how to look elsewhere.
    const Status& st = reply.status();
    // (With several endpoints the message names the one that was silent; the next call tries the next.)
    const bool several = client::SplitEndpoints(options_.server).size() > 1;
    if (!several && st.code() == Code::kTimeout && st.message().rfind("no answer", 0) == 0)
      return NoAnswer(timeout_ms);
    return Status(st.code(), st.message() + " (set --server or WEFT_SERVER)");
  }
  // weftd answered UNAVAILABLE: it cannot serve now (its database is unreachable, it is
  // shutting down, no leader is known yet): say that it answered, and why, on one line.
  if (!reply->ok) {
    Status error = reply->error.code == Code::kUnavailable
                       ? Status::Unavailable("weftd at " + client_->endpoint() + " answered UNAVAILABLE: " +
                                             OneLine(reply->error.message))
                       : reply->ToStatus();
    errors_.push_back({error.code(), error.message(),
                       reply->error.details.is_object() ? reply->error.details : json::object()});
    return error;
  }
  return std::move(reply->body);
}

Status Context::NoAnswer(int timeout_ms) {
  // How long each look at the peer may take. Only a request that already got
  // no answer pays it; on a loaded machine a handshake takes well over a second.
  constexpr int kProbeMs = 3000;
  const std::string where = options_.server;
  const std::string within = " within " + Duration(timeout_ms);
  const std::string elsewhere = " (set --server or WEFT_SERVER)";
  const std::string need_credential = "weftd at " + where + " needs a credential" + CredentialAdvice();
  using client::Peer;
  const int probe_ms = std::min(timeout_ms, kProbeMs);
  const std::string api_is =
      "; weft needs weftd's api endpoint (\"api\" in the credential file; a local weftd writes its endpoints to "
      "<data_dir>/endpoints.json)";
  const Peer peer = client::ProbePeer(*zmq_, client_->options(), where, probe_ms);
  switch (peer) {
    case Peer::kHttp:
    case Peer::kHttps:
      return Status::Unavailable(client::DescribePeer(peer, where) + api_is + elsewhere);
    case Peer::kProvisioner:
      return Status::Unavailable(where + " answered as weftd's provisioner endpoint (the one weft-host uses), not its "
                                 "api endpoint" + api_is + elsewhere);
    case Peer::kRefused:
      return Status::Unavailable("nothing listens at " + where + " (connection refused); is weftd running?" +
                                 elsewhere);
    case Peer::kSilent:  // (the client library's words: a stopped weftd is silent too)
      return Status::Unavailable("no reply from " + where + ": " + client::DescribePeer(peer, where, probe_ms) +
                                 elsewhere);
    case Peer::kDropped:
    case Peer::kNotCompatible:
      // A client without a key is cut off by a weftd with CurveZMQ on, often
      // before libzmq reports the mechanism mismatch, and which of the two
      // events libzmq reports depends on timing: ask the greeting.
      if (!credential_ && client::PeerMechanism(where, probe_ms) == "CURVE")
        return Status::Unavailable(need_credential);
      return Status::Unavailable("no reply from " + where + ": is it the api endpoint of a running weftd? The "
                                 "ZeroMQ socket there is not one weft can talk to (weftd's events or another "
                                 "program's endpoint?); weftd writes its endpoints to <data_dir>/endpoints.json" +
                                 elsewhere);
    case Peer::kMechanismMismatch:
      return Status::Unavailable(credential_ ? "weftd at " + where + " does not use CurveZMQ, but the credential " +
                                                   credential_path_ + " does; is it the right server?" + elsewhere
                                             : need_credential);
    case Peer::kAuthRefused:
      return Status::Unavailable("no answer from weftd at " + where + within + ": it refuses the key of " +
                                 (credential_ ? credential_path_ : std::string("this client")) +
                                 " at the handshake, so it may not know the key (revoked, or a credential of "
                                 "another weftd?)");
    case Peer::kHandshook: {
      // A weftd that stopped or restarted while the request waited (its
      // replies to the old connection are lost), or was too busy to answer in
      // time, answers a new request now: then the request's fate is unknown.
      wire::Request status;
      status.op = "server.status";
      status.body = json::object();
      if (Result<wire::Reply> now = client_->CallRaw(status, probe_ms); now.ok()) {
        const json uptime = now->ok ? now->body.value("uptime_ms", json()) : json();
        const std::string up = uptime.is_number_integer() ? " (up " + Duration(uptime.get<std::int64_t>()) + ")" : "";
        return Status::Unavailable("no reply from weftd at " + where + within + ", but it answers now" + up +
                                   ": it was restarted, or too busy to answer in time, while the request waited, "
                                   "so it may or may not have been done; look (weft job list, weft cluster "
                                   "list) before sending it again");
      }
      return Status::Unavailable("no reply from " + where + within + ": is it the api endpoint of a running "
                                 "weftd? A ZeroMQ socket there takes the connection but did not answer" + elsewhere);
    }
    case Peer::kUnknown: break;
  }
  return Status::Unavailable(
      "no answer from weftd at " + where + within + "; is weftd running?" + elsewhere +
      (credential_ ? "; if it is, it may not know the key of " + credential_path_
                   : "; if it is, it may need a credential" + CredentialAdvice()));
}

json Context::ErrorDetails(const Status& error) const {
  for (auto it = errors_.rbegin(); it != errors_.rend(); ++it)
    if (it->code == error.code() && it->message == error.message()) return it->details;
  return json::object();
}

void Context::PrintJson(const json& value) {
  printed_json_ = true;
  const json& shown = value.is_null() ? json::object() : value;
  out_ << shown.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

std::string Context::CommandLine(std::string_view args) const {
  std::string out = "weft ";
  if (!options_.tenant.empty()) out += "--tenant " + options_.tenant + " ";
  return out += args;
}

std::string Context::Suggest(std::string_view args) const { return "`" + CommandLine(args) + "`"; }

Status Context::UsageError(std::string message) {
  usage_error_ = true;
  return Status::Invalid(std::move(message));
}

}  // namespace weft::cli
