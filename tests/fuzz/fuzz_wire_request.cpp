// Fuzzes wire::DecodeRequest: the first code in weftd that sees the bytes a peer
// sends. Input: frames split at NUL bytes (fuzz_util.hpp). Beyond "no crash, no
// sanitizer report, no exception", it checks that a decoded request keeps to the
// limits and survives EncodeRequest and a second decode unchanged.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"

using weft::fuzz::Require;
namespace wire = weft::wire;

namespace {

void Check(const wire::Frames& frames, const wire::Limits& limits) {
  std::string id = "stale";
  auto req = wire::DecodeRequest(frames, limits, &id);
  if (!req.ok()) {
    Require(!req.status().message().empty(), "a refused request says why");
    Require(id.size() <= limits.max_id_bytes, "the id handed back for an error reply is within the limit", id);
    return;
  }
  Require(id == req->id, "id_out holds the decoded id");
  Require(!req->id.empty() && req->id.size() <= limits.max_id_bytes, "id within limits", req->id);
  Require(!req->op.empty() && req->op.size() <= limits.max_op_bytes, "op within limits", req->op);
  Require(req->tenant.size() <= limits.max_id_bytes, "tenant within limits", req->tenant);
  Require(req->body.is_object(), "body is an object", wire::Dump(req->body));
  Require(req->blobs.size() + 1 == frames.size(), "one blob per payload frame");

  wire::Frames again = wire::EncodeRequest(*req);
  std::string id2;
  auto back = wire::DecodeRequest(again, wire::Limits{}, &id2);
  Require(back.ok(), "a decoded request encodes to one that decodes", back.status().ToString());
  Require(back->id == req->id && back->op == req->op && back->tenant == req->tenant, "id, op, tenant round trip");
  Require(back->body == req->body, "body round trips", wire::Dump(req->body) + "\n" + wire::Dump(back->body));
  Require(back->blobs == req->blobs, "blobs round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const wire::Frames frames = weft::fuzz::SplitFrames(weft::fuzz::Bytes(data, size));
  Check(frames, wire::Limits{});
  Check(frames, weft::fuzz::TightLimits());
  return 0;
}
