/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal's archive in two steps (see av-journal-archive.h). */
#include "config.h"

#include "journal/av-journal-archive.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-file.h"

#define AV_ARCHIVE_BLOCK (1024 * 1024)
#define AV_ARCHIVE_LOCK ".archive.lock"
#define AV_ARCHIVE_TMP_PREFIX ".tmp-"
/* The live file's successor, beside it until it is renamed over it. */
#define AV_ARCHIVE_LIVE_TMP ".journal.jsonl.archive"

struct AvJournalArchive {
    char *state_dir;
    char *live_path;
    char *tmp_path;              /* the successor */
    int live_fd, tmp_fd;
    struct stat live_st;
    goffset base;                /* where the live file starts in the journal */
    goffset copied;              /* the live file's bytes copied so far (local offset) */
    AvLock *lock;
    AvJournalArchived done;
};

/* See av-journal-archive.h. */
void
av_journal_archived_clear(AvJournalArchived *a)
{
    g_clear_pointer(&a->name, g_free);
    g_clear_pointer(&a->sha256, g_free);
}

/* See av-journal-archive.h.  A successor not renamed into place is
 * removed: the live file still holds all it holds. */
void
av_journal_archive_free(AvJournalArchive *a)
{
    if (!a)
        return;
    if (a->tmp_fd >= 0) {
        close(a->tmp_fd);
        unlink(a->tmp_path);
    }
    if (a->live_fd >= 0)
        close(a->live_fd);
    av_lock_release(a->lock);
    av_journal_archived_clear(&a->done);
    g_free(a->state_dir);
    g_free(a->live_path);
    g_free(a->tmp_path);
    g_free(a);
}

/* Copies bytes [@from, @to) of the live file to the successor, at its end. */
static gboolean
av_archive_copy(AvJournalArchive *a, goffset from, goffset to, GError **error)
{
    g_autofree char *buf = g_malloc(AV_ARCHIVE_BLOCK);

    while (from < to) {
        gsize want = (gsize)MIN((goffset)AV_ARCHIVE_BLOCK, to - from);
        int r = av_file_pread_all(a->live_fd, buf, want, from);

        if (r == 0 && write(a->tmp_fd, buf, want) != (gssize)want)
            r = errno ? -errno : -EIO;
        if (r < 0)
            return av_error_errno(error, r, "cannot copy the journal '%s' for its archive", a->live_path);
        from += (goffset)want;
    }
    return TRUE;
}

/* The SHA-256 and number of bytes of the segment @path, uncompressed. */
static gboolean
av_archive_read_back(const char *path, char **ret_sha256, goffset *ret_len, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autoptr(GInputStream) in = NULL;
    g_autofree char *buf = g_malloc(AV_ARCHIVE_BLOCK);
    const char *why = NULL;
    goffset len = 0;

    in = av_journal_segment_stream(path, &why);
    if (!in) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "cannot read back the journal's segment '%s': %s; "
                    "move it away", path, why);
        return FALSE;
    }
    for (;;) {
        gssize got = g_input_stream_read(in, buf, AV_ARCHIVE_BLOCK, NULL, error);

        if (got < 0) {
            g_prefix_error(error, "cannot read back the journal's segment '%s': ", path);
            return FALSE;
        }
        if (got == 0)
            break;
        g_checksum_update(sum, (const guchar *)buf, got);
        len += got;
    }
    *ret_sha256 = g_strdup(g_checksum_get_string(sum));
    *ret_len = len;
    return TRUE;
}

/* Writes bytes [0, @len) of the live file, compressed, to a temporary file
 * in @dir: *ret_tmp its path, *ret_sha256 the bytes' SHA-256, *ret_lines
 * their newlines, *ret_compressed its size. */
static gboolean
av_archive_write_segment(AvJournalArchive *a, const char *dir, goffset len, char **ret_tmp, char **ret_sha256,
                         guint64 *ret_lines, goffset *ret_compressed, GError **error)
{
    g_autofree char *tmp = g_build_filename(dir, AV_ARCHIVE_TMP_PREFIX "XXXXXX", NULL);
    g_autofree char *buf = g_malloc(AV_ARCHIVE_BLOCK);
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autoptr(GOutputStream) raw = NULL;
    g_autoptr(GOutputStream) out = NULL;
    g_autoptr(GConverter) gz = NULL;
    guint64 lines = 0;
    struct stat st;
    goffset pos = 0;
    int fd;

    fd = g_mkstemp_full(tmp, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return av_error_errno(error, -errno, "cannot write a segment of the journal in '%s'", dir);
    raw = g_unix_output_stream_new(fd, FALSE);
    gz = G_CONVERTER(g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, -1));
    out = g_converter_output_stream_new(raw, gz);
    while (pos < len) {
        gsize want = (gsize)MIN((goffset)AV_ARCHIVE_BLOCK, len - pos);
        int r = av_file_pread_all(a->live_fd, buf, want, pos);
        const char *p = buf, *stop = buf + want;

        if (r < 0) {
            close(fd);
            unlink(tmp);
            return av_error_errno(error, r, "cannot read the journal '%s'", a->live_path);
        }
        while ((p = memchr(p, '\n', (gsize)(stop - p)))) {
            lines++;
            p++;
        }
        g_checksum_update(sum, (const guchar *)buf, (gssize)want);
        if (!g_output_stream_write_all(out, buf, want, NULL, NULL, error))
            goto fail;
        pos += (goffset)want;
    }
    if (!g_output_stream_close(out, NULL, error))
        goto fail;
    if (fsync(fd) < 0 || fstat(fd, &st) < 0) {
        av_error_errno(error, -errno, "cannot write a segment of the journal in '%s'", dir);
        goto fail;
    }
    close(fd);
    *ret_tmp = g_steal_pointer(&tmp);
    *ret_sha256 = g_strdup(g_checksum_get_string(sum));
    *ret_lines = lines;
    *ret_compressed = (goffset)st.st_size;
    return TRUE;

fail:
    g_prefix_error(error, "cannot write a segment of the journal in '%s': ", dir);
    close(fd);
    unlink(tmp);
    return FALSE;
}

/* The SHA-256 of @len bytes of the live file from byte @from. */
static gboolean
av_archive_hash_live(AvJournalArchive *a, goffset from, goffset len, char **ret_sha256, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree char *buf = g_malloc(AV_ARCHIVE_BLOCK);

    for (goffset pos = from; pos < from + len;) {
        gsize want = (gsize)MIN((goffset)AV_ARCHIVE_BLOCK, from + len - pos);
        int r = av_file_pread_all(a->live_fd, buf, want, pos);

        if (r < 0)
            return av_error_errno(error, r, "cannot read the journal '%s'", a->live_path);
        g_checksum_update(sum, (const guchar *)buf, (gssize)want);
        pos += (goffset)want;
    }
    *ret_sha256 = g_strdup(g_checksum_get_string(sum));
    return TRUE;
}

/* The seq of the whole entry that starts at byte @at of the live file. */
static gboolean
av_archive_entry_at(AvJournalArchive *a, goffset at, goffset live_size, guint64 *ret_seq, GError **error)
{
    g_autoptr(AvJournalReader) reader = NULL;
    AvJournalLine line;
    int r;

    r = av_journal_reader_open(a->live_path, a->base + at, a->base + live_size, &reader, error);
    if (r > 0)
        r = av_journal_reader_next(reader, &line, error);
    if (r < 0)
        return FALSE;
    if (r == 0 || !line.ended || !line.data || line.nul || !av_journal_entry_seq(line.data, line.len, ret_seq)) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' has no whole entry at byte %" G_GINT64_FORMAT " where it would be cut; "
                    "nothing was archived: 'accelvirt journal verify' says more", a->live_path,
                    (gint64)(a->base + at));
        return FALSE;
    }
    return TRUE;
}

/* See av-journal-archive.h. */
int
av_journal_archive_prepare(const char *state_dir, goffset size, goffset cut, AvJournalArchive **ret_archive,
                           GError **error)
{
    g_autoptr(AvJournalArchive) a = g_new0(AvJournalArchive, 1);
    g_autofree char *dir = g_build_filename(state_dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autofree char *lock = g_build_filename(dir, AV_ARCHIVE_LOCK, NULL);
    g_autofree char *tmp = NULL;
    g_autofree char *final = NULL;
    g_autofree char *back = NULL;
    AvJournalLayout layout = { 0 };
    AvJournalSegment *seg = &a->done.segment;
    goffset live_size, local_cut, back_len = 0;
    guint64 lines = 0, next_seq = 0, first_seq = 0;
    const char *name;
    GDir *d;

    a->live_fd = a->tmp_fd = -1;
    a->state_dir = g_strdup(state_dir);
    a->live_path = g_build_filename(state_dir, AV_JOURNAL_FILE, NULL);
    a->tmp_path = g_build_filename(state_dir, AV_ARCHIVE_LIVE_TMP, NULL);
    if (!av_file_ensure_dir(dir, 0700, error))
        return -1;
    a->lock = av_lock_take(lock, AV_LOCK_EXCLUSIVE, 0, error);
    if (!a->lock) {
        g_prefix_error(error, "another 'accelvirt journal archive' is running: ");
        return -1;
    }
    /* What an archive killed before left: its own temporary files. */
    unlink(a->tmp_path);
    if ((d = g_dir_open(dir, 0, NULL))) {
        while ((name = g_dir_read_name(d)))
            if (g_str_has_prefix(name, AV_ARCHIVE_TMP_PREFIX)) {
                g_autofree char *p = g_build_filename(dir, name, NULL);

                unlink(p);
            }
        g_dir_close(d);
    }
    a->live_fd = open(a->live_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (a->live_fd < 0) {
        if (errno == ENOENT)
            return 0;
        av_error_errno(error, -errno, "cannot read the journal '%s'", a->live_path);
        return -1;
    }
    if (fstat(a->live_fd, &a->live_st) < 0 || !S_ISREG(a->live_st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' is not a regular file; move it away",
                    a->live_path);
        return -1;
    }
    if (av_journal_layout_load(state_dir, a->live_fd, &layout, error) < 0)
        return -1;
    a->base = layout.live_offset;
    live_size = MIN(size - a->base, (goffset)a->live_st.st_size);
    if (layout.pending > 0) {
        /* A segment was written, the cut not made: make it, once the
         * segments hold the same bytes as the live file. */
        *seg = layout.pending_last;
        seg->offset = a->base;
        seg->length = layout.pending_last.offset + layout.pending_last.length - a->base;
        a->done.finished_only = TRUE;
        cut = seg->offset + seg->length;
    }
    av_journal_layout_clear(&layout);
    local_cut = cut - a->base;
    if (local_cut <= 0)
        return 0;
    if (local_cut >= live_size) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' would be cut at byte %" G_GINT64_FORMAT ", at or past its end; nothing was "
                    "archived", a->live_path, (gint64)cut);
        return -1;
    }
    if (!av_archive_entry_at(a, 0, live_size, &first_seq, error) ||
        !av_archive_entry_at(a, local_cut, live_size, &next_seq, error))
        return -1;

    if (a->done.finished_only) {
        /* The segments from the live file's start to the cut were written
         * by the archive that was stopped: one or, after several stops,
         * more; each is read back against the live file's bytes. */
        g_autoptr(GArray) all = NULL;

        if (next_seq != seg->last_seq + 1 || first_seq != seg->first_seq) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal's segments up to seq %" G_GUINT64_FORMAT " do not match the journal '%s'; "
                        "nothing was archived", seg->last_seq, a->live_path);
            return -1;
        }
        if (av_journal_segments_list(state_dir, &all, error) < 0)
            return -1;
        for (guint i = 0; i < all->len; i++) {
            const AvJournalSegment *s = &g_array_index(all, AvJournalSegment, i);
            g_autofree char *n = NULL;
            g_autofree char *p = NULL;
            g_autofree char *want = NULL;
            g_autofree char *have = NULL;
            goffset have_len = 0;

            if (s->offset < a->base)
                continue;
            n = av_journal_segment_name(s);
            p = g_build_filename(dir, n, NULL);
            if (!av_archive_hash_live(a, s->offset - a->base, s->length, &want, error))
                return -1;
            if (!av_archive_read_back(p, &have, &have_len, error))
                return -1;
            if (have_len != s->length || strcmp(have, want) != 0) {
                g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                            "the journal's segment '%s' does not hold the bytes the journal '%s' holds there; "
                            "nothing was archived: compare them, and move the wrong one away", p, a->live_path);
                return -1;
            }
            g_free(a->done.name);
            a->done.name = g_steal_pointer(&n);
        }
        if (!av_archive_hash_live(a, 0, local_cut, &a->done.sha256, error))
            return -1;
    } else {
        if (!av_archive_write_segment(a, dir, local_cut, &tmp, &a->done.sha256, &lines, &a->done.compressed, error))
            return -1;
        seg->first_seq = first_seq;
        seg->last_seq = next_seq - 1;
        seg->first_line = layout.live_line ? layout.live_line : 1;
        seg->last_line = seg->first_line + lines - 1;
        seg->offset = a->base;
        seg->length = local_cut;
        a->done.name = av_journal_segment_name(seg);
        final = g_build_filename(dir, a->done.name, NULL);
        if (next_seq <= first_seq || lines < next_seq - first_seq) {
            unlink(tmp);
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                        "the journal '%s' before byte %" G_GINT64_FORMAT " does not hold entries %" G_GUINT64_FORMAT
                        " to %" G_GUINT64_FORMAT "; nothing was archived: 'accelvirt journal verify' says more",
                        a->live_path, (gint64)cut, first_seq, next_seq - 1);
            return -1;
        }
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0) {
            int r = -errno;

            unlink(tmp);
            av_error_errno(error, r, "cannot put the journal's segment '%s' in place", final);
            return -1;
        }
        if (av_file_fsync_dir(dir) < 0) {
            /* The cut must never outlive the segment on a power loss:
             * none is made (the next archive finishes it). */
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot fsync '%s' after putting the journal's segment '%s' "
                        "in place; nothing was cut", dir, a->done.name);
            return -1;
        }
        /* Read back: a segment that does not give back what it was
         * given is never trusted with the entries. */
        if (!av_archive_read_back(final, &back, &back_len, error) || back_len != local_cut ||
            strcmp(back, a->done.sha256) != 0) {
            unlink(final);
            av_file_fsync_dir(dir);
            if (error && !*error)
                g_set_error(error, AV_ERROR, AV_ERROR_IO, "the journal's segment '%s' did not read back as it "
                            "was written; removed it, nothing was archived", final);
            return -1;
        }
    }

    /* The entries after the cut, up to the size known, for the successor. */
    a->tmp_fd = open(a->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (a->tmp_fd < 0) {
        av_error_errno(error, -errno, "cannot write '%s'", a->tmp_path);
        return -1;
    }
    if (!av_archive_copy(a, local_cut, live_size, error))
        return -1;
    a->copied = live_size;
    *ret_archive = g_steal_pointer(&a);
    return 1;
}

/* See av-journal-archive.h. */
gboolean
av_journal_archive_commit(AvJournalArchive *a, AvJournalArchived *ret, GError **error)
{
    struct stat now, fd_now;

    if (lstat(a->live_path, &now) < 0 || now.st_dev != a->live_st.st_dev || now.st_ino != a->live_st.st_ino) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' was replaced while it was archived; nothing was cut (the segment written "
                    "holds entries it held: the next archive checks it against the journal)", a->live_path);
        return FALSE;
    }
    if (fstat(a->live_fd, &fd_now) < 0 || fd_now.st_size < a->copied) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' shrank while it was archived; nothing was cut", a->live_path);
        return FALSE;
    }
    if (!av_archive_copy(a, a->copied, (goffset)fd_now.st_size, error))
        return FALSE;
    if (fchmod(a->tmp_fd, a->live_st.st_mode & 07777) < 0 || fsync(a->tmp_fd) < 0)
        return av_error_errno(error, -errno, "cannot write '%s'", a->tmp_path);
    if (rename(a->tmp_path, a->live_path) < 0)
        return av_error_errno(error, -errno, "cannot put the cut journal '%s' in place", a->live_path);
    close(a->tmp_fd);
    a->tmp_fd = -1;
    av_file_fsync_dir(a->state_dir);
    *ret = a->done;
    memset(&a->done, 0, sizeof(a->done));
    return TRUE;
}
