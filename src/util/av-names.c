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

gboolean
av_name_is_strict(const char *name, const char *extra)
{
    gsize len;

    if (!name)
        return FALSE;
    len = strlen(name);
    if (len == 0 || len > 64 || g_str_equal(name, ".") || g_str_equal(name, ".."))
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum(name[i]) && name[i] != '_' && name[i] != '.' && name[i] != '-' &&
            !(extra && strchr(extra, name[i])))
            return FALSE;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_scrub_token_is_valid(const char *token)
{
    if (!token || strlen(token) != AV_SCRUB_TOKEN_LEN)
        return FALSE;
    for (const char *p = token; *p; p++)
        if (!g_ascii_isdigit(*p) && !(*p >= 'a' && *p <= 'f'))
            return FALSE;
    return TRUE;
}
