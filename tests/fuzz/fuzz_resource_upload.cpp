// Fuzzes resource.upload, the op that takes the largest input a client sends
// (a chunk of a file in a payload frame), through the router as weftd calls it
// for a tenant admin. Input: frames split at NUL bytes (fuzz_util.hpp); the
// request's op is always resource.upload. Beyond "no crash", it checks that a
// refusal says why and that a whole file uploaded in one chunk comes back
// with its own size and SHA-256 digest.
#include <cstddef>
#include <cstdint>

#include "fuzz_server.hpp"
#include "weft/common/digest.hpp"

using weft::fuzz::Require;
namespace wire = weft::wire;
namespace api = weft::api;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  weft::fuzz::Server& server = weft::fuzz::Server::Get();
  const wire::Frames frames = weft::fuzz::SplitFrames(weft::fuzz::Bytes(data, size));
  std::string id;
  auto request = wire::DecodeRequest(frames, server.limits(), &id);
  if (!request.ok()) return 0;
  request->op = "resource.upload";
  server.Isolated([&] {
    api::Call call;
    call.endpoint = api::Endpoint::kApi;
    call.request = &*request;
    call.principal.tenant = "default";
    call.principal.role = api::Role::kAdmin;
    call.principal.user = "fuzz";
    api::Response r = server.components().router().Route(call);
    if (!r.status.ok()) {
      Require(!r.status.message().empty(), "a refusal says why");
      return;
    }
    const nlohmann::json& body = request->body;
    const bool whole = !body.contains("upload_id") && body.value("offset", 0) == 0 && body.value("final", false);
    if (whole && r.body.contains("version")) {
      auto digest = weft::digest::Sha256Of(request->blobs.at(0));
      Require(digest.ok(), "a digest");
      Require(r.body["size"] == request->blobs[0].size(), "a one-chunk file keeps its size", r.body.dump());
      Require(r.body["digest"] == *digest, "a one-chunk file keeps its digest", r.body.dump());
    }
  });
  return 0;
}
