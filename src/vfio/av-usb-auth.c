/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a USB device's "authorized" attribute (see av-usb-auth.h). */
#include "config.h"

#include "av-usb-auth.h"

#include <errno.h>

#include "util/av-error.h"

/* The root-relative path of the "authorized" of @bus_path.  Caller frees. */
static char *
av_usb_authorized_path(const char *bus_path)
{
    return av_sys_path("bus/usb/devices/%s/authorized", bus_path);
}

/* See av-usb-auth.h. */
gboolean
av_usb_authorized_read(const AvRoot *root, const char *bus_path, char **ret_value, GError **error)
{
    g_autofree char *path = av_usb_authorized_path(bus_path);
    int r = av_root_read_attr(root, path, ret_value);

    if (r == -ENOENT) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "the USB device %s has no 'authorized' (is it gone?)",
                    bus_path);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot read 'authorized' of the USB device %s", bus_path);
    return TRUE;
}

/* See av-usb-auth.h. */
gboolean
av_usb_authorized_write(const AvRoot *root, const AvKernelOps *ops, const char *bus_path, const char *value,
                        GError **error)
{
    g_autofree char *path = av_usb_authorized_path(bus_path);
    int r = ops->write(root, path, value);

    if (r < 0)
        return av_error_errno(error, r, "cannot write %s to 'authorized' of the USB device %s", value, bus_path);
    return TRUE;
}

/* See av-usb-auth.h. */
gboolean
av_usb_authorized_set(const AvRoot *root, const AvKernelOps *ops, const char *bus_path, gboolean authorized,
                      gboolean *ret_written, GError **error)
{
    const char *want = authorized ? "1" : "0";
    g_autofree char *now = NULL;
    g_autofree char *after = NULL;

    if (ret_written)
        *ret_written = FALSE;
    if (!av_usb_authorized_read(root, bus_path, &now, error))
        return FALSE;
    if (g_str_equal(now, want))
        return TRUE;
    if (!av_usb_authorized_write(root, ops, bus_path, want, error))
        return FALSE;
    if (ret_written)
        *ret_written = TRUE;
    if (!av_usb_authorized_read(root, bus_path, &after, error)) {
        g_prefix_error(error, "wrote %s to 'authorized' of the USB device %s, but: ", want, bus_path);
        return FALSE;
    }
    if (!g_str_equal(after, want)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "wrote %s to 'authorized' of the USB device %s, but it reads '%s'", want, bus_path, after);
        return FALSE;
    }
    return TRUE;
}
