/* accelvirt: crash-safe files and locks. */
#include "config.h"

#include "av-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "av-error.h"

struct AvLock {
    int fd;
    char *path;
};

static int
av_fsync_dir_of(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd, r = 0;

    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        r = -errno;
    close(fd);
    return r;
}

static int
av_write_all(int fd, const char *data, gsize len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        data += n;
        len -= (gsize)n;
    }
    return 0;
}

gboolean
av_file_write_atomic(const char *path, const char *data, gsize len, mode_t mode, GError **error)
{
    g_autofree char *tmp = g_strconcat(path, ".tmp.XXXXXX", NULL);
    int fd, r;

    fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0)
        return av_error_errno(error, -errno, "cannot create '%s'", tmp);
    r = av_write_all(fd, data, len);
    if (r == 0 && fchmod(fd, mode) < 0)
        r = -errno;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return av_error_errno(error, r, "cannot write '%s'", path);
    }
    r = av_fsync_dir_of(path);
    if (r < 0)
        return av_error_errno(error, r, "'%s' was replaced, but syncing its directory failed", path);
    return TRUE;
}

gboolean
av_file_append_line(const char *path, const char *line, mode_t mode, GError **error)
{
    g_autofree char *buf = NULL;
    gboolean created;
    int fd, r;

    if (strchr(line, '\n')) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot append to '%s': the line holds a newline", path);
        return FALSE;
    }
    created = access(path, F_OK) < 0;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode);
    if (fd < 0)
        return av_error_errno(error, -errno, "cannot open '%s'", path);
    buf = g_strconcat(line, "\n", NULL);
    r = av_write_all(fd, buf, strlen(buf));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && created)
        r = av_fsync_dir_of(path);
    if (r < 0)
        return av_error_errno(error, r, "cannot append to '%s'", path);
    return TRUE;
}

gboolean
av_file_ensure_dir(const char *dir, mode_t mode, GError **error)
{
    if (g_mkdir_with_parents(dir, (int)mode) < 0)
        return av_error_errno(error, -errno, "cannot create the directory '%s'", dir);
    return TRUE;
}

/* The most times av_lock_take() reopens a lock file that was replaced
 * under it before giving up: each one means another process removed or
 * replaced the file between our open() and flock(). */
#define AV_LOCK_MAX_REOPEN 100

/* The lock is on the open file, not on the name: a lock file unlinked (or
 * renamed over) while we waited leaves us holding a lock nobody else will
 * ever see, and the next process locks the new file.  So after flock()
 * the fd must still be the file at @path (same st_dev and st_ino); if not,
 * start again on the new one. */
AvLock *
av_lock_take(const char *path, AvLockMode mode, int timeout_ms, GError **error)
{
    gint64 deadline = timeout_ms < 0 ? -1 : g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    int op = mode == AV_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH;
    AvLock *lock;
    int fd = -1;

    for (guint reopen = 0;; reopen++) {
        struct stat fd_st, path_st;

        if (reopen > AV_LOCK_MAX_REOPEN) {
            g_set_error(error, AV_ERROR, AV_ERROR_BUSY,
                        "the lock '%s' was replaced %u times while we took it; another program "
                        "keeps removing it", path, AV_LOCK_MAX_REOPEN);
            return NULL;
        }
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EACCES && mode == AV_LOCK_SHARED)
            fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return av_error_errno(error, -errno, "cannot open the lock '%s'", path), NULL;
        for (;;) {
            if (flock(fd, op | (timeout_ms < 0 ? 0 : LOCK_NB)) == 0)
                break;
            if (errno == EINTR)
                continue;
            if (errno != EWOULDBLOCK) {
                int e = errno;
                close(fd);
                return av_error_errno(error, -e, "cannot lock '%s'", path), NULL;
            }
            if (g_get_monotonic_time() >= deadline) {
                close(fd);
                g_set_error(error, AV_ERROR, AV_ERROR_BUSY,
                            "the lock '%s' is held by another accelvirt process; try again when it is done", path);
                return NULL;
            }
            g_usleep(10 * 1000);
        }
        if (fstat(fd, &fd_st) < 0) {
            int e = errno;
            close(fd);
            return av_error_errno(error, -e, "cannot examine the lock '%s'", path), NULL;
        }
        if (stat(path, &path_st) == 0) {
            if (fd_st.st_dev == path_st.st_dev && fd_st.st_ino == path_st.st_ino)
                break;
        } else if (errno != ENOENT) {
            int e = errno;
            close(fd);
            return av_error_errno(error, -e, "cannot examine the lock '%s'", path), NULL;
        }
        /* Unlinked or replaced while we waited: what we hold locks nothing. */
        close(fd);
        fd = -1;
    }
    lock = g_new0(AvLock, 1);
    lock->fd = fd;
    lock->path = g_strdup(path);
    return lock;
}

void
av_lock_release(AvLock *lock)
{
    if (!lock)
        return;
    flock(lock->fd, LOCK_UN);
    close(lock->fd);
    g_free(lock->path);
    g_free(lock);
}

/* See av-file.h. */
int
av_file_read_all(int fd, char **ret_data, gsize *ret_len)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();

    for (;;) {
        guint8 chunk[65536];
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        g_byte_array_append(buf, chunk, (guint)n);
    }
    *ret_len = buf->len;
    g_byte_array_append(buf, (const guint8 *)"", 1);
    *ret_data = (char *)g_byte_array_free(g_steal_pointer(&buf), FALSE);
    return 0;
}

/* See av-file.h. */
int
av_file_pread_all(int fd, void *buf, gsize len, goffset offset)
{
    guint8 *p = buf;

    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)offset);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        len -= (gsize)n;
        offset += n;
    }
    return 0;
}

/* See av-file.h. */
int
av_file_pwrite_all(int fd, const void *buf, gsize len, goffset offset)
{
    const guint8 *p = buf;

    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)offset);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        len -= (gsize)n;
        offset += n;
    }
    return 0;
}
