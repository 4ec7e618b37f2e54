/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: starting a program detached from its caller. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Starts @path (no arguments) detached, as a daemon starts: the first
 * child calls setsid() and forks the program, then exits, so that the
 * program is reparented to init and the caller (libvirtd, for the hook)
 * never waits for it; chdir "/", every descriptor from 3 up closed,
 * stdin, stdout and stderr on the host's /dev/null, umask 077, the
 * environment passed through.  Returns once the first child has exited
 * (at once).  FALSE with @error when @path is not executable or a fork
 * failed. */
gboolean av_spawn_detached(const char *path, GError **error);

G_END_DECLS
