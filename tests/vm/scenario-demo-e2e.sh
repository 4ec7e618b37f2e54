#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The demo's lifecycle, INSIDE the VM rig's guest in the end-to-end mode
# (AV_VM_ROOT=overlay: the host's userland under an overlay, libvirt's daemon started
# by init.sh with accelvirt's hook in qemu.d). Copied to the results share as
# scenario.sh by build-aux/demo. One device, the node-1 ivshmem 0000:81:00.0 (its
# BAR2 is host memory, standing in for an accelerator's), changes hands:
#   1. tenant A (a nested domain booting the rig's kernel with avvm.tenant=SECRET)
#      gets it through libvirt and writes its secret over BAR2;
#   2. A is destroyed: the hook releases the device, dirty; the worker starts its
#      scrub, whose first step (demo-wait.sh) waits until this script says go;
#   3. tenant B asking for the device now is refused by the hook, in one line;
#      `virsh attach-device` of it into a running domain, which runs no hook, is
#      refused by the kernel (accelvirt's process holds the device's IOMMU group);
#   4. go: vfio-zero clears BAR2 and reads it back; the certificate says so;
#   5. B asks again, gets the device, and reads BAR2: zeros.
# Each step's command and output go to $R/transcript (the demo prints it); facts to
# $R/facts ("KEY VALUE...").
R=${AVVM_RESULTS:-/avvm/results}
F=$R/facts
T=$R/transcript
: > "$F"
: > "$T"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { echo "$(now) $1" | awk '{printf "%.0f", $1 - $2}'; }
say() { printf '\n# %s\n' "$*" >> "$T"; }
# run CMD...: the command, then what it prints, in the transcript; its status in $rc
run() {
    printf '$ %s\n' "$*" >> "$T"
    "$@" > /tmp/run.out 2>&1
    rc=$?
    sed -e 's/^/  /' /tmp/run.out >> "$T"
    test $rc = 0 || printf '  (exit status %s)\n' "$rc" >> "$T"
    return 0
}
V="virsh -c qemu:///system"
ADDR=0000:81:00.0
D=/sys/bus/pci/devices/$ADDR
A=$(sed -n 's/^ACCELVIRT=//p' "$R/env")
C=$(sed -n 's/^CACHE=//p' "$R/env")
SECRET=$(sed -n 's/^SECRET=//p' "$R/env")
export ACCELVIRT_STATE_DIR=/var/lib/accelvirt ACCELVIRT_POLICY_DIR=/etc/accelvirt/policies
av() { "$A" "$@"; }
alias_av() { printf '$ accelvirt %s\n' "$*" >> "$T"; "$A" "$@" > /tmp/run.out 2>&1; rc=$?
    sed -e 's/^/  /' /tmp/run.out >> "$T"; test $rc = 0 || printf '  (exit status %s)\n' "$rc" >> "$T"; }
state_of() {
    "$A" status --json --no-sync 2>/dev/null | python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: print("none"); sys.exit()
s=[x["state"] for x in d.get("devices", []) if x.get("address")==sys.argv[1] and x.get("kind")=="pci"]
print(s[0] if s else "none")' "$ADDR"
}
wait_state() {  # wait_state REGEX SECS: until $ADDR's state matches (<= SECS s)
    ws=$(now)
    until state_of | grep -Eq "^($1)\$"; do
        test "$(elapsed "$ws")" -gt "$2" && return 1
        sleep 0.5
    done
}
tenant_xml() {  # tenant_xml NAME TEXT: a nested guest that reads BAR2, writes TEXT, waits
    cat <<XMLEOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>192</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$C/vmlinux</kernel>
    <initrd>$C/initramfs.cpio.gz</initrd>
    <cmdline>console=ttyS0 loglevel=4 panic=-1 no_timer_check avvm.tenant=$2</cmdline>
  </os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
    </hostdev>
    <serial type='file'><source path='/tmp/$1-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
}
wait_tenant() {  # wait_tenant NAME: until its console says AVVM-TENANT-WAIT (<= 240 s)
    wt=$(now)
    until grep -q '^AVVM-TENANT-WAIT' "/tmp/$1-console.log" 2>/dev/null; do
        test "$(elapsed "$wt")" -gt 240 && return 1
        $V domstate "$1" 2>/dev/null | grep -q running || return 1
        sleep 1
    done
}
tenant_lines() { grep -a '^AVVM-TENANT-\(FOUND\|READ\|WROTE\)' "/tmp/$1-console.log" | tr -d '\r'; }
# tenant_says WHO NAME: what the tenant's guest printed, in words
tenant_says() {
    l=$(tenant_lines "$2")
    nz=$(echo "$l" | sed -n 's/^AVVM-TENANT-FOUND [^ ]* nonzero=\([0-9]*\).*/\1/p')
    at=$(echo "$l" | sed -n 's/^AVVM-TENANT-FOUND \([^ ]*\) .*/\1/p')
    wr=$(echo "$l" | sed -n 's/^AVVM-TENANT-WROTE [^ ]* \([0-9]*\).*/\1/p')
    printf '  (%s, in its guest) BAR2 of its device (%s in the guest): %s bytes not zero when it looked; then it wrote its text, %s times\n' \
        "$1" "${at:-?}" "${nz:-?}" "${wr:-?}" >> "$T"
}

t0=$(now)
fact libvirt "$($V version 2>/dev/null | sed -n 's/^Using library: libvirt //p')" hook="$(test -x /etc/libvirt/hooks/qemu.d/accelvirt && echo yes || echo no)"
# accelvirt's policy and the scrub's wait step (root's, not writable by others)
rm -rf /var/lib/accelvirt /etc/accelvirt
mkdir -p /etc/accelvirt/policies
cp "$R/demo-wait.sh" /etc/accelvirt/demo-wait.sh
cp "$R/demo-lifecycle.json" /etc/accelvirt/policies/50-demo.json
chmod 755 /etc/accelvirt /etc/accelvirt/policies /etc/accelvirt/demo-wait.sh
chmod 644 /etc/accelvirt/policies/50-demo.json
tenant_xml demo-tenant-a "$SECRET" > /tmp/tenant-a.xml
tenant_xml demo-tenant-b "tenant-b-was-here" > /tmp/tenant-b.xml
cat > /tmp/idle.xml <<XMLEOF
<domain type='qemu'>
  <name>demo-other</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
cat > /tmp/hostdev.xml <<XMLEOF
<hostdev mode='subsystem' type='pci' managed='no'>
  <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
</hostdev>
XMLEOF

say "The pool, as the hook will find it: the two ivshmems free."
alias_av status
say "Tenant A starts through libvirt; the hook claims 0000:81:00.0 and binds it to vfio-pci. A writes its secret over BAR2."
run $V create /tmp/tenant-a.xml
wait_tenant demo-tenant-a
fact tenant_a rc=$rc "$(tenant_lines demo-tenant-a | tr '\n' ' ')"
tenant_says A demo-tenant-a
run $V create /tmp/idle.xml
say "A is destroyed. The hook's release leaves the device dirty and held; the worker starts its scrub (its first step waits for the demo)."
run $V destroy demo-tenant-a
wait_state 'dirty|scrubbing' 30
alias_av status --no-sync
say "Tenant B asks for the same device now: the hook refuses it, in one line."
run $V create /tmp/tenant-b.xml
fact refused_b rc=$rc "$(grep -c . /tmp/run.out)"
say "virsh attach-device into a running domain (demo-other) runs no hook: the kernel refuses it, since accelvirt holds the device's IOMMU group."
run $V attach-device demo-other /tmp/hostdev.xml --live
fact refused_attach rc=$rc
run $V destroy demo-other
say "The scrub goes on: vfio-zero clears BAR2 and reads it back. Its certificate, in the journal:"
: > /run/demo-go
wait_state 'free|quarantined' 120
fact scrubbed state="$(state_of)" seconds="$(elapsed "$t0")"
alias_av journal show --event scrub-certificate --last 1
alias_av journal verify
say "Tenant B asks again, gets the device, and reads BAR2 before writing its own: zeros, none of A's secret."
run $V create /tmp/tenant-b.xml
wait_tenant demo-tenant-b
fact tenant_b rc=$rc "$(tenant_lines demo-tenant-b | tr '\n' ' ')"
tenant_says B demo-tenant-b
fact b_found "$(tenant_lines demo-tenant-b | sed -n 's/^AVVM-TENANT-FOUND [^ ]* //p')"
run $V destroy demo-tenant-b
fact secret_in_b "$(grep -a -c "$SECRET" /tmp/demo-tenant-b-console.log 2>/dev/null)"
fact seconds "$(elapsed "$t0")"
