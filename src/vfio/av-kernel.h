/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the writes the kernel acts on, as a table of operations.
 *
 * Driver binding, mdev create/remove and friends are writes to sysfs
 * attributes.  They all go through an AvKernelOps (QEMU's io_ops idea): on the
 * real root ("/") the real table writes the files and the kernel acts.  On a
 * fake tree (any other root prefix) there is no kernel behind the files:
 *
 *   - the test builds (tests/bin/, the unit tests: docs/testing.md) register
 *     the emulated kernel of tests/doubles/av-kernel-fake.c, which does to
 *     the tree what the kernel would (as libvirt's virpcimock does; its
 *     list of what it emulates is in tests/doubles/av-doubles.h);
 *   - the installed programs have no emulated kernel: under a root prefix
 *     they read the tree (`accelvirt --root COPY list` of a captured host)
 *     but every operation of the table (av_kernel_ops_none) is refused with
 *     -EROFS, so nothing is written there, and a command that needs the
 *     kernel fails with one line ("...: Read-only file system") rather than
 *     write files that no kernel acts on.
 *
 * Kernel interfaces: Documentation/ABI/testing/sysfs-bus-usb (authorized),
 * include/uapi/linux/usbdevice_fs.h (USBDEVFS_RESET),
 * Documentation/ABI/testing/sysfs-bus-pci (driver_override,
 * bind, unbind, drivers_probe), Documentation/driver-api/vfio-mediated-device.rst. */
#pragma once

#include <glib.h>

#include "util/av-root.h"

G_BEGIN_DECLS

/* A device opened for its memory and its reset: on the real kernel through
 * VFIO (Documentation/driver-api/vfio.rst: a container, the device's group,
 * VFIO_GROUP_GET_DEVICE_FD); on a fake tree, the tree's resourceN files
 * stand for the BARs. */
typedef struct AvDeviceHandle AvDeviceHandle;

/* One region (BAR) of an opened device, as VFIO_DEVICE_GET_REGION_INFO says. */
typedef struct {
    int fd;                      /* where to pread/pwrite/mmap it (owned by the handle) */
    guint64 offset;              /* of the region in @fd */
    guint64 size;                /* 0: the BAR is not implemented */
    gboolean mmap_ok;            /* the region may be mmapped (VFIO_REGION_INFO_FLAG_MMAP) */
    gboolean is_memory;          /* a memory BAR, not an I/O port BAR */
    gboolean prefetchable;       /* a prefetchable memory BAR: memory, not registers (IORESOURCE_PREFETCH) */
    gboolean readable;           /* VFIO_REGION_INFO_FLAG_READ: pread works */
    gboolean writable;           /* VFIO_REGION_INFO_FLAG_WRITE: pwrite works */
} AvRegion;

/* The BAR count of a PCI function: regions 0 to 5 (VFIO_PCI_BAR0_REGION_INDEX
 * to VFIO_PCI_BAR5_REGION_INDEX). */
#define AV_PCI_BAR_COUNT 6

typedef struct {
    const char *name;            /* "real" or "fake" */
    /* Writes @value to the root-relative attribute @path as one write(2).
     * Returns 0 or -errno (the kernel's answer). */
    int (*write)(const AvRoot *root, const char *path, const char *value);
    /* Opens the PCI device @address, which must be bound to vfio-pci, for
     * scrubbing.  Returns 0 and a handle, or -errno: -ENOENT (no
     * /dev/vfio/vfio or /dev/vfio/GROUP: vfio not loaded, or no device of the
     * group on vfio-pci), -ENODEV (no such device, no IOMMU group, or not
     * bound to vfio-pci), -EBUSY (another process, such as a domain's QEMU,
     * holds the group), -EPERM (the group is not viable: a member is bound to
     * a host driver), -EPROTONOSUPPORT (the VFIO API version is not
     * VFIO_API_VERSION, or there is no Type1 IOMMU), -EACCES. */
    int (*device_open)(const AvRoot *root, const char *address, AvDeviceHandle **ret_handle);
    /* As device_open, but through the VFIO group file @group_fd that the
     * caller holds open already (group_open(), or a dup of an accelvirt
     * holder's fd: av_hold_fd()), so that no second open of the group is
     * needed (the kernel allows one open file of a group at a time).  The
     * real kernel dups @group_fd, sets the new container on it
     * (VFIO_GROUP_SET_CONTAINER) and, at device_close, closes the device,
     * VFIO_GROUP_UNSET_CONTAINER on the dup (the held file stays open, so
     * the kernel would not leave the container by itself), then closes the
     * dup.  @group_fd stays the caller's.  Returns 0 and a handle, or -errno
     * as device_open (-ENODEV: @address is not a member of the group). */
    int (*device_open_held)(const AvRoot *root, const char *address, int group_fd, AvDeviceHandle **ret_handle);
    /* Opens the VFIO group file /dev/vfio/@group read-write, close-on-exec
     * (Documentation/driver-api/vfio.rst).  Returns an fd (the caller's)
     * or -errno: -EBUSY when another open file of the group exists (a
     * domain's QEMU, an accelvirt holder), -ENOENT when no member of the
     * group is on vfio-pci, -EPERM/-EACCES. */
    int (*group_open)(const AvRoot *root, int group, int *ret_fd);
    /* Describes region @index (0-5: the BARs) of an opened device.  Returns 0
     * (a region of size 0 when the BAR is absent) or -errno (-EINVAL for an
     * index above 5).  The region's fd stays owned by the handle. */
    int (*device_region)(AvDeviceHandle *handle, guint index, AvRegion *ret_region);
    /* Resets the opened device through VFIO (VFIO_DEVICE_RESET).  Returns 0,
     * -ENOTTY when the device has no reset VFIO can do, or -errno. */
    int (*device_reset)(AvDeviceHandle *handle);
    /* Closes the device, its group and container.  NULL is a no-op. */
    void (*device_close)(AvDeviceHandle *handle);
    /* Resets the USB device @devnum of bus @busnum through usbfs
     * (USBDEVFS_RESET on the root-relative /dev/bus/usb/BBB/DDD, a port
     * reset: the kernel re-runs the device's enumeration on the same
     * address).  Returns 0 or -errno (-ENOENT: no such node). */
    int (*usb_reset)(const AvRoot *root, guint busnum, guint devnum);
    /* The ifindex of the network interface the kernel finds by @name, as
     * if_nametoindex(3) (SIOCGIFINDEX) does: a primary name or an
     * alternative name (udev's altnames, "ip link property add"), which
     * sysfs does not list but which libvirt's macvtap code resolves alike.
     * Returns 0 or -errno (-ENODEV: no interface of that name). */
    int (*netdev_index)(const AvRoot *root, const char *name, guint *ret_index);
} AvKernelOps;

/* The table for @root: the real one when the root is "/"; else the
 * double registered with av_kernel_ops_set_double() (the test builds' emulated
 * kernel), or without one av_kernel_ops_none. */
const AvKernelOps *av_kernel_ops_for(const AvRoot *root);

/* The hook point of the emulated kernel: the test doubles' constructor
 * (tests/doubles/av-doubles.c) registers it; production code never calls
 * this.  @ops is borrowed for the life of the process. */
void av_kernel_ops_set_double(const AvKernelOps *ops);

/* The primary name of the network interface the kernel finds by @name (a
 * primary name in sysfs' class/net, else an alternative name or any name
 * the kernel resolves: @ops' netdev_index, matched with each interface's
 * ifindex), or NULL when none (caller frees). */
char *av_kernel_netdev_primary(const AvRoot *root, const AvKernelOps *ops, const char *name);

/* The PCI address of the device whose driver made the interface @name
 * (av_kernel_netdev_primary(), then its class/net/NAME/device link), or
 * NULL (no such interface, a virtual one; caller frees).  The hook's
 * prepare and the audit of watch read a domain's interfaces through it. */
char *av_kernel_netdev_card(const AvRoot *root, const AvKernelOps *ops, const char *name);

extern const AvKernelOps av_kernel_ops_real;
/* Refuses every operation with -EROFS (device_close frees a handle, of
 * which it never makes one): a root prefix without the emulated kernel. */
extern const AvKernelOps av_kernel_ops_none;

G_END_DECLS
