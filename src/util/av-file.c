/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: crash-safe files and locks. */
#include "config.h"

#include "av-file.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "av-error.h"
#include "av-point.h"

struct AvLock {
    int fd;
    char *path;
};

static int
av_fsync_dir_of(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);

    return av_file_fsync_dir(dir);
}

/* fsync(2) of @path opened read-only with @flags; 0 or -errno. */
static int
av_fsync_open(const char *path, int flags)
{
    int fd, r = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        r = -errno;
    close(fd);
    return r;
}

/* See av-file.h. */
int
av_file_fsync_dir(const char *dir)
{
    return av_fsync_open(dir, O_DIRECTORY);
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

/* av_file_write_atomic(), and with @hold the file's flock(2) lock, taken
 * before anything is written and kept: its descriptor is returned (a
 * reader that gets the lock knows the writer is gone).  Returns the
 * descriptor with @hold, 0 without, -1 with @error. */
static int
av_file_write_atomic_fd(const char *path, const char *data, gsize len, mode_t mode, gboolean hold, GError **error)
{
    g_autofree char *tmp = g_strconcat(path, ".tmp.XXXXXX", NULL);
    int fd, r;

    fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0) {
        av_error_errno(error, -errno, "cannot create '%s'", tmp);
        return -1;
    }
    r = hold && flock(fd, LOCK_EX | LOCK_NB) < 0 ? -errno : 0;
    if (r == 0)
        r = av_write_all(fd, data, len);
    if (r == 0 && fchmod(fd, mode) < 0)
        r = -errno;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (!hold && close(fd) < 0 && r == 0)
        r = -errno;
    av_point_crash();
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        if (hold)
            close(fd);
        av_error_errno(error, r, "cannot write '%s'", path);
        return -1;
    }
    av_point_crash();
    r = av_fsync_dir_of(path);
    if (r < 0) {
        if (hold)
            close(fd);
        av_error_errno(error, r, "'%s' was replaced, but syncing its directory failed", path);
        return -1;
    }
    return hold ? fd : 0;
}

gboolean
av_file_write_atomic(const char *path, const char *data, gsize len, mode_t mode, GError **error)
{
    return av_file_write_atomic_fd(path, data, len, mode, FALSE, error) == 0;
}

/* Opens the directory @dir (resolved, the last component not a link) into
 * *ret_dfd when it is owned by root or the effective uid and not writable
 * by group or others.  FALSE with @error otherwise. */
static gboolean
av_file_open_safe_dir(const char *dir, int *ret_dfd, GError **error)
{
    g_autofree char *real = realpath(dir, NULL);
    struct stat st;
    int dfd;

    if (!real)
        return av_error_errno(error, -errno, "cannot resolve the directory '%s'", dir);
    dfd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return av_error_errno(error, -errno, "cannot open the directory '%s'", real);
    if (fstat(dfd, &st) < 0) {
        int r = -errno;

        close(dfd);
        return av_error_errno(error, r, "cannot stat the directory '%s'", real);
    }
    if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        close(dfd);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "refusing to write in '%s': it is owned by uid %u with mode "
                    "%04o; it must be owned by root (or uid %u) and writable by its owner only, or another user "
                    "could replace the file", real, (guint)st.st_uid, (guint)(st.st_mode & 07777),
                    (guint)geteuid());
        return FALSE;
    }
    *ret_dfd = dfd;
    return TRUE;
}

gboolean
av_file_write_atomic_safe_dir(const char *path, const char *data, gsize len, mode_t mode, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *tmp = NULL;
    int dfd = -1, fd = -1, r = 0;

    if (g_str_has_suffix(path, "/") || g_str_equal(base, ".") || g_str_equal(base, "..") ||
        g_str_equal(base, "/")) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cannot write '%s': not a file name", path);
        return FALSE;
    }
    if (!av_file_open_safe_dir(dir, &dfd, error)) {
        g_prefix_error(error, "cannot write '%s': ", path);
        return FALSE;
    }
    for (guint i = 0; i < 100 && fd < 0; i++) {
        g_free(tmp);
        tmp = g_strdup_printf("%s.tmp.%06x", base, g_random_int_range(0, 0x1000000));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        r = -errno;
        close(dfd);
        return av_error_errno(error, r, "cannot create a temporary file for '%s'", path);
    }
    r = av_write_all(fd, data, len);
    if (r == 0 && fchmod(fd, mode) < 0)
        r = -errno;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dfd, tmp, dfd, base) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return av_error_errno(error, r, "cannot write '%s'", path);
    }
    r = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    if (r < 0)
        return av_error_errno(error, r, "'%s' was replaced, but syncing its directory failed", path);
    return TRUE;
}

int
av_file_write_atomic_held(const char *path, const char *data, gsize len, mode_t mode, GError **error)
{
    return av_file_write_atomic_fd(path, data, len, mode, TRUE, error);
}

int
av_file_open_unheld(const char *path, int *ret_fd)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        int r = -errno;

        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = errno == EWOULDBLOCK ? 1 : -errno;

        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

gboolean
av_file_append_line(const char *path, const char *line, mode_t mode, GError **error)
{
    return av_file_append_line_full(path, line, mode, TRUE, error);
}

/* See av-file.h. */
int
av_file_fsync_path(const char *path)
{
    return av_fsync_open(path, O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
}

/* See av-file.h. */
gboolean
av_file_append_line_full(const char *path, const char *line, mode_t mode, gboolean sync, GError **error)
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
    av_point_crash();
    if (av_point_crash_due()) {
        /* Killed half-way through the line: a torn line for the next writer. */
        if (av_write_all(fd, buf, strlen(buf) / 2) == 0)
            fsync(fd);
        av_point_die();
    }
    r = av_write_all(fd, buf, strlen(buf));
    if (r == 0 && (sync || created) && fsync(fd) < 0)
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

/* --- trust: who could change a file that root runs or reads ---------------- */

/* The most symbolic links av_file_check_trusted() follows (the kernel's
 * MAXSYMLINKS). */
#define AV_FILE_MAX_LINKS 40

static gboolean
av_file_uid_trusted(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

/* "root", "uid 65534 (nobody)" or "uid 4242".  Caller frees. */
static char *
av_file_describe_uid(uid_t uid)
{
    struct passwd pw, *found = NULL;
    char buf[1024];

    if (uid == 0)
        return g_strdup("root");
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found && found->pw_name)
        return g_strdup_printf("uid %u (%s)", (unsigned)uid, found->pw_name);
    return g_strdup_printf("uid %u", (unsigned)uid);
}

/* @path as one shell word, quoted only when it needs to be.  Caller frees. */
static char *
av_file_shell_word(const char *path)
{
    for (const char *c = path; *c; c++)
        if (!g_ascii_isalnum(*c) && !strchr("/._-+,:@%", *c))
            return g_shell_quote(path);
    return g_strdup(path);
}

/* Sets AV_ERROR_UNSAFE: the @what @path (@abs when made absolute) cannot
 * be trusted because of @component (with @st), whose problem is the owner
 * (@owner_problem) or else its mode.  Returns FALSE. */
static gboolean
av_file_untrusted(GError **error, const char *what, const char *path, const char *abs, const char *component,
                  const struct stat *st, gboolean owner_problem)
{
    g_autofree char *owner = av_file_describe_uid(st->st_uid);
    g_autofree char *word = av_file_shell_word(component);
    g_autofree char *subject = NULL;
    g_autofree char *problem = NULL;
    g_autofree char *fix = NULL;
    gboolean link = S_ISLNK(st->st_mode);

    if (link)
        subject = g_strdup_printf("the link '%s'", component);
    else if (g_str_equal(component, abs))
        subject = g_strdup("it");
    else
        subject = g_strdup_printf("%s '%s'", S_ISDIR(st->st_mode) ? "the directory" : "the file", component);
    if (owner_problem) {
        g_autofree char *me = geteuid() == 0 ? NULL : av_file_describe_uid(geteuid());

        problem = g_strdup_printf("is owned by %s, not by root%s%s (mode %04o)", owner, me ? " or by " : "",
                                  me ? me : "", (unsigned)(st->st_mode & 07777));
        fix = g_strdup_printf("chown %sroot %s", link ? "-h " : "", word);
    } else {
        problem = g_strdup_printf("is writable by %s (owner %s, mode %04o)",
                                  (st->st_mode & S_IWGRP) && (st->st_mode & S_IWOTH) ? "its group and every user"
                                  : (st->st_mode & S_IWGRP)                          ? "its group"
                                                                                     : "every user",
                                  owner, (unsigned)(st->st_mode & 07777));
        fix = g_strdup_printf("chmod go-w %s", word);
    }
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                "refusing the %s '%s': %s %s, so another user could change what accelvirt runs or reads as "
                "root; run '%s'",
                what, path, subject, problem, fix);
    return FALSE;
}

/* See av-file.h. */
gboolean
av_file_check_trusted(const char *path, const char *what, struct stat *ret_st, GError **error)
{
    g_autoptr(GString) resolved = g_string_new("");   /* symlink-free, "" standing for "/" */
    g_autofree char *todo = NULL;                       /* what is left to walk, relative */
    g_autofree char *abs = NULL;                        /* @path made absolute */
    g_autofree char *cwd = NULL;
    const char *real;
    struct stat st;
    guint links = 0;

    g_return_val_if_fail(path != NULL && what != NULL, FALSE);
    if (g_path_is_absolute(path)) {
        abs = g_strdup(path);
    } else {
        cwd = g_get_current_dir();
        abs = g_build_filename(cwd, path, NULL);
    }
    todo = g_strdup(abs);
    /* "/" is the first directory walked through. */
    if (lstat("/", &st) < 0)
        return av_error_errno(error, -errno, "cannot examine '/' for the %s '%s'", what, path);
    if (!av_file_uid_trusted(st.st_uid))
        return av_file_untrusted(error, what, path, abs, "/", &st, TRUE);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        return av_file_untrusted(error, what, path, abs, "/", &st, FALSE);

    for (;;) {
        g_autofree char *comp = NULL;
        g_autofree char *child = NULL;
        const char *rest;
        gboolean last;

        rest = todo;
        while (*rest == '/')
            rest++;
        if (!*rest)
            break;
        comp = g_strndup(rest, strcspn(rest, "/"));
        rest += strlen(comp);
        while (*rest == '/')
            rest++;
        last = *rest == '\0';
        {
            char *left = g_strdup(rest);

            g_free(todo);
            todo = left;
        }
        if (g_str_equal(comp, "."))
            continue;
        if (g_str_equal(comp, "..")) {
            /* lexical on a path without links: its directories were checked */
            char *slash = strrchr(resolved->str, '/');

            g_string_truncate(resolved, slash ? (gsize)(slash - resolved->str) : 0);
            continue;
        }
        child = g_strdup_printf("%s/%s", resolved->str, comp);
        if (lstat(child, &st) < 0) {
            int e = errno;

            if (e == ENOENT || e == ENOTDIR) {
                g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "the %s '%s' does not exist%s%s%s", what, path,
                            g_str_equal(child, path) ? "" : " ('", g_str_equal(child, path) ? "" : child,
                            g_str_equal(child, path) ? "" : "' is missing)");
                return FALSE;
            }
            return av_error_errno(error, -e, "cannot examine '%s' for the %s '%s'", child, what, path);
        }
        if (!av_file_uid_trusted(st.st_uid))
            return av_file_untrusted(error, what, path, abs, child, &st, TRUE);
        if (S_ISLNK(st.st_mode)) {
            g_autofree char *dest = NULL;
            GError *local = NULL;

            if (++links > AV_FILE_MAX_LINKS)
                return av_error_errno(error, -ELOOP, "cannot follow the links to the %s '%s'", what, path);
            dest = g_file_read_link(child, &local);
            if (!dest) {
                g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the link '%s' for the %s '%s': %s", child,
                            what, path, local->message);
                g_error_free(local);
                return FALSE;
            }
            {
                char *next = *todo ? g_strconcat(dest, "/", todo, NULL) : g_strdup(dest);

                g_free(todo);
                todo = next;
            }
            /* An absolute target starts again at "/", checked already. */
            if (g_path_is_absolute(dest))
                g_string_truncate(resolved, 0);
            continue;
        }
        g_string_assign(resolved, child);
        if (!last) {
            if (!S_ISDIR(st.st_mode)) {
                g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                            "the %s '%s' does not exist ('%s' is not a directory)", what, path, child);
                return FALSE;
            }
            if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
                return av_file_untrusted(error, what, path, abs, child, &st, FALSE);
        }
    }
    /* The target, a path without links now, may be changed by nobody
     * else, sticky bit or not. */
    real = resolved->len ? resolved->str : "/";
    if (lstat(real, &st) < 0)
        return av_error_errno(error, -errno, "cannot examine '%s' for the %s '%s'", real, what, path);
    if (!av_file_uid_trusted(st.st_uid))
        return av_file_untrusted(error, what, path, abs, real, &st, TRUE);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return av_file_untrusted(error, what, path, abs, real, &st, FALSE);
    if (ret_st)
        *ret_st = st;
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
            g_set_error(error, AV_ERROR, AV_ERROR_LOCKED,
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
                g_set_error(error, AV_ERROR, AV_ERROR_LOCKED,
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
