#!/usr/bin/env bash
# Configures and builds Weft.
#   scripts/build.sh [BUILD_DIR] [BUILD_TYPE] [extra cmake -D options...]
# Defaults: build/ and Release. Uses every core (-j$(nproc)); set WEFT_JOBS to
# use fewer. Run from anywhere; paths are relative to the repository root.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${1:-build}
BUILD_TYPE=${2:-Release}
shift $(( $# < 2 ? $# : 2 ))
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
JOBS=${WEFT_JOBS:-$(nproc)}

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@"
cmake --build "$BUILD_DIR" -j"$JOBS"
