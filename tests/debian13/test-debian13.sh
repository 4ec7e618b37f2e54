#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian 13 tier (make check-debian13; tests/debian13/README.md): a
# Debian 13 ("trixie") root made with mmdebstrap from Debian's mirror (its
# tarball cached under tests/debian13/cache), with the packages that
# build-aux/install-deps names; inside it, install-deps finds them all
# (Debian 13's package names), accelvirt is built from HEAD (git archive)
# with --enable-werror by Debian 13's GCC 14 and by its clang 19, and
# Debian 13's make check runs, each of its results a line of this TAP
# ("debian13: ..."), a skip counted as a failure.  With the phase "vm"
# (make check-vm-debian13), the VM rig runs in that root as on a Debian 13
# host: its guest boots Debian 13's kernel, and Debian 13's QEMU, libvirt
# and busybox are the guest's userland (the root over 9p); each of
# test-vm.sh's results is a line of this TAP ("debian13 vm: ...").
# Nothing of Debian 13 touches this host's own system: everything happens
# in the chroot.  Needs root; installs mmdebstrap when missing; never skips.
#
#   AV_D13_PHASES="check vm"  what runs after the builds: make check
#                       ("check", the default), the VM rig ("vm"), or both
#   AV_D13_VM_SKIP="F V"  the rig's phases left out (tests/vm/test-vm.sh's
#                       AV_VM_SKIP_PHASES; default F and V, empty: none)
#   AV_D13_CACHE=DIR    where the root's tarball and the Debian 13 rig's
#                       guest (cache/vm, build.sh's; copied into the root and
#                       back) are kept (default tests/debian13/cache)
#   AV_D13_MIRROR=URL   the Debian mirror (default http://deb.debian.org/debian)
set -u
umask 022

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${AV_TEST_BUILDDIR:-$src/tests}
cache=${AV_D13_CACHE:-$build/debian13/cache}
mirror=${AV_D13_MIRROR:-http://deb.debian.org/debian}
work=$build/debian13/run
root=$work/root
phases=${AV_D13_PHASES:-check}
for p in $phases; do
	case $p in check | vm) ;; *) echo "Bail out! AV_D13_PHASES: unknown phase '$p' (check, vm)"; exit 1 ;; esac
done
has_phase() { case " $phases " in *" $1 "*) return 0 ;; esac; return 1; }

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { # DESCRIPTION [OUTPUT]
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	[ $# -gt 1 ] && printf '%s\n' "$2" | tail -40 | sed 's/^/# /'
	return 0
}
bail() {
	not_ok "$@"
	echo "1..$n"
	exit 1
}
t0=$(date +%s)
step_t=$t0
step() { # NAME: prints how long the previous step took
	local now
	now=$(date +%s)
	echo "# [$((now - t0)) s] $1 (previous step: $((now - step_t)) s)"
	step_t=$now
}
in_root() {
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root "$@"
}

# Everything mounted in the root is unmounted on any exit, and the root removed.
cleanup() {
	local m
	for m in "$root/proc" "$root/sys" "$root/dev/pts" "$root/dev/shm"; do
		mountpoint -q "$m" 2>/dev/null && umount -l "$m"
	done
	if [ -d "$root" ] && ! grep -q " $root/" /proc/self/mounts; then
		rm -rf --one-file-system "$root"
	fi
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || bail "make check-debian13 runs as root (it builds a chroot)"
case "$work" in /*/debian13/run) ;; *) bail "unexpected work directory '$work'" ;; esac

step "mmdebstrap"
if ! command -v mmdebstrap >/dev/null; then
	out=$(sh "$src/build-aux/install-deps" --deb 2>&1) || bail "build-aux/install-deps --deb installs mmdebstrap" "$out"
fi

step "the Debian 13 root"
# The packages install-deps names on Debian 13 (its build, make check and
# the sanitizer's clang); mmdebstrap refuses a name Debian 13 lacks.
pkgs=$(AV_DEBIAN_VERSION=13 sh "$src/build-aux/install-deps" --list --sanitize) || bail "install-deps --list"
# And what make check's test-watch-daemon.sh runs (a private libvirtd and
# virsh: build-aux/install-deps --tiers puts them on a Debian 12 host), and
# what the VM rig needs (tests/vm/install-deps.sh --list: Debian 13's kernel,
# QEMU, libvirt, busybox): one root for both phases.
vmpkgs=$(sh "$src/tests/vm/install-deps.sh" --list) || bail "tests/vm/install-deps.sh --list"
include="ca-certificates,libvirt-daemon,libvirt-clients,util-linux,$(echo $pkgs $vmpkgs | tr ' ' ',')"
mkdir -p "$cache"
tarball=$cache/trixie-$(printf '%s' "$include" | sha256sum | cut -c1-12).tar
if [ ! -s "$tarball" ]; then
	echo "# making $tarball (mmdebstrap --include=$include)"
	tmp=$(mktemp -p "$cache" trixie-XXXXXX.tmp.tar) || bail "a temporary file in $cache"
	if ! out=$(mmdebstrap --mode=root --variant=apt --format=tar --include="$include" trixie "$tmp" "$mirror" 2>&1); then
		rm -f "$tmp"
		bail "mmdebstrap makes a Debian 13 root with install-deps' packages" "$out"
	fi
	mv "$tmp" "$tarball"
	# the roots of earlier package lists (about 2 GB each) are not kept
	find "$cache" -maxdepth 1 -name 'trixie-????????????.tar' ! -name "${tarball##*/}" -delete
fi
cleanup
rm -rf --one-file-system "$work"
mkdir -p "$root"
tar -C "$root" -xf "$tarball" || bail "unpacking $tarball"
. "$root/etc/os-release"
if [ "${VERSION_ID:-}" = 13 ]; then ok "a Debian $(cat "$root/etc/debian_version") root (mmdebstrap, cached)"; else bail "the root is Debian 13" "VERSION_ID=${VERSION_ID:-}"; fi
mount -t proc proc "$root/proc" || bail "mount proc in the root"
# Read only: test-real-host.sh reads this host's /sys (and never writes it).
mount -t sysfs -o ro sysfs "$root/sys" || bail "mount sysfs (read only) in the root"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null || true
mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" 2>/dev/null || true

step "HEAD into the root (git archive)"
head=$(git -C "$src" rev-parse --short HEAD 2>&1) || bail "the source is a git checkout (the tier builds HEAD)" "$head"
[ -z "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
	echo "# the tree has uncommitted changes: they are not built (HEAD $head is)"
mkdir -p "$root/src/accelvirt"
git -C "$src" archive HEAD | tar -C "$root/src/accelvirt" --no-same-permissions -xf - || bail "git archive HEAD"
ok "git archive of $head"

step "install-deps in the root"
if out=$(in_root sh /src/accelvirt/build-aux/install-deps --sanitize 2>&1) && [ -z "$out" ]; then
	ok "build-aux/install-deps --sanitize finds every package it names installed on Debian 13 (nothing to fetch)"
else
	not_ok "build-aux/install-deps --sanitize finds every package it names installed on Debian 13" "$out"
fi
gcc=$(in_root gcc -dumpversion 2>&1)
clangv=$(in_root clang-19 -dumpversion 2>&1)
libvirt=$(in_root pkg-config --modversion libvirt 2>&1)
echo "# Debian 13: GCC $gcc, clang $clangv, libvirt $libvirt"

step "the build with GCC $gcc (--enable-werror)"
if out=$(in_root sh -c 'cd /src/accelvirt && ./autogen.sh && ./configure --sysconfdir=/etc --localstatedir=/var --enable-werror && make -j"$(nproc)"' 2>&1); then
	ok "accelvirt builds with --enable-werror on Debian 13 (GCC $gcc, libvirt $libvirt)"
else
	bail "accelvirt builds with --enable-werror on Debian 13 (GCC $gcc)" "$(printf '%s\n' "$out" | grep -E 'error|warning' | head -30)"
fi

step "the build with clang $clangv (--enable-werror)"
# A second tree: automake builds a configured tree's source only in place.
mkdir -p "$root/src/clang"
git -C "$src" archive HEAD | tar -C "$root/src/clang" --no-same-permissions -xf -
if out=$(in_root sh -c 'cd /src/clang && ./autogen.sh && ./configure CC=clang-19 --sysconfdir=/etc --localstatedir=/var --enable-werror && make -j"$(nproc)"' 2>&1); then
	ok "accelvirt builds with --enable-werror on Debian 13 with clang $clangv"
else
	not_ok "accelvirt builds with --enable-werror on Debian 13 with clang $clangv" "$(printf '%s\n' "$out" | grep -E 'error|warning' | head -30)"
fi
rm -rf --one-file-system "$root/src/clang"

if has_phase check; then
step "make check on Debian 13"
in_root sh -c 'cd /src/accelvirt && make -j"$(nproc)" check' >"$work/check.log" 2>&1
rc=$?
# Each result of the inner suite, as automake printed it: a SKIP is a
# failure here (a tier that needs something installs it).
results=0
while IFS= read -r line; do
	results=$((results + 1))
	case $line in
		PASS:* | XFAIL:*) ok "debian13: ${line#*: }" ;;
		*) not_ok "debian13: $line" ;;
	esac
done < <(grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS): ' "$work/check.log")
if [ "$results" -gt 0 ] && [ "$rc" -eq 0 ]; then
	ok "make check on Debian 13 exits 0 ($results results)"
else
	not_ok "make check on Debian 13 exits 0 ($results results, exit $rc)" \
		"$(grep -E '^(FAIL|ERROR|SKIP|XPASS)|^# |^not ok|Error' "$work/check.log" | head -60)"
	cp "$root/src/accelvirt/test-suite.log" "$work/test-suite.log" 2>/dev/null
fi
fi

if has_phase vm; then
step "the VM rig on Debian 13"
# As on a Debian 13 host: tests/vm/install-deps.sh finds its packages, build.sh
# makes the guest from Debian 13's kernel (its cache kept outside the root),
# run-vm.sh boots it with Debian 13's QEMU and shares the root as the guest's
# host root; boot 2 runs Debian 13's libvirt.
if out=$(in_root sh /src/accelvirt/tests/vm/install-deps.sh 2>&1) && [ "$out" = "install-deps (vm): all present" ]; then
	ok "tests/vm/install-deps.sh finds every package the rig needs installed on Debian 13"
else
	not_ok "tests/vm/install-deps.sh finds every package the rig needs installed on Debian 13" "$out"
fi
kver=$(in_root dpkg-query -W -f='${Depends}' linux-image-amd64 | tr ',' '\n' | sed -n 's/^ *linux-image-\([^ ]*\).*/\1/p' | head -n1)
qemuv=$(in_root qemu-system-x86_64 --version | head -n1)
echo "# Debian 13's guest kernel $kver; $qemuv; libvirt $libvirt"
# The rig's cache is copied into the root and back (never mounted there: a
# root left behind by a killed run is removed without reaching the cache).
mkdir -p "$cache/vm" "$root/var/cache/accelvirt-vm"
cp -a "$cache/vm/." "$root/var/cache/accelvirt-vm/" || bail "copy the rig's cache into the root"
# Phases F (FPGA programming) and V (the scrub VM, a nested boot of minutes)
# are left out unless AV_D13_VM_SKIP says otherwise: both are proven by the
# Debian 12 rig, and CI's time is bounded.
skip=${AV_D13_VM_SKIP-F V}
echo "# the rig's phases left out here: ${skip:-none}"
in_root env AV_VM_SKIP_PHASES="$skip" sh -c 'cd /src/accelvirt && make check-vm AV_VM_CACHE=/var/cache/accelvirt-vm' >"$work/check-vm.log" 2>&1
rc=$?
# what build.sh made (keyed on its inputs' contents) back into the cache
rm -rf "$cache/vm.new" && cp -a "$root/var/cache/accelvirt-vm" "$cache/vm.new" &&
	rm -rf "$cache/vm" && mv "$cache/vm.new" "$cache/vm" || echo "# could not keep the rig's cache in $cache/vm"
vmlog=$root/src/accelvirt/tests/vm/test-vm.log
results=0
if [ -f "$vmlog" ]; then
	cp "$vmlog" "$work/test-vm.log"
	while IFS= read -r line; do
		results=$((results + 1))
		case $line in
			"ok "*) ok "debian13 vm: $(printf '%s' "$line" | sed 's/^ok [0-9]* - //')" ;;
			*) not_ok "debian13 vm: $(printf '%s' "$line" | sed 's/^not ok [0-9]* - //')" ;;
		esac
	done < <(grep -E '^(ok|not ok) [0-9]' "$vmlog")
	grep -E '^# (build|boot|the e2e|phase)' "$vmlog" | head -20
fi
planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$vmlog" 2>/dev/null | head -n1)
if [ "$rc" -eq 0 ] && [ "$results" -gt 0 ] && [ "$results" = "${planned:-x}" ]; then
	ok "the VM rig on Debian 13 exits 0 ($results of $planned results; kernel $kver)"
else
	not_ok "the VM rig on Debian 13 exits 0 ($results of ${planned:-?} results, exit $rc)" \
		"$(grep -E '^not ok|^#|^Bail|rror' "$vmlog" "$work/check-vm.log" 2>/dev/null | head -60)"
fi
fi

step "done"
echo "1..$n"
[ "$failed" -eq 0 ]
