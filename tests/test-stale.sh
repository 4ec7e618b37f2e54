#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt stale` (issue 17) on a copy of a fake host,
# with libvirt's test driver (test:///ABSOLUTE/PATH.xml) as the libvirtd:
# its domains run, are shut off, paused or crashed as the node file says
# (<test:runstate>, a virDomainState number, in the driver's namespace
# http://libvirt.org/schemas/domain/test/1.0: libvirt's
# src/test/test_driver.c).  libvirt's pid files are faked under the root
# (run/libvirt/qemu/NAME.pid) for the domains whose QEMU may run.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
H="$AV_TMP/host"
POL="$AV_TMP/policies"
STATE="$AV_TMP/state"
NODE="$AV_TMP/node.xml"
RUN=11111111-1111-4111-8111-111111111111
OFF=22222222-2222-4222-8222-222222222222
PAUSED=33333333-3333-4333-8333-333333333333
CRASHED=44444444-4444-4444-8444-444444444444
RUN2=55555555-5555-4555-8555-555555555555
OFF2=66666666-6666-4666-8666-666666666666
GONE=77777777-7777-4777-8777-777777777777

cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$H"
mkdir -p "$H/run/libvirt/qemu"
for d in run paused run2 off2; do echo 1 >"$H/run/libvirt/qemu/$d.pid"; done
# The shipped policies, the RTX A6000's profile with a lease of 2 hours.
mkdir -p "$POL" && cp "$AV_TEST_SRCDIR"/../policies/*.json "$POL"/
python3 - "$POL/nvidia-datacenter.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for prof in p["profiles"]:
    if prof["name"] == "gpu-rtx-a6000":
        prof["max_lease"] = "2h"
json.dump(p, open(sys.argv[1], "w"), indent=2)
PY
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

# The worker records that it was started, and does nothing else: what it
# was asked to scrub stays dirty.
fake_worker

av() {
    "$AV" --root "$H" --policy-dir "$POL" --state-dir "$STATE" --connect "test://$NODE" "$@"
}

# domain NAME UUID [RUNSTATE]: a domain of the test driver.
domain() {
    echo "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'><name>$1</name>"
    echo "<uuid>$2</uuid><memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices/>"
    if [ -n "$3" ]; then echo "<test:runstate>$3</test:runstate>"; fi
    echo "</domain>"
}
{
    echo "<node>"
    domain run $RUN
    domain off $OFF 5
    domain paused $PAUSED 3
    domain crashed $CRASHED 6
    domain run2 $RUN2
    domain off2 $OFF2 5
    echo "</node>"
} >"$NODE"

# The pool: 17 in use by a running domain (not stale); 31 by a shut off
# one (3h 12m), 65 by a crashed one, ca by a domain libvirt does not know
# (the three QEMUs gone); 4b by a paused one; 98 (lease 2h) by a running
# one for 5h; b1 by a shut off domain whose pid file is still there, for
# 30 minutes; e3 claimed by the shut off domain, the claim expired 2h ago.
setup_pool() {
    rm -rf "$STATE" "$AV_TMP/worker-ran"
    av status >/dev/null &&
        pool_set 0000:17:00.0 in-use $RUN run 10800 &&
        pool_set 0000:31:00.0 in-use $OFF off 11520 &&
        pool_set 0000:65:00.0 in-use $CRASHED crashed 10800 &&
        pool_set 0000:ca:00.0 in-use $GONE gone 10800 &&
        pool_set 0000:4b:00.0 in-use $PAUSED paused 10800 &&
        pool_set 0000:98:00.0 in-use $RUN2 run2 18000 &&
        pool_set 0000:b1:00.0 in-use $OFF2 off2 1800 &&
        pool_set 0000:e3:00.0 claimed $OFF off 18000 7200
}
check "the fake pool is set up" setup_pool

# --- bad input: one line, a non-zero status, nothing changed ---
check "stale takes no arguments" refused 2 "stale takes no arguments" av stale extra
check "an unknown option of stale is a usage error" refused 2 "Unknown option" av stale --frobnicate
for bad in 0 2x -3h 1.5h "" 99999d h "2 h"; do
    check "--older-than '$bad' is refused in one line" refused 2 "invalid --older-than '$bad'" \
        av stale --release --older-than "$bad"
done
check "stale with no libvirtd there fails, naming the URI" \
    refused 1 "cannot connect to libvirt at 'qemu:///system?socket=/nonexistent/accelvirt-sock'" \
    av stale --release --connect 'qemu:///system?socket=/nonexistent/accelvirt-sock'

# --- the report: read-only ---
report() {
    before=$(fingerprint)
    av stale >"$AV_TMP/report" 2>"$AV_TMP/report.err" || { cat "$AV_TMP/report.err"; return 1; }
    [ "$(fingerprint)" = "$before" ] || { echo "the report changed the pool or the journal"; return 1; }
    r="$AV_TMP/report"
    [ ! -s "$AV_TMP/report.err" ] && [ ! -e "$AV_TMP/worker-ran" ] && [ "$(wc -l <"$r")" -eq 7 ] &&
        grep -q "^stale: .* (0000:31:00.0, profile gpu-passthrough) held by domain 'off' ($OFF): shut off, the device in use for 3h 12m; run 'accelvirt stale --release' or 'accelvirt release off'\$" "$r" &&
        grep -q "^stale: .* (0000:65:00.0, .*) held by domain 'crashed' ($CRASHED): crashed, the device in use for 3h 0m; run 'accelvirt stale --release'" "$r" &&
        grep -q "^stale: .* (0000:ca:00.0, .*) held by domain 'gone' ($GONE): libvirt does not know the domain, in use for 3h 0m; run 'accelvirt stale --release'" "$r" &&
        grep -q "^stale: .* (0000:4b:00.0, .*) held by domain 'paused' ($PAUSED): paused, the device in use for 3h 0m; the domain still holds it: when its work is done, 'virsh destroy paused'" "$r" &&
        grep -q "^stale: .* (0000:98:00.0, profile gpu-rtx-a6000) held by domain 'run2' ($RUN2): running, the device in use for 5h 0m, past the max_lease of 2h 0m of profile 'gpu-rtx-a6000'; the domain still holds it: .*'virsh destroy run2'" "$r" &&
        grep -q "^stale: .* (0000:b1:00.0, .*) held by domain 'off2' ($OFF2): shut off, the device in use for 30m;" "$r" &&
        grep -q "^stale: .* (0000:e3:00.0, .*) held by domain 'off' ($OFF): claimed, the claim expired 2h 0m ago; run 'accelvirt stale --release' (or 'accelvirt reconcile') to free it" "$r" &&
        ! grep -q "0000:17:00.0" "$r" || { cat "$r" "$AV_TMP/report.err"; return 1; }
}
check "stale lists each finding in one line, not the running domain's device, and changes nothing" report

av stale --json >"$AV_TMP/report.json" 2>"$AV_TMP/report.err"
report_json() {
    json "$AV_TMP/report.json" "$1" || { cat "$AV_TMP/report.json" "$AV_TMP/report.err"; return 1; }
}
check "stale --json: the same findings, with their kinds and libvirt's states" report_json \
    "not d['release'] and d['older_than_s'] is None and d['domains'] == 6 and sorted((f['address'], f['kind'], f['domain_name'], f['domain_state'], f['state'], f['action']) for f in d['findings']) == [('0000:31:00.0', 'shut-off', 'off', 'shut off', 'in-use', 'none'), ('0000:4b:00.0', 'paused', 'paused', 'paused', 'in-use', 'none'), ('0000:65:00.0', 'crashed', 'crashed', 'crashed', 'in-use', 'none'), ('0000:98:00.0', 'past-lease', 'run2', 'running', 'in-use', 'none'), ('0000:b1:00.0', 'shut-off', 'off2', 'shut off', 'in-use', 'none'), ('0000:ca:00.0', 'unknown-domain', 'gone', None, 'in-use', 'none'), ('0000:e3:00.0', 'claim-expired', 'off', 'shut off', 'claimed', 'none')]"
check "stale --json: how long (from state_since, the lease's end, the claim's expiry), the lease" report_json \
    "{f['address']: (f['for_s'] // 60, f['max_lease_s']) for f in d['findings']} == {'0000:31:00.0': (192, None), '0000:4b:00.0': (180, None), '0000:65:00.0': (180, None), '0000:98:00.0': (180, 7200), '0000:b1:00.0': (30, 7200), '0000:ca:00.0': (180, None), '0000:e3:00.0': (120, None)}"

check "--older-than 1h leaves out what lasted 30 minutes" \
    eval "av stale --older-than 1h >'$AV_TMP/o1' && [ \$(wc -l <'$AV_TMP/o1') -eq 6 ] && ! grep -q 0000:b1:00.0 '$AV_TMP/o1'"
check "--older-than 11400 (seconds) keeps only the domain shut off for 3h 12m (the lease is 3h past)" \
    eval "av stale --older-than 11400 --json >'$AV_TMP/o2' && json '$AV_TMP/o2' \"d['older_than_s'] == 11400 and [f['address'] for f in d['findings']] == ['0000:31:00.0']\""
check "--older-than 7d finds nothing, and says so" \
    eval "av stale --older-than 7d >'$AV_TMP/o3' && test \"\$(cat '$AV_TMP/o3')\" = 'nothing stale (6 domains known to libvirt)'"

# --- --release ---
check "stale --release --older-than 1h exits 0" eval "av stale --release --older-than 1h >'$AV_TMP/rel' 2>'$AV_TMP/rel.err'"
release_out() {
    r="$AV_TMP/rel"
    [ ! -s "$AV_TMP/rel.err" ] && [ "$(wc -l <"$r")" -eq 6 ] &&
        grep -q "^released: .* (0000:31:00.0, .*) held by domain 'off' ($OFF): shut off, .*; released: dirty, the worker scrubs it\$" "$r" &&
        grep -q "^released: .* (0000:65:00.0, .*'crashed'.*released: dirty, the worker scrubs it\$" "$r" &&
        grep -q "^released: .* (0000:ca:00.0, .*'gone'.*released: dirty, the worker scrubs it\$" "$r" &&
        grep -q "^freed: .* (0000:e3:00.0, .*claim expired.*freed by the claim's expiry" "$r" &&
        grep -q "^stale: .* (0000:4b:00.0, .*'paused'.*virsh destroy paused" "$r" &&
        grep -q "^stale: .* (0000:98:00.0, .*'run2'.*virsh destroy run2" "$r" || { cat "$r" "$AV_TMP/rel.err"; return 1; }
}
check "--release says what it released, freed and left, one line each" release_out
check "the shut off, crashed and unknown domains' devices are dirty, never free" \
    eval "test \"\$(state_of 0000:31:00.0; state_of 0000:65:00.0; state_of 0000:ca:00.0)\" = 'dirty off None
dirty crashed None
dirty gone None'"
check "the expired claim is free" eval "test \"\$(state_of 0000:e3:00.0)\" = 'free None the claim expired'"
check "the paused, the past-lease, the running and the filtered-out devices stay in use" \
    eval "test \"\$(state_of 0000:4b:00.0; state_of 0000:98:00.0; state_of 0000:17:00.0; state_of 0000:b1:00.0)\" = 'in-use paused None
in-use run2 None
in-use run None
in-use off2 None'"
check "the worker was started for the dirty devices" test -e "$AV_TMP/worker-ran"
journal_check() {
    python3 - "$STATE/journal.jsonl" <<'PY'
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
rel = sorted(e.get("address") for e in es if e.get("to") == "dirty")
by = {e.get("released_by") for e in es if e.get("to") == "dirty"}
exp = [e.get("address") for e in es if e.get("event") == "claim-expired"]
if rel != ["0000:31:00.0", "0000:65:00.0", "0000:ca:00.0"] or len(by) != 1 or \
        not by.pop().startswith("stale (operator ") or exp != ["0000:e3:00.0"]:
    print(rel, by, exp)
    sys.exit(1)
PY
}
check "the journal records the three releases by stale, with the operator, and the claim's expiry" journal_check

# The shut off domain whose pid file is still there: kept, and why.
check "--release keeps the device of a shut off domain whose QEMU may still run, saying why" \
    eval "av stale --release --json >'$AV_TMP/rel2.json' && json '$AV_TMP/rel2.json' \"[(f['address'], f['action']) for f in d['findings'] if f['kind'] == 'shut-off'] == [('0000:b1:00.0', 'kept')] and 'its QEMU may still run' in [f for f in d['findings'] if f['kind'] == 'shut-off'][0]['advice']\""
check "a second --release changes nothing and starts no worker" \
    eval "before=\$(fingerprint); rm -f '$AV_TMP/worker-ran'; av stale --release >/dev/null 2>&1 && test \"\$(fingerprint)\" = \"\$before\" && test ! -e '$AV_TMP/worker-ran'"

finish
