#!/usr/bin/env bash
# API clients outside the tree, against a real weftd with CurveZMQ on:
# examples/python/weft_client.py (Debian's python3-zmq, a credential file) does
# status, catalog import and a cluster create whose progress it follows on the
# events endpoint, with a real weft-host running the tasks; and
# examples/client-cpp builds against the installed client library and asks weftd
# for its status.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
CLIENT=$SOURCE/examples/python/weft_client.py

start_weftd "$BUILD/bin/weftd" "$SCRATCH/data" ""
CRED=$SCRATCH/data/credentials/superadmin.json
wait_until "weftd's superadmin credential" test -s "$CRED"
export WEFT_CREDENTIALS=$CRED

echo "== status"
out=$("$PY" "$CLIENT" --credentials "$CRED" status) || fail "weft_client.py status failed: $out"
[[ $(jq -r .version <<<"$out") == "$("$BUILD/bin/weft" --version | awk '{print $2}')" ]] ||
  fail "status has no version of weftd: $out"

echo "== a credential with a key weftd does not know is refused"
jq --arg k "$(jq -r .public_key "$SCRATCH/data/credentials/superadmin.json")" \
  '.secret_key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6" | .public_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"' \
  "$CRED" >"$SCRATCH/stranger.json"
set +e
out=$("$PY" "$CLIENT" --credentials "$SCRATCH/stranger.json" --timeout-ms 1000 status 2>&1); code=$?
set -e
[[ $code -eq 1 ]] || fail "an unknown key got an answer: $out"
expect_contains "$out" "no reply from weftd" "an unknown key is not served"

echo "== catalog import"
out=$("$PY" "$CLIENT" --credentials "$CRED" catalog-import "$SOURCE/examples/catalog") ||
  fail "weft_client.py catalog-import failed: $out"
expect_contains "$out" "clustertemplate web-fake: version 1" "the template is stored"
"$BUILD/bin/weft" -o json clustertemplate get web-fake >/dev/null || fail "weft does not see the imported template"

echo "== cluster create, following the job on events"
token=$("$BUILD/bin/weft" host token create 2>/dev/null | head -n 1)
HOST_EXTRA_TOML="enroll_token = \"$token\"" \
  start_host "$BUILD/bin/weft-host" "$PROVISIONER" "$BUILD/plugins/providers" "$BUILD/plugins/automators"
wait_until "weft-host to enroll and register" has_plugins "$BUILD/bin/weft" fake-provider fake-automator
out=$("$PY" "$CLIENT" --credentials "$CRED" cluster-create shop --template web-fake --size 4) ||
  fail "weft_client.py cluster-create failed: $out"
expect_contains "$out" "cluster shop: job" "the job is named"
expect_contains "$out" "] 1/36 tasks, running" "progress from the events endpoint"
expect_contains "$out" "] 36/36 tasks, succeeded" "progress to the end"
expect_contains "$out" ": succeeded" "the job's end"
echo "$out" | tail -n 3
[[ $("$BUILD/bin/weft" -o json cluster get shop | jq -r '(.cluster // .).status') == active ]] ||
  fail "cluster shop is not active"
set +e
out=$("$PY" "$CLIENT" --credentials "$CRED" cluster-create shop --template web-fake --size 4 2>&1); code=$?
set -e
[[ $code -eq 1 ]] || fail "a second create of the same name did not fail"
expect_contains "$out" "(CONFLICT)" "a repeated create is a conflict"

echo "== a job with a JOIN (a config naming other nodes' addresses) counts up to its total"
# A JOIN runs no plugin and publishes no task event; the progress counts it all the same.
cat >"$SCRATCH/backends.txt" <<'EOF'
%join(map(ip.bind_v4.service.fake-nginx,'$:8080'),',')%
EOF
"$BUILD/bin/weft" -o json service get fake-haproxy |
  jq --arg b "$(cat "$SCRATCH/backends.txt")" '.entity | .provisioner.actions.configure.fields.backends = $b' \
    >"$SCRATCH/fake-haproxy.json"
"$BUILD/bin/weft" service put "$SCRATCH/fake-haproxy.json" >/dev/null || fail "service put fake-haproxy failed"
out=$("$PY" "$CLIENT" --credentials "$CRED" cluster-create joined --template web-fake --size 4) ||
  fail "weft_client.py cluster-create of a job with a JOIN failed: $out"
job=$(sed -nE 's/^cluster joined: job ([0-9]+) .*/\1/p' <<<"$out")
joins=$("$BUILD/bin/weft" -o json job show "$job" | jq '[.job.tasks[] | select(.action == "JOIN")] | length')
[[ $joins -ge 1 ]] || fail "job $job has no JOIN task: the check below would check nothing"
total=$("$BUILD/bin/weft" -o json job show "$job" | jq '.job.progress.total')
expect_contains "$out" "] $total/$total tasks, succeeded" "a job with a JOIN reaches its total"
short=$(grep -E "\] [0-9]+/$total tasks, succeeded" <<<"$out" | grep -v "\] $total/$total " || true)
[[ -z $short ]] || fail "a line of the succeeded job is short of its total ($total): $short"
"$BUILD/bin/weft" service put "$SOURCE/examples/catalog/services/fake-haproxy.json" >/dev/null ||
  fail "putting back fake-haproxy failed"

echo "== a tenant admin's and a user's credentials follow their own tenant's job"
"$BUILD/bin/weft" tenant create acme >/dev/null || fail "tenant create acme failed"
"$BUILD/bin/weft" --tenant acme user create bob --role admin >/dev/null || fail "user create bob failed"
"$BUILD/bin/weft" --tenant acme credentials bob -f "$SCRATCH/bob.json" >/dev/null || fail "credentials bob failed"
"$BUILD/bin/weft" --tenant acme user create ann >/dev/null || fail "user create ann failed"
"$BUILD/bin/weft" --tenant acme credentials ann -f "$SCRATCH/ann.json" >/dev/null || fail "credentials ann failed"
out=$("$PY" "$CLIENT" --credentials "$SCRATCH/bob.json" catalog-import "$SOURCE/examples/catalog") ||
  fail "catalog-import as acme's admin failed: $out"
# Events of tenant acme, not default's: the tenant comes from the credential.
out=$("$PY" "$CLIENT" --credentials "$SCRATCH/bob.json" cluster-create shop --template web-fake --size 4) ||
  fail "cluster-create as acme's admin failed: $out"
expect_contains "$out" "] 1/36 tasks, running" "a tenant admin follows the job on events"
expect_contains "$out" ": succeeded" "the tenant admin's job ends"
# A user's subscription covers the clusters they own when they subscribe: after the create.
# The host is held meanwhile, so that the job's tasks run after the subscription.
host_pid=${PIDS[-1]}
kill -STOP "$host_pid"
"$PY" "$CLIENT" --credentials "$SCRATCH/ann.json" cluster-create till --template web-fake --size 4 \
  >"$SCRATCH/till.out" 2>&1 &
client_pid=$!
wait_until "the user's create to be answered" grep -q "cluster till: job" "$SCRATCH/till.out"
sleep 1
kill -CONT "$host_pid"
wait "$client_pid" || fail "cluster-create as acme's user failed: $(cat "$SCRATCH/till.out")"
out=$(cat "$SCRATCH/till.out")
expect_contains "$out" "tasks, running" "a user follows their new cluster's job on events"
expect_contains "$out" "] 36/36 tasks, succeeded" "the user's job ends"

echo "== the C++ client library, installed, with its example program"
cmake --install "$BUILD" --prefix "$SCRATCH/prefix" --component dev >"$SCRATCH/install.log" 2>&1 ||
  fail "cmake --install of the SDK failed"
cp -r "$SCRATCH/prefix/share/doc/weft/examples/client-cpp" "$SCRATCH/client-cpp"
cmake -S "$SCRATCH/client-cpp" -B "$SCRATCH/client-cpp/build" -DCMAKE_PREFIX_PATH="$SCRATCH/prefix" \
  >"$SCRATCH/client-cpp.log" 2>&1 || fail "client-cpp does not configure"
cmake --build "$SCRATCH/client-cpp/build" >>"$SCRATCH/client-cpp.log" 2>&1 || fail "client-cpp does not build"
out=$("$SCRATCH/client-cpp/build/weft-status" "$CRED") || fail "weft-status failed: $out"
expect_contains "$out" "weftd 0.1.0 at $API" "weft-status reports weftd's version"
echo "PASS"
