/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the newest checkpoint of the journal, read backwards (see
 * av-journal-checkpoint.h). */
#include "config.h"

#include "journal/av-journal-checkpoint.h"
#include "journal/av-journal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"

/* Blocks read backwards; a line longer than AV_JOURNAL_CKPT_MAX_LINE (as
 * av-journal.c refuses to write) is passed over whole. */
#define AV_JOURNAL_CKPT_BLOCK (64 * 1024)
#define AV_JOURNAL_CKPT_MAX_LINE (16 * 1024 * 1024)

/* See av-journal-checkpoint.h. */
gboolean
av_journal_checkpoint_time(json_t *entry, gint64 *ret_time)
{
    const char *text = json_string_value(json_object_get(entry, "at_time"));
    g_autoptr(GDateTime) dt = text ? g_date_time_new_from_iso8601(text, NULL) : NULL;

    if (!dt)
        return FALSE;
    *ret_time = g_date_time_to_unix(dt);
    return TRUE;
}

static gboolean
av_journal_is_hex64(const char *s)
{
    if (!s || strlen(s) != 64)
        return FALSE;
    for (; *s; s++)
        if (!g_ascii_isxdigit(*s) || g_ascii_isupper(*s))
            return FALSE;
    return TRUE;
}

/* The checkpoint of the line @line (@len bytes) starting at @start, or
 * NULL when it is none or not at or before @max_time.  The substring test
 * is only a filter: what counts is the top-level "event" of the parsed
 * entry (a tenant's name may hold "checkpoint" in a nested object). */
static json_t *
av_journal_checkpoint_parse(const char *line, gsize len, goffset start, gint64 max_time)
{
    static const char needle[] = "\"" AV_JOURNAL_CHECKPOINT_EVENT "\"";
    g_autoptr(json_t) e = NULL;
    json_t *seq, *at_seq, *at_offset;
    gint64 t;

    if (len < sizeof(needle) || !memmem(line, len, needle, sizeof(needle) - 1) || memchr(line, '\0', len))
        return NULL;
    e = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(e) ||
        g_strcmp0(json_string_value(json_object_get(e, "event")), AV_JOURNAL_CHECKPOINT_EVENT) != 0)
        return NULL;
    seq = json_object_get(e, "seq");
    at_seq = json_object_get(e, "at_seq");
    at_offset = json_object_get(e, "at_offset");
    if (!json_is_integer(seq) || !json_is_string(json_object_get(e, "prev")) ||
        !json_is_string(json_object_get(e, "time")) || !json_is_integer(at_seq) ||
        json_integer_value(at_seq) < 1 || json_integer_value(at_seq) >= json_integer_value(seq) ||
        !av_journal_is_hex64(json_string_value(json_object_get(e, "at_sha256"))) ||
        !json_is_integer(at_offset) || json_integer_value(at_offset) < 1 ||
        json_integer_value(at_offset) > start || !av_journal_checkpoint_time(e, &t) || t > max_time)
        return NULL;
    return g_steal_pointer(&e);
}

/* The newest checkpoint at or before @max_time in the archived segments of
 * @layout, up to byte @limit (when not negative): read forward once, in
 * one reader (whole lines with the event's name are parsed, others only
 * searched).  Work: the segments' bytes, once. */
static gboolean
av_journal_find_archived_checkpoint(const char *path, const AvJournalLayout *layout, goffset limit,
                                    gint64 max_time, json_t **ret_entry, goffset *ret_offset, GError **error)
{
    static const char needle[] = "\"" AV_JOURNAL_CHECKPOINT_EVENT "\"";
    g_autoptr(AvJournalReader) reader = NULL;
    goffset end = layout->live_offset;
    AvJournalLine line;
    int r;

    if (limit >= 0)
        end = MIN(end, limit);
    r = av_journal_reader_open(path, 0, end, &reader, error);
    while (r > 0 && (r = av_journal_reader_next(reader, &line, error)) > 0) {
        json_t *e;

        if (!line.data || !line.ended || !memmem(line.data, line.len, needle, sizeof(needle) - 1))
            continue;
        e = av_journal_checkpoint_parse(line.data, line.len, line.offset, max_time);
        if (e) {
            if (*ret_entry)
                json_decref(*ret_entry);
            *ret_entry = e;
            *ret_offset = line.offset;
        }
    }
    if (r < 0) {
        g_clear_pointer(ret_entry, json_decref);
        *ret_offset = 0;
        return FALSE;
    }
    return TRUE;
}

/* The live file's line [@start, @end) (@end its newline): a checkpoint
 * whose time is at most @max_time goes to *ret_entry, at the journal's
 * offset @base + @start.  @block holds the live file's bytes
 * [@block_start, @block_end): a line within it is parsed there, another
 * read whole; a line longer than AV_JOURNAL_CKPT_MAX_LINE is none.  A
 * negative errno when the read fails. */
static int
av_journal_checkpoint_line(int fd, const guint8 *block, goffset block_start, goffset block_end, goffset start,
                           goffset end, goffset base, gint64 max_time, json_t **ret_entry, goffset *ret_offset)
{
    g_autofree guint8 *whole = NULL;
    const guint8 *data;
    gsize len = (gsize)(end - start);
    int r;

    if (end - start > AV_JOURNAL_CKPT_MAX_LINE)
        return 0;
    if (start >= block_start && end <= block_end) {
        data = block + (start - block_start);
    } else {
        whole = g_malloc(MAX(len, 1));
        r = av_file_pread_all(fd, whole, len, start);
        if (r < 0)
            return r;
        data = whole;
    }
    *ret_entry = av_journal_checkpoint_parse((const char *)data, len, base + start, max_time);
    if (*ret_entry)
        *ret_offset = base + start;
    return 0;
}

/* See av-journal-checkpoint.h.  The tail after the last newline is no
 * whole line yet (a writer mid-append, or torn) and is passed over. */
gboolean
av_journal_find_checkpoint(const char *path, goffset limit, gint64 max_time, json_t **ret_entry,
                           goffset *ret_offset, GError **error)
{
    g_autofree guint8 *block = g_malloc(AV_JOURNAL_CKPT_BLOCK);
    g_autofree char *state_dir = g_path_get_dirname(path);
    gboolean have_end = FALSE;
    goffset line_end = 0, block_end = 0;
    AvJournalLayout layout;
    goffset base;
    struct stat st;
    goffset pos;
    int fd, r = 0;

    *ret_entry = NULL;
    *ret_offset = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return TRUE;
        return av_error_errno(error, -errno, "cannot read the journal '%s'", path);
    }
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return av_error_errno(error, r, "cannot read the journal '%s'", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' is not a regular file; move it away",
                    path);
        return FALSE;
    }
    /* The live file backwards, then, when it holds none that serves, the
     * archived segments (av_journal_find_archived_checkpoint()); offsets
     * are the journal's (av-journal.h). */
    if (av_journal_layout_load(state_dir, fd, &layout, error) < 0) {
        close(fd);
        return FALSE;
    }
    base = layout.live_offset;
    if (limit >= 0)
        limit = MAX(limit - base, 0);
    /* Backwards, a block at a time.  line_end: where the line after the
     * newline being looked for ends (its own newline), once one is seen (a
     * tail without one is a torn line, passed over).  A line within the
     * block is parsed there; one that spans blocks is read again whole,
     * once, when its start is found (so a long line costs its length, not
     * its length times its blocks). */
    for (pos = limit >= 0 ? MIN(limit, (goffset)st.st_size) : (goffset)st.st_size; pos > 0 && !*ret_entry && r >= 0;) {
        gsize want = (gsize)MIN((goffset)AV_JOURNAL_CKPT_BLOCK, pos);

        r = av_file_pread_all(fd, block, want, pos - (goffset)want);
        if (r < 0)
            break;
        block_end = pos;
        pos -= (goffset)want;
        for (gsize i = want; i-- > 0 && !*ret_entry && r >= 0;) {
            goffset nl = pos + (goffset)i;

            if (block[i] != '\n')
                continue;
            if (have_end)
                r = av_journal_checkpoint_line(fd, block, pos, block_end, nl + 1, line_end, base, max_time,
                                               ret_entry, ret_offset);
            have_end = TRUE;
            line_end = nl;
        }
    }
    /* The live file's first line: a checkpoint there follows the entry
     * it covers in a segment (at the journal's start there is none). */
    if (r >= 0 && pos == 0 && !*ret_entry && have_end && base > 0)
        r = av_journal_checkpoint_line(fd, block, 0, block_end, 0, line_end, base, max_time, ret_entry, ret_offset);
    close(fd);
    if (r < 0) {
        av_journal_layout_clear(&layout);
        return av_error_errno(error, r, "cannot read the journal '%s'", path);
    }
    if (!*ret_entry && base > 0 &&
        !av_journal_find_archived_checkpoint(path, &layout, limit < 0 ? -1 : limit + base, max_time, ret_entry,
                                             ret_offset, error)) {
        av_journal_layout_clear(&layout);
        return FALSE;
    }
    av_journal_layout_clear(&layout);
    return TRUE;
}

/* The line ending at byte @offset - 1 of the journal, in the archived
 * segment that holds it: read forward from the segment's start. */
static gboolean
av_journal_line_before_archived(const char *path, const AvJournalLayout *layout, goffset offset, char **ret_line,
                                gsize *ret_len, GError **error)
{
    g_autoptr(AvJournalReader) reader = NULL;
    const AvJournalSegment *seg = NULL;
    AvJournalLine line = { 0 };
    gboolean have = FALSE;
    int r;

    for (guint i = 0; i < layout->segments->len && !seg; i++) {
        const AvJournalSegment *s = &g_array_index(layout->segments, AvJournalSegment, i);

        if (offset > s->offset && offset <= s->offset + s->length)
            seg = s;
    }
    if (!seg) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "no whole line of the journal '%s' ends at byte %" G_GINT64_FORMAT, path, (gint64)offset);
        return FALSE;
    }
    r = av_journal_reader_open(path, seg->offset, offset, &reader, error);
    while (r > 0 && (r = av_journal_reader_next(reader, &line, error)) > 0)
        have = TRUE;
    if (r < 0)
        return FALSE;
    if (!have || !line.ended || !line.data || line.offset + (goffset)line.len + 1 != offset) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "no whole line of the journal '%s' ends at byte %" G_GINT64_FORMAT, path, (gint64)offset);
        return FALSE;
    }
    *ret_line = g_strndup(line.data, line.len);
    *ret_len = line.len;
    return TRUE;
}

/* See av-journal-checkpoint.h. */
gboolean
av_journal_line_before(const char *path, goffset offset, char **ret_line, gsize *ret_len, GError **error)
{
    g_autofree char *state_dir = g_path_get_dirname(path);
    AvJournalLayout layout;
    goffset start = 0, local;
    guint8 c = 0;
    int fd, r;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return av_error_errno(error, -errno, "cannot read the journal '%s'", path);
    if (av_journal_layout_load(state_dir, fd, &layout, error) < 0) {
        close(fd);
        return FALSE;
    }
    if (offset <= layout.live_offset) {
        gboolean ok = av_journal_line_before_archived(path, &layout, offset, ret_line, ret_len, error);

        close(fd);
        av_journal_layout_clear(&layout);
        return ok;
    }
    local = offset - layout.live_offset;
    av_journal_layout_clear(&layout);
    r = av_file_pread_all(fd, &c, 1, local - 1);
    if (r == 0 && c != '\n')
        r = -EINVAL;
    if (r == 0)
        r = av_journal_read_line_ending(fd, local - 1, &start, ret_line, ret_len);
    close(fd);
    if (r == -EINVAL || r == -EFBIG) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "no whole line of the journal '%s' ends at byte %" G_GINT64_FORMAT, path, (gint64)offset);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot read the journal '%s'", path);
    return TRUE;
}
