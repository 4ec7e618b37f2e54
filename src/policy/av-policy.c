/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: policies, the profiles an operator writes in the policy dir:
 * a policy's life, argv templates and the load of the policy directory,
 * the top of src/policy.  The parse (and its inverse, a profile as JSON) is
 * av-policy-parse.c, the checks on what it parsed av-policy-validate.c, the
 * trust of the files that run as root av-policy-trust.c, matching
 * av-policy-match.c; the constructors and frees, the enums' names, the
 * parse's error reporting and the expansion of one template element, which
 * they all use, av-policy-types.c. */
#include "config.h"

#include "av-policy-private.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "util/av-error.h"
#include "util/av-file.h"

#define AV_POLICY_MAX_FILE_SIZE (4u * 1024u * 1024u)

/* See av-policy.h.  With @values NULL, only checks the template (what the
 * policy's parser does): every element a string, braces only around the
 * known placeholders. */
char **
av_profile_argv_expand(const json_t *argv, const AvArgvValues *values, GError **error)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);
    size_t i;
    json_t *item;

    if (!json_is_array(argv) || json_array_size(argv) == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "expected a non-empty array of strings");
        return NULL;
    }
    json_array_foreach(argv, i, item) {
        g_autoptr(GString) s = g_string_new(NULL);

        if (!json_is_string(item)) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "element %zu is not a string", i);
            return NULL;
        }
        if (!av_argv_expand_one(json_string_value(item), values, values ? s : NULL, error))
            return NULL;
        g_ptr_array_add(out, values ? g_string_free(g_steal_pointer(&s), FALSE) : g_strdup(json_string_value(item)));
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
}

/* A new empty policy (caller frees with av_policy_free()). */
AvPolicy *
av_policy_new(void)
{
    AvPolicy *policy = g_new0(AvPolicy, 1);

    policy->files = g_ptr_array_new_with_free_func(g_free);
    policy->profiles = g_ptr_array_new_with_free_func((GDestroyNotify)av_profile_free);
    policy->limits = g_ptr_array_new_with_free_func((GDestroyNotify)av_limit_free);
    return policy;
}

/* See av-policy.h. */
gboolean
av_policy_placement_sync(const AvPolicy *policy, const AvProfile *profile)
{
    if (!profile || (profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF))
        return FALSE;
    if (profile->placement_sync >= 0)
        return profile->placement_sync == 1;
    return policy && policy->nova && policy->nova->placement_sync;
}

/* See av-policy.h. */
gboolean
av_policy_owner_metadata_trusted(const AvPolicy *policy)
{
    return !(policy && policy->nova && policy->nova->owner_metadata_ignored);
}

/* Frees @policy, its profiles and file names; NULL is a no-op. */
void
av_policy_free(AvPolicy *policy)
{
    if (!policy)
        return;
    g_free(policy->dir);
    av_nova_settings_free(policy->nova);
    if (policy->files)
        g_ptr_array_unref(policy->files);
    if (policy->profiles)
        g_ptr_array_unref(policy->profiles);
    if (policy->limits)
        g_ptr_array_unref(policy->limits);
    g_free(policy);
}

/* ---- the directory ---- */

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Reads the *.json files of @dir in strcmp() order into a new policy
 * (caller frees); a missing @dir is an empty policy.  The directory, each
 * file, and the programs and templates their scrub steps name must be
 * trusted (av_file_check_trusted()).  NULL with @error set on the first bad
 * file (AV_ERROR_POLICY), an unreadable one (AV_ERROR_IO) or one that
 * another user than root could change (AV_ERROR_UNSAFE). */
AvPolicy *
av_policy_load_dir(const char *dir, GError **error)
{
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = NULL;
    GError *err = NULL;
    struct stat st;
    const char *name;

    g_return_val_if_fail(dir != NULL, NULL);
    policy->dir = g_strdup(dir);

    if (stat(dir, &st) < 0) {
        int e = errno;

        if (e == ENOENT)
            return g_steal_pointer(&policy);
        av_error_errno(error, -e, "cannot read the policy directory '%s'", dir);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the policy directory '%s' is not a directory", dir);
        return NULL;
    }
    if (!av_file_check_trusted(dir, "policy directory", NULL, error))
        return NULL;

    d = g_dir_open(dir, 0, &err);
    if (!d) {
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the policy directory '%s': %s", dir, err->message);
        g_error_free(err);
        return NULL;
    }
    while ((name = g_dir_read_name(d))) {
        if (name[0] == '.' || !g_str_has_suffix(name, ".json"))
            continue;
        g_ptr_array_add(names, g_strdup(name));
    }
    g_ptr_array_sort(names, compare_names);

    for (guint i = 0; i < names->len; i++) {
        g_autofree char *path = g_build_filename(dir, g_ptr_array_index(names, i), NULL);
        g_autofree char *data = NULL;
        gsize len = 0;

        /* Symbolic links are followed (linking an example of
         * /usr/share/accelvirt/policies is how one activates it), and the
         * link's directories and its target's are checked alike. */
        data = policy_read_trusted(path, "policy file", AV_POLICY_MAX_FILE_SIZE, &len, error);
        if (!data)
            return NULL;
        if (!policy_add_data(policy, path, data, len, TRUE, error))
            return NULL;
    }
    return g_steal_pointer(&policy);
}
