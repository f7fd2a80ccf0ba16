// One process per directory: weftd's data directory and weft-host's state
// directory each hold files (keys, a credential, a store) that two processes
// must never share.
#pragma once

#include <filesystem>
#include <string>

#include "weft/common/status.hpp"

namespace weft {

// Creates `dir` if needed and holds an exclusive lock on dir/`file` for the
// rest of the process's life, with this process's pid written in it. When
// another process holds it: kConflict, "another `program` (pid N) is already
// using `what` DIR". kUnavailable when the directory or the file cannot be made.
[[nodiscard]] Status LockDirectory(const std::filesystem::path& dir, const std::string& file,
                                   const std::string& program, const std::string& what);

}  // namespace weft
