#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: requests for a bitstream (issue 15) through rewrite,
# define and start, on a private copy of the fake host sriov-fpga-qat whose
# QAT VFs (8086:4941, on their host driver 4xxxvf) stand in for FPGA
# regions of a profile with a "program" (driver "host"), a fake programmer
# that logs how it was run, and libvirt's test driver: the library lookup
# and its refusals (nothing claimed), the programming at define, skipped
# when the device holds the bitstream, again at start once the record is
# gone, the placement's preference for a device holding it, the dry-run
# wording, on_assign, and the claims given back when a program or an
# on_assign command fails: to dirty, as a claim that lapsed after a program
# ran for it (the card may hold the tenant's image), free when none ran.
. "$AV_TEST_SRCDIR/lib.sh"
fake_worker

AV=$ACCELVIRT
W="$AV_TMP/w"
BIN="$AV_TMP/bin"
POL="$AV_TMP/policies"
POL2="$AV_TMP/policies-assign"
LOG="$AV_TMP/programmer.log"
ALOG="$AV_TMP/assign.log"
FAIL="$AV_TMP/programmer.fail"
AFAIL="$AV_TMP/assign.fail"
mkdir -p "$W" "$BIN" "$POL" "$POL2"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$W/host"
H="$W/host"
# Every VF on its host driver (the tree has 6b:00.2 on vfio-pci), as a
# profile with a "host" program leaves its free devices.
rm "$H/sys/bus/pci/drivers/vfio-pci/0000:6b:00.2"
ln -s ../../../../devices/pci0000:6b/0000:6b:00.2 "$H/sys/bus/pci/drivers/4xxxvf/0000:6b:00.2"
ln -sfn ../../../bus/pci/drivers/4xxxvf "$H/sys/bus/pci/devices/0000:6b:00.2/driver"
UUID1=5eed1500-0000-4000-8000-000000000001
UUID2=5eed1500-0000-4000-8000-000000000002
UUID3=5eed1500-0000-4000-8000-000000000003

# The fake programmer and on_assign command: they log their argv and the
# ACCELVIRT_ variables, and fail when $FAIL (or $AFAIL) exists.  Trusted:
# root's, in a directory only root can change.
cat >"$BIN/programmer" <<EOF
#!/bin/sh
echo "argv: \$*" >>"$LOG"
env | grep '^ACCELVIRT_' | sort >>"$LOG"
if [ -e "$FAIL" ]; then echo "the card said no" >&2; exit 3; fi
cat "\$2" >"$H/sys/bus/pci/devices/\$1/resource2"
EOF
cat >"$BIN/assign" <<EOF
#!/bin/sh
echo "assign: \$*" >>"$ALOG"
env | grep '^ACCELVIRT_POINT' >>"$ALOG"
if [ -e "$AFAIL" ]; then echo "no tuning today" >&2; exit 4; fi
# STEAL: while this runs (the pool unlocked), the domain's other claimed
# devices go to another domain, as if their claims had expired.
if [ -e "$AV_TMP/steal" ]; then
    python3 - "$W/state/pool.json" "\$ACCELVIRT_DOMAIN_UUID" "\$ACCELVIRT_DEVICE" <<'PY'
import json, sys
p, uuid, me = sys.argv[1:4]
d = json.load(open(p))
for x in d["devices"]:
    if x.get("owner") and x["owner"].get("domain_uuid") == uuid and x["address"] != me:
        x["owner"] = {"domain_uuid": "5eed1500-0000-4000-8000-0000000000ff", "domain_name": "thief",
                      "nova_instance": None, "nova_project": None, "nova_user": None}
        x["claim_expires"] = 0
json.dump(d, open(p, "w"), indent=2)
PY
    rm -f "$AV_TMP/steal"
fi
exit 0
EOF
chmod 0755 "$BIN" "$BIN/programmer" "$BIN/assign"

# fvf: the VFs, programmed by the host's tool; fpga-host: a profile without
# "program"; fpga-vfio: its bitstreams fit 10ee:5004 only.
profiles() {
    cat <<JSON
{"profiles": [
  {"name": "fvf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf",
   "restore_driver": "on-release", "numa": "none", "scrub": [{"method": "none"}],
   "program": {"argv": ["$BIN/programmer", "{address}", "{bitstream}"], "driver": "host", "timeout": 30}$1},
  {"name": "fpga-host", "match": {"vendor": "0x10ee", "device": "0x5005"}, "attach": "vfio-pci",
   "numa": "none", "scrub": [{"method": "none"}]}
]}
JSON
}
profiles >"$POL/10-fpga.json"
profiles ', "on_assign": {"argv": ["'"$BIN"'/assign", "{address}", "{domain_name}", "{bitstream}"]}' \
    >"$POL2/10-fpga.json"
chmod 0755 "$POL" "$POL2" && chmod 0644 "$POL"/*.json "$POL2"/*.json

av() { "$AV" --root "$H" --policy-dir "$POL" --state-dir "$W/state" --connect test:///default "$@"; }
av2() { "$AV" --root "$H" --policy-dir "$POL2" --state-dir "$W/state" --connect test:///default "$@"; }

# dom FILE NAME UUID [REQUEST-ATTRIBUTES]: a domain asking for one fvf.
dom() {
    cat >"$1" <<EOF
<domain type='test'>
  <name>$2</name>
  <uuid>$3</uuid>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="${5:-fvf}" count="1" $4/>
    </av:accelerators>
  </metadata>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type></os>
</domain>
EOF
}
# unchanged CMD...: CMD leaves the pool, the journal and the library as they were.
unchanged() { state_unchanged "$W/state" "$@"; }
pool() { python3 -c "
import json, sys
d = json.load(open('$W/state/pool.json'))
dev = {x['address']: x for x in d['devices']}
rec = {p['domain_uuid']: p for p in d.get('placements', [])}
ok = $1
if not ok: print('false: ' + sys.argv[1]); print(json.dumps(d, indent=1)[:3000]); sys.exit(1)
" "$1"; }
journal() { python3 -c "
import json, sys
es = [json.loads(l) for l in open('$W/state/journal.jsonl')]
ok = $1
if not ok: print('false: ' + sys.argv[1]); print(es[-3:]); sys.exit(1)
" "$1"; }
runs() { cat "$LOG" 2>/dev/null | grep -c '^argv:'; }

IMG="$AV_TMP/img"
mkdir -p "$IMG" && chmod 0755 "$IMG"
printf 'function crc32, v1' >"$IMG/crc.bit"
printf 'function aes, v2' >"$IMG/aes.bit"
chmod 0644 "$IMG"/*.bit
CRC=$(sha256sum <"$IMG/crc.bit" | cut -d' ' -f1)
CRC12=$(echo "$CRC" | cut -c1-12)

check "the library: crc fits the VFs, aes only 10ee:5004" \
    eval "av status >/dev/null && av bitstream add '$IMG/crc.bit' --name crc --compatible 8086:4941 --function-id fn.crc32 >/dev/null && av bitstream add '$IMG/aes.bit' --name aes --compatible 10ee:5004 >/dev/null"
dom "$W/d1.xml" d1 "$UUID1" 'bitstream="crc"'

# --- refusals: nothing claimed, nothing run ---
dom "$W/unknown.xml" u "$UUID3" 'bitstream="nosuch"'
check "an unknown bitstream: define refuses, one line, nothing claimed" \
    unchanged one_line 1 "no bitstream 'nosuch' in the library" av define "$W/unknown.xml"
check "  ... and so does rewrite" \
    unchanged one_line 1 "no bitstream 'nosuch' in the library" av rewrite "$W/unknown.xml"
dom "$W/unfit.xml" u "$UUID3" 'bitstream="aes"'
check "an incompatible bitstream: refused, one line, naming what it fits" \
    unchanged one_line 2 "bitstream 'aes' fits no device of profile 'fvf' (it fits 10ee:5004)" av define "$W/unfit.xml"
dom "$W/noprog.xml" u "$UUID3" 'bitstream="crc"' fpga-host
check "a bitstream for a profile without \"program\": refused, one line" \
    unchanged one_line 2 "profile 'fpga-host' does not program its devices" av define "$W/noprog.xml"
dom "$W/badref.xml" u "$UUID3" 'bitstream="Not A Name"'
check "a bitstream= that names nothing: bad input, one line" \
    unchanged one_line 2 "bitstream 'Not A Name' names no bitstream" av rewrite "$W/badref.xml"
dom "$W/fn.xml" u "$UUID3" 'function="fn.crc32"'
check "function= names the bitstream that provides it for the profile: rewrite --dry-run says crc" \
    eval "unchanged av rewrite --dry-run '$W/fn.xml' >'$W/fn.out' 2>'$W/fn.err' && grep -q \"will be programmed with 'crc'\" '$W/fn.err' && grep -q 'bitstream=\"$CRC\"' '$W/fn.out'"
dom "$W/fn2.xml" u "$UUID3" 'function="fn.nosuch"'
check "a function no bitstream provides: refused, one line, nothing claimed" \
    unchanged one_line 1 "asks for function 'fn.nosuch', which no bitstream of the library provides" av define "$W/fn2.xml"
dom "$W/fn3.xml" u "$UUID3" 'bitstream="crc" function="fn.other"'
check "bitstream= and a function= it does not provide: refused, one line" \
    unchanged one_line 2 "asks for function 'fn.other', but bitstream 'crc' provides 'fn.crc32'" av define "$W/fn3.xml"
check "  ... no program ran" eval "[ \"\$(runs)\" = 0 ]"

# --- dry runs ---
check "rewrite --dry-run says on stderr which device will be programmed, and programs nothing" \
    eval "unchanged av rewrite --dry-run '$W/d1.xml' >'$W/d1.dry.xml' 2>'$W/d1.dry.err' && grep -q \"^accelvirt: 0000:6b:00.1 will be programmed with 'crc' (sha256 $CRC12…)$\" '$W/d1.dry.err' && grep -q 'bitstream=\"$CRC\"' '$W/d1.dry.xml' && [ \"\$(runs)\" = 0 ]"
check "define --dry-run says the same, defines and claims nothing" \
    eval "unchanged av define --dry-run '$W/d1.xml' >'$W/d1.dd' && grep -q \"^would define domain 'd1' ($UUID1):\" '$W/d1.dd' && grep -q \"0000:6b:00.1 (vf 0 of PF 0000:6b:00.0): will be programmed with 'crc'\" '$W/d1.dd' && [ \"\$(runs)\" = 0 ]"

# --- define programs ---
check "define programs the placed VF with the bitstream, then defines the domain" \
    eval "av define '$W/d1.xml' >'$W/d1.out' 2>'$W/d1.err' && grep -q \"^defined domain 'd1'\" '$W/d1.out' && [ ! -s '$W/d1.err' ] && [ \"\$(runs)\" = 1 ]"
check "  ... the programmer got the device, the library's file and the documented environment" \
    eval "grep -q '^argv: 0000:6b:00.1 $W/state/bitstreams/$CRC.bit$' '$LOG' && grep -q '^ACCELVIRT_BITSTREAM_NAME=crc$' '$LOG' && grep -q '^ACCELVIRT_BITSTREAM_SHA256=$CRC$' '$LOG' && grep -q '^ACCELVIRT_DOMAIN_NAME=d1$' '$LOG' && grep -q '^ACCELVIRT_DOMAIN_UUID=$UUID1$' '$LOG' && grep -q '^ACCELVIRT_FUNCTION_ID=fn.crc32$' '$LOG' && grep -q '^ACCELVIRT_POINT=program$' '$LOG' && ! grep -q ACCELVIRT_VFIO_GROUP_FD '$LOG' && cmp -s '$IMG/crc.bit' '$H/sys/bus/pci/devices/0000:6b:00.1/resource2'"
check "  ... the pool records what it holds (by define), claimed for d1; the placement record names the bitstream" \
    pool "dev['0000:6b:00.1']['programmed']['sha256'] == '$CRC' and dev['0000:6b:00.1']['programmed']['by'] == 'define' and dev['0000:6b:00.1']['state'] == 'claimed' and dev['0000:6b:00.1']['owner']['domain_uuid'] == '$UUID1' and rec['$UUID1']['devices'][0]['bitstream'] == '$CRC' and rec['$UUID1']['requests'][0]['bitstream'] == 'crc' and rec['$UUID1']['requests'][0]['bitstream_sha256'] == '$CRC'"
check "  ... journalled: claimed, the program's report, programmed" \
    journal "[e['event'] for e in es][-3:] == ['claimed', 'program', 'programmed'] and es[-2]['ok'] and es[-2]['recorded'] and es[-2]['by'] == 'assign' and es[-1]['by'] == 'define'"
check "define again: the device holds it, nothing runs" \
    eval "av define '$W/d1.xml' >'$W/d1b.out' 2>'$W/d1b.err' && grep -q \"0000:6b:00.1 (vf 0 of PF 0000:6b:00.0): already holds 'crc'\" '$W/d1b.out' && [ \"\$(runs)\" = 1 ] && [ ! -s '$W/d1b.err' ]"

# --- start ---
# The libvirt test driver holds d1 as defined (shut off).
av rewrite --dry-run "$W/d1.xml" >"$W/d1.placed.xml" 2>/dev/null
{ echo "<node>"; sed -e "s|type=\"test\"|type=\"test\" xmlns:test=\"http://libvirt.org/schemas/domain/test/1.0\"|" \
    -e 's|<vcpu>1</vcpu>|<vcpu>1</vcpu><test:runstate>5</test:runstate>|' "$W/d1.placed.xml"; echo "</node>"; } >"$W/node.xml"
avn() { "$AV" --root "$H" --policy-dir "$POL" --state-dir "$W/state" --connect "test://$W/node.xml" "$@"; }
check "start: the device holds the bitstream, nothing runs" \
    eval "avn start d1 >'$W/s1.out' 2>&1 && grep -q \"^started domain 'd1'\" '$W/s1.out' && [ \"\$(runs)\" = 1 ]"
# The record goes (a tenant had it), the claim too: start claims and programs it.
python3 - "$W/state/pool.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d['devices']:
    if x['address'] == '0000:6b:00.1':
        x.pop('programmed', None); x.pop('claim_programmed', None); x['state'] = 'free'; x['owner'] = None; x['claim_expires'] = 0
json.dump(d, open(sys.argv[1], 'w'), indent=2)
PY
check "start after the record was dropped: claims the free device for the domain and programs it again" \
    eval "avn start d1 >'$W/s2.out' 2>'$W/s2.err' && [ \"\$(runs)\" = 2 ] && [ ! -s '$W/s2.err' ] && grep -q \"^started domain 'd1'\" '$W/s2.out'"
check "  ... recorded by start, claimed for d1 with an expiry, marked as programmed for the claim" \
    pool "dev['0000:6b:00.1']['programmed']['by'] == 'start' and dev['0000:6b:00.1']['state'] == 'claimed' and dev['0000:6b:00.1']['owner']['domain_uuid'] == '$UUID1' and dev['0000:6b:00.1']['claim_expires'] > 0 and dev['0000:6b:00.1']['claim_programmed'] is True"

# --- the placement prefers a device that holds the bitstream ---
check "accelvirt program puts crc on 0000:6b:00.4 by hand" eval "av program 0000:6b:00.4 crc >/dev/null 2>&1 && [ \"\$(runs)\" = 3 ]"
dom "$W/d2.xml" d2 "$UUID2" 'bitstream="crc"'
check "a second domain asking for crc gets 0000:6b:00.4, which holds it (not 0000:6b:00.2), and nothing runs" \
    eval "av define '$W/d2.xml' >'$W/d2.out' 2>&1 && grep -q \"0000:6b:00.4 (vf 3 of PF 0000:6b:00.0): already holds 'crc'\" '$W/d2.out' && [ \"\$(runs)\" = 3 ]"
dom "$W/plain.xml" plain "$UUID3"
check "a request without a bitstream is placed as before (0000:6b:00.2) and programs nothing" \
    eval "av rewrite --dry-run '$W/plain.xml' >'$W/plain.out' 2>'$W/plain.err' && grep -q 'address=\"0000:6b:00.2\"' '$W/plain.out' && ! grep -q bitstream= '$W/plain.out' && [ ! -s '$W/plain.err' ]"

# --- failures give the claims back ---
touch "$FAIL"
dom "$W/d3.xml" d3 "$UUID3" 'bitstream="crc"'
check "a program that fails: define fails with one line, the domain is not defined" \
    one_line 1 "programming 0000:6b:00.2 with 'crc' failed" av define "$W/d3.xml"
check "  ... its claim given back dirty (the card may hold part of the image), what it holds unknown, no placement record; journalled not ok" \
    eval "pool \"dev['0000:6b:00.2']['state'] == 'dirty' and 'programmed' not in dev['0000:6b:00.2'] and 'claim_programmed' not in dev['0000:6b:00.2'] and '$UUID3' not in rec\" && journal \"not [e for e in es if e['event'] == 'program'][-1]['ok']\" && worker_ran"
# The worker scrubs it (scrub "none" here): free again.
python3 - "$W/state/pool.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d['devices']:
    if x['address'] == '0000:6b:00.2':
        x['state'] = 'free'; x['owner'] = None; x['reason'] = None
json.dump(d, open(sys.argv[1], 'w'), indent=2)
PY
rm -f "$FAIL"

# --- on_assign ---
check "with on_assign: define programs, then runs on_assign with the device, the domain and the bitstream" \
    eval "av2 define '$W/d3.xml' >/dev/null 2>&1 && grep -q '^assign: 0000:6b:00.2 d3 $W/state/bitstreams/$CRC.bit$' '$ALOG' && grep -q '^ACCELVIRT_POINT=on_assign$' '$ALOG' && pool \"dev['0000:6b:00.2']['state'] == 'claimed' and dev['0000:6b:00.2']['programmed']['sha256'] == '$CRC'\""
check "  ... journalled as a driver event, ok" \
    journal "[e for e in es if e['event'] == 'driver'][-1]['point'] == 'on_assign' and [e for e in es if e['event'] == 'driver'][-1]['ok'] and [e for e in es if e['event'] == 'driver'][-1]['by'] == 'assign'"
touch "$AFAIL"
dom "$W/d4.xml" d4 5eed1500-0000-4000-8000-000000000004 'bitstream="crc"'
check "an on_assign that fails: define fails with one line" \
    one_line 1 "the on_assign command of profile 'fvf' for 0000:6b:00.3 failed" av2 define "$W/d4.xml"
check "  ... its claims given back (dirty: programmed for it): nothing claimed for d4, no placement record" \
    pool "not [x for x in d['devices'] if x.get('owner') and x['owner'].get('domain_uuid') == '5eed1500-0000-4000-8000-000000000004' and x['state'] != 'dirty'] and dev['0000:6b:00.3']['state'] == 'dirty' and '5eed1500-0000-4000-8000-000000000004' not in rec"
rm -f "$AFAIL"

# --- claims that lapse: dirty where a program ran for them, else free ---
# 6b:00.1 was programmed by start for d1, 6b:00.2 by define for d3; d2's
# 6b:00.4 held crc already (the operator's program), nothing ran for d2.
python3 - "$W/state/pool.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["devices"]:
    if x["state"] == "claimed":
        x["claim_expires"] = 1
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
rm -f "$AV_TMP/worker-ran"
check "claims lapse: reconcile says which end dirty (a program ran for the domain) and which free" \
    eval "av reconcile >'$W/lapse.out' 2>'$W/lapse.err' && grep -q '^claim expired: 0000:6b:00.1 .*(domain .d1.): dirty (programmed for the domain), the worker scrubs it$' '$W/lapse.out' && grep -q '^claim expired: 0000:6b:00.2 .*(domain .d3.): dirty' '$W/lapse.out' && grep -q '^claim expired: 0000:6b:00.4 .*(domain .d2.): free$' '$W/lapse.out' && worker_ran"
check "  ... in the pool: the programmed ones dirty, what they hold unknown, owner kept for the certificate; the other free, holding crc" \
    pool "dev['0000:6b:00.1']['state'] == 'dirty' and 'programmed' not in dev['0000:6b:00.1'] and dev['0000:6b:00.1']['owner']['domain_uuid'] == '$UUID1' and 'claim_programmed' not in dev['0000:6b:00.1'] and dev['0000:6b:00.2']['state'] == 'dirty' and dev['0000:6b:00.4']['state'] == 'free' and dev['0000:6b:00.4']['programmed']['sha256'] == '$CRC'"
check "  ... journalled claim-expired, to dirty with the reason" \
    journal "[e['to'] for e in es if e['event'] == 'claim-expired' and e['address'] == '0000:6b:00.1'] == ['dirty'] and 'programmed for the claim' in [e for e in es if e['event'] == 'claim-expired' and e['address'] == '0000:6b:00.1'][0]['reason']"

# --- a claim lost while an earlier device's commands ran: nothing runs on it ---
# (the earlier domains' devices scrubbed, as the worker would: test:///default
# keeps no domain)
python3 - "$W/state/pool.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["devices"]:
    if x["state"] in ("claimed", "dirty"):
        x.update(state="free", owner=None, claim_expires=0, reason=None)
        x.pop("claim_programmed", None)
d["placements"] = []
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
: >"$LOG"
dom "$W/d5.xml" d5 5eed1500-0000-4000-8000-000000000005 'bitstream="crc"'
sed -i 's/count="1"/count="2"/' "$W/d5.xml"
touch "$AV_TMP/steal"
check "the second device's claim gone while the first's on_assign ran: define fails, one line, nothing run on it" \
    eval "one_line 1 'is no longer claimed for domain .d5. (its claim expired?): nothing was run on it' av2 define '$W/d5.xml' && [ \"\$(runs)\" -le 1 ] && T1=\$(python3 -c \"import json; print(' '.join(x['address'] for x in json.load(open('$W/state/pool.json'))['devices'] if x.get('owner') and x['owner']['domain_name'] == 'thief'))\") && [ -n \"\$T1\" ] && for a in \$T1; do ! grep -q \"^argv: \$a \" '$LOG' || exit 1; done"

# --- a tenant's name is no option ---
dom "$W/dash.xml" "-x" 5eed1500-0000-4000-8000-000000000006 'bitstream="crc"'
check "a domain named '-x': {domain_name} has no value, on_assign fails with one line, claims given back (dirty: programmed first)" \
    eval "one_line 2 'names .{domain_name}., which has no value here' av2 define '$W/dash.xml' && pool \"not [x for x in d['devices'] if x.get('owner') and x['owner'].get('domain_name') == '-x' and x['state'] != 'dirty']\""

# --- a card-only program: no request may split the card ---
POL3="$AV_TMP/policies-card"
mkdir -p "$POL3"
cat >"$POL3/10-card.json" <<JSON
{"profiles": [
  {"name": "fcard", "match": {"vendor": "0x10ee", "device": "0x5005"}, "attach": "vfio-pci", "granularity": "card",
   "numa": "none", "restore_driver": "on-release", "scrub": [{"method": "none"}],
   "program": {"argv": ["$BIN/programmer", "--card", "{card}", "{bitstream}"], "driver": "host"}}
]}
JSON
chmod 0755 "$POL3" && chmod 0644 "$POL3/10-card.json"
dom "$W/split.xml" split 5eed1500-0000-4000-8000-000000000007 'granularity="function"' fcard
check "a request of granularity function for a profile whose program names only the card: refused, one line" \
    unchanged one_line 2 "asks for granularity 'function', but the profile's program names only the card" \
    "$AV" --root "$H" --policy-dir "$POL3" --state-dir "$W/state" --connect test:///default define "$W/split.xml"

finish
