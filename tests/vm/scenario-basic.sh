#!/bin/sh
# Runs INSIDE the VM rig's guest (busybox sh), copied to the results share as
# scenario.sh by test-vm.sh. It only acts and records: every line of $R/facts is
# "KEY VALUE...", and test-vm.sh makes the checks from outside.
# Needs: the machine of run-vm.sh (ivshmem0 on pxb0/node 0, ivshmem1 on pxb1/node 1,
# ivshmem2 and edu1 behind a pcie-pci-bridge), /lib/modules/mtty.ko, /bin/zero-bar,
# and in the results share env (ACCELVIRT=...) and capture-host.sh.
R=${AVVM_RESULTS:-/results}
F=$R/facts
: > "$F"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }
sysrd() { cat "$1" 2>/dev/null || echo "?"; }
grp_of() { basename "$(readlink "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null)" 2>/dev/null; }

# --- a. IOMMU groups, NUMA nodes, the pcie-pci-bridge group ---
fact iommu_groups "$(ls /sys/kernel/iommu_groups | wc -l)"
fact numa_nodes "$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)"
for d in /sys/bus/pci/devices/*; do
    a=$(basename "$d")
    g=$(grp_of "$a")
    fact pci "$a" "$(sysrd "$d/vendor"):$(sysrd "$d/device")" "$(sysrd "$d/class")" \
        numa="$(sysrd "$d/numa_node")" group="${g:--}"
done
for g in /sys/kernel/iommu_groups/*; do
    fact group "$(basename "$g")" $(ls "$g/devices")
done

# ivshmem devices (1af4:1110) by NUMA node; the one whose group holds a bridge
shm0='' shm1='' shmbr=''
for d in /sys/bus/pci/devices/*; do
    test "$(sysrd "$d/vendor"):$(sysrd "$d/device")" = 0x1af4:0x1110 || continue
    a=$(basename "$d"); g=$(grp_of "$a")
    n=$(ls "/sys/kernel/iommu_groups/$g/devices" | wc -l)
    if test "$n" -gt 1; then shmbr=$a
    elif test "$(sysrd "$d/numa_node")" = 0; then shm0=$a
    elif test "$(sysrd "$d/numa_node")" = 1; then shm1=$a
    fi
done
fact ivshmem_node0 "${shm0:-none}"
fact ivshmem_node1 "${shm1:-none}"
fact ivshmem_bridged "${shmbr:-none}"

# --- b. BAR2 of the node-0 ivshmem: read the host's pattern, zero it ---
if test -n "$shm0"; then
    d=/sys/bus/pci/devices/$shm0
    echo 1 > "$d/enable" 2>/dev/null
    fact bar2_size "$(stat -c %s "$d/resource2")"
    fact bar2_head_before "$(zero-bar head "$d/resource2" 32)"
    r=$(zero-bar zero "$d/resource2" 2>&1)
    fact bar2_zero "$r rc=$?"
    fact bar2_nonzero_after "$(zero-bar sum "$d/resource2")"
    echo 0 > "$d/enable" 2>/dev/null
fi

# --- a. bind the node-1 ivshmem to vfio-pci ---
if test -n "$shm1"; then
    d=/sys/bus/pci/devices/$shm1
    g=$(grp_of "$shm1")
    echo vfio-pci > "$d/driver_override"
    echo "$shm1" > /sys/bus/pci/drivers_probe
    fact vfio_bind "$shm1" driver="$(basename "$(readlink "$d/driver")")" group="$g" \
        dev="$(test -c "/dev/vfio/$g" && echo "/dev/vfio/$g" || echo none)"
    fact vfio_devices $(ls /dev/vfio)
    # and back, as a host would after use
    echo "$shm1" > "$d/driver/unbind"
    echo > "$d/driver_override"
    fact vfio_unbind "$shm1" driver="$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null)" \
        dev="$(test -c "/dev/vfio/$g" && echo present || echo gone)"
fi

# --- a. mdev: mtty, create and remove an mtty-2 ---
if insmod /lib/modules/mtty.ko; then
    fact mtty_loaded yes
else
    fact mtty_loaded no
fi
T=/sys/class/mdev_bus/mtty/mdev_supported_types/mtty-2
fact mdev_types $(ls /sys/class/mdev_bus/mtty/mdev_supported_types 2>/dev/null)
if test -d "$T"; then
    fact mdev_available_before "$(sysrd "$T/available_instances")"
    u=$(cat /proc/sys/kernel/random/uuid)
    echo "$u" > "$T/create"
    m=/sys/bus/mdev/devices/$u
    g=$(basename "$(readlink "$m/iommu_group" 2>/dev/null)" 2>/dev/null)
    fact mdev_created "$u" "$(test -d "$m" && echo present || echo absent)" \
        type="$(basename "$(readlink "$m/mdev_type" 2>/dev/null)" 2>/dev/null)" \
        driver="$(basename "$(readlink "$m/driver" 2>/dev/null)" 2>/dev/null)" \
        dev="$(test -n "$g" && test -c "/dev/vfio/$g" && echo "/dev/vfio/$g" || echo none)"
    fact mdev_available_during "$(sysrd "$T/available_instances")"
    echo 1 > "$m/remove"
    fact mdev_removed "$u" "$(test -d "$m" && echo present || echo gone)"
    fact mdev_available_after "$(sysrd "$T/available_instances")"
fi

# --- c. accelvirt list --json on this kernel, run from the host's root (9p, ro) ---
A=$(sed -n 's/^ACCELVIRT=//p' "$R/env" 2>/dev/null)
if test -z "$A"; then
    fact accelvirt unset
elif ! test -x "/host$A"; then
    fact accelvirt missing "$A"
else
    for m in proc sys dev; do mount --bind "/$m" "/host/$m"; done
    mount -t tmpfs tmpfs /host/run   # the only writable place (the host's /tmp may hold $A)
    mkdir -p /host/run/av-state /host/run/av-policies
    chroot /host env ACCELVIRT_STATE_DIR=/run/av-state ACCELVIRT_POLICY_DIR=/run/av-policies \
        "$A" list --json > "$R/accelvirt-list.json" 2> "$R/accelvirt-list.err"
    fact accelvirt ran rc=$?
    # --- d. a copy of this sysfs reads the same: capture-host.sh (test-vm.sh puts it in
    # the results share) run as on a real server, with the host's sh and find, into the
    # tmpfs, then `accelvirt --root COPY list --json`; nothing changed since the list above
    if test -f "$R/capture-host.sh"; then
        cp "$R/capture-host.sh" /host/run/capture-host.sh
        chroot /host sh /run/capture-host.sh / /run/av-capture > "$R/capture.err" 2>&1
        rc=$?
        fact capture rc=$rc entries=$(find /host/run/av-capture | wc -l)
        chroot /host env ACCELVIRT_STATE_DIR=/run/av-state ACCELVIRT_POLICY_DIR=/run/av-policies \
            "$A" --root /run/av-capture list --json \
            > "$R/accelvirt-list-capture.json" 2> "$R/accelvirt-list-capture.err"
        fact accelvirt_capture ran rc=$?
        # the copy itself, for a look from outside when the two differ
        (cd /host/run/av-capture && tar -cf "$R/capture.tar" .)
    else
        fact capture missing
    fi
    umount /host/run /host/dev /host/sys /host/proc
fi
exit 0
