// Fuzzes what weftd does with a request on the provisioner endpoint from a key
// it has not accepted: the principal it resolves (auth::Resolve) and then, for
// a key it does not know, auth::HandlePending (host.register files a request,
// anything else is refused), for a token's key the ops a token may call
// (host.enroll), for a host's key the host ops (host.register, task.take...).
// Input: one byte choosing the sender (unknown key, token, host), then frames
// split at NUL bytes (fuzz_util.hpp). Beyond "no crash", it checks that an
// unknown key is never served, that no request from it or from a token makes
// a key act for a host it was not made for, and that every refusal says why.
#include <cstddef>
#include <cstdint>

#include "fuzz_server.hpp"
#include "weft/server/hosts/host_ops.hpp"

using weft::fuzz::Require;
namespace wire = weft::wire;
namespace api = weft::api;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  weft::fuzz::Server& server = weft::fuzz::Server::Get();
  static const std::string stranger = [] {
    auto k = weft::curve::Generate();
    Require(k.ok(), "a key pair");
    return k->public_key;
  }();
  const int sender = data[0] % 3;
  const std::string key = sender == 0 ? stranger : sender == 1 ? server.token_key() : server.host_key();
  const wire::Frames frames = weft::fuzz::SplitFrames(weft::fuzz::Bytes(data + 1, size - 1));
  std::string id;
  // As weftd's transport reads the provisioner endpoint: task.take and task.finish keep their body as text.
  auto request = wire::DecodeRequest(frames, server.limits(), &id, weft::hosts::kTextBodyOps);
  if (!request.ok()) return 0;
  server.Isolated([&] {
    auto principal = weft::auth::Resolve(server.registry(), api::Endpoint::kProvisioner, key, *request);
    if (!principal.ok()) {
      Require(!principal.status().message().empty(), "a refused principal says why");
      return;
    }
    api::Response r;
    if (principal->role == api::Role::kPending) {
      Require(sender == 0, "only an unknown key is pending");
      weft::log::Tally tally(weft::log::Level::kInfo, "fuzz", 5000);
      r = weft::auth::HandlePending(server.registry(), tally, 0, key, "127.0.0.1", *request);
      Require(!r.status.ok(), "a key weftd does not know is never served", r.body.dump());
      Require(!server.registry().Find(key), "asking to join does not let a key in");
    } else {
      api::Call call;
      call.endpoint = api::Endpoint::kProvisioner;
      call.request = &*request;
      call.principal = *principal;
      r = server.components().router().Route(call);
      if (sender == 1 && r.status.ok() && request->op == "host.enroll") {
        Require(!server.registry().Find(server.token_key()), "a token enrolls once");
        const std::string enrolled = request->body.value("host_id", std::string());
        Require(enrolled != "h1", "a token made for a new host does not take over h1");
      }
    }
    Require(r.status.ok() || r.held || !r.status.message().empty(), "a refusal says why");
    const weft::auth::KeyEntry* host = server.registry().Find(server.host_key());
    if (sender != 2) Require(host && host->host_id == "h1", "h1 keeps its key whatever others send");
  });
  return 0;
}
