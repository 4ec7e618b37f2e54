#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: a device is scrubbed by the profile it was claimed under.
# Two profiles for boards of one chip told apart by their subsystem id (the
# narrow one first, as accelvirt-policy(5) recommends): the 80 GB board with a
# full clear (a command step that records it ran), the 40 GB board with no
# step.  While a domain holds the 80 GB card, its firmware presents the 40 GB
# board's subsystem id: a whole scan (reconcile) must not move it to the other
# profile, and its release must not end in a free card scrubbed by nothing.
# Then the same for a class-code change, and an operator's policy change with
# the card's ids unchanged, which is followed as before.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
AV=$ACCELVIRT
W="$AV_TMP/w"
POL="$W/policies"
CARD=0000:ca:00.0
mkdir -p "$W" "$POL"
cat >"$W/clear.sh" <<EOF2
#!/bin/sh
echo "80g-clear \$*" >>"$W/cleared.log"
EOF2
chmod 0755 "$W" "$W/clear.sh"
cat >"$POL/10-a100.json" <<EOF2
{"profiles": [
  {"name": "a100-80g", "match": {"vendor": "0x10de", "device": "0x20f1", "subsystem_device": "0x145f"},
   "attach": "vfio-pci", "numa": "none", "scrub": [{"method": "command", "argv": ["$W/clear.sh"], "timeout": 5}]},
  {"name": "a100-40g", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci", "numa": "none",
   "scrub": [{"method": "none"}]}
]}
EOF2
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
SYS="$W/host/sys/bus/pci/devices/$CARD"

av() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
hook() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_WORKER=/bin/true ACCELVIRT_LOG_FILE="$W/log" "$ACCELVIRT_HOOK" "$@" <"$W/dom.xml"
}
worker() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_LOG_FILE="$W/log" "$ACCELVIRT_WORKER" </dev/null >/dev/null 2>&1
}
card() { av --json status --no-sync | python3 -c "
import json, sys
d = [x for x in json.load(sys.stdin)['devices'] if x['address'] == '$CARD'][0]
print(d['state'], d['profile'], 'problem' if d.get('identity_problem') else 'clean')"; }
cat >"$W/dom.xml" <<'EOF2'
<domain type='kvm'><name>tenant</name><uuid>7e7e7e7e-0000-4000-8000-000000000001</uuid>
<memory unit='GiB'>4</memory><vcpu>2</vcpu><devices>
<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0xca' slot='0x00' function='0x0'/></source></hostdev>
</devices></domain>
EOF2

# life CHANGE: the card claimed and in use, CHANGE done to its sysfs files (as its
# firmware would), a reconcile, release, the worker; prints the card after each.
life() {
    kill_holds "$W"
    rm -rf "$W/state" "$W/cleared.log"
    printf '0x145f\n' >"$SYS/subsystem_device"
    printf '0x030200\n' >"$SYS/class"
    av status >/dev/null && hook tenant prepare begin - && hook tenant start begin - || return 1
    eval "$1"
    av reconcile >/dev/null 2>&1
    echo "after-reconcile $(card)"
    hook tenant release end - || return 1
    worker
    echo "after-worker $(card)"
}

firmware_subsystem() {
    life "printf '0x1463\\n' >'$SYS/subsystem_device'" >"$W/out" 2>&1 || { cat "$W/out"; return 1; }
    grep -q "^after-reconcile in-use a100-80g problem$" "$W/out" &&
        grep -q "^after-worker quarantined a100-80g problem$" "$W/out" || { cat "$W/out"; return 1; }
    # It was scrubbed by the profile it was claimed under, and the journal says why.
    grep -q "^80g-clear" "$W/cleared.log" || { echo "the 80 GB clear did not run"; return 1; }
    grep '"event":"identity-problem"' "$W/state/journal.jsonl" | grep -q "what its profile's match reads changed from '10de:20f1 10de:145f 030200 a1' to '10de:20f1 10de:1463 030200 a1'" ||
        { grep identity-problem "$W/state/journal.jsonl"; return 1; }
    ! grep -q '"event":"reprofiled"' "$W/state/journal.jsonl"
}
check "firmware changing an in-use card's subsystem id to the 40 GB board's: it keeps its 80 GB profile, is scrubbed by it, and ends quarantined" firmware_subsystem

firmware_class() {
    life "printf '0x030000\\n' >'$SYS/class'" >"$W/out" 2>&1 || { cat "$W/out"; return 1; }
    grep -q "^after-worker quarantined a100-80g problem$" "$W/out" || { cat "$W/out"; return 1; }
}
check "a class-code change while in use ends the same way" firmware_class

# The operator's policy change, the card's ids as they were: followed, as before.
operator_change() {
    life "sed -i 's/0x145f/0x1463/' '$POL/10-a100.json'" >"$W/out" 2>&1 || { cat "$W/out"; return 1; }
    sed -i 's/0x1463/0x145f/' "$POL/10-a100.json"
    grep -q "^after-reconcile in-use a100-40g clean$" "$W/out" && grep -q "^after-worker free a100-40g clean$" "$W/out" ||
        { cat "$W/out"; return 1; }
}
check "an operator's policy change with the card's ids unchanged is followed (reprofiled), no identity problem" operator_change

# The firmware waits: the card is scrubbed (80 GB clear) and free, then presents the
# 40 GB board's subsystem id, so that the next tenant's data would get the lighter scrub.
free_then_change() {
    life ":" >"$W/out" 2>&1 || { cat "$W/out"; return 1; }
    grep -q "^after-worker free a100-80g clean$" "$W/out" || { cat "$W/out"; return 1; }
    printf '0x1463\n' >"$SYS/subsystem_device"
    av reconcile >/dev/null 2>&1
    [ "$(card)" = "quarantined a100-80g problem" ] || { card; return 1; }
    ! grep -q '"event":"reprofiled"' "$W/state/journal.jsonl"
}
check "a free card whose subsystem id changes once it was scrubbed is quarantined, not moved to the lighter profile" free_then_change
cleared_rescan() {
    av quarantine clear "$CARD" >/dev/null 2>&1 || return 1
    av reconcile >/dev/null 2>&1
    [ "$(card)" = "free a100-40g clean" ] || { card; return 1; }
}
check "  ... once the operator clears it, the card as it is now is recorded and follows its profile" cleared_rescan
printf '0x145f\n' >"$SYS/subsystem_device"

check "the journal's chain holds" av journal verify
finish
