/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: strict formats of names. */
#include "config.h"

#include "av-names.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "av-error.h"

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
av_openstack_id_is_valid(const char *id)
{
    return id && g_ascii_isalnum(id[0]) && av_name_is_strict(id, "@");
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

/* See av-names.h. */
char *
av_random_hex(gsize n_bytes, const char *what, GError **error)
{
    g_autofree guint8 *bytes = g_malloc(n_bytes);
    GString *hex;
    gsize got = 0;

    while (got < n_bytes) {
        ssize_t n = getrandom(bytes + got, n_bytes - got, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : EIO;

            g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot get random bytes for %s: %s", what,
                        g_strerror(saved));
            return NULL;
        }
        got += (gsize)n;
    }
    hex = g_string_sized_new(2 * n_bytes + 1);
    for (gsize i = 0; i < n_bytes; i++)
        g_string_append_printf(hex, "%02x", bytes[i]);
    return g_string_free(hex, FALSE);
}

/* See av-names.h. */
char *
av_scrub_token_random(GError **error)
{
    return av_random_hex(AV_SCRUB_TOKEN_LEN / 2, "a scrub token", error);
}

/* See av-names.h. */
gboolean
av_mdev_type_id_is_valid(const char *type)
{
    return av_name_is_strict(type, NULL);
}

/* See av-names.h. */
gboolean
av_driver_name_is_valid(const char *driver)
{
    return av_name_is_strict(driver, NULL);
}

/* See av-names.h. */
gboolean
av_duration_parse(const char *text, guint64 *ret_seconds)
{
    static const struct {
        char unit;
        guint64 factor;
    } units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
    const char *p = text;
    guint64 n = 0, factor = 0;

    if (!p || !g_ascii_isdigit(*p))
        return FALSE;
    for (; g_ascii_isdigit(*p); p++) {
        if (n > AV_DURATION_MAX_S)
            return FALSE;
        n = n * 10 + (guint64)(*p - '0');
    }
    if (*p == '\0') {
        factor = 1;
    } else if (p[1] == '\0') {
        for (gsize i = 0; i < G_N_ELEMENTS(units); i++)
            if (*p == units[i].unit)
                factor = units[i].factor;
    }
    if (factor == 0 || n == 0 || n > AV_DURATION_MAX_S / factor)
        return FALSE;
    *ret_seconds = n * factor;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_bitstream_sha256_is_valid(const char *s)
{
    if (!s || strlen(s) != 64)
        return FALSE;
    for (const char *p = s; *p; p++)
        if (!g_ascii_isdigit(*p) && !(*p >= 'a' && *p <= 'f'))
            return FALSE;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_bitstream_name_is_valid(const char *name)
{
    gsize len = name ? strlen(name) : 0;

    if (len < 1 || len > 63)
        return FALSE;
    if (!g_ascii_islower(name[0]) && !g_ascii_isdigit(name[0]))
        return FALSE;
    for (const char *p = name; *p; p++)
        if (!g_ascii_islower(*p) && !g_ascii_isdigit(*p) && *p != '.' && *p != '_' && *p != '-')
            return FALSE;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_bitstream_ref_is_valid(const char *ref)
{
    return av_bitstream_name_is_valid(ref) || av_bitstream_sha256_is_valid(ref);
}

/* See av-names.h. */
gboolean
av_bitstream_function_id_is_valid(const char *id)
{
    gsize len = id ? strlen(id) : 0;

    if (len < 1 || len > AV_BITSTREAM_FUNCTION_ID_MAX)
        return FALSE;
    for (const char *p = id; *p; p++)
        if (!g_ascii_isalnum(*p) && !strchr("._:-", *p))
            return FALSE;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_netdev_name_kernel_valid(const char *name)
{
    gsize len = name ? strlen(name) : 0;

    if (len == 0 || len >= AV_NETDEV_NAME_MAX || g_str_equal(name, ".") || g_str_equal(name, ".."))
        return FALSE;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == ':' || g_ascii_isspace(*p))
            return FALSE;
    return TRUE;
}

/* See av-names.h. */
gboolean
av_netdev_name_is_valid(const char *name)
{
    gsize len = name ? strlen(name) : 0;

    if (len == 0 || len >= AV_NETDEV_NAME_MAX || g_str_equal(name, ".") || g_str_equal(name, ".."))
        return FALSE;
    for (const char *p = name; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_' && *p != '.')
            return FALSE;
    return TRUE;
}
