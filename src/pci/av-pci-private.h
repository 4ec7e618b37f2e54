/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: internals shared by the files of src/pci. */
#pragma once

#include "av-pci.h"

G_BEGIN_DECLS

/* Readers of one attribute @attr of the sysfs directory @dir (a
 * root-relative path), read under @root (av-pci-attr.c).  They borrow
 * their arguments and leave *ret untouched on failure. */

/* Reads a hex number ("0x10de", or "03e7" as USB prints idVendor) no
 * larger than @max into *ret.  Returns 0, -ERANGE above @max, or the
 * -errno of av_root_read_uint(). */
int av_attr_read_hex(const AvRoot *root, const char *dir, const char *attr, guint64 max, guint64 *ret);

/* Reads a decimal number that fits in a guint into *ret.  Returns 0,
 * -ERANGE above G_MAXUINT, or the -errno of av_root_read_uint(). */
int av_attr_read_uint(const AvRoot *root, const char *dir, const char *attr, guint *ret);

/* Reads an optional text attribute: a new string (caller frees), or NULL
 * when it is absent or unreadable. */
char *av_attr_read_optional(const AvRoot *root, const char *dir, const char *attr);

/* The NUMA node in @dir/numa_node (Documentation/ABI/testing/sysfs-bus-pci),
 * or -1 when it is unreadable, "-1" (the kernel does not know) or out of
 * range. */
int av_attr_read_numa_node(const AvRoot *root, const char *dir);


/* Names the devices (AvPciDevice*) of @devices, vendor_name and
 * device_name, from pci.ids ($ACCELVIRT_PCI_IDS, else the host's
 * /usr/share/misc/pci.ids), in one pass over it; NULL names where it has
 * none or cannot be read.  A partial scan (the hook's fast path) names
 * nothing; a whole scan names every device (about 1.4 MB read, once per
 * scan). */
void av_pci_ids_name(GPtrArray *devices);

/* Scans /sys/bus/usb/devices under @root into AvUsbDevice* (sorted). */
gboolean av_usb_scan(const AvRoot *root, GPtrArray *ret_usb, GError **error);

/* Scans /sys/devices/system/node under @root into AvNumaNode* (sorted). */
gboolean av_numa_scan(const AvRoot *root, GPtrArray *ret_nodes, GError **error);

G_END_DECLS
