/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: per-owner usage and the policy's "limits" (accelvirt-policy(5),
 * LIMITS).
 *
 * Devices held are counted from the pool: the devices claimed or in use by
 * an owner's domains.  Device-hours of the current day, week and month are
 * kept in pool.json ("usage"): when a device leaves in-use (any
 * transition: release, detach, the upkeep's, missing), the time it was in
 * use is added to its owner's record, in the same atomic save as the
 * transition itself, so a crash loses or doubles nothing; the time of the
 * devices in use now is added on reading (from their state_since).  The
 * record holds one entry per (project, user, profile, period) seen in the
 * current period only (older ones are dropped at the next accrual): it
 * grows with the owners active this month, never with history, and the
 * hook reads it with the pool it reads anyway.  Owners with neither a
 * project nor a user are not recorded (no limit can name them). */
#include "config.h"

#include "av-pool-private.h"

#include "util/av-error.h"
#include "util/av-json.h"

/* See av-pool-private.h. */
void
av_pool_usage_free(AvPoolUsage *usage)
{
    if (!usage)
        return;
    g_free(usage->project);
    g_free(usage->user);
    g_free(usage->profile);
    g_free(usage);
}

static gboolean
usage_is(const AvPoolUsage *u, const char *project, const char *user, const char *profile, AvLimitPeriod period)
{
    return u->period == period && g_strcmp0(u->project, project) == 0 && g_strcmp0(u->user, user) == 0 &&
           g_strcmp0(u->profile, profile) == 0;
}

/* See av-pool-private.h. */
void
av_pool_usage_accrue(AvPool *pool, const AvPoolDevice *dev, gint64 now)
{
    const AvOwner *o = dev->owner;

    if (dev->state != AV_DEVICE_STATE_IN_USE || !o || (!o->nova_project && !o->nova_user) || !dev->profile)
        return;
    /* Entries of an earlier period are dropped: what is left is bounded
     * by the owners of this month. */
    for (guint i = pool->usage->len; i > 0; i--) {
        const AvPoolUsage *u = g_ptr_array_index(pool->usage, i - 1);

        if (u->start != av_limit_period_start(u->period, now))
            g_ptr_array_remove_index(pool->usage, i - 1);
    }
    for (int p = AV_LIMIT_PERIOD_DAY; p < AV_LIMIT_PERIODS; p++) {
        gint64 start = av_limit_period_start((AvLimitPeriod)p, now);
        gint64 seconds = now - MAX(dev->state_since, start);
        AvPoolUsage *found = NULL;

        if (seconds <= 0)
            continue;
        for (guint i = 0; i < pool->usage->len && !found; i++) {
            AvPoolUsage *u = g_ptr_array_index(pool->usage, i);

            if (usage_is(u, o->nova_project, o->nova_user, dev->profile, (AvLimitPeriod)p))
                found = u;
        }
        if (!found) {
            found = g_new0(AvPoolUsage, 1);
            found->project = g_strdup(o->nova_project);
            found->user = g_strdup(o->nova_user);
            found->profile = g_strdup(dev->profile);
            found->period = (AvLimitPeriod)p;
            found->start = start;
            g_ptr_array_add(pool->usage, found);
        }
        found->in_use_s += seconds;
    }
}

/* See av-pool-private.h. */
json_t *
av_pool_usage_to_json(const GPtrArray *usage)
{
    json_t *a = json_array();

    for (guint i = 0; i < usage->len; i++) {
        const AvPoolUsage *u = g_ptr_array_index(usage, i);

        json_array_append_new(a, json_pack("{s:o, s:o, s:s, s:s, s:I, s:I}", "project",
                                           av_json_string_or_null(u->project), "user",
                                           av_json_string_or_null(u->user), "profile", u->profile, "period",
                                           av_limit_period_to_string(u->period), "start", (json_int_t)u->start,
                                           "in_use_s", (json_int_t)u->in_use_s));
    }
    return a;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_usage(const AvPoolLoad *ld, json_t *v, GPtrArray *usage, GError **error)
{
    static const char *const keys[] = { "project", "user", "profile", "period", "start", "in_use_s", NULL };

    if (!v)
        return TRUE;
    if (!json_is_array(v))
        return av_pool_load_fail(ld, error, "usage", "expected an array");
    for (guint i = 0; i < json_array_size(v); i++) {
        g_autofree char *jpath = g_strdup_printf("usage/%u", i);
        g_autoptr(AvPoolUsage) u = g_new0(AvPoolUsage, 1);
        g_autofree char *period = NULL;
        json_t *obj = json_array_get(v, i);

        if (!json_is_object(obj))
            return av_pool_load_fail(ld, error, jpath, "expected an object");
        if (!av_pool_load_keys(ld, obj, jpath, keys, error) ||
            !av_pool_load_string(ld, obj, jpath, "project", TRUE, &u->project, error) ||
            !av_pool_load_string(ld, obj, jpath, "user", TRUE, &u->user, error) ||
            !av_pool_load_string(ld, obj, jpath, "profile", FALSE, &u->profile, error) ||
            !av_pool_load_string(ld, obj, jpath, "period", FALSE, &period, error) ||
            !av_pool_load_int(ld, obj, jpath, "start", 0, G_MAXINT64, &u->start, error) ||
            !av_pool_load_int(ld, obj, jpath, "in_use_s", 0, G_MAXINT64 / 4, &u->in_use_s, error))
            return FALSE;
        for (int p = AV_LIMIT_PERIOD_DAY; p < AV_LIMIT_PERIODS; p++)
            if (g_str_equal(period, av_limit_period_to_string((AvLimitPeriod)p)))
                u->period = (AvLimitPeriod)p;
        if (u->period == AV_LIMIT_PERIOD_NONE || (!u->project && !u->user)) {
            g_autofree char *sub = g_strdup_printf("%s/%s", jpath, u->period == AV_LIMIT_PERIOD_NONE ? "period"
                                                   : "project");
            return av_pool_load_fail(ld, error, sub, "expected a period (day, week, month) and a project or user");
        }
        g_ptr_array_add(usage, g_steal_pointer(&u));
    }
    return TRUE;
}

static gboolean
device_held(const AvPoolDevice *dev)
{
    AvDeviceState s = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

    return dev->owner && (s == AV_DEVICE_STATE_CLAIMED || s == AV_DEVICE_STATE_IN_USE);
}

static gboolean
limit_counts(const AvLimit *limit, const AvOwner *owner, const char *profile)
{
    return owner && av_limit_owner_matches(limit, owner->nova_project, owner->nova_user) &&
           (!limit->profile || g_strcmp0(limit->profile, profile) == 0);
}

static gboolean
taken_by(const AvLimitTake *takes, guint n_takes, const char *identity)
{
    for (guint i = 0; i < n_takes; i++)
        if (takes[i].identity && g_strcmp0(takes[i].identity, identity) == 0)
            return TRUE;
    return FALSE;
}

/* The devices @limit's owner holds, less those among @takes. */
static gint64
limit_held(const AvPool *pool, const AvLimit *limit, const AvLimitTake *takes, guint n_takes)
{
    gint64 held = 0;

    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (device_held(dev) && limit_counts(limit, dev->owner, dev->profile) &&
            !taken_by(takes, n_takes, dev->identity))
            held++;
    }
    return held;
}

/* See av-pool.h. */
void
av_pool_limit_usage(const AvPool *pool, const AvLimit *limit, gint64 now, gint64 *ret_devices,
                    gint64 *ret_seconds)
{
    gint64 seconds = 0;

    *ret_devices = limit_held(pool, limit, NULL, 0);
    if (limit->period != AV_LIMIT_PERIOD_NONE) {
        gint64 start = av_limit_period_start(limit->period, now);

        for (guint i = 0; pool->usage && i < pool->usage->len; i++) {
            const AvPoolUsage *u = g_ptr_array_index(pool->usage, i);

            if (u->period == limit->period && u->start == start &&
                av_limit_owner_matches(limit, u->project, u->user) &&
                (!limit->profile || g_strcmp0(limit->profile, u->profile) == 0))
                seconds += u->in_use_s;
        }
        for (guint i = 0; i < pool->devices->len; i++) {
            const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

            if (dev->state == AV_DEVICE_STATE_IN_USE && limit_counts(limit, dev->owner, dev->profile))
                seconds += MAX(0, now - MAX(dev->state_since, start));
        }
    }
    *ret_seconds = seconds;
}

/* "the limit of project 'P' on profile 'gpu' (FILE)". */
static char *
limit_describe(const AvLimit *limit)
{
    g_autofree char *who = av_limit_describe_owner(limit);
    g_autofree char *file = g_path_get_basename(limit->source_file ? limit->source_file : "-");

    return g_strdup_printf("the limit of %s on %s%s%s (%s)", who, limit->profile ? "profile '" : "every profile",
                           limit->profile ? limit->profile : "", limit->profile ? "'" : "", file);
}

/* See av-pool.h. */
gboolean
av_pool_limits_check(const AvPool *pool, const GPtrArray *limits, const AvOwner *owner, const AvLimitTake *takes,
                     guint n_takes, gint64 now, GError **error)
{
    for (guint i = 0; limits && i < limits->len; i++) {
        const AvLimit *limit = g_ptr_array_index(limits, i);
        gint64 more = 0;

        for (guint t = 0; t < n_takes; t++)
            if (limit_counts(limit, owner, takes[t].profile))
                more++;
        if (more == 0)
            continue;
        if (limit->max_devices >= 0) {
            gint64 held = limit_held(pool, limit, takes, n_takes);

            if (held + more > limit->max_devices) {
                g_autofree char *what = limit_describe(limit);

                g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                            "%s is max_devices %" G_GINT64_FORMAT ": it holds %" G_GINT64_FORMAT " and this "
                            "would make %" G_GINT64_FORMAT "; release a device or raise the limit",
                            what, limit->max_devices, held, held + more);
                return FALSE;
            }
        }
        if (limit->max_device_hours >= 0) {
            gint64 devices, seconds;

            av_pool_limit_usage(pool, limit, now, &devices, &seconds);
            if (seconds >= limit->max_device_hours * 3600) {
                g_autofree char *what = limit_describe(limit);

                g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                            "%s is max_device_hours %" G_GINT64_FORMAT " a %s: %.1f used this %s; wait for the "
                            "next %s or raise the limit", what, limit->max_device_hours,
                            av_limit_period_to_string(limit->period), (double)seconds / 3600.0,
                            av_limit_period_to_string(limit->period), av_limit_period_to_string(limit->period));
                return FALSE;
            }
        }
    }
    return TRUE;
}
