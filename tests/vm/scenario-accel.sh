# SPDX-License-Identifier: Apache-2.0
# Sourced by scenario-e2e.sh (boot 2, libvirtd up, accelvirt's hook installed) before
# phase V: USB sticks and SR-IOV VFs through the whole lifecycle on the real kernel
# (issue 13). Uses scenario-e2e.sh's fact, now, elapsed, st, $A, $V, $R. The profiles
# of accel-policies/70-accel.json join the rig's (run-vm.sh: three usb-kbd "sticks" on
# the xHCI at 0000:82:00.0, ports 1-1 AVSTICK-A, 1-2 AVSTICK-B, 1-3 no serial; the
# nvme PF 0000:83:00.0 with sriov_totalvfs 2, on the guest's nvme driver).
#   U. two domains placed by `accelvirt define` get the two identical sticks (told
#      apart by serial), both run at once, each QEMU holding its own /dev/bus/usb node;
#      a hand-written domain naming a taken stick by bus/device is refused by the hook
#      through virsh start, one naming vendor/product only is refused as ambiguous;
#      destroy -> release -> the worker's usb-reset and usb-reauthorize -> free, the
#      stick found again by its identity; the stick without a serial (identity by
#      port) through a hand-written domain, claimed, scrubbed, free; then the kernel's
#      hold: a QEMU started by hand with -device usb-host gets the free stick at 1-2
#      (usbfs claims its interface), not once it is dirty (de-authorized: no
#      configuration, no interface; a held scrub lock keeps it dirty), and again once
#      the worker scrubbed and freed it
#   S. `accelvirt define` of a domain asking for a VF of the nvme PF, which has none:
#      accelvirt writes sriov_numvfs (autoprobe off); virsh start: the hook binds the VF
#      to vfio-pci, the nested QEMU holds its group; the PF itself (profile rig-nvme-pf)
#      is refused to another domain meanwhile; destroy -> the worker's FLR -> free ->
#      shrunk back to 0 VFs; a second start: the hook makes the VF again at prepare
echo "=== phase U" >> "$R/hook.log"
tU=$(now)
for p in "$R"/accel-policies/*.json; do
    cp "$p" "/etc/accelvirt/policies/$(basename "$p")"
done
chmod 644 /etc/accelvirt/policies/*.json
AVC="$A --connect qemu:///system --state-dir /var/lib/accelvirt --policy-dir /etc/accelvirt/policies"
# dev_of KIND ADDRESS FIELD...: the fields of the pool device at ADDRESS in status --no-sync
dev_of() {
    st --no-sync | python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: print("none"); sys.exit()
x=[x for x in d.get("devices", []) if x.get("kind")==sys.argv[1] and x.get("address")==sys.argv[2]]
if not x: print("none"); sys.exit()
out=[]
for f in sys.argv[3:]:
    v=x[0].get(f)
    if f=="owner": v=(v or {}).get("domain_name")
    out.append("%s=%s" % (f, v))
print(" ".join(out))' "$@"
}
usb_state() { dev_of usb "$1" state | sed 's/^state=//'; }
wait_state() {  # wait_state KIND ADDRESS STATE SECS: until the device is STATE; the seconds
    t0=$(now)
    while test "$(dev_of "$1" "$2" state)" != "state=$3"; do
        test "$(echo "$(now) $t0 $4" | awk '{print ($1 - $2 > $3)}')" = 1 && break
        sleep 0.3
    done
    elapsed "$t0"
}
usbattr() { cat "/sys/bus/usb/devices/$1/$2" 2>/dev/null || echo none; }
qemu_usb() {  # qemu_usb DOMAIN: the /dev/bus/usb nodes its QEMU holds
    qpid=$(cat "/run/libvirt/qemu/$1.pid" 2>/dev/null)
    ls -l "/proc/${qpid:-none}/fd" 2>/dev/null | sed -n 's|.* -> \(/dev/bus/usb/.*\)$|\1|p' | tr '\n' ' '
}
nested_dom() {  # nested_dom NAME METADATA DEVICES: a nested TCG domain that boots nothing
    cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  $2
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    $3
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
request() {  # request PROFILE: the metadata of one <av:request>
    echo "<metadata><av:accelerators xmlns:av=\"urn:accelvirt:domain:1\"><av:request profile=\"$1\" count=\"1\"/></av:accelerators></metadata>"
}
XHCI="<controller type='usb' model='qemu-xhci'/>"
usbxml() {  # usbxml NAME: a domain asking accelvirt for one rig-stick, with an xHCI of its own
    nested_dom "$1" "$(request rig-stick)" "$XHCI"
}
usbhand() {  # usbhand NAME SOURCE: a hand-written domain with one USB hostdev
    nested_dom "$1" "" "$XHCI<hostdev mode='subsystem' type='usb' managed='no'><source>$2</source></hostdev>"
}
placed_usb() {  # placed_usb JSON: the bus path of define --json's one device
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); x=d["devices"]
print(x[0].get("usb_bus_path") if len(x) == 1 else "none")' "$1" 2>/dev/null || echo none
}
hostdev_usb() {  # hostdev_usb NAME: "bus=B device=D" of the persistent definition's USB hostdev
    $V dumpxml --inactive "$1" 2>/dev/null | python3 -c 'import sys, xml.etree.ElementTree as E
d=E.fromstring(sys.stdin.read()); a=d.find("./devices/hostdev[@type=\"usb\"]/source/address")
print("bus=%s device=%s" % (a.get("bus"), a.get("device")) if a is not None else "none")' 2>/dev/null || echo none
}
st > "$R/status-usb-0-before.json"   # synced: the sticks join the pool
for p in 1-1 1-2 1-3; do
    fact "usb_before_$p" serial="$(usbattr $p serial)" devnum="$(usbattr $p devnum)" "$(dev_of usb $p identity state profile)"
done
"$A" list --json > "$R/usb-list.json" 2>&1
fact usb_list rc=$? "$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
print(" ".join("%s=%s/%s" % (u.get("bus_path"), u.get("serial"), (u.get("profile") or {}).get("name") if isinstance(u.get("profile"), dict) else u.get("profile")) for u in d.get("usb", [])))' "$R/usb-list.json" 2>&1 | head -c 400)"
usbxml avvm-usb1 > "$R/usb1.xml"
usbxml avvm-usb2 > "$R/usb2.xml"
$AVC define --json "$R/usb1.xml" > "$R/usb1-define.json" 2> "$R/usb1-define.err"
fact usb1_define rc=$? "$(placed_usb "$R/usb1-define.json")" "$(hostdev_usb avvm-usb1)"
$AVC define --json "$R/usb2.xml" > "$R/usb2-define.json" 2> "$R/usb2-define.err"
fact usb2_define rc=$? "$(placed_usb "$R/usb2-define.json")" "$(hostdev_usb avvm-usb2)"
$V dumpxml --inactive avvm-usb1 > "$R/usb1-inactive.xml" 2>&1
U1=$(placed_usb "$R/usb1-define.json")
U2=$(placed_usb "$R/usb2-define.json")
st > "$R/status-usb-1-defined.json"
"$A" status > "$R/status-usb-1-defined.txt" 2>&1
t0=$(now)
$V start avvm-usb1 > "$R/usb1-start.out" 2>&1
fact usb1_start rc=$? seconds="$(elapsed "$t0")" state="$($V domstate avvm-usb1 2>/dev/null | head -n1)"
$V start avvm-usb2 > "$R/usb2-start.out" 2>&1
fact usb2_start rc=$? state="$($V domstate avvm-usb2 2>/dev/null | head -n1)"
fact usb_running "$U1=$(usb_state "$U1")/$(qemu_usb avvm-usb1)devnum=$(usbattr "$U1" devnum)" \
    "$U2=$(usb_state "$U2")/$(qemu_usb avvm-usb2)devnum=$(usbattr "$U2" devnum)"
fact usb_owners "$(dev_of usb "$U1" owner)" "$(dev_of usb "$U2" owner)"
st > "$R/status-usb-2-running.json"
"$A" status > "$R/status-usb-2-running.txt" 2>&1
# a hand-written domain naming the first stick by its bus and device: refused by the hook
usbhand avvm-usb3 "<vendor id='0x0627'/><product id='0x0001'/><address bus='$(usbattr "$U1" busnum)' device='$(usbattr "$U1" devnum)'/>" > "$R/usb3.xml"
$V define "$R/usb3.xml" > /dev/null 2>&1
$V start avvm-usb3 > "$R/usb3-start.out" 2>&1
fact usb3_start rc=$? state="$($V domstate avvm-usb3 2>/dev/null | head -n1)" first="$(usb_state "$U1")" owner="$(dev_of usb "$U1" owner)"
# vendor and product only: three pooled sticks match, the hook cannot tell which
usbhand avvm-usb4 "<vendor id='0x0627'/><product id='0x0001'/>" > "$R/usb4.xml"
$V define "$R/usb4.xml" > /dev/null 2>&1
$V start avvm-usb4 > "$R/usb4-start.out" 2>&1
fact usb4_start rc=$? state="$($V domstate avvm-usb4 2>/dev/null | head -n1)" third="$(usb_state 1-3)"
t0=$(now)
$V destroy avvm-usb1 > "$R/usb1-destroy.out" 2>&1
fact usb1_destroy rc=$? seconds="$(elapsed "$t0")" pool="$(usb_state "$U1")"
$V destroy avvm-usb2 > "$R/usb2-destroy.out" 2>&1
fact usb2_destroy rc=$? pool="$(usb_state "$U2")"
fact usb1_free seconds="$(wait_state usb "$U1" free 60)" "$(dev_of usb "$U1" identity state)" devnum="$(usbattr "$U1" devnum)" serial="$(usbattr "$U1" serial)" authorized="$(usbattr "$U1" authorized)"
fact usb2_free seconds="$(wait_state usb "$U2" free 60)" "$(dev_of usb "$U2" identity state)" devnum="$(usbattr "$U2" devnum)" serial="$(usbattr "$U2" serial)" authorized="$(usbattr "$U2" authorized)"
# the stick without a serial: a hand-written domain by bus and device, identity by port
usbhand avvm-usb5 "<vendor id='0x0627'/><product id='0x0001'/><address bus='$(usbattr 1-3 busnum)' device='$(usbattr 1-3 devnum)'/>" > "$R/usb5.xml"
$V define "$R/usb5.xml" > /dev/null 2>&1
$V start avvm-usb5 > "$R/usb5-start.out" 2>&1
fact usb5_start rc=$? state="$($V domstate avvm-usb5 2>/dev/null | head -n1)" "$(dev_of usb 1-3 identity state owner)" held="$(qemu_usb avvm-usb5)"
$V destroy avvm-usb5 > /dev/null 2>&1
fact usb5_free seconds="$(wait_state usb 1-3 free 60)" "$(dev_of usb 1-3 identity state)" devnum="$(usbattr 1-3 devnum)"
st > "$R/status-usb-3-end.json"
# what the kernel saw of the scrubs: each usb-reset a port reset, each usb-reauthorize
# a de-authorize and an authorize
fact usb_dmesg resets="$(dmesg | grep -c 'reset high-speed USB device number')" \
    authorized="$(dmesg | grep -c 'authorized to connect')"
dmesg | grep -E 'usb 1-[0-9]' > "$R/usb-dmesg.txt" 2>/dev/null
"$A" journal verify > "$R/journal-verify-usb.txt" 2>&1
fact usb_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-usb.jsonl" 2>/dev/null
ls /var/lib/accelvirt > "$R/usb-state-dir.txt" 2>&1
cp /var/lib/accelvirt/certificates/* "$R/" 2>/dev/null
# The kernel's hold on a dirty stick: a QEMU started by hand, as any root
# process of the host could (no libvirt, no accelvirt hook), with -device usb-host on
# the stick at 1-2. SeaBIOS configures the usb-kbd it finds, and QEMU then claims the
# stick's interface 0 through usbfs: the kernel shows usbfs as its driver. A dirty stick
# is de-authorized: it has no configuration, no interface to claim.
rogue() {  # rogue TAG BUS DEV: QEMU with usb-host on BUS/DEV, daemonized; prints its pid
    qemu-system-x86_64 -machine pc -accel tcg -m 64 -nodefaults -no-user-config -display none \
        -device qemu-xhci,id=rx -device "usb-host,bus=rx.0,hostbus=$2,hostaddr=$3" \
        -pidfile "/run/rogue-$1.pid" -daemonize > "$R/rogue-$1.log" 2>&1
    cat "/run/rogue-$1.pid" 2>/dev/null || echo none
}
rogue_end() {  # rogue_end PID: kills it and waits until it is gone (10 s)
    kill "$1" 2>/dev/null
    i=0; while test -e "/proc/$1" && test $i -lt 100; do sleep 0.1; i=$((i + 1)); done
}
claimed() { basename "$(readlink "/sys/bus/usb/devices/$1:1.0/driver" 2>/dev/null)" 2>/dev/null || echo none; }
wait_claim() {  # wait_claim PORT SECS: until usbfs has its interface 0; the seconds, or "none"
    t0=$(now)
    while test "$(claimed "$1")" != usbfs; do
        test "$(echo "$(now) $t0 $2" | awk '{print ($1 - $2 > $3)}')" = 1 && { echo none; return; }
        sleep 0.3
    done
    elapsed "$t0"
}
rnode() {  # rnode PID BUS DEV: "yes" when the process holds /dev/bus/usb/BUS/DEV open
    ls -l "/proc/$1/fd" 2>/dev/null | grep -q "/dev/bus/usb/$(printf %03d "$2")/$(printf %03d "$3")\$" && echo yes || echo no
}
HS=1-2
HB=$(usbattr $HS busnum); HD=$(usbattr $HS devnum)
rp=$(rogue free "$HB" "$HD")
t_free=$(wait_claim $HS 150)
fact usb_rogue_free claim="$t_free" node="$(rnode "$rp" "$HB" "$HD")" "$(dev_of usb $HS state)" authorized="$(usbattr $HS authorized)" devnum="$HD"
rogue_end "$rp"
# dirty, and kept so: the per-device scrub lock held here, as by a worker busy with it
HI=$(dev_of usb $HS identity | sed 's/^identity=//')
HL="/var/lib/accelvirt/scrub-$(printf %s "$HI" | sha256sum | cut -c1-64).lock"
( exec 9>>"$HL"; flock -n 9 && exec sleep 900 ) &
hlock=$!
sleep 0.5
usbhand avvm-usb6 "<vendor id='0x0627'/><product id='0x0001'/><address bus='$HB' device='$HD'/>" > "$R/usb6.xml"
$V define "$R/usb6.xml" > /dev/null 2>&1
$V start avvm-usb6 > "$R/usb6-start.out" 2>&1
fact usb6_start rc=$? "$(dev_of usb $HS state owner)" authorized="$(usbattr $HS authorized)" lock="$(flock -n "$HL" true 2>/dev/null && echo free || echo held)"
$V destroy avvm-usb6 > /dev/null 2>&1
sleep 2    # the worker the hook started has come and gone: the lock keeps it off the stick
fact usb_dirty "$(dev_of usb $HS state)" authorized="$(usbattr $HS authorized)" config="$(usbattr $HS bConfigurationValue | tr -d ' ')" \
    iface="$(test -e /sys/bus/usb/devices/$HS:1.0 && echo yes || echo no)" devnum="$(usbattr $HS devnum)" serial="$(usbattr $HS serial)" \
    node="$(test -c /dev/bus/usb/$(printf %03d "$HB")/$(printf %03d "$HD") && echo yes || echo no)"
# as long as the free stick took, twice, and 15 s at least
wait_s=$(echo "$t_free" | awk '{w = ($1 == "none") ? 60 : 2 * $1 + 5; print (w < 15 ? 15 : int(w))}')
rp=$(rogue dirty "$HB" "$HD")
t_dirty=$(wait_claim $HS "$wait_s")
fact usb_rogue_dirty claim="$t_dirty" waited="$wait_s" alive="$(test -e "/proc/$rp" && echo yes || echo no)" node="$(rnode "$rp" "$HB" "$HD")" \
    "$(dev_of usb $HS state)" authorized="$(usbattr $HS authorized)" config="$(usbattr $HS bConfigurationValue | tr -d ' ')"
rogue_end "$rp"
kill "$hlock" 2>/dev/null
wait "$hlock" 2>/dev/null
# the scrub: the worker, as the hook would have started it
ACCELVIRT_LOG_FILE=$R/hook-e2e.log "$HW" < /dev/null > /dev/null 2>&1
fact usb_held_free seconds="$(wait_state usb $HS free 60)" "$(dev_of usb $HS state)" authorized="$(usbattr $HS authorized)" devnum="$(usbattr $HS devnum)"
HD=$(usbattr $HS devnum)
rp=$(rogue after "$HB" "$HD")
t_after=$(wait_claim $HS 150)
fact usb_rogue_after claim="$t_after" node="$(rnode "$rp" "$HB" "$HD")" "$(dev_of usb $HS state)"
rogue_end "$rp"
$V undefine avvm-usb6 > /dev/null 2>&1
"$A" journal verify > "$R/journal-verify-usb-hold.txt" 2>&1
fact usb_hold_journal rc=$?
for d in avvm-usb1 avvm-usb2; do $AVC undefine "$d" >/dev/null 2>&1; done
for d in avvm-usb3 avvm-usb4 avvm-usb5; do $V undefine "$d" >/dev/null 2>&1; done
cp /var/log/libvirt/qemu/avvm-usb1.log "$R/usb1-qemu.log" 2>/dev/null
fact usb_phase seconds="$(elapsed "$tU")"

echo "=== phase S" >> "$R/hook.log"
tS=$(now)
PF=0000:83:00.0
P=/sys/bus/pci/devices/$PF
pfattr() { cat "$P/$1" 2>/dev/null || echo none; }
pfdrv() { basename "$(readlink "$P/driver" 2>/dev/null)" 2>/dev/null; }
vfs() { ls "$P" 2>/dev/null | grep '^virtfn' | tr '\n' ' '; }
fact sriov_before driver="$(pfdrv)" numvfs="$(pfattr sriov_numvfs)" total="$(pfattr sriov_totalvfs)" autoprobe="$(pfattr sriov_drivers_autoprobe)" "$(dev_of pci $PF state profile)"
vfxml() {  # vfxml NAME: a domain asking accelvirt for one VF of the nvme PF
    nested_dom "$1" "$(request rig-nvme-vf)" ""
}
vfxml avvm-vf > "$R/vf.xml"
$AVC rewrite --dry-run "$R/vf.xml" > "$R/vf-dry.out" 2>&1
fact vf_dry rc=$? numvfs="$(pfattr sriov_numvfs)"
$AVC define --json "$R/vf.xml" > "$R/vf-define.json" 2> "$R/vf-define.err"
fact vf_define rc=$? "$(python3 -c 'import json,sys
x=json.load(open(sys.argv[1]))["devices"]; print(x[0]["address"] if len(x) == 1 else "none")' "$R/vf-define.json" 2>/dev/null)" \
    numvfs="$(pfattr sriov_numvfs)" autoprobe="$(pfattr sriov_drivers_autoprobe)" vfs="$(vfs)"
VF=$(python3 -c 'import json,sys
x=json.load(open(sys.argv[1]))["devices"]; print(x[0]["address"] if len(x) == 1 else "none")' "$R/vf-define.json" 2>/dev/null)
VD=/sys/bus/pci/devices/${VF:-none}
vfdrv() { basename "$(readlink "$VD/driver" 2>/dev/null)" 2>/dev/null; }
fact vf_after_define driver="$(vfdrv)" physfn="$(basename "$(readlink "$VD/physfn" 2>/dev/null)")" group="$(basename "$(readlink "$VD/iommu_group" 2>/dev/null)")" "$(dev_of pci "$VF" identity state profile)"
$V dumpxml --inactive avvm-vf > "$R/vf-inactive.xml" 2>&1
st > "$R/status-vf-1-defined.json"
"$A" status > "$R/status-vf-1-defined.txt" 2>&1
"$A" list > "$R/vf-list.txt" 2>&1
vf_holds() {  # vf_holds DOMAIN: "N": fds of its QEMU on the VF's /dev/vfio/GROUP
    qpid=$(cat "/run/libvirt/qemu/$1.pid" 2>/dev/null)
    g=$(basename "$(readlink "$VD/iommu_group" 2>/dev/null)")
    ls -l "/proc/${qpid:-none}/fd" 2>/dev/null | grep -c "/dev/vfio/${g:-none}\$"
}
t0=$(now)
$V start avvm-vf > "$R/vf-start.out" 2>&1
fact vf_start rc=$? seconds="$(elapsed "$t0")" state="$($V domstate avvm-vf 2>/dev/null | head -n1)" driver="$(vfdrv)" holds="$(vf_holds avvm-vf)" "$(dev_of pci "$VF" state owner)"
# the PF itself, to another domain, while its VF is in use: refused by the hook
nested_dom avvm-pf "" "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x83' slot='0x00' function='0x0'/></source></hostdev>" > "$R/vf-pf.xml"
$V define "$R/vf-pf.xml" > /dev/null 2>&1
$V start avvm-pf > "$R/vf-pf-start.out" 2>&1
fact vf_pf_start rc=$? state="$($V domstate avvm-pf 2>/dev/null | head -n1)" pf_driver="$(pfdrv)" "$(dev_of pci $PF state)"
$V undefine avvm-pf > /dev/null 2>&1
st > "$R/status-vf-2-running.json"
"$A" status > "$R/status-vf-2-running.txt" 2>&1
t0=$(now)
$V destroy avvm-vf > "$R/vf-destroy.out" 2>&1
fact vf_destroy rc=$? seconds="$(elapsed "$t0")" "$(dev_of pci "$VF" state)"
# free, then shrunk back to 0 VFs (on demand, vfs_shrink): the VF's record may go
t0=$(now)
while test "$(pfattr sriov_numvfs)" != 0 || dev_of pci "$VF" state | grep -Eq 'state=(claimed|in-use|dirty|scrubbing)'; do
    test "$(echo "$(now) $t0" | awk '{print ($1 - $2 > 60)}')" = 1 && break
    sleep 0.3
done
fact vf_after_worker seconds="$(elapsed "$t0")" numvfs="$(pfattr sriov_numvfs)" vfs="$(vfs)" pf_driver="$(pfdrv)" "$(dev_of pci "$VF" state)"
st > "$R/status-vf-3-shrunk.json"
# started again: the hook makes the VF again at prepare
t0=$(now)
$V start avvm-vf > "$R/vf-start2.out" 2>&1
fact vf_start2 rc=$? seconds="$(elapsed "$t0")" state="$($V domstate avvm-vf 2>/dev/null | head -n1)" numvfs="$(pfattr sriov_numvfs)" driver="$(vfdrv)" holds="$(vf_holds avvm-vf)" "$(dev_of pci "$VF" state owner)"
$V destroy avvm-vf > /dev/null 2>&1
t0=$(now)
while test "$(pfattr sriov_numvfs)" != 0 || dev_of pci "$VF" state | grep -Eq 'state=(claimed|in-use|dirty|scrubbing)'; do
    test "$(echo "$(now) $t0" | awk '{print ($1 - $2 > 60)}')" = 1 && break
    sleep 0.3
done
fact vf_after_worker2 seconds="$(elapsed "$t0")" numvfs="$(pfattr sriov_numvfs)" vfs="$(vfs)" "$(dev_of pci "$VF" state)"
st > "$R/status-vf-4-end.json"
"$A" journal verify > "$R/journal-verify-vf.txt" 2>&1
fact vf_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-vf.jsonl" 2>/dev/null
$AVC undefine avvm-vf > /dev/null 2>&1
cp /var/log/libvirt/qemu/avvm-vf.log "$R/vf-qemu.log" 2>/dev/null
fact vf_phase seconds="$(elapsed "$tS")"
# the rig's later phases see the rig's own profiles only
rm -f /etc/accelvirt/policies/70-accel.json
