#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the test doubles stay in the tests (docs/design.md, as
# libvirt keeps virpcimock in its tests/).  The programs `make install`
# installs, as built (unstripped, so nm sees their local symbols too), hold
# no symbol of a double (the emulated kernel, the crash and stop points of
# the tests, the fake hot-plug table) and no ACCELVIRT_TEST_ string; the test
# builds the other tests run (tests/bin/, AV_TEST_BINDIR) do hold them, so
# this cannot pass for want of looking.  And what an installed program does
# under a root prefix without the emulated kernel: it reads the tree, and
# refuses to change it (-EROFS), leaving it as it was.
. "$AV_TEST_SRCDIR/lib.sh"

: "${AV_INSTALLED_BINDIR:?AV_INSTALLED_BINDIR is not set: run the tests with make check}"
: "${AV_TEST_BUILDDIR:?AV_TEST_BUILDDIR is not set: run the tests with make check}"
NM=${NM:-nm}
TESTBIN=$AV_TEST_BUILDDIR/bin
if ! command -v "$NM" >/dev/null 2>&1; then
    echo "not ok 1 - nm ('$NM') is not installed: install binutils (build-aux/install-deps does)"
    echo "1..1"
    exit 1
fi

# The symbols of the doubles (tests/doubles/), as nm prints them.
DOUBLE_SYMBOLS='av_fake_|av_kernel_fake_|av_kernel_ops_fake|av_test_kill_|av_hotplug_fake_|av_hotplug_ops_fake|av_points_|av_doubles_'
# Strings only a double reads: the tests' environment, the emulated kernel's files.
DOUBLE_STRINGS='ACCELVIRT_TEST_|accelvirt-fake-kernel'

# doubles_in PROGRAM: the double's symbols and strings PROGRAM holds, one a line.
doubles_in() {
    "$NM" -a "$1" | awk '{ print $NF }' | grep -E "^($DOUBLE_SYMBOLS)" | sort -u
    LC_ALL=C grep -aoE "($DOUBLE_STRINGS)[A-Za-z_.]*" "$1" | sort -u
}

# none PROGRAM: PROGRAM exists, has a symbol table, and holds no double.
none() {
    [ -x "$1" ] || { echo "$1: not built"; return 1; }
    "$NM" "$1" | grep -q ' main$' || { echo "$1: nm finds no symbol table (stripped?)"; return 1; }
    found=$(doubles_in "$1")
    [ -z "$found" ] || { echo "$1 holds what only the tests may:"; echo "$found"; return 1; }
}

# has PROGRAM WHAT...: PROGRAM holds each symbol or string WHAT.
has() {
    prog=$1; shift
    found=$(doubles_in "$prog")
    for w in "$@"; do
        printf '%s\n' "$found" | grep -qx -- "$w" || { echo "$prog lacks $w; it has:"; echo "$found"; return 1; }
    done
}

for p in accelvirt accelvirt-hook accelvirt-worker accelvirt-hold; do
    check "the installed $p holds no test double (nm, strings)" none "$AV_INSTALLED_BINDIR/$p"
done
check "the test build of accelvirt holds the emulated kernel, the points and the fake hot-plug table" \
    has "$TESTBIN/accelvirt" av_kernel_ops_fake av_doubles_register av_points_fake av_hotplug_ops_fake \
        ACCELVIRT_TEST_KILL_AT ACCELVIRT_TEST_HOTPLUG
check "the test build of accelvirt-hook holds the emulated kernel and the points" \
    has "$TESTBIN/accelvirt-hook" av_kernel_ops_fake av_doubles_register av_points_fake \
        ACCELVIRT_TEST_KILL_AT ACCELVIRT_TEST_STOP ACCELVIRT_TEST_LOCK_TIMEOUT_MS
check "the test build of accelvirt-worker holds the emulated kernel and the points" \
    has "$TESTBIN/accelvirt-worker" av_kernel_ops_fake av_doubles_register av_points_fake ACCELVIRT_TEST_KILL_AT
check "the test build of accelvirt-hook has no fake hot-plug table (it never links libvirt)" \
    sh -c "! '$NM' '$TESTBIN/accelvirt-hook' | grep -q av_hotplug_"

# Under a root prefix, without the emulated kernel: a private copy of a fake host.
W=$AV_TMP/w
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
hook_policies "$W/policies"
cat >"$W/vm.xml" <<'XML'
<domain type='kvm'>
  <name>vm</name>
  <uuid>00000001-0000-4000-8000-000000000001</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x17' slot='0x00' function='0x0'/></source></hostdev>
  </devices>
</domain>
XML
# tree: every entry of the host copy, with its link target and size.
tree() { (cd "$W/host" && find . -printf '%p %y %l %s\n' | LC_ALL=C sort); }
tree >"$W/before"
# prepare HOOK STATE: the hook HOOK's prepare of vm on the copy, its log in STATE.log.
prepare() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$2" ACCELVIRT_POLICY_DIR="$W/policies" \
    ACCELVIRT_LOG_FILE="$2.log" ACCELVIRT_WORKER=/bin/true "$1" vm prepare begin - <"$W/vm.xml"
}
check "the installed accelvirt reads a tree under a root prefix (list --json)" \
    sh -c "'$AV_INSTALLED_BINDIR/accelvirt' --root '$W/host' list --json | grep -q '0000:17:00.0'"
# refuses: the installed hook's prepare fails, its log saying why.
refuses() {
    if prepare "$AV_INSTALLED_BINDIR/accelvirt-hook" "$W/state"; then echo "the prepare passed"; return 1; fi
    grep 'Read-only file system' "$W/state.log" || { cat "$W/state.log"; return 1; }
}
check "the installed hook refuses a prepare that needs the kernel: the tree is read-only to it" refuses
tree >"$W/after"
check "  ... and leaves the tree as it was (no write, no link, no emulated kernel's files)" diff "$W/before" "$W/after"
kill_holds "$W"
check "the test build's hook, on the same copy, binds the device to vfio-pci (the emulated kernel)" \
    eval "prepare '$TESTBIN/accelvirt-hook' '$W/state-test' && [ \"\$(basename \"\$(readlink '$W/host/sys/bus/pci/devices/0000:17:00.0/driver')\")\" = vfio-pci ]"
finish
