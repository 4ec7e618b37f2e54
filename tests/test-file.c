/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: crash-safe files and locks (src/util/av-file.c), and the
 * error codes of a failed syscall and the exit status of each code
 * (av-error.c, av-exit.c). */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "av-test.h"
#include "util/av-error.h"
#include "util/av-exit.h"
#include "util/av-file.h"

static guint
test_count_entries(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;

    while (d && g_dir_read_name(d))
        n++;
    return n;
}

static char *
test_read(const char *path, gsize *ret_len)
{
    g_autoptr(GError) err = NULL;
    char *data = NULL;

    g_file_get_contents(path, &data, ret_len, &err);
    g_assert_no_error(err);
    return data;
}

static void
test_write_atomic_replaces(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "state.json", NULL);
    g_autofree char *first = NULL, *second = NULL;
    g_autoptr(GError) err = NULL;
    struct stat st;
    gsize len = 0;
    mode_t old_umask;

    g_assert_true(av_file_write_atomic(path, "one\n", 4, 0600, &err));
    g_assert_no_error(err);
    first = test_read(path, NULL);
    g_assert_cmpstr(first, ==, "one\n");
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0600);

    /* Replaced, shorter, with embedded NUL, and the mode honoured despite
     * the umask. */
    old_umask = umask(0077);
    g_assert_true(av_file_write_atomic(path, "t\0o", 3, 0644, &err));
    umask(old_umask);
    g_assert_no_error(err);
    second = test_read(path, &len);
    g_assert_cmpmem(second, len, "t\0o", 3);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0644);

    /* Empty contents are fine. */
    g_assert_true(av_file_write_atomic(path, "", 0, 0600, &err));
    g_assert_no_error(err);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);

    /* No temporary file is left. */
    g_assert_cmpuint(test_count_entries(dir), ==, 1);
    av_test_tmpdir_remove(dir);
}

static void
test_write_atomic_failure(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *sub = g_build_filename(dir, "ro", NULL);
    g_autofree char *path = g_build_filename(sub, "state.json", NULL);
    g_autofree char *missing = g_build_filename(dir, "no", "such", "file", NULL);
    g_autofree char *after = NULL;
    g_autoptr(GError) err = NULL;

    /* A directory that does not exist. */
    g_assert_false(av_file_write_atomic(missing, "x", 1, 0600, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, missing));
    g_clear_error(&err);

    /* An unwritable directory leaves the original as it was. */
    g_assert_cmpint(mkdir(sub, 0700), ==, 0);
    g_assert_true(av_file_write_atomic(path, "original", 8, 0600, &err));
    g_assert_cmpint(chmod(sub, 0500), ==, 0);
    if (access(sub, W_OK) == 0) {
        /* root writes anyway: the write failure below covers root */
        g_test_message("running as root: skipping the unwritable directory case");
    } else {
        g_assert_false(av_file_write_atomic(path, "new", 3, 0600, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_IO);
        g_assert_nonnull(strstr(err->message, "state.json.tmp."));
        g_clear_error(&err);
        after = test_read(path, NULL);
        g_assert_cmpstr(after, ==, "original");
        g_assert_cmpuint(test_count_entries(sub), ==, 1);
    }
    g_assert_cmpint(chmod(sub, 0700), ==, 0);

    /* A write that fails half-way (EFBIG past RLIMIT_FSIZE, in a child)
     * leaves the original and no temporary file. */
    {
        int status = 0;
        pid_t pid = fork();

        g_assert_cmpint(pid, >=, 0);
        if (pid == 0) {
            struct rlimit lim = { 1024, 1024 };
            g_autofree char *big = g_strnfill(8192, 'x');
            GError *child_err = NULL;

            signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &lim);
            if (av_file_write_atomic(path, big, 8192, 0600, &child_err))
                _exit(1);
            _exit(g_error_matches(child_err, AV_ERROR, AV_ERROR_IO) ? 0 : 2);
        }
        g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
        g_assert_true(WIFEXITED(status));
        g_assert_cmpint(WEXITSTATUS(status), ==, 0);
        g_clear_pointer(&after, g_free);
        after = test_read(path, NULL);
        g_assert_cmpstr(after, ==, "original");
        g_assert_cmpuint(test_count_entries(sub), ==, 1);
    }

    /* A path that is a directory: rename fails, the temp file is removed. */
    {
        g_autofree char *asdir = g_build_filename(dir, "adir", NULL);

        g_assert_cmpint(mkdir(asdir, 0700), ==, 0);
        av_test_write(asdir, "inside", "x");
        g_assert_false(av_file_write_atomic(asdir, "new", 3, 0600, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_IO);
        g_clear_error(&err);
        /* ro, adir: nothing else */
        g_assert_cmpuint(test_count_entries(dir), ==, 2);
    }
    av_test_tmpdir_remove(dir);
}

/* A file written held stays locked while its writer keeps the descriptor,
 * in this process and in a child that dies holding it; a reader then gets
 * the lock. */
static void
test_write_atomic_held(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "marker.json", NULL);
    g_autofree char *link = g_build_filename(dir, "link.json", NULL);
    g_autofree char *data = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    int fd, rfd = -1, status = 0;
    pid_t pid;

    fd = av_file_write_atomic_held(path, "{}", 2, 0600, &err);
    g_assert_no_error(err);
    g_assert_cmpint(fd, >=, 0);
    data = test_read(path, &len);
    g_assert_cmpmem(data, len, "{}", 2);
    /* Held: another open file description cannot have the lock. */
    g_assert_cmpint(av_file_open_unheld(path, &rfd), ==, 1);
    g_assert_cmpint(rfd, ==, -1);
    close(fd);
    g_assert_cmpint(av_file_open_unheld(path, &rfd), ==, 0);
    g_assert_cmpint(rfd, >=, 0);
    close(rfd);

    /* A writer that dies drops it. */
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        int cfd = av_file_write_atomic_held(path, "{\"a\":1}", 7, 0600, NULL);

        if (cfd < 0)
            _exit(1);
        raise(SIGSTOP);
        _exit(0);
    }
    g_assert_cmpint(waitpid(pid, &status, WUNTRACED), ==, pid);
    g_assert_true(WIFSTOPPED(status));
    rfd = -1;
    g_assert_cmpint(av_file_open_unheld(path, &rfd), ==, 1);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_cmpint(av_file_open_unheld(path, &rfd), ==, 0);
    close(rfd);

    /* Not a regular file, or a link: refused. */
    g_assert_cmpint(av_file_open_unheld(dir, &rfd), ==, -EINVAL);
    g_assert_cmpint(symlink(path, link), ==, 0);
    g_assert_cmpint(av_file_open_unheld(link, &rfd), ==, -ELOOP);
    g_assert_cmpint(av_file_open_unheld("/nonexistent/marker.json", &rfd), ==, -ENOENT);
    av_test_tmpdir_remove(dir);
}

static void
test_append_line(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autofree char *data = NULL, *after = NULL;
    g_autoptr(GError) err = NULL;
    struct stat st;

    g_assert_true(av_file_append_line(path, "{\"a\": 1}", 0600, &err));
    g_assert_no_error(err);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0600);
    g_assert_true(av_file_append_line(path, "second", 0644, &err));
    g_assert_true(av_file_append_line(path, "", 0600, &err));
    g_assert_no_error(err);
    data = test_read(path, NULL);
    g_assert_cmpstr(data, ==, "{\"a\": 1}\nsecond\n\n");

    /* A newline inside the line is refused and nothing is written. */
    g_assert_false(av_file_append_line(path, "two\nlines", 0600, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_false(av_file_append_line(path, "trailing\n", 0600, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    after = test_read(path, NULL);
    g_assert_cmpstr(after, ==, data);

    /* Into a directory that does not exist. */
    {
        g_autofree char *bad = g_build_filename(dir, "no", "j", NULL);

        g_assert_false(av_file_append_line(bad, "x", 0600, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
        g_clear_error(&err);
    }
    av_test_tmpdir_remove(dir);
}

/* Appends from several processes at once interleave whole lines only. */
static void
test_append_concurrent(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autofree char *data = NULL;
    g_auto(GStrv) lines = NULL;
    pid_t pids[4];
    guint n;

    for (guint p = 0; p < G_N_ELEMENTS(pids); p++) {
        pids[p] = fork();
        g_assert_cmpint(pids[p], >=, 0);
        if (pids[p] == 0) {
            g_autofree char *line = g_strnfill(200, (char)('a' + p));

            for (guint i = 0; i < 50; i++) {
                if (!av_file_append_line(path, line, 0600, NULL))
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (guint p = 0; p < G_N_ELEMENTS(pids); p++) {
        int status = 0;

        g_assert_cmpint(waitpid(pids[p], &status, 0), ==, pids[p]);
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    data = test_read(path, NULL);
    lines = g_strsplit(data, "\n", -1);
    n = g_strv_length(lines);
    g_assert_cmpuint(n, ==, 201);
    for (guint i = 0; i < 200; i++) {
        g_assert_cmpuint(strlen(lines[i]), ==, 200);
        g_assert_cmpuint(strspn(lines[i], lines[i] + 199), ==, 200);
    }
    av_test_tmpdir_remove(dir);
}

static void
test_ensure_dir(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *deep = g_build_filename(dir, "a", "b", "c", NULL);
    g_autofree char *file = g_build_filename(dir, "file", NULL);
    g_autoptr(GError) err = NULL;
    struct stat st;

    g_assert_true(av_file_ensure_dir(deep, 0700, &err));
    g_assert_no_error(err);
    g_assert_cmpint(stat(deep, &st), ==, 0);
    g_assert_true(S_ISDIR(st.st_mode));
    g_assert_cmpint(st.st_mode & 07777, ==, 0700);
    g_assert_true(av_file_ensure_dir(deep, 0700, &err));
    g_assert_no_error(err);
    av_test_write(dir, "file", "x");
    g_assert_false(av_file_ensure_dir(file, 0700, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    av_test_tmpdir_remove(dir);
}

typedef struct {
    const char *path;
    AvLockMode mode;
} TestLockArgs;

static gpointer
test_take_lock(gconstpointer data)
{
    const TestLockArgs *args = data;

    return av_lock_take(args->path, args->mode, -1, NULL);
}

/* A child takes the lock @mode on @path and holds it until the parent writes
 * to the returned pipe. */
static pid_t
test_hold_lock(const char *path, AvLockMode mode, int *ret_fd)
{
    const TestLockArgs args = { path, mode };

    return av_test_hold(test_take_lock, (GDestroyNotify)av_lock_release, &args, ret_fd);
}

static void
test_lock(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "pool.lock", NULL);
    g_autoptr(GError) err = NULL;
    struct stat st;
    gint64 start;
    int fd = -1;
    pid_t pid;

    /* Created if missing, 0600; released and taken again in one process. */
    {
        g_autoptr(AvLock) lock = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(lock);
        g_assert_cmpint(stat(path, &st), ==, 0);
        g_assert_cmpint(st.st_mode & 07777, ==, 0600);
    }
    av_lock_release(NULL);

    /* Exclusive in another process: both modes are busy, at once or after
     * the timeout. */
    pid = test_hold_lock(path, AV_LOCK_EXCLUSIVE, &fd);
    {
        g_autoptr(AvLock) ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

        g_assert_null(ex);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_assert_nonnull(strstr(err->message, path));
        g_clear_error(&err);
    }
    {
        g_autoptr(AvLock) sh = av_lock_take(path, AV_LOCK_SHARED, 0, &err);

        g_assert_null(sh);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    start = g_get_monotonic_time();
    {
        g_autoptr(AvLock) ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 100, &err);

        g_assert_null(ex);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    g_assert_cmpint(g_get_monotonic_time() - start, >=, 100 * 1000);
    av_test_hold_release(pid, fd);
    {
        g_autoptr(AvLock) ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(ex);
    }

    /* Shared locks coexist; an exclusive one waits for them. */
    pid = test_hold_lock(path, AV_LOCK_SHARED, &fd);
    {
        g_autoptr(AvLock) sh = av_lock_take(path, AV_LOCK_SHARED, 0, &err);
        g_autoptr(AvLock) ex = NULL;

        g_assert_no_error(err);
        g_assert_nonnull(sh);
        ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);
        g_assert_null(ex);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    av_test_hold_release(pid, fd);

    /* A waiting taker gets the lock once the holder lets go. */
    pid = test_hold_lock(path, AV_LOCK_EXCLUSIVE, &fd);
    {
        g_autoptr(AvLock) ex = NULL;
        int status = 0;

        g_assert_cmpint(write(fd, "g", 1), ==, 1);
        close(fd);
        ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 5000, &err);
        g_assert_no_error(err);
        g_assert_nonnull(ex);
        g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    }

    /* A holder that dies drops the lock. */
    pid = test_hold_lock(path, AV_LOCK_EXCLUSIVE, &fd);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);
    close(fd);
    {
        g_autoptr(AvLock) ex = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(ex);
    }

    /* A lock in a directory that does not exist. */
    {
        g_autofree char *bad = g_build_filename(dir, "no", "pool.lock", NULL);
        g_autoptr(AvLock) lock = av_lock_take(bad, AV_LOCK_SHARED, 0, &err);

        g_assert_null(lock);
        g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
        g_clear_error(&err);
    }
    av_test_tmpdir_remove(dir);
}

/* --- a lock file replaced under a waiting taker ------------------------------ */

typedef struct {
    const char *path;
    AvLock *lock;
    GError *error;
    gint done;
} TestTaker;

static gpointer
test_taker_run(gpointer data)
{
    TestTaker *t = data;

    t->lock = av_lock_take(t->path, AV_LOCK_EXCLUSIVE, 10000, &t->error);
    g_atomic_int_set(&t->done, 1);
    return NULL;
}

/* How many descriptors of this process are open on @path (by name, as
 * /proc/self/fd shows it). */
static guint
test_fds_on(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
    const char *name;
    guint n = 0;

    g_assert_nonnull(dir);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *link = g_build_filename("/proc/self/fd", name, NULL);
        g_autofree char *target = g_file_read_link(link, NULL);

        n += g_strcmp0(target, path) == 0;
    }
    return n;
}

/* Starts a thread taking @path exclusively and returns once it has opened
 * the file (our @holder being the first descriptor on it): it then waits
 * in flock(). */
static GThread *
test_taker_start(TestTaker *t, const char *path)
{
    GThread *thread;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    t->path = path;
    thread = g_thread_new("taker", test_taker_run, t);
    while (test_fds_on(path) < 2) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_assert_false(g_atomic_int_get(&t->done));
        g_usleep(1000);
    }
    return thread;
}

/* flock() locks the open file, not the name.  A taker that opened the lock
 * file and waits while the holder unlinks it (or a new file is renamed over
 * it) must not come back holding the old, nameless file: it must notice,
 * and lock the file at the path, so that two takers never both hold the
 * exclusive lock.  Old code: the taker returned at once with the old file,
 * while the path was gone or another process held the new file. */
static void
test_lock_replaced(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "pool.lock", NULL);
    g_autofree char *other = g_build_filename(dir, "pool.lock.new", NULL);
    g_autoptr(GError) err = NULL;

    if (!g_file_test("/proc/self/fd", G_FILE_TEST_IS_DIR)) {
        g_test_skip("needs /proc/self/fd to see the taker open the lock file");
        return;
    }

    /* The holder unlinks the file (or it is replaced by rename), then lets go. */
    for (guint how = 0; how < 2; how++) {
        TestTaker t = { 0 };
        AvLock *holder = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);
        GThread *thread;

        g_assert_no_error(err);
        thread = test_taker_start(&t, path);
        if (how == 0) {
            g_assert_cmpint(unlink(path), ==, 0);
        } else {
            av_test_write(dir, "pool.lock.new", "");
            g_assert_cmpint(rename(other, path), ==, 0);
        }
        av_lock_release(holder);
        g_thread_join(thread);
        g_assert_no_error(t.error);
        g_assert_nonnull(t.lock);
        /* It holds the file the path names now: nobody else gets it. */
        g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
        {
            g_autoptr(AvLock) again = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

            g_assert_null(again);
            g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
            g_clear_error(&err);
        }
        av_lock_release(t.lock);
    }

    /* Worse: once the file is unlinked, a third taker creates and locks a
     * new one.  When the first holder lets go, the waiting taker must keep
     * waiting, for the third, not return with the old file. */
    {
        TestTaker t = { 0 };
        AvLock *holder = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);
        AvLock *third;
        GThread *thread;

        g_assert_no_error(err);
        thread = test_taker_start(&t, path);
        g_assert_cmpint(unlink(path), ==, 0);
        third = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);
        g_assert_no_error(err);
        g_assert_nonnull(third);
        av_lock_release(holder);
        /* The old code returned within one 10 ms poll. */
        g_usleep(300 * 1000);
        g_assert_false(g_atomic_int_get(&t.done));
        av_lock_release(third);
        g_thread_join(thread);
        g_assert_no_error(t.error);
        g_assert_nonnull(t.lock);
        {
            g_autoptr(AvLock) again = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, &err);

            g_assert_null(again);
            g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
            g_clear_error(&err);
        }
        av_lock_release(t.lock);
    }
    av_test_tmpdir_remove(dir);
}

/* The kernel's EBUSY is something in use; EWOULDBLOCK a lock not free. */
static void
test_error_errno(void)
{
    static const struct {
        int neg_errno;
        AvErrorCode code;
    } cases[] = {
        { -ENOENT, AV_ERROR_NOT_FOUND },
        { -EBUSY, AV_ERROR_IN_USE },
        { -EWOULDBLOCK, AV_ERROR_LOCKED },
        { -EACCES, AV_ERROR_IO },
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) err = NULL;

        g_assert_false(av_error_errno(&err, cases[i].neg_errno, "cannot %s", "do it"));
        g_assert_error(err, AV_ERROR, (gint)cases[i].code);
        g_assert_true(g_str_has_prefix(err->message, "cannot do it: "));
    }
}

/* One status a meaning: 3 locked, 5 in use, 6 no capacity, never mixed. */
static void
test_exit_status(void)
{
    g_assert_cmpint(av_exit_status(AV_ERROR_FAILED), ==, 1);
    g_assert_cmpint(av_exit_status(AV_ERROR_NOT_FOUND), ==, 1);
    g_assert_cmpint(av_exit_status(AV_ERROR_IO), ==, 1);
    g_assert_cmpint(av_exit_status(AV_ERROR_UNSAFE), ==, 1);
    g_assert_cmpint(av_exit_status(AV_ERROR_STATE), ==, 1);
    g_assert_cmpint(av_exit_status(AV_ERROR_INVALID_INPUT), ==, 2);
    g_assert_cmpint(av_exit_status(AV_ERROR_POLICY), ==, 2);
    g_assert_cmpint(av_exit_status(AV_ERROR_LOCKED), ==, 3);
    g_assert_cmpint(av_exit_status(AV_ERROR_CORRUPT_STATE), ==, 4);
    g_assert_cmpint(av_exit_status(AV_ERROR_IN_USE), ==, 5);
    g_assert_cmpint(av_exit_status(AV_ERROR_NO_CAPACITY), ==, 6);
    g_assert_cmpint(av_exit_status(AV_ERROR_NO_CAPACITY + 1), ==, 1);
    g_assert_cmpint(av_exit_status(-1), ==, 1);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);

    g_test_add_func("/file/write-atomic/replaces", test_write_atomic_replaces);
    g_test_add_func("/file/write-atomic/failure", test_write_atomic_failure);
    g_test_add_func("/file/write-atomic/held", test_write_atomic_held);
    g_test_add_func("/file/append-line", test_append_line);
    g_test_add_func("/file/append-line/concurrent", test_append_concurrent);
    g_test_add_func("/file/ensure-dir", test_ensure_dir);
    g_test_add_func("/file/lock", test_lock);
    g_test_add_func("/file/lock/replaced", test_lock_replaced);
    g_test_add_func("/error/errno", test_error_errno);
    g_test_add_func("/error/exit-status", test_exit_status);
    return g_test_run();
}
