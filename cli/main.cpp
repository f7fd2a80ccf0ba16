// weft: the command-line client of the Weft cluster manager. See app.hpp.
#include <cstdlib>
#include <iostream>

#include "weft/cli/app.hpp"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  auto env = [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
  int code = weft::cli::RunCli(std::vector<std::string>(argv + 1, argv + argc), env, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
