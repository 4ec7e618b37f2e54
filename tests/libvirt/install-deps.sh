#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install what the host libvirt tier (make check-libvirt) needs on Debian 12:
# the monolithic libvirtd 9.0, virsh, QEMU (TCG is enough) and tini.
#
# Runs apt-get update only when a package is missing. Keeps the packages'
# maintainer scripts from starting the system libvirtd/virtlogd: the tier runs
# its own private daemon (tests/libvirt/harness.sh) and never uses the host's.
# Idempotent; prints nothing but one line when everything is already there.
set -eu

PKGS="libvirt-daemon-system libvirt-clients qemu-system-x86 tini util-linux coreutils"

missing=
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$st" in
	ii*) ;;
	*) missing="$missing $p" ;;
	esac
done

if [ -z "$missing" ]; then
	echo "install-deps (libvirt tier): all present: $PKGS"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "install-deps (libvirt tier): missing:$missing; run as root" >&2
	exit 1
fi

echo "install-deps (libvirt tier): installing:$missing"

# Keep invoke-rc.d from starting services during the install (no systemd on
# these machines; a started system libvirtd would be harmless to the tier but
# is a change to the host). Only ours if there was none; removed afterwards.
policy=/usr/sbin/policy-rc.d
ours=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# accelvirt install-deps: temporary, do not start services\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	ours=1
fi
cleanup() { if [ -n "$ours" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock held by another install rather than fail.
apt_opts="-q -y -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
apt-get update -q -o DPkg::Lock::Timeout=600
# shellcheck disable=SC2086
apt-get install $apt_opts --no-install-recommends $missing </dev/null

for b in libvirtd virtlogd virsh qemu-system-x86_64 tini unshare; do
	command -v "$b" >/dev/null 2>&1 || {
		echo "install-deps (libvirt tier): $b still not found after install" >&2
		exit 1
	}
done
echo "install-deps (libvirt tier): done"
