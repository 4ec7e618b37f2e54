#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: enroll (re-enrollment after a firmware update included),
# scrub by hand, quarantine list/clear (the drivers given back, a failing
# restore), and the scrub methods "reset" and "rom-check" on private copies
# of the fake hosts.
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
# driver [ROOT] ADDRESS: the driver ADDRESS is bound to under ROOT ($W/host), or "none".
driver() {
    if [ $# -eq 2 ]; then r=$1; shift; else r="$W/host"; fi
    l="$r/sys/bus/pci/devices/$1/driver"
    if [ -L "$l" ]; then basename "$(readlink "$l")"; else echo none; fi
}
# last_entry PYTHON-EXPR: EXPR holds for the journal's last entry `e`.
last_entry() { tail -n1 "$W/state/journal.jsonl" | python3 -c "import json,sys; e=json.loads(sys.stdin.read()); assert $1, e"; }
# same_pool A B: the pool files A and B hold the same devices, but for the
# time of the last scan (commands that scan the host record it).
same_pool() {
    python3 - "$1" "$2" <<'PY2'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b):
    for dev in d["devices"]:
        dev.pop("last_seen", None)
if a != b:
    print("the pools differ:", sys.argv[1], sys.argv[2])
    sys.exit(1)
PY2
}
# unchanged CMD...: CMD leaves the pool (same_pool) and the journal as they were.
unchanged() {
    cp "$W/state/pool.json" "$AV_TMP/p0" && cp "$W/state/journal.jsonl" "$AV_TMP/j0" || return 1
    "$@" || return 1
    same_pool "$W/state/pool.json" "$AV_TMP/p0" && cmp "$W/state/journal.jsonl" "$AV_TMP/j0"
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

# --- quarantine clear gives the device back as the worker would ---
printf 'ROM image v1' >"$D/rom"
H1=$(printf 'ROM image v1' | sha256sum | cut -d' ' -f1)
echo "fail /sys/bus/pci/drivers/nvidia/bind 5" >"$W/host/sys/.accelvirt-fake-kernel"
cp "$W/state/pool.json" "$W/p-before-clear"
check "quarantine clear whose restore fails: one line, still quarantined, the pool unchanged" \
    eval "one_line 1 \"cannot clear the quarantine of device 0000:17:00.0 .*restoring the driver 'nvidia' of 0000:17:00.0 failed: .*it stays quarantined\" av quarantine clear 0000:17:00.0 && same_pool '$W/state/pool.json' '$W/p-before-clear' && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "  ... journalled as clear-failed with the error and the operator" \
    last_entry "e['event'] == 'clear-failed' and 'nvidia' in e['error'] and e['driver'] == 'nvidia' and e['restore_driver'] == 'on-release' and e['operator'].startswith('uid ') and 'not enrolled' in e['quarantined_for']"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "enroll of the quarantined device (what its reason says to do) records the ROM's SHA-256" \
    eval "SUDO_USER=bob av enroll 0000:17:00.0 >'$W/e0.txt' && grep -q '^enrolled 0000:17:00.0  $H1 ' '$W/e0.txt' && grep -q 'still quarantined' '$W/e0.txt'"
check "  ... it stays quarantined, never claimable meanwhile" eval "[ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "  ... journalled with its state, no previous hash and the operator" \
    last_entry "e['event'] == 'enrolled' and e['rom_sha256'] == '$H1' and e['previous'] is None and e['state'] == 'quarantined' and e['operator'] == 'bob'"
check "quarantine clear gives it back to its driver (nvidia) after the failed try, and frees it" \
    eval "SUDO_USER=alice av quarantine clear 0000:17:00.0 >'$W/c0.txt' && [ \"\$(dev_state 0000:17:00.0)\" = free ] && [ \"\$(driver 0000:17:00.0)\" = nvidia ] && grep -q '^cleared 0000:17:00.0 (dsn:.*): free, given back to nvidia, by alice\$' '$W/c0.txt'"
check "  ... driver_override cleared" eval "[ \"\$(cat '$D/driver_override')\" = '(null)' ]"
check "  ... journalled as cleared with the operator, the reason and the driver" \
    eval "grep '\"event\": *\"cleared\"' '$W/state/journal.jsonl' | tail -n1 | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['operator']=='alice' and e['driver']=='nvidia' and e['companions']==[] and 'not enrolled' in e['quarantined_for'] and e['from']=='quarantined' and e['to']=='free', e\""
check "quarantine clear of a free device is refused with one line, nothing changed" \
    unchanged one_line 1 "0000:17:00.0 (dsn:.*) is free, not quarantined: nothing to clear" av quarantine clear 0000:17:00.0
check "quarantine clear of an unknown device says where to look, nothing changed" \
    unchanged one_line 1 "'0000:99:00.0' is not a device of the pool; 'accelvirt status' lists them" av quarantine clear 0000:99:00.0
# A GPU hot-removed since the last reconcile: a command naming an unknown device must
# not save the reconcile it would run (the GPU turning missing), nor journal it.
gone_gpu() {
    av status >/dev/null || return 1
    mv "$W/host/sys/bus/pci/devices/0000:e3:00.0" "$AV_TMP/e3" || return 1
    unchanged one_line 1 "'0000:99:00.0' is not a device of the pool" av "$@" 0000:99:00.0
    st=$?
    mv "$AV_TMP/e3" "$W/host/sys/bus/pci/devices/0000:e3:00.0"
    return $st
}
check "quarantine clear of an unknown device while a GPU is hot-removed: refused, the pool and journal unchanged" \
    gone_gpu quarantine clear
check "enroll of an unknown device likewise" gone_gpu enroll
check "scrub of an unknown device likewise" gone_gpu scrub
check "quarantine clear without a device is a usage error" unchanged one_line 2 "takes 'list' or 'clear DEVICE'" av quarantine clear
check "quarantine with an unknown subcommand is a usage error" unchanged one_line 2 "takes 'list' or 'clear DEVICE'" av quarantine frob 0000:17:00.0

# --- enroll, then a ROM that changes ---
check "enroll of a device enrolled with the same hash changes nothing" \
    unchanged eval "av enroll 0000:17:00.0 >'$W/e1.txt' && grep -q '^skipped  0000:17:00.0  free (this hash is enrolled already)' '$W/e1.txt'"
check "  ... shown by status --json" \
    eval "av status --json | python3 -c \"import json,sys; assert [x['rom_sha256'] for x in json.load(sys.stdin)['devices'] if x['address']=='0000:17:00.0'] == ['$H1']\""
check "scrub by hand of the enrolled device passes: free" \
    eval "av scrub 0000:17:00.0 --json >'$W/s1.json' && [ \"\$(dev_state 0000:17:00.0)\" = free ]"
check "  ... its report names the hash" json "$W/s1.json" "d['ok'] and d['steps'][1]['sha256'] == '$H1'"
check "  ... and its coverage: no step cleared memory" json "$W/s1.json" "d['coverage']['cleared'] == 0 and d['coverage']['verified'] == 'none' and d['coverage']['memory'] is None"
check "  ... and the journal has its certificate" \
    eval "tail -n1 '$W/state/journal.jsonl' | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['event']=='scrub-certificate' and e['result']=='free' and e['scrubbed_by']=='operator' and [s['method'] for s in e['steps']]==['reset','rom-check'] and e['prev'] and e['identity'].startswith('dsn:') and e['address']=='0000:17:00.0' and e['profile']=='a100' and e['bytes_zeroed']==0 and e['reason'] is None\""
check "  ... whose coverage says no step cleared memory (reset and rom-check clear none)" \
    last_entry "e['coverage']['cleared'] == 0 and e['coverage']['memory'] is None and e['coverage']['verified'] == 'none' and e['coverage']['step'] is None and e['coverage']['text'] == 'cleared 0 bytes of device memory of unknown size (no step measured or reported the memory it cleared)'"
check "  ... status --json shows the device's last scrub and its coverage" \
    eval "av status --no-sync --json | python3 -c \"import json,sys; d=[x for x in json.load(sys.stdin)['devices'] if x['address']=='0000:17:00.0'][0]['last_scrub']; assert d['result']=='free' and d['time'] > 0 and d['coverage']['verified']=='none' and d['coverage']['fraction'] is None, d\""
check "  ... status prints it under the device" \
    eval "av status --no-sync | grep -A3 '^0000:17:00.0' | grep -q '^    last scrub: .*, free: cleared 0 bytes of device memory of unknown size'"
check "journal show DEVICE prints its certificate with the result and the coverage" \
    eval "av journal show 0000:17:00.0 >'$W/js.txt' && grep -q '^ *[0-9]*  [0-9T:Z-]*  scrub-certificate *0000:17:00.0  dsn:' '$W/js.txt' && grep -q '^        free$' '$W/js.txt' && grep -q '^        coverage: cleared 0 bytes of device memory of unknown size' '$W/js.txt'"
check "journal show --json --event scrub-certificate --last 1: the last certificate only" \
    eval "av journal show --json --event scrub-certificate --last 1 | python3 -c \"import json,sys; d=json.load(sys.stdin); assert len(d)==1 and d[0]['event']=='scrub-certificate' and d[0]['address']=='0000:17:00.0' and 'coverage' in d[0], d\""
check "journal show of a device never journalled says so" \
    eval "av journal show 0000:99:00.0 | grep -qx 'No journal entry of 0000:99:00.0.'"
check "journal verify --last is a usage error" unchanged one_line 2 "'--event' and '--last' are options of 'journal show'" av journal verify --last 2
D31="$W/host/sys/bus/pci/devices/0000:31:00.0"
check "a device on its host driver (nvidia) is bound to vfio-pci for the scrub and given back" \
    eval "av enroll 0000:31:00.0 >/dev/null && av scrub 0000:31:00.0 >/dev/null && [ \"\$(basename \$(readlink '$D31/driver'))\" = nvidia ] && grep -qx 'VFIO_DEVICE_RESET 0000:31:00.0' '$W/host/sys/.accelvirt-fake-kernel.log' && tail -n1 '$W/state/journal.jsonl' | grep -q '\"rebound_from\": *\"nvidia\"'"
printf 'ROM image v2' >"$D/rom"
H2=$(printf 'ROM image v2' | sha256sum | cut -d' ' -f1)
check "a changed ROM fails the scrub and quarantines the device, naming both hashes" \
    eval "! av scrub 0000:17:00.0 >'$W/s2.txt' 2>&1 && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ] && grep -q 'changed since enrollment (enrolled $H1, now ' '$W/s2.txt'"
check "scrub of a quarantined device re-runs the steps and leaves it quarantined" \
    eval "! av scrub 0000:17:00.0 >/dev/null 2>&1 && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "enroll of two devices, one needing --replace, enrolls neither" \
    unchanged one_line 1 "0000:17:00.0 .* has the ROM hash $H1 enrolled and its ROM now hashes to $H2" av enroll 0000:4b:00.0 0000:17:00.0
check "enroll --all enrolls the free devices not enrolled yet, 'none' for those without a ROM" \
    eval "av enroll --all --json >'$W/all.json'"
check "  ... the 4 new A100s as 'none'; skipped: the quarantined one, the one enrolled already" json "$W/all.json" \
    "len(d['enrolled']) == 4 and all(x['rom_sha256'] == 'none' and x['previous'] is None and x['state'] == 'free' for x in d['enrolled']) and [(x['address'], x['reason']) for x in d['skipped']] == [('0000:17:00.0', 'not free'), ('0000:31:00.0', 'already enrolled')]"
check "enroll --all again enrolls nothing" \
    unchanged eval "av enroll --all >'$W/all2.txt' && grep -qx 'Nothing enrolled.' '$W/all2.txt'"
check "scrub of an enrolled device without a ROM passes, and says its coverage" \
    eval "av scrub 0000:31:00.0 >'$W/s31.txt' && grep -qx 'coverage: cleared 0 bytes of device memory of unknown size (no step measured or reported the memory it cleared)' '$W/s31.txt'"

# --- a firmware update: quarantined by rom-check, re-enrolled, cleared ---
check "enroll of the new ROM without --replace is refused with one line naming both hashes, nothing changed" \
    unchanged one_line 1 "0000:17:00.0 (dsn:.*) has the ROM hash $H1 enrolled and its ROM now hashes to $H2: .*'accelvirt enroll --replace 0000:17:00.0'" av enroll 0000:17:00.0
check "enroll --replace records the new hash; the device stays quarantined" \
    eval "SUDO_USER=carol av enroll --replace 0000:17:00.0 --json >'$W/e2.json' && [ \"\$(dev_state 0000:17:00.0)\" = quarantined ]"
check "  ... its output names both hashes" json "$W/e2.json" \
    "[(x['address'], x['rom_sha256'], x['previous'], x['state']) for x in d['enrolled']] == [('0000:17:00.0', '$H2', '$H1', 'quarantined')] and d['skipped'] == []"
check "  ... journalled with the previous and the new hash, the state and the operator" \
    last_entry "e['event'] == 'enrolled' and e['rom_sha256'] == '$H2' and e['previous'] == '$H1' and e['state'] == 'quarantined' and e['operator'] == 'carol'"
check "quarantine list still shows it, with the rom-check reason" \
    eval "av quarantine list --json | python3 -c \"import json,sys; d=json.load(sys.stdin); assert [(x['address'], 'changed since enrollment' in x['reason']) for x in d['devices']] == [('0000:17:00.0', True)]\""
check "quarantine clear --json: free, given back to nvidia" \
    eval "av quarantine clear 0000:17:00.0 --json >'$W/c1.json' && [ \"\$(driver 0000:17:00.0)\" = nvidia ]"
check "  ... its output" json "$W/c1.json" \
    "d['state'] == 'free' and d['driver'] == 'nvidia' and d['restore_driver'] == 'on-release' and d['companions'] == [] and not d['removed_from_pool'] and 'changed since enrollment' in d['quarantined_for']"
check "a scrub with rom-check then passes: free, the new hash" \
    eval "av scrub 0000:17:00.0 --json >'$W/s3.json' && [ \"\$(dev_state 0000:17:00.0)\" = free ]"
check "  ... its report names the new hash" json "$W/s3.json" "d['ok'] and d['steps'][1]['sha256'] == '$H2'"

# --- bad input to enroll: one line, nothing changed ---
check "enroll without devices nor --all is a usage error" unchanged one_line 2 "needs devices or --all" av enroll
check "enroll of devices and --all is a usage error" unchanged one_line 2 "needs devices or --all (not both)" av enroll --all 0000:17:00.0
check "enroll --all --replace is a usage error: --replace names its devices" \
    unchanged one_line 2 "'enroll --replace' takes the devices to re-enroll by name, not --all" av enroll --all --replace
check "enroll of an unknown device says where to look" unchanged one_line 1 "accelvirt status" av enroll 0000:99:00.0
check "enroll of a good and an unknown device enrolls neither" \
    unchanged one_line 1 "'0000:99:00.0' is not a device of the pool" av enroll --replace 0000:4b:00.0 0000:99:00.0
check "enroll with an unknown option is a usage error" unchanged one_line 2 "Unknown option --force" av enroll --force 0000:17:00.0
check "scrub of an unknown device says where to look" one_line 1 "accelvirt status" av scrub 0000:99:00.0

# --- a scrub by hand holds the device: enroll and clear wait for it ---
printf 'ROM image EVIL' >"$D/rom"
av scrub 0000:17:00.0 >/dev/null 2>&1
ID17=$(av status --no-sync --json | python3 -c "import json,sys; print([x['identity'] for x in json.load(sys.stdin)['devices'] if x['address']=='0000:17:00.0'][0])")
LOCK17="$W/state/scrub-$(printf '%s' "$ID17" | sha256sum | cut -d' ' -f1).lock"
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(60)' "$LOCK17" "$W/locked" &
HOLDER=$!
i=0; while [ ! -e "$W/locked" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "while a scrub by hand holds the quarantined device, clear is refused with one line, nothing changed" \
    unchanged one_line 3 "0000:17:00.0 (dsn:.*) is being scrubbed by hand by another accelvirt; clear it when that is done" av quarantine clear 0000:17:00.0
check "  ... and so is enroll" \
    unchanged one_line 3 "is being scrubbed by hand by another accelvirt; enroll it when that is done" av enroll --replace 0000:17:00.0
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
check "  ... and clear works once it is done" eval "av quarantine clear 0000:17:00.0 >/dev/null && [ \"\$(dev_state 0000:17:00.0)\" = free ]"

# --- keep-vfio: a cleared device stays on vfio-pci ---
K="$AV_TMP/k"
mkdir -p "$K/pol"
sed 's/"restore_driver": "on-release"/"restore_driver": "keep-vfio"/' "$POL/10-test.json" >"$K/pol/10-test.json"
chmod 0755 "$K/pol" && chmod 0644 "$K/pol"/*.json
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$K/host"
kv() { "$AV" --root "$K/host" --policy-dir "$K/pol" --state-dir "$K/state" "$@"; }
kv status >/dev/null
check "keep-vfio: a scrub that fails leaves the device quarantined on vfio-pci" \
    eval "! kv scrub 0000:17:00.0 >/dev/null 2>&1 && [ \"\$(driver '$K/host' 0000:17:00.0)\" = vfio-pci ]"
check "  ... quarantine clear frees it and leaves it on vfio-pci" \
    eval "kv quarantine clear 0000:17:00.0 >'$K/c.txt' && grep -q ': free, left on vfio-pci, by ' '$K/c.txt' && [ \"\$(driver '$K/host' 0000:17:00.0)\" = vfio-pci ]"
check "  ... journalled so" eval "tail -n1 '$K/state/journal.jsonl' | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['event']=='cleared' and e['restore_driver']=='keep-vfio' and e['driver']=='vfio-pci', e\""

# --- the profile gone from the policies: how to give it back is unknown ---
check "keep-vfio: a device quarantined again" eval "! kv scrub 0000:31:00.0 >/dev/null 2>&1"
mkdir -p "$K/nopol"
cat >"$K/nopol/10-other.json" <<'JSON'
{"profiles": [{"name": "other", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf", "scrub": [{"method": "none"}]}]}
JSON
chmod 0755 "$K/nopol" && chmod 0644 "$K/nopol"/*.json
kv status >/dev/null
cp "$K/state/pool.json" "$K/p0"
check "quarantine clear of a device whose profile left the policies: one line, still quarantined" \
    eval "! \"\$AV\" --root '$K/host' --policy-dir '$K/nopol' --state-dir '$K/state' quarantine clear 0000:31:00.0 2>'$K/err' && [ \"\$(wc -l <'$K/err')\" -eq 1 ] && grep -q \"^accelvirt: the profile 'a100' of device 0000:31:00.0 .* is not in the policies.*it stays quarantined\" '$K/err' && [ \"\$(driver '$K/host' 0000:31:00.0)\" = vfio-pci ] && kv status --no-sync --json | python3 -c \"import json,sys; assert [x['state'] for x in json.load(sys.stdin)['devices'] if x['address']=='0000:31:00.0'] == ['quarantined']\""

# --- the worker's quarantine: companions and mdevs (the hook and its worker) ---
: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
# A scrub command that always fails (a name of its own: tests/test-hook.sh
# looks for its hook-scrub.sh among the running processes).
SCRUB="$AV_TMP/failing-scrub.sh"
printf '#!/bin/sh\necho "simulated failure scrubbing $*"\nexit 3\n' >"$SCRUB"
chmod 0755 "$SCRUB"
HP="$AV_TMP/hook-policies"
mkdir -p "$HP"
cat >"$HP/10-test.json" <<JSON
{"profiles": [
  {"name": "a6000", "match": {"vendor": "0x10de", "device": "0x2230"}, "attach": "vfio-pci", "companions": [{"class": "0x0403"}],
   "granularity": "card", "numa": "preferred", "restore_driver": "on-release",
   "scrub": [{"method": "command", "argv": ["$SCRUB"], "timeout": 5}]},
  {"name": "vgpu", "match": {"vendor": "0x10de", "device": "0x2236"}, "attach": "mdev", "mdev_type": "nvidia-590",
   "numa": "preferred", "scrub": [{"method": "command", "argv": ["$SCRUB"], "timeout": 5}]}
]}
JSON
chmod 0755 "$HP" && chmod 0644 "$HP"/*.json
# hook WORLD XML ARGS...: the hook of world WORLD (host, state, log) with XML on stdin.
hook() {
    hw=$1 xml=$2; shift 2
    ACCELVIRT_ROOT="$hw/host" ACCELVIRT_STATE_DIR="$hw/state" ACCELVIRT_POLICY_DIR="$HP" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$hw/log" \
        "$ACCELVIRT_HOOK" "$@" <"$xml"
}
hv() { hw=$1; shift; "$AV" --root "$hw/host" --policy-dir "$HP" --state-dir "$hw/state" "$@"; }
# wait_quarantined WORLD IDENTITY-OR-ADDRESS: until the worker has quarantined it (20 s).
wait_quarantined() {
    i=0
    while [ $i -lt 200 ]; do
        if hv "$1" status --no-sync --json | python3 -c "import json,sys; sys.exit(0 if [x for x in json.load(sys.stdin)['devices'] if sys.argv[1] in (x['identity'], x['address']) and x['state']=='quarantined'] else 1)" "$2"; then
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "$2 is not quarantined after 20 s"; cat "$1/log" 2>/dev/null
    return 1
}
U1=00000001-0000-4000-8000-000000000001
# world NAME HOST: a private copy of the fake HOST in $AV_TMP/NAME.
world() {
    mkdir -p "$AV_TMP/$1"
    cp -a "$AV_TEST_HOSTS/$2" "$AV_TMP/$1/host"
}
# mkdom FILE NAME HOSTDEV [METADATA]: a domain NAME ($U1) with one hostdev.
mkdom() {
    cat >"$1" <<XML
<domain type='kvm'>
  <name>$2</name>
  <uuid>$U1</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  ${4:-}
  <devices>
    $3
  </devices>
</domain>
XML
}

G="$AV_TMP/g"
world g two-socket-8gpu
mkdom "$G/vm.xml" a6 "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x98' slot='0x00' function='0x0'/></source></hostdev>"
hook "$G" "$G/vm.xml" a6 prepare begin - >/dev/null 2>&1
W=$G    # for unchanged()
check "enroll of a device in use is refused with one line naming its domain, nothing changed" \
    unchanged one_line 1 "device 0000:98:00.0 (.*) is in-use by domain 'a6' .*: enroll a device only when nobody holds it, free or quarantined" hv "$G" enroll 0000:98:00.0
check "quarantine clear of a device in use is refused with one line, nothing changed" \
    unchanged one_line 1 "device 0000:98:00.0 (.*) is in-use, not quarantined: nothing to clear" hv "$G" quarantine clear 0000:98:00.0
check "an A6000 and its audio function, quarantined by the worker's failed scrub, both on vfio-pci" \
    eval "hook '$G' '$G/vm.xml' a6 release end - >/dev/null 2>&1 && wait_quarantined '$G' 0000:98:00.0 && [ \"\$(driver '$G/host' 0000:98:00.0)\" = vfio-pci ] && [ \"\$(driver '$G/host' 0000:98:00.1)\" = vfio-pci ]"
echo "fail /sys/bus/pci/drivers/snd_hda_intel/bind 5" >"$G/host/sys/.accelvirt-fake-kernel"
cp "$G/state/pool.json" "$G/p0"
check "quarantine clear whose companion's restore fails: one line naming it, still quarantined, the pool unchanged" \
    eval "! hv '$G' quarantine clear 0000:98:00.0 2>'$G/err' && [ \"\$(wc -l <'$G/err')\" -eq 1 ] && grep -q \"^accelvirt: cannot clear the quarantine of device 0000:98:00.0 .*restoring the driver 'snd_hda_intel' of 0000:98:00.1 (in the IOMMU group of 0000:98:00.0) failed: .*it stays quarantined\" '$G/err' && same_pool '$G/state/pool.json' '$G/p0'"
rm -f "$G/host/sys/.accelvirt-fake-kernel"
check "quarantine clear then gives both back (nvidia, snd_hda_intel) and frees it" \
    eval "hv '$G' quarantine clear 0000:98:00.0 >'$G/c.txt' && [ \"\$(driver '$G/host' 0000:98:00.0)\" = nvidia ] && [ \"\$(driver '$G/host' 0000:98:00.1)\" = snd_hda_intel ] && grep -q '^    0000:98:00.1 (same IOMMU group): given back to snd_hda_intel\$' '$G/c.txt'"
check "  ... the companion forgotten, journalled with both drivers" \
    eval "python3 -c \"import json; d=json.load(open('$G/state/pool.json')); assert [(x['state'], x.get('companions')) for x in d['devices'] if x['address']=='0000:98:00.0'] == [('free', None)]\" && tail -n1 '$G/state/journal.jsonl' | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['event']=='cleared' and e['driver']=='nvidia' and e['companions']==[{'address': '0000:98:00.1', 'driver': 'snd_hda_intel'}], e\""

V="$AV_TMP/v"
world v vgpu-mdev
MU=6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c
mkdom "$V/vm.xml" vg "<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='$MU'/></source></hostdev>" \
    "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement><av:mdev profile='vgpu' uuid='$MU'/></av:placement></av:accelerators></metadata>"
check "an mdev accelvirt created, quarantined by the worker's failed scrub" \
    eval "hook '$V' '$V/vm.xml' vg prepare begin - >/dev/null 2>&1 && hook '$V' '$V/vm.xml' vg release end - >/dev/null 2>&1 && wait_quarantined '$V' 'mdev:$MU'"
W=$V    # for unchanged()
check "enroll of an mdev is refused with one line, nothing changed" \
    unchanged one_line 2 "device 0000:17:00.0 (mdev:$MU) is a mdev device: only PCI devices have an option ROM to enroll" hv "$V" enroll "mdev:$MU"
check "quarantine clear removes it: no mdev, out of the pool, journalled cleared then removed" \
    eval "hv '$V' quarantine clear 'mdev:$MU' >'$V/c.txt' && grep -q '^cleared mdev:$MU: its mdev removed, out of the pool, by ' '$V/c.txt' && [ ! -e '$V/host/sys/bus/mdev/devices/$MU' ] && ! grep -q '$MU' '$V/state/pool.json' && tail -n2 '$V/state/journal.jsonl' | python3 -c \"import json,sys; a,b=[json.loads(l) for l in sys.stdin]; assert (a['event'], a['mdev_removed'], b['event']) == ('cleared', True, 'removed'), (a, b)\""
W="$AV_TMP/w"
check "the journals' chains are intact" eval "av journal verify && kv journal verify && hv '$G' journal verify && hv '$V' journal verify"

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

# A bus reset is refused when a device it would hit, in another IOMMU group,
# is held by a process, whichever way (/proc/PID: fd, fdinfo, maps).  The
# QAT PF and two VFs are left without a driver here, so that the bus reset of
# the first VF would hit only them and the VF 0000:6b:00.2 (vfio-pci, group 151).
B="$AV_TMP/b"
mkdir -p "$B"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$B/host"
bv() { "$AV" --root "$B/host" --policy-dir "$POL" --state-dir "$B/state" "$@"; }
for a in 0000:6b:00.0 0000:6b:00.3 0000:6b:00.4; do
    rm -f "$B/host/sys/bus/pci/devices/$a/driver" "$B/host/sys/bus/pci/drivers/"*"/$a"
done
bv status >/dev/null
BF=$(bv status --json | python3 -c "import json,sys; print([x['address'] for x in json.load(sys.stdin)['devices'] if x['profile']=='qat-vf'][0])")
echo "flr bus" >"$B/host/sys/bus/pci/devices/$BF/reset_method"
# bsys ADDRESS: the device's real sysfs directory, as the kernel names it.
bsys() { r=$(realpath "$B/host/sys/bus/pci/devices/$1") && h=$(realpath "$B/host") && echo "${r#"$h"}"; }
mkdir -p "$B/host$(bsys 0000:6b:00.2)/vfio-dev/vfio4"
BMAPS="7f2a10000000-7f2a11000000 rw-s 00000000 00:15 4711                       "
# bus_reset WHO: the scrub of $BF resets it by bus (WHO empty), or refuses
# the bus reset naming WHO and resets it by flr.  Clears the fake /proc.
bus_reset() {
    bv scrub "$BF" --json >"$B/r.json" || return 1
    rm -rf "$B/host/proc"
    if [ -z "$1" ]; then
        json "$B/r.json" "d['steps'][0]['reset_method'] == 'bus'"
    else
        WHO=$1 json "$B/r.json" "d['steps'][0]['reset_method'] == 'flr' and d['steps'][0]['attempts'][0]['error'].startswith('refused: a bus reset would also reset ') and __import__('os').environ['WHO'] in d['steps'][0]['attempts'][0]['error']"
    fi
}
check "the bus reset of a QAT VF whose bus mates are unbound or on vfio-pci and held by nobody is done" \
    bus_reset ""
mkdir -p "$B/host/proc/4242/fd" && ln -s /dev/vfio/151 "$B/host/proc/4242/fd/9"
check "  ... refused when a process holds the group of a bus mate (/dev/vfio/151)" \
    bus_reset "0000:6b:00.2, whose IOMMU group 151 process 4242 (/dev/vfio/151) holds"
mkdir -p "$B/host/proc/4242/fd" && ln -s /dev/vfio/devices/vfio4 "$B/host/proc/4242/fd/9"
check "  ... or its vfio cdev (/dev/vfio/devices/vfio4)" \
    bus_reset "0000:6b:00.2, whose IOMMU group 151 process 4242 (/dev/vfio/devices/vfio4) holds"
mkdir -p "$B/host/proc/4242/fd" "$B/host/proc/4242/fdinfo" && ln -s "anon_inode:[vfio-device]" "$B/host/proc/4242/fd/9"
printf 'pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nvfio-device-syspath: %s\n' "$(bsys 0000:6b:00.2)" >"$B/host/proc/4242/fdinfo/9"
check "  ... or a vfio device fd its fdinfo ties to it" \
    bus_reset "process 4242 (anon_inode:[vfio-device] of 0000:6b:00.2) holds"
mkdir -p "$B/host/proc/4242" && printf '%s%s/resource2\n' "$BMAPS" "$(bsys 0000:6b:00.2)" >"$B/host/proc/4242/maps"
check "  ... or maps its BAR through sysfs" \
    bus_reset "process 4242 (a mapping of $(bsys 0000:6b:00.2)/resource2) holds"
mkdir -p "$B/host/proc/4242" && printf '%s/dev/vfio/devices/vfio4\n' "$BMAPS" >"$B/host/proc/4242/maps"
check "  ... or through its vfio cdev" \
    bus_reset "process 4242 (a mapping of /dev/vfio/devices/vfio4) holds"
mkdir -p "$B/host/proc/4242" && printf '%s%s/resource0_wc\n' "$BMAPS" "$(bsys 0000:6b:00.3)" >"$B/host/proc/4242/maps"
check "  ... and a BAR mapped is in use on an unbound bus mate too" \
    bus_reset "0000:6b:00.3, whose IOMMU group 152 process 4242 (a mapping of $(bsys 0000:6b:00.3)/resource0_wc) holds"
mkdir -p "$B/host/proc/4242/fd" && ln -s /dev/iommu "$B/host/proc/4242/fd/3"
printf '%s%s/resource0\n' "$BMAPS" "$(bsys 0000:3b:00.0)" >"$B/host/proc/4242/maps"
check "  ... while a process with /dev/iommu open and another device's BAR mapped holds none of them" \
    bus_reset ""

# --- the vm method is in accelvirt and accelvirt-worker (issue 12: the hook
# links no libvirt, so the method is registered by the programs that do) ---
M="$AV_TMP/vmreg"
world vmreg two-socket-8gpu
mkdir -p "$M/pol"
printf '%s\n' "<domain type='test'><name>@NAME@</name><uuid>@UUID@</uuid><memory>1024</memory><os><type>hvm</type></os><devices>@HOSTDEV@</devices></domain>" >"$M/pol/scrub-vm.xml"
cat >"$M/pol/10-vm.json" <<JSON
{"profiles": [{"name": "a100-vm", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci",
   "scrub": [{"method": "vm", "template": "$M/pol/scrub-vm.xml", "timeout": 5}], "restore_driver": "on-release"}]}
JSON
chmod 0755 "$M/pol" && chmod 0644 "$M/pol"/*
# A libvirt that cannot be reached: the step gets as far as connecting.
mv_() { ACCELVIRT_CONNECT=test:///nonexistent/accelvirt-unreached.xml "$AV" --root "$M/host" --policy-dir "$M/pol" --state-dir "$M/state" "$@"; }
mv_ status >/dev/null
check "accelvirt scrub runs a vm step (it reaches libvirt: the method is registered)" \
    eval "! mv_ scrub 0000:17:00.0 --json >'$M/s.json' 2>/dev/null && python3 -c \"import json; d=json.load(open('$M/s.json')); r=d['reason']; assert d['result']=='quarantined' and 'cannot connect to libvirt' in r and 'not in this program' not in r, r\""
mkdom "$M/vm.xml" a1 "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x31' slot='0x00' function='0x0'/></source></hostdev>"
# mhook ARGS...: the hook of that world, with its policies and that libvirt.
mhook() {
    ACCELVIRT_ROOT="$M/host" ACCELVIRT_STATE_DIR="$M/state" ACCELVIRT_POLICY_DIR="$M/pol" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$M/log" \
    ACCELVIRT_CONNECT=test:///nonexistent/accelvirt-unreached.xml "$ACCELVIRT_HOOK" "$@" <"$M/vm.xml"
}
# m_reason ADDRESS: its quarantine reason, once the worker has quarantined it (20 s).
m_reason() {
    i=0
    while [ $i -lt 200 ]; do
        r=$(mv_ status --no-sync --json | python3 -c "import json,sys; print(''.join(x['reason'] or '' for x in json.load(sys.stdin)['devices'] if x['address']==sys.argv[1] and x['state']=='quarantined'))" "$1")
        [ -n "$r" ] && { echo "$r"; return 0; }
        sleep 0.1
        i=$((i + 1))
    done
    echo "$1 is not quarantined after 20 s" >&2; cat "$M/log" >&2
    return 1
}
check "accelvirt-worker runs a vm step (it reaches libvirt: the method is registered)" \
    eval "mhook a1 prepare begin - >/dev/null 2>&1 && mhook a1 release end - >/dev/null 2>&1 && m_reason 0000:31:00.0 >'$M/r.txt' && grep -q 'cannot connect to libvirt' '$M/r.txt' && ! grep -q 'not in this program' '$M/r.txt'"

# --- journal show: what devices and programs wrote stays text ---
cp -a "$W/state" "$W/state-evil"
python3 - "$W/state-evil/journal.jsonl" <<'PYEOF'
import json, sys
e = {"seq": 99999, "time": "2026-11-23T00:00:00Z", "prev": "", "event": "scrub-certificate",
     "identity": "usb:03e7:2485:serial:x\n        coverage: cleared 48 GiB of 48 GiB, read back in full\u001b[2J\u202e",
     "address": "1-1", "result": "free", "reason": "ok\r\u009b31m", "coverage": None}
open(sys.argv[1], "a").write(json.dumps(e) + "\n")
PYEOF
check "journal show: an identity or reason with newlines, escapes and bidi overrides prints as one line of text each" \
    eval "\"$AV\" --root '$W/host' --policy-dir '$POL' --state-dir '$W/state-evil' journal show 1-1 >'$W/evil.txt' && [ \"\$(wc -l <'$W/evil.txt')\" -eq 3 ] && ! grep -q \"\$(printf '\\033')\" '$W/evil.txt' && ! grep -q \"\$(printf '\\r')\" '$W/evil.txt' && grep -q 'serial:x?        coverage: cleared 48 GiB of 48 GiB, read back in full?\\[2J?\$' '$W/evil.txt' && grep -qx '        coverage: not recorded' '$W/evil.txt'"

finish
