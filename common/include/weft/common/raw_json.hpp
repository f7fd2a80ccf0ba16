// weft::wire::RawJson: JSON text made once and sent many times, as a json value that
// wire::Dump, and so EncodeRequest and EncodeReply, copy verbatim instead of
// serializing a tree again.
//
// It is a json binary value (subtype kRawJsonSubtype) until it is sent: only
// for values that nothing in the process reads before that. `text` must be
// JSON as wire::Dump writes it. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace weft::wire {

inline constexpr std::uint64_t kRawJsonSubtype = 0x5746;  // "WF"

nlohmann::json RawJson(const std::string& text);

}  // namespace weft::wire
