/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the helpers that load pool.json strictly (av-pool-private.h,
 * "loading pool.json"), below every file that loads a part of it: the
 * store (av-pool-store.c), the intents, the placement records. */
#include "config.h"

#include "av-pool-private.h"

#include <stdarg.h>
#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"

const char av_corrupt_advice[] = "move it away or repair it; accelvirt will not overwrite it";

/* See av-pool-private.h. */
gboolean
av_pool_load_fail(const AvPoolLoad *ld, GError **error, const char *jpath, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    int line = 1, column = 1;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!av_json_locate(ld->data, ld->len, jpath, &line, &column)) {
        line = 1;
        column = 1;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                "the pool file '%s' is corrupt at line %d, column %d: %s: %s; %s",
                ld->path, line, column, *jpath ? jpath : "(top level)", msg, av_corrupt_advice);
    return FALSE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_keys_opt(const AvPoolLoad *ld, json_t *obj, const char *jpath,
                      const char *const *keys, const char *const *optional, GError **error)
{
    const char *key;
    json_t *value;
    size_t present = 0;
    gboolean whole = TRUE;

    /* The common case without a string comparison: every key there, and
     * no member that is neither a key nor an optional one (the members
     * counted by lookups).  Otherwise the loops below say what is wrong. */
    for (guint i = 0; keys[i]; i++) {
        whole = whole && json_object_get(obj, keys[i]) != NULL;
        present++;
    }
    for (guint i = 0; optional && optional[i]; i++)
        present += json_object_get(obj, optional[i]) != NULL;
    if (whole && present == json_object_size(obj))
        return TRUE;
    json_object_foreach(obj, key, value) {
        if (!g_strv_contains(keys, key) && !(optional && g_strv_contains(optional, key))) {
            g_autofree char *sub = *jpath ? g_strdup_printf("%s/%s", jpath, key) : g_strdup(key);
            return av_pool_load_fail(ld, error, sub, "unknown member '%s'", key);
        }
    }
    for (guint i = 0; keys[i]; i++) {
        if (!json_object_get(obj, keys[i]))
            return av_pool_load_fail(ld, error, jpath, "the member '%s' is missing", keys[i]);
    }
    return TRUE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_keys(const AvPoolLoad *ld, json_t *obj, const char *jpath,
                  const char *const *keys, GError **error)
{
    return av_pool_load_keys_opt(ld, obj, jpath, keys, NULL, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_load_string(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                    gboolean nullable, char **ret_value, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *sub = NULL;

    if (json_is_null(v) && nullable) {
        *ret_value = NULL;
        return TRUE;
    }
    /* The path only for an error: a load makes thousands of these. */
    if (!json_is_string(v)) {
        sub = g_strdup_printf("%s/%s", jpath, key);
        return av_pool_load_fail(ld, error, sub, "expected a string%s", nullable ? " or null" : "");
    }
    if (json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v)) {
        sub = g_strdup_printf("%s/%s", jpath, key);
        return av_pool_load_fail(ld, error, sub, "expected a non-empty string without NUL");
    }
    *ret_value = g_strdup(json_string_value(v));
    return TRUE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_int(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                 gint64 min, gint64 max, gint64 *ret_value, GError **error)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, key);
        return av_pool_load_fail(ld, error, sub, "expected an integer from %" G_GINT64_FORMAT
                                 " to %" G_GINT64_FORMAT, min, max);
    }
    *ret_value = json_integer_value(v);
    return TRUE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_owner(const AvPoolLoad *ld, json_t *v, const char *jpath, AvOwner **ret_owner, GError **error)
{
    static const char *const keys[] = {
        "domain_uuid", "domain_name", "nova_instance", "nova_project", "nova_user", NULL
    };
    g_autoptr(AvOwner) owner = NULL;

    if (json_is_null(v)) {
        *ret_owner = NULL;
        return TRUE;
    }
    if (!json_is_object(v))
        return av_pool_load_fail(ld, error, jpath, "expected an object or null");
    if (!av_pool_load_keys(ld, v, jpath, keys, error))
        return FALSE;
    owner = g_new0(AvOwner, 1);
    if (!av_pool_load_string(ld, v, jpath, "domain_uuid", TRUE, &owner->domain_uuid, error) ||
        !av_pool_load_string(ld, v, jpath, "domain_name", TRUE, &owner->domain_name, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_instance", TRUE, &owner->nova_instance, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_project", TRUE, &owner->nova_project, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_user", TRUE, &owner->nova_user, error))
        return FALSE;
    *ret_owner = g_steal_pointer(&owner);
    return TRUE;
}
