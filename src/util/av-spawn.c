/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: starting a program detached from its caller (the hook's
 * scrub worker; libvirtd must never wait for it, docs/hooks.rst). */
#include "config.h"

#include "av-spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-root.h"

/* Closes every descriptor from 3 up. */
static void
av_spawn_close_fds(void)
{
    long max = sysconf(_SC_OPEN_MAX);

    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++)
        close(fd);
}

/* See av-spawn.h.  The classic daemon start: the first child calls setsid()
 * (no controlling terminal, a session of its own) and forks the program,
 * then exits; the caller reaps the first child. */
gboolean
av_spawn_detached(const char *path, GError **error)
{
    g_autoptr(AvRoot) host_root = NULL;
    g_autofree char *devnull = NULL;
    char *null_path;
    pid_t pid;
    int status;

    /* The host's own /dev/null, whatever root prefix the devices live under. */
    host_root = av_root_new(NULL, error);
    if (!host_root)
        return FALSE;
    null_path = av_dev_path("null");
    devnull = av_root_host_path(host_root, null_path);
    /* Freed before the fork: the children leave by _exit(). */
    g_free(null_path);
    g_clear_pointer(&host_root, av_root_free);
    if (access(path, X_OK) < 0)
        return av_error_errno(error, -errno, "cannot run '%s'", path);

    pid = fork();
    if (pid < 0)
        return av_error_errno(error, -errno, "cannot fork");
    if (pid == 0) {
        pid_t child;

        if (setsid() < 0)
            _exit(1);
        child = fork();
        if (child < 0)
            _exit(1);
        if (child == 0) {
            char *argv[] = { (char *)path, NULL };
            int fd;

            if (chdir("/") < 0)
                _exit(1);
            fd = open(devnull, O_RDWR);
            if (fd < 0)
                _exit(1);
            if (dup2(fd, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
                _exit(1);
            av_spawn_close_fds();
            umask(077);
            execv(path, argv);
            _exit(127);
        }
        g_free(devnull);    /* (for valgrind: _exit() runs no cleanup) */
        _exit(0);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return av_error_errno(error, -errno, "cannot wait for the parent of '%s'", path);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot start a detached process for '%s'",
                    path);
        return FALSE;
    }
    return TRUE;
}
