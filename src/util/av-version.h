/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what `--version` says: the program and its version, the
 * optional parts this build has, and the license. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The license of every file of accelvirt, as SPDX names it. */
#define AV_LICENSE "Apache-2.0"

/* The text of `@program --version`, lines ending in a newline: the
 * version, whether the GPU scrubbing kernel was built (and where it is
 * installed), @placement (what the program has of the Placement client,
 * such as "built in (libcurl 7.88.1)"), the license.  Caller frees. */
char *av_version_text(const char *program, const char *placement);

G_END_DECLS
