#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs INSIDE the VM rig's guest (busybox sh), copied to the results share as
# scenario.sh by test-vm.sh. It only acts and records: every line of $R/facts is
# "KEY VALUE...", and test-vm.sh makes the checks from outside.
# Needs: the machine of run-vm.sh (ivshmem0 on pxb0/node 0, ivshmem1 on pxb1/node 1,
# ivshmem2 and edu1 behind a pcie-pci-bridge), /lib/modules/mtty.ko, /bin/zero-bar,
# and in the results share env (ACCELVIRT=..., ACCELVIRT_HOOK=..., ACCELVIRT_WORKER=...),
# capture-host.sh, and for the hook's part (hook-tests.sh, sourced at the end) the
# policies in hook-policies/ and scrub-sleep.sh; bench/bench-zero beside $ACCELVIRT.
R=${AVVM_RESULTS:-/results}
F=$R/facts
: > "$F"
fact() { echo "$*" >> "$F"; echo "FACT $*"; }
sysrd() { cat "$1" 2>/dev/null || echo "?"; }
grp_of() { basename "$(readlink "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null)" 2>/dev/null; }

# --- e. the hook, run as libvirt runs it (DOMAIN OP SUBOP -, the XML on stdin), chrooted
# into the host's root with ACCELVIRT_* set as its qemu.d wrapper sets them. Its log
# (ACCELVIRT_LOG_FILE) and everything it prints go to the results share (hook-*).
# Facts: hook_* lines. The pool as `accelvirt status --json` shows it: status-*.json.
HS=/run/av-hook            # in the chroot: state, policies, scrub command, domain XMLs
hook_drv() { basename "$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
hook_devnode() {  # hook_devnode ADDR: /dev/vfio/GROUP when present, else "none"
    g=$(grp_of "$1"); test -n "$g" && test -c "/dev/vfio/$g" && echo "/dev/vfio/$g" || echo none
}
hook_run() {  # hook_run TAG XML DOMAIN OP SUBOP: the hook; rc in $hrc, output in $R/hook-TAG.{out,err}
    t=$1 x=$2; shift 2
    chroot /host env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ACCELVIRT_STATE_DIR=${HSD:-$HS}/state \
        ACCELVIRT_POLICY_DIR=${HSD:-$HS}/policies ACCELVIRT_WORKER="$HW" \
        ACCELVIRT_LOG_FILE=/run/results/hook-basic.log "$HK" "$@" - \
        < "/host$HS/$x" > "$R/hook-$t.out" 2> "$R/hook-$t.err"
    hrc=$?
}
av_status() {  # av_status [--no-sync]: accelvirt status --json of the hook's state dir
    chroot /host env ACCELVIRT_STATE_DIR=${HSD:-$HS}/state ACCELVIRT_POLICY_DIR=${HSD:-$HS}/policies \
        "$A" status --json "$@" 2>&1
}
av_cli() {  # av_cli ARGS...: accelvirt with the hook's state and policy dirs
    chroot /host env ACCELVIRT_STATE_DIR=${HSD:-$HS}/state ACCELVIRT_POLICY_DIR=${HSD:-$HS}/policies \
        "$A" "$@"
}
hook_wait_settled() {  # hook_wait_settled LOG: polls status --no-sync (<= 40 s) until no
    # device is claimed, in-use, dirty or scrubbing; every sample goes to $R/LOG
    i=0
    while test $i -lt 200; do
        s=$(av_status --no-sync)
        printf '=== %s\n%s\n' "$(cut -d' ' -f1 /proc/uptime)" "$s" >> "$R/$1"
        echo "$s" | grep -Eq '"state": *"(claimed|in-use|dirty|scrubbing)"' || return 0
        sleep 0.2; i=$((i + 1))
    done
    return 1
}
hook_xml() {  # hook_xml FILE NAME UUID HOSTDEV-XML [METADATA-XML]
    cat > "/host$HS/$1" <<EOF
<domain type='kvm'>
  <name>$2</name>
  <uuid>$3</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu placement='static'>1</vcpu>
  ${5:-}
  <devices>
    $4
  </devices>
</domain>
EOF
}
pci_hostdev() {  # pci_hostdev BUS SLOT: a managed='no' PCI hostdev of 0000:BUS:SLOT.0
    echo "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x$1' slot='0x$2' function='0x0'/></source></hostdev>"
}

hook_tests() {
    HK=$(sed -n 's/^ACCELVIRT_HOOK=//p' "$R/env")
    HW=$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")
    if ! test -x "/host$HK" || ! test -x "/host$HW"; then
        fact hook missing hook="$HK" worker="$HW"
        return
    fi
    mkdir -p "/host$HS/state" "/host$HS/policies" /host/run/results
    mount --bind "$R" /host/run/results
    cp "$R/scrub-sleep.sh" "/host$HS/scrub.sh"
    chmod 755 "/host$HS" "/host$HS/scrub.sh" "/host$HS/policies"
    for p in "$R"/hook-policies/*.json; do
        sed "s|@SCRUB@|$HS/scrub.sh|g" "$p" > "/host$HS/policies/$(basename "$p")"
    done
    chmod 644 "/host$HS"/policies/*.json
    IV=0000:81:00.0 ED=0000:42:00.0 BR=0000:01:00.0 NV=0000:02:01.0

    # The node-1 ivshmem gets an original driver, uio_pci_generic (loaded at boot), to
    # prove that the hook gives back exactly that; new_id also takes the other unbound
    # ivshmems, which go back to no driver (as before).
    echo "1af4 1110" > /sys/bus/pci/drivers/uio_pci_generic/new_id
    for a in 0000:41:00.0 $NV; do
        test "$(hook_drv $a)" = uio_pci_generic && echo "$a" > /sys/bus/pci/drivers/uio_pci_generic/unbind
    done
    fact hook_before "$IV=$(hook_drv $IV)" "$ED=$(hook_drv $ED)" "$NV=$(hook_drv $NV)" \
        vfio="$(ls /dev/vfio | tr '\n' ' ')"
    av_status > "$R/status-0-before.json"

    # 1. prepare begin of a domain with the node-1 ivshmem and the edu, then release end
    hook_xml vm1.xml avvm-hook 6b1d0c4e-0000-4000-8000-000000000001 \
        "$(pci_hostdev 81 00) $(pci_hostdev 42 00)"
    hook_run prepare vm1.xml avvm-hook prepare begin
    fact hook_prepare rc=$hrc "$IV=$(hook_drv $IV)" "$ED=$(hook_drv $ED)" \
        "$IV-dev=$(hook_devnode $IV)" "$ED-dev=$(hook_devnode $ED)" \
        out="$(wc -c < "$R/hook-prepare.out")" err="$(wc -c < "$R/hook-prepare.err")"
    av_status > "$R/status-1-prepared.json"
    hook_run release vm1.xml avvm-hook release end
    fact hook_release rc=$hrc err="$(wc -c < "$R/hook-release.err")"
    av_status --no-sync > "$R/status-2-released.json"
    if hook_wait_settled status-poll-basic.log; then w=settled; else w=timeout; fi
    fact hook_after_worker "$w" "$IV=$(hook_drv $IV)" "$ED=$(hook_drv $ED)" \
        "$IV-override=$(sysrd /sys/bus/pci/devices/$IV/driver_override)" \
        "$ED-override=$(sysrd /sys/bus/pci/devices/$ED/driver_override)" \
        "$IV-dev=$(hook_devnode $IV)" "$ED-dev=$(hook_devnode $ED)"
    av_status > "$R/status-3-free.json"

    # 2. the non-viable group: the ivshmem behind the pcie-pci-bridge
    before="$(for a in $(ls "/sys/kernel/iommu_groups/$(grp_of $NV)/devices"); do echo "$a=$(hook_drv $a)"; done)"
    hook_xml bad.xml avvm-nonviable 6b1d0c4e-0000-4000-8000-000000000002 "$(pci_hostdev 02 01)"
    hook_run nonviable bad.xml avvm-nonviable prepare begin
    after="$(for a in $(ls "/sys/kernel/iommu_groups/$(grp_of $NV)/devices"); do echo "$a=$(hook_drv $a)"; done)"
    fact hook_nonviable rc=$hrc lines="$(wc -l < "$R/hook-nonviable.err")" \
        unchanged="$(test "$before" = "$after" && echo yes || echo no)" $after
    hook_run nonviable-release bad.xml avvm-nonviable release end
    fact hook_nonviable_release rc=$hrc
    av_status --no-sync > "$R/status-4-nonviable.json"

    # 2b. a multi-function device whose second function is on a host driver (issue 10,
    # hole 1): the ivshmem at 0000:43:00.0 (multifunction=on; rig-ivshmem manages it,
    # uio_pci_generic took it above) and the e1000e at 0000:43:00.1, function 1 of the
    # same slot behind its own root port, one IOMMU group, bound to the guest's e1000e
    # driver; no profile names the e1000e (rig-ivshmem has no "companions")
    MF=0000:43:00.0 MN=0000:43:00.1
    mf_state() {
        for a in $MF $MN; do
            echo "$a=$(hook_drv $a) $a-override=$(sysrd /sys/bus/pci/devices/$a/driver_override)"
        done
        echo "net=$(ls /sys/bus/pci/devices/$MN/net 2>/dev/null | tr '\n' ' ')"
    }
    fact mf_group "$(grp_of $MF)" $(ls "/sys/kernel/iommu_groups/$(grp_of $MF)/devices")
    av_cli list --json > "$R/mf-list.json" 2> "$R/mf-list.err"
    fact mf_list rc=$?
    av_cli list > "$R/mf-list.txt" 2>&1
    # host-validate on this real kernel: one CHECK=RESULT a line it prints
    av_cli host-validate > "$R/host-validate.txt" 2>&1
    fact host_validate rc=$? $(grep -E '^(PASS|WARN|FAIL)  ' "$R/host-validate.txt" | awk '{print $2 "=" $1}' | tr '\n' ' ')
    before="$(mf_state)"
    av_status > "$R/status-mf-0-before.json"
    hook_xml mf.xml avvm-mf 6b1d0c4e-0000-4000-8000-000000000006 "$(pci_hostdev 43 00)"
    hook_run mf-prepare mf.xml avvm-mf prepare begin
    after="$(mf_state)"
    fact mf_prepare rc=$hrc lines="$(wc -l < "$R/hook-mf-prepare.err")" out="$(wc -c < "$R/hook-mf-prepare.out")" \
        unchanged="$(test "$before" = "$after" && echo yes || echo no)" $after
    av_status --no-sync > "$R/status-mf-1-refused.json"
    hook_run mf-release mf.xml avvm-mf release end
    fact mf_release rc=$hrc "$(mf_state | tr '\n' ' ')"
    av_status --no-sync > "$R/status-mf-2-released.json"

    # 3. an mtty mdev named by the XML, placed with the mdev profile; what sysfs shows
    # of mtty's parent first (a virtual device, not a PCI one)
    {
        echo "# ls -l /sys/class/mdev_bus"; ls -l /sys/class/mdev_bus
        echo "# readlink -f /sys/class/mdev_bus/mtty"; readlink -f /sys/class/mdev_bus/mtty
        echo "# ls -l /sys/devices/virtual/mtty/mtty"; ls -l /sys/devices/virtual/mtty/mtty
        echo "# ls -l /sys/devices/virtual/mtty/mtty/mdev_supported_types/mtty-2"
        ls -l /sys/devices/virtual/mtty/mtty/mdev_supported_types/mtty-2
        echo "# ls /sys/bus/pci/devices/*/mdev_supported_types"
        ls -d /sys/bus/pci/devices/*/mdev_supported_types 2>&1
    } > "$R/mtty-sysfs.txt" 2>&1
    fact mtty_parent "$(readlink -f /sys/class/mdev_bus/mtty)"
    MU=83b8f4f2-509f-382f-3c1e-e6bfe0fa1001
    hook_xml mdev.xml avvm-mdev 6b1d0c4e-0000-4000-8000-000000000003 \
        "<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='$MU'/></source></hostdev>" \
        "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement><av:mdev profile='rig-mtty' uuid='$MU'/></av:placement></av:accelerators></metadata>"
    hook_run mdev-prepare mdev.xml avvm-mdev prepare begin
    fact hook_mdev_prepare rc=$hrc "$(test -d /sys/bus/mdev/devices/$MU && echo present || echo absent)" \
        parent="$(basename "$(dirname "$(readlink -f /sys/bus/mdev/devices/$MU 2>/dev/null)")" 2>/dev/null)"
    hook_run mdev-release mdev.xml avvm-mdev release end
    hook_wait_settled status-poll-mdev.log
    fact hook_mdev_release rc=$hrc "$(test -d /sys/bus/mdev/devices/$MU && echo present || echo gone)"
    test -d /sys/bus/mdev/devices/$MU && echo 1 > /sys/bus/mdev/devices/$MU/remove

    chroot /host env ACCELVIRT_STATE_DIR=$HS/state "$A" journal verify > "$R/journal-verify-basic.txt" 2>&1
    fact hook_journal_verify rc=$?
    cp "/host$HS/state/journal.jsonl" "$R/journal-basic.jsonl" 2>/dev/null
    scrub_tests
    idchange_tests
    reboot_tests
    umount /host/run/results
}

# --- f. the scrub steps on the real kernel, in a state dir of their own (HSD) with the
# policies of scrub-policies/ (40-scrub.json: scrub-zero = vfio-zero + reset for the
# node-1 ivshmem, scrub-rom = rom-check for the node-0 ivshmem, which has an option ROM
# (test-vm.sh: romfile=), scrub-fail = a failing command for the node-0 edu) before
# 50-rig.json. Facts: scrub_*; the state and policies go to the results share
# (rom-state/, rom-policies/) for boot 2, which has another ROM on the node-0 ivshmem.
scrub_tests() {
    HSD=/run/av-scrub
    mkdir -p "/host$HSD/state" "/host$HSD/policies"
    cp "/host$HS/policies/50-rig.json" "$R/scrub-policies/40-scrub.json" "/host$HSD/policies/"
    chmod 755 "/host$HSD" "/host$HSD/policies"
    chmod 644 "/host$HSD"/policies/*.json
    RM=0000:41:00.0
    r2=/sys/bus/pci/devices/$IV/resource2
    # what the host wrote into the node-1 ivshmem, still there after the command scrub
    fact scrub_bar2_before "$IV" drv="$(hook_drv $IV)" nonzero="$(zero-bar sum $r2)" \
        head="$(zero-bar head $r2 16)"
    # the node-0 ivshmem's option ROM as the kernel reads it
    rom=/sys/bus/pci/devices/$RM/rom
    echo 1 > "$rom" 2>/dev/null
    fact scrub_rom_guest "$RM" bytes="$(wc -c < "$rom" 2>/dev/null)" \
        sha256="$(sha256sum < "$rom" 2>/dev/null | cut -d' ' -f1)"
    echo 0 > "$rom" 2>/dev/null
    av_cli enroll $RM > "$R/scrub-enroll.out" 2>&1
    fact scrub_enroll rc=$? "$(tr '\n' ' ' < "$R/scrub-enroll.out")"
    av_status > "$R/status-scrub-0-enrolled.json"
    hook_xml scrub.xml avvm-scrub 6b1d0c4e-0000-4000-8000-000000000004 \
        "$(pci_hostdev 81 00) $(pci_hostdev 41 00) $(pci_hostdev 42 00)"
    hook_run scrub-prepare scrub.xml avvm-scrub prepare begin
    fact scrub_prepare rc=$hrc "$IV=$(hook_drv $IV)" "$RM=$(hook_drv $RM)" "$ED=$(hook_drv $ED)"
    hook_run scrub-release scrub.xml avvm-scrub release end
    fact scrub_release rc=$hrc
    if hook_wait_settled status-poll-scrub.log; then w=settled; else w=timeout; fi
    av_status > "$R/status-scrub-1-after.json"
    fact scrub_after_worker "$w" "$IV=$(hook_drv $IV)" "$RM=$(hook_drv $RM)" "$ED=$(hook_drv $ED)"
    fact scrub_bar2_after "$IV" nonzero="$(zero-bar sum $r2)"
    av_cli quarantine list > "$R/scrub-quarantine-list.out" 2>&1
    fact scrub_quarantine_list rc=$?
    # a quarantined device is refused by the next prepare
    hook_xml scrub2.xml avvm-scrub2 6b1d0c4e-0000-4000-8000-000000000005 "$(pci_hostdev 42 00)"
    hook_run scrub2-prepare scrub2.xml avvm-scrub2 prepare begin
    fact scrub_refused rc=$hrc lines="$(wc -l < "$R/hook-scrub2-prepare.err")" "$ED=$(hook_drv $ED)"
    hook_run scrub2-release scrub2.xml avvm-scrub2 release end
    av_cli journal verify > "$R/journal-verify-scrub.txt" 2>&1
    fact scrub_journal_verify rc=$?
    cp "/host$HSD/state/journal.jsonl" "$R/journal-scrub.jsonl" 2>/dev/null
    # for boot 2 (rom swap): this pool, and its policies with the scrub program's path
    # turned back into @SCRUB@ (this boot's $HS/scrub.sh does not exist in boot 2, and
    # accelvirt refuses a policy whose scrub program is missing)
    mkdir -p "$R/rom-state" "$R/rom-policies"
    cp -a "/host$HSD/state/." "$R/rom-state/"
    for p in "/host$HSD/policies/"*.json; do
        sed "s|$HS/scrub.sh|@SCRUB@|g" "$p" > "$R/rom-policies/$(basename "$p")"
    done
    HSD=
}

# --- h. devices given out when the host goes down, for boot 2, where their identity
# has changed (issue 10, hole 2). In a state dir of its own (HSD) with id-policies/
# (rig-nic: the e1000e at 0000:44:00.0, scrubbed by a command and a reset, which needs
# vfio-pci; rig-nic-cmd: the e1000e at 0000:45:00.0, by the command only; QEMU derives
# their PCIe DSN from their MACs): prepare of avvm-idchg binds both to vfio-pci and
# puts them in use, then this guest powers off without a release, as a host that
# crashes with a domain running. The state dir and the policies (@SCRUB@ again) go to
# the results share (id-state/, id-policies-carried/); boot 2 has other MACs on them,
# so other serials at the same addresses. Facts: id_*.
idchange_tests() {
    HSD=/run/av-id
    mkdir -p "/host$HSD/state" "/host$HSD/policies"
    for p in "$R"/id-policies/*.json; do
        sed "s|@SCRUB@|$HS/scrub.sh|g" "$p" > "/host$HSD/policies/$(basename "$p")"
    done
    chmod 755 "/host$HSD" "/host$HSD/policies"
    chmod 644 "/host$HSD"/policies/*.json
    for a in 0000:44:00.0 0000:45:00.0; do
        fact id_before "$a" "$(sysrd /sys/bus/pci/devices/$a/vendor):$(sysrd /sys/bus/pci/devices/$a/device)" \
            driver="$(hook_drv $a)" group="$(ls "/sys/kernel/iommu_groups/$(grp_of $a)/devices" | tr '\n' ' ')" \
            dsn="$(od -A n -t x1 -j 320 -N 12 /sys/bus/pci/devices/$a/config | tr -s ' ')"
    done
    av_status > "$R/status-id-0-before.json"
    hook_xml id.xml avvm-idchg 6b1d0c4e-0000-4000-8000-000000000007 "$(pci_hostdev 44 00) $(pci_hostdev 45 00)"
    hook_run id-prepare id.xml avvm-idchg prepare begin
    fact id_prepare rc=$hrc 0000:44:00.0="$(hook_drv 0000:44:00.0)" 0000:45:00.0="$(hook_drv 0000:45:00.0)"
    av_status > "$R/status-id-1-in-use.json"
    mkdir -p "$R/id-state" "$R/id-policies-carried"
    cp -a "/host$HSD/state/." "$R/id-state/"
    for p in "/host$HSD/policies/"*.json; do
        sed "s|$HS/scrub.sh|@SCRUB@|g" "$p" > "$R/id-policies-carried/$(basename "$p")"
    done
    HSD=
}

# --- i. a device in use when the host goes down, for boot 2's reconcile at boot (issue
# 17). In a state dir of its own (HSD) with reboot-policies/ (rig-reboot: the node-1
# edu at 0000:84:00.0, scrubbed by a command step; rig-reboot-vfs: "vfs": 2 on the
# nvme PF at 0000:83:00.0): prepare of avvm-reboot binds the edu to vfio-pci and puts
# it in use (the pool records this boot's id with it), then this guest powers off
# without a release. The state dir and the policies (@SCRUB@ again) go to the results
# share (reboot-state/, reboot-policies-carried/), the host's disk, which test-vm.sh
# carries to boot 2. Facts: reboot_*.
reboot_tests() {
    HSD=/run/av-reboot
    RB=0000:84:00.0
    mkdir -p "/host$HSD/state" "/host$HSD/policies"
    for p in "$R"/reboot-policies/*.json; do
        sed "s|@SCRUB@|$HS/scrub.sh|g" "$p" > "/host$HSD/policies/$(basename "$p")"
    done
    chmod 755 "/host$HSD" "/host$HSD/policies"
    chmod 644 "/host$HSD"/policies/*.json
    fact reboot_before "$RB" driver="$(hook_drv $RB)" numvfs="$(sysrd /sys/bus/pci/devices/0000:83:00.0/sriov_numvfs)" \
        boot_id="$(sysrd /proc/sys/kernel/random/boot_id)"
    hook_xml reboot.xml avvm-reboot 6b1d0c4e-0000-4000-8000-000000000017 "$(pci_hostdev 84 00)"
    hook_run reboot-prepare reboot.xml avvm-reboot prepare begin
    fact reboot_prepare rc=$hrc driver="$(hook_drv $RB)"
    av_status > "$R/status-reboot-1-in-use.json"
    mkdir -p "$R/reboot-state" "$R/reboot-policies-carried"
    cp -a "/host$HSD/state/." "$R/reboot-state/"
    for p in "/host$HSD/policies/"*.json; do
        sed "s|$HS/scrub.sh|@SCRUB@|g" "$p" > "$R/reboot-policies-carried/$(basename "$p")"
    done
    HSD=
}

# --- g. bench-zero --device on a real vfio-pci BAR: BAR2 of the node-1 ivshmem (QEMU
# RAM, AV_VM_SHM_MB), bound to vfio-pci as in a. (driver_override, drivers_probe), then
# unbound with driver_override cleared, as in a. bench-zero, the build tree's (next to
# $A; check-vm builds it), runs chrooted into the host root like $A, and leaves BAR2 all
# zero: the host's pattern (test-vm.sh's AVPATTERN-PID-, read back from BAR2 first) is
# written back with zero-bar, so that the hook and scrub tests after it find the device
# as before. Output: results/bench-zero.txt. Facts: bench_zero*.
bench_tests() {
    BZ=$(dirname "$A")/bench/bench-zero
    if test -z "$shm1" || ! test -x "/host$BZ"; then
        fact bench_zero missing bench="$BZ" device="${shm1:-none}"
        return
    fi
    d=/sys/bus/pci/devices/$shm1
    r2=$d/resource2
    pat=$(zero-bar head "$r2" 64 | sed -n 's/^\(AVPATTERN-[0-9]*-\).*/\1/p')
    if test -z "$pat"; then
        fact bench_zero nopattern device="$shm1" head="$(zero-bar head "$r2" 32)"
        return
    fi
    n0=$(zero-bar count "$r2" "$pat")
    drv0=$(hook_drv "$shm1") ovr0=$(sysrd "$d/driver_override")
    echo vfio-pci > "$d/driver_override"
    echo "$shm1" > /sys/bus/pci/drivers_probe
    drv=$(hook_drv "$shm1")
    t0=$(cut -d' ' -f1 /proc/uptime)
    # (its rounds take ~8 s; 60 s at most, should TCG crawl)
    chroot /host timeout 60 "$BZ" --device "$shm1" --region 2 > "$R/bench-zero.txt" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')
    echo "$shm1" > "$d/driver/unbind"
    echo > "$d/driver_override"
    nz=$(zero-bar sum "$r2")
    zero-bar fill "$r2" "$pat" > /dev/null
    fact bench_zero rc=$rc device="$shm1" driver="$drv" seconds="$secs"
    # driver and driver_override before -> after; BAR2's non-zero bytes as the bench left
    # it; the pattern's count before -> after it was written back; non-zero bytes now
    fact bench_zero_restored driver="$drv0->$(hook_drv "$shm1")" \
        override="$ovr0->$(sysrd "$d/driver_override")" bench_left="$nz" \
        pattern="$n0->$(zero-bar count "$r2" "$pat")" nonzero="$(zero-bar sum "$r2")"
}

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
    # the bridged one shares its group with the pcie-pci-bridge (class 0x0604); the
    # multi-function slot's ivshmem (0000:43:00.0) shares its own with an e1000e only
    if test "$n" -gt 1; then
        for m in $(ls "/sys/kernel/iommu_groups/$g/devices"); do
            case "$(sysrd "/sys/bus/pci/devices/$m/class")" in 0x0604*) shmbr=$a ;; esac
        done
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
    # iommufd: the device's vfio class device (sysfs vfio-dev/vfioN, kernel 6.2+, with or
    # without iommufd); its cdev /dev/vfio/devices/vfioN beside the group file and
    # /dev/iommu only with CONFIG_VFIO_DEVICE_CDEV and CONFIG_IOMMUFD
    fact vfio_cdev "$shm1" kernel="$(uname -r)" vfio_dev="$(ls "$d/vfio-dev" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')" \
        cdevs="$(ls /dev/vfio/devices 2>/dev/null | wc -l)" dev_iommu="$(test -c /dev/iommu && echo yes || echo no)"
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
    # --- g. bench-zero on BAR2 of the node-1 ivshmem through vfio-pci ---
    bench_tests
    # --- e. the hook itself (accelvirt-hook of the host tree) on this kernel ---
    hook_tests
    umount /host/run /host/dev /host/sys /host/proc
fi
exit 0
