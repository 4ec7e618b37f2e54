#!/bin/sh
# accelvirt tests: the scrub command of tests/data/hook-policies.  Called as
# hook-scrub.sh [--test] ADDRESS GROUP.  Appends "ARGS" to $AV_SCRUB_LOG;
# fails when the file $AV_SCRUB_FAIL exists; sleeps forever when the file
# $AV_SCRUB_HANG exists (the timeout must kill it).  When the file
# $AV_SCRUB_LOG.grab exists, it names a fake tree's /dev/vfio/GROUP that a
# process left behind keeps open (flock, as the fake kernel has it: a QEMU
# that got the group while accelvirt's hold was down for this step); its pid
# goes to $AV_SCRUB_LOG.grab.pid.
[ -n "$AV_SCRUB_LOG" ] && echo "$*" >>"$AV_SCRUB_LOG"
if [ -n "$AV_SCRUB_LOG" ] && [ -s "$AV_SCRUB_LOG.grab" ]; then
    setsid /usr/bin/python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1], "r+")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(120)' "$(cat "$AV_SCRUB_LOG.grab")" "$AV_SCRUB_LOG.grab.pid" </dev/null >/dev/null 2>&1 &
    i=0
    while [ ! -s "$AV_SCRUB_LOG.grab.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
fi
if [ -n "$AV_SCRUB_HANG" ] && [ -e "$AV_SCRUB_HANG" ]; then
    sleep 1000
fi
if [ -n "$AV_SCRUB_FAIL" ] && [ -e "$AV_SCRUB_FAIL" ]; then
    echo "simulated failure scrubbing $*"
    exit 3
fi
echo "scrubbed $*"
exit 0
