// Reading the members of a JSON object from its text, one by one, without
// building a tree: for a server that reads a few fields of a hot request
// (wire::Request::body_text) and would spend more on the tree than on the rest.
//
// Only plain shapes are read as values: strings (with the short escapes),
// integers from 0 to 2^64-1 and objects (as their text); anything else is
// kOther, which a caller takes as "read this body as a tree instead", so that
// what it does not read here is decided, and explained, as before. It is
// meant for text a JSON parser has read through (it does not check all that
// one does), but never trusts its input: on text that is not one object it
// stops with ok() false, without reading past the end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::flatjson {

enum class Kind { kString, kUnsigned, kObject, kOther };

struct Member {
  std::string_view key;  // as written (an escaped key keeps its backslashes: it matches no plain name)
  Kind kind = Kind::kOther;
  // kString: the text between the quotes, escapes as written (see Unescape);
  // kObject: the object's text, braces included; otherwise the value's text.
  std::string_view text;
  bool escaped = false;       // kString: the text holds a backslash
  std::uint64_t number = 0;   // kUnsigned
};

class Reader {
 public:
  // `object`: the text of a JSON object, spaces around it allowed.
  explicit Reader(std::string_view object);

  // The next member into `m`; false at the end of the object (ok() true) or
  // on text that is not a well-formed object (ok() false).
  bool Next(Member& m);
  bool ok() const { return ok_; }

 private:
  void SkipSpace();
  // Past a string whose opening quote is at p_; false if it does not end.
  bool SkipString(bool* escaped);
  // Past any value; false if it is not well formed as far as it is read.
  bool SkipValue(int depth);

  const char* p_;
  const char* end_;
  bool ok_ = true;
  bool started_ = false;
  bool done_ = false;
};

// A kString member's text with its escapes undone, appended to `out`; false
// for an escape other than \" \\ \/ \b \f \n \r \t (a \u is left to a tree).
bool Unescape(std::string_view text, std::string& out);
// Appends what the escape `\c` stands for; false for a \u or an invalid one.
bool AppendEscaped(char c, std::string& out);

// Whether `text` is an object without members ("{}", spaces allowed).
bool EmptyObject(std::string_view text);

}  // namespace weft::flatjson
