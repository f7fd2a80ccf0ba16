#!/usr/bin/env bash
# The Debian packages, from cpack to a running weftd + weft-host: cpack builds
# weftd, weft-host, weft and weft-dev; their contents, Depends and conffiles are
# what docs/install.md says; the units pass systemd-analyze verify; the
# maintainer scripts do no harm without systemd; and the packages unpacked into a
# scratch root (never onto this machine) run a cluster job there with a plugin
# built against the packaged SDK and dropped into /var/lib/weft/plugins without a
# restart.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"
PKGS=$SCRATCH/pkgs
ROOT=$SCRATCH/root

echo "== cpack"
# Uncompressed: compressing the sanitizer build's binaries would take most of the test.
(cd "$BUILD" && cpack -G DEB -B "$PKGS" -D CPACK_DEBIAN_COMPRESSION_TYPE=none >"$SCRATCH/cpack.log" 2>&1) ||
  fail "cpack failed: $(tail -n 20 "$SCRATCH/cpack.log")"
deb() { ls "$PKGS"/"$1"_*.deb 2>/dev/null | head -n 1; }
for p in weftd weft-host weft weft-dev; do [[ -n $(deb "$p") ]] || fail "cpack made no $p package"; done

echo "== contents, Depends and conffiles are what docs/install.md lists"
# Both ways: every path the table names is in its package, every file of a package is in the table.
/usr/bin/python3 "$SOURCE/tests/install/check_package_docs.py" "$SOURCE/docs/install.md" \
  weftd="$(deb weftd)" weft-host="$(deb weft-host)" weft="$(deb weft)" weft-dev="$(deb weft-dev)" \
  >"$SCRATCH/docs-check.log" 2>&1 || fail "the packages differ from docs/install.md: $(cat "$SCRATCH/docs-check.log")"
contents() { dpkg-deb --contents "$(deb "$1")" | awk '{print $6}' | sed 's|^\./|/|; s|/$||'; }
expect_files() {  # expect_files PACKAGE PATH...: each path (a regex) is in the package
  local package=$1 list path
  list=$(contents "$package")
  shift
  for path in "$@"; do
    grep -q "^${path}$" <<<"$list" || fail "$package lacks $path; it has:
$list"
  done
}
# What the tests below and the README rely on, by name.
expect_files weft-host /usr/lib/weft/plugins/providers/fake_provider.so /var/lib/weft/plugins
expect_files weft-dev '/usr/lib.*/cmake/WeftSDK/WeftSDKConfig.cmake' '/usr/lib.*/pkgconfig/weft-plugin.pc' \
  /usr/share/doc/weft/examples/plugin-cpp/CMakeLists.txt /usr/share/doc/weft/examples/plugin-c/Makefile
# No file in two packages: they install side by side.
dupes=$(for p in weftd weft-host weft weft-dev; do
  dpkg-deb --contents "$(deb "$p")" | awk '$1 !~ /^d/ {print $6}'
done | sort | uniq -d)
[[ -z $dupes ]] || fail "files in more than one package: $dupes"
for p in weftd weft-host weft; do
  depends=$(dpkg-deb --field "$(deb "$p")" Depends)
  expect_contains "$depends" "libc6" "$p's Depends, computed from its binaries"
done
expect_contains "$(dpkg-deb --field "$(deb weftd)" Depends)" "libzmq5" "weftd's Depends"
expect_contains "$(dpkg-deb --field "$(deb weft-dev)" Depends)" "cppzmq-dev" "weft-dev's Depends"
for p in weftd weft-host; do
  dpkg-deb --control "$(deb "$p")" "$SCRATCH/control-$p"
  [[ $(cat "$SCRATCH/control-$p/conffiles") == "/etc/weft/$p.toml" ]] || fail "$p's conffiles: $(cat "$SCRATCH/control-$p/conffiles")"
  for script in postinst prerm postrm; do
    [[ -x $SCRATCH/control-$p/$script ]] || fail "$p has no executable $script"
  done
done

echo "== the packages unpacked into a scratch root"
for p in weftd weft-host weft weft-dev; do dpkg-deb --extract "$(deb "$p")" "$ROOT"; done

echo "== systemd-analyze verify on the units"
if command -v systemd-analyze >/dev/null; then
  # The packaged units, with ExecStart's programs taken from the scratch root (verify
  # checks they are executable); any warning (an unknown key, a bad value) fails.
  mkdir -p "$SCRATCH/units"
  for unit in weftd weft-host; do
    sed "s|^ExecStart=/usr/bin/|ExecStart=$ROOT/usr/bin/|" "$ROOT/lib/systemd/system/$unit.service" \
      >"$SCRATCH/units/$unit.service"
  done
  systemd-analyze verify "$SCRATCH/units/weftd.service" "$SCRATCH/units/weft-host.service" \
    >"$SCRATCH/verify.log" 2>&1 || fail "systemd-analyze verify failed: $(cat "$SCRATCH/verify.log")"
  [[ ! -s $SCRATCH/verify.log ]] || fail "systemd-analyze verify warns: $(cat "$SCRATCH/verify.log")"
else
  echo "SKIPPED: systemd-analyze is not installed (scripts/install-deps.sh installs systemd)"
fi

echo "== the maintainer scripts, in a mount namespace whose /var/lib and /run are empty"
# Without systemd (no /run/systemd/system) they only make the state directories and call
# no systemctl (the one on PATH records calls); with
# it (that directory, and a systemctl that records its calls) they enable and start
# the unit on configure, stop and disable it on remove.
mkdir -p "$SCRATCH/fakebin"
cat >"$SCRATCH/fakebin/systemctl" <<SH
#!/bin/sh
echo "\$*" >>"$SCRATCH/systemctl.calls"
SH
chmod +x "$SCRATCH/fakebin/systemctl"
unshare --mount sh -c '
  set -e
  mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run
  for p in weftd weft-host; do
    PATH=$1/fakebin:/usr/bin:/bin sh "$1/control-$p/postinst" configure
    PATH=$1/fakebin:/usr/bin:/bin sh "$1/control-$p/prerm" remove
    PATH=$1/fakebin:/usr/bin:/bin sh "$1/control-$p/postrm" remove
  done
  test -d /var/lib/weft && test -d /var/lib/weft/plugins && test -d /var/lib/weft-host
  test ! -e "$1/systemctl.calls"
  mkdir -p /run/systemd/system
  for p in weftd weft-host; do
    PATH=$1/fakebin:$PATH sh "$1/control-$p/postinst" configure
    PATH=$1/fakebin:$PATH sh "$1/control-$p/prerm" remove
    PATH=$1/fakebin:$PATH sh "$1/control-$p/postrm" remove
  done' sh "$SCRATCH" >"$SCRATCH/scripts.log" 2>&1 || fail "the maintainer scripts failed: $(cat "$SCRATCH/scripts.log")"
calls=$(cat "$SCRATCH/systemctl.calls")
for unit in weftd weft-host; do
  for call in "enable $unit.service" "restart $unit.service" "stop $unit.service" "disable $unit.service"; do
    expect_contains "$calls" "$call" "the maintainer scripts under systemd"
  done
done

echo "== weftd and weft-host from the scratch root run a job with a plugin dropped into its plugin dir"
build_examples "$ROOT/usr" "$SCRATCH/src"
DATA=$ROOT/var/lib/weft
# The packaged configurations, with the paths moved into the scratch root and
# ephemeral ports, as an operator would edit them.
start_weftd "$ROOT/usr/bin/weftd" "$DATA"
plugin_dirs=$(sed -n 's/^plugin_dirs = \[\(.*\)\]/\1/p' "$ROOT/etc/weft/weft-host.toml" | sed "s|\"/|\"$ROOT/|g")
[[ $plugin_dirs == *"$ROOT/var/lib/weft/plugins"* ]] || fail "the packaged weft-host.toml does not watch /var/lib/weft/plugins"
eval "dirs=($(tr ',' ' ' <<<"$plugin_dirs"))"
start_host "$ROOT/usr/bin/weft-host" "$PROVISIONER" "${dirs[@]}"
wait_until "weft-host to register" has_plugins "$ROOT/usr/bin/weft" fake-provider shell
host_pid=${PIDS[-1]}
run_hello_job "$ROOT/usr/bin/weft" "$ROOT/var/lib/weft/plugins"
kill -0 "$host_pid" || fail "weft-host is not the process that was started"
echo "PASS"
