/* accelvirt: the scrub method "rom-check". */
#include "config.h"

#include "av-scrub-private.h"

#include "util/av-error.h"

gboolean
av_scrub_method_rom_check(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "scrub method '%s' is not available yet; the device stays quarantined until it is",
                av_scrub_method_to_string(ctx->step->method));
    *ret_message = g_strdup((*error)->message);
    return FALSE;
}
