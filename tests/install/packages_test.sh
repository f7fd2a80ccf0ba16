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
# weft-web serves every file of /usr/share/weft/web to anyone: only what browsers load is there.
stray=$(contents weftd | grep -E '^/usr/share/weft/web/.*(README\.md|\.sh)$' || true)
[[ -z $stray ]] || fail "weftd's web UI folder has files for developers, which weft-web would serve: $stray"
# No file in two packages: they install side by side.
dupes=$(for p in weftd weft-host weft weft-dev; do
  dpkg-deb --contents "$(deb "$p")" | awk '$1 !~ /^d/ {print $6}'
done | sort | uniq -d)
[[ -z $dupes ]] || fail "files in more than one package: $dupes"
# weft-host.toml gets the host's one-time enroll_token: root's alone.
mode=$(dpkg-deb --contents "$(deb weft-host)" | awk '$6 == "./etc/weft/weft-host.toml" {print $1}')
[[ $mode == -rw------- ]] || fail "/etc/weft/weft-host.toml is $mode in the package, not -rw-------"
# Each package says what it is in its synopsis (what apt and dpkg -l show).
synopses=$(for p in weftd weft-host weft weft-dev; do dpkg-deb --field "$(deb "$p")" Description | head -n 1; done)
[[ -z $(sort <<<"$synopses" | uniq -d) ]] || fail "packages share a synopsis: $synopses"
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

echo "== the version names the commit built, so the packages of a later commit upgrade an earlier one's"
project=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
version=$(dpkg-deb --field "$(deb weftd)" Version)
for p in weft-host weft weft-dev; do
  [[ $(dpkg-deb --field "$(deb "$p")" Version) == "$version" ]] || fail "$p's version is not weftd's $version"
done
if git -C "$SOURCE" rev-parse --git-dir >/dev/null 2>&1; then
  [[ $version =~ ^${project//./\\.}\+git[0-9]{8}\.[0-9]{6}\.([0-9a-f]{7,})$ ]] ||
    fail "version $version is not $project+git<commit time>.<hash>"
  git -C "$SOURCE" cat-file -e "${BASH_REMATCH[1]}^{commit}" || fail "version $version names no commit of $SOURCE"
  dpkg --compare-versions "$version" gt "$project" || fail "version $version does not upgrade $project"
else
  [[ $version == "$project" ]] || fail "outside a git checkout the version is $version, not $project"
fi

echo "== the packages unpacked into a scratch root"
for p in weftd weft-host weft weft-dev; do dpkg-deb --extract "$(deb "$p")" "$ROOT"; done

echo "== systemd-analyze verify on the units"
if command -v systemd-analyze >/dev/null; then
  # The packaged units, with ExecStart's programs taken from the scratch root (verify
  # checks they are executable); any warning (an unknown key, a bad value) fails.
  mkdir -p "$SCRATCH/units"
  for unit in weftd weft-host weft-web; do
    sed "s|^ExecStart=/usr/bin/|ExecStart=$ROOT/usr/bin/|" "$ROOT/lib/systemd/system/$unit.service" \
      >"$SCRATCH/units/$unit.service"
  done
  systemd-analyze verify "$SCRATCH/units/weftd.service" "$SCRATCH/units/weft-host.service" "$SCRATCH/units/weft-web.service" \
    >"$SCRATCH/verify.log" 2>&1 || fail "systemd-analyze verify failed: $(cat "$SCRATCH/verify.log")"
  [[ ! -s $SCRATCH/verify.log ]] || fail "systemd-analyze verify warns: $(cat "$SCRATCH/verify.log")"
else
  echo "SKIPPED: systemd-analyze is not installed (scripts/install-deps.sh installs systemd)"
fi

echo "== the maintainer scripts, as dpkg runs them, in a mount namespace with empty /var/lib, /run and unit folders"
# The systemctl on PATH records what the scripts ask of a running systemd and
# answers that nothing runs; what works on unit files alone (enable links,
# is-enabled) it hands to the real systemctl. deb-systemd-helper keeps its
# state under /var/lib/systemd, so what it enabled and masked goes with the namespace.
mkdir -p "$SCRATCH/fakebin"
cat >"$SCRATCH/fakebin/systemctl" <<SH
#!/bin/sh
case "\$*" in
  *--root=*) exec /usr/bin/systemctl "\$@" ;;
  *is-enabled*) exec /usr/bin/systemctl --root=/ "\$@" ;;
  *is-active*) exit 3 ;;
esac
echo "\$*" >>"$SCRATCH/systemctl.calls"
SH
chmod +x "$SCRATCH/fakebin/systemctl"
unshare --mount sh -c '
  set -ex
  S=$1
  for d in /var/lib /run /etc/systemd/system /lib/systemd/system; do mount -t tmpfs tmpfs $d; done
  # A container'"'"'s policy-rc.d (exit 101: start nothing) would stop deb-systemd-invoke before systemctl.
  if [ -e /usr/sbin/policy-rc.d ]; then mount --bind /bin/true /usr/sbin/policy-rc.d; fi
  cp "$2"/lib/systemd/system/*.service /lib/systemd/system/
  run() {  # run PACKAGE SCRIPT ARG...
    p=$1 script=$2
    shift 2
    DPKG_MAINTSCRIPT_PACKAGE=$p PATH=$S/fakebin:/usr/bin:/bin sh "$S/control-$p/$script" "$@"
  }
  wants=/etc/systemd/system/multi-user.target.wants
  # Without systemd (a container, a chroot): the state directories are made and
  # weftd and weft-host enabled, weft-web (it needs the operator'"'"'s configuration)
  # not, and no systemctl is asked to start anything.
  run weftd postinst configure
  run weft-host postinst configure
  test -d /var/lib/weft && test -d /var/lib/weft/plugins && test -d /var/lib/weft-host
  test -L $wants/weftd.service && test -L $wants/weft-host.service && test ! -e $wants/weft-web.service
  test ! -e "$S/systemctl.calls"
  # Under systemd: an upgrade keeps the operator'"'"'s choices. weftd disabled stays
  # disabled and stopped; weft-web enabled is restarted on the new program.
  mkdir -p /run/systemd/system
  /usr/bin/systemctl --root=/ disable weftd.service
  /usr/bin/systemctl --root=/ enable weft-web.service
  run weftd postinst configure 0.1.0
  run weft-host postinst configure 0.1.0
  test ! -e $wants/weftd.service && test -L $wants/weft-web.service && test -L $wants/weft-host.service
  echo "-- upgraded" >>"$S/systemctl.calls"
  # Data the programs made, then remove: the units stop and are masked, the data stays.
  touch /var/lib/weft/weft.db /var/lib/weft/plugins/mine.so
  mkdir -p /var/lib/weft/keys /var/lib/weft/local-nodes/n1 /var/lib/weft-host/h1
  for p in weftd weft-host; do run $p prerm remove; run $p postrm remove; done
  test "$(readlink /etc/systemd/system/weft-web.service)" = /dev/null
  test -e /var/lib/weft/weft.db && test -e /var/lib/weft/plugins/mine.so && test -d /var/lib/weft-host/h1
  echo "-- removed" >>"$S/systemctl.calls"
  # Purge: the units are forgotten (links and masks) and each package'"'"'s state is
  # deleted; the local provider'"'"'s nodes are left.
  run weftd postrm purge
  test ! -e /var/lib/weft/weft.db && test ! -e /var/lib/weft/keys && test -e /var/lib/weft/plugins/mine.so
  run weft-host postrm purge
  test ! -e /var/lib/weft/plugins && test ! -e /var/lib/weft-host && test -d /var/lib/weft/local-nodes/n1
  test -z "$(find /etc/systemd/system -name "weft*")"
  # A new install under systemd starts what it enabled.
  run weft-host postinst configure
' sh "$SCRATCH" "$ROOT" >"$SCRATCH/scripts.log" 2>&1 || fail "the maintainer scripts failed: $(cat "$SCRATCH/scripts.log")"
calls=$(cat "$SCRATCH/systemctl.calls")
expected="--quiet --system restart weft-web.service
--quiet --system restart weft-host.service
-- upgraded
stop weftd.service weft-web.service
stop weft-host.service
-- removed
--quiet --system start weft-host.service"
[[ $(grep -v daemon-reload <<<"$calls") == "$expected" ]] ||
  fail "the maintainer scripts asked systemd for:
$calls
expected (daemon-reloads aside):
$expected"

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
