#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Boot the VM rig's guest once (QEMU, TCG) and wait for it to power off.
#
# Usage: run-vm.sh RUN_DIR
#   RUN_DIR/results/        the writable share (9p tag "results"); put scenario.sh here:
#                           the guest's /init runs it and leaves scenario.log/.rc here
#   RUN_DIR/ivshmem{0,1,2,3}  the ivshmem backing files (created, zero-filled, when
#                           missing; a test may fill them before the boot)
#   RUN_DIR/console.log     the guest's serial console (ttyS0)
#   RUN_DIR/console-hung.log  the console of a first boot whose guest lost its timer
#                           interrupts under TCG (RCU stalls before any FACT line):
#                           QEMU is stopped then, and the guest booted once more
# Env:
#   AV_VM_CACHE    what build.sh built (default ./tests/vm/cache)
#   AV_VM_TIMEOUT  seconds before QEMU is killed (default 300)
#   AV_VM_MEM_MB   memory of each of the two NUMA nodes (default 512)
#   AV_VM_SHM_MB   size of each ivshmem (default 1, a power of two)
#   AV_VM_APPEND   extra kernel command line
#   AV_VM_IVSHMEM0_OPTS  extra ",key=value" options of ivshmem0's -device, such as
#                  ",romfile=PATH" (an option ROM: test-vm.sh's rom-check tests)
#   AV_VM_ROOT=overlay  the end-to-end mode: the guest switches to the host root under
#                  a tmpfs overlay, busybox init as PID 1, virtlogd + libvirtd (init.sh)
#   AV_VM_QUIET=1  do not copy the console to stdout
#   AV_VM_NIC1_MAC, AV_VM_NIC2_MAC  the MACs of nic1 (0000:44:00.0) and nic2
#                  (0000:45:00.0); QEMU's e1000e derives its PCIe Device Serial Number
#                  from its MAC, so another MAC is another serial at the same address
# rp4..rp6 come after rp0 and rp2 on pxb0, and rp7, rp8 after rp1 on pxb1, so that the
# older devices keep their bus addresses and physical slot names (the kernel names the
# root ports' slots 0-1, 0-2... in that order); issue 16's switch (rp9 > up0 > dp0, dp1,
# an edu behind each) and rp10 (an edu on node 1) come after all of them, and their
# ports have slot numbers of their own (40 to 43), so that no older port's slot name
# (a "0-N" counter) moves. The switch's downstream ports are pcie-root-ports (with
# ACS): QEMU 7.2's xio3130-downstream has no ACS capability, so the kernel puts the
# device behind it in one IOMMU group with the port (drivers/iommu/iommu.c
# pci_device_group()), which accelvirt refuses as not viable; topologically (the
# parent bridges in sysfs) it is a switch all the same: root port 40:05.0 > upstream
# port 46:00.0 > ports 47:00.0, 47:01.0 > edu 48:00.0, 49:00.0 (node 0), and edu
# 84:00.0 alone behind root port 80:03.0 (node 1). The nics have no netdev (QEMU warns
# "no peer") and no option ROM. The USB sticks have no host driver in the guest (usbhid is
# not loaded); an empty serial= gives a device without a serial string.
#
# The machine (q35, emulated Intel IOMMU, 2 NUMA nodes):
#   pcie.0 ── pxb-pcie  pxb0 (numa_node=0, bus 0x40) ── pcie-root-port rp0 ── ivshmem-plain (ivshmem0)
#          │                                          ├─ pcie-root-port rp2 ── edu
#          │                                          ├─ pcie-root-port rp4 ── ivshmem-plain (ivshmem3, fn 0, multifunction=on)
#          │                                          │                     └ e1000e nic0 (fn 1; one IOMMU group with ivshmem3)
#          │                                          ├─ pcie-root-port rp5 ── e1000e nic1 (mac AV_VM_NIC1_MAC)
#          │                                          ├─ pcie-root-port rp6 ── e1000e nic2 (mac AV_VM_NIC2_MAC)
#          │                                          └─ pcie-root-port rp9 ── x3130-upstream up0 ─┬ pcie-root-port dp0 ── edu2
#          │                                                (issue 16: a PCIe switch)                └ pcie-root-port dp1 ── edu3
#          ├─ pxb-pcie  pxb1 (numa_node=1, bus 0x80) ── pcie-root-port rp1 ── ivshmem-plain (ivshmem1)
#          │                                          ├─ pcie-root-port rp7 ── qemu-xhci: three usb-kbd "sticks",
#          │                                          │     ports 1-1 (serial AVSTICK-A), 1-2 (AVSTICK-B), 1-3 (no serial)
#          │                                          ├─ pcie-root-port rp8 ── nvme (serial AVNVME0, subsystem nvsub0):
#          │                                          │     an SR-IOV PF (sriov_totalvfs 2, VFs at 83:00.1, 83:00.2)
#          │                                          └─ pcie-root-port rp10 ── edu4 (issue 16: the node-1 topology device)
#          ├─ pcie-root-port rp3 ── pcie-pci-bridge br0 ── ivshmem-plain (ivshmem2), edu  [one group: non-viable]
#          ├─ virtio-9p-pci hostroot  (host / read-only; 9p cannot sit on a pxb)
#          └─ virtio-9p-pci results   (RUN_DIR/results, writable)
# Exit status: QEMU's (124 on timeout); 0 when the guest powered off by itself.
set -eu

die() { echo "run-vm.sh: $*" >&2; exit 1; }
test $# -ge 1 || die "usage: run-vm.sh RUN_DIR"
run=$1
mkdir -p "$run/results"
run=$(cd "$run" && pwd)
cache=${AV_VM_CACHE:-tests/vm/cache}
timeout=${AV_VM_TIMEOUT:-300}
mem=${AV_VM_MEM_MB:-512}
shm=${AV_VM_SHM_MB:-1}
mode=
if test "${AV_VM_ROOT:-}" = overlay; then
    mode=avvm.root=overlay
    mem=${AV_VM_MEM_MB:-1024}
fi

qemu=$(command -v qemu-system-x86_64 || true)
test -n "$qemu" || die "missing qemu-system-x86_64: run tests/vm/install-deps.sh (as root)"
for f in vmlinux initramfs.cpio.gz; do
    test -f "$cache/$f" || die "missing $cache/$f: run tests/vm/build.sh first"
done

for i in 0 1 2 3; do
    f="$run/ivshmem$i"
    if ! test -f "$f" || test "$(stat -c %s "$f")" -ne $((shm * 1024 * 1024)); then
        rm -f "$f"
        dd if=/dev/zero of="$f" bs=1M count="$shm" status=none
    fi
done

set -- \
    -machine q35 -accel tcg -cpu qemu64 \
    -nodefaults -no-user-config -display none -no-reboot \
    -serial stdio -monitor none \
    -smp 2,sockets=2,cores=1,threads=1 -m $((2 * mem))M \
    -object memory-backend-ram,id=mem0,size=${mem}M \
    -object memory-backend-ram,id=mem1,size=${mem}M \
    -numa node,nodeid=0,cpus=0,memdev=mem0 \
    -numa node,nodeid=1,cpus=1,memdev=mem1 \
    -device intel-iommu,intremap=on \
    -device pxb-pcie,id=pxb0,bus_nr=0x40,numa_node=0,bus=pcie.0 \
    -device pcie-root-port,id=rp0,bus=pxb0,chassis=10,slot=0 \
    -device pcie-root-port,id=rp2,bus=pxb0,chassis=12,slot=0 \
    -device pxb-pcie,id=pxb1,bus_nr=0x80,numa_node=1,bus=pcie.0 \
    -device pcie-root-port,id=rp1,bus=pxb1,chassis=11,slot=0 \
    -device pcie-root-port,id=rp3,bus=pcie.0,chassis=13,slot=0 \
    -device pcie-pci-bridge,id=br0,bus=rp3 \
    -object memory-backend-file,id=shm0,mem-path="$run/ivshmem0",size=${shm}M,share=on \
    -object memory-backend-file,id=shm1,mem-path="$run/ivshmem1",size=${shm}M,share=on \
    -object memory-backend-file,id=shm2,mem-path="$run/ivshmem2",size=${shm}M,share=on \
    -device ivshmem-plain,id=ivshmem0,memdev=shm0,bus=rp0${AV_VM_IVSHMEM0_OPTS:-} \
    -device ivshmem-plain,id=ivshmem1,memdev=shm1,bus=rp1 \
    -device edu,id=edu0,bus=rp2 \
    -device ivshmem-plain,id=ivshmem2,memdev=shm2,bus=br0,addr=1 \
    -device edu,id=edu1,bus=br0,addr=2 \
    -fsdev local,id=fshost,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=fshost,mount_tag=hostroot,bus=pcie.0 \
    -fsdev local,id=fsres,path="$run/results",security_model=none,multidevs=remap \
    -device virtio-9p-pci,fsdev=fsres,mount_tag=results,bus=pcie.0 \
    -device pcie-root-port,id=rp4,bus=pxb0,chassis=14,slot=0 \
    -object memory-backend-file,id=shm3,mem-path="$run/ivshmem3",size=${shm}M,share=on \
    -device ivshmem-plain,id=ivshmem3,memdev=shm3,bus=rp4,addr=0.0,multifunction=on \
    -device e1000e,id=nic0,bus=rp4,addr=0.1,mac=52:54:00:a5:00:01,romfile= \
    -device pcie-root-port,id=rp5,bus=pxb0,chassis=15,slot=0 \
    -device e1000e,id=nic1,bus=rp5,mac=${AV_VM_NIC1_MAC:-52:54:00:a5:01:01},romfile= \
    -device pcie-root-port,id=rp6,bus=pxb0,chassis=16,slot=0 \
    -device e1000e,id=nic2,bus=rp6,mac=${AV_VM_NIC2_MAC:-52:54:00:a5:02:01},romfile= \
    -device pcie-root-port,id=rp7,bus=pxb1,chassis=17,slot=0 \
    -device qemu-xhci,id=xhci0,bus=rp7 \
    -device usb-kbd,id=stick0,bus=xhci0.0,port=1,serial=AVSTICK-A \
    -device usb-kbd,id=stick1,bus=xhci0.0,port=2,serial=AVSTICK-B \
    -device usb-kbd,id=stick2,bus=xhci0.0,port=3,serial= \
    -device pcie-root-port,id=rp8,bus=pxb1,chassis=18,slot=0 \
    -device nvme-subsys,id=nvsub0,nqn=avvm-nvsub0 \
    -device nvme,id=nvme0,serial=AVNVME0,subsys=nvsub0,sriov_max_vfs=2,sriov_vq_flexible=4,sriov_vi_flexible=2,bus=rp8 \
    -device pcie-root-port,id=rp9,bus=pxb0,chassis=19,slot=40 \
    -device x3130-upstream,id=up0,bus=rp9 \
    -device pcie-root-port,id=dp0,bus=up0,chassis=20,slot=41 \
    -device pcie-root-port,id=dp1,bus=up0,chassis=21,slot=42 \
    -device edu,id=edu2,bus=dp0 \
    -device edu,id=edu3,bus=dp1 \
    -device pcie-root-port,id=rp10,bus=pxb1,chassis=22,slot=43 \
    -device edu,id=edu4,bus=rp10 \
    -kernel "$cache/vmlinux" -initrd "$cache/initramfs.cpio.gz" \
    -append "console=ttyS0 intel_iommu=on panic=-1 loglevel=4 no_timer_check $mode ${AV_VM_APPEND:-}"

# A guest that lost its timer interrupts under TCG (a vCPU's "rcu_preempt
# kthread timer wakeup didn't happen", before the scenario printed a FACT)
# never makes progress again: QEMU is stopped and the guest booted once
# more, said on stderr, rather than waiting out the whole timeout.
hang_sig="kthread timer wakeup didn't happen"
attempt=1
while :; do
    start=$(date +%s)
    rc=0
    : > "$run/console.log"
    timeout -k 10 "$timeout" "$qemu" "$@" </dev/null >"$run/console.log" 2>&1 &
    qpid=$!
    if test "${AV_VM_QUIET:-0}" != 1; then
        tail -n +1 -f --pid="$qpid" "$run/console.log" &
    fi
    hung=
    while kill -0 "$qpid" 2>/dev/null; do
        if test "$attempt" = 1 && grep -qF "$hang_sig" "$run/console.log" && ! grep -q '^FACT ' "$run/console.log"; then
            hung=1
            kill "$qpid" 2>/dev/null
            break
        fi
        sleep 2
    done
    wait "$qpid" || rc=$?
    wait
    if test -n "$hung"; then
        cp "$run/console.log" "$run/console-hung.log"
        echo "run-vm.sh: the guest lost its timer interrupts under TCG after $(($(date +%s) - start)) s" \
             "(console: $run/console-hung.log); booting it once more" >&2
        attempt=2
        continue
    fi
    if test "${AV_VM_QUIET:-0}" != 1 && test "$rc" != 0; then
        echo "AVVM-QEMU-RC=$rc" | tee -a "$run/console.log"
    fi
    break
done
end=$(date +%s)
echo "$((end - start))" > "$run/boot-seconds"
echo "run-vm.sh: QEMU exited $rc after $((end - start)) s (console: $run/console.log)" >&2
if test "$rc" = 124 || test "$rc" = 137; then
    echo "run-vm.sh: timeout after $timeout s" >&2
fi
exit "$rc"
