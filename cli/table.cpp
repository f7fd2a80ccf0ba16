#include "weft/cli/table.hpp"

#include <algorithm>

namespace weft::cli {
namespace {

void Pad(std::ostream& out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out << ' ';
}

}  // namespace

std::size_t DisplayWidth(std::string_view text) {
  std::size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;  // not a continuation byte
  }
  return width;
}

std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) c = '?';
  }
  return out;
}

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)), right_(headers_.size(), false) {}

void Table::AlignRight(std::size_t column) {
  if (column < right_.size()) right_[column] = true;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (std::string& c : cells) c = Printable(c);
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, std::string_view indent) const {
  const std::size_t n = headers_.size();
  std::vector<std::size_t> width(n, 0);
  for (std::size_t c = 0; c < n; ++c) {
    width[c] = show_header_ ? DisplayWidth(headers_[c]) : 0;
    for (const auto& row : rows_) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line(indent);
    for (std::size_t c = 0; c < n; ++c) {
      std::size_t gap = width[c] - DisplayWidth(row[c]);
      bool last = c + 1 == n;
      if (right_[c]) line.append(gap, ' ');
      line += row[c];
      if (!right_[c] && !last) line.append(gap, ' ');
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  if (show_header_) print_row(headers_);
  for (const auto& row : rows_) print_row(row);
}

void KeyValues::Add(std::string key, std::string value) {
  items_.emplace_back(Printable(key), Printable(value));
}

void KeyValues::Print(std::ostream& out, std::string_view indent) const {
  std::size_t width = 0;
  for (const auto& [k, v] : items_) width = std::max(width, DisplayWidth(k));
  for (const auto& [k, v] : items_) {
    out << indent << k;
    if (!v.empty()) {
      Pad(out, width - DisplayWidth(k) + 2);
      out << v;
    }
    out << '\n';
  }
}

}  // namespace weft::cli
