#!/usr/bin/env bash
# wait_until (lib.sh), which every install test waits with: it waits for the time it
# states, by the clock, not for a number of tries.
BUILD=$1 SOURCE=$2
source "$(dirname "$0")/lib.sh"

TRIES=$SCRATCH/tries
never() {  # never(SECONDS): fails after SECONDS, counting its tries
  echo try >>"$TRIES"
  sleep "$1"
  return 1
}
third() {  # succeeds on its third try
  echo try >>"$TRIES"
  [[ $(wc -l <"$TRIES") -ge 3 ]]
}
tries() { wc -l <"$TRIES"; }

# A condition that never comes, 1 s stated: it gives up after about ten quick tries
# (the tries once counted up to 600, a minute of them, whatever was stated).
: >"$TRIES"
if (WAIT_SECONDS=1 wait_until "a quick condition that never comes" never 0) 2>"$SCRATCH/quick.err"; then
  fail "wait_until succeeded on a condition that never came"
fi
(($(tries) < 600)) || fail "wait_until tried $(tries) times in its 1 s: it counts tries, not time"
expect_contains "$(cat "$SCRATCH/quick.err")" "gave up waiting for: a quick condition that never comes (tried for 1s)" \
  "wait_until's message"

# Slow tries (0.5 s each): still 1 s, so at most the tries that fit (a slower machine fits fewer).
: >"$TRIES"
if (WAIT_SECONDS=1 wait_until "a slow condition that never comes" never 0.5) 2>"$SCRATCH/slow.err"; then
  fail "wait_until succeeded on a slow condition that never came"
fi
(($(tries) <= 3)) || fail "wait_until made $(tries) tries of 0.5 s each in its 1 s"

# What its callers wait for: a condition that comes is waited for, and it returns at once.
: >"$TRIES"
wait_until "the third try" third
[[ $(tries) -eq 3 ]] || fail "wait_until made $(tries) tries of a condition that came on the third"
echo "PASS"
