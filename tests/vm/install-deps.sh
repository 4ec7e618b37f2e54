#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install what the VM rig (make check-vm) needs, only when something is missing.
# Debian packages only (the same names on Debian 12 and 13). Run as root (CI does:
# .ci/run calls this). `install-deps.sh --list` prints the names and installs nothing.
#   qemu-system-x86   the guest, under TCG
#   linux-image-amd64 the guest kernel (Debian 12: 6.1, 13: 6.12) and its modules; the host keeps
#                     booting its own kernel, a package in /boot changes nothing
#   linux-headers-amd64, linux-source, build-essential
#                     mtty.ko, built out of tree from samples/vfio-mdev/mtty.c
#   busybox-static    the guest's userland
#   kmod cpio gzip xz-utils zstd  module lists, decompression, the initramfs
#   jq python3        checks of the results from the host
#   libvirt-daemon-system, qemu-utils  the end-to-end tier (libvirtd inside the guest)
#   busybox-static linux-image-amd64 gcc libc6-dev cpio gzip kmod
#                     scrub/image/build, the vm method's scrub image (phase V)
set -eu

PKGS="qemu-system-x86 qemu-utils busybox-static linux-image-amd64 linux-headers-amd64
linux-source build-essential gcc libc6-dev kmod cpio gzip xz-utils zstd jq python3
libvirt-daemon-system libvirt-clients"

# --list: print the package names, one per line, and change nothing (the Debian 13
# tier installs them into its root with mmdebstrap: tests/debian13/test-debian13.sh)
if test "${1:-}" = --list; then
    printf '%s\n' $PKGS
    exit 0
fi

missing=
for p in $PKGS; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    test "$st" = installed || missing="$missing $p"
done

if test -z "$missing"; then
    echo "install-deps (vm): all present"
    exit 0
fi

echo "install-deps (vm): installing:$missing"
if test "$(id -u)" != 0; then
    echo "install-deps (vm): must run as root (apt-get install$missing)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Never start services on this host while installing (libvirtd, virtlogd).
policy=/usr/sbin/policy-rc.d
made_policy=
if ! test -e "$policy"; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
fi
trap 'test -z "$made_policy" || rm -f "$policy"' EXIT
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
