// The Weft wire codec (docs/protocol.md).
//
// Every message is one ZeroMQ multipart message: frame 0 is a UTF-8 JSON header,
// further frames are binary payloads. Requests carry {"v":1,"id","op","body"}
// (and optionally "tenant", "session", "csrf", "token", "client_addr"),
// replies {"v":1,"id","ok":true,"body"} or {"v":1,"id","ok":false,
// "error":{"code","message","details"}}. Decoding never throws and never
// trusts its input: every limit is checked before a byte is parsed. A request
// whose header or body names a key twice in one object is refused (JSON
// parsers differ on which of the two they take); a reply's keeps the last.
//
// Functions here are thread-safe (no shared state); the zmq sockets passed to
// the helpers belong to the calling thread.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/common/json_fields.hpp"
#include "weft/common/status.hpp"

namespace weft::wire {

using json = nlohmann::json;
using Frames = std::vector<zmq::message_t>;

inline constexpr int kProtocolVersion = 1;

struct Limits {
  std::size_t max_frames = 64;                    // header + payload frames
  std::size_t max_header_bytes = 1u << 20;        // 1 MiB of JSON
  std::size_t max_frame_bytes = 16u << 20;        // one payload frame
  std::size_t max_total_bytes = 64u << 20;        // the whole message
  std::size_t max_id_bytes = 128;
  std::size_t max_op_bytes = 64;
  std::size_t max_secret_bytes = 256;             // session, csrf, token, client_addr
  std::size_t max_depth = jsonf::kMaxDepth;       // nesting of arrays and objects in the header
};

// Whom a request acts for when it does not come straight from the user's own
// key (docs/security.md, "Browsers, the gateway and sessions"): a gateway
// passes the browser's session (and the CSRF token of a state-changing op) or
// an API token, and the address the browser connected from. All optional;
// empty fields are left out of the header.
struct OnBehalf {
  std::string session = {};      // a session id from session.login
  std::string csrf = {};         // that session's csrf_token
  std::string token = {};        // an API token secret (weft token create)
  std::string client_addr = {};  // the browser's address, for login rate limits and the audit log

  bool empty() const { return session.empty() && csrf.empty() && token.empty() && client_addr.empty(); }
};

struct Request {
  std::string id;
  std::string op;
  std::string tenant;  // optional header "tenant"; the server decides what it may be
  OnBehalf on_behalf;  // optional header fields "session", "csrf", "token", "client_addr"
  json body = json::object();
  std::vector<std::string> blobs;  // payload frames, in order (how many an op takes is its router's to check)
  // Not empty: the body as its JSON text (an object DecodeRequest read through
  // and found valid), and `body` is left empty. DecodeRequest does so only for
  // the ops its caller names: a server reads the few fields of a hot request
  // from the text (weft/common/flat_json.hpp) instead of building a tree.
  // BodyTree() gives the tree either way.
  std::string body_text = {};
};

// A request's body as a tree: `body`, or `body_text` parsed.
json BodyTree(const Request& request);
// The body's member `key` when it is a string (as the tree would have it), else nullopt.
std::optional<std::string> BodyString(const Request& request, std::string_view key);

struct Error {
  Code code = Code::kInternal;
  std::string message;
  json details = json::object();
};

struct Reply {
  std::string id;
  bool ok = true;
  json body = json::object();
  // When not empty, a success's body already written as JSON text: sent as it
  // is instead of `body` (a server that builds a hot reply as text). Encoding only.
  std::string body_text;
  Error error;
  std::vector<std::string> blobs;

  static Reply Success(std::string id, json body = json::object());
  static Reply Failure(std::string id, const Status& status, json details = json::object());
  // The error as a Status (ok when the reply is ok).
  Status ToStatus() const;
};

// Serializes JSON without ever throwing: invalid UTF-8 is replaced.
std::string Dump(const json& value);
// Dump(value), appended to `out`.
void AppendJson(std::string& out, const json& value);
// `text` as a JSON string (quoted and escaped like Dump), appended to `out`.
void AppendJsonString(std::string& out, std::string_view text);

Frames EncodeRequest(const Request& request);
Frames EncodeReply(const Reply& reply);

// Decodes a request (frames without any routing envelope). On failure the
// returned Status explains what is wrong and *id_out holds the request id when
// one could be read, so the caller can still address an error reply.
// `text_body_ops`: the ops whose body is kept as text (Request::body_text);
// their requests are checked and refused exactly as any other's.
Result<Request> DecodeRequest(const Frames& frames, const Limits& limits, std::string* id_out,
                              std::span<const std::string_view> text_body_ops = {});
// The same into `*out`, which must be a Request as constructed (a server
// decodes where it keeps the request: each move of one moves its dozen
// strings). On failure `*out` is unspecified.
Status DecodeRequestInto(const Frames& frames, const Limits& limits, std::string* id_out,
                         std::span<const std::string_view> text_body_ops, Request* out);
Result<Reply> DecodeReply(const Frames& frames, const Limits& limits);

// Checks frame count and sizes only.
Status CheckLimits(const Frames& frames, const Limits& limits);

// ---- ZeroMQ helpers --------------------------------------------------------

// Receives every part of one message. Returns false when nothing was ready
// (non-blocking) or the wait timed out.
bool RecvMultipart(zmq::socket_t& socket, Frames& out, zmq::recv_flags flags = zmq::recv_flags::none);
// Sends every frame; returns false if the socket refused (e.g. unroutable peer).
bool SendMultipart(zmq::socket_t& socket, Frames& frames);

// A ROUTER socket prefixes messages with the peer's routing id, and REQ peers
// add an empty delimiter. SplitEnvelope moves those frames into `envelope` and
// leaves the message proper in `frames`.
void SplitEnvelope(Frames& frames, Frames& envelope);
// Prepends a copy of `envelope` to `frames`.
Frames WithEnvelope(const Frames& envelope, Frames&& frames);

// The endpoint a socket actually bound ("tcp://127.0.0.1:41234" after "tcp://127.0.0.1:*").
std::string LastEndpoint(zmq::socket_t& socket);

}  // namespace weft::wire
