/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the checks on a parsed policy: the names a profile may have,
 * whether its scrub steps and its program fit what it attaches, and the
 * warnings of av_profile_scrub_warnings() about a scrub that may leave a
 * tenant's data behind.  The parse (av-policy-parse.c) calls these on what
 * it has read. */
#include "config.h"

#include "av-policy-private.h"

#include <string.h>

#define AV_POLICY_NAME_MAX 63
#define AV_POLICY_NOVA_NAME_MAX 255

/* See av-policy.h. */
gboolean
av_vfio_driver_choice_is_valid(const char *name)
{
    gsize len;

    if (!name)
        return FALSE;
    if (g_str_equal(name, "auto") || g_str_equal(name, "vfio-pci") || g_str_equal(name, "vfio_pci"))
        return TRUE;
    /* A variant's module: [a-z0-9_], ending "_vfio_pci" (drivers/vfio/pci). */
    len = strlen(name);
    if (len > 64 || !g_str_has_suffix(name, "_vfio_pci") || len == strlen("_vfio_pci"))
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_islower(name[i]) && !g_ascii_isdigit(name[i]) && name[i] != '_')
            return FALSE;
    return TRUE;
}

/* ---- addresses and names ---- */

gboolean
av_profile_name_is_valid(const char *s)
{
    gsize n;

    if (!s)
        return FALSE;
    n = strlen(s);

    if (n == 0 || n > AV_POLICY_NAME_MAX)
        return FALSE;
    if (!(g_ascii_islower(s[0]) || g_ascii_isdigit(s[0])))
        return FALSE;
    for (const char *c = s; *c; c++) {
        if (!(g_ascii_islower(*c) || g_ascii_isdigit(*c) || *c == '.' || *c == '_' || *c == '-'))
            return FALSE;
    }
    return TRUE;
}

gboolean
nova_name_valid(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > AV_POLICY_NOVA_NAME_MAX)
        return FALSE;
    for (const char *c = s; *c; c++) {
        if (!(g_ascii_isupper(*c) || g_ascii_isdigit(*c) || *c == '_'))
            return FALSE;
    }
    return TRUE;
}

/* Adds to @out a warning when the program of the template @argv (of
 * @key, which @fails says what happens without it) is not installed: the
 * load takes one that does not exist yet (check_argv_trusted()). */
static void
warn_program_missing(GPtrArray *out, const json_t *argv, const char *key, const char *fails)
{
    const char *program = json_string_value(json_array_get(argv, 0));

    if (program && !g_file_test(program, G_FILE_TEST_EXISTS))
        g_ptr_array_add(out, g_strdup_printf("'%s' runs '%s', which is not installed: until it is, %s", key, program,
                                             fails));
}

/* See av-policy.h. */
GPtrArray *
av_profile_scrub_warnings(const AvProfile *profile)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    guint base = profile->match_class_set ? (guint)(profile->match_class >> 16) : 0xffff;
    gboolean nvidia = profile->match_vendor_set && profile->match_vendor == 0x10de;
    /* A display controller (0x03) or processing accelerator (0x12), or a
     * card of a GPU or FPGA vendor: a device with memory a tenant fills. */
    guint16 vendor = profile->match_vendor_set ? profile->match_vendor : 0;
    /* Xilinx (AMD) and Altera (Intel) FPGA cards hold a tenant's design and
     * card memory as well. */
    gboolean gpu = base == 0x03 || base == 0x12 || nvidia ||
                   (!profile->match_class_set && (vendor == 0x1002 || vendor == 0x10ee || vendor == 0x1172));
    gboolean zero = FALSE, other_memory_step = FALSE, resize = FALSE, program_base = FALSE;
    static const char *const driver_fails[AV_DRIVER_POINTS] = {
        "the hook refuses every domain given one of its devices",
        "every device a domain releases is quarantined",
        "no device is given to a domain",
        "every scrubbed device is quarantined",
    };

    if (profile->program) {
        warn_program_missing(out, profile->program->argv, "program", "no device is programmed (a domain that asks "
                             "for a bitstream does not start, a 'program-base' step quarantines the device)");
        warn_program_missing(out, profile->program->verify, "program.verify", "every programming fails");
    }
    for (guint i = 0; i < AV_DRIVER_POINTS; i++) {
        if (profile->drivers[i])
            warn_program_missing(out, profile->drivers[i]->argv, av_driver_point_to_string((AvDriverPoint)i),
                                 driver_fails[i]);
    }
    /* An mdev's or a vGPU VF's memory is a share of the GPU's that NVIDIA's
     * vGPU Manager hands out and takes back (on the vGPU's destruction),
     * not the device's own: the memory checks below do not apply. */
    if ((profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF) || profile->vgpu_type)
        return out;
    for (guint i = 0; profile->scrub && i < profile->scrub->len; i++) {
        const AvScrubStep *step = g_ptr_array_index(profile->scrub, i);

        if (step->method == AV_SCRUB_METHOD_VFIO_ZERO) {
            zero = TRUE;
            resize = resize || json_is_true(json_object_get(step->options, "resize"));
        } else if (step->method == AV_SCRUB_METHOD_COMMAND || step->method == AV_SCRUB_METHOD_VM) {
            other_memory_step = TRUE;
        } else if (step->method == AV_SCRUB_METHOD_PROGRAM_BASE) {
            program_base = TRUE;
        }
    }
    /* Issue 15: the tenant's logic must not survive on the card. */
    if (profile->program && !program_base)
        g_ptr_array_add(out, g_strdup("the profile programs its devices but no scrub step is 'program-base': the "
                                      "last tenant's logic stays on the card for the next one; give 'program' a "
                                      "'base' and make {\"method\": \"program-base\"} the first step"));
    if (gpu && !zero && !other_memory_step)
        g_ptr_array_add(out, g_strdup("no scrub step clears the device's memory (only a vfio-zero, command or vm "
                                      "step can): the next tenant may read what the last one left"));
    if (nvidia && zero && !other_memory_step)
        g_ptr_array_add(out, g_strdup("vfio-zero cannot clear an NVIDIA GPU's memory: BAR1 is mapped through the "
                                      "GPU's own MMU, which only NVIDIA's driver sets up; add a command step running "
                                      "NVIDIA's gpu-admin-tools (--reset-with-sbr, then --clear-memory) or a vm "
                                      "step whose image runs the scrubbing kernel"));
    else if (gpu && zero && !other_memory_step && !profile->memory && !resize)
        g_ptr_array_add(out, g_strdup("the coverage of vfio-zero is unknown: without 'memory' (the device's memory "
                                      "size) certificates can say only how many bytes of its BARs were zeroed, "
                                      "unless the device has a Resizable BAR capability; a BAR is a window, "
                                      "often far smaller than the memory (set 'memory', and 'resize': true where "
                                      "the device's BAR can grow)"));
    if (profile->min_coverage > 0 && !zero && !other_memory_step)
        g_ptr_array_add(out, g_strdup("'min_coverage' is set but no step clears memory: every scrub will "
                                      "quarantine the device"));
    return out;
}

/* TRUE when the scrub method @method can act on the devices of @profile:
 * vfio-zero, reset and rom-check act on a whole PCI function, vm hands one
 * to a scrub VM, usb-reset, usb-reauthorize and usb-power-cycle act on a USB device; else
 * FALSE with @error set (one line saying which methods fit). */
gboolean
scrub_method_fits(const PolicyParse *pp, const AvProfile *profile, AvScrubMethod method, const char *method_name,
                  const char *mpath, GError **error)
{
    gboolean usb_method = method == AV_SCRUB_METHOD_USB_RESET || method == AV_SCRUB_METHOD_USB_REAUTHORIZE ||
                          method == AV_SCRUB_METHOD_USB_POWER_CYCLE;
    gboolean pci_method = method == AV_SCRUB_METHOD_VFIO_ZERO || method == AV_SCRUB_METHOD_RESET ||
                          method == AV_SCRUB_METHOD_ROM_CHECK;

    /* A card of attach netdev stays on its host driver, whose interface
     * the domain has: nothing that takes it to vfio-pci. */
    if (profile->attach == AV_ATTACH_NETDEV && method != AV_SCRUB_METHOD_NONE && method != AV_SCRUB_METHOD_COMMAND &&
        method != AV_SCRUB_METHOD_RESET)
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method '%s' cannot be used with attach 'netdev': a netdev card stays on its host "
                           "driver, and '%s' needs %s; expected one of none, command, reset", method_name, method_name,
                           usb_method ? "a USB device" : "the device on vfio-pci");
    if (profile->attach == AV_ATTACH_USB && (pci_method || method == AV_SCRUB_METHOD_VM))
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method '%s' %s and cannot be used with attach 'usb'; expected one of none, "
                           "command, usb-reset, usb-reauthorize, usb-power-cycle", method_name,
                           pci_method ? "acts on a whole PCI function" : "hands a whole PCI function to a scrub VM");
    if (profile->attach != AV_ATTACH_USB && usb_method)
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method '%s' acts on a USB device and cannot be used with attach '%s'", method_name,
                           av_attach_to_string(profile->attach));
    if (profile->attach == AV_ATTACH_MDEV && pci_method)
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method '%s' acts on a whole PCI function and cannot be used with attach '%s'; expected one of none, command",
                           method_name, av_attach_to_string(profile->attach));
    if (profile->attach == AV_ATTACH_MDEV && method == AV_SCRUB_METHOD_VM)
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method 'vm' cannot be used with attach '%s' (for now): the scrub VM takes its "
                           "device as a whole PCI function; expected one of none, command",
                           av_attach_to_string(profile->attach));
    return TRUE;
}

/* See av-policy.h. */
gboolean
av_program_names_device(const AvProgram *program)
{
    size_t i;
    json_t *item;

    json_array_foreach(program->argv, i, item) {
        const char *text = json_string_value(item);

        if (text && (strstr(text, "{address}") || strstr(text, "{region}")))
            return TRUE;
    }
    return FALSE;
}

/* "program" with "driver": "vfio-pci" (the default) needs "restore_driver":
 * "keep-vfio" (a free device stays on vfio-pci, where the program gets its
 * group file); "driver": "host" needs "on-release" (a free device is back
 * on its host driver, where the vendor's tool finds it).  The error
 * points at "restore_driver" when given, else at what chose the driver. */
gboolean
check_program_driver(const PolicyParse *pp, const AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *program = json_object_get(obj, "program");
    g_autofree char *rp = path_join(base, "restore_driver");
    g_autofree char *pp_path = path_join(base, "program");
    g_autofree char *dp = path_join(pp_path, "driver");
    gboolean restore_given = json_object_get(obj, "restore_driver") != NULL;
    gboolean driver_given = json_object_get(program, "driver") != NULL;

    if (!profile->program)
        return TRUE;
    /* A program that does not name the device it programs ({address} or
     * {region}) programs what it names: the card, every region of it,
     * other domains' too.  Only whole cards may be programmed so. */
    if (profile->granularity != AV_GRANULARITY_CARD) {
        if (!av_program_names_device(profile->program)) {
            g_autofree char *ap = path_join(pp_path, "argv");

            return policy_fail(pp, ap, FALSE, error,
                               "the 'program' of a profile of granularity '%s' must name the device it programs, "
                               "{address} or {region}: a program that names only the card reprograms all of it, "
                               "other domains' regions too; name the device, or give the profile \"granularity\": "
                               "\"card\"",
                               av_granularity_to_string(profile->granularity));
        }
    }
    if (profile->program->driver == AV_PROGRAM_DRIVER_VFIO && profile->restore_driver != AV_RESTORE_KEEP_VFIO)
        return policy_fail(pp, restore_given ? rp : driver_given ? dp : pp_path, !restore_given && !driver_given,
                           error,
                           "a 'program' of driver 'vfio-pci'%s programs a free device on vfio-pci, so the profile "
                           "needs \"restore_driver\": \"keep-vfio\"; write that, or \"driver\": \"host\" in "
                           "'program' for a vendor's tool that wants the device on its host driver",
                           driver_given ? "" : " (the default)");
    if (profile->program->driver == AV_PROGRAM_DRIVER_HOST && profile->restore_driver != AV_RESTORE_ON_RELEASE)
        return policy_fail(pp, rp, FALSE, error,
                           "restore_driver '%s' cannot be used with a 'program' of driver 'host', whose tool finds a "
                           "free device on its host driver; write \"restore_driver\": \"on-release\", or "
                           "\"driver\": \"vfio-pci\" in 'program'",
                           av_restore_driver_to_string(profile->restore_driver));
    return TRUE;
}

/* TRUE when @s is a host name as Nova's resource providers take it: 1 to
 * AV_NOVA_HOSTNAME_MAX printable ASCII characters, no space, no '/'. */
gboolean
nova_hostname_valid(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > AV_NOVA_HOSTNAME_MAX)
        return FALSE;
    for (const char *c = s; *c; c++)
        if (*c <= ' ' || *c >= 0x7f || *c == '/')
            return FALSE;
    return TRUE;
}
