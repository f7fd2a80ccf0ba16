#include "weft/common/flat_json.hpp"

#include <cstring>

namespace weft::flatjson {
namespace {

// Deeper than any request a reader of flat members wants: beyond it, kOther's
// skipping gives up (ok() false) rather than recurse without end.
constexpr int kMaxSkipDepth = 64;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

Reader::Reader(std::string_view object) : p_(object.data()), end_(object.data() + object.size()) {}

void Reader::SkipSpace() {
  while (p_ != end_ && IsSpace(*p_)) ++p_;
}

bool Reader::SkipString(bool* escaped) {
  ++p_;  // the opening quote
  while (p_ != end_) {
    // To the next quote at once; only a backslash before it needs a closer look.
    const auto* quote = static_cast<const char*>(std::memchr(p_, '"', static_cast<std::size_t>(end_ - p_)));
    if (!quote) return false;
    if (!std::memchr(p_, '\\', static_cast<std::size_t>(quote - p_))) {
      p_ = quote + 1;
      return true;
    }
    while (p_ != end_) {
      const char c = *p_++;
      if (c == '"') return true;
      if (c == '\\') {
        if (p_ == end_) return false;
        ++p_;
        *escaped = true;
      }
    }
  }
  return false;
}

bool Reader::SkipValue(int depth) {
  if (depth > kMaxSkipDepth) return false;
  SkipSpace();
  if (p_ == end_) return false;
  const char open = *p_;
  if (open == '"') {
    bool escaped = false;
    return SkipString(&escaped);
  }
  if (open == '{' || open == '[') {
    const char close = open == '{' ? '}' : ']';
    ++p_;
    SkipSpace();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      return true;
    }
    while (true) {
      if (open == '{') {
        SkipSpace();
        bool escaped = false;
        if (p_ == end_ || *p_ != '"' || !SkipString(&escaped)) return false;
        SkipSpace();
        if (p_ == end_ || *p_ != ':') return false;
        ++p_;
      }
      if (!SkipValue(depth + 1)) return false;
      SkipSpace();
      if (p_ == end_) return false;
      if (*p_ == close) {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
    }
  }
  // A number or a literal: up to what ends a value.
  const char* start = p_;
  while (p_ != end_ && !IsSpace(*p_) && *p_ != ',' && *p_ != '}' && *p_ != ']') {
    const char c = *p_;
    if (c == '"' || c == '{' || c == '[' || c == ':') return false;
    ++p_;
  }
  return p_ != start;
}

bool Reader::Next(Member& m) {
  if (!ok_ || done_) return false;
  SkipSpace();
  if (!started_) {
    started_ = true;
    if (p_ == end_ || *p_ != '{') return ok_ = false;
    ++p_;
    SkipSpace();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      done_ = true;
      SkipSpace();
      ok_ = p_ == end_;
      return false;
    }
  } else {
    if (p_ == end_) return ok_ = false;
    if (*p_ == '}') {
      ++p_;
      done_ = true;
      SkipSpace();
      ok_ = p_ == end_;
      return false;
    }
    if (*p_ != ',') return ok_ = false;
    ++p_;
    SkipSpace();
  }
  // "key":
  if (p_ == end_ || *p_ != '"') return ok_ = false;
  const char* key = p_ + 1;
  bool key_escaped = false;
  if (!SkipString(&key_escaped)) return ok_ = false;
  m.key = std::string_view(key, static_cast<std::size_t>(p_ - 1 - key));
  SkipSpace();
  if (p_ == end_ || *p_ != ':') return ok_ = false;
  ++p_;
  SkipSpace();
  if (p_ == end_) return ok_ = false;
  const char* value = p_;
  m.escaped = false;
  m.number = 0;
  if (*p_ == '"') {
    if (!SkipString(&m.escaped)) return ok_ = false;
    m.kind = Kind::kString;
    m.text = std::string_view(value + 1, static_cast<std::size_t>(p_ - 1 - (value + 1)));
    return true;
  }
  if (!SkipValue(0)) return ok_ = false;
  m.text = std::string_view(value, static_cast<std::size_t>(p_ - value));
  m.kind = Kind::kOther;
  if (*value == '{') {
    m.kind = Kind::kObject;
  } else if (*value >= '0' && *value <= '9' && !(*value == '0' && m.text.size() > 1)) {
    std::uint64_t n = 0;
    bool digits = true;
    for (char c : m.text) {
      const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
      if (c < '0' || c > '9' || n > (UINT64_MAX - d) / 10) {
        digits = false;
        break;
      }
      n = n * 10 + d;
    }
    if (digits) {
      m.kind = Kind::kUnsigned;
      m.number = n;
    }
  }
  return true;
}

bool AppendEscaped(char c, std::string& out) {
  switch (c) {
    case '"': out += '"'; return true;
    case '\\': out += '\\'; return true;
    case '/': out += '/'; return true;
    case 'b': out += '\b'; return true;
    case 'f': out += '\f'; return true;
    case 'n': out += '\n'; return true;
    case 'r': out += '\r'; return true;
    case 't': out += '\t'; return true;
    default: return false;
  }
}

bool Unescape(std::string_view text, std::string& out) {
  std::size_t run = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') continue;
    out.append(text, run, i - run);
    if (++i == text.size() || !AppendEscaped(text[i], out)) return false;
    run = i + 1;
  }
  out.append(text, run, std::string_view::npos);
  return true;
}

bool EmptyObject(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  if (i == text.size() || text[i] != '{') return false;
  ++i;
  while (i < text.size() && IsSpace(text[i])) ++i;
  if (i == text.size() || text[i] != '}') return false;
  ++i;
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i == text.size();
}

}  // namespace weft::flatjson
