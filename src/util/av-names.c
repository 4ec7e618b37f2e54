/* accelvirt: strict formats of names. */
#include "config.h"

#include "av-names.h"

#include <string.h>

gboolean
av_uuid_is_valid(const char *uuid)
{
    if (!uuid || strlen(uuid) != 36)
        return FALSE;
    for (guint i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (uuid[i] != '-')
                return FALSE;
        } else if (!g_ascii_isxdigit(uuid[i]) || g_ascii_isupper(uuid[i])) {
            return FALSE;
        }
    }
    return TRUE;
}
