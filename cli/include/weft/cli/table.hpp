// Aligned text output shared by every command: a Table with a header row and a
// KeyValues block ("key   value" lines). Columns are as wide as their widest
// cell (counted in UTF-8 code points), separated by two spaces; no line ends in
// whitespace. Control characters in cells (which a server could send) are shown
// as '?', so output can never drive the terminal.
// Plain values; not thread-safe.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  // Numbers read better right-aligned.
  void AlignRight(std::size_t column);
  // For two-column listings (help text) where a header row would be noise.
  void HideHeader() { show_header_ = false; }
  // Missing cells print empty; extra cells are an error in the caller and dropped.
  void AddRow(std::vector<std::string> cells);
  std::size_t rows() const { return rows_.size(); }

  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  bool show_header_ = true;
  std::vector<std::vector<std::string>> rows_;
};

class KeyValues {
 public:
  void Add(std::string key, std::string value);
  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// Width of `text` on a terminal, counting each UTF-8 code point as one column.
std::size_t DisplayWidth(std::string_view text);
// `text` with control characters (and DEL) replaced by '?'.
std::string Printable(std::string_view text);

}  // namespace weft::cli
