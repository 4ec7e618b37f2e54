/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the kernel operations table.
 *
 * The real table hands every write to av_root_write_attr(): the kernel does
 * the rest.  Under a root prefix other than "/" there is no kernel behind
 * the files: the test builds register the emulated kernel
 * (tests/doubles/av-kernel-fake.c, as libvirt's tests/virpcimock.c) through
 * av_kernel_ops_set_double(); without it (the installed programs) the
 * table is av_kernel_ops_none, which refuses every operation (see
 * av-kernel.h). */
#include "config.h"

#include "av-kernel.h"
#include "av-kernel-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <net/if.h>

#include <linux/usbdevice_fs.h>
#include <linux/vfio.h>

#include "pci/av-pci.h"
#include "util/av-file.h"
#include "util/av-names.h"

AvDeviceHandle *
av_device_handle_new(const AvRoot *root, const char *address, gboolean fake)
{
    AvDeviceHandle *h = g_new0(AvDeviceHandle, 1);

    h->root = av_root_new(av_root_prefix(root), NULL);
    h->address = g_strdup(address);
    h->fake = fake;
    h->container = h->group = h->device = -1;
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++)
        h->bar_fd[i] = -1;
    return h;
}

void
av_device_handle_free(AvDeviceHandle *h)
{
    if (!h)
        return;
    /* Device first, then the group (which leaves the container), then the
     * container: the order of Documentation/driver-api/vfio.rst in reverse. */
    if (h->device >= 0)
        close(h->device);
    /* A held group file stays open after the dup is closed: the kernel
     * would keep it in the container, so it leaves it here. */
    if (h->group >= 0 && h->group_held && h->container >= 0)
        (void)ioctl(h->group, VFIO_GROUP_UNSET_CONTAINER);
    if (h->group >= 0)
        close(h->group);
    if (h->container >= 0)
        close(h->container);
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++)
        if (h->bar_fd[i] >= 0)
            close(h->bar_fd[i]);
    av_root_free(h->root);
    g_free(h->address);
    g_free(h->devdir);
    g_free(h);
}

/* The flags of BAR @index in the device's sysfs "resource" file: one line
 * "START END FLAGS" (hex) per resource, BARs 0 to 5 first
 * (drivers/pci/pci-sysfs.c: resource_show).  Returns 0 or -errno
 * (-ENOENT without the file or the line).
 *
 * Why this file, not the BAR's type bit in config space: it is the kernel's
 * own decoding of the BARs (IORESOURCE_IO, IORESOURCE_MEM), so there is no
 * raw dword to interpret (the upper half of a 64-bit BAR, vfio-pci's
 * virtualised BAR registers); and it lives under the root prefix, so a fake
 * tree can say the same.  Config space is the fallback of the real ops. */
int
av_kernel_bar_flags(const AvRoot *root, const char *address, guint index, guint64 *ret_flags)
{
    return av_pci_read_resource(root, address, index, NULL, NULL, ret_flags);
}

/* --- the real kernel -------------------------------------------------------- */

static int
av_kernel_real_write(const AvRoot *root, const char *path, const char *value)
{
    return av_root_write_attr(root, path, value);
}

/* Opens the root-relative device node @path read-write.  Returns an fd or
 * -errno. */
static int
av_kernel_open_node(const AvRoot *root, const char *path)
{
    g_autofree char *host = av_root_host_path(root, path);
    int fd = open(host, O_RDWR | O_CLOEXEC);

    return fd < 0 ? -errno : fd;
}

/* Documentation/driver-api/vfio.rst, "Groups, Devices, and IOMMUs": a new
 * container, its API version and Type1 IOMMU checked; the device's group,
 * viable, added to the container; the container's IOMMU set; the device fd.
 * The kernel lets one process at a time open a group: a group held by a
 * domain's QEMU gives -EBUSY here (vfio_group_fops_open). */
static int
av_kernel_real_device_open_fd(const AvRoot *root, const char *address, int held_fd, AvDeviceHandle **ret_handle)
{
    g_autofree char *group_link = NULL;
    g_autofree char *group_name = NULL;
    g_autofree char *container_path = av_dev_path("vfio/vfio");
    g_autofree char *group_path = NULL;
    struct vfio_group_status status = { .argsz = sizeof(status) };
    struct vfio_device_info info = { .argsz = sizeof(info) };
    AvDeviceHandle *h;
    guint64 n;
    int r;

    if (!av_pci_address_is_valid(address))
        return -EINVAL;
    group_link = av_sys_path("bus/pci/devices/%s/iommu_group", address);
    r = av_root_link_name(root, group_link, &group_name);
    if (r < 0)
        return r == -ENOENT ? -ENODEV : r;
    if (!g_ascii_string_to_unsigned(group_name, 10, 0, G_MAXINT, &n, NULL))
        return -ENODEV;
    group_path = av_dev_path("vfio/%s", group_name);

    h = av_device_handle_new(root, address, FALSE);
    r = av_kernel_open_node(root, container_path);
    if (r < 0)
        goto fail;
    h->container = r;
    if (ioctl(h->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
        ioctl(h->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU) <= 0) {
        r = -EPROTONOSUPPORT;
        goto fail;
    }
    if (held_fd >= 0) {
        r = fcntl(held_fd, F_DUPFD_CLOEXEC, 3);
        h->group_held = TRUE;
    } else
        r = av_kernel_open_node(root, group_path);
    if (r < 0) {
        r = held_fd >= 0 ? -errno : r;
        goto fail;
    }
    h->group = r;
    if (ioctl(h->group, VFIO_GROUP_GET_STATUS, &status) < 0) {
        r = -errno;
        goto fail;
    }
    if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        r = -EPERM;
        goto fail;
    }
    /* A held group may still sit in the container of a scrubber that died
     * before its device_close: out of it first. */
    if (h->group_held && (status.flags & VFIO_GROUP_FLAGS_CONTAINER_SET) &&
        ioctl(h->group, VFIO_GROUP_UNSET_CONTAINER) < 0) {
        r = -errno;
        goto fail;
    }
    if (ioctl(h->group, VFIO_GROUP_SET_CONTAINER, &h->container) < 0 ||
        ioctl(h->container, VFIO_SET_IOMMU, VFIO_TYPE1_IOMMU) < 0) {
        r = -errno;
        goto fail;
    }
    r = ioctl(h->group, VFIO_GROUP_GET_DEVICE_FD, address);
    if (r < 0) {
        r = -errno;
        goto fail;
    }
    h->device = r;
    if (ioctl(h->device, VFIO_DEVICE_GET_INFO, &info) < 0) {
        r = -errno;
        goto fail;
    }
    h->flags = info.flags;
    h->num_regions = info.num_regions;
    *ret_handle = h;
    return 0;

fail:
    av_device_handle_free(h);
    return r;
}

static int
av_kernel_real_device_open(const AvRoot *root, const char *address, AvDeviceHandle **ret_handle)
{
    return av_kernel_real_device_open_fd(root, address, -1, ret_handle);
}

static int
av_kernel_real_device_open_held(const AvRoot *root, const char *address, int group_fd,
                                AvDeviceHandle **ret_handle)
{
    if (group_fd < 0)
        return -EBADF;
    return av_kernel_real_device_open_fd(root, address, group_fd, ret_handle);
}

/* group_open of both tables: /dev/vfio/@group opened with @open_node (an
 * fd or -errno). */
/* See av-kernel-private.h. */
int
av_kernel_group_open_with(const AvRoot *root, int group, int (*open_node)(const AvRoot *, const char *),
                          int *ret_fd)
{
    g_autofree char *path = NULL;
    int r;

    if (group < 0)
        return -EINVAL;
    path = av_dev_path("vfio/%d", group);
    r = open_node(root, path);
    if (r < 0)
        return r;
    *ret_fd = r;
    return 0;
}

/* vfio_group_fops_open lets one open file of a group exist at a time: a
 * second open gives -EBUSY. */
static int
av_kernel_real_group_open(const AvRoot *root, int group, int *ret_fd)
{
    return av_kernel_group_open_with(root, group, av_kernel_open_node, ret_fd);
}

/* The BAR type bit (PCI_BASE_ADDRESS_SPACE_IO, bit 0) of BAR @index, read
 * through the device's config region: the fallback when sysfs has no
 * "resource" file.  TRUE for a memory BAR (and when unreadable). */
static gboolean
av_kernel_real_bar_is_memory_config(AvDeviceHandle *h, guint index)
{
    struct vfio_region_info cfg = { .argsz = sizeof(cfg), .index = VFIO_PCI_CONFIG_REGION_INDEX };
    guint8 bar[4];

    if (ioctl(h->device, VFIO_DEVICE_GET_REGION_INFO, &cfg) < 0)
        return TRUE;
    if (pread(h->device, bar, sizeof(bar), (off_t)(cfg.offset + 0x10 + 4 * index)) != sizeof(bar))
        return TRUE;
    return !(bar[0] & 0x1);
}

static int
av_kernel_real_device_region(AvDeviceHandle *h, guint index, AvRegion *ret_region)
{
    struct vfio_region_info info = { .argsz = sizeof(info), .index = index };
    AvRegion region = { .fd = h->device };
    guint64 flags;

    if (index >= AV_PCI_BAR_COUNT || index >= h->num_regions)
        return -EINVAL;
    if (ioctl(h->device, VFIO_DEVICE_GET_REGION_INFO, &info) < 0)
        return -errno;
    region.offset = info.offset;
    region.size = info.size;
    region.mmap_ok = (info.flags & VFIO_REGION_INFO_FLAG_MMAP) != 0;
    region.readable = (info.flags & VFIO_REGION_INFO_FLAG_READ) != 0;
    region.writable = (info.flags & VFIO_REGION_INFO_FLAG_WRITE) != 0;
    if (av_kernel_bar_flags(h->root, h->address, index, &flags) == 0 &&
        (flags & (AV_IORESOURCE_IO | AV_IORESOURCE_MEM))) {
        region.is_memory = !(flags & AV_IORESOURCE_IO);
        region.prefetchable = region.is_memory && (flags & AV_IORESOURCE_PREFETCH);
    } else
        region.is_memory = region.size == 0 || av_kernel_real_bar_is_memory_config(h, index);
    *ret_region = region;
    return 0;
}

static int
av_kernel_real_device_reset(AvDeviceHandle *h)
{
    if (!(h->flags & VFIO_DEVICE_FLAGS_RESET))
        return -ENOTTY;
    return ioctl(h->device, VFIO_DEVICE_RESET) < 0 ? -errno : 0;
}

static void
av_kernel_real_device_close(AvDeviceHandle *h)
{
    av_device_handle_free(h);
}

static int
av_kernel_real_usb_reset(const AvRoot *root, guint busnum, guint devnum)
{
    g_autofree char *node = av_dev_path("bus/usb/%03u/%03u", busnum, devnum);
    g_autofree char *host = av_root_host_path(root, node);
    int fd = open(host, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    int r = 0;

    if (fd < 0)
        return -errno;
    if (ioctl(fd, USBDEVFS_RESET, 0) < 0)
        r = -errno;
    close(fd);
    return r;
}

static int
av_kernel_real_netdev_index(const AvRoot *root, const char *name, guint *ret_index)
{
    unsigned int index;

    (void)root;
    errno = 0;
    index = if_nametoindex(name);
    if (index == 0)
        return errno ? -errno : -ENODEV;
    *ret_index = index;
    return 0;
}

const AvKernelOps av_kernel_ops_real = {
    .name = "real",
    .write = av_kernel_real_write,
    .device_open = av_kernel_real_device_open,
    .device_open_held = av_kernel_real_device_open_held,
    .group_open = av_kernel_real_group_open,
    .device_region = av_kernel_real_device_region,
    .device_reset = av_kernel_real_device_reset,
    .device_close = av_kernel_real_device_close,
    .usb_reset = av_kernel_real_usb_reset,
    .netdev_index = av_kernel_real_netdev_index,
};

/* --- no kernel: a root prefix without the emulated kernel ---------------------- */

/* Every operation of av_kernel_ops_none: the tree under the prefix is not
 * the kernel's, and nothing here pretends to be. */
static int
av_kernel_none_write(const AvRoot *root, const char *path, const char *value)
{
    (void)root;
    (void)path;
    (void)value;
    return -EROFS;
}

static int
av_kernel_none_device_open(const AvRoot *root, const char *address, AvDeviceHandle **ret_handle)
{
    (void)root;
    (void)address;
    (void)ret_handle;
    return -EROFS;
}

static int
av_kernel_none_device_open_held(const AvRoot *root, const char *address, int group_fd,
                                AvDeviceHandle **ret_handle)
{
    (void)group_fd;
    return av_kernel_none_device_open(root, address, ret_handle);
}

static int
av_kernel_none_group_open(const AvRoot *root, int group, int *ret_fd)
{
    (void)root;
    (void)group;
    (void)ret_fd;
    return -EROFS;
}

static int
av_kernel_none_usb_reset(const AvRoot *root, guint busnum, guint devnum)
{
    (void)root;
    (void)busnum;
    (void)devnum;
    return -EROFS;
}

static int
av_kernel_none_netdev_index(const AvRoot *root, const char *name, guint *ret_index)
{
    (void)root;
    (void)name;
    (void)ret_index;
    return -EROFS;
}

/* No handle is ever made: these are never reached but for NULL. */
static int
av_kernel_none_device_region(AvDeviceHandle *h, guint index, AvRegion *ret_region)
{
    (void)h;
    (void)index;
    (void)ret_region;
    return -EROFS;
}

static int
av_kernel_none_device_reset(AvDeviceHandle *h)
{
    (void)h;
    return -EROFS;
}

const AvKernelOps av_kernel_ops_none = {
    .name = "none",
    .write = av_kernel_none_write,
    .device_open = av_kernel_none_device_open,
    .device_open_held = av_kernel_none_device_open_held,
    .group_open = av_kernel_none_group_open,
    .device_region = av_kernel_none_device_region,
    .device_reset = av_kernel_none_device_reset,
    .device_close = av_device_handle_free,
    .usb_reset = av_kernel_none_usb_reset,
    .netdev_index = av_kernel_none_netdev_index,
};

/* The test builds' emulated kernel, or NULL (av_kernel_ops_set_double()). */
static const AvKernelOps *av_kernel_ops_double;

/* See av-kernel.h. */
void
av_kernel_ops_set_double(const AvKernelOps *ops)
{
    av_kernel_ops_double = ops;
}

/* See av-kernel.h. */
const AvKernelOps *
av_kernel_ops_for(const AvRoot *root)
{
    if (av_root_is_host(root))
        return &av_kernel_ops_real;
    return av_kernel_ops_double ? av_kernel_ops_double : &av_kernel_ops_none;
}

/* See av-kernel.h. */
char *
av_kernel_netdev_primary(const AvRoot *root, const AvKernelOps *ops, const char *name)
{
    g_autofree char *net = av_sys_path("class/net");
    g_auto(GStrv) names = NULL;
    guint index;

    if (!av_netdev_name_kernel_valid(name))
        return NULL;
    if (av_netdev_name_is_valid(name)) {
        g_autofree char *path = g_strconcat(net, "/", name, NULL);

        if (av_root_exists(root, path))
            return g_strdup(name);
    }
    /* An altname (udev gives one to each NIC on Debian), which sysfs does
     * not list: the kernel's ifindex, matched with each interface's. */
    if (!ops->netdev_index || ops->netdev_index(root, name, &index) < 0 ||
        av_root_list_dir(root, net, &names) < 0)
        return NULL;
    for (guint i = 0; names[i]; i++) {
        g_autofree char *path = g_strconcat(net, "/", names[i], "/ifindex", NULL);
        guint64 v;

        if (av_netdev_name_is_valid(names[i]) && av_root_read_uint(root, path, 10, &v) == 0 && v == index)
            return g_strdup(names[i]);
    }
    return NULL;
}

/* See av-kernel.h. */
char *
av_kernel_netdev_card(const AvRoot *root, const AvKernelOps *ops, const char *name)
{
    g_autofree char *primary = av_kernel_netdev_primary(root, ops, name);
    g_autofree char *path = NULL;
    g_autofree char *address = NULL;

    if (!primary)
        return NULL;
    path = av_sys_path("class/net/%s/device", primary);
    if (av_root_link_name(root, path, &address) < 0 || !av_pci_address_is_valid(address))
        return NULL;
    return g_steal_pointer(&address);
}
