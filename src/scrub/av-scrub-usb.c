/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub methods of USB devices (attach "usb").
 *
 * A stick is held de-authorized from its release until it is freed
 * (av-pool-release-hold.c, av-usb-auth.h): these steps find it so, and
 * leave it so, whatever they did in between; only the move to free
 * authorizes it again.
 *
 * "usb-reset": a port reset through usbfs (USBDEVFS_RESET on
 * /dev/bus/usb/BBB/DDD, include/uapi/linux/usbdevice_fs.h): the hub resets
 * the port and the kernel runs the device's enumeration again on the same
 * address; the device's own state (a loaded firmware, a tenant's model)
 * goes unless the device keeps it across a bus reset.  The reset needs no
 * authorization (usbfs opens a de-authorized device, and usb_reset_device()
 * resets one that has no configuration), so the stick stays de-authorized
 * throughout: the step checks that it reads 0 before and after.
 * "usb-reauthorize": the device's "authorized" (Documentation/ABI/testing/
 * sysfs-bus-usb) at 0 (written when it is not: the step checks that it
 * reads 0, the de-authorization took effect), then 1: the kernel sets it up
 * again, and a device such as a Movidius stick goes back to its boot loader
 * and enumerates anew, possibly with another devnum.  The step waits, up to
 * its "timeout", until the device at the same port presents the same pool
 * identity and its "authorized" reads 1, then writes 0 again and checks
 * that it reads 0: the stick is authorized for that moment only.  An
 * unreadable "authorized" is a failure.
 *
 * "usb-power-cycle": the power of the hub port the stick is plugged into
 * switched off and on, through the port's "disable"
 * (Documentation/ABI/testing/sysfs-bus-usb: What: /sys/bus/usb/devices/
 * .../<hub_interface>/port<X>/disable, reached through the device's "port"
 * link): 1 disconnects the device and turns the port's power off, 0 turns
 * it on, and the stick enumerates anew from its boot loader: a firmware a
 * tenant loaded does not survive, as it may survive a reset or a
 * re-authorization.  A port without "disable" (an older kernel) fails the
 * step, saying so.  A hub without per-port power switching (most are
 * "ganged") still disconnects and disables the port, but may leave VBUS on:
 * the step then proves only what it checks, that the stick came back with
 * its first ids.  It waits, up to its "timeout", for the device at that
 * port to present the target's identity again (with another devnum), then
 * de-authorizes it again.
 *
 * All three act only on the device at the port the pool recorded (the
 * target's address), and only when it presents the target's identity, or
 * one of its profile's "runtime_ids" as that very stick
 * (av_pool_find_usb_device_held(): a stick whose firmware a tenant loaded):
 * never on another device showing the same serial elsewhere.  Otherwise the
 * step fails (the device is quarantined, and stays de-authorized).  After
 * their action the stick must present the target's identity, its first
 * ids: one still showing runtime ids kept the tenant's firmware, and the
 * step fails, saying so.
 *
 * Neither clears memory: what they say is exactly what was done. */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>

#include "pci/av-pci.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "vfio/av-usb-auth.h"

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

    gboolean runtime = FALSE;

    if (!usb)
        return FALSE;
    dev = av_pool_find_usb_device_held(usb, ctx->target->identity, ctx->target->address, ctx->profile, &runtime);
    if (runtime)
        json_object_set_new(ctx->entry, "runtime_ids_before",
                            json_sprintf("%04x:%04x", dev->vendor_id, dev->product_id));
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

/* Why the stick of @ctx is not back at its port with its first ids in
 * @usb (a scan after the step's action): " (it presents ...)" naming what
 * is there, or "" when nothing is.  Caller frees. */
static char *
av_scrub_usb_why_not_back(AvScrubContext *ctx, const GPtrArray *usb)
{
    for (guint i = 0; usb && i < usb->len; i++) {
        const AvUsbDevice *dev = g_ptr_array_index(usb, i);

        if (g_strcmp0(dev->bus_path, ctx->target->address) != 0)
            continue;
        if (av_pool_usb_is_runtime_of(dev, ctx->target->identity, ctx->target->address, ctx->profile))
            return g_strdup_printf(" (it still presents %04x:%04x, one of the runtime_ids of profile '%s': the "
                                   "firmware loaded while a domain held it survived)", dev->vendor_id,
                                   dev->product_id, ctx->profile->name);
        return g_strdup_printf(" (a device presenting %04x:%04x%s%s is there)", dev->vendor_id, dev->product_id,
                               dev->serial ? " serial " : "", dev->serial ? dev->serial : "");
    }
    return g_strdup("");
}

/* The facts of @dev in the step's report entry. */
static void
av_scrub_usb_note(AvScrubContext *ctx, const AvUsbDevice *dev)
{
    json_object_set_new(ctx->entry, "bus_path", json_string(dev->bus_path));
    json_object_set_new(ctx->entry, "busnum", json_integer(dev->busnum));
    json_object_set_new(ctx->entry, "devnum", json_integer(dev->devnum));
}

/* Keeps the stick at @bus_path de-authorized (@when: "before", "after"
 * the step's action, for the error): writes 0 when it reads otherwise and
 * checks that it reads 0 (av_usb_authorized_set()).  *ret_written says
 * whether it had to write. */
static gboolean
av_scrub_usb_keep_held(AvScrubContext *ctx, const char *bus_path, const char *when, gboolean *ret_written,
                       GError **error)
{
    if (av_usb_authorized_set(ctx->root, ctx->ops, bus_path, FALSE, ret_written, error))
        return TRUE;
    g_prefix_error(error, "the USB device %s cannot be kept de-authorized %s the step: ", bus_path, when);
    return FALSE;
}

/* "usb-reset": see above. */
gboolean
av_scrub_method_usb_reset(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;
    g_autoptr(GPtrArray) after = NULL;
    const AvUsbDevice *dev = NULL;
    g_autofree char *bus_path = NULL;
    gboolean was_authorized = FALSE;
    guint busnum, devnum;
    int r;

    if (!av_scrub_usb_locate(ctx, &usb, &dev, error)) {
        *ret_message = g_strdup("device not found; no reset done");
        return FALSE;
    }
    av_scrub_usb_note(ctx, dev);
    bus_path = g_strdup(dev->bus_path);
    busnum = dev->busnum;
    devnum = dev->devnum;
    if (!av_scrub_usb_keep_held(ctx, bus_path, "before", &was_authorized, error)) {
        *ret_message = g_strdup_printf("%s could not be de-authorized; no reset done", bus_path);
        return FALSE;
    }
    r = ctx->ops->usb_reset(ctx->root, busnum, devnum);
    if (r < 0) {
        *ret_message = g_strdup_printf("usb port reset of %s failed", bus_path);
        return av_error_errno(error, r, "cannot reset the USB device %s (USBDEVFS_RESET on /dev/bus/usb/%03u/%03u)",
                              bus_path, busnum, devnum);
    }
    /* The same device, still at 0: a reset that changed its descriptors
     * ends in a new enumeration, which the kernel may authorize. */
    after = av_host_scan_usb(ctx->root, error);
    if (!after) {
        *ret_message = g_strdup_printf("usb port reset of %s (bus %u device %u); the USB devices cannot be read "
                                       "again", bus_path, busnum, devnum);
        return FALSE;
    }
    dev = av_pool_find_usb_device_at(after, ctx->target->identity, bus_path);
    if (!dev) {
        g_autofree char *why = av_scrub_usb_why_not_back(ctx, after);

        *ret_message = g_strdup_printf("usb port reset of %s (bus %u device %u); the device is not back%s",
                                       bus_path, busnum, devnum, why);
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "after the reset of %s no USB device presenting %s is at that port%s", bus_path,
                    ctx->target->identity, why);
        return FALSE;
    }
    if (!av_scrub_usb_keep_held(ctx, dev->bus_path, "after", NULL, error)) {
        *ret_message = g_strdup_printf("usb port reset of %s (bus %u device %u); it could not be de-authorized "
                                       "again", bus_path, busnum, devnum);
        return FALSE;
    }
    *ret_message = g_strdup_printf("usb port reset of %s (bus %u device %u), de-authorized throughout%s", bus_path,
                                   busnum, devnum, was_authorized ? " (it was found authorized)" : "");
    return TRUE;
}

/* Waits up to the step's timeout for the device at the target's port to
 * present the target's identity again (its first ids), with "authorized"
 * reading 1 when @authorized, and stores its devnum; @after names what it
 * comes back from, for the error.  An unreadable "authorized" is not a
 * success; the error says what is at the port. */
static gboolean
av_scrub_usb_wait(AvScrubContext *ctx, gboolean authorized_too, const char *after, guint *ret_devnum,
                  GError **error)
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
        g_free(last);
        if (!dev) {
            last = av_scrub_usb_why_not_back(ctx, usb);
        } else if (!authorized_too || (av_usb_authorized_read(ctx->root, dev->bus_path, &authorized, &read_error) &&
                                       g_str_equal(authorized, "1"))) {
            *ret_devnum = dev->devnum;
            return TRUE;
        } else {
            last = read_error ? g_strdup_printf(": %s", read_error->message)
                              : g_strdup_printf(": 'authorized' reads '%s'", authorized);
        }
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(AV_USB_POLL_US);
    }
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "the USB device at %s did not come back presenting %s%s within %u s of its %s%s",
                ctx->target->address, ctx->target->identity, authorized_too ? " and authorized" : "",
                ctx->step->timeout_s, after, *last ? last : " (no device is at that port)");
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
    if (!av_usb_authorized_read(ctx->root, bus_path, &authorized, error)) {
        *ret_message = g_strdup_printf("'authorized' of %s cannot be read; not re-authorized", bus_path);
        return FALSE;
    }
    if (!g_str_equal(authorized, "0")) {
        if (!av_usb_authorized_write(ctx->root, ctx->ops, bus_path, "0", error)) {
            *ret_message = g_strdup_printf("de-authorization of %s failed", bus_path);
            return FALSE;
        }
        g_clear_pointer(&authorized, g_free);
        if (!av_usb_authorized_read(ctx->root, bus_path, &authorized, error)) {
            *ret_message = g_strdup_printf("wrote 0 to 'authorized' of %s; it cannot be read back", bus_path);
            return FALSE;
        }
    }
    if (!g_str_equal(authorized, "0")) {
        *ret_message = g_strdup_printf("wrote 0 to 'authorized' of %s; it reads '%s'", bus_path, authorized);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "the de-authorization of the USB device %s did not take effect: 'authorized' reads '%s' after "
                    "writing 0", bus_path, authorized);
        return FALSE;
    }
    if (!av_usb_authorized_write(ctx->root, ctx->ops, bus_path, "1", error)) {
        *ret_message = g_strdup_printf("de-authorized %s; authorizing it again failed", bus_path);
        return FALSE;
    }
    if (!av_scrub_usb_wait(ctx, TRUE, "re-authorization", &devnum, error)) {
        g_autoptr(GError) held = NULL;

        /* Whatever is at the port stays held (the worker's hold does the same). */
        (void)av_usb_authorized_set(ctx->root, ctx->ops, bus_path, FALSE, NULL, &held);
        *ret_message = g_strdup_printf("de-authorized %s and wrote 1; it did not come back authorized", bus_path);
        return FALSE;
    }
    /* Authorized for the step only: held again until it is freed. */
    if (!av_scrub_usb_keep_held(ctx, bus_path, "after", NULL, error)) {
        *ret_message = g_strdup_printf("de-authorized and authorized again at %s (devnum %u before, %u after); it "
                                       "could not be de-authorized again", bus_path, devnum_before, devnum);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "bus_path_after", json_string(bus_path));
    json_object_set_new(ctx->entry, "devnum_after", json_integer(devnum));
    *ret_message = g_strdup_printf("de-authorized and authorized again at %s (devnum %u before, %u after)%s; "
                                   "de-authorized again until it is freed", bus_path, devnum_before, devnum,
                                   devnum != devnum_before ? "; re-enumerated" : "");
    return TRUE;
}

/* How long usb-power-cycle keeps the port's power off: long enough for a
 * stick's own capacitors to drain, so that it starts from its boot loader. */
#define AV_USB_POWER_OFF_US (1000 * 1000)

/* The root-relative path of the "disable" of the hub port the USB device
 * @dev is plugged into (its "port" link, Documentation/ABI/testing/
 * sysfs-bus-usb), resolved inside the root, into *ret_path.  FALSE with
 * @error when the device has no port link or the port no "disable". */
static gboolean
av_scrub_usb_port_disable(AvScrubContext *ctx, const AvUsbDevice *dev, char **ret_path, GError **error)
{
    g_autofree char *link = g_strconcat(dev->sysfs_path, "/port", NULL);
    g_autofree char *port = NULL;
    g_autofree char *disable = NULL;
    int r = av_root_resolve(ctx->root, link, &port);

    if (r < 0)
        return av_error_errno(error, r, "the USB device %s has no hub port in sysfs ('port' link); its power "
                              "cannot be cycled: use usb-reauthorize instead", dev->bus_path);
    disable = g_strconcat(port, "/disable", NULL);
    if (!av_root_exists(ctx->root, disable)) {
        g_autofree char *name = g_path_get_basename(port);

        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "the hub port %s of the USB device %s has no 'disable' (Documentation/ABI/testing/"
                    "sysfs-bus-usb): its power cannot be switched off and on from the host; nothing done; use "
                    "usb-reauthorize, or plug the stick into a hub with per-port power switching", name,
                    dev->bus_path);
        return FALSE;
    }
    *ret_path = g_steal_pointer(&disable);
    return TRUE;
}

/* "usb-power-cycle": see above. */
gboolean
av_scrub_method_usb_power_cycle(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;
    g_autoptr(GPtrArray) off = NULL;
    const AvUsbDevice *dev = NULL;
    g_autofree char *bus_path = NULL;
    g_autofree char *disable = NULL;
    guint devnum_before, devnum = 0;
    int r;

    if (!av_scrub_usb_locate(ctx, &usb, &dev, error)) {
        *ret_message = g_strdup("device not found; its port's power not cycled");
        return FALSE;
    }
    av_scrub_usb_note(ctx, dev);
    bus_path = g_strdup(dev->bus_path);
    devnum_before = dev->devnum;
    if (!av_scrub_usb_port_disable(ctx, dev, &disable, error)) {
        *ret_message = g_strdup_printf("the port of %s cannot be switched off; nothing done", bus_path);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "port_disable", json_string(disable));
    if (!av_scrub_usb_keep_held(ctx, bus_path, "before", NULL, error)) {
        *ret_message = g_strdup_printf("%s could not be de-authorized; its port's power not cycled", bus_path);
        return FALSE;
    }
    r = ctx->ops->write(ctx->root, disable, "1");
    if (r < 0) {
        *ret_message = g_strdup_printf("switching off the port of %s failed", bus_path);
        return av_error_errno(error, r, "cannot write 1 to '%s' (the hub port of the USB device %s)", disable,
                              bus_path);
    }
    /* The kernel disconnects the device before it returns (port.c:
     * disable_store()): one still there was not switched off. */
    off = av_host_scan_usb(ctx->root, error);
    if (!off) {
        *ret_message = g_strdup_printf("switched off the port of %s; the USB devices cannot be read", bus_path);
        (void)ctx->ops->write(ctx->root, disable, "0");
        return FALSE;
    }
    for (guint i = 0; i < off->len; i++) {
        if (g_str_equal(((const AvUsbDevice *)g_ptr_array_index(off, i))->bus_path, bus_path)) {
            *ret_message = g_strdup_printf("wrote 1 to the port's 'disable' of %s; the device is still there",
                                           bus_path);
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "the USB device %s is still connected after 1 was written to '%s': its port was not "
                        "switched off", bus_path, disable);
            (void)ctx->ops->write(ctx->root, disable, "0");
            return FALSE;
        }
    }
    g_usleep(AV_USB_POWER_OFF_US);
    r = ctx->ops->write(ctx->root, disable, "0");
    if (r < 0) {
        *ret_message = g_strdup_printf("switched off the port of %s; switching it on again failed", bus_path);
        return av_error_errno(error, r, "cannot write 0 to '%s' (the hub port of the USB device %s): the stick "
                              "stays off until the port is switched on by hand", disable, bus_path);
    }
    if (!av_scrub_usb_wait(ctx, FALSE, "port's power coming back", &devnum, error)) {
        g_autoptr(GError) held = NULL;

        /* Whatever came back stays held (the worker's hold does the same). */
        (void)av_usb_authorized_set(ctx->root, ctx->ops, bus_path, FALSE, NULL, &held);
        *ret_message = g_strdup_printf("port of %s disabled and enabled again; it did not come back with its "
                                       "first ids", bus_path);
        return FALSE;
    }
    if (!av_scrub_usb_keep_held(ctx, bus_path, "after", NULL, error)) {
        *ret_message = g_strdup_printf("port of %s disabled and enabled again (devnum %u before, %u after); it "
                                       "could not be de-authorized again", bus_path, devnum_before, devnum);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "devnum_after", json_integer(devnum));
    *ret_message = g_strdup_printf("port of %s disabled and enabled again (devnum %u before, %u after; its "
                                   "power off meanwhile only where its hub switches each port's power); back "
                                   "with its first ids, de-authorized until it is freed", bus_path, devnum_before,
                                   devnum);
    return TRUE;
}
