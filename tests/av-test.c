/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: shared helpers. */
#include "config.h"

#include "av-test.h"
#include "doubles/av-doubles.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *
av_test_env(const char *name)
{
    const char *v = g_getenv(name);

    if (!v || !*v)
        g_error("%s is not set: run the tests with 'make check'", name);
    return v;
}

void
av_test_init(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    /* The emulated kernel and the tests' points (its constructor has done
     * it already: the call is what links it into every unit test). */
    av_doubles_register();
    av_test_env("AV_TEST_SRCDIR");
    av_test_env("AV_TEST_HOSTS");
}

char *
av_test_srcdir_path(const char *rel)
{
    return g_build_filename(av_test_env("AV_TEST_SRCDIR"), rel, NULL);
}

char *
av_test_host_path(const char *name)
{
    char *p = g_build_filename(av_test_env("AV_TEST_HOSTS"), name, NULL);

    if (!g_file_test(p, G_FILE_TEST_IS_DIR))
        g_error("fake host '%s' was not generated (run 'make check', which runs tests/data/mkhosts.py)", p);
    return p;
}

char *
av_test_tmpdir(void)
{
    g_autoptr(GError) err = NULL;
    char *dir = g_dir_make_tmp("accelvirt-test-XXXXXX", &err);

    g_assert_no_error(err);
    return dir;
}

static void
av_test_run(const char *const *argv)
{
    g_autoptr(GError) err = NULL;
    int status = 0;

    g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, &err);
    g_assert_no_error(err);
    g_spawn_check_wait_status(status, &err);
    g_assert_no_error(err);
}

void
av_test_tmpdir_remove(const char *dir)
{
    const char *argv[] = { "rm", "-rf", "--", dir, NULL };

    if (!dir || !g_str_has_prefix(dir, g_get_tmp_dir()))
        return;
    av_test_run(argv);
}

char *
av_test_host_copy(const char *name)
{
    g_autofree char *src = av_test_host_path(name);
    g_autofree char *dot = g_build_filename(src, ".", NULL);
    char *dir = av_test_tmpdir();
    const char *argv[] = { "cp", "-a", "--", dot, dir, NULL };

    av_test_run(argv);
    return dir;
}

void
av_test_write(const char *dir, const char *rel, const char *contents)
{
    g_autofree char *path = g_build_filename(dir, rel, NULL);
    g_autofree char *parent = g_path_get_dirname(path);
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(g_mkdir_with_parents(parent, 0755), ==, 0);
    g_file_set_contents(path, contents, -1, &err);
    g_assert_no_error(err);
}

void
av_test_symlink(const char *dir, const char *rel, const char *target)
{
    g_autofree char *path = g_build_filename(dir, rel, NULL);
    g_autofree char *parent = g_path_get_dirname(path);

    g_assert_cmpint(g_mkdir_with_parents(parent, 0755), ==, 0);
    if (symlink(target, path) < 0)
        g_error("symlink %s -> %s: %s", path, target, g_strerror(errno));
}

pid_t
av_test_hold(AvTestTakeFunc take, GDestroyNotify release, gconstpointer data, int *ret_fd)
{
    int ready[2], go[2];
    char c = 0;
    pid_t pid;

    g_assert_cmpint(pipe(ready), ==, 0);
    g_assert_cmpint(pipe(go), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        gpointer held = take(data);

        close(ready[0]);
        close(go[1]);
        if (!held)
            _exit(2);
        if (write(ready[1], "r", 1) != 1)
            _exit(3);
        if (read(go[0], &c, 1) < 0)
            _exit(4);
        release(held);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    g_assert_cmpint(read(ready[0], &c, 1), ==, 1);
    close(ready[0]);
    *ret_fd = go[1];
    return pid;
}

void
av_test_hold_release(pid_t pid, int fd)
{
    int status = 0;

    g_assert_cmpint(write(fd, "g", 1), ==, 1);
    close(fd);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}
