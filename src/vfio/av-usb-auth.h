/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a USB device's "authorized" attribute, the one hold the kernel
 * offers on a USB device (Documentation/ABI/testing/sysfs-bus-usb,
 * Documentation/usb/authorization.rst).
 *
 * Writing 0 makes the kernel de-configure the device
 * (usb_deauthorize_device(): usb_set_configuration(dev, -1)): its
 * interfaces go, their drivers are unbound, and the kernel refuses to
 * configure it again (usb_set_configuration() sets configuration 0 on a
 * device that is not authorized), so no driver and no usbfs user (QEMU's
 * usb-host) can claim an interface or move data through an endpoint other
 * than endpoint 0.  The device itself stays: its sysfs directory, busnum,
 * devnum, descriptors and strings (serial included: kernels since 4.x keep
 * them), and its /dev/bus/usb/BBB/DDD node, which root may still open for
 * control transfers on endpoint 0.  Writing 1 configures it again; a
 * device such as a Movidius stick then reboots into its loader and
 * re-enumerates, possibly with another devnum.
 *
 * Writes go through the kernel ops table (av-kernel.h), so the emulated
 * kernel acts on a fake tree. */
#pragma once

#include <glib.h>

#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Reads the "authorized" of the USB device @bus_path ("1-1.2") into
 * *ret_value (caller frees: "0", "1", or what the kernel printed).  FALSE
 * with @error when it cannot be read (the device is gone: AV_ERROR_NOT_FOUND). */
gboolean av_usb_authorized_read(const AvRoot *root, const char *bus_path, char **ret_value, GError **error);

/* Writes @value ("0" or "1") to the "authorized" of the USB device
 * @bus_path through @ops, as one write, and nothing else.  FALSE with
 * @error quoting the kernel's answer. */
gboolean av_usb_authorized_write(const AvRoot *root, const AvKernelOps *ops, const char *bus_path, const char *value,
                                 GError **error);

/* Makes the USB device @bus_path authorized (@authorized TRUE, "1") or not
 * ("0"): reads it first and writes only when it reads otherwise, then reads
 * it back.  *ret_written (may be NULL) says whether it wrote.  FALSE with
 * @error when the write fails or the attribute does not read back as
 * wanted (the kernel did not take it). */
gboolean av_usb_authorized_set(const AvRoot *root, const AvKernelOps *ops, const char *bus_path, gboolean authorized,
                               gboolean *ret_written, GError **error);

G_END_DECLS
