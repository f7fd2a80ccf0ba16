#include "weft/common/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace weft::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_mu;
std::FILE* g_out = nullptr;  // stderr; guarded by g_mu

const char* Name(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO ";
    case Level::kWarn: return "WARN ";
    case Level::kError: return "ERROR";
  }
  return "?    ";
}

}  // namespace

void SetOutput(std::FILE* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_out = out;
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
Level CurrentLevel() { return static_cast<Level>(g_level.load()); }

bool ParseLevel(std::string_view name, Level* out) {
  if (name == "debug") *out = Level::kDebug;
  else if (name == "info") *out = Level::kInfo;
  else if (name == "warn") *out = Level::kWarn;
  else if (name == "error") *out = Level::kError;
  else return false;
  return true;
}

void Write(Level level, std::string_view component, std::string_view message) {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t secs = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::lock_guard<std::mutex> lock(g_mu);
  std::FILE* out = g_out != nullptr ? g_out : stderr;
  std::fprintf(out, "%s %s %.*s: %.*s\n", stamp, Name(level), static_cast<int>(component.size()),
               component.data(), static_cast<int>(message.size()), message.data());
  std::fflush(out);
}

}  // namespace weft::log
