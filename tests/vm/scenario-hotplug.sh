# SPDX-License-Identifier: Apache-2.0
# Sourced by scenario-e2e.sh (boot 2, libvirtd up, accelvirt's hook installed) after
# scenario-accel.sh and before phase V: accelerators attached to and detached from a
# running domain, and nothing attached behind accelvirt's back (issue 14). Uses
# scenario-e2e.sh's fact, now, elapsed, st, $A, $V, $R, $C and scenario-accel.sh's
# dev_of, wait_state.
#   H. `accelvirt define` of a q35 domain with <av:hotplug slots="2"/>: two root ports
#      still empty after libvirt placed its devices. A nested i440fx guest (the rig's
#      kernel, avvm.hotplug=TEXT: it reports each ivshmem that appears, reads its BAR2,
#      writes TEXT over it, reports when it is gone) defined by `accelvirt define`,
#      pinned to node 1; rig-ivshmem numa strict, scrub vfio-zero.
#      1. `accelvirt attach`: the node-1 ivshmem (not node 0's), in use, live XML
#         with its ua-accelvirt- alias, the guest sees it and reads what the host
#         wrote in BAR2; a second attach finds no rig-ivshmem left on node 1: one
#         line, nothing changed.
#      2. `accelvirt detach --all`: the guest sees it go, dirty, the worker's
#         vfio-zero, free, the guest's TEXT gone from BAR2.
#      3. attached again, then detached with no worker (ACCELVIRT_WORKER=/bin/true):
#         dirty, its VFIO group held by accelvirt-hold; `virsh attach-device` of it
#         (managed='yes' and managed='no') fails in the kernel; the pool unchanged.
#      4. `accelvirt watch` running; the holder killed (the hold lost, as in the
#         moment between a QEMU's exit and the hook's release): `virsh attach-device`
#         now succeeds, and watch journals a violation and quarantines the device;
#         another domain's start is refused; virsh detach-device: still quarantined.
#         (The nested guest does not see the hot-plugs of steps 4 and 5: after a
#         device_add that QEMU failed, as in step 3, it gets no more hot-plug events
#         for that slot. They happen in QEMU and libvirt, which watch and audit read.)
#      5. watch stopped; the node-0 ivshmem, free, attached with virsh behind
#         accelvirt's back: `accelvirt audit` claims it for the domain (in use,
#         journalled attached-outside); detached with virsh: audit releases it,
#         dirty, scrubbed, free.
#     5b. the node-0 ivshmem attached with virsh under a user alias libvirt accepts and
#         the hook's strict parser refuses (ua- and 300 characters): audit claims it,
#         releases it once detached; watch then does the same.
#      6. destroy, undefine; the quarantined ivshmem scrubbed by hand and cleared
#         (phase V uses it).
echo "=== phase H" >> "$R/hook.log"
tH=$(now)
python3 - /etc/accelvirt/policies/50-rig.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["profiles"]:
    if p["name"] == "rig-ivshmem":
        p["numa"] = "strict"
        p["scrub"] = [{"method": "vfio-zero"}]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PYEOF
AVC="$A --connect qemu:///system --state-dir /var/lib/accelvirt --policy-dir /etc/accelvirt/policies"
# the worker the CLI starts (detach, audit, watch): the build tree's, logging with the hook's
export ACCELVIRT_WORKER="$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")" ACCELVIRT_LOG_FILE="$R/hook-e2e.log"
H1=0000:81:00.0 H0=0000:41:00.0
HSECRET=HOTSECRET-$(sed -n 's/^SECRET=//p' "$R/env")
hst() { dev_of pci "$1" state owner | tr '\n' ' '; }
hdrv() { basename "$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
hgrp() { basename "$(readlink "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null)" 2>/dev/null; }
hbar() {  # hbar ADDR TEXT: how often TEXT is in BAR2, and its non-zero bytes
    echo 1 > "/sys/bus/pci/devices/$1/enable" 2>/dev/null
    echo "text=$(/avvm/zero-bar count "/sys/bus/pci/devices/$1/resource2" "$2" 2>&1)" \
        "nonzero=$(/avvm/zero-bar sum "/sys/bus/pci/devices/$1/resource2" 2>&1)"
}
hholders() {  # hholders ADDR: "COMM:PID" of each process with its /dev/vfio/GROUP open
    g=$(hgrp "$1")
    for p in /proc/[0-9]*; do
        ls -l "$p/fd" 2>/dev/null | grep -q " -> /dev/vfio/$g\$" && echo "$(cat "$p/comm"):${p#/proc/}"
    done | sort | tr '\n' ' '
}
hconsole() { grep -a '^AVVM-HOTPLUG-' /tmp/hot-console.log 2>/dev/null | tr -d '\r' | tr '\n' ' '; }
hcount() { tr -d '\r' < /tmp/hot-console.log 2>/dev/null | grep -Ec "$1"; }
hwait_console() {  # hwait_console PATTERN SECS [N]: until the console has N (1) lines with PATTERN; the seconds
    t0=$(now)
    while test "$(hcount "$1")" -lt "${3:-1}"; do
        test "$(echo "$(now) $t0 $2" | awk '{print ($1 - $2 > $3)}')" = 1 && break
        sleep 0.5
    done
    elapsed "$t0"
}
hjournal() {  # hjournal EVENT: the journal's EVENT entries for the ivshmems, one per line
    python3 -c 'import json,sys
for l in open("/var/lib/accelvirt/journal.jsonl"):
    try: d=json.loads(l)
    except Exception: continue
    if d.get("event")==sys.argv[1]:
        print(json.dumps({k: d.get(k) for k in ("event","address","domain_name","domain","state","from","reason","released_by") if k in d}, sort_keys=True))' "$1" 2>/dev/null
}
hostdev_xml() {  # hostdev_xml BUS MANAGED: a hand-written hostdev of 0000:BUS:00.0
    echo "<hostdev mode='subsystem' type='pci' managed='$2'><source><address domain='0x0000' bus='0x$1' slot='0x00' function='0x0'/></source></hostdev>"
}
# q35: <av:hotplug slots="2"/> gives two root ports that are still empty once libvirt
# placed the domain's own devices (its default xHCI takes the first free port)
cat > "$R/hotq35.xml" <<XMLEOF
<domain type='qemu'>
  <name>avvm-hotq35</name>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:hotplug slots="2"/>
    </av:accelerators>
  </metadata>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='user'><model type='virtio'/></interface>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
empty_ports() {  # empty_ports XML: "EMPTY/ROOT-PORTS ours=N": root ports no device's address names
    python3 -c 'import sys, xml.etree.ElementTree as E
d=E.parse(sys.argv[1]).getroot().find("devices")
ports=[c for c in d.findall("controller") if c.get("model")=="pcie-root-port"]
buses=set()
for x in d:
    a=x.find("address")
    if a is not None and a.get("type")=="pci": buses.add(int(a.get("bus"),16))
empty=[p for p in ports if int(p.get("index")) not in buses]
ours=[p for p in ports if p.find("alias") is not None and p.find("alias").get("name","").startswith("ua-accelvirt-hotplug")]
print("%d/%d ours=%d" % (len(empty), len(ports), len(ours)))' "$1" 2>&1
}
$AVC define "$R/hotq35.xml" > "$R/hotq35-define.out" 2>&1
rc=$?
$V dumpxml --inactive avvm-hotq35 > "$R/hotq35-defined.xml" 2>&1
fact hot_q35_define rc=$rc ports="$(empty_ports "$R/hotq35-defined.xml")"
$AVC undefine avvm-hotq35 > /dev/null 2>&1

# the guest that gets its devices while it runs: i440fx with ACPI (the rig's ivshmem is
# a conventional PCI device, which q35 takes hot-plugged only behind a PCI bridge; the
# root bus of i440fx has ACPI hot-plug slots of its own, without ACPI none)
cat > "$R/hot.xml" <<XMLEOF
<domain type='qemu'>
  <name>avvm-hot</name>
  <memory unit='MiB'>192</memory>
  <vcpu placement='static' cpuset='$(cat /sys/devices/system/node/node1/cpulist)'>1</vcpu>
  <numatune><memory mode='strict' nodeset='1'/></numatune>
$(rig_boot pc "avvm.hotplug=$HSECRET" "<features><acpi/><apic/></features>")
    <serial type='file'><source path='/tmp/hot-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
# what the host leaves in the node-1 ivshmem's BAR2 for the guest to read
echo 1 > "/sys/bus/pci/devices/$H1/enable" 2>/dev/null
/avvm/zero-bar fill "/sys/bus/pci/devices/$H1/resource2" AVHELLO > /dev/null 2>&1
fact hot_before h1="$(hst $H1)" h0="$(hst $H0)" bar="$(hbar $H1 AVHELLO)"
$AVC define "$R/hot.xml" > "$R/hot-define.out" 2>&1
fact hot_define rc=$?
$V start avvm-hot > "$R/hot-start.out" 2>&1
fact hot_start rc=$? "$(tr '\n' ' ' < "$R/hot-start.out")"
fact hot_boot seconds="$(hwait_console '^AVVM-HOTPLUG-WAITING' 240)" "$(hconsole)"

# 1. accelvirt attach, strict NUMA
t0=$(now)
$AVC attach --json avvm-hot rig-ivshmem > "$R/hot-attach.json" 2> "$R/hot-attach.err"
fact hot_attach rc=$? seconds="$(elapsed "$t0")" "$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); print(" ".join("%s@%s" % (x.get("address"), x.get("alias")) for x in d.get("devices", [])))' "$R/hot-attach.json" 2>&1)" err="$(tr '\n' ' ' < "$R/hot-attach.err")"
fact hot_attached h1="$(hst $H1)" driver="$(hdrv $H1)" h0="$(hst $H0)"
$V dumpxml avvm-hot > "$R/hot-live-1.xml" 2>&1
fact hot_live_alias "$(grep -o "ua-accelvirt-[a-z0-9-]*" "$R/hot-live-1.xml" | grep -v hotplug | sort -u | tr '\n' ' ')" \
    bus81="$(grep -c "bus='0x81'" "$R/hot-live-1.xml")"
fact hot_guest_seen seconds="$(hwait_console '^AVVM-HOTPLUG-WROTE' 120)" "$(hconsole)"
hstates() {  # hstates: "ADDRESS=STATE/OWNER" of every pool device, and the journal's length
    st --no-sync | python3 -c 'import json,sys
d=json.load(sys.stdin)
print(" ".join(sorted("%s=%s/%s" % (x.get("address"), x.get("state"), (x.get("owner") or {}).get("domain_name")) for x in d.get("devices", []))))' 2>&1
    wc -l < /var/lib/accelvirt/journal.jsonl
}
hstates > "$R/hot-states-before-2nd.txt"
$AVC attach avvm-hot rig-ivshmem > "$R/hot-attach2.out" 2> "$R/hot-attach2.err"
fact hot_attach_strict rc=$? lines="$(wc -l < "$R/hot-attach2.err")" "$(head -n1 "$R/hot-attach2.err")"
hstates > "$R/hot-states-after-2nd.txt"
fact hot_attach_strict_unchanged "$(cmp -s "$R/hot-states-before-2nd.txt" "$R/hot-states-after-2nd.txt" && echo same || echo changed)" h0="$(hst $H0)"

# 2. accelvirt detach: the guest lets it go, the worker zeroes it
t0=$(now)
$AVC detach avvm-hot --all --timeout 120 > "$R/hot-detach.out" 2> "$R/hot-detach.err"
fact hot_detach rc=$? seconds="$(elapsed "$t0")" "$(tr '\n' ' ' < "$R/hot-detach.out") $(tr '\n' ' ' < "$R/hot-detach.err")"
fact hot_guest_gone seconds="$(hwait_console '^AVVM-HOTPLUG-GONE' 30)" "$(hconsole)"
fact hot_after_detach "$(hst $H1)"
fact hot_free seconds="$(wait_state pci $H1 free 90)" "$(hst $H1)" driver="$(hdrv $H1)"
fact hot_bar_after_scrub "$(hbar $H1 "$HSECRET")"
$V dumpxml avvm-hot > "$R/hot-live-2.xml" 2>&1
fact hot_live_after_detach bus81="$(grep -c "bus='0x81'" "$R/hot-live-2.xml")"

# 3. dirty and held: the kernel refuses virsh attach-device
$AVC attach avvm-hot rig-ivshmem > "$R/hot-attach3.out" 2>&1
fact hot_attach3 rc=$? "$(hst $H1)"
fact hot_guest_seen3 seconds="$(hwait_console '^AVVM-HOTPLUG-WROTE' 120 2)" wrote="$(hcount '^AVVM-HOTPLUG-WROTE')"
ACCELVIRT_WORKER=/bin/true $AVC detach avvm-hot --all --timeout 120 > "$R/hot-detach3.out" 2>&1
fact hot_detach3 rc=$? "$(hst $H1)" driver="$(hdrv $H1)"
st --no-sync > "$R/status-hot-held.json"
fact hot_held holders="$(hholders $H1)" status="$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); x=[x for x in d["devices"] if x["address"]==sys.argv[2]]
print(json.dumps(x[0].get("hold")) if x else "none")' "$R/status-hot-held.json" "$H1" 2>&1)"
cp /var/lib/accelvirt/pool.json "$R/hot-pool-held.json"
hostdev_xml 81 yes > "$R/hot-hd-yes.xml"
hostdev_xml 81 no > "$R/hot-hd-no.xml"
$V attach-device avvm-hot "$R/hot-hd-yes.xml" --live > "$R/hot-virsh-yes.out" 2>&1
fact hot_virsh_managed_yes rc=$? "$(tr '\n' ' ' < "$R/hot-virsh-yes.out")"
$V attach-device avvm-hot "$R/hot-hd-no.xml" --live > "$R/hot-virsh-no.out" 2>&1
fact hot_virsh_managed_no rc=$? "$(tr '\n' ' ' < "$R/hot-virsh-no.out")"
fact hot_held_after "$(hst $H1)" driver="$(hdrv $H1)" holders="$(hholders $H1)" \
    live81="$($V dumpxml avvm-hot 2>/dev/null | grep -c "bus='0x81'")"

# 4. accelvirt watch; the hold lost: the attach goes through, watch catches it
$AVC watch > "$R/hot-watch.log" 2>&1 &
WPID=$!
sleep 3
for hp in $(hholders $H1); do
    case "$hp" in accelvirt-hold:*) kill "${hp#*:}" ;; esac
done
sleep 1
fact hot_hold_lost holders="$(hholders $H1)"
$V attach-device avvm-hot "$R/hot-hd-no.xml" --live > "$R/hot-virsh-lost.out" 2>&1
fact hot_virsh_lost rc=$? "$(tr '\n' ' ' < "$R/hot-virsh-lost.out")"
fact hot_watch_caught seconds="$(wait_state pci $H1 quarantined 30)" "$(hst $H1)"
fact hot_violation "$(hjournal violation | tail -n1)"
nested_dom avvm-hot-other "" "$(hostdev_xml 81 no)" > "$R/hot-other.xml"
$V create "$R/hot-other.xml" > "$R/hot-other.out" 2>&1
fact hot_other_refused rc=$? "$(grep -o 'accelvirt:.*' "$R/hot-other.out" | head -n1)"
$V detach-device avvm-hot "$R/hot-hd-no.xml" --live > "$R/hot-virsh-detach.out" 2>&1
# (the nested guest does not see hot-plugs after a device_add that QEMU failed, as
# those of step 3: these attach and detach only in QEMU and libvirt, which is what
# watch and audit read)
fact hot_virsh_detach rc=$?
sleep 3
fact hot_after_rogue_detach "$(hst $H1)"

# 5. watch stopped; behind accelvirt's back again, caught by accelvirt audit
kill -TERM "$WPID" 2>/dev/null
wait "$WPID"
fact hot_watch_exit rc=$?
cp "$R/hot-watch.log" "$R/hot-watch-final.log" 2>/dev/null
hostdev_xml 41 yes > "$R/hot-hd0.xml"
$V attach-device avvm-hot "$R/hot-hd0.xml" --live > "$R/hot-virsh-h0.out" 2>&1
fact hot_virsh_h0 rc=$? "$(tr '\n' ' ' < "$R/hot-virsh-h0.out")" h0="$(hst $H0)"
$AVC audit > "$R/hot-audit1.out" 2>&1
fact hot_audit_claim rc=$? "$(hst $H0)" out="$(tr '\n' ' ' < "$R/hot-audit1.out")"
fact hot_attached_outside "$(hjournal attached-outside | tail -n1)"
$V detach-device avvm-hot "$R/hot-hd0.xml" --live > "$R/hot-virsh-h0-detach.out" 2>&1
fact hot_virsh_h0_detach rc=$?
$AVC audit > "$R/hot-audit2.out" 2>&1
fact hot_audit_release rc=$? "$(hst $H0)" out="$(tr '\n' ' ' < "$R/hot-audit2.out")"
fact hot_h0_free seconds="$(wait_state pci $H0 free 90)" "$(hst $H0)" bar="$(hbar $H0 "$HSECRET")"
$AVC audit > "$R/hot-audit3.out" 2>&1
fact hot_audit_again rc=$? out="$(tr '\n' ' ' < "$R/hot-audit3.out")"

# 5b. a user alias libvirt accepts and the hook's strict parser refuses ("ua-" and 300
# characters): audit, then watch, still see the device behind it
LONGALIAS="ua-$(printf 'x%.0s' $(seq 300))"
echo "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' bus='0x41' slot='0x00' function='0x0'/></source><alias name='$LONGALIAS'/></hostdev>" > "$R/hot-hd0-long.xml"
$V attach-device avvm-hot "$R/hot-hd0-long.xml" --live > "$R/hot-virsh-long.out" 2>&1
fact hot_virsh_long rc=$? "$(tr '\n' ' ' < "$R/hot-virsh-long.out")" alias="$($V dumpxml avvm-hot 2>/dev/null | grep -c "alias name='$LONGALIAS'")"
$AVC audit > "$R/hot-audit-long.out" 2>&1
fact hot_audit_long rc=$? "$(hst $H0)" out="$(tr '\n' ' ' < "$R/hot-audit-long.out" | cut -c1-200)"
$V detach-device avvm-hot "$R/hot-hd0-long.xml" --live > "$R/hot-virsh-long-detach.out" 2>&1
fact hot_virsh_long_detach rc=$?
$AVC audit > "$R/hot-audit-long2.out" 2>&1
fact hot_audit_long_release rc=$? "$(hst $H0)"
fact hot_long_free seconds="$(wait_state pci $H0 free 90)" "$(hst $H0)"
$AVC watch > "$R/hot-watch-long.log" 2>&1 &
WPID=$!
sleep 3
$V attach-device avvm-hot "$R/hot-hd0-long.xml" --live > "$R/hot-virsh-long3.out" 2>&1
fact hot_virsh_long3 rc=$?
fact hot_watch_long seconds="$(wait_state pci $H0 in-use 30)" "$(hst $H0)"
$V detach-device avvm-hot "$R/hot-hd0-long.xml" --live > /dev/null 2>&1
fact hot_watch_long_release seconds="$(wait_state pci $H0 free 120)" "$(hst $H0)"
kill -TERM "$WPID" 2>/dev/null
wait "$WPID"
fact hot_watch_long_log "$(grep -c "attached-outside: domain 'avvm-hot'.*0000:41:00.0" "$R/hot-watch-long.log")" \
    "$(grep -c "detached-outside: domain 'avvm-hot'.*0000:41:00.0" "$R/hot-watch-long.log")" \
    unresolved="$(grep -c unresolved "$R/hot-watch-long.log")"

# 6. the end: destroy, undefine; the quarantined ivshmem scrubbed by hand and cleared
cp /tmp/hot-console.log "$R/hot-console.log" 2>/dev/null
$V destroy avvm-hot > /dev/null 2>&1
$AVC undefine avvm-hot > "$R/hot-undefine.out" 2>&1
fact hot_undefine rc=$?
$AVC quarantine clear "$H1" > "$R/hot-clear0.out" 2>&1
fact hot_clear_refused rc=$? "$(hst $H1)" "$(head -n1 "$R/hot-clear0.out")"
$AVC scrub "$H1" > "$R/hot-scrub.out" 2>&1
fact hot_hand_scrub rc=$?
$AVC quarantine clear "$H1" > "$R/hot-clear.out" 2>&1
fact hot_clear rc=$? "$(hst $H1)" holders="$(hholders $H1)"
"$A" journal verify > "$R/journal-verify-hot.txt" 2>&1
fact hot_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-hot.jsonl" 2>/dev/null
cp /var/log/libvirt/qemu/avvm-hot.log "$R/hot-qemu.log" 2>/dev/null
# rig-ivshmem as phase D left it (numa preferred) for the phases after this one
python3 - /etc/accelvirt/policies/50-rig.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["profiles"]:
    if p["name"] == "rig-ivshmem":
        p["numa"] = "preferred"
json.dump(d, open(sys.argv[1], "w"), indent=2)
PYEOF
fact hot_phase seconds="$(elapsed "$tH")"
unset ACCELVIRT_WORKER ACCELVIRT_LOG_FILE
