/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: device time from the journal (src/ledger/av-accounting.c).
 *
 * A synthetic journal, chained as the pool writes it, whose totals are
 * worked out by hand below; hostile journals that must not crash it nor
 * invent time. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "av-test.h"
#include "journal/av-journal-checkpoint.h"
#include "ledger/av-accounting.h"
#include "pool/av-pool-private.h"
#include "util/av-json.h"

/* 2026-11-01T00:00:00Z */
#define T0 G_GINT64_CONSTANT(1793491200)
#define MINUTE 60

/* A journal being written: its lines, chained (seq, prev). */
typedef struct {
    GString *text;
    guint64 seq;
    char *prev;
} Journal;

static void
journal_init(Journal *j)
{
    j->text = g_string_new(NULL);
    j->seq = 0;
    j->prev = g_strdup("");
}

static void
journal_clear(Journal *j)
{
    g_string_free(j->text, TRUE);
    g_free(j->prev);
}

/* Appends an entry at T0 + @minutes: @event and @fields (the members after
 * "event", JSON without braces, or ""). */
static void
journal_add(Journal *j, gint64 minutes, const char *event, const char *fields)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(T0 + minutes * MINUTE);
    g_autofree char *time = g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ");
    g_autofree char *line = g_strdup_printf("{\"seq\":%" G_GUINT64_FORMAT ",\"time\":\"%s\",\"prev\":\"%s\","
                                            "\"event\":\"%s\"%s%s}", ++j->seq, time, j->prev, event,
                                            *fields ? "," : "", fields);

    g_free(j->prev);
    j->prev = av_journal_hash(line, strlen(line));
    g_string_append_printf(j->text, "%s\n", line);
}

static const char *const OWNER1 = "{\"domain_uuid\":\"u1\",\"domain_name\":\"one\",\"nova_instance\":\"i1\","
                                  "\"nova_project\":\"P1\",\"nova_user\":\"U1\"}";
static const char *const OWNER2 = "{\"domain_uuid\":\"u2\",\"domain_name\":\"two, \\\"2\\\"\\n\","
                                  "\"nova_instance\":null,\"nova_project\":\"P2\",\"nova_user\":\"U2\"}";
static const char *const OWNER3 = "{\"domain_uuid\":\"u3\",\"domain_name\":\"three\",\"nova_instance\":null,"
                                  "\"nova_project\":null,\"nova_user\":null}";

static void
j_added(Journal *j, gint64 m, const char *id, const char *profile)
{
    g_autofree char *f = g_strdup_printf("\"identity\":\"%s\",\"kind\":\"pci\",\"address\":\"0000:%s:00.0\","
                                         "\"profile\":\"%s\",\"state\":\"free\"", id, id, profile);

    journal_add(j, m, "added", f);
}

static void
j_move(Journal *j, gint64 m, const char *event, const char *id, const char *from, const char *to,
       const char *owner)
{
    g_autofree char *f = g_strdup_printf("\"identity\":\"%s\",\"address\":\"0000:%s:00.0\",\"from\":\"%s\","
                                         "\"to\":\"%s\",\"owner\":%s,\"reason\":null", id, id, from, to,
                                         owner ? owner : "null");

    journal_add(j, m, event, f);
}

static void
j_cert(Journal *j, gint64 m, const char *id, const char *profile, const char *owner, gboolean ok, const char *secs)
{
    g_autofree char *f = g_strdup_printf("\"identity\":\"%s\",\"address\":\"0000:%s:00.0\",\"profile\":\"%s\","
                                         "\"previous_owner\":%s,\"steps\":[],\"seconds\":%s,\"ok\":%s,"
                                         "\"result\":\"%s\"", id, id, profile, owner, secs, ok ? "true" : "false",
                                         ok ? "free" : "quarantined");

    journal_add(j, m, "scrub-certificate", f);
}

/* The synthetic journal (minutes after T0; the window is [60, 600)):
 *   devices 0a, 0b (profile gpu), 0c (fpga), 0d (gpu) added free at 0
 *   0a: claimed by one at 30, in-use 90, dirty 240, scrubbing 250,
 *       certificate ok (600.5 s) and free at 260, claimed again at 650
 *   0b: claimed by two at 100, in-use 120 (attach), dirty 300 (detach),
 *       scrubbing 310, certificate failed (20 s) and quarantined (no
 *       owner) at 330, so until the end
 *   0c: claimed by three at 180, in-use 200, so until the end
 *   0d: missing at 400 (no time)
 * By hand, in the window:
 *   one:   claimed 60..90 = 1800, in-use 90..240 = 9000, dirty 600,
 *          scrubbing 600; 1 release, 1 scrub passed (the claim at 30 is
 *          before the window, the one at 650 after it)
 *   two:   claimed 1200, in-use 120..300 = 10800, dirty 600, scrubbing
 *          1200; 1 claim, 1 release, 1 attach, 1 detach, 1 scrub failed
 *   three: claimed 1200, in-use 200..600 = 24000; 1 claim
 *   -:     quarantined 330..600 = 16200; 1 quarantine */
static void
journal_synthetic(Journal *j)
{
    j_added(j, 0, "0a", "gpu");
    j_added(j, 0, "0b", "gpu");
    j_added(j, 0, "0c", "fpga");
    j_added(j, 0, "0d", "gpu");
    j_move(j, 30, "claimed", "0a", "free", "claimed", OWNER1);
    j_move(j, 90, "transition", "0a", "claimed", "in-use", OWNER1);
    j_move(j, 100, "claimed", "0b", "free", "claimed", OWNER2);
    j_move(j, 120, "transition", "0b", "claimed", "in-use", OWNER2);
    journal_add(j, 120, "attach", "\"domain_uuid\":\"u2\",\"domain_name\":\"two\",\"devices\":[{\"identity\":"
                "\"0b\",\"address\":\"0000:0b:00.0\",\"profile\":\"gpu\"}],\"persistent\":false");
    j_move(j, 180, "claimed", "0c", "free", "claimed", OWNER3);
    j_move(j, 200, "transition", "0c", "claimed", "in-use", OWNER3);
    j_move(j, 240, "transition", "0a", "in-use", "dirty", OWNER1);
    j_move(j, 250, "transition", "0a", "dirty", "scrubbing", OWNER1);
    j_cert(j, 260, "0a", "gpu", OWNER1, TRUE, "600.5");
    j_move(j, 260, "transition", "0a", "scrubbing", "free", NULL);
    j_move(j, 300, "transition", "0b", "in-use", "dirty", OWNER2);
    journal_add(j, 300, "detach", "\"domain_uuid\":\"u2\",\"domain_name\":\"two\",\"released\":[\"0b\"]");
    j_move(j, 310, "transition", "0b", "dirty", "scrubbing", OWNER2);
    j_cert(j, 330, "0b", "gpu", OWNER2, FALSE, "20");
    j_move(j, 330, "transition", "0b", "scrubbing", "quarantined", NULL);
    journal_add(j, 350, "vfs-set", "\"pf\":\"0000:6b:00.0\",\"profile\":\"qat\",\"from\":4,\"to\":6,\"by\":\"x\"");
    j_move(j, 400, "transition", "0d", "free", "missing", NULL);
    j_move(j, 650, "claimed", "0a", "free", "claimed", OWNER1);
}

/* Feeds @text line by line to a new accounting of [@since, @until) and
 * finishes it. */
static AvAccounting *
account(const char *text, gint64 since, gint64 until, AvAcctBy by)
{
    AvAccounting *acct = av_accounting_new(since, until, by);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i]; i++)
        if (lines[i][0] || lines[i + 1])
            av_accounting_feed_line(acct, lines[i], strlen(lines[i]));
    av_accounting_finish(acct);
    return acct;
}

static const AvAcctGroup *
group(const AvAccounting *acct, const char *key)
{
    const GPtrArray *groups = av_accounting_groups(acct);

    for (guint i = 0; i < groups->len; i++) {
        const AvAcctGroup *g = g_ptr_array_index(groups, i);

        if (g_str_equal(g->key, key))
            return g;
    }
    g_assert_not_reached();
}

/* The members of AvAcctSums the tests compare, in check_sums()'s order
 * (all 64-bit integers). */
static const struct {
    const char *name;
    gsize offset;
} sums_members[] = {
    { "claimed_s", G_STRUCT_OFFSET(AvAcctSums, claimed_s) },
    { "in_use_s", G_STRUCT_OFFSET(AvAcctSums, in_use_s) },
    { "dirty_s", G_STRUCT_OFFSET(AvAcctSums, dirty_s) },
    { "scrubbing_s", G_STRUCT_OFFSET(AvAcctSums, scrubbing_s) },
    { "quarantined_s", G_STRUCT_OFFSET(AvAcctSums, quarantined_s) },
    { "claims", G_STRUCT_OFFSET(AvAcctSums, claims) },
    { "releases", G_STRUCT_OFFSET(AvAcctSums, releases) },
    { "attaches", G_STRUCT_OFFSET(AvAcctSums, attaches) },
    { "detaches", G_STRUCT_OFFSET(AvAcctSums, detaches) },
    { "scrubs_passed", G_STRUCT_OFFSET(AvAcctSums, scrubs_passed) },
    { "scrubs_failed", G_STRUCT_OFFSET(AvAcctSums, scrubs_failed) },
    { "quarantines", G_STRUCT_OFFSET(AvAcctSums, quarantines) },
};

static gint64
sums_member(const AvAcctSums *s, guint k)
{
    gint64 v;

    memcpy(&v, (const char *)s + sums_members[k].offset, sizeof(v));
    return v;
}

/* @s holds the values that follow, in sums_members' order. */
static void
check_sums(const AvAcctSums *s, gint64 claimed, gint64 in_use, gint64 dirty, gint64 scrubbing, gint64 quarantined,
           gint64 claims, gint64 releases, gint64 attaches, gint64 detaches, gint64 passed, gint64 failed,
           gint64 quarantines)
{
    const gint64 want[] = { claimed, in_use, dirty, scrubbing, quarantined, claims, releases, attaches, detaches,
                            passed, failed, quarantines };

    G_STATIC_ASSERT(G_N_ELEMENTS(want) == G_N_ELEMENTS(sums_members));
    for (guint k = 0; k < G_N_ELEMENTS(want); k++)
        if (sums_member(s, k) != want[k])
            g_error("%s is %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, sums_members[k].name,
                    sums_member(s, k), want[k]);
}

/* The sum over the groups equals the total, member by member, exactly. */
static void
check_adds_up(const AvAccounting *acct)
{
    const GPtrArray *groups = av_accounting_groups(acct);
    const AvAcctSums *t = av_accounting_total(acct);

    for (guint k = 0; k < G_N_ELEMENTS(sums_members); k++) {
        gint64 sum = 0;

        for (guint i = 0; i < groups->len; i++)
            sum += sums_member(&((const AvAcctGroup *)g_ptr_array_index(groups, i))->sums, k);
        if (sum != sums_member(t, k))
            g_error("the groups' %s add up to %" G_GINT64_FORMAT ", the total is %" G_GINT64_FORMAT,
                    sums_members[k].name, sum, sums_member(t, k));
    }
}

static void
test_totals(void)
{
    Journal j;
    g_autoptr(AvAccounting) acct = NULL;
    const AvAcctGroup *g;

    journal_init(&j);
    journal_synthetic(&j);
    acct = account(j.text->str, T0 + 60 * MINUTE, T0 + 600 * MINUTE, AV_ACCT_BY_DOMAIN);
    g_assert_null(av_accounting_chain_error(acct));
    g_assert_null(av_accounting_anomaly_line(acct));
    g_assert_cmpuint(av_accounting_entries(acct), ==, 23);
    g_assert_cmpuint(av_accounting_groups(acct)->len, ==, 4);
    g = group(acct, "u1");
    g_assert_cmpstr(g->name, ==, "one");
    check_sums(&g->sums, 1800, 9000, 600, 600, 0, 0, 1, 0, 0, 1, 0, 0);
    g_assert_cmpfloat(g->sums.scrub_seconds, ==, 600.5);
    g = group(acct, "u2");
    g_assert_cmpstr(g->name, ==, "two, \"2\"\n");
    check_sums(&g->sums, 1200, 10800, 600, 1200, 0, 1, 1, 1, 1, 0, 1, 0);
    g = group(acct, "u3");
    check_sums(&g->sums, 1200, 24000, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0);
    g = group(acct, "-");
    check_sums(&g->sums, 0, 0, 0, 0, 16200, 0, 0, 0, 0, 0, 0, 1);
    check_sums(av_accounting_total(acct), 4200, 43800, 1200, 1800, 16200, 2, 2, 1, 1, 1, 1, 1);
    check_adds_up(acct);

    /* Every grouping adds up to the same total. */
    for (AvAcctBy by = AV_ACCT_BY_DOMAIN; by <= AV_ACCT_BY_OWNER; by++) {
        g_autoptr(AvAccounting) other = account(j.text->str, T0 + 60 * MINUTE, T0 + 600 * MINUTE, by);
        const AvAcctSums *t = av_accounting_total(other);

        check_sums(t, 4200, 43800, 1200, 1800, 16200, 2, 2, 1, 1, 1, 1, 1);
        check_adds_up(other);
    }
    {
        g_autoptr(AvAccounting) p = account(j.text->str, T0 + 60 * MINUTE, T0 + 600 * MINUTE, AV_ACCT_BY_PROJECT);
        g_autoptr(AvAccounting) f = account(j.text->str, T0 + 60 * MINUTE, T0 + 600 * MINUTE, AV_ACCT_BY_PROFILE);
        g_autoptr(AvAccounting) d = account(j.text->str, T0 + 60 * MINUTE, T0 + 600 * MINUTE, AV_ACCT_BY_DEVICE);

        /* three has no Nova project: with the ownerless quarantine in "-". */
        check_sums(&group(p, "-")->sums, 1200, 24000, 0, 0, 16200, 1, 0, 0, 0, 0, 0, 1);
        check_sums(&group(p, "P1")->sums, 1800, 9000, 600, 600, 0, 0, 1, 0, 0, 1, 0, 0);
        check_sums(&group(f, "fpga")->sums, 1200, 24000, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0);
        g_assert_cmpfloat(group(f, "gpu")->sums.scrub_seconds, ==, 620.5);
        g_assert_cmpint(group(d, "0b")->sums.quarantined_s, ==, 16200);
        g_assert_cmpstr(group(d, "0b")->name, ==, "0000:0b:00.0");
    }
    /* The whole journal up to 700: the claim at 650 counts, and 0a's
     * claimed time from 650 (3000 s) and before the window (1800 s). */
    {
        g_autoptr(AvAccounting) all = account(j.text->str, 0, T0 + 700 * MINUTE, AV_ACCT_BY_DOMAIN);

        check_sums(&group(all, "u1")->sums, 1800 + 1800 + 3000, 9000, 600, 600, 0, 2, 1, 0, 0, 1, 0, 0);
        g_assert_cmpint(av_accounting_total(all)->quarantined_s, ==, (700 - 330) * MINUTE);
    }
    journal_clear(&j);
}

/* The same journal read from a file (streamed), and a missing one. */
static void
test_read_file(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autofree char *none = g_build_filename(dir, "none.jsonl", NULL);
    g_autoptr(AvAccounting) acct = av_accounting_new(T0 + 60 * MINUTE, T0 + 600 * MINUTE, AV_ACCT_BY_DOMAIN);
    g_autoptr(AvAccounting) empty = av_accounting_new(0, T0, AV_ACCT_BY_DOMAIN);
    g_autoptr(GError) err = NULL;
    Journal j;

    journal_init(&j);
    journal_synthetic(&j);
    g_assert_true(g_file_set_contents(path, j.text->str, -1, NULL));
    g_assert_true(av_accounting_read_journal(acct, path, &err));
    g_assert_no_error(err);
    g_assert_null(av_accounting_chain_error(acct));
    check_sums(av_accounting_total(acct), 4200, 43800, 1200, 1800, 16200, 2, 2, 1, 1, 1, 1, 1);
    g_assert_true(av_accounting_read_journal(empty, none, &err));
    g_assert_cmpuint(av_accounting_groups(empty)->len, ==, 0);
    g_assert_cmpuint(av_accounting_entries(empty), ==, 0);
    journal_clear(&j);
    av_test_tmpdir_remove(dir);
}

/* Hostile lines: never a crash, never time invented, each counted. */
static void
test_hostile(void)
{
    Journal j;
    g_autoptr(AvAccounting) acct = NULL;
    g_autofree char *line = NULL;

    journal_init(&j);
    j_added(&j, 0, "0a", "gpu");
    g_string_append(j.text, "not json at all\n{\"seq\":\n[1,2]\n\n");
    j_move(&j, 10, "claimed", "0a", "free", "claimed", OWNER1);
    /* time going backwards: taken as 10, so 0 s claimed */
    j_move(&j, 5, "transition", "0a", "claimed", "in-use", OWNER1);
    /* "from" disagrees (the timeline says in-use): 20..40 is not counted */
    j_move(&j, 40, "transition", "0a", "dirty", "scrubbing", OWNER1);
    j_move(&j, 50, "transition", "0a", "scrubbing", "free", NULL);
    /* a device never added: known from 60 on */
    j_move(&j, 60, "transition", "0z", "claimed", "in-use", OWNER2);
    journal_add(&j, 70, "martian-event", "\"identity\":\"0a\"");
    journal_add(&j, 70, "transition", "\"identity\":\"0a\",\"from\":\"free\",\"to\":\"exploded\"");
    journal_add(&j, 70, "transition", "\"from\":\"free\",\"to\":\"claimed\"");
    j_cert(&j, 70, "0a", "gpu", OWNER1, TRUE, "1e308");
    j_cert(&j, 70, "0a", "gpu", OWNER1, TRUE, "-5");
    /* huge numbers: a time far in the future, a seq past 2^62 */
    g_string_append(j.text, "{\"seq\":4611686018427387904,\"time\":\"9999-12-31T23:59:59Z\",\"prev\":\"\","
                            "\"event\":\"transition\",\"identity\":\"0z\",\"from\":\"in-use\",\"to\":\"dirty\","
                            "\"owner\":null}\n");
    g_string_append(j.text, "{\"seq\":1,\"time\":\"yesterday\",\"prev\":\"\",\"event\":\"added\"}\n");
    g_string_append(j.text, "{\"seq\":1,\"time\":\"2026-13-45T99:00:00Z\",\"prev\":\"\",\"event\":\"added\"}\n");
    line = g_strnfill(100000, 'x');
    g_string_append_printf(j.text, "%s\n", line);

    acct = account(j.text->str, T0, T0 + 100 * MINUTE, AV_ACCT_BY_DOMAIN);
    g_assert_nonnull(av_accounting_chain_error(acct));
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_NOT_ENTRY), ==, 5);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_BACKWARDS), ==, 1);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_FROM), ==, 1);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_UNKNOWN_DEV), ==, 1);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_UNKNOWN), ==, 1);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_BAD_FIELDS), ==, 4);
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_BAD_TIME), ==, 2);
    /* 0a: claimed 0 s, in-use 0 s (the interval before the bad "from"
     * dropped), scrubbing 40..50; 0z: in-use 60..100 (the dirty at year
     * 9999 is past the window). */
    check_sums(&group(acct, "u1")->sums, 0, 0, 0, 600, 0, 1, 0, 0, 0, 2, 0, 0);
    g_assert_cmpfloat(group(acct, "u1")->sums.scrub_seconds, ==, 0);
    check_sums(&group(acct, "u2")->sums, 0, 40 * MINUTE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    check_adds_up(acct);
    {
        g_autofree char *said = av_accounting_anomaly_line(acct);

        g_assert_nonnull(strstr(said, "15 journal lines skipped or doubted: 5 not a journal entry"));
    }
    journal_clear(&j);
}

/* A torn last line and a NUL byte in a file: anomalies and a broken chain. */
static void
test_torn_file(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autoptr(AvAccounting) acct = av_accounting_new(T0, T0 + 100 * MINUTE, AV_ACCT_BY_DEVICE);
    g_autoptr(GError) err = NULL;
    Journal j;

    journal_init(&j);
    j_added(&j, 0, "0a", "gpu");
    j_move(&j, 10, "claimed", "0a", "free", "claimed", OWNER1);
    g_string_append_len(j.text, "{\"seq\":3,\0\"x\"}\n", 15);
    g_string_append(j.text, "{\"seq\":3,\"time\"");
    g_assert_true(g_file_set_contents(path, j.text->str, (gssize)j.text->len, NULL));
    g_assert_true(av_accounting_read_journal(acct, path, &err));
    g_assert_cmpuint(av_accounting_anomalies(acct, AV_ACCT_ANOMALY_NOT_ENTRY), ==, 2);
    g_assert_nonnull(av_accounting_chain_error(acct));
    g_assert_cmpint(group(acct, "0a")->sums.claimed_s, ==, 90 * MINUTE);
    journal_clear(&j);
    av_test_tmpdir_remove(dir);
}

/* Memory grows with devices, not lines: 200000 claim/release cycles of one
 * device keep one device and one group. */
static void
test_long_journal(void)
{
    g_autoptr(AvAccounting) acct = av_accounting_new(T0, T0 + 400000 * MINUTE, AV_ACCT_BY_DEVICE);
    Journal j;

    journal_init(&j);
    j_added(&j, 0, "0a", "gpu");
    av_accounting_feed_line(acct, j.text->str, j.text->len - 1);
    for (gint64 i = 0; i < 100000; i++) {
        g_string_truncate(j.text, 0);
        j_move(&j, 2 * i, "claimed", "0a", "free", "claimed", OWNER1);
        j_move(&j, 2 * i + 1, "claim-expired", "0a", "claimed", "free", NULL);
        {
            g_auto(GStrv) two = g_strsplit(j.text->str, "\n", 3);

            av_accounting_feed_line(acct, two[0], strlen(two[0]));
            av_accounting_feed_line(acct, two[1], strlen(two[1]));
        }
    }
    av_accounting_finish(acct);
    g_assert_null(av_accounting_chain_error(acct));
    g_assert_cmpuint(av_accounting_groups(acct)->len, ==, 1);
    check_sums(av_accounting_total(acct), 100000 * MINUTE, 0, 0, 0, 0, 100000, 0, 0, 0, 0, 0, 0);
    journal_clear(&j);
}

static void
test_by_names(void)
{
    AvAcctBy by = AV_ACCT_BY_OWNER;

    g_assert_true(av_acct_by_from_string("project", &by));
    g_assert_cmpint(by, ==, AV_ACCT_BY_PROJECT);
    g_assert_true(av_acct_by_from_string("device", &by));
    g_assert_cmpint(by, ==, AV_ACCT_BY_DEVICE);
    g_assert_false(av_acct_by_from_string("owner", &by));
    g_assert_false(av_acct_by_from_string(NULL, &by));
    g_assert_cmpint(by, ==, AV_ACCT_BY_DEVICE);
}

/* @a and @b counted the same: groups, sums, total, anomalies, entries and
 * the chain's verdict. */
static void
check_same(const AvAccounting *a, const AvAccounting *b)
{
    const GPtrArray *ga = av_accounting_groups(a), *gb = av_accounting_groups(b);

    g_assert_cmpuint(ga->len, ==, gb->len);
    for (guint i = 0; i < ga->len; i++) {
        const AvAcctGroup *x = g_ptr_array_index(ga, i), *y = g_ptr_array_index(gb, i);

        g_assert_cmpstr(x->key, ==, y->key);
        g_assert_cmpstr(x->name, ==, y->name);
        g_assert_cmpmem(&x->sums, sizeof(x->sums), &y->sums, sizeof(y->sums));
    }
    g_assert_cmpmem(av_accounting_total(a), sizeof(AvAcctSums), av_accounting_total(b), sizeof(AvAcctSums));
    for (guint k = 0; k < AV_ACCT_ANOMALIES; k++)
        g_assert_cmpuint(av_accounting_anomalies(a, k), ==, av_accounting_anomalies(b, k));
    g_assert_cmpuint(av_accounting_entries(a), ==, av_accounting_entries(b));
    g_assert_cmpstr(av_accounting_chain_error(a), ==, av_accounting_chain_error(b));
}

/* A checkpoint written over the synthetic journal, then entries after it,
 * top-level "checkpoint" entries that are malformed (upper-case hex, an
 * at_offset past their own line), one nested in another entry and a torn
 * tail that looks like one: the finder takes the real one, and the
 * accounting from it counts what a whole read counts (the torn tail's
 * chain error included), for a window from the start by tenant and for a
 * window after it by device; a window starting at its at_time does not use
 * it. */
static void
test_checkpoint(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) fields = NULL;
    g_autoptr(json_t) found = NULL;
    g_autofree char *dumped = NULL;
    g_autofree char *inner = NULL;
    g_autofree char *upper = g_strnfill(64, 'A');
    g_autofree char *bad1 = NULL;
    g_autofree char *bad2 = NULL;
    g_autofree char *warning = NULL;
    guint64 fresh = 0, at_seq;
    goffset cp_offset, offset = 0;
    Journal j;

    journal_init(&j);
    journal_synthetic(&j);
    g_assert_true(g_file_set_contents(path, j.text->str, -1, NULL));
    g_assert_true(av_accounting_checkpoint(path, &fields, &fresh, &warning, &err));
    g_assert_null(warning);
    g_assert_no_error(err);
    g_assert_nonnull(fields);
    at_seq = j.seq;
    g_assert_cmpuint(fresh, ==, at_seq);
    g_assert_cmpint(json_integer_value(json_object_get(fields, "at_seq")), ==, (json_int_t)at_seq);
    g_assert_cmpint(json_integer_value(json_object_get(fields, "at_offset")), ==, (json_int_t)j.text->len);
    dumped = av_json_dump_compact(fields);
    inner = g_strndup(dumped + 1, strlen(dumped) - 2);
    cp_offset = (goffset)j.text->len;
    journal_add(&j, 650, "checkpoint", inner);
    j_move(&j, 700, "transition", "0a", "claimed", "in-use", OWNER1);
    j_move(&j, 720, "transition", "0c", "in-use", "dirty", OWNER3);
    bad1 = g_strdup_printf("\"at_seq\":1,\"at_sha256\":\"%s\",\"at_offset\":1,\"at_time\":\"2026-11-01T00:00:00Z\"",
                           upper);
    journal_add(&j, 730, "checkpoint", bad1);
    bad2 = g_strdup_printf("\"at_seq\":1,\"at_sha256\":\"%s\",\"at_offset\":999999999,"
                           "\"at_time\":\"2026-11-01T00:00:00Z\"", j.prev);
    journal_add(&j, 731, "checkpoint", bad2);
    journal_add(&j, 732, "violation", "\"detail\":{\"event\":\"checkpoint\",\"at_seq\":1,\"at_offset\":1}");
    g_string_append_printf(j.text, "{\"seq\":99,\"time\":\"2026-11-01T00:00:00Z\",\"prev\":\"\",\"event\":\"checkpoint\"");
    g_assert_true(g_file_set_contents(path, j.text->str, -1, NULL));

    g_assert_true(av_journal_find_checkpoint(path, -1, G_MAXINT64, &found, &offset, &err));
    g_assert_nonnull(found);
    g_assert_cmpint(offset, ==, cp_offset);
    g_assert_cmpint(json_integer_value(json_object_get(found, "at_seq")), ==, (json_int_t)at_seq);
    g_clear_pointer(&found, json_decref);
    g_assert_true(av_journal_find_checkpoint(path, -1, T0 + 650 * MINUTE - 1, &found, &offset, &err));
    g_assert_null(found);

    {
        g_autoptr(AvAccounting) a = av_accounting_read(path, -1, G_MININT64, T0 + 1000 * MINUTE, AV_ACCT_BY_TENANT,
                                                       TRUE, &err);
        g_autoptr(AvAccounting) b = av_accounting_read(path, -1, G_MININT64, T0 + 1000 * MINUTE, AV_ACCT_BY_TENANT,
                                                       FALSE, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_accounting_checkpoint_seq(a), ==, at_seq);
        g_assert_cmpuint(av_accounting_checkpoint_seq(b), ==, 0);
        g_assert_null(av_accounting_checkpoint_warning(a));
        g_assert_nonnull(av_accounting_chain_error(a));
        check_same(a, b);
    }
    {
        g_autoptr(AvAccounting) a = av_accounting_read(path, -1, T0 + 660 * MINUTE, T0 + 1000 * MINUTE,
                                                       AV_ACCT_BY_DEVICE, TRUE, &err);
        g_autoptr(AvAccounting) b = av_accounting_read(path, -1, T0 + 660 * MINUTE, T0 + 1000 * MINUTE,
                                                       AV_ACCT_BY_DEVICE, FALSE, &err);
        g_autoptr(AvAccounting) at = av_accounting_read(path, -1, T0 + 650 * MINUTE, T0 + 1000 * MINUTE,
                                                        AV_ACCT_BY_DEVICE, TRUE, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_accounting_checkpoint_seq(a), ==, at_seq);
        check_same(a, b);
        g_assert_cmpuint(av_accounting_checkpoint_seq(at), ==, 0);
    }
    journal_clear(&j);
    av_test_tmpdir_remove(dir);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/accounting/totals", test_totals);
    g_test_add_func("/accounting/read-file", test_read_file);
    g_test_add_func("/accounting/hostile", test_hostile);
    g_test_add_func("/accounting/torn-file", test_torn_file);
    g_test_add_func("/accounting/long-journal", test_long_journal);
    g_test_add_func("/accounting/by-names", test_by_names);
    g_test_add_func("/accounting/checkpoint", test_checkpoint);
    return g_test_run();
}
