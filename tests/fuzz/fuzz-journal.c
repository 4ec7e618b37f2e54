/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: the journal, journal.jsonl of a state dir, as
 * `accelvirt journal verify` checks it (av_journal_verify()) and as the hook
 * appends to it (av_pool_journal_append(), which reads its tail, ends a torn
 * last line and acknowledges it).
 * Properties (av-pool.h), judged on the file's structure, never on the
 * wording of an error (an input may quote any wording):
 *   - an append leaves the journal ending in a newline;
 *   - a journal that verifies still verifies after an append, one entry
 *     longer;
 *   - a journal whose only fault is its torn last line verifies after an
 *     append: the writer ends the line and, when it is not a whole entry,
 *     records it with a torn-line entry.  ("Only fault": the lines before it
 *     verify, and the torn line is not a whole entry, or it is one that
 *     verifies once ended.) */
#include "config.h"

#include "fuzz.h"

#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* av_journal_verify() of @size bytes of @data written as the journal. */
static gboolean
av_fuzz_verifies(const char *dir, const uint8_t *data, size_t size, guint64 *ret_entries)
{
    av_fuzz_write(dir, "journal.jsonl", data, size);
    return av_journal_verify(dir, ret_entries, NULL);
}

/* What av-journal.c calls a whole entry: an object with an integer "seq"
 * from 1 and strings "time", "prev" and "event". */
static gboolean
av_fuzz_is_entry(const uint8_t *line, size_t len)
{
    g_autoptr(json_t) e = json_loadb((const char *)line, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *seq = json_object_get(e, "seq");

    return json_is_object(e) && json_is_integer(seq) && json_integer_value(seq) >= 1 &&
           json_is_string(json_object_get(e, "time")) && json_is_string(json_object_get(e, "prev")) &&
           json_is_string(json_object_get(e, "event"));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = av_fuzz_tmpdir();
    g_autofree char *pool_path = g_build_filename(dir, "pool.json", NULL);
    g_autofree char *journal_path = g_build_filename(dir, "journal.jsonl", NULL);
    g_autofree char *after_data = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(json_t) fields = NULL;
    guint64 before = 0, after = 0;
    gboolean ok, expect_ok = FALSE;
    gsize after_len = 0;

    ok = av_fuzz_verifies(dir, data, size, &before);
    if (!ok && size > 0 && data[size - 1] != '\n' && !memchr(data, '\0', size)) {
        const uint8_t *nl = memrchr(data, '\n', size);
        size_t prefix = nl ? (size_t)(nl + 1 - data) : 0;
        g_autofree uint8_t *ended = g_malloc(size + 1);

        memcpy(ended, data, size);
        ended[size] = '\n';
        if (av_fuzz_is_entry(data + prefix, size - prefix))
            expect_ok = av_fuzz_verifies(dir, ended, size + 1, NULL);
        else
            expect_ok = av_fuzz_verifies(dir, data, prefix, NULL);
    }
    av_fuzz_write(dir, "journal.jsonl", data, size);

    /* A writer's open makes the journal ready (av_journal_prepare()): one
     * that cannot take an entry stops it there, or else at the append. */
    unlink(pool_path);
    pool = av_pool_open(dir, AV_POOL_WRITE, 0, &error);
    fields = json_pack("{s:s}", "identity", "fuzz");
    if (!pool || !av_pool_journal_append(pool, "fuzz", fields, &error)) {
        av_fuzz_assert(error->domain == AV_ERROR && error->code == AV_ERROR_CORRUPT_STATE);
        av_fuzz_assert(!ok && !expect_ok);
        return 0;
    }
    g_clear_pointer(&pool, av_pool_free);

    av_fuzz_assert(g_file_get_contents(journal_path, &after_data, &after_len, NULL));
    av_fuzz_assert(after_len > 0 && after_data[after_len - 1] == '\n');
    if (!av_journal_verify(dir, &after, &error)) {
        if (ok || expect_ok) {
            g_printerr("the journal does not verify after an append: %s\n", error->message);
            av_fuzz_assert(!"an append keeps the chain");
        }
    } else if (ok) {
        av_fuzz_assert(after == before + 1);
    }
    return 0;
}
