#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: host-validate on the fake hosts.  A generated host as it
# comes (no vfio backend module, no hook, no daemon) fails where a domain's
# start would; the same host made ready (the modules, the hook, virtqemud,
# remapped interrupts, the units, hugepages, ACS on the ports) passes every
# check; then each check is broken alone and says so in one line with what
# to do.  It never changes the host, the pool or the policy dir.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TMP/policies"
H="$AV_TMP/host"
S="$AV_TMP/state"
mkdir -p "$POL" && cp "$AV_TEST_SRCDIR/../policies/"*.json "$POL/" && chmod 0755 "$POL" && chmod 0644 "$POL"/*.json
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$H"

hv() { "$AV" --root "$H" --policy-dir "$POL" --state-dir "$S" host-validate "$@"; }
# line CHECK RESULT: host-validate prints RESULT for CHECK
line() { grep -q "^$2  $1 " "$AV_TMP/hv.out" || { cat "$AV_TMP/hv.out"; return 1; }; }
run() { hv >"$AV_TMP/hv.out" 2>&1; echo $? >"$AV_TMP/hv.rc"; }
rc() { [ "$(cat "$AV_TMP/hv.rc")" = "$1" ] || { echo "exit $(cat "$AV_TMP/hv.rc"), want $1"; cat "$AV_TMP/hv.out"; return 1; }; }

tree_sum() { (cd "$AV_TMP" && find host policies -exec stat -c '%n %a %s %Y' {} + | sort | sha256sum); }

# --- the host as generated ---
before=$(tree_sum)
run
check "as generated: exit 1" rc 1
check "  the IOMMU is on (the tree's groups)" line iommu PASS
check "  vfio: vfio-pci without a backend fails" eval "line vfio FAIL && grep -q 'modprobe vfio_iommu_type1' '$AV_TMP/hv.out'"
check "  no hook where libvirt looks: FAIL, saying how to install it" eval "line hook FAIL && grep -q '/etc/libvirt/hooks/qemu.d/accelvirt' '$AV_TMP/hv.out'"
check "  no daemon: WARN" line libvirt WARN
check "  the units not enabled: WARN with systemctl enable" eval "line units WARN && grep -q 'systemctl enable --now accelvirt-reconcile.timer' '$AV_TMP/hv.out'"
check "  the last line counts them" eval "tail -1 '$AV_TMP/hv.out' | grep -qE '^[0-9]+ passed, [0-9]+ warnings, [1-9][0-9]* failed\.\$'"
check "  --json: each check with its result, the counts" eval "hv --json >'$AV_TMP/hv.json'; [ \$? = 1 ] && python3 -c \"
import json; d = json.load(open('$AV_TMP/hv.json'))
ids = {c['check'] for c in d['checks']}
assert {'iommu', 'interrupt-remapping', 'vfio', 'hook', 'libvirt', 'policy', 'state', 'units', 'hugepages', 'acs', 'groups'} <= ids, ids
assert d['fail'] == sum(c['result'] == 'FAIL' for c in d['checks']) >= 2
assert all('advice' in c for c in d['checks'] if c['result'] != 'PASS')
\""
check "  nothing under the root or the policy dir changed, no state dir made" eval "[ '$before' = \"\$(tree_sum)\" ] && [ ! -e '$S' ]"

# --- made ready ---
mkdir -p "$H/sys/module/vfio" "$H/sys/module/vfio_iommu_type1/parameters" "$H/etc/libvirt/hooks/qemu.d" \
    "$H/run" "$H/proc/4242" "$H/etc/systemd/system/timers.target.wants" "$H/etc/systemd/system/multi-user.target.wants"
echo N >"$H/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"
printf '#!/bin/sh\nexit 0\n' >"$H/etc/libvirt/hooks/qemu.d/accelvirt"
chmod 0755 "$H/etc/libvirt/hooks/qemu.d/accelvirt"
touch -d '2026-01-01 00:00:00' "$H/etc/libvirt/hooks/qemu.d/accelvirt"
echo 4242 >"$H/run/virtqemud.pid"
# the daemon started after the hook was installed (this tree has no
# /proc/4242/stat: the pid file's time says when)
touch -d 'now + 1 hour' "$H/run/virtqemud.pid"
echo virtqemud >"$H/proc/4242/comm"
printf '           CPU0\n 24:          0   IR-PCI-MSI 1048576-edge      nvme0q0\n' >"$H/proc/interrupts"
mkdir -p "$H/lib/systemd/system" && touch "$H/lib/systemd/system/accelvirt-reconcile.timer" "$H/lib/systemd/system/accelvirt-watch.service"
ln -s /lib/systemd/system/accelvirt-reconcile.timer "$H/etc/systemd/system/timers.target.wants/accelvirt-reconcile.timer"
ln -s /lib/systemd/system/accelvirt-watch.service "$H/etc/systemd/system/multi-user.target.wants/accelvirt-watch.service"
for n in 0 1; do
    mkdir -p "$H/sys/devices/system/node/node$n/hugepages/hugepages-1048576kB"
    echo 16 >"$H/sys/devices/system/node/node$n/hugepages/hugepages-1048576kB/nr_hugepages"
done
# A 4 KiB configuration space for a bridge: a PCI Express capability at
# 0x40 saying its port type ($4, default 6: downstream port) and ACS
# (extended capability 0x000d at 0x100) with capability word $3 (default
# 0x5f) and control word $2.
acs_config() {
    python3 -c "
import struct, sys
c = bytearray(open(sys.argv[1], 'rb').read()[:256].ljust(4096, b'\0'))
c[0x06] |= 0x10
c[0x34] = 0x40
struct.pack_into('<BBH', c, 0x40, 0x10, 0x00, 0x0002 | int(sys.argv[4]) << 4)
struct.pack_into('<IHH', c, 0x100, 0x0001000d, int(sys.argv[3], 0), int(sys.argv[2], 0))
open(sys.argv[1], 'wb').write(bytes(c))" "$1" "$2" "${3:-0x5f}" "${4:-6}"
}
bridges=$(hv --json | python3 -c "import json,sys,re; d=json.load(sys.stdin); print(' '.join(re.findall(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]', [c for c in d['checks'] if c['check']=='acs'][0]['detail'])))")
for b in $bridges; do acs_config "$H/sys/bus/pci/devices/$b/config" 0x1d; done
run
check "made ready ($(echo $bridges | wc -w) ports given ACS): every check passes, exit 0" eval "rc 0 && ! grep -qE '^(WARN|FAIL)' '$AV_TMP/hv.out' && grep -q ' 0 warnings, 0 failed' '$AV_TMP/hv.out'"
check "  virtqemud named with its pid" eval "line libvirt PASS && grep -q 'virtqemud (the modular daemons) runs (pid 4242)' '$AV_TMP/hv.out'"
check "  the groups of the 8 managed GPUs viable" eval "grep -q 'each managed device (8) can be handed' '$AV_TMP/hv.out'"

# --- each check broken alone ---
broken() { # NAME CHECK RESULT WANT-TEXT BREAK UNDO
    eval "$5"; run; check "$1" eval "line $2 $3 && grep -q -- \"$4\" '$AV_TMP/hv.out'"; eval "$6"
}
broken "hook installed after the daemon started: WARN, restart it" libvirt WARN "restart it" \
    "touch -d '2026-01-01' '$H/run/virtqemud.pid'" "touch -d 'now + 1 hour' '$H/run/virtqemud.pid'"
broken "hook not executable: FAIL" hook FAIL "not executable" \
    "chmod 0644 '$H/etc/libvirt/hooks/qemu.d/accelvirt'" "chmod 0755 '$H/etc/libvirt/hooks/qemu.d/accelvirt'"
broken "hook writable by others: FAIL" hook FAIL "writable by others" \
    "chmod 0757 '$H/etc/libvirt/hooks/qemu.d/accelvirt'" "chmod 0755 '$H/etc/libvirt/hooks/qemu.d/accelvirt'"
broken "another hook beside it: WARN" hook WARN "/etc/libvirt/hooks/qemu, runs beside it" \
    "touch '$H/etc/libvirt/hooks/qemu'" "rm '$H/etc/libvirt/hooks/qemu'"
broken "qemu.d writable by others: FAIL, naming it" hook FAIL "/etc/libvirt/hooks/qemu.d is not root's alone" \
    "chmod 0777 '$H/etc/libvirt/hooks/qemu.d'" "chmod 0755 '$H/etc/libvirt/hooks/qemu.d'"
broken "a directory above the hook not root's: FAIL, naming it" hook FAIL "/etc/libvirt is not root's alone" \
    "chown 1000 '$H/etc/libvirt'" "chown 0 '$H/etc/libvirt'"
broken "another hook in qemu.d: WARN, naming it" hook WARN "another hook, /etc/libvirt/hooks/qemu.d/50-other, runs beside it" \
    "cp -p '$H/etc/libvirt/hooks/qemu.d/accelvirt' '$H/etc/libvirt/hooks/qemu.d/50-other'" "rm '$H/etc/libvirt/hooks/qemu.d/50-other'"
broken "a pid file of a dead daemon: WARN" libvirt WARN "no libvirt daemon runs" \
    "echo 4243 >'$H/run/virtqemud.pid'" "echo 4242 >'$H/run/virtqemud.pid'"
broken "libvirtd instead: PASS, named" libvirt PASS "libvirtd (the monolithic daemon) runs" \
    "mv '$H/run/virtqemud.pid' '$H/run/libvirtd.pid'; echo libvirtd >'$H/proc/4242/comm'" \
    "mv '$H/run/libvirtd.pid' '$H/run/virtqemud.pid'; echo virtqemud >'$H/proc/4242/comm'"
broken "no IOMMU group: FAIL, saying to turn it on" iommu FAIL "intel_iommu=on" \
    "mv '$H/sys/kernel/iommu_groups' '$AV_TMP/groups'; mkdir '$H/sys/kernel/iommu_groups'" \
    "rmdir '$H/sys/kernel/iommu_groups'; mv '$AV_TMP/groups' '$H/sys/kernel/iommu_groups'"
broken "unsafe interrupts allowed: WARN" interrupt-remapping WARN "allow_unsafe_interrupts=1" \
    "echo Y >'$H/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts'" \
    "echo N >'$H/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts'"
broken "no interrupt remapped, with managed GPUs: FAIL" interrupt-remapping FAIL "no IR- in /proc/interrupts" \
    "sed -i 's/IR-PCI-MSI/PCI-MSI/' '$H/proc/interrupts'" "sed -i 's/ PCI-MSI/ IR-PCI-MSI/' '$H/proc/interrupts'"
broken "vfio-pci not loaded, managed GPUs need it: FAIL" vfio FAIL "modprobe vfio-pci" \
    "mv '$H/sys/bus/pci/drivers/vfio-pci' '$AV_TMP/vfio-pci'" "mv '$AV_TMP/vfio-pci' '$H/sys/bus/pci/drivers/vfio-pci'"
broken "iommufd alone is a backend too" vfio PASS "iommufd (/dev/iommu)" \
    "mv '$H/sys/module/vfio_iommu_type1' '$AV_TMP/type1'; touch '$H/dev/iommu'" \
    "rm '$H/dev/iommu'; mv '$AV_TMP/type1' '$H/sys/module/vfio_iommu_type1'"
broken "a policy dir others may write: FAIL" policy FAIL "policy check" "chmod 0777 '$POL'" "chmod 0755 '$POL'"
broken "an empty policy dir: WARN" policy WARN "manages no device" \
    "mkdir '$AV_TMP/p2' && mv '$POL'/*.json '$AV_TMP/p2/'" "mv '$AV_TMP/p2'/*.json '$POL/' && rmdir '$AV_TMP/p2'"
broken "a state dir others may write: FAIL" state FAIL "writable by others" "mkdir -m 0777 '$S'" "rmdir '$S'"
broken "a corrupt pool: FAIL" state FAIL "cannot be read" \
    "mkdir -m 0700 '$S' && echo '{' >'$S/pool.json'" "rm -r '$S'"
broken "the timer not enabled: WARN" units WARN "enable --now accelvirt-reconcile.timer" \
    "rm '$H/etc/systemd/system/timers.target.wants/accelvirt-reconcile.timer'" \
    "ln -s /lib/systemd/system/accelvirt-reconcile.timer '$H/etc/systemd/system/timers.target.wants/'"
broken "no hugepages on node 1: WARN naming it" hugepages WARN "NUMA node 1, where" \
    "echo 0 >'$H/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages'" \
    "echo 16 >'$H/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages'"
first=$(echo $bridges | cut -d' ' -f1)
broken "a port above a GPU with ACS but without redirect: WARN naming it" acs WARN "$first" \
    "acs_config '$H/sys/bus/pci/devices/$first/config' 0x01" "acs_config '$H/sys/bus/pci/devices/$first/config' 0x1d"
broken "a port that implements only Source Validation, and has it on: it isolates as far as it can (PASS)" acs PASS "isolates it" \
    "acs_config '$H/sys/bus/pci/devices/$first/config' 0x01 0x01" "acs_config '$H/sys/bus/pci/devices/$first/config' 0x1d"
broken "an upstream switch port without ACS is not asked for it (PASS)" acs PASS "isolates it" \
    "acs_config '$H/sys/bus/pci/devices/$first/config' 0x00 0x00 5" "acs_config '$H/sys/bus/pci/devices/$first/config' 0x1d"
broken "vfio in no-IOMMU mode: FAIL, its groups isolate nothing" iommu FAIL "no-IOMMU mode" \
    "mkdir -p '$H/sys/module/vfio/parameters' && echo Y >'$H/sys/module/vfio/parameters/enable_unsafe_noiommu_mode'" \
    "echo N >'$H/sys/module/vfio/parameters/enable_unsafe_noiommu_mode'"
run
check "all put back: passes again" rc 0

cp -a "$AV_TEST_HOSTS/trap-shared-group" "$AV_TMP/trap"
check "a managed device whose group holds a host function: FAIL groups" eval "
    \"$AV\" --root '$AV_TMP/trap' --policy-dir '$POL' --state-dir '$S' host-validate >'$AV_TMP/hv.out'; [ \$? = 1 ] && line groups FAIL"
finish
