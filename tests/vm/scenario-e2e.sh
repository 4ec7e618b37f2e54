#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs INSIDE the VM rig's guest in the end-to-end mode (AV_VM_ROOT=overlay: the host's
# userland under an overlay, busybox init as PID 1, virtlogd and libvirtd started by
# init.sh stage2). Copied to the results share as scenario.sh by test-vm.sh.
# Two qemu hooks were installed before libvirtd started: a logging one
# (/etc/libvirt/hooks/qemu -> $R/hook.log) and accelvirt's (qemu.d/accelvirt, a wrapper
# that sets ACCELVIRT_* and execs the build tree's accelvirt-hook; state in
# /var/lib/accelvirt, policies in /etc/accelvirt/policies, installed here from
# $R/hook-policies before any domain starts).
#   B. (first) the reboot: boot 1's reboot pool (results/reboot-state), reconciled by
#      init.sh before libvirt's daemons started: the worker frees the edu that boot 1
#      left in use, the VFs a profile declares are back; reconcile again changes nothing
#   I. boot 1's identity pool (results/id-state): its two e1000e in use by
#      avvm-idchg, with other MACs in this boot: status (released at once: in use since
#      the previous boot), a refused prepare, reconcile, the worker's quarantine,
#      quarantine clear (below)
#   A. avvm-nested: the node-1 ivshmem (0000:81:00.0) as a managed='yes' hostdev (libvirt
#      binds it; accelvirt claims it, and scrubs it after release)
#   B. the ivshmem gets a host driver (uio_pci_generic); avvm-acc: the same device as a
#      managed='no' hostdev (accelvirt binds it); avvm-acc2 wants it too and is refused;
#      destroy of avvm-acc -> release -> the worker -> free, back on uio_pci_generic
#   X. avvm-deep: the ivshmem, its metadata set live too deep for the hook's parser;
#      destroy -> release end by name -> free; avvm-big: too large, its start refused
#   C. accelvirt define / start / undefine (below)
#   D. a tenant's secret: rig-ivshmem's scrub becomes vfio-zero; the nested domain
#      avvm-tenant boots this kernel and initramfs with avvm.tenant=SECRET (init.sh)
#      and writes SECRET over BAR2 of the node-1 ivshmem; destroy -> release -> the
#      worker's vfio-zero; then this guest reads BAR2 (none of SECRET) and test-vm.sh
#      the backing file
#   H. accelvirt attach/detach into a running nested guest, the kernel refusing a
#      held device to virsh attach-device, accelvirt watch and audit catching what
#      goes around accelvirt: scenario-hotplug.sh (sourced after scenario-accel.sh)
#   U. USB sticks, S. SR-IOV VFs made on demand: scenario-accel.sh (sourced; its head
#      says what they do)
#   F. FPGAs programmed at request time (issue 15): the node-1 ivshmem as a card,
#      bitstreams in accelvirt's library, `accelvirt program`, define/start program
#      it, the hook refuses a device that does not hold the requested bitstream, the
#      worker's program-base, driver commands: scenario-fpga.sh (sourced after
#      scenario-hotplug.sh; its head says what it does)
#   T. the guest topology (issue 16): the rig's switch and its node-1 edu placed by
#      `accelvirt define` for one q35 domain (p2p="required", guest-numa="mirror"),
#      which boots and reports its PCIe tree and numa_nodes: scenario-topology.sh
#      (sourced after scenario-fpga.sh; its head says what it does)
#   V. the vm method: rig-ivshmem's scrub becomes [vm] (xml/scrub-vm.xml with the
#      scrub image of scrub/image/build); this guest writes a secret over BAR2; a
#      firmware-only domain with the ivshmem is started and destroyed; the worker
#      boots the scrub domain with the device, whose image zeroes BAR2 and powers off
#   R. the ROM swap: boot 1's scrub pool (results/rom-state, rom-policies: the node-0
#      ivshmem enrolled with ROM A; test-vm.sh gives it ROM B in this boot), the hook
#      run directly: prepare/release of avvm-rom -> the worker's rom-check fails ->
#      quarantined; prepare of avvm-rom2 is refused
# `accelvirt status --no-sync --json` is sampled all along into $R/status-e2e.log.
# Records what it sees in $R/facts ("KEY VALUE..."); test-vm.sh checks from outside.
R=${AVVM_RESULTS:-/avvm/results}
F=$R/facts
: > "$F"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
V="virsh -c qemu:///system"
ADDR=0000:81:00.0
D=/sys/bus/pci/devices/$ADDR
drv() { basename "$(readlink "$D/driver" 2>/dev/null)" 2>/dev/null; }
A=$(sed -n 's/^ACCELVIRT=//p' "$R/env" 2>/dev/null)
# SKIP_PHASES (test-vm.sh's AV_VM_SKIP_PHASES: F, V): phases this run leaves out
SKIP=" $(sed -n 's/^SKIP_PHASES=//p' "$R/env" 2>/dev/null) "
phase_on() {
    case "$SKIP" in *" $1 "*) echo "=== phase $1 left out (SKIP_PHASES)" >> "$R/hook.log"; return 1 ;; esac
    return 0
}
export ACCELVIRT_STATE_DIR=/var/lib/accelvirt ACCELVIRT_POLICY_DIR=/etc/accelvirt/policies
st() { "$A" status --json "$@" 2>&1; }
# state_of: the pool state of $ADDR in the latest status --no-sync, or "none"
state_of() {
    st --no-sync | python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: print("none"); sys.exit()
s=[x["state"] for x in d.get("devices", []) if x.get("address")==sys.argv[1] and x.get("kind")=="pci"]
print(s[0] if s else "none")' "$ADDR"
}
wait_free() {  # wait_free: until $ADDR is free in the pool (<= 30 s); prints the seconds
    t0=$(now)
    while test "$(state_of)" != free; do
        test "$(echo "$(now) $t0" | awk '{print ($1 - $2 > 30)}')" = 1 && break
        sleep 0.2
    done
    echo "$(now) $t0" | awk '{printf "%.1f", $1 - $2}'
}
elapsed() { echo "$(now) $1" | awk '{printf "%.1f", $1 - $2}'; }
domxml() {  # domxml NAME MANAGED
    cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='$2'>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
    </hostdev>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
rig_boot() {  # rig_boot MACHINE CMDLINE [FEATURES]: a nested guest's <os> (the rig's kernel
    # and initramfs in $C; console=ttyS0 ... CMDLINE), FEATURES, its CPU, on_reboot destroy
    # and <devices> up to its <emulator> (the caller writes the rest)
    printf '%s\n' "  <os>" "    <type arch='x86_64' machine='$1'>hvm</type>" \
        "    <kernel>$C/vmlinux</kernel>" "    <initrd>$C/initramfs.cpio.gz</initrd>" \
        "    <cmdline>console=ttyS0 loglevel=4 panic=-1 no_timer_check $2</cmdline>" "  </os>"
    test -z "${3:-}" || echo "  $3"
    printf '%s\n' "  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>" \
        "  <on_reboot>destroy</on_reboot>" "  <devices>" "    <emulator>/usr/bin/qemu-system-x86_64</emulator>"
}
qemu_holds() {  # qemu_holds DOMAIN: "N pid=PID": N fds of QEMU on /dev/vfio/GROUP
    qpid=$(cat "/run/libvirt/qemu/$1.pid" 2>/dev/null)
    g=$(basename "$(readlink "$D/iommu_group")")
    echo "$(ls -l "/proc/$qpid/fd" 2>/dev/null | grep -c "/dev/vfio/$g\$") pid=${qpid:-none}"
}

fact pid1 "$(cat /proc/1/comm)"
fact libvirtd_up "$($V version >/dev/null 2>&1 && echo yes || echo no)" uptime="$(now)"
fact libvirt_version "$($V version 2>/dev/null | sed -n 's/^Using library: //p')"
fact hook_installed "$(test -x /etc/libvirt/hooks/qemu && echo yes || echo no)" \
    accelvirt="$(test -x /etc/libvirt/hooks/qemu.d/accelvirt && echo yes || echo no)"
if ! test -x "$A"; then fact accelvirt missing "$A"; exit 1; fi
fact device "$ADDR" "$(cat "$D/vendor"):$(cat "$D/device")" driver="$(drv)" \
    group="$(basename "$(readlink "$D/iommu_group")")"

# accelvirt's policies (root-owned, not world-writable) and its scrub command; the
# host's own /var/lib/accelvirt and /etc/accelvirt (if any) are hidden (the overlay
# keeps the host untouched): the pool starts empty
fact host_state_dir "$(test -e /var/lib/accelvirt/pool.json && echo present || echo absent)"
rm -rf /var/lib/accelvirt /etc/accelvirt
mkdir -p /etc/accelvirt/policies
cp "$R/scrub-sleep.sh" /etc/accelvirt/scrub-sleep.sh
chmod 755 /etc/accelvirt /etc/accelvirt/policies /etc/accelvirt/scrub-sleep.sh
for p in "$R"/hook-policies/*.json; do
    sed "s|@SCRUB@|/etc/accelvirt/scrub-sleep.sh|g" "$p" > "/etc/accelvirt/policies/$(basename "$p")"
done
chmod 644 /etc/accelvirt/policies/*.json

# --- B. the reboot (issue 17): boot 1 left the node-1 edu (0000:84:00.0) in use by
# avvm-reboot in a pool of its own (results/reboot-state, the host's disk), with
# reboot-policies (rig-reboot: a command step; rig-reboot-vfs: "vfs": 2 on the nvme PF
# 0000:83:00.0). init.sh ran accelvirt-reconcile.service's command on it before
# virtlogd and libvirtd (reconcile_at_boot: results/reboot-init/). Here: the worker it
# started finishes (the edu free, <= 60 s); reconcile again changes nothing; then the PF
# is given back as phase S expects it (0 VFs, autoprobe as at boot). Facts: reboot_*.
RS=/var/lib/accelvirt-reboot RP=/etc/accelvirt-reboot/policies RB=0000:84:00.0
RPF=/sys/bus/pci/devices/0000:83:00.0
rb_av() {
    ACCELVIRT_STATE_DIR=$RS ACCELVIRT_POLICY_DIR=$RP ACCELVIRT_WORKER="$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")" \
        ACCELVIRT_LOG_FILE=$R/reboot-init/log "$A" "$@"
}
rb_state() {  # rb_state: "STATE/DRIVER" of the edu in the reboot pool (status --no-sync)
    s=$(rb_av status --json --no-sync 2>/dev/null | python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: print("none"); sys.exit()
s=[x["state"] for x in d.get("devices", []) if x.get("address")==sys.argv[1] and x.get("kind")=="pci"]
print(s[0] if s else "none")' "$RB")
    echo "$s/$(basename "$(readlink /sys/bus/pci/devices/$RB/driver 2>/dev/null)" 2>/dev/null)"
}
if test -s "$R/reboot-init/after"; then
    tB=$(now)
    i=0
    while test $i -lt 300 && rb_state | grep -Eq '^(in-use|dirty|scrubbing)/'; do
        sleep 0.2; i=$((i + 1))
    done
    fact reboot_after "$RB=$(rb_state)" waited="$(elapsed "$tB")" uptime="$(now)" \
        override="$(cat /sys/bus/pci/devices/$RB/driver_override 2>/dev/null)" \
        numvfs="$(cat $RPF/sriov_numvfs 2>/dev/null)" vfs="$(ls $RPF | grep -c '^virtfn')"
    rb_av status --json --no-sync > "$R/status-reboot-2-after.json" 2>&1
    n0=$(wc -l < $RS/journal.jsonl)
    rb_av reconcile > "$R/reboot-reconcile-2.out" 2> "$R/reboot-reconcile-2.err"
    fact reboot_again rc=$? journal="$n0->$(wc -l < $RS/journal.jsonl)" "$RB=$(rb_state)" \
        numvfs="$(cat $RPF/sriov_numvfs 2>/dev/null)"
    rb_av journal verify > "$R/journal-verify-reboot.txt" 2>&1
    fact reboot_journal_verify rc=$?
    cp $RS/journal.jsonl "$R/journal-reboot.jsonl" 2>/dev/null
    echo 0 > $RPF/sriov_numvfs
    sed -n 's/^autoprobe=//p' "$R/reboot-init/before" > $RPF/sriov_drivers_autoprobe
    fact reboot_pf_back numvfs="$(cat $RPF/sriov_numvfs 2>/dev/null)" \
        autoprobe="$(cat $RPF/sriov_drivers_autoprobe 2>/dev/null)" seconds="$(elapsed "$tB")"
else
    fact reboot_after missing state="$(test -d "$R/reboot-state" && echo yes || echo no)"
fi

# --- I. identities changed while a domain held the devices (issue 10, hole 2) ---
# Boot 1 gave the e1000e at 0000:44:00.0 (profile rig-nic: a command, then a reset,
# which needs vfio-pci) and the one at 0000:45:00.0 (rig-nic-cmd: the command only) to
# avvm-idchg (the hook's prepare, in the state dir results/id-state with id-policies)
# and powered off without a release: a host that went down with the domain running.
# test-vm.sh set their "state_since" in that pool to the moment this boot began (well
# within the grace of 120 s after which a domain without a QEMU counts as gone) and gave
# both other MACs, so other PCIe Device Serial Numbers at the same addresses. The pool
# recorded boot 1's boot id with them (in_use_boot_id): in use since an earlier boot,
# they wait for no grace.
# First, before any other call on that pool: accelvirt status (which finds the new
# identities and releases both as the previous boot's); then a second domain's prepare;
# reconcile; the worker; quarantine clear. Facts: id_*.
HK=$(sed -n 's/^ACCELVIRT_HOOK=//p' "$R/env")
HW=$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")
IS=/var/lib/accelvirt-id IP=/etc/accelvirt/id-policies NICS="0000:44:00.0 0000:45:00.0"
id_av() { ACCELVIRT_STATE_DIR=$IS ACCELVIRT_POLICY_DIR=$IP ACCELVIRT_WORKER="$HW" ACCELVIRT_LOG_FILE=$R/hook-id.log "$A" "$@"; }
id_drv() { basename "$(readlink /sys/bus/pci/devices/$1/driver 2>/dev/null)" 2>/dev/null; }
id_states() {  # id_states: "ADDR=STATE/COUNT/DRIVER" of each of $NICS (status --no-sync)
    id_av status --json --no-sync 2>/dev/null > /tmp/id-st.json
    for a in $NICS; do
        echo "$a=$(python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: print("none/0"); sys.exit()
s=[x["state"] for x in d.get("devices", []) if x.get("address")==sys.argv[2] and x.get("kind")=="pci"]
print("%s/%d" % (s[0] if s else "none", len(s)))' /tmp/id-st.json "$a")/$(id_drv $a)"
    done | tr '\n' ' ' | sed 's/ $//'
}
id_busy() { id_states | grep -Eq '=(in-use|dirty|scrubbing)/'; }
id_hook() {  # id_hook TAG XML DOMAIN OP SUBOP: the hook on the carried pool
    t=$1 x=$2; shift 2
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ACCELVIRT_STATE_DIR=$IS ACCELVIRT_POLICY_DIR=$IP \
        ACCELVIRT_WORKER="$HW" ACCELVIRT_LOG_FILE=$R/hook-id.log "$HK" "$@" - \
        < "$x" > "$R/hook-$t.out" 2> "$R/hook-$t.err"
    hrc=$?
}
if test -d "$R/id-state" && test -x "$HK"; then
    tI=$(now)
    mkdir -p $IS $IP
    cp -a "$R/id-state/." $IS/
    for p in "$R/id-policies-carried/"*.json; do
        sed "s|@SCRUB@|/etc/accelvirt/scrub-sleep.sh|g" "$p" > "$IP/$(basename "$p")"
    done
    chmod 755 $IP; chmod 644 $IP/*.json
    for a in $NICS; do
        fact id_boot2 "$a" driver="$(id_drv $a)" since_boot="$(now)" \
            dsn="$(od -A n -t x1 -j 320 -N 12 /sys/bus/pci/devices/$a/config | tr -s ' ')"
    done
    id_av status --json > "$R/status-id-2-first.json" 2> "$R/status-id-2-first.err"
    fact id_first rc=$? "$(id_states)"
    cat > /tmp/avvm-idchg2.xml <<XMLEOF
<domain type='kvm'><name>avvm-idchg2</name><uuid>6b1d0c4e-0000-4000-8000-000000000008</uuid>
<memory unit='MiB'>64</memory><vcpu>1</vcpu><devices>
<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x44' slot='0x00' function='0x0'/></source></hostdev>
</devices></domain>
XMLEOF
    id_hook id2-prepare /tmp/avvm-idchg2.xml avvm-idchg2 prepare begin
    fact id_refused rc=$hrc lines="$(wc -l < "$R/hook-id2-prepare.err")" "$(id_states)"
    id_hook id2-release /tmp/avvm-idchg2.xml avvm-idchg2 release end
    id_av reconcile > "$R/id-reconcile-1.out" 2> "$R/id-reconcile-1.err"
    fact id_reconcile rc=$? "$(id_states)" since_boot="$(now)"
    i=0
    while test $i -lt 150 && id_busy; do
        sleep 0.2; i=$((i + 1))
    done
    fact id_after_worker "$(id_states)"
    id_av status --json --no-sync > "$R/status-id-4-quarantined.json" 2>&1
    id_hook id3-prepare /tmp/avvm-idchg2.xml avvm-idchg2 prepare begin
    fact id_refused_quarantined rc=$hrc lines="$(wc -l < "$R/hook-id3-prepare.err")" "$(id_states)"
    id_hook id3-release /tmp/avvm-idchg2.xml avvm-idchg2 release end
    for a in $NICS; do
        id_av quarantine clear "$a" >> "$R/id-clear.out" 2>&1 || echo "clear $a: rc=$?" >> "$R/id-clear.out"
    done
    fact id_clear "$(grep -c rc= "$R/id-clear.out")" "$(id_states)" \
        override="$(cat /sys/bus/pci/devices/0000:44:00.0/driver_override 2>/dev/null)/$(cat /sys/bus/pci/devices/0000:45:00.0/driver_override 2>/dev/null)" \
        net="$(ls /sys/bus/pci/devices/0000:44:00.0/net /sys/bus/pci/devices/0000:45:00.0/net 2>/dev/null | grep -c '^eth')"
    id_av status --json --no-sync > "$R/status-id-5-cleared.json" 2>&1
    ACCELVIRT_STATE_DIR=$IS "$A" journal verify > "$R/journal-verify-id.txt" 2>&1
    fact id_journal_verify rc=$?
    cp $IS/journal.jsonl "$R/journal-id.jsonl" 2>/dev/null
    fact id_phase seconds="$(elapsed "$tI")"
else
    fact id_first missing state="$(test -d "$R/id-state" && echo yes || echo no)" hook="$HK"
fi

st > "$R/status-e2e-0.json"
fact av_status_first rc=$? "$(state_of)"

# the sampler: status --no-sync every 0.2 s until /tmp/stop-sampler exists
(
    while ! test -e /tmp/stop-sampler; do
        printf '=== %s\n' "$(now)"
        st --no-sync
        sleep 0.2
    done
) > "$R/status-e2e.log" 2>&1 &
sampler=$!

# --- A. managed='yes': libvirt binds; accelvirt claims, scrubs after release ---
echo "=== phase A" >> "$R/hook.log"
domxml avvm-nested yes > /tmp/nested.xml
$V define /tmp/nested.xml > "$R/define.out" 2>&1
fact define rc=$?
t0=$(now)
$V start avvm-nested > "$R/start.out" 2>&1
rc=$?
fact start rc=$rc seconds="$(elapsed "$t0")"
sed 's/^/start: /' "$R/start.out"
fact state_after_start "$($V domstate avvm-nested 2>/dev/null | head -n1)"
fact driver_after_start "$(drv)"
fact pool_after_start "$(state_of)"
fact qemu_has_vfio_group "$(qemu_holds avvm-nested)"
fact dumpxml_hostdev "$($V dumpxml avvm-nested 2>/dev/null | grep -c "<hostdev")"
sleep 2
fact state_later "$($V domstate avvm-nested 2>/dev/null | head -n1)"
t0=$(now)
$V destroy avvm-nested > "$R/destroy.out" 2>&1
rc=$?
fact destroy rc=$rc seconds="$(elapsed "$t0")"
fact state_after_destroy "$($V domstate avvm-nested 2>/dev/null | head -n1)"
fact pool_after_destroy "$(state_of)"
fact free_after_destroy seconds="$(wait_free)" pool="$(state_of)"
fact driver_after_destroy "$(drv)"
$V undefine avvm-nested >/dev/null 2>&1
cp /var/log/libvirt/qemu/avvm-nested.log "$R/nested-qemu.log" 2>/dev/null

# --- B. managed='no': accelvirt binds, refuses a second domain, restores the driver ---
echo "=== phase B" >> "$R/hook.log"
modprobe uio_pci_generic
echo "1af4 1110" > /sys/bus/pci/drivers/uio_pci_generic/new_id
for a in 0000:41:00.0 0000:02:01.0; do   # only the node-1 ivshmem keeps it
    test "$(basename "$(readlink /sys/bus/pci/devices/$a/driver 2>/dev/null)")" = uio_pci_generic &&
        echo "$a" > /sys/bus/pci/drivers/uio_pci_generic/unbind
done
fact acc_driver_before "$(drv)" pool="$(state_of)"
domxml avvm-acc no > /tmp/acc.xml
domxml avvm-acc2 no > /tmp/acc2.xml
$V define /tmp/acc.xml > "$R/acc-define.out" 2>&1 && $V define /tmp/acc2.xml >> "$R/acc-define.out" 2>&1
fact acc_define rc=$?
t0=$(now)
$V start avvm-acc > "$R/acc-start.out" 2>&1
rc=$?
fact acc_start rc=$rc seconds="$(elapsed "$t0")"
fact acc_state_after_start "$($V domstate avvm-acc 2>/dev/null | head -n1)"
fact acc_driver_after_start "$(drv)" override="$(cat "$D/driver_override" 2>/dev/null)"
fact acc_pool_after_start "$(state_of)"
fact acc_qemu_has_vfio_group "$(qemu_holds avvm-acc)"
st > "$R/status-e2e-1-running.json"
$V start avvm-acc2 > "$R/acc2-start.out" 2>&1
rc=$?
fact acc2_start rc=$rc state="$($V domstate avvm-acc2 2>/dev/null | head -n1)"
fact acc_after_refusal "$($V domstate avvm-acc 2>/dev/null | head -n1)" driver="$(drv)" pool="$(state_of)"
t0=$(now)
$V destroy avvm-acc > "$R/acc-destroy.out" 2>&1
rc=$?
fact acc_destroy rc=$rc seconds="$(elapsed "$t0")"
fact acc_pool_after_destroy "$(state_of)" driver="$(drv)"
fact acc_free_after_destroy seconds="$(wait_free)" pool="$(state_of)"
fact acc_driver_after_destroy "$(drv)" override="$(cat "$D/driver_override" 2>/dev/null)"
touch /tmp/stop-sampler
wait "$sampler"
st > "$R/status-e2e-2-end.json"
fact av_status_end rc=$? "$(state_of)"
"$A" journal verify > "$R/journal-verify-e2e.txt" 2>&1
fact journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-e2e.jsonl" 2>/dev/null
$V undefine avvm-acc >/dev/null 2>&1
$V undefine avvm-acc2 >/dev/null 2>&1
cp /var/log/libvirt/qemu/avvm-acc.log "$R/acc-qemu.log" 2>/dev/null
fact hook_calls $(awk '$1 == "avvm-nested" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
fact acc_hook_calls $(awk '$1 == "avvm-acc" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
fact acc2_hook_calls $(awk '$1 == "avvm-acc2" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)

# --- X. a release whose domain XML the hook cannot parse (issue 10, hole 3) ---
# avvm-deep (the node-1 ivshmem, managed='no'; the hook binds it) runs; its metadata is
# changed live (virsh metadata --live) to elements nested 257 deep: libvirt 9.0 takes
# that (its own parse of the metadata stops past 257), but in the domain XML it sits
# below <domain><metadata>, deeper than libxml2's default limit of 256 that the hook
# keeps. virsh destroy: libvirt hands that XML to "release end", once; the hook must
# release by the name libvirt passes. Then avvm-big: three <metadata> elements of
# 2,900,000 bytes each (virsh metadata --config --edit: libvirt takes 4 MiB at most in
# one call) make its XML larger than the hook's 8 MiB limit: its start is refused.
echo "=== phase X" >> "$R/hook.log"
tX=$(now)
ADDR=0000:81:00.0
D=/sys/bus/pci/devices/$ADDR
fact deep_driver_before "$(drv)" pool="$(state_of)"
domxml avvm-deep no > /tmp/deep.xml
$V define /tmp/deep.xml > "$R/deep-define.out" 2>&1
$V start avvm-deep > "$R/deep-start.out" 2>&1
fact deep_start rc=$? "$(state_of)" driver="$(drv)" holds="$(qemu_holds avvm-deep)"
python3 -c 'print("<a>" * 257 + "deep" + "</a>" * 257)' > /tmp/deep-meta.xml
$V metadata avvm-deep --live --uri urn:accelvirt:rig:deep --key deep --set "$(cat /tmp/deep-meta.xml)" \
    > "$R/deep-metadata.out" 2>&1
fact deep_metadata rc=$?
$V dumpxml avvm-deep > "$R/deep-live.xml" 2> "$R/deep-dumpxml.err"
fact deep_live_xml rc=$? "$(python3 -c 'import sys, xml.parsers.expat
depth = [0, 0]
def start(name, attrs):
    depth[0] += 1
    depth[1] = max(depth[1], depth[0])
def end(name):
    depth[0] -= 1
p = xml.parsers.expat.ParserCreate()
p.StartElementHandler, p.EndElementHandler = start, end
p.Parse(open(sys.argv[1], "rb").read(), True)
print("depth=%d" % depth[1])' "$R/deep-live.xml" 2>&1)" hostdevs="$(grep -c '<hostdev' "$R/deep-live.xml")"
st > "$R/status-deep-1-running.json"
t0=$(now)
$V destroy avvm-deep > "$R/deep-destroy.out" 2>&1
fact deep_destroy rc=$? seconds="$(elapsed "$t0")" "$(state_of)"
fact deep_free_after_destroy seconds="$(wait_free)" pool="$(state_of)"
fact deep_driver_after "$(drv)" override="$(cat "$D/driver_override" 2>/dev/null)" \
    markers="$(ls /var/lib/accelvirt/release-pending 2>/dev/null | wc -l)"
st > "$R/status-deep-2-end.json"
$V undefine avvm-deep >/dev/null 2>&1
fact deep_hook_calls $(awk '$1 == "avvm-deep" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
# avvm-big: defined small, made large through its persistent metadata, then started
domxml avvm-big no > /tmp/big.xml
$V define /tmp/big.xml > "$R/big-define.out" 2>&1
fact big_define rc=$?
python3 -c 'print("<b>" + "x" * 2900000 + "</b>")' > /tmp/big-meta.xml
for k in 1 2 3; do
    EDITOR="cp /tmp/big-meta.xml" $V metadata avvm-big --config --uri "urn:accelvirt:rig:big$k" --key "big$k" \
        --edit >> "$R/big-metadata.out" 2>&1 || echo "metadata $k failed: rc=$?" >> "$R/big-metadata.out"
done
fact big_metadata "$(grep -c failed "$R/big-metadata.out")" config_bytes="$(wc -c < /etc/libvirt/qemu/avvm-big.xml)"
fact big_before "$(state_of)" driver="$(drv)"
t0=$(now)
$V start avvm-big > "$R/big-start.out" 2>&1
rc=$?
fact big_start rc=$rc seconds="$(elapsed "$t0")" state="$($V domstate avvm-big 2>/dev/null | head -n1)" \
    lines="$(grep -c 'accelvirt:' "$R/big-start.out")"
fact big_after "$(state_of)" driver="$(drv)" override="$(cat "$D/driver_override" 2>/dev/null)"
st > "$R/status-big.json"
$V undefine avvm-big >/dev/null 2>&1
fact big_hook_calls $(awk '$1 == "avvm-big" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
"$A" journal verify > "$R/journal-verify-deep.txt" 2>&1
fact deep_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-deep.jsonl" 2>/dev/null
fact deep_phase seconds="$(elapsed "$tX")"

# --- C. accelvirt define / start / undefine: placed from <av:request>, pinned to its node ---
# The rig's policy is made numa strict for rig-ivshmem here only (phases A and B, and
# scenario-basic.sh's hook tests, start domains with unpinned vCPUs, which strict
# refuses); both ivshmems that can be given alone (0000:41:00.0 node 0, 0000:81:00.0
# node 1) are free now. avvm-placed asks for one (numa="same", 1 vCPU: the rig's nodes
# have one CPU each) through `accelvirt define` (the CLI of the build tree, libvirt at
# qemu:///system, the hook wrapper's state and policy dirs), then `accelvirt start`;
# avvm-placed2 is defined too (it gets the other ivshmem) and given back by
# `accelvirt undefine` before it starts.
echo "=== phase C" >> "$R/hook.log"
tC=$(now)
python3 - /etc/accelvirt/policies/50-rig.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["profiles"]:
    if p["name"] == "rig-ivshmem":
        p["numa"] = "strict"
json.dump(d, open(sys.argv[1], "w"), indent=2)
PYEOF
fact placed_policy "$(python3 -c 'import json,sys; print([p["numa"] for p in json.load(open(sys.argv[1]))["profiles"] if p["name"] == "rig-ivshmem"][0])' /etc/accelvirt/policies/50-rig.json 2>&1)"
AVC="$A --connect qemu:///system --state-dir /var/lib/accelvirt --policy-dir /etc/accelvirt/policies"
placedxml() {  # placedxml NAME: a domain that asks accelvirt for one rig-ivshmem
    cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="rig-ivshmem" count="1" numa="same"/>
    </av:accelerators>
  </metadata>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
placed_of() {  # placed_of JSON: "ADDRESS NODE" of define --json's one device
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); x=d["devices"]
print(x[0]["address"] if len(x) == 1 else "none", d["numa_node"])' "$1" 2>/dev/null || echo "none -"
}
placedxml avvm-placed > "$R/placed.xml"
placedxml avvm-placed2 > "$R/placed2.xml"
$AVC define --json "$R/placed.xml" > "$R/placed-define.json" 2> "$R/placed-define.err"
fact placed_define rc=$? "$(placed_of "$R/placed-define.json")"
set -- $(placed_of "$R/placed-define.json")
ADDR=$1 PNODE=$2
D=/sys/bus/pci/devices/$ADDR
fact placed_node_cpus "$(cat "/sys/devices/system/node/node$PNODE/cpulist" 2>/dev/null)"
fact placed_driver_before "$(drv)"
$V dumpxml --inactive avvm-placed > "$R/placed-inactive.xml" 2>&1
st > "$R/status-placed-1-defined.json"
$AVC define --json "$R/placed2.xml" > "$R/placed2-define.json" 2> "$R/placed2-define.err"
fact placed2_define rc=$? "$(placed_of "$R/placed2-define.json")"
st > "$R/status-placed-2-two.json"
$AVC undefine avvm-placed2 > "$R/placed2-undefine.out" 2>&1
fact placed2_undefine rc=$? "$(cat "$R/placed2-undefine.out")"
fact placed2_after_undefine "$($V domstate avvm-placed2 >/dev/null 2>&1 && echo defined || echo gone)"
st > "$R/status-placed-3-undefined.json"
t0=$(now)
$AVC start avvm-placed > "$R/placed-start.out" 2>&1
rc=$?
fact placed_start rc=$rc seconds="$(elapsed "$t0")" "$(tr '\n' ' ' < "$R/placed-start.out")"
fact placed_state_after_start "$($V domstate avvm-placed 2>/dev/null | head -n1)"
fact placed_driver_after_start "$(drv)"
fact placed_pool_after_start "$(state_of)"
fact placed_qemu_has_vfio_group "$(qemu_holds avvm-placed)"
st > "$R/status-placed-4-running.json"
$V dumpxml avvm-placed > "$R/placed-live.xml" 2>&1
$V vcpupin avvm-placed > "$R/placed-vcpupin.txt" 2>&1
$V vcpuinfo avvm-placed > "$R/placed-vcpuinfo.txt" 2>&1
$V emulatorpin avvm-placed > "$R/placed-emulatorpin.txt" 2>&1
$V numatune avvm-placed > "$R/placed-numatune.txt" 2>&1
fact placed_vcpupin "$(awk '$1 == "0" {print $2}' "$R/placed-vcpupin.txt")"
fact placed_vcpuinfo cpu="$(awk '/^CPU:/ {print $2}' "$R/placed-vcpuinfo.txt")" affinity="$(awk '/^CPU Affinity:/ {print $3}' "$R/placed-vcpuinfo.txt")"
# the vCPU thread's affinity as the kernel has it
qpid=$(cat /run/libvirt/qemu/avvm-placed.pid 2>/dev/null)
vt=none
for t in /proc/${qpid:-none}/task/*; do
    case "$(cat "$t/comm" 2>/dev/null)" in
        "CPU 0/"*) vt=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$t/status") ;;
    esac
done
fact placed_vcpu0_thread "$vt" pid="${qpid:-none}"
t0=$(now)
$V destroy avvm-placed > "$R/placed-destroy.out" 2>&1
rc=$?
fact placed_destroy rc=$rc seconds="$(elapsed "$t0")"
fact placed_pool_after_destroy "$(state_of)"
fact placed_free_after_destroy seconds="$(wait_free)" pool="$(state_of)"
fact placed_driver_after_destroy "$(drv)" override="$(cat "$D/driver_override" 2>/dev/null)"
st > "$R/status-placed-5-end.json"
$AVC undefine avvm-placed > "$R/placed-undefine.out" 2>&1
fact placed_undefine rc=$? "$(cat "$R/placed-undefine.out")"
"$A" journal verify > "$R/journal-verify-placed.txt" 2>&1
fact placed_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-placed.jsonl" 2>/dev/null
cp /var/log/libvirt/qemu/avvm-placed.log "$R/placed-qemu.log" 2>/dev/null
fact placed_hook_calls $(awk '$1 == "avvm-placed" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
fact placed_phase seconds="$(elapsed "$tC")"

# --- D. a tenant's secret, vfio-zero, the scrub domain ---
echo "=== phase D" >> "$R/hook.log"
ADDR=0000:81:00.0
D=/sys/bus/pci/devices/$ADDR
C=$(sed -n 's/^CACHE=//p' "$R/env")
SECRET=$(sed -n 's/^SECRET=//p' "$R/env")
wait_settled() {  # wait_settled SECS: until $ADDR is free or quarantined (<= SECS s); the seconds
    t0=$(now)
    while state_of | grep -Eq '^(claimed|in-use|dirty|scrubbing)$'; do
        test "$(echo "$(now) $t0 $1" | awk '{print ($1 - $2 > $3)}')" = 1 && break
        sleep 0.5
    done
    echo "$(now) $t0" | awk '{printf "%.1f", $1 - $2}'
}
python3 - /etc/accelvirt/policies/50-rig.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["profiles"]:
    if p["name"] == "rig-ivshmem":
        p["numa"] = "preferred"
        p["scrub"] = [{"method": "vfio-zero"}]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PYEOF
cp /etc/accelvirt/policies/50-rig.json "$R/policy-phase-d.json"
fact tenant_before "$(state_of)" driver="$(drv)"
cat > /tmp/tenant.xml <<XMLEOF
<domain type='qemu'>
  <name>avvm-tenant</name>
  <memory unit='MiB'>192</memory>
  <vcpu>1</vcpu>
$(rig_boot pc "avvm.tenant=$SECRET")
    <hostdev mode='subsystem' type='pci' managed='no'>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
    </hostdev>
    <serial type='file'><source path='/tmp/tenant-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
tD=$(now)
$V create /tmp/tenant.xml > "$R/tenant-start.out" 2>&1
fact tenant_start rc=$? "$(state_of)" driver="$(drv)"
while ! grep -q '^AVVM-TENANT-WAIT' /tmp/tenant-console.log 2>/dev/null; do
    test "$(echo "$(now) $tD" | awk '{print ($1 - $2 > 200)}')" = 1 && break
    $V domstate avvm-tenant 2>/dev/null | grep -q running || break
    sleep 1
done
fact tenant_boot seconds="$(elapsed "$tD")" "$(grep -a '^AVVM-TENANT-' /tmp/tenant-console.log 2>/dev/null | tr -d '\r' | tr '\n' ' ')"
cp /tmp/tenant-console.log "$R/tenant-console.log" 2>/dev/null
$V destroy avvm-tenant > "$R/tenant-destroy.out" 2>&1
fact tenant_destroy rc=$? "$(state_of)"
fact tenant_free_after_destroy seconds="$(wait_settled 60)" pool="$(state_of)" driver="$(drv)"
# a next claimant's view: this guest reads BAR2 of the released device
echo 1 > "$D/enable" 2>/dev/null
fact tenant_bar2_after secret="$(/avvm/zero-bar count "$D/resource2" "$SECRET" 2>&1)" nonzero="$(/avvm/zero-bar sum "$D/resource2" 2>&1)"
echo 0 > "$D/enable" 2>/dev/null
"$A" journal verify > "$R/journal-verify-tenant.txt" 2>&1
fact tenant_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-tenant.jsonl" 2>/dev/null
fact tenant_phase seconds="$(elapsed "$tD")"

# --- U, S. USB sticks and SR-IOV VFs (issue 13): scenario-accel.sh ---
. "$R/scenario-accel.sh"

# --- H. hot-plug, watch, audit, kernel-held groups (issue 14): scenario-hotplug.sh ---
. "$R/scenario-hotplug.sh"

# --- F. FPGAs programmed at request time (issue 15): scenario-fpga.sh ---
if phase_on F; then
. "$R/scenario-fpga.sh"
fi

# --- T. the guest PCIe and NUMA topology (issue 16): scenario-topology.sh ---
. "$R/scenario-topology.sh"

# --- V. the vm method: the worker boots the scrub image under this libvirtd ---
# rig-ivshmem's scrub becomes [vm]: the shipped template with the scrub image that
# its recipe made (scrub/image/build; test-vm.sh: SCRUB_INITRD, and SCRUB_KERNEL, the
# rig's vmlinux, the same kernel uncompressed, unless AV_VM_SCRUB_KERNEL=vmlinuz),
# TCG, 192 MiB, and machine 'pc' like the tenant (a q35 boots markedly slower in TCG
# inside TCG). BAR2 gets a secret again (this guest writes it: a tenant's leftovers,
# without a second nested tenant boot); a firmware-only domain (managed='no') takes
# the node-1 ivshmem and is destroyed: release -> the worker starts accelvirt-scrub-*
# with the device through vfio; its image zeroes BAR2 (accelvirt-scrub-bars), prints
# the coverage line on its console and powers off
if phase_on V; then
echo "=== phase V" >> "$R/hook.log"
SK=$(sed -n 's/^SCRUB_KERNEL=//p' "$R/env")
SI=$(sed -n 's/^SCRUB_INITRD=//p' "$R/env")
sed -e "s|<domain type='kvm'>|<domain type='qemu'>|" \
    -e "s|/var/lib/libvirt/boot/accelvirt-scrub-vmlinuz|$SK|" \
    -e "s|/var/lib/libvirt/boot/accelvirt-scrub-initrd.img|$SI|" \
    -e "s|<cmdline>console=ttyS0 loglevel=4</cmdline>|<cmdline>console=ttyS0 loglevel=4 panic=-1 no_timer_check</cmdline>|" \
    -e "s|<memory unit='MiB'>512</memory>|<memory unit='MiB'>192</memory>|" \
    -e "s|machine='q35'|machine='pc'|" \
    "$R/scrub-vm.xml" > /etc/accelvirt/scrub-vm.xml
chmod 644 /etc/accelvirt/scrub-vm.xml
cp /etc/accelvirt/scrub-vm.xml "$R/scrub-vm-rig.xml"
python3 - /etc/accelvirt/policies/50-rig.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["profiles"]:
    if p["name"] == "rig-ivshmem":
        p["scrub"] = [{"method": "vm", "template": "/etc/accelvirt/scrub-vm.xml", "timeout": 480}]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PYEOF
tV=$(now)
SV="${SECRET}vm-"
echo 1 > "$D/enable" 2>/dev/null
/avvm/zero-bar fill "$D/resource2" "$SV" > /dev/null 2>&1
fact vmscrub_secret_before secret="$(/avvm/zero-bar count "$D/resource2" "$SV" 2>&1)" pool="$(state_of)" driver="$(drv)"
echo 0 > "$D/enable" 2>/dev/null
domxml avvm-vmscrub no > /tmp/vmscrub.xml
$V create /tmp/vmscrub.xml > "$R/vmscrub-start.out" 2>&1
fact vmscrub_start rc=$? "$(state_of)"
$V destroy avvm-vmscrub > "$R/vmscrub-destroy.out" 2>&1
fact vmscrub_destroy rc=$? "$(state_of)"
# while the worker's scrub domain runs: its QEMU holds the device's vfio group
# and the pool still says scrubbing (the hook let it in by its av:scrub token)
tW=$(now) sd=
while test -z "$sd"; do
    sd=$($V list --name 2>/dev/null | grep '^accelvirt-scrub-' | head -n1)
    test "$(echo "$(now) $tW" | awk '{print ($1 - $2 > 60)}')" = 1 && break
    test -n "$sd" || sleep 0.2
done
if test -n "$sd"; then
    sleep 2
    fact vmscrub_running domain="$sd" pool="$(state_of)" driver="$(drv)" holds="$(qemu_holds "$sd")" \
        token="$($V dumpxml "$sd" 2>/dev/null | grep -c '<av:scrub token=')"
else
    fact vmscrub_running domain=none pool="$(state_of)"
fi
fact vmscrub_after seconds="$(wait_settled 510)" pool="$(state_of)" driver="$(drv)"
# the next claimant's view, as in phase D
echo 1 > "$D/enable" 2>/dev/null
fact vmscrub_bar2_after secret="$(/avvm/zero-bar count "$D/resource2" "$SV" 2>&1)" nonzero="$(/avvm/zero-bar sum "$D/resource2" 2>&1)"
echo 0 > "$D/enable" 2>/dev/null
"$A" journal verify > "$R/journal-verify-vmscrub.txt" 2>&1
fact vmscrub_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-vmscrub.jsonl" 2>/dev/null
cp /var/log/libvirt/qemu/accelvirt-scrub-* "$R/" 2>/dev/null
fact vmscrub_phase seconds="$(elapsed "$tV")"
fi

# --- R. the ROM swap: boot 1's scrub pool, the other ROM ---
echo "=== phase R" >> "$R/hook.log"
RS=/var/lib/accelvirt-rom RP=/etc/accelvirt/rom-policies RM=0000:41:00.0
rom_st() { ACCELVIRT_STATE_DIR=$RS ACCELVIRT_POLICY_DIR=$RP "$A" status --json "$@" 2>&1; }
rom_state() {
    rom_st --no-sync | python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: print("none"); sys.exit()
s=[x["state"] for x in d.get("devices", []) if x.get("address")==sys.argv[1] and x.get("kind")=="pci"]
print(s[0] if s else "none")' "$RM"
}
rom_hook() {  # rom_hook TAG XML DOMAIN OP SUBOP: the hook on boot 1's scrub pool
    t=$1 x=$2; shift 2
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ACCELVIRT_STATE_DIR=$RS ACCELVIRT_POLICY_DIR=$RP \
        ACCELVIRT_WORKER="$HW" ACCELVIRT_LOG_FILE=$R/hook-rom.log "$HK" "$@" - \
        < "$x" > "$R/hook-$t.out" 2> "$R/hook-$t.err"
    hrc=$?
}
romxml() {  # romxml NAME N: a domain with the node-0 ivshmem
    cat <<XMLEOF
<domain type='kvm'><name>$1</name><uuid>6b1d0c4e-0000-4000-8000-00000000010$2</uuid>
<memory unit='MiB'>64</memory><vcpu>1</vcpu><devices>
<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x41' slot='0x00' function='0x0'/></source></hostdev>
</devices></domain>
XMLEOF
}
if test -d "$R/rom-state" && test -x "$HK"; then
    mkdir -p $RS $RP
    cp -a "$R/rom-state/." $RS/
    # boot 1's policies, its scrub program (@SCRUB@) where this boot has it
    for p in "$R/rom-policies/"*.json; do
        sed "s|@SCRUB@|/etc/accelvirt/scrub-sleep.sh|g" "$p" > "$RP/$(basename "$p")"
    done
    chmod 755 $RP; chmod 644 $RP/*.json
    rom=/sys/bus/pci/devices/$RM/rom
    echo 1 > "$rom" 2>/dev/null
    fact rom_guest "$RM" bytes="$(wc -c < "$rom" 2>/dev/null)" sha256="$(sha256sum < "$rom" 2>/dev/null | cut -d' ' -f1)"
    echo 0 > "$rom" 2>/dev/null
    rom_st > "$R/status-rom-0.json"
    fact rom_before "$(rom_state)"
    fact rom_driver_first "$(basename "$(readlink /sys/bus/pci/devices/$RM/driver 2>/dev/null)" 2>/dev/null)"
    romxml avvm-rom 1 > /tmp/avvm-rom.xml
    romxml avvm-rom2 2 > /tmp/avvm-rom2.xml
    rom_hook rom-prepare /tmp/avvm-rom.xml avvm-rom prepare begin
    fact rom_prepare rc=$hrc "$(rom_state)"
    rom_hook rom-release /tmp/avvm-rom.xml avvm-rom release end
    fact rom_release rc=$hrc
    i=0
    while test $i -lt 100 && rom_state | grep -Eq '^(claimed|in-use|dirty|scrubbing)$'; do
        sleep 0.2; i=$((i + 1))
    done
    fact rom_after_worker "$(rom_state)"
    rom_st > "$R/status-rom-1.json"
    rom_hook rom2-prepare /tmp/avvm-rom2.xml avvm-rom2 prepare begin
    fact rom_refused rc=$hrc lines="$(wc -l < "$R/hook-rom2-prepare.err")"
    rom_hook rom2-release /tmp/avvm-rom2.xml avvm-rom2 release end
    cp $RS/journal.jsonl "$R/journal-rom.jsonl" 2>/dev/null
    # the operator's way out after a firmware update they checked: enroll the new ROM
    # (deliberately: --replace), clear the quarantine (the device back on the driver it
    # had before the first prepare), and the next tenant's scrub passes rom-check
    rom_av() { ACCELVIRT_STATE_DIR=$RS ACCELVIRT_POLICY_DIR=$RP "$A" "$@"; }
    rom_av enroll "$RM" > "$R/rom-enroll-plain.out" 2> "$R/rom-enroll-plain.err"
    fact rom_enroll_plain rc=$? lines="$(wc -l < "$R/rom-enroll-plain.err")" "$(rom_state)"
    rom_av enroll --replace "$RM" > "$R/rom-enroll-replace.out" 2>&1
    fact rom_enroll_replace rc=$? "$(rom_state)" sha256="$(rom_st --no-sync | python3 -c 'import json,sys
d=json.load(sys.stdin)
print([x.get("rom_sha256") for x in d["devices"] if x.get("address")==sys.argv[1]][0])' "$RM" 2>/dev/null)"
    rom_av quarantine clear "$RM" > "$R/rom-clear.out" 2>&1
    fact rom_clear rc=$? "$(rom_state)" driver="$(basename "$(readlink /sys/bus/pci/devices/$RM/driver 2>/dev/null)" 2>/dev/null)" \
        original="$(rom_st --no-sync | python3 -c 'import json,sys
d=json.load(sys.stdin)
print([x.get("original_driver") for x in d["devices"] if x.get("address")==sys.argv[1]][0])' "$RM" 2>/dev/null)"
    rom_hook rom3-prepare /tmp/avvm-rom2.xml avvm-rom2 prepare begin
    fact rom_next_prepare rc=$hrc "$(rom_state)"
    rom_hook rom3-release /tmp/avvm-rom2.xml avvm-rom2 release end
    i=0
    while test $i -lt 100 && rom_state | grep -Eq '^(claimed|in-use|dirty|scrubbing)$'; do
        sleep 0.2; i=$((i + 1))
    done
    fact rom_next_after_worker "$(rom_state)"
    ACCELVIRT_STATE_DIR=$RS "$A" journal verify > "$R/journal-verify-rom.txt" 2>&1
    fact rom_journal_verify rc=$?
    cp $RS/journal.jsonl "$R/journal-rom-update.jsonl" 2>/dev/null
else
    fact rom_before missing state="$(test -d "$R/rom-state" && echo yes || echo no)" hook="$HK"
fi
exit 0
