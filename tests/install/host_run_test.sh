#!/usr/bin/env bash
# `weft-host run PLUGIN ACTION --task FILE`: the real weft-host runs one action of
# a real plugin (native and Lua) without weftd and prints its log lines, progress,
# status and result; plugins that crash, hang or crash while loading are reported
# as a host reports them, and the harness itself lives on.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"
HOST=$BUILD/bin/weft-host
CRASHERS=$BUILD/plugins/crashers

cat >"$SCRATCH/task.json" <<'JSON'
{"node_id": "web-1.weft.test", "hostname": "web-1.weft.test",
 "service": {"name": "web", "action": {"type": "fake-automator", "fields": {"greeting": "good day"}}}}
JSON

echo "== a native plugin: log lines, progress, status, result"
out=$("$HOST" run "$BUILD/plugins/automators/fake_automator.so" INSTALL --task "$SCRATCH/task.json") ||
  fail "fake-automator INSTALL did not succeed: $out"
expect_contains "$out" "loaded plugin 'fake-automator'" "the harness names the plugin it loaded"
expect_contains "$out" "log info: fake-automator INSTALL service web on node web-1.weft.test" "log lines"
expect_contains "$out" "progress 100%: INSTALL done" "progress reports"
expect_contains "$out" "succeeded" "the status"

echo "== --json: what the host would send in task.finish"
json=$("$HOST" run "$BUILD/plugins/automators/fake_automator.so" install --task "$SCRATCH/task.json" --json)
[[ $(jq -r .status <<<"$json") == succeeded ]] || fail "--json status: $json"
[[ $(jq -r .plugin <<<"$json") == fake-automator ]] || fail "--json plugin: $json"
expect_contains "$(jq -r .stdout <<<"$json")" "fake-automator INSTALL service web" "--json stdout tail"
[[ $(jq '.progress | length' <<<"$json") -ge 1 ]] || fail "--json progress: $json"

echo "== an action the plugin lacks fails with the host's sentence"
set +e
out=$("$HOST" run "$BUILD/plugins/automators/fake_automator.so" CREATE --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "CREATE on an automator exited $code: $out"
expect_contains "$out" "failed: plugin 'fake-automator' does not implement action CREATE" "unsupported action"

echo "== a Lua plugin"
out=$("$HOST" run "$SOURCE/scripts/lua/hello.lua" START --task "$SCRATCH/task.json") ||
  fail "hello.lua START did not succeed: $out"
expect_contains "$out" "loaded plugin 'hello-lua'" "the Lua plugin is loaded"
expect_contains "$out" "log info: START: good day from web-1.weft.test" "the Lua plugin's log line"
expect_contains "$out" '"greeting":"good day, web-1.weft.test"' "the Lua plugin's result"

echo "== a result over weftd's 262,144-byte limit fails as weftd would fail it"
cat >"$SCRATCH/big.lua" <<'LUA'
return { type = "big-result", kind = "automator",
  actions = { install = function(task) task:set_result("blob", string.rep("x", 300 * 1024)) end } }
LUA
set +e
out=$("$HOST" run "$SCRATCH/big.lua" INSTALL --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "a 300 KiB result made the harness exit $code: ${out:0:2000}"
expect_contains "$out" "failed: big-result INSTALL returned a result of 307211 bytes (as JSON), over the limit of 262144 bytes" \
  "the result limit"

echo "== a node fact of the wrong type fails as weftd would fail it"
cat >"$SCRATCH/badfact.lua" <<'LUA'
return { type = "bad-fact", kind = "automator",
  actions = { install = function(task) task:set_result("ssh_port", "twenty-two") end } }
LUA
set +e
out=$("$HOST" run "$SCRATCH/badfact.lua" INSTALL --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "a string ssh_port made the harness exit $code: $out"
expect_contains "$out" "failed: bad-fact INSTALL returned a result Weft cannot use: 'ssh_port'" "the node fact check"

echo "== a Lua provider that declares only create is refused at load, naming what it lacks"
cat >"$SCRATCH/lonely.lua" <<'LUA'
return { type = "lonely", kind = "provider", actions = { create = function(task) end } }
LUA
set +e
out=$("$HOST" run "$SCRATCH/lonely.lua" CREATE --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "a provider without CONFIRM and DELETE made the harness exit $code: $out"
expect_contains "$out" "failed: refused: provider 'lonely' does not declare CONFIRM, DELETE" "the refusal"

echo "== a plugin that segfaults: reported, not fatal"
set +e
out=$("$HOST" run "$CRASHERS/crash_segv.so" INSTALL --task "$SCRATCH/task.json" 2>"$SCRATCH/segv.err"); code=$?
set -e
[[ $code -eq 1 ]] || fail "a crashing plugin made the harness exit $code: $out"
expect_contains "$out" "failed: plugin 'crash-segv' crashed with SIGSEGV during INSTALL" "the crash report"

echo "== a plugin that aborts"
set +e
out=$("$HOST" run "$CRASHERS/crash_abort.so" CONFIGURE --task "$SCRATCH/task.json" 2>/dev/null); code=$?
set -e
[[ $code -eq 1 ]] || fail "an aborting plugin made the harness exit $code"
expect_contains "$out" "failed: plugin 'crash-abort' crashed with SIGABRT during CONFIGURE" "the abort report"

echo "== a plugin that hangs past the timeout is killed"
set +e
out=$("$HOST" run "$CRASHERS/crash_hang.so" START --task "$SCRATCH/task.json" --timeout-ms 300); code=$?
set -e
[[ $code -eq 1 ]] || fail "a hanging plugin made the harness exit $code"
expect_contains "$out" "plugin 'crash-hang' hung past the task timeout of 300 ms during START; its worker was killed" \
  "the hang report"

echo "== a plugin that grows past the memory limit is killed"
set +e
out=$("$HOST" run "$CRASHERS/crash_memory.so" INITIALIZE --task "$SCRATCH/task.json" --memory-limit-mb 300); code=$?
set -e
[[ $code -eq 1 ]] || fail "a plugin eating memory made the harness exit $code"
expect_contains "$out" "plugin 'crash-memory' used more than 300 MiB during INITIALIZE; its worker was killed" \
  "the memory report"

echo "== a plugin that exits"
set +e
out=$("$HOST" run "$CRASHERS/crash_exit.so" STOP --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "an exiting plugin made the harness exit $code"
expect_contains "$out" "failed: plugin 'crash-exit' exited with status" "the exit report"

echo "== a plugin that crashes while loading"
set +e
out=$("$HOST" run "$CRASHERS/crash_on_load.so" INSTALL --task "$SCRATCH/task.json" 2>/dev/null); code=$?
set -e
[[ $code -eq 1 ]] || fail "a plugin crashing at load made the harness exit $code"
expect_contains "$out" "failed: plugin file crash_on_load.so crashed with SIGSEGV while loading" "the load crash report"

echo "== a plugin that hangs while loading is given up after the 10 s a host's probe gets, saying what it waits for"
set +e
out=$("$HOST" run "$BUILD/plugins/load_hang/load_hang.so" INSTALL --task "$SCRATCH/task.json" 2>"$SCRATCH/hang.err")
code=$?
set -e
[[ $code -eq 1 ]] || fail "a plugin hanging at load made the harness exit $code: $out"
expect_contains "$out" "failed: plugin file load_hang.so hung while loading (no answer within 10000 ms, the bound a host's probe has); it was killed" \
  "the load hang report (not the 300 s --timeout-ms)"
expect_contains "$(cat "$SCRATCH/hang.err")" "weft-host run: plugin file load_hang.so has not loaded after " \
  "the wait is said while it lasts"
expect_contains "$(cat "$SCRATCH/hang.err")" "(its entry point, init or describe has not returned); it is given up 10 s after it started" \
  "what the wait is for and its bound"

echo "== an action silent for 10 s is said on stderr while it runs, with its bounds"
set +e
out=$("$HOST" run "$CRASHERS/crash_hang.so" START --task "$SCRATCH/task.json" --timeout-ms 11000 2>"$SCRATCH/quiet.err")
code=$?
set -e
[[ $code -eq 1 ]] || fail "a hanging plugin made the harness exit $code"
expect_contains "$(cat "$SCRATCH/quiet.err")" "weft-host run: plugin 'crash-hang' START has run " "the silent action is said"
expect_contains "$(cat "$SCRATCH/quiet.err")" "; it is cancelled at --timeout-ms (11000 ms, a host's task_timeout_ms)" \
  "its bound is said"

echo "== a file that is no plugin is refused with the host's reason"
echo "not a library" >"$SCRATCH/bogus.so"
set +e
out=$("$HOST" run "$SCRATCH/bogus.so" INSTALL --task "$SCRATCH/task.json"); code=$?
set -e
[[ $code -eq 1 ]] || fail "a refused plugin made the harness exit $code"
expect_contains "$out" "failed: refused: cannot load the library" "the refusal"

echo "== usage errors"
set +e
"$HOST" run "$BUILD/plugins/automators/fake_automator.so" DANCE --task "$SCRATCH/task.json" 2>"$SCRATCH/usage.err"
code=$?
set -e
[[ $code -eq 2 ]] || fail "an unknown action exited $code"
expect_contains "$(cat "$SCRATCH/usage.err")" "unknown action 'DANCE'" "the unknown action is named"
echo '[1,2]' >"$SCRATCH/bad.json"
set +e
"$HOST" run "$BUILD/plugins/automators/fake_automator.so" INSTALL --task "$SCRATCH/bad.json" 2>"$SCRATCH/usage.err"
code=$?
set -e
[[ $code -eq 2 ]] || fail "a task file that is not an object exited $code"
expect_contains "$(cat "$SCRATCH/usage.err")" "must hold a JSON object" "the bad task file is explained"
echo "PASS"
