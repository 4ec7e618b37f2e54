#!/bin/sh
# Runs INSIDE the VM rig's guest in the end-to-end mode (AV_VM_ROOT=overlay: the host's
# userland under an overlay, busybox init as PID 1, virtlogd and libvirtd started by
# init.sh stage2). Copied to the results share as scenario.sh by test-vm.sh.
# Defines and starts a nested TCG domain with the node-1 ivshmem (0000:81:00.0) as a
# managed vfio hostdev, records what it sees in $R/facts ("KEY VALUE..."), destroys the
# domain. test-vm.sh makes the checks from outside.
R=${AVVM_RESULTS:-/avvm/results}
F=$R/facts
: > "$F"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
V="virsh -c qemu:///system"
ADDR=0000:81:00.0
D=/sys/bus/pci/devices/$ADDR
drv() { basename "$(readlink "$D/driver" 2>/dev/null)" 2>/dev/null; }

fact pid1 "$(cat /proc/1/comm)"
fact libvirtd_up "$($V version >/dev/null 2>&1 && echo yes || echo no)" uptime="$(now)"
fact libvirt_version "$($V version 2>/dev/null | sed -n 's/^Using library: //p')"
fact hook_installed "$(test -x /etc/libvirt/hooks/qemu && echo yes || echo no)"
fact device "$ADDR" "$(cat "$D/vendor"):$(cat "$D/device")" driver="$(drv)" \
    group="$(basename "$(readlink "$D/iommu_group")")"

cat > /tmp/nested.xml <<EOF
<domain type='qemu'>
  <name>avvm-nested</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
    </hostdev>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
$V define /tmp/nested.xml > "$R/define.out" 2>&1
fact define rc=$?

t0=$(now)
$V start avvm-nested > "$R/start.out" 2>&1
rc=$?
t1=$(now)
fact start rc=$rc seconds="$(echo "$t1 $t0" | awk '{printf "%.1f", $1 - $2}')"
sed 's/^/start: /' "$R/start.out"
fact state_after_start "$($V domstate avvm-nested 2>/dev/null | head -n1)"
fact driver_after_start "$(drv)"
qpid=$(cat /run/libvirt/qemu/avvm-nested.pid 2>/dev/null)
g=$(basename "$(readlink "$D/iommu_group")")
fact qemu_has_vfio_group "$(ls -l "/proc/$qpid/fd" 2>/dev/null | grep -c "/dev/vfio/$g\$")" pid="${qpid:-none}"
fact dumpxml_hostdev "$($V dumpxml avvm-nested 2>/dev/null | grep -c "<hostdev")"
sleep 2
fact state_later "$($V domstate avvm-nested 2>/dev/null | head -n1)"

t0=$(now)
$V destroy avvm-nested > "$R/destroy.out" 2>&1
rc=$?
t1=$(now)
fact destroy rc=$rc seconds="$(echo "$t1 $t0" | awk '{printf "%.1f", $1 - $2}')"
fact state_after_destroy "$($V domstate avvm-nested 2>/dev/null | head -n1)"
fact driver_after_destroy "$(drv)"
$V undefine avvm-nested >/dev/null 2>&1
fact hook_calls $(awk '{print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
cp /var/log/libvirt/qemu/avvm-nested.log "$R/nested-qemu.log" 2>/dev/null
exit 0
