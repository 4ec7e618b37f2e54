/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal, append-only JSON lines chained by SHA-256.
 *
 * Each line is one compact JSON object:
 *   {"seq": N, "time": "2026-11-22T01:02:03Z", "prev": "<hex>", "event": ...}
 * "seq" counts the entries from 1; "prev" is the SHA-256 of the previous
 * line's bytes (without its newline), "" on the first line.  Torn lines are
 * handled as av-journal.h describes: terminated and acknowledged by a
 * "torn-line" entry, never deleted. */
#include "config.h"

#include "journal/av-journal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"

/* See av-journal.h. */
void
av_journal_init(AvJournal *journal, const char *state_dir)
{
    journal->path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    journal->ready = FALSE;
    journal->seq = 0;
    journal->prev = g_strdup("");
    journal->defer_sync = FALSE;
    journal->unsynced = FALSE;
}

/* See av-journal.h. */
void
av_journal_clear(AvJournal *journal)
{
    g_clear_pointer(&journal->path, g_free);
    g_clear_pointer(&journal->prev, g_free);
}

/* See av-journal.h.  Caller frees. */
char *
av_journal_hash(const char *data, gsize len)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);

    g_checksum_update(sum, (const guchar *)data, (gssize)len);
    return g_strdup(g_checksum_get_string(sum));
}

static gboolean
av_journal_write_entry(AvJournal *journal, json_t *entry, GError **error)
{
    g_autofree char *line = av_json_dump_compact(entry);

    if (!line) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot serialise a journal entry for '%s'",
                    journal->path);
        return FALSE;
    }
    /* Never a line that readers refuse and that would stop every writer
     * after it (av_journal_prepare() refuses such a tail): a checkpoint
     * holding the groups of years of owners could grow that long. */
    if (strlen(line) > AV_JOURNAL_MAX_LINE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "a '%s' entry of %" G_GSIZE_FORMAT " bytes is longer than a "
                    "line of the journal '%s' may be (%d bytes); nothing was written",
                    json_string_value(json_object_get(entry, "event")), strlen(line), journal->path,
                    AV_JOURNAL_MAX_LINE);
        return FALSE;
    }
    /* An fsync covers every byte written to the file before it: the lines
     * of the deferred appends too (one file: nothing renames it while the
     * caller holds the lock). */
    if (!av_file_append_line_full(journal->path, line, 0600, !journal->defer_sync, error))
        return FALSE;
    journal->unsynced = journal->defer_sync;
    journal->seq = (guint64)json_integer_value(json_object_get(entry, "seq"));
    g_free(journal->prev);
    journal->prev = av_journal_hash(line, strlen(line));
    return TRUE;
}

static json_t *
av_journal_entry_new(AvJournal *journal, const char *event)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *time = g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
    json_t *entry = json_object();

    json_object_set_new(entry, "seq", json_integer((json_int_t)(journal->seq + 1)));
    json_object_set_new(entry, "time", json_string(time));
    json_object_set_new(entry, "prev", json_string(journal->prev));
    json_object_set_new(entry, "event", json_string(event));
    return entry;
}

/* The journal is read backwards in chunks of this size. */
#define AV_JOURNAL_CHUNK 65536

/* See av-journal.h.  The line's start is found first (memrchr over chunks
 * read backwards, nothing kept), then the line is read in one pread: the
 * work is linear in its length, however long. */
int
av_journal_read_line_ending(int fd, goffset end, goffset *ret_start, char **ret_line, gsize *ret_len)
{
    g_autofree char *line = NULL;
    goffset pos = end;
    gsize len;
    int r;

    while (pos > 0) {
        guint8 buf[AV_JOURNAL_CHUNK];
        gsize want = (gsize)MIN((goffset)sizeof(buf), pos);
        const guint8 *nl;

        r = av_file_pread_all(fd, buf, want, pos - (goffset)want);
        if (r < 0)
            return r;
        nl = memrchr(buf, '\n', want);
        if (nl) {
            pos -= (goffset)(want - (gsize)(nl + 1 - buf));
            break;
        }
        pos -= (goffset)want;
        if (end - pos > AV_JOURNAL_MAX_LINE)
            return -EFBIG;
    }
    len = (gsize)(end - pos);
    if (len > AV_JOURNAL_MAX_LINE)
        return -EFBIG;
    line = g_malloc(len + 1);
    r = av_file_pread_all(fd, line, len, pos);
    if (r < 0)
        return r;
    line[len] = '\0';
    *ret_start = pos;
    *ret_len = len;
    *ret_line = g_steal_pointer(&line);
    return 0;
}

/* The number of the line starting at byte @start of the live file open as
 * @fd, whose first line is line @first: @first + the newlines before it.
 * Reads everything before @start (in chunks), so only used for a torn
 * line, which needs its number.  Returns 0 or -errno. */
static int
av_journal_line_number(int fd, goffset start, guint64 first, guint64 *ret_lineno)
{
    guint64 lineno = first;
    goffset pos = 0;

    while (pos < start) {
        guint8 buf[65536];
        gsize want = (gsize)MIN((goffset)sizeof(buf), start - pos);
        const guint8 *p = buf, *stop = buf + want;
        int r;

        r = av_file_pread_all(fd, buf, want, pos);
        if (r < 0)
            return r;
        while ((p = memchr(p, '\n', (gsize)(stop - p)))) {
            lineno++;
            p++;
        }
        pos += (goffset)want;
    }
    *ret_lineno = lineno;
    return 0;
}

static gboolean
av_journal_tail_fail(AvJournal *journal, int r, GError **error)
{
    if (r == -EFBIG) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' ends in a line longer than %d bytes; move it away or repair it",
                    journal->path, AV_JOURNAL_MAX_LINE);
        return FALSE;
    }
    return av_error_errno(error, r, "cannot read the journal '%s'", journal->path);
}

static gboolean
av_journal_nul_fail(AvJournal *journal, GError **error)
{
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                "the journal '%s' holds NUL bytes; move it away or repair it", journal->path);
    return FALSE;
}

/* A journal without entries starts from seq 1, unless journal.d holds
 * archived segments: then journal.jsonl was emptied or removed, and an
 * entry from seq 1 would hide the history they hold from every reader. */
static gboolean
av_journal_start_fresh(AvJournal *journal, GError **error)
{
    g_autofree char *state_dir = g_path_get_dirname(journal->path);

    if (av_journal_has_segments(state_dir)) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' is missing or empty, but '%s/%s' holds its archived segments: put back the "
                    "journal.jsonl that goes with them (nothing is recorded until then)", journal->path, state_dir,
                    AV_JOURNAL_SEGMENT_DIR);
        return FALSE;
    }
    journal->ready = TRUE;
    return TRUE;
}

/* Reads the tail of the journal once per AvJournal: the last seq and the hash of
 * the last line.  Only the last line is read (backwards from the end, in
 * bounded chunks), however long the journal.  A last line without a newline
 * is ended with one; a last line that is not a whole entry is acknowledged
 * with a "torn-line" entry, whose seq continues the last whole entry before
 * it (the lines before it are read back until one is) and whose line number
 * is found by counting the newlines before it (the only case that reads the
 * whole file, once).  See av-journal.h. */
gboolean
av_journal_prepare(AvJournal *journal, GError **error)
{
    g_autofree char *last = NULL;
    struct stat st;
    goffset start = 0;
    gsize last_len = 0;
    guint64 seq = 0, torn_line = 0;
    g_autoptr(GPtrArray) hashes = NULL;
    goffset run_start;
    gboolean ended;
    guint8 c = 0;
    int fd, r;

    if (journal->ready)
        return TRUE;
    /* O_NONBLOCK: a FIFO in its place must not hang the hook (it is
     * refused below, as anything but a regular file). */
    fd = open(journal->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno != ENOENT)
            return av_error_errno(error, -errno, "cannot read the journal '%s'", journal->path);
        return av_journal_start_fresh(journal, error);
    }
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return av_error_errno(error, r, "cannot read the journal '%s'", journal->path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' is not a regular file; move it away", journal->path);
        return FALSE;
    }
    if (st.st_size == 0) {
        close(fd);
        return av_journal_start_fresh(journal, error);
    }
    r = av_file_pread_all(fd, &c, 1, st.st_size - 1);
    ended = c == '\n';
    if (r == 0)
        r = av_journal_read_line_ending(fd, ended ? st.st_size - 1 : st.st_size, &start, &last, &last_len);
    if (r < 0) {
        close(fd);
        return av_journal_tail_fail(journal, r, error);
    }
    if (memchr(last, '\0', last_len)) {
        close(fd);
        return av_journal_nul_fail(journal, error);
    }
    if (!ended) {
        /* A writer was killed mid-append: end its line, keep its bytes. */
        if (!av_file_append_line(journal->path, "", 0600, error)) {
            close(fd);
            g_prefix_error(error, "cannot end the torn last line of the journal: ");
            return FALSE;
        }
        g_info("the journal '%s' ended in a line without a newline (a writer was killed "
                  "mid-append); ended it", journal->path);
    }

    g_free(journal->prev);
    journal->prev = av_journal_hash(last, last_len);
    if (av_journal_entry_parse(last, last_len, NULL, &seq)) {
        close(fd);
        journal->seq = seq;
        journal->ready = TRUE;
        return TRUE;
    }

    /* The last line is torn, and maybe the lines before it (a writer killed
     * while it acknowledged a torn line): the run of them is acknowledged
     * by one entry, whose seq continues the last whole entry. */
    hashes = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(hashes, g_strdup(journal->prev));
    run_start = start;
    for (goffset pos = start; r == 0 && pos > 0;) {
        g_autofree char *line = NULL;
        gsize len = 0;
        goffset line_start = 0;

        r = av_journal_read_line_ending(fd, pos - 1, &line_start, &line, &len);
        pos = line_start;
        if (r == 0 && av_journal_entry_parse(line, len, NULL, &seq))
            break;
        seq = 0;
        if (r == 0) {
            g_ptr_array_insert(hashes, 0, av_journal_hash(line, len));
            run_start = line_start;
        }
    }
    if (r == 0) {
        /* Numbered as the journal's line, after the archived ones. */
        g_autofree char *state_dir = g_path_get_dirname(journal->path);
        guint64 first = 1;

        if (!av_journal_live_first_line(state_dir, fd, &first))
            g_warning("the journal's segments in '%s' do not say where '%s' starts (one was moved away?): "
                      "its torn line is numbered from its own start", state_dir, journal->path);
        r = av_journal_line_number(fd, run_start, first, &torn_line);
    }
    close(fd);
    if (r < 0)
        return av_journal_tail_fail(journal, r, error);
    journal->seq = seq;
    journal->ready = TRUE;
    {
        g_autoptr(json_t) entry = av_journal_entry_new(journal, "torn-line");

        json_object_set_new(entry, "line", json_integer((json_int_t)torn_line));
        json_object_set_new(entry, "length", json_integer((json_int_t)last_len));
        json_object_set_new(entry, "sha256", json_string(journal->prev));
        if (hashes->len > 1) {
            json_t *all = json_array();

            for (guint i = 0; i < hashes->len; i++)
                json_array_append_new(all, json_string(g_ptr_array_index(hashes, i)));
            json_object_set_new(entry, "lines", json_integer((json_int_t)hashes->len));
            json_object_set_new(entry, "sha256s", all);
        }
        if (!av_journal_write_entry(journal, entry, error)) {
            journal->ready = FALSE;
            return FALSE;
        }
    }
    g_info("the journal '%s' line %" G_GUINT64_FORMAT " is not a whole entry; recorded it with a "
           "torn-line entry", journal->path, torn_line);
    return TRUE;
}

/* See av-journal.h. */
gboolean
av_journal_sync(AvJournal *journal, GError **error)
{
    int r;

    if (!journal->unsynced)
        return TRUE;
    r = av_file_fsync_path(journal->path);
    if (r < 0)
        return av_error_errno(error, r, "cannot sync the journal '%s'", journal->path);
    journal->unsynced = FALSE;
    return TRUE;
}

/* See av-journal.h.  The line is fsynced before this returns unless
 * @journal->defer_sync. */
gboolean
av_journal_append(AvJournal *journal, const char *event, json_t *fields, GError **error)
{
    g_autoptr(json_t) entry = NULL;
    const char *key;
    json_t *value;

    if (fields && !json_is_object(fields)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "journal fields must be a JSON object");
        return FALSE;
    }
    if (!av_journal_prepare(journal, error))
        return FALSE;
    entry = av_journal_entry_new(journal, event);
    if (fields) {
        json_object_foreach(fields, key, value) {
            if (json_object_get(entry, key)) {
                g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                            "the journal field '%s' is reserved", key);
                return FALSE;
            }
            json_object_set(entry, key, value);
        }
    }
    return av_journal_write_entry(journal, entry, error);
}
