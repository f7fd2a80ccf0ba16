// Fuzzes wire::DecodeRequest: the first code in weftd that sees the bytes a peer
// sends. Input: frames split at NUL bytes (fuzz_util.hpp). Beyond "no crash, no
// sanitizer report, no exception", it checks that a decoded request keeps to the
// limits and survives EncodeRequest and a second decode unchanged.
#include <cstddef>
#include <cstdint>

#include <string_view>

#include "fuzz_util.hpp"
#include "weft/common/flat_json.hpp"

using weft::fuzz::Require;
namespace wire = weft::wire;

namespace {

// Kept as text (Request::body_text) for these ops: refused and read exactly as
// the tree is, and the flat reader of such text reads it to its end.
void CheckTextBody(const wire::Frames& frames, const wire::Limits& limits,
                   const weft::Result<wire::Request>& tree, const std::string& tree_id) {
  static constexpr std::string_view kOps[] = {"task.finish", "task.take"};
  std::string id = "stale";
  auto req = wire::DecodeRequest(frames, limits, &id, kOps);
  Require(id == tree_id, "the same id read for an error reply");
  Require(req.ok() == tree.ok(), "refused alike with the body kept as text");
  if (!req.ok()) {
    Require(req.status().message() == tree.status().message(), "refused in the same words",
            req.status().message() + "\n" + tree.status().message());
    return;
  }
  if (req->body_text.empty()) {
    Require(req->body == tree->body, "a body not kept as text is the tree");
    return;
  }
  Require(req->op == "task.finish" || req->op == "task.take", "only the named ops keep their body as text");
  Require(wire::BodyTree(*req) == tree->body, "the text reads as the tree", req->body_text);
  weft::flatjson::Reader reader(req->body_text);
  weft::flatjson::Member m;
  while (reader.Next(m)) {
  }
  Require(reader.ok(), "the flat reader reads a body kept as text to its end", req->body_text);
}

void Check(const wire::Frames& frames, const wire::Limits& limits) {
  std::string id = "stale";
  auto req = wire::DecodeRequest(frames, limits, &id);
  CheckTextBody(frames, limits, req, id);
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
