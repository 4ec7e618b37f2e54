#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Make the committed fixture tests/data/captured/qemu-q35-viommu.tar.xz: the sysfs of
# the VM rig's guest (a real Debian 6.1 kernel: emulated Intel IOMMU, 2 NUMA nodes,
# pxb-pcie, ivshmem, edu, a pcie-pci-bridge whose group is not viable), as
# tests/data/capture-host.sh copies it on a real server. tests/test-real-host.sh
# (make check, no VM) reads it with `accelvirt --root` against a golden file.
#
# Usage: tests/vm/make-fixture.sh [OUT]   (default tests/data/captured/qemu-q35-viommu.tar.xz)
# Env:   AV_VM_CACHE  build.sh's cache (default ./tests/vm/cache)
#
# One boot (~10 s warm). The guest's devices are left as they boot: no driver is bound,
# no mdev created; it only runs capture-host.sh (with the host's sh and find, chrooted
# into the host's root over 9p) into a tmpfs and tars it into the results share.
# The archive is deterministic for a given tree: names sorted, mtimes 0, owner and
# group 0, modes normalized, xz -9 single-threaded. (The tree itself is not quite:
# meminfo's free counts differ from boot to boot.)
# After a new fixture: AV_TEST_REGENERATE=1 make check TESTS=tests/test-real-host.sh,
# then read the diff of tests/data/expected/qemu-q35-viommu.list.json.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:-$top/tests/data/captured/qemu-q35-viommu.tar.xz}
die() { echo "make-fixture.sh: $*" >&2; exit 1; }

cache=${AV_VM_CACHE:-tests/vm/cache}
mkdir -p "$cache"
cache=$(sh "$here/build.sh" "$cache") || die "tests/vm/build.sh failed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/av-fixture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run=$tmp/run
mkdir -p "$run/results"
cp "$top/tests/data/capture-host.sh" "$run/results/capture-host.sh"
cat > "$run/results/scenario.sh" <<'EOF'
#!/bin/sh
# (tests/vm/make-fixture.sh) capture the guest's sysfs as on a real server
R=${AVVM_RESULTS:-/results}
for m in proc sys dev; do mount --bind "/$m" "/host/$m"; done
mount -t tmpfs tmpfs /host/run
cp "$R/capture-host.sh" /host/run/capture-host.sh
chroot /host sh /run/capture-host.sh / /run/capture
rc=$?
echo "capture rc=$rc entries=$(find /host/run/capture | wc -l)"
(cd /host/run/capture && tar -cf "$R/capture.tar" .) || rc=1
umount /host/run /host/dev /host/sys /host/proc
exit $rc
EOF

echo "make-fixture.sh: booting the guest (cache $cache)" >&2
AV_VM_CACHE=$cache AV_VM_QUIET=1 sh "$here/run-vm.sh" "$run" 2>"$tmp/run-vm.err" || {
    cat "$tmp/run-vm.err" >&2; tail -n 20 "$run/console.log" >&2; die "the boot failed"; }
test "$(cat "$run/results/scenario.rc" 2>/dev/null)" = 0 || {
    cat "$run/results/scenario.log" >&2; die "the capture failed in the guest"; }

tree=$tmp/tree
mkdir -p "$tree"
tar -xf "$run/results/capture.tar" -C "$tree"
test -d "$tree/sys/bus/pci/devices" || die "the capture has no sys/bus/pci/devices"
if find "$tree" -type l -lname '/*' | grep -q .; then
    die "the capture has absolute links (not self-contained)"
fi
mkdir -p "$(dirname "$out")"
(cd "$tree" && LC_ALL=C tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=gnu -cf - sys proc) | xz -9 -T1 > "$out.tmp"
mv "$out.tmp" "$out"
echo "make-fixture.sh: wrote $out ($(stat -c %s "$out") bytes," \
    "$(xz -dc "$out" | tar -tf - | wc -l) entries; guest booted in $(cat "$run/boot-seconds") s)" >&2
