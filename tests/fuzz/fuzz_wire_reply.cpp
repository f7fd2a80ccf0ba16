// Fuzzes wire::DecodeReply, which the CLI, the client library and weft-host run
// on whatever comes back from a server. Input: frames split at NUL bytes
// (fuzz_util.hpp). Checks that a decoded reply survives EncodeReply and a second
// decode, and that a failed reply never reads as success.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"

using weft::fuzz::Require;
namespace wire = weft::wire;

namespace {

void Check(const wire::Frames& frames, const wire::Limits& limits) {
  auto reply = wire::DecodeReply(frames, limits);
  if (!reply.ok()) {
    Require(!reply.status().ok() && !reply.status().message().empty(), "a refused reply says why");
    return;
  }
  Require(reply->blobs.size() + 1 == frames.size(), "one blob per payload frame");
  Require(reply->ok == reply->ToStatus().ok(), "a failed reply is a failed Status, a good one is ok",
          reply->ToStatus().ToString());

  wire::Frames again = wire::EncodeReply(*reply);
  auto back = wire::DecodeReply(again, wire::Limits{});
  Require(back.ok(), "a decoded reply encodes to one that decodes", back.status().ToString());
  Require(back->id == reply->id && back->ok == reply->ok, "id and ok round trip");
  Require(back->blobs == reply->blobs, "blobs round trip");
  if (reply->ok) {
    Require(back->body == reply->body, "body round trips", wire::Dump(reply->body) + "\n" + wire::Dump(back->body));
  } else {
    Require(back->error.code == reply->error.code, "error code round trips");
    Require(back->error.message == reply->error.message, "error message round trips");
    Require(back->error.details == reply->error.details, "error details round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const wire::Frames frames = weft::fuzz::SplitFrames(weft::fuzz::Bytes(data, size));
  Check(frames, wire::Limits{});
  Check(frames, weft::fuzz::TightLimits());
  return 0;
}
