#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs INSIDE the VM rig's guest (busybox sh), copied to the results share as
# scenario.sh by build-aux/demo. It changes nothing on the guest's devices: it runs
#   accelvirt list --long
#   accelvirt list --managed --long
# on the guest's real kernel (vIOMMU, 2 NUMA nodes, ivshmem/edu, a non-viable group),
# the same way scenario-basic.sh does: chrooted into the host's root (9p, read-only),
# with a tmpfs on /run for the state and policy dirs. The policies are the files of
# the results share's policies/ (build-aux/demo copies tests/vm/demo-policies there).
# Writes to the results share:
#   facts              "KEY VALUE..." lines: kernel, iommu_groups, numa_nodes, accelvirt
#   demo-list.txt      accelvirt list --long (and .err)
#   demo-managed.txt   accelvirt list --managed --long (and .err)
R=${AVVM_RESULTS:-/results}
F=$R/facts
: > "$F"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }

fact kernel "$(uname -r)"
fact iommu_groups "$(ls /sys/kernel/iommu_groups | wc -l)"
fact numa_nodes "$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)"
fact dmar $(ls /sys/class/iommu 2>/dev/null)

A=$(sed -n 's/^ACCELVIRT=//p' "$R/env" 2>/dev/null)
if test -z "$A"; then
    fact accelvirt unset
    exit 1
elif ! test -x "/host$A"; then
    fact accelvirt missing "$A"
    exit 1
fi
for m in proc sys dev; do mount --bind "/$m" "/host/$m"; done
mount -t tmpfs tmpfs /host/run   # the only writable place (the host's /tmp may hold $A)
mkdir -p /host/run/av-state /host/run/av-policies
cp "$R"/policies/*.json /host/run/av-policies/ 2>/dev/null
av() {  # av OUTPUT ARGS...: accelvirt in the host's root; sets rc
    out=$1; shift
    COLUMNS=120 chroot /host env ACCELVIRT_STATE_DIR=/run/av-state \
        ACCELVIRT_POLICY_DIR=/run/av-policies "$A" "$@" > "$R/$out" 2> "$R/${out%.txt}.err"
}
av demo-list.txt list --long; rc1=$?
av demo-managed.txt list --managed --long; rc2=$?
fact accelvirt ran list=$rc1 managed=$rc2
umount /host/run /host/dev /host/sys /host/proc
test "$rc1" = 0 && test "$rc2" = 0
