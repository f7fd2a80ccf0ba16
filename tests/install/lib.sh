# Helpers for the install tests: a scratch directory removed at exit, processes
# stopped at exit, failures that print what the processes logged.
# Sourced by each test with BUILD and SOURCE set.
set -euo pipefail

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/weft-install-test.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "$SCRATCH"/*.log; do
    [[ -f $log ]] || continue
    echo "---- $(basename "$log") (last 40 lines)" >&2
    tail -n 40 "$log" >&2
  done
  exit 1
}

# expect_contains TEXT NEEDLE WHAT
expect_contains() {
  [[ $1 == *"$2"* ]] || fail "$3: expected to find '$2' in:
$1"
}

# wait_until DESCRIPTION COMMAND...: runs COMMAND every 0.1 s until it succeeds, for up
# to WAIT_SECONDS (default 60) seconds by the clock, however long each try takes; a try
# begun before then may end after it: it gives up after the first try that fails once
# the time is up.
wait_until() {
  local what=$1 seconds=${WAIT_SECONDS:-60} now deadline
  shift
  now=${EPOCHREALTIME//[!0-9]/}  # microseconds (the decimal separator is the locale's)
  deadline=$((now + seconds * 1000000))
  while true; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    now=${EPOCHREALTIME//[!0-9]/}
    ((now < deadline)) || break
    sleep 0.1
  done
  fail "gave up waiting for: $what (tried for ${seconds}s)"
}

# start_weftd WEFTD_BINARY DATA_DIR [EXTRA_TOML]: a weftd on ephemeral loopback
# ports, security off unless EXTRA_TOML says otherwise. Sets API and PROVISIONER.
start_weftd() {
  local bin=$1 data=$2 extra=${3-$'[security]\ncurve = false'}
  mkdir -p "$data"
  cat >"$SCRATCH/weftd.toml" <<TOML
[server]
data_dir = "$data"
[endpoints]
api = "tcp://127.0.0.1:*"
provisioner = "tcp://127.0.0.1:*"
events = "tcp://127.0.0.1:*"
$extra
TOML
  "$bin" --config "$SCRATCH/weftd.toml" >"$SCRATCH/weftd.log" 2>&1 &
  PIDS+=($!)
  wait_until "weftd's endpoints.json" test -s "$data/endpoints.json"
  API=$(jq -r .api "$data/endpoints.json")
  PROVISIONER=$(jq -r .provisioner "$data/endpoints.json")
  EVENTS=$(jq -r .events "$data/endpoints.json")
}

# build_examples PREFIX DEST: copies the installed plugin examples out of PREFIX
# into DEST and builds them there against PREFIX's SDK only: plugin-cpp with
# CMake (find_package(WeftSDK)), plugin-c with make (pkg-config weft-plugin).
# Sets HELLO_PROVIDER and HELLO_AUTOMATOR to the built files.
build_examples() {
  local prefix=$1 dest=$2 pcdir
  mkdir -p "$dest"
  cp -r "$prefix"/share/doc/weft/examples/plugin-cpp "$prefix"/share/doc/weft/examples/plugin-c "$dest"/
  cmake -S "$dest/plugin-cpp" -B "$dest/plugin-cpp/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$SCRATCH/example-cpp.log" 2>&1 || fail "plugin-cpp does not configure"
  cmake --build "$dest/plugin-cpp/build" >>"$SCRATCH/example-cpp.log" 2>&1 || fail "plugin-cpp does not build"
  pcdir=$(dirname "$(find "$prefix" -name weft-plugin.pc | head -n 1)")
  PKG_CONFIG_PATH=$pcdir make -C "$dest/plugin-c" >"$SCRATCH/example-c.log" 2>&1 || fail "plugin-c does not build"
  HELLO_PROVIDER=$dest/plugin-cpp/build/hello_provider.so
  HELLO_AUTOMATOR=$dest/plugin-c/hello_automator.so
  [[ -f $HELLO_PROVIDER && -f $HELLO_AUTOMATOR ]] || fail "the examples built no plugin files"
}

# drop_plugin FILE DIR: how an operator should add a plugin to a watched
# directory: copied under a name the host ignores, then renamed into place.
drop_plugin() {
  cp "$1" "$2/.$(basename "$1").partial"
  mv "$2/.$(basename "$1").partial" "$2/$(basename "$1")"
}

has_plugins() {  # has_plugins WEFT TYPE...: every TYPE is in weft plugin list
  local list type
  list=$("$1" --server "$API" -o json plugin list) || return 1
  for type in "${@:2}"; do jq -e --arg t "$type" '.plugins | any(.type == $t)' <<<"$list" >/dev/null || return 1; done
}

# run_hello_job WEFT_BINARY PLUGIN_DIR: with weftd and a weft-host watching
# PLUGIN_DIR running, drops the built examples into PLUGIN_DIR (no restart),
# imports tests/install/catalog and creates a 2-node cluster of template hello,
# whose tasks only the examples can run; checks the job succeeded through them.
run_hello_job() {
  WEFT=$1
  local dir=$2 cluster
  "$WEFT" --server "$API" catalog import "$SOURCE/tests/install/catalog" >"$SCRATCH/import.log" 2>&1 ||
    fail "catalog import failed"
  drop_plugin "$HELLO_PROVIDER" "$dir"
  drop_plugin "$HELLO_AUTOMATOR" "$dir"
  wait_until "weft-host to pick up the dropped plugins" has_plugins "$WEFT" hello-provider hello-automator
  "$WEFT" --server "$API" cluster create demo --template hello --size 2 --wait >"$SCRATCH/create.log" 2>&1 ||
    fail "the cluster create job with the example plugins failed"
  cluster=$("$WEFT" --server "$API" -o json cluster get demo | jq "(.cluster // .)")
  [[ $(jq -r .status <<<"$cluster") == active ]] || fail "cluster demo is not active: $cluster"
  jq -e '[.nodes[] | .results.provider_id | startswith("hello-")] | all and length == 2' <<<"$cluster" >/dev/null ||
    fail "the nodes were not made by hello-provider: $cluster"
  jq -e '[.nodes[] | .results.greeting] | all(. == "hello from START")' <<<"$cluster" >/dev/null ||
    fail "hello-automator did not run on every node: $cluster"
  # The catalog's provider leaves out the field address: hello-provider's field_json got its declared default.
  jq -e '[.nodes[] | .results.access_v4] | all(. == "127.0.0.1") and length == 2' <<<"$cluster" >/dev/null ||
    fail "hello-provider did not get its field default 127.0.0.1 as access_v4: $cluster"
}

# start_host WEFT_HOST_BINARY PROVISIONER PLUGIN_DIR...: a weft-host with its
# state in the scratch directory; HOST_EXTRA_TOML is added to its configuration.
start_host() {
  local bin=$1 server=$2 dirs="" d
  shift 2
  for d in "$@"; do dirs+="${dirs:+, }\"$d\""; done
  mkdir -p "$SCRATCH/host-state"
  cat >"$SCRATCH/weft-host.toml" <<TOML
server = "$server"
host_id = "install-test-host"
capacity = 4
workers = 1
plugin_dirs = [$dirs]
state_dir = "$SCRATCH/host-state"
${HOST_EXTRA_TOML:-}
TOML
  "$bin" --config "$SCRATCH/weft-host.toml" >"$SCRATCH/weft-host.log" 2>&1 &
  PIDS+=($!)
}
