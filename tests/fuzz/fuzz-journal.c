/* accelvirt fuzzing: the journal, journal.jsonl of a state dir, as
 * `accelvirt journal verify` checks it (av_journal_verify()) and as the hook
 * appends to it (av_pool_journal_append(), which reads its tail, ends a torn
 * last line and acknowledges it).
 * Properties (av-pool.h):
 *   - a journal that verifies still verifies after an append, one entry
 *     longer;
 *   - a journal whose only fault is a torn last line verifies after an
 *     append (the writer ends the line and records it);
 *   - an append never leaves a torn last line behind. */
#include "config.h"

#include "fuzz.h"

#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = av_fuzz_tmpdir();
    g_autofree char *pool_path = g_build_filename(dir, "pool.json", NULL);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) before_err = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(json_t) fields = NULL;
    guint64 before = 0, after = 0;
    gboolean ok, torn_only;

    av_fuzz_write(dir, "journal.jsonl", data, size);
    ok = av_journal_verify(dir, &before, &before_err);
    av_fuzz_assert(ok == (before_err == NULL));
    torn_only = !ok && strstr(before_err->message, "the last line is torn") != NULL;

    unlink(pool_path);
    pool = av_pool_open(dir, AV_POOL_WRITE, 0, &error);
    if (!pool) {
        g_printerr("cannot open the pool: %s\n", error->message);
        av_fuzz_assert(!"an empty pool opens");
    }
    fields = json_pack("{s:s}", "identity", "fuzz");
    if (!av_pool_journal_append(pool, "fuzz", fields, &error)) {
        av_fuzz_assert(error->domain == AV_ERROR && error->code == AV_ERROR_CORRUPT_STATE);
        av_fuzz_assert(!ok);
        return 0;
    }
    g_clear_pointer(&pool, av_pool_free);

    if (!av_journal_verify(dir, &after, &error)) {
        av_fuzz_assert(strstr(error->message, "the last line is torn") == NULL);
        if (ok || torn_only) {
            g_printerr("the journal does not verify after an append: %s\n", error->message);
            av_fuzz_assert(!"an append keeps the chain");
        }
    } else if (ok) {
        av_fuzz_assert(after == before + 1);
    }
    return 0;
}
