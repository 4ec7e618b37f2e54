/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the root prefix and link resolution inside it. */
#include "config.h"

#include "av-root.h"
#include "av-file.h"
#include "av-point.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif

#include "av-error.h"
#include "av-names.h"

#define AV_ROOT_MAX_LINKS 40
#define AV_ROOT_MAX_READ (16u * 1024u * 1024u)

/* How often an openat2() that a rename elsewhere in the tree interrupted
 * (-EAGAIN, openat2(2)) is tried again before the walk takes over. */
#define AV_ROOT_OPENAT2_TRIES 16

struct AvRoot {
    char *prefix;   /* canonical, absolute, without a trailing '/' except for "/" */
    gboolean is_host;
    /* The prefix opened with O_PATH, for openat2(RESOLVE_IN_ROOT); -1 when
     * the kernel cannot resolve in a root and the component walk does. */
    int fd;
    /* The prefix as the kernel names the directory of @fd
     * (/proc/self/fd/N), to turn a resolved fd back into a root-relative
     * path; NULL when /proc cannot say (av_root_resolve() then walks). */
    char *fd_name;
};

static char *av_root_fd_name(int fd);

/* Opens the prefix for openat2(RESOLVE_IN_ROOT) and tries the call once:
 * a kernel before 5.6 answers -ENOSYS, a seccomp filter (a container's)
 * -EPERM or -ENOSYS, one without RESOLVE_IN_ROOT -EINVAL.  The walk stays
 * for them, and for test builds whose environment asks for it (the setting
 * "root-resolve" = "walk", tests/doubles/av-points.c). */
static gboolean
av_root_open_prefix(AvRoot *root, GError **error)
{
#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    struct stat by_fd, by_name;
    int fd, probe;

    if (g_strcmp0(av_point_setting("root-resolve"), "walk") == 0)
        return TRUE;
    /* O_NOFOLLOW: a link swapped in for the prefix since realpath() saw a
     * directory is refused, not followed (to "/", whose devices a fake
     * tree's writes would then reach). */
    fd = open(root->prefix, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return TRUE;
    probe = (int)syscall(SYS_openat2, fd, ".", &how, sizeof(how));
    if (probe < 0) {
        g_debug("resolving paths under '%s' by walking them: openat2() answers %s", root->prefix,
                g_strerror(errno));
        close(fd);
        return TRUE;
    }
    close(probe);
    root->fd_name = av_root_fd_name(fd);
    /* The directory opened is the one the canonical prefix names, by what
     * the kernel calls it and by its inode: a component of the prefix
     * swapped for a link meanwhile would give another directory, whose fd
     * every path would then be resolved in. */
    if ((root->fd_name && !g_str_equal(root->fd_name, root->prefix)) || fstat(fd, &by_fd) < 0 ||
        stat(root->prefix, &by_name) < 0 || by_fd.st_dev != by_name.st_dev || by_fd.st_ino != by_name.st_ino) {
        close(fd);
        g_clear_pointer(&root->fd_name, g_free);
        if (root->is_host)
            return TRUE;
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot use '%s' as the root prefix: it changed while it was opened (a directory on its "
                    "way replaced by a link?)", root->prefix);
        return FALSE;
    }
    root->fd = fd;
    return TRUE;
#else
    (void)root;
    (void)error;
    return TRUE;
#endif
}

AvRoot *
av_root_new(const char *prefix, GError **error)
{
    g_autoptr(AvRoot) root = g_new0(AvRoot, 1);
    g_autofree char *canon = NULL;
    char *real;

    root->fd = -1;
    if (!prefix || !*prefix || g_str_equal(prefix, "/")) {
        root->prefix = g_strdup("/");
        root->is_host = TRUE;
        (void)av_root_open_prefix(root, NULL);
        return g_steal_pointer(&root);
    }
    real = realpath(prefix, NULL);
    if (!real) {
        int e = errno;
        g_set_error(error, AV_ERROR, e == ENOENT ? AV_ERROR_NOT_FOUND : AV_ERROR_INVALID_INPUT,
                    "cannot use '%s' as the root prefix: %s", prefix, g_strerror(e));
        return NULL;
    }
    canon = g_strdup(real);
    free(real);
    if (!g_file_test(canon, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot use '%s' as the root prefix: not a directory", prefix);
        return NULL;
    }
    root->is_host = g_str_equal(canon, "/");
    root->prefix = g_steal_pointer(&canon);
    /* A fake tree: the kill storm's test points may act (never on "/"). */
    if (!root->is_host)
        av_point_arm();
    if (!av_root_open_prefix(root, error))
        return NULL;
    return g_steal_pointer(&root);
}

AvRoot *
av_root_new_default(const char *option, GError **error)
{
    const char *prefix = option;

    if (!prefix)
        prefix = g_getenv("ACCELVIRT_ROOT");
    return av_root_new(prefix, error);
}

void
av_root_free(AvRoot *root)
{
    if (!root)
        return;
    if (root->fd >= 0)
        close(root->fd);
    g_free(root->fd_name);
    g_free(root->prefix);
    g_free(root);
}

const char *
av_root_prefix(const AvRoot *root)
{
    return root->prefix;
}

gboolean
av_root_is_host(const AvRoot *root)
{
    return root->is_host;
}

gboolean
av_root_resolves_in_kernel(const AvRoot *root)
{
    return root->fd >= 0;
}

static char * G_GNUC_PRINTF(2, 0)
av_kernel_path(const char *top, const char *fmt, va_list ap)
{
    g_autofree char *rest = g_strdup_vprintf(fmt, ap);

    while (*rest == '/')
        memmove(rest, rest + 1, strlen(rest));
    return *rest ? g_strconcat("/", top, "/", rest, NULL) : g_strconcat("/", top, NULL);
}

char *
av_sys_path(const char *fmt, ...)
{
    va_list ap;
    char *ret;

    va_start(ap, fmt);
    ret = av_kernel_path("sys", fmt, ap);
    va_end(ap);
    return ret;
}

char *
av_dev_path(const char *fmt, ...)
{
    va_list ap;
    char *ret;

    va_start(ap, fmt);
    ret = av_kernel_path("dev", fmt, ap);
    va_end(ap);
    return ret;
}

char *
av_proc_path(const char *fmt, ...)
{
    va_list ap;
    char *ret;

    va_start(ap, fmt);
    ret = av_kernel_path("proc", fmt, ap);
    va_end(ap);
    return ret;
}

char *
av_run_path(const char *fmt, ...)
{
    va_list ap;
    char *ret;

    va_start(ap, fmt);
    ret = av_kernel_path("run", fmt, ap);
    va_end(ap);
    return ret;
}

char *
av_root_host_path(const AvRoot *root, const char *path)
{
    while (*path == '/')
        path++;
    if (root->is_host)
        return g_strconcat("/", path, NULL);
    return *path ? g_strconcat(root->prefix, "/", path, NULL) : g_strdup(root->prefix);
}

/* Pushes the components of @path in front of the queue @todo, in order. */
static void
av_root_queue_components(GQueue *todo, const char *path)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);

    for (gssize i = (gssize)g_strv_length(parts) - 1; i >= 0; i--) {
        if (parts[i][0] == '\0' || g_str_equal(parts[i], "."))
            continue;
        g_queue_push_head(todo, g_strdup(parts[i]));
    }
}

static char *
av_root_join_done(GPtrArray *done)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < done->len; i++) {
        g_string_append_c(s, '/');
        g_string_append(s, g_ptr_array_index(done, i));
    }
    if (s->len == 0)
        g_string_append_c(s, '/');
    return g_string_free(s, FALSE);
}

/* The component walk: every component lstat()ed and every link read by
 * hand, under the prefix's path.  What resolves paths where openat2()
 * cannot; av_root_resolve() describes the result. */
static int
av_root_resolve_walk(const AvRoot *root, const char *path, char **ret_resolved)
{
    g_autoptr(GPtrArray) done = g_ptr_array_new_with_free_func(g_free);
    GQueue todo = G_QUEUE_INIT;
    guint links = 0;
    int r = 0;

    g_return_val_if_fail(path && path[0] == '/', -EINVAL);

    av_root_queue_components(&todo, path);
    while (!g_queue_is_empty(&todo)) {
        g_autofree char *comp = g_queue_pop_head(&todo);
        g_autofree char *cur = NULL;
        g_autofree char *host = NULL;
        struct stat st;

        if (g_str_equal(comp, "..")) {
            /* Never above the root: "/.." is "/". */
            if (done->len > 0)
                g_ptr_array_remove_index(done, done->len - 1);
            continue;
        }
        g_ptr_array_add(done, g_steal_pointer(&comp));
        cur = av_root_join_done(done);
        host = av_root_host_path(root, cur);
        if (lstat(host, &st) < 0) {
            r = -errno;
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n;

            if (++links > AV_ROOT_MAX_LINKS) {
                r = -ELOOP;
                break;
            }
            n = readlink(host, target, sizeof(target) - 1);
            if (n < 0) {
                r = -errno;
                break;
            }
            target[n] = '\0';
            g_ptr_array_remove_index(done, done->len - 1);
            if (target[0] == '/')
                g_ptr_array_set_size(done, 0);
            av_root_queue_components(&todo, target);
            continue;
        }
        if (!S_ISDIR(st.st_mode) && !g_queue_is_empty(&todo)) {
            r = -ENOTDIR;
            break;
        }
    }
    g_queue_clear_full(&todo, g_free);
    if (r < 0)
        return r;
    *ret_resolved = av_root_join_done(done);
    return 0;
}

/* The root-relative @path as openat2() takes it under the prefix's fd:
 * relative, without empty and "." components, as the walk skips them ("a/"
 * and "a/." name the file a there, not -ENOTDIR); "." for the root itself.
 * The caller frees. */
static char *
av_root_relative(const char *path)
{
    GString *s = g_string_sized_new(strlen(path));

    for (const char *p = path; *p;) {
        const char *end = strchrnul(p, '/');
        gsize len = (gsize)(end - p);

        if (len > 0 && !(len == 1 && *p == '.')) {
            if (s->len > 0)
                g_string_append_c(s, '/');
            g_string_append_len(s, p, (gssize)len);
        }
        p = *end ? end + 1 : end;
    }
    if (s->len == 0)
        g_string_append_c(s, '.');
    return g_string_free(s, FALSE);
}

/* Opens the root-relative @path, resolved inside the root, with @flags
 * (O_CLOEXEC added).  By the kernel where it can (openat2(2),
 * RESOLVE_IN_ROOT: absolute links and ".." stay under the prefix's fd, as
 * in the walk; RESOLVE_NO_MAGICLINKS: no /proc/PID/fd jump out of it),
 * else by the walk and an open of the resolved path.  Returns the fd or
 * -errno: -ENOENT, -ENOTDIR, -ELOOP after 40 links, as the walk. */
static int
av_root_open_at(const AvRoot *root, const char *path, int flags)
{
    g_autofree char *resolved = NULL;
    g_autofree char *host = NULL;
    int r, fd;

    g_return_val_if_fail(path && path[0] == '/', -EINVAL);

#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)
    if (root->fd >= 0) {
        g_autofree char *rel = av_root_relative(path);
        struct open_how how = {
            .flags = (guint64)(flags | O_CLOEXEC),
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };

        for (guint i = 0; i < AV_ROOT_OPENAT2_TRIES; i++) {
            fd = (int)syscall(SYS_openat2, root->fd, rel, &how, sizeof(how));
            if (fd >= 0)
                return fd;
            if (errno != EAGAIN && errno != EINTR)
                return -errno;
        }
        /* Renames racing the lookup (or a lease: EWOULDBLOCK is EAGAIN)
         * made openat2() give up.  Under a fake tree the walk below is
         * not safe against a directory swapped for a link meanwhile, and
         * anyone who may rename in the tree can force this: fail instead.
         * Under "/" no link leads outside the root. */
        if (!root->is_host)
            return -EAGAIN;
    }
#endif
    r = av_root_resolve_walk(root, path, &resolved);
    if (r < 0)
        return r;
    host = av_root_host_path(root, resolved);
    /* O_NOFOLLOW: the resolved path holds no link, unless one was planted
     * since; then it is refused, never followed outside. */
    fd = open(host, flags | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* What the kernel names the file of @fd (/proc/self/fd/N), or NULL when
 * it cannot say (no /proc, a deleted or unreachable file). */
static char *
av_root_fd_name(int fd)
{
    char link[64], target[PATH_MAX];
    ssize_t n;

    g_snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target));
    if (n <= 0 || (size_t)n >= sizeof(target) || target[0] != '/')
        return NULL;
    target[n] = '\0';
    if (g_str_has_suffix(target, " (deleted)"))
        return NULL;
    return g_strdup(target);
}

int
av_root_resolve(const AvRoot *root, const char *path, char **ret_resolved)
{
    g_autofree char *name = NULL;
    const char *rest;
    int fd;

    g_return_val_if_fail(path && path[0] == '/', -EINVAL);

    if (root->fd < 0 || !root->fd_name)
        return av_root_resolve_walk(root, path, ret_resolved);
    fd = av_root_open_at(root, path, O_PATH);
    if (fd < 0)
        return fd;
    name = av_root_fd_name(fd);
    close(fd);
    /* The kernel's name of the file, less the prefix's. */
    if (name && root->is_host)
        rest = name;
    else if (name && g_str_has_prefix(name, root->fd_name) &&
             (name[strlen(root->fd_name)] == '/' || name[strlen(root->fd_name)] == '\0'))
        rest = name + strlen(root->fd_name);
    else
        return av_root_resolve_walk(root, path, ret_resolved);
    *ret_resolved = g_strdup(*rest ? rest : "/");
    return 0;
}

/* Opens the root-relative @path, resolved inside the root, with @flags,
 * for reading or writing an attribute: regular files only. */
static int
av_root_open(const AvRoot *root, const char *path, int flags)
{
    struct stat st;
    int r, fd;

    /* O_NONBLOCK so that a FIFO planted in a tree cannot hang us; then only
     * regular files are accepted, as every sysfs attribute is one. */
    fd = av_root_open_at(root, path, flags | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    }
    /* Back to blocking reads and writes: sysfs attributes may block briefly.
     * (The status flags are the ones just opened with: no F_GETFL.) */
    if (fcntl(fd, F_SETFL, (flags | O_NOCTTY) & ~O_NONBLOCK) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int
av_root_read_file(const AvRoot *root, const char *path, char **ret_contents, gsize *ret_len)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    int fd;

    fd = av_root_open(root, path, O_RDONLY);
    if (fd < 0)
        return fd;
    for (;;) {
        guint8 chunk[8192];
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        if (buf->len + (gsize)n > AV_ROOT_MAX_READ) {
            close(fd);
            return -EFBIG;
        }
        g_byte_array_append(buf, chunk, (guint)n);
    }
    close(fd);
    if (ret_len)
        *ret_len = buf->len;
    g_byte_array_append(buf, (const guint8 *)"", 1);
    *ret_contents = (char *)g_byte_array_free(g_steal_pointer(&buf), FALSE);
    return 0;
}

int
av_root_read_attr(const AvRoot *root, const char *path, char **ret_value)
{
    char *contents = NULL;
    int r;

    r = av_root_read_file(root, path, &contents, NULL);
    if (r < 0)
        return r;
    g_strchomp(contents);
    *ret_value = contents;
    return 0;
}

int
av_root_read_uint(const AvRoot *root, const char *path, guint base, guint64 *ret_value)
{
    g_autofree char *value = NULL;
    const char *digits;
    guint64 v;
    int r;

    r = av_root_read_attr(root, path, &value);
    if (r < 0)
        return r;
    digits = value;
    if ((base == 0 || base == 16) && (g_str_has_prefix(value, "0x") || g_str_has_prefix(value, "0X"))) {
        digits = value + 2;
        base = 16;
    } else if (base == 0) {
        base = 10;
    }
    if (!g_ascii_string_to_unsigned(digits, base, 0, G_MAXUINT64, &v, NULL))
        return value[0] == '-' ? -ERANGE : -EINVAL;
    *ret_value = v;
    return 0;
}

int
av_root_read_int(const AvRoot *root, const char *path, gint64 *ret_value)
{
    g_autofree char *value = NULL;
    gint64 v;
    int r;

    r = av_root_read_attr(root, path, &value);
    if (r < 0)
        return r;
    if (!g_ascii_string_to_signed(value, 10, G_MININT64, G_MAXINT64, &v, NULL))
        return -EINVAL;
    *ret_value = v;
    return 0;
}

/* See av-root.h. */
int
av_root_boot_time(const AvRoot *root, gint64 *ret_btime)
{
    g_autofree char *path = av_proc_path("stat");
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    int r;

    r = av_root_read_file(root, path, &text, NULL);
    if (r < 0)
        return r;
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        gint64 v;

        if (!g_str_has_prefix(lines[i], "btime "))
            continue;
        if (!g_ascii_string_to_signed(g_strstrip(lines[i] + strlen("btime ")), 10, 1, G_MAXINT64, &v, NULL))
            return -EINVAL;
        *ret_btime = v;
        return 0;
    }
    return -ENOENT;
}

int
av_root_boot_id(const AvRoot *root, char **ret_boot_id)
{
    g_autofree char *path = av_proc_path("sys/kernel/random/boot_id");
    g_autofree char *value = NULL;
    int r;

    r = av_root_read_attr(root, path, &value);
    if (r < 0)
        return r;
    for (char *p = value; *p; p++)
        *p = g_ascii_tolower(*p);
    /* The form pool.json accepts (8-4-4-4-12), or none. */
    if (!av_uuid_is_valid(value))
        return -EINVAL;
    *ret_boot_id = g_steal_pointer(&value);
    return 0;
}

int
av_root_link_name(const AvRoot *root, const char *path, char **ret_name)
{
    g_autofree char *resolved = NULL;
    int r;

    /* (Resolving found the target: it exists.) */
    r = av_root_resolve(root, path, &resolved);
    if (r < 0)
        return r;
    if (g_str_equal(resolved, "/"))
        return -EINVAL;
    *ret_name = g_path_get_basename(resolved);
    return 0;
}

int
av_root_link_name_text(const AvRoot *root, const char *path, char **ret_name)
{
    g_autofree char *target = NULL;
    g_autofree char *base = NULL;
    int r;

    r = av_root_link_name(root, path, ret_name);
    if (r != -ENOENT)
        return r;
    r = av_root_read_link(root, path, &target);
    if (r < 0)
        return r;
    base = g_path_get_basename(target);
    if (!*base || g_str_equal(base, "/") || g_str_equal(base, ".") || g_str_equal(base, ".."))
        return -EINVAL;
    *ret_name = g_steal_pointer(&base);
    return 0;
}

int
av_root_read_link(const AvRoot *root, const char *path, char **ret_target)
{
    g_autofree char *dir = NULL;
    g_autofree char *base = NULL;
    char target[PATH_MAX];
    ssize_t n;
    int fd;

    g_return_val_if_fail(path && path[0] == '/', -EINVAL);

    base = g_path_get_basename(path);
    if (g_str_equal(base, "/") || g_str_equal(base, ".") || g_str_equal(base, ".."))
        return -EINVAL;
    dir = g_path_get_dirname(path);
    fd = av_root_open_at(root, dir, O_PATH);
    if (fd < 0)
        return fd;
    n = readlinkat(fd, base, target, sizeof(target));
    if (n < 0)
        n = -errno;
    close(fd);
    if (n < 0)
        return (int)n;
    if ((size_t)n >= sizeof(target))
        return -ENAMETOOLONG;
    target[n] = '\0';
    *ret_target = g_strdup(target);
    return 0;
}

static gint
av_strcmp_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
av_root_list_dir(const AvRoot *root, const char *path, char ***ret_names)
{
    g_autoptr(GPtrArray) names = NULL;
    int fd;

    fd = av_root_open_at(root, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
    if (fd < 0)
        return fd;
    names = g_ptr_array_new_with_free_func(g_free);
    /* getdents64(2) on the fd itself: opendir() would stat and fcntl it
     * again, two calls more for each of the thousands of directories. */
    for (;;) {
        guint64 buf[2048];  /* (aligned for struct dirent64) */
        ssize_t n = getdents64(fd, buf, sizeof(buf));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;

            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *entry = (const struct dirent64 *)(gpointer)((char *)buf + off);

            off += entry->d_reclen;
            if (g_str_equal(entry->d_name, ".") || g_str_equal(entry->d_name, ".."))
                continue;
            g_ptr_array_add(names, g_strdup(entry->d_name));
        }
    }
    close(fd);
    g_ptr_array_sort(names, av_strcmp_ptr);
    g_ptr_array_add(names, NULL);
    g_ptr_array_set_free_func(names, NULL);
    *ret_names = (char **)g_ptr_array_free(g_steal_pointer(&names), FALSE);
    return 0;
}

gboolean
av_root_exists(const AvRoot *root, const char *path)
{
    int fd = av_root_open_at(root, path, O_PATH);

    if (fd < 0)
        return FALSE;
    close(fd);
    return TRUE;
}

int
av_root_write_attr(const AvRoot *root, const char *path, const char *value)
{
    size_t len = strlen(value);
    ssize_t n;
    int fd, r = 0;

    fd = av_root_open(root, path, O_WRONLY);
    if (fd < 0)
        return fd;
    do {
        n = write(fd, value, len);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        r = -errno;
    else if ((size_t)n != len)
        r = -EIO;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}
