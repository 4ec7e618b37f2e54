#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the scrub image's BAR scrubber (scrub/image/accelvirt-scrub-bars,
# built as a check program) on fake sysfs trees (--sysfs): which functions of a scrub
# VM it takes for passed through, that it zeroes and reads back every prefetchable
# memory BAR and prints the coverage line, and its failures: writes that do not reach
# the BAR, bytes that do not read back as zero, a bus error, an unassigned BAR, no
# memory BAR, no device at all. Nothing boots; the VM rig boots the real image.
. "$AV_TEST_SRCDIR/lib.sh"

BARS=${AV_SCRUB_BARS:-$AV_TEST_BUILDDIR/../scrub/image/accelvirt-scrub-bars}
MiB=$((1024 * 1024))

# mkfn TREE ADDR VENDOR DEVICE CLASS HDR SUBVENDOR BARS...: a PCI function under
# TREE/bus/pci/devices/ADDR; each BAR is INDEX:KIND:SIZE[:FILL] with KIND mem, pref,
# pref-unset or io; FILL (for a BAR file) is a text repeated over it, else zeros.
mkfn() {
    python3 - "$@" <<'EOF'
import os, struct, sys
tree, addr, vendor, device, cls, hdr, subv = sys.argv[1:8]
d = os.path.join(tree, "bus/pci/devices", addr)
os.makedirs(d)
v, dv, c = int(vendor, 16), int(device, 16), int(cls, 16)
cfg = bytearray(64)
cfg[0:4] = struct.pack("<HH", v, dv)
cfg[4:6] = struct.pack("<H", 0x0002)          # memory decoding on
cfg[9:12] = bytes([c & 0xff, (c >> 8) & 0xff, (c >> 16) & 0xff])
cfg[0x0e] = int(hdr)
cfg[0x2c:0x2e] = struct.pack("<H", int(subv, 16))
open(os.path.join(d, "config"), "wb").write(cfg)
for name, val in (("vendor", "0x%04x" % v), ("device", "0x%04x" % dv), ("class", "0x%06x" % c), ("enable", "0")):
    open(os.path.join(d, name), "w").write(val + "\n")
lines = [(0, 0, 0)] * 13
base = 0xfe000000
for spec in sys.argv[8:]:
    parts = spec.split(":")
    i, kind, size = int(parts[0]), parts[1], int(parts[2])
    flags = {"mem": 0x40200, "pref": 0x14220c, "pref-unset": 0x2014220c, "io": 0x40101}[kind]
    start = 0 if kind == "pref-unset" else base
    base += max(size, 0x100000)
    lines[i] = (start, start + size - 1, flags)
    if kind != "io" and kind != "pref-unset":
        fill = parts[3].encode() if len(parts) > 3 else b""
        data = (fill * (size // len(fill) + 1))[:size] if fill else bytes(size)
        open(os.path.join(d, "resource%d" % i), "wb").write(data)
open(os.path.join(d, "resource"), "w").write("".join("0x%016x 0x%016x 0x%016x\n" % l for l in lines))
EOF
}

# a q35 scrub VM as its guest sees it: the chipset, a root port with the
# passed-through ivshmem behind it (register BAR0, 1 MiB of memory in BAR2 holding a
# tenant's secret), QEMU's xhci, a virtio-rng, and no other device
SECRET="tenant-secret-"
q35() {  # q35 TREE [ADDR of the ivshmem, or none]
    mkfn "$1" 0000:00:00.0 8086 29c0 060000 0 1af4
    mkfn "$1" 0000:00:01.0 1b36 000c 060400 1 0000 0:mem:4096
    mkfn "$1" 0000:00:02.0 1b36 000d 0c0330 0 1af4 0:mem:16384
    mkfn "$1" 0000:00:03.0 1af4 1044 00ff00 0 1af4 4:pref:16384:virtio-rng-caps
    mkfn "$1" 0000:00:1f.0 8086 2918 060100 0 1af4
    mkfn "$1" 0000:00:1f.2 8086 2922 010601 0 1af4 4:io:32 5:mem:4096
    mkfn "$1" 0000:00:1f.3 8086 2930 0c0500 0 1af4 4:io:64
    if test "${2:-0000:01:00.0}" != none; then
        mkfn "$1" "${2:-0000:01:00.0}" 1af4 1110 050000 0 1af4 0:mem:256:registers 2:pref:$MiB:$SECRET
    fi
}
T=$AV_TMP
dev=bus/pci/devices/0000:01:00.0
nonzero() { tr -d '\0' < "$1" | wc -c; }

q35 "$T/vm"
t1() {
    "$BARS" --sysfs "$T/vm" --list > "$T/list" &&
    test $(grep -c " chosen\$" "$T/list") = 1 &&
    grep -q "^0000:01:00.0 1af4:1110 class=050000 chosen\$" "$T/list" &&
    grep -q "^0000:00:00.0 .* skipped: a host bridge" "$T/list" &&
    grep -q "^0000:00:01.0 .* skipped: header type 1 (a bridge)" "$T/list" &&
    grep -q "^0000:00:02.0 .* skipped: one of QEMU.s own devices (vendor 0x1b36)" "$T/list" &&
    grep -q "^0000:00:03.0 .* skipped: one of QEMU.s own virtio devices" "$T/list" &&
    grep -q "^0000:00:1f.0 .* skipped: an ISA bridge" "$T/list" &&
    grep -q "^0000:00:1f.2 .* skipped: QEMU.s ICH9 SATA (AHCI)" "$T/list" &&
    grep -q "^0000:00:1f.3 .* skipped: QEMU.s ICH9 SMBus" "$T/list" &&
    test $(wc -l < "$T/list") = 8
}
check "--list takes the passed-through ivshmem and none of the machine's own functions, saying why" t1
t2() {
    "$BARS" --sysfs "$T/vm" --window 65536 > "$T/out" 2> "$T/err" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$MiB memory=unknown verified=yes bars=2 size=$MiB" &&
    test ! -s "$T/err" &&
    test $(nonzero "$T/vm/$dev/resource2") = 0 && test $(wc -c < "$T/vm/$dev/resource2") = $MiB &&
    test "$(cat "$T/vm/$dev/enable")" = 1
}
check "it enables the device, zeroes its prefetchable BAR2 in windows and reads it back: one coverage line, verified=yes, exit 0" t2
t3() {
    test $(nonzero "$T/vm/$dev/resource0") = 256 &&
    test $(nonzero "$T/vm/bus/pci/devices/0000:00:03.0/resource4") = 16384
}
check "... and leaves alone its register BAR0 and the prefetchable BAR of QEMU's virtio device" t3
t4() {
    "$BARS" --sysfs "$T/vm" | grep -q "^accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$MiB memory=unknown verified=yes bars=2 "
}
check "a second run over the zeroed BAR verifies it again (the default window)" t4

# a machine with nothing passed through: the chipset only
q35 "$T/none" none
t5() {
    expect_exit 1 "$BARS" --sysfs "$T/none" && test ! -s "$T/out" &&
    test $(wc -l < "$T/err") = 1 && grep -q "no passed-through device found" "$T/err"
}
check "no passed-through device is a failure: exit 1, no coverage line, one line on stderr" t5
check "... and --list says so too (exit 1)" expect_exit 1 "$BARS" --sysfs "$T/none" --list
mkdir -p "$T/empty"
check "... as does a sysfs without the PCI bus (exit 1)" expect_exit 1 "$BARS" --sysfs "$T/empty"

# writes that do not reach the BAR: resource2_wc (where the writes go) is another file
# than resource2 (what reads return), as when a device drops them
q35 "$T/drop"
yes x | head -c $MiB > "$T/drop/$dev/resource2_wc"
t6() {
    ! "$BARS" --sysfs "$T/drop" > "$T/out" 2> "$T/err" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=0 memory=unknown verified=no bars=2 size=$MiB failed=2 reason=canary" &&
    grep -q "BAR2: a word written at offset 0x0 does not read back" "$T/err" &&
    test $(nonzero "$T/drop/$dev/resource2") = $MiB
}
check "writes that never reach what reads return: the canary does not read back: verified=no reason=canary, cleared=0, exit 1" t6

# bytes that do not read back as zero: the same, but the BAR's first word holds the
# canary (as if the device kept that word only) and its second half is zero already;
# one window (the canary is checked at the start of each)
q35 "$T/stale"
python3 -c "
import sys
half = $MiB // 2
open(sys.argv[1], 'wb').write(b'AVCANARY' + (b'$SECRET' * half)[:half - 8] + bytes(half))" "$T/stale/$dev/resource2"
cp "$T/stale/$dev/resource2" "$T/stale/$dev/resource2_wc"
t7() {
    ! "$BARS" --sysfs "$T/stale" > "$T/out" 2> "$T/err" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$((MiB / 2)) memory=unknown verified=no bars=2 size=$MiB failed=2 reason=not-zero" &&
    test "$(cat "$T/err")" = "accelvirt-scrub-bars: 0000:01:00.0 BAR2: 524288 bytes of the window at 0x0 are not zero after zeroing (the first at offset 0x0)"
}
check "bytes that do not read back as zero: verified=no reason=not-zero, cleared counts exactly the zero bytes read back ($((MiB / 2))), exit 1" t7

# a BAR shorter than the kernel says (a device gone from the bus): a bus error
q35 "$T/short"
truncate -s $((MiB / 2)) "$T/short/$dev/resource2"
t8() {
    ! "$BARS" --sysfs "$T/short" --window 65536 > "$T/out" 2> "$T/err" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$((MiB / 2)) memory=unknown verified=no bars=2 size=$MiB failed=2 reason=bus-error" &&
    grep -q "BAR2: bus error (SIGBUS) at offset 0x80000 of 0x100000 bytes" "$T/err"
}
check "a bus error (SIGBUS) past what can be mapped: verified=no reason=bus-error, cleared = what was zeroed before it, exit 1" t8

# two devices, one of them with a BAR the guest's kernel left unassigned
q35 "$T/unset"
mkfn "$T/unset" 0000:02:00.0 10de 2330 030200 0 10de 0:mem:4096 1:pref-unset:$MiB 3:pref:65536:vram
t9() {
    ! "$BARS" --sysfs "$T/unset" > "$T/out" 2> "$T/err" &&
    test $(wc -l < "$T/out") = 2 &&
    grep -qx "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$MiB memory=unknown verified=yes bars=2 size=$MiB" "$T/out" &&
    grep -qx "accelvirt-coverage: device=0000:02:00.0 method=bars cleared=65536 memory=unknown verified=no bars=1,3 size=$((MiB + 65536)) failed=1 reason=unassigned" "$T/out" &&
    grep -q "0000:02:00.0 BAR1: a prefetchable memory BAR of 0x100000 bytes that the kernel left unassigned" "$T/err" &&
    test $(nonzero "$T/unset/bus/pci/devices/0000:02:00.0/resource3") = 0
}
check "a prefetchable BAR left unassigned fails its device (reason=unassigned); the other device is still scrubbed; exit 1" t9

# a passed-through function with register BARs only: nothing this scrubber can clear
q35 "$T/nic" none
mkfn "$T/nic" 0000:01:00.0 8086 10d3 020000 0 8086 0:mem:131072:regs 2:io:32
t10() {
    ! "$BARS" --sysfs "$T/nic" > "$T/out" 2> "$T/err" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=0 memory=unknown verified=no bars=none size=0 reason=no-memory-bar" &&
    test $(nonzero "$T/nic/$dev/resource0") = 131072
}
check "a passed-through function without a prefetchable memory BAR fails (bars=none reason=no-memory-bar): a scrub that clears nothing never passes" t10

# --device: exactly the functions named, whatever they are
q35 "$T/dev"
t11() {
    "$BARS" --sysfs "$T/dev" --device 0000:00:03.0 > "$T/out" &&
    test "$(cat "$T/out")" = "accelvirt-coverage: device=0000:00:03.0 method=bars cleared=16384 memory=unknown verified=yes bars=4 size=16384" &&
    test $(nonzero "$T/dev/bus/pci/devices/0000:00:03.0/resource4") = 0 &&
    test $(nonzero "$T/dev/$dev/resource2") = $MiB
}
check "--device takes exactly the function named, even one of QEMU's own (the virtio device's BAR4), and nothing else" t11
t12() {
    ! "$BARS" --sysfs "$T/dev" --device 0000:09:00.0 --device 0000:01:00.0 > "$T/out" 2> "$T/err" &&
    grep -qx "accelvirt-coverage: device=0000:09:00.0 method=bars cleared=0 memory=unknown verified=no bars=none reason=absent" "$T/out" &&
    grep -qx "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=$MiB memory=unknown verified=yes bars=2 size=$MiB" "$T/out" &&
    grep -q "no PCI function 0000:09:00.0" "$T/err"
}
check "--device of a function that is not there fails (reason=absent), the others named are still scrubbed" t12
t13() {
    "$BARS" --sysfs "$T/dev" --window 1000 > /dev/null 2>&1; a=$?
    "$BARS" --sysfs "$T/dev" --device 1:2:3 > /dev/null 2>&1; b=$?
    "$BARS" --bogus > /dev/null 2>&1; c=$?
    test $a$b$c = 222 && "$BARS" --help | grep -q "accelvirt-coverage: device=ADDR"
}
check "usage errors exit 2: a window that is not a multiple of the page size, an address that is none, an unknown option" t13

finish
