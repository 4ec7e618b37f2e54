/* accelvirt: what the scrub methods share (src/scrub only). */
#pragma once

#include "av-scrub.h"

G_BEGIN_DECLS

/* One step being run. */
typedef struct {
    const AvRoot *root;
    const AvKernelOps *ops;
    const AvProfile *profile;
    const AvScrubTarget *target;
    const AvScrubStep *step;
    json_t *entry;               /* the step's report entry: a method adds its facts ("bytes", "sha256", ...) */
} AvScrubContext;

/* A method: runs @ctx->step; *ret_message gets one line for the report, on
 * success and on failure (caller frees).  Returns FALSE with @error set when
 * the step failed: the device is then quarantined. */
typedef gboolean (*AvScrubMethodFunc)(AvScrubContext *ctx, char **ret_message, GError **error);

gboolean av_scrub_method_vfio_zero(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_reset(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_rom_check(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_vm(AvScrubContext *ctx, char **ret_message, GError **error);

G_END_DECLS
