#!/usr/bin/env bash
# The Weft demo: installs what is missing, builds (Release, build/), starts weftd
# and one weft-host with the built-in fake plugins, shows what the server sees
# through the weft CLI, and stops both cleanly. State and logs go to .weft-demo/.
#
# Each step is a function, so a later demo can replace the middle (a real
# cluster on local SSH nodes) and keep the start, the checks and the clean-up.
# Never leaves a process behind: every process it starts is stopped on exit,
# on error and on Ctrl-C.
#
#   scripts/demo.sh              install, build, run
#   scripts/demo.sh --no-build   run what is already built (WEFT_BUILD_DIR, default build/)
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${WEFT_BUILD_DIR:-$ROOT/build}
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
DO_BUILD=1
case "${1:-}" in
  "") ;;
  --no-build) DO_BUILD=0 ;;
  *) echo "usage: scripts/demo.sh [--no-build]" >&2; exit 2 ;;
esac
DEMO_DIR="$ROOT/.weft-demo"
LOGS="$DEMO_DIR/logs"
HOST_ID=demo-host-1

PIDS=()   # every process started, in start order
NAMES=()

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# Stops one process: SIGTERM, then up to 15 s for it to exit, then SIGKILL.
stop_process() {
  local pid=$1 name=$2
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "demo: $name (pid $pid) ignored SIGTERM for 15 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  local rc=0
  wait "$pid" 2>/dev/null || rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "stopped $name (pid $pid)"
  else
    echo "demo: $name (pid $pid) exited with status $rc; see its log in $LOGS" >&2
  fi
}

# Stops everything still running, newest first (hosts before the server).
stop_all() {
  local i
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    stop_process "${PIDS[$i]}" "${NAMES[$i]}"
  done
  PIDS=()
  NAMES=()
}

on_exit() {
  local rc=$?
  trap - EXIT ERR INT TERM
  stop_all
  if [[ $rc -ne 0 ]]; then
    echo "demo: failed (exit $rc); logs are in $LOGS" >&2
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "demo: command failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

# start NAME LOG PROGRAM ARGS...: runs a program in the background, logging to LOG.
start() {
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  PIDS+=("$!")
  NAMES+=("$name")
  echo "started $name (pid $!), log $log"
}

# Fails with the log of any process that has died.
check_alive() {
  local i
  for i in "${!PIDS[@]}"; do
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      echo "demo: ${NAMES[$i]} exited early; the end of its log:" >&2
      tail -n 20 "$LOGS/${NAMES[$i]}.log" >&2 || true
      exit 1
    fi
  done
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_until() {
  local timeout_s=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout_s))
  until "$@" >/dev/null 2>&1; do
    check_alive
    (( SECONDS < deadline )) || die "timed out after ${timeout_s}s waiting for $what"
    sleep 0.2
  done
}

# json_string FILE KEY: a top-level string field of a small JSON file (no jq needed).
json_string() {
  grep -o "\"$2\"[[:space:]]*:[[:space:]]*\"[^\"]*\"" "$1" | head -n 1 | sed 's/.*:[[:space:]]*"\(.*\)"/\1/'
}

weft() { "$BUILD/bin/weft" "$@"; }

install_and_build() {
  say "Installing missing Debian packages"
  "$ROOT/scripts/install-deps.sh"
  say "Building (Release) into build/"
  # The demo needs only the programs and plugins; scripts/test.sh builds the tests.
  "$ROOT/scripts/build.sh" "$BUILD" Release -DWEFT_BUILD_TESTS=OFF
}

start_server() {
  say "Starting weftd (data in $DEMO_DIR/data)"
  rm -rf "$DEMO_DIR/data" "$LOGS"
  mkdir -p "$DEMO_DIR/data" "$LOGS"
  cat >"$DEMO_DIR/weftd.toml" <<TOML
# weftd for the demo: loopback only, ports picked by the system (see data/endpoints.json).
[server]
data_dir = "$DEMO_DIR/data"
log_level = "info"

[endpoints]
api = "tcp://127.0.0.1:*"
provisioner = "tcp://127.0.0.1:*"
events = "tcp://127.0.0.1:*"
TOML
  start weftd "$LOGS/weftd.log" "$BUILD/bin/weftd" --config "$DEMO_DIR/weftd.toml"
  wait_until 15 "weftd to write $DEMO_DIR/data/endpoints.json" \
    grep -q '"events"' "$DEMO_DIR/data/endpoints.json"
  API=$(json_string "$DEMO_DIR/data/endpoints.json" api)
  PROVISIONER=$(json_string "$DEMO_DIR/data/endpoints.json" provisioner)
  [[ -n "$API" && -n "$PROVISIONER" ]] || die "cannot read the endpoints from $DEMO_DIR/data/endpoints.json"
  export WEFT_SERVER="$API"
  echo "api $API, provisioner $PROVISIONER (WEFT_SERVER=$API)"
}

start_host() {
  say "Starting weft-host '$HOST_ID' with the fake plugins"
  cat >"$DEMO_DIR/weft-host.toml" <<TOML
# weft-host for the demo: the test-double plugins the build produced.
server = "$PROVISIONER"
host_id = "$HOST_ID"
capacity = 2
plugin_dirs = ["$BUILD/plugins/providers", "$BUILD/plugins/automators"]
TOML
  start weft-host "$LOGS/weft-host.log" "$BUILD/bin/weft-host" --config "$DEMO_DIR/weft-host.toml"
  wait_until 20 "weft-host to register" host_registered
  echo "weft-host '$HOST_ID' registered"
}

host_registered() {
  weft -o json --timeout 1000 host list | grep -q "\"$HOST_ID\""
}

show() {
  say "weft $*"
  weft "$@"
}

if [[ $DO_BUILD -eq 1 ]]; then
  install_and_build
fi
start_server
start_host
show status
show host list
show plugin list
show catalog import "$ROOT/examples/catalog"
show catalog check
show cluster plan demo --template web --size 5
say "Stopping"
stop_all
say "Done. Logs: $LOGS/weftd.log and $LOGS/weft-host.log; the server's data: $DEMO_DIR/data"
