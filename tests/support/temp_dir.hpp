// A temporary directory per test, removed when the object dies (kept when
// WEFT_KEEP_TEMP is set, to look at logs after a failure).
#pragma once

#include <filesystem>
#include <string>

namespace weft::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "weft-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void WriteFile(const std::filesystem::path& path, const std::string& content);
std::string ReadFile(const std::filesystem::path& path);

// The path of a file the build produced: WEFT_BUILD_DIR/<relative>.
std::filesystem::path BuildPath(const std::string& relative);

}  // namespace weft::testing
