#!/usr/bin/env bash
# `cmake --install` into a scratch prefix lays out the documented tree; the two
# example plugins, copied out of that prefix, build against its SDK alone
# (CMake's find_package(WeftSDK) and pkg-config's weft-plugin); the installed
# weft-host's harness runs them; and the installed weftd + weft-host run a
# cluster job with them, dropped into a watched plugin directory without a restart.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"
PREFIX=$SCRATCH/prefix

echo "== cmake --install"
cmake --install "$BUILD" --prefix "$PREFIX" >"$SCRATCH/install.log" 2>&1 || fail "cmake --install failed"
for f in bin/weftd bin/weft-host bin/weft \
         lib/weft/plugins/providers/fake_provider.so lib/weft/plugins/providers/local_provider.so \
         lib/weft/plugins/automators/fake_automator.so lib/weft/plugins/automators/shell_automator.so \
         share/weft/lua/hello.lua share/weft/lua/pool.lua share/doc/weft/README.md share/doc/weft/plugin-abi.md share/doc/weft/benchmarks.md \
         share/doc/weft/examples/weftd.toml share/doc/weft/examples/weft-host.toml \
         share/doc/weft/examples/catalog/clustertemplates/web.json \
         share/doc/weft/examples/plugin-cpp/CMakeLists.txt share/doc/weft/examples/plugin-c/Makefile \
         etc/weft/weftd.toml etc/weft/weft-host.toml share/bash-completion/completions/weft \
         include/weft/plugin.h include/weft/plugin.hpp include/weft/client/client.hpp include/weft/common/status.hpp; do
  [[ -e $PREFIX/$f ]] || fail "cmake --install did not install $f"
done
for f in libweft_client.a libweft_common.a; do
  [[ -n $(find "$PREFIX" -path "*/weft/$f") ]] || fail "cmake --install did not install $f"
done
[[ -n $(find "$PREFIX" -path "*/cmake/WeftSDK/WeftSDKConfig.cmake") ]] || fail "no WeftSDKConfig.cmake"
# Documentation pages may be about tests or benchmarks (docs/benchmarks.md); programs and fixtures may not.
leaked=$(find "$PREFIX" \( -name "*test*" -o -name "*crash*" -o -name "*bench*" \) -not -path "$PREFIX/share/doc/weft/*.md")
[[ -z $leaked ]] || fail "test programs or fixtures were installed: $leaked"

echo "== the installed configuration and units name this prefix's paths, not the packages' /usr ones"
host_toml=$PREFIX/etc/weft/weft-host.toml
expect_contains "$(cat "$host_toml")" "plugin_dirs = [\"$PREFIX/lib/weft/plugins/providers\", \"$PREFIX/lib/weft/plugins/automators\"" \
  "etc/weft/weft-host.toml's bundled plugin directories"
for dir in $(sed -n 's/^plugin_dirs = \[\(.*\)\]/\1/p' "$host_toml" | tr -d '",'); do
  [[ $dir == /var/lib/weft/plugins || -d $dir ]] || fail "etc/weft/weft-host.toml names $dir, which the install did not make"
done
expect_contains "$(cat "$PREFIX/lib/systemd/system/weft-host.service")" \
  "ExecStart=$PREFIX/bin/weft-host --config $PREFIX/etc/weft/weft-host.toml" "weft-host.service's ExecStart"
expect_contains "$(cat "$PREFIX/lib/systemd/system/weftd.service")" \
  "ExecStart=$PREFIX/bin/weftd --config $PREFIX/etc/weft/weftd.toml" "weftd.service's ExecStart"
expect_contains "$(cat "$PREFIX/share/doc/weft/examples/weft-host.toml")" "\"$PREFIX/lib/weft/plugins/providers\"" \
  "the example weft-host.toml"
stray=$(grep -l -E '(^|[^a-z])/(usr|etc)/' "$host_toml" "$PREFIX/etc/weft/weftd.toml" "$PREFIX"/lib/systemd/system/*.service \
          "$PREFIX"/share/doc/weft/examples/*.toml || true)
[[ -z $stray ]] || fail "installed files still name /usr or /etc under prefix $PREFIX: $stray"

echo "== a second cmake --install keeps an edited configuration file and puts its own beside it"
# Edited before this build was made (older than the files the build writes), as when
# a later version is installed over an earlier one.
echo 'log_level = "debug"  # the operator'"'"'s' >>"$PREFIX/etc/weft/weftd.toml"
touch -d @946684800 "$PREFIX/etc/weft/weftd.toml" "$PREFIX/etc/weft/weft-host.toml"
cmake --install "$BUILD" --prefix "$PREFIX" >"$SCRATCH/install-again.log" 2>&1 || fail "the second cmake --install failed"
expect_contains "$(cat "$PREFIX/etc/weft/weftd.toml")" "the operator's" "etc/weft/weftd.toml after a second install"
cmp -s "$PREFIX/etc/weft/weftd.toml.new" "$PREFIX/share/doc/weft/examples/weftd.toml" ||
  fail "no etc/weft/weftd.toml.new as installed beside the edited weftd.toml"
expect_contains "$(cat "$SCRATCH/install-again.log")" "weftd.toml.new" "the second install's output"
[[ ! -e $PREFIX/etc/weft/weft-host.toml.new ]] || fail "weft-host.toml, not edited, got a .new beside it"

echo "== the examples build outside the tree, against the installed SDK only"
build_examples "$PREFIX" "$SCRATCH/src"
for so in "$HELLO_PROVIDER" "$HELLO_AUTOMATOR"; do
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | grep -v '^_' | sort -u)
  [[ $exported == weft_plugin_entry ]] || fail "$(basename "$so") exports more than weft_plugin_entry: $exported"
done

echo "== WeftSDK::plugin links with --no-undefined: a function no library defines fails the link, not the load"
undef=$SCRATCH/src/undefined-cpp
mkdir -p "$undef"
cp "$SCRATCH/src/plugin-cpp/CMakeLists.txt" "$SCRATCH/src/plugin-cpp/hello_provider.cpp" "$undef"/
cat >>"$undef/hello_provider.cpp" <<'EOF'
void forgotten_helper();  // declared, defined nowhere
void call_forgotten_helper() { forgotten_helper(); }
EOF
cmake -S "$undef" -B "$undef/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
  >"$SCRATCH/undefined.log" 2>&1 || fail "the undefined-symbol plugin does not configure: $(cat "$SCRATCH/undefined.log")"
if cmake --build "$undef/build" >>"$SCRATCH/undefined.log" 2>&1; then
  fail "a plugin calling an undefined function linked against WeftSDK::plugin"
fi
expect_contains "$(cat "$SCRATCH/undefined.log")" "undefined reference to \`forgotten_helper()'" "the link error"
# Linked without the option (as by hand), the host's refusal names the function, demangled.
c++ -std=c++20 -shared -fPIC -fvisibility=hidden -I"$PREFIX/include" -o "$undef/undefined.so" \
  "$undef/hello_provider.cpp" >>"$SCRATCH/undefined.log" 2>&1 || fail "the plugin does not build by hand"
if out=$("$PREFIX/bin/weft-host" run "$undef/undefined.so" CREATE --task "$SCRATCH/src/plugin-cpp/task.json" 2>&1); then
  fail "weft-host run loaded a plugin with an undefined symbol: $out"
fi
expect_contains "$out" "undefined symbol: forgotten_helper() (_Z16forgotten_helperv)" "the load refusal"

echo "== the installed weft-host's harness runs them"
out=$("$PREFIX/bin/weft-host" run "$HELLO_PROVIDER" CREATE --task "$SCRATCH/src/plugin-cpp/task.json") ||
  fail "hello-provider CREATE failed: $out"
expect_contains "$out" '"provider_id":"hello-1/demo-1.weft.test/1"' "hello-provider's result"
out=$("$PREFIX/bin/weft-host" run "$HELLO_AUTOMATOR" INSTALL --task "$SCRATCH/src/plugin-c/task.json") ||
  fail "hello-automator INSTALL failed: $out"
expect_contains "$out" "log info: hello-automator INSTALL on node demo-1.weft.test" "hello-automator's log line"
expect_contains "$out" '"greeting":"hello from INSTALL"' "hello-automator's result"

echo "== a native plugin's field_json gets the field's declared default; a missing required field or a wrong type is INVALID"
jq 'del(.provider.fields.address) | .action = "CONFIRM"' "$SCRATCH/src/plugin-cpp/task.json" >"$SCRATCH/no-address.json"
out=$("$PREFIX/bin/weft-host" run "$HELLO_PROVIDER" CONFIRM --task "$SCRATCH/no-address.json") ||
  fail "hello-provider CONFIRM without an address failed: $out"
expect_contains "$out" '"access_v4":"127.0.0.1"' "the default of the field address"
jq '.provider.fields.address = 5 | .action = "CONFIRM"' "$SCRATCH/src/plugin-cpp/task.json" >"$SCRATCH/bad-address.json"
if out=$("$PREFIX/bin/weft-host" run "$HELLO_PROVIDER" CONFIRM --task "$SCRATCH/bad-address.json"); then
  fail "hello-provider CONFIRM ran with a number for its string field address: $out"
fi
expect_contains "$out" "failed: hello-provider CONFIRM invalid task: field 'address' must be a string, not an integer" \
  "the wrong type refused before the plugin runs"

echo "== the installed weftd and weft-host run a job with them, dropped in without a restart"
mkdir -p "$SCRATCH/plugins"
start_weftd "$PREFIX/bin/weftd" "$SCRATCH/data"
start_host "$PREFIX/bin/weft-host" "$PROVISIONER" "$PREFIX/lib/weft/plugins/providers" "$SCRATCH/plugins"
wait_until "weft-host to register" has_plugins "$PREFIX/bin/weft" fake-provider
host_pid=${PIDS[-1]}
run_hello_job "$PREFIX/bin/weft" "$SCRATCH/plugins"
kill -0 "$host_pid" || fail "weft-host is not the process that was started"
echo "PASS"
