#!/bin/sh
# accelvirt tests: enroll, scrub by hand, quarantine list/clear, and the
# scrub methods "reset" and "rom-check" on private copies of the fake hosts.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TMP/policies"
mkdir -p "$POL"
cat >"$POL/10-test.json" <<'JSON'
{"profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci",
   "scrub": [{"method": "reset"}, {"method": "rom-check"}], "restore_driver": "on-release"},
  {"name": "qat-vf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf",
   "scrub": [{"method": "reset", "methods": ["bus", "flr"]}]}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

W="$AV_TMP/w"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
D="$W/host/sys/bus/pci/devices/0000:17:00.0"
av() { "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
dev_state() { av status --no-sync --json | python3 -c "import json,sys; print([x['state'] for x in json.load(sys.stdin)['devices'] if x['address']==sys.argv[1]][0])" "$1"; }
one_line() {
    st=$1 pat=$2; shift 2
    expect_exit "$st" "$@" || return 1
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -q "^accelvirt: .*$pat" "$AV_TMP/err" || { echo "no '$pat' in:"; cat "$AV_TMP/err"; return 1; }
}
av status >/dev/null

# --- rom-check of a device never enrolled ---
check "scrub of a device never enrolled fails and quarantines it" \
    eval "! av scrub 0000:17:00.0 --json >'$W/s0.json' && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "  ... the report says to enroll it" json "$W/s0.json" \
    "d['result'] == 'quarantined' and \"run 'accelvirt enroll 0000:17:00.0'\" in d['reason'] and d['steps'][0]['ok'] and d['steps'][0]['reset_method'] == 'flr' and d['steps'][0]['via'] == 'vfio'"
check "  ... reset through VFIO (on vfio-pci), reset_method given back its list" \
    eval "grep -qx 'VFIO_DEVICE_RESET 0000:17:00.0' '$W/host/sys/.accelvirt-fake-kernel.log' && [ \"\$(cat '$D/reset_method')\" = 'flr bus' ]"
check "  ... and the device was bound to vfio-pci for it, and stays there" \
    eval "[ \"\$(basename \$(readlink '$D/driver'))\" = vfio-pci ]"
av quarantine list --json >"$W/q.json"
check "quarantine list shows it with its reason and since" json "$W/q.json" \
    "[(x['address'], 'not enrolled' in x['reason'], x['since'].endswith('Z')) for x in d['devices']] == [('0000:17:00.0', True, True)]"
check "enroll of a quarantined device is refused with one line" one_line 1 "is quarantined: enroll a device only when it is free" av enroll 0000:17:00.0
check "quarantine clear gives it back, journalled with the operator" \
    eval "SUDO_USER=alice av quarantine clear 0000:17:00.0 >/dev/null && [ \"\$(dev_state 0000:17:00.0)\" = free ] && grep '\"event\": *\"cleared\"' '$W/state/journal.jsonl' | grep -q '\"operator\": *\"alice\"'"
check "quarantine clear of a free device is refused with one line" one_line 1 "not quarantined" av quarantine clear 0000:17:00.0

# --- enroll, then a ROM that changes ---
printf 'ROM image v1' >"$D/rom"
H1=$(printf 'ROM image v1' | sha256sum | cut -d' ' -f1)
check "enroll records the ROM's SHA-256, journalled" \
    eval "av enroll 0000:17:00.0 --json >'$W/e.json' && grep '\"event\": *\"enrolled\"' '$W/state/journal.jsonl' | grep -q '$H1'"
check "  ... shown by status --json" \
    eval "av status --json | python3 -c \"import json,sys; assert [x['rom_sha256'] for x in json.load(sys.stdin)['devices'] if x['address']=='0000:17:00.0'] == ['$H1']\""
check "scrub by hand of the enrolled device passes: free" \
    eval "av scrub 0000:17:00.0 --json >'$W/s1.json' && [ \"\$(dev_state 0000:17:00.0)\" = free ]"
check "  ... its report names the hash" json "$W/s1.json" "d['ok'] and d['steps'][1]['sha256'] == '$H1'"
check "  ... and the journal has its certificate" \
    eval "tail -n1 '$W/state/journal.jsonl' | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['event']=='scrub-certificate' and e['result']=='free' and e['scrubbed_by']=='operator' and [s['method'] for s in e['steps']]==['reset','rom-check'] and e['prev'] and e['identity'].startswith('dsn:') and e['address']=='0000:17:00.0' and e['profile']=='a100' and e['bytes_zeroed']==0 and e['reason'] is None\""
D31="$W/host/sys/bus/pci/devices/0000:31:00.0"
check "a device on its host driver (nvidia) is bound to vfio-pci for the scrub and given back" \
    eval "av enroll 0000:31:00.0 >/dev/null && av scrub 0000:31:00.0 >/dev/null && [ \"\$(basename \$(readlink '$D31/driver'))\" = nvidia ] && grep -qx 'VFIO_DEVICE_RESET 0000:31:00.0' '$W/host/sys/.accelvirt-fake-kernel.log' && tail -n1 '$W/state/journal.jsonl' | grep -q '\"rebound_from\": *\"nvidia\"'"
printf 'ROM image EVIL' >"$D/rom"
check "a changed ROM fails the scrub and quarantines the device, naming both hashes" \
    eval "! av scrub 0000:17:00.0 >'$W/s2.txt' 2>&1 && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ] && grep -q 'changed since enrollment (enrolled $H1, now ' '$W/s2.txt'"
check "scrub of a quarantined device re-runs the steps and leaves it quarantined" \
    eval "! av scrub 0000:17:00.0 >/dev/null 2>&1 && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "enroll --all enrolls the free devices, 'none' for those without a ROM" \
    eval "av enroll --all --json >'$W/all.json'"
check "  ... the 5 free A100s enrolled as 'none', the quarantined one skipped" json "$W/all.json" \
    "len(d['enrolled']) == 5 and all(x['rom_sha256'] == 'none' for x in d['enrolled']) and [x['address'] for x in d['skipped']] == ['0000:17:00.0']"
check "scrub of an enrolled device without a ROM passes" eval "av scrub 0000:31:00.0 >/dev/null"
check "enroll without devices nor --all is a usage error" one_line 2 "needs devices or --all" av enroll
check "scrub of an unknown device says where to look" one_line 1 "accelvirt status" av scrub 0000:99:00.0
check "the journal's chain is intact" av journal verify

# --- the reset ladder: bus resets that would hit a device in use are refused ---
Q="$AV_TMP/q"
mkdir -p "$Q"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$Q/host"
qv() { "$AV" --root "$Q/host" --policy-dir "$POL" --state-dir "$Q/state" "$@"; }
qv status >/dev/null
VF=$(qv status --json | python3 -c "import json,sys; print([x['address'] for x in json.load(sys.stdin)['devices'] if x['profile']=='qat-vf'][0])")
echo "flr bus" >"$Q/host/sys/bus/pci/devices/$VF/reset_method"
check "a QAT VF: the bus reset is refused (its PF, on a host driver, shares the bus), flr does it" \
    eval "qv scrub '$VF' --json >'$Q/r.json'"
check "  ... the report names the PF and the method that worked" json "$Q/r.json" \
    "d['steps'][0]['reset_method'] == 'flr' and 'refused' in d['steps'][0]['attempts'][0]['error'] and '0000:6b:00.0' in d['steps'][0]['attempts'][0]['error']"
rm -f "$Q/host/sys/bus/pci/devices/$VF/reset_method" "$Q/host/sys/bus/pci/devices/$VF/reset"
echo "fail VFIO_DEVICE_RESET:* 25" >"$Q/host/sys/.accelvirt-fake-kernel"
check "a device with no sysfs reset and no VFIO reset fails clearly and is quarantined" \
    eval "! qv scrub '$VF' >'$Q/n.txt' 2>&1 && grep -q \"no reset method worked for $VF: default: the device has no sysfs 'reset'\" '$Q/n.txt'"
rm -f "$Q/host/sys/.accelvirt-fake-kernel"

finish
