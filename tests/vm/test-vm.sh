#!/bin/sh
# The VM rig's tests (TAP). Two boots of the guest (run-vm.sh), on a real Linux kernel
# (emulated Intel IOMMU, 2 NUMA nodes, pxb-pcie, ivshmem, edu, pcie-pci-bridge, mtty):
#   1. scenario-basic.sh on the busybox initramfs (~10 s): tests 1-23
#   2. scenario-e2e.sh on the host's userland under an overlay, busybox init, virtlogd
#      and libvirtd, a nested TCG domain with a vfio hostdev (~25 s): tests 24-30
# Every check is made here, from outside, on what the guest recorded in the results
# share and on the ivshmem backing files.
#
# Env: AV_VM_CACHE (build.sh's cache, default ./tests/vm/cache),
#      AV_VM_RUN   (the run dir, default ./tests/vm/run; emptied first),
#      ACCELVIRT   (the accelvirt binary, run inside the guest from the host root
#                   shared read-only over 9p; default ./accelvirt)
# A missing requirement is a failure (never a skip).
set -u

here=$(cd "$(dirname "$0")" && pwd)
AV_VM_CACHE=${AV_VM_CACHE:-tests/vm/cache}; export AV_VM_CACHE
run=${AV_VM_RUN:-tests/vm/run}
accelvirt=${ACCELVIRT:-$(pwd)/accelvirt}
case "$accelvirt" in /*) ;; *) accelvirt=$(pwd)/$accelvirt ;; esac

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
check() {  # check DESCRIPTION COMMAND...
    d=$1; shift
    if "$@" >/dev/null 2>&1; then ok "$d"; else notok "$d" "failed: $*"; fi
}
fact() { sed -n "s/^$1 //p" "$run/results/facts" 2>/dev/null | head -n1; }
bail() { echo "Bail out! $*"; exit 1; }

echo "1..30"
command -v python3 >/dev/null 2>&1 || bail "missing python3: run tests/vm/install-deps.sh (as root)"

# --- build (cached) and boot once ---
t0=$(date +%s)
mkdir -p "$AV_VM_CACHE"
if ! cache=$(sh "$here/build.sh" "$AV_VM_CACHE" 2>"$AV_VM_CACHE/build.log"); then
    sed 's/^/# /' "$AV_VM_CACHE/build.log"
    bail "tests/vm/build.sh failed (missing packages? run tests/vm/install-deps.sh as root)"
fi
t1=$(date +%s)
echo "# build (cached when unchanged): $((t1 - t0)) s, cache $cache"
AV_VM_CACHE=$cache

rm -rf "$run"
mkdir -p "$run/results"
run=$(cd "$run" && pwd)
shm_mb=${AV_VM_SHM_MB:-1}
size=$((shm_mb * 1024 * 1024))
pattern="AVPATTERN-$$-"
for i in 0 1; do
    yes "$pattern" | tr -d '\n' | head -c "$size" > "$run/ivshmem$i"
done
cp "$here/scenario-basic.sh" "$run/results/scenario.sh"
cp "$here/../data/capture-host.sh" "$run/results/capture-host.sh"
echo "ACCELVIRT=$accelvirt" > "$run/results/env"

AV_VM_QUIET=1 sh "$here/run-vm.sh" "$run" 2>"$run/run-vm.err"
qrc=$?
secs=$(cat "$run/boot-seconds" 2>/dev/null || echo '?')
echo "# boot to poweroff: $secs s (QEMU exit $qrc)"
if test "$qrc" -eq 0 && grep -q '^AVVM-POWEROFF' "$run/console.log" &&
   test "$(cat "$run/results/scenario.rc" 2>/dev/null)" = 0; then
    ok "the guest booted, ran the scenario and powered off ($secs s)"
else
    notok "the guest booted, ran the scenario and powered off" "QEMU exit $qrc" \
        "$(cat "$run/run-vm.err")" "console tail:" \
        "$(tail -n 15 "$run/console.log" 2>/dev/null | tr '\n' '|')"
fi

# --- a. IOMMU groups, NUMA, pcie-pci-bridge, vfio-pci, mdev ---
g=$(fact iommu_groups)
check "the guest kernel has IOMMU groups ($g)" test "${g:-0}" -gt 0
nn=$(fact numa_nodes)
check "the guest has 2 NUMA nodes ($nn)" test "${nn:-0}" = 2

s0=$(fact ivshmem_node0); s1=$(fact ivshmem_node1); sb=$(fact ivshmem_bridged)
pci_line() { grep "^pci $1 " "$run/results/facts" 2>/dev/null; }
check "an ivshmem behind pxb-pcie reports numa_node 0, in its own IOMMU group ($s0)" \
    sh -c "test '$s0' != none && test -n '$s0' && pci_l='$(pci_line "$s0")' && echo \"\$pci_l\" | grep -q ' numa=0 group=[0-9]'"
check "an ivshmem behind pxb-pcie reports numa_node 1, in its own IOMMU group ($s1)" \
    sh -c "test '$s1' != none && test -n '$s1' && pci_l='$(pci_line "$s1")' && echo \"\$pci_l\" | grep -q ' numa=1 group=[0-9]'"

edu=$(grep '^pci [^ ]* 0x1234:0x11e8 ' "$run/results/facts" | grep ' numa=0 ' | head -n1)
edu_grp=$(echo "$edu" | sed -n 's/.* group=\([0-9]*\).*/\1/p')
edu_members=$(sed -n "s/^group ${edu_grp:-x} //p" "$run/results/facts" | wc -w)
check "QEMU's edu device (a second kind) sits behind pxb-pcie on node 0, alone in its IOMMU group ($edu)" \
    test -n "$edu" -a "$edu_members" = 1

# the device behind the pcie-pci-bridge: its group also holds the bridge (0x060400)
# and the other device behind it, so it cannot be given to a domain alone
bridged_ok() {
    test -n "$sb" && test "$sb" != none || return 1
    grp=$(pci_line "$sb" | sed -n 's/.* group=\([0-9]*\).*/\1/p')
    members=$(sed -n "s/^group $grp //p" "$run/results/facts")
    test "$(echo "$members" | wc -w)" -ge 3 || return 1
    for m in $members; do
        pci_line "$m" | grep -q ' 0x060400 ' && return 0
    done
    return 1
}
check "the ivshmem behind the pcie-pci-bridge shares its IOMMU group with the bridge and another device ($sb: group $(sed -n "s/^group $(pci_line "$sb" | sed -n 's/.* group=\([0-9]*\).*/\1/p') //p" "$run/results/facts" 2>/dev/null))" bridged_ok

vb=$(fact vfio_bind)
check "the node-1 ivshmem binds to vfio-pci and its /dev/vfio/GROUP appears ($vb)" \
    sh -c "echo '$vb' | grep -q 'driver=vfio-pci group=[0-9]* dev=/dev/vfio/[0-9]'"
vu=$(fact vfio_unbind)
check "unbinding it from vfio-pci removes /dev/vfio/GROUP ($vu)" \
    sh -c "echo '$vu' | grep -q 'dev=gone'"

check "mtty.ko (built out of tree) loads in the guest" test "$(fact mtty_loaded)" = yes
check "mtty offers the mdev type mtty-2 ($(fact mdev_types))" \
    sh -c "echo ' $(fact mdev_types) ' | grep -q ' mtty-2 '"
mc=$(fact mdev_created)
check "an mtty-2 mdev is created with a UUID, bound to its driver with a /dev/vfio node ($mc)" \
    sh -c "echo '$mc' | grep -Eq '^[0-9a-f-]{36} present type=mtty-2 driver=[a-z_]+ dev=/dev/vfio/[0-9]'"
check "the mdev is removed again ($(fact mdev_removed))" \
    sh -c "echo '$(fact mdev_removed)' | grep -q ' gone$'"
check "available_instances goes down on create and back on remove ($(fact mdev_available_before) $(fact mdev_available_during) $(fact mdev_available_after))" \
    sh -c "test '$(fact mdev_available_before)' = '$(fact mdev_available_after)' && test '$(fact mdev_available_during)' -lt '$(fact mdev_available_before)'"

# --- b. memory written from the host, zeroed through BAR2 in the guest, checked from the host ---
hb=$(fact bar2_head_before)
check "the guest reads the host's pattern through the ivshmem's BAR2 ($hb)" \
    sh -c "echo '$hb' | grep -q '^$pattern'"
check "the guest zeroes BAR2 through sysfs resource2 ($(fact bar2_zero); non-zero after: $(fact bar2_nonzero_after))" \
    sh -c "echo '$(fact bar2_zero)' | grep -q 'zeroed $size bytes rc=0' && test '$(fact bar2_nonzero_after)' = 0"
nz=$(tr -d '\0' < "$run/ivshmem0" | wc -c)
check "from the host, the node-0 ivshmem's backing file is all zero ($nz non-zero bytes of $size)" \
    test "$nz" = 0 -a "$(stat -c %s "$run/ivshmem0")" = "$size"
check "from the host, the node-1 ivshmem's backing file (not scrubbed) still holds the pattern" \
    sh -c "head -c ${#pattern} '$run/ivshmem1' | grep -qx -- '$pattern' && test \$(tr -d '\\0' < '$run/ivshmem1' | wc -c) = $size"

# --- c. accelvirt list --json on the real kernel --------------------------------
# $ACCELVIRT (default ./accelvirt; check-vm builds it) runs in the guest, chrooted into
# the host's root shared read-only; its JSON (.pci[].address, .numa_node,
# .iommu_group.id/.members, .numa_nodes[]) must match what sysfs said.
av=$(fact accelvirt)
case "$av" in
    "ran rc=0") ok "accelvirt list --json ran inside the guest ($av)" ;;
    *) notok "accelvirt list --json ran inside the guest" \
           "accelvirt: $av (build the CLI first: make accelvirt; ACCELVIRT=$accelvirt)" \
           "$(cat "$run/results/accelvirt-list.err" 2>/dev/null)" ;;
esac
json_check() {  # json_check ADDR NODE GROUP MEMBERS: accelvirt's view equals sysfs's
    test -s "$run/results/accelvirt-list.json" ||
        { echo "accelvirt-list.json is missing or empty" >&2; return 1; }
    python3 - "$run/results/accelvirt-list.json" "$@" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
addr, node, group, members = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sorted(sys.argv[5].split())
if len(doc.get("numa_nodes", [])) != 2:
    sys.exit("numa_nodes: %r (want 2 nodes)" % doc.get("numa_nodes"))
for d in doc.get("pci", []):
    if d.get("address") == addr:
        g = d.get("iommu_group") or {}
        got = (d.get("numa_node"), g.get("id"), sorted(g.get("members", [])))
        if got == (node, group, members):
            sys.exit(0)
        sys.exit("%s: numa_node, iommu_group.id, members = %r, want %r" % (addr, got, (node, group, members)))
sys.exit("%s: not in .pci[]" % addr)
EOF
}
sysfs_of() {  # sysfs_of ADDR: sets nd, gr, mb as the guest's sysfs said
    l=$(pci_line "$1")
    nd=$(echo "$l" | sed -n 's/.* numa=\([-0-9]*\).*/\1/p')
    gr=$(echo "$l" | sed -n 's/.* group=\([0-9]*\).*/\1/p')
    mb=$(sed -n "s/^group $gr //p" "$run/results/facts")
}
for what in "$s0 the node-0 ivshmem" "$s1 the node-1 ivshmem" "$sb the ivshmem behind the pcie-pci-bridge"; do
    set -- $what
    a=$1; shift
    sysfs_of "$a"
    d="accelvirt list --json shows $* ($a) on NUMA node ${nd:-?} in IOMMU group ${gr:-?} of [${mb:-?}], as sysfs does"
    if test -n "$a" && test "$a" != none && json_check "$a" "${nd:-x}" "${gr:-x}" "$mb" 2>"$run/json.err"; then
        ok "$d"
    else
        notok "$d" "$(cat "$run/json.err")" "see $run/results/accelvirt-list.json"
    fi
done

# --- c2. a sysfs tree copied from a real kernel reads the same way --------------
# In the guest, tests/data/capture-host.sh copied the live /sys (and /proc/meminfo)
# into a tmpfs, run with the host's sh as on a real server, and accelvirt read the copy
# with --root, right after the live `list --json` (nothing changed in between).
lj=$run/results/accelvirt-list.json
cj=$run/results/accelvirt-list-capture.json
capture_same() {
    test "$(fact capture | cut -d' ' -f1)" = rc=0 ||
        { echo "capture-host.sh: $(fact capture)"; cat "$run/results/capture.err"; return 1; }
    test "$(fact accelvirt_capture)" = "ran rc=0" ||
        { echo "accelvirt --root COPY: $(fact accelvirt_capture)"; cat "$run/results/accelvirt-list-capture.err"; return 1; }
    python3 - "$lj" "$cj" <<'EOF' || return 1
import json, sys
live, copy = (json.load(open(p)) for p in sys.argv[1:3])
if not live.get("pci") or len(live.get("numa_nodes", [])) != 2:
    sys.exit("the live list is too thin to compare: %d PCI devices, %d NUMA nodes"
             % (len(live.get("pci", [])), len(live.get("numa_nodes", []))))
EOF
    diff -u "$lj" "$cj"
}
npci=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["pci"]))' "$lj" 2>/dev/null)
d="a tree copied from the guest's real sysfs by capture-host.sh reads the same: accelvirt --root COPY list --json equals the live list --json (${npci:-?} PCI devices; $(fact capture))"
if capture_same > "$run/capture-diff.txt" 2>&1; then
    ok "$d"
else
    notok "$d" "$(head -n 40 "$run/capture-diff.txt")" "the copy: $run/results/capture.tar"
fi

# --- d. end to end: libvirtd in the guest, a nested domain with a vfio hostdev ---
e2e=$run/e2e
mkdir -p "$e2e/results/hooks"
cp "$here/scenario-e2e.sh" "$e2e/results/scenario.sh"
# The qemu hook, installed before libvirtd starts (accelvirt's hook goes here later).
printf '%s\n' '#!/bin/sh' 'echo "$*" >> /avvm/results/hook.log' 'cat > /dev/null' \
    > "$e2e/results/hooks/qemu"
chmod 755 "$e2e/results/hooks/qemu"
# libvirt's QEMU capabilities, kept in the cache between runs (libvirtd answers
# ~20 s after start cold, a few seconds with them)
if test -d "$AV_VM_CACHE/libvirt-caps"; then
    cp -a "$AV_VM_CACHE/libvirt-caps" "$e2e/results/libvirt-caps"
fi
AV_VM_ROOT=overlay AV_VM_QUIET=1 sh "$here/run-vm.sh" "$e2e" 2>"$e2e/run-vm.err"
qrc=$?
secs=$(cat "$e2e/boot-seconds" 2>/dev/null || echo '?')
echo "# end-to-end boot to poweroff: $secs s (QEMU exit $qrc)"
if test -n "$(ls "$e2e/results/libvirt-caps.out" 2>/dev/null)"; then
    rm -rf "$AV_VM_CACHE/libvirt-caps"
    cp -a "$e2e/results/libvirt-caps.out" "$AV_VM_CACHE/libvirt-caps"
fi
efact() { sed -n "s/^$1 //p" "$e2e/results/facts" 2>/dev/null | head -n1; }
up_at() { sed -n "s/^AVVM-$1 uptime=//p" "$e2e/console.log" 2>/dev/null | head -n1; }
if test "$qrc" -eq 0 && grep -q '^AVVM-POWEROFF' "$e2e/console.log" &&
   test "$(cat "$e2e/results/scenario.rc" 2>/dev/null)" = 0 && test "$(efact pid1)" = busybox; then
    ok "end to end: the guest switched to the overlay root, busybox init as PID 1, and powered off ($secs s)"
else
    notok "end to end: the guest switched to the overlay root, busybox init as PID 1, and powered off" \
        "QEMU exit $qrc; pid1=$(efact pid1)" "$(cat "$e2e/run-vm.err")" "console tail:" \
        "$(grep -v '^\[' "$e2e/console.log" 2>/dev/null | tail -n 15 | tr '\n' '|')"
fi
check "end to end: libvirtd answers inside the guest (stage2 at $(up_at STAGE2) s, up at $(up_at LIBVIRTD-UP) s uptime)" \
    test "$(efact libvirtd_up | cut -d' ' -f1)" = yes
check "end to end: virsh start of a nested TCG domain with the node-1 ivshmem as a vfio hostdev ($(efact start))" \
    sh -c "echo '$(efact start)' | grep -q '^rc=0 ' && test '$(efact state_after_start)' = running && test '$(efact state_later)' = running"
check "end to end: while it runs, the device is on vfio-pci and the nested QEMU holds its /dev/vfio group ($(efact driver_after_start); $(efact qemu_has_vfio_group))" \
    sh -c "test '$(efact driver_after_start)' = vfio-pci && echo '$(efact qemu_has_vfio_group)' | grep -q '^1 pid=[0-9]'"
dsecs=$(efact destroy | sed -n 's/.*seconds=\([0-9]*\).*/\1/p')
check "end to end: virsh destroy returns promptly (PID 1 reaps; $(efact destroy)) and the domain is shut off" \
    sh -c "echo '$(efact destroy)' | grep -q '^rc=0 ' && test '${dsecs:-999}' -lt 30 && test '$(efact state_after_destroy)' = 'shut off'"
check "end to end: after destroy, the managed device is back on its host driver (none for ivshmem: '$(efact driver_after_destroy)')" \
    test -z "$(efact driver_after_destroy)" -a "$(efact device | cut -d' ' -f1)" = 0000:81:00.0
check "end to end: the qemu hook installed before libvirtd started saw the lifecycle ($(efact hook_calls))" \
    test "$(efact hook_calls)" = "prepare/begin start/begin started/begin stopped/end release/end"

t2=$(date +%s)
echo "# total: $((t2 - t0)) s; run dir $run"
echo "check-vm: $((n - failed)) passed, $failed failed"
test "$failed" = 0
