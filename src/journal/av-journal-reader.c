/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal's lines read forward in bounded memory.
 *
 * A journal of a busy year is hundreds of megabytes; its readers (verify,
 * show, the ledger) hold one block and one line at a time, never the file.
 * A line longer than any writer writes is reported by its length, without
 * its bytes, so that a hostile journal cannot make a reader hold more than
 * AV_JOURNAL_MAX_LINE plus a block. */
#include "config.h"

#include "journal/av-journal.h"

#include <errno.h>
#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"

/* The file is read in blocks of this size. */
#define AV_JOURNAL_BLOCK (1024 * 1024)
#define AV_JOURNAL_SKIP (64 * 1024)

struct AvJournalReader {
    int fd;                      /* the live file, -1 when there is none */
    char *path;
    AvJournalLayout layout;
    goffset end;                 /* the journal offset where reading stops */
    goffset pos;                 /* the journal offset of buf[len] */
    GInputStream *seg;           /* the segment being read, uncompressed */
    const AvJournalSegment *seg_at;
    goffset seg_pos;             /* the journal offset seg is at */
    char *skip_buf;              /* bytes of a segment read to reach an offset in it */
    char *buf;                   /* held bytes: buf[start, len) not yet returned */
    gsize start, len, cap;
    guint64 number;              /* the number of the last line returned */
};

/* See av-journal.h. */
int
av_journal_reader_open(const char *path, goffset offset, goffset limit, AvJournalReader **ret_reader,
                       GError **error)
{
    g_autoptr(AvJournalReader) r = g_new0(AvJournalReader, 1);
    g_autofree char *state_dir = g_path_get_dirname(path);
    goffset size = 0;
    struct stat st;

    r->fd = -1;
    r->path = g_strdup(path);
    /* O_NONBLOCK: a FIFO in the journal's place must not hang a reader (it
     * is refused below, as anything but a regular file). */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (r->fd < 0 && errno != ENOENT) {
        av_error_errno(error, -errno, "cannot read the journal '%s'", path);
        return -1;
    }
    if (r->fd >= 0) {
        if (fstat(r->fd, &st) < 0) {
            av_error_errno(error, -errno, "cannot read the journal '%s'", path);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal '%s' is not a regular file; move it away", path);
            return -1;
        }
        size = (goffset)st.st_size;
    }
    /* The live file first, then its segments: see av-journal.h. */
    if (av_journal_layout_load(state_dir, r->fd, &r->layout, error) < 0)
        return -1;
    if (r->fd < 0 && r->layout.segments->len == 0)
        return 0;
    if (size > AV_JOURNAL_MAX_OFFSET) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' is larger than any journal can be",
                    path);
        return -1;
    }
    size += r->layout.live_offset;
    r->end = limit >= 0 ? MIN(limit, size) : size;
    if (offset < 0 || offset > r->end) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' has no byte %" G_GINT64_FORMAT " (it holds %" G_GINT64_FORMAT ")", path,
                    (gint64)offset, (gint64)r->end);
        return -1;
    }
    r->pos = offset;
    *ret_reader = g_steal_pointer(&r);
    return 1;
}

static gboolean G_GNUC_PRINTF(3, 4)
av_journal_segment_bad(AvJournalReader *r, GError **error, const char *fmt, ...)
{
    g_autofree char *name = av_journal_segment_name(r->seg_at);
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal's segment '%s/%s' %s; it holds the "
                "journal's history: restore it from a backup", r->layout.dir, name, msg);
    return FALSE;
}

/* See av-journal.h. */
GInputStream *
av_journal_segment_stream(const char *path, const char **ret_why)
{
    g_autoptr(GConverter) gz = NULL;
    g_autoptr(GInputStream) raw = NULL;
    struct stat st;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        *ret_why = g_strerror(errno);
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *ret_why = "not a regular file";
        return NULL;
    }
    raw = g_unix_input_stream_new(fd, TRUE);
    gz = G_CONVERTER(g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP));
    return g_converter_input_stream_new(raw, gz);
}

/* Opens the segment that holds byte r->pos, uncompressed, and reads up to
 * that byte. */
static gboolean
av_journal_segment_open(AvJournalReader *r, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *name = NULL;
    g_autofree char *path = NULL;
    const AvJournalSegment *seg = NULL;
    const char *why = NULL;
    goffset skip;

    g_clear_object(&r->seg);
    for (guint i = 0; i < r->layout.segments->len && !seg; i++) {
        const AvJournalSegment *s = &g_array_index(r->layout.segments, AvJournalSegment, i);

        if (r->pos >= s->offset && r->pos < s->offset + s->length)
            seg = s;
    }
    g_assert(seg);
    r->seg_at = seg;
    name = av_journal_segment_name(seg);
    path = g_build_filename(r->layout.dir, name, NULL);
    r->seg = av_journal_segment_stream(path, &why);
    if (!r->seg)
        return av_journal_segment_bad(r, error, "cannot be read: %s", why);
    r->seg_pos = seg->offset;
    /* Read, not g_input_stream_skip(): a converter stream's skip would
     * skip its compressed input. */
    if (!r->skip_buf)
        r->skip_buf = g_malloc(AV_JOURNAL_SKIP);
    for (skip = r->pos - seg->offset; skip > 0;) {
        gssize got = g_input_stream_read(r->seg, r->skip_buf, (gsize)MIN(skip, (goffset)AV_JOURNAL_SKIP), NULL,
                                         &local);

        if (got <= 0)
            return av_journal_segment_bad(r, error, "does not decompress (%s)",
                                          local ? local->message : "it ends too soon");
        skip -= got;
        r->seg_pos += got;
    }
    return TRUE;
}

/* Reads @want bytes at r->pos into @dst from the segment that holds them
 * (no more than it holds: the caller asks for at most its end).  At its
 * end, checks that nothing follows and that its last byte is a newline. */
static gssize
av_journal_segment_read(AvJournalReader *r, char *dst, gsize want, GError **error)
{
    g_autoptr(GError) local = NULL;
    gsize got = 0;
    char extra;

    if (!r->seg || r->seg_pos != r->pos) {
        if (!av_journal_segment_open(r, error))
            return -1;
    }
    want = (gsize)MIN((goffset)want, r->seg_at->offset + r->seg_at->length - r->pos);
    if (!g_input_stream_read_all(r->seg, dst, want, &got, NULL, &local) || got < want) {
        av_journal_segment_bad(r, error, "%s: it holds fewer bytes than its name says",
                               local ? local->message : "it ends too soon");
        return -1;
    }
    r->seg_pos += (goffset)got;
    if (r->seg_pos == r->seg_at->offset + r->seg_at->length) {
        gsize more = 0;

        if (!g_input_stream_read_all(r->seg, &extra, 1, &more, NULL, &local) || more > 0) {
            av_journal_segment_bad(r, error, "%s", local ? local->message
                                                      : "holds more bytes than its name says");
            return -1;
        }
        if (dst[got - 1] != '\n') {
            av_journal_segment_bad(r, error, "does not end with a whole line");
            return -1;
        }
        g_clear_object(&r->seg);
    }
    return (gssize)got;
}

/* Reads the next block into the buffer, after what it holds: from the
 * segment that holds r->pos, or the live file.  Returns the number of
 * bytes read (0 at the end) or -1 with @error set. */
static gssize
av_journal_reader_fill(AvJournalReader *r, GError **error)
{
    gsize want = (gsize)MIN((goffset)AV_JOURNAL_BLOCK, r->end - r->pos);
    gssize got;

    if (want == 0)
        return 0;
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->start = 0;
    }
    /* Room for the block and the NUL that ends a returned line. */
    if (r->cap < r->len + want + 1) {
        r->cap = r->len + want + 1;
        r->buf = g_realloc(r->buf, r->cap);
    }
    if (r->pos < r->layout.live_offset) {
        got = av_journal_segment_read(r, r->buf + r->len, want, error);
        if (got < 0)
            return -1;
    } else {
        do
            got = pread(r->fd, r->buf + r->len, want, r->pos - r->layout.live_offset);
        while (got < 0 && errno == EINTR);
        if (got < 0) {
            av_error_errno(error, -errno, "cannot read the journal '%s'", r->path);
            return -1;
        }
        /* The file shrank under the reader: writers only append, so
         * something else cut it (tampering, a restore); never a quiet
         * shorter verdict. */
        if (got == 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal '%s' shrank while it was read, at byte %" G_GINT64_FORMAT "; writers only "
                        "append to it: find out what cut it", r->path, (gint64)r->pos);
            return -1;
        }
    }
    r->len += (gsize)got;
    r->pos += got;
    return got;
}

/* See av-journal.h. */
int
av_journal_reader_next(AvJournalReader *r, AvJournalLine *ret_line, GError **error)
{
    gsize skipped = 0;           /* bytes of an over-long line dropped */
    gboolean nul = FALSE;

    for (;;) {
        /* Nothing held before the first block is read (no buffer yet). */
        char *held = r->buf ? r->buf + r->start : NULL;
        gsize n = r->len - r->start;
        char *nl = n ? memchr(held, '\n', n) : NULL;
        gssize got;

        if (nl || (r->pos >= r->end && (n > 0 || skipped > 0))) {
            gsize len = nl ? (gsize)(nl - held) : n;

            nul = nul || memchr(held, '\0', len) != NULL;
            ret_line->number = ++r->number;
            ret_line->offset = r->pos - (goffset)(r->len - r->start) - (goffset)skipped;
            ret_line->len = skipped + len;
            ret_line->ended = nl != NULL;
            ret_line->nul = nul;
            if (ret_line->len > AV_JOURNAL_MAX_LINE) {
                ret_line->data = NULL;
            } else {
                held[len] = '\0';
                ret_line->data = held;
            }
            r->start += len + (nl ? 1 : 0);
            return 1;
        }
        if (r->pos >= r->end)
            return 0;
        /* No newline in what is held: a line longer than any writer's
         * is dropped as it is read, keeping only its length. */
        if (n > AV_JOURNAL_MAX_LINE) {
            nul = nul || memchr(held, '\0', n) != NULL;
            skipped += n;
            r->start = r->len;
        }
        got = av_journal_reader_fill(r, error);
        if (got < 0)
            return -1;
    }
}

/* See av-journal.h. */
goffset
av_journal_reader_offset(const AvJournalReader *r)
{
    return r->pos - (goffset)(r->len - r->start);
}

/* See av-journal.h. */
goffset
av_journal_reader_end(const AvJournalReader *r)
{
    return r->end;
}

/* See av-journal.h. */
const char *
av_journal_reader_path(const AvJournalReader *r)
{
    return r->path;
}

/* See av-journal.h. */
void
av_journal_reader_free(AvJournalReader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    g_clear_object(&r->seg);
    g_free(r->skip_buf);
    av_journal_layout_clear(&r->layout);
    g_free(r->path);
    g_free(r->buf);
    g_free(r);
}
