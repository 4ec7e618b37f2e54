/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: policies, the profiles an operator writes in the policy dir:
 * their ownership, argv templates and the load of the policy directory.
 * The parse (and its inverse, a profile as JSON) is av-policy-parse.c, the
 * checks on what it parsed av-policy-validate.c, the trust of the files
 * that run as root av-policy-trust.c, matching av-policy-match.c. */
#include "config.h"

#include "av-policy-private.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "util/av-error.h"
#include "util/av-file.h"

#define AV_POLICY_MAX_FILE_SIZE (4u * 1024u * 1024u)

/* ---- ownership ---- */

void
av_scrub_step_free(AvScrubStep *step)
{
    if (!step)
        return;
    json_decref(step->options);
    g_free(step);
}

void
av_companion_match_free(AvCompanionMatch *c)
{
    if (!c)
        return;
    if (c->devices)
        g_array_unref(c->devices);
    g_free(c);
}

AvProfile *
av_profile_new(void)
{
    AvProfile *p = g_new0(AvProfile, 1);

    p->companions = g_ptr_array_new_with_free_func((GDestroyNotify)av_companion_match_free);
    p->match_devices = g_array_new(FALSE, FALSE, sizeof(guint16));
    p->match_addresses = g_ptr_array_new_with_free_func(g_free);
    p->match_mdev_parents = g_ptr_array_new_with_free_func(g_free);
    p->match_pfs = g_ptr_array_new_with_free_func(g_free);
    p->scrub = g_ptr_array_new_with_free_func((GDestroyNotify)av_scrub_step_free);
    p->traits = g_ptr_array_new_with_free_func(g_free);
    p->health.fatal_aer = p->health.nonfatal_aer = p->health.correctable_aer = -1;
    p->health.reset_failures = p->health.scrub_failures = -1;
    p->placement_sync = -1;
    return p;
}

/* Frees @profile and everything it owns; NULL is a no-op. */
void
av_profile_free(AvProfile *profile)
{
    if (!profile)
        return;
    g_free(profile->name);
    g_free(profile->source_file);
    if (profile->match_devices)
        g_array_unref(profile->match_devices);
    if (profile->match_addresses)
        g_ptr_array_unref(profile->match_addresses);
    if (profile->match_mdev_parents)
        g_ptr_array_unref(profile->match_mdev_parents);
    if (profile->match_pfs)
        g_ptr_array_unref(profile->match_pfs);
    if (profile->companions)
        g_ptr_array_unref(profile->companions);
    g_free(profile->mdev_type);
    g_free(profile->vfio_driver);
    g_free(profile->vgpu_type);
    if (profile->scrub)
        g_ptr_array_unref(profile->scrub);
    g_free(profile->resource_class);
    if (profile->traits)
        g_ptr_array_unref(profile->traits);
    g_free(profile->description);
    av_program_free(profile->program);
    for (guint i = 0; i < AV_DRIVER_POINTS; i++)
        av_driver_command_free(profile->drivers[i]);
    g_free(profile);
}

void
av_program_free(AvProgram *program)
{
    if (!program)
        return;
    if (program->argv)
        json_decref(program->argv);
    if (program->verify)
        json_decref(program->verify);
    g_free(program->base);
    g_free(program);
}

void
av_driver_command_free(AvDriverCommand *command)
{
    if (!command)
        return;
    if (command->argv)
        json_decref(command->argv);
    g_free(command);
}

const char *
av_driver_point_to_string(AvDriverPoint point)
{
    static const char *const names[AV_DRIVER_POINTS] = { "on_prepare", "on_release", "on_assign", "on_free" };

    return (guint)point < AV_DRIVER_POINTS ? names[point] : "?";
}

/* The value of the placeholder @name ("address" for "{address}") in
 * @values; *ret_known says whether it is a placeholder at all. */
static const char *
av_argv_value(const AvArgvValues *values, const char *name, gsize len, gboolean *ret_known)
{
    static const struct {
        const char *name;
        gsize offset;
    } table[] = {
        { "address", G_STRUCT_OFFSET(AvArgvValues, address) },
        { "card", G_STRUCT_OFFSET(AvArgvValues, card) },
        { "region", G_STRUCT_OFFSET(AvArgvValues, region) },
        { "bitstream", G_STRUCT_OFFSET(AvArgvValues, bitstream) },
        { "sha256", G_STRUCT_OFFSET(AvArgvValues, sha256) },
        { "function_id", G_STRUCT_OFFSET(AvArgvValues, function_id) },
        { "identity", G_STRUCT_OFFSET(AvArgvValues, identity) },
        { "domain_name", G_STRUCT_OFFSET(AvArgvValues, domain_name) },
        { "domain_uuid", G_STRUCT_OFFSET(AvArgvValues, domain_uuid) },
        { "profile", G_STRUCT_OFFSET(AvArgvValues, profile) },
    };

    for (guint i = 0; i < G_N_ELEMENTS(table); i++) {
        if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0) {
            *ret_known = TRUE;
            return values ? G_STRUCT_MEMBER(const char *, values, table[i].offset) : NULL;
        }
    }
    *ret_known = FALSE;
    return NULL;
}

/* Expands one element @text of a template into @out; with @values NULL
 * only checks it.  FALSE with AV_ERROR_POLICY naming what is wrong. */
gboolean
av_argv_expand_one(const char *text, const AvArgvValues *values, GString *out, GError **error)
{
    for (const char *p = text; *p; p++) {
        const char *end;
        const char *value;
        gboolean known = FALSE;

        if (*p == '}') {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "'%s' has a '}' that closes no placeholder", text);
            return FALSE;
        }
        if (*p != '{') {
            if (out)
                g_string_append_c(out, *p);
            continue;
        }
        end = strchr(p + 1, '}');
        if (!end) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "'%s' has a '{' that is not closed", text);
            return FALSE;
        }
        value = av_argv_value(values, p + 1, (gsize)(end - p - 1), &known);
        if (!known) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                        "'%s' names the placeholder '%.*s', which is none of {address}, {card}, {region}, "
                        "{bitstream}, {sha256}, {function_id}, {identity}, {domain_name}, {domain_uuid}, {profile}",
                        text, (int)(end - p + 1), p);
            return FALSE;
        }
        if (out) {
            if (!value) {
                g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "'%s' names '%.*s', which has no value here", text,
                            (int)(end - p + 1), p);
                return FALSE;
            }
            g_string_append(out, value);
        }
        p = end;
    }
    return TRUE;
}

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
    return policy;
}

/* Frees @nova; NULL is a no-op. */
void
av_nova_settings_free(AvNovaSettings *nova)
{
    if (!nova)
        return;
    g_free(nova->cloud);
    g_free(nova->hypervisor_hostname);
    g_free(nova->source_file);
    g_free(nova);
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
