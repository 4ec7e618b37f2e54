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

/* TRUE for the name of a USB device (not a root hub "usbN", not an
 * interface "1-1.2:1.0"): "BUS-PORT[.PORT]...", as dev_set_name() names
 * them in usb_alloc_dev(). */
static gboolean
av_usb_name_is_device(const char *name)
{
    const char *p = name;
    gboolean digits = FALSE;

    while (g_ascii_isdigit(*p)) {
        p++;
        digits = TRUE;
    }
    if (!digits || *p != '-')
        return FALSE;
    p++;
    for (;;) {
        digits = FALSE;
        while (g_ascii_isdigit(*p)) {
            p++;
            digits = TRUE;
        }
        if (!digits)
            return FALSE;
        if (*p == '\0')
            return TRUE;
        if (*p != '.')
            return FALSE;
        p++;
    }
}

/* Reads a hex attribute without "0x" (idVendor "03e7") into *ret. */
static int
av_usb_read_hex16(const AvRoot *root, const char *dir, const char *attr, guint16 *ret)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    guint64 v;
    int r;

    r = av_root_read_uint(root, path, 16, &v);
    if (r < 0)
        return r;
    if (v > 0xffff)
        return -ERANGE;
    *ret = (guint16)v;
    return 0;
}

static char *
av_usb_read_optional(const AvRoot *root, const char *dir, const char *attr)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    char *value = NULL;

    if (av_root_read_attr(root, path, &value) < 0)
        return NULL;
    return value;
}

static guint
av_usb_read_uint(const AvRoot *root, const char *dir, const char *attr)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    guint64 v = 0;

    if (av_root_read_uint(root, path, 10, &v) < 0 || v > G_MAXUINT)
        return 0;
    return (guint)v;
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

        /* Root hubs (usbN) and interfaces (1-1.2:1.0) are not devices to hand out. */
        if (!av_usb_name_is_device(names[i])) {
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
        if (av_usb_read_hex16(root, dev->sysfs_path, "idVendor", &dev->vendor_id) < 0 ||
            av_usb_read_hex16(root, dev->sysfs_path, "idProduct", &dev->product_id) < 0) {
            g_debug("ignoring the USB device '%s': no readable idVendor/idProduct", names[i]);
            continue;
        }
        dev->manufacturer = av_usb_read_optional(root, dev->sysfs_path, "manufacturer");
        dev->product = av_usb_read_optional(root, dev->sysfs_path, "product");
        dev->serial = av_usb_read_optional(root, dev->sysfs_path, "serial");
        dev->speed = av_usb_read_optional(root, dev->sysfs_path, "speed");
        dev->busnum = av_usb_read_uint(root, dev->sysfs_path, "busnum");
        dev->devnum = av_usb_read_uint(root, dev->sysfs_path, "devnum");
        if (av_usb_find_controller(dev->sysfs_path, &dev->pci_controller, &ctrl_dir)) {
            g_autofree char *node_path = g_strconcat(ctrl_dir, "/numa_node", NULL);
            gint64 node;

            if (av_root_read_int(root, node_path, &node) == 0 && node >= 0 && node <= G_MAXINT)
                dev->numa_node = (int)node;
        }
        g_ptr_array_add(ret_usb, g_steal_pointer(&dev));
    }
    g_ptr_array_sort(ret_usb, av_usb_device_cmp);
    return TRUE;
}
