/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: `--version`. */
#include "config.h"

#include "util/av-version.h"

/* See av-version.h.  configure says whether nvcc built the scrubbing
 * kernel (AV_GPU_SCRUB_BUILT: "no", or "yes (nvcc and its GPU flags)"). */
char *
av_version_text(const char *program, const char *placement)
{
    GString *text = g_string_new(NULL);

    g_string_append_printf(text, "%s %s\n", program, PACKAGE_VERSION);
    if (g_str_has_prefix(AV_GPU_SCRUB_BUILT, "yes"))
        g_string_append_printf(text, "GPU scrubbing kernel: built, %s%s\n", AV_PKGLIBEXEC_DIR "/accelvirt-scrub-gpu",
                               &AV_GPU_SCRUB_BUILT[3]);
    else
        g_string_append(text, "GPU scrubbing kernel: not built (configure found no nvcc that compiles it)\n");
    g_string_append_printf(text, "Placement client: %s\n", placement);
    g_string_append(text, "License: " AV_LICENSE " (see LICENSE; https://www.apache.org/licenses/LICENSE-2.0)\n");
    return g_string_free(text, FALSE);
}
