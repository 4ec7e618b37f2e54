#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: a scrub worker killed in the middle of a Resizable BAR
# resize ("vfio-zero" with "resize": true), on private copies of the fake
# host two-socket-8gpu whose A100 gets a resizable BAR0 (1 MiB, offering 1,
# 2 and 4 MiB) under the emulated kernel.  The worker kills itself at a
# named kill point (ACCELVIRT_TEST_KILL_AT); then `accelvirt reconcile` or
# the next worker must find the BAR sizes recorded before the resize, put
# the BAR back, journal it, and scrub the device again from the start; a
# BAR that cannot be put back quarantines the device, never frees it.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
POL="$AV_TMP/policies"
mkdir -p "$POL"
cat >"$POL/10-test.json" <<'JSON'
{"profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci", "numa": "none",
   "restore_driver": "on-release", "scrub": [{"method": "vfio-zero", "resize": true}]}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json
A=0000:17:00.0
MiB=1048576
U1=00000001-0000-4000-8000-000000000001

# world NAME: a fresh copy of the host in $AV_TMP/NAME, its A100's BAR0
# holding a tenant's bytes, and a pool in which the A100 is dirty (its
# domain released it); sets W.
world() {
    W="$AV_TMP/$1"
    mkdir -p "$W"
    cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
    d="$W/host/sys/bus/pci/devices/$A"
    head -c $MiB /dev/zero | tr '\0' '\245' >"$d/resource0"
    printf '0x00000000e0000000 0x00000000e00fffff 0x000000000014220c\n' >"$d/resource"
    for i in 1 2 3 4 5; do printf '0x0000000000000000 0x0000000000000000 0x0000000000000000\n' >>"$d/resource"; done
    echo 0000000000000007 >"$d/resource0_resize"
    av status >/dev/null &&
    python3 - "$W/state/pool.json" "$A" "$U1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for x in p["devices"]:
    if x["address"] == sys.argv[2]:
        x.update(state="dirty", state_since=1000, owner={"domain_uuid": sys.argv[3], "domain_name": "vm1",
                 "nova_instance": None, "nova_project": None, "nova_user": None})
json.dump(p, open(sys.argv[1], "w"), indent=2)
PY
}
av() { ACCELVIRT_WORKER=/bin/true "$ACCELVIRT" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
# worker [KILL-POINT]: the scrub worker of the world, killed at KILL-POINT.
worker() {
    env ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
        ACCELVIRT_WORKER=/bin/true ${1:+ACCELVIRT_TEST_KILL_AT=$1} "$ACCELVIRT_WORKER" </dev/null >/dev/null 2>&1
}
bar_size() { wc -c <"$W/host/sys/bus/pci/devices/$A/resource0"; }
bar_line() { head -n1 "$W/host/sys/bus/pci/devices/$A/resource"; }
nonzero() { tr -d '\0' <"$W/host/sys/bus/pci/devices/$A/resource0" | wc -c; }
driver() {
    l="$W/host/sys/bus/pci/devices/$A/driver"
    if [ -L "$l" ]; then basename "$(readlink "$l")"; else echo none; fi
}
records() { ls "$W/state/bar-sizes" 2>/dev/null | grep -c '\.json$'; }
# dev FIELD: the A100's FIELD in the pool.
dev() { python3 -c "import json,sys; print([x for x in json.load(open(sys.argv[1]))['devices'] if x['address']==sys.argv[2]][0].get(sys.argv[3]))" "$W/state/pool.json" "$A" "$1"; }
# events EVENT: the journal's entries of EVENT, one JSON object a line.
events() { grep "\"event\": *\"$1\"" "$W/state/journal.jsonl"; }
# json FILE EXPR: EXPR holds of the JSON object d of each line of FILE.
json_lines() { python3 -c "import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    assert eval(sys.argv[2]), l" "$1" "$2"; }

# --- killed with the BAR grown and zeroed; reconcile puts it back ---
world zeroed
check "the worker killed between zeroing the grown BAR and putting it back: SIGKILL" \
    eval "worker bar-zeroed; [ \$? -eq 137 ]"
check "  ... leaves the BAR grown (4 MiB), the device scrubbing, and the record of its size" \
    eval "[ \$(bar_size) -eq $((4 * MiB)) ] && [ \"\$(dev state)\" = scrubbing ] && [ \$(records) -eq 1 ]"
check "reconcile puts the BAR back to its recorded 1 MiB, on vfio-pci, and says so" \
    eval "av reconcile >'$W/r.out' 2>'$W/r.err' && [ \$(bar_size) -eq $MiB ] && bar_line | grep -q '^0x00000000e0000000 0x00000000e00fffff ' && [ \"\$(driver)\" = vfio-pci ] && grep -q 'note: put the BARs of $A .* back to the sizes recorded before a resize that was cut short; its scrub starts over' '$W/r.err'"
check "  ... journalled (bar-sizes-restored: BAR 0 from 4 MiB to 1 MiB), the record removed, the scrub to start over" \
    eval "events bar-sizes-restored >'$W/e' && [ \$(wc -l <'$W/e') -eq 1 ] && json_lines '$W/e' \"d['address'] == '$A' and d['by'] == 'upkeep' and d['bars'] == [{'bar': 0, 'size': $MiB, 'was': $((4 * MiB)), 'resized': True}]\" && [ \$(records) -eq 0 ] && [ \"\$(dev state)\" = scrubbing ] && grep -qx 'scrub resumed: $A .*' '$W/r.out'"
check "the next worker scrubs it whole again: free, its BAR 1 MiB and zeroed, back on nvidia, the certificate says resized and back" \
    eval "worker && [ \"\$(dev state)\" = free ] && [ \$(bar_size) -eq $MiB ] && [ \$(nonzero) -eq 0 ] && [ \"\$(driver)\" = nvidia ] && events scrub-certificate | tail -n1 >'$W/c' && json_lines '$W/c' \"d['result'] == 'free' and d['steps'][0]['resized'] == [{'bar': 0, 'from': $MiB, 'to': $((4 * MiB))}]\""
check "  ... the journal keeps its chain" "$ACCELVIRT" --state-dir "$W/state" journal verify

# --- killed unbound (no driver); the next worker puts it right by itself ---
world unbound
check "the worker killed with the device unbound from vfio-pci for the resize: on no driver, the record there" \
    eval "worker bar-unbound; [ \$? -eq 137 ] && [ \"\$(driver)\" = none ] && [ \$(records) -eq 1 ] && [ \"\$(cat '$W/host/sys/bus/pci/devices/$A/driver_override')\" = vfio-pci ]"
check "the next worker probes it back onto vfio-pci, finds the BAR at its size, and scrubs it from the start: free on nvidia" \
    eval "worker && [ \"\$(dev state)\" = free ] && [ \$(bar_size) -eq $MiB ] && [ \$(nonzero) -eq 0 ] && [ \"\$(driver)\" = nvidia ] && [ \$(records) -eq 0 ] && events bar-sizes-restored >'$W/e' && json_lines '$W/e' \"d['bars'] == [{'bar': 0, 'size': $MiB, 'was': $MiB, 'resized': False}]\""

# --- the BAR cannot be put back: quarantined, never free ---
world stuck
worker bar-grown
printf 'fail /sys/bus/pci/devices/%s/resource0_resize 5\n' "$A" >"$W/host/sys/.accelvirt-fake-kernel"
check "reconcile cannot put the grown BAR back (the kernel refuses): the device quarantined, unscrubbed, the reason says so" \
    eval "av reconcile >'$W/r.out' 2>'$W/r.err'; [ \"\$(dev state)\" = quarantined ] && dev reason | grep -q 'its BAR sizes could not be put back after a scrub that was cut short' && [ \"\$(dev unscrubbed)\" = True ] && [ \$(bar_size) -eq $((4 * MiB)) ] && grep -q 'warning: device $A .*could not be put back' '$W/r.err'"
check "  ... journalled once (bar-sizes-restore-failed), the record kept with the error" \
    eval "av reconcile >/dev/null 2>&1; events bar-sizes-restore-failed >'$W/e' && [ \$(wc -l <'$W/e') -eq 1 ] && [ \$(records) -eq 1 ] && grep -q '\"error\": *\"its BAR sizes could not' '$W/state/bar-sizes/'*.json"
check "  ... no worker frees it" eval "worker && [ \"\$(dev state)\" = quarantined ]"
check "  ... and the operator cannot clear it while its BAR sizes are not back" \
    eval "! av quarantine clear $A >/dev/null 2>'$W/c.err' && grep -q 'may still be at the sizes a scrub grew them to' '$W/c.err'"
: >"$W/host/sys/.accelvirt-fake-kernel"
check "once the kernel lets it, the next reconcile puts the BAR back (journalled), the device still quarantined" \
    eval "av reconcile >/dev/null 2>&1 && [ \$(bar_size) -eq $MiB ] && [ \$(records) -eq 0 ] && [ \$(events bar-sizes-restored | wc -l) -eq 1 ] && [ \"\$(dev state)\" = quarantined ]"
check "  ... a scrub by hand passes, and the quarantine can be cleared: free, 1 MiB, zeroed" \
    eval "av scrub $A >/dev/null 2>&1 && av quarantine clear $A >/dev/null 2>&1 && [ \"\$(dev state)\" = free ] && [ \$(bar_size) -eq $MiB ] && [ \$(nonzero) -eq 0 ]"
check "  ... the journal keeps its chain" "$ACCELVIRT" --state-dir "$W/state" journal verify

# --- another device at the address now: its BARs are never resized ---
# The scrub was cut short with the BAR grown; then the card at that address presents
# another identity (a hot swap, a rescan: it may be a host device): nothing is resized
# there, the record stays, and the device the pool has there is quarantined.
world swapped
check "swapped: the worker killed with the BAR grown leaves its record" \
    eval "worker bar-zeroed; [ \$? -eq 137 ] && [ \$(records) -eq 1 ] && [ \$(bar_size) -eq $((4 * MiB)) ]"
swapped() {
    echo 0x2231 >"$W/host/sys/bus/pci/devices/$A/device"
    av reconcile >/dev/null 2>&1
    [ "$(bar_size)" -eq $((4 * MiB)) ] || { echo "the BAR was resized: $(bar_size)"; return 1; }
    [ "$(records)" -eq 1 ] || { echo "the record is gone"; return 1; }
    [ "$(dev state)" = quarantined ] || { echo "state $(dev state)"; return 1; }
    events bar-sizes-restore-failed | grep -q "is 'dsn:10de:2231:.*now, not dsn:10de:20f1" || { events bar-sizes-restore-failed; return 1; }
}
check "  ... another device at its address: no BAR resized there, the record kept, the device quarantined" swapped

finish
