/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt policy check|show and journal verify|show|checkpoint. */
#include "config.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "journal/av-journal-archive.h"
#include "journal/av-journal-checkpoint.h"
#include "ledger/av-accounting.h"
#include "pool/av-pool.h"
#include "scrub/av-scrub.h"
#include "util/av-json.h"

static int
av_policy_check(AvCli *cli, const AvPolicy *policy)
{
    json_t *warnings = json_array();
    guint n_warnings = 0;

    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);
        g_autoptr(GPtrArray) w = av_profile_scrub_warnings(p);

        for (guint k = 0; k < w->len; k++)
            json_array_append_new(warnings, json_pack("{s:s, s:s, s:i, s:s}", "profile", p->name,
                                                      "file", p->source_file, "line", p->source_line,
                                                      "message", (const char *)g_ptr_array_index(w, k)));
        n_warnings += w->len;
    }
    if (cli->json) {
        json_t *o = json_object();
        json_t *files = json_array();

        for (guint i = 0; i < policy->files->len; i++)
            json_array_append_new(files, json_string(g_ptr_array_index(policy->files, i)));
        json_object_set_new(o, "policy_dir", json_string(cli->policy_dir));
        json_object_set_new(o, "valid", json_true());
        json_object_set_new(o, "files", files);
        json_object_set_new(o, "profiles", json_integer(policy->profiles->len));
        if (policy->limits && policy->limits->len > 0) {
            json_t *limits = json_array();

            for (guint i = 0; i < policy->limits->len; i++)
                json_array_append_new(limits, av_limit_to_json(g_ptr_array_index(policy->limits, i)));
            json_object_set_new(o, "limits", limits);
        }
        json_object_set_new(o, "warnings", warnings);
        av_cli_print_json(o);
        return AV_EXIT_OK;
    }
    if (policy->files->len == 0) {
        printf("%s: no policy files; accelvirt manages no device on this host.\n", cli->policy_dir);
        json_decref(warnings);
        return AV_EXIT_OK;
    }
    printf("%s: %u profile%s in %u file%s, all valid", cli->policy_dir, policy->profiles->len,
           policy->profiles->len == 1 ? "" : "s", policy->files->len, policy->files->len == 1 ? "" : "s");
    if (n_warnings)
        printf("; %u warning%s (on stderr)", n_warnings, n_warnings == 1 ? "" : "s");
    printf(".\n");
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);
        g_autofree char *base = g_path_get_basename(p->source_file);

        printf("  %-24s  %-9s  %s:%d\n", p->name, av_attach_to_string(p->attach), base, p->source_line);
    }
    if (policy->limits && policy->limits->len > 0)
        printf("%u limit%s ('accelvirt limits' shows each owner's usage).\n", policy->limits->len,
               policy->limits->len == 1 ? "" : "s");
    for (guint i = 0; i < json_array_size(warnings); i++) {
        json_t *w = json_array_get(warnings, i);

        fprintf(stderr, "%s:%d: warning: profile '%s': %s\n", json_string_value(json_object_get(w, "file")),
                (int)json_integer_value(json_object_get(w, "line")), json_string_value(json_object_get(w, "profile")),
                json_string_value(json_object_get(w, "message")));
    }
    json_decref(warnings);
    return AV_EXIT_OK;
}

static int
av_policy_show(AvCli *cli, const AvPolicy *policy, const char *name)
{
    json_t *arr = json_array();

    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        if (!name || g_str_equal(name, p->name))
            json_array_append_new(arr, av_profile_to_json(p));
    }
    if (name && json_array_size(arr) == 0) {
        json_decref(arr);
        return av_cli_usage_error("no profile named '%s' in %s; 'accelvirt policy check' lists them",
                                  name, cli->policy_dir);
    }
    av_cli_print_json(arr);
    return AV_EXIT_OK;
}

int
av_cli_cmd_policy(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) err = NULL;

    if (!av_cli_parse(cli, "policy", "check | show [NAME]",
                      "Check every policy file (the first error names the file, line and column) "
                      "or show the profiles in their normalised form.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc < 2 || (!g_str_equal(argv[1], "check") && !g_str_equal(argv[1], "show")))
        return av_cli_usage_error("'policy' needs 'check' or 'show [NAME]'");
    if (argc > (g_str_equal(argv[1], "show") ? 3 : 2))
        return av_cli_usage_error("too many arguments for 'policy %s'", argv[1]);

    policy = av_cli_load_policy(cli, &err);
    if (!policy)
        return av_cli_fail(err);
    if (g_str_equal(argv[1], "check"))
        return av_policy_check(cli, policy);
    return av_policy_show(cli, policy, argc > 2 ? argv[2] : NULL);
}

/* A member of a journal entry as text fit for the terminal (caller
 * frees), or NULL when it is no string. */
static char *
av_journal_field(json_t *e, const char *key)
{
    return av_cli_printable(json_string_value(json_object_get(e, key)));
}

/* One line of `journal show` for @e: its number, time, event and device,
 * then what the event says; a certificate says its result, reason and
 * coverage on the lines below.  Every member is made printable on its own
 * (an identity holds a USB device's serial, a reason a program's output):
 * no member can end a line or draw another. */
static void
av_journal_print_entry(json_t *e)
{
    g_autofree char *event = av_journal_field(e, "event");
    g_autofree char *identity = av_journal_field(e, "identity");
    g_autofree char *address = av_journal_field(e, "address");
    g_autofree char *time = av_journal_field(e, "time");
    g_autofree char *reason = av_journal_field(e, "reason");
    g_autoptr(GString) line = g_string_new(NULL);

    g_string_append_printf(line, "%6" JSON_INTEGER_FORMAT "  %s  %-18s", json_integer_value(json_object_get(e, "seq")),
                           time ? time : "?", event ? event : "?");
    if (address)
        g_string_append_printf(line, "  %s", address);
    if (identity)
        g_string_append_printf(line, "  %s", identity);
    if (g_strcmp0(json_string_value(json_object_get(e, "event")), "scrub-certificate") == 0) {
        json_t *cov = json_object_get(e, "coverage");
        g_autofree char *result = av_journal_field(e, "result");

        g_string_append_printf(line, "\n        %s", result ? result : "?");
        if (reason)
            g_string_append_printf(line, ": %s", reason);
        if (json_is_object(cov)) {
            g_autofree char *text = av_scrub_coverage_describe(cov);
            g_autofree char *shown = av_cli_printable(text);

            g_string_append_printf(line, "\n        coverage: %s", shown);
        } else {
            g_string_append(line, "\n        coverage: not recorded");
        }
    } else {
        g_autofree char *from = av_journal_field(e, "from");
        g_autofree char *to = av_journal_field(e, "to");
        g_autofree char *state = av_journal_field(e, "state");

        if (from && to)
            g_string_append_printf(line, "  %s -> %s", from, to);
        else if (state)
            g_string_append_printf(line, "  %s", state);
        if (reason)
            g_string_append_printf(line, ": %s", reason);
    }
    printf("%s\n", line->str);
}

/* What `journal show` picks and keeps: entries are printed as they are
 * read, or, for --last and --json, kept (the last N only). */
typedef struct {
    const char *device;
    const char *event;
    guint last;
    gboolean keep;
    GQueue kept;
    guint shown;
} AvJournalShow;

static gboolean
av_journal_show_entry(json_t *e, gpointer data)
{
    AvJournalShow *show = data;

    if (show->event && g_strcmp0(json_string_value(json_object_get(e, "event")), show->event) != 0)
        return TRUE;
    if (show->device && g_strcmp0(json_string_value(json_object_get(e, "identity")), show->device) != 0 &&
        g_strcmp0(json_string_value(json_object_get(e, "address")), show->device) != 0)
        return TRUE;
    show->shown++;
    if (!show->keep) {
        av_journal_print_entry(e);
        return TRUE;
    }
    g_queue_push_tail(&show->kept, json_incref(e));
    if (show->last && show->kept.length > show->last)
        json_decref(g_queue_pop_head(&show->kept));
    return TRUE;
}

/* Read without the pool's lock up to the size the journal had under it,
 * as verify does, one entry at a time. */
static int
av_journal_show(AvCli *cli, const char *device, const char *event, gint last)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    AvJournalShow show = { device, event, (guint)last, cli->json || last > 0, G_QUEUE_INIT, 0 };
    goffset size = 0;
    gboolean ok;
    json_t *arr, *e;

    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_journal_size(cli->state_dir, &size, &err))
        return av_cli_fail(err);
    g_clear_pointer(&pool, av_pool_free);
    ok = av_journal_foreach(cli->state_dir, size, av_journal_show_entry, &show, &err);
    if (ok && cli->json) {
        arr = json_array();
        while ((e = g_queue_pop_head(&show.kept)))
            json_array_append_new(arr, e);
        av_cli_print_json(arr);
        return AV_EXIT_OK;
    }
    while ((e = g_queue_pop_head(&show.kept))) {
        if (ok)
            av_journal_print_entry(e);
        json_decref(e);
    }
    if (!ok)
        return av_cli_fail(err);
    if (show.shown == 0)
        printf("No journal entry%s%s%s%s.\n", device ? " of " : "", device ? device : "",
               event ? " with event " : "", event ? event : "");
    return AV_EXIT_OK;
}

/* A verify's progress on a terminal: one line, rewritten at most twice a
 * second, wiped at the end. */
typedef struct {
    gboolean tty;
    gboolean shown;
    gint64 last;                 /* monotonic time of the last line, in us */
} AvVerifyProgress;

static void
av_journal_verify_progress(goffset done, goffset total, guint64 entries, gpointer data)
{
    AvVerifyProgress *p = data;
    gint64 now = g_get_monotonic_time();

    if (p->shown && now - p->last < G_USEC_PER_SEC / 2)
        return;
    p->last = now;
    p->shown = TRUE;
    fprintf(stderr, "\rverifying the journal: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " MiB, %" G_GUINT64_FORMAT
            " entries\033[K", (gint64)(done >> 20), (gint64)(total >> 20), entries);
    fflush(stderr);
}

static void
av_journal_verify_progress_end(AvVerifyProgress *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = FALSE;
}

/* Under the pool's lock, before the checkpoint @fields computed without
 * it is appended: the line ending at its at_offset is still its at_seq
 * entry hashing to its at_sha256 (one line read back, however long the
 * journal).  Entries appended after it are fine; a journal replaced
 * meanwhile (moved away, restored) is not. */
static gboolean
av_journal_checkpoint_holds(const char *path, json_t *fields, GError **error)
{
    g_autofree char *line = NULL;
    g_autofree char *hash = NULL;
    g_autoptr(json_t) entry = NULL;
    goffset at = (goffset)json_integer_value(json_object_get(fields, "at_offset"));
    gsize len = 0;

    if (!av_journal_line_before(path, at, &line, &len, NULL) || !(hash = av_journal_hash(line, len)) ||
        g_strcmp0(hash, json_string_value(json_object_get(fields, "at_sha256"))) != 0 ||
        !(entry = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL)) ||
        json_integer_value(json_object_get(entry, "seq")) != json_integer_value(json_object_get(fields, "at_seq"))) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "the journal '%s' changed while its checkpoint was computed (the line ending at byte %"
                    G_GINT64_FORMAT " is no longer the entry it covers); nothing was written: run 'accelvirt "
                    "journal checkpoint' again", path, (gint64)at);
        return FALSE;
    }
    return TRUE;
}

/* `journal checkpoint`: the state is computed without the lock (the
 * journal only grows, av_accounting_checkpoint() stops at its last whole
 * entry); the pool's exclusive lock is taken only to check that the entry
 * it covers is still there (av_journal_checkpoint_holds()) and append it,
 * which may then cover an entry older than the journal's tail: readers
 * feed from its at_offset on. */
static gboolean
av_journal_checkpoint_write(AvCli *cli, gint64 min_entries, json_t **ret_fields, guint64 *ret_fresh,
                            gboolean *ret_written, GError **error)
{
    g_autoptr(AvPool) pool = NULL;
    g_autofree char *path = g_build_filename(cli->state_dir, AV_JOURNAL_FILE, NULL);
    g_autofree char *warning = NULL;

    *ret_written = FALSE;
    if (!av_accounting_checkpoint(path, ret_fields, ret_fresh, &warning, error))
        return FALSE;
    if (warning)
        fprintf(stderr, "accelvirt: warning: %s\n", warning);
    if (*ret_fields && *ret_fresh >= (guint64)min_entries) {
        pool = av_cli_open_pool(cli, NULL, AV_POOL_WRITE, error);
        if (!pool || !av_journal_checkpoint_holds(path, *ret_fields, error) ||
            !av_pool_journal_append(pool, "checkpoint", *ret_fields, error))
            return FALSE;
        *ret_written = TRUE;
    }
    return TRUE;
}

static int
av_journal_checkpoint(AvCli *cli, gint64 min_entries)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) fields = NULL;
    guint64 fresh = 0;
    gboolean write;

    if (!av_journal_checkpoint_write(cli, min_entries, &fields, &fresh, &write, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "written", json_boolean(write));
        json_object_set_new(o, "at_seq", write ? json_incref(json_object_get(fields, "at_seq")) : json_null());
        json_object_set_new(o, "new_entries", json_integer((json_int_t)fresh));
        av_cli_print_json(o);
    } else if (write) {
        printf("Wrote a checkpoint of the journal at seq %" G_GINT64_FORMAT " (%" G_GUINT64_FORMAT
               " entries after the previous one).\n", (gint64)json_integer_value(json_object_get(fields, "at_seq")),
               fresh);
    } else {
        printf("No checkpoint written: %" G_GUINT64_FORMAT " entries after the previous one, fewer than %"
               G_GINT64_FORMAT ".\n", fresh, min_entries);
    }
    return AV_EXIT_OK;
}

/* See cli.h. */
/* Where `journal verify --since-checkpoint` starts: after the newest
 * checkpoint in the journal's first @size bytes, once the line ending at
 * its at_offset is the entry at_seq and hashes to at_sha256 (the chain
 * then goes on from it); from the start when there is none.  A checkpoint
 * that does not hold is an error: the daily check must not pass on it. */
static gboolean
av_journal_verify_start(const char *state_dir, goffset size, gint64 max_time, AvJournalFrom *from, json_t **ret_cp,
                        GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    g_autofree char *line = NULL;
    g_autofree char *hash = NULL;
    g_autoptr(json_t) entry = NULL;
    goffset cp_offset = 0, at;
    gsize len = 0;
    json_t *cp;

    if (!av_journal_find_checkpoint(path, size, max_time, ret_cp, &cp_offset, error))
        return FALSE;
    cp = *ret_cp;
    if (!cp)
        return TRUE;
    at = (goffset)json_integer_value(json_object_get(cp, "at_offset"));
    if (!json_is_integer(json_object_get(cp, "lines")) || json_integer_value(json_object_get(cp, "lines")) < 1 ||
        !av_journal_line_before(path, at, &line, &len, NULL) || !(hash = av_journal_hash(line, len)) ||
        g_strcmp0(hash, json_string_value(json_object_get(cp, "at_sha256"))) != 0 ||
        !(entry = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL)) ||
        !json_is_integer(json_object_get(entry, "seq")) ||
        json_integer_value(json_object_get(entry, "seq")) != json_integer_value(json_object_get(cp, "at_seq"))) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal's checkpoint at byte %" G_GINT64_FORMAT " does not match its journal (the line "
                    "ending at its at_offset is not the entry at_seq hashing to at_sha256); 'accelvirt journal "
                    "verify' without --since-checkpoint says where the chain breaks", (gint64)cp_offset);
        return FALSE;
    }
    from->offset = at;
    from->line = (guint64)json_integer_value(json_object_get(cp, "lines")) + 1;
    from->seq = (guint64)json_integer_value(json_object_get(cp, "at_seq")) + 1;
    from->prev = json_string_value(json_object_get(cp, "at_sha256"));
    return TRUE;
}

/* The live journal.jsonl's size and the time of its first entry (0 when
 * it has none), of a journal of @size bytes. */
static gboolean
av_journal_live_start(const char *state_dir, goffset size, goffset *ret_bytes, gint64 *ret_first, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(json_t) e = NULL;
    AvJournalLine line;
    struct stat st;
    int r;

    *ret_bytes = 0;
    *ret_first = 0;
    if (stat(path, &st) < 0)
        return TRUE;
    *ret_bytes = MIN((goffset)st.st_size, size);
    r = av_journal_reader_open(path, size - *ret_bytes, size, &reader, error);
    if (r > 0)
        r = av_journal_reader_next(reader, &line, error);
    if (r < 0)
        return FALSE;
    if (r > 0 && line.data && (e = json_loadb(line.data, line.len, JSON_REJECT_DUPLICATES, NULL))) {
        const char *t = json_string_value(json_object_get(e, "time"));
        g_autoptr(GDateTime) dt = t ? g_date_time_new_from_iso8601(t, NULL) : NULL;

        if (dt)
            *ret_first = g_date_time_to_unix(dt);
    }
    return TRUE;
}

/* `journal archive`: the entries before the newest checkpoint's at_offset
 * (one is written first when there is none) move to a segment of
 * journal.d; see journal/av-journal-archive.h for the two steps.  Only
 * the cut holds the pool's exclusive lock. */
static int
av_journal_archive(AvCli *cli, gint64 min_size, gint64 min_age_days, gint64 keep_days)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(json_t) cp = NULL;
    g_autoptr(AvJournalArchive) archive = NULL;
    AvJournalArchived done = { 0 };
    AvJournalFrom from = { 0, 1, 1, "" };
    goffset size = 0, live = 0, cut = 0;
    gint64 first = 0;
    gboolean due = TRUE, wrote_checkpoint = FALSE;
    json_t *fields;
    int r;

    for (int round = 0; round < 2; round++) {
        pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
        if (!pool || !av_journal_size(cli->state_dir, &size, &err) ||
            !av_journal_live_start(cli->state_dir, size, &live, &first, &err))
            return av_cli_fail(err);
        g_clear_pointer(&pool, av_pool_free);
        if (round == 0 && (min_size > 0 || min_age_days > 0)) {
            gint64 now = g_get_real_time() / G_USEC_PER_SEC;

            due = (min_size > 0 && live >= min_size) ||
                  (min_age_days > 0 && first > 0 && first <= now - min_age_days * 86400);
        }
        if (!due || live == 0)
            break;
        g_clear_pointer(&cp, json_decref);
        /* The cut: the newest checkpoint at least --keep-days old, so that
         * the windows of accounting --since within them start from a
         * checkpoint in journal.jsonl. */
        if (!av_journal_verify_start(cli->state_dir, size,
                                     keep_days ? g_get_real_time() / G_USEC_PER_SEC - keep_days * 86400 : G_MAXINT64,
                                     &from, &cp, &err))
            return av_cli_fail(err);
        if (cp || round > 0)
            break;
        {
            g_autoptr(json_t) any = NULL;
            AvJournalFrom ignored = { 0, 1, 1, "" };

            if (!av_journal_verify_start(cli->state_dir, size, G_MAXINT64, &ignored, &any, &err))
                return av_cli_fail(err);
            if (any)
                break;
        }
        /* No checkpoint yet (a journal of 0.1.0, a host without the
         * reconcile timer): one now, at the journal's last entry. */
        {
            g_autoptr(json_t) cp_fields = NULL;
            guint64 fresh = 0;

            if (!av_journal_checkpoint_write(cli, 1, &cp_fields, &fresh, &wrote_checkpoint, &err))
                return av_cli_fail(err);
        }
    }
    /* The cut is before the line of the entry the checkpoint covers, which
     * stays in journal.jsonl: readers that start from the checkpoint
     * check that line, and find it there without reading a segment. */
    if (due && cp) {
        g_autofree char *path = g_build_filename(cli->state_dir, AV_JOURNAL_FILE, NULL);
        g_autofree char *line = NULL;
        gsize len = 0;

        if (!av_journal_line_before(path, from.offset, &line, &len, &err))
            return av_cli_fail(err);
        cut = from.offset - (goffset)len - 1;
    }
    r = due && cp ? av_journal_archive_prepare(cli->state_dir, size, cut, &archive, &err) : 0;
    if (r < 0)
        return av_cli_fail(err);
    if (r > 0) {
        pool = av_cli_open_pool(cli, NULL, AV_POOL_WRITE, &err);
        if (!pool || !av_journal_archive_commit(archive, &done, &err))
            return av_cli_fail(err);
        fields = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b}", "segment", done.name,
                           "first_seq", (json_int_t)done.segment.first_seq, "last_seq",
                           (json_int_t)done.segment.last_seq, "first_line", (json_int_t)done.segment.first_line,
                           "last_line", (json_int_t)done.segment.last_line, "offset",
                           (json_int_t)done.segment.offset, "length", (json_int_t)done.segment.length, "sha256",
                           done.sha256, "finished", done.finished_only);
        /* The cut is made: an entry that cannot be written does not undo it. */
        if (!av_pool_journal_append(pool, "journal-archive", fields, &err)) {
            fprintf(stderr, "accelvirt: warning: the journal was archived to '%s', but its journal-archive entry "
                    "was not written: %s\n", done.name, err->message);
            g_clear_error(&err);
        }
        json_decref(fields);
        g_clear_pointer(&pool, av_pool_free);
    }
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "archived", json_boolean(r > 0));
        json_object_set_new(o, "checkpoint_written", json_boolean(wrote_checkpoint));
        if (r > 0) {
            json_object_set_new(o, "segment", json_string(done.name));
            json_object_set_new(o, "first_seq", json_integer((json_int_t)done.segment.first_seq));
            json_object_set_new(o, "last_seq", json_integer((json_int_t)done.segment.last_seq));
            json_object_set_new(o, "bytes", json_integer((json_int_t)done.segment.length));
            json_object_set_new(o, "compressed_bytes", done.finished_only ? json_null()
                                                                          : json_integer((json_int_t)done.compressed));
            json_object_set_new(o, "finished_earlier_archive", json_boolean(done.finished_only));
        }
        av_cli_print_json(o);
    } else if (r > 0 && done.finished_only) {
        printf("Finished an archive that was stopped: entries %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
               " were already in %s/%s/; cut them from journal.jsonl.\n", done.segment.first_seq,
               done.segment.last_seq, cli->state_dir, AV_JOURNAL_SEGMENT_DIR);
    } else if (r > 0) {
        printf("Archived entries %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT " (%" G_GINT64_FORMAT " bytes, %"
               G_GINT64_FORMAT " compressed) to %s/%s/%s, read back and compared; journal.jsonl now starts at "
               "seq %" G_GUINT64_FORMAT ".\n", done.segment.first_seq, done.segment.last_seq,
               (gint64)done.segment.length, (gint64)done.compressed, cli->state_dir, AV_JOURNAL_SEGMENT_DIR,
               done.name, done.segment.last_seq + 1);
    } else if (!due) {
        g_autofree char *age = first > 0 ? g_strdup_printf(", its first entry %" G_GINT64_FORMAT " days old",
                                                           (g_get_real_time() / G_USEC_PER_SEC - first) / 86400)
                                         : g_strdup("");

        printf("Not archived: journal.jsonl holds %" G_GINT64_FORMAT " bytes%s; not yet due.\n", (gint64)live, age);
    } else if (!cp) {
        printf("Nothing to archive: no checkpoint in the journal is %" G_GINT64_FORMAT " days old yet "
               "(--keep-days).\n", keep_days);
    } else {
        printf("Nothing to archive: journal.jsonl starts at the newest checkpoint %" G_GINT64_FORMAT
               " days old (--keep-days).\n", keep_days);
    }
    av_journal_archived_clear(&done);
    return AV_EXIT_OK;
}

int
av_cli_cmd_journal(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    AvVerifyProgress progress = { 0 };
    goffset size = 0;
    g_autofree char *event = NULL;
    gint last = 0;
    gint64 min_entries = -1;
    guint64 entries = 0;
    gboolean since_checkpoint = FALSE;
    guint checkpoints = 0, segments = 0;
    AvJournalFrom from = { 0, 1, 1, "" };
    g_autoptr(json_t) cp = NULL;
    g_autofree char *min_size_text = NULL;
    gint64 min_size = 0, min_age = 0, keep_days = -1;
    const GOptionEntry show_entries[] = {
        { "event", 0, 0, G_OPTION_ARG_STRING, &event, "Only entries of this event (such as scrub-certificate)",
          "EVENT" },
        { "last", 0, 0, G_OPTION_ARG_INT, &last, "Only the last N entries shown", "N" },
        { "since-checkpoint", 0, 0, G_OPTION_ARG_NONE, &since_checkpoint,
          "verify: only what came after the newest checkpoint (the daily check; the whole journal when there is "
          "none)", NULL },
        { "min-entries", 0, 0, G_OPTION_ARG_INT64, &min_entries,
          "checkpoint: write one only when at least N entries came after the previous one (default 1)", "N" },
        { "min-size", 0, 0, G_OPTION_ARG_STRING, &min_size_text,
          "archive: only when journal.jsonl holds at least SIZE bytes (K, M, G: powers of 1024)", "SIZE" },
        { "keep-days", 0, 0, G_OPTION_ARG_INT64, &keep_days,
          "archive: keep in journal.jsonl what came after the newest checkpoint at least DAYS days old "
          "(default 31, so that accounting --since within a month starts from a checkpoint there; 0: the newest)",
          "DAYS" },
        { "min-age", 0, 0, G_OPTION_ARG_INT64, &min_age,
          "archive: only when journal.jsonl's first entry is at least DAYS days old (with --min-size: either)",
          "DAYS" },
        { NULL },
    };

    if (!av_cli_parse(cli, "journal", "verify | show [DEVICE] | checkpoint | archive",
                      "verify: check that the journal's entries follow each other (sequence numbers) and that "
                      "each carries the SHA-256 of the one before (tamper evidence).  show: print the entries "
                      "(of one device: its address or identity), a scrub certificate with its result and "
                      "coverage (how much of the device's memory was cleared).  checkpoint: append a "
                      "\"checkpoint\" entry holding the accounting's state, from which metrics and accounting "
                      "--since read only what came after it.  archive: move the entries before the newest checkpoint into a "
                      "compressed segment of journal.d (read back and compared first); every reader reads across "
                      "the segments, and nothing is ever deleted.",
                      show_entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (since_checkpoint && (argc != 2 || !g_str_equal(argv[1], "verify")))
        return av_cli_usage_error("'--since-checkpoint' is an option of 'journal verify'");
    if (min_entries != -1 && (argc != 2 || !g_str_equal(argv[1], "checkpoint")))
        return av_cli_usage_error("'--min-entries' is an option of 'journal checkpoint'");
    if ((min_size_text || min_age || keep_days != -1) && (argc != 2 || !g_str_equal(argv[1], "archive")))
        return av_cli_usage_error("'--min-size', '--min-age' and '--keep-days' are options of 'journal archive'");
    if (argc >= 2 && g_str_equal(argv[1], "archive")) {
        if (argc > 2)
            return av_cli_usage_error("'journal archive' takes no arguments, got '%s'", argv[2]);
        if (event || last)
            return av_cli_usage_error("'--event' and '--last' are options of 'journal show'");
        if (min_size_text) {
            char *end = NULL;
            guint64 v;
            guint shift = 0;

            v = g_ascii_strtoull(min_size_text, &end, 10);
            if (end && (*end == 'K' || *end == 'M' || *end == 'G'))
                shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30, end++;
            if (!g_ascii_isdigit(min_size_text[0]) || !end || *end || v == 0 || v > ((guint64)G_MAXINT64 >> shift))
                return av_cli_usage_error("'--min-size' needs a size above 0 such as 512M, got '%s'",
                                          min_size_text);
            min_size = (gint64)(v << shift);
        }
        if (min_age < 0 || min_age > 100000)
            return av_cli_usage_error("'--min-age' needs a number of days from 1, got %" G_GINT64_FORMAT, min_age);
        if (keep_days == -1)
            keep_days = 31;
        if (keep_days < 0 || keep_days > 100000)
            return av_cli_usage_error("'--keep-days' needs a number of days from 0, got %" G_GINT64_FORMAT,
                                      keep_days);
        return av_journal_archive(cli, min_size, min_age, keep_days);
    }
    if (argc >= 2 && g_str_equal(argv[1], "checkpoint")) {
        if (argc > 2)
            return av_cli_usage_error("'journal checkpoint' takes no arguments, got '%s'", argv[2]);
        if (event || last)
            return av_cli_usage_error("'--event' and '--last' are options of 'journal show'");
        if (min_entries == -1)
            min_entries = 1;
        if (min_entries < 1)
            return av_cli_usage_error("'--min-entries' needs a number of entries above 0, got %" G_GINT64_FORMAT,
                                      min_entries);
        return av_journal_checkpoint(cli, min_entries);
    }
    if (argc >= 2 && g_str_equal(argv[1], "show")) {
        if (argc > 3)
            return av_cli_usage_error("'journal show' takes at most one DEVICE, got '%s'", argv[3]);
        if (last < 0)
            return av_cli_usage_error("'--last' needs a number of entries above 0, got %d", last);
        return av_journal_show(cli, argc > 2 ? argv[2] : NULL, event, last);
    }
    if (argc != 2 || !g_str_equal(argv[1], "verify"))
        return av_cli_usage_error("'journal' needs 'verify', 'show [DEVICE]', 'checkpoint' or 'archive'");
    if (event || last)
        return av_cli_usage_error("'--event' and '--last' are options of 'journal show'");
    /* The journal's size under the shared lock, when no writer is half-way
     * through a line; then the lock is let go and that much is verified
     * without it, so that a long verify never keeps a domain's start
     * waiting: what is before that size never changes, lines are only
     * appended after it. */
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_journal_size(cli->state_dir, &size, &err))
        return av_cli_fail(err);
    g_clear_pointer(&pool, av_pool_free);
    if (since_checkpoint && !av_journal_verify_start(cli->state_dir, size, G_MAXINT64, &from, &cp, &err))
        return av_cli_fail(err);
    progress.tty = isatty(STDERR_FILENO);
    if (!av_journal_verify_from(cli->state_dir, &from, size, progress.tty ? av_journal_verify_progress : NULL,
                                &progress, &entries, &err)) {
        av_journal_verify_progress_end(&progress);
        return av_cli_fail(err);
    }
    av_journal_verify_progress_end(&progress);
    /* A whole verify also checks the checkpoints' contents: one in the
     * chain but wrong would be taken by metrics and accounting. */
    if (!since_checkpoint) {
        g_autofree char *path = g_build_filename(cli->state_dir, AV_JOURNAL_FILE, NULL);
        g_autofree char *problem = NULL;

        if (!av_accounting_check_checkpoints(path, size, &checkpoints, &problem, &err))
            return av_cli_fail(err);
        if (problem) {
            g_set_error(&err, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' has an intact chain, but %s: "
                        "metrics and accounting --since would give other numbers than a whole read; set "
                        "ACCELVIRT_IGNORE_CHECKPOINTS=1 for them and find out who wrote it", path, problem);
            return av_cli_fail(err);
        }
    }
    /* The archived segments read (an archive's, see journal archive). */
    if (!since_checkpoint && !av_journal_archived_segments(cli->state_dir, &segments, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "valid", json_true());
        json_object_set_new(o, "entries", json_integer((json_int_t)entries));
        json_object_set_new(o, "segments", since_checkpoint ? json_null() : json_integer(segments));
        json_object_set_new(o, "from_seq", json_integer((json_int_t)from.seq));
        json_object_set_new(o, "from_line", json_integer((json_int_t)from.line));
        json_object_set_new(o, "checkpoints_checked", since_checkpoint ? json_null() : json_integer(checkpoints));
        av_cli_print_json(o);
    } else if (from.seq > 1) {
        printf("%s/journal.jsonl: %" G_GUINT64_FORMAT " entries from seq %" G_GUINT64_FORMAT " (line %"
               G_GUINT64_FORMAT ", after the checkpoint at seq %" G_GINT64_FORMAT "), chain intact from there; "
               "the entries before were not read.\n", cli->state_dir, entries, from.seq, from.line,
               (gint64)json_integer_value(json_object_get(cp, "at_seq")));
    } else {
        g_autofree char *held = checkpoints ? g_strdup_printf("; %u checkpoint%s hold%s what the entries before %s "
                                                              "add up to", checkpoints, checkpoints == 1 ? "" : "s",
                                                              checkpoints == 1 ? "s" : "",
                                                              checkpoints == 1 ? "it" : "them")
                                            : g_strdup("");

        g_autofree char *archived = segments ? g_strdup_printf(" (%u archived segment%s of journal.d, then "
                                                               "journal.jsonl)", segments, segments == 1 ? "" : "s")
                                             : g_strdup("");

        printf("%s/journal.jsonl: %" G_GUINT64_FORMAT " entries%s, chain intact%s%s.\n", cli->state_dir, entries,
               archived, since_checkpoint ? " (no checkpoint yet: read from its start)" : "", held);
    }
    return AV_EXIT_OK;
}
