#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: device health (issue 17) on a private copy of the fake
# host two-socket-8gpu (tests/data/mkhosts.py gives its A100s AER files and
# a link; 0000:31:00.0 runs at x8 of x16): `accelvirt health` and its
# --json, read-only; the worker's check before it frees a device (over a
# limit: quarantined, a "warn" link: journalled and freed); failed scrubs
# counted in pool.json and reset by `accelvirt enroll`.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
AV=$ACCELVIRT
SCRUB="$AV_TEST_SRCDIR/data/hook-scrub.sh"

POL="$AV_TMP/policies"
mkdir -p "$POL"
cat >"$POL/10-health.json" <<JSON
{"profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci",
   "scrub": [{"method": "command", "argv": ["$SCRUB"], "timeout": 5}], "restore_driver": "on-release",
   "max_lease": "72h",
   "health": {"fatal_aer": 0, "correctable_aer": 10, "scrub_failures": 0, "degraded_link": "warn"}},
  {"name": "stick", "match": {"vendor": "0x03e7"}, "attach": "usb"}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

W="$AV_TMP/w"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
DEVS="$W/host/sys/bus/pci/devices"
av() {
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" AV_SCRUB_LOG="$W/scrub.log" \
    AV_SCRUB_FAIL="$W/scrub-fail" "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"
}
hook() {
    xml=$1; shift
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" \
    AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" "$ACCELVIRT_HOOK" "$@" <"$xml"
}
# mkdom FILE NAME UUID ADDRESS: a domain with the PCI function ADDRESS (managed='no').
mkdom() {
    python3 -c 'import sys
out, name, uuid, a = sys.argv[1:5]
dom, bus, sf = a.split(":"); slot, fn = sf.split(".")
hd = "<hostdev mode=\"subsystem\" type=\"pci\" managed=\"no\"><source><address domain=\"0x%s\" bus=\"0x%s\" slot=\"0x%s\" function=\"0x%s\"/></source></hostdev>" % (dom, bus, slot, fn)
open(out, "w").write("<domain type=\"kvm\"><name>%s</name><uuid>%s</uuid><memory unit=\"GiB\">4</memory><vcpu>2</vcpu><devices>%s</devices></domain>\n" % (name, uuid, hd))' "$@"
}
uuid() { printf '%08x-0000-4000-8000-%012x' "$1" "$1"; }
state_of() {
    "$AV" --state-dir "$W/state" status --no-sync --json |
        python3 -c "import json,sys; print([x['state'] for x in json.load(sys.stdin)['devices'] if x['address']==sys.argv[1] and x['kind']=='pci'][0])" "$1"
}
# wait_state ADDRESS STATE: polls the pool until ADDRESS is in STATE (20 s).
wait_state() {
    i=0
    while [ $i -lt 200 ]; do
        [ "$(state_of "$1")" = "$2" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    echo "$1 is $(state_of "$1"), not $2"
    return 1
}
# use_and_release N ADDRESS: domain vmN takes ADDRESS (prepare, start) and
# releases it (release end): dirty, the worker started.
use_and_release() {
    mkdom "$W/vm$1.xml" "vm$1" "$(uuid "$1")" "$2"
    hook "$W/vm$1.xml" "vm$1" prepare begin - >/dev/null &&
        hook "$W/vm$1.xml" "vm$1" start begin - >/dev/null &&
        hook "$W/vm$1.xml" "vm$1" release end - >/dev/null
}
# entries EVENT ADDRESS: the journal's EVENT entries about ADDRESS, one JSON list in $W/e.json.
entries() {
    python3 - "$W/state/journal.jsonl" "$1" "$2" >"$W/e.json" <<'PY'
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
print(json.dumps([e for e in es if e.get("event") == sys.argv[2] and e.get("address") == sys.argv[3]]))
PY
}
set_fatal() {   # ADDRESS COUNT: the device's aer_dev_fatal counts COUNT DLP errors
    printf 'Undefined 0\nDLP %s\nSDES 0\nTOTAL_ERR_FATAL %s\n' "$2" "$2" >"$DEVS/$1/aer_dev_fatal"
}

av status >/dev/null

# --- accelvirt health: what it shows, read-only ---
check "health shows an A100's AER counts, its link and the verdict ok" \
    eval "av health >'$W/h.txt' && grep -A5 '^0000:17:00.0 ' '$W/h.txt' >'$W/h17' &&
          grep -q '^0000:17:00.0  dsn:.*  profile a100  free\$' '$W/h17' &&
          grep -qx '  AER: 0 fatal, 0 non-fatal, 0 correctable' '$W/h17' &&
          grep -qx '  link: x16 of x16 at 16.0 of 16.0 GT/s' '$W/h17' &&
          grep -q '^  failures: 0 failed scrubs, 0 failed resets since 20' '$W/h17' &&
          grep -qx '  verdict: ok' '$W/h17'"
check "  ... the x8 link marked degraded, verdict warn (the profile's degraded_link)" \
    eval "grep -A5 '^0000:31:00.0 ' '$W/h.txt' >'$W/h31' &&
          grep -qx '  link: x8 of x16 at 16.0 of 16.0 GT/s, degraded' '$W/h31' &&
          grep -qx '  verdict: warn: a degraded link (x8 of x16 at 16.0 of 16.0 GT/s)' '$W/h31'"
check "  ... the USB stick: no PCIe health" \
    eval "grep -A1 '^1-1.2 ' '$W/h.txt' | grep -qx '  no PCIe health (usb device)'"
check "health --json: readings, failures, limits and verdicts" \
    eval "av health --json >'$W/h.json'"
check "  ... of every managed device, as the text says" json "$W/h.json" \
    "[(x['address'], x['verdict']) for x in d['devices'] if x['address'] in ('0000:17:00.0', '0000:31:00.0', '0000:4b:00.0', '1-1.2')] == [('0000:17:00.0', 'ok'), ('0000:31:00.0', 'warn'), ('0000:4b:00.0', 'ok'), ('1-1.2', 'ok')]"
check "  ... an A100's reading and limits" json "$W/h.json" \
    "[(x['reading']['aer'], x['reading']['link']['width'], x['reading']['link']['degraded'], x['limits']['fatal_aer'], x['limits']['degraded_link'], x['failures']['scrub']) for x in d['devices'] if x['address'] == '0000:4b:00.0'] == [({'correctable': 3, 'nonfatal': 0, 'fatal': 0, 'from': None}, 16, False, 0, 'warn', 0)]"
check "  ... the stick: no reading, not PCIe" json "$W/h.json" \
    "[(x['pcie'], x['reading'], x['limits']) for x in d['devices'] if x['address'] == '1-1.2'] == [(False, None, None)]"
check "health DEVICE shows that device only" \
    eval "av health 0000:31:00.0 >'$W/h1.txt' && [ \$(grep -c '^[0-9]' '$W/h1.txt') -eq 1 ] && grep -q '^0000:31:00.0 ' '$W/h1.txt'"
set_fatal 0000:4b:00.0 2
check "health changes nothing, even for a device over a limit (exit 0, the pool and journal as they were)" \
    eval "state_unchanged '$W/state' av health >'$W/h2.txt' && grep -A5 '^0000:4b:00.0 ' '$W/h2.txt' | grep -qx '  verdict: over: 2 fatal AER errors, the profile allows 0' && [ \"\$(state_of 0000:4b:00.0)\" = free ]"
check "health of a device not in the pool: one line, exit 1" \
    one_line 1 "'0000:99:00.0' is not a device of the pool" av health 0000:99:00.0
check "health with two devices: one line, exit 2" one_line 2 "at most one DEVICE" av health 0000:17:00.0 0000:31:00.0
printf 'TOTAL_ERR_COR x\n' >"$DEVS/0000:65:00.0/aer_dev_correctable"
check "an unreadable AER file: health names it and says over (the worker would quarantine)" \
    eval "av health 0000:65:00.0 >'$W/h3.txt' && grep -q \"health cannot be read: .*aer_dev_correctable' line 1 is not 'NAME COUNT'\" '$W/h3.txt' && grep -q '^  verdict: over: its health cannot be read' '$W/h3.txt'"

# --- the worker judges health just before it frees a device ---
check "a device with 2 fatal AER errors (fatal_aer 0): released, the worker quarantines it instead of freeing it" \
    eval "use_and_release 1 0000:4b:00.0 && wait_state 0000:4b:00.0 quarantined"
check "  ... with the reason" \
    eval "av quarantine list --json >'$W/q.json' && json '$W/q.json' \"[x['reason'] for x in d['devices'] if x['address'] == '0000:4b:00.0'] == ['health: 2 fatal AER errors, the profile allows 0']\""
check "  ... journalled: health (reading, verdict), then the transition, then the certificate 'quarantined'" \
    eval "entries health 0000:4b:00.0 && json '$W/e.json' \"[(e['verdict'], e['reading']['aer']['fatal'], e['findings']) for e in d] == [('over', 2, '2 fatal AER errors, the profile allows 0')]\" &&
          entries scrub-certificate 0000:4b:00.0 && json '$W/e.json' \"[e.get('result') for e in d] == ['quarantined']\""
check "  ... its scrub passed: no failed scrub counted" \
    json "$W/state/pool.json" "[x.get('failures') for x in d['devices'] if x['address'] == '0000:4b:00.0'] == [None]"
check "a device with a degraded link ('warn'): released, journalled as warn and freed" \
    eval "use_and_release 2 0000:31:00.0 && wait_state 0000:31:00.0 free && entries health 0000:31:00.0 &&
          json '$W/e.json' \"[(e['verdict'], e['reading']['link']['width'], e['reading']['link']['degraded']) for e in d] == [('warn', 8, True)]\" &&
          grep -q 'health: a degraded link' '$W/log'"
check "a device within its limits: released and freed, no health entry" \
    eval "use_and_release 3 0000:17:00.0 && wait_state 0000:17:00.0 free && entries health 0000:17:00.0 && json '$W/e.json' 'd == []'"

# --- failed scrubs are counted; enroll sets the counts to 0 ---
touch "$W/scrub-fail"
check "a failed scrub quarantines the device and is counted in pool.json" \
    eval "use_and_release 4 0000:ca:00.0 && wait_state 0000:ca:00.0 quarantined &&
          json '$W/state/pool.json' \"[(x['failures']['scrub'], x['failures']['reset']) for x in d['devices'] if x['address'] == '0000:ca:00.0'] == [(1, 0)]\""
rm -f "$W/scrub-fail"
check "  ... health shows the count over scrub_failures 0" \
    eval "av health 0000:ca:00.0 | grep -qx '  verdict: over: 1 failed scrub since enrolment, the profile allows 0'"
printf 'ROM v1' >"$DEVS/0000:ca:00.0/rom"
check "enroll sets the counts to 0 and their since to now, and says so" \
    eval "av enroll 0000:ca:00.0 >'$W/enroll.txt' && grep -qx '    failure counts set to 0 (were 1 failed scrubs, 0 of them resets)' '$W/enroll.txt' &&
          json '$W/state/pool.json' \"[(x['failures']['scrub'], x['failures']['reset'], x['failures']['since'] > x['first_seen'] - 1) for x in d['devices'] if x['address'] == '0000:ca:00.0'] == [(0, 0, True)]\" &&
          av health --json 0000:ca:00.0 >'$W/h4.json' && json '$W/h4.json' \"d['devices'][0]['failures']['scrub'] == 0\""
check "  ... journalled with the counts it dropped" \
    eval "entries enrolled 0000:ca:00.0 && json '$W/e.json' \"d[-1]['failures_reset'] == {'scrub': 1, 'reset': 0}\""

# --- pool.json's failures are loaded strictly ---
cp "$W/state/pool.json" "$W/pool.good"
for bad in '{"scrub": -1, "reset": 0, "since": 1}' '{"scrub": 1, "reset": 2, "since": 1}' '{"scrub": "1", "reset": 0, "since": 1}' '{"scrub": 1, "reset": 0}' '{"scrub": 1, "reset": 0, "since": 1, "x": 1}' '[1]'; do
    python3 - "$W/pool.good" "$W/state/pool.json" "$bad" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
[x for x in d["devices"] if x["address"] == "0000:ca:00.0"][0]["failures"] = json.loads(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
    check "a pool.json whose failures are $bad: one line naming the file and the path, exit 4" \
        one_line 4 "pool file '.*pool.json' is corrupt at .*devices/[0-9]*/failures" av health
done
cp "$W/pool.good" "$W/state/pool.json"

# --- in doubt, over (the attacker's review of issue 17): a link down or of
# unknown speed counts as degraded, an AER limit on a device without AER
# reporting cannot be checked, and a VF reads its PF's counters ---
P2="$AV_TMP/pol2"
mkdir -p "$P2"
cat >"$P2/10.json" <<'JSON'
{"profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci", "numa": "none",
   "scrub": [{"method": "none"}], "health": {"fatal_aer": 0, "nonfatal_aer": 0, "degraded_link": "quarantine", "link_speed": "check"}},
  {"name": "qat-vf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf", "numa": "none",
   "scrub": [{"method": "none"}], "health": {"fatal_aer": 0}}
]}
JSON
chmod 0755 "$P2" && chmod 0644 "$P2"/*.json
W2="$AV_TMP/w2"
mkdir -p "$W2"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W2/host"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$W2/qat"
D2="$W2/host/sys/bus/pci/devices"
av2() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W2/$1" --policy-dir "$P2" --state-dir "$W2/state-$1" "$2" $3; }
echo 0 >"$D2/0000:17:00.0/current_link_width"
echo Unknown >"$D2/0000:17:00.0/current_link_speed"
echo Unknown >"$D2/0000:4b:00.0/current_link_speed"
rm -f "$D2/0000:65:00.0"/aer_dev_*
av2 host status >/dev/null
check "health: a link down (width 0) under degraded_link quarantine is over: 'link down'" \
    eval "av2 host health 0000:17:00.0 >'$W2/h17' && grep -qx '  link: x0 of x16 at unknown of 16.0 GT/s, link down' '$W2/h17' &&
          grep -qx '  verdict: over: link down (x0 of x16 at unknown of 16.0 GT/s), the profile quarantines a degraded link' '$W2/h17'"
check "  ... a speed 'Unknown' at full width, link_speed check: over, 'speed unknown'" \
    eval "av2 host health 0000:4b:00.0 >'$W2/h4b' && grep -qx '  verdict: over: speed unknown (x16 of x16 at unknown of 16.0 GT/s), the profile quarantines a degraded link' '$W2/h4b'"
check "  ... no aer_dev_* files under AER limits: over, the limits cannot be checked" \
    eval "av2 host health 0000:65:00.0 >'$W2/h65' && grep -qx '  AER: no AER reporting' '$W2/h65' &&
          grep -qx \"  verdict: over: no AER reporting: the limits 'fatal_aer', 'nonfatal_aer' cannot be checked\" '$W2/h65'"
check "reconcile quarantines the three with the reason, and the healthy one stays free" \
    eval "av2 host reconcile >'$W2/r.out' && json '$W2/state-host/pool.json' \"sorted((x['address'], x['state'], (x['reason'] or '')[:24]) for x in d['devices'] if x['profile'] == 'a100' and x['address'] != '0000:31:00.0') == [('0000:17:00.0', 'quarantined', 'health: link down (x0 of'), ('0000:4b:00.0', 'quarantined', 'health: speed unknown (x'), ('0000:65:00.0', 'quarantined', 'health: no AER reporting'), ('0000:ca:00.0', 'free', ''), ('0000:e3:00.0', 'free', '')]\""
av2 qat status >/dev/null
check "a VF without AER of its own or its PF's under fatal_aer: over, cannot be checked" \
    eval "av2 qat health 0000:6b:00.1 | grep -qx \"  verdict: over: no AER reporting: the limit 'fatal_aer' cannot be checked\""
PF="$W2/qat/sys/bus/pci/devices/0000:6b:00.0"
printf 'RxErr 0\nTOTAL_ERR_COR 0\n' >"$PF/aer_dev_correctable"
printf 'Undefined 0\nTOTAL_ERR_NONFATAL 0\n' >"$PF/aer_dev_nonfatal"
printf 'Undefined 0\nDLP 2\nTOTAL_ERR_FATAL 2\n' >"$PF/aer_dev_fatal"
check "  ... with its PF's counters: the PF's counts, said so" \
    eval "av2 qat health 0000:6b:00.1 >'$W2/hvf' && grep -qx '  AER: 2 fatal, 0 non-fatal, 0 correctable, its PF'\"'\"'s counts 0000:6b:00.0' '$W2/hvf' &&
          grep -qx \"  verdict: over: 2 fatal AER errors (its PF 0000:6b:00.0's counts), the profile allows 0\" '$W2/hvf' &&
          av2 qat health '--json 0000:6b:00.1' >'$W2/hvf.json' && json '$W2/hvf.json' \"d['devices'][0]['reading']['aer'] == {'fatal': 2, 'nonfatal': 0, 'correctable': 0, 'from': '0000:6b:00.0'}\""

finish
