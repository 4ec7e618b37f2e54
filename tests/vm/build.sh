#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the VM rig's guest into a cache dir, reusing what is there when its inputs
# are unchanged:
#   vmlinux          uncompressed from /boot/vmlinuz-KVER (TCG boots it ~6 s faster)
#   mtty.ko          the kernel's mdev sample, built out of tree for KVER
#   zero-bar         a static helper that mmaps a PCI BAR (resourceN) and zeroes/reads it
#   fpga-prog        a static stand-in for an FPGA vendor's programmer: writes a bitstream
#                    into an ivshmem's BAR2 through VFIO, with the group file accelvirt
#                    passes as fd 3 (the "program" of tests/vm/fpga-policies, issue 15)
#   initramfs.cpio.gz  busybox-static, the modules below (vfio, mdev, 9p, overlay,
#                      uio_pci_generic, e1000e, usbcore, xhci_pci, nvme) and tests/vm/init.sh as /init
#   scrub-image/       accelvirt's scrub image, made by its recipe (scrub/image/build)
#                      for the same kernel: accelvirt-scrub-vmlinuz and
#                      accelvirt-scrub-initrd.img (the vm scrub method of phase V)
#
# Usage: build.sh [CACHE_DIR]   (default $AV_VM_CACHE, else ./tests/vm/cache)
# Env:   AV_VM_KVER   the guest kernel version (default: what linux-image-amd64 depends on)
# Prints the cache dir on its last line. Exits non-zero, naming install-deps.sh, when a
# requirement is missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${AV_VM_CACHE:-tests/vm/cache}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

die() { echo "build.sh: $*" >&2; exit 1; }
need() { echo "build.sh: missing $1: run tests/vm/install-deps.sh (as root)" >&2; exit 1; }
log() { echo "build.sh: $*" >&2; }

# --- the guest kernel version ---
kver_default=no
if test -z "${AV_VM_KVER:-}"; then
    kver_default=yes
    AV_VM_KVER=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
                 tr ',' '\n' | sed -n 's/^ *linux-image-\([^ ]*\).*/\1/p' | head -n1)
    test -n "$AV_VM_KVER" || need "linux-image-amd64"
fi
KVER=$AV_VM_KVER
vmlinuz=/boot/vmlinuz-$KVER
moddir=/lib/modules/$KVER
kbuild=/usr/src/linux-headers-$KVER
srctar=$(ls /usr/src/linux-source-*.tar.* 2>/dev/null | head -n1 || true)

test -r "$vmlinuz" || need "$vmlinuz (linux-image-amd64)"
# AV_VM_ONLY=vmlinux: only the vmlinux below, then exit (tests/libvirt/build-scrub-image.sh);
# the requirements of the rest are not checked
if test "${AV_VM_ONLY:-}" != vmlinux; then
test -d "$moddir/kernel" || need "$moddir (linux-image-amd64)"
test -f "$kbuild/Makefile" || need "$kbuild (linux-headers-amd64)"
test -n "$srctar" || need "/usr/src/linux-source-*.tar.xz (linux-source)"
test -x /bin/busybox || need "/bin/busybox (busybox-static)"
for t in gcc make modprobe cpio gzip xz qemu-system-x86_64 timeout; do
    command -v $t >/dev/null 2>&1 || need "$t"
done
# the end-to-end boot runs the host's libvirtd, virtlogd and virsh inside the guest
for t in /usr/sbin/libvirtd /usr/sbin/virtlogd /usr/bin/virsh; do
    test -x "$t" || need "$t (libvirt-daemon-system, libvirt-clients)"
done
command -v python3 >/dev/null 2>&1 || need "python3"
# busybox must be static: it is the whole userland of the initramfs.
if command -v ldd >/dev/null 2>&1 && ldd /bin/busybox >/dev/null 2>&1; then
    need "a static /bin/busybox (busybox-static)"
fi
fi  # AV_VM_ONLY

# key FILE...: a string that changes when any input's content changes (its name and
# sha256, not its path or mtime: a cache shared by clones, as CI's, stays valid)
key() { for f in "$@"; do printf '%s %s\n' "${f##*/}" "$(sha256sum < "$f" | cut -d' ' -f1)"; done | cksum | cut -d' ' -f1; }
fresh() { test -f "$cache/$1" && test -f "$cache/$1.key" && test "$(cat "$cache/$1.key")" = "$2"; }
stamp() { echo "$2" > "$cache/$1.key"; }

# --- vmlinux: find the compression magic in the bzImage and decompress from there ---
k=$(echo "$KVER $(key "$vmlinuz" "$here/build.sh")")
if ! fresh vmlinux "$k"; then
    log "extracting vmlinux from $vmlinuz"
    rm -f "$cache/vmlinux" "$cache/vmlinux.key"
    tmp="$cache/vmlinux.tmp"
    is_elf() { test "$(od -A n -N 4 -t x1 "$1" 2>/dev/null | tr -d ' ')" = 7f454c46; }
    try() {  # try MAGIC(as grep -P \x escapes) DECOMPRESSOR...: the extract-vmlinux trick
        magic=$1; shift
        for pos in $(LC_ALL=C grep -obUaP "$magic" "$vmlinuz" 2>/dev/null | cut -d: -f1); do
            tail -c +$((pos + 1)) "$vmlinuz" | "$@" > "$tmp" 2>/dev/null || true
            if is_elf "$tmp"; then return 0; fi
        done
        return 1
    }
    if try '\xfd\x37\x7a\x58\x5a\x00' xz -dc ||
       try '\x28\xb5\x2f\xfd' zstd -dc ||
       try '\x1f\x8b\x08' gzip -dc ||
       try '\x02\x21\x4c\x18' lz4 -dc ||
       try '\x42\x5a\x68' bzip2 -dc ||
       try '\x5d\x00\x00\x00' xz --format=lzma -dc; then
        mv "$tmp" "$cache/vmlinux"
        stamp vmlinux "$k"
    else
        rm -f "$tmp"
        die "could not extract an ELF vmlinux from $vmlinuz (need xz-utils/zstd/gzip)"
    fi
fi
if test "${AV_VM_ONLY:-}" = vmlinux; then echo "$cache"; exit 0; fi

# --- mtty.ko: samples/vfio-mdev/mtty.c from linux-source, Kbuild against the headers ---
k=$(echo "$KVER $(key "$srctar" "$kbuild/Makefile" "$moddir/modules.dep" "$here/build.sh")")
if ! fresh mtty.ko "$k"; then
    log "building mtty.ko for $KVER"
    rm -rf "$cache/mtty" "$cache/mtty.ko" "$cache/mtty.ko.key"
    mkdir -p "$cache/mtty"
    top=$(basename "$srctar" | sed 's/\.tar\..*//')
    case "$srctar" in
        *.xz) dec="xz -dc" ;; *.bz2) dec="bzip2 -dc" ;; *.gz) dec="gzip -dc" ;; *.zst) dec="zstd -dc" ;;
        *) die "unknown compression: $srctar" ;;
    esac
    $dec "$srctar" | tar -x -f - -C "$cache/mtty" --occurrence=1 --strip-components=3 \
        "$top/samples/vfio-mdev/mtty.c" || die "no samples/vfio-mdev/mtty.c in $srctar"
    echo 'obj-m := mtty.o' > "$cache/mtty/Kbuild"
    make -s -C "$kbuild" M="$cache/mtty" modules >"$cache/mtty/build.log" 2>&1 ||
        { cat "$cache/mtty/build.log" >&2; die "mtty.ko build failed"; }
    cp "$cache/mtty/mtty.ko" "$cache/mtty.ko"
    stamp mtty.ko "$k"
fi

# --- zero-bar: static helper (the real scrubber comes later) ---
k=$(key "$here/zero-bar.c" "$(command -v gcc)")
if ! fresh zero-bar "$k"; then
    log "building zero-bar"
    gcc -static -O2 -Wall -Werror -o "$cache/zero-bar" "$here/zero-bar.c" ||
        need "a static libc (libc6-dev, build-essential)"
    stamp zero-bar "$k"
fi

# --- fpga-prog: the rig's FPGA programmer (run by accelvirt in boot 2, phase F) ---
k=$(key "$here/fpga-prog.c" "$(command -v gcc)" /usr/include/linux/vfio.h)
if ! fresh fpga-prog "$k"; then
    log "building fpga-prog"
    gcc -static -O2 -Wall -Werror -o "$cache/fpga-prog" "$here/fpga-prog.c" ||
        need "a static libc and the kernel's UAPI headers (libc6-dev, linux-libc-dev, build-essential)"
    stamp fpga-prog "$k"
fi

# --- the scrub image, by its recipe (scrub/image/build), keyed on the recipe's inputs ---
# With the default kernel the recipe finds it itself (linux-image-amd64's, as here: its
# default path is exercised); with AV_VM_KVER it is given that kernel.
recipe=$(cd "$here/../../scrub/image" && pwd)
k=$(echo "$KVER $(key "$recipe/build" "$recipe/init" "$recipe/accelvirt-scrub-bars.c" /bin/busybox \
        "$vmlinuz" "$moddir/modules.dep" "$(command -v gcc)")")
if ! test -f "$cache/scrub-image/accelvirt-scrub-initrd.img" || ! test -f "$cache/scrub-image/accelvirt-scrub-vmlinuz" ||
   test "$(cat "$cache/scrub-image.key" 2>/dev/null)" != "$k"; then
    log "building the scrub image with scrub/image/build"
    rm -rf "$cache/scrub-image" "$cache/scrub-image.key"
    if test "$kver_default" = yes; then set --; else set -- --kernel "$vmlinuz" --modules "$moddir"; fi
    bash "$recipe/build" --out "$cache/scrub-image" "$@" >"$cache/scrub-image.log" 2>&1 ||
        { cat "$cache/scrub-image.log" >&2; die "scrub/image/build failed"; }
    grep -q "^scrub/image/build: kernel $KVER," "$cache/scrub-image.log" ||
        { cat "$cache/scrub-image.log" >&2; die "scrub/image/build did not use kernel $KVER"; }
    stamp scrub-image "$k"
fi

# --- initramfs ---
# (uio_pci_generic: a host driver for ivshmem, so that the hook's exact driver restore
# can be seen; it binds nothing until a scenario gives it an id; e1000e: the guest's own
# NIC driver, bound at boot to the rig's e1000e functions, which the hook must not touch
# unless a profile hands them out; usbcore and xhci_pci: the USB sticks on the rig's
# xHCI, with no driver of their own; nvme: the SR-IOV PF's host driver, which offers
# sriov_numvfs)
MODULES="irqbypass vfio vfio_iommu_type1 vfio_virqfd vfio-pci-core vfio-pci mdev
virtio_pci 9pnet_virtio 9p netfs fscache overlay uio_pci_generic e1000e
usbcore xhci_pci nvme"
# Modules that newer kernels no longer have as modules of their own: vfio_virqfd is
# part of vfio since 6.2 (CONFIG_VFIO_VIRQFD=y), fscache part of netfs since 6.8
# (CONFIG_FSCACHE=y; both so in Debian 13's 6.12): their absence is not an error where
# the kernel's config says it built them in. (Debian's 6.12 has no iommufd: no cdevs.)
MERGED="vfio_virqfd fscache"
k=$(echo "$KVER $MODULES $(key "$cache/vmlinux" "$cache/mtty.ko" "$cache/zero-bar" \
        /bin/busybox "$moddir/modules.dep" "$here/init.sh" "$here/build.sh")")
if ! fresh initramfs.cpio.gz "$k"; then
    log "building initramfs"
    root="$cache/initramfs"
    rm -rf "$root" "$cache/initramfs.cpio.gz" "$cache/initramfs.cpio.gz.key"
    mkdir -p "$root/bin" "$root/sbin" "$root/dev" "$root/proc" "$root/sys" "$root/tmp" \
        "$root/run" "$root/host" "$root/results" "$root/newroot" "$root/lib/modules" \
        "$root/usr/bin" "$root/usr/sbin" "$root/etc"
    cp /bin/busybox "$root/bin/busybox"
    for app in $(/bin/busybox --list); do
        test "$app" = busybox || ln -sf busybox "$root/bin/$app"
    done
    cp "$here/init.sh" "$root/init"
    chmod 755 "$root/init"
    cp "$cache/zero-bar" "$root/bin/zero-bar"
    # modules in load order (dependencies first), decompressed; builtins skipped
    : > "$root/lib/modules/load.list"
    for m in $MODULES; do
        if ! modprobe --show-depends -S "$KVER" "$m" >"$cache/dep.tmp" 2>&1; then
            cfg=$(echo "CONFIG_$m" | tr 'a-z' 'A-Z')
            case " $MERGED " in
                *" $m "*) if grep -qx "$cfg=y" "/boot/config-$KVER" 2>/dev/null; then
                              log "$m: built into $KVER ($cfg=y), no module to load"; continue
                          fi ;;
            esac
            die "modprobe --show-depends $m for $KVER: $(cat "$cache/dep.tmp")"
        fi
        while read -r verb path _; do
            test "$verb" = insmod || continue
            name=$(basename "$path"); name=${name%.xz}; name=${name%.zst}; name=${name%.gz}
            grep -qx "$name" "$root/lib/modules/load.list" && continue
            case "$path" in
                *.ko.xz) xz -dc "$path" > "$root/lib/modules/$name" ;;
                *.ko.zst) zstd -qdc "$path" > "$root/lib/modules/$name" ;;
                *.ko.gz) gzip -dc "$path" > "$root/lib/modules/$name" ;;
                *) cp "$path" "$root/lib/modules/$name" ;;
            esac
            echo "$name" >> "$root/lib/modules/load.list"
        done < "$cache/dep.tmp"
    done
    rm -f "$cache/dep.tmp"
    cp "$cache/mtty.ko" "$root/lib/modules/mtty.ko"   # loaded by scenarios, not at boot
    echo "$KVER" > "$root/etc/kver"
    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
        gzip -1 > "$cache/initramfs.cpio.gz"
    stamp initramfs.cpio.gz "$k"
fi

echo "$cache"
