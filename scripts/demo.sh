#!/usr/bin/env bash
# The Weft demo: installs what is missing, builds (Release, build/), starts weftd
# and one weft-host with the local provider and the shell automator, imports
# examples/catalog, shows what its `web` template asks for (mustcoexist,
# cantcoexist, quantities, runtime dependencies) and the plan, and builds a real
# cluster from it: 5 nodes, each a real OpenSSH sshd on a 127.0.x.y address of
# its own, reached only over SSH, running haproxy, nginx, redis and a monitoring
# collector from Debian's packages, the servers bound to their node's address.
# It proves the cluster works (requests through haproxy reach every nginx, redis
# answers), shows how to look around, deletes the cluster, checks that no node
# process, directory, cgroup, address claim or listener is left, and stops.
#
# Never leaves a process behind: on exit, on error and on Ctrl-C it deletes the
# cluster (through weftd, so the local provider stops every node) and stops
# weftd and weft-host. State and logs go to .weft-demo/; nodes live in
# /var/lib/weft/local-nodes/. Needs root: every node is an sshd of its own.
#
#   scripts/demo.sh              install, build, run, delete the cluster, stop
#   scripts/demo.sh --no-build   run what is already built (WEFT_BUILD_DIR, default build/)
#   scripts/demo.sh --keep       leave the cluster, weftd and weft-host running to look around
#   scripts/demo.sh --stop       delete the cluster a --keep run left and stop weftd and weft-host
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${WEFT_BUILD_DIR:-$ROOT/build}
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
usage() { echo "usage: scripts/demo.sh [--no-build] [--keep] | --stop" >&2; exit 2; }
DO_BUILD=1
KEEP=0
STOP_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --no-build) DO_BUILD=0 ;;
    --keep) KEEP=1 ;;
    --stop) STOP_ONLY=1 ;;
    *) usage ;;
  esac
done
[[ $STOP_ONLY -eq 0 || $# -eq 1 ]] || usage
DEMO_DIR="$ROOT/.weft-demo"
LOGS="$DEMO_DIR/logs"
PID_FILE="$DEMO_DIR/pids"      # "pid name" per line, for --stop after --keep
HOST_ID=demo-host-1
CLUSTER=demo
SIZE=5
SSH_PORT=         # the nodes' sshd port, as their CONFIRM reported it
NODES_STATE=/var/lib/weft/local-nodes   # the local provider's default state_dir
CLAIMS=/run/weft/local-addresses        # its machine-wide address claims

PIDS=()   # every process started, in start order
NAMES=()
CLUSTER_MADE=0   # a create was started: the exit path deletes the cluster
NODE_DIRS=()     # what the cluster's nodes were, for the leftover check
NODE_ADDRS=()
NODE_PIDS=()
NODE_CGROUPS=()

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
  if [[ $rc -eq 0 || $rc -eq 127 ]]; then   # 127: not our child (a --keep run started it)
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
  rm -f "$PID_FILE"
}

on_exit() {
  local rc=$?
  trap - EXIT ERR INT TERM
  if [[ $rc -ne 0 ]]; then
    show_failure_logs
  fi
  if [[ $KEEP -eq 1 && $rc -eq 0 ]]; then
    exit 0
  fi
  if [[ $CLUSTER_MADE -eq 1 ]]; then
    delete_cluster_quietly
  fi
  stop_all
  if [[ $rc -ne 0 ]]; then
    echo "demo: failed (exit $rc); logs are in $LOGS" >&2
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "demo: command failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

# start NAME LOG PROGRAM ARGS...: runs a program in the background, logging to
# LOG, in a session of its own so Ctrl-C reaches only this script, which then
# deletes the cluster before it stops the program.
start() {
  local name=$1 log=$2
  shift 2
  setsid "$@" >"$log" 2>&1 </dev/null &
  PIDS+=("$!")
  NAMES+=("$name")
  echo "$! $name" >>"$PID_FILE"
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

weft() { "$BUILD/bin/weft" "$@"; }

# The end of the logs of what this run started, when something went wrong
# (not those an earlier run left in $LOGS).
show_failure_logs() {
  local name
  for name in "${NAMES[@]}"; do
    if [[ -s "$LOGS/$name.log" ]]; then
      echo "---- the end of $LOGS/$name.log" >&2
      tail -n 15 "$LOGS/$name.log" >&2 || true
    fi
  done
}

install_and_build() {
  say "Installing missing Debian packages"
  "$ROOT/scripts/install-deps.sh"
  say "Building (Release) into $BUILD"
  # The demo needs only the programs and plugins; scripts/test.sh builds the tests.
  "$ROOT/scripts/build.sh" "$BUILD" Release -DWEFT_BUILD_TESTS=OFF
}

check_prerequisites() {
  [[ $(id -u) -eq 0 ]] || die "run the demo as root: every node is an sshd of its own (the local provider needs root)"
  local tool
  for tool in jq curl redis-cli nginx haproxy redis-server /usr/sbin/sshd; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is missing; run scripts/install-deps.sh (or the demo without --no-build)"
  done
  for tool in weftd weft-host weft; do
    [[ -x "$BUILD/bin/$tool" ]] || die "$BUILD/bin/$tool is not built; run the demo without --no-build"
  done
  for tool in providers/local_provider.so automators/shell_automator.so; do
    [[ -f "$BUILD/plugins/$tool" ]] || die "$BUILD/plugins/$tool is not built; run the demo without --no-build"
  done
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
    jq -e '.events' "$DEMO_DIR/data/endpoints.json"
  API=$(jq -r '.api' "$DEMO_DIR/data/endpoints.json")
  PROVISIONER=$(jq -r '.provisioner' "$DEMO_DIR/data/endpoints.json")
  [[ -n "$API" && -n "$PROVISIONER" ]] || die "cannot read the endpoints from $DEMO_DIR/data/endpoints.json"
  export WEFT_SERVER="$API"
  # weftd made its CURVE key pair and a superadmin credential at first start
  # (docs/security.md); weft connects with that credential.
  export WEFT_CREDENTIALS="$DEMO_DIR/data/credentials/superadmin.json"
  echo "api $API, provisioner $PROVISIONER (WEFT_SERVER=$API, WEFT_CREDENTIALS=$WEFT_CREDENTIALS)"
}

start_host() {
  say "Starting weft-host '$HOST_ID' with the local provider and the shell automator"
  # The host enrolls with a one-time token: its own key is kept in its state_dir.
  local token
  token=$(weft host token create --ttl 10m) || die "cannot make an enrollment token"
  rm -rf "$DEMO_DIR/host-state"
  cat >"$DEMO_DIR/weft-host.toml" <<TOML
# weft-host for the demo: every plugin the build produced (local, shell, static, the fakes).
# capacity: tasks at once; 5 nodes have up to 5 tasks ready at a time.
server = "$PROVISIONER"
host_id = "$HOST_ID"
capacity = 8
plugin_dirs = ["$BUILD/plugins/providers", "$BUILD/plugins/automators"]
state_dir = "$DEMO_DIR/host-state"
enroll_token = "$token"
TOML
  start weft-host "$LOGS/weft-host.log" "$BUILD/bin/weft-host" --config "$DEMO_DIR/weft-host.toml"
  wait_until 20 "weft-host to register" host_registered
  echo "weft-host '$HOST_ID' registered"
}

host_registered() {
  weft -o json --timeout 1000 host list | jq -e --arg id "$HOST_ID" '.hosts[] | select(.id == $id and .live)'
}

show() {
  say "weft $*"
  weft "$@"
}

cluster_json() { weft -o json cluster get "$CLUSTER"; }

# The playbooks and Puppet modules the catalog's web-ansible and web-puppet
# services name, as the resources they expect, so that the catalog checks clean.
upload_example_resources() {
  say "Uploading the example playbooks and Puppet modules as resources"
  tar -czf "$DEMO_DIR/web-ansible.tar.gz" -C "$ROOT/examples/ansible" --exclude README.md .
  tar -czf "$DEMO_DIR/web-modules.tar.gz" -C "$ROOT/examples/puppet/modules" .
  local type name
  for type in ansible puppet; do
    name=$([[ $type == ansible ]] && echo web-ansible.tar.gz || echo web-modules.tar.gz)
    weft resource upload "$type" "$name" "$DEMO_DIR/$name" >/dev/null
    weft resource stage "$type" "$name" 1 >/dev/null
  done
  weft resource sync >/dev/null
}

# Addresses of the nodes that run service $1, one per line.
addresses_of() {
  cluster_json | jq -r --arg s "$1" '.cluster.nodes[] | select(.services | index($s)) | .results.access_v4'
}

explain_template() {
  local cat="$ROOT/examples/catalog"
  say "What the web template asks for (examples/catalog/clustertemplates/web.json and services/)"
  jq -r '.constraints.layout.mustcoexist[]? | "  mustcoexist  \(join(" + ")): wherever one runs, the others run too"' \
    "$cat/clustertemplates/web.json"
  jq -r '.constraints.layout.cantcoexist[]? | "  cantcoexist  \(join(" + ")): never all on one node"' \
    "$cat/clustertemplates/web.json"
  jq -r '.constraints.services // {} | to_entries[] |
    "  quantities   \(.key): \(.value.quantities.min // 0) to \(.value.quantities.max // "any") nodes" +
    (if .value.hardwaretypes then ", on \(.value.hardwaretypes | join("/")) hardware" else "" end)' \
    "$cat/clustertemplates/web.json"
  jq -r 'select(.dependencies.runtime != null) | .name as $n | .dependencies.runtime |
    ((.requires // [] | map("  runtime      \($n) requires \(.): the cluster must have it, started before \($n) starts")) +
     (.uses // [] | map("  runtime      \($n) uses \(.): if the cluster has it, it starts first"))) | .[]' \
    "$cat"/services/{haproxy,nginx,monitoring}.json
  jq -r '.dependencies.provides[]? as $p | "  provides     \(.name) provides \($p) (so haproxy waits for every nginx)"' "$cat/services/nginx.json"
}

create_cluster() {
  say "weft cluster create $CLUSTER --template web --size $SIZE --wait"
  echo "(each node: an sshd on a 127.0.x.y of its own; each service: INSTALL, CONFIGURE, START over SSH)"
  CLUSTER_MADE=1
  local start=$SECONDS
  weft cluster create "$CLUSTER" --template web --size "$SIZE" --wait ||
    die "creating the cluster failed; the job's failures are above, the tasks' output in 'weft job show'"
  CREATE_S=$((SECONDS - start))
  show cluster get "$CLUSTER"
  mapfile -t NODE_ADDRS < <(cluster_json | jq -r '.cluster.nodes[].results.access_v4')
  SSH_PORT=$(cluster_json | jq -r '.cluster.nodes[0].results.ssh_port')
  # The host keys the nodes reported at CONFIRM, for an ssh that checks them as Weft does.
  cluster_json | jq -r '.cluster.nodes[].results | "[\(.access_v4)]:\(.ssh_port) \(.host_keys[])"' \
    >"$DEMO_DIR/known_hosts"
  mapfile -t NODE_DIRS < <(cluster_json | jq -r --arg d "$NODES_STATE" '.cluster.nodes[].results.provider_id | "\($d)/\(.)"')
  [[ ${#NODE_ADDRS[@]} -eq $SIZE ]] || die "the cluster has ${#NODE_ADDRS[@]} nodes with addresses, expected $SIZE"
}

# Proves the cluster works: every nginx answers through haproxy, redis answers.
prove_it_works() {
  local haproxy redis nginx
  haproxy=$(addresses_of haproxy)
  redis=$(addresses_of redis)
  mapfile -t nginx < <(addresses_of nginx)
  [[ -n "$haproxy" && -n "$redis" && ${#nginx[@]} -ge 2 ]] ||
    die "the layout lacks haproxy, redis or two nginx (haproxy '$haproxy', redis '$redis', nginx ${nginx[*]})"
  SITE="http://$haproxy:8000/"
  REDIS_ADDR=$redis
  NGINX_ADDRS=("${nginx[@]}")

  say "Does it work? $((4 * ${#nginx[@]})) requests to haproxy at $SITE"
  local names=() i page
  for (( i=0; i<4*${#nginx[@]}; i++ )); do
    page=$(curl -fsS -m 5 "$SITE") || die "haproxy at $SITE did not answer"
    names+=("$(sed -n 's|.*<h1>served by \(.*\)</h1>.*|\1|p' <<<"$page")")
  done
  printf '%s\n' "${names[@]}" | sort | uniq -c | sed 's/^ */  /; s/ \([^ ]*\)$/ requests served by \1/'
  local distinct
  distinct=$(printf '%s\n' "${names[@]}" | grep -v '^$' | sort -u | wc -l)
  [[ $distinct -eq ${#nginx[@]} ]] ||
    die "haproxy reached $distinct distinct web servers, expected all ${#nginx[@]} (${nginx[*]})"
  echo "haproxy spread the requests over all $distinct nginx nodes (${nginx[*]})"

  say "redis-cli -h $redis -p 6379 ping"
  local pong
  pong=$(redis-cli -h "$redis" -p 6379 ping) || die "redis at $redis:6379 did not answer"
  [[ "$pong" == PONG ]] || die "redis at $redis:6379 answered '$pong', not PONG"
  echo "$pong"

  say "curl http://${nginx[0]}:8080/status.txt (the monitoring collector beside that nginx)"
  local status=""
  for _ in $(seq 50); do
    status=$(curl -fsS -m 2 "http://${nginx[0]}:8080/status.txt" 2>/dev/null || true)
    grep -q ": ${#nginx[@]} web servers up" <<<"$status" && break
    sleep 0.2
  done
  [[ -n "$status" ]] || die "the monitoring collector wrote no status page on ${nginx[0]}"
  echo "$status"
}

look_around() {
  local job
  job=$(cluster_json | jq -r '.cluster.latest_job')
  say "Look around (from another shell, first: alias weft=$BUILD/bin/weft; export WEFT_SERVER=$WEFT_SERVER WEFT_CREDENTIALS=$WEFT_CREDENTIALS)"
  local first_dir=${NODE_DIRS[0]}
  printf '  %-50s %s\n' \
    "weft cluster get $CLUSTER" "nodes, addresses, services, jobs" \
    "weft job show $job" "the create job: its tasks, their attempts and output" \
    "weft cluster plan big --template web --size 8" "the layout and task DAG of a bigger one (runs nothing)" \
    "curl $SITE" "the site through haproxy; again, and another nginx answers" \
    "curl ${SITE}haproxy-stats" "haproxy's view of its web servers" \
    "curl http://${NGINX_ADDRS[0]}:8080/status.txt" "the monitoring collector beside that nginx" \
    "redis-cli -h $REDIS_ADDR ping" "redis" \
    "ls $NODES_STATE/" "a directory per node: sshd_config, keys, logs, and root/" \
    "ls $first_dir/root/" "that node's disk: its services' files" \
    "ssh -p $SSH_PORT -i $first_dir/id_ed25519 -o UserKnownHostsFile=$DEMO_DIR/known_hosts root@${NODE_ADDRS[0]}" \
    "log in to that node as the automators do (its host key checked)"
  echo "The cluster was created in ${CREATE_S}s."
}

# Deletes the cluster through weftd: the local provider's DELETE stops every
# process of each node (its cgroup) and removes its directory.
delete_cluster() {
  say "weft cluster delete $CLUSTER --wait"
  weft cluster delete "$CLUSTER" --wait || die "deleting the cluster failed"
  CLUSTER_MADE=0
}

# On the way out after a failure or Ctrl-C: a running job is aborted, then the
# cluster deleted, so no node outlives the demo.
delete_cluster_quietly() {
  local c status job
  c=$(weft -o json --timeout 3000 cluster get "$CLUSTER" 2>/dev/null) || return 0
  status=$(jq -r '.cluster.status' <<<"$c")
  [[ "$status" != terminated ]] || return 0
  job=$(jq -r '.cluster.jobs[0] | select(.status == "running" or .status == "failing") | .id' <<<"$c")
  if [[ -n "$job" ]]; then
    echo "demo: aborting job $job of cluster $CLUSTER" >&2
    weft job abort "$job" >/dev/null 2>&1 || true
  fi
  echo "demo: deleting cluster $CLUSTER so that no node is left running" >&2
  weft cluster delete "$CLUSTER" --wait >&2 || echo "demo: could not delete cluster $CLUSTER; see $LOGS" >&2
  CLUSTER_MADE=0
}

port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# Before the delete: every process of every node (its cgroup's, else the sshd)
# and the nodes' cgroups, for check_no_leftovers. redis rewrites its command
# line, so a search by the node's directory would not find it; its pid does.
record_node_footprint() {
  local d cg
  NODE_PIDS=()
  NODE_CGROUPS=()
  for d in "${NODE_DIRS[@]}"; do
    cg=$(jq -r '.cgroup // ""' "$d/node.json" 2>/dev/null || true)
    if [[ -n "$cg" && -r "$cg/cgroup.procs" ]]; then
      NODE_CGROUPS+=("$cg")
      mapfile -t -O "${#NODE_PIDS[@]}" NODE_PIDS <"$cg/cgroup.procs"
    fi
    if [[ -s "$d/sshd.pid" ]]; then NODE_PIDS+=("$(cat "$d/sshd.pid")"); fi
  done
  mapfile -t NODE_PIDS < <(printf '%s\n' "${NODE_PIDS[@]}" | grep -v '^$' | sort -un)
}

# Whether pid runs (exists and is not a zombie). A node's sshd is a child of
# the weft-host worker that created the node: stopped by another worker, it is
# a zombie until its parent next reaps (any local-node call) or exits.
running_pid() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# After weft-host stopped: not even a zombie of a node is left.
check_no_zombies() {
  local p left=()
  for p in "${NODE_PIDS[@]}"; do
    for _ in $(seq 20); do [[ -e /proc/$p ]] || break; sleep 0.1; done
    [[ ! -e /proc/$p ]] || left+=("$p")
  done
  [[ ${#left[@]} -eq 0 ]] || die "processes of the nodes still in the process table: ${left[*]}"
  echo "none of the nodes' ${#NODE_PIDS[@]} processes is left, not even as a zombie"
}

# Nothing of the nodes is left: no process, directory, cgroup, address claim or listener.
check_no_leftovers() {
  say "Checking that no node is left"
  local d a p cg left=()
  for p in "${NODE_PIDS[@]}"; do
    for _ in $(seq 20); do running_pid "$p" || break; sleep 0.1; done
    if running_pid "$p"; then left+=("process $p ($(cat "/proc/$p/comm" 2>/dev/null))"); fi
  done
  for d in "${NODE_DIRS[@]}"; do
    [[ ! -e "$d" ]] || left+=("directory $d")
    if pgrep -f "$d" >/dev/null; then
      left+=("processes $(pgrep -f "$d" | tr '\n' ' ')under $d")
    fi
  done
  for cg in "${NODE_CGROUPS[@]}"; do
    [[ ! -e "$cg" ]] || left+=("cgroup $cg")
  done
  for a in "${NODE_ADDRS[@]}"; do
    [[ ! -e "$CLAIMS/$a" ]] || left+=("the address claim $CLAIMS/$a")
    for p in "$SSH_PORT" 8000 8080 6379; do
      if port_open "$a" "$p"; then left+=("a listener on $a:$p"); fi
    done
  done
  if [[ ${#left[@]} -gt 0 ]]; then
    printf 'demo: left behind: %s\n' "${left[@]}" >&2
    exit 1
  fi
  echo "nothing is left of the ${#NODE_DIRS[@]} nodes: ${#NODE_PIDS[@]} processes (sshd, haproxy, nginx, redis," \
    "collectors) ended, no directory, cgroup, address claim or listener"
}

# --stop: deletes the cluster a --keep run left and stops its weftd and weft-host.
stop_kept_demo() {
  [[ -f "$PID_FILE" ]] || return 0
  local pid name
  while read -r pid name; do
    # Only a process that is still the demo's (pids are reused, say after a reboot).
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DEMO_DIR/"; then
      PIDS+=("$pid")
      NAMES+=("$name")
    fi
  done <"$PID_FILE"
  if [[ -f "$DEMO_DIR/data/endpoints.json" ]]; then
    export WEFT_SERVER WEFT_CREDENTIALS="$DEMO_DIR/data/credentials/superadmin.json"
    WEFT_SERVER=$(jq -r '.api' "$DEMO_DIR/data/endpoints.json")
    say "Deleting the cluster of the demo that --keep left running"
    delete_cluster_quietly 2>&1
  fi
  stop_all
}

if [[ $STOP_ONLY -eq 1 ]]; then
  [[ -f "$PID_FILE" ]] || { echo "demo: no demo left running by --keep (no $PID_FILE)"; exit 0; }
  check_prerequisites
  stop_kept_demo
  exit 0
fi

if [[ $DO_BUILD -eq 1 ]]; then
  install_and_build
fi
check_prerequisites
stop_kept_demo
mkdir -p "$DEMO_DIR"
RUN_START=$SECONDS
start_server
start_host
show plugin list --type local
show catalog import "$ROOT/examples/catalog"
upload_example_resources
show catalog check
explain_template
show cluster plan "$CLUSTER" --template web --size "$SIZE"
create_cluster
prove_it_works
look_around
if [[ $KEEP -eq 1 ]]; then
  say "Leaving cluster '$CLUSTER', weftd and weft-host running (--keep)"
  echo "export WEFT_SERVER=$WEFT_SERVER WEFT_CREDENTIALS=$WEFT_CREDENTIALS    # then the commands above"
  echo "scripts/demo.sh --stop             # deletes the cluster and stops weftd and weft-host"
  exit 0
fi
record_node_footprint
delete_cluster
check_no_leftovers
say "Stopping"
stop_all
check_no_zombies
say "Done in $((SECONDS - RUN_START))s (after building). Logs: $LOGS/weftd.log and $LOGS/weft-host.log; the server's data: $DEMO_DIR/data"
