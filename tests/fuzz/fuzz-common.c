/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: the helpers of fuzz.h. */
#include "config.h"

#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/parser.h>

static char *av_fuzz_dir;

void
av_fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: property broken: %s\n", file, line, what);
    abort();
}

static void
av_fuzz_remove_dir(void)
{
    g_autoptr(GDir) dir = NULL;
    const char *name;

    if (!av_fuzz_dir)
        return;
    dir = g_dir_open(av_fuzz_dir, 0, NULL);
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(av_fuzz_dir, name, NULL);

        unlink(path);
    }
    rmdir(av_fuzz_dir);
    g_clear_pointer(&av_fuzz_dir, g_free);
}

/* See fuzz.h.  Owned here; removed at exit (libFuzzer leaves by exit()). */
const char *
av_fuzz_tmpdir(void)
{
    if (!av_fuzz_dir) {
        const char *base = g_getenv("TMPDIR");
        g_autofree char *tmpl = NULL;

        if (!base || !*base)
            base = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : "/tmp";
        tmpl = g_build_filename(base, "accelvirt-fuzz.XXXXXX", NULL);
        if (!g_mkdtemp_full(tmpl, 0700)) {
            fprintf(stderr, "cannot make a directory under '%s': %s\n", base, g_strerror(errno));
            abort();
        }
        av_fuzz_dir = g_steal_pointer(&tmpl);
        atexit(av_fuzz_remove_dir);
    }
    return av_fuzz_dir;
}

/* See fuzz.h. */
void
av_fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t size)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) error = NULL;

    unlink(path);
    if (!g_file_set_contents_full(path, (const char *)data, (gssize)size, G_FILE_SET_CONTENTS_NONE, 0600,
                                  &error)) {
        fprintf(stderr, "cannot write '%s': %s\n", path, error->message);
        abort();
    }
}

static void
av_fuzz_xml_silent(void *ctx, const char *msg, ...)
{
}

/* Called once by libFuzzer (and replay.c) before the first input: GLib's
 * criticals and warnings fatal (a g_return_if_fail() that any input reaches
 * is a bug), libxml2 quiet. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
    xmlSetGenericErrorFunc(NULL, av_fuzz_xml_silent);
    return 0;
}
