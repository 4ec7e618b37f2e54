/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: USB devices from sysfs.
 *
 * Documentation/ABI/testing/sysfs-bus-usb and the attributes of
 * drivers/usb/core/sysfs.c: idVendor and idProduct print "%04x",
 * manufacturer, product and serial the device's strings, busnum and devnum
 * "%d", speed "480" and so on. */
#include "config.h"

#include "av-pci-private.h"

#include <errno.h>
#include <string.h>

#include "util/av-error.h"

void
av_usb_device_free(AvUsbDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->bus_path);
    g_free(dev->sysfs_path);
    g_free(dev->manufacturer);
    g_free(dev->product);
    g_free(dev->serial);
    g_free(dev->speed);
    g_free(dev->pci_controller);
    g_free(dev);
}

/* See av-pci.h. */
gboolean
av_usb_bus_path_is_valid(const char *path)
{
    const char *p = path;
    gboolean digits = FALSE;

    if (!path)
        return FALSE;
    while (g_ascii_isdigit(*p)) {
        p++;
        digits = TRUE;
    }
    if (!digits || *p++ != '-')
        return FALSE;
    for (;;) {
        digits = FALSE;
        while (g_ascii_isdigit(*p)) {
            p++;
            digits = TRUE;
        }
        if (!digits)
            return FALSE;
        if (*p == '\0')
            return p - path < 64;
        if (*p++ != '.')
            return FALSE;
    }
}

/* The host controller: the last PCI function on the resolved path
 * /sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2.  Stores its address
 * and its directory; FALSE when the device hangs off no PCI function. */
static gboolean
av_usb_find_controller(const char *sysfs_path, char **ret_address, char **ret_dir)
{
    g_auto(GStrv) parts = g_strsplit(sysfs_path, "/", -1);

    for (gssize i = (gssize)g_strv_length(parts) - 1; i >= 0; i--) {
        if (av_pci_address_is_valid(parts[i])) {
            g_autofree char *saved = parts[i + 1];

            parts[i + 1] = NULL;
            *ret_dir = g_strjoinv("/", parts);
            parts[i + 1] = g_steal_pointer(&saved);
            *ret_address = g_strdup(parts[i]);
            return TRUE;
        }
    }
    return FALSE;
}

static gint
av_usb_device_cmp(gconstpointer a, gconstpointer b)
{
    const AvUsbDevice *x = *(AvUsbDevice *const *)a, *y = *(AvUsbDevice *const *)b;

    return strcmp(x->bus_path, y->bus_path);
}

/* Scans /sys/bus/usb/devices: see av-pci-private.h.  A tree without USB is
 * fine (nothing added).  Devices without a readable idVendor/idProduct are
 * skipped.  Appends owned AvUsbDevice* to @ret_usb and sorts it. */
gboolean
av_usb_scan(const AvRoot *root, GPtrArray *ret_usb, GError **error)
{
    g_autofree char *dir = av_sys_path("bus/usb/devices");
    g_auto(GStrv) names = NULL;
    int r;

    r = av_root_list_dir(root, dir, &names);
    if (r == -ENOENT || r == -ENOTDIR)
        return TRUE;
    if (r < 0)
        return av_error_errno(error, r, "cannot list the USB devices in '%s'", dir);

    for (guint i = 0; names[i]; i++) {
        g_autofree char *link = NULL;
        g_autofree char *path = NULL;
        g_autofree char *ctrl_dir = NULL;
        g_autoptr(AvUsbDevice) dev = NULL;
        guint64 vendor, product;

        /* Root hubs (usbN) and interfaces (1-1.2:1.0) are not devices to hand out. */
        if (!av_usb_bus_path_is_valid(names[i])) {
            if (!g_str_has_prefix(names[i], "usb") && !strchr(names[i], ':'))
                g_debug("ignoring '%s' in %s: not a USB device name", names[i], dir);
            continue;
        }
        link = g_strconcat(dir, "/", names[i], NULL);
        r = av_root_resolve(root, link, &path);
        if (r < 0) {
            g_debug("ignoring the USB device '%s': %s", names[i], g_strerror(-r));
            continue;
        }
        dev = g_new0(AvUsbDevice, 1);
        dev->bus_path = g_strdup(names[i]);
        dev->sysfs_path = g_steal_pointer(&path);
        dev->numa_node = -1;
        /* idVendor and idProduct print "%04x", without "0x". */
        if (av_attr_read_hex(root, dev->sysfs_path, "idVendor", 0xffff, &vendor) < 0 ||
            av_attr_read_hex(root, dev->sysfs_path, "idProduct", 0xffff, &product) < 0) {
            g_debug("ignoring the USB device '%s': no readable idVendor/idProduct", names[i]);
            continue;
        }
        dev->vendor_id = (guint16)vendor;
        dev->product_id = (guint16)product;
        dev->manufacturer = av_attr_read_optional(root, dev->sysfs_path, "manufacturer");
        dev->product = av_attr_read_optional(root, dev->sysfs_path, "product");
        dev->serial = av_attr_read_optional(root, dev->sysfs_path, "serial");
        dev->speed = av_attr_read_optional(root, dev->sysfs_path, "speed");
        /* 0 when unreadable, as g_new0() left them. */
        (void)av_attr_read_uint(root, dev->sysfs_path, "busnum", &dev->busnum);
        (void)av_attr_read_uint(root, dev->sysfs_path, "devnum", &dev->devnum);
        if (av_usb_find_controller(dev->sysfs_path, &dev->pci_controller, &ctrl_dir))
            dev->numa_node = av_attr_read_numa_node(root, ctrl_dir);
        g_ptr_array_add(ret_usb, g_steal_pointer(&dev));
    }
    g_ptr_array_sort(ret_usb, av_usb_device_cmp);
    return TRUE;
}

/* See av-pci.h. */
GPtrArray *
av_host_scan_usb(const AvRoot *root, GError **error)
{
    g_autoptr(GPtrArray) usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);

    if (!av_usb_scan(root, usb, error))
        return NULL;
    return g_steal_pointer(&usb);
}

/* See av-pci.h. */
gboolean
av_host_scan_devices_usb(const AvRoot *root, AvHost *host, GError **error)
{
    g_ptr_array_set_size(host->usb, 0);
    if (!av_usb_scan(root, host->usb, error))
        return FALSE;
    host->usb_scanned = TRUE;
    return TRUE;
}

/* See av-pci.h.  Linear: a host has a few dozen USB devices. */
AvUsbDevice *
av_host_find_usb_number(const AvHost *host, guint busnum, guint devnum)
{
    for (guint i = 0; host && host->usb && i < host->usb->len; i++) {
        AvUsbDevice *dev = g_ptr_array_index(host->usb, i);

        if (dev->busnum == busnum && dev->devnum == devnum)
            return dev;
    }
    return NULL;
}
