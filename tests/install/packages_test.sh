#!/usr/bin/env bash
# The Debian packages, from cpack to a running weftd + weft-host: cpack builds
# weftd, weft-host, weft and weft-dev; their contents, Depends and conffiles are
# what docs/install.md says; the units pass systemd-analyze verify and run
# weftd and weft-web as users of their own; the maintainer scripts make those
# users, give an older root-run weftd's state to weft once, and do no harm
# without systemd; and the packages unpacked into a
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
expect_contains "$(dpkg-deb --field "$(deb weftd)" Depends)" "adduser" "weftd's Depends (its postinst makes users)"
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

echo "== weftd and weft-web run as users of their own"
unit_key() {  # unit_key UNIT KEY: the values of KEY= in the packaged UNIT.service, one a line
  sed -n "s/^$2=//p" "$ROOT/lib/systemd/system/$1.service"
}
[[ $(unit_key weftd User):$(unit_key weftd Group) == weft:weft ]] ||
  fail "weftd.service runs as '$(unit_key weftd User)':'$(unit_key weftd Group)', not weft:weft"
[[ $(unit_key weft-web User):$(unit_key weft-web Group) == weft-web:weft-web ]] ||
  fail "weft-web.service runs as '$(unit_key weft-web User)':'$(unit_key weft-web Group)', not weft-web:weft-web"
# systemd would give a StateDirectory= and all below it to weft, root's plugins/ and local-nodes/ too.
[[ -z $(unit_key weftd StateDirectory) ]] || fail "weftd.service has StateDirectory=$(unit_key weftd StateDirectory)"
grep -qx 'CapabilityBoundingSet=' "$ROOT/lib/systemd/system/weftd.service" || fail "weftd.service keeps capabilities"
[[ $(unit_key weft-web CapabilityBoundingSet) == CAP_NET_BIND_SERVICE ]] ||
  fail "weft-web.service's capabilities: '$(unit_key weft-web CapabilityBoundingSet)'"

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
# and /etc on an overlay: the users the scripts make are made there, not on this machine.
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
  S=$1 R=$2
  weftd_pid="" web_pid=""
  trap "kill -KILL \$weftd_pid \$web_pid 2>/dev/null || true" EXIT
  mkdir "$S/etc-rw"
  mount -t tmpfs tmpfs "$S/etc-rw"
  mkdir "$S/etc-rw/upper" "$S/etc-rw/work"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$S/etc-rw/upper,workdir=$S/etc-rw/work" /etc
  # useradd resets lastlog and faillog entries in /var/log.
  for d in /var/lib /var/log /run /etc/systemd/system /lib/systemd/system; do mount -t tmpfs tmpfs $d; done
  # A machine without Weft: no users of its, no /etc/weft.
  for u in weft-web weft; do
    if getent passwd $u >/dev/null; then userdel $u; fi
    if getent group $u >/dev/null; then groupdel $u; fi
  done
  rm -rf /etc/weft
  # A container'"'"'s policy-rc.d (exit 101: start nothing) would stop deb-systemd-invoke before systemctl.
  if [ -e /usr/sbin/policy-rc.d ]; then mount --bind /bin/true /usr/sbin/policy-rc.d; fi
  cp "$2"/lib/systemd/system/*.service /lib/systemd/system/
  run() {  # run PACKAGE SCRIPT ARG...
    p=$1 script=$2
    shift 2
    # dpkg'"'"'s PATH for maintainer scripts, the recording systemctl first.
    DPKG_MAINTSCRIPT_PACKAGE=$p PATH=$S/fakebin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      sh "$S/control-$p/$script" "$@"
  }
  wants=/etc/systemd/system/multi-user.target.wants
  # Without systemd (a container, a chroot): the state directories are made and
  # weftd and weft-host enabled, weft-web (it needs the operator'"'"'s configuration)
  # not, and no systemctl is asked to start anything.
  run weftd postinst configure
  run weft-host postinst configure
  test -d /var/lib/weft; test -d /var/lib/weft/plugins; test -d /var/lib/weft-host
  test -L $wants/weftd.service; test -L $wants/weft-host.service; test ! -e $wants/weft-web.service
  test ! -e "$S/systemctl.calls"
  # weftd'"'"'s postinst made the system users weft and weft-web (docs/install.md,
  # "Who runs as whom") and gave /var/lib/weft to group weft, root keeping it.
  getent passwd weft | awk -F: '"'"'$3 < 1000 && $6 == "/var/lib/weft" && $7 ~ /nologin$/ {ok = 1} END {exit !ok}'"'"'
  getent passwd weft-web | awk -F: '"'"'$3 < 1000 && $7 ~ /nologin$/ {ok = 1} END {exit !ok}'"'"'
  test "$(id -gn weft)" = weft; test "$(id -gn weft-web)" = weft-web
  test "$(stat -c "%U:%G %a" /var/lib/weft)" = "root:weft 1775"
  test "$(stat -c %U /var/lib/weft/plugins)" = root
  # A data directory moved elsewhere (server.data_dir), made by a root-run weftd:
  # its state is given to weft too, and the postinst says that weft cannot write
  # the directory itself, which is the operator'"'"'s to give.
  mkdir -p /var/lib/weft-moved/keys /etc/weft
  touch /var/lib/weft-moved/weft.db /var/lib/weft-moved/keys/server.json
  printf "[server]\ndata_dir = \"/var/lib/weft-moved\"   # moved\n" >/etc/weft/weftd.toml
  run weftd postinst configure 2>"$S/moved.out"
  grep -qx "weftd runs as the user weft from now on: gave it what an earlier weftd made as root in /var/lib/weft-moved: weft.db keys" \
    "$S/moved.out"
  grep -qx "weftd runs as the user weft from now on and cannot write its data directory /var/lib/weft-moved: chown weft:weft /var/lib/weft-moved" \
    "$S/moved.out"
  test -z "$(find /var/lib/weft-moved -mindepth 1 \( ! -user weft -o ! -group weft \) -print)"
  rm -r /var/lib/weft-moved /etc/weft/weftd.toml
  # An older package'"'"'s weftd ran as root and was killed: its store with -wal
  # and -shm, its keys, credentials, resources, lock and endpoints.json, root'"'"'s.
  state="weft.db weft.db-wal weft.db-shm weftd.lock endpoints.json ports.json keys resources credentials"
  printf "[server]\ndata_dir = \"/var/lib/weft\"\n[endpoints]\napi = \"tcp://127.0.0.1:*\"\nprovisioner = \"tcp://127.0.0.1:*\"\nevents = \"tcp://127.0.0.1:*\"\n[security]\ncurve = true\n" \
    >/run/weftd-test.toml
  started() {  # started PID: waits for weftd PID to write endpoints.json
    i=0
    until [ -s /var/lib/weft/endpoints.json ] && grep -q "\"pid\": *$1\b" /var/lib/weft/endpoints.json; do
      kill -0 "$1"
      i=$((i + 1))
      test $i -lt 1200
      sleep 0.1
    done
  }
  "$R/usr/bin/weftd" --config /run/weftd-test.toml >"$S/weftd-root.log" 2>&1 &
  weftd_pid=$!
  started $weftd_pid
  # The operator set weft-web up then, as root: its gateway credential (0600, as
  # weft makes it), a TLS key (0600) and certificate, its configuration (0600).
  mkdir -p "$S/home" /etc/weft/web
  as_root_weft() { env -u WEFT_SERVER -u WEFT_CREDENTIALS HOME="$S/home" "$R/usr/bin/weft" "$@"; }
  as_root_weft gateway credentials web1 -f /etc/weft/gateway.json >/dev/null
  (umask 077; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout /etc/weft/web/key.pem \
    -out /etc/weft/web/cert.pem -days 2 -subj /CN=localhost 2>/dev/null)
  chmod 0644 /etc/weft/web/cert.pem
  printf "[server]\nlisten = \"127.0.0.1:0\"\nstatic_dir = \"%s\"\naddress_file = \"/run/weft-web-test/address.json\"\n[tls]\ncert = \"/etc/weft/web/cert.pem\"\nkey = \"/etc/weft/web/key.pem\"\n[weftd]\ncredentials = \"/etc/weft/gateway.json\"\n" \
    "$R/usr/share/weft/web" >/etc/weft/weft-web.toml
  web_files="/etc/weft/weft-web.toml /etc/weft/web/key.pem /etc/weft/gateway.json"
  chmod 0600 $web_files
  kill -KILL $weftd_pid
  wait $weftd_pid || true
  weftd_pid=""
  mkdir -p /var/lib/weft/local-nodes/n0
  as_web() { setpriv --reuid=weft-web --regid=weft-web --init-groups "$@"; }
  if as_web cat /etc/weft/web/key.pem; then exit 1; fi
  for f in $state; do test "$(stat -c %U /var/lib/weft/$f)" = root; done
  # Under systemd: an upgrade keeps the operator'"'"'s choices. weftd disabled stays
  # disabled and stopped; weft-web enabled is restarted on the new program.
  mkdir -p /run/systemd/system
  /usr/bin/systemctl --root=/ disable weftd.service
  /usr/bin/systemctl --root=/ enable weft-web.service
  run weftd postinst configure 0.1.0 2>"$S/upgrade.out"
  run weft-host postinst configure 0.1.0
  test ! -e $wants/weftd.service; test -L $wants/weft-web.service; test -L $wants/weft-host.service
  # The upgrade stopped weftd (the stop above) and gave its state to weft, saying so;
  # root'"'"'s plugins/ and local-nodes/ stay root'"'"'s.
  cat "$S/upgrade.out"
  grep -qx "weftd runs as the user weft from now on: gave it what an earlier weftd made as root in /var/lib/weft: $state" \
    "$S/upgrade.out"
  for f in $state; do test -z "$(find /var/lib/weft/$f \( ! -user weft -o ! -group weft \) -print)"; done
  test -z "$(find /var/lib/weft/plugins /var/lib/weft/local-nodes ! -user root -print)"
  test "$(stat -c "%U:%G %a" /var/lib/weft)" = "root:weft 1775"
  # weft-web, restarted by the upgrade as weft-web, can read its files.
  grep -qx "weft-web runs as the user weft-web from now on: gave it what it could not read: $web_files" "$S/upgrade.out"
  for f in $web_files; do
    test "$(stat -L -c "%U:%G %a" $f)" = "weft-web:root 600"
    as_web cat $f >/dev/null
  done
  test "$(stat -c "%U:%G %a" /etc/weft/web/cert.pem)" = "root:root 644"
  # weftd as weft (as the unit runs it) opens that store, and root'"'"'s weft finds the
  # superadmin credential weftd keeps there, without being told: weftd tells only a
  # superadmin its data directory.
  chmod 0711 "$S"  # for weft and weft-web to reach the unpacked programs
  setpriv --reuid=weft --regid=weft --init-groups "$R/usr/bin/weftd" --config /run/weftd-test.toml \
    >"$S/weftd-weft.log" 2>&1 &
  weftd_pid=$!
  started $weftd_pid
  test "$(as_root_weft -o json status | jq -r .data_dir)" = /var/lib/weft
  # weft-web as weft-web (as its unit runs it) starts with the files the upgrade
  # gave it, and serves over TLS.
  mkdir /run/weft-web-test
  chown weft-web /run/weft-web-test
  setpriv --reuid=weft-web --regid=weft-web --init-groups "$R/usr/bin/weft-web" --config /etc/weft/weft-web.toml \
    >"$S/weft-web.log" 2>&1 &
  web_pid=$!
  i=0
  until [ -s /run/weft-web-test/address.json ]; do
    kill -0 $web_pid
    i=$((i + 1))
    test $i -lt 1200
    sleep 0.1
  done
  test "$(curl -sk -o /dev/null -w "%{http_code}" "$(jq -r .url /run/weft-web-test/address.json)/")" = 200
  kill -TERM $web_pid
  wait $web_pid
  web_pid=""
  kill -TERM $weftd_pid
  wait $weftd_pid
  weftd_pid=""
  # What weftd made or rewrote, with its umask 077, is weft'"'"'s alone.
  test -z "$(find /var/lib/weft -mindepth 1 ! -path "/var/lib/weft/plugins*" ! -path "/var/lib/weft/local-nodes*" \
    \( ! -user weft -o -perm /077 \) ! -name endpoints.json -print)"
  # Once: a later configure finds nothing of root'"'"'s to give, and says nothing.
  run weftd postinst configure 0.1.0 2>"$S/upgrade.out"
  test -z "$(grep -v "^+ " "$S/upgrade.out")"  # (set -x traces run'"'"'s own lines)
  echo "-- upgraded" >>"$S/systemctl.calls"
  # Data the programs made, then remove: the units stop and are masked, the data stays.
  touch /var/lib/weft/weft.db /var/lib/weft/plugins/mine.so
  mkdir -p /var/lib/weft/keys /var/lib/weft/local-nodes/n1 /var/lib/weft-host/h1
  for p in weftd weft-host; do run $p prerm remove; run $p postrm remove; done
  test "$(readlink /etc/systemd/system/weft-web.service)" = /dev/null
  test -e /var/lib/weft/weft.db; test -e /var/lib/weft/plugins/mine.so; test -d /var/lib/weft-host/h1
  echo "-- removed" >>"$S/systemctl.calls"
  # Purge: the units are forgotten (links and masks) and each package'"'"'s state is
  # deleted; the local provider'"'"'s nodes are left.
  run weftd postrm purge
  test ! -e /var/lib/weft/weft.db; test ! -e /var/lib/weft/keys; test -e /var/lib/weft/plugins/mine.so
  run weft-host postrm purge
  test ! -e /var/lib/weft/plugins; test ! -e /var/lib/weft-host; test -d /var/lib/weft/local-nodes/n1
  test -z "$(find /etc/systemd/system -name "weft*")"
  # The users stay, as Debian leaves system users of purged packages.
  getent passwd weft
  getent passwd weft-web
  # A new install under systemd starts what it enabled.
  run weft-host postinst configure
' sh "$SCRATCH" "$ROOT" >"$SCRATCH/scripts.log" 2>&1 || fail "the maintainer scripts failed: $(cat "$SCRATCH/scripts.log")"
calls=$(cat "$SCRATCH/systemctl.calls")
expected="stop weftd.service
--quiet --system restart weft-web.service
--quiet --system restart weft-host.service
--quiet --system restart weft-web.service
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
