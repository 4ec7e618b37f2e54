/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: the pool loader, av_pool_open() of a state dir whose
 * pool.json is the input, as `accelvirt status` (read) and the hook (write)
 * open it.
 * Properties (av-pool.h):
 *   - a reader and a writer accept and refuse the same pool.json (the state
 *     dir is the caller's own, mode 0700);
 *   - what a writer saves opens again, to the same pool (its JSON equal). */
#include "config.h"

#include "fuzz.h"

#include <jansson.h>

#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = av_fuzz_tmpdir();
    g_autoptr(AvPool) reader = NULL;
    g_autoptr(AvPool) writer = NULL;
    g_autoptr(AvPool) reread = NULL;
    g_autoptr(GError) read_err = NULL;
    g_autoptr(GError) write_err = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(json_t) before = NULL;
    g_autoptr(json_t) after = NULL;

    av_fuzz_write(dir, "pool.json", data, size);
    reader = av_pool_open(dir, AV_POOL_READ, 0, &read_err);
    av_fuzz_assert((reader == NULL) == (read_err != NULL));
    if (reader) {
        GPtrArray *devices = av_pool_devices(reader);
        g_autofree char *direct = NULL, *tree = NULL;

        before = av_pool_to_json(reader);
        /* What a save writes is what the JSON tree would give. */
        direct = av_pool_text(reader);
        tree = av_pool_json_text(before);
        av_fuzz_assert(direct && tree && g_str_equal(direct, tree));
        for (guint i = 0; i < devices->len; i++) {
            const AvPoolDevice *dev = g_ptr_array_index(devices, i);
            g_autoptr(json_t) one = av_pool_device_to_json(dev);

            av_fuzz_assert(one != NULL);
            if (dev->owner && dev->owner->domain_uuid)
                g_ptr_array_unref(av_pool_find_owned(reader, dev->owner->domain_uuid));
        }
    }
    g_clear_pointer(&reader, av_pool_free);

    writer = av_pool_open(dir, AV_POOL_WRITE, 0, &write_err);
    av_fuzz_assert((writer == NULL) == (read_err != NULL));
    if (!writer) {
        av_fuzz_assert(write_err->code == read_err->code);
        return 0;
    }
    if (!av_pool_save(writer, &error)) {
        g_printerr("cannot save: %s\n", error->message);
        av_fuzz_assert(!"a pool that opens saves");
    }
    g_clear_pointer(&writer, av_pool_free);

    reread = av_pool_open(dir, AV_POOL_READ, 0, &error);
    if (!reread) {
        g_printerr("the saved pool does not open: %s\n", error->message);
        av_fuzz_assert(!"a saved pool opens again");
    }
    after = av_pool_to_json(reread);
    av_fuzz_assert(json_equal(before, after));
    return 0;
}
