/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: error domain. */
#include "config.h"

#include "av-error.h"

#include <errno.h>
#include <string.h>

G_DEFINE_QUARK(accelvirt-error-quark, av_error)

gboolean
av_error_errno(GError **error, int neg_errno, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;
    int code = AV_ERROR_IO;

    if (!error)
        return FALSE;
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (neg_errno == -ENOENT)
        code = AV_ERROR_NOT_FOUND;
    else if (neg_errno == -EBUSY)
        code = AV_ERROR_IN_USE;
    else if (neg_errno == -EWOULDBLOCK)
        code = AV_ERROR_LOCKED;
    g_set_error(error, AV_ERROR, code, "%s: %s", msg, g_strerror(-neg_errno));
    return FALSE;
}
