// A small leveled logger writing one line per record to stderr:
//   2026-11-22T10:00:00.123Z INFO  host: loaded plugin 'fake' from /x/fake.so
// Thread-safe: records from different threads never interleave.
// Never log a private key, password or field marked sensitive.
#pragma once

#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>

namespace weft::log {

enum class Level : int { kDebug = 1, kInfo, kWarn, kError };

void SetLevel(Level level);
// Where records go from now on (stderr until then). weft-host's workers log to
// the master's stderr this way, as their own stderr is a pipe the master reads.
void SetOutput(std::FILE* out);
Level CurrentLevel();
// "debug", "info", "warn", "error"; false if the name is unknown.
bool ParseLevel(std::string_view name, Level* out);
void Write(Level level, std::string_view component, std::string_view message);

// Collects one record and writes it when destroyed.
class Line {
 public:
  Line(Level level, std::string_view component) : level_(level), component_(component) {}
  ~Line() { Write(level_, component_, out_.str()); }
  template <typename T>
  Line& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  Level level_;
  std::string component_;
  std::ostringstream out_;
};

}  // namespace weft::log

#define WEFT_LOG(level, component)                                                  \
  if (::weft::log::Level::level < ::weft::log::CurrentLevel()) {                   \
  } else                                                                            \
    ::weft::log::Line(::weft::log::Level::level, component)
