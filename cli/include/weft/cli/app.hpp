// The whole of `weft` behind main(): parse, dispatch through the command table,
// map the outcome to an exit code. Separate from main() so tests can run it
// in-process with their own streams and environment.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "weft/cli/args.hpp"

namespace weft::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// `argv` without the program name.
int RunCli(const std::vector<std::string>& argv, const EnvLookup& env, std::ostream& out, std::ostream& err);

}  // namespace weft::cli
