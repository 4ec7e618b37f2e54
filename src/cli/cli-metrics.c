/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt metrics: the pool, its accounting and its devices' health in
 * the Prometheus text exposition format 0.0.4, for
 * node_exporter's textfile collector.
 *
 * Format: https://prometheus.io/docs/instrumenting/exposition_formats/
 * (text format 0.0.4): one "# HELP" and one "# TYPE" line per family, then
 * its samples, together; label values escape \ as \\, " as \" and a
 * newline as \n; HELP text escapes \ and newlines. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pci/av-health.h"
#include "ledger/av-accounting.h"
#include "pool/av-pool.h"
#include "util/av-file.h"
#include "util/av-json.h"

/* Appends @value escaped as a label value (tenant-controlled names). */
static void
av_prom_escape(GString *out, const char *value)
{
    for (const char *p = value ? value : ""; *p; p++) {
        if (*p == '\\')
            g_string_append(out, "\\\\");
        else if (*p == '"')
            g_string_append(out, "\\\"");
        else if (*p == '\n')
            g_string_append(out, "\\n");
        else
            g_string_append_c(out, *p);
    }
}

static void
av_prom_family(GString *out, const char *name, const char *type, const char *help)
{
    g_string_append_printf(out, "# HELP accelvirt_%s %s\n# TYPE accelvirt_%s %s\n", name, help, name, type);
}

/* One sample: @labels is a NULL-terminated list of name, value pairs. */
static void
av_prom_sample(GString *out, const char *name, const char *const *labels, const char *value)
{
    g_string_append_printf(out, "accelvirt_%s", name);
    for (guint i = 0; labels && labels[i]; i += 2) {
        g_string_append_printf(out, "%s%s=\"", i ? "," : "{", labels[i]);
        av_prom_escape(out, labels[i + 1]);
        g_string_append_c(out, '"');
        if (!labels[i + 2])
            g_string_append_c(out, '}');
    }
    g_string_append_printf(out, " %s\n", value);
}

static void
av_prom_u64(GString *out, const char *name, const char *const *labels, guint64 v)
{
    g_autofree char *s = g_strdup_printf("%" G_GUINT64_FORMAT, v);

    av_prom_sample(out, name, labels, s);
}

static void
av_prom_double(GString *out, const char *name, const char *const *labels, double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    av_prom_sample(out, name, labels, g_ascii_dtostr(buf, sizeof(buf), v));
}

/* Devices by state and profile: every state of every profile in the pool,
 * 0 included. */
static void
av_metrics_devices(GString *out, GPtrArray *devices)
{
    g_autoptr(GPtrArray) profiles = g_ptr_array_new();

    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(devices, i);
        const char *p = d->profile ? d->profile : "-";

        if (!g_ptr_array_find_with_equal_func(profiles, p, g_str_equal, NULL))
            g_ptr_array_add(profiles, (gpointer)p);
    }
    av_prom_family(out, "devices", "gauge", "Managed devices by profile and state.");
    for (guint k = 0; k < profiles->len; k++) {
        for (int s = AV_DEVICE_STATE_FREE; s <= AV_DEVICE_STATE_MISSING; s++) {
            const char *labels[] = { "profile", g_ptr_array_index(profiles, k), "state",
                                     av_device_state_to_string((AvDeviceState)s), NULL };
            guint64 n = 0;

            for (guint i = 0; i < devices->len; i++) {
                const AvPoolDevice *d = g_ptr_array_index(devices, i);

                n += d->state == (AvDeviceState)s && g_str_equal(d->profile ? d->profile : "-", labels[1]);
            }
            av_prom_u64(out, "devices", labels, n);
        }
    }
}

static gint
av_metrics_profile_cmp(gconstpointer a, gconstpointer b)
{
    return strcmp((*(AvAcctGroup *const *)a)->profile, (*(AvAcctGroup *const *)b)->profile);
}

/* The sums of @groups by profile, sorted by profile (one pass gives both
 * the owners' and the profiles' numbers). */
static GPtrArray *
av_metrics_by_profile(const GPtrArray *groups)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; i < groups->len; i++) {
        const AvAcctGroup *a = g_ptr_array_index(groups, i);
        AvAcctGroup *p = g_hash_table_lookup(seen, a->profile);

        if (!p) {
            p = g_new0(AvAcctGroup, 1);
            p->profile = a->profile;     /* borrowed from @groups */
            g_hash_table_insert(seen, p->profile, p);
            g_ptr_array_add(out, p);
        }
        p->sums.dirty_s += a->sums.dirty_s;
        p->sums.scrubbing_s += a->sums.scrubbing_s;
        p->sums.quarantined_s += a->sums.quarantined_s;
        p->sums.scrubs_passed += a->sums.scrubs_passed;
        p->sums.scrubs_failed += a->sums.scrubs_failed;
        p->sums.quarantines += a->sums.quarantines;
        p->sums.scrub_seconds += a->sums.scrub_seconds;
    }
    g_ptr_array_sort(out, av_metrics_profile_cmp);
    return out;
}

/* From the accounting of the whole journal (@acct, by tenant, or by owner
 * with --per-domain): device-seconds by owner, and scrubs (from the scrub
 * certificates) and quarantines by profile. */
static void
av_metrics_accounting(GString *out, const AvAccounting *acct, gboolean per_domain)
{
    const GPtrArray *g = av_accounting_groups(acct);
    g_autoptr(GPtrArray) p = av_metrics_by_profile(g);
    const char *chain = av_accounting_chain_error(acct);

    static const struct {
        const char *name, *help;
        gsize offset;
    } owned[] = {
        { "device_in_use_seconds_total", "Device-seconds in state in-use by owner (Nova project and user, "
          "profile; with --per-domain also domain UUID and name), from the journal.",
          G_STRUCT_OFFSET(AvAcctSums, in_use_s) },
        { "device_claimed_seconds_total", "Device-seconds in state claimed by owner, from the journal.",
          G_STRUCT_OFFSET(AvAcctSums, claimed_s) },
    };

    for (guint f = 0; f < G_N_ELEMENTS(owned); f++) {
        av_prom_family(out, owned[f].name, "counter", owned[f].help);
        for (guint i = 0; i < g->len; i++) {
            const AvAcctGroup *a = g_ptr_array_index(g, i);
            const char *by_domain[] = { "domain", a->domain, "domain_name", a->name ? a->name : "-", "project",
                                        a->project, "user", a->user, "profile", a->profile, NULL };
            const char *const *labels = per_domain ? by_domain : by_domain + 4;
            gint64 seconds;

            memcpy(&seconds, (const char *)&a->sums + owned[f].offset, sizeof(seconds));
            av_prom_u64(out, owned[f].name, labels, (guint64)seconds);
        }
    }
    av_prom_family(out, "scrubs_total", "counter", "Scrubs by profile and result (passed, failed), from the "
                   "journal's scrub certificates.");
    for (guint i = 0; i < p->len; i++) {
        const AvAcctGroup *a = g_ptr_array_index(p, i);
        const char *passed[] = { "profile", a->profile, "result", "passed", NULL };
        const char *failed[] = { "profile", a->profile, "result", "failed", NULL };

        av_prom_u64(out, "scrubs_total", passed, a->sums.scrubs_passed);
        av_prom_u64(out, "scrubs_total", failed, a->sums.scrubs_failed);
    }
    av_prom_family(out, "scrub_seconds_total", "counter",
                   "Seconds the scrubs of a profile took, the sum of the scrub certificates' \"seconds\".");
    for (guint i = 0; i < p->len; i++) {
        const AvAcctGroup *a = g_ptr_array_index(p, i);
        const char *labels[] = { "profile", a->profile, NULL };

        av_prom_double(out, "scrub_seconds_total", labels, a->sums.scrub_seconds);
    }
    av_prom_family(out, "state_seconds_total", "counter",
                   "Device-seconds in states dirty, scrubbing and quarantined by profile, from the journal.");
    for (guint i = 0; i < p->len; i++) {
        const AvAcctGroup *a = g_ptr_array_index(p, i);
        const char *dirty[] = { "profile", a->profile, "state", "dirty", NULL };
        const char *scrubbing[] = { "profile", a->profile, "state", "scrubbing", NULL };
        const char *quarantined[] = { "profile", a->profile, "state", "quarantined", NULL };

        av_prom_u64(out, "state_seconds_total", dirty, (guint64)a->sums.dirty_s);
        av_prom_u64(out, "state_seconds_total", scrubbing, (guint64)a->sums.scrubbing_s);
        av_prom_u64(out, "state_seconds_total", quarantined, (guint64)a->sums.quarantined_s);
    }
    av_prom_family(out, "quarantines_total", "counter", "Moves of a device to quarantined by profile, from the "
                   "journal.");
    for (guint i = 0; i < p->len; i++) {
        const AvAcctGroup *a = g_ptr_array_index(p, i);
        const char *labels[] = { "profile", a->profile, NULL };

        av_prom_u64(out, "quarantines_total", labels, a->sums.quarantines);
    }
    av_prom_family(out, "journal_verified", "gauge", "1 when the journal's hash chain verified from "
                   "journal_checked_from_seq on (the part read), 0 otherwise.");
    av_prom_u64(out, "journal_verified", NULL, chain ? 0 : 1);
    av_prom_family(out, "journal_checked_from_seq", "gauge", "The first journal entry whose chain this run "
                   "checked: 1 for the whole journal, else the one after the checkpoint it started from (the "
                   "checkpoint's own line is in the part checked).");
    av_prom_u64(out, "journal_checked_from_seq", NULL, av_accounting_checkpoint_seq(acct) + 1);
    av_prom_family(out, "journal_anomalies", "gauge",
                   "Journal lines accounting skipped or doubted, by kind (accelvirt(1), accounting).");
    for (guint k = 0; k < AV_ACCT_ANOMALIES; k++) {
        const char *labels[] = { "kind", av_acct_anomaly_id((AvAcctAnomaly)k), NULL };

        av_prom_u64(out, "journal_anomalies", labels, av_accounting_anomalies(acct, (AvAcctAnomaly)k));
    }
}

/* The health of each PCI device (av_pci_health_read()): a device whose
 * health cannot be read gets a comment line instead of samples. */
static void
av_metrics_health(GString *out, const AvRoot *root, GPtrArray *devices)
{
    g_autofree AvPciHealth *health = g_new0(AvPciHealth, MAX(devices->len, 1));
    g_autofree gboolean *ok = g_new0(gboolean, MAX(devices->len, 1));
    static const struct {
        const char *name, *type, *help;
    } families[] = {
        { "device_aer_errors_total", "counter", "AER errors the kernel counted for the device since boot, by severity "
          "(aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal)." },
        { "device_link_width", "gauge", "Current PCIe link width (lanes)." },
        { "device_link_max_width", "gauge", "Maximum PCIe link width (lanes)." },
        { "device_link_speed_gts", "gauge", "Current PCIe link speed in GT/s." },
        { "device_link_max_speed_gts", "gauge", "Maximum PCIe link speed in GT/s." },
        { "device_link_degraded", "gauge", "1 when the link is narrower than its maximum, 0 otherwise." },
    };

    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(devices, i);
        g_autoptr(GError) err = NULL;

        if (d->kind != AV_DEVICE_KIND_PCI || !d->address || d->state == AV_DEVICE_STATE_MISSING)
            continue;
        ok[i] = av_pci_health_read(root, d->address, &health[i], &err);
        if (!ok[i]) {
            g_auto(GStrv) parts = g_strsplit_set(err->message, "\r\n", -1);
            g_autofree char *msg = g_strjoinv(" ", parts);

            g_string_append_printf(out, "# %s: no health metrics: %s\n", d->address, msg);
        }
    }
    for (guint f = 0; f < G_N_ELEMENTS(families); f++) {
        av_prom_family(out, families[f].name, families[f].type, families[f].help);
        for (guint i = 0; i < devices->len; i++) {
            const AvPoolDevice *d = g_ptr_array_index(devices, i);
            const AvPciHealth *h = &health[i];
            const char *labels[] = { "device", d->identity, "address", d->address, "profile",
                                     d->profile ? d->profile : "-", NULL, NULL, NULL };

            if (!ok[i])
                continue;
            if (f == 0 && h->aer) {
                const char *sev[] = { "correctable", "nonfatal", "fatal" };
                const guint64 n[] = { h->correctable, h->nonfatal, h->fatal };

                labels[6] = "severity";
                for (guint s = 0; s < G_N_ELEMENTS(sev); s++) {
                    labels[7] = sev[s];
                    av_prom_u64(out, families[f].name, labels, n[s]);
                }
            } else if (f > 0 && h->link) {
                switch (f) {
                case 1: av_prom_u64(out, families[f].name, labels, h->width); break;
                case 2: av_prom_u64(out, families[f].name, labels, h->max_width); break;
                case 3: av_prom_double(out, families[f].name, labels, h->speed_gts); break;
                case 4: av_prom_double(out, families[f].name, labels, h->max_speed_gts); break;
                default: av_prom_u64(out, families[f].name, labels, av_pci_health_link_degraded(h, FALSE)); break;
                }
            }
        }
    }
    for (guint i = 0; i < devices->len; i++)
        av_pci_health_clear(&health[i]);
}

/* The failure counts the pool keeps (AvPoolDevice scrub_failures and
 * reset_failures, since enrolment: gauges, an enrolment resets them). */
static void
av_metrics_failures(GString *out, GPtrArray *devices)
{
    av_prom_family(out, "device_scrub_failures", "gauge", "Failed scrubs of the device since its enrolment.");
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(devices, i);
        const char *labels[] = { "device", d->identity, "profile", d->profile ? d->profile : "-", NULL };

        av_prom_u64(out, "device_scrub_failures", labels, d->scrub_failures);
    }
    av_prom_family(out, "device_reset_failures", "gauge",
                   "Failed scrubs of the device since its enrolment whose failing step was a reset.");
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(devices, i);
        const char *labels[] = { "device", d->identity, "profile", d->profile ? d->profile : "-", NULL };

        av_prom_u64(out, "device_reset_failures", labels, d->reset_failures);
    }
}

/* The policy's "limits" and each one's usage (`accelvirt limits`): labels
 * the limit's owner (project, user: "" when it names none), profile (""
 * for every profile) and kind, one series per limit of the policy. */
static void
av_metrics_limits(GString *out, json_t *rows)
{
    static const char *const families[][2] = {
        { "limit", "A limit of the policy (max_devices: devices; max_device_hours: hours of its period)." },
        { "limit_usage", "The owner's usage against the limit: devices held, or device-hours of the current "
                         "period (UTC)." },
    };
    json_t *row;
    gsize i;

    if (json_array_size(rows) == 0)
        return;
    for (gsize f = 0; f < G_N_ELEMENTS(families); f++) {
        av_prom_family(out, families[f][0], "gauge", families[f][1]);
        json_array_foreach(rows, i, row) {
            const char *project = json_string_value(json_object_get(row, "project"));
            const char *user = json_string_value(json_object_get(row, "user"));
            const char *profile = json_string_value(json_object_get(row, "profile"));
            const char *labels[] = { "project", project ? project : "", "user", user ? user : "", "profile",
                                     profile ? profile : "", "kind",
                                     json_string_value(json_object_get(row, "kind")), NULL };
            json_t *v = json_object_get(row, f == 0 ? "limit" : "used");

            av_prom_double(out, families[f][0], labels, json_number_value(v));
        }
    }
}

/* See cli.h. */
int
av_cli_cmd_metrics(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GString) after = g_string_new(NULL);
    goffset size = 0;
    g_autoptr(AvAccounting) acct = NULL;
    gboolean per_domain = FALSE;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *output = NULL;
    g_autofree char *path = NULL;
    gint64 until = g_get_real_time() / G_USEC_PER_SEC + 1;
    GPtrArray *devices;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) policy_err = NULL;
    const GOptionEntry entries[] = {
        { "output", 0, 0, G_OPTION_ARG_FILENAME, &output,
          "Write FILE (mode 0644) atomically instead of standard output (node_exporter's textfile directory)",
          "FILE" },
        { "per-domain", 0, 0, G_OPTION_ARG_NONE, &per_domain,
          "Device-seconds by domain (UUID and name) too: one series per domain ever seen, read from the whole "
          "journal (no checkpoint keeps them)", NULL },
        { NULL },
    };

    if (!av_cli_parse(cli, "metrics", NULL,
                      "The pool, the journal's device time, scrubs and quarantines, and each PCI device's AER "
                      "counters and link, in the Prometheus text format 0.0.4.  Changes nothing in the pool.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'metrics' takes no arguments, got '%s'", argv[1]);
    if (cli->json && !output)
        return av_cli_usage_error("'metrics --json' needs '--output FILE': the metrics themselves are the "
                                  "Prometheus text format, --json says what was written");
    if (output && !*output)
        return av_cli_usage_error("'--output' needs a file name");
    root = av_root_new_default(cli->root, &err);
    if (!root)
        return av_cli_fail(err);
    /* The pool and the journal's size under the shared lock; the journal
     * is then read without it up to that size (nothing before it ever
     * changes), so that a long read never keeps a domain's start waiting. */
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_journal_size(cli->state_dir, &size, &err))
        return av_cli_fail(err);
    devices = av_pool_devices(pool);
    av_metrics_devices(out, devices);
    /* The limits, when the policy loads (metrics never fail for it: the
     * hook and `policy check` say what is wrong). */
    policy = av_cli_load_policy(cli, &policy_err);
    if (policy) {
        g_autoptr(json_t) rows = av_cli_limits_usage(pool, policy, until - 1);

        av_metrics_limits(after, rows);
    } else {
        fprintf(stderr, "accelvirt: warning: no limits in the metrics: %s\n", policy_err->message);
    }
    av_metrics_health(after, root, devices);
    av_metrics_failures(after, devices);
    g_clear_pointer(&pool, av_pool_free);
    /* One pass, from the newest checkpoint by (project, user, profile),
     * whose sums give the profiles' too; by domain, from the start. */
    path = g_build_filename(cli->state_dir, "journal.jsonl", NULL);
    acct = av_accounting_read(path, size, G_MININT64, until, per_domain ? AV_ACCT_BY_OWNER : AV_ACCT_BY_TENANT,
                              av_cli_checkpoints_wanted(), &err);
    if (!acct)
        return av_cli_fail(err);
    if (av_accounting_checkpoint_warning(acct))
        fprintf(stderr, "accelvirt: warning: %s\n", av_accounting_checkpoint_warning(acct));
    av_metrics_accounting(out, acct, per_domain);
    g_string_append_len(out, after->str, (gssize)after->len);

    if (!output) {
        fwrite(out->str, 1, out->len, stdout);
        return AV_EXIT_OK;
    }
    if (!av_file_write_atomic_safe_dir(output, out->str, out->len, 0644, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "output", json_string(output));
        json_object_set_new(o, "bytes", json_integer((json_int_t)out->len));
        av_cli_print_json(o);
    } else {
        printf("Wrote %" G_GSIZE_FORMAT " bytes of metrics to %s.\n", out->len, output);
    }
    return AV_EXIT_OK;
}
