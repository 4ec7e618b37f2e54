#!/bin/sh
# accelvirt tests: the scrub command of tests/data/hook-policies.  Called as
# hook-scrub.sh [--test] ADDRESS GROUP.  Appends "ARGS" to $AV_SCRUB_LOG;
# fails when the file $AV_SCRUB_FAIL exists; sleeps forever when the file
# $AV_SCRUB_HANG exists (the timeout must kill it).
[ -n "$AV_SCRUB_LOG" ] && echo "$*" >>"$AV_SCRUB_LOG"
if [ -n "$AV_SCRUB_HANG" ] && [ -e "$AV_SCRUB_HANG" ]; then
    sleep 1000
fi
if [ -n "$AV_SCRUB_FAIL" ] && [ -e "$AV_SCRUB_FAIL" ]; then
    echo "simulated failure scrubbing $*"
    exit 3
fi
echo "scrubbed $*"
exit 0
