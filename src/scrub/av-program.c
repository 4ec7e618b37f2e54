/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: programming a device with a bitstream, and a profile's driver
 * commands (see av-program.h). */
#include "config.h"

#include "av-program.h"

#include <errno.h>
#include <string.h>

#include "pci/av-pci.h"
#include "util/av-command.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* See av-program.h. */
gboolean
av_program_card_region(const AvRoot *root, const char *address, char **ret_card, char **ret_region, GError **error)
{
    g_autofree char *physfn_path = NULL;
    g_autofree char *pf = NULL;
    guint32 domain;
    guint8 bus, slot, function;

    if (!av_pci_address_parse(address, &domain, &bus, &slot, &function)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a PCI address", address);
        return FALSE;
    }
    physfn_path = av_sys_path("/bus/pci/devices/%s/physfn", address);
    if (av_root_link_name(root, physfn_path, &pf) == 0 && av_pci_address_is_valid(pf)) {
        g_autofree char *dir = av_sys_path("/bus/pci/devices/%s", pf);
        g_auto(GStrv) names = NULL;

        /* The VF's index: the N of the PF's virtfnN link that leads to it
         * (Documentation/ABI/testing/sysfs-bus-pci). */
        if (av_root_list_dir(root, dir, &names) == 0) {
            for (char **n = names; *n; n++) {
                g_autofree char *link = NULL;
                g_autofree char *vf = NULL;

                if (!g_str_has_prefix(*n, "virtfn"))
                    continue;
                link = g_strdup_printf("%s/%s", dir, *n);
                if (av_root_link_name(root, link, &vf) == 0 && g_str_equal(vf, address)) {
                    *ret_card = g_steal_pointer(&pf);
                    *ret_region = g_strdup(*n + strlen("virtfn"));
                    return TRUE;
                }
            }
        }
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "VF %s is not among the virtfn links of its PF %s", address,
                    pf);
        return FALSE;
    }
    *ret_card = domain > 0xffff ? g_strdup_printf("%x:%02x:%02x.0", domain, bus, slot)
                                : g_strdup_printf("%04x:%02x:%02x.0", domain, bus, slot);
    *ret_region = g_strdup_printf("%u", function);
    return TRUE;
}

/* The placeholder values and the environment of a run for @target. */
typedef struct {
    char *card;
    char *region;
    char *path;
    AvArgvValues values;
    GStrv envp;
} AvProgramEnv;

static void
av_program_env_clear(AvProgramEnv *env)
{
    g_free(env->card);
    g_free(env->region);
    g_free(env->path);
    g_strfreev(env->envp);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AvProgramEnv, av_program_env_clear)

static gboolean
av_program_env_init(AvProgramEnv *env, const AvProgramTarget *target, const AvBitstream *bitstream, GError **error)
{
    static const char *const names[] = {
        "ACCELVIRT_DEVICE", "ACCELVIRT_CARD", "ACCELVIRT_REGION", "ACCELVIRT_IDENTITY", "ACCELVIRT_PROFILE",
        "ACCELVIRT_BITSTREAM", "ACCELVIRT_BITSTREAM_SHA256", "ACCELVIRT_BITSTREAM_NAME", "ACCELVIRT_FUNCTION_ID",
        "ACCELVIRT_DOMAIN_NAME", "ACCELVIRT_DOMAIN_UUID", "ACCELVIRT_VFIO_GROUP_FD", "ACCELVIRT_POINT",
    };
    const char *values[G_N_ELEMENTS(names)] = { 0 };

    memset(env, 0, sizeof(*env));
    if (target->address && av_pci_address_is_valid(target->address) &&
        !av_program_card_region(target->root, target->address, &env->card, &env->region, error))
        return FALSE;
    if (bitstream)
        env->path = av_bitstream_path(target->state_dir, bitstream);
    env->values.address = target->address;
    env->values.card = env->card;
    env->values.region = env->region;
    env->values.bitstream = env->path;
    env->values.sha256 = bitstream ? bitstream->sha256 : NULL;
    env->values.function_id = bitstream ? bitstream->function_id : NULL;
    env->values.identity = target->identity;
    /* A domain's name is its tenant's choice: one that a program would
     * take for an option ("--help") is no placeholder value (a template
     * naming it fails); ACCELVIRT_DOMAIN_NAME still carries it. */
    env->values.domain_name = target->domain_name && target->domain_name[0] != '-' ? target->domain_name : NULL;
    env->values.domain_uuid = target->domain_uuid;
    env->values.profile = target->profile->name;

    values[0] = target->address;
    values[1] = env->card;
    values[2] = env->region;
    values[3] = target->identity;
    values[4] = target->profile->name;
    values[5] = env->path;
    values[6] = bitstream ? bitstream->sha256 : NULL;
    values[7] = bitstream ? bitstream->name : NULL;
    values[8] = bitstream ? bitstream->function_id : NULL;
    values[9] = target->domain_name;
    values[10] = target->domain_uuid;
    values[11] = target->group_fd >= 0 ? "3" : NULL;
    env->envp = g_get_environ();
    /* Nothing of the caller's own ACCELVIRT_ variables of these names
     * leaks into a run that has no such value. */
    for (guint i = 0; i < G_N_ELEMENTS(names); i++)
        env->envp = values[i] ? g_environ_setenv(env->envp, names[i], values[i], TRUE)
                              : g_environ_unsetenv(env->envp, names[i]);
    return TRUE;
}

/* Expands @argv_template, checks the program it names (as a scrub's
 * "command" step: av_policy_check_scrub_argv()), runs it as @point.  Fills
 * @report's "argv", "ok", "seconds", "output" (and "error"). */
static gboolean
av_program_exec(const AvProgramTarget *target, AvProgramEnv *env, const char *point, const json_t *argv_template,
                guint timeout_s, json_t *report, GError **error)
{
    g_auto(GStrv) argv = NULL;
    g_autoptr(json_t) argv_json = json_array();
    g_autofree char *output = NULL;
    GError *local = NULL;
    double seconds = 0;
    guint bad = 0;
    gboolean ok;

    argv = av_profile_argv_expand(argv_template, &env->values, error);
    if (!argv)
        return FALSE;
    for (char **a = argv; *a; a++)
        json_array_append_new(argv_json, json_string(*a));
    json_object_set(report, "argv", argv_json);
    /* Checked at policy load, and again now: the program, or a directory
     * above it, may have changed since. */
    if (!av_policy_check_scrub_argv(argv_json, &bad, error))
        return FALSE;
    env->envp = g_environ_setenv(env->envp, "ACCELVIRT_POINT", point, TRUE);
    ok = av_command_run((const char *const *)argv, (const char *const *)env->envp, timeout_s, target->group_fd,
                        &output, &seconds, &local);
    json_object_set_new(report, "ok", json_boolean(ok));
    json_object_set_new(report, "seconds", json_real(seconds));
    json_object_set_new(report, "output", json_string(output ? output : ""));
    if (!ok) {
        json_object_set_new(report, "error", json_string(local->message));
        g_propagate_error(error, local);
    }
    return ok;
}

/* The PCI ids of @address under @root, or FALSE. */
static gboolean
av_program_ids(const AvRoot *root, const char *address, guint16 *ret_vendor, guint16 *ret_device)
{
    g_autofree char *vpath = av_sys_path("/bus/pci/devices/%s/vendor", address);
    g_autofree char *dpath = av_sys_path("/bus/pci/devices/%s/device", address);
    guint64 v = 0, d = 0;

    if (av_root_read_uint(root, vpath, 16, &v) < 0 || av_root_read_uint(root, dpath, 16, &d) < 0 || v > 0xffff ||
        d > 0xffff)
        return FALSE;
    *ret_vendor = (guint16)v;
    *ret_device = (guint16)d;
    return TRUE;
}

/* See av-program.h. */
AvProgrammed *
av_program_run(const AvProgramTarget *target, const AvBitstream *bitstream, const char *by, json_t **ret_report,
               GError **error)
{
    const AvProgram *program = target->profile->program;
    g_autoptr(json_t) report = json_object();
    g_auto(AvProgramEnv) env = { 0 };
    g_autofree char *verified = NULL;
    GError *local = NULL;
    guint16 vendor = 0, device = 0;
    gboolean ok = FALSE;

    json_object_set_new(report, "point", json_string("program"));
    json_object_set_new(report, "address", av_json_string_or_null(target->address));
    json_object_set_new(report, "profile", json_string(target->profile->name));
    json_object_set_new(report, "sha256", json_string(bitstream->sha256));
    json_object_set_new(report, "name", json_string(bitstream->name));
    json_object_set_new(report, "ok", json_false());
    json_object_set_new(report, "verify", json_null());

    if (!program) {
        g_set_error(&local, AV_ERROR, AV_ERROR_POLICY, "profile '%s' has no 'program': its devices are not programmed",
                    target->profile->name);
        goto out;
    }
    if (!target->address || !av_program_ids(target->root, target->address, &vendor, &device)) {
        g_set_error(&local, AV_ERROR, AV_ERROR_NOT_FOUND, "device %s is not a PCI device of this host",
                    target->address ? target->address : "(none)");
        goto out;
    }
    if (!av_bitstream_fits(bitstream, target->profile->name, vendor, device)) {
        g_set_error(&local, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "bitstream '%s' does not fit device %s (%04x:%04x, profile '%s'); 'accelvirt bitstream list' "
                    "says what each fits",
                    bitstream->name, target->address, vendor, device, target->profile->name);
        goto out;
    }
    if (!av_bitstream_check(target->state_dir, bitstream, &local))
        goto out;
    if (!av_program_env_init(&env, target, bitstream, &local))
        goto out;
    if (!av_program_exec(target, &env, "program", program->argv, program->timeout_s, report, &local)) {
        g_prefix_error(&local, "programming %s with '%s' failed: ", target->address, bitstream->name);
        goto out;
    }
    if (program->verify) {
        g_autoptr(json_t) vreport = json_object();
        gboolean vok = av_program_exec(target, &env, "verify", program->verify, program->timeout_s, vreport, &local);

        json_object_set(report, "verify", vreport);
        if (!vok) {
            g_prefix_error(&local, "%s was programmed with '%s' but its verify command failed: ", target->address,
                           bitstream->name);
            json_object_set_new(report, "ok", json_false());
            goto out;
        }
        verified = g_strdup("the program and the verify command exited 0");
    } else {
        verified = g_strdup("the program exited 0 (no verify command)");
    }
    ok = TRUE;
out:
    if (!ok) {
        json_object_set_new(report, "ok", json_false());
        json_object_set_new(report, "error", json_string(local->message));
        g_propagate_error(error, local);
    }
    if (ret_report)
        *ret_report = g_steal_pointer(&report);
    return ok ? av_programmed_new(bitstream->sha256, bitstream->name, by, verified) : NULL;
}

/* See av-program.h. */
char **
av_program_argv(const AvProgramTarget *target, const AvBitstream *bitstream, GError **error)
{
    g_auto(AvProgramEnv) env = { 0 };

    if (!target->profile->program) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "profile '%s' has no 'program'", target->profile->name);
        return NULL;
    }
    if (!av_program_env_init(&env, target, bitstream, error))
        return NULL;
    return av_profile_argv_expand(target->profile->program->argv, &env.values, error);
}

/* See av-program.h. */
gboolean
av_driver_run(const AvProgramTarget *target, AvDriverPoint point, const AvBitstream *bitstream, json_t **ret_report,
              GError **error)
{
    const AvDriverCommand *command = (guint)point < AV_DRIVER_POINTS ? target->profile->drivers[point] : NULL;
    const char *name = av_driver_point_to_string(point);
    g_autoptr(json_t) report = NULL;
    g_auto(AvProgramEnv) env = { 0 };
    GError *local = NULL;
    gboolean ok = FALSE;

    if (ret_report)
        *ret_report = NULL;
    if (!command)
        return TRUE;
    report = json_object();
    json_object_set_new(report, "point", json_string(name));
    json_object_set_new(report, "address", av_json_string_or_null(target->address));
    json_object_set_new(report, "profile", json_string(target->profile->name));
    json_object_set_new(report, "ok", json_false());
    if (av_program_env_init(&env, target, bitstream, &local) &&
        av_program_exec(target, &env, name, command->argv,
                        target->timeout_max_s > 0 ? MIN(command->timeout_s, target->timeout_max_s)
                                                  : command->timeout_s,
                        report, &local))
        ok = TRUE;
    if (!ok) {
        g_prefix_error(&local, "the %s command of profile '%s' for %s failed: ", name, target->profile->name,
                       target->address ? target->address : "(none)");
        json_object_set_new(report, "error", json_string(local->message));
        g_propagate_error(error, local);
    }
    if (ret_report)
        *ret_report = g_steal_pointer(&report);
    return ok;
}

/* See av-program.h. */
gboolean
av_program_journal(AvPool *pool, const char *event, const json_t *report, const char *identity,
                   const char *domain_name, const char *domain_uuid, const char *by, GError **error)
{
    g_autoptr(json_t) fields = json_deep_copy(report);

    if (!fields)
        fields = json_object();
    json_object_set_new(fields, "identity", av_json_string_or_null(identity));
    if (domain_name)
        json_object_set_new(fields, "domain_name", json_string(domain_name));
    if (domain_uuid)
        json_object_set_new(fields, "domain_uuid", json_string(domain_uuid));
    json_object_set_new(fields, "by", json_string(by));
    return av_pool_journal_append(pool, event, fields, error);
}
