/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal read whole: its entries handed on in order, and
 * its hash chain verified (see av-journal.h).  Apart from the writer
 * (av-journal.c), so that the hook, which only appends, links nothing of
 * the readers (nor GIO, which reads the archived segments). */
#include "config.h"

#include "journal/av-journal.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"

static gboolean G_GNUC_PRINTF(4, 5)
av_journal_bad(GError **error, const char *path, guint64 line, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' is broken at line %" G_GUINT64_FORMAT ": %s",
                path, line, msg);
    return FALSE;
}

/* See av-journal.h. */
gboolean
av_journal_foreach(const char *state_dir, goffset limit, AvJournalEach each, gpointer data, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    g_autoptr(AvJournalReader) reader = NULL;
    AvJournalLine line;
    int r;

    r = av_journal_reader_open(path, 0, limit, &reader, error);
    if (r < 0)
        return FALSE;
    while (r > 0 && (r = av_journal_reader_next(reader, &line, error)) > 0) {
        g_autoptr(json_t) entry = NULL;
        guint64 seq;

        if (line.nul) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal '%s' holds a NUL byte at line %" G_GUINT64_FORMAT "; 'accelvirt journal "
                        "verify' says more", path, line.number);
            return FALSE;
        }
        if (line.data && line.ended && av_journal_entry_parse(line.data, line.len, &entry, &seq) &&
            !each(entry, data))
            break;
    }
    return r >= 0;
}

static gboolean
av_journal_collect(json_t *entry, gpointer data)
{
    g_ptr_array_add(data, json_incref(entry));
    return TRUE;
}

/* See av-journal.h. */
gboolean
av_journal_read(const char *state_dir, GPtrArray **ret_entries, GError **error)
{
    g_autoptr(GPtrArray) entries = g_ptr_array_new_with_free_func((GDestroyNotify)json_decref);

    if (!av_journal_foreach(state_dir, -1, av_journal_collect, entries, error))
        return FALSE;
    *ret_entries = g_steal_pointer(&entries);
    return TRUE;
}

/* How often a verify tells its progress. */
#define AV_JOURNAL_PROGRESS_BYTES (8 * 1024 * 1024)

/* See av-journal.h. */
gboolean
av_journal_verify(const char *state_dir, guint64 *ret_entries, GError **error)
{
    return av_journal_verify_part(state_dir, -1, NULL, NULL, ret_entries, error);
}

/* See av-journal.h.  A missing journal has 0 entries.  *ret_entries (may be
 * NULL) gets the number of whole entries ("torn-line" ones included).
 * Errors are AV_ERROR_CORRUPT_STATE naming the line, or AV_ERROR_IO.  The
 * lines are checked in order, and the first bad one is named. */
gboolean
av_journal_verify_part(const char *state_dir, goffset limit, AvJournalProgress progress, gpointer data,
                       guint64 *ret_entries, GError **error)
{
    static const AvJournalFrom start = { 0, 1, 1, "" };

    return av_journal_verify_from(state_dir, &start, limit, progress, data, ret_entries, error);
}

/* See av-journal.h. */
gboolean
av_journal_verify_from(const char *state_dir, const AvJournalFrom *from, goffset limit, AvJournalProgress progress,
                       gpointer data, guint64 *ret_entries, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(GPtrArray) torn_hashes = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    char prev[65] = "";
    guint64 expected = from->seq, entries = 0, torn = 0;
    goffset told = 0;
    AvJournalLine line;
    int r;

    g_strlcpy(prev, from->prev, sizeof(prev));
    r = av_journal_reader_open(path, from->offset, limit, &reader, error);
    if (r < 0)
        return FALSE;
    while (r > 0 && (r = av_journal_reader_next(reader, &line, error)) > 0) {
        g_autoptr(json_t) entry = NULL;
        guint64 lineno = line.number + from->line - 1;
        guint64 seq = 0;
        const char *event, *want;

        if (progress && av_journal_reader_offset(reader) - told >= AV_JOURNAL_PROGRESS_BYTES) {
            told = av_journal_reader_offset(reader);
            progress(told, av_journal_reader_end(reader), entries, data);
        }
        if (line.nul)
            return av_journal_bad(error, path, lineno, "the line holds a NUL byte");
        if (!line.ended) {
            /* Torn lines before it are a run the next writer acknowledges
             * with it (a writer killed while it acknowledged them). */
            if (torn)
                return av_journal_bad(error, path, torn, "not a journal entry, nor are the lines after "
                                      "it, the last one without a newline (writers killed mid-append); the "
                                      "next writer ends it and acknowledges them");
            return av_journal_bad(error, path, lineno, "the last line is torn (no newline at its end: "
                                  "a writer was killed mid-append); the next writer will end it");
        }
        if (!line.data)
            return av_journal_bad(error, path, lineno, "the line is longer than %d bytes; no accelvirt "
                                  "writes such a line", AV_JOURNAL_MAX_LINE);
        g_checksum_reset(sum);
        g_checksum_update(sum, (const guchar *)line.data, (gssize)line.len);
        if (!av_journal_entry_parse(line.data, line.len, &entry, &seq)) {
            /* A run of torn lines (a writer killed while it acknowledged
             * one): the entry after the run acknowledges them all. */
            if (!torn)
                torn = lineno;
            g_strlcpy(prev, g_checksum_get_string(sum), sizeof(prev));
            g_ptr_array_add(torn_hashes, g_strdup(prev));
            continue;
        }
        event = json_string_value(json_object_get(entry, "event"));
        if (torn) {
            json_t *at = json_object_get(entry, "line");
            json_t *count = json_object_get(entry, "lines");
            json_t *all = json_object_get(entry, "sha256s");
            gboolean ok = strcmp(event, "torn-line") == 0 && json_is_integer(at) &&
                          (guint64)json_integer_value(at) == torn;

            if (ok && torn_hashes->len > 1) {
                ok = json_is_integer(count) && json_integer_value(count) == (json_int_t)torn_hashes->len &&
                     json_is_array(all) && json_array_size(all) == torn_hashes->len;
                for (guint k = 0; ok && k < torn_hashes->len; k++)
                    ok = g_strcmp0(json_string_value(json_array_get(all, k)), g_ptr_array_index(torn_hashes, k)) == 0;
            } else if (ok) {
                ok = !count || (json_is_integer(count) && json_integer_value(count) == 1);
            }
            if (!ok)
                return av_journal_bad(error, path, torn, "not a journal entry, and no torn-line entry "
                                      "acknowledging %s follows", torn_hashes->len > 1 ? "this run of torn lines"
                                                                                      : "it");
            torn = 0;
            g_ptr_array_set_size(torn_hashes, 0);
        }
        if (seq != expected)
            return av_journal_bad(error, path, lineno, "seq is %" G_GUINT64_FORMAT ", expected %"
                                  G_GUINT64_FORMAT, seq, expected);
        want = json_string_value(json_object_get(entry, "prev"));
        if (strcmp(want, prev) != 0)
            return av_journal_bad(error, path, lineno, "prev is '%s' but the previous line hashes to '%s' "
                                  "(a line was changed, removed or inserted)", want, prev);
        g_strlcpy(prev, g_checksum_get_string(sum), sizeof(prev));
        expected++;
        entries++;
    }
    if (r < 0)
        return FALSE;
    if (torn)
        return av_journal_bad(error, path, torn, "not a journal entry (a torn line that no writer has "
                              "recorded yet)");
    if (progress && reader)
        progress(av_journal_reader_end(reader), av_journal_reader_end(reader), entries, data);
    if (ret_entries)
        *ret_entries = entries;
    return TRUE;
}
