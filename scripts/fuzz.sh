#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang into build-fuzz/ and runs
# each one for a bounded number of inputs, starting from its committed corpus.
#   scripts/fuzz.sh [RUNS] [TARGET...]
# RUNS defaults to 20000 inputs per target (-1: no limit). Each target also stops
# after WEFT_FUZZ_SECONDS seconds (default 10; 0: no limit). Without TARGETs every
# target runs, WEFT_JOBS (default 2) of them at a time. Exits non-zero if any target crashes, leaks, trips a sanitizer,
# times out on one input or breaks an invariant; the input is then in
# build-fuzz/artifacts/. docs/fuzzing.md describes longer campaigns.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

RUNS=${1:-20000}
shift $(( $# < 1 ? $# : 1 ))
SECONDS_EACH=${WEFT_FUZZ_SECONDS:-10}
BUILD=${WEFT_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
JOBS=${WEFT_JOBS:-2}

ALL_TARGETS=(fuzz_wire_request fuzz_wire_reply
             fuzz_catalog_provider fuzz_catalog_hardwaretype fuzz_catalog_imagetype
             fuzz_catalog_service fuzz_catalog_clustertemplate
             fuzz_config fuzz_macros fuzz_provisioner fuzz_resource_upload)
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")

# -O1 keeps the fuzzers fast; Debug keeps assertions (nlohmann's among them) on;
# line tables are all a crash report needs (full -g costs ~10% more per compile).
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS_DEBUG="-gline-tables-only -O1" -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1" -DWEFT_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$BUILD/artifacts" "$BUILD/logs"
# One target's bounded run; its verdict goes to $BUILD/logs/<target>.verdict.
run_target() {
  local t=$1 seeds="$ROOT/tests/fuzz/corpus/$1" log="$BUILD/logs/$1.log" dict="$ROOT/tests/fuzz/json.dict"
  [[ "$t" != fuzz_config ]] || dict="$ROOT/tests/fuzz/toml.dict"
  if "$BUILD/fuzz/$t" -dict="$dict" -runs="$RUNS" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 \
       "$BUILD/corpus/$t" "$seeds" >"$log" 2>&1; then
    echo ok >"$BUILD/logs/$t.verdict"
  else
    echo failed >"$BUILD/logs/$t.verdict"
  fi
}

for t in "${TARGETS[@]}"; do
  seeds="$ROOT/tests/fuzz/corpus/$t"
  [[ -d "$seeds" ]] || { echo "fuzz.sh: no seed corpus $seeds" >&2; exit 2; }
  # New inputs go to the first directory (build-fuzz/corpus, kept between runs);
  # the committed seeds, crash regressions among them, are read but never written.
  mkdir -p "$BUILD/corpus/$t"
  rm -f "$BUILD/logs/$t.verdict"
done

# WEFT_JOBS targets at a time: each is one single-threaded process, and the
# bounds (inputs, seconds) are per target, so running them side by side on
# separate cores changes nothing but the wall time.
for t in "${TARGETS[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $JOBS ]]; do wait -n || true; done
  run_target "$t" &
done
wait

failed=()
for t in "${TARGETS[@]}"; do
  log="$BUILD/logs/$t.log"
  if [[ $(cat "$BUILD/logs/$t.verdict" 2>/dev/null) == ok ]]; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
    echo "fuzz.sh: $t: ok, ${runs:-?} inputs in ${secs:-?} s, corpus $(ls "$BUILD/corpus/$t" | wc -l) inputs"
  else
    echo "fuzz.sh: $t: FAILED; the end of $log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $BUILD/artifacts/; docs/fuzzing.md says what next)" >&2
  exit 1
fi
echo "fuzz.sh: all ${#TARGETS[@]} targets ran clean"
