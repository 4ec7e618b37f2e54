/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the bottom of src/policy, what the other policy files share
 * and which calls nothing above it: the ownership of a policy's structures
 * (constructors and frees), the names of the enums as written in policy
 * files (their tables and the *_to_string() functions), the parse's error
 * reporting (policy_fail(), path_join()) and the expansion of one element
 * of an argv template.  av-policy.c (the load of the directory) calls
 * av-policy-parse.c, which calls av-policy-validate.c; all three, and the
 * trust and matching, call down into this file. */
#include "config.h"

#include "av-policy-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"

/* ---- names ---- */

const char *const attach_names[] = { "vfio-pci", "mdev", "sriov-vf", "usb", "netdev", NULL };
const int attach_values[] = { AV_ATTACH_VFIO_PCI, AV_ATTACH_MDEV, AV_ATTACH_SRIOV_VF, AV_ATTACH_USB,
                              AV_ATTACH_NETDEV };

const char *const numa_names[] = { "strict", "preferred", "none", NULL };
const int numa_values[] = { AV_NUMA_STRICT, AV_NUMA_PREFERRED, AV_NUMA_NONE };

const char *const allocation_names[] = { "pack", "spread", NULL };
const int allocation_values[] = { AV_ALLOCATION_PACK, AV_ALLOCATION_SPREAD };

const char *const granularity_names[] = { "card", "region", "function", NULL };
const int granularity_values[] = { AV_GRANULARITY_CARD, AV_GRANULARITY_REGION, AV_GRANULARITY_FUNCTION };

const char *const restore_names[] = { "on-release", "keep-vfio", NULL };
const int restore_values[] = { AV_RESTORE_ON_RELEASE, AV_RESTORE_KEEP_VFIO };

const char *const scrub_names[] = { "none", "command", "vfio-zero", "reset", "rom-check", "vm",
                                           "usb-reset", "usb-reauthorize", "program-base", "usb-power-cycle",
                                           NULL };
const int scrub_values[] = {
    AV_SCRUB_METHOD_NONE, AV_SCRUB_METHOD_COMMAND, AV_SCRUB_METHOD_VFIO_ZERO,
    AV_SCRUB_METHOD_RESET, AV_SCRUB_METHOD_ROM_CHECK, AV_SCRUB_METHOD_VM,
    AV_SCRUB_METHOD_USB_RESET, AV_SCRUB_METHOD_USB_REAUTHORIZE, AV_SCRUB_METHOD_PROGRAM_BASE,
    AV_SCRUB_METHOD_USB_POWER_CYCLE,
};

const char *
enum_name(const char *const *names, const int *values, int value)
{
    for (gsize i = 0; names[i]; i++) {
        if (values[i] == value)
            return names[i];
    }
    return "unknown";
}

/* Static lower-case names of the enums, as written in policy files. */
const char *
av_attach_to_string(AvAttach attach)
{
    return enum_name(attach_names, attach_values, attach);
}

const char *
av_numa_policy_to_string(AvNumaPolicy numa)
{
    return enum_name(numa_names, numa_values, numa);
}

const char *
av_allocation_to_string(AvAllocation allocation)
{
    return enum_name(allocation_names, allocation_values, allocation);
}

const char *
av_granularity_to_string(AvGranularity granularity)
{
    return enum_name(granularity_names, granularity_values, granularity);
}

const char *
av_restore_driver_to_string(AvRestoreDriver restore)
{
    return enum_name(restore_names, restore_values, restore);
}

const char *
av_scrub_method_to_string(AvScrubMethod method)
{
    return enum_name(scrub_names, scrub_values, method);
}

/* ---- error reporting ---- */

/* Sets an AV_ERROR_POLICY error "FILE:LINE:COLUMN: LABEL: message" at the
 * value at @path (at its key when @at_key).  A path that cannot be found
 * (it always can, on text that jansson accepted) falls back on its parents.
 * Returns FALSE. */
gboolean G_GNUC_PRINTF(5, 6)
policy_fail(const PolicyParse *pp, const char *path, gboolean at_key, GError **error, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    g_autofree char *p = g_strdup(path ? path : "");
    int line = 1, column = 1;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);

    if (!(at_key && av_json_locate_key(pp->data, pp->len, p, &line, &column))) {
        for (;;) {
            char *slash;

            if (av_json_locate(pp->data, pp->len, p, &line, &column))
                break;
            if (!*p)
                break;
            slash = strrchr(p, '/');
            if (slash)
                *slash = '\0';
            else
                *p = '\0';
        }
    }
    g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "%s:%d:%d: %s%s%s", pp->filename, line, column,
                pp->label ? pp->label : "", pp->label ? ": " : "", msg);
    return FALSE;
}

char *
path_join(const char *base, const char *key)
{
    g_autofree char *esc = av_json_path_escape(key);

    return *base ? g_strdup_printf("%s/%s", base, esc) : g_strdup(esc);
}

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
    p->runtime_ids = g_array_new(FALSE, FALSE, sizeof(guint32));
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
    if (profile->runtime_ids)
        g_array_unref(profile->runtime_ids);
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

/* See av-policy-private.h. */
gboolean
check_keys(const PolicyParse *pp, json_t *obj, const char *path, const char *where,
           const char *const *allowed, GError **error)
{
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v) {
        if (!g_strv_contains(allowed, key)) {
            g_autofree char *kp = path_join(path, key);
            g_autofree char *list = g_strjoinv(", ", (char **)allowed);

            return policy_fail(pp, kp, TRUE, error, "unknown key '%s'%s; expected one of %s",
                               key, where, list);
        }
    }
    return TRUE;
}
