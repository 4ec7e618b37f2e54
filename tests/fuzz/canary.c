/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt sanitizer build: a program that does one wrong thing on
 * purpose, so that tests/fuzz/test-sanitizers.sh can check that each kind
 * of report reaches tests/fuzz/sanitized-test.sh and fails the test, also
 * from a process detached as the hook detaches its worker (stdin, stdout and
 * stderr on /dev/null, a session of its own, reparented to init).
 *
 *   canary leak|overflow|ubsan|none [detached] */
#include "config.h"

#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Not static, and read through a volatile pointer: the compiler may not see
 * through them. */
volatile int av_canary_int = INT_MAX;
char *volatile av_canary_ptr;

static int
av_canary(const char *what)
{
    if (g_str_equal(what, "leak")) {
        av_canary_ptr = g_malloc(64);
        strcpy(av_canary_ptr, "lost");
        av_canary_ptr = NULL;
        return 0;
    }
    if (g_str_equal(what, "overflow")) {
        char *p = g_malloc(8);
        volatile char c;

        av_canary_ptr = p;
        c = av_canary_ptr[8];
        g_free(p);
        return c;
    }
    if (g_str_equal(what, "ubsan")) {
        int i = av_canary_int;

        i += av_canary_int;
        return i == 0;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    pid_t pid;
    int fd;

    if (argc < 2)
        return 2;
    if (argc < 3 || !g_str_equal(argv[2], "detached"))
        return av_canary(argv[1]);
    pid = fork();
    if (pid != 0)
        return pid < 0;
    if (setsid() < 0 || fork() != 0)
        _exit(0);
    fd = open("/dev/null", O_RDWR);
    if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
        _exit(1);
    usleep(500 * 1000);
    exit(av_canary(argv[1]));
}
