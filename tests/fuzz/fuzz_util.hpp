// Helpers shared by the fuzz targets. A broken invariant aborts, which libFuzzer
// reports as a crash and saves the input, the same as a sanitizer report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "weft/common/wire.hpp"

namespace weft::fuzz {

[[noreturn]] inline void Fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

inline void Require(bool cond, const char* what, const std::string& detail = {}) {
  if (!cond) Fail(what, detail);
}

inline std::string_view Bytes(const std::uint8_t* data, std::size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Splits the input into message frames at NUL bytes: "<header>\0<blob>\0<blob>".
// JSON text never holds a raw NUL, so a seed reads as one header followed by its
// payload frames, and the fuzzer can still make empty frames ("\0\0") or drop the
// header.
inline wire::Frames SplitFrames(std::string_view input) {
  wire::Frames frames;
  std::size_t start = 0;
  while (true) {
    std::size_t nul = input.find('\0', start);
    std::string_view part = input.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start);
    frames.emplace_back(part.data(), part.size());
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  return frames;
}

// Small limits, so that inputs of a few KiB reach every limit check.
inline wire::Limits TightLimits() {
  wire::Limits l;
  l.max_frames = 4;
  l.max_header_bytes = 512;
  l.max_frame_bytes = 64;
  l.max_total_bytes = 700;
  l.max_id_bytes = 16;
  l.max_op_bytes = 16;
  return l;
}

}  // namespace weft::fuzz
