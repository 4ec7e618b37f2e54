/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the root prefix and link resolution inside it. */
#include "config.h"

#include "av-root.h"
#include "av-file.h"
#include "av-point.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "av-error.h"
#include "av-names.h"

#define AV_ROOT_MAX_LINKS 40
#define AV_ROOT_MAX_READ (16u * 1024u * 1024u)

struct AvRoot {
    char *prefix;   /* canonical, absolute, without a trailing '/' except for "/" */
    gboolean is_host;
};

AvRoot *
av_root_new(const char *prefix, GError **error)
{
    g_autoptr(AvRoot) root = g_new0(AvRoot, 1);
    g_autofree char *canon = NULL;
    char *real;

    if (!prefix || !*prefix || g_str_equal(prefix, "/")) {
        root->prefix = g_strdup("/");
        root->is_host = TRUE;
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

int
av_root_resolve(const AvRoot *root, const char *path, char **ret_resolved)
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

/* Opens the root-relative @path, resolved inside the root, with @flags. */
static int
av_root_open(const AvRoot *root, const char *path, int flags)
{
    g_autofree char *resolved = NULL;
    g_autofree char *host = NULL;
    struct stat st;
    int r, fd;

    r = av_root_resolve(root, path, &resolved);
    if (r < 0)
        return r;
    host = av_root_host_path(root, resolved);
    /* O_NONBLOCK so that a FIFO planted in a tree cannot hang us; then only
     * regular files are accepted, as every sysfs attribute is one. */
    fd = open(host, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    }
    /* Back to blocking reads and writes: sysfs attributes may block briefly. */
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
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
    g_autofree char *host = NULL;
    struct stat st;
    int r;

    r = av_root_resolve(root, path, &resolved);
    if (r < 0)
        return r;
    host = av_root_host_path(root, resolved);
    if (lstat(host, &st) < 0)
        return -errno;
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
    g_autofree char *resolved = NULL;
    g_autofree char *link = NULL;
    g_autofree char *host = NULL;
    char target[PATH_MAX];
    ssize_t n;
    int r;

    g_return_val_if_fail(path && path[0] == '/', -EINVAL);

    base = g_path_get_basename(path);
    if (g_str_equal(base, "/") || g_str_equal(base, ".") || g_str_equal(base, ".."))
        return -EINVAL;
    dir = g_path_get_dirname(path);
    r = av_root_resolve(root, dir, &resolved);
    if (r < 0)
        return r;
    link = g_build_filename(resolved, base, NULL);
    host = av_root_host_path(root, link);
    n = readlink(host, target, sizeof(target));
    if (n < 0)
        return -errno;
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
    g_autofree char *resolved = NULL;
    g_autofree char *host = NULL;
    g_autoptr(GPtrArray) names = NULL;
    GDir *dir;
    const char *name;
    GError *err = NULL;
    int r;

    r = av_root_resolve(root, path, &resolved);
    if (r < 0)
        return r;
    host = av_root_host_path(root, resolved);
    dir = g_dir_open(host, 0, &err);
    if (!dir) {
        r = err->code == G_FILE_ERROR_NOENT ? -ENOENT :
            err->code == G_FILE_ERROR_NOTDIR ? -ENOTDIR :
            err->code == G_FILE_ERROR_ACCES ? -EACCES : -EIO;
        g_error_free(err);
        return r;
    }
    names = g_ptr_array_new();
    while ((name = g_dir_read_name(dir)))
        g_ptr_array_add(names, g_strdup(name));
    g_dir_close(dir);
    g_ptr_array_sort(names, av_strcmp_ptr);
    g_ptr_array_add(names, NULL);
    *ret_names = (char **)g_ptr_array_free(g_steal_pointer(&names), FALSE);
    return 0;
}

gboolean
av_root_exists(const AvRoot *root, const char *path)
{
    g_autofree char *resolved = NULL;

    return av_root_resolve(root, path, &resolved) == 0;
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
