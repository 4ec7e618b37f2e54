/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: error domain and codes shared by every layer.
 *
 * Leaf primitives that wrap a syscall return -errno; everything above returns
 * gboolean or a pointer and takes GError **error last.  The programs (CLI, hook)
 * map these codes to exit statuses. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define AV_ERROR (av_error_quark())

typedef enum {
    AV_ERROR_FAILED,         /* anything not below */
    AV_ERROR_INVALID_INPUT,  /* bad argument, bad address, bad XML: the user must fix the input */
    AV_ERROR_NOT_FOUND,      /* a device, profile or file that does not exist */
    AV_ERROR_LOCKED,         /* a lock another accelvirt process holds (the pool's, a device's scrub
                              * lock, an attach in flight), or a Placement generation conflict: the
                              * same command again, once that process is done, is what fixes it */
    AV_ERROR_CORRUPT_STATE,  /* the state file does not parse: left for the operator */
    AV_ERROR_IO,             /* a read or write failed */
    AV_ERROR_POLICY,         /* a policy file is wrong */
    AV_ERROR_UNSAFE,         /* refusing to do something that would harm the host */
    AV_ERROR_STATE,          /* a lifecycle transition that is not allowed */
    AV_ERROR_IN_USE,         /* a device, IOMMU group, bitstream or name is taken, by a domain, a
                              * process or a record: the operator frees it first, a retry alone
                              * does not */
    AV_ERROR_NO_CAPACITY,    /* not enough free devices (or instances) for the request: placement
                              * found none that fits */
} AvErrorCode;

GQuark av_error_quark(void);

/* Sets *error (if error is not NULL) to an AV_ERROR_IO error built from the
 * printf-style message followed by ": " and strerror(-neg_errno): an
 * AV_ERROR_NOT_FOUND one for -ENOENT, AV_ERROR_IN_USE for -EBUSY (the
 * kernel's "in use": a bound driver, an open group), AV_ERROR_LOCKED for
 * -EWOULDBLOCK (a lock not free).
 * Returns FALSE so that callers can write `return av_error_errno(...)`. */
gboolean av_error_errno(GError **error, int neg_errno, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

G_END_DECLS
