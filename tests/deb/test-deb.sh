#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package tier (make check-deb; tests/deb/README.md): builds the
# .deb from the committed tree (git archive HEAD) with dpkg-buildpackage, runs
# lintian on it, installs it with apt in a fresh Debian chroot (mmdebstrap,
# its tarball cached under tests/deb/cache), checks what it installed and
# enabled, then removes and purges it and checks that nothing of it is left.
# TAP on stdout. Needs root; installs its packages when missing; never skips.
#
#   AV_DEB_SUITE=S     bookworm (Debian 12, the default: built on this host) or
#                      trixie (Debian 13: built with dpkg-buildpackage and lintian
#                      in a Debian 13 build chroot, installed in a Debian 13 one;
#                      tests/deb/test-deb-debian13.sh)
#   AV_DEB_CACHE=DIR   where the chroot tarballs are kept (default tests/deb/cache)
#   AV_DEB_MIRROR=URL  the Debian mirror (default http://deb.debian.org/debian)
set -u
# The package is built as root from a tree this script unpacks: no group or
# world write bits in it (accelvirt refuses such trees as root, and so would
# the package build's make check); git archive writes 0775 directories.
umask 022

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${AV_TEST_BUILDDIR:-$src/tests}
cache=${AV_DEB_CACHE:-$build/deb/cache}
mirror=${AV_DEB_MIRROR:-http://deb.debian.org/debian}
suite=${AV_DEB_SUITE:-bookworm}
case $suite in
	bookworm) release=12 work=$build/deb/run ;;
	trixie) release=13 work=$build/deb/run-trixie ;;
	*) echo "Bail out! AV_DEB_SUITE: bookworm or trixie, not '$suite'"; exit 1 ;;
esac
root=$work/root
broot=$work/build-root
hosts=${AV_TEST_HOSTS:-$src/tests/data/hosts}
host=two-socket-8gpu

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
check() { # DESCRIPTION COMMAND... (ok when COMMAND succeeds; its output shown when not)
	local d=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$d"; else not_ok "$d" "$out"; fi
}
# bail DESCRIPTION [OUTPUT]: a step the rest depends on failed.
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
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
in_broot() { chroot "$broot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root "$@"; }
# mmdebstrap_cached NAME SUITE INCLUDE: the tarball of a root with INCLUDE, made
# once and kept in the cache, named after its package list; prints its path
mmdebstrap_cached() {
	local t=$cache/$1-$(printf '%s' "$3" | sha256sum | cut -c1-12).tar
	if [ ! -s "$t" ]; then
		echo "# making $t (mmdebstrap --include=$3)" >&2
		local tmp
		tmp=$(mktemp -p "$cache" "$1-XXXXXX.tmp.tar") || return 1
		if ! out=$(mmdebstrap --mode=root --variant=apt --format=tar --include="$3" "$2" "$tmp" "$mirror" 2>&1); then
			rm -f "$tmp"
			printf '%s\n' "$out" | tail -20 >&2
			return 1
		fi
		mv "$tmp" "$t"
		# the chroots of earlier package lists are not kept
		find "$cache" -maxdepth 1 -name "$1-????????????.tar" ! -name "${t##*/}" -delete
	else
		echo "# reusing $t" >&2
	fi
	echo "$t"
}

# Everything mounted in the chroot is unmounted on any exit, a failed check's
# included; the chroot itself is deleted only once nothing is mounted there.
cleanup() {
	local m
	for m in "$root/proc" "$root/dev/pts" "$broot/proc"; do
		mountpoint -q "$m" 2>/dev/null && umount -l "$m"
	done
	if [ -d "$root" ] && ! grep -q " $root/" /proc/self/mounts; then
		rm -rf --one-file-system "$root"
	fi
	if [ -d "$broot" ] && ! grep -q " $broot/" /proc/self/mounts; then
		rm -rf --one-file-system "$broot"
	fi
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || bail "make check-deb runs as root (it builds a chroot)"
case "$work" in /*/deb/run | /*/deb/run-trixie) ;; *) bail "unexpected work directory '$work'" ;; esac

step "installing the tier's packages"
out=$(sh "$src/build-aux/install-deps" --deb 2>&1) ||
	bail "build-aux/install-deps --deb installs the build's packages and dpkg-dev, debhelper, lintian, mmdebstrap" "$out"
[ -z "$out" ] || echo "$out" | sed 's/^/# /'

step "a clean copy of HEAD (git archive)"
cleanup
rm -rf --one-file-system "$work"
mkdir -p "$work" "$cache"
head=$(git -C "$src" rev-parse --short HEAD 2>&1) || bail "the source is a git checkout (the tier builds HEAD)" "$head"
[ -z "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
	echo "# the tree has uncommitted changes: they are not in the package (HEAD $head is)"
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
tree=$work/accelvirt-$version
git -C "$src" archive --prefix="accelvirt-$version/" HEAD | tar -C "$work" --no-same-permissions -xf - ||
	bail "git archive HEAD"
ok "git archive of $head, version $version"

if [ "$suite" = bookworm ]; then
# Debian 12: built on this host, as its other tiers are.
step "build dependencies (dpkg-checkbuilddeps)"
if ! (cd "$tree" && dpkg-checkbuilddeps -P nocheck) >/dev/null 2>&1; then
	out=$(cd "$tree" && DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q -P nocheck ./ 2>&1) ||
		bail "apt-get build-dep installs the package's build dependencies" "$out"
fi
check "build dependencies satisfied" sh -c "cd '$tree' && dpkg-checkbuilddeps -P nocheck"

# nocheck: CI's make check ran on this tree already (the package build would
# run it again, minutes on 2 cores).
step "dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS=nocheck)"
if ! (cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	bail "dpkg-buildpackage -us -uc -b" "$(cat "$work/build.log")"
fi
lint() { lintian --fail-on error "$1"; }
else
# Debian 13: built in a Debian 13 build chroot (this host's own system stays
# Debian 12) holding debian/control's Build-Depends (the first of each
# alternative), dpkg-dev, debhelper and lintian.
step "the Debian $release build chroot"
bdeps=$(sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' "$tree/debian/control" | sed '$d' |
	sed 's/^Build-Depends://' | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/<.*>//; s/\[.*\]//; s/ //g' | grep . | sort -u | tr '\n' ',')
btar=$(mmdebstrap_cached "$suite-build" "$suite" "build-essential,dpkg-dev,debhelper,lintian,${bdeps%,}") ||
	bail "mmdebstrap makes a Debian $release build chroot"
mkdir -p "$broot"
tar -C "$broot" -xf "$btar" || bail "the build chroot's tarball extracts"
mount -t proc proc "$broot/proc" || bail "mount proc in the build chroot"
mkdir -p "$broot/build"
cp -a "$tree" "$broot/build/"
check "build dependencies satisfied (dpkg-checkbuilddeps in the Debian $release build chroot)" \
	in_broot sh -c "cd /build/accelvirt-$version && dpkg-checkbuilddeps -P nocheck"
step "dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS=nocheck) on Debian $release"
if ! in_broot sh -c "cd /build/accelvirt-$version && DEB_BUILD_OPTIONS='nocheck parallel=$(nproc)' dpkg-buildpackage -us -uc -b" >"$work/build.log" 2>&1; then
	bail "dpkg-buildpackage -us -uc -b on Debian $release" "$(cat "$work/build.log")"
fi
cp "$broot"/build/accelvirt_"$version"_* "$work/" || bail "the build chroot's .deb and .changes"
# lintian of Debian 13, in the build chroot
lint() { cp "$work"/accelvirt_"$version"_* "$broot/build/" && in_broot lintian --fail-on error "/build/$(basename "$1")"; }
fi
deb=$(ls "$work"/accelvirt_"$version"_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || bail "dpkg-buildpackage made accelvirt_${version}_*.deb" "$(ls "$work")"
ok "dpkg-buildpackage built $(basename "$deb")"
check "the build did not try the CUDA scrubbing kernel" \
	sh -c "! grep -q 'nvcc\\|accelvirt-scrub-gpu' '$work/build.log' || grep -q 'not building scrub/gpu' '$work/build.log'"

step "lintian"
changes=$(ls "$work"/accelvirt_"$version"_*.changes | head -1)
if out=$(lint "$changes" 2>&1); then
	ok "lintian (Debian $release's) reports no errors"
else
	not_ok "lintian (Debian $release's) reports no errors" "$out"
fi
printf '%s\n' "$out" | grep -v 'root privileges' | grep . | sed 's/^/# lintian: /'

step "the package's contents (dpkg-deb -c)"
dpkg-deb -c "$deb" | awk '{ if ($6 ~ /^l/ || $1 ~ /^l/) print $6, $7, $8; else print $6 }' |
	sed 's|^\./|/|' >"$work/contents"
# systemd's units: /lib/systemd/system on Debian 12, /usr/lib/systemd/system on
# Debian 13 (its /usr merge is complete: lintian refuses /lib there)
if [ "$release" = 12 ]; then unitdir=/lib/systemd/system; else unitdir=/usr/lib/systemd/system; fi
missing=
for f in /usr/bin/accelvirt /usr/libexec/accelvirt/accelvirt-hook /usr/libexec/accelvirt/accelvirt-worker \
	/usr/libexec/accelvirt/accelvirt-hold \
	/usr/libexec/accelvirt/accelvirt-nvidia-clear-memory $unitdir/accelvirt-watch.service \
	$unitdir/accelvirt-reconcile.service $unitdir/accelvirt-reconcile.timer \
	/usr/share/man/man8/accelvirt-reconcile.service.8.gz /usr/share/man/man8/accelvirt-reconcile.timer.8.gz \
	/usr/share/man/man1/accelvirt.1.gz /usr/share/man/man5/accelvirt-policy.5.gz \
	/usr/share/man/man8/accelvirt-hook.8.gz /usr/share/accelvirt/policies/nvidia-datacenter.json \
	/usr/share/accelvirt/accelvirt-domain.rng /usr/share/doc/accelvirt/copyright /etc/accelvirt/policies/ \
	/usr/share/bash-completion/completions/accelvirt; do
	awk -v f="$f" '$1 == f { found = 1 } END { exit !found }' "$work/contents" || missing="$missing $f"
done
# (a man page that is a .so link is a symlink in the package: dh_installman)
if [ -z "$missing" ]; then ok "the package ships the CLI, hook, worker, units, man pages, example policies"; else not_ok "the package ships$missing" "$(cat "$work/contents")"; fi
check "the units only in $unitdir" sh -c "! grep -E 'systemd/system/' '$work/contents' | grep -v '^$unitdir/'"
check "no program under /etc, the hook is a symlink there" \
	grep -qxF "/etc/libvirt/hooks/qemu.d/accelvirt -> /usr/libexec/accelvirt/accelvirt-hook" "$work/contents"
check "nothing shipped in /etc/accelvirt/policies nor /var" \
	sh -c "! grep -E '^/etc/accelvirt/policies/.|^/var/' '$work/contents'"

step "the Debian $release chroot"
# Its packages: apt and systemd, and the .deb's dependencies (so that a second
# run installs from the cache, offline); the tarball's name follows the list.
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/ //g' | grep . | sort -u | tr '\n' ',')
include="systemd,${deps%,}"
tarball=$(mmdebstrap_cached "$suite" "$suite" "$include") || bail "mmdebstrap makes a Debian $release chroot"
mkdir -p "$root"
tar -C "$root" -xf "$tarball" || bail "the chroot's tarball extracts"
mount -t proc proc "$root/proc" || bail "mount proc in the chroot"
ok "a Debian $(cat "$root/etc/debian_version") chroot"

# The state of the chroot's files: package-manager bookkeeping, logs and
# /tmp (where the .deb and a fake host are put) left out.
snapshot() {
	(cd "$root" && find . -xdev \( -path ./proc -o -path ./tmp -o -path ./var/lib/dpkg -o -path ./var/lib/apt \
		-o -path ./var/log -o -path ./var/cache -o -path ./run \) -prune -o -print) | sort >"$1"
}
snapshot "$work/before"
cp "$deb" "$root/tmp/"
cp -a "$hosts/$host" "$root/tmp/host" || bail "the fake host $host is in $hosts (make hosts)"

step "apt-get install ./$(basename "$deb")"
if out=$(in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" 2>&1); then
	ok "apt-get install of the .deb in the chroot"
else
	bail "apt-get install of the .deb in the chroot" "$out"
fi
check "dpkg: accelvirt installed" sh -c "chroot '$root' dpkg-query -W -f='\${Status}' accelvirt | grep -qx 'install ok installed'"

step "the installed package"
out=$(in_root accelvirt --version 2>&1)
if [ "$(printf '%s\n' "$out" | head -n 1)" = "accelvirt $version" ]; then ok "accelvirt --version's first line is 'accelvirt $version'"; else not_ok "accelvirt --version's first line is 'accelvirt $version'" "$out"; fi
# accelvirt list reads a fake host (--root), not this machine's sysfs: the
# same devices as the build tree's accelvirt lists there.
if in_root accelvirt --root /tmp/host list --json >"$work/list.json" 2>"$work/list.err" &&
	"${ACCELVIRT:-$build/../accelvirt}" --root "$root/tmp/host" list --json >"$work/list-build.json" 2>&1; then
	check "accelvirt list --root HOST lists the fake host's PCI functions" python3 - "$work/list.json" "$work/list-build.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
addrs = lambda d: sorted(f["address"] for f in d["pci"])
assert addrs(a) and addrs(a) == addrs(b), (addrs(a), addrs(b))
EOF
	check "accelvirt list (the table) works" in_root accelvirt --root /tmp/host list
else
	not_ok "accelvirt --root HOST list --json" "$(cat "$work/list.err")"
fi
check "dpkg -L: the files where Debian expects them" sh -c "chroot '$root' dpkg -L accelvirt | grep -qx /usr/libexec/accelvirt/accelvirt-worker &&
	chroot '$root' dpkg -L accelvirt | grep -qx /etc/libvirt/hooks/qemu.d/accelvirt &&
	chroot '$root' dpkg -L accelvirt | grep -qx /usr/share/accelvirt/policies/amd-instinct.json"
check "accelvirt --version and the hook's say the license; no GPU kernel in Debian's build" sh -c "
	chroot '$root' accelvirt --version | grep -qx 'License: Apache-2.0 (see LICENSE; https://www.apache.org/licenses/LICENSE-2.0)' &&
	chroot '$root' accelvirt --version | grep -q '^GPU scrubbing kernel: not built' &&
	chroot '$root' /etc/libvirt/hooks/qemu.d/accelvirt --version | grep -q '^License: Apache-2.0'"
check "the qemu.d hook resolves to an executable /usr/libexec/accelvirt/accelvirt-hook" sh -c "
	[ \"\$(chroot '$root' readlink -f /etc/libvirt/hooks/qemu.d/accelvirt)\" = /usr/libexec/accelvirt/accelvirt-hook ] &&
	chroot '$root' test -x /etc/libvirt/hooks/qemu.d/accelvirt"
check "the hook passes a domain without accelerators through, touching nothing" sh -c "
	echo '<domain type=\"kvm\"><name>plain</name></domain>' |
	chroot '$root' env ACCELVIRT_ROOT=/tmp/host /etc/libvirt/hooks/qemu.d/accelvirt plain prepare begin - &&
	[ -z \"\$(ls -A '$root/var/lib/accelvirt')\" ]"
check "/var/lib/accelvirt: a directory, 0700 root" sh -c "[ \"\$(stat -c '%a %U %G %F' '$root/var/lib/accelvirt')\" = '700 root root directory' ]"
check "/etc/accelvirt/policies: present and empty (nothing managed)" sh -c "[ -d '$root/etc/accelvirt/policies' ] && [ -z \"\$(ls -A '$root/etc/accelvirt/policies')\" ]"
state=$(systemctl --root="$root" is-enabled accelvirt-watch.service 2>&1)
if [ "$state" = disabled ]; then ok "accelvirt-watch.service installed, not enabled"; else not_ok "accelvirt-watch.service installed, not enabled" "is-enabled: $state"; fi
for u in accelvirt-reconcile.service accelvirt-reconcile.timer; do
	state=$(systemctl --root="$root" is-enabled "$u" 2>&1)
	if [ "$state" = enabled ]; then ok "$u enabled"; else not_ok "$u enabled" "is-enabled: $state"; fi
done
check "accelvirt-reconcile.service waits for a policy (ConditionDirectoryNotEmpty=/etc/accelvirt/policies)" \
	grep -qx 'ConditionDirectoryNotEmpty=/etc/accelvirt/policies' "$root/lib/systemd/system/accelvirt-reconcile.service"
units=$(cd "$root" && ls lib/systemd/system/accelvirt-* | sed 's|^|/|')
# shellcheck disable=SC2086
check "systemd-analyze verify of the installed units (in the chroot)" \
	in_root systemd-analyze verify --man=no $units
# (processes whose root is the chroot: other accelvirt tests may run beside)
in_chroot_procs() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
	done
	return 0
}
check "no process left running in the chroot by the install" sh -c "[ -z '$(in_chroot_procs)' ]"

step "apt-get remove, then purge"
out=$(in_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q accelvirt 2>&1) || not_ok "apt-get remove accelvirt" "$out"
snapshot "$work/removed"
# (and deb-systemd-helper's record of the units and their links in
# /etc/systemd/system, which purge deletes)
left=$(comm -13 "$work/before" "$work/removed" |
	grep -v -e '^\./var/lib/systemd/deb-systemd-helper-' -e '^\./etc/systemd/system/.*accelvirt' -e '^\./etc/systemd/system/[^/]*\.wants$')
if [ "$left" = "./var/lib/accelvirt" ]; then ok "apt-get remove leaves only the state dir /var/lib/accelvirt"; else not_ok "apt-get remove leaves only the state dir" "$left"; fi
out=$(in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q accelvirt 2>&1) || not_ok "apt-get purge accelvirt" "$out"
snapshot "$work/purged"
check "after purge, the chroot's files are as before the install" diff "$work/before" "$work/purged"
check "dpkg: accelvirt not installed after purge" sh -c "! chroot '$root' dpkg-query -W -f='\${Status}' accelvirt 2>/dev/null | grep -q installed"

step "purge keeps the operator's policy, deletes the pool and journal"
out=$(in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" 2>&1) || not_ok "apt-get install again" "$out"
echo '{}' >"$root/etc/accelvirt/policies/site.json"
echo '{}' >"$root/var/lib/accelvirt/pool.json"
out=$(in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q accelvirt 2>&1) || not_ok "apt-get purge accelvirt" "$out"
check "the operator's /etc/accelvirt/policies/site.json survives purge" test -f "$root/etc/accelvirt/policies/site.json"
check "purge deleted /var/lib/accelvirt (pool, journal)" test ! -e "$root/var/lib/accelvirt"

step "done"
echo "# total $(($(date +%s) - t0)) s"
echo "1..$n"
[ "$failed" -eq 0 ]
