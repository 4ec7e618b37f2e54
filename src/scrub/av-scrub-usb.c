/* accelvirt: the scrub methods of USB devices (attach "usb", issue 13).
 *
 * "usb-reset": a port reset through usbfs (USBDEVFS_RESET on
 * /dev/bus/usb/BBB/DDD, include/uapi/linux/usbdevice_fs.h): the hub resets
 * the port and the kernel runs the device's enumeration again on the same
 * address; the device's own state (a loaded firmware, a tenant's model)
 * goes unless the device keeps it across a bus reset.
 * "usb-reauthorize": writes "0" then "1" to the device's "authorized"
 * (Documentation/ABI/testing/sysfs-bus-usb): the kernel unbinds its drivers
 * and sets it up again; a device such as a Movidius stick goes back to its
 * boot loader and enumerates anew, possibly with another devnum.  The step
 * checks that "authorized" reads 0 after the write of 0 (the
 * de-authorization took effect), then waits, up to its "timeout", until
 * the device at the same port presents the same pool identity and its
 * "authorized" reads 1.  An unreadable "authorized" is a failure.
 *
 * Both act only on the device at the port the pool recorded (the target's
 * address), and only when it presents the target's identity: never on
 * another device showing the same serial elsewhere.  Otherwise the step
 * fails (the device is quarantined).
 *
 * Neither clears memory: what they say is exactly what was done. */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>

#include "pci/av-pci.h"
#include "pool/av-pool.h"
#include "util/av-error.h"

/* How often usb-reauthorize looks for the device while it waits. */
#define AV_USB_POLL_US (100 * 1000)

/* Scans the USB devices into *ret_usb and finds the target there: the
 * device at the port the pool recorded, presenting the target's identity
 * (av_pool_find_usb_device_at()).  FALSE with @error when the scan fails,
 * no device is at that port or the one there presents another identity. */
static gboolean
av_scrub_usb_locate(AvScrubContext *ctx, GPtrArray **ret_usb, const AvUsbDevice **ret_dev, GError **error)
{
    g_autoptr(GPtrArray) usb = av_host_scan_usb(ctx->root, error);
    const AvUsbDevice *dev;

    if (!usb)
        return FALSE;
    dev = av_pool_find_usb_device_at(usb, ctx->target->identity, ctx->target->address);
    if (!dev) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "no USB device presenting %s is at the port the pool recorded (%s); nothing done to any device",
                    ctx->target->identity, ctx->target->address ? ctx->target->address : "no port");
        return FALSE;
    }
    *ret_dev = dev;
    *ret_usb = g_steal_pointer(&usb);
    return TRUE;
}

/* The facts of @dev in the step's report entry. */
static void
av_scrub_usb_note(AvScrubContext *ctx, const AvUsbDevice *dev)
{
    json_object_set_new(ctx->entry, "bus_path", json_string(dev->bus_path));
    json_object_set_new(ctx->entry, "busnum", json_integer(dev->busnum));
    json_object_set_new(ctx->entry, "devnum", json_integer(dev->devnum));
}

/* "usb-reset": see above. */
gboolean
av_scrub_method_usb_reset(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;
    const AvUsbDevice *dev = NULL;
    int r;

    if (!av_scrub_usb_locate(ctx, &usb, &dev, error)) {
        *ret_message = g_strdup("device not found; no reset done");
        return FALSE;
    }
    av_scrub_usb_note(ctx, dev);
    r = ctx->ops->usb_reset(ctx->root, dev->busnum, dev->devnum);
    if (r < 0) {
        *ret_message = g_strdup_printf("usb port reset of %s failed", dev->bus_path);
        return av_error_errno(error, r, "cannot reset the USB device %s (USBDEVFS_RESET on /dev/bus/usb/%03u/%03u)",
                              dev->bus_path, dev->busnum, dev->devnum);
    }
    *ret_message = g_strdup_printf("usb port reset of %s (bus %u device %u)", dev->bus_path, dev->busnum,
                                   dev->devnum);
    return TRUE;
}

/* Writes @value to the "authorized" of the USB device @bus_path. */
static gboolean
av_scrub_usb_authorize(AvScrubContext *ctx, const char *bus_path, const char *value, GError **error)
{
    g_autofree char *path = av_sys_path("bus/usb/devices/%s/authorized", bus_path);
    int r = ctx->ops->write(ctx->root, path, value);

    if (r < 0)
        return av_error_errno(error, r, "cannot write %s to 'authorized' of the USB device %s", value, bus_path);
    return TRUE;
}

/* Reads the "authorized" of the USB device @bus_path into *ret (caller
 * frees).  FALSE with @error when it cannot be read. */
static gboolean
av_scrub_usb_read_authorized(AvScrubContext *ctx, const char *bus_path, char **ret, GError **error)
{
    g_autofree char *attr = av_sys_path("bus/usb/devices/%s/authorized", bus_path);
    int r = av_root_read_attr(ctx->root, attr, ret);

    if (r < 0)
        return av_error_errno(error, r, "cannot read 'authorized' of the USB device %s", bus_path);
    return TRUE;
}

/* Waits up to the step's timeout for the device at the target's port to
 * present the target's identity again with "authorized" reading 1, and
 * stores its devnum.  An unreadable "authorized" is not a success. */
static gboolean
av_scrub_usb_wait(AvScrubContext *ctx, guint *ret_devnum, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)MAX(ctx->step->timeout_s, 1) * G_USEC_PER_SEC;
    g_autofree char *last = NULL;

    for (;;) {
        g_autoptr(GPtrArray) usb = av_host_scan_usb(ctx->root, error);
        const AvUsbDevice *dev =
            usb ? av_pool_find_usb_device_at(usb, ctx->target->identity, ctx->target->address) : NULL;
        g_autofree char *authorized = NULL;
        g_autoptr(GError) read_error = NULL;

        if (!usb)
            return FALSE;
        if (dev) {
            if (av_scrub_usb_read_authorized(ctx, dev->bus_path, &authorized, &read_error) &&
                g_str_equal(authorized, "1")) {
                *ret_devnum = dev->devnum;
                return TRUE;
            }
            g_free(last);
            last = read_error ? g_strdup(read_error->message) : g_strdup_printf("'authorized' reads '%s'", authorized);
        }
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(AV_USB_POLL_US);
    }
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "the USB device at %s did not come back presenting %s and authorized within %u s of its "
                "re-authorization%s%s", ctx->target->address, ctx->target->identity, ctx->step->timeout_s,
                last ? ": " : "", last ? last : "");
    return FALSE;
}

/* "usb-reauthorize": see above. */
gboolean
av_scrub_method_usb_reauthorize(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;
    const AvUsbDevice *dev = NULL;
    g_autofree char *bus_path = NULL;
    g_autofree char *authorized = NULL;
    guint devnum_before, devnum = 0;

    if (!av_scrub_usb_locate(ctx, &usb, &dev, error)) {
        *ret_message = g_strdup("device not found; not re-authorized");
        return FALSE;
    }
    bus_path = g_strdup(dev->bus_path);
    devnum_before = dev->devnum;
    av_scrub_usb_note(ctx, dev);
    if (!av_scrub_usb_authorize(ctx, bus_path, "0", error)) {
        *ret_message = g_strdup_printf("de-authorization of %s failed", bus_path);
        return FALSE;
    }
    if (!av_scrub_usb_read_authorized(ctx, bus_path, &authorized, error)) {
        *ret_message = g_strdup_printf("wrote 0 to 'authorized' of %s; it cannot be read back", bus_path);
        return FALSE;
    }
    if (!g_str_equal(authorized, "0")) {
        *ret_message = g_strdup_printf("wrote 0 to 'authorized' of %s; it reads '%s'", bus_path, authorized);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "the de-authorization of the USB device %s did not take effect: 'authorized' reads '%s' after "
                    "writing 0", bus_path, authorized);
        return FALSE;
    }
    if (!av_scrub_usb_authorize(ctx, bus_path, "1", error)) {
        *ret_message = g_strdup_printf("de-authorized %s; authorizing it again failed", bus_path);
        return FALSE;
    }
    if (!av_scrub_usb_wait(ctx, &devnum, error)) {
        *ret_message = g_strdup_printf("de-authorized %s and wrote 1; it did not come back authorized", bus_path);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "bus_path_after", json_string(bus_path));
    json_object_set_new(ctx->entry, "devnum_after", json_integer(devnum));
    *ret_message = g_strdup_printf("de-authorized and authorized again at %s (devnum %u before, %u after)%s", bus_path,
                                   devnum_before, devnum, devnum != devnum_before ? "; re-enumerated" : "");
    return TRUE;
}
