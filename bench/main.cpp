#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench.hpp"

namespace weft::bench {
namespace {

struct Case {
  const char* summary;
  BenchFn fn;
};

std::map<std::string, Case>& Registry() {
  static std::map<std::string, Case> registry;
  return registry;
}

}  // namespace

bool Register(const char* name, const char* summary, BenchFn fn) {
  Registry()[name] = Case{summary, fn};
  return true;
}

}  // namespace weft::bench

int main(int argc, char** argv) {
  auto& registry = weft::bench::Registry();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(stderr, "usage: weft-bench CASE [options]\n\ncases:\n");
    for (const auto& [name, c] : registry) std::fprintf(stderr, "  %-10s %s\n", name.c_str(), c.summary);
    return args.empty() ? 2 : 0;
  }
  auto it = registry.find(args[0]);
  if (it == registry.end()) {
    std::fprintf(stderr, "weft-bench: no case named '%s'; run weft-bench --help for the list\n", args[0].c_str());
    return 2;
  }
  return it->second.fn(std::vector<std::string>(args.begin() + 1, args.end()));
}
