/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: the policy loader, av_policy_add_data(), as
 * `accelvirt policy check` and the hook read a policy file.
 * Properties (av-policy.h):
 *   - a bad document leaves the policy unchanged;
 *   - each profile's normalised JSON (av_profile_to_json(), what `policy
 *     show` prints) loads back to the same profile: loading it again gives
 *     the same JSON;
 *   - the same document added twice is refused the second time when it has
 *     a profile (names are unique across the policy). */
#include "config.h"

#include "fuzz.h"

#include <jansson.h>
#include <string.h>

#include "policy/av-policy.h"
#include "util/av-json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(AvPolicy) again = av_policy_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(json_t) doc = NULL;
    g_autoptr(json_t) array = NULL;
    g_autofree char *text = NULL;
    guint n;

    if (!av_policy_add_data(policy, "fuzz.json", (const char *)data, size, &error)) {
        av_fuzz_assert(error != NULL);
        av_fuzz_assert(policy->profiles->len == 0 && policy->files->len == 0);
        return 0;
    }
    n = policy->profiles->len;
    av_fuzz_assert(policy->files->len == 1);

    array = json_array();
    for (guint i = 0; i < n; i++)
        json_array_append_new(array, av_profile_to_json(g_ptr_array_index(policy->profiles, i)));
    doc = json_pack("{s:O}", "profiles", array);
    text = av_json_dump_pretty(doc);
    av_fuzz_assert(text != NULL);
    if (!av_policy_add_data(again, "normalised.json", text, strlen(text), &error)) {
        g_printerr("the normalised policy does not load: %s\n%s\n", error->message, text);
        av_fuzz_assert(!"the normalised profiles load");
    }
    av_fuzz_assert(again->profiles->len == n);
    for (guint i = 0; i < n; i++) {
        g_autoptr(json_t) a = av_profile_to_json(g_ptr_array_index(policy->profiles, i));
        g_autoptr(json_t) b = av_profile_to_json(g_ptr_array_index(again->profiles, i));

        av_fuzz_assert(json_equal(a, b));
    }

    if (n > 0) {
        av_fuzz_assert(!av_policy_add_data(policy, "twice.json", (const char *)data, size, NULL));
        av_fuzz_assert(policy->profiles->len == n && policy->files->len == 1);
    }
    return 0;
}
