#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt attach` and `accelvirt detach` (issue 14) on
# the fake two-socket host, against domains of libvirt's test driver
# (test:///PATH.xml: vm1 running with its vCPUs pinned to node 1, vm0 pinned
# to node 0, off shut off).  libvirt 9.0's test driver implements neither
# virDomainAttachDeviceFlags nor the DEVICE_REMOVED event, so the hot-plug
# itself is the CLI's fake (src/cli/cli-attach.c, AvHotplugOps): with a
# fake root and $ACCELVIRT_TEST_HOTPLUG=DIR it keeps the plugged hostdevs in
# DIR/UUID/ALIAS.live (.config with --persistent) and adds them to the
# domain's XML; DIR/fail-attach (empty, or N: after N hostdevs), DIR/stuck
# and DIR/lose-event steer it.  Drivers, pool, journal and marks are real.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
T="$AV_TMP/t"
H="$T/host"
S="$T/state"
HP="$T/hp"
POL="$AV_TEST_SRCDIR/place/policies"
VM1=5eed0000-0000-4000-8000-00000000a001
mkdir -p "$T" "$HP"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$H"
cat >"$T/worker.sh" <<EOF
#!/bin/sh
echo started >>"$T/worker.log"
EOF
chmod +x "$T/worker.sh"
cat >"$T/drv.xml" <<'EOF'
<node>
  <domain type='test'>
    <name>vm1</name>
    <uuid>5eed0000-0000-4000-8000-00000000a001</uuid>
    <memory>1048576</memory>
    <vcpu placement='static' cpuset='16-31'>2</vcpu>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test'>
    <name>vm0</name>
    <uuid>5eed0000-0000-4000-8000-00000000a000</uuid>
    <memory>1048576</memory>
    <vcpu placement='static'>2</vcpu>
    <cputune><vcpupin vcpu='0' cpuset='0-3'/><vcpupin vcpu='1' cpuset='4-7'/></cputune>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test'>
    <name>vg</name>
    <uuid>5eed0000-0000-4000-8000-00000000a009</uuid>
    <memory>1048576</memory>
    <vcpu placement='static' cpuset='24-31'>2</vcpu>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test'>
    <name>loose</name>
    <uuid>5eed0000-0000-4000-8000-00000000a003</uuid>
    <memory>1048576</memory>
    <vcpu>2</vcpu>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <name>off</name>
    <uuid>5eed0000-0000-4000-8000-00000000a002</uuid>
    <test:runstate>5</test:runstate>
    <memory>1048576</memory>
    <vcpu>2</vcpu>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
</node>
EOF

av() {
    ACCELVIRT_TEST_HOTPLUG="$HP" ACCELVIRT_WORKER="$T/worker.sh" \
        "$AV" --root "$H" --policy-dir "$POL" --state-dir "$S" -c "test://$T/drv.xml" "$@"
}

# run OUT ARGS...: accelvirt ARGS, stdout in $T/OUT.out, stderr in
# $T/OUT.err, status in $T/OUT.rc.
run() {
    o=$1; shift
    av "$@" >"$T/$o.out" 2>"$T/$o.err"
    echo $? >"$T/$o.rc"
}

# refused OUT STATUS PATTERN: exit STATUS, one line on stderr starting
# "accelvirt: " and holding PATTERN, nothing on stdout.
refused() {
    [ "$(cat "$T/$1.rc")" = "$2" ] || { echo "exit $(cat "$T/$1.rc"), expected $2"; cat "$T/$1.err"; return 1; }
    [ "$(wc -l <"$T/$1.err")" -eq 1 ] || { echo "not one line:"; cat "$T/$1.err"; return 1; }
    grep -q '^accelvirt: ' "$T/$1.err" || { cat "$T/$1.err"; return 1; }
    grep -qF -- "$3" "$T/$1.err" || { echo "no '$3' in:"; cat "$T/$1.err"; return 1; }
    [ ! -s "$T/$1.out" ] || { echo "stdout:"; cat "$T/$1.out"; return 1; }
}

succeeded() {
    [ "$(cat "$T/$1.rc")" = 0 ] || { echo "exit $(cat "$T/$1.rc")"; cat "$T/$1.err"; return 1; }
}

driver() { basename "$(readlink "$H/sys/bus/pci/devices/$1/driver")"; }
is_driver() { [ "$(driver "$1")" = "$2" ] || { echo "$1 is on '$(driver "$1")', not '$2'"; return 1; }; }
# The QAT VFs go to qat_vfio_pci, the variant sriov-fpga-qat's kernel offers them.
is_driver_q() { [ "$(basename "$(readlink "$QH/sys/bus/pci/devices/$1/driver")")" = qat_vfio_pci ]; }
state_of() { json "$S/pool.json" "[x['state'] for x in d['devices'] if x['address'] == '$1'] == ['$2']"; }
owner_of() {
    json "$S/pool.json" "[(x['owner'] or {}).get('domain_name') for x in d['devices'] if x['address'] == '$1'] == ['$2']"
}
# events: the journal's events, one line.
events() { python3 -c 'import json,sys; print(" ".join(json.loads(l)["event"] for l in open(sys.argv[1])))' "$S/journal.jsonl"; }
last_entry() { tail -n 1 "$S/journal.jsonl" >"$T/last.json"; json "$T/last.json" "$1"; }
# snapshot NAME / unchanged NAME: the pool (but for the last_seen times that
# every reconcile under the lock refreshes, as `accelvirt status` does) and
# the journal are as they were at the snapshot.
# The pool but its devices' last_seen (a record is a line of pool.json, so
# no line of it can be left out), and the journal.
pool_sum() {
    { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for x in d["devices"]:
    x.pop("last_seen", None)
print(json.dumps(d, sort_keys=True))' "$S/pool.json"; cat "$S/journal.jsonl"; } | sha256sum
}
snapshot() { pool_sum >"$T/$1.sum"; }
unchanged() { pool_sum | cmp -s - "$T/$1.sum" || { echo "pool or journal changed"; return 1; }; }
no_marks() { [ -z "$(ls -A "$S/attach-pending" 2>/dev/null)" ] || { ls -l "$S/attach-pending"; return 1; }; }

# --- dry run ---------------------------------------------------------------------
av status >/dev/null 2>&1
snapshot s0
run dry attach vm1 gpu-passthrough --dry-run
check "attach --dry-run: exit 0" succeeded dry
check "  ... says device, alias and node" \
    grep -q "0000:ca:00.0 .*alias ua-accelvirt-0000-ca-00-0" "$T/dry.out"
check "  ... on NUMA node 1" grep -q "on NUMA node 1" "$T/dry.out"
check "  ... changes nothing (pool, journal, driver, libvirt)" \
    eval "unchanged s0 && is_driver 0000:ca:00.0 nvidia && [ -z \"\$(ls -A '$HP')\" ]"

# --- bad input: one line, no state change ------------------------------------------
run b1 attach nosuch gpu-passthrough
check "attach of an unknown domain: one line, exit 1" refused b1 1 "no domain 'nosuch'"
run b2 attach vm1 gpu-h200
check "attach of an unknown profile: one line, exit 2" refused b2 2 "unknown profile 'gpu-h200'"
run b3 attach off gpu-passthrough
check "attach to a domain not running: one line, exit 2" refused b3 2 "domain 'off' is not running"
run b4 attach vm1 gpu-passthrough --count 0
check "attach --count 0: one line, exit 2" refused b4 2 "--count must be 1 or more"
run b6 attach vm1
check "attach without a profile: one line, exit 2" refused b6 2 "takes a DOMAIN and a PROFILE"
run b7 detach vm1 0000:ca:00.0 --all
check "detach with a DEVICE and --all: one line, exit 2" refused b7 2 "one of DEVICE, --profile P or --all"
run b8 detach vm1 --all --timeout 0
check "detach --timeout 0: one line, exit 2" refused b8 2 "--timeout must be"
run b9 attach loose gpu-passthrough
check "strict profile, vCPUs not pinned: one line, exit 2" refused b9 2 "are not all pinned"
check "  ... none of it changed the pool or the journal" unchanged s0

# --- attach: claim, bind, record, journal ----------------------------------------------
run a1 attach vm1 gpu-passthrough
check "attach vm1 gpu-passthrough: exit 0" succeeded a1
check "  ... the A100 of node 1 (vm1's vCPUs are pinned there: strict)" grep -q "0000:ca:00.0" "$T/a1.out"
check "  ... bound to vfio-pci" is_driver 0000:ca:00.0 vfio-pci
check "  ... in use by vm1 in the pool" eval "state_of 0000:ca:00.0 in-use && owner_of 0000:ca:00.0 vm1"
check "  ... its driver recorded to go back to" \
    json "$S/pool.json" "[x['original_driver'] for x in d['devices'] if x['address'] == '0000:ca:00.0'] == ['nvidia']"
check "  ... journalled: claimed, in use, attach with the alias" \
    eval "events | grep -q 'transition transition attach\$' && last_entry \"d['domain_uuid'] == '$VM1' and d['devices'][0]['alias'] == 'ua-accelvirt-0000-ca-00-0' and d['devices'][0]['numa_node'] == 1 and not d['persistent']\""
check "  ... hot-plugged live as <hostdev managed='no'> with its ua- alias" \
    grep -q "managed='no'" "$HP/$VM1/ua-accelvirt-0000-ca-00-0.live"
check "  ... not in the persistent definition without --persistent" test ! -e "$HP/$VM1/ua-accelvirt-0000-ca-00-0.config"
check "  ... no attach mark left behind" no_marks
check "  ... no write-ahead record left behind" json "$S/pool.json" "not d.get('intents')"

# --- strict NUMA refused ----------------------------------------------------------------
snapshot s1
run a2 attach vm1 gpu-passthrough --count 2
check "strict: 2 more A100s do not fit node 1: no capacity (exit 6), one line naming the node and what is free elsewhere" \
    eval "refused a2 6 'on NUMA node 1, where it is pinned' && grep -q 'node 0 has 4 free' '$T/a2.err'"
check "  ... the pool, the journal and the drivers unchanged" eval "unchanged s1 && is_driver 0000:e3:00.0 nvidia"
run a3 attach vm0 gpu-passthrough --json
check "attach --json to vm0 (pinned to node 0): an A100 of node 0" \
    eval "succeeded a3 && json '$T/a3.out' \"d['numa_node'] == 0 and d['devices'][0]['address'] == '0000:17:00.0' and d['devices'][0]['alias'] == 'ua-accelvirt-0000-17-00-0'\""

# --- a failing hot-plug rolls back every step ----------------------------------------
echo 2 >"$HP/fail-attach"
run f0 attach vm0 gpu-passthrough --count 2
rm -f "$HP/fail-attach"
check "the second of two hot-plugs refused: one line, one free again, one dirty" \
    refused f0 1 "rolled back (1 device free again, 1 dirty to be scrubbed)"
check "  ... the one the guest had: unplugged, dirty, left on vfio-pci for its scrub" \
    eval "state_of 0000:31:00.0 dirty && is_driver 0000:31:00.0 vfio-pci && [ ! -e '$HP/5eed0000-0000-4000-8000-00000000a000/ua-accelvirt-0000-31-00-0.live' ]"
check "  ... the one it never had: back on its driver, free" \
    eval "state_of 0000:4b:00.0 free && is_driver 0000:4b:00.0 nvidia"
check "  ... journalled" last_entry "d['event'] == 'attach-rolled-back' and len(d['freed']) == 1 and len(d['dirtied']) == 1"
snapshot s2
: >"$HP/fail-attach"
run f1 attach vm1 gpu-consumer
check "a hot-plug libvirt refuses: one line, exit 1, rolled back" refused f1 1 "rolled back (1 device free again"
check "  ... the card and its audio companion back on their drivers" \
    eval "is_driver 0000:98:00.0 nvidia && is_driver 0000:98:00.1 snd_hda_intel"
check "  ... the card free again, no companion left recorded" \
    eval "state_of 0000:98:00.0 free && json '$S/pool.json' \"[x.get('companions', []) for x in d['devices'] if x['address'] == '0000:98:00.0'] == [[]]\""
check "  ... journalled: in use, attach, then free (attach-rolled-back) and attach-rolled-back" \
    eval "events | grep -q 'attach transition attach-rolled-back\$' && last_entry \"d['freed'] == ['pci:10de:2230:10de:1459@slot:5.f0'] and d['dirtied'] == []\""
check "  ... nothing left in the domain, no mark" eval "[ -z \"\$(ls '$HP/$VM1' | grep 98-00)\" ] && no_marks"
rm -f "$HP/fail-attach"
echo 1 >"$HP/fail-attach"
run f2 attach vm1 usb-ai-stick
rm -f "$HP/fail-attach"
check "a refused hot-plug with one hostdev in already: rolled back" refused f2 1 "rolled back"
check "  ... the USB stick free again" json "$S/pool.json" "[x['state'] for x in d['devices'] if x['kind'] == 'usb'] == ['free']"

# Without the fake, libvirt's own call.  Debian 12's libvirt 9.0 test driver
# has no hot-plug; libvirt 11 (Debian 13) hot-plugs hostdevs into its
# in-memory domain, which the next connection forgets.  What it does is
# probed, not assumed: each is checked as it comes.
ACCELVIRT_WORKER="$T/worker.sh" "$AV" --root "$H" --policy-dir "$POL" --state-dir "$S" -c "test://$T/drv.xml" \
    attach vm1 gpu-consumer >"$T/f3.out" 2>"$T/f3.err"
echo $? >"$T/f3.rc"
if grep -q "not supported by the connection driver" "$T/f3.err"; then
    check "libvirt's virDomainAttachDeviceFlags refuses (test driver without hot-plug): one line, rolled back" \
        refused f3 1 "not supported by the connection driver"
    check "  ... card and companion back on their drivers, free" \
        eval "is_driver 0000:98:00.0 nvidia && is_driver 0000:98:00.1 snd_hda_intel && state_of 0000:98:00.0 free"
else
    check "libvirt's virDomainAttachDeviceFlags hot-plugs (test driver of libvirt 11): exit 0, in use by vm1" \
        eval "succeeded f3 && state_of 0000:98:00.0 in-use && is_driver 0000:98:00.0 vfio-pci"
    # The next connection's vm1 lacks it: detach finds it gone, dirty, scrubbed.
    run f3d detach vm1 0000:98:00.0
    check "  ... the next connection's vm1 no longer holds it: detach makes it dirty, never free" \
        eval "json '$S/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:98:00.0'][0] in ('dirty', 'scrubbing')\""
    # The worker's scrub (reset, on the emulated kernel) gives it back.
    ACCELVIRT_ROOT="$H" ACCELVIRT_STATE_DIR="$S" ACCELVIRT_POLICY_DIR="$POL" "$ACCELVIRT_WORKER" </dev/null >/dev/null 2>&1
    check "  ... the worker scrubs it: card and companion back on their drivers, free" \
        eval "is_driver 0000:98:00.0 nvidia && is_driver 0000:98:00.1 snd_hda_intel && state_of 0000:98:00.0 free"
fi

# --- companions, persistent -----------------------------------------------------------
run p1 attach vm1 gpu-consumer --persistent
check "attach --persistent of a card with an audio function: exit 0" succeeded p1
check "  ... both functions of its IOMMU group on vfio-pci" \
    eval "is_driver 0000:98:00.0 vfio-pci && is_driver 0000:98:00.1 vfio-pci"
check "  ... the audio function recorded as its companion" \
    json "$S/pool.json" "[x['companions'] for x in d['devices'] if x['address'] == '0000:98:00.0'] == [[{'address': '0000:98:00.1', 'original_driver': 'snd_hda_intel'}]]"
check "  ... in the persistent definition too" test -e "$HP/$VM1/ua-accelvirt-0000-98-00-0.config"

# The same card given to a domain by the hook's prepare, on a copy of the
# host as it was: attach and the hook share one binding
# (src/lifecycle/av-binding.c), so the host and the pool's record of the
# card end the same.
HH="$T/hook-host"
HS="$T/hook-state"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$HH"
mkdir -p "$HS"
cat >"$T/hook-vm1.xml" <<EOF
<domain type='kvm'>
  <name>vm1</name>
  <uuid>$VM1</uuid>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <source><address domain='0x0000' bus='0x98' slot='0x00' function='0x0'/></source>
    </hostdev>
  </devices>
</domain>
EOF
ACCELVIRT_ROOT="$HH" ACCELVIRT_STATE_DIR="$HS" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_WORKER="$T/worker.sh" \
    ACCELVIRT_LOG_FILE="$T/hook.log" "$ACCELVIRT_HOOK" vm1 prepare begin - <"$T/hook-vm1.xml" >"$T/hp1.out" 2>"$T/hp1.err"
echo $? >"$T/hp1.rc"
# bound DIR ADDRESS: the driver ADDRESS is on under the host DIR
bound() { basename "$(readlink "$1/sys/bus/pci/devices/$2/driver")"; }
# card POOL: the pool's record of the card, one line
card() {
    python3 -c '
import json, sys
d = [x for x in json.load(open(sys.argv[1]))["devices"] if x["address"] == "0000:98:00.0"][0]
print(d["state"], d["owner"]["domain_name"], d.get("original_driver"), json.dumps(d.get("companions", []), sort_keys=True))
' "$1"
}
check "the same card through the hook's prepare, on a copy of the host: the card and its audio function on the drivers attach left them on, the pool's record of the card (state, owner, original driver, companions) the same" \
    eval "succeeded hp1 && [ \"\$(bound '$HH' 0000:98:00.0) \$(bound '$HH' 0000:98:00.1)\" = \"\$(bound '$H' 0000:98:00.0) \$(bound '$H' 0000:98:00.1)\" ] && [ \"\$(card '$HS/pool.json')\" = \"\$(card '$S/pool.json')\" ] && card '$HS/pool.json' | grep -q '^in-use vm1 nvidia .*0000:98:00.1.*snd_hda_intel'"

# --- detach -----------------------------------------------------------------------------
run d0 detach vm1 0000:17:00.0
check "detach of another domain's device: one line, exit 2" refused d0 2 "not in use by domain 'vm1'"
run d1 detach vm1 0000:00:14.0
check "detach of a hostdev the pool does not know: one line" refused d1 1 "is not a device of the pool"
snapshot s3
: >"$HP/stuck"
run d2 detach vm1 0000:ca:00.0 --timeout 1
rm -f "$HP/stuck"
check "detach, the guest does not let go: one line, still attached, exit 1" \
    refused d2 1 "is still attached to domain 'vm1' after 1 s"
check "  ... stays in use, pool and journal unchanged" eval "unchanged s3 && state_of 0000:ca:00.0 in-use"
rm -f "$T/worker.log"
# The domain's QEMU, as the fake kernel knows one: a process with the card's group file
# open and locked (/proc/PID/fd/9 in the fake tree names it), which lets it go once the
# card is unplugged.  Detach takes that very open file before the unplug and hands it to
# the holder: at no moment can another process open the group.
( exec 9<>"$H/dev/vfio/46" && flock -xn 9 && exec sleep 600 ) &
QPID=$!
mkdir -p "$H/proc/$QPID/fd" && ln -s /dev/vfio/46 "$H/proc/$QPID/fd/9"
sleep 0.3
run d3 detach vm1 0000:ca:00.0
kill $QPID; wait $QPID 2>/dev/null
rm -rf "$H/proc"
check "detach vm1 0000:ca:00.0: exit 0" succeeded d3
held_46() {
    [ "$(sed -n 's/.*"group": *\([0-9]*\).*/\1/p' "$S/holds/46.json")" = 46 ] || { cat "$S/holds/46.json"; return 1; }
    pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$S/holds/46.json")
    [ "$(cat "/proc/$pid/comm")" = accelvirt-hold ] || { echo "no holder $pid"; return 1; }
    ! flock -xn "$H/dev/vfio/46" true || { echo "the group file could be locked once the QEMU was gone"; return 1; }
}
check "  ... the group file the QEMU had open went to accelvirt's holder: once the QEMU is gone, nobody can open it" held_46
check "  ... dirty, never free; still on vfio-pci for its scrub" \
    eval "state_of 0000:ca:00.0 dirty && owner_of 0000:ca:00.0 vm1 && is_driver 0000:ca:00.0 vfio-pci"
check "  ... journalled: in use -> dirty released_by detach, then detach" \
    eval "events | grep -q 'transition detach\$' && last_entry \"d['released'] == ['dsn:10de:20f1:48b02d1a000001c6.f0']\""
check "  ... out of the guest" test ! -e "$HP/$VM1/ua-accelvirt-0000-ca-00-0.live"
sleep 1
check "  ... the scrub worker started" test -s "$T/worker.log"
: >"$HP/lose-event"
run d4 detach vm1 --profile gpu-consumer --persistent
rm -f "$HP/lose-event"
check "detach --profile, the removed event lost: the live XML says it went, exit 0" succeeded d4
check "  ... dirty" state_of 0000:98:00.0 dirty
check "  ... out of the persistent definition too" test ! -e "$HP/$VM1/ua-accelvirt-0000-98-00-0.config"
run d5 detach vm1 --all
check "detach --all with nothing left in use: one line" refused d5 2 "has no device in use"

# An attach of a device in flight (its mark's lock held by a live process):
# detach leaves the device to that attach.
id17=$(python3 -c "import json; print([x['identity'] for x in json.load(open('$S/pool.json'))['devices'] if x['address'] == '0000:17:00.0'][0])")
mkdir -p "$S/attach-pending"
mark="$S/attach-pending/$(printf %s "$id17" | sha256sum | cut -c1-32)-0000000000000001.json"
echo '{}' >"$mark"
python3 -c 'import fcntl, sys, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print(flush=True); time.sleep(30)' \
    "$mark" >"$T/holder.out" &
holder=$!
while [ ! -s "$T/holder.out" ]; do sleep 0.1; done
run d6 detach vm0 0000:17:00.0
kill "$holder"
wait "$holder" 2>/dev/null
check "detach of a device whose attach is in flight: one line, locked (exit 3: again once that attach is done)" refused d6 3 "is being attached"
check "  ... still in use by vm0" state_of 0000:17:00.0 in-use
run d7 detach vm0 0000:17:00.0 --json
check "  ... once its holder is gone, the mark is dead and removed" test ! -e "$mark"
check "  ... and the device detached (--json)" \
    eval "succeeded d7 && state_of 0000:17:00.0 dirty && json '$T/d7.out' \"[r['address'] for r in d['released']] == ['0000:17:00.0'] and d['still_attached'] == []\""
run a4 attach vm0 gpu-passthrough --count 4
check "dirty devices are not attached again before their scrub (2 free on node 0): no capacity, exit 6" refused a4 6 "node 0"

# --- mdevs (the vGPU host) ----------------------------------------------------------------
VG="$T/vg"
VGS="$T/vgs"
cp -a "$AV_TEST_HOSTS/vgpu-mdev" "$VG"
avg() {
    ACCELVIRT_TEST_HOTPLUG="$HP" ACCELVIRT_WORKER="$T/worker.sh" \
        "$AV" --root "$VG" --policy-dir "$POL" --state-dir "$VGS" -c "test://$T/drv.xml" "$@"
}
mdevs() { ls "$VG/sys/bus/mdev/devices" | sort | tr '\n' ' '; }
before=$(mdevs)
: >"$HP/fail-attach"
avg attach vg vgpu-a10-4q >"$T/m0.out" 2>"$T/m0.err"
echo $? >"$T/m0.rc"
rm -f "$HP/fail-attach"
check "mdev: a refused hot-plug rolls back: one line" refused m0 1 "rolled back (1 device free again"
check "  ... the mdev it made removed, gone from the pool" \
    eval "[ \"\$(mdevs)\" = '$before' ] && json '$VGS/pool.json' \"[x for x in d['devices'] if x['kind'] == 'mdev'] == []\""
avg attach vg vgpu-a10-4q --json >"$T/m1.out" 2>"$T/m1.err"
echo $? >"$T/m1.rc"
check "attach of an mdev profile: exit 0, an mdev made on the parent of node 1 (vg's)" \
    eval "succeeded m1 && json '$T/m1.out' \"d['numa_node'] == 1 and d['devices'][0]['address'] == '0000:98:00.0' and d['devices'][0]['alias'] == 'ua-accelvirt-mdev-' + d['devices'][0]['mdev_uuid']\""
uuid=$(python3 -c "import json; print(json.load(open('$T/m1.out'))['devices'][0]['mdev_uuid'])")
check "  ... made on the host, in use by vg in the pool, created by accelvirt" \
    eval "[ -e '$VG/sys/bus/mdev/devices/$uuid' ] && json '$VGS/pool.json' \"[(x['state'], x['owner']['domain_name'], x['created']) for x in d['devices'] if x['identity'] == 'mdev:$uuid'] == [('in-use', 'vg', True)]\""
check "  ... hot-plugged as <hostdev type='mdev'> with its UUID" \
    grep -q "type='mdev' model='vfio-pci'" "$HP/5eed0000-0000-4000-8000-00000000a009/ua-accelvirt-mdev-$uuid.live"
avg detach vg --profile vgpu-a10-4q >"$T/m2.out" 2>"$T/m2.err"
echo $? >"$T/m2.rc"
check "detach of the mdev: exit 0, dirty (the worker scrubs and removes it)" \
    eval "succeeded m2 && json '$VGS/pool.json' \"[x['state'] for x in d['devices'] if x['identity'] == 'mdev:$uuid'] == ['dirty']\""

# --- SR-IOV VFs made for an attach (the QAT host) ----------------------------------------
QH="$T/qat"
QS="$T/qats"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$QH"
avq() {
    ACCELVIRT_TEST_HOTPLUG="$HP" ACCELVIRT_WORKER="$T/worker.sh" \
        "$AV" --root "$QH" --policy-dir "$AV_TEST_SRCDIR/place/policies-sriov" --state-dir "$QS" \
        -c "test://$T/drv.xml" "$@"
}
numvfs() { cat "$QH/sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs"; }
avq attach vg qat-vf --count 5 >"$T/q0.out" 2>"$T/q0.err"
echo $? >"$T/q0.rc"
check "5 VFs of 4 while the VFs are on their host driver: one line saying why none is made, count unchanged" \
    eval "refused q0 2 'and no VF could be made' && [ \"\$(numvfs)\" = 4 ]"
for f in 1 2 3 4; do
    rm -f "$QH/sys/bus/pci/devices/0000:6b:00.$f/driver" "$QH"/sys/bus/pci/drivers/*/0000:6b:00.$f
done
# The variant the kernel offers the VFs is not loaded: refused before anything is bound.
mv "$QH/sys/bus/pci/drivers/qat_vfio_pci" "$T/qat_vfio_pci.drv" && mv "$QH/sys/module/qat_vfio_pci" "$T/qat_vfio_pci.mod"
avq attach vg qat-vf --count 1 >"$T/qv.out" 2>"$T/qv.err"
echo $? >"$T/qv.rc"
check "an attach whose VF's variant (qat_vfio_pci) is not loaded: one line naming modprobe, no VF bound, none in use" \
    eval "refused qv 1 \"run 'modprobe qat_vfio_pci'\" && [ -z \"\$(ls '$QH'/sys/bus/pci/drivers/vfio-pci/ | grep 0000:6b)\" ] && json '$QS/pool.json' \"not [x for x in d['devices'] if x['state'] != 'free' and x['kind'] == 'pci'] and 'intents' not in d\""
mv "$T/qat_vfio_pci.drv" "$QH/sys/bus/pci/drivers/qat_vfio_pci" && mv "$T/qat_vfio_pci.mod" "$QH/sys/module/qat_vfio_pci"
avq attach vg qat-vf --count 5 >"$T/q1.out" 2>"$T/q1.err"
echo $? >"$T/q1.rc"
check "5 VFs of 4 idle ones: the PF goes to 5 VFs (vfs-set by the attach), all five attached" \
    eval "succeeded q1 && [ \"\$(numvfs)\" = 5 ] && [ \"\$(grep -c 'ua-accelvirt-0000-6b-00' '$T/q1.out')\" = 5 ] && grep -q '\"event\":\"vfs-set\".*attach to domain' '$QS/journal.jsonl'"
check "  ... each in use by vg, on qat_vfio_pci (the vfio-pci variant the kernel offers them)" \
    eval "json '$QS/pool.json' \"sorted(x['address'] for x in d['devices'] if x['state'] == 'in-use') == ['0000:6b:00.%d' % i for i in range(1, 6)]\" && is_driver_q 0000:6b:00.5"

# --- NVIDIA vGPU on VFs (vgpu-sriov's two L40S): attach makes the vGPU, detach leaves it to the scrub ---
GH="$T/vgpu"
GS="$T/vgpus"
GP="$T/vgpup"
cp -a "$AV_TEST_HOSTS/vgpu-sriov" "$GH"
mkdir -p "$GP" && chmod 0755 "$GP"
cat >"$GP/10.json" <<'GPEOF'
{"profiles": [
  {"name": "l40s-2q", "match": {"vendor": "0x10de", "pf": "0000:17:00.0"}, "attach": "sriov-vf",
   "vgpu_type": "L40S-2Q", "numa": "none", "scrub": [{"method": "reset"}]},
  {"name": "l40s-48q", "match": {"vendor": "0x10de", "pf": "0000:98:00.0"}, "attach": "sriov-vf",
   "vgpu_type": "L40S-48Q", "numa": "none", "scrub": [{"method": "reset"}]}
]}
GPEOF
chmod 0644 "$GP/10.json"
avg() {
    ACCELVIRT_TEST_HOTPLUG="$HP" ACCELVIRT_WORKER="$T/worker.sh" \
        "$AV" --root "$GH" --policy-dir "$GP" --state-dir "$GS" -c "test://$T/drv.xml" "$@"
}
vgpu_of() { cat "$GH/sys/bus/pci/devices/$1/nvidia/current_vgpu_type"; }
avg attach vg l40s-2q --count 2 >"$T/g1.out" 2>"$T/g1.err"
echo $? >"$T/g1.rc"
check "attach of 2 vGPU VFs (l40s-2q): each gets its vGPU (1156), stays on nvidia, is in use by vg" \
    eval "succeeded g1 && [ \"\$(grep -c 'ua-accelvirt-0000-17-00' '$T/g1.out')\" = 2 ] && [ \"\$(vgpu_of 0000:17:00.1)\" = 1156 ] && [ \"\$(vgpu_of 0000:17:00.2)\" = 1156 ] && [ \"\$(basename \$(readlink '$GH/sys/bus/pci/devices/0000:17:00.1/driver'))\" = nvidia ] && json '$GS/pool.json' \"sorted(x['address'] for x in d['devices'] if x['state'] == 'in-use') == ['0000:17:00.1', '0000:17:00.2'] and 'intents' not in d\""
avg attach vg l40s-48q --count 2 >"$T/g2.out" 2>"$T/g2.err"
echo $? >"$T/g2.rc"
check "  ... 2 of L40S-48Q, which its GPU makes only once: refused in one line when the second is made, the first destroyed again, nothing in use" \
    eval "refused g2 6 "cannot make a vGPU of type 'L40S-48Q' on 0000:98:00.2: its GPU offers none now" && [ \"\$(vgpu_of 0000:98:00.1)\" = 0 ] && [ \"\$(vgpu_of 0000:98:00.2)\" = 0 ] && json '$GS/pool.json' \"not [x for x in d['devices'] if x['address'].startswith('0000:98') and x['state'] != 'free']\""
echo 1 >"$HP/fail-attach"
avg attach vg l40s-48q >"$T/g3.out" 2>"$T/g3.err"
echo $? >"$T/g3.rc"
rm -f "$HP/fail-attach"
check "  ... an attach whose hot-plug fails: the vGPU it made is destroyed again (no tenant had it), the VF free" \
    eval "[ \"\$(cat '$T/g3.rc')\" != 0 ] && [ \"\$(vgpu_of 0000:98:00.1)\" = 0 ] && json '$GS/pool.json' \"not [x for x in d['devices'] if x['address'].startswith('0000:98') and x['state'] != 'free'] and 'intents' not in d\""
avg detach vg --all >"$T/g4.out" 2>"$T/g4.err"
echo $? >"$T/g4.rc"
check "  ... detach: both dirty, their vGPUs kept for the scrub" \
    eval "succeeded g4 && json '$GS/pool.json' \"sorted(x['address'] for x in d['devices'] if x['state'] == 'dirty') == ['0000:17:00.1', '0000:17:00.2']\" && [ \"\$(vgpu_of 0000:17:00.1)\" = 1156 ]"

# --- a profile's on_assign (issue 15): after the claim, before the hot-plug ----------------
AH="$T/qat2"
AS="$T/qat2s"
AP="$T/qat2p"
ALOG="$T/assign.log"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$AH"
for f in 1 2 3 4; do
    rm -f "$AH/sys/bus/pci/devices/0000:6b:00.$f/driver" "$AH"/sys/bus/pci/drivers/*/0000:6b:00.$f
done
mkdir -p "$AP" "$T/abin"
printf '#!/bin/sh\necho "assign: $* $ACCELVIRT_POINT" >>"%s"\n[ ! -e "%s/$ACCELVIRT_POINT.fail" ] || { echo "refused by the tuner" >&2; exit 5; }\n' \
    "$ALOG" "$T" >"$T/abin/assign"
chmod 0755 "$T/abin" "$T/abin/assign"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for point in ("on_prepare", "on_assign", "on_release"):
    d["profiles"][0][point] = {"argv": [sys.argv[3], "{address}", "{domain_name}"]}
# its scrub (accelvirt scrub, below) as the emulated kernel can do it
d["profiles"][0]["scrub"] = [{"method": "reset"}]
json.dump(d, open(sys.argv[2], "w"))
' "$AV_TEST_SRCDIR/place/policies-sriov/10-qat.json" "$AP/10-qat.json" "$T/abin/assign"
chmod 0755 "$AP" && chmod 0644 "$AP/10-qat.json"
ava() {
    ACCELVIRT_TEST_HOTPLUG="$HP" ACCELVIRT_WORKER="$T/worker.sh" \
        "$AV" --root "$AH" --policy-dir "$AP" --state-dir "$AS" -c "test://$T/drv.xml" "$@"
}
ava attach vg qat-vf >"$T/oa1.out" 2>"$T/oa1.err"
echo $? >"$T/oa1.rc"
check "attach runs the profile's on_prepare then on_assign for the device, then hot-plugs it" \
    eval "succeeded oa1 && [ \"\$(cat '$ALOG')\" = \"\$(printf 'assign: 0000:6b:00.1 vg on_prepare\\nassign: 0000:6b:00.1 vg on_assign')\" ] && json '$AS/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:6b:00.1'] == ['in-use']\" && grep -q '\"event\": *\"driver\"' '$AS/journal.jsonl'"
touch "$T/on_assign.fail"
: >"$ALOG"
ava attach vg qat-vf >"$T/oa2.out" 2>"$T/oa2.err"
echo $? >"$T/oa2.rc"
check "an on_assign that fails: the attach is rolled back, one line; the device is not free (scrubbed first)" \
    eval "refused oa2 1 \"the on_assign command of profile 'qat-vf' for 0000:6b:00.2 failed\" && json '$AS/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:6b:00.2'] == ['dirty']\""
check "  ... its on_prepare passed: released (dirty), its on_release owed to its scrub, not run without the pool's lock" \
    eval "! grep -q 'on_release' '$ALOG' && json '$AS/pool.json' \"[x.get('release_pending') for x in d['devices'] if x['address'] == '0000:6b:00.2'] == [True]\""
ava scrub 0000:6b:00.2 >"$T/os0.out" 2>"$T/os0.err"
echo $? >"$T/os0.rc"
check "  ... its scrub runs that on_release, once, then frees it" \
    eval "succeeded os0 && [ \"\$(grep -c on_release '$ALOG')\" = 1 ] && grep -q '^assign: 0000:6b:00.2 vg on_release$' '$ALOG' && json '$AS/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:6b:00.2'] == ['free']\""
rm -f "$T/on_assign.fail"
touch "$T/on_prepare.fail"
: >"$ALOG"
ava attach vg qat-vf >"$T/oa3.out" 2>"$T/oa3.err"
echo $? >"$T/oa3.rc"
check "an on_prepare that fails: rolled back, one line, neither on_assign nor on_release ran" \
    eval "refused oa3 1 \"the on_prepare command of profile 'qat-vf'\" && ! grep -q 'on_assign\\|on_release' '$ALOG'"
rm -f "$T/on_prepare.fail"
: >"$ALOG"
ava detach vg 0000:6b:00.1 >"$T/od1.out" 2>"$T/od1.err"
echo $? >"$T/od1.rc"
check "detach releases the device (dirty) and leaves its on_release owed to the scrub, as every release does: not run at detach" \
    eval "succeeded od1 && ! grep -q 'on_release' '$ALOG' && json '$AS/pool.json' \"[(x['state'], x.get('release_pending')) for x in d['devices'] if x['address'] == '0000:6b:00.1'] == [('dirty', True)]\""
ava scrub 0000:6b:00.1 >"$T/os1.out" 2>"$T/os1.err"
echo $? >"$T/os1.rc"
check "  ... its scrub runs the owed on_release first, journalled with the domain that had it, then frees it" \
    eval "succeeded os1 && [ \"\$(sed -n 1p '$ALOG')\" = 'assign: 0000:6b:00.1 vg on_release' ] && json '$AS/pool.json' \"[(x['state'], x.get('release_pending')) for x in d['devices'] if x['address'] == '0000:6b:00.1'] == [('free', None)]\" && grep '\"event\": *\"driver\"' '$AS/journal.jsonl' | grep on_release | tail -n1 | python3 -c \"import json,sys; e=json.loads(sys.stdin.read()); assert e['point']=='on_release' and e['by']=='operator' and e['ok'] and e['identity'] and e['domain_name']=='vg' and e['domain_uuid'] and 'report' not in e, e\""
ava attach vg qat-vf >"$T/oa4.out" 2>"$T/oa4.err"
echo $? >"$T/oa4.rc"
A4=$(python3 -c "import json,sys; print([x['address'] for x in json.load(open(sys.argv[1]))['devices'] if x['state'] == 'in-use' and x['address'].startswith('0000:6b')][0])" "$AS/pool.json")
touch "$T/on_release.fail"
ava detach vg "$A4" >"$T/od2.out" 2>"$T/od2.err"
echo $? >"$T/od2.rc"
ava scrub "$A4" >"$T/os2.out" 2>"$T/os2.err"
echo $? >"$T/os2.rc"
rm -f "$T/on_release.fail"
check "an on_release that fails after a detach: the scrub runs no step and quarantines the device, unscrubbed, the command's error as the reason" \
    eval "succeeded oa4 && succeeded od2 && [ \"\$(cat '$T/os2.rc')\" != 0 ] && grep -q 'quarantined: at its release, the on_release command' '$T/os2.out' && json '$AS/pool.json' \"[(x['state'], x.get('unscrubbed'), 'on_release' in x['reason']) for x in d['devices'] if x['address'] == '$A4'] == [('quarantined', True, True)]\""

finish
