#include "bench.hpp"
namespace {
int RunSolverBench(const std::vector<std::string>&) { return 0; }
}  // namespace
WEFT_BENCH("solver", "layout solver vs naive subset enumeration", RunSolverBench);
