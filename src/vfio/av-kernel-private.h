/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the kernel operations tables share with the emulated
 * kernel of the tests (tests/doubles/av-kernel-fake.c): the opened device's
 * handle and the helpers both tables use.  For src/vfio/av-kernel.c and the
 * test doubles only. */
#pragma once

#include <glib.h>

#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Flags of the sysfs "resource" file (include/linux/ioport.h). */
#define AV_IORESOURCE_IO 0x00000100
#define AV_IORESOURCE_MEM 0x00000200
#define AV_IORESOURCE_PREFETCH 0x00002000

/* An opened device (av-kernel.h).  The real kernel's fds are the VFIO
 * container, group and device; the fake's are the resourceN files of the
 * tree, opened on first use. */
struct AvDeviceHandle {
    AvRoot *root;                /* a copy of the caller's root */
    char *address;
    gboolean fake;
    int container;               /* real: /dev/vfio/vfio */
    int group;                   /* real: /dev/vfio/GROUP (or a dup of a held one);
                                  * fake: the flock()ed group file, or -1 when held */
    gboolean group_held;         /* real: @group is a dup of a file the caller holds open */
    int device;                  /* real: VFIO_GROUP_GET_DEVICE_FD */
    guint32 flags;               /* real: VFIO_DEVICE_GET_INFO flags */
    guint32 num_regions;         /* real: VFIO_DEVICE_GET_INFO num_regions */
    char *devdir;                /* fake: canonical device directory */
    int bar_fd[AV_PCI_BAR_COUNT]; /* fake: resourceN, -1 until opened */
};

/* A new handle of @address under a copy of @root (@fake: the emulated
 * kernel's), with no fd open yet.  Caller frees with av_device_handle_free(). */
AvDeviceHandle *av_device_handle_new(const AvRoot *root, const char *address, gboolean fake);
/* Closes what @h holds and frees it.  NULL is a no-op. */
void av_device_handle_free(AvDeviceHandle *h);
/* The flags of BAR @index in the device's sysfs "resource" file (see
 * av-kernel.c).  Returns 0 or -errno (-ENOENT without the file or the line). */
int av_kernel_bar_flags(const AvRoot *root, const char *address, guint index, guint64 *ret_flags);
/* group_open of both tables: /dev/vfio/@group opened with @open_node (an
 * fd or -errno).  Returns 0 and the fd in @ret_fd, or -errno. */
int av_kernel_group_open_with(const AvRoot *root, int group, int (*open_node)(const AvRoot *, const char *),
                              int *ret_fd);

G_END_DECLS
