/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: running an operator's program (a scrub "command" step, a
 * profile's "program" and its driver commands) with a timeout, its output
 * captured. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What a run keeps of a program's output: the last 4 KiB of its stdout and
 * stderr together. */
#define AV_COMMAND_OUTPUT_MAX 4096
/* How much of that output an error message (shown on one line) quotes. */
#define AV_COMMAND_LINE_OUTPUT_MAX 200

/* Runs @argv (NULL-terminated; argv[0] an absolute path, which the caller
 * has checked: it runs as root) with the environment @envp (NULL: the
 * caller's), stdin from /dev/null, stdout and stderr captured together into
 * one bounded buffer, in a process group of its own that is killed with
 * SIGKILL at @timeout_s seconds (and after the program exits: nothing it
 * started outlives it).  When @pass_fd >= 0 the program gets that file as
 * its fd 3 (the caller says so in @envp).  Exit status 0 is success;
 * otherwise FALSE with AV_ERROR_FAILED naming argv[0] and how it ended
 * ("exited with status N", "was killed by signal N", "was killed after its
 * timeout of N s"), followed by the tail of its output on one line.  Stores
 * the captured output (valid UTF-8, trailing white space removed) in
 * *ret_output (caller frees; may be NULL) either way, and the seconds it
 * ran in *ret_seconds (may be NULL). */
gboolean av_command_run(const char *const *argv, const char *const *envp, guint timeout_s, int pass_fd,
                        char **ret_output, double *ret_seconds, GError **error);

/* The tail of @text fit for one line: at most AV_COMMAND_LINE_OUTPUT_MAX
 * bytes (cut on a character boundary), every control character a space.
 * Caller frees. */
char *av_command_one_line(const char *text);

G_END_DECLS
