/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt-hold: the holder of one VFIO group (src/vfio/av-hold.h).
 *
 * Nobody runs it by hand: av_hold_take() forks and execs it with
 *
 *   fd 0, 1, 2   the host's /dev/null
 *   fd 3         the group file to hold (AV_HOLD_FD)
 *   fd 4         a stream socket to its taker (AV_HOLD_SOCKET_FD)
 *
 * and nothing else open, an empty environment, in a session of its own,
 * its parent gone (init, or the nearest subreaper, waits for it).  It
 * links no library of accelvirt's and only calls what a process that must
 * never be in the way needs.
 *
 *  1. oom_score_adj -1000 (proc(5): the OOM killer never picks it, so
 *     memory pressure never ends a hold).  Without CAP_SYS_RESOURCE the
 *     write fails: it holds all the same, with the value it has.
 *  2. Tells its taker "PID OOM_SCORE_ADJ\n" on fd 4 (AV_HOLD_WORD_*).
 *  3. Waits there for AV_HOLD_WORD_GO, the taker's word that the hold is
 *     recorded.  The socket closing first (the taker failed, or was killed
 *     at any instruction) ends it, and with it the hold: no holder lives
 *     without a record to drop it by.
 *  4. Answers AV_HOLD_WORD_READY, closes fd 4 and waits for SIGTERM
 *     (av_hold_drop()), keeping fd 3 open for pidfd_getfd(2) (av_hold_fd()). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-root.h"
#include "vfio/av-hold.h"

/* Sets this process's oom_score_adj to @value and returns the value it has
 * after (the one it had when the write is refused), or 0 when it cannot be
 * read. */
static int
hold_oom_score_adj(int value)
{
    char buf[32];
    ssize_t n;
    int fd, now = 0;

    fd = open(AV_PROC_SELF_OOM_SCORE_ADJ, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = snprintf(buf, sizeof(buf), "%d\n", value);
    if (write(fd, buf, (size_t)n) != n) {
        /* EACCES without CAP_SYS_RESOURCE: read what it is. */
    }
    if (lseek(fd, 0, SEEK_SET) == 0 && (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
        buf[n] = '\0';
        if (sscanf(buf, "%d", &now) != 1)
            now = 0;
    }
    close(fd);
    return now;
}

int
main(int argc, char **argv)
{
    struct stat st;
    sigset_t none;
    char word = 0, line[64];
    ssize_t n;
    int len, oom;

    (void)argc;
    (void)argv;
    /* Ignored signals and the mask survive exec(): SIGTERM must end it. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Its name is what liveness checks read (/proc/PID/comm): the same
     * whatever the file is called. */
    (void)prctl(PR_SET_NAME, AV_HOLD_COMM, 0, 0, 0);
    if (fstat(AV_HOLD_FD, &st) < 0 || fstat(AV_HOLD_SOCKET_FD, &st) < 0 || !S_ISSOCK(st.st_mode))
        return 2;
    oom = hold_oom_score_adj(AV_HOLD_OOM_SCORE_ADJ);
    len = snprintf(line, sizeof(line), "%d %d\n", (int)getpid(), oom);
    if (send(AV_HOLD_SOCKET_FD, line, (size_t)len, MSG_NOSIGNAL) != len)
        return 1;
    while ((n = read(AV_HOLD_SOCKET_FD, &word, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || word != AV_HOLD_WORD_GO)
        return 0;
    if (send(AV_HOLD_SOCKET_FD, (char[]){ AV_HOLD_WORD_READY }, 1, MSG_NOSIGNAL) != 1)
        return 1;
    close(AV_HOLD_SOCKET_FD);
    for (;;)
        pause();
}
