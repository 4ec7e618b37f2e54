/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the policy's top-level "limits" (accelvirt-policy(5),
 * LIMITS): what one owner's domains may hold on this host, in devices
 * (held: claimed or in use) and in device-hours of a calendar period.
 * Parsed here; counted by the pool (pool/av-pool.h,
 * av_pool_limits_check()). */
#include "config.h"

#include "av-policy-private.h"

#include <string.h>

#include "util/av-error.h"

/* An owner id: what Nova writes (a UUID) or what `accelvirt define
 * --project` pins; printable, no spaces. */
#define AV_LIMIT_ID_MAX 255

/* A bound far above any host (hours: 100 years of 10,000 devices). */
#define AV_LIMIT_MAX_DEVICES 100000
#define AV_LIMIT_MAX_HOURS 8760000000LL

static const char *const limit_keys[] = { "owner", "profile", "max_devices", "max_device_hours", "period", NULL };
static const char *const owner_keys[] = { "project", "user", NULL };
static const char *const period_names[] = { "none", "day", "week", "month", NULL };

void
av_limit_free(AvLimit *limit)
{
    if (!limit)
        return;
    g_free(limit->project);
    g_free(limit->user);
    g_free(limit->profile);
    g_free(limit->source_file);
    g_free(limit);
}

const char *
av_limit_period_to_string(AvLimitPeriod period)
{
    return (guint)period < AV_LIMIT_PERIODS ? period_names[period] : "none";
}

gint64
av_limit_period_start(AvLimitPeriod period, gint64 now)
{
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(now);
    g_autoptr(GDateTime) start = NULL;

    if (!t || period == AV_LIMIT_PERIOD_NONE || period >= AV_LIMIT_PERIODS)
        return now;
    if (period == AV_LIMIT_PERIOD_MONTH) {
        start = g_date_time_new_utc(g_date_time_get_year(t), g_date_time_get_month(t), 1, 0, 0, 0);
    } else {
        g_autoptr(GDateTime) day = g_date_time_new_utc(g_date_time_get_year(t), g_date_time_get_month(t),
                                                       g_date_time_get_day_of_month(t), 0, 0, 0);

        if (period == AV_LIMIT_PERIOD_DAY)
            start = g_steal_pointer(&day);
        else
            start = g_date_time_add_days(day, 1 - g_date_time_get_day_of_week(day));
    }
    return start ? g_date_time_to_unix(start) : now;
}

gboolean
av_limit_owner_matches(const AvLimit *limit, const char *project, const char *user)
{
    if (limit->project && g_strcmp0(limit->project, project) != 0)
        return FALSE;
    if (limit->user && g_strcmp0(limit->user, user) != 0)
        return FALSE;
    return limit->project || limit->user;
}

char *
av_limit_describe_owner(const AvLimit *limit)
{
    if (limit->project && limit->user)
        return g_strdup_printf("project '%s' user '%s'", limit->project, limit->user);
    if (limit->project)
        return g_strdup_printf("project '%s'", limit->project);
    return g_strdup_printf("user '%s'", limit->user ? limit->user : "-");
}

json_t *
av_limit_to_json(const AvLimit *limit)
{
    json_t *owner = json_object();
    json_t *o = json_object();

    if (limit->project)
        json_object_set_new(owner, "project", json_string(limit->project));
    if (limit->user)
        json_object_set_new(owner, "user", json_string(limit->user));
    json_object_set_new(o, "owner", owner);
    if (limit->profile)
        json_object_set_new(o, "profile", json_string(limit->profile));
    if (limit->max_devices >= 0)
        json_object_set_new(o, "max_devices", json_integer(limit->max_devices));
    if (limit->max_device_hours >= 0) {
        json_object_set_new(o, "max_device_hours", json_integer(limit->max_device_hours));
        json_object_set_new(o, "period", json_string(av_limit_period_to_string(limit->period)));
    }
    return o;
}

static gboolean
limit_id_valid(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > AV_LIMIT_ID_MAX || !g_utf8_validate(s, -1, NULL))
        return FALSE;
    for (const char *c = s; *c; c++) {
        if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '\'' || *c == '"' || *c == '\\')
            return FALSE;
    }
    return TRUE;
}

/* A whole number from 0 to @max at @key of @obj into *ret (-1 absent). */
static gboolean
limit_get_count(const PolicyParse *pp, json_t *obj, const char *base, const char *key, gint64 max, gint64 *ret,
                GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *path = path_join(base, key);

    *ret = -1;
    if (!v)
        return TRUE;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return policy_fail(pp, path, FALSE, error, "'%s' must be a whole number from 0 to %" G_GINT64_FORMAT
                           " (a limit of 0 allows nothing)", key, max);
    *ret = json_integer_value(v);
    return TRUE;
}

static gboolean
limit_get_id(const PolicyParse *pp, json_t *owner, const char *base, const char *key, char **ret, GError **error)
{
    json_t *v = json_object_get(owner, key);
    g_autofree char *path = path_join(base, key);

    if (!v)
        return TRUE;
    if (!json_is_string(v) || !limit_id_valid(json_string_value(v)))
        return policy_fail(pp, path, FALSE, error, "'owner.%s' must be a %s id as domains are charged to it "
                           "(1 to %d printable characters, no spaces or quotes)", key, key, AV_LIMIT_ID_MAX);
    *ret = g_strdup(json_string_value(v));
    return TRUE;
}

static gboolean
parse_limit(const PolicyParse *pp, const AvPolicy *policy, GPtrArray *added, json_t *obj, gsize index,
            AvLimit **ret_limit, GError **error)
{
    g_autofree char *base = g_strdup_printf("limits/%" G_GSIZE_FORMAT, index);
    g_autofree char *opath = path_join(base, "owner");
    g_autoptr(AvLimit) limit = g_new0(AvLimit, 1);
    json_t *owner, *v;

    if (!json_is_object(obj))
        return policy_fail(pp, base, FALSE, error, "each entry of 'limits' must be an object such as "
                           "{\"owner\": {\"project\": \"...\"}, \"profile\": \"gpu\", \"max_devices\": 1}");
    if (!check_keys(pp, obj, base, " in a limit", limit_keys, error))
        return FALSE;
    owner = json_object_get(obj, "owner");
    if (!owner || !json_is_object(owner))
        return policy_fail(pp, owner ? opath : base, owner != NULL, error, "a limit needs an 'owner' object "
                           "naming a \"project\" or a \"user\" (or both)");
    if (!check_keys(pp, owner, opath, " in a limit's owner", owner_keys, error) ||
        !limit_get_id(pp, owner, opath, "project", &limit->project, error) ||
        !limit_get_id(pp, owner, opath, "user", &limit->user, error))
        return FALSE;
    if (!limit->project && !limit->user)
        return policy_fail(pp, opath, FALSE, error, "the limit's owner names no id: give its \"project\" or its "
                           "\"user\" (or both)");
    v = json_object_get(obj, "profile");
    if (v) {
        g_autofree char *ppath = path_join(base, "profile");

        if (!json_is_string(v))
            return policy_fail(pp, ppath, FALSE, error, "'profile' must be the name of a profile");
        if (!find_profile(policy->profiles, json_string_value(v)) && !find_profile(added, json_string_value(v)))
            return policy_fail(pp, ppath, FALSE, error, "unknown profile '%s'; a limit names a profile of this "
                               "file or of a file before it", json_string_value(v));
        limit->profile = g_strdup(json_string_value(v));
    }
    if (!limit_get_count(pp, obj, base, "max_devices", AV_LIMIT_MAX_DEVICES, &limit->max_devices, error) ||
        !limit_get_count(pp, obj, base, "max_device_hours", AV_LIMIT_MAX_HOURS, &limit->max_device_hours, error))
        return FALSE;
    if (limit->max_devices < 0 && limit->max_device_hours < 0)
        return policy_fail(pp, base, FALSE, error, "a limit needs \"max_devices\" or \"max_device_hours\" "
                           "(with its \"period\")");
    v = json_object_get(obj, "period");
    if (v) {
        g_autofree char *ppath = path_join(base, "period");
        const char *name = json_is_string(v) ? json_string_value(v) : "";

        for (int p = AV_LIMIT_PERIOD_DAY; p < AV_LIMIT_PERIODS; p++)
            if (g_str_equal(name, period_names[p]))
                limit->period = (AvLimitPeriod)p;
        if (limit->period == AV_LIMIT_PERIOD_NONE)
            return policy_fail(pp, ppath, FALSE, error, "unknown period; expected one of: day, week, month "
                               "(calendar periods in UTC)");
        if (limit->max_device_hours < 0)
            return policy_fail(pp, ppath, TRUE, error, "a 'period' goes with \"max_device_hours\" only");
    } else if (limit->max_device_hours >= 0) {
        return policy_fail(pp, base, FALSE, error, "\"max_device_hours\" needs a \"period\": day, week or month");
    }
    limit->source_file = g_strdup(pp->filename);
    *ret_limit = g_steal_pointer(&limit);
    return TRUE;
}

/* See av-policy-private.h. */
gboolean
policy_parse_limits(const PolicyParse *pp, const AvPolicy *policy, GPtrArray *added, json_t *root,
                    GPtrArray **ret_limits, GError **error)
{
    g_autoptr(GPtrArray) limits = g_ptr_array_new_with_free_func((GDestroyNotify)av_limit_free);
    json_t *array = json_object_get(root, "limits");
    json_t *obj;
    gsize i;

    if (array && !json_is_array(array))
        return policy_fail(pp, "limits", FALSE, error, "'limits' must be a list of limits such as "
                           "[{\"owner\": {\"project\": \"...\"}, \"profile\": \"gpu\", \"max_devices\": 1}]");
    if (array) {
        json_array_foreach(array, i, obj) {
            AvLimit *limit = NULL;

            if (!parse_limit(pp, policy, added, obj, i, &limit, error))
                return FALSE;
            g_ptr_array_add(limits, limit);
        }
    }
    *ret_limits = g_steal_pointer(&limits);
    return TRUE;
}
