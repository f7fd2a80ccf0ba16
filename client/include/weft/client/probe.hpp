// weft::client probes: a second look at an endpoint that gave a request no
// answer, to tell the user what is there instead of only "no answer": nothing,
// an HTTP or HTTPS server (weft-web?), a ZeroMQ socket that is not weftd's api
// endpoint, weftd's provisioner endpoint, a weftd that refuses the key.
//
// Only the error path pays for it: a few connections, each watched for at most
// the given time. Safe to point at anything: a probe sends a ZeroMQ greeting, a
// CurveZMQ handshake (with the client's keys, or with a throwaway key pair), an
// HTTP "HEAD /" or a TLS ClientHello, and never one of weftd's ops.
//
// Thread-safety: free functions; the zmq::context_t must outlive the call.
#pragma once

#include <string>

#include <zmq.hpp>

#include "weft/client/client.hpp"

namespace weft::client {

// What a fresh connection to the endpoint showed.
enum class Peer {
  kUnknown,            // nothing happened within the probe's time
  kRefused,            // no listener: the connection was refused
  kSilent,             // something accepted the connection but did not answer the handshake (a stopped weftd?)
  kHttp,               // an HTTP server (weft-web's port?)
  kHttps,              // a TLS server (weft-web's port with [tls]?)
  kMechanismMismatch,  // a ZeroMQ peer with other security (CurveZMQ on one side only)
  kNotCompatible,      // a ZeroMQ peer whose handshake failed otherwise (another socket type)
  kDropped,            // the peer closed the connection during the handshake, saying nothing
  kAuthRefused,        // weftd's authentication refused our key
  kProvisioner,        // refused our key but took a host's unknown one: weftd's provisioner endpoint
  kHandshook,          // the handshake succeeded: a ZeroMQ socket that takes requests
};

// Connects to `endpoint` with the security of `options` and says what the
// peer is, in at most about 2 * `ms` (the handshake gets `ms`, every further
// look shares the rest).
Peer ProbePeer(zmq::context_t& ctx, const Options& options, const std::string& endpoint, int ms);

// Whether an HTTP server answers at the endpoint (a HEAD request, within `ms`).
bool AnswersHttp(const std::string& endpoint, int ms);

// The security mechanism a ZMTP 3 peer announces in its greeting ("NULL",
// "CURVE", ...), read over a plain TCP connection; "" when it cannot be read.
std::string PeerMechanism(const std::string& endpoint, int ms);

// One clause on what was found at `endpoint`, for a program's error message
// ("that endpoint answered as weftd's provisioner endpoint, not its api
// endpoint"); "" when the probe learned nothing worth saying. `ms`: the time
// the probe gave the handshake, named for a peer that stayed silent (0: not said).
std::string DescribePeer(Peer peer, const std::string& endpoint, int ms = 0);

}  // namespace weft::client
