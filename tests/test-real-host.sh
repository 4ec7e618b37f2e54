#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: a sysfs tree copied from a real host reads the same as the
# host itself.  The copy is made now, from this machine's own /sys (read only),
# by tests/data/capture-host.sh, relative links and all.  Then a copy committed from a
# real kernel (the VM rig's guest) against its golden file.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"

check "capture-host.sh copies this machine's /sys (read only)" \
    sh "$AV_TEST_SRCDIR/data/capture-host.sh" / "$AV_TMP/copy"
check "accelvirt list --json reads this host" \
    eval "'$AV' --root / --policy-dir '$POL' list --json >'$AV_TMP/live.json'"
check "accelvirt list --json reads the copy" \
    eval "'$AV' --root '$AV_TMP/copy' --policy-dir '$POL' list --json >'$AV_TMP/copy.json'"
check "both say the same, device for device" diff -u "$AV_TMP/live.json" "$AV_TMP/copy.json"
check "the host has PCI devices (the comparison is not empty)" json "$AV_TMP/live.json" "len(d['pci']) > 0"
check "the copy is self-contained: no link in it points outside it" \
    eval "! find '$AV_TMP/copy' -type l -lname '/*' | grep -q ."

# --- a copy of a real kernel's sysfs, committed: the VM rig's guest -----------------
# tests/data/captured/qemu-q35-viommu.tar.xz is what capture-host.sh copied in the VM
# rig's guest (tests/vm/make-fixture.sh): Debian's 6.1 kernel on q35 with an emulated
# Intel IOMMU, 2 NUMA nodes, ivshmem behind pxb-pcie on each node, and a third ivshmem
# behind a pcie-pci-bridge, in one IOMMU group with the bridge. The policy matches ivshmem.
Q=$AV_TMP/qemu-q35-viommu
QJ=$AV_TMP/qemu-q35-viommu.json
QPOL="$AV_TEST_SRCDIR/vm/demo-policies"
mkdir -p "$Q"
check "the captured guest tree unpacks (tests/data/captured/qemu-q35-viommu.tar.xz)" \
    eval "xz -dc '$AV_TEST_SRCDIR/data/captured/qemu-q35-viommu.tar.xz' | tar -xf - -C '$Q'"
check "list --json on the captured guest matches tests/data/expected/qemu-q35-viommu.list.json" \
    eval "'$AV' --root '$Q' --policy-dir '$QPOL' --state-dir '$AV_TMP/qstate' list --json >'$QJ' && mask_names '$QJ' && golden qemu-q35-viommu.list.json '$QJ'"
check "the captured guest has 2 NUMA nodes, one CPU each, and the IOMMU on" json "$QJ" \
    "[(n['id'], n['cpulist']) for n in d['numa_nodes']] == [(0, '0'), (1, '1')] and d['iommu_enabled'] is True"
shm="[p for p in d['pci'] if (p['vendor_id'], p['device_id']) == ('0x1af4', '0x1110')]"
check "three ivshmems (1af4:1110), all matched by the ivshmem profile" json "$QJ" \
    "len($shm) == 3 and all(p['profile'] == 'ivshmem' for p in $shm)"
check "the ivshmems behind pxb-pcie are on nodes 0 and 1, each alone in its IOMMU group" json "$QJ" \
    "sorted((p['address'], p['numa_node'], p['iommu_group']['members']) for p in $shm if p['numa_node'] >= 0) == [('0000:41:00.0', 0, ['0000:41:00.0']), ('0000:81:00.0', 1, ['0000:81:00.0'])]"
check "the ivshmem behind the pcie-pci-bridge shares its IOMMU group with the bridge (0x060400) and the edu" json "$QJ" \
    "[(p['address'], sorted((q['address'], q['class']) for q in d['pci'] if q['address'] in p['iommu_group']['members'])) for p in $shm if p['numa_node'] < 0] == [('0000:02:01.0', [('0000:01:00.0', '0x060400'), ('0000:02:01.0', '0x050000'), ('0000:02:02.0', '0x00ff00')])]"
check "accelvirt says the bridged ivshmem cannot be given to a guest (the bridge's group is not viable), the other two can" json "$QJ" \
    "sorted((p['address'], p['passthrough']['possible']) for p in $shm) == [('0000:02:01.0', False), ('0000:41:00.0', True), ('0000:81:00.0', True)] and all(w in [p for p in $shm if p['address'] == '0000:02:01.0'][0]['passthrough']['reason'] for w in (\"'0000:01:00.0'\", 'not viable'))"
check "list --managed on the captured guest shows the three ivshmems only" \
    eval "'$AV' --root '$Q' --policy-dir '$QPOL' --state-dir '$AV_TMP/qstate' list --managed --json >'$AV_TMP/qm.json' && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(sorted(p[\"address\"] for p in d[\"pci\"]) != [\"0000:02:01.0\", \"0000:41:00.0\", \"0000:81:00.0\"])' '$AV_TMP/qm.json'"
finish
