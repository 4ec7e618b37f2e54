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
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"

/* The file is read in blocks of this size. */
#define AV_JOURNAL_BLOCK (1024 * 1024)

struct AvJournalReader {
    int fd;
    char *path;
    goffset end;                 /* the offset where reading stops */
    goffset pos;                 /* the file offset of buf[len] */
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
    struct stat st;

    r->fd = -1;
    r->path = g_strdup(path);
    /* O_NONBLOCK: a FIFO in the journal's place must not hang a reader (it
     * is refused below, as anything but a regular file). */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (r->fd < 0) {
        if (errno == ENOENT)
            return 0;
        av_error_errno(error, -errno, "cannot read the journal '%s'", path);
        return -1;
    }
    if (fstat(r->fd, &st) < 0) {
        av_error_errno(error, -errno, "cannot read the journal '%s'", path);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' is not a regular file; move it away", path);
        return -1;
    }
    r->end = limit >= 0 ? MIN(limit, (goffset)st.st_size) : (goffset)st.st_size;
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

/* Reads the next block into the buffer, after what it holds.  Returns the
 * number of bytes read (0 at the end) or -errno. */
static gssize
av_journal_reader_fill(AvJournalReader *r)
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
    do
        got = pread(r->fd, r->buf + r->len, want, r->pos);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return -errno;
    /* The file shrank under the reader: writers only append, so something
     * else cut it (tampering, a restore); never a quiet shorter verdict. */
    if (got == 0)
        return -ESTALE;
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
        got = av_journal_reader_fill(r);
        if (got == -ESTALE) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal '%s' shrank while it was read, at byte %" G_GINT64_FORMAT "; writers only "
                        "append to it: find out what cut it", r->path, (gint64)r->pos);
            return -1;
        }
        if (got < 0) {
            av_error_errno(error, (int)got, "cannot read the journal '%s'", r->path);
            return -1;
        }
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
    g_free(r->path);
    g_free(r->buf);
    g_free(r);
}
