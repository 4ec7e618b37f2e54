/* accelvirt: crash-safe files and locks for the state directory.
 *
 * These act on ordinary host paths (the state dir), never under the root
 * prefix. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Replaces @path with @len bytes of @data so that a reader sees either the old
 * or the new contents, never a mix, even across a crash or power loss: write
 * to a temporary file "PATH.tmp.XXXXXX" in the same directory, fsync it,
 * rename it over @path, fsync the directory.  The temporary file is removed
 * on failure.  Returns FALSE and sets @error on failure: @path is then as it
 * was, except when only the final fsync of the directory failed (the error
 * says so), where the new contents are in place but may not survive a power
 * loss. */
gboolean av_file_write_atomic(const char *path, const char *data, gsize len, mode_t mode, GError **error);

/* Appends @line and a newline to @path (created with @mode) in one write(2) on
 * an O_APPEND descriptor, then fsyncs it.  @line must not contain a newline. */
gboolean av_file_append_line(const char *path, const char *line, mode_t mode, GError **error);

/* Creates @dir (and its parents) with @mode if it does not exist. */
gboolean av_file_ensure_dir(const char *dir, mode_t mode, GError **error);

/* pread() of the whole @len bytes at @offset of @fd, again after EINTR and
 * short reads.  Returns 0, or -errno (-EIO when the file ends early). */
int av_file_pread_all(int fd, void *buf, gsize len, goffset offset);

/* pwrite() of the whole @len bytes of @buf at @offset of @fd, again after
 * EINTR and short writes.  Returns 0, or -errno (-EIO when nothing more
 * can be written). */
int av_file_pwrite_all(int fd, const void *buf, gsize len, goffset offset);

/* read() of @fd from where it stands to its end, again after EINTR.  Sets
 * *ret_data to the bytes, NUL-terminated (caller frees), and *ret_len to
 * their number.  Returns 0, or -errno with nothing set.  Callers check that
 * @fd is a regular file first (a FIFO or a device may never end). */
int av_file_read_all(int fd, char **ret_data, gsize *ret_len);

typedef struct AvLock AvLock;

typedef enum {
    AV_LOCK_SHARED,
    AV_LOCK_EXCLUSIVE,
} AvLockMode;

/* Takes an flock(2) lock on @path (created if missing), waiting at most
 * @timeout_ms milliseconds (0: do not wait, -1: wait forever).  Returns NULL
 * with AV_ERROR_BUSY when the lock could not be had in time.  The lock is
 * held until av_lock_release(); a process that dies drops it. */
AvLock *av_lock_take(const char *path, AvLockMode mode, int timeout_ms, GError **error);

/* Releases and frees the lock.  NULL is a no-op. */
void av_lock_release(AvLock *lock);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvLock, av_lock_release)

G_END_DECLS
