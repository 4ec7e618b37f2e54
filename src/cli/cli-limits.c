/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt limits: each owner's usage against the policy's "limits"
 * (accelvirt-policy(5), LIMITS), as the hook's prepare and `accelvirt
 * attach` count it (pool/av-pool.h, av_pool_limit_usage()). */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "pool/av-pool.h"
#include "util/av-json.h"

/* One row per limit kind of @limit: "max_devices" and/or
 * "max_device_hours", as JSON (new reference). */
static void
av_limits_rows(json_t *rows, const AvPool *pool, const AvLimit *limit, gint64 now)
{
    gint64 devices, seconds;
    g_autofree char *file = g_path_get_basename(limit->source_file ? limit->source_file : "-");

    av_pool_limit_usage(pool, limit, now, &devices, &seconds);
    if (limit->max_devices >= 0)
        json_array_append_new(rows, json_pack("{s:o, s:o, s:o, s:s, s:I, s:I, s:b, s:s}",
                                              "project", av_json_string_or_null(limit->project),
                                              "user", av_json_string_or_null(limit->user),
                                              "profile", av_json_string_or_null(limit->profile),
                                              "kind", "max_devices", "limit", (json_int_t)limit->max_devices,
                                              "used", (json_int_t)devices,
                                              "reached", devices >= limit->max_devices,
                                              "file", file));
    if (limit->max_device_hours >= 0) {
        json_t *row = json_pack("{s:o, s:o, s:o, s:s, s:I, s:f, s:b, s:s, s:s}",
                                "project", av_json_string_or_null(limit->project),
                                "user", av_json_string_or_null(limit->user),
                                "profile", av_json_string_or_null(limit->profile),
                                "kind", "max_device_hours", "limit", (json_int_t)limit->max_device_hours,
                                "used", (double)seconds / 3600.0,
                                "reached", seconds >= limit->max_device_hours * 3600,
                                "period", av_limit_period_to_string(limit->period),
                                "file", file);

        json_object_set_new(row, "used_seconds", json_integer((json_int_t)seconds));
        json_array_append_new(rows, row);
    }
}

/* See cli.h. */
json_t *
av_cli_limits_usage(const AvPool *pool, const AvPolicy *policy, gint64 now)
{
    json_t *rows = json_array();

    for (guint i = 0; policy->limits && i < policy->limits->len; i++)
        av_limits_rows(rows, pool, g_ptr_array_index(policy->limits, i), now);
    return rows;
}

static void
av_limits_print(json_t *rows)
{
    json_t *row;
    gsize i;

    if (json_array_size(rows) == 0) {
        printf("No limits: the policy has no \"limits\" (accelvirt-policy(5), LIMITS).\n");
        return;
    }
    printf("%-40s %-16s %-28s %s\n", "OWNER", "PROFILE", "LIMIT", "USED");
    json_array_foreach(rows, i, row) {
        const char *project = json_string_value(json_object_get(row, "project"));
        const char *user = json_string_value(json_object_get(row, "user"));
        const char *profile = json_string_value(json_object_get(row, "profile"));
        const char *kind = json_string_value(json_object_get(row, "kind"));
        gboolean hours = g_str_equal(kind, "max_device_hours");
        g_autofree char *owner = project && user ? g_strdup_printf("project=%s user=%s", project, user)
                                 : project ? g_strdup_printf("project=%s", project)
                                           : g_strdup_printf("user=%s", user);
        g_autofree char *pr_owner = av_cli_printable(owner);
        g_autofree char *limit = hours ? g_strdup_printf("%s %" JSON_INTEGER_FORMAT "/%s", kind,
                                                         json_integer_value(json_object_get(row, "limit")),
                                                         json_string_value(json_object_get(row, "period")))
                                       : g_strdup_printf("%s %" JSON_INTEGER_FORMAT, kind,
                                                         json_integer_value(json_object_get(row, "limit")));
        g_autofree char *used = hours ? g_strdup_printf("%.1f h", json_real_value(json_object_get(row, "used")))
                                      : g_strdup_printf("%" JSON_INTEGER_FORMAT,
                                                        json_integer_value(json_object_get(row, "used")));

        printf("%-40s %-16s %-28s %s%s\n", pr_owner, profile ? profile : "(all)", limit, used,
               json_is_true(json_object_get(row, "reached")) ? " (reached)" : "");
    }
}

/* See cli.h. */
int
av_cli_cmd_limits(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(json_t) rows = NULL;
    const GOptionEntry entries[] = { { NULL } };

    if (!av_cli_parse(cli, "limits", NULL,
                      "Each owner's usage against the policy's \"limits\": devices held (claimed or in use) and "
                      "device-hours of the current day, week or month (UTC), as the hook's prepare and 'attach' "
                      "count them.  Changes nothing.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'limits' takes no arguments, got '%s'", argv[1]);
    policy = av_cli_load_policy(cli, &err);
    if (!policy)
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    rows = av_cli_limits_usage(pool, policy, g_get_real_time() / G_USEC_PER_SEC);
    if (cli->json)
        av_cli_print_json(json_pack("{s:O}", "limits", rows));
    else
        av_limits_print(rows);
    return AV_EXIT_OK;
}
