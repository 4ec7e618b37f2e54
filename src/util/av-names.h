/* accelvirt: strict formats of names that may reach a path or a log. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* TRUE when @uuid is a canonical lower-case UUID (8-4-4-4-12 hex digits), the
 * only form accepted before a path is built from it.  NULL is FALSE. */
gboolean av_uuid_is_valid(const char *uuid);

G_END_DECLS
