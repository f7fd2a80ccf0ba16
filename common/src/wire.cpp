#include "weft/common/wire.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "weft/common/flat_json.hpp"
#include "weft/common/json_parse.hpp"
#include "weft/common/raw_json.hpp"
#include "weft/common/text.hpp"

namespace weft::wire {
namespace {

zmq::message_t ToFrame(const std::string& s) { return zmq::message_t(s.data(), s.size()); }

std::string_view View(const zmq::message_t& m) {
  return std::string_view(static_cast<const char*>(m.data()), m.size());
}

// Whether any of the 8 bytes of `w` is a quote, a backslash, a control
// character (below 0x20) or not ASCII (0x80 and up): the bytes a JSON string
// cannot simply be copied past. Eight bytes per test instead of one: the
// strings of a header are most of its bytes.
bool AnyNotPlain(std::uint64_t w) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  const std::uint64_t quote = w ^ (kOnes * '"');
  const std::uint64_t backslash = w ^ (kOnes * '\\');
  // (x - 1) & ~x has a byte's high bit set where x has a zero byte (a borrow
  // into a higher byte happens only above a true hit, so "any" is exact);
  // (w - 0x20) & ~w likewise where a byte is below 0x20; w itself where a byte is 0x80 or more.
  const std::uint64_t hits = ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) |
                             ((w - kOnes * 0x20) & ~w) | w;
  return (hits & kHigh) != 0;
}

// How many bytes from `p` (up to `end`) can be copied as they are into or out of a JSON string.
std::size_t PlainRun(const char* p, const char* end) {
  const char* start = p;
  std::uint64_t w;
  while (end - p >= 8) {
    std::memcpy(&w, p, sizeof w);
    if (AnyNotPlain(w)) break;
    p += 8;
  }
  while (p != end) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
    ++p;
  }
  return static_cast<std::size_t>(p - start);
}

// A parser for the JSON every request and reply header is in practice:
// objects, arrays, ASCII strings with the short escapes, integers, true, false
// and null. It builds the same value nlohmann::json::parse would, about four
// times faster (nlohmann's lexer keeps every character it reads for its error
// messages). Anything else (\u escapes, bytes >= 0x80, fractions and
// exponents, integers out of range, nesting deeper than the limit, any syntax
// error) makes it give up, and the caller parses with nlohmann, which decides
// and explains.
class FastParser {
 public:
  FastParser(std::string_view text, std::size_t max_depth)
      : p_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

  // False: not in the subset (or not JSON); `out` is then unspecified.
  bool Parse(json& out) {
    if (!Value(out, 0)) return false;
    SkipSpace();
    return p_ == end_;
  }

  // A request header read straight into `req`: only the body becomes a json
  // tree, the header's own fields are read as the strings they are (a header
  // object, its members and their copies cost as much as a small body). True
  // only for a header in the subset that DecodeRequest accepts as it is;
  // anything else (`req` is then unspecified) is left to the general reading,
  // which decides and explains.
  //
  // When `text_body` (the header names one of the caller's text-body ops, a
  // guess the op read at the end confirms) the body is only checked, as
  // Value would read it, and its text kept; it becomes a tree after all when
  // the op is not one of `text_ops`.
  bool ParseRequest(Request& req, const Limits& limits, bool text_body, std::span<const std::string_view> text_ops) {
    SkipSpace();
    if (p_ == end_ || *p_ != '{' || max_depth_ < 1) return false;
    ++p_;
    bool version = false, has_id = false, has_op = false, has_tenant = false;
    // The header fields read so far, a bit each: a field named twice is left
    // to the general reading, which refuses it and says which.
    unsigned seen = 0;
    const auto once = [&seen](unsigned bit) {
      const bool first = (seen & bit) == 0;
      seen |= bit;
      return first;
    };
    std::string key;
    std::string_view body_text;
    while (true) {
      if (!MemberKey(key)) return false;
      SkipSpace();
      if (p_ == end_) return false;
      bool ok = true;
      // Compared as views: each literal's length is known where it is compiled.
      const std::string_view name = key;
      if (name == "body") {
        if (!once(1u << 0)) return false;
        body_text = {};
        // An empty object, as a Request is made with: not made again (an allocation and a free).
        const bool empty = req.body.is_object() && req.body.empty();
        if (*p_ == 'n') {
          ok = Literal("null");
          if (!empty) req.body = json::object();
        } else if (text_body) {
          const char* start = p_;
          ok = *p_ == '{' && Skip(1);
          body_text = std::string_view(start, static_cast<std::size_t>(p_ - start));
          if (!empty) req.body = json::object();
        } else {
          ok = *p_ == '{' && Value(req.body, 1);
        }
      } else if (name == "v") {
        if (!once(1u << 1)) return false;
        // Read as Number would, without a json value: a non-negative integer, then compared.
        bool negative = false;
        std::uint64_t v = 0;
        ok = Integer(negative, v) && !negative && v == static_cast<std::uint64_t>(kProtocolVersion);
        version = true;
      } else if (name == "id") {
        if (!once(1u << 2)) return false;
        ok = Text(req.id, false);
        has_id = true;
      } else if (name == "op") {
        if (!once(1u << 3)) return false;
        ok = Text(req.op, false);
        has_op = true;
      } else if (name == "tenant") {
        if (!once(1u << 4)) return false;
        has_tenant = *p_ != 'n';
        ok = Text(req.tenant, true);
      } else if (name == "session") {
        if (!once(1u << 5)) return false;
        ok = Text(req.on_behalf.session, true);
      } else if (name == "csrf") {
        if (!once(1u << 6)) return false;
        ok = Text(req.on_behalf.csrf, true);
      } else if (name == "token") {
        if (!once(1u << 7)) return false;
        ok = Text(req.on_behalf.token, true);
      } else if (name == "client_addr") {
        if (!once(1u << 8)) return false;
        ok = Text(req.on_behalf.client_addr, true);
      } else {
        return false;  // not a header field: the general reading refuses it, and says why
      }
      bool more = false;
      if (!ok || !MemberEnd(&more)) return false;
      if (!more) break;
    }
    SkipSpace();
    if (p_ != end_ || !version || !has_id || !has_op) return false;
    if (!body_text.empty()) {
      if (std::find(text_ops.begin(), text_ops.end(), std::string_view(req.op)) != text_ops.end()) {
        req.body_text.assign(body_text);
      } else {
        FastParser body(body_text, max_depth_);
        if (!body.Value(req.body, 1)) return false;  // cannot be: Skip read it the same way
      }
    }
    const OnBehalf& b = req.on_behalf;
    return !req.id.empty() && req.id.size() <= limits.max_id_bytes && !req.op.empty() &&
           req.op.size() <= limits.max_op_bytes && (!has_tenant || !req.tenant.empty()) &&
           req.tenant.size() <= limits.max_id_bytes && b.session.size() <= limits.max_secret_bytes &&
           b.csrf.size() <= limits.max_secret_bytes && b.token.size() <= limits.max_secret_bytes &&
           b.client_addr.size() <= limits.max_secret_bytes;
  }

 private:
  // A string member's value into `out` (replacing it); null clears it when `nullable`.
  bool Text(std::string& out, bool nullable) {
    out.clear();
    if (*p_ == 'n') return nullable && Literal("null");
    return *p_ == '"' && String(out);
  }

  // An object member's `"key":` into `key` (replacing it), spaces before it skipped.
  bool MemberKey(std::string& key) {
    SkipSpace();
    if (p_ == end_ || *p_ != '"') return false;
    key.clear();
    if (!String(key)) return false;
    SkipSpace();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    return true;
  }

  // What follows a member's value: ',' (another member: `more`) or the closing '}'.
  bool MemberEnd(bool* more) {
    SkipSpace();
    if (p_ == end_ || (*p_ != ',' && *p_ != '}')) return false;
    *more = *p_ == ',';
    ++p_;
    return true;
  }

  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  bool String(std::string& out) {
    ++p_;  // the opening quote
    const char* run = p_;
    while (p_ != end_) {
      p_ += PlainRun(p_, end_);
      if (p_ == end_) break;
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.append(run, p_);
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x80) return false;  // control characters are invalid; UTF-8 is nlohmann's to check
      if (c != '\\') {
        ++p_;
        continue;
      }
      out.append(run, p_);
      if (++p_ == end_ || !flatjson::AppendEscaped(*p_, out)) return false;  // \u and invalid escapes
      run = ++p_;
    }
    return false;
  }

  // An integer's sign and magnitude; false for what the wire refuses
  // (fractions, exponents, leading zeros, more than 64 bits).
  bool Integer(bool& negative, std::uint64_t& v) {
    negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && p_ + 1 != end_ && p_[1] >= '0' && p_[1] <= '9') return false;  // a leading zero
    v = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      const std::uint64_t digit = static_cast<std::uint64_t>(*p_ - '0');
      if (v > (UINT64_MAX - digit) / 10) return false;
      v = v * 10 + digit;
      ++p_;
    }
    return p_ == end_ || (*p_ != '.' && *p_ != 'e' && *p_ != 'E');
  }

  bool Number(json& out) {
    bool negative = false;
    std::uint64_t v = 0;
    if (!Integer(negative, v)) return false;
    if (!negative) {
      out = v;  // nlohmann: a non-negative integer is number_unsigned
      return true;
    }
    if (v > static_cast<std::uint64_t>(INT64_MAX) + 1) return false;
    out = v == static_cast<std::uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<std::int64_t>(v);
    return true;
  }

  bool Value(json& out, std::size_t depth) {
    SkipSpace();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': {
        if (depth + 1 > max_depth_) return false;
        ++p_;
        out = json::object();
        SkipSpace();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          return true;
        }
        json::object_t& members = out.get_ref<json::object_t&>();
        while (true) {
          std::string key;
          if (!MemberKey(key)) return false;
          // Every Weft sender writes keys in order (nlohmann's objects are
          // sorted maps), so the hint at the end saves the search. A key an
          // object names twice is left to nlohmann's parser (which keeps the
          // last value; a request's decoding refuses it and says where).
          const std::size_t before = members.size();
          auto member = members.emplace_hint(members.end(), std::move(key), nullptr);
          if (members.size() == before) return false;
          bool more = false;
          if (!Value(member->second, depth + 1) || !MemberEnd(&more)) return false;
          if (!more) return true;
        }
      }
      case '[': {
        if (depth + 1 > max_depth_) return false;
        ++p_;
        out = json::array();
        SkipSpace();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          return true;
        }
        while (true) {
          out.push_back(json());
          if (!Value(out.back(), depth + 1)) return false;
          SkipSpace();
          if (p_ == end_) return false;
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ != ']') return false;
          ++p_;
          return true;
        }
      }
      case '"': {
        std::string text;
        if (!String(text)) return false;
        out = std::move(text);
        return true;
      }
      case 't':
        out = true;
        return Literal("true");
      case 'f':
        out = false;
        return Literal("false");
      case 'n':
        out = nullptr;
        return Literal("null");
      default:
        return Number(out);
    }
  }

  // Value without the tree: reads past a value (at `depth`) as Value would
  // read it, false where Value would fail.
  bool Skip(std::size_t depth) {
    SkipSpace();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': {
        if (depth + 1 > max_depth_) return false;
        ++p_;
        SkipSpace();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          return true;
        }
        const std::size_t outer = skipped_keys_;  // the keys of the objects around this one end there
        std::uint64_t hashes = 0;
        while (true) {
          SkipSpace();
          if (p_ == end_ || *p_ != '"') return false;
          const char* key = p_ + 1;
          slash_escaped_ = false;
          if (!SkipString() || !FirstKey(std::string_view(key, static_cast<std::size_t>(p_ - 1 - key)), outer, hashes))
            return false;
          SkipSpace();
          if (p_ == end_ || *p_ != ':') return false;
          ++p_;
          bool more = false;
          if (!Skip(depth + 1) || !MemberEnd(&more)) return false;
          if (!more) {
            skipped_keys_ = outer;
            return true;
          }
        }
      }
      case '[': {
        if (depth + 1 > max_depth_) return false;
        ++p_;
        SkipSpace();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          return true;
        }
        while (true) {
          if (!Skip(depth + 1)) return false;
          SkipSpace();
          if (p_ == end_) return false;
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ != ']') return false;
          ++p_;
          return true;
        }
      }
      case '"': return SkipString();
      case 't': return Literal("true");
      case 'f': return Literal("false");
      case 'n': return Literal("null");
      default: return SkipNumber();
    }
  }

  // Whether `key` (its text between the quotes) is the first of that name in
  // the object Skip reads, whose keys so far are skipped_[outer, skipped_keys_)
  // with a bit each in `hashes`: false for a key named twice, and for what is
  // not told apart here (a key with "\/", the same as "/", slash_escaped_; more
  // keys at once than kSkippedKeys), which the general reading then decides
  // on. No allocation: hosts' takes and finishes are read this way.
  bool FirstKey(std::string_view key, std::size_t outer, std::uint64_t& hashes) {
    if (slash_escaped_) return false;
    const unsigned mix = key.empty() ? 0u
                                     : static_cast<unsigned char>(key.front()) * 3u +
                                           static_cast<unsigned char>(key.back());
    const std::uint64_t bit = std::uint64_t{1} << ((key.size() * 7u + mix) & 63u);
    if (hashes & bit) {
      for (std::size_t i = outer; i < skipped_keys_; ++i)
        if (std::string_view(skipped_[i].text, skipped_[i].size) == key) return false;
    }
    hashes |= bit;
    if (skipped_keys_ == kSkippedKeys) return false;
    skipped_[skipped_keys_++] = {key.data(), key.size()};
    return true;
  }

  // Number without the value: the same text accepted and refused.
  bool SkipNumber() {
    bool negative = false;
    std::uint64_t v = 0;
    return Integer(negative, v) && (!negative || v <= static_cast<std::uint64_t>(INT64_MAX) + 1);
  }

  // String without keeping the text: the same bytes accepted and refused.
  bool SkipString() {
    ++p_;  // the opening quote
    while (p_ != end_) {
      p_ += PlainRun(p_, end_);
      if (p_ == end_) break;
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x80) return false;
      if (c != '\\') {
        ++p_;
        continue;
      }
      if (++p_ == end_) return false;
      switch (*p_) {
        case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't': break;
        case '/': slash_escaped_ = true; break;
        default: return false;
      }
      ++p_;
    }
    return false;
  }

  const char* p_;
  const char* end_;
  std::size_t max_depth_;
  // The keys of the objects Skip is in, innermost last (FirstKey). Left
  // uninitialized: only what Skip wrote is read.
  static constexpr std::size_t kSkippedKeys = 128;
  struct Key {
    const char* text;
    std::size_t size;
  };
  Key skipped_[kSkippedKeys];
  std::size_t skipped_keys_ = 0;
  bool slash_escaped_ = false;  // SkipString passed a "\/" since it was cleared
};

// A guess at a request header's op, for DecodeRequest's choice of how to read
// the body before the op is read: what follows the last `"op":"` near the end
// (where a header written with its keys in order has it), up to a quote.
// Empty when there is none; a wrong guess only costs time.
std::string_view LastOp(std::string_view text) {
  constexpr std::string_view kKey = "\"op\":\"";
  constexpr std::size_t kLook = 512;  // the members after "op" (session, tenant, token, v) are short
  const std::size_t stop = text.size() > kLook ? text.size() - kLook : 0;
  for (std::size_t at = text.size() >= kKey.size() ? text.size() - kKey.size() : 0; at > stop; --at) {
    if (text[at] != '"' || text[at + 1] != 'o' || text.compare(at, kKey.size(), kKey) != 0) continue;
    const std::size_t start = at + kKey.size();
    const std::size_t end = text.find('"', start);
    return end == std::string_view::npos ? std::string_view() : text.substr(start, end - start);
  }
  return {};
}

// Where a request's header names a key twice (ParseHeaderObject).
struct Repeated {
  // The first key an object names again, with the keys and "[index]"es that
  // lead to its object from the header's top; empty when none is.
  std::vector<std::string> path;
  bool id = false;  // the header names its own "id" twice
};

// A document's tree built through nlohmann's SAX interface, as json::parse
// builds it (of a key named twice, the last value is kept), that notes in
// `repeated` where an object names a key again. As cheap as json::parse: each
// key goes into its object with the one look-up nlohmann's own builder makes,
// and the lookup's answer tells whether it was there.
class TreeNotingRepeats {
 public:
  TreeNotingRepeats(json& root, Repeated& repeated) : root_(root), repeated_(repeated) {}

  bool null() { return Put(nullptr); }
  bool boolean(bool value) { return Put(value); }
  bool number_integer(json::number_integer_t value) { return Put(value); }
  bool number_unsigned(json::number_unsigned_t value) { return Put(value); }
  bool number_float(json::number_float_t value, const json::string_t&) { return Put(value); }
  bool string(json::string_t& value) { return Put(std::move(value)); }
  bool binary(json::binary_t& value) { return Put(json::binary(std::move(value))); }
  bool start_object(std::size_t) {
    Put(json::object());
    open_.push_back(last_);
    return true;
  }
  bool key(json::string_t& name) {
    json::object_t& members = open_.back()->get_ref<json::object_t&>();
    auto [member, added] = members.try_emplace(std::move(name));  // `name` is left as it was when not added
    if (!added) Note(name);
    element_ = &member->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    Put(json::array());
    open_.push_back(last_);
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }

 private:
  // A value where it goes (the top, the open array's end, or the member the
  // last key named), and last_ at it. Always true, for the SAX callbacks.
  bool Put(json&& value) {
    if (json::array_t* items = open_.empty() ? nullptr : open_.back()->get_ptr<json::array_t*>()) {
      items->push_back(std::move(value));
      last_ = &items->back();
      return true;
    }
    last_ = open_.empty() ? &root_ : element_;
    *last_ = std::move(value);
    return true;
  }

  // `name` is named again in the innermost open object: the path to it, the first time.
  void Note(const std::string& name) {
    if (open_.size() == 1 && name == "id") repeated_.id = true;
    if (!repeated_.path.empty()) return;
    for (std::size_t i = 1; i < open_.size(); ++i) {
      const json& outer = *open_[i - 1];
      if (const json::array_t* items = outer.get_ptr<const json::array_t*>()) {
        repeated_.path.push_back("[" + std::to_string(open_[i] - items->data()) + "]");
        continue;
      }
      for (auto it = outer.begin(); it != outer.end(); ++it)
        if (&it.value() == open_[i]) repeated_.path.push_back(it.key());
    }
    repeated_.path.push_back(name);
  }

  json& root_;
  Repeated& repeated_;
  std::vector<json*> open_;  // the arrays and objects not closed yet, outermost first
  json* element_ = nullptr;  // the member the last key named
  json* last_ = nullptr;     // the value put last
};

// Parses frame 0 as a JSON object (its version is not checked yet). With
// `repeated` (a request's header), where it names a key twice is noted there.
Result<json> ParseHeaderObject(const Frames& frames, const Limits& limits, Repeated* repeated = nullptr) {
  WEFT_RETURN_IF_ERROR(CheckLimits(frames, limits));
  json header;
  // The fast parser gives up on a key named twice.
  if (!FastParser(View(frames[0]), limits.max_depth).Parse(header)) {
    if (jsonf::NestsDeeperThan(View(frames[0]), limits.max_depth))
      return Status::TooLarge("header nests arrays and objects more than " + std::to_string(limits.max_depth) +
                              " levels deep, the limit");
    if (repeated) {
      TreeNotingRepeats builder(header, *repeated);
      if (!json::sax_parse(View(frames[0]), &builder, json::input_format_t::json, /*strict=*/true,
                           /*ignore_comments=*/false))
        header = json(json::value_t::discarded);
    } else {
      header = json::parse(View(frames[0]), nullptr, /*allow_exceptions=*/false);
    }
  }
  if (header.is_discarded()) return Status::Invalid("frame 0 is not valid JSON");
  if (!header.is_object()) return Status::Invalid("frame 0 must be a JSON object");
  return header;
}

Status CheckVersion(const json& header) {
  auto v = header.find("v");
  if (v == header.end()) return Status::Invalid("header lacks \"v\" (the protocol version, 1)");
  if (!v->is_number_integer() || v->get<long long>() != kProtocolVersion)
    return Status::Invalid("header \"v\" is " + Dump(*v) + "; this server speaks protocol version 1");
  return Status::Ok();
}

// A header key that is not one of the request's fields is refused, never
// ignored: a misspelt "tenant" would otherwise act in the caller's own tenant.
Status CheckHeaderFields(const json& header) {
  static const std::vector<std::string> kFields = {"v",       "id",   "op",    "tenant",     "body",
                                                   "session", "csrf", "token", "client_addr"};
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (std::find(kFields.begin(), kFields.end(), it.key()) != kFields.end()) continue;
    const std::string nearest = NearestName(it.key(), kFields);
    return Status::Invalid(
        "header field " + json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + " is unknown" +
        (nearest.empty() ? std::string() : " (did you mean \"" + nearest + "\"?)") +
        "; a request's header has v, id, op and body, and may have tenant (a superadmin's), or session, csrf, token "
        "and client_addr (weft-web's, on behalf of a browser)");
  }
  return Status::Ok();
}

// A key named twice is refused, never read one way: JSON parsers differ on
// which of the two they take (the first or the last), and for "tenant" that
// decides where a request acts.
Status RepeatedField(const std::vector<std::string>& path) {
  // A body's own keys are named from the body; anything else from the header.
  const bool in_body = path.size() > 1 && path.front() == "body";
  std::string name;
  for (std::size_t i = in_body ? 1 : 0; i < path.size(); ++i) {
    if (!name.empty() && !path[i].starts_with('[')) name += '.';
    name += path[i];
  }
  return Status::Invalid(std::string(in_body ? "body" : "header") + " field " +
                         json(name).dump(-1, ' ', false, json::error_handler_t::replace) +
                         " appears twice; name each field once (JSON parsers differ on which of the two they take)");
}

// Parses and checks frame 0 as a JSON object with v == 1.
Result<json> ParseHeader(const Frames& frames, const Limits& limits) {
  WEFT_ASSIGN_OR_RETURN(json header, ParseHeaderObject(frames, limits));
  WEFT_RETURN_IF_ERROR(CheckVersion(header));
  return header;
}

std::vector<std::string> Blobs(const Frames& frames) {
  std::vector<std::string> blobs;
  blobs.reserve(frames.size() - 1);
  for (std::size_t i = 1; i < frames.size(); ++i) blobs.emplace_back(View(frames[i]));
  return blobs;
}

}  // namespace

Reply Reply::Success(std::string id, json body) {
  Reply r;
  r.id = std::move(id);
  r.ok = true;
  r.body = std::move(body);
  return r;
}

Reply Reply::Failure(std::string id, const Status& status, json details) {
  Reply r;
  r.id = std::move(id);
  r.ok = false;
  r.body = json();
  r.error.code = status.ok() ? Code::kInternal : status.code();
  r.error.message = status.message();
  r.error.details = std::move(details);
  return r;
}

Status Reply::ToStatus() const {
  if (ok) return Status::Ok();
  return Status(error.code, error.message);
}

namespace {

// nlohmann's serializer, appending to `out`: the reference for AppendDump.
void SlowDump(std::string& out, const json& value) {
  nlohmann::detail::serializer<json> s(nlohmann::detail::output_adapter<char>(out), ' ',
                                       json::error_handler_t::replace);
  s.dump(value, false, false, 0);
}

// A string as nlohmann writes it (ensure_ascii off, invalid UTF-8 replaced);
// text with bytes >= 0x80 is left to nlohmann, which checks the UTF-8.
void AppendString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t plain = PlainRun(text.data(), text.data() + text.size());
  const std::size_t start = out.size();
  out += '"';
  out.append(text, 0, plain);
  for (std::size_t i = plain; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      out.resize(start);  // what this string wrote so far
      SlowDump(out, json(std::string(text)));
      return;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Dump() appended to `out` in place: the same bytes as nlohmann's serializer,
// written directly for the types every message is made of (nlohmann's does
// it through a virtual output adapter, character by character); RawJson
// values are copied as they are; floats, other binary values and strings with
// UTF-8 still go through nlohmann.
void AppendDump(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ',';
        first = false;
        AppendString(out, it.key());
        out += ':';
        AppendDump(out, *it);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& v : value) {
        if (!first) out += ',';
        first = false;
        AppendDump(out, v);
      }
      out += ']';
      return;
    }
    case json::value_t::string: AppendString(out, value.get_ref<const std::string&>()); return;
    case json::value_t::boolean: out += value.get<bool>() ? "true" : "false"; return;
    case json::value_t::null: out += "null"; return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: {
      char buf[24];
      auto [end, ec] = value.is_number_unsigned()
                           ? std::to_chars(buf, buf + sizeof buf, value.get<std::uint64_t>())
                           : std::to_chars(buf, buf + sizeof buf, value.get<std::int64_t>());
      (void)ec;  // 24 bytes hold every 64-bit integer
      out.append(buf, end);
      return;
    }
    case json::value_t::binary: {
      const json::binary_t& bytes = value.get_binary();
      if (!bytes.has_subtype() || bytes.subtype() != kRawJsonSubtype) break;
      out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      return;
    }
    default: break;
  }
  SlowDump(out, value);  // floats, other binary values, discarded
}

}  // namespace

json RawJson(const std::string& text) {
  return json::binary(json::binary_t::container_type(text.begin(), text.end()), kRawJsonSubtype);
}

std::string Dump(const json& value) {
  std::string out;
  AppendDump(out, value);
  return out;
}

void AppendJson(std::string& out, const json& value) { AppendDump(out, value); }

void AppendJsonString(std::string& out, std::string_view text) { AppendString(out, text); }

Status CheckLimits(const Frames& frames, const Limits& limits) {
  if (frames.empty()) return Status::Invalid("empty message: frame 0 must hold the JSON header");
  if (frames.size() > limits.max_frames)
    return Status::TooLarge("message has " + std::to_string(frames.size()) + " frames; the limit is " +
                            std::to_string(limits.max_frames));
  if (frames[0].size() == 0) return Status::Invalid("frame 0 is empty; it must hold the JSON header");
  if (frames[0].size() > limits.max_header_bytes)
    return Status::TooLarge("header frame is " + std::to_string(frames[0].size()) +
                            " bytes; the limit is " + std::to_string(limits.max_header_bytes));
  std::size_t total = 0;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (i > 0 && frames[i].size() > limits.max_frame_bytes)
      return Status::TooLarge("frame " + std::to_string(i) + " is " + std::to_string(frames[i].size()) +
                              " bytes; the limit is " + std::to_string(limits.max_frame_bytes));
    total += frames[i].size();
  }
  if (total > limits.max_total_bytes)
    return Status::TooLarge("message is " + std::to_string(total) + " bytes; the limit is " +
                            std::to_string(limits.max_total_bytes));
  return Status::Ok();
}

namespace {

// A header's first buffer: most (a task, an entity, a finish) fit, so the
// text is not moved again and again while it grows.
constexpr std::size_t kFirstReserve = 512;

// `,"key":"value"` when value is not empty.
void AppendOptional(std::string& text, const char* key_and_colon, const std::string& value) {
  if (value.empty()) return;
  text += key_and_colon;
  AppendString(text, value);
}

// An optional string field of the request header: absent, null or "" leave
// `out` empty; anything but a string of at most `max` bytes is refused.
Status ReadOptional(const json& header, const char* key, std::size_t max, std::string& out) {
  auto it = header.find(key);
  if (it == header.end() || it->is_null()) return Status::Ok();
  if (!it->is_string() || it->get_ref<const std::string&>().size() > max)
    return Status::Invalid(std::string("header \"") + key + "\" must be a string of at most " +
                           std::to_string(max) + " bytes");
  out = it->get<std::string>();
  return Status::Ok();
}

}  // namespace

Frames EncodeRequest(const Request& request) {
  // Written straight out like a successful reply, without copying the body
  // into a header object first. Same bytes as dumping that object (nlohmann
  // orders keys: body, client_addr, csrf, id, op, session, tenant, token, v).
  std::string text;
  text.reserve(kFirstReserve);
  const OnBehalf& behalf = request.on_behalf;
  text += "{\"body\":";
  AppendDump(text, request.body_text.empty() ? request.body : BodyTree(request));
  AppendOptional(text, ",\"client_addr\":", behalf.client_addr);
  AppendOptional(text, ",\"csrf\":", behalf.csrf);
  text += ",\"id\":";
  AppendString(text, request.id);
  text += ",\"op\":";
  AppendString(text, request.op);
  AppendOptional(text, ",\"session\":", behalf.session);
  AppendOptional(text, ",\"tenant\":", request.tenant);
  AppendOptional(text, ",\"token\":", behalf.token);
  text += ",\"v\":";
  text += std::to_string(kProtocolVersion);
  text += '}';
  Frames frames;
  frames.reserve(1 + request.blobs.size());
  frames.push_back(ToFrame(text));
  for (const auto& b : request.blobs) frames.push_back(ToFrame(b));
  return frames;
}

Frames EncodeReply(const Reply& reply) {
  Frames frames;
  frames.reserve(1 + reply.blobs.size());
  if (reply.ok) {
    // The hot path of every server: one writer, straight into the frame, without
    // a header object or a string to build it in and copy from. The same bytes
    // as dumping the header object (nlohmann orders keys: body, id, ok, v). Only
    // what is not text yet is written first: a body tree, an id to escape.
    std::string body_dump, id_dump;
    std::string_view body = reply.body_text;
    if (body.empty()) {
      body_dump.reserve(kFirstReserve);
      AppendDump(body_dump, reply.body);
      body = body_dump;
    }
    const bool plain_id = PlainRun(reply.id.data(), reply.id.data() + reply.id.size()) == reply.id.size();
    if (!plain_id) AppendString(id_dump, reply.id);
    // A plain id is its own text, between the quotes that id_key and tail hold.
    const std::string_view id = plain_id ? std::string_view(reply.id) : std::string_view(id_dump);
    static_assert(kProtocolVersion == 1, "the tail names the version");
    constexpr std::string_view kHead = "{\"body\":";
    const std::string_view id_key = plain_id ? ",\"id\":\"" : ",\"id\":";
    const std::string_view tail = plain_id ? "\",\"ok\":true,\"v\":1}" : ",\"ok\":true,\"v\":1}";
    const std::string_view parts[] = {kHead, body, id_key, id, tail};
    std::size_t size = 0;
    for (const std::string_view part : parts) size += part.size();
    zmq::message_t header(size);
    char* p = static_cast<char*>(header.data());
    for (const std::string_view part : parts) {
      std::memcpy(p, part.data(), part.size());
      p += part.size();
    }
    frames.push_back(std::move(header));
    for (const auto& b : reply.blobs) frames.push_back(ToFrame(b));
    return frames;
  }
  json header = {{"v", kProtocolVersion}, {"id", reply.id}, {"ok", reply.ok}};
  header["error"] = {{"code", std::string(CodeName(reply.error.code))},
                     {"message", reply.error.message},
                     {"details", reply.error.details.is_null() ? json::object() : reply.error.details}};
  frames.push_back(ToFrame(Dump(header)));
  for (const auto& b : reply.blobs) frames.push_back(ToFrame(b));
  return frames;
}

json Parse(std::string_view text) {
  json doc;
  // Deeper documents are nlohmann's, whose parser keeps no frame per level.
  if (FastParser(text, jsonf::kMaxDepth).Parse(doc)) return doc;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

Result<json> ParseBody(std::string_view text, std::string_view field) {
  json doc;
  // The fast parser gives up on a key named twice (and on what it does not read).
  if (FastParser(text, jsonf::kMaxDepth).Parse(doc)) return doc;
  Repeated repeated;
  TreeNotingRepeats builder(doc, repeated);
  if (!json::sax_parse(text, &builder, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false))
    return json(json::value_t::discarded);
  if (repeated.path.empty()) return doc;
  // Named as DecodeRequest names it, from the header's "body".
  std::vector<std::string> path = {"body"};
  if (!field.empty()) path.emplace_back(field);
  path.insert(path.end(), repeated.path.begin(), repeated.path.end());
  return RepeatedField(path);
}

json BodyTree(const Request& request) {
  if (request.body_text.empty()) return request.body;
  json body;
  // DecodeRequest kept the text only once the fast parser had read it through.
  if (FastParser(request.body_text, SIZE_MAX).Parse(body) && body.is_object()) return body;
  body = json::parse(request.body_text, nullptr, /*allow_exceptions=*/false);
  return body.is_object() ? body : json::object();
}

std::optional<std::string> BodyString(const Request& request, std::string_view key) {
  if (request.body_text.empty()) {
    auto it = request.body.find(key);
    if (it == request.body.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  }
  flatjson::Reader reader(request.body_text);
  flatjson::Member m;
  std::optional<std::string> found;
  bool plain = true;  // one member of that name, a string without escapes (or none)
  while (plain && reader.Next(m)) {
    if (m.key != key) continue;
    plain = !found && m.kind == flatjson::Kind::kString && !m.escaped;
    found.emplace(m.text);
  }
  if (plain && reader.ok()) return found;
  // Read by the tree, as any other body: the last of several, escapes undone.
  const json tree = BodyTree(request);
  auto it = tree.find(key);
  if (it == tree.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

Result<Request> DecodeRequest(const Frames& frames, const Limits& limits, std::string* id_out,
                              std::span<const std::string_view> text_body_ops) {
  Request req;
  WEFT_RETURN_IF_ERROR(DecodeRequestInto(frames, limits, id_out, text_body_ops, &req));
  return req;
}

Status DecodeRequestInto(const Frames& frames, const Limits& limits, std::string* id_out,
                         std::span<const std::string_view> text_body_ops, Request* out) {
  if (id_out) id_out->clear();
  if (Status within = CheckLimits(frames, limits); !within.ok()) {
    // Answered with the request's id when its header can be read (too many frames, a payload too large).
    if (id_out && !frames.empty() && frames[0].size() > 0 && frames[0].size() <= limits.max_header_bytes) {
      json header;
      if (FastParser(View(frames[0]), limits.max_depth).Parse(header) && header.is_object()) {
        auto id = header.find("id");
        if (id != header.end() && id->is_string() && id->get_ref<const std::string&>().size() <= limits.max_id_bytes)
          *id_out = id->get<std::string>();
      }
    }
    return within;
  }
  {
    Request& req = *out;
    // The body comes first (keys in order): whether to keep it as text is
    // guessed from the header's text, and the op read at the end decides.
    const std::string_view text = View(frames[0]);
    const std::string_view op = text_body_ops.empty() ? std::string_view() : LastOp(text);
    const bool text_body =
        !op.empty() && std::find(text_body_ops.begin(), text_body_ops.end(), op) != text_body_ops.end();
    if (FastParser(text, limits.max_depth).ParseRequest(req, limits, text_body, text_body_ops)) {
      if (id_out) *id_out = req.id;
      req.blobs = Blobs(frames);
      return Status::Ok();
    }
  }
  Repeated repeated;
  WEFT_ASSIGN_OR_RETURN(json parsed, ParseHeaderObject(frames, limits, &repeated));
  json& header = parsed;

  Request req;
  auto id = header.find("id");
  // Any other error is answered with the id, when there is one to echo (an id named twice is none).
  if (id != header.end() && id->is_string() && !id->get_ref<const std::string&>().empty() &&
      id->get_ref<const std::string&>().size() <= limits.max_id_bytes && id_out && !repeated.id)
    *id_out = id->get<std::string>();
  if (!repeated.path.empty()) return RepeatedField(repeated.path);
  WEFT_RETURN_IF_ERROR(CheckVersion(header));
  WEFT_RETURN_IF_ERROR(CheckHeaderFields(header));
  if (id == header.end()) return Status::Invalid("header lacks \"id\" (a string the reply will echo)");
  if (!id->is_string()) return Status::Invalid("header \"id\" must be a string, got " + std::string(id->type_name()));
  req.id = id->get<std::string>();
  if (req.id.empty()) return Status::Invalid("header \"id\" is empty");
  if (req.id.size() > limits.max_id_bytes)
    return Status::TooLarge("header \"id\" is " + std::to_string(req.id.size()) + " bytes; the limit is " +
                            std::to_string(limits.max_id_bytes));

  auto op = header.find("op");
  if (op == header.end()) return Status::Invalid("header lacks \"op\" (for example \"server.status\")");
  if (!op->is_string()) return Status::Invalid("header \"op\" must be a string, got " + std::string(op->type_name()));
  req.op = op->get<std::string>();
  if (req.op.empty() || req.op.size() > limits.max_op_bytes)
    return Status::Invalid("header \"op\" must be 1 to " + std::to_string(limits.max_op_bytes) + " characters");

  auto tenant = header.find("tenant");
  if (tenant != header.end() && !tenant->is_null()) {
    if (!tenant->is_string() || tenant->get_ref<const std::string&>().empty() ||
        tenant->get_ref<const std::string&>().size() > limits.max_id_bytes)
      return Status::Invalid("header \"tenant\" must be a non-empty string of at most " +
                             std::to_string(limits.max_id_bytes) + " bytes");
    req.tenant = tenant->get<std::string>();
  }
  WEFT_RETURN_IF_ERROR(ReadOptional(header, "session", limits.max_secret_bytes, req.on_behalf.session));
  WEFT_RETURN_IF_ERROR(ReadOptional(header, "csrf", limits.max_secret_bytes, req.on_behalf.csrf));
  WEFT_RETURN_IF_ERROR(ReadOptional(header, "token", limits.max_secret_bytes, req.on_behalf.token));
  WEFT_RETURN_IF_ERROR(ReadOptional(header, "client_addr", limits.max_secret_bytes, req.on_behalf.client_addr));

  auto body = header.find("body");
  if (body != header.end() && !body->is_null()) {
    if (!body->is_object())
      return Status::Invalid("header \"body\" must be a JSON object, got " + std::string(body->type_name()));
    req.body = std::move(*body);
  }
  req.blobs = Blobs(frames);
  *out = std::move(req);
  return Status::Ok();
}

Result<Reply> DecodeReply(const Frames& frames, const Limits& limits) {
  WEFT_ASSIGN_OR_RETURN(json parsed, ParseHeader(frames, limits));
  json& header = parsed;

  Reply reply;
  auto id = header.find("id");
  if (id == header.end() || !id->is_string()) return Status::Invalid("reply lacks a string \"id\"");
  reply.id = id->get<std::string>();
  auto ok = header.find("ok");
  if (ok == header.end() || !ok->is_boolean()) return Status::Invalid("reply lacks a boolean \"ok\"");
  reply.ok = ok->get<bool>();
  if (reply.ok) {
    auto body = header.find("body");
    if (body != header.end() && !body->is_null()) reply.body = std::move(*body);
  } else {
    auto err = header.find("error");
    if (err == header.end() || !err->is_object()) return Status::Invalid("failed reply lacks an \"error\" object");
    // Not err->value(): it throws when the key holds another type.
    auto text = [&](const char* key, const char* fallback) -> std::optional<std::string> {
      auto it = err->find(key);
      if (it == err->end() || it->is_null()) return fallback;
      if (!it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    std::optional<std::string> code = text("code", "INTERNAL");
    std::optional<std::string> message = text("message", "(no message)");
    if (!code || !message) return Status::Invalid("failed reply's error \"code\" and \"message\" must be strings");
    reply.error.code = CodeFromName(*code);
    if (reply.error.code == Code::kOk) reply.error.code = Code::kInternal;  // a failed reply never reads as ok
    reply.error.message = std::move(*message);
    auto details = err->find("details");
    if (details != err->end() && details->is_object()) reply.error.details = std::move(*details);
  }
  reply.blobs = Blobs(frames);
  return reply;
}

bool RecvMultipart(zmq::socket_t& socket, Frames& out, zmq::recv_flags flags) {
  out.clear();
  out.reserve(4);  // routing id, REQ delimiter, header, a payload: one allocation, not three
  while (true) {
    zmq::message_t part;
    auto got = socket.recv(part, flags);
    if (!got) {
      if (out.empty()) return false;
      continue;  // the rest of a started message is always ready
    }
    bool more = part.more();
    out.push_back(std::move(part));
    if (!more) return true;
    flags = zmq::recv_flags::none;
  }
}

bool SendMultipart(zmq::socket_t& socket, Frames& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    flags = flags | zmq::send_flags::dontwait;
    try {
      if (!socket.send(frames[i], flags)) return false;
    } catch (const zmq::error_t&) {
      return false;  // EHOSTUNREACH with ROUTER_MANDATORY: the peer is gone
    }
  }
  return true;
}

void SplitEnvelope(Frames& frames, Frames& envelope) {
  envelope.clear();
  if (frames.empty()) return;
  std::size_t n = 1;  // the routing id
  if (frames.size() > 1 && frames[1].size() == 0) n = 2;  // REQ delimiter
  for (std::size_t i = 0; i < n; ++i) envelope.push_back(std::move(frames[i]));
  frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(n));
}

Frames WithEnvelope(const Frames& envelope, Frames&& frames) {
  Frames out;
  out.reserve(envelope.size() + frames.size());
  for (const auto& e : envelope) out.emplace_back(e.data(), e.size());
  for (auto& f : frames) out.push_back(std::move(f));
  return out;
}

std::string LastEndpoint(zmq::socket_t& socket) {
  return socket.get(zmq::sockopt::last_endpoint);
}

}  // namespace weft::wire
