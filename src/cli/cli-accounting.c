/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt accounting: device time by domain, project, user, profile or
 * device, from the journal (the definitions are in
 * src/ledger/av-accounting.h and accelvirt(1)). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ledger/av-accounting.h"
#include "pool/av-pool.h"
#include "util/av-names.h"

static const char *const av_acct_by_names[] = { "domain", "project", "user", "profile", "device" };

/* Parses @text as a point in time: RFC 3339 ("2026-11-01T00:00:00Z"), a
 * UTC date ("2026-11-01") or a duration back from @now ("7d", "12h",
 * av_duration_parse()).  FALSE when it is none of them. */
static gboolean
av_cli_time_parse(const char *text, gint64 now, gint64 *ret_time)
{
    g_autoptr(GDateTime) dt = NULL;
    guint64 back;

    if (av_duration_parse(text, &back)) {
        *ret_time = now - (gint64)back;
        return TRUE;
    }
    if (strlen(text) == 10 && text[4] == '-' && text[7] == '-') {
        g_autofree char *full = g_strdup_printf("%sT00:00:00Z", text);

        dt = g_date_time_new_from_iso8601(full, NULL);
    } else if (strchr(text, 'T') || strchr(text, 't')) {
        dt = g_date_time_new_from_iso8601(text, NULL);
    }
    if (!dt)
        return FALSE;
    *ret_time = g_date_time_to_unix(dt);
    return TRUE;
}

static char *
av_acct_time_str(gint64 t)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(t);

    return dt ? g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ") : g_strdup_printf("%" G_GINT64_FORMAT, t);
}

/* TRUE when a spreadsheet would take @value as a formula: it begins with
 * '=', '+', '-', '@', a tab or CR (OWASP, "CSV Injection"), and it is
 * neither a plain number such as "-12" or "+3.5" nor the lone "-" that
 * stands for an unknown project or user. */
static gboolean
av_csv_is_formula(const char *value)
{
    const char *p = value + 1;

    if (!strchr("=+-@\t\r", value[0]) || value[0] == '\0')
        return FALSE;
    if (strcmp(value, "-") == 0)
        return FALSE;
    if (value[0] != '+' && value[0] != '-')
        return TRUE;
    if (!g_ascii_isdigit(*p))
        return TRUE;
    while (g_ascii_isdigit(*p))
        p++;
    if (*p == '.' && g_ascii_isdigit(p[1]))
        for (p++; g_ascii_isdigit(*p); p++)
            ;
    return *p != '\0';
}

/* One CSV field, RFC 4180: quoted when it holds a comma, a quote, CR or
 * LF, quotes doubled; a field a spreadsheet would run as a formula
 * (av_csv_is_formula(): tenants name their domains) gets a leading
 * apostrophe, as OWASP advises. */
static void
av_csv_field(GString *out, const char *value)
{
    g_autofree char *quoted = NULL;

    if (!value)
        value = "";
    if (av_csv_is_formula(value))
        value = quoted = g_strconcat("'", value, NULL);
    if (!strpbrk(value, ",\"\r\n")) {
        g_string_append(out, value);
        return;
    }
    g_string_append_c(out, '"');
    for (const char *p = value; *p; p++) {
        if (*p == '"')
            g_string_append_c(out, '"');
        g_string_append_c(out, *p);
    }
    g_string_append_c(out, '"');
}

static void
av_csv_row(GString *out, const char *row, const char *key, const char *name, const AvAcctSums *s)
{
    av_csv_field(out, row);
    g_string_append_c(out, ',');
    av_csv_field(out, key);
    g_string_append_c(out, ',');
    av_csv_field(out, name);
    g_string_append_printf(out, ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT
                           ",%" G_GINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                           ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                           "\r\n",
                           s->in_use_s, s->claimed_s, s->dirty_s, s->scrubbing_s, s->quarantined_s, s->claims,
                           s->releases, s->attaches, s->detaches, s->scrubs_passed, s->scrubs_failed, s->quarantines);
}

/* The CSV on stdout, and @anomalies (taken over; NULL when none) on
 * stderr: a CSV has no row for them. */
static void
av_acct_print_csv(const AvAccounting *acct, AvAcctBy by, char *anomalies)
{
    g_autofree char *line = anomalies;
    g_autoptr(GString) out = g_string_new(NULL);
    const GPtrArray *groups = av_accounting_groups(acct);

    g_string_append_printf(out, "row,%s,name,in_use_s,claimed_s,dirty_s,scrubbing_s,quarantined_s,claims,releases,"
                           "attaches,detaches,scrubs_passed,scrubs_failed,quarantines\r\n", av_acct_by_names[by]);
    for (guint i = 0; i < groups->len; i++) {
        const AvAcctGroup *g = g_ptr_array_index(groups, i);

        av_csv_row(out, "group", g->key, g->name, &g->sums);
    }
    av_csv_row(out, "total", "", "", av_accounting_total(acct));
    fwrite(out->str, 1, out->len, stdout);
    if (line)
        fprintf(stderr, "accelvirt: warning: %s\n", line);
}

/* @since as RFC 3339, or NULL when not given: the journal's start. */
static char *
av_acct_since_str(gint64 since)
{
    return since == G_MININT64 ? NULL : av_acct_time_str(since);
}

static json_t *
av_acct_json(const AvAccounting *acct, AvAcctBy by, gint64 since, gint64 until)
{
    const GPtrArray *groups = av_accounting_groups(acct);
    json_t *o = json_object(), *arr = json_array(), *an = json_object();
    g_autofree char *s = av_acct_since_str(since);
    g_autofree char *u = av_acct_time_str(until);
    const char *chain = av_accounting_chain_error(acct);

    json_object_set_new(o, "since", s ? json_string(s) : json_null());
    json_object_set_new(o, "until", json_string(u));
    json_object_set_new(o, "by", json_string(av_acct_by_names[by]));
    json_object_set_new(o, "entries", json_integer((json_int_t)av_accounting_entries(acct)));
    json_object_set_new(o, "verified", json_boolean(chain == NULL));
    json_object_set_new(o, "checked_from_seq", json_integer((json_int_t)av_accounting_checkpoint_seq(acct) + 1));
    json_object_set_new(o, "chain_error", chain ? json_string(chain) : json_null());
    for (guint i = 0; i < groups->len; i++) {
        const AvAcctGroup *g = g_ptr_array_index(groups, i);
        json_t *row = av_acct_sums_to_json(&g->sums);

        json_object_set_new(row, av_acct_by_names[by], json_string(g->key));
        json_object_set_new(row, "name", g->name ? json_string(g->name) : json_null());
        json_array_append_new(arr, row);
    }
    json_object_set_new(o, "groups", arr);
    json_object_set_new(o, "total", av_acct_sums_to_json(av_accounting_total(acct)));
    for (guint k = 0; k < AV_ACCT_ANOMALIES; k++)
        json_object_set_new(an, av_acct_anomaly_id((AvAcctAnomaly)k),
                            json_integer((json_int_t)av_accounting_anomalies(acct, (AvAcctAnomaly)k)));
    json_object_set_new(o, "anomalies", an);
    return o;
}

/* "12.5 (45000)": hours with one decimal, then the seconds. */
static char *
av_acct_hs(gint64 s)
{
    return g_strdup_printf("%.1f (%" G_GINT64_FORMAT ")", (double)s / 3600.0, s);
}

static void
av_acct_text_row(const char *key, const char *name, const AvAcctSums *s)
{
    g_autofree char *k = av_cli_printable(key);
    g_autofree char *n = av_cli_printable(name ? name : "-");
    g_autofree char *a = av_acct_hs(s->in_use_s);
    g_autofree char *b = av_acct_hs(s->claimed_s);
    g_autofree char *c = av_acct_hs(s->dirty_s);
    g_autofree char *d = av_acct_hs(s->scrubbing_s);
    g_autofree char *e = av_acct_hs(s->quarantined_s);

    printf("%-36s  %-20s  %-18s  %-18s  %-16s  %-16s  %-16s  %6" G_GUINT64_FORMAT "  %8" G_GUINT64_FORMAT
           "  %7" G_GUINT64_FORMAT "  %7" G_GUINT64_FORMAT "  %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT "\n",
           k, n, a, b, c, d, e, s->claims, s->releases, s->attaches, s->detaches, s->scrubs_passed,
           s->scrubs_failed);
}

static void
av_acct_print_text(const AvAccounting *acct, AvAcctBy by, gint64 since, gint64 until)
{
    const GPtrArray *groups = av_accounting_groups(acct);
    g_autofree char *s = av_acct_since_str(since);
    g_autofree char *u = av_acct_time_str(until);
    g_autofree char *anomalies = av_accounting_anomaly_line(acct);
    g_autofree char *head = g_ascii_strup(av_acct_by_names[by], -1);

    printf("Device time from %s to %s by %s (%" G_GUINT64_FORMAT " journal entries); hours (seconds):\n",
           s ? s : "the journal's start", u, av_acct_by_names[by], av_accounting_entries(acct));
    printf("%-36s  %-20s  %-18s  %-18s  %-16s  %-16s  %-16s  %6s  %8s  %7s  %7s  %s\n", head,
           by == AV_ACCT_BY_DEVICE ? "ADDRESS" : "NAME", "IN-USE", "CLAIMED", "DIRTY", "SCRUBBING",
           "QUARANTINED", "CLAIMS", "RELEASES", "ATTACHES", "DETACHES", "SCRUBS OK/FAILED");
    for (guint i = 0; i < groups->len; i++) {
        const AvAcctGroup *g = g_ptr_array_index(groups, i);

        av_acct_text_row(g->key, g->name, &g->sums);
    }
    av_acct_text_row("total", "", av_accounting_total(acct));
    printf("%s\n", anomalies ? anomalies : "No anomalies in the journal.");
}

/* See cli.h. */
int
av_cli_cmd_accounting(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    goffset size = 0;
    g_autoptr(AvAccounting) acct = NULL;
    g_autofree char *since_text = NULL, *until_text = NULL, *by_text = NULL;
    g_autofree char *path = NULL;
    gboolean csv = FALSE;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC, since = G_MININT64, until = now;
    AvAcctBy by = AV_ACCT_BY_DOMAIN;
    const char *chain;
    const GOptionEntry entries[] = {
        { "since", 0, 0, G_OPTION_ARG_STRING, &since_text,
          "Start of the window: RFC 3339, a UTC date or a duration back from now (7d, 12h); default: the "
          "journal's start", "T" },
        { "until", 0, 0, G_OPTION_ARG_STRING, &until_text, "End of the window (excluded); default: now", "T" },
        { "by", 0, 0, G_OPTION_ARG_STRING, &by_text, "Group by domain (default), project, user, profile or device",
          "GROUP" },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &csv, "CSV (RFC 4180) instead of a table", NULL },
        { NULL },
    };

    if (!av_cli_parse(cli, "accounting", NULL,
                      "Device time (in use, claimed, dirty, scrubbing, quarantined) and counts of claims, "
                      "releases, attaches, detaches and scrubs in a window, grouped, from the journal.  Changes "
                      "nothing.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'accounting' takes no arguments, got '%s'", argv[1]);
    if (csv && cli->json)
        return av_cli_usage_error("'accounting' takes --json or --csv, not both");
    if (by_text && !av_acct_by_from_string(by_text, &by))
        return av_cli_usage_error("'--by' takes domain, project, user, profile or device, got '%s'", by_text);
    if (since_text && !av_cli_time_parse(since_text, now, &since))
        return av_cli_usage_error("'--since' takes RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or a "
                                  "duration back from now (7d, 12h), got '%s'", since_text);
    if (until_text && !av_cli_time_parse(until_text, now, &until))
        return av_cli_usage_error("'--until' takes RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or a "
                                  "duration back from now (7d, 12h), got '%s'", until_text);
    if (since >= until)
        return av_cli_usage_error("the window is empty: --since must come before --until");

    /* The journal's size under the shared lock, when no writer is half-way
     * through a line; then that much is read without it (nothing before it
     * ever changes), so that a long read never keeps a domain's start
     * waiting. */
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_journal_size(cli->state_dir, &size, &err))
        return av_cli_fail(err);
    g_clear_pointer(&pool, av_pool_free);
    /* With --since, from the newest checkpoint before it: only the
     * devices' states are needed for a window that starts after it. */
    path = g_build_filename(cli->state_dir, "journal.jsonl", NULL);
    acct = av_accounting_read(path, size, since, until, by, av_cli_checkpoints_wanted(), &err);
    if (!acct)
        return av_cli_fail(err);

    if (av_accounting_checkpoint_warning(acct))
        fprintf(stderr, "accelvirt: warning: %s\n", av_accounting_checkpoint_warning(acct));

    chain = av_accounting_chain_error(acct);
    if (chain)
        fprintf(stderr, "accelvirt: warning: the journal's chain does not verify (%s): accounting from an "
                        "unverified journal; 'accelvirt journal verify' says more\n", chain);
    if (cli->json)
        av_cli_print_json(av_acct_json(acct, by, since, until));
    else if (csv)
        av_acct_print_csv(acct, by, av_accounting_anomaly_line(acct));
    else
        av_acct_print_text(acct, by, since, until);
    return AV_EXIT_OK;
}
