/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: runs a harness over files instead of libFuzzer.
 *
 *   replay-NAME PATH...   each PATH a file or a directory of files
 *   replay-NAME           $AV_TEST_SRCDIR/fuzz/corpus/NAME (as `make check` runs it)
 *
 * Calls LLVMFuzzerTestOneInput() once per file, in name order, and prints
 * one TAP line per PATH ("ok 1 - corpus/domain: 231 inputs").  An input
 * that breaks a property aborts the program (the name of the input last
 * started is the last "# NAME" comment before it). */
#include "config.h"

#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
av_replay_cmp(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static guint
av_replay_file(const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;

    printf("# %s\n", path);
    fflush(stdout);
    if (!g_file_get_contents(path, &data, &len, &error)) {
        printf("Bail out! cannot read '%s': %s\n", path, error->message);
        exit(1);
    }
    /* An exact copy, so that ASan sees a read past the end. */
    {
        g_autofree uint8_t *copy = g_memdup2(data, len ? len : 1);

        LLVMFuzzerTestOneInput(copy, len);
    }
    return 1;
}

int
main(int argc, char **argv)
{
    g_autofree char *self = g_path_get_basename(argv[0]);
    g_autofree char *corpus = NULL;
    char *fallback[] = { argv[0], NULL, NULL };

    LLVMFuzzerInitialize(&argc, &argv);
    if (argc == 1) {
        const char *srcdir = g_getenv("AV_TEST_SRCDIR");

        if (!srcdir || !g_str_has_prefix(self, "replay-")) {
            printf("Bail out! usage: replay-NAME PATH..., or AV_TEST_SRCDIR set (make check)\n");
            return 1;
        }
        corpus = g_build_filename(srcdir, "fuzz", "corpus", self + strlen("replay-"), NULL);
        fallback[1] = corpus;
        argv = fallback;
        argc = 2;
    }
    for (int i = 1; i < argc; i++) {
        guint n = 0;

        if (g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
            g_autoptr(GDir) dir = g_dir_open(argv[i], 0, NULL);
            const char *name;

            while (dir && (name = g_dir_read_name(dir)))
                g_ptr_array_add(names, g_build_filename(argv[i], name, NULL));
            g_ptr_array_sort(names, av_replay_cmp);
            for (guint j = 0; j < names->len; j++)
                n += av_replay_file(g_ptr_array_index(names, j));
        } else {
            n += av_replay_file(argv[i]);
        }
        printf("%s %d - %s: %u inputs\n", n ? "ok" : "not ok", i, argv[i], n);
    }
    printf("1..%d\n", argc - 1);
    return 0;
}
