/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: running an operator's program with a timeout, its output
 * captured (see av-command.h). */
#include "config.h"

#include "av-command.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "util/av-error.h"

/* Appends @n bytes to @buf, keeping only its last AV_COMMAND_OUTPUT_MAX
 * bytes (trimmed in batches so that a chatty program costs linear time). */
static void
av_command_output_append(GByteArray *buf, const guint8 *data, gsize n)
{
    g_byte_array_append(buf, data, (guint)n);
    if (buf->len > 2 * AV_COMMAND_OUTPUT_MAX)
        g_byte_array_remove_range(buf, 0, buf->len - AV_COMMAND_OUTPUT_MAX);
}

/* The captured output as valid UTF-8, its last AV_COMMAND_OUTPUT_MAX bytes,
 * trailing white space removed.  Caller frees. */
static char *
av_command_output_text(GByteArray *buf)
{
    guint start = buf->len > AV_COMMAND_OUTPUT_MAX ? buf->len - AV_COMMAND_OUTPUT_MAX : 0;
    char *text;

    if (buf->len == 0)
        return g_strdup("");
    text = g_utf8_make_valid((const char *)buf->data + start, buf->len - start);

    return g_strchomp(text);
}

char *
av_command_one_line(const char *text)
{
    gsize len = strlen(text);
    const char *start = text;
    char *line;

    if (len > AV_COMMAND_LINE_OUTPUT_MAX) {
        start = text + len - AV_COMMAND_LINE_OUTPUT_MAX;
        while (*start && (*start & 0xc0) == 0x80)
            start++;
    }
    line = g_strdup(start);
    for (char *p = line; *p; p++)
        if ((guchar)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return g_strstrip(line);
}

/* Runs in the child between fork and exec: a process group of its own, so
 * that a timeout kills whatever the program started too. */
static void
av_command_child_setup(gpointer data G_GNUC_UNUSED)
{
    setpgid(0, 0);
}

gboolean
av_command_run(const char *const *argv, const char *const *envp, guint timeout_s, int pass_fd,
               char **ret_output, double *ret_seconds, GError **error)
{
    const int target_fds[] = { 3 };
    g_autoptr(GByteArray) output = g_byte_array_new();
    g_autofree char *text = NULL;
    g_autofree char *tail = NULL;
    g_auto(GStrv) own_env = NULL;
    GError *spawn_error = NULL;
    int pipefd[2];
    GPid pid;
    gint64 started = g_get_monotonic_time();
    gint64 deadline;
    gboolean timed_out = FALSE, eof = FALSE, exited = FALSE;
    int status = 0;

    if (ret_output)
        *ret_output = g_strdup("");
    if (ret_seconds)
        *ret_seconds = 0;
    if (!argv || !argv[0]) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "no program to run");
        return FALSE;
    }
    if (!envp) {
        own_env = g_get_environ();
        envp = (const char *const *)own_env;
    }
    if (!g_unix_open_pipe(pipefd, FD_CLOEXEC, error))
        return FALSE;
    if (!g_spawn_async_with_pipes_and_fds("/", argv, envp, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL,
                                          av_command_child_setup, NULL, -1, pipefd[1], pipefd[1],
                                          pass_fd >= 0 ? &pass_fd : NULL, pass_fd >= 0 ? target_fds : NULL,
                                          pass_fd >= 0 ? 1 : 0, &pid, NULL, NULL, NULL, &spawn_error)) {
        close(pipefd[0]);
        close(pipefd[1]);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot run '%s': %s", argv[0], spawn_error->message);
        g_error_free(spawn_error);
        return FALSE;
    }
    close(pipefd[1]);
    /* The child may not have reached setpgid() yet: do it from here too, so
     * that a kill of the group never misses it. */
    setpgid(pid, pid);
    g_unix_set_fd_nonblocking(pipefd[0], TRUE, NULL);

    deadline = started + (gint64)timeout_s * G_USEC_PER_SEC;
    while (!exited) {
        struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
        gint64 left_ms = (deadline - g_get_monotonic_time()) / 1000;
        pid_t r;

        if (left_ms <= 0) {
            timed_out = TRUE;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        if (!eof && poll(&pfd, 1, (int)MIN(left_ms, 50)) > 0) {
            guint8 chunk[4096];
            ssize_t n = read(pipefd[0], chunk, sizeof(chunk));

            if (n > 0)
                av_command_output_append(output, chunk, (gsize)n);
            else if (n == 0)
                eof = TRUE;
        } else if (eof) {
            g_usleep(10 * 1000);
        }
        r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            exited = TRUE;
    }
    /* Whatever the program left running in its group goes with it. */
    kill(-pid, SIGKILL);
    for (;;) {
        guint8 chunk[4096];
        ssize_t n = read(pipefd[0], chunk, sizeof(chunk));

        if (n <= 0)
            break;
        av_command_output_append(output, chunk, (gsize)n);
    }
    close(pipefd[0]);
    g_spawn_close_pid(pid);
    if (ret_seconds)
        *ret_seconds = (double)(g_get_monotonic_time() - started) / G_USEC_PER_SEC;

    text = av_command_output_text(output);
    tail = av_command_one_line(text);
    if (ret_output) {
        g_free(*ret_output);
        *ret_output = g_steal_pointer(&text);
    }
    if (timed_out) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "'%s' was killed after its timeout of %u s%s%s", argv[0],
                    timeout_s, *tail ? ": " : "", tail);
        return FALSE;
    }
    if (WIFSIGNALED(status)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "'%s' was killed by signal %d%s%s", argv[0],
                    WTERMSIG(status), *tail ? ": " : "", tail);
        return FALSE;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "'%s' exited with status %d%s%s", argv[0],
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1, *tail ? ": " : "", tail);
        return FALSE;
    }
    return TRUE;
}
