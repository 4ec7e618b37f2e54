#!/bin/sh
# accelvirt tests: the scrub command of tests/data/hook-policies.  Called as
# hook-scrub.sh [--test] ADDRESS GROUP.  Appends "ARGS" to $AV_SCRUB_LOG;
# fails when the file $AV_SCRUB_FAIL exists; sleeps forever when the file
# $AV_SCRUB_HANG exists (the timeout must kill it).  When the file
# $AV_SCRUB_LOG.grab exists, it names a fake tree's /dev/vfio/GROUP that
# another process then tries to open (flock, as the fake kernel has it: a QEMU
# trying to get the group while the step runs): it writes its pid to
# $AV_SCRUB_LOG.grab.pid and keeps the group when it got it, else "busy"; and
# the step logs "fd3=FILE env=N", the file it was handed as fd 3 and
# $ACCELVIRT_SCRUB_VFIO_GROUP_FD.
[ -n "$AV_SCRUB_LOG" ] && echo "$*" >>"$AV_SCRUB_LOG"
if [ -n "$AV_SCRUB_LOG" ] && [ -s "$AV_SCRUB_LOG.grab" ]; then
    setsid /usr/bin/python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1], "r+")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    open(sys.argv[2], "w").write("busy")
    sys.exit(0)
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(120)' "$(cat "$AV_SCRUB_LOG.grab")" "$AV_SCRUB_LOG.grab.pid" </dev/null >/dev/null 2>&1 &
    i=0
    while [ ! -s "$AV_SCRUB_LOG.grab.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    echo "fd3=$(readlink /proc/self/fd/3 2>/dev/null || echo none) env=${ACCELVIRT_SCRUB_VFIO_GROUP_FD:-none}" >>"$AV_SCRUB_LOG"
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
