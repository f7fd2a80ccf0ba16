// weft-bench: each case is a function registered under a name; `weft-bench NAME
// [args]` runs it. A case prints one JSON line per measurement to stdout and
// returns the process exit code. Progress and notes go to stderr.
#pragma once

#include <string>
#include <vector>

namespace weft::bench {

using BenchFn = int (*)(const std::vector<std::string>& args);

// Called from a static initializer in each case's file.
bool Register(const char* name, const char* summary, BenchFn fn);

}  // namespace weft::bench

#define WEFT_BENCH(name, summary, fn) \
  static const bool weft_bench_registered_##fn = ::weft::bench::Register(name, summary, fn)
