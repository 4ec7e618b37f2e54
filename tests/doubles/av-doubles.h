/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt test doubles: libaccelvirt-testdoubles.a, linked into the test
 * builds only (tests/bin/, the unit tests; docs/testing.md), never into an
 * installed program (tests/test-doubles.sh checks).  av-doubles.c registers
 * them, from a constructor, at the hook points that production code keeps
 * (src/util/av-point.h lists them):
 *
 *   av-kernel-fake.c   the emulated kernel (av_kernel_ops_fake), on every
 *                      root prefix other than "/"
 *   av-points.c        the crash and stop points and the settings of the
 *                      tests' environment: $ACCELVIRT_TEST_KILL_AT,
 *                      $ACCELVIRT_TEST_STOP, $ACCELVIRT_TEST_LOCK_TIMEOUT_MS,
 *                      $ACCELVIRT_TEST_DRIVER_BUDGET
 *   av-hotplug-fake.c  the fake hot-plug table of `accelvirt attach`
 *                      (accelvirt's test build only: it calls libvirt),
 *                      with $ACCELVIRT_TEST_HOTPLUG set */
#pragma once

#include <glib.h>

#include "util/av-point.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* The emulated kernel, as libvirt's virpcimock: the write table
 * av_kernel_ops_fake does to a fake tree what the kernel would do
 * (src/vfio/av-kernel.h):
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
 *   netdev_index     if_nametoindex(): sys/class/net/NAME/ifindex, else the
 *                    ifindex of the interface whose sys/class/net/X/
 *                    fake_altnames (one name a line) holds NAME (the kernel
 *                    lists altnames only through netlink); else -ENODEV.
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
extern const AvKernelOps av_kernel_ops_fake;

/* The file of the fake kernel's log of device operations, root-relative
 * (see above); tests read it. */
#define AV_KERNEL_FAKE_LOG ".accelvirt-fake-kernel.log"
/* The file under the fake tree's /sys where the fake table records every
 * write, one "PATH VALUE" line each (the value escaped as C does). */
#define AV_KERNEL_FAKE_WRITES ".accelvirt-fake-kernel.writes"


/* The doubles' decisions at the points of util/av-point.h, from the
 * environment (av-points.c). */
extern const AvPointOps av_points_fake;

/* Registers the emulated kernel and the points (av-doubles.c).  The test
 * programs need not call it: a constructor does, as the object is linked
 * in (by the reference to it from av_doubles_hotplug_register's object or
 * from the programs' link line: Makefile.am, AV_LINK_DOUBLES). */
void av_doubles_register(void);

G_END_DECLS
