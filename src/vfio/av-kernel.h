/* accelvirt: the writes the kernel acts on, as a table of operations.
 *
 * Driver binding, mdev create/remove and friends are writes to sysfs
 * attributes.  They all go through an AvKernelOps (QEMU's io_ops idea): on the
 * real root ("/") the real table writes the files and the kernel acts; on a
 * fake tree (any other root prefix) there is no kernel behind the files, so
 * the fake table emulates what the kernel would do to the tree, as libvirt's
 * virpcimock does:
 *
 *   /sys/bus/pci/devices/ADDR/driver_override   stores the value ("\n" clears: "(null)")
 *   /sys/bus/pci/drivers/DRV/unbind  ADDR       removes ADDR's driver link and DRV/ADDR
 *   /sys/bus/pci/drivers/DRV/bind    ADDR       links ADDR to DRV (-ENODEV if DRV/ is absent)
 *   /sys/bus/pci/drivers_probe       ADDR       binds ADDR to its driver_override
 *                                               (no override: -ENODEV)
 *   .../mdev_supported_types/TYPE/create UUID   creates the mdev (directory under the parent,
 *                                               reached through /sys/class/mdev_bus/NAME or
 *                                               /sys/bus/pci/devices/ADDR: a PCI parent or a
 *                                               virtual one such as mtty alike;
 *                                               mdev_type and iommu_group links, the
 *                                               /sys/bus/mdev/devices link, one instance less)
 *   /sys/bus/mdev/devices/UUID/remove "1"       removes it again
 *   /sys/bus/pci/devices/ADDR/resourceN_resize B  with no driver bound (else -EBUSY) and bit B
 *                                               in the file's bitmap (else -EINVAL; the file
 *                                               keeps it): resourceN becomes 2^(B+20) bytes
 *                                               and line N of "resource" ends there
 *
 * and keeps /dev/vfio/GROUP present exactly while a device of GROUP is bound
 * to vfio-pci.  A fake tree may hold a file "sys/.accelvirt-fake-kernel"
 * with lines "fail PATH ERRNO" (such as "fail /sys/bus/pci/drivers_probe 5")
 * to make the emulated kernel fail a write, for rollback tests.
 *
 * Opening a device for scrubbing (device_open and friends) is emulated too:
 *
 *   device_open      the device must exist (else -ENODEV), have an IOMMU group
 *                    (else -ENODEV) and be bound to vfio-pci (else -ENODEV, as
 *                    VFIO_GROUP_GET_DEVICE_FD answers for a device vfio does
 *                    not hold); /dev/vfio/GROUP must exist (else -ENOENT).
 *                    "fail /dev/vfio/GROUP ERRNO" fails it as opening the group
 *                    would ("fail /dev/vfio/40 16": a QEMU holds group 40).
 *                    The handle keeps the group file open, flock()ed (see
 *                    group_open), until device_close; -EBUSY while another
 *                    open file holds that lock.
 *   group_open       opens the tree's regular file /dev/vfio/GROUP (absent:
 *                    -ENOENT; "fail /dev/vfio/GROUP ERRNO" fails it) and
 *                    emulates the kernel's "one open file of a group at a
 *                    time" (vfio_group_fops_open) with flock(LOCK_EX |
 *                    LOCK_NB) on it: a lock belongs to the open file
 *                    description, so it survives fork() and dup() and goes
 *                    when the last fd on it closes; EWOULDBLOCK is -EBUSY.
 *   device_open_held as device_open, through a group file the caller holds
 *                    open already (from group_open): no flock of its own,
 *                    and device_close leaves the held file alone.
 *   device_region    BAR N is the tree's regular file
 *                    /sys/bus/pci/devices/ADDR/resourceN, as sysfs has one per
 *                    BAR: size = the file's size (no file: size 0), offset 0,
 *                    mmap_ok, readable and writable; memory unless the tree's
 *                    "resource" file flags the BAR as I/O (IORESOURCE_IO).
 *   device_reset     appends "VFIO_DEVICE_RESET ADDR" to the tree's file
 *                    "sys/.accelvirt-fake-kernel.log" (created when absent),
 *                    unless "fail VFIO_DEVICE_RESET:ADDR ERRNO" (a glob, as
 *                    "VFIO_DEVICE_RESET:*") fails it ("... 25": -ENOTTY, no
 *                    reset).  device_open appends "VFIO_GROUP_GET_DEVICE_FD
 *                    ADDR" and device_close "close ADDR" to the same log.
 *
 * USB devices have two operations of their own:
 *
 *   usb_reset        USBDEVFS_RESET on /dev/bus/usb/BBB/DDD: the node must
 *                    exist in the tree (else -ENOENT); appends
 *                    "USBDEVFS_RESET BBB/DDD" to the fake kernel's log,
 *                    unless "fail USBDEVFS_RESET:BBB/DDD ERRNO" (a glob, as
 *                    "USBDEVFS_RESET:*") fails it.
 *   /sys/bus/usb/devices/PATH/authorized "0" then "1"
 *                    (a write through the table): "0" stores it and logs
 *                    "USB_DEAUTHORIZE PATH"; "1" after "0" re-enumerates the
 *                    device as the kernel does: a new devnum (one above the
 *                    highest of its bus), its /dev/bus/usb node moved, and
 *                    "USB_AUTHORIZE PATH devnum N" logged.
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

/* The file of the fake kernel's log of device operations, root-relative
 * (see above); tests read it. */
#define AV_KERNEL_FAKE_LOG ".accelvirt-fake-kernel.log"
/* The file under the fake tree's /sys where the fake table records every
 * write, one "PATH VALUE" line each (the value escaped as C does). */
#define AV_KERNEL_FAKE_WRITES ".accelvirt-fake-kernel.writes"

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
} AvKernelOps;

/* The table for @root: the real one when the root is "/", else the fake. */
const AvKernelOps *av_kernel_ops_for(const AvRoot *root);

extern const AvKernelOps av_kernel_ops_real;
extern const AvKernelOps av_kernel_ops_fake;

G_END_DECLS
