/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal's archived segments and where the live file
 * starts (see av-journal.h, "the journal's layout").
 *
 * The name of a segment says what it holds, so that the layout is known
 * without reading one: the seqs of its first and last entries, its first
 * and last line numbers and the offset and length of its bytes in the
 * journal as if it had never been cut.  Only the canonical spelling of a
 * name is taken (it is parsed, printed again and compared). */
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

#define AV_SEGMENT_SUFFIX ".jsonl.gz"

/* See av-journal.h. */
gboolean
av_journal_entry_parse(const char *line, gsize len, json_t **ret_entry, guint64 *ret_seq)
{
    g_autoptr(json_t) entry = NULL;
    json_t *seq;

    entry = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(entry))
        return FALSE;
    seq = json_object_get(entry, "seq");
    if (!json_is_integer(seq) || json_integer_value(seq) < 1 ||
        !json_is_string(json_object_get(entry, "time")) ||
        !json_is_string(json_object_get(entry, "prev")) ||
        !json_is_string(json_object_get(entry, "event")))
        return FALSE;
    *ret_seq = (guint64)json_integer_value(seq);
    if (ret_entry)
        *ret_entry = g_steal_pointer(&entry);
    return TRUE;
}

/* See av-journal.h. */
gboolean
av_journal_entry_seq(const char *line, gsize len, guint64 *ret_seq)
{
    return av_journal_entry_parse(line, len, NULL, ret_seq);
}

/* See av-journal.h.  Caller frees. */
char *
av_journal_segment_name(const AvJournalSegment *seg)
{
    return g_strdup_printf("journal-%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".lines-%" G_GUINT64_FORMAT
                           "-%" G_GUINT64_FORMAT ".bytes-%" G_GINT64_FORMAT "+%" G_GINT64_FORMAT AV_SEGMENT_SUFFIX,
                           seg->first_seq, seg->last_seq, seg->first_line, seg->last_line, (gint64)seg->offset,
                           (gint64)seg->length);
}

/* Parses the next decimal number of @s (digits only, no sign, no
 * overflow), moving *@s past it and the @sep after it. */
static gboolean
av_segment_number(const char **s, char sep, guint64 *ret)
{
    const char *p = *s;
    guint64 v = 0;

    if (!g_ascii_isdigit(*p))
        return FALSE;
    for (; g_ascii_isdigit(*p); p++) {
        if (v > (G_MAXINT64 - 9) / 10)
            return FALSE;
        v = v * 10 + (guint64)(*p - '0');
    }
    if (*p != sep)
        return FALSE;
    *s = p + 1;
    *ret = v;
    return TRUE;
}

/* See av-journal.h. */
gboolean
av_journal_segment_parse(const char *name, AvJournalSegment *ret)
{
    g_autofree char *again = NULL;
    const char *p = name;
    guint64 offset = 0, length = 0;
    AvJournalSegment seg = { 0 };

    if (!g_str_has_prefix(p, "journal-"))
        return FALSE;
    p += strlen("journal-");
    if (!av_segment_number(&p, '-', &seg.first_seq) || !av_segment_number(&p, '.', &seg.last_seq) ||
        !g_str_has_prefix(p, "lines-"))
        return FALSE;
    p += strlen("lines-");
    if (!av_segment_number(&p, '-', &seg.first_line) || !av_segment_number(&p, '.', &seg.last_line) ||
        !g_str_has_prefix(p, "bytes-"))
        return FALSE;
    p += strlen("bytes-");
    if (!av_segment_number(&p, '+', &offset) || !av_segment_number(&p, '.', &length) ||
        strcmp(p, "jsonl.gz") != 0)
        return FALSE;
    seg.offset = (goffset)offset;
    seg.length = (goffset)length;
    /* At least one entry and one line each, every line at least a byte. */
    if (seg.first_seq < 1 || seg.last_seq < seg.first_seq || seg.first_line < 1 || seg.last_line < seg.first_line ||
        seg.last_line - seg.first_line < seg.last_seq - seg.first_seq || seg.length < 1 ||
        (guint64)seg.length < seg.last_line - seg.first_line + 1 || seg.offset > AV_JOURNAL_MAX_OFFSET - seg.length)
        return FALSE;
    again = av_journal_segment_name(&seg);
    if (strcmp(again, name) != 0)
        return FALSE;
    *ret = seg;
    return TRUE;
}

static gint
av_segment_cmp(gconstpointer a, gconstpointer b)
{
    const AvJournalSegment *x = a, *y = b;

    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* See av-journal.h. */
void
av_journal_layout_clear(AvJournalLayout *layout)
{
    g_clear_pointer(&layout->segments, g_array_unref);
    g_clear_pointer(&layout->dir, g_free);
}

/* The first line of the live journal open as @fd, when it is a whole
 * entry: its seq.  0 when it is none (torn, empty file).  -errno on a read
 * error. */
static int
av_journal_first_seq(int fd, guint64 *ret_seq)
{
    g_autofree char *buf = NULL;
    gsize len = 0, cap = 0;
    const char *nl = NULL;

    *ret_seq = 0;
    while (!nl && len < AV_JOURNAL_MAX_LINE) {
        gssize got;

        cap = cap ? cap * 2 : 4096;
        buf = g_realloc(buf, cap);
        do
            got = pread(fd, buf + len, cap - len, (off_t)len);
        while (got < 0 && errno == EINTR);
        if (got < 0)
            return -errno;
        if (got == 0)
            return 0;
        nl = memchr(buf + len, '\n', (gsize)got);
        len += (gsize)got;
    }
    if (!nl)
        return 0;
    av_journal_entry_seq(buf, (gsize)(nl - buf), ret_seq);
    return 0;
}

/* See av-journal.h. */
int
av_journal_segments_list(const char *state_dir, GArray **ret_segments, GError **error)
{
    g_autofree char *dir = g_build_filename(state_dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autoptr(GArray) segs = g_array_new(FALSE, TRUE, sizeof(AvJournalSegment));
    g_autoptr(GDir) d = NULL;
    g_autoptr(GError) local = NULL;
    const char *name;

    d = g_dir_open(dir, 0, &local);
    if (!d) {
        if (!g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the journal's segments: %s", local->message);
            return -1;
        }
    }
    while (d && (name = g_dir_read_name(d))) {
        AvJournalSegment seg;

        /* Dot files are an archive's lock and temporary files. */
        if (name[0] == '.')
            continue;
        if (!av_journal_segment_parse(name, &seg)) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "'%s' in the journal's segments '%s' is no segment an archive writes "
                        "(journal-FIRST-LAST.lines-FIRST-LAST.bytes-OFFSET+LENGTH.jsonl.gz); move it away",
                        name, dir);
            return -1;
        }
        g_array_append_val(segs, seg);
    }
    g_array_sort(segs, av_segment_cmp);
    for (guint i = 0; i < segs->len; i++) {
        const AvJournalSegment *s = &g_array_index(segs, AvJournalSegment, i);
        const AvJournalSegment *p = i ? &g_array_index(segs, AvJournalSegment, i - 1) : NULL;
        gboolean follows = p ? s->offset == p->offset + p->length && s->first_line == p->last_line + 1 &&
                                   s->first_seq == p->last_seq + 1
                             : s->offset == 0 && s->first_line == 1 && s->first_seq == 1;

        if (!follows) {
            g_autofree char *n = av_journal_segment_name(s);

            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal's segment '%s/%s' does not follow %s (a segment is missing or was "
                        "renamed); accelvirt never deletes one: put it back", dir, n,
                        p ? "the segment before it" : "the journal's start");
            return -1;
        }
    }
    *ret_segments = g_steal_pointer(&segs);
    return 0;
}

/* See av-journal.h. */
int
av_journal_layout_load(const char *state_dir, int live_fd, AvJournalLayout *ret, GError **error)
{
    g_autofree char *dir = g_build_filename(state_dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autoptr(GArray) segs = NULL;
    guint64 first_seq = 0;
    guint keep;
    int r;

    memset(ret, 0, sizeof(*ret));
    ret->live_line = 1;
    if (av_journal_segments_list(state_dir, &segs, error) < 0)
        return -1;
    if (live_fd >= 0 && segs->len > 0) {
        r = av_journal_first_seq(live_fd, &first_seq);
        if (r < 0) {
            av_error_errno(error, r, "cannot read the journal in '%s'", state_dir);
            return -1;
        }
    }
    /* The live file starts after the last segment, or, when an archive was
     * stopped between writing a segment and cutting the live file, at the
     * start of a segment (which it then still holds: those segments are
     * not read). */
    keep = segs->len;
    if (segs->len > 0) {
        const AvJournalSegment *last = &g_array_index(segs, AvJournalSegment, segs->len - 1);

        if (first_seq != last->last_seq + 1) {
            for (keep = 0; keep < segs->len; keep++)
                if (g_array_index(segs, AvJournalSegment, keep).first_seq == first_seq)
                    break;
            if (keep == segs->len || first_seq == 0) {
                g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                            "the journal '%s/%s' %s, which follows none of the segments in '%s' (the last ends at "
                            "seq %" G_GUINT64_FORMAT "): it was replaced or a segment is missing", state_dir,
                            AV_JOURNAL_FILE, live_fd < 0 ? "is missing" : first_seq ? "starts at another seq"
                                                                                    : "starts with no entry",
                            dir, last->last_seq);
                return -1;
            }
            /* Those segments' bytes must all be in the live file: a live
             * file started again from seq 1 (emptied, restored from an old
             * backup) must not hide them. */
            {
                struct stat st;
                const AvJournalSegment *from = &g_array_index(segs, AvJournalSegment, keep);

                if (fstat(live_fd, &st) < 0 ||
                    (goffset)st.st_size < last->offset + last->length - from->offset) {
                    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                                "the journal '%s/%s' starts at seq %" G_GUINT64_FORMAT " but holds less than the "
                                "segments of '%s' from there to seq %" G_GUINT64_FORMAT ": it was emptied or "
                                "replaced; put back the journal.jsonl that goes with them", state_dir,
                                AV_JOURNAL_FILE, first_seq, dir, last->last_seq);
                    return -1;
                }
            }
        }
    }
    ret->pending = segs->len - keep;
    if (ret->pending > 0)
        ret->pending_last = g_array_index(segs, AvJournalSegment, segs->len - 1);
    if (keep > 0) {
        const AvJournalSegment *last = &g_array_index(segs, AvJournalSegment, keep - 1);

        ret->live_offset = last->offset + last->length;
        ret->live_line = last->last_line + 1;
    } else if (segs->len > 0) {
        /* The live file holds all of it still. */
        ret->live_offset = 0;
        ret->live_line = 1;
    }
    g_array_set_size(segs, keep);
    ret->dir = g_steal_pointer(&dir);
    ret->segments = g_steal_pointer(&segs);
    return 0;
}

/* See av-journal.h. */
gboolean
av_journal_size(const char *state_dir, goffset *ret_size, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    AvJournalLayout layout;
    struct stat st;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 && errno != ENOENT)
        return av_error_errno(error, -errno, "cannot read the journal '%s'", path);
    if (fd >= 0 && fstat(fd, &st) < 0) {
        int r = -errno;

        close(fd);
        return av_error_errno(error, r, "cannot read the journal '%s'", path);
    }
    if (av_journal_layout_load(state_dir, fd, &layout, error) < 0) {
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    *ret_size = layout.live_offset + (fd >= 0 ? MIN((goffset)st.st_size, AV_JOURNAL_MAX_OFFSET) : 0);
    av_journal_layout_clear(&layout);
    if (fd >= 0)
        close(fd);
    return TRUE;
}

/* See av-journal.h. */
gboolean
av_journal_live_first_line(const char *state_dir, int live_fd, guint64 *ret_line)
{
    g_autofree char *dir = g_build_filename(state_dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint64 first_seq = 0;
    gboolean any = FALSE;
    const char *name;

    *ret_line = 1;
    if (!d)
        return TRUE;
    if (av_journal_first_seq(live_fd, &first_seq) < 0)
        return FALSE;
    while ((name = g_dir_read_name(d))) {
        AvJournalSegment seg;

        if (!av_journal_segment_parse(name, &seg))
            continue;
        any = TRUE;
        if (first_seq == seg.last_seq + 1) {
            *ret_line = seg.last_line + 1;
            return TRUE;
        }
        if (first_seq == seg.first_seq) {
            *ret_line = seg.first_line;
            return TRUE;
        }
    }
    return !any && first_seq <= 1;
}

/* See av-journal.h. */
gboolean
av_journal_has_segments(const char *state_dir)
{
    g_autofree char *dir = g_build_filename(state_dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d)))
        if (name[0] != '.')
            return TRUE;
    return FALSE;
}

/* See av-journal.h. */
gboolean
av_journal_archived_segments(const char *state_dir, guint *ret_count, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    AvJournalLayout layout;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    int r;

    r = av_journal_layout_load(state_dir, fd, &layout, error);
    if (fd >= 0)
        close(fd);
    if (r < 0)
        return FALSE;
    *ret_count = layout.segments->len;
    av_journal_layout_clear(&layout);
    return TRUE;
}
