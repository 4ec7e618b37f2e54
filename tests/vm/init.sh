#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# /init of the VM rig's initramfs (tests/vm). Prints markers on ttyS0, loads the
# modules, mounts the host root (9p, read-only, tag hostroot) on /host and the
# writable results share (tag results) on /results, runs the scenario
# (results/scenario.sh) and powers off. Markers (the host reads the console log):
#   AVVM-BOOT            init started
#   AVVM-READY           modules loaded, shares mounted
#   AVVM-SWITCH-ROOT     (avvm.root=overlay) switching to the overlay root
#   AVVM-RECONCILE       (avvm.root=overlay, boot 1's reboot pool carried) the command
#                        of accelvirt-reconcile.service runs, before libvirt's daemons
#   AVVM-LIBVIRT-DAEMON D V  (avvm.root=overlay) the daemon started (libvirtd or
#                        virtqemud: libvirt_daemon below) on Debian V
#   AVVM-LIBVIRTD-UP     (avvm.root=overlay) libvirt's daemon answers
#   AVVM-SCENARIO-RC=N   the scenario's exit status
#   AVVM-POWEROFF        about to power off
#
# With avvm.root=overlay on the kernel command line (the end-to-end tier), the host
# root under a tmpfs upper layer becomes / (switch_root), busybox init is PID 1 (it
# reaps zombies: without that each `virsh destroy` waits ~86 s), and its sysinit,
# "init stage2", mounts cgroup2, /run, /dev/pts (/tmp is the overlay's), installs the hook in
# results/hooks-qemu (if any), restores libvirt's capabilities cache from
# results/libvirt-caps, runs accelvirt-reconcile.service's command when boot 1 left a
# pool for it (reconcile_at_boot), starts virtlogd and libvirtd, then runs the scenario.
# In that root the results share is /avvm/results.
#
# Nested (scenario-e2e.sh boots this kernel and initramfs as a libvirt domain inside
# the guest; no shares there), by the kernel command line, on every ivshmem's BAR2:
#   avvm.tenant=TEXT  a tenant: prints AVVM-TENANT-FOUND ADDR nonzero=N (BAR2's bytes
#                     that are not zero), AVVM-TENANT-READ ADDR LINE (BAR2's first line
#                     as it found it: zero-bar line; a bitstream's function id when
#                     accelvirt programmed the device, issue 15), writes TEXT over BAR2
#                     (zero-bar fill), prints AVVM-TENANT-WROTE ADDR COUNT,
#                     AVVM-TENANT-WAIT, and waits to be destroyed
#   avvm.hotplug=TEXT a guest that gets its devices while it runs (issue 14): prints
#                     AVVM-HOTPLUG-WAITING, then for each ivshmem that appears (hot-
#                     plugged, or there at boot) AVVM-HOTPLUG-SEEN ADDR hello=N (N: how
#                     often AVHELLO is in its BAR2, which the host wrote there) class=C
#                     (the initramfs has no lspci: sysfs), writes TEXT over BAR2, prints
#                     AVVM-HOTPLUG-WROTE ADDR COUNT, and AVVM-HOTPLUG-GONE ADDR once the
#                     device is gone (hot-unplugged); never ends
#   avvm.topology=1   a guest whose PCIe and NUMA topology accelvirt wrote (issue 16):
#                     prints AVVM-TOPO-NODE nodeN cpus=LIST mem_kb=N for each NUMA node,
#                     AVVM-TOPO-BRIDGE ADDR type=T for each PCI bridge (T: the PCI
#                     Express capability's device/port type, 4 root port, 5 switch
#                     upstream port, 6 switch downstream port, - none), AVVM-TOPO-DEV
#                     ADDR numa=N path=P for each edu (1234:11e8; P: readlink -f of
#                     /sys/bus/pci/devices/ADDR, the bridges above it), AVVM-TOPO-END,
#                     and powers off (the initramfs has no lspci: sysfs)
# (The scrub VM of the "vm" method boots accelvirt's own scrub image, made by
# scrub/image/build, not this one.)

uptime() { cut -d' ' -f1 /proc/uptime; }

finish() {  # finish RESULTS_DIR RC
    echo "AVVM-SCENARIO-RC=$2"
    echo "$2" > "$1/scenario.rc"
    sync
    echo "AVVM-POWEROFF uptime=$(uptime)"
    if test -x /avvm/busybox; then /avvm/busybox poweroff -f; else poweroff -f; fi
}

run_scenario() {  # run_scenario RESULTS_DIR
    rc=0
    if test -f "$1/scenario.sh"; then
        AVVM_RESULTS=$1 sh "$1/scenario.sh" > "$1/scenario.log" 2>&1
        rc=$?
        cat "$1/scenario.log"
    else
        echo "AVVM-WARN no scenario.sh in the results share"
        rc=1
    fi
    return $rc
}

# accelvirt-reconcile.service at boot (issue 17), as this init follows the unit's
# ordering (there is no systemd here): After= udev's coldplug, modules-load and
# local-fs: the initramfs stage loaded the drivers (nvme, e1000e, vfio-pci ...) and
# the kernel probed the devices, the overlay and the results share are mounted;
# Before= libvirtd, virtqemud and libvirt-guests: it runs here, before virtlogd and
# libvirtd start. Its ConditionDirectoryNotEmpty= and ExecStart= are read from the
# unit the build made (RECONCILE_UNIT in results/env), whose @bindir@/accelvirt is the
# build tree's accelvirt here; state and policy dirs of its own, from boot 1's reboot
# pool (results/reboot-state, results/reboot-policies-carried; scenario-e2e.sh phase B
# waits for the worker it starts). What it saw goes to results/reboot-init/.
reconcile_at_boot() {
    R=$1
    test -d "$R/reboot-state" || return 0
    A=$(sed -n 's/^ACCELVIRT=//p' "$R/env")
    W=$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")
    U=$(sed -n 's/^RECONCILE_UNIT=//p' "$R/env")
    RS=/var/lib/accelvirt-reboot RP=/etc/accelvirt-reboot/policies O=$R/reboot-init
    PF=/sys/bus/pci/devices/0000:83:00.0
    mkdir -p "$O" $RS $RP
    cp -a "$R/reboot-state/." $RS/
    cp "$R/scrub-sleep.sh" /etc/accelvirt-reboot/scrub-sleep.sh
    for p in "$R/reboot-policies-carried/"*.json; do
        sed "s|@SCRUB@|/etc/accelvirt-reboot/scrub-sleep.sh|g" "$p" > "$RP/$(basename "$p")"
    done
    chmod 700 $RS
    chmod 755 /etc/accelvirt-reboot $RP /etc/accelvirt-reboot/scrub-sleep.sh
    chmod 644 $RP/*.json
    exec_line=$(sed -n 's/^ExecStart=//p' "$U" | head -n1)
    cond=$(sed -n 's/^ConditionDirectoryNotEmpty=//p' "$U" | head -n1)
    {
        echo "unit=$U"
        echo "exec=$exec_line"
        echo "condition=$cond"
        echo "boot_id=$(cat /proc/sys/kernel/random/boot_id)"
        echo "uptime=$(cut -d' ' -f1 /proc/uptime)"
        # libvirt's daemons running now: none, or this init broke the unit's ordering
        echo "daemons=$(cat /proc/[0-9]*/comm 2>/dev/null | grep -c -x -e libvirtd -e virtlogd -e virtqemud)"
        echo "edu_driver=$(basename "$(readlink /sys/bus/pci/devices/0000:84:00.0/driver 2>/dev/null)" 2>/dev/null)"
        echo "numvfs=$(cat $PF/sriov_numvfs 2>/dev/null)"
        echo "autoprobe=$(cat $PF/sriov_drivers_autoprobe 2>/dev/null)"
    } > "$O/before"
    # the unit's condition, on this run's policy dir (the unit's own names @policydir@)
    if test -z "$exec_line" || test -z "$cond" || test -z "$(ls -A $RP)"; then
        echo "rc=skipped" > "$O/after"
        return 0
    fi
    # ExecStart=@bindir@/accelvirt ARGS: the build tree's accelvirt with the unit's ARGS
    args=
    case "$exec_line" in *" "*) args=${exec_line#* } ;; esac
    # shellcheck disable=SC2086
    set -- $args
    echo "AVVM-RECONCILE uptime=$(cut -d' ' -f1 /proc/uptime)"
    ACCELVIRT_STATE_DIR=$RS ACCELVIRT_POLICY_DIR=$RP ACCELVIRT_WORKER=$W ACCELVIRT_LOG_FILE=$O/log \
        "$A" "$@" > "$O/stdout" 2> "$O/stderr"
    rc=$?
    {
        echo "rc=$rc"
        echo "args=$*"
        echo "uptime=$(cut -d' ' -f1 /proc/uptime)"
        echo "numvfs=$(cat $PF/sriov_numvfs 2>/dev/null)"
    } > "$O/after"
}

# libvirt's daemon as the root's distribution runs it: the modular virtqemud where
# the root has it and enables its socket, else the monolithic libvirtd, which both
# Debian 12 and Debian 13 install and enable (libvirt-daemon-system: libvirtd.socket,
# libvirtd.service; Debian 13's libvirt 11.3 packages no virtqemud). The kernel
# command line's avvm.libvirt=modular or avvm.libvirt=monolithic chooses. Clients
# (virsh, accelvirt) find either by its socket (libvirt's remote driver, mode auto).
libvirt_daemon() {
    for a in $(cat /proc/cmdline); do
        case "$a" in
            avvm.libvirt=modular) echo virtqemud; return ;;
            avvm.libvirt=monolithic) echo libvirtd; return ;;
        esac
    done
    if test -x /usr/sbin/virtqemud &&
       { test -e /etc/systemd/system/sockets.target.wants/virtqemud.socket || ! test -x /usr/sbin/libvirtd; }; then
        echo virtqemud
    else
        echo libvirtd
    fi
}

stage2() {
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    R=/avvm/results
    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev
    exec </dev/console >/dev/console 2>&1
    mkdir -p /dev/pts /dev/shm
    mount -t devpts devpts /dev/pts
    mount -t tmpfs tmpfs /dev/shm
    mount -t cgroup2 cgroup2 /sys/fs/cgroup
    mount -t tmpfs tmpfs /run
    # /tmp stays the overlay's (writable, in its tmpfs upper layer): a tmpfs over
    # it would hide a build tree under the host's /tmp (CI may clone there).
    echo "AVVM-STAGE2 uptime=$(uptime)"
    hostname avvm
    # No services of the host's configuration: no autostarted networks or domains.
    # Nor the host's domains or hooks (the overlay hides them; the host is untouched).
    rm -f /etc/libvirt/qemu/networks/autostart/* /etc/libvirt/qemu/autostart/* \
        /etc/libvirt/qemu/*.xml 2>/dev/null
    rm -rf /etc/libvirt/hooks /var/lib/libvirt/qemu/* /var/cache/libvirt/qemu/* 2>/dev/null
    cat >> /etc/libvirt/qemu.conf <<'EOF'
# tests/vm: a guest with no security modules, no systemd, TCG only
security_driver = "none"
namespaces = [ ]
user = "root"
group = "root"
EOF
    if test -d "$R/hooks"; then
        mkdir -p /etc/libvirt/hooks
        cp -a "$R/hooks/." /etc/libvirt/hooks/
    fi
    if test -d "$R/libvirt-caps"; then
        mkdir -p /var/cache/libvirt/qemu/capabilities
        cp -a "$R/libvirt-caps/." /var/cache/libvirt/qemu/capabilities/
    fi
    mkdir -p /var/log/libvirt /run/libvirt /var/lib/libvirt
    reconcile_at_boot "$R"
    virtlogd -d || echo "AVVM-WARN virtlogd failed"
    daemon=$(libvirt_daemon)
    echo "AVVM-LIBVIRT-DAEMON $daemon $(cat /etc/debian_version 2>/dev/null)"
    $daemon -d || echo "AVVM-WARN $daemon failed"
    i=0
    while test $i -lt 120; do
        if virsh -c qemu:///system version >/dev/null 2>&1; then
            echo "AVVM-LIBVIRTD-UP uptime=$(uptime)"
            break
        fi
        sleep 1; i=$((i + 1))
    done
    run_scenario "$R"
    rc=$?
    mkdir -p "$R/libvirt-caps.out"
    cp -a /var/cache/libvirt/qemu/capabilities/. "$R/libvirt-caps.out/" 2>/dev/null
    cp -a /var/log/libvirt "$R/libvirt-logs" 2>/dev/null
    finish "$R" "$rc"
}

if test "${1:-}" = stage2; then
    stage2
    exit 1
fi

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo "AVVM-BOOT uptime=$(uptime)"

tenant() {  # tenant TEXT: read, then write TEXT over every ivshmem's BAR2, then wait to be destroyed
    for d in /sys/bus/pci/devices/*; do
        test "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 || continue
        echo 1 > "$d/enable"
        a=$(basename "$d")
        echo "AVVM-TENANT-FOUND $a nonzero=$(zero-bar sum "$d/resource2")"
        echo "AVVM-TENANT-READ $a $(zero-bar line "$d/resource2")"
        zero-bar fill "$d/resource2" "$1" || echo "AVVM-TENANT-FAILED $a"
        echo "AVVM-TENANT-WROTE $a $(zero-bar count "$d/resource2" "$1")"
    done
    echo "AVVM-TENANT-WAIT uptime=$(uptime)"
    while :; do sleep 60; done
}
hotplug() {  # hotplug TEXT: see the head of this file
    echo "AVVM-HOTPLUG-WAITING uptime=$(uptime)"
    seen=" "
    while :; do
        for d in /sys/bus/pci/devices/*; do
            a=$(basename "$d")
            case "$seen" in *" $a "*) continue ;; esac
            test "$(cat "$d/vendor" 2>/dev/null):$(cat "$d/device" 2>/dev/null)" = 0x1af4:0x1110 || continue
            seen="$seen$a "
            echo 1 > "$d/enable"
            echo "AVVM-HOTPLUG-SEEN $a hello=$(zero-bar count "$d/resource2" AVHELLO) class=$(cat "$d/class") uptime=$(uptime)"
            zero-bar fill "$d/resource2" "$1" || echo "AVVM-HOTPLUG-FAILED $a"
            echo "AVVM-HOTPLUG-WROTE $a $(zero-bar count "$d/resource2" "$1")"
        done
        for a in $seen; do
            test -e "/sys/bus/pci/devices/$a" && continue
            echo "AVVM-HOTPLUG-GONE $a uptime=$(uptime)"
            seen=$(echo "$seen" | sed "s/ $a / /")
        done
        sleep 0.5
    done
}
pcie_type() {  # pcie_type ADDR: bits 7:4 of the PCI Express Capabilities register (PCIe
    # Base Spec 7.5.3.2, capability ID 0x10 in the list at config offset 0x34), or "-"
    c=/sys/bus/pci/devices/$1/config
    p=$(od -A n -t u1 -j 52 -N 1 "$c" | tr -d ' ')
    i=0
    while test "${p:-0}" -ne 0 && test $i -lt 48; do
        if test "$(od -A n -t u1 -j "$p" -N 1 "$c" | tr -d ' ')" = 16; then
            echo $(($(od -A n -t u1 -j $((p + 2)) -N 1 "$c" | tr -d ' ') >> 4 & 15))
            return
        fi
        p=$(od -A n -t u1 -j $((p + 1)) -N 1 "$c" | tr -d ' ')
        i=$((i + 1))
    done
    echo -
}
topology() {  # topology: see the head of this file
    echo "AVVM-TOPO-BEGIN uptime=$(uptime)"
    for n in /sys/devices/system/node/node*; do
        echo "AVVM-TOPO-NODE $(basename "$n") cpus=$(cat "$n/cpulist") mem_kb=$(sed -n 's/.*MemTotal: *\([0-9]*\) kB/\1/p' "$n/meminfo")"
    done
    for d in /sys/bus/pci/devices/*; do
        a=$(basename "$d")
        case "$(cat "$d/class")" in
        0x0604*) echo "AVVM-TOPO-BRIDGE $a type=$(pcie_type "$a")" ;;
        esac
        test "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 || continue
        echo "AVVM-TOPO-DEV $a numa=$(cat "$d/numa_node") path=$(readlink -f "$d")"
    done
    echo "AVVM-TOPO-END uptime=$(uptime)"
    poweroff -f
}
for a in $(cat /proc/cmdline); do
    case "$a" in
        avvm.tenant=*) tenant "${a#avvm.tenant=}" ;;
        avvm.hotplug=*) hotplug "${a#avvm.hotplug=}" ;;
        avvm.topology=1) topology ;;
    esac
done

die() {
    echo "AVVM-FAIL $*"
    echo "AVVM-POWEROFF"
    poweroff -f
}

while read -r m; do
    insmod "/lib/modules/$m" || echo "AVVM-WARN insmod $m failed"
done < /lib/modules/load.list

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none results /results ||
    die "cannot mount the results share"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose hostroot /host ||
    echo "AVVM-WARN cannot mount the host root share"
echo "AVVM-READY uptime=$(uptime)"

case " $(cat /proc/cmdline) " in
*" avvm.root=overlay "*)
    mkdir -p /overlay
    mount -t tmpfs -o size=75% tmpfs /overlay
    mkdir -p /overlay/upper /overlay/work
    mount -t overlay overlay -o lowerdir=/host,upperdir=/overlay/upper,workdir=/overlay/work \
        /newroot || die "cannot mount the overlay root"
    mkdir -p /newroot/avvm/results
    cp /bin/busybox /bin/zero-bar /init /lib/modules/mtty.ko /newroot/avvm/
    mount --move /results /newroot/avvm/results
    printf '%s\n' '::sysinit:/bin/sh /avvm/init stage2' \
        '::ctrlaltdel:/avvm/busybox poweroff -f' > /newroot/etc/inittab
    for m in proc sys tmp run; do umount /$m 2>/dev/null; done
    echo "AVVM-SWITCH-ROOT uptime=$(cut -d' ' -f1 /proc/uptime 2>/dev/null)"
    exec switch_root /newroot /avvm/busybox init
    ;;
esac

run_scenario /results
rc=$?
finish /results "$rc"
