#include "weft/common/status.hpp"

#include <array>

namespace weft {
namespace {

struct CodeEntry {
  Code code;
  std::string_view name;
};

constexpr std::array<CodeEntry, 9> kCodes{{
    {Code::kOk, "OK"},
    {Code::kInvalid, "INVALID"},
    {Code::kNotFound, "NOT_FOUND"},
    {Code::kConflict, "CONFLICT"},
    {Code::kDenied, "DENIED"},
    {Code::kUnavailable, "UNAVAILABLE"},
    {Code::kTimeout, "TIMEOUT"},
    {Code::kTooLarge, "TOO_LARGE"},
    {Code::kInternal, "INTERNAL"},
}};

}  // namespace

std::string_view CodeName(Code code) {
  for (const auto& e : kCodes)
    if (e.code == code) return e.name;
  return "INTERNAL";
}

Code CodeFromName(std::string_view name) {
  for (const auto& e : kCodes)
    if (e.name == name) return e.code;
  return Code::kInternal;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

}  // namespace weft
