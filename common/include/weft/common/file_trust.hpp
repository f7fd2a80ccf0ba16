// Whether anyone but root and this process's user could change a file: for
// files a privileged process takes code or configuration from.
#pragma once

#include <filesystem>
#include <string>

namespace weft {

// What would let someone other than root and this process's user change
// `path`, or "" when nothing would: the first file or directory, `path` itself
// and then each directory above it, that is owned by someone else, or writable
// by another group than root or by every user. A sticky directory (/tmp) may
// be writable by others, since they can neither rename nor delete its owner's
// entries. A link counts as its directory does, and the path it resolves to is
// checked too. The sentence names the path at fault and the fix, e.g.
// "/srv/plugins is writable by every user; chmod o-w /srv/plugins".
std::string OthersMayChange(const std::filesystem::path& path);

}  // namespace weft
