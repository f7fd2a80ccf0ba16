#!/usr/bin/env bash
# bash completion for weft (packaging/weft.bash-completion): commands, verbs and
# flags come from the real weft's help, so they are whatever this weft offers.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"
source "$SOURCE/packaging/weft.bash-completion"
WEFT=$BUILD/bin/weft

# complete_words WORD...: what _weft offers for the last word.
complete_words() {
  COMP_WORDS=("$WEFT" "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _weft
  printf '%s\n' "${COMPREPLY[@]}" | sort
}

out=$(complete_words "")
for noun in cluster catalog job host plugin resource status events help; do
  grep -qx "$noun" <<<"$out" || fail "no '$noun' among the commands: $out"
done
[[ $(complete_words "clus") == $'cluster\nclustertemplate' ]] || fail "'clus' does not complete to cluster and clustertemplate: $(complete_words clus)"
out=$(complete_words cluster "")
for verb in create delete plan scale list get; do
  grep -qx "$verb" <<<"$out" || fail "no '$verb' among cluster's verbs: $out"
done
out=$(complete_words --tenant acme cluster create web --t)
grep -qx -- "--template" <<<"$out" || fail "cluster create's --template not offered: $out"
grep -qx -- "--tenant" <<<"$out" || fail "the global --tenant not offered: $out"
[[ $(complete_words -o "") == $'json\ntable' ]] || fail "-o does not offer table and json"
out=$(complete_words --out)
grep -qx -- "--output" <<<"$out" || fail "--output not offered: $out"
[[ $(complete_words --no) == --no-credentials ]] || fail "--no does not complete to --no-credentials: $(complete_words --no)"
out=$(complete_words status --no)
grep -qx -- "--no-credentials" <<<"$out" || fail "--no-credentials not offered after a command: $out"
echo "PASS"
