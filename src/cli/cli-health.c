/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt health: every managed PCI device's AER counters,
 * link and failure counts, judged against its profile's "health" limits
 * (accelvirt-policy(5), HEALTH).  Read-only: it reads the pool without
 * its write lock and changes nothing; the worker and reconcile act on the
 * verdicts (av_pool_health_check()). */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "pci/av-health.h"
#include "pool/av-pool.h"
#include "util/av-json.h"

/* Unix seconds as "2026-11-24 18:00:00Z".  Caller frees. */
static char *
av_health_time_str(gint64 t)
{
    g_autoptr(GDateTime) dt = t > 0 ? g_date_time_new_from_unix_utc(t) : NULL;

    return dt ? g_date_time_format(dt, "%Y-%m-%d %H:%M:%SZ") : g_strdup("-");
}

/* What `health` says of one pool device, as JSON: identity, address,
 * profile, state, "pcie" (false for USB and mdev devices), "reading" (see
 * av_pool_health_to_json(), or {"error"}), "failures", "limits" (the
 * profile's "health" or null), "verdict" and "findings". */
static json_t *
av_health_device(const AvRoot *root, const AvPolicy *policy, const AvPoolDevice *dev)
{
    const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    gboolean pcie = dev->kind == AV_DEVICE_KIND_PCI && dev->address;
    g_autoptr(GError) err = NULL;
    g_autofree char *findings = NULL;
    AvPciHealth health = { 0 };
    gboolean readable = FALSE;
    AvHealthVerdict verdict = AV_HEALTH_OK;
    json_t *o = json_pack("{s:s, s:s?, s:s?, s:s, s:s, s:b}", "identity", dev->identity, "address", dev->address,
                          "profile", dev->profile, "state", av_device_state_to_string(dev->state), "kind",
                          av_device_kind_to_string(dev->kind), "pcie", pcie);

    json_object_set_new(o, "failures",
                        json_pack("{s:I, s:I, s:I}", "scrub", (json_int_t)dev->scrub_failures, "reset",
                                  (json_int_t)dev->reset_failures, "since",
                                  (json_int_t)(dev->failures_since ? dev->failures_since : dev->first_seen)));
    if (profile && profile->health.set) {
        json_t *p = av_profile_to_json(profile);

        json_object_set(o, "limits", json_object_get(p, "health"));
        json_decref(p);
    } else {
        json_object_set_new(o, "limits", json_null());
    }
    if (!pcie) {
        json_object_set_new(o, "reading", json_null());
        json_object_set_new(o, "verdict", json_string("ok"));
        json_object_set_new(o, "findings", json_null());
        return o;
    }
    readable = av_pci_health_read(root, dev->address, &health, &err);
    if (readable)
        json_object_set_new(o, "reading", av_pool_health_to_json(&health, profile && profile->health.link_speed));
    else
        json_object_set_new(o, "reading", json_pack("{s:s}", "error", err->message));
    verdict = av_pool_health_judge(dev, profile, readable ? &health : NULL, &findings);
    json_object_set_new(o, "verdict", json_string(av_health_verdict_to_string(verdict)));
    json_object_set_new(o, "findings", av_json_string_or_null(findings));
    av_pci_health_clear(&health);
    return o;
}

/* Prints @o (av_health_device()'s) as a few lines. */
static void
av_health_print(json_t *o)
{
    json_t *reading = json_object_get(o, "reading");
    json_t *aer = json_object_get(reading, "aer");
    json_t *link = json_object_get(reading, "link");
    json_t *failures = json_object_get(o, "failures");
    const char *verdict = json_string_value(json_object_get(o, "verdict"));
    const char *findings = json_string_value(json_object_get(o, "findings"));
    const char *address = json_string_value(json_object_get(o, "address"));
    const char *profile = json_string_value(json_object_get(o, "profile"));
    g_autofree char *identity = av_cli_printable(json_string_value(json_object_get(o, "identity")));
    g_autofree char *since = av_health_time_str(json_integer_value(json_object_get(failures, "since")));

    printf("%s  %s  profile %s  %s\n", address ? address : "-", identity, profile ? profile : "-",
           json_string_value(json_object_get(o, "state")));
    if (!json_is_true(json_object_get(o, "pcie"))) {
        printf("  no PCIe health (%s device)\n", json_string_value(json_object_get(o, "kind")));
        return;
    }
    if (json_object_get(reading, "error")) {
        g_autofree char *text = av_cli_printable(json_string_value(json_object_get(reading, "error")));

        printf("  health cannot be read: %s\n", text);
    } else {
        if (json_is_object(aer)) {
            const char *aer_from = json_string_value(json_object_get(aer, "from"));

            printf("  AER: %" JSON_INTEGER_FORMAT " fatal, %" JSON_INTEGER_FORMAT " non-fatal, %" JSON_INTEGER_FORMAT
                   " correctable%s%s\n",
                   json_integer_value(json_object_get(aer, "fatal")),
                   json_integer_value(json_object_get(aer, "nonfatal")),
                   json_integer_value(json_object_get(aer, "correctable")), aer_from ? ", its PF's counts " : "",
                   aer_from ? aer_from : "");
        }
        else
            printf("  AER: no AER reporting\n");
        if (json_is_object(link)) {
            AvPciHealth h = { 0 };
            g_autofree char *text = NULL;
            const char *from = json_string_value(json_object_get(link, "from"));
            const char *problem = json_string_value(json_object_get(link, "problem"));

            h.width = (guint)json_integer_value(json_object_get(link, "width"));
            h.max_width = (guint)json_integer_value(json_object_get(link, "max_width"));
            h.speed_gts = json_number_value(json_object_get(link, "speed_gts"));
            h.max_speed_gts = json_number_value(json_object_get(link, "max_speed_gts"));
            text = av_pci_health_link_describe(&h);
            /* "x8 of x16 ..., degraded", "x0 of x16 ..., link down", "..., speed unknown" */
            printf("  link: %s%s%s%s%s\n", text, problem ? ", " : "",
                   !problem ? "" : g_str_equal(problem, "a degraded link") ? "degraded" : problem,
                   from ? ", its PF " : "", from ? from : "");
        } else {
            printf("  link: not reported\n");
        }
    }
    printf("  failures: %" JSON_INTEGER_FORMAT " failed scrubs, %" JSON_INTEGER_FORMAT " failed resets since %s\n",
           json_integer_value(json_object_get(failures, "scrub")),
           json_integer_value(json_object_get(failures, "reset")), since);
    if (json_is_null(json_object_get(o, "limits")))
        printf("  verdict: ok (its profile has no health limits)\n");
    else if (findings)
        printf("  verdict: %s: %s\n", verdict, findings);
    else
        printf("  verdict: ok\n");
}

int
av_cli_cmd_health(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) devices = json_array();
    GPtrArray *all;

    if (!av_cli_parse(cli, "health", "[DEVICE]",
                      "Show the health of every managed device, or of DEVICE (a PCI address or a pool identity): "
                      "its AER error counts, its PCIe link (a VF's is its PF's), its failed scrubs and resets since "
                      "enrolment, and the verdict against its profile's \"health\" limits (ok, warn or over).  "
                      "Read-only: it changes nothing; the worker and 'accelvirt reconcile' quarantine a device "
                      "over a limit.  Exit status 0 even when a device is over a limit.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 2)
        return av_cli_usage_error("'health' takes at most one DEVICE, got '%s' too", argv[2]);
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);

    all = av_pool_devices(pool);
    if (argc == 2) {
        AvPoolDevice *dev = av_cli_find_device(pool, argv[1], &err);

        if (!dev)
            return av_cli_fail(err);
        json_array_append_new(devices, av_health_device(root, policy, dev));
    } else {
        for (guint i = 0; i < all->len; i++)
            json_array_append_new(devices, av_health_device(root, policy, g_ptr_array_index(all, i)));
    }

    if (cli->json) {
        av_cli_print_json(json_pack("{s:O}", "devices", devices));
    } else {
        size_t i;
        json_t *o;

        if (json_array_size(devices) == 0)
            printf("No managed devices.\n");
        json_array_foreach(devices, i, o)
            av_health_print(o);
    }
    return AV_EXIT_OK;
}
