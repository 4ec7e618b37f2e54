# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: TAP helpers for the shell tests (sourced).
#
#   check NAME CMD... run CMD; "ok" when it exits 0, else "not ok" with its output
#   one_line ST PAT CMD...  CMD exits ST with one "accelvirt: ...PAT" line on stderr
#   state_unchanged DIR CMD... CMD succeeds, the state dir DIR as it was
#   finish            print the plan (TAP allows it last); fail when any test failed

: "${ACCELVIRT:?ACCELVIRT is not set: run the tests with make check}"
: "${AV_TEST_SRCDIR:?AV_TEST_SRCDIR is not set: run the tests with make check}"
: "${AV_TEST_HOSTS:?AV_TEST_HOSTS is not set: run the tests with make check}"

av_n=0
av_failed=0
AV_TMP=$(mktemp -d "${TMPDIR:-/tmp}/accelvirt-test.XXXXXX")
# kill_holds [DIR]: stops every accelvirt holder (av-hold.h) recorded in a
# holds/ directory under DIR (default: all of this test's files), checking
# that the pid is still a holder first, and any holder whose held file (its
# fd 3) lies under DIR without a record (a test that removed or rewrote its
# state): no test leaves one running.
kill_holds() {
    d=${1:-$AV_TMP}
    for rec in $(find "$d" -path '*/holds/*.json' 2>/dev/null); do
        pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$rec" | head -1)
        [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = accelvirt-hold ] && kill "$pid" 2>/dev/null
    done
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = accelvirt-hold ] || continue
        case "$(readlink "$p/fd/3" 2>/dev/null)" in "$d"/*) kill "${p#/proc/}" 2>/dev/null ;; esac
    done
    return 0
}
trap 'kill_holds; rm -rf "$AV_TMP"' EXIT

check() {
    name=$1; shift
    av_n=$((av_n + 1))
    if out=$("$@" 2>&1); then
        echo "ok $av_n - $name"
    else
        echo "not ok $av_n - $name"
        printf '%s\n' "$out" | sed 's/^/# /'
        av_failed=$((av_failed + 1))
    fi
}

finish() {
    echo "1..$av_n"
    [ "$av_failed" -eq 0 ]
}

# hook_policies DIR: the hook's test policies (tests/data/hook-policies) in
# DIR, @SCRUB@ replaced by the path of tests/data/hook-scrub.sh; writable by
# nobody but their owner, as the hook demands of policies that name commands.
hook_policies() {
    mkdir -p "$1" || return 1
    for f in "$AV_TEST_SRCDIR"/data/hook-policies/*.json; do
        sed "s|@SCRUB@|$AV_TEST_SRCDIR/data/hook-scrub.sh|g" "$f" >"$1/$(basename "$f")" || return 1
    done
    chmod 0755 "$1" && chmod 0644 "$1"/*.json
}

# boot_id ROOT ID: the fake host ROOT gets /proc/sys/kernel/random/boot_id ID,
# as every Linux host has one: the hook then trusts a pool reconciled with
# the whole host in this boot for the devices it does not read (issue 12).
boot_id() {
    mkdir -p "$1/proc/sys/kernel/random" && echo "$2" >"$1/proc/sys/kernel/random/boot_id"
}

# expect_exit STATUS CMD...: CMD must exit with STATUS.
expect_exit() {
    want=$1; shift
    "$@" >"$AV_TMP/out" 2>"$AV_TMP/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "exit status $got, expected $want: $*"
        cat "$AV_TMP/out" "$AV_TMP/err"
        return 1
    fi
}

# golden NAME FILE: FILE must equal tests/data/expected/NAME byte for byte;
# AV_TEST_REGENERATE=1 rewrites the expected file instead (read the diff).
golden() {
    exp="$AV_TEST_SRCDIR/data/expected/$1"
    if [ "${AV_TEST_REGENERATE:-0}" = 1 ]; then
        mkdir -p "$(dirname "$exp")"
        cp "$2" "$exp"
        return 0
    fi
    if [ ! -f "$exp" ]; then
        echo "missing $exp; run with AV_TEST_REGENERATE=1 and read the result"
        return 1
    fi
    diff -u "$exp" "$2"
}

# mask_names FILE: replaces the pci.ids names in a `list --json` output by
# "<pci.ids>", so that golden files do not depend on the pci.ids version
# (tests/test-pci.c checks the names themselves).
mask_names() {
    python3 - "$1" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
for dev in d.get("pci", []):
    for k in ("vendor_name", "device_name"):
        if dev.get(k) is not None:
            dev[k] = "<pci.ids>"
open(p, "w").write(json.dumps(d, indent=2) + "\n")
PY
}

# json FILE PYTHON-EXPR: evaluates EXPR with `d` bound to the parsed FILE;
# fails (printing EXPR) when it is false.
json() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("false: " + sys.argv[2])
    sys.exit(1)
PY
}

# one_line STATUS PATTERN CMD...: CMD exits STATUS with one line on stderr
# that begins "accelvirt:" and holds PATTERN (a grep pattern); its stdout
# and stderr are left in $AV_TMP/out and $AV_TMP/err.
one_line() {
    st=$1 pat=$2; shift 2
    expect_exit "$st" "$@" || return 1
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -q "^accelvirt: .*$pat" "$AV_TMP/err" || { echo "no '$pat' in:"; cat "$AV_TMP/err"; return 1; }
}

# state_snapshot DIR: the state dir DIR as a comparison sees it: the
# library's files, the journal, the pool (less each device's last_seen,
# which every scan renews).
state_snapshot() {
    (cd "$1" && find bitstreams -type f 2>/dev/null | sort | xargs -r sha256sum; sha256sum journal.jsonl &&
        python3 -c "
import json; d = json.load(open('pool.json'))
for x in d['devices']: x.pop('last_seen', None)
print(json.dumps(d, sort_keys=True))")
}

# state_unchanged DIR CMD...: CMD succeeds and leaves the state dir DIR as
# it was (state_snapshot).
state_unchanged() {
    sd=$1; shift
    state_snapshot "$sd" >"$AV_TMP/snap0" || return 1
    "$@" || return 1
    state_snapshot "$sd" >"$AV_TMP/snap1" && diff -u "$AV_TMP/snap0" "$AV_TMP/snap1"
}

# av_novfs ROOT PF: the VFs of the PF at address PF in the fake host ROOT are
# gone, as after a reboot (sriov_numvfs 0): their devices, driver links and
# IOMMU groups removed.
av_novfs() {
    python3 - "$1/sys" "$2" <<'PY'
import os, shutil, sys
sysd, pf = sys.argv[1:3]
pfdir = os.path.realpath(os.path.join(sysd, "bus/pci/devices", pf))
for n in os.listdir(pfdir):
    if not n.startswith("virtfn"):
        continue
    vf = os.path.realpath(os.path.join(pfdir, n))
    a = os.path.basename(vf)
    drv = os.path.join(vf, "driver")
    if os.path.islink(drv):
        os.unlink(os.path.join(os.path.realpath(drv), a))
    shutil.rmtree(os.path.realpath(os.path.join(vf, "iommu_group")))
    os.unlink(os.path.join(sysd, "bus/pci/devices", a))
    os.unlink(os.path.join(pfdir, n))
    shutil.rmtree(vf)
open(os.path.join(pfdir, "sriov_numvfs"), "w").write("0\n")
PY
}

# hold_pool_lock STATE-DIR: another process holds the pool's lock of
# STATE-DIR (flock(1), exclusive) until let_go_pool_lock; returns once it
# holds it.
hold_pool_lock() {
    rm -f "$AV_TMP/pool-lock-held"
    flock -o "$1/pool.lock" sh -c "touch '$AV_TMP/pool-lock-held'; exec sleep 60" &
    LOCK_PID=$!
    i=0; while [ ! -e "$AV_TMP/pool-lock-held" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}

let_go_pool_lock() {
    pkill -P "$LOCK_PID" sleep 2>/dev/null; kill "$LOCK_PID" 2>/dev/null; wait "$LOCK_PID" 2>/dev/null
}

# fake_worker: $ACCELVIRT_WORKER becomes a worker that only records that it
# was started ($AV_TMP/worker-ran): what it is asked to scrub stays dirty.
fake_worker() {
    printf '#!/bin/sh\ntouch "%s/worker-ran"\n' "$AV_TMP" >"$AV_TMP/worker" && chmod +x "$AV_TMP/worker" || return 1
    ACCELVIRT_WORKER="$AV_TMP/worker"
    export ACCELVIRT_WORKER
}

# worker_ran: the fake worker was started (it runs detached: up to 10 s).
worker_ran() {
    for _ in $(seq 100); do [ -e "$AV_TMP/worker-ran" ] && return 0; sleep 0.1; done
    echo "the worker was not started"; return 1
}

# The pool helpers below act on the state dir $STATE of the test.
#
# pool_set ADDRESS STATE UUID NAME [AGE-S [CLAIM-EXPIRED-S-AGO]]: the device
# at ADDRESS as an earlier accelvirt left it: in STATE since AGE-S seconds
# (default 60) for the domain UUID NAME, its claim expired
# CLAIM-EXPIRED-S-AGO seconds ago when given.
pool_set() {
    python3 - "$STATE/pool.json" "$@" <<'PY'
import json, sys, time
path, address, state, uuid, name = sys.argv[1:6]
age = int(sys.argv[6]) if len(sys.argv) > 6 else 60
now = int(time.time())
p = json.load(open(path))
for d in p["devices"]:
    if d["address"] == address:
        d["state"] = state
        d["state_since"] = now - age
        d["owner"] = {"domain_uuid": uuid, "domain_name": name, "nova_instance": None,
                      "nova_project": None, "nova_user": None}
        if len(sys.argv) > 7:
            d["claim_expires"] = now - int(sys.argv[7])
json.dump(p, open(path, "w"), indent=2)
PY
}

# state_of ADDRESS: "STATE OWNER-NAME REASON" of a device of the pool.
state_of() {
    python3 - "$STATE/pool.json" "$1" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1]))["devices"]:
    if d["address"] == sys.argv[2]:
        print(d["state"], (d["owner"] or {}).get("domain_name"), d.get("reason"))
PY
}

# fingerprint: the devices of the pool (identity, state, owner, reason,
# claim expiry: a scan renews their last_seen) and the journal, as one
# checksum, to tell that nothing changed.
fingerprint() {
    python3 - "$STATE/pool.json" <<'PY' | cat - "$STATE/journal.jsonl" | cksum
import json, sys
for d in json.load(open(sys.argv[1]))["devices"]:
    print(d["identity"], d["state"], json.dumps(d["owner"]), d.get("reason"), d.get("claim_expires"))
PY
}

# refused STATUS PATTERN CMD...: one_line, and the pool and the journal of
# $STATE as they were (fingerprint).
refused() {
    before=$(fingerprint)
    one_line "$@" || return 1
    [ "$(fingerprint)" = "$before" ] || { echo "the pool or the journal changed"; return 1; }
}
