/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: `accelvirt placement sync|status`: Placement's
 * "reserved" of the pool's devices kept true by hand, and the view of the
 * state file (src/nova/av-placement-sync.h). */
#include "config.h"

#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "nova/av-placement-sync.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* See cli.h. */
gboolean
av_cli_placement_sync(const AvCli *cli, const AvRoot *root, const AvPolicy *policy, AvPlacementReport **ret_report,
                      GError **error)
{
    return av_placement_sync_pool(root, cli->state_dir, policy, NULL, ret_report, error);
}

/* One line a provider: "RP RC: reserved N (applied|in sync)" or "RP RC:
 * pending: ERROR", with the devices behind it. */
static void
av_placement_print_results(json_t *results)
{
    size_t i, k;
    json_t *r, *id;

    json_array_foreach(results, i, r) {
        const char *result = json_string_value(json_object_get(r, "result"));
        g_autoptr(GString) ids = g_string_new(NULL);
        g_autofree char *shown = NULL;

        json_array_foreach(json_object_get(r, "identities"), k, id)
            g_string_append_printf(ids, "%s%s", k ? ", " : "", json_string_value(id));
        shown = av_cli_printable(ids->str);
        if (g_strcmp0(result, "pending") == 0) {
            g_autofree char *err = av_cli_printable(json_string_value(json_object_get(r, "error")));

            printf("%s %s: pending (want reserved %" JSON_INTEGER_FORMAT "): %s [%s]\n",
                   json_string_value(json_object_get(r, "rp")), json_string_value(json_object_get(r, "rc")),
                   json_integer_value(json_object_get(r, "want")), err, shown);
        } else {
            printf("%s %s: reserved %" JSON_INTEGER_FORMAT " (%s) [%s]\n", json_string_value(json_object_get(r, "rp")),
                   json_string_value(json_object_get(r, "rc")), json_integer_value(json_object_get(r, "reserved")),
                   g_strcmp0(result, "applied") == 0 ? "applied" : "in sync", shown);
        }
    }
}

static int
av_placement_cmd_sync(AvCli *cli)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPlacementReport) report = NULL;

    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    if (!av_cli_placement_sync(cli, root, policy, &report, &err))
        return av_cli_fail(err);
    if (cli->json) {
        av_cli_print_json(json_pack("{s:O, s:i, s:i, s:i}", "results", report->results, "applied",
                                    (int)report->applied, "in_sync", (int)report->in_sync, "pending",
                                    (int)report->pending));
    } else {
        av_placement_print_results(report->results);
        printf("placement: %u applied, %u in sync, %u pending\n", report->applied, report->in_sync, report->pending);
    }
    return report->pending ? AV_EXIT_FAILURE : AV_EXIT_OK;
}

static int
av_placement_cmd_status(AvCli *cli)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) state = av_placement_state_read(cli->state_dir, &err);
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    const char *key;
    json_t *rec;
    guint pending = 0;

    if (!state)
        return av_cli_fail(err);
    /* Each record against what its device's state wants now (a device
     * released since the last sync is pending, not in sync): best effort,
     * the records alone when the policy or the pool cannot be read. */
    if (!cli->json && json_object_size(json_object_get(state, "devices")) > 0) {
        g_autoptr(GError) ignored = NULL;

        if (av_cli_open(cli, &root, &policy, &ignored))
            pool = av_pool_open(cli->state_dir, AV_POOL_READ, 2000, &ignored);
    }
    if (cli->json) {
        av_cli_print_json(json_incref(state));
        return AV_EXIT_OK;
    }
    if (json_object_size(json_object_get(state, "devices")) == 0) {
        printf("No device is synced with Placement (see \"placement_sync\" in accelvirt-policy(5)).\n");
        return AV_EXIT_OK;
    }
    json_object_foreach(json_object_get(state, "devices"), key, rec) {
        g_autofree char *identity = av_cli_printable(key);
        g_autofree char *text = NULL;
        g_autoptr(json_t) status = json_pack("{s:O, s:O, s:O, s:O, s:O}", "state", json_object_get(rec, "state"),
                                             "want", json_object_get(rec, "want"), "applied",
                                             json_object_get(rec, "applied"), "since", json_object_get(rec, "since"),
                                             "error", json_object_get(rec, "error"));

        if (pool && av_pool_find(pool, key)) {
            json_decref(status);
            status = av_placement_device_status(policy, state, av_pool_find(pool, key));
        }
        text = av_placement_status_text(status);
        {
            g_autofree char *shown = av_cli_printable(text);

            printf("%-12s  %s %s: %s (%s)\n", json_string_value(json_object_get(rec, "address")) ?: "-",
                   json_string_value(json_object_get(rec, "rp")) ?: "-",
                   json_string_value(json_object_get(rec, "rc")) ?: "-", shown, identity);
        }
        pending += g_strcmp0(json_string_value(json_object_get(status, "state")), "pending") == 0;
    }
    if (pending)
        printf("placement: %u pending\n", pending);
    return AV_EXIT_OK;
}

int
av_cli_cmd_placement(AvCli *cli, int argc, char **argv)
{
    if (!av_cli_parse(cli, "placement", "sync | status",
                      "Keep OpenStack Placement true about the pool's devices: 'sync' sets the "
                      "\"reserved\" of each device's resource provider as its state wants (its total while dirty, "
                      "scrubbing, quarantined or missing; 0 once free) and applies what was pending; exit 1 when "
                      "something stays pending.  'status' shows the state file, read-only.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2 || (!g_str_equal(argv[1], "sync") && !g_str_equal(argv[1], "status")))
        return av_cli_usage_error("'placement' needs 'sync' or 'status'");
    return g_str_equal(argv[1], "sync") ? av_placement_cmd_sync(cli) : av_placement_cmd_status(cli);
}
