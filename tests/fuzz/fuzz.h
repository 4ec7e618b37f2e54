/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: what the harnesses share.
 *
 * Each harness (fuzz-*.c) defines LLVMFuzzerTestOneInput(); fuzz-common.c
 * defines LLVMFuzzerInitialize() for all.  A harness is linked two ways:
 *   - with clang's -fsanitize=fuzzer (configure --enable-fuzzers): the
 *     libFuzzer program that `make fuzz` runs (tests/fuzz/test-fuzz.sh);
 *   - with replay.c, in every build: a program that runs each file of the
 *     committed corpus once (tests/fuzz/test-corpus.sh, in `make check`),
 *     so that the inputs that once crashed stay regression tests even
 *     without clang.
 * A harness aborts (av_fuzz_assert) only on a broken promise of the code
 * under test: a crash, a sanitizer report, or a property its header states
 * (a parse that succeeds, serialised, must parse again). */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts, naming the broken property, when @cond is false. */
#define av_fuzz_assert(cond) \
    do { \
        if (!(cond)) \
            av_fuzz_fail(__FILE__, __LINE__, #cond); \
    } while (0)

G_NORETURN void av_fuzz_fail(const char *file, int line, const char *what);

/* A private directory (under $TMPDIR, else /dev/shm when it exists, else
 * /tmp), made once and removed at exit.  Owned by fuzz-common.c. */
const char *av_fuzz_tmpdir(void);

/* Writes @size bytes of @data into the file @name of @dir (mode 0600),
 * replacing it; aborts when it cannot (the machine, not the input). */
void av_fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t size);
