// Reading one table of a TOML configuration file with checks that name the
// file, the table and the key: weftd.toml and weft-web.toml both read theirs
// through it, so their errors read the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "weft/common/status.hpp"

namespace weft {

// "a, b, c": the list an error sentence offers.
std::string JoinNames(const std::vector<std::string>& names);

// Parses TOML text; a syntax error becomes "origin:line:column: not valid TOML: ...".
Result<toml::table> ParseToml(std::string_view text, std::string_view origin);

// Checks that every top-level key of `root` is one of `tables` and is a table.
Status CheckTables(const toml::table& root, const std::vector<std::string>& tables, const std::string& origin);

// Reads the keys of one table, remembering which it knows so that Finish()
// can name any key it did not expect. Keeps the first error only: one clear
// sentence is more useful than a cascade. A missing key leaves `*out` as it
// is, so the caller's default stands.
class TableReader {
 public:
  TableReader(const toml::table* table, std::string name, std::string origin)
      : table_(table), name_(std::move(name)), origin_(std::move(origin)) {}

  void Int(const std::string& key, std::int64_t min, std::int64_t max, std::int64_t* out);
  void Int(const std::string& key, std::int64_t min, std::int64_t max, int* out);
  void Size(const std::string& key, std::size_t min, std::size_t max, std::size_t* out);
  void Bool(const std::string& key, bool* out);
  void String(const std::string& key, std::string* out);
  // A string; `check` returns an empty string when the value is acceptable,
  // otherwise what an acceptable value looks like.
  template <typename Check>
  void String(const std::string& key, std::string* out, Check check) {
    std::string v = *out;
    if (!ReadString(key, &v)) return;
    std::string want = check(v);
    if (!want.empty()) return Fail(Where(key) + " is \"" + v + "\"; " + want);
    *out = v;
  }
  void Path(const std::string& key, std::filesystem::path* out);

  // Records an error of the caller's own about this table; the first one stays.
  void Fail(std::string message);
  // "origin: table.key", how every error names a key.
  std::string Where(const std::string& key) const { return origin_ + ": " + name_ + "." + key; }
  // The first error, or an unknown key, or Ok.
  Status Finish() const;

 private:
  const toml::node* Find(const std::string& key);
  bool ReadString(const std::string& key, std::string* out);

  const toml::table* table_;
  std::string name_;
  std::string origin_;
  std::vector<std::string> known_;
  Status error_;
};

}  // namespace weft
