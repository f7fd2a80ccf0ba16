#!/usr/bin/env bash
# Copies preact, its hooks and htm from the npm registry into this folder, with
# their licences. The UI loads them as plain ES modules (no bundler, no CDN), and
# the gateway's CSP forbids an inline import map, so the bare "preact" and "htm"
# imports inside them are rewritten to relative paths here.
#   web/ui/vendor/update.sh        (then commit what changed)
set -euo pipefail

PREACT=10.29.8
HTM=3.1.1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cd "$WORK"
npm pack --silent "preact@$PREACT" "htm@$HTM" >/dev/null
mkdir preact htm
tar xzf "preact-$PREACT.tgz" -C preact
tar xzf "htm-$HTM.tgz" -C htm

relative() { sed -e 's#from"preact"#from"./preact.js"#g' -e 's#from"htm"#from"./htm.js"#g' "$1"; }
relative preact/package/dist/preact.module.js >"$HERE/preact.js"
relative preact/package/hooks/dist/hooks.module.js >"$HERE/hooks.js"
relative htm/package/dist/htm.module.js >"$HERE/htm.js"
cp preact/package/LICENSE "$HERE/LICENSE.preact"
cp htm/package/LICENSE "$HERE/LICENSE.htm"
cat >"$HERE/VERSIONS" <<VERSIONS
preact $PREACT (dist/preact.module.js, hooks/dist/hooks.module.js)
htm $HTM (dist/htm.module.js)
VERSIONS
if grep -l 'from"[a-z]' "$HERE"/*.js; then
  echo "update.sh: a bare import is left in the files above" >&2
  exit 1
fi
