// The browser UI's files (web/ui, installed under server.static_dir), served
// read-only. Paths are decoded, then refused if any segment is "..", and the
// file must resolve (symbolic links included) inside the directory.
#pragma once

#include <filesystem>

#include "http_util.hpp"

namespace weft::web {

class StaticFiles {
 public:
  explicit StaticFiles(std::filesystem::path root);
  Response Serve(const Request& request, const Target& target, bool tls) const;

 private:
  std::filesystem::path root_;
};

}  // namespace weft::web
