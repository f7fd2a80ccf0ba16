// weft::Client: a synchronous request/reply client for weftd's `api` and
// `provisioner` endpoints, for the CLI, the host and any program that drives
// Weft (see docs/protocol.md for the ops).
//
// Uses a DEALER socket. When a call times out the socket is discarded and a
// fresh one is made for the next call (the "lazy pirate" pattern), so a
// restarted server is reached again without any action by the caller, and a
// late reply to an abandoned call is never mistaken for a newer one.
//
// Several weftd on one database (docs/failover.md): `endpoint` may list
// several, comma-separated. A reply that says the server is not the leader
// (NOT_LEADER) sends the call on to the leader it names, at once; with
// several endpoints, one that cannot be connected to is skipped before
// anything is sent to it, and one that never answered a sent request is
// left for the next on the following call (the request may have been
// carried out, so it is not sent twice).
//
// Errors: an error reply is a Status with the server's code and message
// (Call's result keeps its `details` too). A request sent that got no answer
// is TIMEOUT, whether the time ran out or (several endpoints) the connection
// dropped first: it may or may not have been carried out. UNAVAILABLE means
// it was not (weftd's "not done; retry", or the client could send it nowhere).
// A reply over Options::limits is TOO_LARGE.
//
// Not thread-safe: one Client per thread. The zmq::context_t must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/common/curve.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

namespace weft::client {

using json = nlohmann::json;

// The limits a reply is read under. weftd holds requests to its
// `limits.*` (a header of 1 MiB by default, docs/protocol.md "Limits") but
// not its replies: `job.get` of a 450-node job or `cluster.get` of a cluster
// with large results is several MiB of JSON. By default a reply may be as
// large as a whole message may be (64 MiB, `limits.max_message_bytes`'s
// default), its header included; a payload frame at most 16 MiB. A reply over
// the limits set here is TOO_LARGE, its message naming the limit and
// Options::limits; raise them for a weftd whose limits were raised.
struct ReplyLimits : wire::Limits {
  static constexpr std::size_t kMaxReplyBytes = std::size_t{64} << 20;
  ReplyLimits() {
    max_header_bytes = kMaxReplyBytes;
    max_total_bytes = kMaxReplyBytes;
  }
  ReplyLimits(const wire::Limits& limits) : wire::Limits(limits) {}  // NOLINT: implicit by design
};

struct Options {
  std::string endpoint;              // "tcp://127.0.0.1:7420", or several: "tcp://a:7420,tcp://b:7420"
  int timeout_ms = 5000;             // per call, unless the call gives its own
  std::string tenant = {};           // carried in every request header when non-empty
  ReplyLimits limits = {};           // applied to replies (above: up to 64 MiB by default)
  // CurveZMQ (docs/security.md): with server_key set the connection is
  // encrypted and authenticated as `keys`; weftd refuses keys it does not know.
  std::string server_key = {};
  curve::KeyPair keys = {};
  // Sent in every request that does not carry its own (a gateway's or a
  // script's session or API token; docs/security.md).
  wire::OnBehalf on_behalf = {};
  // With one endpoint, a call that gets no answer looks at the endpoint again
  // for up to about twice this long (weft/client/probe.hpp) and says what it
  // found there (an HTTP server, weftd's provisioner endpoint, ...); 0: never.
  int probe_ms = 1000;
  // false: a NOT_LEADER reply is returned as it came, not followed (to ask one weftd itself).
  bool follow_leader = true;
};

// What Call and CallAs return: a Result<json> (it converts to one) that, for
// an error reply, also keeps the error's `details` (docs/protocol.md: an
// object, op-specific: NOT_LEADER's `leader`, a stale finish's
// `current_attempt`, ...).
class [[nodiscard]] DetailedResult : public Result<json> {
 public:
  using Result<json>::Result;
  DetailedResult(Status status, json details) : Result<json>(std::move(status)), details_(std::move(details)) {}
  // The error reply's details; an empty object when the call succeeded, the
  // reply carried none or no reply came.
  const json& details() const { return details_; }

 private:
  json details_ = json::object();
};

// The endpoints of a comma-separated list, without blanks and empty entries.
std::vector<std::string> SplitEndpoints(std::string_view list);

// Options for the api endpoint from a credential file (endpoint, keys).
// curve::LoadCredential reads one: it refuses a file whose public key is not
// its secret key's, and logs a warning when others may read the file.
Options FromCredential(const curve::Credential& credential, int timeout_ms = 5000);

class Client {
 public:
  Client(zmq::context_t& ctx, Options options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `op` with `body` and waits for the reply. An error reply becomes a
  // Status with the server's code and message, its details in the result's
  // details(); no reply within the timeout is kTimeout (see above).
  DetailedResult Call(std::string_view op, json body = json::object(), int timeout_ms = -1);
  // The same on behalf of a session or API token (a gateway serving many
  // browsers over one Client passes each request's own).
  DetailedResult CallAs(const wire::OnBehalf& on_behalf, std::string_view op, json body = json::object(),
                        int timeout_ms = -1);
  // The same, with payload frames both ways; a request whose on_behalf is
  // empty gets the options' one.
  Result<wire::Reply> CallRaw(const wire::Request& request, int timeout_ms = -1);

  const Options& options() const { return options_; }
  // The endpoint the next call goes to first.
  const std::string& endpoint() const { return endpoints_[current_]; }
  void set_on_behalf(wire::OnBehalf on_behalf) { options_.on_behalf = std::move(on_behalf); }

 private:
  void Connect();
  std::string NextId();
  // Sends `req` (its tenant and on_behalf when empty, filled in here), following
  // a follower's NOT_LEADER to the leader, and waits for the reply: the request
  // is not copied on the way.
  Result<wire::Reply> Exchange(wire::Request& req, int timeout_ms);
  // With several endpoints: connects to the current one, moving on to the
  // next while one cannot be connected to within `ms`; false if none could.
  bool ConnectReachable(int ms);
  // One attempt at the current endpoint, with a fresh request id.
  Result<wire::Reply> CallOnce(wire::Request& req, std::chrono::steady_clock::time_point deadline, int timeout_ms);
  // Moves to `endpoint` (added to the list when new) or, when empty, the next one.
  void MoveTo(const std::string& endpoint);

  // With several endpoints: whether the monitor saw the connection drop (draining its events).
  bool Disconnected();

  std::vector<std::string> endpoints_;
  std::size_t current_ = 0;
  std::unique_ptr<zmq::socket_t> monitor_;  // with several endpoints: the socket's disconnect events
  zmq::context_t& ctx_;
  Options options_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string id_prefix_;
  std::uint64_t next_id_ = 1;
};

}  // namespace weft::client
