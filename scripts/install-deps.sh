#!/usr/bin/env bash
# Installs every Debian 12 package Weft needs to build, test and run its demo.
# This is the one list of dependencies; CMakeLists.txt finds what it names.
# Installs only what is missing, runs `apt-get update` at most once, and never asks
# questions. Run as root (or with sudo available) on Debian 12.
set -euo pipefail

PACKAGES=(
  build-essential      # g++ 12, make
  cmake                # 3.25
  pkg-config
  libboost-dev         # Boost.DLL (header-only) 1.74
  libboost-filesystem-dev
  libboost-system-dev
  liblua5.4-dev        # Lua plugins
  libssh2-1-dev        # SSH to nodes
  libssl-dev           # libcrypto (EVP SHA-256): digests of resources on weftd and weft-host
  libtomlplusplus-dev  # weftd.toml, weft-host.toml
  libsqlite3-dev       # the store
  sqlite3              # for looking into a store by hand
  libzmq3-dev          # ZeroMQ
  libsodium-dev        # secretbox: sensitive fields and keys encrypted at rest
  libjemalloc-dev      # weftd's allocator (less CPU per task than glibc's malloc)
  cppzmq-dev
  catch2               # Catch2 v2
  nlohmann-json3-dev
  openssh-server       # real SSH nodes in tests and the demo
  ansible              # weft-bench fanout compares a Weft job with Ansible ad-hoc on the same nodes
  # What the demo cluster (examples/catalog, template web) runs on its nodes. Its
  # INSTALL actions would apt-get them on first use; here they keep the demo and
  # tests/localnodes off the network.
  nginx                # the web servers
  haproxy              # the load balancer in front of them
  redis-server         # the key-value store (brings redis-cli)
  curl                 # the monitoring collector's and the demo's HTTP checks
  jq                   # the demo reads weft's -o json output
  clang                # libFuzzer targets (tests/fuzz, scripts/fuzz.sh); gcc has no libFuzzer
  libclang-rt-14-dev   # libFuzzer and the sanitizer runtimes for clang 14
  # Packaging and the install tests (tests/install): Debian packages, their units, the Python client.
  dpkg-dev             # dpkg-shlibdeps: the Depends of the packages CPack makes
  systemd              # systemd-analyze verify on weftd.service and weft-host.service
  adduser              # weftd's postinst makes its users with it (packages_test runs it)
  python3-zmq          # examples/python/weft_client.py (CurveZMQ)
  # The web UI's browser tests (tests/web) drive it headless; Node.js 20 and npm come with the machine
  # (Debian's npm would pull in its Node.js 18, older than playwright-core supports).
  chromium
  # The aws provider: EC2's Query API over HTTPS, its XML replies. (Its tests use
  # moto_server from pip, `pip install 'moto[server]'`; without it they are skipped.)
  # The openstack provider uses libcurl too; its tests, a fake OpenStack, need only python3.
  libcurl4-openssl-dev
  libpugixml-dev
  # weft-web: TLS is libssl (libssl-dev above); its tests make a certificate with the openssl command.
  openssl
  prometheus           # promtool check metrics and a real Prometheus in tests/metrics
  # The PostgreSQL store: libpq for weftd, and a server that each test starts in a
  # temporary directory of its own (initdb, pg_ctl), never the system's cluster.
  libpq-dev
  postgresql-15
  puppet               # the puppet automator's `puppet apply` on the nodes, and its tests
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run this script as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
