#!/usr/bin/env bash
# Installs what is missing, builds Weft with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/, runs every test, then builds the
# libFuzzer targets into build-fuzz/ and runs each for a bounded number of inputs.
# Exits non-zero if anything fails. .ci/run calls exactly this.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

./scripts/install-deps.sh
# -g1: function names and line tables, all that sanitizer reports and backtraces
# print; full -g adds ~15% to each compile and size to every binary the install
# and package tests copy. Build by hand with -g to step through a failure.
./scripts/build.sh build-asan Debug -DWEFT_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1

# Leaks are bugs too; abort on the first sanitizer report so ctest sees a failure.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir build-asan --output-on-failure -j2 --timeout 600 --no-tests=error 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

echo
summary=$(grep -E '^[0-9]+% tests passed' "$log" || true)
echo "test.sh: ${summary:-ctest printed no summary}"
if [[ $rc -ne 0 ]]; then
  echo "test.sh: FAILED (ctest exit code $rc)" >&2
  exit "$rc"
fi

# Every fuzz target, bounded (scripts/fuzz.sh; docs/fuzzing.md for longer runs).
./scripts/fuzz.sh || { echo "test.sh: FAILED (a fuzz target crashed; see above)" >&2; exit 1; }
echo "test.sh: all tests passed"
