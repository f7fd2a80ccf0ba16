// weft-bench jobs: being written (issue 4). Placeholder so the CMake list is final.
#include "bench.hpp"
