#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the bitstream library's commands (bitstream add, list,
# remove) and programming a free device by hand (accelvirt program), on a
# private copy of the fake host sriov-fpga-qat with a fake programmer that
# writes the image into the device's BAR file (resource2) and logs how it
# was run.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
W="$AV_TMP/w"
BIN="$AV_TMP/bin"
POL="$AV_TMP/policies"
LOG="$AV_TMP/programmer.log"
FAIL="$AV_TMP/programmer.fail"
mkdir -p "$W" "$BIN" "$POL"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$W/host"
H="$W/host"
VFIO_DEV=0000:3b:00.0      # 10ee:5004, profile fpga-vfio (the program gets its VFIO group)
HOST_DEV=0000:3b:00.1      # 10ee:5005, profile fpga-host (on its host driver, xocl)

# 3b:00.0 on vfio-pci, as a keep-vfio profile leaves a free device (what
# the fake kernel would do: the driver links and /dev/vfio/30).
rm -f "$H/sys/bus/pci/drivers/xclmgmt/$VFIO_DEV"
ln -sfn ../../../../bus/pci/drivers/vfio-pci "$H/sys/bus/pci/devices/$VFIO_DEV/driver"
ln -s "../../../../devices/pci0000:3a/0000:3a:02.0/$VFIO_DEV" "$H/sys/bus/pci/drivers/vfio-pci/$VFIO_DEV" 2>/dev/null
: >"$H/dev/vfio/30"

# The fake programmer: logs its argv, the ACCELVIRT_ variables and what its
# fd 3 is, then writes the image into the device's BAR 2 (or fails when
# $FAIL exists).  Trusted: root's, in a directory only root can change.
cat >"$BIN/programmer" <<EOF
#!/bin/sh
echo "argv: \$*" >>"$LOG"
env | grep '^ACCELVIRT_' | sort >>"$LOG"
if [ -e /proc/self/fd/3 ]; then echo "fd3: \$(readlink /proc/self/fd/3)" >>"$LOG"; fi
if [ -e "$FAIL" ]; then echo "the card said no" >&2; exit 3; fi
cat "\$2" >"$H/sys/bus/pci/devices/\$1/resource2"
EOF
cat >"$BIN/verify" <<EOF
#!/bin/sh
echo "verify: \$*" >>"$LOG"
[ "\$(sha256sum <"$H/sys/bus/pci/devices/\$1/resource2" | cut -d' ' -f1)" = "\$2" ]
EOF
cat >"$BIN/onfree" <<EOF
#!/bin/sh
echo "argv: on-free \$*" >>"$LOG"
EOF
chmod 0755 "$BIN" "$BIN/programmer" "$BIN/verify" "$BIN/onfree"

cat >"$POL/10-fpga.json" <<JSON
{"profiles": [
  {"name": "fpga-vfio", "match": {"vendor": "0x10ee", "device": "0x5004"}, "attach": "vfio-pci",
   "restore_driver": "keep-vfio", "scrub": [{"method": "none"}],
   "program": {"argv": ["$BIN/programmer", "{address}", "{bitstream}"],
               "verify": ["$BIN/verify", "{address}", "{sha256}"], "timeout": 30, "base": "base-img"}},
  {"name": "fpga-host", "match": {"vendor": "0x10ee", "device": "0x5005"}, "attach": "vfio-pci",
   "restore_driver": "on-release", "scrub": [{"method": "none"}],
   "program": {"argv": ["$BIN/programmer", "{address}", "{bitstream}"], "driver": "host", "timeout": 30}},
  {"name": "qat-vf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf", "scrub": [{"method": "none"}]}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

av() { "$AV" --root "$H" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
# set_state ADDRESS STATE: the pool says so (as a release or a failed scrub
# would leave it; a quarantine with a reason), and forgets what it holds.
set_state() {
    python3 - "$W/state/pool.json" "$1" "$2" <<'PY'
import json, sys
p, addr, state = sys.argv[1:4]
d = json.load(open(p))
for x in d["devices"]:
    if x["address"] == addr:
        x["state"] = state
        x["reason"] = "a test" if state == "quarantined" else None
        x.pop("programmed", None)
json.dump(d, open(p, "w"), indent=2)
PY
}
# unchanged CMD...: CMD leaves the pool, the journal and the library as they were.
snapshot() {
    (cd "$W/state" && find bitstreams -type f 2>/dev/null | sort | xargs -r sha256sum; \
     sha256sum journal.jsonl; python3 -c "
import json; d = json.load(open('pool.json'))
for x in d['devices']: x.pop('last_seen', None)
print(json.dumps(d, sort_keys=True))")
}
unchanged() {
    snapshot >"$AV_TMP/snap0" || return 1
    "$@" || return 1
    snapshot >"$AV_TMP/snap1" && diff -u "$AV_TMP/snap0" "$AV_TMP/snap1"
}
last_entry() { tail -n1 "$W/state/journal.jsonl" | python3 -c "import json,sys; e=json.loads(sys.stdin.read()); assert $1, e"; }
dev_json() { python3 -c "import json,sys; print(json.dumps([x for x in json.load(open('$W/state/pool.json'))['devices'] if x['address']==sys.argv[1]][0]))" "$1"; }
programmed() { dev_json "$1" | python3 -c "import json,sys; p=json.load(sys.stdin).get('programmed'); print(p['sha256'] if p else 'unknown')"; }
state_of() { dev_json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['state'])"; }
runs() { grep -c '^argv:' "$LOG" 2>/dev/null || echo 0; }

# The images, root's and writable by nobody else.
IMG="$AV_TMP/img"
mkdir -p "$IMG" && chmod 0755 "$IMG"
printf 'function crc32, v1' >"$IMG/crc.bit"
printf 'function aes, v2' >"$IMG/aes.bit"
printf 'the base shell' >"$IMG/base.bit"
printf 'another crc' >"$IMG/crc-other.bit"
chmod 0644 "$IMG"/*.bit
CRC=$(sha256sum <"$IMG/crc.bit" | cut -d' ' -f1)
AES=$(sha256sum <"$IMG/aes.bit" | cut -d' ' -f1)
check "the fake host and its policy load" eval "av status >/dev/null"

# --- the library ---
check "bitstream add copies a trusted image in, named by its SHA-256" \
    av bitstream add "$IMG/crc.bit" --name crc --compatible 0x10EE:0x5004,10ee:5005 --function-id fn.crc32 \
    --description "CRC offload"
check "  ... a 0600 file in a 0700 directory" \
    eval "[ \"\$(stat -c %a '$W/state/bitstreams/$CRC.bit')\" = 600 ] && [ \"\$(stat -c %a '$W/state/bitstreams')\" = 700 ] && cmp '$IMG/crc.bit' '$W/state/bitstreams/$CRC.bit'"
check "  ... journalled bitstream-added with sha256, name, size and source" \
    last_entry "e['event'] == 'bitstream-added' and e['sha256'] == '$CRC' and e['name'] == 'crc' and e['size'] == 18 and e['source'] == '$IMG/crc.bit'"
check "the same image under the same name again: no change" \
    unchanged av bitstream add "$IMG/crc.bit" --name crc
check "another image under a taken name is refused, one line, in use (exit 5)" \
    unchanged one_line 5 "the name 'crc' is taken" av bitstream add "$IMG/crc-other.bit" --name crc
check "the same image under another name is refused, one line, in use (exit 5)" \
    unchanged one_line 5 "in the library already as 'crc'" av bitstream add "$IMG/crc.bit" --name crc2
check "a bad name is bad input" \
    unchanged one_line 2 "not a bitstream name" av bitstream add "$IMG/aes.bit" --name "AES"
check "a bad --compatible is bad input" \
    unchanged one_line 2 "not a --compatible entry" av bitstream add "$IMG/aes.bit" --name aes --compatible 10ee
check "no --name is bad input" \
    unchanged one_line 2 "needs --name" av bitstream add "$IMG/aes.bit"
chmod 0666 "$IMG/aes.bit"
check "an image others may write is refused, one line" \
    unchanged one_line 1 "aes.bit" av bitstream add "$IMG/aes.bit" --name aes
chmod 0644 "$IMG/aes.bit"
# (another user's file: only root can make one)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    chown nobody "$IMG/aes.bit"
    check "an image another user owns is refused, one line" \
        unchanged one_line 1 "nobody" av bitstream add "$IMG/aes.bit" --name aes
    chown root "$IMG/aes.bit"
fi
chmod 0777 "$IMG"
check "an image in a directory others may write is refused" \
    unchanged one_line 1 "img" av bitstream add "$IMG/aes.bit" --name aes
chmod 0755 "$IMG"
check "bitstream add of a missing file: one line" \
    unchanged one_line 1 "nothere" av bitstream add "$IMG/nothere.bit" --name aes
check "a second image, fitting 10ee:5004 only" \
    av bitstream add "$IMG/aes.bit" --name aes --compatible 10ee:5004
check "the profile's base image" av bitstream add "$IMG/base.bit" --name base-img
av bitstream list --json >"$W/l.json"
check "bitstream list --json: every entry, in name order, nothing held" json "$W/l.json" \
    "[(b['name'], b['size'], b['compatible'], b['function_id'], b['held_by']) for b in d['bitstreams']] == [('aes', 16, ['10ee:5004'], None, []), ('base-img', 14, [], None, []), ('crc', 18, ['10ee:5004', '10ee:5005'], 'fn.crc32', [])] and d['bitstreams'][2]['description'] == 'CRC offload'"
check "bitstream list shows the sha256 prefix" \
    eval "av bitstream list | grep -q '^crc  *$(echo $CRC | cut -c1-12) '"

# --- program: a device on its host driver ---
check "program a free device (driver host): exit 0" av program "$HOST_DEV" crc
check "  ... the programmer ran once with the device and the library's file" \
    eval "[ \"\$(runs)\" = 1 ] && grep -qx 'argv: $HOST_DEV $W/state/bitstreams/$CRC.bit' '$LOG'"
check "  ... with the documented environment, and no VFIO group" \
    eval "grep -qx 'ACCELVIRT_BITSTREAM_SHA256=$CRC' '$LOG' && grep -qx 'ACCELVIRT_BITSTREAM_NAME=crc' '$LOG' && grep -qx 'ACCELVIRT_FUNCTION_ID=fn.crc32' '$LOG' && grep -qx 'ACCELVIRT_PROFILE=fpga-host' '$LOG' && grep -qx 'ACCELVIRT_POINT=program' '$LOG' && ! grep -q 'ACCELVIRT_VFIO_GROUP_FD' '$LOG' && ! grep -q '^fd3:' '$LOG'"
check "  ... the device holds the image (its BAR file)" cmp "$IMG/crc.bit" "$H/sys/bus/pci/devices/$HOST_DEV/resource2"
check "  ... the pool records it, and the device is free again" \
    eval "[ \"\$(programmed $HOST_DEV)\" = $CRC ] && [ \"\$(state_of $HOST_DEV)\" = free ]"
# journalled_run EVENTS...: the journal since the last claim holds these events.
journalled_run() {
    python3 - "$W/state/journal.jsonl" "$CRC" "$@" <<'PY'
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
es = es[[i for i, e in enumerate(es) if e['event'] == 'claimed'][-1]:]
# The claim is renewed before the program runs, and again when a second
# passed meanwhile (a loaded machine): one renewal or more.
ev = [e['event'] for i, e in enumerate(es)
      if e['event'] != 'claim-renewed' or 'claim-renewed' not in [x['event'] for x in es[:i]]]
assert ev == sys.argv[3:], ev
p = [e for e in es if e['event'] == 'programmed'][0]
assert p['sha256'] == sys.argv[2] and p['by'] == 'operator', p
r = [e for e in es if e['event'] == 'program'][0]
assert r['ok'] is True and r['recorded'] is True and r['verify'] is None and r['by'] == 'assign' and 'report' not in r, r
assert es[-1]['to'] == 'free', es[-1]
PY
}
check "  ... journalled: claimed, claim renewed, program (ok), programmed, back to free" \
    journalled_run claimed claim-renewed program programmed transition
check "  ... the journal's chain holds" av journal verify
check "program again: skipped, the device already holds it" \
    eval "unchanged av program $HOST_DEV $CRC >'$W/o' && grep -q 'already holds' '$W/o' && [ \"\$(runs)\" = 1 ]"
check "program --force programs it again" \
    eval "av program --force $HOST_DEV crc && [ \"\$(runs)\" = 2 ] && [ \"\$(programmed $HOST_DEV)\" = $CRC ]"
check "  ... the record dropped while it ran, written again after" \
    journalled_run claimed programmed-unknown claim-renewed program programmed transition
check "status shows what the device holds, who programmed it and how it was checked" \
    eval "av status --no-sync | grep -A4 '^$HOST_DEV ' | grep -q \"holds bitstream 'crc' (sha256 \$(echo $CRC | cut -c1-12)...), programmed .* by operator: the program exited 0\""
check "  ... and a programmable device with no record says it is unknown" \
    eval "av status >'$W/st.out'; grep -A8 '^$VFIO_DEV ' '$W/st.out' | grep -q 'holds: unknown' || { cat '$W/st.out'; false; }"
av bitstream list --json >"$W/l2.json"
check "bitstream list says which device holds it" json "$W/l2.json" \
    "[[h['address'] for h in b['held_by']] for b in d['bitstreams']] == [[], [], ['$HOST_DEV']]"
check "bitstream remove is refused while a device holds it, one line, in use (exit 5)" \
    unchanged one_line 5 "device $HOST_DEV .* holds it" av bitstream remove crc
check "bitstream remove is refused for the base of a profile's program, in use (exit 5)" \
    unchanged one_line 5 "profile 'fpga-vfio' .* base" av bitstream remove base-img
check "an image that does not fit the device is refused before anything runs" \
    unchanged one_line 2 "does not fit device $HOST_DEV" av program "$HOST_DEV" aes
check "a bitstream not in the library: one line" \
    unchanged one_line 1 "no bitstream 'nope'" av program "$HOST_DEV" nope
check "a device whose profile has no program: one line" \
    unchanged one_line 2 "has no \"program\"" av program 0000:6b:00.2 crc
check "a device not in the pool: one line" \
    unchanged one_line 1 "not a device of the pool" av program 0000:99:00.0 crc

# --- a failing program ---
: >"$FAIL"
check "a failing program: exit 1, one line with its error" \
    one_line 1 "programming $HOST_DEV with 'crc' failed" av program --force "$HOST_DEV" crc
rm -f "$FAIL"
check "  ... what the device holds is unknown now, and it is free again" \
    eval "[ \"\$(programmed $HOST_DEV)\" = unknown ] && [ \"\$(state_of $HOST_DEV)\" = free ]"
check "  ... journalled as a program that failed" \
    python3 -c "
import json
es = [json.loads(l) for l in open('$W/state/journal.jsonl')]
p = [e for e in es if e['event'] == 'program'][-1]
assert p['ok'] is False and 'the card said no' in p['output'] and p['recorded'] is False, p
"
check "bitstream remove of an image nothing holds: journalled, its file gone" \
    eval "av bitstream remove crc && ! [ -e '$W/state/bitstreams/$CRC.bit' ] && last_entry \"e['event'] == 'bitstream-removed' and e['name'] == 'crc'\""

# --- program: a device on vfio-pci gets its VFIO group as fd 3 ---
: >"$LOG"
check "program a free device on vfio-pci (driver vfio-pci) by its SHA-256" av program "$VFIO_DEV" "$AES"
check "  ... the programmer got the group file as fd 3" \
    eval "grep -qx 'ACCELVIRT_VFIO_GROUP_FD=3' '$LOG' && grep -qx 'fd3: $H/dev/vfio/30' '$LOG'"
check "  ... the verify command ran and passed, the pool says so" \
    eval "grep -qx 'verify: $VFIO_DEV $AES' '$LOG' && [ \"\$(programmed $VFIO_DEV)\" = $AES ] && dev_json $VFIO_DEV | grep -q 'verify command exited 0'"
check "  ... the device holds the image" cmp "$IMG/aes.bit" "$H/sys/bus/pci/devices/$VFIO_DEV/resource2"
# -F: the sleep itself holds the group (no child left holding it once
# $HOLDER is killed: a scrub below must find the group free to hold it).
flock -F -x "$H/dev/vfio/30" sleep 30 &
HOLDER=$!
sleep 0.3
check "a device whose VFIO group another holds: refused, one line, in use (exit 5), nothing changed" \
    unchanged one_line 5 "cannot open VFIO group 30" av program --force "$VFIO_DEV" aes
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
check "a device the profile wants on vfio-pci but on its host driver: refused" \
    eval "ln -sfn ../../../../bus/pci/drivers/xclmgmt '$H/sys/bus/pci/devices/$VFIO_DEV/driver' && cp '$W/state/journal.jsonl' '$AV_TMP/j0' && one_line 1 'needs it on vfio-pci' av program --force '$VFIO_DEV' aes && [ \"\$(programmed $VFIO_DEV)\" = $AES ] && [ \"\$(state_of $VFIO_DEV)\" = free ] && ! tail -n +\$((\$(wc -l <'$AV_TMP/j0') + 1)) '$W/state/journal.jsonl' | grep -q '\"claimed\"'; r=\$?; ln -sfn ../../../../bus/pci/drivers/vfio-pci '$H/sys/bus/pci/devices/$VFIO_DEV/driver'; exit \$r"

# --- only a free device ---
set_state "$VFIO_DEV" quarantined
check "a quarantined device is not programmed: one line, nothing changed" \
    unchanged one_line 1 "is quarantined: only a free device" av program --force "$VFIO_DEV" aes

BASE=$(sha256sum "$IMG/base.bit" | cut -d' ' -f1)
# --- a scrub by hand restores the base image and runs on_free, as the worker does ---
python3 - "$POL/10-fpga.json" "$BIN" "$LOG" <<'PY'
import json, sys
p, b, log = sys.argv[1:4]
d = json.load(open(p))
f = d["profiles"][0]
f["scrub"] = [{"method": "program-base"}]
f["on_free"] = {"argv": [b + "/onfree", "{address}"]}
json.dump(d, open(p, "w"), indent=2)
PY
: >"$LOG"
check "accelvirt scrub of the quarantined device programs the base image and keeps it quarantined" \
    eval "av scrub '$VFIO_DEV' >/dev/null && cmp '$IMG/base.bit' '$H/sys/bus/pci/devices/$VFIO_DEV/resource2' && [ \"\$(state_of $VFIO_DEV)\" = quarantined ]"
check "  ... the pool records the base, by the operator; the program is journalled" \
    eval "[ \"\$(programmed $VFIO_DEV)\" = $BASE ] && dev_json $VFIO_DEV | grep -q '\"by\": *\"operator\"' && tail -n 5 '$W/state/journal.jsonl' | grep '\"event\": *\"program\"' | grep -q '\"by\": *\"operator\"'"
check "  ... on_free did not run for a device that stays quarantined" eval "! grep -q 'argv: on-free' '$LOG'"
av quarantine clear "$VFIO_DEV" >/dev/null 2>&1
av program "$VFIO_DEV" aes >/dev/null 2>&1
set_state "$VFIO_DEV" dirty
: >"$LOG"
check "accelvirt scrub of a dirty device: base image back, on_free ran, free" \
    eval "av scrub '$VFIO_DEV' >/dev/null && cmp '$IMG/base.bit' '$H/sys/bus/pci/devices/$VFIO_DEV/resource2' && grep -qx 'argv: on-free $VFIO_DEV' '$LOG' && [ \"\$(state_of $VFIO_DEV)\" = free ] && [ \"\$(programmed $VFIO_DEV)\" = $BASE ]"
touch "$FAIL"
set_state "$VFIO_DEV" dirty
check "  ... a base program that fails quarantines it, nothing recorded" \
    eval "! av scrub '$VFIO_DEV' >/dev/null 2>&1; [ \"\$(state_of $VFIO_DEV)\" = quarantined ] && [ \"\$(programmed $VFIO_DEV)\" = unknown ]"
rm -f "$FAIL"

# --- a hostile index ---
cp "$W/state/bitstreams/index.json" "$AV_TMP/index.good"
printf '{"bitstreams": [{"sha256": "../../etc/passwd", "name": "x", "size": 1, "added": 1}]}' \
    >"$W/state/bitstreams/index.json"
check "a hostile index: list refuses with one line naming it, exit 4" \
    one_line 4 "bitstream index '$W/state/bitstreams/index.json' is corrupt" av bitstream list
check "  ... program refuses alike" \
    unchanged one_line 4 "is corrupt" av program "$HOST_DEV" aes
cp "$AV_TMP/index.good" "$W/state/bitstreams/index.json"
check "the journal's chain holds at the end" av journal verify

finish
