#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the tiny scrub image of the host libvirt tier (test-scrub-vm.sh) into a
# cache dir, reusing what is there when its inputs are unchanged:
#   vmlinux            the Debian kernel, uncompressed: made by tests/vm/build.sh
#                      (AV_VM_ONLY=vmlinux: that part alone, same code, same key)
#   scrub.cpio.gz      busybox-static, the pvpanic modules, and an /init that
#                      follows the scrub image contract (accelvirt-policy(5),
#                      method "vm") as the kernel command line says:
#                        accelvirt.scrub=poweroff  powers off at once (success)
#                        accelvirt.scrub=hang      sleeps forever (killed at the timeout)
#                        accelvirt.scrub=panic     panics (failure: pvpanic, libvirt's "crashed")
#                        accelvirt.scrub=reboot    reboots (failure: never a clean power-off)
#
# Usage: build-scrub-image.sh [CACHE_DIR]  (default $AV_LV_CACHE, else ./tests/libvirt/cache)
# Env:   AV_VM_KVER  the guest kernel version (as for tests/vm/build.sh)
# Prints the cache dir on its last line. Exits non-zero when a requirement is missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${AV_LV_CACHE:-tests/libvirt/cache}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

die() { echo "build-scrub-image.sh: $*" >&2; exit 1; }
need() { echo "build-scrub-image.sh: missing $1: apt-get install $2 (as root)" >&2; exit 1; }
log() { echo "build-scrub-image.sh: $*" >&2; }

test -x /bin/busybox || need /bin/busybox busybox-static
if command -v ldd >/dev/null 2>&1 && ldd /bin/busybox >/dev/null 2>&1; then
	need "a static /bin/busybox" busybox-static
fi
for t in cpio gzip xz modprobe; do
	command -v $t >/dev/null 2>&1 || need "$t" "cpio gzip xz-utils kmod"
done

# The kernel: tests/vm/build.sh's own extraction, into our cache.
AV_VM_ONLY=vmlinux "$here/../vm/build.sh" "$cache" >/dev/null || die "tests/vm/build.sh could not make vmlinux"
test -f "$cache/vmlinux" || die "no $cache/vmlinux after tests/vm/build.sh"
KVER=$(sed -n 's/^\([^ ]*\) .*/\1/p' "$cache/vmlinux.key" 2>/dev/null || true)
if test -z "$KVER"; then
	KVER=${AV_VM_KVER:-$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
		tr ',' '\n' | sed -n 's/^ *linux-image-\([^ ]*\).*/\1/p' | head -n1)}
fi
moddir=/lib/modules/$KVER
test -f "$moddir/modules.dep" || need "$moddir" linux-image-amd64

key() { for f in "$@"; do printf '%s %s\n' "${f##*/}" "$(sha256sum < "$f" | cut -d' ' -f1)"; done | cksum | cut -d' ' -f1; }
fresh() { test -f "$cache/$1" && test -f "$cache/$1.key" && test "$(cat "$cache/$1.key")" = "$2"; }

# pvpanic-mmio drives QEMU's ISA pvpanic device (<panic model='isa'/>): a panic
# of the image reaches libvirt as a crash, not as a hang.
MODULES="pvpanic pvpanic-mmio"
k=$(echo "$KVER $MODULES $(key /bin/busybox "$moddir/modules.dep" "$here/build-scrub-image.sh")")
if ! fresh scrub.cpio.gz "$k"; then
	log "building scrub.cpio.gz ($KVER)"
	root="$cache/scrub-root"
	rm -rf "$root" "$cache/scrub.cpio.gz" "$cache/scrub.cpio.gz.key"
	mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/lib/modules"
	cp /bin/busybox "$root/bin/busybox"
	for app in sh mount echo cat sleep poweroff reboot insmod grep sed; do
		ln -s busybox "$root/bin/$app"
	done
	: >"$root/lib/modules/load.list"
	for m in $MODULES; do
		modprobe --show-depends -S "$KVER" "$m" >"$cache/dep.tmp" 2>&1 ||
			die "modprobe --show-depends $m for $KVER: $(cat "$cache/dep.tmp")"
		while read -r verb path _; do
			test "$verb" = insmod || continue
			name=$(basename "$path"); name=${name%.xz}; name=${name%.zst}; name=${name%.gz}
			grep -qx "$name" "$root/lib/modules/load.list" && continue
			case "$path" in
			*.ko.xz) xz -dc "$path" >"$root/lib/modules/$name" ;;
			*.ko.zst) zstd -qdc "$path" >"$root/lib/modules/$name" ;;
			*.ko.gz) gzip -dc "$path" >"$root/lib/modules/$name" ;;
			*) cp "$path" "$root/lib/modules/$name" ;;
			esac
			echo "$name" >>"$root/lib/modules/load.list"
		done <"$cache/dep.tmp"
	done
	rm -f "$cache/dep.tmp"
	cat >"$root/init" <<'EOF'
#!/bin/sh
# accelvirt's test scrub image (tests/libvirt/build-scrub-image.sh). The contract
# (accelvirt-policy(5), method "vm"): power off only when the scrub succeeded;
# on any failure panic (or reboot, or hang): never power off.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
for m in $(cat /lib/modules/load.list); do insmod "/lib/modules/$m" 2>/dev/null; done
mode=$(sed -n 's/.*accelvirt\.scrub=\([a-z]*\).*/\1/p' /proc/cmdline)
echo "accelvirt-scrub-image: mode ${mode:-poweroff}" >/dev/console
case "${mode:-poweroff}" in
poweroff)
	echo "accelvirt-scrub-image: scrubbed; powering off" >/dev/console
	poweroff -f ;;
hang)
	while :; do sleep 3600; done ;;
panic)
	echo 1 >/proc/sys/kernel/sysrq
	echo c >/proc/sysrq-trigger ;;
reboot)
	reboot -f ;;
esac
# not reached; were it, the kernel panics when init exits: a failure
EOF
	chmod 755 "$root/init"
	(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
		gzip -1 >"$cache/scrub.cpio.gz.tmp"
	mv "$cache/scrub.cpio.gz.tmp" "$cache/scrub.cpio.gz"
	echo "$k" >"$cache/scrub.cpio.gz.key"
fi

echo "$cache"
