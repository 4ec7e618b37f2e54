/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: crash-safe files and locks for the state directory.
 *
 * These act on ordinary host paths (the state dir), never under the root
 * prefix. */
#pragma once

#include <glib.h>
#include <sys/stat.h>
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

/* av_file_write_atomic() for a file in a directory that other users may
 * reach (node_exporter's textfile directory): the directory of @path is
 * resolved as given (realpath(3)), then opened with O_DIRECTORY|O_NOFOLLOW,
 * and must be owned by root or the effective uid and not writable by group
 * or others (no sticky-bit exception), else AV_ERROR_UNSAFE naming it and
 * nothing is written.  The temporary file ("NAME.tmp.XXXXXX") is created
 * with openat(2) in that directory (O_EXCL|O_NOFOLLOW), and renamed over
 * the last component of @path with renameat(2), which replaces whatever is
 * there, a symlink included, without following it.  FALSE with @error;
 * @path is then as it was. */
gboolean av_file_write_atomic_safe_dir(const char *path, const char *data, gsize len, mode_t mode,
                                       GError **error);

/* av_file_write_atomic(), the new file locked (flock(2), exclusive) before
 * a byte of it is written, the lock kept: returns its descriptor, which the
 * caller closes to drop the lock (a process that dies drops it), or -1 with
 * @error.  A reader learns whether the writer still holds it with
 * av_file_open_unheld(); the temporary file is locked too. */
int av_file_write_atomic_held(const char *path, const char *data, gsize len, mode_t mode, GError **error);

/* Opens the regular file @path (no symbolic link followed) and takes its
 * flock(2) lock without waiting.  Returns 0 with *ret_fd open and locked
 * (caller closes), 1 when another holds the lock (nothing open), or -errno
 * (-EINVAL: not a regular file). */
int av_file_open_unheld(const char *path, int *ret_fd);

/* Appends @line and a newline to @path (created with @mode) in one write(2) on
 * an O_APPEND descriptor, then fsyncs it.  @line must not contain a newline. */
gboolean av_file_append_line(const char *path, const char *line, mode_t mode, GError **error);

/* av_file_append_line() without the fsync of the file when @sync is FALSE
 * (a file it creates, and its directory, are still fsynced): the caller
 * makes the line durable later (av_file_fsync_path(), or the fsync of a
 * later append to the same file, which covers every byte written before). */
gboolean av_file_append_line_full(const char *path, const char *line, mode_t mode, gboolean sync, GError **error);

/* fsync(2) of the regular file @path, opened without following a link.
 * Returns 0 or -errno. */
int av_file_fsync_path(const char *path);

/* fsync(2) of the directory @dir, so that the entries made or removed in
 * it last.  0 or -errno. */
int av_file_fsync_dir(const char *dir);

/* Creates @dir (and its parents) with @mode if it does not exist. */
gboolean av_file_ensure_dir(const char *dir, mode_t mode, GError **error);

/* pread() of the whole @len bytes at @offset of @fd, again after EINTR and
 * short reads.  Returns 0, or -errno (-EIO when the file ends early). */
int av_file_pread_all(int fd, void *buf, gsize len, goffset offset);

/* pwrite() of the whole @len bytes of @buf at @offset of @fd, again after
 * EINTR and short writes.  Returns 0, or -errno (-EIO when nothing more
 * can be written). */
int av_file_pwrite_all(int fd, const void *buf, gsize len, goffset offset);

/* Checks that nobody but root and the user accelvirt runs as (geteuid(),
 * the owner of the state dir: see av_pool_open()) can change @path, a file
 * or directory that accelvirt runs or reads as root, as sudo and systemd
 * check theirs.  @path (made absolute from the current directory when
 * relative) is walked from "/" component by component, symbolic links
 * followed as the kernel follows them: the chain of a link's own directory
 * is checked, then the chain of its target.  Every component met (the
 * links themselves too) must be owned by uid 0 or geteuid(); every
 * directory walked through must be neither group- nor world-writable,
 * except a directory with the sticky bit (such as /tmp, mode 1777), since
 * there nobody but the owner of an entry (trusted, as just said) can
 * rename or remove it; the final target must be neither group- nor
 * world-writable, sticky bit or not.  @what names the file in messages
 * ("policy file", "scrub program").
 * Returns TRUE and, when @ret_st is not NULL, the stat(2) of the final
 * target in *ret_st; else FALSE with @error: AV_ERROR_UNSAFE naming @path,
 * the offending component, its owner and mode and the command that fixes
 * it; AV_ERROR_NOT_FOUND when a component does not exist; AV_ERROR_IO when
 * one cannot be examined (a loop of links included).  Borrows @path. */
gboolean av_file_check_trusted(const char *path, const char *what, struct stat *ret_st, GError **error);

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
 * with AV_ERROR_LOCKED when the lock could not be had in time.  The lock is
 * held until av_lock_release(); a process that dies drops it. */
AvLock *av_lock_take(const char *path, AvLockMode mode, int timeout_ms, GError **error);

/* Releases and frees the lock.  NULL is a no-op. */
void av_lock_release(AvLock *lock);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvLock, av_lock_release)

G_END_DECLS
