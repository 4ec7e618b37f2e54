#!/bin/sh
# capture-host.sh [SRC_ROOT] DEST
#
# Copies, read-only, the parts of a live sysfs that accelvirt reads
# (src/pci: av_host_scan) from SRC_ROOT/sys (default: /sys) into DEST/sys, so
# that `accelvirt --root DEST list` reads what `accelvirt list` reads on the
# host itself:
#
#   sys/bus/pci/devices/*            links, as they are
#   sys/devices/pci*/...             PCI functions: only the attributes the scan
#                                    reads, their network interfaces (net/NAME/
#                                    ifindex); USB devices; mdev types and mdevs
#   sys/bus/pci/drivers/*/           driver directories and their device links
#   sys/bus/pci/slots/*/address
#   sys/kernel/iommu_groups/*/       type and devices/* links
#   sys/devices/system/node/         online, nodeN/cpulist, nodeN/meminfo
#   sys/devices/system/cpu/online
#   sys/bus/usb/devices/*, sys/bus/mdev/devices/*   links
#   sys/class/mdev_bus/*             links to every mdev parent, with the
#                                    non-PCI ones' device directories
#   proc/meminfo                     (the memory of node 0 without NUMA)
#   proc/sys/kernel/osrelease, and lib/modules/RELEASE/modules.alias's
#                                    "alias vfio_pci:" lines only (which vfio
#                                    driver the kernel offers each function)
#
# Symlinks are recreated exactly as they are (the kernel's are relative) and
# never followed: find(1) does not descend through them.  Regular files are
# read with cat, because sysfs reports sizes that are not the contents' (no
# cp or tar of sysfs files).  Nothing with side effects or secrets is read:
# no resource*, rom, remove, rescan; "reset" is recreated empty without
# reading it.  Unreadable attributes are skipped silently.  Nothing is ever
# written under SRC_ROOT.
#
# The kernel interfaces: Documentation/ABI/testing/sysfs-bus-pci,
# sysfs-bus-usb, sysfs-bus-vfio-mdev, sysfs-kernel-iommu_groups,
# stable/sysfs-devices-node.

set -u

usage() {
    echo "usage: $0 [SRC_ROOT] DEST" >&2
    exit 2
}

case $# in
    1) SRC=/; DEST=$1 ;;
    2) SRC=$1; DEST=$2 ;;
    *) usage ;;
esac

[ -d "$SRC/sys" ] || { echo "$0: '$SRC/sys' is not a directory" >&2; exit 1; }
mkdir -p "$DEST" || exit 1
# Canonical absolute paths; "/" becomes "" so that "$SRC/sys" is "/sys".
SRC=$(cd "$SRC" && pwd -P) || exit 1
DEST=$(cd "$DEST" && pwd -P) || exit 1
[ "$SRC" = / ] && SRC=
case "$DEST/" in
    "$SRC"/sys/*|"$SRC"/proc/*) echo "$0: DEST must not be inside '$SRC/sys'" >&2; exit 1 ;;
esac

# copy_file SRC_PATH: the contents of a regular file, read with cat.
copy_file() {
    dst=$DEST${1#"$SRC"}
    mkdir -p "${dst%/*}" 2>/dev/null || return 0
    if ! cat "$1" > "$dst" 2>/dev/null; then
        rm -f "$dst"
    fi
}

# copy_link SRC_PATH: the symlink itself, with its target unchanged.
copy_link() {
    target=$(readlink "$1") || return 0
    dst=$DEST${1#"$SRC"}
    mkdir -p "${dst%/*}" 2>/dev/null || return 0
    rm -f "$dst"
    ln -s "$target" "$dst" 2>/dev/null || true
}

# copy_dir SRC_PATH: the directory, empty.
copy_dir() {
    mkdir -p "$DEST${1#"$SRC"}" 2>/dev/null || true
}

# empty_file SRC_PATH: an empty file in place of one that must not be read.
empty_file() {
    dst=$DEST${1#"$SRC"}
    mkdir -p "${dst%/*}" 2>/dev/null || return 0
    : > "$dst"
}

# copy_links DIR: every symlink directly in DIR.
copy_links() {
    [ -d "$1" ] || return 0
    for l in "$1"/* "$1"/.[!.]*; do
        [ -L "$l" ] && copy_link "$l"
    done
}

is_pci_address() {
    case $1 in
        [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]) return 0 ;;
    esac
    return 1
}

is_uuid() {
    case $1 in
        ????????-????-????-????-????????????) return 0 ;;
    esac
    return 1
}

# --- the device tree: PCI functions, USB devices, mdevs ---
copy_device_tree() {
    top=$1
    [ -d "$top" ] || return 0
    [ -L "$top" ] && return 0
    copy_dir "$top"
    # Only names the scan reads; find lists links without following them.
    find "$top" \( -type f -o -type l \) \( \
        -name vendor -o -name device -o -name subsystem_vendor -o -name subsystem_device \
        -o -name class -o -name revision -o -name numa_node -o -name local_cpulist \
        -o -name driver_override -o -name config -o -name reset_method -o -name reset \
        -o -name sriov_totalvfs -o -name sriov_numvfs -o -name sriov_vf_device \
        -o -name sriov_offset -o -name sriov_stride \
        -o -name driver -o -name iommu_group -o -name physfn -o -name 'virtfn[0-9]*' \
        -o -name mdev_type -o -name name -o -name available_instances -o -name device_api \
        -o -name description \
        -o -name idVendor -o -name idProduct -o -name manufacturer -o -name product \
        -o -name serial -o -name busnum -o -name devnum -o -name speed -o -name bDeviceClass \
        -o -name ifindex \
        \) -print 2>/dev/null |
    while IFS= read -r f; do
        name=${f##*/}
        dir=${f%/*}
        base=${dir##*/}
        if is_pci_address "$base"; then
            case $name in
                driver|iommu_group|physfn|virtfn*)
                    [ -L "$f" ] && copy_link "$f" ;;
                reset)
                    [ -f "$f" ] && [ ! -L "$f" ] && empty_file "$f" ;;
                vendor|device|subsystem_vendor|subsystem_device|class|revision|numa_node|\
                local_cpulist|driver_override|config|reset_method|sriov_totalvfs|sriov_numvfs|\
                sriov_vf_device|sriov_offset|sriov_stride)
                    [ -f "$f" ] && [ ! -L "$f" ] && copy_file "$f" ;;
            esac
            continue
        fi
        parent=${dir%/*}
        case $name in
            ifindex)
                # A function's network interfaces: net/NAME, as its driver
                # made them (the names are what list shows).
                gparent=${parent%/*}
                [ "${parent##*/}" = net ] && is_pci_address "${gparent##*/}" && [ -f "$f" ] && [ ! -L "$f" ] &&
                    copy_file "$f"
                continue ;;
            mdev_type)
                is_uuid "$base" && [ -L "$f" ] && copy_link "$f"
                continue ;;
            name|available_instances|device_api|description)
                if [ "${parent##*/}" = mdev_supported_types ] && [ -f "$f" ] && [ ! -L "$f" ]; then
                    copy_file "$f"
                    copy_dir "$dir/devices"
                fi
                continue ;;
        esac
        # USB devices: directories that hold idVendor (interfaces do not).
        if [ -f "$dir/idVendor" ] && [ ! -L "$f" ] && [ -f "$f" ]; then
            case $name in
                idVendor|idProduct|manufacturer|product|serial|busnum|devnum|speed|bDeviceClass)
                    copy_file "$f" ;;
            esac
        fi
    done
}
for top in "$SRC"/sys/devices/pci*; do
    copy_device_tree "$top"
done
# mdev parents that are not PCI devices (the mtty sample, s390's vfio_ap):
# their devices under sys/devices/virtual, found through class/mdev_bus.
src_abs=$(cd "$SRC" && pwd -P)
src_abs=${src_abs%/}
for l in "$SRC"/sys/class/mdev_bus/*; do
    [ -L "$l" ] || continue
    t=$(readlink -f "$l") || continue
    case $t in
        "$src_abs"/sys/devices/pci*) ;;
        "$src_abs"/sys/devices/*) copy_device_tree "$SRC${t#"$src_abs"}" ;;
    esac
done
copy_links "$SRC/sys/class/mdev_bus"

# --- bus/pci ---
copy_links "$SRC/sys/bus/pci/devices"
copy_dir "$SRC/sys/bus/pci/devices"
for drv in "$SRC"/sys/bus/pci/drivers/*; do
    if [ ! -d "$drv" ] || [ -L "$drv" ]; then continue; fi
    copy_dir "$drv"
    for l in "$drv"/*; do
        [ -L "$l" ] && is_pci_address "${l##*/}" && copy_link "$l"
    done
done
for slot in "$SRC"/sys/bus/pci/slots/*; do
    [ -f "$slot/address" ] && [ ! -L "$slot/address" ] && copy_file "$slot/address"
done

# --- IOMMU groups ---
copy_dir "$SRC/sys/kernel/iommu_groups"
for g in "$SRC"/sys/kernel/iommu_groups/*; do
    if [ ! -d "$g" ] || [ -L "$g" ]; then continue; fi
    copy_dir "$g/devices"
    [ -f "$g/type" ] && copy_file "$g/type"
    copy_links "$g/devices"
done

# --- NUMA and CPUs ---
for f in online possible has_cpu has_memory has_normal_memory; do
    [ -f "$SRC/sys/devices/system/node/$f" ] && copy_file "$SRC/sys/devices/system/node/$f"
done
for n in "$SRC"/sys/devices/system/node/node[0-9]*; do
    if [ ! -d "$n" ] || [ -L "$n" ]; then continue; fi
    for f in cpulist meminfo; do
        [ -f "$n/$f" ] && copy_file "$n/$f"
    done
done
for f in online possible; do
    [ -f "$SRC/sys/devices/system/cpu/$f" ] && copy_file "$SRC/sys/devices/system/cpu/$f"
done
[ -f "$SRC/proc/meminfo" ] && copy_file "$SRC/proc/meminfo"

# --- the running kernel's vfio drivers (vfio-pci and its variants) ---
if [ -f "$SRC/proc/sys/kernel/osrelease" ]; then
    copy_file "$SRC/proc/sys/kernel/osrelease"
    rel=$(cat "$SRC/proc/sys/kernel/osrelease" 2>/dev/null)
    case $rel in
        ''|*/*|.|..) ;;
        *)
            if [ -f "$SRC/lib/modules/$rel/modules.alias" ] && mkdir -p "$DEST/lib/modules/$rel"; then
                grep '^alias vfio_pci:' "$SRC/lib/modules/$rel/modules.alias" \
                    > "$DEST/lib/modules/$rel/modules.alias" 2>/dev/null || true
            fi
            ;;
    esac
fi

# --- USB and mdev buses ---
copy_links "$SRC/sys/bus/usb/devices"
copy_links "$SRC/sys/bus/mdev/devices"

exit 0
