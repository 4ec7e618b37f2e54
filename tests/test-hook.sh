#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the libvirt hook and its scrub worker on private copies of
# the fake hosts, with the emulated kernel behind them (the hook picks it for
# any root other than "/").  libvirtd does not pass ACCELVIRT_*: the hook is
# run here as a wrapper would run it, with the variables set.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
AV=$ACCELVIRT
HOOK=$ACCELVIRT_HOOK
SCRUB="$AV_TEST_SRCDIR/data/hook-scrub.sh"

# The test policies, with the scrub command's absolute path filled in.
POL="$AV_TMP/policies"
hook_policies "$POL"

# world NAME HOST: a fresh world $W: a private copy of the fake HOST, its
# state dir (not created), its log.
world() {
    W="$AV_TMP/$1"
    rm -rf "$W"
    mkdir -p "$W"
    cp -a "$AV_TEST_HOSTS/$2" "$W/host"
}

# hook XML ARGS...: runs the hook of world $W with XML on stdin.
hook() {
    xml=$1; shift
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" \
    AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" \
        "$HOOK" "$@" <"$xml"
}

# mkdom FILE NAME UUID [DEVICE...] [-- EXTRA-XML]: a domain XML with one
# hostdev per DEVICE: "ADDRESS" (managed='no'), "ADDRESS:yes" (managed='yes'),
# "mdev:UUID" (with an av:placement entry naming the profile test-vgpu, as
# accelvirt's CLI writes it).  EXTRA-XML goes into <domain> (vcpu, cputune, numatune).
mkdom() {
    python3 - "$@" <<'PY'
import sys
out, name, uuid = sys.argv[1:4]
devs, extra = [], ""
rest = sys.argv[4:]
if "--" in rest:
    i = rest.index("--")
    devs, extra = rest[:i], " ".join(rest[i + 1:])
else:
    devs = rest
hd, placed = [], []
for d in devs:
    if d.startswith("mdev:"):
        placed.append("<av:mdev profile='test-vgpu' uuid='%s'/>" % d[5:])
        hd.append("<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='%s'/></source></hostdev>" % d[5:])
        continue
    managed = "no"
    if d.endswith(":yes"):
        d, managed = d[:-4], "yes"
    dom, bus, sf = d.split(":")
    slot, fn = sf.split(".")
    hd.append("<hostdev mode='subsystem' type='pci' managed='%s'><source><address domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/></source></hostdev>" % (managed, dom, bus, slot, fn))
if placed:
    extra += "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement>%s</av:placement></av:accelerators></metadata>" % "".join(placed)
if "<vcpu" not in extra:
    extra = "<vcpu placement='static'>2</vcpu>" + extra
open(out, "w").write("<domain type='kvm'>\n  <name>%s</name>\n  <uuid>%s</uuid>\n  <memory unit='GiB'>4</memory>\n  %s\n  <devices>\n    %s\n  </devices>\n</domain>\n" % (name, uuid, extra, "\n    ".join(hd)))
PY
}

# uuid N: a distinct domain UUID for the number N.
uuid() { printf '%08x-0000-4000-8000-%012x' "$1" "$1"; }

# status: the pool of $W as JSON in $W/st.json.
status() { "$AV" --state-dir "$W/state" status --no-sync --json >"$W/st.json"; }

# driver ADDRESS: the driver ADDRESS is bound to in $W, or "none".
driver() {
    l="$W/host/sys/bus/pci/devices/$1/driver"
    if [ -L "$l" ]; then basename "$(readlink "$l")"; else echo none; fi
}

# drivers: every device's driver in $W, one line each (to compare states).
drivers() {
    for d in "$W"/host/sys/bus/pci/devices/*; do echo "$(basename "$d") $(driver "$(basename "$d")")"; done
}

# refused PATTERN ARGS...: the hook exits 1 with exactly one stderr line
# "accelvirt: ...PATTERN..." and nothing on stdout.
refused() {
    pat=$1; shift
    expect_exit 1 hook "$@" || return 1
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -q "^accelvirt: .*$pat" "$AV_TMP/err" || { echo "no '$pat' in:"; cat "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/out" ] || { echo "stdout not empty:"; cat "$AV_TMP/out"; return 1; }
}

# accepted ARGS...: the hook exits 0 and writes nothing on stderr.
accepted() {
    expect_exit 0 hook "$@" || return 1
    [ ! -s "$AV_TMP/err" ] || { echo "stderr not empty:"; cat "$AV_TMP/err"; return 1; }
}

# wait_state ADDRESS STATE: polls the pool until ADDRESS is in STATE (20 s).
wait_state() {
    i=0
    while [ $i -lt 200 ]; do
        status
        if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if [x['state'] for x in d['devices'] if x['address']==sys.argv[2] and x['kind']=='pci'] == [sys.argv[3]] else 1)" "$W/st.json" "$1" "$2"; then
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "$1 is not $2 after 20 s:"; cat "$W/st.json"; cat "$W/log" 2>/dev/null
    return 1
}

# wait_gone IDENTITY: polls until IDENTITY is not in the pool (20 s).
wait_gone() {
    i=0
    while [ $i -lt 200 ]; do
        status
        if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(1 if [x for x in d['devices'] if x['identity']==sys.argv[2]] else 0)" "$W/st.json" "$1"; then
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "$1 still in the pool after 20 s:"; cat "$W/st.json"; cat "$W/log" 2>/dev/null
    return 1
}

# same_pool FILE: the pool of $W is FILE's, the scans' last_seen aside.
same_pool() {
    python3 - "$W/state/pool.json" "$1" <<'PY' || { diff "$W/state/pool.json" "$1"; return 1; }
import json, sys
def load(f):
    p = json.load(open(f))
    for d in p["devices"]:
        d.pop("last_seen", None)
    return p
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
PY
}

# verify: the journal of $W keeps its chain.
verify() { "$AV" --state-dir "$W/state" journal verify >/dev/null; }

U1=$(uuid 1); U2=$(uuid 2); U3=$(uuid 3)

# --- a whole life: prepare, refusal of a second domain, release, scrub ---
world life two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0 -- "<vcpu placement='static' cpuset='0-3'>2</vcpu>"
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
check "prepare binds an A100 of a managed='no' hostdev" accepted "$W/vm1.xml" vm1 prepare begin -
check "  ... to vfio-pci, with /dev/vfio/40" eval "[ \"\$(driver 0000:17:00.0)\" = vfio-pci ] && [ -e '$W/host/dev/vfio/40' ]"
status
check "  ... in-use in the pool, owned by vm1, its original driver nvidia" json "$W/st.json" \
    "[(x['state'], x['owner']['domain_name'], x['owner']['domain_uuid'], x['original_driver']) for x in d['devices'] if x['address'] == '0000:17:00.0'] == [('in-use', 'vm1', '$U1', 'nvidia')]"
check "  ... and the other GPUs stay free and bound to their drivers" eval "[ \"\$(driver 0000:31:00.0)\" = nvidia ] && python3 -c \"import json; d=json.load(open('$W/st.json')); assert sum(x['state']=='free' for x in d['devices']) == 7\""
check "a second domain wanting it is refused with one line naming its state and owner" \
    refused "device 0000:17:00.0 .* is in-use, owner domain 'vm1' ($U1)" "$W/vm2.xml" vm2 prepare begin -
check "start begin accepts vm1, pinned to node 0 (strict NUMA)" accepted "$W/vm1.xml" vm1 start begin -
check "release end of vm2 (refused, owns nothing) is a no-op" \
    eval "cp '$W/state/pool.json' '$W/p0' && cp '$W/state/journal.jsonl' '$W/j0' && accepted '$W/vm2.xml' vm2 release end - && cmp '$W/state/pool.json' '$W/p0' && cmp '$W/state/journal.jsonl' '$W/j0'"
check "release end of vm1 returns at once with the device dirty or already being scrubbed" \
    eval "accepted '$W/vm1.xml' vm1 release end - && status && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:17:00.0'][0] in ('dirty','scrubbing','free')\""
check "  ... the worker scrubs it and frees it" wait_state 0000:17:00.0 free
check "  ... with its driver back to nvidia" eval "[ \"\$(driver 0000:17:00.0)\" = nvidia ]"
check "  ... the scrub command got the address and the IOMMU group" grep -qx -- "--test 0000:17:00.0 40" "$W/scrub.log"
check "  ... and the journal has its transitions and the scrub, chain intact" \
    eval "verify && grep -q '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' && grep -q '\"to\": *\"dirty\"' '$W/state/journal.jsonl'"
check "vm2 gets it now" accepted "$W/vm2.xml" vm2 prepare begin -

# --- the RTX A6000: its audio function goes with it ---
world a6000 two-socket-8gpu
mkdom "$W/vm.xml" vm "$U1" 0000:98:00.0
check "prepare of an A6000 binds both functions of its IOMMU group" \
    eval "accepted '$W/vm.xml' vm prepare begin - && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ] && [ \"\$(driver 0000:98:00.1)\" = vfio-pci ] && [ -e '$W/host/dev/vfio/44' ]"
check "  ... remembering the audio function's driver" json "$W/state/pool.json" \
    "[x.get('companions') for x in d['devices'] if x['address'] == '0000:98:00.0'] == [[{'address': '0000:98:00.1', 'original_driver': 'snd_hda_intel'}]]"
check "  ... start begin only warns for a preferred NUMA profile" \
    eval "accepted '$W/vm.xml' vm start begin - && grep -q 'warning: .*NUMA node 1' '$W/log'"
check "  ... release and scrub restore both" \
    eval "accepted '$W/vm.xml' vm release end - && wait_state 0000:98:00.0 free && [ \"\$(driver 0000:98:00.0)\" = nvidia ] && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"

# --- the trap: a GPU whose IOMMU group holds the host's NIC ---
world trap trap-shared-group
mkdom "$W/vm.xml" vm "$U1" 0000:04:00.0
drivers >"$W/drivers.before"
check "the trap host's GPU is refused, naming the NIC of its group" refused "0000:05:00.0" "$W/vm.xml" vm prepare begin -
check "  ... nothing was bound" eval "drivers | cmp - '$W/drivers.before'"
check "  ... and nothing claimed" json "$W/state/pool.json" "all(x['state'] == 'free' for x in d['devices'])"
check "  ... its release end changes nothing" \
    eval "cp '$W/state/pool.json' '$W/p0' && accepted '$W/vm.xml' vm release end - && cmp '$W/state/pool.json' '$W/p0'"

# --- the host's NIC as function 1 of the GPU's own slot (issue 10, hole 1) ---
world trapslot trap-shared-group
mkdom "$W/vm.xml" vm "$U1" 0000:06:00.0
drivers >"$W/drivers.before"
check "a GPU whose own slot's second function is the host's NIC (ice) is refused with one line naming it" \
    refused "IOMMU group 14 also holds '0000:06:00.1' .*driver ice" "$W/vm.xml" vm prepare begin -
check "  ... no driver changed: the NIC stays on ice, the audio on snd_hda_intel, the GPU on nvidia" \
    eval "drivers | cmp - '$W/drivers.before' && [ \"\$(driver 0000:06:00.1)\" = ice ]"
check "  ... and nothing was claimed" json "$W/state/pool.json" "all(x['state'] == 'free' and x['owner'] is None for x in d['devices'])"

# --- what accelvirt does not manage ---
world plain two-socket-8gpu
mkdom "$W/none.xml" plain "$U1"
check "a domain without hostdevs passes every operation and creates no state" \
    eval "accepted '$W/none.xml' plain prepare begin - && accepted '$W/none.xml' plain start begin - && accepted '$W/none.xml' plain release end - && [ ! -e '$W/state' ] && [ ! -e '$W/log' ]"
mkdom "$W/nic.xml" nicvm "$U1" 0000:02:00.0
check "a hostdev no profile names (the NIC) is never touched" \
    eval "accepted '$W/nic.xml' nicvm prepare begin - && [ \"\$(driver 0000:02:00.0)\" = i40e ] && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert all(x['state']=='free' for x in d['devices']) and not [x for x in d['devices'] if x['address']=='0000:02:00.0']\""
check "unknown operations exit 0" accepted "$W/nic.xml" nicvm frobnicate begin -
check "migrate begin gives the XML back unchanged" \
    eval "hook '$W/nic.xml' nicvm migrate begin - >'$W/mig.out' && cmp '$W/mig.out' '$W/nic.xml'"
check "restore begin gives the XML back unchanged" \
    eval "hook '$W/nic.xml' nicvm restore begin - >'$W/res.out' && cmp '$W/res.out' '$W/nic.xml'"

# --- the fast path (issue 12, item 2; issue 19): a domain accelvirt has
# nothing to do with (no hostdev it may manage, none of its metadata, the
# pool names nothing of it) costs no lock, no scan, no policy, no pool read,
# no log, and nothing else in its XML can refuse it ---
world fast two-socket-8gpu
mkdom "$W/gpu.xml" gpu "$U2" 0000:17:00.0
mkdom "$W/gpu-detached.xml" gpu "$U2"
hook "$W/gpu.xml" gpu prepare begin - >/dev/null 2>&1
check "the pool's domain index names the domain that holds a device, and no other" \
    eval "[ -f '$W/state/domains/$U2' ] && [ \"\$(ls '$W/state/domains')\" = '$U2' ]"
# Valid libvirt input accelvirt does not act on: issue 19's examples (CPU ids
# above 8191, a count with a leading zero, NUMA nodes above 1023), hostdevs
# no profile can manage, foreign metadata, a Nova owner id of another form.
cat >"$W/odd.xml" <<ODDXML
<domain type='kvm'>
  <name>odd vm.1</name>
  <uuid>$U1</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static' cpuset='0-3,16000-16383'>02</vcpu>
  <iothreads>1</iothreads>
  <cputune>
    <vcpupin vcpu='0' cpuset='0,16383'/>
    <vcpupin vcpu='1' cpuset='9000'/>
    <emulatorpin cpuset='0-9000'/>
    <iothreadpin iothread='1' cpuset='12000'/>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='0,2048'/>
    <memnode cellid='0' mode='strict' nodeset='4095'/>
  </numatune>
  <metadata>
    <other:x xmlns:other='urn:example:other:1'><other:y/></other:x>
    <nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='not an id/x'>u</nova:user></nova:owner></nova:instance>
  </metadata>
  <devices>
    <hostdev mode='subsystem' type='scsi_host'><source protocol='vhost' wwpn='naa.5001405df3e54061'/></hostdev>
    <hostdev mode='subsystem' type='scsi'><source><adapter name='scsi_host0'/><address bus='0' target='0' unit='0'/></source></hostdev>
    <hostdev mode='capabilities' type='storage'><source><block>/dev/sdf1</block></source></hostdev>
    <interface type='network'><source network='default'/></interface>
  </devices>
</domain>
ODDXML
# The state such a call must not touch: the pool lock held, pool.json
# unreadable as JSON, the policies unreadable, no sysfs at all.
mkdir -p "$W/empty" "$W/badpol" && printf '{' >"$W/badpol/10-bad.json" && chmod 0755 "$W/badpol"
cp "$W/state/pool.json" "$W/pool.good" && printf '{' >"$W/state/pool.json"
fast_hook() {
    xml=$1; shift
    ACCELVIRT_ROOT="$W/empty" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$W/badpol" \
    ACCELVIRT_WORKER=/bin/false ACCELVIRT_LOG_FILE="$W/fastlog" ACCELVIRT_TEST_LOCK_TIMEOUT_MS=300 \
        "$HOOK" "$@" <"$xml"
}
hold_pool_lock "$W/state"
# fast OP SUB: the call passes: exit 0, nothing on stdout or stderr.
fast() {
    fast_hook "$W/odd.xml" "odd vm.1" "$1" "$2" - >"$AV_TMP/out" 2>"$AV_TMP/err" || { echo "exit $?"; cat "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/out" ] && [ ! -s "$AV_TMP/err" ] || { cat "$AV_TMP/out" "$AV_TMP/err"; return 1; }
}
check "with the lock held, the pool and the policies unreadable and no sysfs, a domain the pool does not name passes prepare begin" fast prepare begin
check "  ... start begin" fast start begin
check "  ... started begin" fast started begin
check "  ... release end" fast release end
check "  ... reconnect begin" fast reconnect begin
check "  ... migrate begin, the XML back byte for byte" \
    eval "fast_hook '$W/odd.xml' 'odd vm.1' migrate begin - >'$W/mig.out' 2>'$AV_TMP/err' && cmp '$W/mig.out' '$W/odd.xml' && [ ! -s '$AV_TMP/err' ]"
check "  ... restore begin, the XML back byte for byte" \
    eval "fast_hook '$W/odd.xml' 'odd vm.1' restore begin - >'$W/res.out' 2>'$AV_TMP/err' && cmp '$W/res.out' '$W/odd.xml' && [ ! -s '$AV_TMP/err' ]"
check "  ... and logged nothing" eval "[ ! -e '$W/fastlog' ]"
check "the same call of the domain the pool names (its device detached while it ran) goes the long way: refused here" \
    eval "fast_hook '$W/gpu-detached.xml' gpu release end - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ] && [ \$(wc -l <'$AV_TMP/err') -eq 1 ]"
check "a domain that names a managed device goes the long way: refused here" \
    eval "fast_hook '$W/gpu.xml' gpu prepare begin - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ] && [ \$(wc -l <'$AV_TMP/err') -eq 1 ]"
sed "s|</metadata>|<av:accelerators xmlns:av='urn:accelvirt:domain:1'/></metadata>|" "$W/odd.xml" >"$W/odd-av.xml"
check "so does one with accelvirt's metadata (whose strict parse still refuses issue 19's values)" \
    eval "fast_hook '$W/odd-av.xml' 'odd vm.1' prepare begin - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ] && grep -q 'accelvirt: refusing the domain XML' '$AV_TMP/err'"
for t in "type='pci' managed='yes'" "type='mdev' model='vfio-pci'" "type='usb'" "type='frobnicate'"; do
    sed "s|<hostdev mode='subsystem' type='scsi_host'>|<hostdev mode='subsystem' $t>|" "$W/odd.xml" >"$W/odd-hd.xml"
    check "so does one with a hostdev $t" \
        eval "fast_hook '$W/odd-hd.xml' 'odd vm.1' start begin - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ]"
done
sed "s|<interface type='network'><source network='default'/>|<interface type='hostdev'><source><address type='pci' domain='0' bus='2' slot='0' function='1'/></source>|" "$W/odd.xml" >"$W/odd-if.xml"
check "so does one with an interface type='hostdev'" \
    eval "fast_hook '$W/odd-if.xml' 'odd vm.1' start begin - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ]"
mkdom "$W/plain.xml" plain "$U3"
check "a DOMAIN argument that is not the XML's name goes the long way too (refused)" \
    eval "fast_hook '$W/plain.xml' other prepare begin - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ] && grep -q \"called for domain 'other'\" '$AV_TMP/err'"
let_go_pool_lock
cp "$W/pool.good" "$W/state/pool.json"
check "the detached device's domain, released the long way, gets its device dirty, scrubbed and free" \
    eval "accepted '$W/gpu-detached.xml' gpu release end - && wait_state 0000:17:00.0 free"
check "  ... and the index no longer names it" eval "[ ! -e '$W/state/domains/$U2' ] && [ -z \"\$(ls '$W/state/domains')\" ]"

# A state dir of an older accelvirt: a pool without the index.  What the
# pool names cannot be told without reading it: the long way, until a save
# makes the index (with the names of the pool on disk and of the new one).
world upgrade two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm1-detached.xml" vm1 "$U1"
mkdom "$W/vm2.xml" vm2 "$U2" 0000:31:00.0
mkdom "$W/plain.xml" plain "$U3"
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
rm -r "$W/state/domains"
check "without the index, a release of a domain whose device was detached still releases it" \
    eval "accepted '$W/vm1-detached.xml' vm1 release end - && wait_state 0000:17:00.0 free"
check "  ... a domain without devices passes" accepted "$W/plain.xml" plain release end -
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
rm -r "$W/state/domains"
check "the next save makes the index whole, naming the pool's domains before and after it" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && [ -f '$W/state/domains/$U1' ] && [ -f '$W/state/domains/$U2' ] && [ ! -e '$W/state/domains.new' ] && [ \"\$(ls '$W/state/domains' | wc -l)\" -eq 2 ]"
rm -r "$W/state/domains" && printf 'not a directory' >"$W/state/domains"
check "a domain index that is not a directory stops a save, with one line saying to move it away" \
    refused "the domain index '.*' is not a directory; move it away" "$W/vm1.xml" vm1 release end -
rm "$W/state/domains" && mkdir "$W/state/domains.new" && printf 'x' >"$W/state/domains.new/left-over"
check "  ... moved away, the release is carried out and the index made again (a domains.new left over is replaced)" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:31:00.0 free && wait_state 0000:17:00.0 free && [ -d '$W/state/domains' ] && [ ! -e '$W/state/domains.new' ]"

# --- bad input: one line, no state change ---
world bad two-socket-8gpu
printf '<?xml version="1.0"?>\n<!DOCTYPE domain [<!ENTITY x "y">]>\n<domain><name>evil</name><uuid>%s</uuid><devices/></domain>\n' "$U1" >"$W/doctype.xml"
check "a DOCTYPE is refused with one line, and no state is created" \
    eval "refused 'DOCTYPE' '$W/doctype.xml' evil prepare begin - && [ ! -e '$W/state' ]"
sed "s/bus='0x17'/bus='..\/..'/" >"$W/badaddr.xml" <<EOF
$(mkdom /dev/stdout evil "$U1" 0000:17:00.0)
EOF
check "a bad PCI address is refused with one line, and no state is created" \
    eval "refused 'bus' '$W/badaddr.xml' evil prepare begin - && [ ! -e '$W/state' ]"
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
check "a DOMAIN argument that is not the XML's name is refused" \
    eval "refused \"called for domain 'other'\" '$W/vm1.xml' other prepare begin - && [ ! -e '$W/state' ]"
check "too few arguments are refused with one line" \
    eval "expect_exit 1 hook '$W/vm1.xml' vm1 prepare && [ \$(wc -l <'$AV_TMP/err') -eq 1 ] && grep -q '^accelvirt: usage' '$AV_TMP/err'"

# --- Nova: managed='yes' hostdevs, owner from its metadata ---
world nova two-socket-8gpu
NOVA="$AV_TEST_SRCDIR/data/domains/nova-instance.xml"
check "a Nova domain (managed='yes' A100) is prepared" accepted "$NOVA" instance-0000002a prepare begin -
check "  ... libvirt binds managed='yes' devices itself: accelvirt leaves the driver" eval "[ \"\$(driver 0000:17:00.0)\" = nvidia ]"
check "  ... the owner is the Nova instance, project and user" json "$W/state/pool.json" \
    "[x['owner'] for x in d['devices'] if x['address'] == '0000:17:00.0'] == [{'domain_uuid': 'a1f6e0f4-2c9b-4a57-8d3e-6b1f0c2d9e77', 'domain_name': 'instance-0000002a', 'nova_instance': 'a1f6e0f4-2c9b-4a57-8d3e-6b1f0c2d9e77', 'nova_project': '9f8e7d6c5b4a49382716050403020100', 'nova_user': '4c5a1d2e8f9b4e3a9d7c6b5a4f3e2d1c'}]"
check "  ... its strict NUMA check passes (vCPUs pinned to 4-7, node 0)" accepted "$NOVA" instance-0000002a start begin -
check "  ... released, scrubbed and free again, still on nvidia" \
    eval "accepted '$NOVA' instance-0000002a release end - && wait_state 0000:17:00.0 free && [ \"\$(driver 0000:17:00.0)\" = nvidia ]"

# --- strict NUMA ---
world numa two-socket-8gpu
mkdom "$W/free.xml" vm "$U1" 0000:17:00.0
mkdom "$W/wrong.xml" vm "$U1" 0000:17:00.0 -- "<vcpu placement='static'>2</vcpu><cputune><vcpupin vcpu='0' cpuset='16'/><vcpupin vcpu='1' cpuset='17'/></cputune>"
mkdom "$W/right.xml" vm "$U1" 0000:17:00.0 -- "<vcpu placement='static'>2</vcpu><cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='33'/></cputune>"
hook "$W/free.xml" vm prepare begin - >/dev/null 2>&1
check "strict NUMA: unpinned vCPUs are refused, naming the node, its CPUs and what to add" \
    refused "NUMA node 0 (CPUs 0-15,32-47).*not pinned.*<vcpupin> or <vcpu cpuset='0-15,32-47'>" "$W/free.xml" vm start begin -
check "strict NUMA: vCPUs pinned to the other node are refused at started too" \
    refused "may run on CPUs 16-17, outside the node" "$W/wrong.xml" vm started begin -
check "strict NUMA: vCPUs pinned on the device's node are accepted" accepted "$W/right.xml" vm start begin -

# --- mdevs on the vGPU host ---
world vgpu vgpu-mdev
M1=6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c
M2=7f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0d
mkdom "$W/vm.xml" vgpu "$U1" "mdev:$M1"
check "prepare creates the mdev the XML names" \
    eval "accepted '$W/vm.xml' vgpu prepare begin - && [ -e '$W/host/sys/bus/mdev/devices/$M1' ]"
check "  ... on the parent already running its type, recorded in-use as kind mdev" json "$W/state/pool.json" \
    "[(x['kind'], x['address'], x['state'], x['owner']['domain_uuid'], x['created']) for x in d['devices'] if x['identity'] == 'mdev:$M1'] == [('mdev', '0000:17:00.0', 'in-use', '$U1', True)]"
check "  ... release removes it, and the worker drops it from the pool" \
    eval "accepted '$W/vm.xml' vgpu release end - && [ ! -e '$W/host/sys/bus/mdev/devices/$M1' ] && wait_gone 'mdev:$M1' && verify"
mkdom "$W/node1.xml" vgpu1 "$U2" "mdev:$M2" -- "<numatune><memory mode='strict' nodeset='1'/></numatune>"
check "an mdev of a domain bound to node 1 is created on node 1's A10" \
    eval "accepted '$W/node1.xml' vgpu1 prepare begin - && [ -e '$W/host/sys/bus/mdev/devices/$M2' ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['address'] for x in d['devices'] if x['identity']=='mdev:$M2'] == ['0000:98:00.0']\""

# --- rollback: the emulated kernel fails a write ---
world rollback two-socket-8gpu
mkdom "$W/vm.xml" vm "$U1" 0000:98:00.0
hook "$W/vm.xml" vm release end - >/dev/null 2>&1
drivers >"$W/drivers.before"
echo "fail /sys/bus/pci/drivers/snd_hda_intel/unbind 16" >"$W/host/sys/.accelvirt-fake-kernel"
check "a kernel failure at the second function of a group refuses prepare with one line" \
    refused "cannot bind '0000:98:00.1' to vfio-pci" "$W/vm.xml" vm prepare begin -
check "  ... the first function is back on nvidia: every driver as before" eval "drivers | cmp - '$W/drivers.before'"
check "  ... and the pool holds no claim, the journal no transition" \
    eval "python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert all(x['state']=='free' and x['owner'] is None for x in d['devices'])\" && ! grep -q '\"event\": *\"transition\"' '$W/state/journal.jsonl' && verify"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... and the next prepare succeeds" accepted "$W/vm.xml" vm prepare begin -

world mrollback vgpu-mdev
echo 1 >"$W/host/sys/bus/pci/devices/0000:17:00.0/mdev_supported_types/nvidia-590/available_instances"
echo "fail *0000:98:00.0/mdev_supported_types/nvidia-590/create 28" >"$W/host/sys/.accelvirt-fake-kernel"
mkdom "$W/vm.xml" vm "$U1" "mdev:$M1" "mdev:$M2"
check "a failed second mdev creation refuses prepare" refused "cannot create mdev $M2" "$W/vm.xml" vm prepare begin -
check "  ... and removes the first mdev again, the pool without mdevs" \
    eval "[ ! -e '$W/host/sys/bus/mdev/devices/$M1' ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert not [x for x in d['devices'] if x['kind']=='mdev']\""

# --- a failing scrub quarantines ---
world quarantine two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:31:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:31:00.0
touch "$W/scrub-fail"
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm1.xml" vm1 release end - >/dev/null 2>&1
check "a failing scrub command quarantines the device" wait_state 0000:31:00.0 quarantined
check "  ... with the step, its method and the command's output as the reason" json "$W/st.json" \
    "[x['reason'] for x in d['devices'] if x['address'] == '0000:31:00.0'][0].startswith(\"scrub step 1 (command) failed: '$SCRUB' exited with status 3: simulated failure scrubbing --test 0000:31:00.0 41\")"
check "  ... it stays on vfio-pci (never back to the host unscrubbed)" eval "[ \"\$(driver 0000:31:00.0)\" = vfio-pci ]"
check "  ... and the next prepare is refused, naming the state" refused "0000:31:00.0 .* is quarantined" "$W/vm2.xml" vm2 prepare begin -
# A managed='yes' card is back on its host driver after release (libvirt
# gave it back); a command step does not need vfio-pci: quarantined, it
# still goes to vfio-pci, away from the host's driver (found in the VM rig).
hook "$NOVA" instance-0000002a prepare begin - >/dev/null 2>&1
check "a Nova (managed='yes') A100 whose command-only scrub fails is quarantined on vfio-pci, not on its host driver" \
    eval "[ \"\$(driver 0000:17:00.0)\" = nvidia ] && accepted '$NOVA' instance-0000002a release end - && wait_state 0000:17:00.0 quarantined && [ \"\$(driver 0000:17:00.0)\" = vfio-pci ] && grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep -q '\"isolated_from\": *\"nvidia\"'"

# --- scrub steps that cannot run quarantine too ---
world hang two-socket-8gpu
mkdom "$W/vm.xml" vm "$U1" 0000:e3:00.0 -- "<vcpu placement='static' cpuset='16'>1</vcpu>"
mkdom "$W/a6.xml" a6 "$U2" 0000:98:00.0
touch "$W/hang"
hang() {
    AV_SCRUB_HANG="$W/hang" hook "$W/a6.xml" a6 prepare begin - >/dev/null 2>&1 || return 1
    AV_SCRUB_HANG="$W/hang" hook "$W/a6.xml" a6 release end - >/dev/null 2>&1 || return 1
    wait_state 0000:98:00.0 quarantined
}
check "a scrub command that outlives its timeout is killed and the device quarantined" hang
check "  ... the reason names the timeout" json "$W/st.json" \
    "'killed after its timeout of 2 s' in [x['reason'] for x in d['devices'] if x['address'] == '0000:98:00.0'][0]"
check "  ... and nothing of it is left running" eval "! ps -eo args | grep -q '[h]ook-scrub.sh 0000:98:00.0'"
world qat sriov-fpga-qat
mkdom "$W/vm.xml" vm "$U1" 0000:6b:00.1
check "a QAT VF is prepared on qat_vfio_pci (the variant its kernel's modules.alias offers), released" \
    eval "accepted '$W/vm.xml' vm prepare begin - && [ \"\$(driver 0000:6b:00.1)\" = qat_vfio_pci ] && accepted '$W/vm.xml' vm release end -"
check "  ... and scrubbed by its profile's 'reset' step: free again" wait_state 0000:6b:00.1 free
check "  ... its certificate names the reset that worked" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | grep '0000:6b:00.1' | grep -q '\"reset_method\": *\"flr\"'"

check "  ... and given back to its host driver 4xxxvf after the scrub (restore_driver on-release)" \
    eval "[ \"\$(driver 0000:6b:00.1)\" = 4xxxvf ]"

# --- vfio-pci variants (issue 36): the driver modules.alias offers, or the profile's ---
world variant sriov-fpga-qat
mkdom "$W/vm.xml" vm "$U1" 0000:6b:00.3
check "a QAT VF the operator left on plain vfio-pci (0000:6b:00.2) stays there at prepare: no unbind of a device a process may hold" \
    eval "mkdom '$W/vm2.xml' vm2 '$U2' 0000:6b:00.2 && accepted '$W/vm2.xml' vm2 prepare begin - && [ \"\$(driver 0000:6b:00.2)\" = vfio-pci ] && ! grep -q 'bound 0000:6b:00.2' '$W/log'"
check "  ... and the hook's log says it stays, that the kernel offers qat_vfio_pci, and what the operator can do" \
    grep -q "warning: domain 'vm2': 0000:6b:00.2 stays on vfio-pci, where it already was, though the running kernel's modules.alias offers qat_vfio_pci.*bind 0000:6b:00.2 to it while no domain has it" "$W/log"
drivers >"$W/drivers.before"
rm -rf "$W/host/sys/bus/pci/drivers/qat_vfio_pci" "$W/host/sys/module/qat_vfio_pci"
check "the variant its kernel offers is not loaded: prepare refused in one line naming the module to load" \
    refused "cannot bind '0000:6b:00.3' to qat_vfio_pci: the module qat_vfio_pci is not loaded.*run 'modprobe qat_vfio_pci', or write \"vfio_driver\": \"vfio-pci\" in a profile that matches it" "$W/vm.xml" vm prepare begin -
check "  ... nothing touched: every driver as before, the VF free" \
    eval "drivers | cmp - '$W/drivers.before' && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:6b:00.3'] == ['free'] and 'intents' not in d\""
VPOL="$AV_TMP/policies-variant"
mkdir -p "$VPOL" && chmod 0755 "$VPOL"
sed 's/"attach": "sriov-vf"/"attach": "sriov-vf", "vfio_driver": "vfio-pci"/' "$POL/10-gpu.json" >"$VPOL/10-gpu.json"
for f in "$POL"/*.json; do [ "$(basename "$f")" = 10-gpu.json ] || cp "$f" "$VPOL/"; done
# with_vpol CMD...: CMD with the hook reading $VPOL instead of $POL.
with_vpol() { saved_pol=$POL; POL=$VPOL; "$@"; rc=$?; POL=$saved_pol; return $rc; }
check "  ... a profile with \"vfio_driver\": \"vfio-pci\" takes plain vfio-pci instead, as its operator chose" \
    eval "with_vpol accepted '$W/vm.xml' vm prepare begin - && [ \"\$(driver 0000:6b:00.3)\" = vfio-pci ]"
check "a profile naming a variant whose aliases do not name the device (mlx5_vfio_pci for a QAT VF) is refused in one line, nothing touched" \
    eval "sed 's/\"vfio_driver\": \"vfio-pci\"/\"vfio_driver\": \"mlx5_vfio_pci\"/' '$VPOL/10-gpu.json' >'$VPOL/10-gpu.json.new' && mv '$VPOL/10-gpu.json.new' '$VPOL/10-gpu.json' && mkdom '$W/vm3.xml' vm3 '$U3' 0000:6b:00.4 && drivers >'$W/drivers.before' && with_vpol refused \"cannot bind '0000:6b:00.4' to mlx5_vfio_pci: the running kernel's modules.alias names no device of its ids for mlx5_vfio_pci\" '$W/vm3.xml' vm3 prepare begin - && drivers | cmp - '$W/drivers.before'"

# --- NVIDIA vGPU on VFs: vgpu-sriov's two L40S (4 VFs each, on nvidia) ---
GPOL="$AV_TMP/policies-vgpu"
mkdir -p "$GPOL" && chmod 0755 "$GPOL"
cat >"$GPOL/10-l40s.json" <<'GPOLEOF'
{"profiles": [
  {"name": "l40s-2q", "match": {"vendor": "0x10de", "address": ["0000:17:00.1", "0000:17:00.2", "0000:98:00.1"]},
   "attach": "sriov-vf", "vgpu_type": "L40S-2Q", "numa": "none", "scrub": [{"method": "reset"}]},
  {"name": "l40s-4q", "match": {"vendor": "0x10de", "device": "0x26b9"}, "attach": "sriov-vf",
   "vgpu_type": "NVIDIA L40S-4Q", "numa": "none", "scrub": [{"method": "reset"}]}
]}
GPOLEOF
chmod 0644 "$GPOL/10-l40s.json"
with_gpol() { saved_pol=$POL; POL=$GPOL; "$@"; rc=$?; POL=$saved_pol; return $rc; }
vgpu_of() { cat "$W/host/sys/bus/pci/devices/$1/nvidia/current_vgpu_type"; }
world vgpu vgpu-sriov
mkdom "$W/a.xml" a "$U1" 0000:17:00.1
mkdom "$W/b.xml" b "$U2" 0000:17:00.3
mkdom "$W/c.xml" c "$U3" 0000:17:00.2
check "a vGPU VF (profile l40s-2q): prepare makes its vGPU, L40S-2Q (1156), and leaves the VF on nvidia" \
    eval "with_gpol accepted '$W/a.xml' a prepare begin - && [ \"\$(vgpu_of 0000:17:00.1)\" = 1156 ] && [ \"\$(driver 0000:17:00.1)\" = nvidia ] && grep -q 'made a vGPU of type NVIDIA L40S-2Q (1156) on 0000:17:00.1' '$W/log'"
drivers >"$W/drivers.before"
check "  ... another type (L40S-4Q) on the same GPU is refused in one line naming what the GPU offers; nothing changes" \
    eval "with_gpol refused \"cannot make a vGPU of type 'NVIDIA L40S-4Q' on 0000:17:00.3: its GPU offers NVIDIA L40S-2Q (1156) now\" '$W/b.xml' b prepare begin - && [ \"\$(vgpu_of 0000:17:00.3)\" = 0 ] && drivers | cmp - '$W/drivers.before' && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:17:00.3'] == ['free'] and 'intents' not in d\""
check "  ... the same type on a sibling VF is made" \
    eval "with_gpol accepted '$W/c.xml' c prepare begin - && [ \"\$(vgpu_of 0000:17:00.2)\" = 1156 ]"
check "  ... released: dirty, scrubbed (reset), its vGPU destroyed after the scrub, free" \
    eval "with_gpol accepted '$W/a.xml' a release end - && wait_state 0000:17:00.1 free && [ \"\$(vgpu_of 0000:17:00.1)\" = 0 ]"
check "  ... its certificate names the reset and the vGPU it destroyed, and says what accelvirt cannot read" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | grep '0000:17:00.1' | grep '\"vgpu-destroy\"' | grep -q 'destroyed the vGPU of type 1156.*cannot read'"
check "  ... and the VF never left nvidia" eval "[ \"\$(driver 0000:17:00.1)\" = nvidia ]"
check "  ... with every vGPU of the GPU gone, it offers L40S-4Q again" \
    eval "with_gpol accepted '$W/c.xml' c release end - && wait_state 0000:17:00.2 free && with_gpol accepted '$W/b.xml' b prepare begin - && [ \"\$(vgpu_of 0000:17:00.3)\" = 1157 ]"
avg() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$GPOL" --state-dir "$W/state" "$@"; }
mkdom "$W/y.xml" y "$U3" 0000:98:00.4:yes
check "a vGPU VF as a managed='yes' hostdev is refused in one line (libvirt would take it off NVIDIA's driver)" \
    eval "with_gpol refused \"device 0000:98:00.4 has the profile 'l40s-4q' (an NVIDIA vGPU VF), and its <hostdev> says managed='yes'\" '$W/y.xml' y prepare begin - && [ \"\$(vgpu_of 0000:98:00.4)\" = 0 ]"
mkdom "$W/f.xml" f "$(uuid 71)" 0000:98:00.1
echo "fail *0000:98:00.1/reset 5" >"$W/host/sys/.accelvirt-fake-kernel"
check "a vGPU VF whose scrub fails (its reset): quarantined, its vGPU still made (the destroy comes last)" \
    eval "with_gpol accepted '$W/f.xml' f prepare begin - && with_gpol accepted '$W/f.xml' f release end - && wait_state 0000:98:00.1 quarantined && [ \"\$(vgpu_of 0000:98:00.1)\" = 1156 ]"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... quarantine clear refuses it in one line while its vGPU is made, and it stays quarantined" \
    eval "! avg quarantine clear 0000:98:00.1 >'$AV_TMP/out' 2>'$AV_TMP/err' && [ \"\$(wc -l <'$AV_TMP/err')\" -eq 1 ] && grep -q \"still has an NVIDIA vGPU (type 1156).*run 'accelvirt scrub 0000:98:00.1' first\" '$AV_TMP/err' && wait_state 0000:98:00.1 quarantined"
check "  ... accelvirt scrub destroys it (its last step), then the clear frees it" \
    eval "avg scrub 0000:98:00.1 >/dev/null && [ \"\$(vgpu_of 0000:98:00.1)\" = 0 ] && avg quarantine clear 0000:98:00.1 >/dev/null && wait_state 0000:98:00.1 free"
echo 1157 >"$W/host/sys/bus/pci/devices/0000:98:00.2/nvidia/current_vgpu_type"
check "a free vGPU VF with a vGPU accelvirt did not make: reconcile quarantines it, saying what to run" \
    eval "avg reconcile >/dev/null && wait_state 0000:98:00.2 quarantined && status && json '$W/st.json' \"'did not make' in [x['reason'] for x in d['devices'] if x['address'] == '0000:98:00.2'][0]\""
check "a profile that is not a vGPU one never binds a VF NVIDIA's vGPU Manager serves to vfio-pci: refused in one line" \
    eval "mkdir -p '$AV_TMP/gplain' && chmod 0755 '$AV_TMP/gplain' && printf '%s' '{\"profiles\": [{\"name\": \"plain-vf\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x26b9\"}, \"attach\": \"sriov-vf\", \"numa\": \"none\", \"scrub\": [{\"method\": \"reset\"}]}]}' >'$AV_TMP/gplain/10.json' && chmod 0644 '$AV_TMP/gplain/10.json' && saved_pol=\$POL && POL='$AV_TMP/gplain' && mkdom '$W/p.xml' pl '$(uuid 72)' 0000:98:00.3 && refused \"cannot bind '0000:98:00.3' to vfio-pci: it is a VF NVIDIA's vGPU Manager serves\" '$W/p.xml' pl prepare begin -; rc=\$?; POL=\$saved_pol; [ \$rc = 0 ] && [ \"\$(driver 0000:98:00.3)\" = nvidia ]"
check "a policy with vgpu_type beside vfio_driver is refused by policy check in one line" \
    eval "mkdir -p '$AV_TMP/gbad' && chmod 0755 '$AV_TMP/gbad' && sed 's/\"vgpu_type\": \"L40S-2Q\",/\"vgpu_type\": \"L40S-2Q\", \"vfio_driver\": \"vfio-pci\",/' '$GPOL/10-l40s.json' >'$AV_TMP/gbad/10.json' && chmod 0644 '$AV_TMP/gbad/10.json' && ! ACCELVIRT_POLICY_DIR='$AV_TMP/gbad' '$AV' policy check >'$AV_TMP/out' 2>'$AV_TMP/err' && grep -q \"'vgpu_type' cannot be used with 'vfio_driver'\" '$AV_TMP/err'"

# --- reconnect: the running domain's claims are recorded, never fatal ---
world reconnect two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:4b:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:4b:00.0
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
hook "$W/vm1.xml" vm1 release end - >/dev/null 2>&1
check "reconnect of a domain using a device another domain holds logs an error and exits 0" \
    eval "accepted '$W/vm1.xml' vm1 reconnect begin - && grep -q 'error: .*reconnect: .*0000:4b:00.0.*vm2' '$W/log'"
mkdom "$W/vm3.xml" vm3 "$U3" 0000:65:00.0
check "reconnect of a domain using a free device records it in-use" \
    eval "accepted '$W/vm3.xml' vm3 reconnect begin - && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [(x['state'], x['owner']['domain_uuid']) for x in d['devices'] if x['address']=='0000:65:00.0'] == [('in-use', '$U3')]\" && verify"

# --- concurrency: 32 hooks for 32 domains racing for 8 GPUs ---
world race two-socket-8gpu
GPUS="0000:17:00.0 0000:31:00.0 0000:4b:00.0 0000:65:00.0 0000:98:00.0 0000:b1:00.0 0000:ca:00.0 0000:e3:00.0"
n=0
for g in $GPUS; do
    for k in 1 2 3 4; do
        n=$((n + 1))
        mkdom "$W/race$n.xml" "race$n" "$(uuid $((100 + n)))" "$g"
    done
done
race() {
    # 32 hooks queue on the pool's lock: under the sanitizer build on a busy
    # 2-core machine the last one can wait past the hook's 60 s, which is not
    # what this test is about (who wins, and that the others are refused).
    for i in $(seq 1 32); do
        (export ACCELVIRT_TEST_LOCK_TIMEOUT_MS=300000
         hook "$W/race$i.xml" "race$i" prepare begin - >"$W/race$i.out" 2>"$W/race$i.err"; echo $? >"$W/race$i.rc") &
    done
    wait
    ok=$(cat "$W"/race*.rc | grep -cx 0)
    [ "$ok" -eq 8 ] || { echo "$ok prepares succeeded, not 8"; cat "$W"/race*.err; return 1; }
    for i in $(seq 1 32); do
        if [ "$(cat "$W/race$i.rc")" -ne 0 ]; then
            [ "$(wc -l <"$W/race$i.err")" -eq 1 ] && grep -q '^accelvirt: .*is in-use, owner' "$W/race$i.err" || { echo "race$i:"; cat "$W/race$i.err"; return 1; }
        fi
    done
    python3 - "$W" <<'PY' || return 1
import json, sys
w = sys.argv[1]
d = json.load(open(w + "/state/pool.json"))
gpus = [x for x in d["devices"] if x["kind"] == "pci"]
assert len(gpus) == 8, gpus
assert all(x["state"] == "in-use" for x in gpus), [x["state"] for x in gpus]
owners = [x["owner"]["domain_name"] for x in gpus]
assert len(set(owners)) == 8, owners
winners = [i for i in range(1, 33) if open("%s/race%d.rc" % (w, i)).read().strip() == "0"]
assert sorted(owners) == sorted("race%d" % i for i in winners), (owners, winners)
for x in gpus:
    n = int(x["owner"]["domain_name"][4:])
    assert (n - 1) // 4 == ["0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0", "0000:98:00.0", "0000:b1:00.0", "0000:ca:00.0", "0000:e3:00.0"].index(x["address"]), x
j = [json.loads(l) for l in open(w + "/state/journal.jsonl")]
inuse = [e for e in j if e.get("event") == "transition" and e.get("to") == "in-use"]
assert len(inuse) == 8, len(inuse)
PY
    verify
}
check "32 racing prepares: exactly 8 succeed, each GPU owned once, the others refused with one line, journal intact" race

# --- a hook killed mid-prepare, holding the lock ---
world kill two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:ca:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:ca:00.0
# stopped_at POINT XML NAME [OP SUB]: the hook's prepare (or OP SUB) of NAME,
# started in the background, stops itself (SIGSTOP) at the test point POINT
# (holding the pool lock when POINT comes after it is taken); its PID in
# STOPPED_PID, its stderr in $W/stopped.err.  killed_at: and it is killed
# there (SIGKILL).
stopped_at() {
    (
        export ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
               ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_TEST_STOP="$1" ACCELVIRT_LOG_FILE="$W/log"
        exec "$HOOK" "$3" "${4:-prepare}" "${5:-begin}" - <"$2" >/dev/null 2>"$W/stopped.err"
    ) &
    STOPPED_PID=$!
    i=0
    while [ "$(awk '{print $3}' /proc/$STOPPED_PID/stat 2>/dev/null)" != T ]; do
        i=$((i + 1)); [ $i -lt 200 ] || { echo "the hook never stopped at $1"; kill -9 $STOPPED_PID; return 1; }
        sleep 0.05
    done
}
killed_at() {
    stopped_at "$@" || return 1
    kill -9 $STOPPED_PID
    wait $STOPPED_PID 2>/dev/null
    return 0
}
killed() {
    # Stopped after binding, before recording anything, holding the lock.
    killed_at prepare-commit "$W/vm1.xml" vm1 || return 1
    [ "$(driver 0000:ca:00.0)" = vfio-pci ] || { echo "not bound when killed"; return 1; }
}
check "a hook killed with SIGKILL mid-prepare, holding the pool lock" killed
check "  ... left the pool whole: the device still free, the journal intact" \
    eval "python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:ca:00.0'] == ['free']\" && verify && ! ls '$W/state/' | grep -q tmp"
check "  ... the next prepare gets the lock its death released, and the device" \
    accepted "$W/vm2.xml" vm2 prepare begin -
check "  ... whose release gives it back to nvidia, the driver it had before the killed hook" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:ca:00.0 free && [ \"\$(driver 0000:ca:00.0)\" = nvidia ]"

# --- a prepare killed after it bound a companion or created an mdev (issue 10, hole 7) ---
world killcomp two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:98:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
check "an A6000's prepare killed after binding the card and its audio function" \
    eval "killed_at prepare-commit '$W/vm1.xml' vm1 && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ] && [ \"\$(driver 0000:98:00.1)\" = vfio-pci ]"
check "  ... left its write-ahead record in the pool: both functions and the drivers they had" json "$W/state/pool.json" \
    "[b for i in d['intents'] for b in i['binds']] == [{'address': '0000:98:00.0', 'original_driver': 'nvidia'}, {'address': '0000:98:00.1', 'original_driver': 'snd_hda_intel'}] and d['intents'][0]['domain_uuid'] == '$U1'"
check "  ... the next hook call (another domain's prepare) gives both back to their drivers from that record" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && [ \"\$(driver 0000:98:00.0)\" = nvidia ] && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"
check "  ... drops the record, journals 'rolled-back' with what it restored, and the chain holds" \
    eval "python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert 'intents' not in d\" && grep '\"event\": *\"rolled-back\"' '$W/state/journal.jsonl' | grep -q '0000:98:00.1' && verify"
check "  ... the card's next prepare records snd_hda_intel as the audio's driver, not vfio-pci" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['companions'] for x in d['devices'] if x['address']=='0000:98:00.0'] == [[{'address': '0000:98:00.1', 'original_driver': 'snd_hda_intel'}]]\""
check "  ... so its release and scrub give the audio back to snd_hda_intel" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:98:00.0 free && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"
world killfirst two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:98:00.0
drivers >"$W/drivers.before"
check "a prepare killed after binding the first function only (the second has not moved)" \
    eval "killed_at prepare-bound-first '$W/vm1.xml' vm1 && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ] && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"
check "  ... the release of an unrelated domain the pool names nothing of takes no lock and leaves it for later" \
    eval "mkdom '$W/x.xml' x '$U3' 0000:31:00.0 && accepted '$W/x.xml' x release end - && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ]"
check "  ... which is undone by the next call that takes the lock (the release libvirt sends for it): every driver as before" \
    eval "accepted '$W/vm1.xml' vm1 release end - && drivers | cmp - '$W/drivers.before'"
world killmdev vgpu-mdev
KM=5e2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0e
mkdom "$W/vm.xml" vgpu "$U1" "mdev:$KM"
mkdom "$W/vm2.xml" other "$U2" 0000:17:00.0
check "a prepare killed after creating its mdev leaves the mdev and its record" \
    eval "killed_at prepare-commit '$W/vm.xml' vgpu && [ -e '$W/host/sys/bus/mdev/devices/$KM' ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [m['uuid'] for i in d['intents'] for m in i['mdevs']] == ['$KM']\""
check "  ... the next hook call removes the mdev, and the pool knows none of it" \
    eval "hook '$W/vm2.xml' other prepare begin - >/dev/null 2>&1; [ ! -e '$W/host/sys/bus/mdev/devices/$KM' ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert 'intents' not in d and not [x for x in d['devices'] if x['kind']=='mdev']\" && verify"

# A vGPU made by a prepare killed before it finished (NVIDIA vGPU on VFs).
world vgpukill vgpu-sriov
mkdom "$W/k.xml" k "$U1" 0000:98:00.2
mkdom "$W/k2.xml" k2 "$U2" 0000:98:00.3
check "a prepare killed after it made its vGPU (L40S-4Q on 0000:98:00.2): the record names the VF" \
    eval "with_gpol killed_at prepare-commit '$W/k.xml' k && [ \"\$(vgpu_of 0000:98:00.2)\" = 1157 ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [i['vgpus'] for i in d['intents']] == [['0000:98:00.2']]\""
check "  ... the next hook call destroys it (no tenant ever had it), journals it, and the VF is free" \
    eval "with_gpol accepted '$W/k2.xml' k2 prepare begin - && [ \"\$(vgpu_of 0000:98:00.2)\" = 0 ] && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert 'intents' not in d and [x['state'] for x in d['devices'] if x['address']=='0000:98:00.2'] == ['free']\" && grep '\"rolled-back\"' '$W/state/journal.jsonl' | grep -q '\"vgpus_destroyed\": *\\[{\"address\": *\"0000:98:00.2\", *\"type\": *1157}' && verify"

# --- SR-IOV: VFs made again at prepare, the PF and its VFs (issue 13) ---
# sriov-fpga-qat: the QAT PF 0000:6b:00.0 (16 VFs, 0x4941) with 4 VFs; the
# profile qat-vf makes VFs on demand and shrinks them back, qat-pf passes
# the PF itself through.
SRIOV_POL="$AV_TMP/policies-sriov"
mkdir -p "$SRIOV_POL" && chmod 0755 "$SRIOV_POL"
cat >"$SRIOV_POL/10-qat.json" <<'SRIOVPOL'
{"profiles": [
  {"name": "qat-vf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf",
   "vfs": "on-demand", "vfs_shrink": true, "numa": "none",
   "scrub": [{"method": "reset"}, {"method": "vfio-zero"}]},
  {"name": "qat-pf", "match": {"vendor": "0x8086", "device": "0x4940"}, "attach": "vfio-pci",
   "granularity": "function", "numa": "none", "scrub": [{"method": "none"}]}
]}
SRIOVPOL
SAVED_POL=$POL
POL=$SRIOV_POL
QPF=0000:6b:00.0
# novfs: the VFs of the QAT PF in $W are gone, as after a reboot (sriov_numvfs 0).
novfs() { av_novfs "$W/host" "$QPF"; }
numvfs() { cat "$W/host/sys/bus/pci/devices/$QPF/sriov_numvfs"; }
# mkvfdom FILE NAME UUID ADDRESS INDEX: a domain with the VF INDEX of the QAT
# PF at ADDRESS, placed (av:device with pf= and vf=) as `accelvirt define` writes it.
mkvfdom() {
    b=${4#0000:}
    cat >"$1" <<VFDOM
<domain type='kvm'>
  <name>$2</name>
  <uuid>$3</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:request profile='qat-vf' count='1'/><av:placement><av:device profile='qat-vf' address='$4' pf='$QPF' vf='$5' alias='ua-accelvirt-0'/></av:placement></av:accelerators></metadata>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x${b%%:*}' slot='0x$(echo "$b" | cut -d: -f2 | cut -d. -f1)' function='0x${b##*.}'/></source><alias name='ua-accelvirt-0'/></hostdev>
  </devices>
</domain>
VFDOM
}
world vfmake sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
mkdom "$W/pf.xml" pfvm "$U2" "$QPF"
check "prepare of a domain whose VF is gone (sriov_numvfs 0) makes VFs 0 and 1 again and binds VF 1 to qat_vfio_pci" \
    eval "accepted '$W/vm.xml' vfvm prepare begin - && [ \"\$(numvfs)\" = 2 ] && [ \"\$(driver 0000:6b:00.2)\" = qat_vfio_pci ] && [ \"\$(driver 0000:6b:00.1)\" = none ]"
check "  ... sriov_drivers_autoprobe 0 written before sriov_numvfs" \
    eval "grep -o 'devices/$QPF/sriov_[a-z_]* [0-9]*' '$W/host/sys/.accelvirt-fake-kernel.writes' | tr '\n' ';' | grep -qx 'devices/$QPF/sriov_drivers_autoprobe 0;devices/$QPF/sriov_numvfs 2;'"
check "  ... VF 1 in use by the domain, VF 0 free, the write-ahead record gone" json "$W/state/pool.json" \
    "sorted((x['address'], x['state'], x['identity'].rsplit('/', 1)[1]) for x in d['devices'] if x['profile'] == 'qat-vf') == [('0000:6b:00.1', 'free', 'vf0'), ('0000:6b:00.2', 'in-use', 'vf1')] and 'intents' not in d"
check "  ... journalled: vfs-set from 0 to 2 by the domain's prepare, the chain intact" \
    eval "grep '\"event\": *\"vfs-set\"' '$W/state/journal.jsonl' >'$W/vfs-set.json' && json '$W/vfs-set.json' \"(d['pf'], d['from'], d['to'], d['by'], d['profile']) == ('$QPF', 0, 2, \\\"prepare of domain 'vfvm' ($U1)\\\", 'qat-vf')\" && verify"
# states: identity, state and owner of each pool device of $W (a scan's
# last_seen may change, what a refusal must not).
states() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sorted((x['identity'], x['state'], (x['owner'] or {}).get('domain_uuid')) for x in d['devices']), d.get('intents'))" "$W/state/pool.json"; }
states >"$W/s0"
check "the PF itself is refused while its VF is in use, in one line naming the VF" \
    refused "PF '$QPF' is not free: its VF '0000:6b:00.2' .* is in-use" "$W/pf.xml" pfvm prepare begin -
check "  ... nothing changed: the PF on 4xxx, the pool's states and owners as they were" \
    eval "[ \"\$(driver $QPF)\" = 4xxx ] && states | cmp - '$W/s0'"
check "release of the VF's domain: scrubbed (reset, vfio-zero), freed, then the PF shrinks back to 0 VFs" \
    eval "accepted '$W/vm.xml' vfvm release end - && wait_state 0000:6b:00.2 missing && [ \"\$(numvfs)\" = 0 ]"
check "  ... journalled: the scrub's certificate, then vfs-set from 2 to 0 by the worker" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | grep -q '0000:6b:00.2' && grep '\"event\": *\"vfs-set\"' '$W/state/journal.jsonl' | tail -1 >'$W/shrink.json' && json '$W/shrink.json' \"(d['from'], d['to'], d['by']) == (2, 0, 'worker')\" && verify"
check "  ... status shows the VFs that are gone as missing, their identities kept" \
    eval "status && json '$W/st.json' \"sorted((x['address'], x['state']) for x in d['devices'] if x['profile'] == 'qat-vf') == [('0000:6b:00.1', 'missing'), ('0000:6b:00.2', 'missing')]\""
check "the PF goes to a domain now that no VF is held" \
    eval "accepted '$W/pf.xml' pfvm prepare begin - && [ \"\$(driver $QPF)\" = vfio-pci ]"
check "  ... and no VF is made on it while it is in use: refused in one line, sriov_numvfs still 0" \
    eval "refused \"makes no VF on PF '$QPF': the PF itself is in-use\" '$W/vm.xml' vfvm prepare begin - && [ \"\$(numvfs)\" = 0 ]"

world vfkill sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
check "a prepare killed right after it wrote sriov_numvfs leaves the VFs and its record (vfs 0 -> 2)" \
    eval "killed_at prepare-vfs-made '$W/vm.xml' vfvm && [ \"\$(numvfs)\" = 2 ] && json '$W/state/pool.json' \"[v for i in d['intents'] for v in i['vfs']] == [{'pf': '$QPF', 'from': 0, 'to': 2}]\""
check "  ... the next call that takes the lock sets the count back to 0, journals rolled-back, drops the record" \
    eval "accepted '$W/vm.xml' vfvm release end - && [ \"\$(numvfs)\" = 0 ] && json '$W/state/pool.json' \"'intents' not in d\" && grep '\"event\": *\"rolled-back\"' '$W/state/journal.jsonl' | grep -q '\"numvfs\": *0' && verify"
world vfkill2 sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
check "a prepare killed after binding the new VF, before its commit, is undone too: VF unbound, count back to 0" \
    eval "killed_at prepare-commit '$W/vm.xml' vfvm && [ \"\$(driver 0000:6b:00.2)\" = qat_vfio_pci ] && accepted '$W/vm.xml' vfvm release end - && [ \"\$(numvfs)\" = 0 ] && [ ! -e '$W/host/sys/bus/pci/devices/0000:6b:00.2' ] && verify"
world vfbad sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.3 1
check "a placement whose VF index does not give the VF's address is refused in one line, nothing written" \
    eval "refused 'does not match the PF' '$W/vm.xml' vfvm prepare begin - && [ \"\$(numvfs)\" = 0 ] && [ ! -e '$W/host/sys/.accelvirt-fake-kernel.writes' ]"

# The reviewer's case: a tenant's placement names VF 4 (not made yet) of the
# PF that has 4 VFs on their drivers, and a second hostdev that gets refused.
# The hook changes no count that is not 0: refused before anything is written.
world vfgrow sriov-fpga-qat
drivers() { for f in 1 2 3 4; do printf '%s ' "$(driver 0000:6b:00.$f)"; done; }
autoprobe() { cat "$W/host/sys/bus/pci/devices/$QPF/sriov_drivers_autoprobe"; }
cat >"$W/t.xml" <<TDOM
<domain type='kvm'><name>tenant</name><uuid>$U1</uuid><memory unit='GiB'>1</memory><vcpu>1</vcpu>
<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement>
<av:device profile='qat-vf' address='0000:6b:00.5' pf='$QPF' vf='4' alias='ua-x0'/>
<av:mdev profile='nope' uuid='11111111-2222-4333-8444-555555555555' alias='ua-x1'/>
</av:placement></av:accelerators></metadata>
<devices>
<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x6b' slot='0x00' function='0x5'/></source><alias name='ua-x0'/></hostdev>
<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='11111111-2222-4333-8444-555555555555'/></source><alias name='ua-x1'/></hostdev>
</devices></domain>
TDOM
drivers >"$W/d0"
check "a placement naming a VF beyond the PF's 4 VFs: the hook grows no count that is not 0, refused in one line" \
    refused "PF $QPF has 4 VFs, and the hook makes VFs only on a PF that has none" "$W/t.xml" tenant prepare begin -
check "  ... nothing written: sriov_numvfs 4, autoprobe 1, every VF on its driver, the pool as it was" \
    eval "[ \"\$(numvfs)\" = 4 ] && [ \"\$(autoprobe)\" = 1 ] && drivers | cmp - '$W/d0' && [ ! -e '$W/host/sys/.accelvirt-fake-kernel.writes' ] && { [ ! -e '$W/state/pool.json' ] || json '$W/state/pool.json' \"'intents' not in d and all(x['state'] == 'free' for x in d['devices'])\"; }"
# A VF goes to no domain while its PF is held.
mkdom "$W/pf.xml" pfvm "$U2" "$QPF"
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
check "a VF of a PF in use by a domain is refused in one line naming the PF" \
    eval "accepted '$W/pf.xml' pfvm prepare begin - && refused \"its PF '$QPF' .* is in-use\" '$W/vm.xml' vfvm prepare begin -"

# A prepare that made VFs and then manages nothing: refused, the VFs taken
# back, no record left behind (the next call would take the VF from the
# running domain).  The new VF turns out another device than qat-vf's
# (changed while the prepare is stopped right after writing the count).
world vfnomgr sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
stopped_at prepare-vfs-made "$W/vm.xml" vfvm
echo 0x4943 >"$W/host/sys/bus/pci/devices/0000:6b:00.2/device"
kill -CONT "$STOPPED_PID"; wait "$STOPPED_PID"; RC=$?
check "a prepare whose new VF no profile manages is refused in one line, the count back to 0, no record left" \
    eval "[ $RC = 1 ] && [ \"\$(wc -l <'$W/stopped.err')\" = 1 ] && grep -q 'VF 0000:6b:00.2, which accelvirt made again .* is managed by no profile' '$W/stopped.err' && [ \"\$(numvfs)\" = 0 ] && json '$W/state/pool.json' \"'intents' not in d\" && verify"

# A record whose count is neither its from nor its to (a kill between the
# kernel's writes, another writer): still set back to from.
world vfundo sriov-fpga-qat
novfs
mkvfdom "$W/vm.xml" vfvm "$U1" 0000:6b:00.2 1
killed_at prepare-vfs-made "$W/vm.xml" vfvm
echo 1 >"$W/host/sys/bus/pci/devices/$QPF/sriov_numvfs"
check "the undo of a record 0 -> 2 finding 1 VF sets the count back to 0 and drops the record" \
    eval "accepted '$W/vm.xml' vfvm release end - && [ \"\$(numvfs)\" = 0 ] && json '$W/state/pool.json' \"'intents' not in d\" && verify"
POL=$SAVED_POL

# --- a release that cannot be refused (issue 10, hole 3) ---
# deep/big XML FILE NAME UUID ADDRESS: a domain whose metadata is nested too
# deep (300 levels) or too large (9 MiB) for the hook's parser.
mkdeep() {
    python3 - "$@" <<'PY'
import sys
out, kind, name, uuid, addr = sys.argv[1:6]
dom, bus, sf = addr.split(":"); slot, fn = sf.split(".")
meta = ("<x:a xmlns:x='urn:x'>" + "<x:a>" * 300 + "</x:a>" * 300 + "</x:a>") if kind == "deep" \
       else "<x:a xmlns:x='urn:x'>" + "y" * (9 * 1024 * 1024) + "</x:a>"
open(out, "w").write("<domain type='kvm'><name>%s</name><uuid>%s</uuid><metadata>%s</metadata><devices><hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/></source></hostdev></devices></domain>" % (name, uuid, meta, dom, bus, slot, fn))
PY
}
world unparsed two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:31:00.0
mkdeep "$W/deep.xml" deep vm1 "$U1" 0000:31:00.0
mkdeep "$W/big.xml" big vm1 "$U1" 0000:31:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:4b:00.0
check "a domain's XML nested too deep for the hook is refused at prepare, with one line" \
    refused "refusing the domain XML of 'vm1'" "$W/deep.xml" vm1 prepare begin -
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
check "release end of a running domain whose XML turned too deep to parse still releases its devices, by the name libvirt gives" \
    eval "accepted '$W/deep.xml' vm1 release end - && wait_state 0000:31:00.0 free && grep -q 'release end: the domain XML cannot be read' '$W/log'"
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
check "  ... and so does one too large (9 MiB), all of it read from libvirt's pipe" \
    eval "accepted '$W/big.xml' vm1 release end - && wait_state 0000:31:00.0 free"
check "  ... journalled released_by, the chain intact, no marker left" \
    eval "grep '\"to\": *\"dirty\"' '$W/state/journal.jsonl' | grep -q released_by && verify && [ -z \"\$(ls '$W/state/release-pending')\" ]"

world lockheld two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:4b:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:65:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hold_pool_lock "$W/state"
check "release end while the pool lock is held past the wait: one line, the release left for later in a marker" \
    eval "ACCELVIRT_TEST_LOCK_TIMEOUT_MS=300 hook '$W/vm1.xml' vm1 release end - >'$AV_TMP/out' 2>'$AV_TMP/err'; [ \$? -eq 1 ] && [ \$(wc -l <'$AV_TMP/err') -eq 1 ] && grep -q 'left for the next accelvirt call' '$AV_TMP/err' && ls '$W/state/release-pending/'*.json >/dev/null && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:4b:00.0'] == ['in-use']\""
let_go_pool_lock
check "  ... the next accelvirt call (another domain's prepare) carries it out: dirty, scrubbed, free, the marker gone" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && wait_state 0000:4b:00.0 free && [ -z \"\$(ls '$W/state/release-pending')\" ] && grep -q 'released_by\": *\"release-marker' '$W/state/journal.jsonl'"

world relkill two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:65:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:98:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
check "a release killed after journalling the move to dirty, before saving the pool" \
    eval "killed_at release-journalled '$W/vm1.xml' vm1 release end && grep -q '\"to\": *\"dirty\"' '$W/state/journal.jsonl' && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:65:00.0'] == ['in-use']\""
check "  ... is carried out by the next call from its marker: scrubbed and free, the journal's chain intact" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && wait_state 0000:65:00.0 free && verify"
mkdom "$W/vm3.xml" vm3 "$U3" 0000:ca:00.0
hook "$W/vm3.xml" vm3 prepare begin - >/dev/null 2>&1
check "a release killed before it took the lock (its marker written)" \
    eval "killed_at release-marked '$W/vm3.xml' vm3 release end && ls '$W/state/release-pending/'*.json >/dev/null"
check "  ... is carried out by the next call too" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:ca:00.0 free"

check "  ... and a release killed while it carried out another's marker, after journalling, is carried out by the next" \
    eval "hook '$W/vm3.xml' vm3 prepare begin - >/dev/null 2>&1 && killed_at release-marked '$W/vm3.xml' vm3 release end && killed_at upkeep-journalled '$W/vm2.xml' vm2 prepare begin && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:ca:00.0'] == ['in-use']\" && accepted '$W/vm2.xml' vm2 prepare begin - && wait_state 0000:ca:00.0 free && [ -z \"\$(ls '$W/state/release-pending')\" ] && verify"

# A release still in flight (its hook alive, waiting for the lock) is its
# own: another call leaves its marker alone, and the hook does the release
# itself, with no warning that it was "left for later".
world relinflight two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:65:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:98:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
stopped_at release-marked "$W/vm1.xml" vm1 release end
check "while vm1's release waits (its marker written), vm2's release leaves vm1's marker and device alone" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:98:00.0 free && ls '$W/state/release-pending/'*.json >/dev/null && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert [x['state'] for x in d['devices'] if x['address']=='0000:65:00.0'] == ['in-use']\""
kill -CONT "$STOPPED_PID"; wait "$STOPPED_PID"; RC=$?
check "  ... vm1's hook then releases its device itself (released_by hook), removes its marker, and logs no warning" \
    eval "[ $RC -eq 0 ] && [ ! -s '$W/stopped.err' ] && wait_state 0000:65:00.0 free && [ -z \"\$(ls '$W/state/release-pending')\" ] && ! grep -q 'release-marker' '$W/state/journal.jsonl' && ! grep -qE '(warning|error): ' '$W/log' && verify"

# set_since ADDRESS SECONDS: the pool says ADDRESS has been in its state since then.
set_since() {
    python3 - "$W/state/pool.json" "$1" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if d["address"] == sys.argv[2]:
        d["state_since"] = int(sys.argv[3])
json.dump(p, open(sys.argv[1], "w"), indent=2)
PY
}
world dead two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:b1:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
mkdom "$W/vm3.xml" vm3 "$U3" 0000:31:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm3.xml" vm3 prepare begin - >/dev/null 2>&1
G31=$(basename "$(readlink "$W/host/sys/bus/pci/devices/0000:31:00.0/iommu_group")")
mkdir -p "$W/host/run/libvirt/qemu" "$W/host/proc/4343/fd"
echo 4242 >"$W/host/run/libvirt/qemu/vm1.pid"
ln -s "/dev/vfio/$G31" "$W/host/proc/4343/fd/7"
set_since 0000:b1:00.0 1000; set_since 0000:31:00.0 1000
check "devices in use long past prepare whose domain still runs (libvirt's pid file; a process holding the group) stay in use" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [x['state'] for x in d['devices'] if x['address'] in ('0000:b1:00.0', '0000:31:00.0')] == ['in-use', 'in-use']\""
rm -f "$W/host/run/libvirt/qemu/vm1.pid"
check "  ... once vm1's QEMU is gone (no pid file, nothing on its group), the next call releases its device: scrubbed, free" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:b1:00.0 free && grep -q 'released_by\": *\"dead-domain' '$W/state/journal.jsonl' && grep -q \"domain 'vm1' is gone\" '$W/log'"
rm -rf "$W/host/proc/4343"
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
check "  ... but not a device that went in use a moment ago (its QEMU may not have started yet)" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [x['state'] for x in d['devices'] if x['address'] == '0000:b1:00.0'] == ['in-use']\""

world nodir two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:b1:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
set_since 0000:b1:00.0 1000
check "without libvirt's state dir (/run/libvirt/qemu) a missing pid file says nothing: the device long in use stays in use" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [x['state'] for x in d['devices'] if x['address'] == '0000:b1:00.0'] == ['in-use']\""

# --- the operator's release and reconcile ---
world oprel two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:e3:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
mkdir -p "$W/host/run/libvirt/qemu"; echo 1 >"$W/host/run/libvirt/qemu/vm1.pid"
avw() { ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
check "accelvirt release of a domain whose pid file says it runs is refused with one line, in use (exit 5), nothing changed" \
    eval "cp '$W/state/pool.json' '$W/p0' && expect_exit 5 avw release vm1 && [ \$(wc -l <'$AV_TMP/err') -eq 1 ] && grep -q \"^accelvirt: domain 'vm1' may still run\" '$AV_TMP/err' && same_pool '$W/p0'"
rm -f "$W/host/run/libvirt/qemu/vm1.pid"
# No pid file, but a process holds the device's IOMMU group (47) open: the
# domain may still run all the same.
mkdir -p "$W/host/proc/4242/fd" && ln -s /dev/vfio/47 "$W/host/proc/4242/fd/3"
check "  ... and with no pid file but a process holding the device's IOMMU group: in use too (exit 5), one line, nothing changed" \
    eval "expect_exit 5 avw release vm1 && [ \$(wc -l <'$AV_TMP/err') -eq 1 ] && grep -q \"^accelvirt: domain 'vm1' may still run with device 0000:e3:00.0\" '$AV_TMP/err' && same_pool '$W/p0'"
rm -rf "$W/host/proc"
check "accelvirt release vm1 (its QEMU gone): dirty, journalled with the operator, then scrubbed by the worker and free" \
    eval "avw release vm1 | grep -q \"released 0000:e3:00.0 .* of domain 'vm1': dirty, the worker scrubs it\" && wait_state 0000:e3:00.0 free && grep -q 'released_by\": *\"operator ' '$W/state/journal.jsonl'"
check "accelvirt release --force DEVICE (by address) of a domain that looks alive" \
    eval "echo 1 >'$W/host/run/libvirt/qemu/vm2.pid' && avw release --force 0000:17:00.0 >/dev/null && wait_state 0000:17:00.0 free"
check "accelvirt release --force with relative --root, --state-dir and --policy-dir: the worker it starts (in /) gets them absolute and frees the device" \
    eval "hook '$W/vm1.xml' vm1 prepare begin - >/dev/null 2>&1 && wait_state 0000:e3:00.0 in-use && (cd '$W' && ACCELVIRT_WORKER='$ACCELVIRT_WORKER' ACCELVIRT_LOG_FILE='$W/log' '$AV' --root host --policy-dir \"\$(realpath --relative-to='$W' '$POL')\" --state-dir state release --force vm1 >/dev/null) && wait_state 0000:e3:00.0 free"
check "accelvirt release of something that holds nothing: one line, exit 1" \
    eval "expect_exit 1 avw release vm1 && [ \$(wc -l <'$AV_TMP/err') -eq 1 ]"
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
set_since 0000:e3:00.0 1000
check "accelvirt reconcile releases the device of a domain whose QEMU is gone, says so, and its worker frees it" \
    eval "avw reconcile >'$W/rc.out' 2>'$W/rc.err' && grep -q 'reconciled' '$W/rc.out' && grep -q \"note: domain 'vm1' is gone\" '$W/rc.err' && wait_state 0000:e3:00.0 free && verify"

# --- a card whose identity changes while a domain holds it (issue 10, hole 2) ---
# set_dsn ADDRESS HEX: the card's firmware now reports another Device Serial
# Number (config space 0x104, where the fake trees keep it).
set_dsn() {
    python3 - "$W/host/sys/bus/pci/devices/$1/config" "$2" <<'PY'
import struct, sys
p, v = sys.argv[1], int(sys.argv[2], 16)
c = bytearray(open(p, "rb").read())
assert struct.unpack_from("<I", c, 0x100)[0] & 0xFFFF == 0x0003, "no DSN capability at 0x100"
struct.pack_into("<II", c, 0x104, v & 0xFFFFFFFF, v >> 32)
open(p, "wb").write(bytes(c))
PY
}
world idchange two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
mkdom "$W/vm3.xml" vm3 "$U3" 0000:31:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
set_dsn 0000:17:00.0 48b02d1a0000f00d
check "a card whose DSN changed while vm1 holds it stays in-use by vm1 under its new identity (the next scan: vm3's prepare)" \
    eval "accepted '$W/vm3.xml' vm3 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); x=[x for x in d['devices'] if x['address']=='0000:17:00.0']; assert [(y['state'], y['owner']['domain_name'], y['identity']) for y in x] == [('in-use', 'vm1', 'dsn:10de:20f1:48b02d1a0000f00d.f0')], x; assert 'identity changed from' in x[0]['identity_problem'] and \\\"while it was in-use by domain 'vm1'\\\" in x[0]['identity_problem']\""
check "  ... its address is never re-added as a free device: vm2 is refused it" \
    refused "device 0000:17:00.0 .* is in-use, owner domain 'vm1'" "$W/vm2.xml" vm2 prepare begin -
check "  ... journalled: identity-changed (old and new identity) and identity-problem" \
    eval "grep '\"event\": *\"identity-changed\"' '$W/state/journal.jsonl' | grep -q 'dsn:10de:20f1:48b02d1a000001c0.f0' && grep -q '\"event\": *\"identity-problem\"' '$W/state/journal.jsonl' && verify"
check "  ... vm1's release dirties it and the worker scrubs it, then quarantines it: never freed" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:17:00.0 quarantined && grep -qx -- '--test 0000:17:00.0 40' '$W/scrub.log'"
check "  ... the certificate says quarantined for its identity, and it stays on vfio-pci, away from the host's driver" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep -q '\"result\": *\"quarantined\".*identity changed' && [ \"\$(driver 0000:17:00.0)\" = vfio-pci ]"
check "  ... prepare refuses it, saying why" refused "0000:17:00.0 .* is quarantined.*identity changed from" "$W/vm2.xml" vm2 prepare begin -
check "  ... until the operator's quarantine clear: back on nvidia, free, the problem gone for good" \
    eval "'$AV' --root '$W/host' --policy-dir '$POL' --state-dir '$W/state' quarantine clear 0000:17:00.0 >/dev/null && [ \"\$(driver 0000:17:00.0)\" = nvidia ] && accepted '$W/vm2.xml' vm2 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [(x['state'], x.get('identity_problem')) for x in d['devices'] if x['address']=='0000:17:00.0'] == [('in-use', None)]\""
world idcopy two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:31:00.0
mkdom "$W/vm3.xml" vm3 "$U3" 0000:4b:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
set_dsn 0000:31:00.0 48b02d1a000001c0
check "vm2's card copying vm1's card's DSN: the next scan leaves both in use by their domains, the copy alone with an identity problem (vm1's card presents at its address what it did)" \
    eval "accepted '$W/vm3.xml' vm3 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); x=[(y['address'], y['state'], y['owner']['domain_name'], y['identity'] == 'dsn:10de:20f1:48b02d1a000001c0.f0', \\\"which is the device's at 0000:17:00.0\\\" in (y.get('identity_problem') or '')) for y in d['devices'] if y['address'] in ('0000:17:00.0', '0000:31:00.0')]; assert x == [('0000:17:00.0', 'in-use', 'vm1', True, False), ('0000:31:00.0', 'in-use', 'vm2', False, True)], x\""
check "  ... neither address shows a free device; vm1's release ends free (scrubbed), the copy's in quarantine" \
    eval "status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert len([y for y in d['devices'] if y['address'] in ('0000:17:00.0', '0000:31:00.0')]) == 2\" && accepted '$W/vm1.xml' vm1 release end - && accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:17:00.0 free && wait_state 0000:31:00.0 quarantined"

# The review's attacks on the anchoring: identities moved between cards.
U4=$(uuid 4)
world idswap two-socket-8gpu
mkdom "$W/vic.xml" victim "$U1" 0000:17:00.0
mkdom "$W/att.xml" attacker "$U2" 0000:31:00.0
mkdom "$W/other.xml" other "$U3" 0000:4b:00.0
mkdom "$W/att2.xml" attacker2 "$U4" 0000:17:00.0
hook "$W/vic.xml" victim prepare begin - >/dev/null 2>&1
hook "$W/att.xml" attacker prepare begin - >/dev/null 2>&1
# At one moment: an implant left in the victim's card gives it a fresh DSN,
# and the attacker's own card presents the victim's.
set_dsn 0000:17:00.0 48b02d1a0000f00d
set_dsn 0000:31:00.0 48b02d1a000001c0
check "two cards swapping identities at once: the next scan gives both an identity problem, neither shows as free" \
    eval "accepted '$W/other.xml' other prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); x=[y for y in d['devices'] if y['address'] in ('0000:17:00.0', '0000:31:00.0')]; assert all(y.get('identity_problem') for y in x) and not [y for y in x if y['state'] == 'free'], x\""
check "  ... after the victim's release, the victim's card goes to nobody: another domain is refused it, and it ends quarantined" \
    eval "accepted '$W/vic.xml' victim release end - && refused '0000:17:00.0 .* is quarantined' '$W/att2.xml' attacker2 prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [y['state'] for y in d['devices'] if y['address']=='0000:17:00.0' and y['state'] != 'missing'] == ['quarantined']\""
world idback two-socket-8gpu
mkdom "$W/att.xml" attacker "$U1" 0000:17:00.0
mkdom "$W/vic.xml" victim "$U2" 0000:17:00.0
mkdom "$W/other.xml" other "$U3" 0000:31:00.0
mkdom "$W/att2.xml" attacker2 "$U4" 0000:17:00.0
hook "$W/att.xml" attacker prepare begin - >/dev/null 2>&1
hook "$W/att.xml" attacker release end - >/dev/null 2>&1
wait_state 0000:17:00.0 free >/dev/null
# The attacker's firmware flips the card's DSN while it is free (its old
# identity goes missing, the card is a new free device), the victim gets
# it, then the firmware flips the DSN back while the victim runs.
set_dsn 0000:17:00.0 48b02d1a0000f00d
hook "$W/other.xml" other prepare begin - >/dev/null 2>&1; hook "$W/other.xml" other release end - >/dev/null 2>&1
hook "$W/vic.xml" victim prepare begin - >/dev/null 2>&1
set_dsn 0000:17:00.0 48b02d1a000001c0
# other's card is scrubbed before other wants it again below.
wait_state 0000:31:00.0 free >/dev/null
check "a card taking back the identity the pool keeps for a missing device, under a running victim: never found free" \
    eval "accepted '$W/other.xml' other prepare begin - && status && python3 -c \"import json; d=json.load(open('$W/st.json')); x=[y for y in d['devices'] if y['address']=='0000:17:00.0']; assert not [y for y in x if y['state'] == 'free'] and all(y.get('identity_problem') for y in x), x\""
check "  ... and after the victim's release nobody gets it unscrubbed" \
    eval "accepted '$W/vic.xml' victim release end - && sleep 1 && refused '0000:17:00.0' '$W/att2.xml' attacker2 prepare begin -"

# The review's attack on the records: one whose undo failed must keep its
# devices out of use, and never be undone from under a domain.
world stale two-socket-8gpu
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
mkdom "$W/vm3.xml" vm3 "$U3" 0000:31:00.0
killed_at prepare-commit "$W/vm1.xml" vm1 >/dev/null 2>&1
echo "fail /sys/bus/pci/drivers/nvidia/bind 16" >"$W/host/sys/.accelvirt-fake-kernel"
check "a dead prepare's record whose undo fails (nvidia will not take its card back) is kept, and prepare refuses its card, saying why" \
    eval "refused 'device 0000:17:00.0 .* is named by the record of a prepare of domain .vm1. that died, which accelvirt could not undo yet' '$W/vm2.xml' vm2 prepare begin - && python3 -c \"import json; d=json.load(open('$W/state/pool.json')); assert d['intents'][0]['undo_error']\""
check "  ... other domains go on meanwhile" accepted "$W/vm3.xml" vm3 prepare begin -
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... once nvidia takes it, the next call undoes the record and the card is given out again" \
    eval "accepted '$W/vm3.xml' vm3 release end - && [ \"\$(driver 0000:17:00.0)\" = nvidia ] && accepted '$W/vm2.xml' vm2 prepare begin -"

# --- a function the pool does not hold, of an IOMMU group it does (issue 10, hole 6) ---
world groupown two-socket-8gpu
mkdom "$W/gpu.xml" gpuvm "$U1" 0000:98:00.0
mkdom "$W/audio.xml" audiovm "$U2" 0000:98:00.1
mkdom "$W/audioy.xml" audioy "$U2" 0000:98:00.1:yes
mkdom "$W/audio3.xml" audio3 "$U3" 0000:98:00.1
hook "$W/gpu.xml" gpuvm prepare begin - >/dev/null 2>&1
cp "$W/state/pool.json" "$W/p0"; drivers >"$W/drivers.before"
check "a hostdev of the A6000's audio function (no pool device) while another domain holds the card is refused, naming both" \
    refused "0000:98:00.1 shares its IOMMU group with device 0000:98:00.0, which accelvirt holds: device 0000:98:00.0 .* is in-use, owner domain 'gpuvm'" "$W/audio.xml" audiovm prepare begin -
check "  ... also as managed='yes' (libvirt would bind it), and nothing changed" \
    eval "refused 'in-use, owner domain .gpuvm.' '$W/audioy.xml' audioy prepare begin - && same_pool '$W/p0' && drivers | cmp - '$W/drivers.before'"
check "with the card free again, a domain naming only its audio function gets the whole group" \
    eval "accepted '$W/gpu.xml' gpuvm release end - && wait_state 0000:98:00.0 free && accepted '$W/audio3.xml' audio3 prepare begin - && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ] && [ \"\$(driver 0000:98:00.1)\" = vfio-pci ]"
check "  ... the card in use by that domain, so nobody else can have it" \
    eval "status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [(x['state'], x['owner']['domain_name']) for x in d['devices'] if x['address']=='0000:98:00.0'] == [('in-use', 'audio3')]\" && refused \"0000:98:00.0 .* is in-use, owner domain 'audio3'\" '$W/gpu.xml' gpuvm prepare begin -"
check "  ... and its release scrubs the card and gives both functions back" \
    eval "accepted '$W/audio3.xml' audio3 release end - && wait_state 0000:98:00.0 free && [ \"\$(driver 0000:98:00.0)\" = nvidia ] && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"
touch "$W/scrub-fail"
hook "$W/gpu.xml" gpuvm prepare begin - >/dev/null 2>&1; hook "$W/gpu.xml" gpuvm release end - >/dev/null 2>&1
wait_state 0000:98:00.0 quarantined >/dev/null
check "a quarantined card's audio function is refused to every domain" \
    refused "0000:98:00.1 shares its IOMMU group with device 0000:98:00.0, which accelvirt holds: .* is quarantined" "$W/audio.xml" audiovm prepare begin -
rm -f "$W/scrub-fail"

# --- restore and migrate: the placement is checked, and remapped when needed ---

# mkplaced FILE NAME UUID ADDRESS: a domain accelvirt placed on the A100 at
# ADDRESS (node 0), as libvirt hands it to "restore begin" after a save:
# single quotes, a guest PCI address and <driver name='vfio'/> on the
# hostdev, the pinning and numatune accelvirt wrote.
mkplaced() {
    python3 - "$@" <<'PY'
import sys
out, name, uuid, addr = sys.argv[1:5]
dom, bus, sf = addr.split(":")
slot, fn = sf.split(".")
open(out, "w").write("""<domain type='kvm'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="test-a100" count="1"/>
      <av:placement node="0" pinned="yes" numatune="yes" hidden="no" vendor-id="no">
        <av:device profile="test-a100" address="%(addr)s" alias="ua-accelvirt-0"/>
      </av:placement>
    </av:accelerators>
  </metadata>
  <memory unit='KiB'>4194304</memory>
  <currentMemory unit='KiB'>4194304</currentMemory>
  <vcpu placement='static'>2</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='0-15,32-47'/>
    <vcpupin vcpu='1' cpuset='0-15,32-47'/>
    <emulatorpin cpuset='0-15,32-47'/>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='0'/>
  </numatune>
  <os>
    <type arch='x86_64' machine='pc-q35-8.2'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <driver name='vfio'/>
      <source>
        <address domain='0x%(dom)s' bus='0x%(bus)s' slot='0x%(slot)s' function='0x%(fn)s'/>
      </source>
      <alias name='ua-accelvirt-0'/>
      <address type='pci' domain='0x0000' bus='0x06' slot='0x00' function='0x0'/>
    </hostdev>
  </devices>
</domain>
""" % dict(name=name, uuid=uuid, addr=addr, dom=dom, bus=bus, slot=slot, fn=fn))
PY
}

# readdress OLD NEW: the card at OLD in world $W now enumerates at NEW (BDF
# re-enumeration after a hardware change, seed 003): its sysfs directory,
# every link naming it, and its bridge's bus numbers move; the card keeps
# its identity (its DSN).
readdress() {
    python3 - "$W/host" "$1" "$2" <<'PY'
import os, sys
root, old, new = sys.argv[1:4]
links = []
for dirpath, dirnames, filenames in os.walk(root):
    for n in dirnames + filenames:
        p = os.path.join(dirpath, n)
        if os.path.islink(p) and n == old:
            links.append(p)
real = os.path.realpath(os.path.join(root, "sys/bus/pci/devices", old))
os.rename(real, os.path.join(os.path.dirname(real), new))
for p in links:
    target = os.readlink(p).replace(old, new)
    os.unlink(p)
    os.symlink(target, os.path.join(os.path.dirname(p), new))
bridge = os.path.dirname(real)
bus = str(int(new.split(":")[1], 16))
for f in ("secondary_bus_number", "subordinate_bus_number"):
    if os.path.exists(os.path.join(bridge, f)):
        open(os.path.join(bridge, f), "w").write(bus + "\n")
PY
}

# host_side_only A B: the domain XMLs A and B are the same document but for
# host-side facts (quotes aside): the PCI hostdevs' <source><address>, the
# av:device addresses, the av:placement node, the pinning cpusets and the
# numatune nodeset.
host_side_only() {
    python3 - "$1" "$2" <<'PY'
import sys, xml.etree.ElementTree as ET
def norm(path):
    d = ET.parse(path).getroot()
    for h in d.iter("hostdev"):
        a = h.find("source/address")
        if a is not None and h.get("type") == "pci":
            for k in ("domain", "bus", "slot", "function"):
                a.set(k, "*")
    for e in d.iter("{urn:accelvirt:domain:1}device"):
        e.set("address", "*")
    for e in d.iter("{urn:accelvirt:domain:1}placement"):
        e.set("node", "*")
    for e in list(d.iter("vcpupin")) + list(d.iter("emulatorpin")):
        e.set("cpuset", "*")
    for e in d.iter("numatune"):
        for m in e.iter("memory"):
            m.set("nodeset", "*")
    return ET.tostring(d)
a, b = norm(sys.argv[1]), norm(sys.argv[2])
if a != b:
    print("more than the host side differs:"); print(a.decode()); print(b.decode()); sys.exit(1)
PY
}

# record_placed UUID NAME IDENTITY ADDRESS [PROFILE]: the pool of $W records
# what 'accelvirt define' placed for the domain (issue 10, hole 4): one
# request of PROFILE (test-a100), and ua-accelvirt-0 on that card, node 0.
record_placed() {
    python3 - "$W/state" "$@" <<'PY'
import json, os, sys
state, uuid, name, identity, address = sys.argv[1:6]
profile = sys.argv[6] if len(sys.argv) > 6 else "test-a100"
os.makedirs(state, mode=0o700, exist_ok=True)
path = os.path.join(state, "pool.json")
p = json.load(open(path)) if os.path.exists(path) else {"version": 1, "devices": []}
p["placements"] = [r for r in p.get("placements", []) if r["domain_uuid"] != uuid] + [{
    "domain_uuid": uuid, "domain_name": name, "numa_node": 0,
    "requests": [{"profile": profile, "count": 1, "granularity": None, "numa_any": False}],
    "devices": [{"profile": profile, "attach": "vfio-pci", "identity": identity, "address": address,
                 "mdev_uuid": None, "usb_bus_path": None, "numa_node": 0}]}]
json.dump(p, open(path, "w"), indent=2)
os.chmod(path, 0o600)
PY
}
A100_0=dsn:10de:20f1:48b02d1a000001c0.f0

# srcaddr FILE: the source address of ua-accelvirt-0 and its guest bus and slot.
srcaddr() { python3 -c "
import sys, xml.etree.ElementTree as ET
d = ET.parse(sys.argv[1]).getroot()
for h in d.iter('hostdev'):
    if h.find('alias').get('name') == 'ua-accelvirt-0':
        a = h.find('source/address'); g = h.find('address')
        print('%s:%s:%s.%s guest=%s:%s' % (a.get('domain')[2:], a.get('bus')[2:], a.get('slot')[2:], a.get('function')[2:], g.get('bus'), g.get('slot')))
" "$1"; }

world remap two-socket-8gpu
U4=$(uuid 4)
mkplaced "$W/placed.xml" placed "$U4" 0000:17:00.0
record_placed "$U4" placed "$A100_0" 0000:17:00.0
check "restore begin of a placed domain whose device is free prints the XML unchanged" \
    eval "accepted '$W/placed.xml' placed restore begin - && cmp '$AV_TMP/out' '$W/placed.xml'"
check "  ... and so does migrate begin" \
    eval "accepted '$W/placed.xml' placed migrate begin - && cmp '$AV_TMP/out' '$W/placed.xml'"
check "  ... claiming nothing" json "$W/state/pool.json" "all(x['state'] == 'free' for x in d['devices'])"
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
check "another domain takes its A100" accepted "$W/vm2.xml" vm2 prepare begin -
check "restore begin then remaps the domain to a free A100, guest address kept (pack: node 1, the fuller)" \
    eval "accepted '$W/placed.xml' placed restore begin - && cp '$AV_TMP/out' '$W/restored.xml' && \
          [ \"\$(srcaddr '$W/restored.xml')\" = '0000:ca:00.0 guest=0x06:0x00' ]"
check "  ... only host-side facts changed" host_side_only "$W/placed.xml" "$W/restored.xml"
check "  ... the vCPUs re-pinned and the memory bound to node 1, their count and size as they were" \
    eval "grep -q '<vcpu placement=\"static\">2</vcpu>' '$W/restored.xml' && grep -q '<memory unit=\"KiB\">4194304</memory>' '$W/restored.xml' && \
          [ \"\$(grep -c 'cpuset=\"16-31,48-63\"' '$W/restored.xml')\" = 3 ] && grep -q 'nodeset=\"1\"' '$W/restored.xml' && \
          grep -q 'node=\"1\" pinned=\"yes\" numatune=\"yes\"' '$W/restored.xml' && grep -q 'address=\"0000:ca:00.0\" alias=\"ua-accelvirt-0\"' '$W/restored.xml'"
check "  ... logging which device moved where" grep -q "ua-accelvirt-0 (profile 'test-a100') moved from 0000:17:00.0 to 0000:ca:00.0" "$W/log"
check "  ... claiming nothing (prepare claims)" json "$W/state/pool.json" \
    "[x['address'] for x in d['devices'] if x['state'] != 'free'] == ['0000:17:00.0']"
check "migrate begin remaps it the same way" \
    eval "accepted '$W/placed.xml' placed migrate begin - && cmp '$AV_TMP/out' '$W/restored.xml'"
check "the remapped XML restores unchanged, and prepare takes its device" \
    eval "accepted '$W/restored.xml' placed restore begin - && cmp '$AV_TMP/out' '$W/restored.xml' && \
          accepted '$W/restored.xml' placed prepare begin - && [ \"\$(driver 0000:ca:00.0)\" = vfio-pci ]"
mkdom "$W/vm3.xml" vm3 "$U3" 0000:31:00.0 0000:4b:00.0 0000:65:00.0
mkdom "$W/vm5.xml" vm5 "$(uuid 5)" 0000:e3:00.0
check "with every A100 taken, restore is refused with one line naming the recorded device (where the last remap put it) and what is missing" \
    eval "accepted '$W/vm3.xml' vm3 prepare begin - && accepted '$W/vm5.xml' vm5 prepare begin - && \
          refused \"cannot restore domain 'placed' on this host: device 0000:ca:00.0 .* is in-use.*cannot be placed again\" '$W/placed.xml' placed restore begin -"
check "  ... and migrate begin too" refused "cannot migrate domain 'placed' on this host" "$W/placed.xml" placed migrate begin -

world readdr two-socket-8gpu
mkplaced "$W/placed.xml" placed "$U4" 0000:17:00.0
record_placed "$U4" placed "$A100_0" 0000:17:00.0
check "a placed domain restores unchanged before the hardware change" \
    eval "accepted '$W/placed.xml' placed restore begin - && cmp '$AV_TMP/out' '$W/placed.xml'"
readdress 0000:17:00.0 0000:70:00.0
check "after its A100 re-enumerated at 0000:70:00.0, restore follows the card there, guest address kept" \
    eval "accepted '$W/placed.xml' placed restore begin - && cp '$AV_TMP/out' '$W/restored.xml' && \
          [ \"\$(srcaddr '$W/restored.xml')\" = '0000:70:00.0 guest=0x06:0x00' ] && \
          grep -q 'address=\"0000:70:00.0\" alias=\"ua-accelvirt-0\"' '$W/restored.xml'"
check "  ... the pool journalled the readdressing, and the log the move" \
    eval "grep -q readdressed '$W/state/journal.jsonl' 2>/dev/null || grep -rq readdressed '$W/state'; \
          grep -q 'moved from 0000:17:00.0 to 0000:70:00.0' '$W/log'"
check "  ... and migrate begin follows it the same way" \
    eval "accepted '$W/placed.xml' placed migrate begin - && cmp '$AV_TMP/out' '$W/restored.xml'"
check "  ... and prepare of the remapped domain binds the card at its new address" \
    eval "accepted '$W/restored.xml' placed prepare begin - && [ \"\$(driver 0000:70:00.0)\" = vfio-pci ]"

# A record naming an identity the pool does not know (an older placement)
# follows the card that the journal last saw leave its recorded address;
# the journal is read without the pool's lock, then its tail under it.
world readdr2 two-socket-8gpu
mkplaced "$W/placed.xml" placed "$U4" 0000:17:00.0
record_placed "$U4" placed "$A100_0" 0000:17:00.0
check "a placed domain restores unchanged before the hardware change (identity known)" \
    eval "accepted '$W/placed.xml' placed restore begin - && cmp '$AV_TMP/out' '$W/placed.xml'"
readdress 0000:17:00.0 0000:70:00.0
record_placed "$U4" placed dsn:10de:20f1:00000000000000ff.f0 0000:17:00.0
check "a record of an unknown identity follows the card the journal saw leave its address (its history read, the pass again)" \
    eval "accepted '$W/placed.xml' placed restore begin - && [ \"\$(srcaddr '$AV_TMP/out')\" = '0000:70:00.0 guest=0x06:0x00' ] && \
          ! grep -q 'is not on this host' '$W/log' && [ \"\$(grep -c 'moved from 0000:17:00.0 to 0000:70:00.0' '$W/log')\" = 1 ]"

world hand two-socket-8gpu
mkdom "$W/vgpu.xml" vgpuvm "$U1" mdev:6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c
check "a placement written without accelvirt's aliases goes through restore begin byte for byte" \
    eval "hook '$W/vgpu.xml' vgpuvm restore begin - >'$W/res.out' && cmp '$W/res.out' '$W/vgpu.xml' && [ ! -e '$W/state' ]"
printf '<?xml version="1.0"?>\n<!DOCTYPE domain [<!ENTITY x "y">]>\n<domain><name>evil</name><uuid>%s</uuid><devices/></domain>\n' "$U1" >"$W/doctype.xml"
check "a DOCTYPE at restore begin is refused with one line and nothing on stdout, as everywhere" \
    eval "refused 'DOCTYPE' '$W/doctype.xml' evil restore begin - && [ ! -e '$W/state' ]"
mkplaced "$W/placed.xml" placed "$U4" 0000:17:00.0
record_placed "$U4" placed "$A100_0" 0000:17:00.0
sed 's/alias="ua-accelvirt-0"\/>/alias="ua-accelvirt-0"\/><av:device profile="test-a100" address="0000:31:00.0" alias="ua-accelvirt-1"\/>/' \
    "$W/placed.xml" >"$W/unaligned.xml"
check "a placement whose entries disagree with the pool's record goes through migrate begin unchanged while nothing must move" \
    eval "accepted '$W/unaligned.xml' placed migrate begin - && cmp '$AV_TMP/out' '$W/unaligned.xml' && grep -q 'its placement names 2 device(s), accelvirt placed 1' '$W/log'"
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
check "  ... and when its device must be remapped, it is refused with one line (the metadata cannot be trusted)" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && refused 'its accelvirt metadata was changed since it was placed' '$W/unaligned.xml' placed migrate begin -"

# --- restore and migrate go by the pool's record, not the tenant's metadata (issue 10, hole 4) ---
world tamper two-socket-8gpu
mkplaced "$W/placed.xml" placed "$U4" 0000:17:00.0
record_placed "$U4" placed "$A100_0" 0000:17:00.0
# What a running domain can do to itself (virDomainSetMetadata): ask for,
# and claim to have been placed on, another profile's device.
sed 's/profile="test-a100"/profile="test-a6000"/g; s/address="0000:17:00.0"/address="0000:98:00.0"/' \
    "$W/placed.xml" >"$W/tampered.xml"
check "metadata a tenant changed (another profile and device) is ignored while its recorded device is free: unchanged, logged" \
    eval "accepted '$W/tampered.xml' placed restore begin - && cmp '$AV_TMP/out' '$W/tampered.xml' && grep -q \"metadata disagrees with what accelvirt recorded.*'test-a6000'\" '$W/log'"
mkdom "$W/vm2.xml" vm2 "$U2" 0000:17:00.0
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
check "  ... with its device taken, the tampered metadata chooses nothing: refused with one line, no A6000 given" \
    eval "refused \"cannot restore domain 'placed'.*metadata was changed since it was placed\" '$W/tampered.xml' placed restore begin - && [ \"\$(driver 0000:98:00.0)\" = nvidia ]"
check "  ... while the domain as accelvirt placed it is remapped by the record to another A100" \
    eval "accepted '$W/placed.xml' placed restore begin - && [ \"\$(srcaddr '$AV_TMP/out')\" = '0000:ca:00.0 guest=0x06:0x00' ]"
check "  ... and the pool records that placement for the next remap" json "$W/state/pool.json" \
    "[(r['devices'][0]['address'], r['requests'][0]['profile']) for r in d['placements'] if r['domain_uuid'] == '$U4'] == [('0000:ca:00.0', 'test-a100')]"
U5=$(uuid 5)
mkplaced "$W/norecord.xml" norecord "$U5" 0000:17:00.0
check "a placed domain the pool has no record of goes through unchanged, even with its device taken, and prepare then refuses it" \
    eval "accepted '$W/norecord.xml' norecord restore begin - && cmp '$AV_TMP/out' '$W/norecord.xml' && grep -q 'recorded no placement of this domain' '$W/log' && refused '0000:17:00.0 .* is in-use' '$W/norecord.xml' norecord prepare begin -"

# --- scrub certificates, ROM integrity and managed='yes' rebinding (reset, rom-check) ---
POL_ROM="$AV_TMP/policies-rom"
mkdir -p "$POL_ROM"
cat >"$POL_ROM/10-rom.json" <<'JSON'
{"profiles": [{"name": "rom-a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci",
  "numa": "none", "scrub": [{"method": "reset"}, {"method": "rom-check"}], "restore_driver": "on-release"}]}
JSON
chmod 0755 "$POL_ROM" && chmod 0644 "$POL_ROM"/*.json
world rom two-socket-8gpu
POL_SAVED=$POL; POL=$POL_ROM
printf 'A100 ROM v1' >"$W/host/sys/bus/pci/devices/0000:17:00.0/rom"
"$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" enroll --all >/dev/null
rom_life() {
    accepted "$NOVA" instance-0000002a prepare begin - || return 1
    accepted "$NOVA" instance-0000002a release end - || return 1
    wait_state 0000:17:00.0 free
}
check "a Nova (managed='yes') A100 with an enrolled ROM is scrubbed (reset, rom-check) and freed" rom_life
check "  ... it was bound to vfio-pci for the scrub (VFIO reset) and given back to nvidia" \
    eval "grep -qx 'VFIO_DEVICE_RESET 0000:17:00.0' '$W/host/sys/.accelvirt-fake-kernel.log' && [ \"\$(driver 0000:17:00.0)\" = nvidia ]"
check "  ... its scrub certificate names the device, profile, previous owner, steps and result" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['address']=='0000:17:00.0' and e['profile']=='rom-a100' and e['previous_owner']['nova_instance']=='a1f6e0f4-2c9b-4a57-8d3e-6b1f0c2d9e77' and [(s['method'], s['ok']) for s in e['steps']]==[('reset', True), ('rom-check', True)] and e['result']=='free' and e['rebound_from']=='nvidia' and e['bytes_zeroed']==0 and len(e['prev'])==64 and e['started']\" && verify"
printf 'A100 ROM tampered' >"$W/host/sys/bus/pci/devices/0000:17:00.0/rom"
rom_tamper() {
    accepted "$NOVA" instance-0000002a prepare begin - || return 1
    accepted "$NOVA" instance-0000002a release end - || return 1
    wait_state 0000:17:00.0 quarantined
}
check "a ROM changed while a tenant had the device quarantines it through release and the worker" rom_tamper
check "  ... the reason names both hashes, and the device stays on vfio-pci" \
    eval "status && python3 -c \"import json; d=json.load(open('$W/st.json')); r=[x['reason'] for x in d['devices'] if x['address']=='0000:17:00.0'][0]; assert 'changed since enrollment' in r and 'tampered' in r, r\" && [ \"\$(driver 0000:17:00.0)\" = vfio-pci ]"
check "  ... prepare then refuses it" refused "0000:17:00.0 .* is quarantined" "$NOVA" instance-0000002a prepare begin -
check "  ... and the journal's chain holds" verify
POL=$POL_SAVED

# --- scrub domains: the worker's "vm" step boots a domain that must get a device being scrubbed ---
world scrubdom two-socket-8gpu
U5=$(uuid 5); U6=$(uuid 6)
TOK=0123456789abcdef0123456789abcdef
mkdom "$W/tenant.xml" tenant "$U1" 0000:17:00.0
hook "$W/tenant.xml" tenant prepare begin - >/dev/null 2>&1
# As the worker leaves it while its vm step runs: scrubbing, a token and the
# scrub domain's UUID, the device's scrub lock held (here by flock(1)).
python3 - "$W/state/pool.json" "$TOK" "$U5" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if d["address"] == "0000:17:00.0":
        d["state"] = "scrubbing"
        d["scrub_token"] = sys.argv[2]
        d["scrub_domain"] = sys.argv[3]
        ident = d["identity"]
json.dump(p, open(sys.argv[1], "w"), indent=2)
open(sys.argv[1] + ".identity", "w").write(ident)
PY
IDENT=$(cat "$W/state/pool.json.identity"); rm -f "$W/state/pool.json.identity"
SLOCK="$W/state/scrub-$(printf %s "$IDENT" | sha256sum | cut -d' ' -f1).lock"
scrubdom() {    # FILE NAME UUID TOKEN DEVICE...: a scrub domain as the worker writes it
    f=$1; n=$2; u=$3; t=$4; shift 4
    mkdom "$f" "$n" "$u" "$@" -- "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:scrub token='$t' identity='$IDENT'/></av:accelerators></metadata>"
}
scrubdom "$W/scrub.xml" accelvirt-scrub-1 "$U5" "$TOK" 0000:17:00.0
scrubdom "$W/copied.xml" evil "$U6" "$TOK" 0000:17:00.0
scrubdom "$W/wrongtok.xml" accelvirt-scrub-1 "$U5" fedcba9876543210fedcba9876543210 0000:17:00.0
scrubdom "$W/managed.xml" accelvirt-scrub-1 "$U5" "$TOK" 0000:17:00.0:yes
scrubdom "$W/other.xml" accelvirt-scrub-1 "$U5" "$TOK" 0000:31:00.0
scrubdom "$W/badtok.xml" accelvirt-scrub-1 "$U5" "0123456789ABCDEF0123456789ABCDEF" 0000:17:00.0
sed "s|<av:scrub |<av:scrub token='$TOK'/><av:scrub |" "$W/scrub.xml" >"$W/twotok.xml"
mkdom "$W/plain.xml" plain "$U6" 0000:17:00.0
cp "$W/state/pool.json" "$W/pool.token"
# samepool [FILE]: the pool of $W is FILE's ($W/pool.before), the scans' last_seen aside.
samepool() { same_pool "${1:-$W/pool.before}"; }
# the pool as the token's use leaves it: the token gone, all else as before
python3 - "$W/pool.token" "$W/pool.before" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    d.pop("scrub_token", None)
json.dump(p, open(sys.argv[2], "w"))
PY
check "status --json shows the scrub domain of a device being scrubbed, never its token" \
    eval "status && grep -q '\"scrub_domain\": \"$U5\"' '$W/st.json' && ! grep -q '$TOK' '$W/st.json'"
flock -o "$SLOCK" sleep 120 &
FLOCK_PID=$!
i=0; while [ ! -e "$SLOCK" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.2
check "a domain with the token but another UUID (a copy of the scrub VM's XML) is refused" \
    refused "but device 0000:17:00.0 .* is scrubbing and not being scrubbed with that token by a domain of this UUID" \
    "$W/copied.xml" evil prepare begin -
check "  ... and changed nothing: the token is still there for the scrub domain" samepool "$W/pool.token"
check "the scrub domain (the device's token and the UUID made with it) gets the scrubbing device while its scrub runs" \
    eval "accepted '$W/scrub.xml' accelvirt-scrub-1 prepare begin - && grep -q \"scrub domain 'accelvirt-scrub-1' (av:scrub token and UUID match) takes 0000:17:00.0\" '$W/log'"
check "  ... without a claim or a bind: still scrubbing, owned by the tenant, on vfio-pci; only the token is used up" \
    eval "samepool && [ \"\$(driver 0000:17:00.0)\" = vfio-pci ] && ! grep -q scrub_token '$W/state/pool.json'"
check "  ... the token never reaches the log, the journal or status --json" \
    eval "! grep -rq '$TOK' '$W/log' '$W/state/journal.jsonl'"
check "  ... a second prepare with the same token is refused: it is used up" \
    refused "or the token was used already" "$W/scrub.xml" accelvirt-scrub-1 prepare begin -
check "  ... its start passes on a strict-NUMA profile with unpinned vCPUs: its placement is not a tenant's" \
    accepted "$W/scrub.xml" accelvirt-scrub-1 start begin -
check "  ... reconnect logs it as the scrub domain, not as a conflict, and changes nothing" \
    eval "accepted '$W/scrub.xml' accelvirt-scrub-1 reconnect begin - && grep -q \"reconnect: scrub domain 'accelvirt-scrub-1' runs with device 0000:17:00.0\" '$W/log' && ! grep -q 'check both domains' '$W/log' && samepool"
check "  ... its release end changes nothing in the pool" \
    eval "accepted '$W/scrub.xml' accelvirt-scrub-1 release end - && sleep 0.5 && samepool"
cp "$W/pool.token" "$W/state/pool.json"
cp "$W/pool.token" "$W/pool.before"
check "a domain without the token is refused: the device is scrubbing" \
    refused "0000:17:00.0 .* is scrubbing" "$W/plain.xml" plain prepare begin -
check "a scrub domain with another token is refused" \
    refused "carries an accelvirt scrub token (av:scrub), but device 0000:17:00.0 .* is scrubbing and not being scrubbed with that token" \
    "$W/wrongtok.xml" accelvirt-scrub-1 prepare begin -
check "a scrub domain naming a free device is refused" \
    refused "device 0000:31:00.0 .* is free and not being scrubbed with that token" "$W/other.xml" accelvirt-scrub-1 prepare begin -
check "a scrub domain whose hostdev is managed='yes' is refused (libvirt would rebind it)" \
    refused "is managed='yes'.*must say managed='no'" "$W/managed.xml" accelvirt-scrub-1 prepare begin -
check "a token that is not 32 lower-case hex digits is refused as bad input" \
    refused "av:scrub token '0123456789ABCDEF0123456789ABCDEF' is not 32 lower-case hex digits" "$W/badtok.xml" accelvirt-scrub-1 prepare begin -
check "two av:scrub elements are refused" \
    refused "more than one <av:scrub>" "$W/twotok.xml" accelvirt-scrub-1 prepare begin -
pkill -P "$FLOCK_PID" sleep 2>/dev/null; kill "$FLOCK_PID" 2>/dev/null; wait "$FLOCK_PID" 2>/dev/null
check "with no scrub running (its scrub lock free), the right token is stale and refused" \
    refused "no scrub of device 0000:17:00.0 .* is running .* stale" "$W/scrub.xml" accelvirt-scrub-1 prepare begin -
check "  ... and none of the refusals changed the pool or the drivers" \
    eval "samepool && [ \"\$(driver 0000:17:00.0)\" = vfio-pci ] && [ \"\$(driver 0000:31:00.0)\" = nvidia ]"

# --- a device whose IOMMU group a process still holds after its scrub is not freed ---
# Each way a process holds a device, one GPU each, released together (one
# worker each, so that their grace periods overlap): an fd on the group, on
# the vfio cdev, an anonymous vfio device fd that its fdinfo ties to the
# GPU, the GPU's BAR mapped through sysfs and through the cdev.  A process
# that maps another device's BAR and has /dev/iommu open holds none of them.
world held two-socket-8gpu
# sysdir ADDRESS: the device's real sysfs directory, as the kernel names it.
sysdir() { r=$(realpath "$W/host/sys/bus/pci/devices/$1") && h=$(realpath "$W/host") && echo "${r#"$h"}"; }
# held_reason ADDRESS TEXT: ADDRESS is quarantined with TEXT in its reason.
held_reason() {
    wait_state "$1" quarantined && status && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); r=[x['reason'] for x in d['devices'] if x['address']==sys.argv[2]][0]; assert sys.argv[3] in r, r" "$W/st.json" "$1" "$2"
}
MAPS="7f2a10000000-7f2a11000000 rw-s 00000000 00:15 4711                       "
n=1
for a in 0000:31:00.0 0000:4b:00.0 0000:65:00.0 0000:ca:00.0 0000:e3:00.0 0000:17:00.0; do
    n=$((n + 1))
    mkdom "$W/h$n.xml" "held$n" "$(uuid $((700 + n)))" "$a"
    hook "$W/h$n.xml" "held$n" prepare begin - >/dev/null 2>&1
done
HG=$(basename "$(readlink "$W/host/sys/bus/pci/devices/0000:31:00.0/iommu_group")")
mkdir -p "$W/host/proc/4242/fd" "$W/host/proc/4243/fd" "$W/host/proc/4244/fd" "$W/host/proc/4244/fdinfo" \
    "$W/host/proc/4245" "$W/host/proc/4246" "$W/host/proc/4247/fd" \
    "$W/host$(sysdir 0000:4b:00.0)/vfio-dev/vfio3" "$W/host$(sysdir 0000:e3:00.0)/vfio-dev/vfio5"
ln -s "/dev/vfio/$HG" "$W/host/proc/4242/fd/9"
ln -s /dev/vfio/devices/vfio3 "$W/host/proc/4243/fd/10"
ln -s "anon_inode:[vfio-device]" "$W/host/proc/4244/fd/11"
printf 'pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nvfio-device-syspath: %s\n' "$(sysdir 0000:65:00.0)" >"$W/host/proc/4244/fdinfo/11"
printf '%s/usr/bin/qemu-system-x86_64\n%s%s/resource1\n' "$MAPS" "$MAPS" "$(sysdir 0000:ca:00.0)" >"$W/host/proc/4245/maps"
printf '%s/dev/vfio/devices/vfio5\n' "$MAPS" >"$W/host/proc/4246/maps"
ln -s /dev/iommu "$W/host/proc/4247/fd/3"
printf '%s%s/resource1\n' "$MAPS" "$(sysdir 0000:98:00.0)" >"$W/host/proc/4247/maps"
n=1
for a in 0000:31:00.0 0000:4b:00.0 0000:65:00.0 0000:ca:00.0 0000:e3:00.0 0000:17:00.0; do
    n=$((n + 1))
    hook "$W/h$n.xml" "held$n" release end - >/dev/null 2>&1
done
check "a device whose IOMMU group a process (a QEMU) holds open after its scrub (/proc/4242/fd -> /dev/vfio/$HG) is quarantined, not freed" \
    held_reason 0000:31:00.0 "IOMMU group $HG of 0000:31:00.0 is still held by process 4242 (/dev/vfio/$HG)"
check "  ... and so is one whose vfio cdev a process holds (/dev/vfio/devices/vfio3, iommufd's way)" \
    held_reason 0000:4b:00.0 "of 0000:4b:00.0 is still held by process 4243 (/dev/vfio/devices/vfio3)"
check "  ... one whose device fd (anon_inode:[vfio-device]) its fdinfo names" \
    held_reason 0000:65:00.0 "of 0000:65:00.0 is still held by process 4244 (anon_inode:[vfio-device] of 0000:65:00.0)"
check "  ... one whose BAR a process maps through sysfs (/proc/PID/maps: resource1)" \
    held_reason 0000:ca:00.0 "of 0000:ca:00.0 is still held by process 4245 (a mapping of $(sysdir 0000:ca:00.0)/resource1)"
check "  ... one whose BAR a process maps through its vfio cdev" \
    held_reason 0000:e3:00.0 "of 0000:e3:00.0 is still held by process 4246 (a mapping of /dev/vfio/devices/vfio5)"
check "  ... while a process with another device's BAR mapped and /dev/iommu open holds none: that GPU is freed" \
    wait_state 0000:17:00.0 free
rm -rf "$W/host/proc"

# A running domain may change its own metadata (virDomainSetMetadata): a bad
# av:scrub (or av:placement) must not keep its devices from release and scrub.
world badmeta two-socket-8gpu
mkdom "$W/t.xml" tenant "$U1" 0000:31:00.0
mkdom "$W/bad.xml" tenant "$U1" 0000:31:00.0 -- "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:scrub token='nope'/></av:accelerators></metadata>"
hook "$W/t.xml" tenant prepare begin - >/dev/null 2>&1
check "reconnect of a running domain whose metadata turned malformed passes, logging what was left out" \
    eval "accepted '$W/bad.xml' tenant reconnect begin - && grep -q \"reconnect begin of domain 'tenant': its metadata is left out: av:scrub token 'nope'\" '$W/log'"
check "  ... and its release still makes the device dirty, scrubbed and free" \
    eval "accepted '$W/bad.xml' tenant release end - && wait_state 0000:31:00.0 free"
check "  ... while prepare still refuses such a domain as bad input" \
    refused "av:scrub token 'nope'" "$W/bad.xml" tenant prepare begin -

# --- work proportional to the domain (issue 12): a host that has a boot id ---
# boot ID: the host's boot id (the other fake hosts have none, and every hook
# call scans them whole).
boot() { boot_id "$W/host" "$1"; }
BOOT1=11111111-2222-4333-8444-555555555555
world partial two-socket-8gpu
boot "$BOOT1"
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:31:00.0
mkdom "$W/vm3.xml" vm3 "$U3" 0000:4b:00.0
mkdom "$W/vm4.xml" vm4 "$U4" 0000:65:00.0 -- "<vcpu placement='static' cpuset='0-3'>2</vcpu>"
check "the boot's first prepare reconciles the whole host and records the boot id in the pool" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && json '$W/state/pool.json' \"d['scanned_boot_id'] == '$BOOT1' and len(d['devices']) == 8\""
check "  ... and the boot id on the device it put in use (the boot rule of reconcile compares it), on no other" \
    json "$W/state/pool.json" "[(x['address'], x['state']) for x in d['devices'] if x.get('in_use_boot_id') == '$BOOT1'] == [('0000:17:00.0', 'in-use')] and sum('in_use_boot_id' in x for x in d['devices']) == 1"
# A GPU leaves the host (hot-unplugged): only a whole scan can know.
rm "$W/host/sys/bus/pci/devices/0000:ca:00.0"
check "a later prepare reads only its domain's devices: a GPU gone elsewhere is still as the pool had it" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:ca:00.0'] == ['free'] and [x['state'] for x in d['devices'] if x['address'] == '0000:31:00.0'] == ['in-use']\""
check "  ... while the CLI, which reconciles the whole host, finds it missing" \
    eval "avw status >/dev/null && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:ca:00.0'] == ['missing']\""
# The domain's own card presents a new DSN: the pool agrees no more.
set_dsn 0000:4b:00.0 48b02d1a0000beef
check "a prepare whose device presents another identity than the pool's reconciles the whole host first" \
    eval "accepted '$W/vm3.xml' vm3 prepare begin - && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['identity'] == 'dsn:10de:20f1:48b02d1a0000beef.f0'] == ['in-use'] and [x['state'] for x in d['devices'] if x['address'] == '0000:4b:00.0' and x['identity'] != 'dsn:10de:20f1:48b02d1a0000beef.f0'] == ['missing']\""
# A tenant's firmware changes its card's DSN while it runs: the worker
# reads the card before freeing it and quarantines it, whoever else runs.
set_dsn 0000:17:00.0 48b02d1a0000f00d
check "a card whose DSN changed during its tenancy is quarantined by its scrub, not freed, though no prepare read it (the worker reconciles the whole host)" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:17:00.0 quarantined && json '$W/state/pool.json' \"[x['identity'] for x in d['devices'] if x['address'] == '0000:17:00.0' and x['state'] == 'quarantined'] == ['dsn:10de:20f1:48b02d1a0000f00d.f0']\" && grep -q '\"event\": *\"identity-changed\"' '$W/state/journal.jsonl'"
# A new boot: nothing the pool says is trusted before a whole scan.  vm2
# and vm3, which the checks below keep running, have pid files: the boot
# rule releases at once the devices that went in use in another boot
# (their recorded boot id) when nothing says their QEMU runs.
boot 66666666-7777-4888-9999-aaaaaaaaaaaa
mkdir -p "$W/host/run/libvirt/qemu" && echo 1 >"$W/host/run/libvirt/qemu/vm2.pid" && echo 1 >"$W/host/run/libvirt/qemu/vm3.pid"
rm "$W/host/sys/bus/pci/devices/0000:e3:00.0"
check "after a reboot (a new boot id) the first prepare reconciles the whole host again" \
    eval "accepted '$W/vm4.xml' vm4 prepare begin - && json '$W/state/pool.json' \"d['scanned_boot_id'] == '66666666-7777-4888-9999-aaaaaaaaaaaa' and [x['state'] for x in d['devices'] if x['address'] == '0000:e3:00.0'] == ['missing']\""
check "  ... and start, which reads only the NUMA nodes (the pool has each device's node), checks its strict pinning" \
    eval "accepted '$W/vm4.xml' vm4 start begin - && sed 's/0-3/0-3,16383/' '$W/vm4.xml' >'$W/vm4b.xml' && refused 'on NUMA node 0' '$W/vm4b.xml' vm4 start begin -"

# Restore of a domain accelvirt placed: the devices of its placement are read
# alone while the pool agrees with them (an A6000 unplugged meanwhile stays
# free in the pool), and placing it again would read the whole host.
U5=$(uuid 5)
hook "$W/vm2.xml" vm2 release end - >/dev/null 2>&1
wait_state 0000:31:00.0 free >/dev/null
ID31=$(python3 -c "import json; print([x['identity'] for x in json.load(open('$W/state/pool.json'))['devices'] if x['address'] == '0000:31:00.0'][0])")
record_placed "$U5" placed "$ID31" 0000:31:00.0
mkplaced "$W/placed.xml" placed "$U5" 0000:31:00.0
rm "$W/host/sys/bus/pci/devices/0000:b1:00.0"
check "restore begin of a placed domain reads only its placement's devices: the XML back, an A6000 gone elsewhere still free" \
    eval "hook '$W/placed.xml' placed restore begin - >'$W/placed.out' 2>'$W/placed.err' && cmp -s '$W/placed.out' '$W/placed.xml' && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:b1:00.0'] == ['free']\""
check "  ... and when its device is taken, placing it again reads the whole host (the A6000 found missing; refused: no A100 free on node 0)" \
    eval "accepted '$W/vm2.xml' vm2 prepare begin - && refused 'cannot be placed again' '$W/placed.xml' placed restore begin - && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:b1:00.0'] == ['missing']\""

# The worker's check after a scrub (issue 38): the card, what its identity
# and group involve, and every card that may present its identity; the rest
# of the host is the next whole reconcile's.
world wcheck two-socket-8gpu
boot "$BOOT1"
mkdom "$W/vm1.xml" vm1 "$U1" 0000:17:00.0
mkdom "$W/vm2.xml" vm2 "$U2" 0000:31:00.0
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
hook "$W/vm2.xml" vm2 prepare begin - >/dev/null 2>&1
rm "$W/host/sys/bus/pci/devices/0000:ca:00.0"
check "the worker frees a scrubbed card after reading what can have changed, not the whole host: a GPU gone elsewhere is still as the pool had it" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:17:00.0 free && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:ca:00.0'] == ['free']\""
check "  ... which the next whole reconcile finds missing" \
    eval "avw status >/dev/null && json '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:ca:00.0'] == ['missing']\""
# vm2's card copies the DSN of vm1's while vm1 runs: only a check that reads
# the cards that may present vm1's card's identity sees the copy.
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
set_dsn 0000:31:00.0 48b02d1a000001c0
check "a card presenting the identity of the card being scrubbed is read by the worker's check: the scrubbed card ends as a whole reconcile leaves it (free), the copy with an identity problem" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:17:00.0 free && json '$W/state/pool.json' \"[x['identity'] for x in d['devices'] if x['address'] == '0000:17:00.0'] == ['dsn:10de:20f1:48b02d1a000001c0.f0'] and [bool(x.get('identity_problem')) for x in d['devices'] if x['address'] == '0000:31:00.0' and x['state'] != 'missing'] == [True]\""
check "  ... and vm2's card goes to nobody after its release" \
    eval "accepted '$W/vm2.xml' vm2 release end - && wait_state 0000:31:00.0 quarantined"
# The scrubbed card's own DSN changes under its scrub: the whole way.
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null 2>&1
set_dsn 0000:17:00.0 48b02d1a0000f00d
check "a card whose DSN changed during its tenancy is quarantined by the worker's check under its new identity" \
    eval "accepted '$W/vm1.xml' vm1 release end - && wait_state 0000:17:00.0 quarantined && json '$W/state/pool.json' \"[x['identity'] for x in d['devices'] if x['address'] == '0000:17:00.0' and x['state'] == 'quarantined'] == ['dsn:10de:20f1:48b02d1a0000f00d.f0']\""
# Its subsystem ids change, its DSN the same (a board of the same chip with a
# lighter scrub): the identity stays, what the profile's match reads does not.
mkdom "$W/vm3.xml" vm3 "$U3" 0000:4b:00.0
hook "$W/vm3.xml" vm3 prepare begin - >/dev/null 2>&1
echo 0x1234 >"$W/host/sys/bus/pci/devices/0000:4b:00.0/subsystem_device"
check "a card whose subsystem ids changed during its tenancy, its DSN the same, is quarantined by the worker's check as a whole reconcile quarantines it" \
    eval "accepted '$W/vm3.xml' vm3 release end - && wait_state 0000:4b:00.0 quarantined && json '$W/state/pool.json' \"['match reads changed' in (x.get('identity_problem') or '') for x in d['devices'] if x['address'] == '0000:4b:00.0'] == [True]\""

# --- an mdev on a parent that is no PCI device: the kernel's mtty sample ---
world mtty vgpu-mdev
MT=7c3e5a10-2b4d-4e6f-8a1b-3c5d7e9f0a12
mkdom "$W/mtty.xml" serial "$U3" "mdev:$MT"
sed -i "s/profile='test-vgpu'/profile='test-mtty'/" "$W/mtty.xml"
MTTY_AVAIL="$W/host/sys/class/mdev_bus/mtty/mdev_supported_types/mtty-2/available_instances"
ls "$W/host/sys/bus/mdev/devices" | wc -l >"$W/mdevs.before"
check "prepare creates an mtty-2 mdev on the virtual parent mtty, through /sys/class/mdev_bus" \
    eval "accepted '$W/mtty.xml' serial prepare begin - && [ -d '$W/host/sys/devices/virtual/mtty/mtty/$MT' ] && [ -e '$W/host/sys/bus/mdev/devices/$MT' ] && [ \"\$(cat '$MTTY_AVAIL')\" = 11 ]"
check "  ... recorded in-use as kind mdev, address 'mtty', created by accelvirt" json "$W/state/pool.json" \
    "[(x['kind'], x['address'], x['state'], x['owner']['domain_uuid'], x['created'], x['profile']) for x in d['devices'] if x['identity'] == 'mdev:$MT'] == [('mdev', 'mtty', 'in-use', '$U3', True, 'test-mtty')]"
python3 -c "import json; print(len(json.load(open('$W/state/pool.json'))['devices']) - 1)" >"$W/count.before"
check "  ... release removes it, and the worker's scrub takes it out of the pool" \
    eval "accepted '$W/mtty.xml' serial release end - && [ ! -e '$W/host/sys/bus/mdev/devices/$MT' ] && [ ! -e '$W/host/sys/devices/virtual/mtty/mtty/$MT' ] && wait_gone 'mdev:$MT' && verify"
check "  ... the instance is free again and the pool and mdev counts are back" \
    eval "[ \"\$(cat '$MTTY_AVAIL')\" = 12 ] && status && [ \"\$(python3 -c \"import json; print(len(json.load(open('$W/st.json'))['devices']))\")\" = \"\$(cat '$W/count.before')\" ] && [ \"\$(ls '$W/host/sys/bus/mdev/devices' | wc -l)\" = \"\$(cat '$W/mdevs.before')\" ]"

# --- USB sticks (issue 13): two identical sticks with serials on different
# ports and one without a serial; the hook claims, releases and scrubs them ---
world usb two-socket-8gpu
boot_id "$W/host" 3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a
# usb_policies DIR SCRUB [KEYS]: the hook's test policies in DIR (made the
# test policies of $POL) and the profile test-stick of the Movidius sticks'
# first ids, with the scrub steps SCRUB and the further keys KEYS.
usb_policies() {
    POL=$1
    hook_policies "$POL" &&
        printf '{"profiles": [{"name": "test-stick", "match": {"vendor": "0x03e7", "device": "0x2485"}, "attach": "usb", "numa": "none", %s"scrub": %s}]}\n' "${3:+$3, }" "$2" >"$POL/30-usb.json" &&
        chmod 0644 "$POL/30-usb.json"
}
usb_policies "$AV_TMP/usb-policies" '[{"method": "usb-reset"}, {"method": "usb-reauthorize", "timeout": 5}]'
# usb_stick PORT DEVNUM [SERIAL]: a Movidius stick at PORT of bus 1 with
# its /dev/bus/usb node.  The tree's own stick (1-1.2) is taken out.
rm -f "$W/host/sys/bus/usb/devices/1-1.2" "$W/host/sys/bus/usb/devices/1-1.2:1.0"
usb_stick() {
    d="$W/host/sys/devices/pci0000:00/0000:00:14.0/usb1/$1"
    mkdir -p "$d" "$W/host/dev/bus/usb/001"
    echo 03e7 >"$d/idVendor"; echo 2485 >"$d/idProduct"; echo 1 >"$d/busnum"; echo "$2" >"$d/devnum"
    echo 480 >"$d/speed"; echo 1 >"$d/authorized"
    [ -z "$3" ] || echo "$3" >"$d/serial"
    ln -s "../../../devices/pci0000:00/0000:00:14.0/usb1/$1" "$W/host/sys/bus/usb/devices/$1"
    : >"$W/host/dev/bus/usb/001/$(printf %03d "$2")"
}
usb_stick 1-2 5 S1
usb_stick 1-3 6 S2
usb_stick 1-4 7
# mkusb FILE NAME UUID [BUS DEVICE]: a domain with one USB hostdev of the
# sticks' ids (and address when given), no accelvirt metadata.
mkusb() {
    a=""; [ -z "$4" ] || a="<address bus='$4' device='$5'/>"
    printf "<domain type='kvm'><name>%s</name><uuid>%s</uuid><memory unit='GiB'>1</memory><vcpu>1</vcpu><devices><hostdev mode='subsystem' type='usb' managed='no'><source><vendor id='0x03e7'/><product id='0x2485'/>%s</source></hostdev></devices></domain>\n" "$2" "$3" "$a" >"$1"
}
# usb_state PORT: the state of the pooled stick at PORT.
usb_state() { python3 -c "import json,sys; print(' '.join(x['state'] for x in json.load(open(sys.argv[1]))['devices'] if x['kind']=='usb' and x['address']==sys.argv[2]))" "$W/state/pool.json" "$1"; }
# wait_usb PORT STATE: polls until the stick at PORT is in STATE (20 s).
wait_usb() {
    i=0
    while [ $i -lt 200 ]; do
        [ -e "$W/state/pool.json" ] && [ "$(usb_state "$1")" = "$2" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    echo "USB $1 is not $2 after 20 s: $(usb_state "$1")"; cat "$W/log" 2>/dev/null; return 1
}
UU1=$(uuid 31); UU2=$(uuid 32); UU3=$(uuid 33); UU4=$(uuid 34)
printf "<domain type='kvm'><name>stick1</name><uuid>%s</uuid><memory unit='GiB'>1</memory><vcpu>1</vcpu><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:request profile='test-stick' count='1'/></av:accelerators></metadata><devices/></domain>\n" "$UU1" >"$W/req.xml"
avw() { ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" "$AV" "$@"; }
check "rewrite places a stick: the hostdev names its bus and device, av:usb its identity and port" \
    eval "avw rewrite '$W/req.xml' >'$W/stick1.xml' 2>'$W/rw.err' && grep -q '<address bus=\"1\" device=\"5\"/>' '$W/stick1.xml' && grep -q 'identity=\"usb:03e7:2485:serial:S1\"' '$W/stick1.xml' && grep -q 'bus-path=\"1-2\"' '$W/stick1.xml'"
check "  ... every stick is pooled, the one without a serial by its port" json "$W/state/pool.json" \
    "sorted(x['identity'] for x in d['devices'] if x['kind'] == 'usb') == ['usb:03e7:2485:serial:S1', 'usb:03e7:2485:serial:S2', 'usb:03e7:2485@port:1-4']"
sed 's/device="5"/device="6"/' "$W/stick1.xml" >"$W/stale6.xml"
sed 's/device="5"/device="9"/' "$W/stick1.xml" >"$W/stale9.xml"
cp "$W/state/pool.json" "$W/pool.usb0"
check "a hostdev whose bus/device now names another stick than its av:placement's identity is refused: run accelvirt start" \
    eval "refused \"1-3 (bus 1 device 6, serial S2), not the stick its av:placement names (usb:03e7:2485:serial:S1.*accelvirt start stick1\" '$W/stale6.xml' stick1 prepare begin - && same_pool '$W/pool.usb0'"
check "  ... and one that names no device at all" \
    eval "refused 'names no device, not the stick' '$W/stale9.xml' stick1 prepare begin - && same_pool '$W/pool.usb0'"
check "prepare of the placed domain claims its stick, 1-2 (S1), and only it" \
    eval "accepted '$W/stick1.xml' stick1 prepare begin - && [ \"\$(usb_state 1-2)\" = in-use ] && [ \"\$(usb_state 1-3)\" = free ] && [ \"\$(usb_state 1-4)\" = free ]"
check "  ... owned by the domain" json "$W/state/pool.json" \
    "[x['owner']['domain_uuid'] for x in d['devices'] if x['address'] == '1-2'] == ['$UU1']"
mkusb "$W/thief.xml" thief "$UU2" 1 5
cp "$W/state/pool.json" "$W/pool.usb1"
check "a second domain naming that stick by bus/device is refused with one line; the pool is unchanged" \
    eval "refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is in-use, owner domain .stick1' '$W/thief.xml' thief prepare begin - && same_pool '$W/pool.usb1'"
mkusb "$W/ids.xml" ids "$UU3"
check "a hostdev with vendor/product only, which three sticks have, is refused naming them: give <address bus= device=>" \
    eval "refused 'names only a vendor and product, which 3 devices of this host have: 1-2 (bus 1 device 5, serial S1), 1-3 (bus 1 device 6, serial S2), 1-4 (bus 1 device 7, no serial); give it <address bus= device=>' '$W/ids.xml' ids prepare begin - && same_pool '$W/pool.usb1'"
mkusb "$W/zero.xml" zero "$UU3" 0 5
check "a hostdev with vendor/product and bus 0 (libvirt then finds it by its ids) is refused as ambiguous, naming the sticks" \
    eval "refused 'is found by its vendor and product (its bus and device name no device of them), which 3 devices of this host have: 1-2 (bus 1 device 5, serial S1), 1-3' '$W/zero.xml' zero prepare begin - && same_pool '$W/pool.usb1'"
printf "<domain type='kvm'><name>hub</name><uuid>%s</uuid><memory unit='GiB'>1</memory><devices><hostdev mode='subsystem' type='usb'><source><address bus='1' device='2'/></source></hostdev></devices></domain>\n" "$UU3" >"$W/hub.xml"
check "a hostdev of a USB device no profile pools (the hub) is left alone" \
    eval "accepted '$W/hub.xml' hub prepare begin - && same_pool '$W/pool.usb1'"
check "release makes the stick dirty; the worker resets and re-authorizes it and frees it" \
    eval "accepted '$W/stick1.xml' stick1 release end - && wait_usb 1-2 free && verify"
check "  ... the fake kernel saw the stick held at its release, the port reset, the authorize cycle (devnum 8) and its authorization at free (devnum 9)" \
    eval "[ \"\$(grep -E ' 1-2( |\$)|001/005' '$W/host/sys/.accelvirt-fake-kernel.log' | tr '\n' ';')\" = 'USB_DEAUTHORIZE 1-2;USBDEVFS_RESET 001/005;USB_AUTHORIZE 1-2 devnum 8;USB_DEAUTHORIZE 1-2;USB_AUTHORIZE 1-2 devnum 9;' ] && [ \"\$(cat '$W/host/sys/bus/usb/devices/1-2/devnum')\" = 9 ] && [ -e '$W/host/dev/bus/usb/001/009' ] && [ \"\$(cat '$W/host/sys/bus/usb/devices/1-2/authorized')\" = 1 ]"
check "  ... found again by its identity; its certificate says what was done, and nothing of memory" \
    eval "json '$W/state/pool.json' \"[x['identity'] for x in d['devices'] if x['address'] == '1-2'] == ['usb:03e7:2485:serial:S1']\" && grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep 'usb port reset of 1-2 (bus 1 device 5)' | grep -q 'de-authorized and authorized again at 1-2 (devnum 5 before, 8 after); re-enumerated' && ! grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep -qi 'memory zeroed'"
check "the domain's XML now names a device number the stick no longer has: refused, run accelvirt start" \
    eval "refused 'names no device, not the stick its av:placement names (usb:03e7:2485:serial:S1, last at 1-2).*accelvirt start stick1' '$W/stick1.xml' stick1 prepare begin -"
check "accelvirt status tells the identical sticks apart: port, bus/device and serial, or no serial" \
    eval "avw status >'$W/status.txt' && grep -q 'usb: port 1-2, bus 1 device 9, serial S1' '$W/status.txt' && grep -q 'usb: port 1-3, bus 1 device 6, serial S2' '$W/status.txt' && grep -q 'usb: port 1-4, bus 1 device 7, no serial' '$W/status.txt' && avw --json status >'$W/status.json' && json '$W/status.json' \"[(x['usb_busnum'], x['usb_devnum'], x['usb_serial']) for x in d['devices'] if x['kind'] == 'usb'] == [(1, 9, 'S1'), (1, 6, 'S2'), (1, 7, None)]\""
check "restore begin of the placed domain refreshes its stick's bus/device from the identity the pool recorded" \
    eval "hook '$W/stick1.xml' stick1 restore begin - >'$W/restored.xml' 2>'$W/restored.err' && [ ! -s '$W/restored.err' ] && grep -q '<address bus=\"1\" device=\"9\"/>' '$W/restored.xml' && grep -q 'identity=\"usb:03e7:2485:serial:S1\"' '$W/restored.xml' && [ \"\$(diff '$W/stick1.xml' '$W/restored.xml' | grep -c '^>')\" = 1 ]"
# The libvirt test driver holds the domain as defined (shut off): `accelvirt
# start` refreshes its definition from the stick's identity, then starts it.
{ echo "<node>"; sed -e 's|type="kvm"|type="test" xmlns:test="http://libvirt.org/schemas/domain/test/1.0"|' \
    -e 's|<vcpu>1</vcpu>|<vcpu>1</vcpu><os><type>hvm</type></os><test:runstate>5</test:runstate>|' "$W/stick1.xml"; echo "</node>"; } >"$W/node.xml"
check "accelvirt start refreshes the persistent definition's USB bus/device numbers from the pool identity, then starts it" \
    eval "avw --connect 'test://$W/node.xml' --json start stick1 >'$W/start.json' && json '$W/start.json' \"d['usb_refreshed'] and not d['replaced']\""
UU5=$(uuid 35); UU6=$(uuid 36)
mkusb "$W/k.xml" k "$UU5" 1 6
mkusb "$W/k2.xml" k2 "$UU6" 1 6
check "a prepare killed after its plan has the stick's claim in its write-ahead record, not in the pool" \
    eval "killed_at prepare-planned '$W/k.xml' k && json '$W/state/pool.json' \"[i['claims'] for i in d['intents']] == [['usb:03e7:2485:serial:S2']] and [x['state'] for x in d['devices'] if x['address'] == '1-3'] == ['free']\""
check "  ... the next call drops the record; another domain then gets the stick" \
    eval "accepted '$W/k2.xml' k2 prepare begin - && [ \"\$(usb_state 1-3)\" = in-use ] && json '$W/state/pool.json' \"d.get('intents', []) == [] and [x['owner']['domain_uuid'] for x in d['devices'] if x['address'] == '1-3'] == ['$UU6']\""
cp "$W/state/pool.json" "$W/pool.usb2"
check "reconnect begin of the domain running with the stick finds the pool agreeing: nothing changes" \
    eval "accepted '$W/k2.xml' k2 reconnect begin - && same_pool '$W/pool.usb2' && ! grep -q 'reconnect: .*1-3' '$W/log'"
mkusb "$W/nos.xml" nos "$UU4" 1 7
echo 'fail USBDEVFS_RESET:* 5' >"$W/host/sys/.accelvirt-fake-kernel"
check "the stick without a serial, named by bus/device, is claimed; a failing port reset quarantines it at release" \
    eval "accepted '$W/nos.xml' nos prepare begin - && [ \"\$(usb_state 1-4)\" = in-use ] && accepted '$W/nos.xml' nos release end - && wait_usb 1-4 quarantined && verify"
check "  ... a domain wanting the quarantined stick is refused" \
    eval "refused 'device USB 1-4 (usb:03e7:2485@port:1-4) is quarantined' '$W/nos.xml' nos prepare begin -"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
world usbm two-socket-8gpu
boot_id "$W/host" 3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0b
avw status >/dev/null
rm -f "$W/host/sys/bus/usb/devices/1-1.2" "$W/host/sys/bus/usb/devices/1-1.2:1.0"
mkusb "$W/gone.xml" gone "$UU1"
check "a hostdev with vendor/product only of the one pooled stick, which is gone from the host: refused, it is missing" \
    eval "refused 'device USB 1-1.2 (usb:03e7:2485:serial:03e72485) is missing' '$W/gone.xml' gone prepare begin -"

# --- one stick: a hostdev whose numbers do not name it (bus 0, a device
# that does not exist, a device of other ids, stale autoAddress numbers)
# still gets it from libvirt by vendor/product: the hook maps it to the stick ---
world usb1 two-socket-8gpu
boot_id "$W/host" 3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0c
rm -f "$W/host/sys/bus/usb/devices/1-1.2" "$W/host/sys/bus/usb/devices/1-1.2:1.0"
usb_stick 1-2 5 S1
UU7=$(uuid 37); UU8=$(uuid 38)
mkusb "$W/own0.xml" own0 "$UU7" 0 5
check "a hostdev with vendor/product and bus 0 claims the one stick of those ids" \
    eval "accepted '$W/own0.xml' own0 prepare begin - && [ \"\$(usb_state 1-2)\" = in-use ] && json '$W/state/pool.json' \"[x['owner']['domain_uuid'] for x in d['devices'] if x['address'] == '1-2'] == ['$UU7']\""
cp "$W/state/pool.json" "$W/pool.usb3"
mkusb "$W/t0.xml" t0 "$UU8" 0 5
check "  ... another domain with bus 0 is refused: the stick is in use (never 'no device managed')" \
    eval "refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is in-use, owner domain .own0' '$W/t0.xml' t0 prepare begin - && same_pool '$W/pool.usb3'"
mkusb "$W/t9.xml" t9 "$UU8" 1 9
check "  ... and with the numbers of a device that does not exist" \
    eval "refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is in-use, owner domain .own0' '$W/t9.xml' t9 prepare begin - && same_pool '$W/pool.usb3'"
mkusb "$W/thub.xml" thub "$UU8" 1 2
check "  ... and with the numbers of the hub (other ids) and the stick's vendor/product" \
    eval "refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is in-use, owner domain .own0' '$W/thub.xml' thub prepare begin - && same_pool '$W/pool.usb3'"
sed "s|<source>|<source autoAddress='yes'>|" "$W/t9.xml" >"$W/tauto.xml"
check "  ... and with autoAddress='yes' and stale numbers" \
    eval "grep -q autoAddress '$W/tauto.xml' && refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is in-use, owner domain .own0' '$W/tauto.xml' t9 prepare begin - && same_pool '$W/pool.usb3'"
printf "<domain type='kvm'><name>nonum</name><uuid>%s</uuid><memory unit='GiB'>1</memory><devices><hostdev mode='subsystem' type='usb'><source><address bus='1' device='9'/></source></hostdev></devices></domain>\n" "$UU8" >"$W/nonum.xml"
check "  ... a hostdev of numbers only that name no device is refused while accelvirt holds sticks" \
    eval "refused 'bus 1 device 9) names no device of this host' '$W/nonum.xml' nonum prepare begin - && same_pool '$W/pool.usb3'"
check "  ... after release, a domain with stale autoAddress numbers claims the scrubbed stick" \
    eval "accepted '$W/own0.xml' own0 release end - && wait_usb 1-2 free && accepted '$W/tauto.xml' t9 prepare begin - && [ \"\$(usb_state 1-2)\" = in-use ] && verify"

# --- USB sticks held: de-authorized (sysfs authorized 0) from the moment
# they go dirty until their scrub passes; the scrub's steps authorize them
# only for themselves; a quarantined stick stays de-authorized ---
world usbhold two-socket-8gpu
boot_id "$W/host" 3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0d
USB_WORKER=$ACCELVIRT_WORKER
ACCELVIRT_WORKER=/bin/true      # the worker runs when a check says so
cat >"$POL/31-usb-plain.json" <<'USBPOL'
{
  "profiles": [
    {
      "name": "test-stick-plain",
      "match": {"vendor": "0x03e7", "device": "0x2486"},
      "attach": "usb",
      "numa": "none",
      "scrub": [{"method": "none"}]
    }
  ]
}
USBPOL
chmod 0644 "$POL/31-usb-plain.json"
rm -f "$W/host/sys/bus/usb/devices/1-1.2" "$W/host/sys/bus/usb/devices/1-1.2:1.0"
usb_stick 1-2 5 S1
usb_stick 1-3 6 S2
usb_stick 1-4 7 S3
echo 2486 >"$W/host/sys/devices/pci0000:00/0000:00:14.0/usb1/1-4/idProduct"
auth() { cat "$W/host/sys/bus/usb/devices/$1/authorized"; }
avh() { ACCELVIRT_WORKER=/bin/true avw "$@"; }
wrk() { ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_LOG_FILE="$W/log" ACCELVIRT_WORKER=/bin/true "$USB_WORKER" </dev/null >/dev/null 2>&1; }
# jhas EVENT EXPR: some journal entry of EVENT makes the Python EXPR (of e) true.
jhas() { python3 -c "import json,sys; sys.exit(0 if any(e['event'] == sys.argv[2] and eval(sys.argv[3]) for e in map(json.loads, open(sys.argv[1]))) else 1)" "$W/state/journal.jsonl" "$1" "$2"; }
# klog PORT: the fake kernel's lines about the stick at PORT, ';'-joined.
klog() { grep -E " $1( |\$)" "$W/host/sys/.accelvirt-fake-kernel.log" | tr '\n' ';'; }
UH1=$(uuid 41); UH2=$(uuid 42); UH3=$(uuid 43); UH4=$(uuid 44)
mkusb "$W/h1.xml" h1 "$UH1" 1 5
mkusb "$W/h2.xml" h2 "$UH2" 1 6
mkusb "$W/h3.xml" h3 "$UH3" 1 7
sed -i 's/0x2485/0x2486/' "$W/h3.xml"
mkusb "$W/hthief.xml" hthief "$UH4" 1 5
check "a stick in use is authorized: its domain's QEMU may configure it" \
    eval "accepted '$W/h1.xml' h1 prepare begin - && [ \"\$(usb_state 1-2)\" = in-use ] && [ \"\$(auth 1-2)\" = 1 ]"
check "release de-authorizes the stick the moment it goes dirty, before any worker runs, and journals it" \
    eval "accepted '$W/h1.xml' h1 release end - && [ \"\$(usb_state 1-2)\" = dirty ] && [ \"\$(auth 1-2)\" = 0 ] && [ \"\$(klog 1-2)\" = 'USB_DEAUTHORIZE 1-2;' ] && jhas transition \"e['address'] == '1-2' and e['to'] == 'dirty' and e.get('usb_hold') == 'deauthorized'\""
check "  ... de-authorized, it keeps its devnum, node and serial: status tells it apart, and a domain naming it by bus/device is refused, it is dirty" \
    eval "avw status >'$W/hstatus.txt' && grep -q 'usb: port 1-2, bus 1 device 5, serial S1' '$W/hstatus.txt' && [ -e '$W/host/dev/bus/usb/001/005' ] && refused 'device USB 1-2 (usb:03e7:2485:serial:S1) is dirty' '$W/hthief.xml' hthief prepare begin -"
echo 1 >"$W/host/sys/bus/usb/devices/1-2/authorized"
check "a dirty stick found authorized again (re-plugged): accelvirt reconcile's sweep de-authorizes it" \
    eval "avh reconcile >/dev/null && [ \"\$(auth 1-2)\" = 0 ] && [ \"\$(usb_state 1-2)\" = dirty ]"
check "the worker's usb-reset and usb-reauthorize leave it de-authorized; only its move to free authorizes it again" \
    eval "wrk && [ \"\$(usb_state 1-2)\" = free ] && [ \"\$(auth 1-2)\" = 1 ] && [ \"\$(klog 1-2)\" = 'USB_DEAUTHORIZE 1-2;USB_DEAUTHORIZE 1-2;USB_AUTHORIZE 1-2 devnum 8;USB_DEAUTHORIZE 1-2;USB_AUTHORIZE 1-2 devnum 9;' ] && jhas scrub-certificate \"e['address'] == '1-2' and e['result'] == 'free' and 'de-authorized throughout' in json.dumps(e) and 'de-authorized again until it is freed' in json.dumps(e)\""
echo 'fail USBDEVFS_RESET:* 5' >"$W/host/sys/.accelvirt-fake-kernel"
check "a stick whose scrub fails is quarantined, and stays de-authorized" \
    eval "accepted '$W/h2.xml' h2 prepare begin - && accepted '$W/h2.xml' h2 release end - && wrk && [ \"\$(usb_state 1-3)\" = quarantined ] && [ \"\$(auth 1-3)\" = 0 ]"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
echo 1 >"$W/host/sys/bus/usb/devices/1-3/authorized"
check "  ... found authorized (re-plugged), the sweep de-authorizes it again" \
    eval "avh reconcile >/dev/null && [ \"\$(auth 1-3)\" = 0 ] && [ \"\$(usb_state 1-3)\" = quarantined ]"
echo 'fail /sys/bus/usb/devices/1-3/authorized 13' >"$W/host/sys/.accelvirt-fake-kernel"
check "  ... quarantine clear cannot authorize it: it stays quarantined and de-authorized" \
    eval "! avh quarantine clear 1-3 >/dev/null 2>'$W/hclear.err' && grep -q \"cannot authorize the USB stick usb:03e7:2485:serial:S2 again\" '$W/hclear.err' && [ \"\$(usb_state 1-3)\" = quarantined ] && [ \"\$(auth 1-3)\" = 0 ]"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... then clear authorizes it on its way to free" \
    eval "avh quarantine clear 1-3 >/dev/null && [ \"\$(usb_state 1-3)\" = free ] && [ \"\$(auth 1-3)\" = 1 ]"
mkusb "$W/h2b.xml" h2 "$UH2" 1 "$(cat "$W/host/sys/bus/usb/devices/1-3/devnum")"
check "accelvirt release --force (the CLI's release) de-authorizes the stick as it goes dirty" \
    eval "accepted '$W/h2b.xml' h2 prepare begin - && [ \"\$(auth 1-3)\" = 1 ] && avh release --force h2 >/dev/null && [ \"\$(usb_state 1-3)\" = dirty ] && [ \"\$(auth 1-3)\" = 0 ]"
check "a stick whose authorization fails on its way to free is quarantined, never free, and stays de-authorized" \
    eval "accepted '$W/h3.xml' h3 prepare begin - && accepted '$W/h3.xml' h3 release end - && [ \"\$(auth 1-4)\" = 0 ] && echo 'fail /sys/bus/usb/devices/1-4/authorized 13' >'$W/host/sys/.accelvirt-fake-kernel' && wrk && [ \"\$(usb_state 1-4)\" = quarantined ] && [ \"\$(auth 1-4)\" = 0 ] && jhas scrub-certificate \"e['address'] == '1-4' and e['result'] == 'quarantined' and 'cannot authorize the USB stick' in e['reason']\""
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... and the journal of it all verifies" verify
ACCELVIRT_WORKER=$USB_WORKER
# --- a released mdev is removed as it goes dirty, whoever releases it, and
# its parent gives no new mdev while a released one is still there ---
world mhold vgpu-mdev
ACCELVIRT_WORKER=/bin/true      # the worker runs when a check says so
MH1=8f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b01
MH2=8f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b02
MH3=8f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b03
MH4=8f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b04
UM1=$(uuid 51); UM2=$(uuid 52); UM3=$(uuid 53); UM4=$(uuid 54)
NODE0="<numatune><memory mode='strict' nodeset='0'/></numatune>"
mkdom "$W/ma.xml" ma "$UM1" "mdev:$MH1" -- "$NODE0"
mkdom "$W/mb.xml" mb "$UM2" "mdev:$MH2" -- "$NODE0"
mkdom "$W/mc.xml" mc "$UM3" "mdev:$MH3" -- "$NODE0"
mkdom "$W/md.xml" md "$UM4" "mdev:$MH4"
mexists() { [ -e "$W/host/sys/bus/mdev/devices/$1" ]; }
mparent() { python3 -c "import json,sys; print(' '.join(x['address'] + '/' + x['state'] for x in json.load(open(sys.argv[1]))['devices'] if x['identity'] == 'mdev:' + sys.argv[2]))" "$W/state/pool.json" "$1"; }
check "accelvirt release --force removes the mdev accelvirt created as it goes dirty, before any worker, and journals it" \
    eval "accepted '$W/ma.xml' ma prepare begin - && mexists $MH1 && avh release --force ma >/dev/null && ! mexists $MH1 && [ \"\$(mparent $MH1)\" = 0000:17:00.0/dirty ] && jhas transition \"e['identity'] == 'mdev:$MH1' and e['to'] == 'dirty' and e.get('mdev_removed') is True\""
echo "fail /sys/bus/mdev/devices/$MH2/remove 16" >"$W/host/sys/.accelvirt-fake-kernel"
check "an mdev whose removal fails at its release stays dirty, the failure journalled and logged" \
    eval "accepted '$W/mb.xml' mb prepare begin - && accepted '$W/mb.xml' mb release end - && mexists $MH2 && [ \"\$(mparent $MH2)\" = 0000:17:00.0/dirty ] && jhas transition \"e['identity'] == 'mdev:$MH2' and 'busy' in e.get('mdev_remove_error', '')\" && grep -q 'cannot remove mdev $MH2 at its release' '$W/log'"
check "  ... its parent, the only one of node 0, gives no new mdev meanwhile: a domain bound to node 0 is refused" \
    eval "refused \"no mdev parent has a free instance of type 'nvidia-590' on NUMA node 0\" '$W/mc.xml' mc prepare begin - && ! mexists $MH3"
check "  ... one bound to no node gets its mdev on the other parent (node 1)" \
    eval "accepted '$W/md.xml' md prepare begin - && [ \"\$(mparent $MH4)\" = 0000:98:00.0/in-use ]"
rm -f "$W/host/sys/.accelvirt-fake-kernel"
check "  ... once the worker removed it (its scrub), the parent gives mdevs again" \
    eval "wrk && ! mexists $MH2 && [ -z \"\$(mparent $MH2)\" ] && [ -z \"\$(mparent $MH1)\" ] && accepted '$W/mc.xml' mc prepare begin - && [ \"\$(mparent $MH3)\" = 0000:17:00.0/in-use ] && verify"
ACCELVIRT_WORKER=$USB_WORKER

# --- kernel-enforced holds (issue 14): a dirty, scrubbing or quarantined
# device's VFIO group is held open by an accelvirt-hold process, so that a
# QEMU's open of it fails (the fake kernel: flock of /dev/vfio/N) ---
world holds two-socket-8gpu
REAL_WORKER=$ACCELVIRT_WORKER
ACCELVIRT_WORKER=/bin/true      # the worker runs when a check says so
UH=$(uuid 60)
mkdom "$W/vm1.xml" vm1 "$UH" 0000:17:00.0 -- "<vcpu placement='static' cpuset='0-3'>2</vcpu>"
holder() { sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$W/state/holds/$1.json" 2>/dev/null; }
is_holder() { [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = accelvirt-hold ]; }
gone() { i=0; while [ -e "/proc/$1" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done; [ $i -lt 100 ]; }
qemu_open() { flock -n "$W/host/dev/vfio/$1" true; }     # as QEMU's open of the group
grab() {    # GROUP: a process keeps the group open, its pid in $W/grab.pid
    rm -f "$W/grab.pid"
    setsid /usr/bin/python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1], "r+")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(120)' "$W/host/dev/vfio/$1" "$W/grab.pid" </dev/null >/dev/null 2>&1 &
    i=0; while [ ! -s "$W/grab.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done; [ -s "$W/grab.pid" ]
}
ungrab() { kill "$(cat "$1")" 2>/dev/null; rm -f "$1"; }
worker() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_LOG_FILE="$W/log" \
    AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" "$REAL_WORKER"
}
hst() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
st_of() { json "$W/st.json" "[x['state'] for x in d['devices'] if x['address'] == '0000:17:00.0'] == ['$1']"; }
check "holds: prepare and start vm1 with the A100 (managed='no')" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && accepted '$W/vm1.xml' vm1 start begin - && [ ! -e '$W/state/holds/40.json' ]"
check "  ... release end leaves it dirty and held: a live accelvirt-hold recorded in holds/40.json" \
    eval "accepted '$W/vm1.xml' vm1 release end - && status && st_of dirty && is_holder \"\$(holder 40)\""
H1=$(holder 40)
check "  ... a QEMU's open of /dev/vfio/40 fails now (a virsh attach-device of the dirty device)" eval "! qemu_open 40"
check "  ... status says 'held: pid N since T', and --json its hold" \
    eval "hst status --no-sync | grep -q '    held: pid $H1 since ' && hst status --no-sync --json >'$W/st.json' && json '$W/st.json' \"[x['hold']['pid'] for x in d['devices'] if x['address'] == '0000:17:00.0'] == [$H1]\""
kill -9 "$H1"
check "  ... its holder killed: status warns 'hold: none'" eval "gone $H1 && hst status --no-sync | grep -q '    hold: none (warning'"
check "  ... and reconcile's sweep takes it again" \
    eval "hst reconcile >/dev/null && H2=\$(holder 40) && [ \"\$H2\" != '$H1' ] && is_holder \"\$H2\" && ! qemu_open 40"
H2=$(holder 40)
check "  ... the worker scrubs it through the hold (its command step without it), frees it and drops the hold" \
    eval "worker && status && st_of free && gone $H2 && [ ! -e '$W/state/holds/40.json' ] && grep -q '0000:17:00.0' '$W/scrub.log'"
check "  ... freed, a QEMU may open the group (once the driver is vfio-pci again)" \
    eval "! hst status --no-sync | grep -q 'held:' && { [ ! -e '$W/host/dev/vfio/40' ] || qemu_open 40; }"
check "accelvirt release --force (the CLI's release) holds the device's group as it goes dirty, as release end does (one release for all)" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && hst release --force vm1 >/dev/null && status && st_of dirty && is_holder \"\$(holder 40)\" && ! qemu_open 40 && worker && status && st_of free && [ ! -e '$W/state/holds/40.json' ]"
check "  ... and with the group open in another process it quarantines the device at once (unscrubbed), never frees it" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && grab 40 && hst release --force vm1 >/dev/null 2>&1 && status && st_of quarantined && json '$W/st.json' \"'open in another process' in [x['reason'] for x in d['devices'] if x['address'] == '0000:17:00.0'][0]\" && [ ! -e '$W/state/holds/40.json' ] && verify"
ungrab "$W/grab.pid"
check "  ... a scrub by hand and quarantine clear free it again" \
    eval "hst reconcile >/dev/null && hst scrub 0000:17:00.0 >/dev/null && hst quarantine clear 0000:17:00.0 >/dev/null && status && st_of free && [ ! -e '$W/state/holds/40.json' ]"
check "a group some process has open at release end: the device is quarantined with the reason, never freed" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && grab 40 && accepted '$W/vm1.xml' vm1 release end - && status && st_of quarantined && json '$W/st.json' \"'open in another process' in [x['reason'] for x in d['devices'] if x['address'] == '0000:17:00.0'][0]\" && [ ! -e '$W/state/holds/40.json' ] && grep -q '\"to\": *\"quarantined\"' '$W/state/journal.jsonl' && verify"
ungrab "$W/grab.pid"
check "  ... once that process is gone, reconcile holds the quarantined device; quarantine clear refuses it (unscrubbed) until a scrub by hand passes, then frees it and drops the hold" \
    eval "hst reconcile >/dev/null && H3=\$(holder 40) && is_holder \"\$H3\" && ! hst quarantine clear 0000:17:00.0 >'$W/clear.out' 2>&1 && grep -q \"no scrub has cleared it since.*run 'accelvirt scrub 0000:17:00.0' first\" '$W/clear.out' && status && st_of quarantined && hst scrub 0000:17:00.0 >/dev/null && hst quarantine clear 0000:17:00.0 >/dev/null && gone \"\$H3\" && [ ! -e '$W/state/holds/40.json' ] && status && st_of free"
check "a command step keeps the hold: a process trying to open the group meanwhile is refused, the program gets the held group file as fd 3 (ACCELVIRT_SCRUB_VFIO_GROUP_FD=3), the device is freed" \
    eval "accepted '$W/vm1.xml' vm1 prepare begin - && accepted '$W/vm1.xml' vm1 release end - && echo '$W/host/dev/vfio/40' >'$W/scrub.log.grab' && worker; rm -f '$W/scrub.log.grab'; [ \"\$(cat '$W/scrub.log.grab.pid')\" = busy ] && grep -qx 'fd3=$W/host/dev/vfio/40 env=3' '$W/scrub.log' && status && st_of free"
ungrab "$W/scrub.log.grab.pid"
check "a scrub that fails quarantines the device and keeps it held" \
    eval "[ ! -e '$W/state/holds/40.json' ] && accepted '$W/vm1.xml' vm1 prepare begin - && accepted '$W/vm1.xml' vm1 release end - && touch '$W/scrub-fail' && worker; rm -f '$W/scrub-fail'; status && st_of quarantined && is_holder \"\$(holder 40)\" && ! qemu_open 40"
kill_holds "$W"

# A scrub never runs unheld: a device on vfio-pci is held from its scrub's
# first step to its last (the worker takes the hold again when it is gone),
# or quarantined before any step.  held_world NAME: a world whose A100 vm1
# has released (dirty, held); scrubbing: as a worker killed mid-scrub leaves
# it (its hold dropped for a "vm" step and never taken again: killed here).
held_world() {
    kill_holds "$W"
    world "$1" two-socket-8gpu
    mkdom "$W/vm1.xml" vm1 "$UH" 0000:17:00.0 -- "<vcpu placement='static' cpuset='0-3'>2</vcpu>"
    accepted "$W/vm1.xml" vm1 prepare begin - && accepted "$W/vm1.xml" vm1 release end - && is_holder "$(holder 40)"
}
scrubbing_unheld() {
    python3 - "$W/state/pool.json" <<'PY' || return 1
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if d["address"] == "0000:17:00.0":
        d["state"] = "scrubbing"
json.dump(p, open(sys.argv[1], "w"), indent=2)
PY
    h=$(holder 40) && kill -9 "$h" && gone "$h"
}
held_world unheld-1
check "a worker that cannot hold the group of a device on vfio-pci (its holder program cannot start) quarantines it: no scrub step runs unheld" \
    eval "h=\$(holder 40) && kill -9 \$h && gone \$h && ACCELVIRT_HOLD=/nonexistent worker; status && st_of quarantined && [ ! -s '$W/scrub.log' ] && json '$W/st.json' \"'cannot run the holder program' in [x['reason'] for x in d['devices'] if x['address'] == '0000:17:00.0'][0]\""
held_world unheld-2
check "a device left scrubbing without its hold, its group open in another process: the next worker quarantines it, no step run" \
    eval "scrubbing_unheld && grab 40 && worker; status && st_of quarantined && [ ! -s '$W/scrub.log' ] && json '$W/st.json' \"'open in another process' in [x['reason'] for x in d['devices'] if x['address'] == '0000:17:00.0'][0]\""
ungrab "$W/grab.pid"
held_world unheld-3
resumed() {
    scrubbing_unheld || { echo "cannot leave it scrubbing without its hold"; return 1; }
    [ ! -s "$W/scrub.log" ] || { echo "a step ran before the worker"; return 1; }
    worker || { echo "the worker failed:"; cat "$W/log"; return 1; }
    status && st_of free || { echo "not free:"; cat "$W/st.json" "$W/log"; return 1; }
    grep -q '0000:17:00.0' "$W/scrub.log" || { echo "no step ran"; return 1; }
    [ ! -e "$W/state/holds/40.json" ] || { echo "its hold is left"; return 1; }
    grep -q 'scrubbing it again from its first step, held' "$W/log" || { echo "no resume:"; cat "$W/log"; return 1; }
}
check "  ... its group free: the next worker holds it again, scrubs it from its first step and frees it" resumed
kill_holds "$W"

# A vGPU VF stays on NVIDIA's driver, and is held all the same: it is a VFIO
# device (vfio-dev/), and its vGPU, with the last tenant's framebuffer share,
# lives until its scrub.
world vgpuhold vgpu-sriov
mkdom "$W/g.xml" g "$UH" 0000:17:00.1
check "a vGPU VF released: dirty, its vGPU kept for the scrub, its group held (a virsh attach-device's QEMU cannot open it)" \
    eval "with_gpol accepted '$W/g.xml' g prepare begin - && with_gpol accepted '$W/g.xml' g release end - && status && json '$W/st.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:17:00.1'] == ['dirty']\" && [ \"\$(vgpu_of 0000:17:00.1)\" = 1156 ] && is_holder \"\$(holder 61)\" && ! qemu_open 61"
H4=$(holder 61)
check "  ... the worker scrubs it held, destroys its vGPU, frees it and drops the hold" \
    eval "with_gpol worker && status && json '$W/st.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:17:00.1'] == ['free']\" && [ \"\$(vgpu_of 0000:17:00.1)\" = 0 ] && gone $H4 && [ ! -e '$W/state/holds/61.json' ] && [ \"\$(driver 0000:17:00.1)\" = nvidia ]"
kill_holds "$W"
ACCELVIRT_WORKER=$REAL_WORKER

# --- issue 15: bitstreams checked at prepare, driver commands, the base image
# back at release.  The host fpga-regions: PF 0000:3b:00.0 of card 3b has
# four VFs 3b:01.x (10ee:5051, each its own IOMMU group, on xocl): regions of
# one card, each a pool device of test-fpga (tests/data/hook-fpga.json),
# programmed by tests/data/hook-program.sh into its fake BAR file resource2 ---
world fpga fpga-regions
POL="$AV_TMP/policies-fpga"
hook_policies "$POL"
sed -e "s|@PROGRAM@|$AV_TEST_SRCDIR/data/hook-program.sh|g" -e "s|@SCRUB@|$AV_TEST_SRCDIR/data/hook-scrub.sh|g" \
    "$AV_TEST_SRCDIR/data/hook-fpga.json" >"$POL/30-fpga.json"
chmod 0644 "$POL/30-fpga.json"
PLOG="$W/scrub.log.program"
FDEV=/sys/bus/pci/devices
bar() { cat "$W/host$FDEV/$1/resource2" 2>/dev/null; }
mkdir -p "$W/bits" && chmod 0755 "$W/bits"
for b in test-base fn-x fn-y; do echo "bitstream $b" >"$W/bits/$b.bit"; chmod 0644 "$W/bits/$b.bit"; done
sha() { sha256sum "$W/bits/$1.bit" | cut -d' ' -f1; }
for a in 0000:3b:01.0 0000:3b:01.1 0000:3b:01.2 0000:3b:01.3 0000:3b:02.0 0000:3b:02.1; do
    echo "logic of nobody" >"$W/host$FDEV/$a/resource2"
done
# fpga_placed UUID NAME ADDRESS BITSTREAM: the pool's placement record of the
# domain, as `accelvirt define` leaves it: ADDRESS placed for it with the
# sha256 of BITSTREAM.  programmed ADDRESS BITSTREAM: the pool records that
# ADDRESS holds BITSTREAM (as `accelvirt program` leaves it).
fpga_placed() {
    python3 - "$W/state/pool.json" "$1" "$2" "$3" "$(sha "$4")" <<'PY'
import json, sys
path, uuid, name, address, sha = sys.argv[1:6]
p = json.load(open(path))
ident = [x["identity"] for x in p["devices"] if x.get("address") == address and x["kind"] == "pci"][0]
p["placements"] = [r for r in p.get("placements", []) if r["domain_uuid"] != uuid] + [{
    "domain_uuid": uuid, "domain_name": name, "numa_node": -1,
    "requests": [{"profile": "test-fpga", "count": 1, "granularity": None, "numa_any": False}],
    "devices": [{"profile": "test-fpga", "attach": "sriov-vf", "identity": ident, "address": address,
                 "mdev_uuid": None, "usb_bus_path": None, "numa_node": -1, "bitstream": sha}]}]
json.dump(p, open(path, "w"), indent=2)
PY
}
programmed() {
    python3 - "$W/state/pool.json" "$1" "$2" "$(sha "$2")" <<'PY'
import json, sys
path, address, name, sha = sys.argv[1:5]
p = json.load(open(path))
for x in p["devices"]:
    if x.get("address") == address and x["kind"] == "pci":
        x["programmed"] = {"sha256": sha, "name": name, "since": 1, "by": "operator", "verified": "by hand"}
json.dump(p, open(path, "w"), indent=2)
PY
    cp "$W/bits/$2.bit" "$W/host$FDEV/$1/resource2"
}
# fstate ADDRESS: its state in the pool; fheld ADDRESS: the name it holds, or none.
fstate() { status && python3 -c "import json,sys; print([x['state'] for x in json.load(open(sys.argv[1]))['devices'] if x['address'] == sys.argv[2]][0])" "$W/st.json" "$1"; }
fheld() { python3 -c "import json,sys; print(([x.get('programmed') for x in json.load(open(sys.argv[1]))['devices'] if x['address'] == sys.argv[2]][0] or {}).get('name', 'none'))" "$W/state/pool.json" "$1"; }
# journalled EVENT COND: an entry EVENT of the journal of $W has COND (Python, of e).
journalled() {
    python3 -c "import json,sys; sys.exit(0 if any(e['event'] == sys.argv[2] and eval(sys.argv[3]) for e in map(json.loads, open(sys.argv[1]))) else 1)" "$W/state/journal.jsonl" "$1" "$2"
}
fhst() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
check "fpga: the library gets the base image and two functions, the pool its devices" \
    eval "fhst bitstream add '$W/bits/test-base.bit' --name test-base >/dev/null && fhst bitstream add '$W/bits/fn-x.bit' --name fn-x >/dev/null && fhst bitstream add '$W/bits/fn-y.bit' --name fn-y >/dev/null && fhst reconcile >/dev/null && [ \"\$(fstate 0000:3b:01.0)\" = free ]"
UF=$(uuid 70)
mkdom "$W/fvm.xml" fvm "$UF" 0000:3b:01.0
fpga_placed "$UF" fvm 0000:3b:01.0 fn-x
programmed 0000:3b:01.1 fn-y
cp "$W/state/pool.json" "$W/pool.fpga0"
# Reconcile puts back on vfio-pci only the keep-vfio devices accelvirt had
# there (issue 17), not these, which never had a tenant; "nothing bound"
# compares with the driver each had before.
FD0=$(driver 0000:3b:01.0)
check "reconcile leaves a keep-vfio region that never had a tenant on its own driver" [ "$FD0" = xocl ]
check "prepare of a domain placed with bitstream fn-x on a device that does not hold it is refused, in one line" \
    refused "device 0000:3b:01.0 does not hold bitstream fn-x (sha256 $(sha fn-x | cut -c1-12)...) that domain 'fvm' asked for; 'accelvirt start fvm' programs it" "$W/fvm.xml" fvm prepare begin -
check "  ... nothing bound, claimed or run" \
    eval "[ \"\$(driver 0000:3b:01.0)\" = '$FD0' ] && [ \"\$(fstate 0000:3b:01.0)\" = free ] && [ ! -e '$PLOG' ]"
programmed 0000:3b:01.0 fn-y
check "  ... nor when it holds another bitstream" \
    eval "refused 'device 0000:3b:01.0 does not hold bitstream fn-x' '$W/fvm.xml' fvm prepare begin - && [ \"\$(fstate 0000:3b:01.0)\" = free ]"
programmed 0000:3b:01.0 fn-x
check "once the pool records that it holds fn-x, the prepare takes it and runs its on_prepare command with the device's and the domain's variables" \
    eval "accepted '$W/fvm.xml' fvm prepare begin - && [ \"\$(fstate 0000:3b:01.0)\" = in-use ] && [ \"\$(driver 0000:3b:01.0)\" = vfio-pci ] && grep -q '^on_prepare 0000:3b:01.0 point=on_prepare device=0000:3b:01.0 card=0000:3b:00.0 region=0 .*profile=test-fpga name=fn-x sha256=$(sha fn-x) domain=fvm uuid=$UF fd=none' '$PLOG' && journalled driver \"e['point'] == 'on_prepare' and e['ok'] and e['domain_uuid'] == '$UF' and e['domain_name'] == 'fvm' and e['by'] == 'hook' and 'report' not in e\""
echo "the tenant's own logic" >"$W/host$FDEV/0000:3b:01.0/resource2"
check "release drops the record; the worker runs the owed on_release, programs the base image back (the held group file as fd 3), verifies it, frees the device and records test-base by scrub" \
    eval "accepted '$W/fvm.xml' fvm release end - && wait_state 0000:3b:01.0 free && grep -q '^on_release 0000:3b:01.0 point=on_release .*domain=fvm' '$PLOG' && grep -q '^program 0000:3b:01.0 .*/bitstreams/$(sha test-base).bit point=program .*name=test-base .*fd=3:.*/dev/vfio/' '$PLOG' && grep -q '^verify 0000:3b:01.0 ' '$PLOG' && grep -q '^on_free 0000:3b:01.0 .*name=test-base ' '$PLOG' && [ \"\$(bar 0000:3b:01.0)\" = 'bitstream test-base' ] && [ \"\$(fheld 0000:3b:01.0)\" = test-base ] && json '$W/state/pool.json' \"[x['programmed']['by'] for x in d['devices'] if x['address'] == '0000:3b:01.0'] == ['scrub']\" && journalled transition \"e.get('programmed_dropped') == '$(sha fn-x)'\" && journalled program \"e['ok'] and e['by'] == 'scrub' and e['name'] == 'test-base' and e['verify']['ok']\" && journalled driver \"e['point'] == 'on_free' and e['ok']\""
check "  ... region isolation: the card's other region keeps its bitstream, in the pool and in its bytes" \
    eval "[ \"\$(fheld 0000:3b:01.1)\" = fn-y ] && [ \"\$(bar 0000:3b:01.1)\" = 'bitstream fn-y' ] && ! grep -q ' 0000:3b:01.1 ' '$PLOG'"
check "  ... and the domain is refused again: its device holds the base image now" \
    refused "device 0000:3b:01.0 does not hold bitstream fn-x" "$W/fvm.xml" fvm prepare begin -
mkdom "$W/f2.xml" f2 "$(uuid 71)" 0000:3b:01.2 0000:3b:01.3
: >"$W/scrub-fail.on_prepare.0000:3b:01.3"
FD2=$(driver 0000:3b:01.2) FD3=$(driver 0000:3b:01.3)
check "a failing on_prepare command refuses the domain in one line and undoes the prepare: both devices back on their driver, free, the on_release of the one whose on_prepare had run run too" \
    eval "refused 'the on_prepare command of profile .test-fpga. for 0000:3b:01.3 failed' '$W/f2.xml' f2 prepare begin - && [ \"\$(driver 0000:3b:01.2)\" = '$FD2' ] && [ \"\$(driver 0000:3b:01.3)\" = '$FD3' ] && [ \"\$(fstate 0000:3b:01.2)\" = free ] && [ \"\$(fstate 0000:3b:01.3)\" = free ] && grep -q '^on_prepare 0000:3b:01.2 ' '$PLOG' && grep -q '^on_release 0000:3b:01.2 ' '$PLOG' && ! grep -q '^on_release 0000:3b:01.3 ' '$PLOG'"
rm -f "$W/scrub-fail.on_prepare.0000:3b:01.3"
# quarantined_by N U ADDRESS WHAT REASON: domain fN (UUID number U) takes
# ADDRESS and is released while the fake program fails WHAT: the device ends
# quarantined, REASON in its reason.
quarantined_by() {
    mkdom "$W/f$1.xml" "f$1" "$(uuid "$2")" "$3"
    accepted "$W/f$1.xml" "f$1" prepare begin - || return 1
    : >"$W/scrub-fail.$4"
    accepted "$W/f$1.xml" "f$1" release end - && wait_state "$3" quarantined &&
        json "$W/state/pool.json" "[('$5' in x['reason']) for x in d['devices'] if x['address'] == '$3'] == [True]"
    r=$?
    rm -f "$W/scrub-fail.$4"
    return $r
}
check "a failing on_release command quarantines the device (unscrubbed) with the error" \
    eval "quarantined_by 3 72 0000:3b:01.3 on_release on_release && json '$W/state/pool.json' \"[x.get('unscrubbed') for x in d['devices'] if x['address'] == '0000:3b:01.3'] == [True]\""
check "a program-base step that fails quarantines the device; it holds no recorded bitstream" \
    eval "quarantined_by 4 73 0000:3b:02.0 program program-base && [ \"\$(fheld 0000:3b:02.0)\" = none ]"
check "a failing on_free command quarantines the device after its scrub" \
    eval "quarantined_by 5 74 0000:3b:02.1 on_free on_free && [ \"\$(bar 0000:3b:02.1)\" = 'bitstream test-base' ]"
mkdom "$W/f6.xml" f6 "$(uuid 75)" 0000:3b:00.2
echo "the tenant's management logic" >"$W/host$FDEV/0000:3b:00.2/resource2"
check "a program of driver 'host' runs on the device's host driver, without the group file; the device goes back to vfio-pci and its hold, then to its driver once free" \
    eval "accepted '$W/f6.xml' f6 prepare begin - && [ \"\$(driver 0000:3b:00.2)\" = vfio-pci ] && accepted '$W/f6.xml' f6 release end - && wait_state 0000:3b:00.2 free && grep -q '^program 0000:3b:00.2 .*fd=none:none driver=xclmgmt' '$PLOG' && [ \"\$(bar 0000:3b:00.2)\" = 'bitstream test-base' ] && [ \"\$(fheld 0000:3b:00.2)\" = test-base ] && [ \"\$(driver 0000:3b:00.2)\" = xclmgmt ]"
mkdom "$W/f7.xml" f7 "$(uuid 76)" 0000:3b:01.2
fpga_placed "$(uuid 76)" f7 0000:3b:01.2 fn-y
programmed 0000:3b:01.2 fn-y
check "a release the hook did not do (accelvirt release of a domain that looks alive, --force): the worker runs the owed on_release first (with the bitstream the domain asked for), then scrubs and frees it" \
    eval "accepted '$W/f7.xml' f7 prepare begin - && : >'$PLOG' && AV_SCRUB_LOG='$W/scrub.log' AV_SCRUB_FAIL='$W/scrub-fail' ACCELVIRT_WORKER='$ACCELVIRT_WORKER' avw release --force 0000:3b:01.2 >/dev/null && wait_state 0000:3b:01.2 free && sed -n 1p '$PLOG' | grep -q '^on_release 0000:3b:01.2 .*name=fn-y ' && grep -q '^on_free 0000:3b:01.2 ' '$PLOG' && journalled driver \"e['point'] == 'on_release' and e.get('by') == 'scrub' and e['ok'] and e['domain_name'] == 'f7' and e['identity'] and 'report' not in e\" && json '$W/state/pool.json' \"[x.get('release_pending') for x in d['devices'] if x['address'] == '0000:3b:01.2'] == [None]\""
mkdom "$W/f8.xml" f8 "$(uuid 77)" 0000:3b:01.0 0000:3b:01.2
echo 2 >"$W/scrub-fail.sleep.on_prepare"
export ACCELVIRT_TEST_DRIVER_BUDGET=3
check "the hook's driver commands share one budget (3 s here, 60 s for real): the second on_prepare gets what is left (1 s), is killed, and the prepare is refused and undone" \
    eval "refused 'the on_prepare command of profile .test-fpga. for 0000:3b:01.2 failed: .* killed after its timeout of 1 s' '$W/f8.xml' f8 prepare begin - && [ \"\$(fstate 0000:3b:01.0)\" = free ] && [ \"\$(fstate 0000:3b:01.2)\" = free ]"
unset ACCELVIRT_TEST_DRIVER_BUDGET
rm -f "$W/scrub-fail.sleep.on_prepare"
check "the journal keeps its chain" verify

# --- the source of a live migration ---
# libvirt's hooks (docs/hooks.rst): once a domain has migrated away, the
# source's QEMU is gone and the source runs "stopped end" and "release end"
# for it, as for a domain shut down.  What the tenant left on the device is
# still there: the device goes dirty and is scrubbed before anyone has it.
world migrated two-socket-8gpu
mkdom "$W/mig.xml" migrant "$(uuid 90)" 0000:17:00.0
mkdom "$W/next.xml" next "$(uuid 91)" 0000:17:00.0
hook "$W/mig.xml" migrant prepare begin - >/dev/null 2>&1
# No worker yet (a no-op one): the state between release and scrub is seen.
check "a domain migrated away: stopped end, then release end on the source leave the device dirty, never free" \
    eval "(ACCELVIRT_WORKER=/bin/true; accepted '$W/mig.xml' migrant stopped end - && accepted '$W/mig.xml' migrant release end -) && status && python3 -c \"import json; d=json.load(open('$W/st.json')); assert [x['state'] for x in d['devices'] if x['address'] == '0000:17:00.0'] == ['dirty']\""
check "  ... another domain is refused it until its scrub is done" \
    refused "device 0000:17:00.0 .* is dirty" "$W/next.xml" next prepare begin -
ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" AV_SCRUB_LOG="$W/scrub.log" \
    "$ACCELVIRT_WORKER" </dev/null >/dev/null 2>&1
check "  ... the worker scrubs it by its profile's step, and frees it" \
    eval "wait_state 0000:17:00.0 free && grep -qx -- '--test 0000:17:00.0 40' '$W/scrub.log'"
check "  ... its certificate names the domain that migrated away" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep '\"result\": *\"free\"' | grep -q '\"domain_name\": *\"migrant\"'"
check "  ... the next domain gets it" accepted "$W/next.xml" next prepare begin -

# --- one scrub transaction: the worker and `accelvirt scrub` record the same ---
# The same release is scrubbed by the worker in one world and by hand in
# another (both through src/lifecycle/av-scrub-job.c): the end state (the
# pool's record of the device, every driver) and the journal are the same
# but for who ran it and when.  Before they shared it, `accelvirt scrub`
# of a dirty device left it and its group on vfio-pci where the worker
# gave them back to their host drivers.
released_twice() {   # NAME ADDRESS [fail]: worlds $NAME-w and $NAME-c, the device released by a domain
    for m in w c; do
        world "$1-$m" two-socket-8gpu
        mkdom "$W/vm.xml" vm "$(uuid 95)" "$2" -- "<vcpu placement='static' cpuset='0-3'>2</vcpu>"
        for op in "prepare begin" "start begin" "release end"; do
            # shellcheck disable=SC2086
            (ACCELVIRT_WORKER=/bin/true; hook "$W/vm.xml" vm $op -) >/dev/null 2>&1 || return 1
        done
        [ -z "$3" ] || touch "$W/scrub-fail"
    done
}
scrubbed_twice() {   # NAME ADDRESS: the worker in $NAME-w, `accelvirt scrub` in $NAME-c
    W="$AV_TMP/$1-w"
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_LOG_FILE="$W/log" \
        AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" "$REAL_WORKER" </dev/null >/dev/null 2>&1
    W="$AV_TMP/$1-c"
    AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" ACCELVIRT_WORKER=/bin/true \
        "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" scrub "$2" >/dev/null 2>&1
    return 0
}
same_scrub() {   # NAME ADDRESS STATE: both worlds end with the device in STATE, and agree
    a="$AV_TMP/$1-w"; b="$AV_TMP/$1-c"
    for d in "$a" "$b"; do
        W=$d; drivers >"$d/drivers.end"
    done
    cmp "$a/drivers.end" "$b/drivers.end" || { diff "$a/drivers.end" "$b/drivers.end"; return 1; }
    python3 - "$a/state" "$b/state" "$2" "$3" <<'PY'
import json, sys
# Who ran the scrub, and when, is all that may differ.
DROP = {"time", "seq", "prev", "started", "seconds", "operator", "scrubbed_by", "state_before", "state_since",
        "last_seen", "first_seen", "failures_since", "since", "by"}
def norm(x):
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items() if k not in DROP}
    if isinstance(x, list):
        return [norm(v) for v in x]
    return x
def journal(d):
    return [norm(json.loads(l)) for l in open(d + "/journal.jsonl")]
def device(d):
    return [norm(x) for x in json.load(open(d + "/pool.json"))["devices"] if x.get("address") == sys.argv[3]]
a, b = journal(sys.argv[1]), journal(sys.argv[2])
if a != b:
    for x, y in zip(a, b):
        if x != y:
            print("worker:", json.dumps(x, sort_keys=True)); print("scrub: ", json.dumps(y, sort_keys=True)); break
    sys.exit("the journals differ (%d and %d entries)" % (len(a), len(b)))
da, db = device(sys.argv[1]), device(sys.argv[2])
if da != db:
    sys.exit("the pool's records differ:\n%s\n%s" % (da, db))
if [x["state"] for x in da] != [sys.argv[4]]:
    sys.exit("the device is %s, not %s" % ([x["state"] for x in da], sys.argv[4]))
certs = [x for x in a if x["event"] == "scrub-certificate"]
if len(certs) != 1 or not certs[0].get("previous_owner"):
    sys.exit("one certificate naming the domain expected: %s" % certs)
PY
}
released_twice same-ok 0000:98:00.0
scrubbed_twice same-ok 0000:98:00.0
check "a released A6000 scrubbed by the worker and by 'accelvirt scrub': the same journal, pool record and drivers (both functions back on nvidia and snd_hda_intel)" \
    eval "same_scrub same-ok 0000:98:00.0 free && W='$AV_TMP/same-ok-c' && [ \"\$(driver 0000:98:00.0)\" = nvidia ] && [ \"\$(driver 0000:98:00.1)\" = snd_hda_intel ]"
released_twice same-fail 0000:98:00.0 fail
scrubbed_twice same-fail 0000:98:00.0
check "  ... and when its step fails: both quarantine it, on vfio-pci, with the same reason and journal" \
    eval "same_scrub same-fail 0000:98:00.0 quarantined && W='$AV_TMP/same-fail-c' && [ \"\$(driver 0000:98:00.0)\" = vfio-pci ]"
released_twice same-a100 0000:17:00.0
scrubbed_twice same-a100 0000:17:00.0
check "  ... an A100 (a function alone in its group) likewise" same_scrub same-a100 0000:17:00.0 free
# A device a domain had on which no step could run (here: its profile is
# gone from the policies) keeps what the domain left: quarantined as
# unscrubbed, which `quarantine clear` refuses until a scrub by hand passes.
released_twice noprofile 0000:98:00.0
NPOL="$AV_TMP/noprofile-policies"
cp -a "$POL" "$NPOL" && python3 - "$NPOL/10-gpu.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["profiles"] = [p for p in d["profiles"] if p["name"] != "test-a6000"]
json.dump(d, open(sys.argv[1], "w"))
PY
W="$AV_TMP/noprofile-w"
ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$NPOL" ACCELVIRT_LOG_FILE="$W/log" \
    "$REAL_WORKER" </dev/null >/dev/null 2>&1
check "a released device whose profile is gone: quarantined unscrubbed, and 'quarantine clear' refuses it in one line" \
    eval "json '$W/state/pool.json' \"[(x['state'], x.get('unscrubbed')) for x in d['devices'] if x['address'] == '0000:98:00.0'] == [('quarantined', True)]\" && expect_exit 1 env ACCELVIRT_WORKER=/bin/true '$AV' --root '$W/host' --policy-dir '$NPOL' --state-dir '$W/state' quarantine clear 0000:98:00.0 && grep -q 'no scrub has cleared it since' '$AV_TMP/err' && [ \$(wc -l <'$AV_TMP/err') -eq 1 ]"

# --- a stick whose firmware changes its ids (issue 34): the profile lists
# them in runtime_ids; held, the stick keeps its entry; its scrub
# (usb-power-cycle) must bring it back to its first ids ---
world usbrt two-socket-8gpu
boot_id "$W/host" 3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0e
usb_policies "$AV_TMP/usbrt-policies" '[{"method": "usb-power-cycle", "timeout": 3}]' '"runtime_ids": ["03e7:f63b"]'
rm -f "$W/host/sys/bus/usb/devices/1-1.2" "$W/host/sys/bus/usb/devices/1-1.2:1.0"
usb_stick 1-2 5 S1
usb_stick 1-3 6 S2
RT="$W/host/sys/devices/pci0000:00/0000:00:14.0/usb1"
# usb_port PORT N: the root hub's port N (usb1-portN) of the stick at PORT,
# with its "disable"; the stick's boot loader presents 2485.
usb_port() {
    mkdir -p "$RT/1-0:1.0/usb1-port$2" && echo 0 >"$RT/1-0:1.0/usb1-port$2/disable" &&
        ln -s "../1-0:1.0/usb1-port$2" "$RT/$1/port" && ln -s "../../$1" "$RT/1-0:1.0/usb1-port$2/device" &&
        echo 2485 >"$RT/$1/fake_boot_idProduct"
}
usb_port 1-2 2
usb_port 1-3 3
# usb_problem PORT: the identity problem of the pooled stick at PORT.
usb_problem() { python3 -c "import json,sys; print(' '.join(x.get('identity_problem') or '-' for x in json.load(open(sys.argv[1]))['devices'] if x['kind']=='usb' and x['address']==sys.argv[2]))" "$W/state/pool.json" "$1"; }
UR1=$(uuid 41)
mkusb "$W/rt.xml" rt "$UR1" 1 5
check "runtime ids: prepare claims the stick at its first ids" \
    eval "accepted '$W/rt.xml' rt prepare begin - && [ \"\$(usb_state 1-2)\" = in-use ]"
echo f63b >"$RT/1-2/idProduct"; echo 8 >"$RT/1-2/devnum"
check "  ... its firmware loaded (03e7:f63b, re-enumerated): reconcile keeps its entry, in use, no identity problem" \
    eval "avw reconcile >/dev/null 2>'$W/rec.err' && [ \"\$(usb_state 1-2)\" = in-use ] && [ \"\$(usb_problem 1-2)\" = - ] && json '$W/state/pool.json' \"[x['identity'] for x in d['devices'] if x['address'] == '1-2'] == ['usb:03e7:2485:serial:S1']\" && ! grep -q 'identity-changed' '$W/state/journal.jsonl'"
check "  ... release: the worker cycles its port's power, it is back at 2485, free" \
    eval "accepted '$W/rt.xml' rt release end - && wait_usb 1-2 free && verify && [ \"\$(cat '$RT/1-2/idProduct')\" = 2485 ] && grep -q 'USB_PORT_OFF usb1-port2 1-2' '$W/host/sys/.accelvirt-fake-kernel.log' && grep -q 'USB_PORT_ON usb1-port2 1-2' '$W/host/sys/.accelvirt-fake-kernel.log' && [ \"\$(cat '$RT/1-0:1.0/usb1-port2/disable')\" = 0 ]"
check "  ... its certificate says so" \
    eval "grep '\"event\": *\"scrub-certificate\"' '$W/state/journal.jsonl' | tail -n1 | grep -q 'port of 1-2 disabled and enabled again'"
DN=$(cat "$RT/1-2/devnum")
mkusb "$W/rt2.xml" rt2 "$UR1" 1 "$DN"
touch "$RT/1-2/fake_firmware_survives"
check "firmware that survives the power cycle: the stick is quarantined, saying it still presents its runtime ids" \
    eval "accepted '$W/rt2.xml' rt2 prepare begin - && echo f63b >'$RT/1-2/idProduct' && accepted '$W/rt2.xml' rt2 release end - && wait_usb 1-2 quarantined && json '$W/state/pool.json' \"[x['reason'] for x in d['devices'] if x['address'] == '1-2'][0].find('still presents 03e7:f63b, one of the runtime_ids') >= 0\""
echo f63b >"$RT/1-3/idProduct"
check "a free stick presenting its runtime ids: quarantined (the firmware survived)" \
    eval "avw reconcile >/dev/null 2>&1; [ \"\$(usb_state 1-3)\" = quarantined ] && usb_problem 1-3 | grep -q 'one of the runtime_ids of its profile .test-stick., while it was free'"
# A stick presenting its runtime ids is its entry's business at its port,
# whatever ids it presents: only the domain running on it may name it so.
# rtusb FILE NAME UUID VENDOR-PRODUCT-XML ADDRESS-XML: a domain with one USB hostdev.
rtusb() { printf "<domain type='kvm'><name>%s</name><uuid>%s</uuid><memory unit='GiB'>1</memory><vcpu>1</vcpu><devices><hostdev mode='subsystem' type='usb' managed='no'><source>%s%s</source></hostdev></devices></domain>\n" "$2" "$3" "$4" "$5" >"$1"; }
RTIDS="<vendor id='0x03e7'/><product id='0xf63b'/>"
usb_stick 1-5 20 S3
usb_port 1-5 5
UR3=$(uuid 43); UR4=$(uuid 44)
mkusb "$W/rt3.xml" rt3 "$UR3" 1 20
check "a third stick (1-5), claimed and in use by rt3" \
    eval "accepted '$W/rt3.xml' rt3 prepare begin - && [ \"\$(usb_state 1-5)\" = in-use ]"
echo f63b >"$RT/1-5/idProduct"; echo 21 >"$RT/1-5/devnum"; : >"$W/host/dev/bus/usb/001/021"
rtusb "$W/rt3live.xml" rt3 "$UR3" "$RTIDS" "<address bus='1' device='21'/>"
rtusb "$W/b-ids.xml" b "$UR4" "$RTIDS" "<address bus='1' device='21'/>"
rtusb "$W/b-num.xml" b "$UR4" "" "<address bus='1' device='21'/>"
rtusb "$W/b-free.xml" b "$UR4" "" "<address bus='1' device='$(cat "$RT/1-3/devnum")'/>"
avw reconcile >/dev/null 2>&1
cp "$W/state/pool.json" "$W/pool.rt3"
check "the holder, its stick at its runtime ids (named by them): reconnect agrees, nothing changes" \
    eval "accepted '$W/rt3live.xml' rt3 reconnect begin - && same_pool '$W/pool.rt3' && ! grep -q 'reconnect: .*1-5' '$W/log'"
check "another domain naming that stick by its runtime vendor/product (and numbers) while rt3 holds it: refused, nothing changed" \
    eval "refused \"presents 03e7:f63b at the port of stick USB 1-5 (usb:03e7:2485:serial:S3) (in-use, owner domain 'rt3'.*one of the runtime_ids\" '$W/b-ids.xml' b prepare begin - && same_pool '$W/pool.rt3'"
check "  ... and by its bus/device numbers alone: refused" \
    eval "refused 'presents 03e7:f63b at the port of stick USB 1-5' '$W/b-num.xml' b prepare begin - && same_pool '$W/pool.rt3'"
(ACCELVIRT_WORKER=/bin/true; hook "$W/rt3.xml" rt3 release end -) >/dev/null 2>&1
cp "$W/state/pool.json" "$W/pool.rt3d"
check "  ... released (dirty, still at its runtime ids): by its runtime ids, refused" \
    eval "[ \"\$(usb_state 1-5)\" = dirty ] && refused 'presents 03e7:f63b at the port of stick USB 1-5 .* (dirty, ' '$W/b-ids.xml' b prepare begin - && same_pool '$W/pool.rt3d'"
check "  ... by its numbers: refused" \
    eval "refused 'presents 03e7:f63b at the port of stick USB 1-5' '$W/b-num.xml' b prepare begin - && same_pool '$W/pool.rt3d'"
check "  ... and its former holder may not have it back either" \
    eval "refused 'presents 03e7:f63b at the port of stick USB 1-5' '$W/rt3live.xml' rt3 prepare begin - && same_pool '$W/pool.rt3d'"
check "the free stick quarantined for its runtime ids (1-3), named by its numbers: refused" \
    eval "refused 'presents 03e7:f63b at the port of stick USB 1-3 .* (quarantined, ' '$W/b-free.xml' b prepare begin - && same_pool '$W/pool.rt3d'"

finish
