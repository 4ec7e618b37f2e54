/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: policies, the profiles an operator writes in the policy dir.
 *
 * The format is accelvirt-policy(5); keep the two in step.  Every mistake is
 * an error that points at the offending value ("FILE:LINE:COLUMN: ..."): a
 * typo must never silently drop a safety setting, so unknown keys are errors
 * too.  A load is all or nothing. */
#include "config.h"

#include "av-policy-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

#define AV_POLICY_MAX_TIMEOUT 86400

#define AV_SCRUB_COMMAND_TIMEOUT_DEFAULT 300
#define AV_SCRUB_VM_TIMEOUT_DEFAULT 600
#define AV_SCRUB_USB_REAUTHORIZE_TIMEOUT_DEFAULT 10
#define AV_PROGRAM_TIMEOUT_DEFAULT 600
#define AV_DRIVER_HOOK_TIMEOUT_DEFAULT 10   /* on_prepare, on_release: in the hook (bounded) */
#define AV_DRIVER_TIMEOUT_DEFAULT 300       /* on_assign, on_free */

/* ---- names ---- */

static const char *const program_driver_names[] = { "vfio-pci", "host", NULL };
static const int program_driver_values[] = { AV_PROGRAM_DRIVER_VFIO, AV_PROGRAM_DRIVER_HOST };

static const char *const verify_names[] = { "full", "sample", NULL };
static const char *const reset_method_names[] = { "flr", "pm", "bus", "device_specific", "acpi", NULL };

static const char *const top_keys[] = { "profiles", "description", "nova", "limits", NULL };
static const char *const nova_keys[] = { "placement_sync", "cloud", "hypervisor_hostname", "owner_metadata", NULL };
static const char *const profile_keys[] = {
    "name", "description", "match", "attach", "mdev_type", "numa", "allocation", "granularity",
    "scrub", "restore_driver", "hide_hypervisor", "resource_class", "traits", "companions", "memory", "min_coverage",
    "vfs", "vfs_shrink", "program", "on_prepare", "on_release", "on_assign", "on_free", "max_lease", "health",
    "placement_sync", "vfio_driver", "vgpu_type", "runtime_ids", NULL,
};
static const char *const health_keys[] = {
    "fatal_aer", "nonfatal_aer", "correctable_aer", "degraded_link", "link_speed", "reset_failures", "scrub_failures",
    NULL,
};
static const char *const health_link_names[] = { "ignore", "warn", "quarantine", NULL };
static const int health_link_values[] = { AV_HEALTH_LINK_IGNORE, AV_HEALTH_LINK_WARN, AV_HEALTH_LINK_QUARANTINE };
static const char *const link_speed_names[] = { "ignore", "check", NULL };
static const int link_speed_values[] = { FALSE, TRUE };
static const char *const match_keys[] = {
    "vendor", "device", "class", "subsystem_vendor", "subsystem_device", "address", "mdev_parent", "pf", NULL,
};
static const char *const companion_keys[] = { "vendor", "device", "class", NULL };

/* Nova's standard resource classes that can stand for a device (os-resource-classes). */
static const char *const nova_standard_classes[] = {
    "PCI_DEVICE", "SRIOV_NET_VF", "VGPU", "VGPU_DISPLAY_HEAD", "PGPU", "FPGA", NULL,
};

/* ---- error reporting ---- */

/* A value as quoted in messages: "the string 'text'", "the number 5", "a
 * list", "true"... */
static char *
describe_value(const json_t *v)
{
    g_autofree char *text = NULL;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return g_strdup("an object");
    case JSON_ARRAY:
        return g_strdup("a list");
    case JSON_STRING: {
        const char *s = json_string_value(v);
        gboolean plain = g_utf8_strlen(s, -1) <= 80;

        for (const char *c = s; *c && plain; c++) {
            if ((unsigned char)*c < 0x20 || *c == '\'' || *c == 0x7f)
                plain = FALSE;
        }
        if (plain)
            return g_strdup_printf("the string '%s'", s);
        break;
    }
    default:
        break;
    }
    text = av_json_dump_compact(v);
    if (g_utf8_strlen(text, -1) > 80)
        strcpy(g_utf8_offset_to_pointer(text, 77), "...");
    if (json_is_string(v))
        return g_strdup_printf("the string %s", text);
    if (json_is_number(v))
        return g_strdup_printf("the number %s", text);
    return g_steal_pointer(&text);
}

static char *
names_join(const char *const *names)
{
    return g_strjoinv(", ", (char **)names);
}

static gboolean
name_in(const char *const *names, const char *name)
{
    return g_strv_contains(names, name);
}

/* ---- typed getters: each returns FALSE with @error set on a bad value ---- */

gboolean
type_fail(const PolicyParse *pp, const char *path, const char *display, const char *expected,
          json_t *v, GError **error)
{
    g_autofree char *got = describe_value(v);

    return policy_fail(pp, path, FALSE, error, "'%s' must be %s, not %s", display, expected, got);
}

/* The string at @key of @obj: *ret NULL when absent. */
static gboolean
get_string(const PolicyParse *pp, json_t *obj, const char *key, const char *base, const char *display,
           const char **ret, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *path = path_join(base, key);

    *ret = NULL;
    if (!v)
        return TRUE;
    if (!json_is_string(v))
        return type_fail(pp, path, display, "a string", v, error);
    *ret = json_string_value(v);
    return TRUE;
}

static gboolean
get_enum(const PolicyParse *pp, json_t *obj, const char *key, const char *base,
         const char *const *names, const int *values, int *ret, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *path = path_join(base, key);
    g_autofree char *list = names_join(names);

    if (!v)
        return TRUE;
    if (!json_is_string(v)) {
        g_autofree char *expected = g_strdup_printf("a string, one of %s", list);
        return type_fail(pp, path, key, expected, v, error);
    }
    for (gsize i = 0; names[i]; i++) {
        if (g_str_equal(names[i], json_string_value(v))) {
            *ret = values[i];
            return TRUE;
        }
    }
    return policy_fail(pp, path, FALSE, error, "unknown %s '%s'; expected one of %s",
                       key, json_string_value(v), list);
}

/* Parses a hex id as policies write it: "0x" and hex digits, or hex digits
 * alone, as `lspci -n` and Nova's [pci] device_spec write them ("10de";
 * nova/pci/devspec.py parses vendor_id with int(x, 16) and writes '%04x').
 * *ret_digits counts the digits, leading zeros included (not the "0x"); a
 * value of more than 8 significant digits reads as G_MAXUINT64 (out of every
 * range).  Nothing else is accepted: no sign, no blanks, no "0X". */
static gboolean
parse_hex(const char *s, guint64 *ret_value, gsize *ret_digits)
{
    guint64 v = 0;
    gsize n;

    if (g_str_has_prefix(s, "0x"))
        s += 2;
    n = strlen(s);
    if (n == 0 || strspn(s, "0123456789abcdefABCDEF") != n)
        return FALSE;
    while (*s == '0' && s[1])
        s++;                      /* leading zeros do not count towards the range */
    for (const char *c = s; *c && strlen(s) <= 8; c++)
        v = (v << 4) | (guint64)g_ascii_xdigit_value(*c);
    *ret_value = strlen(s) <= 8 ? v : G_MAXUINT64;
    *ret_digits = n;
    return TRUE;
}

static gboolean
get_hex16_value(const PolicyParse *pp, json_t *v, const char *path, const char *display,
                guint16 *ret, GError **error)
{
    guint64 value;
    gsize digits;

    if (!json_is_string(v))
        return type_fail(pp, path, display, "a string of hex digits such as '10de' or '0x10de'", v, error);
    if (!parse_hex(json_string_value(v), &value, &digits))
        return policy_fail(pp, path, FALSE, error,
                           "'%s' is not a hex id: '%s'; expected 1 to 4 hex digits, with or without '0x', such as '10de' or '0x10de'",
                           display, json_string_value(v));
    if (value > 0xffff)
        return policy_fail(pp, path, FALSE, error, "'%s' is out of range: '%s'; expected 0000 to ffff (or 0x0000 to 0xffff)",
                           display, json_string_value(v));
    if (digits > 4)
        return policy_fail(pp, path, FALSE, error,
                           "'%s' is not a hex id: '%s'; expected 1 to 4 hex digits, with or without '0x', such as '10de' or '0x10de'",
                           display, json_string_value(v));
    *ret = (guint16)value;
    return TRUE;
}

/* A class code "0302" or "0x0302" (base class and subclass: mask 0xffff00)
 * or "030200" or "0x030200" (all 24 bits). */
static gboolean
get_class_value(const PolicyParse *pp, json_t *v, const char *path, const char *display, guint32 *ret_class,
                guint32 *ret_mask, GError **error)
{
    guint64 value;
    gsize digits = 0;

    if (!json_is_string(v))
        return type_fail(pp, path, display, "a string of hex digits such as '0302' or '0x0302'", v, error);
    if (!parse_hex(json_string_value(v), &value, &digits) || (digits != 4 && digits != 6))
        return policy_fail(pp, path, FALSE, error,
                           "'%s' is not a class code: '%s'; expected 4 hex digits (base class and subclass, such as '0302' or '0x0302') or 6 (with the programming interface, such as '030200' or '0x030200'), with or without '0x'",
                           display, json_string_value(v));
    if (digits == 4) {
        *ret_class = (guint32)value << 8;
        *ret_mask = 0xffff00;
    } else {
        *ret_class = (guint32)value;
        *ret_mask = 0xffffff;
    }
    return TRUE;
}

/* ---- match ---- */

/* A string or a non-empty list of strings, each passed to @each. */
typedef gboolean (*StringItemFunc)(const PolicyParse *pp, AvProfile *profile, json_t *item,
                                   const char *path, const char *display, GError **error);

static gboolean
get_string_or_list(const PolicyParse *pp, AvProfile *profile, json_t *v, const char *path,
                   const char *display, const char *item_expected, const char *empty_hint,
                   StringItemFunc each, GError **error)
{
    gsize i;
    json_t *item;

    if (json_is_string(v))
        return each(pp, profile, v, path, display, error);
    if (!json_is_array(v)) {
        g_autofree char *expected = g_strdup_printf("%s or a list of them", item_expected);
        return type_fail(pp, path, display, expected, v, error);
    }
    if (json_array_size(v) == 0)
        return policy_fail(pp, path, FALSE, error, "'%s' is an empty list; %s", display, empty_hint);
    json_array_foreach(v, i, item) {
        g_autofree char *ip = g_strdup_printf("%s/%zu", path, i);
        g_autofree char *id = g_strdup_printf("%s[%zu]", display, i);

        if (!json_is_string(item))
            return type_fail(pp, ip, id, item_expected, item, error);
        if (!each(pp, profile, item, ip, id, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
add_device_id(const PolicyParse *pp, AvProfile *profile, json_t *item, const char *path,
              const char *display, GError **error)
{
    guint16 id;

    if (!get_hex16_value(pp, item, path, display, &id, error))
        return FALSE;
    g_array_append_val(profile->match_devices, id);
    return TRUE;
}

static gboolean
add_address(const PolicyParse *pp, AvProfile *profile, json_t *item, const char *path,
            const char *display, GError **error)
{
    const char *s = json_string_value(item);

    if (profile->attach == AV_ATTACH_USB) {
        if (!av_usb_bus_path_is_valid(s))
            return policy_fail(pp, path, FALSE, error,
                               "'%s' is not a USB bus path: '%s'; expected the form 1-1.2 (bus-port.port...), as in /sys/bus/usb/devices",
                               display, s);
        g_ptr_array_add(profile->match_addresses, g_strdup(s));
    } else {
        /* Either case is accepted; stored lower-case, the kernel's form. */
        g_autofree char *lower = g_ascii_strdown(s, -1);

        if (!av_pci_address_is_valid(lower))
            return policy_fail(pp, path, FALSE, error,
                               "'%s' is not a PCI address: '%s'; expected the form 0000:3b:00.0 (domain:bus:slot.function)",
                               display, s);
        g_ptr_array_add(profile->match_addresses, g_steal_pointer(&lower));
    }
    return TRUE;
}

static gboolean
add_mdev_parent(const PolicyParse *pp, AvProfile *profile, json_t *item, const char *path,
                const char *display, GError **error)
{
    const char *s = json_string_value(item);
    g_autofree char *lower = g_ascii_strdown(s, -1);

    if (!av_mdev_parent_name_is_valid(s))
        return policy_fail(pp, path, FALSE, error,
                           "'%s' is not an mdev parent name: '%s'; expected a name listed in /sys/class/mdev_bus, such as 'mtty' or '0000:17:00.0' (letters, digits, '_', '.', ':' and '-', at most 64)",
                           display, s);
    /* A PCI address in either case is stored in the kernel's lower case. */
    g_ptr_array_add(profile->match_mdev_parents, g_strdup(av_pci_address_is_valid(lower) ? lower : s));
    return TRUE;
}

static gboolean
add_pf(const PolicyParse *pp, AvProfile *profile, json_t *item, const char *path,
       const char *display, GError **error)
{
    g_autofree char *lower = g_ascii_strdown(json_string_value(item), -1);

    if (!av_pci_address_is_valid(lower))
        return policy_fail(pp, path, FALSE, error,
                           "'%s' is not a PCI address: '%s'; expected the PF's address in the form 0000:6b:00.0 "
                           "(domain:bus:slot.function)", display, json_string_value(item));
    g_ptr_array_add(profile->match_pfs, g_steal_pointer(&lower));
    return TRUE;
}

/* "match": {"pf": ADDRESS or [ADDRESSES]}: an "sriov-vf" profile that takes
 * the VFs of these PFs only (and, with "vfs", makes VFs on these only). */
static gboolean
parse_match_pf(const PolicyParse *pp, AvProfile *profile, json_t *match, const char *path, GError **error)
{
    g_autofree char *pp_path = path_join(path, "pf");
    json_t *v = json_object_get(match, "pf");

    if (!v)
        return TRUE;
    if (profile->attach != AV_ATTACH_SRIOV_VF)
        return policy_fail(pp, pp_path, TRUE, error,
                           "'match.pf' is only allowed with attach 'sriov-vf', not with attach '%s'; it names the PFs "
                           "whose VFs the profile takes", av_attach_to_string(profile->attach));
    return get_string_or_list(pp, profile, v, pp_path, "match.pf", "a string such as '0000:6b:00.0' (a PF's PCI address)",
                              "list at least one PF address, or leave 'pf' out to take VFs of every PF",
                              add_pf, error);
}

/* "match": {"mdev_parent": NAME or [NAMES]}: an "mdev" profile that takes
 * parents by their name in /sys/class/mdev_bus, PCI or not, instead of by
 * PCI ids (so without "vendor", and with no PCI key beside it). */
static gboolean
parse_match_mdev_parent(const PolicyParse *pp, AvProfile *profile, json_t *match, const char *path,
                        json_t *v, GError **error)
{
    static const char *const pci_keys[] = { "vendor", "device", "class", "subsystem_vendor",
                                            "subsystem_device", "address", NULL };
    g_autofree char *mp = path_join(path, "mdev_parent");

    if (profile->attach != AV_ATTACH_MDEV)
        return policy_fail(pp, mp, TRUE, error,
                           "'match.mdev_parent' is only allowed with attach 'mdev', not with attach '%s'; "
                           "other profiles match devices by their ids",
                           av_attach_to_string(profile->attach));
    for (gsize i = 0; pci_keys[i]; i++) {
        if (json_object_get(match, pci_keys[i])) {
            g_autofree char *kp = path_join(path, pci_keys[i]);
            return policy_fail(pp, kp, TRUE, error,
                               "'match.%s' cannot be combined with 'match.mdev_parent'; a profile takes mdev "
                               "parents either by name or by PCI ids, so write two profiles",
                               pci_keys[i]);
        }
    }
    return get_string_or_list(pp, profile, v, mp, "match.mdev_parent",
                              "a string such as 'mtty' (an mdev parent name)",
                              "list at least one mdev parent name, such as \"mtty\"",
                              add_mdev_parent, error);
}

static gboolean
parse_match(const PolicyParse *pp, AvProfile *profile, json_t *match, const char *base, GError **error)
{
    g_autofree char *path = path_join(base, "match");
    json_t *v;

    if (!json_is_object(match))
        return type_fail(pp, path, "match", "an object", match, error);
    if (!check_keys(pp, match, path, " in 'match'", match_keys, error))
        return FALSE;
    if (!parse_match_pf(pp, profile, match, path, error))
        return FALSE;

    v = json_object_get(match, "mdev_parent");
    if (v)
        return parse_match_mdev_parent(pp, profile, match, path, v, error);

    v = json_object_get(match, "vendor");
    if (!v)
        return policy_fail(pp, path, FALSE, error, "'match' has no 'vendor'; it is required (such as \"vendor\": \"0x10de\")");
    {
        g_autofree char *vp = path_join(path, "vendor");
        if (!get_hex16_value(pp, v, vp, "match.vendor", &profile->match_vendor, error))
            return FALSE;
        profile->match_vendor_set = TRUE;
    }

    v = json_object_get(match, "device");
    if (v) {
        g_autofree char *dp = path_join(path, "device");
        if (!get_string_or_list(pp, profile, v, dp, "match.device", "a string of hex digits such as '20b5' or '0x20b5'",
                                "list at least one device id, or leave 'device' out to match every device of the vendor",
                                add_device_id, error))
            return FALSE;
    }

    if (profile->attach == AV_ATTACH_USB) {
        static const char *const pci_only[] = { "class", "subsystem_vendor", "subsystem_device", NULL };

        for (gsize i = 0; pci_only[i]; i++) {
            if (json_object_get(match, pci_only[i])) {
                g_autofree char *kp = path_join(path, pci_only[i]);
                return policy_fail(pp, kp, TRUE, error,
                                   "'match.%s' applies to PCI devices only, not to attach 'usb'; a USB profile matches vendor, device and address",
                                   pci_only[i]);
            }
        }
    }

    v = json_object_get(match, "class");
    if (v) {
        g_autofree char *cp = path_join(path, "class");

        if (!get_class_value(pp, v, cp, "match.class", &profile->match_class, &profile->match_class_mask, error))
            return FALSE;
        profile->match_class_set = TRUE;
    }

    v = json_object_get(match, "subsystem_vendor");
    if (v) {
        g_autofree char *sp = path_join(path, "subsystem_vendor");
        if (!get_hex16_value(pp, v, sp, "match.subsystem_vendor", &profile->match_subsystem_vendor, error))
            return FALSE;
        profile->match_subsystem_vendor_set = TRUE;
    }
    v = json_object_get(match, "subsystem_device");
    if (v) {
        g_autofree char *sp = path_join(path, "subsystem_device");
        if (!get_hex16_value(pp, v, sp, "match.subsystem_device", &profile->match_subsystem_device, error))
            return FALSE;
        profile->match_subsystem_device_set = TRUE;
    }

    v = json_object_get(match, "address");
    if (v) {
        g_autofree char *ap = path_join(path, "address");
        const char *expected = profile->attach == AV_ATTACH_USB
            ? "a string such as '1-1.2' (a USB bus path)"
            : "a string such as '0000:3b:00.0' (a PCI address)";

        if (!get_string_or_list(pp, profile, v, ap, "match.address", expected,
                                "list at least one address, or leave 'address' out to match at every address",
                                add_address, error))
            return FALSE;
    }
    return TRUE;
}

/* ---- companions ---- */

/* "companions": [{"class": "0x0403"}, {"vendor": "0x10de", "device": ["0x1aef"]}]:
 * the functions of the card, other than the pooled ones, that belong to the
 * accelerator and go to the guest with it (av_vfio_group_check()).  Only for
 * attach "vfio-pci": a VF, an mdev parent or a USB device takes no other
 * function with it. */
static gboolean
parse_companions(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *v = json_object_get(obj, "companions");
    g_autofree char *path = path_join(base, "companions");
    gsize i;
    json_t *item;

    if (!v)
        return TRUE;
    if (profile->attach != AV_ATTACH_VFIO_PCI)
        return policy_fail(pp, path, TRUE, error,
                           "'companions' is only allowed with attach 'vfio-pci', not with attach '%s'; only a whole "
                           "card takes its other functions with it",
                           av_attach_to_string(profile->attach));
    if (!json_is_array(v))
        return type_fail(pp, path, "companions", "a list of objects such as [{\"class\": \"0x0403\"}]", v, error);
    json_array_foreach(v, i, item) {
        g_autofree char *ip = g_strdup_printf("%s/%zu", path, i);
        g_autofree char *id = g_strdup_printf("companions[%zu]", i);
        g_autoptr(AvCompanionMatch) c = g_new0(AvCompanionMatch, 1);
        json_t *f;

        c->devices = g_array_new(FALSE, FALSE, sizeof(guint16));
        if (!json_is_object(item))
            return type_fail(pp, ip, id, "an object such as {\"class\": \"0x0403\"}", item, error);
        if (!check_keys(pp, item, ip, " in a companion", companion_keys, error))
            return FALSE;
        if (json_object_size(item) == 0)
            return policy_fail(pp, ip, FALSE, error,
                               "'%s' is empty and would take every function of the card, the host's too; "
                               "name its class (such as \"0x0403\" for HDMI audio) or its vendor and device ids", id);
        if ((f = json_object_get(item, "vendor"))) {
            g_autofree char *fp = path_join(ip, "vendor");
            g_autofree char *fd = g_strdup_printf("%s.vendor", id);

            if (!get_hex16_value(pp, f, fp, fd, &c->vendor, error))
                return FALSE;
            c->vendor_set = TRUE;
        }
        if ((f = json_object_get(item, "device"))) {
            g_autofree char *fp = path_join(ip, "device");
            g_autofree char *fd = g_strdup_printf("%s.device", id);
            json_t *one = json_is_array(f) ? NULL : f;
            gsize n = one ? 1 : json_array_size(f);

            if (!json_is_string(f) && !json_is_array(f))
                return type_fail(pp, fp, fd, "a string of hex digits such as '1aef' or '0x1aef', or a list of them", f, error);
            if (n == 0)
                return policy_fail(pp, fp, FALSE, error, "'%s' is an empty list; list at least one device id", fd);
            if (!c->vendor_set)
                return policy_fail(pp, fp, TRUE, error, "'%s' needs the 'vendor' of the device ids", fd);
            for (gsize j = 0; j < n; j++) {
                json_t *d = one ? one : json_array_get(f, j);
                g_autofree char *dp = one ? g_strdup(fp) : g_strdup_printf("%s/%zu", fp, j);
                g_autofree char *dd = one ? g_strdup(fd) : g_strdup_printf("%s[%zu]", fd, j);
                guint16 dev_id;

                if (!get_hex16_value(pp, d, dp, dd, &dev_id, error))
                    return FALSE;
                g_array_append_val(c->devices, dev_id);
            }
        }
        if ((f = json_object_get(item, "class"))) {
            g_autofree char *fp = path_join(ip, "class");
            g_autofree char *fd = g_strdup_printf("%s.class", id);

            if (!get_class_value(pp, f, fp, fd, &c->class_code, &c->class_mask, error))
                return FALSE;
            c->class_set = TRUE;
        }
        g_ptr_array_add(profile->companions, g_steal_pointer(&c));
    }
    return TRUE;
}

/* Fails the load at @path ("FILE:LINE:COLUMN: ..."), with the error @local
 * of a check of the file that @display names: AV_ERROR_UNSAFE stays so,
 * anything else is a policy error. */
static gboolean
policy_fail_file(const PolicyParse *pp, const char *path, const char *display, const GError *local, GError **error)
{
    policy_fail(pp, path, FALSE, error, "'%s': %s", display, local->message);
    if (error && *error && g_error_matches(local, AV_ERROR, AV_ERROR_UNSAFE))
        (*error)->code = AV_ERROR_UNSAFE;
    return FALSE;
}

/* See av-policy.h. */
gboolean
av_policy_parse_size(const char *text, guint64 *ret_bytes)
{
    static const struct {
        const char *unit;
        guint64 factor;
    } units[] = {
        { "", 1 }, { "B", 1 },
        { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 }, { "TiB", 1ull << 40 },
        { "kB", 1000ull }, { "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull },
        { "TB", 1000000000000ull },
    };
    const char *p = text;
    const char *unit;
    guint64 n = 0;

    if (!g_ascii_isdigit(*p))
        return FALSE;
    for (; g_ascii_isdigit(*p); p++) {
        if (n > (G_MAXUINT64 - 9) / 10)
            return FALSE;
        n = n * 10 + (guint64)(*p - '0');
    }
    unit = *p == ' ' ? p + 1 : p;
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        if (!g_str_equal(unit, units[i].unit) || (unit != p && !units[i].unit[0]))
            continue;
        if (n == 0 || n > (guint64)G_MAXINT64 / units[i].factor)
            return FALSE;
        *ret_bytes = n * units[i].factor;
        return TRUE;
    }
    return FALSE;
}

/* ---- scrub ---- */

/* The "timeout" of @obj (at @base, shown as "@display.timeout"): 1 to
 * @max seconds, @def when absent.  @why_max (or NULL) ends the message of
 * a value above @max. */
static gboolean
get_timeout_max(const PolicyParse *pp, json_t *obj, const char *base, const char *display,
                guint def, guint max, const char *why_max, guint *ret, GError **error)
{
    json_t *v = json_object_get(obj, "timeout");
    g_autofree char *path = path_join(base, "timeout");
    g_autofree char *disp = g_strdup_printf("%s.timeout", display);
    json_int_t t;

    *ret = def;
    if (!v)
        return TRUE;
    if (!json_is_integer(v))
        return type_fail(pp, path, disp, "a whole number of seconds", v, error);
    t = json_integer_value(v);
    if (t < 1 || t > (json_int_t)max)
        return policy_fail(pp, path, FALSE, error, "'%s' is out of range: %" JSON_INTEGER_FORMAT "; expected 1 to %u seconds%s",
                           disp, t, max, t > (json_int_t)max && why_max ? why_max : "");
    *ret = (guint)t;
    return TRUE;
}

static gboolean
get_timeout(const PolicyParse *pp, json_t *step, const char *base, const char *display,
            guint def, guint *ret, GError **error)
{
    return get_timeout_max(pp, step, base, display, def, AV_POLICY_MAX_TIMEOUT, NULL, ret, error);
}

static gboolean
check_absolute_path(const PolicyParse *pp, json_t *v, const char *path, const char *display, GError **error)
{
    const char *s;

    if (!json_is_string(v))
        return type_fail(pp, path, display, "a string (an absolute path)", v, error);
    s = json_string_value(v);
    if (s[0] != '/')
        return policy_fail(pp, path, FALSE, error, "'%s' is not an absolute path: '%s'; expected a path that starts with '/'",
                           display, s);
    return TRUE;
}

/* The document's checks of the argv @argv at @ap (shown as @ad, such as
 * "scrub[0].argv"): a non-empty list of strings, the first an absolute
 * path.  With @is_template (a "program" or a driver command), its program
 * names no placeholder and every element names only those of
 * av_profile_argv_expand(). */
static gboolean
check_argv_document(const PolicyParse *pp, json_t *argv, const char *ap, const char *ad, gboolean is_template,
                    GError **error)
{
    gsize i;
    json_t *item;

    if (!json_is_array(argv))
        return type_fail(pp, ap, ad, "a list of strings", argv, error);
    if (json_array_size(argv) == 0)
        return policy_fail(pp, ap, FALSE, error, "'%s' is an empty list; expected the program (an absolute path) and its arguments", ad);
    json_array_foreach(argv, i, item) {
        g_autofree char *ip = g_strdup_printf("%s/%zu", ap, i);
        g_autofree char *id = g_strdup_printf("%s[%zu]", ad, i);
        g_autoptr(GError) local = NULL;

        if (i == 0) {
            if (!check_absolute_path(pp, item, ip, id, error))
                return FALSE;
        } else if (!json_is_string(item)) {
            return type_fail(pp, ip, id, "a string", item, error);
        }
        if (!is_template)
            continue;
        if (i == 0 && strpbrk(json_string_value(item), "{}"))
            return policy_fail(pp, ip, FALSE, error,
                               "'%s' names a placeholder: '%s'; the program must be a fixed absolute path, with the "
                               "placeholders in its arguments", id, json_string_value(item));
        if (!av_argv_expand_one(json_string_value(item), NULL, NULL, &local))
            return policy_fail(pp, ip, FALSE, error, "'%s': %s", id, local->message);
    }
    return TRUE;
}

/* The files that the argv @argv at @ap (shown as @ad) names, when the
 * parse checks files: trusted (check_argv_trusted(), its program shown as
 * @what); the error points at the element at fault.  Called after the
 * document's own checks, so that its mistakes come first. */
static gboolean
check_argv_files(const PolicyParse *pp, const json_t *argv, const char *ap, const char *ad, gboolean is_template,
                 const char *what, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *ip = NULL;
    g_autofree char *id = NULL;
    guint bad = 0;

    if (!pp->check_files || !argv || check_argv_trusted(argv, is_template, what, &bad, &local))
        return TRUE;
    ip = g_strdup_printf("%s/%u", ap, bad);
    id = g_strdup_printf("%s[%u]", ad, bad);
    return policy_fail_file(pp, ip, id, local, error);
}

/* One step of "scrub": stores a new step in *ret_step, or returns FALSE
 * with @error set. */
static gboolean
parse_scrub_step(const PolicyParse *pp, AvProfile *profile, json_t *step, const char *path,
                 const char *display, gsize index, gsize count, AvScrubStep **ret_step, GError **error)
{
    g_autoptr(AvScrubStep) s = g_new0(AvScrubStep, 1);
    g_autofree char *mpath = path_join(path, "method");
    json_t *mv;
    int method = -1;
    const char *const *allowed;
    static const char *const none_keys[] = { "method", NULL };
    static const char *const command_keys[] = { "method", "argv", "timeout", NULL };
    static const char *const zero_keys[] = { "method", "bars", "verify", "resize", NULL };
    static const char *const reset_keys[] = { "method", "methods", NULL };
    static const char *const vm_keys[] = { "method", "template", "timeout", NULL };
    static const char *const reauthorize_keys[] = { "method", "timeout", NULL };
    const char *method_name;

    if (!json_is_object(step))
        return type_fail(pp, path, display, "an object such as {\"method\": \"reset\"}", step, error);
    mv = json_object_get(step, "method");
    if (!mv) {
        g_autofree char *list = names_join(scrub_names);
        return policy_fail(pp, path, FALSE, error, "'%s' has no 'method'; expected one of %s", display, list);
    }
    if (!json_is_string(mv)) {
        g_autofree char *list = names_join(scrub_names);
        g_autofree char *expected = g_strdup_printf("a string, one of %s", list);
        g_autofree char *disp = g_strdup_printf("%s.method", display);
        return type_fail(pp, mpath, disp, expected, mv, error);
    }
    method_name = json_string_value(mv);
    for (gsize i = 0; scrub_names[i]; i++) {
        if (g_str_equal(scrub_names[i], method_name))
            method = scrub_values[i];
    }
    if (method < 0) {
        g_autofree char *list = names_join(scrub_names);
        return policy_fail(pp, mpath, FALSE, error, "unknown scrub method '%s'; expected one of %s", method_name, list);
    }
    s->method = (AvScrubMethod)method;

    switch (s->method) {
    case AV_SCRUB_METHOD_COMMAND: allowed = command_keys; break;
    case AV_SCRUB_METHOD_VFIO_ZERO: allowed = zero_keys; break;
    case AV_SCRUB_METHOD_RESET: allowed = reset_keys; break;
    case AV_SCRUB_METHOD_VM: allowed = vm_keys; break;
    case AV_SCRUB_METHOD_USB_REAUTHORIZE: allowed = reauthorize_keys; break;
    case AV_SCRUB_METHOD_USB_POWER_CYCLE: allowed = reauthorize_keys; break;
    default: allowed = none_keys; break;
    }
    {
        const char *key;
        json_t *v;

        json_object_foreach(step, key, v) {
            if (!name_in(allowed, key)) {
                g_autofree char *kp = path_join(path, key);

                if (allowed == none_keys)
                    return policy_fail(pp, kp, TRUE, error, "unknown key '%s' in '%s'; scrub method '%s' takes no options",
                                       key, display, method_name);
                {
                    g_autofree char *list = g_strjoinv(", ", (char **)allowed + 1);
                    return policy_fail(pp, kp, TRUE, error, "unknown key '%s' in '%s'; the options of scrub method '%s' are %s",
                                       key, display, method_name, list);
                }
            }
        }
    }

    if (s->method == AV_SCRUB_METHOD_NONE && count > 1)
        return policy_fail(pp, mpath, FALSE, error,
                           "scrub method 'none' must be the only step; remove it, or remove the other steps");
    if (!scrub_method_fits(pp, profile, s->method, method_name, mpath, error))
        return FALSE;
    /* The base image back (accelvirt-policy(5), PROGRAMMING), with the
     * program's timeout: the profile's "program" is parsed before its scrub. */
    if (s->method == AV_SCRUB_METHOD_PROGRAM_BASE) {
        if (!profile->program || !profile->program->base)
            return policy_fail(pp, mpath, FALSE, error,
                               "scrub method 'program-base' needs the profile's 'program' with a 'base' (the bitstream "
                               "it programs back); %s, or remove the step",
                               profile->program ? "add \"base\": NAME to 'program'"
                                                : "add \"program\": {\"argv\": [...], \"base\": NAME}");
        if (index > 0)
            return policy_fail(pp, mpath, FALSE, error,
                               "scrub method 'program-base' must be the first step, so that the tenant's logic is "
                               "gone before the other steps clear the device; move it to the front");
        s->timeout_s = profile->program->timeout_s;
    }

    s->options = json_deep_copy(step);

    switch (s->method) {
    case AV_SCRUB_METHOD_COMMAND: {
        json_t *argv = json_object_get(step, "argv");
        g_autofree char *ap = path_join(path, "argv");
        g_autofree char *ad = g_strdup_printf("%s.argv", display);

        if (!argv)
            return policy_fail(pp, path, FALSE, error,
                               "scrub method 'command' requires 'argv', a list of strings whose first is an absolute path");
        if (!check_argv_document(pp, argv, ap, ad, FALSE, error))
            return FALSE;
        if (!get_timeout(pp, step, path, display, AV_SCRUB_COMMAND_TIMEOUT_DEFAULT, &s->timeout_s, error))
            return FALSE;
        json_object_set_new(s->options, "timeout", json_integer(s->timeout_s));
        /* The file last: the document's own mistakes come first. */
        if (!check_argv_files(pp, argv, ap, ad, FALSE, "scrub program", error))
            return FALSE;
        break;
    }
    case AV_SCRUB_METHOD_VFIO_ZERO: {
        json_t *bars = json_object_get(step, "bars");
        json_t *verify = json_object_get(step, "verify");

        if (bars) {
            g_autofree char *bp = path_join(path, "bars");
            g_autofree char *bd = g_strdup_printf("%s.bars", display);
            guint seen = 0;
            gsize i;
            json_t *item;

            if (!json_is_array(bars))
                return type_fail(pp, bp, bd, "a list of BAR numbers 0 to 5", bars, error);
            if (json_array_size(bars) == 0)
                return policy_fail(pp, bp, FALSE, error,
                                   "'%s' is an empty list; list BAR numbers 0 to 5, or leave 'bars' out to zero every memory BAR", bd);
            json_array_foreach(bars, i, item) {
                g_autofree char *ip = g_strdup_printf("%s/%zu", bp, i);
                g_autofree char *id = g_strdup_printf("%s[%zu]", bd, i);
                json_int_t b;

                if (!json_is_integer(item))
                    return type_fail(pp, ip, id, "a BAR number 0 to 5", item, error);
                b = json_integer_value(item);
                if (b < 0 || b > 5)
                    return policy_fail(pp, ip, FALSE, error, "'%s' is out of range: %" JSON_INTEGER_FORMAT "; expected a BAR number 0 to 5", id, b);
                if (seen & (1u << b))
                    return policy_fail(pp, ip, FALSE, error, "'%s' repeats BAR %" JSON_INTEGER_FORMAT, id, b);
                seen |= 1u << b;
            }
        }
        {
            json_t *resize = json_object_get(step, "resize");

            if (resize && !json_is_boolean(resize)) {
                g_autofree char *rp = path_join(path, "resize");
                g_autofree char *rd = g_strdup_printf("%s.resize", display);

                return type_fail(pp, rp, rd, "true or false", resize, error);
            }
            if (!resize)
                json_object_set_new(s->options, "resize", json_false());
        }
        if (verify) {
            g_autofree char *vp = path_join(path, "verify");
            g_autofree char *vd = g_strdup_printf("%s.verify", display);

            if (!json_is_string(verify))
                return type_fail(pp, vp, vd, "a string, one of full, sample", verify, error);
            if (!name_in(verify_names, json_string_value(verify)))
                return policy_fail(pp, vp, FALSE, error, "unknown verify '%s'; expected one of full, sample",
                                   json_string_value(verify));
        } else {
            json_object_set_new(s->options, "verify", json_string("full"));
        }
        break;
    }
    case AV_SCRUB_METHOD_RESET: {
        json_t *methods = json_object_get(step, "methods");

        if (methods) {
            g_autofree char *mp = path_join(path, "methods");
            g_autofree char *md = g_strdup_printf("%s.methods", display);
            g_autofree char *list = names_join(reset_method_names);
            g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
            gsize i;
            json_t *item;

            if (!json_is_array(methods)) {
                g_autofree char *expected = g_strdup_printf("a list of reset methods (%s)", list);
                return type_fail(pp, mp, md, expected, methods, error);
            }
            if (json_array_size(methods) == 0)
                return policy_fail(pp, mp, FALSE, error,
                                   "'%s' is an empty list; list reset methods (%s), or leave 'methods' out to use the kernel's", md, list);
            json_array_foreach(methods, i, item) {
                g_autofree char *ip = g_strdup_printf("%s/%zu", mp, i);
                g_autofree char *id = g_strdup_printf("%s[%zu]", md, i);
                const char *m;

                if (!json_is_string(item)) {
                    g_autofree char *expected = g_strdup_printf("a string, one of %s", list);
                    return type_fail(pp, ip, id, expected, item, error);
                }
                m = json_string_value(item);
                if (!name_in(reset_method_names, m))
                    return policy_fail(pp, ip, FALSE, error, "unknown reset method '%s'; expected one of %s", m, list);
                if (!g_hash_table_add(seen, (gpointer)m))
                    return policy_fail(pp, ip, FALSE, error, "'%s' repeats reset method '%s'", id, m);
            }
        }
        break;
    }
    case AV_SCRUB_METHOD_USB_REAUTHORIZE:
    case AV_SCRUB_METHOD_USB_POWER_CYCLE:
        if (!get_timeout(pp, step, path, display, AV_SCRUB_USB_REAUTHORIZE_TIMEOUT_DEFAULT, &s->timeout_s, error))
            return FALSE;
        json_object_set_new(s->options, "timeout", json_integer(s->timeout_s));
        break;
    case AV_SCRUB_METHOD_VM: {
        json_t *tmpl = json_object_get(step, "template");
        g_autofree char *tp = path_join(path, "template");
        g_autofree char *td = g_strdup_printf("%s.template", display);

        if (!tmpl)
            return policy_fail(pp, path, FALSE, error,
                               "scrub method 'vm' requires 'template', the absolute path of the scrub VM's domain XML template");
        if (!check_absolute_path(pp, tmpl, tp, td, error))
            return FALSE;
        if (!get_timeout(pp, step, path, display, AV_SCRUB_VM_TIMEOUT_DEFAULT, &s->timeout_s, error))
            return FALSE;
        json_object_set_new(s->options, "timeout", json_integer(s->timeout_s));
        if (pp->check_files) {
            g_autoptr(GError) local = NULL;
            g_autofree char *text = av_policy_read_scrub_template(json_string_value(tmpl), &local);

            if (!text)
                return policy_fail_file(pp, tp, td, local, error);
        }
        break;
    }
    default:
        break;
    }
    *ret_step = g_steal_pointer(&s);
    return TRUE;
}

static gboolean
parse_scrub(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *scrub = json_object_get(obj, "scrub");
    g_autofree char *path = path_join(base, "scrub");
    gsize i;
    json_t *step;

    if (!scrub) {
        /* the default: a PCI function is reset (a card of attach netdev on
         * its host driver, through sysfs); an mdev is destroyed by its
         * parent's driver and a USB device has nothing to reset here */
        if (profile->attach == AV_ATTACH_VFIO_PCI || profile->attach == AV_ATTACH_SRIOV_VF ||
            profile->attach == AV_ATTACH_NETDEV) {
            AvScrubStep *s = g_new0(AvScrubStep, 1);

            s->method = AV_SCRUB_METHOD_RESET;
            s->options = json_pack("{s:s}", "method", "reset");
            g_ptr_array_add(profile->scrub, s);
        }
        return TRUE;
    }
    if (!json_is_array(scrub))
        return type_fail(pp, path, "scrub", "a list of steps such as [{\"method\": \"reset\"}]", scrub, error);
    if (json_array_size(scrub) == 0)
        return policy_fail(pp, path, FALSE, error,
                           "'scrub' is an empty list; write [{\"method\": \"none\"}] to scrub nothing, or leave 'scrub' out for the default");
    json_array_foreach(scrub, i, step) {
        g_autofree char *sp = g_strdup_printf("%s/%zu", path, i);
        g_autofree char *sd = g_strdup_printf("scrub[%zu]", i);
        AvScrubStep *s = NULL;

        if (!parse_scrub_step(pp, profile, step, sp, sd, i, json_array_size(scrub), &s, error) || !s)
            return FALSE;
        if (s->method == AV_SCRUB_METHOD_NONE)
            av_scrub_step_free(s);
        else
            g_ptr_array_add(profile->scrub, s);
    }
    return TRUE;
}

/* ---- programs and driver commands ---- */

G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvProgram, av_program_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvDriverCommand, av_driver_command_free)

/* The argv template at @key of @obj (at @base, shown as "@display.@key"):
 * the document's checks (check_argv_document()); NULL in *ret_argv when
 * absent and not @required.  The files it names are checked apart
 * (check_argv_files()).  *ret_argv is a new reference. */
static gboolean
parse_argv_template(const PolicyParse *pp, json_t *obj, const char *key, const char *base, const char *display,
                    gboolean required, json_t **ret_argv, GError **error)
{
    json_t *argv = json_object_get(obj, key);
    g_autofree char *ap = path_join(base, key);
    g_autofree char *ad = g_strdup_printf("%s.%s", display, key);

    if (!argv) {
        *ret_argv = NULL;
        if (!required)
            return TRUE;
        return policy_fail(pp, base, FALSE, error,
                           "'%s' requires '%s', a list of strings whose first is an absolute path", display, key);
    }
    if (!check_argv_document(pp, argv, ap, ad, TRUE, error))
        return FALSE;
    *ret_argv = json_deep_copy(argv);
    return TRUE;
}

/* "program": how the profile's devices are programmed with a bitstream
 * (accelvirt-policy(5), PROGRAMMING).  Only a PCI function (attach
 * "vfio-pci" or "sriov-vf") is.  Parsed before the scrub, whose
 * "program-base" step needs its "base"; the driver it names is checked
 * against "restore_driver" by check_program_driver(). */
static gboolean
parse_program(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    static const char *const program_keys[] = { "argv", "verify", "timeout", "base", "driver", NULL };
    json_t *v = json_object_get(obj, "program");
    g_autofree char *path = path_join(base, "program");
    g_autofree char *bp = path_join(path, "base");
    g_autoptr(AvProgram) program = NULL;
    int driver = AV_PROGRAM_DRIVER_VFIO;
    const char *s = NULL;

    if (!v)
        return TRUE;
    if (profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF)
        return policy_fail(pp, path, TRUE, error,
                           "'program' is only allowed with attach 'vfio-pci' or 'sriov-vf', not with attach '%s'; "
                           "only a PCI function is programmed (driver commands such as 'on_assign' work for any "
                           "attach)", av_attach_to_string(profile->attach));
    if (!json_is_object(v))
        return type_fail(pp, path, "program", "an object such as {\"argv\": [\"/opt/vendor/bin/program\", "
                         "\"{address}\", \"{bitstream}\"]}", v, error);
    if (!check_keys(pp, v, path, " in 'program'", program_keys, error))
        return FALSE;
    program = g_new0(AvProgram, 1);
    if (!parse_argv_template(pp, v, "argv", path, "program", TRUE, &program->argv, error) ||
        !parse_argv_template(pp, v, "verify", path, "program", FALSE, &program->verify, error) ||
        !get_timeout(pp, v, path, "program", AV_PROGRAM_TIMEOUT_DEFAULT, &program->timeout_s, error) ||
        !get_string(pp, v, "base", path, "program.base", &s, error))
        return FALSE;
    if (s && !av_bitstream_ref_is_valid(s))
        return policy_fail(pp, bp, FALSE, error,
                           "invalid program.base '%s'; expected a bitstream of the library, by its name (1 to 63 "
                           "characters of a-z, 0-9, '.', '_' and '-', the first a letter or digit) or its SHA-256 "
                           "(64 lower-case hex digits)", s);
    program->base = g_strdup(s);
    if (!get_enum(pp, v, "driver", path, program_driver_names, program_driver_values, &driver, error))
        return FALSE;
    program->driver = (AvProgramDriver)driver;
    {
        g_autofree char *ap = path_join(path, "argv");
        g_autofree char *vp = path_join(path, "verify");

        if (!check_argv_files(pp, program->argv, ap, "program.argv", TRUE, "program", error) ||
            !check_argv_files(pp, program->verify, vp, "program.verify", TRUE, "verify program", error))
            return FALSE;
    }
    profile->program = g_steal_pointer(&program);
    return TRUE;
}

/* "on_prepare", "on_release", "on_assign", "on_free": {"argv": [...],
 * "timeout": S} (accelvirt-policy(5), DRIVER COMMANDS), for every attach.
 * The hook's two are bounded by AV_DRIVER_HOOK_TIMEOUT_MAX: libvirt waits
 * for the hook. */
static gboolean
parse_drivers(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    static const char *const command_keys[] = { "argv", "timeout", NULL };

    for (guint point = 0; point < AV_DRIVER_POINTS; point++) {
        const char *name = av_driver_point_to_string((AvDriverPoint)point);
        gboolean hook = point == AV_DRIVER_ON_PREPARE || point == AV_DRIVER_ON_RELEASE;
        json_t *v = json_object_get(obj, name);
        g_autofree char *path = path_join(base, name);
        g_autofree char *ap = path_join(path, "argv");
        g_autofree char *ad = g_strdup_printf("%s.argv", name);
        g_autofree char *where = g_strdup_printf(" in '%s'", name);
        g_autoptr(AvDriverCommand) command = NULL;

        if (!v)
            continue;
        if (!json_is_object(v))
            return type_fail(pp, path, name, "an object such as {\"argv\": [\"/usr/libexec/vendor/setup\", "
                             "\"{address}\"], \"timeout\": 10}", v, error);
        if (!check_keys(pp, v, path, where, command_keys, error))
            return FALSE;
        command = g_new0(AvDriverCommand, 1);
        if (!parse_argv_template(pp, v, "argv", path, name, TRUE, &command->argv, error))
            return FALSE;
        if (!get_timeout_max(pp, v, path, name, hook ? AV_DRIVER_HOOK_TIMEOUT_DEFAULT : AV_DRIVER_TIMEOUT_DEFAULT,
                             hook ? AV_DRIVER_HOOK_TIMEOUT_MAX : AV_POLICY_MAX_TIMEOUT,
                             hook ? ": it runs in the hook, which libvirt waits for and which must stay quick; do "
                                    "longer work in on_assign or on_free" : NULL,
                             &command->timeout_s, error))
            return FALSE;
        if (!check_argv_files(pp, command->argv, ap, ad, TRUE, "driver command", error))
            return FALSE;
        profile->drivers[point] = g_steal_pointer(&command);
    }
    return TRUE;
}

/* ---- profile ---- */

/* "vfs": N or "on-demand", the VFs each PF of an "sriov-vf" profile offers. */
static gboolean
parse_vfs_count(const PolicyParse *pp, AvProfile *profile, json_t *v, const char *vp, GError **error)
{
    static const char expected[] = "a VF count from 1 to 65535, or \"on-demand\"";

    if (json_is_string(v)) {
        if (!g_str_equal(json_string_value(v), "on-demand"))
            return policy_fail(pp, vp, FALSE, error, "invalid vfs '%s'; expected %s", json_string_value(v), expected);
        profile->vfs_on_demand = TRUE;
        return TRUE;
    }
    if (!json_is_integer(v))
        return type_fail(pp, vp, "vfs", expected, v, error);
    if (json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)AV_POLICY_VFS_MAX)
        return policy_fail(pp, vp, FALSE, error, "'vfs' is out of range: %" JSON_INTEGER_FORMAT "; expected %s "
                           "(the PF's sriov_totalvfs is checked when VFs are made)", json_integer_value(v), expected);
    profile->vfs = (guint)json_integer_value(v);
    return TRUE;
}

/* "vfs" and "vfs_shrink" (accelvirt-policy(5), MAKING VFS): attach
 * "sriov-vf" only, and a profile that makes VFs names its PFs without VF
 * addresses (they do not exist before the VFs). */
static gboolean
parse_vfs(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *v = json_object_get(obj, "vfs");
    json_t *shrink = json_object_get(obj, "vfs_shrink");
    g_autofree char *vp = path_join(base, "vfs");
    g_autofree char *sp = path_join(base, "vfs_shrink");
    g_autofree char *mp = path_join(base, "match");

    if ((v || shrink) && profile->attach != AV_ATTACH_SRIOV_VF)
        return policy_fail(pp, v ? vp : sp, TRUE, error, "'%s' is only allowed with attach 'sriov-vf', not with attach '%s'",
                           v ? "vfs" : "vfs_shrink", av_attach_to_string(profile->attach));
    if (shrink && !v)
        return policy_fail(pp, sp, TRUE, error, "'vfs_shrink' needs 'vfs' (a VF count or \"on-demand\"): it says "
                           "what count to shrink back to");
    if (!v)
        return TRUE;
    if (!parse_vfs_count(pp, profile, v, vp, error))
        return FALSE;
    if (profile->match_addresses->len > 0) {
        g_autofree char *ap = path_join(mp, "address");
        return policy_fail(pp, ap, TRUE, error, "'match.address' cannot be combined with 'vfs': VFs that do not exist "
                           "yet have no address; name their PFs with 'match.pf'");
    }
    if (profile->match_devices->len == 0 && profile->match_pfs->len == 0)
        return policy_fail(pp, vp, TRUE, error, "'vfs' needs 'match.device' (the VF's device id, as the PF's "
                           "sriov_vf_device says) or 'match.pf' (the PFs' addresses): else accelvirt would make VFs on "
                           "every SR-IOV function of the vendor");
    if (shrink && !json_is_boolean(shrink))
        return type_fail(pp, sp, "vfs_shrink", "true or false", shrink, error);
    profile->vfs_shrink = shrink && json_is_true(shrink);
    return TRUE;
}

/* "max_lease" (accelvirt-policy(5)): a duration (av_duration_parse()),
 * any attach. */
static gboolean
parse_max_lease(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    static const char expected[] = "a duration such as \"90m\", \"72h\", \"30d\" or \"3600s\", or a whole number of "
                                   "seconds, from 1 second to 3650 days";
    json_t *v = json_object_get(obj, "max_lease");
    g_autofree char *lp = path_join(base, "max_lease");
    g_autofree char *text = NULL;

    if (!v)
        return TRUE;
    if (json_is_integer(v))
        text = g_strdup_printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_string(v))
        text = g_strdup(json_string_value(v));
    else
        return type_fail(pp, lp, "max_lease", expected, v, error);
    if (!av_duration_parse(text, &profile->max_lease_s))
        return policy_fail(pp, lp, FALSE, error, "invalid max_lease '%s'; expected %s", text, expected);
    return TRUE;
}

/* One count limit of "health": an integer >= 0 into *@ret (left at -1 when
 * absent). */
static gboolean
get_health_count(const PolicyParse *pp, json_t *obj, const char *key, const char *base, gint64 *ret, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *path = path_join(base, key);
    g_autofree char *display = g_strdup_printf("health.%s", key);

    if (!v)
        return TRUE;
    if (!json_is_integer(v))
        return type_fail(pp, path, display, "a whole number from 0 (the most allowed)", v, error);
    if (json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)G_MAXINT32)
        return policy_fail(pp, path, FALSE, error, "'%s' is out of range: %" JSON_INTEGER_FORMAT "; expected 0 to %d "
                           "(the most allowed; 0 quarantines at the first)", display, json_integer_value(v), G_MAXINT32);
    *ret = json_integer_value(v);
    return TRUE;
}

/* "health" (accelvirt-policy(5), HEALTH): PCI attaches only, since AER
 * counters and a link are a PCI function's (sysfs-bus-pci-devices-aer). */
static gboolean
parse_health(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *v = json_object_get(obj, "health");
    g_autofree char *hp = path_join(base, "health");
    AvHealthLimits *h = &profile->health;
    int link = AV_HEALTH_LINK_IGNORE, speed = FALSE;

    if (!v)
        return TRUE;
    if (profile->attach == AV_ATTACH_USB || profile->attach == AV_ATTACH_MDEV)
        return policy_fail(pp, hp, TRUE, error, "'health' cannot be used with attach '%s': AER counters and a PCIe link "
                           "are a PCI function's; only attach 'vfio-pci' and 'sriov-vf' have them",
                           av_attach_to_string(profile->attach));
    if (!json_is_object(v))
        return type_fail(pp, hp, "health", "an object (limits such as {\"fatal_aer\": 0})", v, error);
    if (!check_keys(pp, v, hp, " in 'health'", health_keys, error))
        return FALSE;
    if (!get_health_count(pp, v, "fatal_aer", hp, &h->fatal_aer, error) ||
        !get_health_count(pp, v, "nonfatal_aer", hp, &h->nonfatal_aer, error) ||
        !get_health_count(pp, v, "correctable_aer", hp, &h->correctable_aer, error) ||
        !get_health_count(pp, v, "reset_failures", hp, &h->reset_failures, error) ||
        !get_health_count(pp, v, "scrub_failures", hp, &h->scrub_failures, error) ||
        !get_enum(pp, v, "degraded_link", hp, health_link_names, health_link_values, &link, error) ||
        !get_enum(pp, v, "link_speed", hp, link_speed_names, link_speed_values, &speed, error))
        return FALSE;
    h->degraded_link = (AvHealthLinkAction)link;
    h->link_speed = speed;
    h->set = TRUE;
    return TRUE;
}

/* "runtime_ids": ["vvvv:pppp", ...], attach "usb" only: the ids a stick of
 * the profile may present while a domain holds it (a Movidius stick's
 * 03e7:f63b once its firmware is loaded).  None of them may be ids the
 * profile's match takes: a free stick must present its first ids. */
static gboolean
parse_runtime_ids(const PolicyParse *pp, AvProfile *profile, json_t *obj, const char *base, GError **error)
{
    json_t *v = json_object_get(obj, "runtime_ids");
    g_autofree char *rp = path_join(base, "runtime_ids");
    static const char expected[] = "a list of strings such as [\"03e7:f63b\"] (USB idVendor:idProduct in hex)";
    gsize i;
    json_t *item;

    if (!v)
        return TRUE;
    if (profile->attach != AV_ATTACH_USB)
        return policy_fail(pp, rp, FALSE, error,
                           "'runtime_ids' applies to attach 'usb' only, not to attach '%s'; remove it",
                           av_attach_to_string(profile->attach));
    if (!json_is_array(v) || json_array_size(v) == 0)
        return type_fail(pp, rp, "runtime_ids", expected, v, error);
    /* The hold of a released stick (av_pool_usb_hold()) follows it by its
     * port and vendor: a stick whose firmware changes its vendor id too
     * would slip out of it. */
    if (!profile->match_vendor_set)
        return policy_fail(pp, rp, FALSE, error,
                           "'runtime_ids' needs the profile's 'match.vendor': the runtime ids must be of the "
                           "vendor the profile matches");
    json_array_foreach(v, i, item) {
        g_autofree char *ip = g_strdup_printf("%s/%zu", rp, i);
        g_autofree char *id = g_strdup_printf("runtime_ids[%zu]", i);
        gboolean taken = profile->match_devices->len == 0;
        guint16 vendor, product;
        guint32 value;
        const char *t;

        if (!json_is_string(item))
            return type_fail(pp, ip, id, "a string such as \"03e7:f63b\"", item, error);
        t = json_string_value(item);
        if (strlen(t) != 9 || strspn(t, "0123456789abcdefABCDEF") != 4 || t[4] != ':' ||
            strspn(t + 5, "0123456789abcdefABCDEF") != 4)
            return policy_fail(pp, ip, FALSE, error,
                               "invalid runtime id '%s' in '%s'; expected vvvv:pppp, the USB idVendor and "
                               "idProduct in 4 hex digits each (such as 03e7:f63b)", t, id);
        vendor = (guint16)g_ascii_strtoull(t, NULL, 16);
        product = (guint16)g_ascii_strtoull(t + 5, NULL, 16);
        if (vendor != profile->match_vendor)
            return policy_fail(pp, ip, FALSE, error,
                               "runtime id '%s' is of another vendor than the profile's match (%04x): a stick "
                               "whose firmware changes its vendor id is not supported; leave it out", t,
                               profile->match_vendor);
        if (av_profile_runtime_id(profile, vendor, product))
            return policy_fail(pp, ip, FALSE, error, "'runtime_ids' repeats '%s'", t);
        for (guint j = 0; j < profile->match_devices->len && !taken; j++)
            taken = g_array_index(profile->match_devices, guint16, j) == product;
        if (taken)
            return policy_fail(pp, ip, FALSE, error,
                               "runtime id '%s' is one the profile's match takes; a free stick presents only "
                               "its first ids: remove it from 'match' or from 'runtime_ids'", t);
        value = (guint32)vendor << 16 | product;
        g_array_append_val(profile->runtime_ids, value);
    }
    return TRUE;
}

static gboolean
parse_profile(PolicyParse *pp, AvPolicy *policy, GPtrArray *added, json_t *obj, gsize index,
              AvProfile **ret_profile, GError **error)
{
    g_autoptr(AvProfile) profile = av_profile_new();
    g_autofree char *base = g_strdup_printf("profiles/%zu", index);
    g_autofree char *index_label = g_strdup_printf("profiles[%zu]", index);
    g_autofree char *name_label = NULL;
    g_autofree char *name_path = path_join(base, "name");
    const AvProfile *dup;
    const char *name = NULL;
    const char *s = NULL;
    int e;
    json_t *v;

    pp->label = NULL;
    if (!json_is_object(obj))
        return type_fail(pp, base, index_label, "an object (a profile)", obj, error);
    pp->label = index_label;
    if (!av_json_locate(pp->data, pp->len, base, &profile->source_line, &e))
        profile->source_line = 1;
    profile->source_file = g_strdup(pp->filename);

    v = json_object_get(obj, "name");
    if (!v)
        return policy_fail(pp, base, FALSE, error, "missing required key 'name'");
    if (!json_is_string(v))
        return type_fail(pp, name_path, "name", "a string", v, error);
    name = json_string_value(v);
    if (!av_profile_name_is_valid(name))
        return policy_fail(pp, name_path, FALSE, error,
                           "invalid profile name '%s'; expected 1 to 63 characters of a-z, 0-9, '.', '_' and '-', the first a letter or digit",
                           name);
    dup = find_profile(policy->profiles, name);
    if (!dup)
        dup = find_profile(added, name);
    if (dup) {
        if (g_str_equal(dup->source_file, pp->filename))
            return policy_fail(pp, name_path, FALSE, error, "duplicate profile name '%s'; first defined at line %d",
                               name, dup->source_line);
        return policy_fail(pp, name_path, FALSE, error, "duplicate profile name '%s'; first defined in %s at line %d",
                           name, dup->source_file, dup->source_line);
    }
    profile->name = g_strdup(name);
    name_label = g_strdup_printf("profile '%s'", name);
    pp->label = name_label;

    if (!check_keys(pp, obj, base, "", profile_keys, error))
        return FALSE;

    if (!get_string(pp, obj, "description", base, "description", &s, error))
        return FALSE;
    profile->description = g_strdup(s);

    {
        int attach = AV_ATTACH_VFIO_PCI;
        if (!get_enum(pp, obj, "attach", base, attach_names, attach_values, &attach, error))
            return FALSE;
        profile->attach = (AvAttach)attach;
    }

    v = json_object_get(obj, "match");
    if (!v)
        return policy_fail(pp, base, FALSE, error, "missing required key 'match'");
    if (!parse_match(pp, profile, v, base, error))
        return FALSE;

    if (!parse_companions(pp, profile, obj, base, error))
        return FALSE;

    v = json_object_get(obj, "mdev_type");
    if (v) {
        g_autofree char *mp = path_join(base, "mdev_type");

        if (profile->attach != AV_ATTACH_MDEV)
            return policy_fail(pp, mp, TRUE, error, "'mdev_type' is only allowed with attach 'mdev', not with attach '%s'",
                               av_attach_to_string(profile->attach));
        if (!json_is_string(v))
            return type_fail(pp, mp, "mdev_type", "a string such as 'nvidia-588'", v, error);
        if (!av_mdev_type_id_is_valid(json_string_value(v)))
            return policy_fail(pp, mp, FALSE, error,
                               "invalid mdev_type '%s'; expected a type id as listed in mdev_supported_types, such as 'nvidia-588'",
                               json_string_value(v));
        profile->mdev_type = g_strdup(json_string_value(v));
    } else if (profile->attach == AV_ATTACH_MDEV) {
        g_autofree char *ap = path_join(base, "attach");
        return policy_fail(pp, ap, FALSE, error, "attach 'mdev' requires 'mdev_type', the type to create (such as 'nvidia-588')");
    }

    v = json_object_get(obj, "vfio_driver");
    if (v) {
        g_autofree char *vp = path_join(base, "vfio_driver");
        const char *vname;

        if (profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF)
            return policy_fail(pp, vp, TRUE, error,
                               "'vfio_driver' is only allowed with attach 'vfio-pci' or 'sriov-vf', not with attach '%s'",
                               av_attach_to_string(profile->attach));
        if (!json_is_string(v))
            return type_fail(pp, vp, "vfio_driver", "a string: auto, vfio-pci or a variant such as 'mlx5_vfio_pci'", v,
                             error);
        vname = json_string_value(v);
        if (!av_vfio_driver_choice_is_valid(vname))
            return policy_fail(pp, vp, FALSE, error,
                               "invalid vfio_driver '%s'; expected auto, vfio-pci, or the module of a vfio-pci variant "
                               "such as 'mlx5_vfio_pci'", vname);
        if (!g_str_equal(vname, "auto"))
            profile->vfio_driver = g_strdup(g_str_equal(vname, "vfio_pci") ? "vfio-pci" : vname);
    }

    if (!parse_vfs(pp, profile, obj, base, error))
        return FALSE;

    /* "vgpu_type": NVIDIA vGPU on VFs (src/pci/av-pci-vgpu.c): the type the
     * hook makes on the VF at prepare and destroys after its scrub.  The VF
     * stays on NVIDIA's driver, which is its VFIO driver; NVIDIA's
     * sriov-manage makes the VFs. */
    v = json_object_get(obj, "vgpu_type");
    if (v) {
        g_autofree char *vp = path_join(base, "vgpu_type");

        if (profile->attach != AV_ATTACH_SRIOV_VF)
            return policy_fail(pp, vp, TRUE, error,
                               "'vgpu_type' is only allowed with attach 'sriov-vf', not with attach '%s'",
                               av_attach_to_string(profile->attach));
        if (!json_is_string(v))
            return type_fail(pp, vp, "vgpu_type", "a string: a vGPU type's ID or name, such as 'L40S-2Q'", v, error);
        if (!av_vgpu_type_spec_is_valid(json_string_value(v)))
            return policy_fail(pp, vp, FALSE, error,
                               "invalid vgpu_type '%s'; expected a type's decimal ID or its name as "
                               "nvidia/creatable_vgpu_types lists it (such as 'NVIDIA L40S-2Q' or 'L40S-2Q')",
                               json_string_value(v));
        if (profile->vfio_driver || json_object_get(obj, "vfio_driver"))
            return policy_fail(pp, vp, TRUE, error,
                               "'vgpu_type' cannot be used with 'vfio_driver': a vGPU VF stays on NVIDIA's driver, "
                               "which is its VFIO driver");
        if (profile->vfs > 0 || profile->vfs_on_demand || profile->vfs_shrink)
            return policy_fail(pp, vp, TRUE, error,
                               "'vgpu_type' cannot be used with 'vfs' or 'vfs_shrink': NVIDIA's sriov-manage makes "
                               "a vGPU GPU's VFs (nvidia-sriov-manage@ALL.service), not accelvirt");
        profile->vgpu_type = g_strdup(json_string_value(v));
    }
    if (!parse_program(pp, profile, obj, base, error) || !parse_drivers(pp, profile, obj, base, error))
        return FALSE;

    {
        int numa = AV_NUMA_PREFERRED, allocation = AV_ALLOCATION_PACK, restore = AV_RESTORE_ON_RELEASE;
        int granularity = profile->attach == AV_ATTACH_VFIO_PCI ? AV_GRANULARITY_CARD : AV_GRANULARITY_FUNCTION;

        if (!get_enum(pp, obj, "numa", base, numa_names, numa_values, &numa, error) ||
            !get_enum(pp, obj, "allocation", base, allocation_names, allocation_values, &allocation, error) ||
            !get_enum(pp, obj, "granularity", base, granularity_names, granularity_values, &granularity, error))
            return FALSE;
        profile->numa = (AvNumaPolicy)numa;
        profile->allocation = (AvAllocation)allocation;
        profile->granularity = (AvGranularity)granularity;
        if ((profile->attach == AV_ATTACH_SRIOV_VF || profile->attach == AV_ATTACH_USB ||
             profile->attach == AV_ATTACH_NETDEV) &&
            profile->granularity != AV_GRANULARITY_FUNCTION) {
            g_autofree char *gp = path_join(base, "granularity");
            return policy_fail(pp, gp, FALSE, error, "granularity '%s' cannot be used with attach '%s'; expected function",
                               av_granularity_to_string(profile->granularity), av_attach_to_string(profile->attach));
        }
        if (profile->attach == AV_ATTACH_MDEV && profile->granularity == AV_GRANULARITY_CARD) {
            g_autofree char *gp = path_join(base, "granularity");
            return policy_fail(pp, gp, FALSE, error, "granularity 'card' cannot be used with attach 'mdev'; expected one of function, region");
        }

        if (!parse_scrub(pp, profile, obj, base, error))
            return FALSE;

        if (!get_enum(pp, obj, "restore_driver", base, restore_names, restore_values, &restore, error))
            return FALSE;
        profile->restore_driver = (AvRestoreDriver)restore;
        if (restore == AV_RESTORE_KEEP_VFIO && (profile->attach == AV_ATTACH_USB || profile->attach == AV_ATTACH_MDEV ||
                                                profile->attach == AV_ATTACH_NETDEV)) {
            g_autofree char *rp = path_join(base, "restore_driver");
            return policy_fail(pp, rp, FALSE, error, "restore_driver 'keep-vfio' cannot be used with attach '%s'; expected on-release",
                               av_attach_to_string(profile->attach));
        }
        /* A vGPU VF never leaves NVIDIA's driver (a rebind breaks the vGPU
         * Manager's hold of it): nothing that needs vfio-pci. */
        if (profile->vgpu_type) {
            g_autofree char *gp = path_join(base, "vgpu_type");

            if (restore == AV_RESTORE_KEEP_VFIO)
                return policy_fail(pp, gp, TRUE, error, "'vgpu_type' cannot be used with restore_driver 'keep-vfio': "
                                   "a vGPU VF stays on NVIDIA's driver");
            if (profile->program)
                return policy_fail(pp, gp, TRUE, error, "'vgpu_type' cannot be used with 'program'");
            for (guint i = 0; profile->scrub && i < profile->scrub->len; i++) {
                const AvScrubStep *step = g_ptr_array_index(profile->scrub, i);

                if (step->method == AV_SCRUB_METHOD_VFIO_ZERO || step->method == AV_SCRUB_METHOD_VM ||
                    step->method == AV_SCRUB_METHOD_PROGRAM_BASE)
                    return policy_fail(pp, gp, TRUE, error,
                                       "'vgpu_type' cannot be used with a scrub step '%s', which needs the device on "
                                       "vfio-pci: a vGPU VF stays on NVIDIA's driver; use reset, command or none",
                                       av_scrub_method_to_string(step->method));
            }
        }
        if (!check_program_driver(pp, profile, obj, base, error))
            return FALSE;
    }

    v = json_object_get(obj, "memory");
    if (v) {
        g_autofree char *mp = path_join(base, "memory");
        g_autofree char *text = json_is_integer(v) ? g_strdup_printf("%" JSON_INTEGER_FORMAT, json_integer_value(v))
                                : json_is_string(v) ? g_strdup(json_string_value(v)) : NULL;

        if (!text)
            return type_fail(pp, mp, "memory", "a size in bytes, or a string such as \"48GiB\"", v, error);
        if (!av_policy_parse_size(text, &profile->memory))
            return policy_fail(pp, mp, FALSE, error,
                               "invalid memory '%s'; expected the device's memory as a number of bytes or a number and a "
                               "unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), such as \"48GiB\"", text);
    }
    v = json_object_get(obj, "min_coverage");
    if (v) {
        g_autofree char *cp = path_join(base, "min_coverage");

        if (!json_is_number(v))
            return type_fail(pp, cp, "min_coverage", "a number above 0 and at most 1", v, error);
        profile->min_coverage = json_number_value(v);
        if (!(profile->min_coverage > 0 && profile->min_coverage <= 1))
            return policy_fail(pp, cp, FALSE, error,
                               "'min_coverage' is out of range: %g; expected a share above 0 and at most 1 (1 = all of "
                               "the device's memory)", profile->min_coverage);
        if (profile->attach == AV_ATTACH_USB || profile->attach == AV_ATTACH_MDEV ||
            profile->attach == AV_ATTACH_NETDEV)
            return policy_fail(pp, cp, FALSE, error,
                               "'min_coverage' cannot be used with attach '%s': only a whole PCI function's memory is "
                               "cleared and counted", av_attach_to_string(profile->attach));
        /* Counted against the operator's figure only: what the device says
         * of its memory (its Resizable BAR sizes), or a program reads from it,
         * is what the last tenant's firmware says. */
        if (!profile->memory)
            return policy_fail(pp, cp, FALSE, error,
                               "'min_coverage' needs the profile's 'memory' (the device's memory size, such as "
                               "\"48GiB\"): a share of what the device itself reports would be a share of what the "
                               "last tenant's firmware says");
    }

    /* No step of a vGPU VF's scrub measures memory (vfio-zero needs
     * vfio-pci): "min_coverage" would quarantine every one, its vGPU made. */
    if (profile->vgpu_type && (json_object_get(obj, "min_coverage") || json_object_get(obj, "memory"))) {
        g_autofree char *gp = path_join(base, "vgpu_type");

        return policy_fail(pp, gp, TRUE, error,
                           "'vgpu_type' cannot be used with '%s': the framebuffer of a vGPU is a share of the GPU's "
                           "that accelvirt cannot measure clearing",
                           json_object_get(obj, "min_coverage") ? "min_coverage" : "memory");
    }
    if (!parse_max_lease(pp, profile, obj, base, error) || !parse_health(pp, profile, obj, base, error))
        return FALSE;

    v = json_object_get(obj, "hide_hypervisor");
    if (v) {
        g_autofree char *hp = path_join(base, "hide_hypervisor");
        if (!json_is_boolean(v))
            return type_fail(pp, hp, "hide_hypervisor", "true or false", v, error);
        profile->hide_hypervisor = json_is_true(v);
    }

    if (!get_string(pp, obj, "resource_class", base, "resource_class", &s, error))
        return FALSE;
    if (s) {
        g_autofree char *rp = path_join(base, "resource_class");
        g_autofree char *std = names_join(nova_standard_classes);

        if (!nova_name_valid(s) || !(g_str_has_prefix(s, "CUSTOM_") ? strlen(s) > 7 : name_in(nova_standard_classes, s)))
            return policy_fail(pp, rp, FALSE, error,
                               "invalid resource_class '%s'; expected CUSTOM_ followed by A-Z, 0-9 and '_' (such as CUSTOM_GPU_A100), or one of %s",
                               s, std);
        profile->resource_class = g_strdup(s);
    }

    v = json_object_get(obj, "traits");
    if (v) {
        g_autofree char *tp = path_join(base, "traits");
        gsize i;
        json_t *item;

        if (!json_is_array(v))
            return type_fail(pp, tp, "traits", "a list of strings such as [\"CUSTOM_GPU_A100\"]", v, error);
        json_array_foreach(v, i, item) {
            g_autofree char *ip = g_strdup_printf("%s/%zu", tp, i);
            g_autofree char *id = g_strdup_printf("traits[%zu]", i);

            if (!json_is_string(item))
                return type_fail(pp, ip, id, "a string", item, error);
            if (!nova_name_valid(json_string_value(item)))
                return policy_fail(pp, ip, FALSE, error,
                                   "invalid trait '%s'; expected 1 to 255 characters of A-Z, 0-9 and '_' (custom traits start with CUSTOM_)",
                                   json_string_value(item));
            g_ptr_array_add(profile->traits, g_strdup(json_string_value(item)));
        }
    }

    if (!parse_runtime_ids(pp, profile, obj, base, error))
        return FALSE;

    v = json_object_get(obj, "placement_sync");
    if (v) {
        g_autofree char *sp = path_join(base, "placement_sync");

        if (!json_is_boolean(v))
            return type_fail(pp, sp, "placement_sync", "true or false", v, error);
        if (json_is_true(v) && profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF)
            return policy_fail(pp, sp, FALSE, error,
                               "'placement_sync' cannot be true with attach '%s': Nova reports only whole PCI "
                               "functions (attach 'vfio-pci') and VFs (attach 'sriov-vf') in Placement",
                               av_attach_to_string(profile->attach));
        profile->placement_sync = json_is_true(v) ? 1 : 0;
    }

    *ret_profile = g_steal_pointer(&profile);
    return TRUE;
}

/* The top-level "nova" object of a document into *ret_nova (caller frees;
 * NULL when absent). */
static gboolean
parse_nova(const PolicyParse *pp, const AvPolicy *policy, json_t *root, AvNovaSettings **ret_nova, GError **error)
{
    g_autoptr(AvNovaSettings) nova = NULL;
    json_t *obj = json_object_get(root, "nova");
    const char *s;
    json_t *v;

    *ret_nova = NULL;
    if (!obj)
        return TRUE;
    if (!json_is_object(obj))
        return type_fail(pp, "nova", "nova", "an object such as {\"placement_sync\": true}", obj, error);
    if (policy->nova)
        return policy_fail(pp, "nova", TRUE, error,
                           "a second 'nova' object: '%s' has one already; keep one in one file",
                           policy->nova->source_file);
    if (!check_keys(pp, obj, "nova", " in 'nova'", nova_keys, error))
        return FALSE;
    nova = g_new0(AvNovaSettings, 1);
    nova->source_file = g_strdup(pp->filename);
    v = json_object_get(obj, "placement_sync");
    if (v) {
        if (!json_is_boolean(v))
            return type_fail(pp, "nova/placement_sync", "nova.placement_sync", "true or false", v, error);
        nova->placement_sync = json_is_true(v);
    }
    v = json_object_get(obj, "owner_metadata");
    if (v) {
        if (!json_is_boolean(v))
            return type_fail(pp, "nova/owner_metadata", "nova.owner_metadata", "true or false", v, error);
        nova->owner_metadata_ignored = json_is_false(v);
    }
    if (!get_string(pp, obj, "cloud", "nova", "nova.cloud", &s, error))
        return FALSE;
    if (s) {
        if (!*s || strlen(s) > 255)
            return policy_fail(pp, "nova/cloud", FALSE, error,
                               "'nova.cloud' must name an entry of clouds.yaml (1 to 255 characters)");
        nova->cloud = g_strdup(s);
    }
    if (!get_string(pp, obj, "hypervisor_hostname", "nova", "nova.hypervisor_hostname", &s, error))
        return FALSE;
    if (s) {
        if (!nova_hostname_valid(s))
            return policy_fail(pp, "nova/hypervisor_hostname", FALSE, error,
                               "invalid 'nova.hypervisor_hostname' '%s'; expected 1 to %d printable characters "
                               "without spaces or '/', as Nova's compute node is named", s, AV_NOVA_HOSTNAME_MAX);
        nova->hypervisor_hostname = g_strdup(s);
    }
    *ret_nova = g_steal_pointer(&nova);
    return TRUE;
}

/* Parses one document; all of its profiles are appended, or none (FALSE,
 * "FILE:LINE:COLUMN: ...").  With @check_files, the programs and templates
 * that its scrub steps name are checked too. */
gboolean
policy_add_data(AvPolicy *policy, const char *filename, const char *data, gsize len, gboolean check_files,
                GError **error)
{
    PolicyParse pp = { .filename = filename, .data = data, .len = len, .label = NULL, .check_files = check_files };
    g_autoptr(GPtrArray) added = g_ptr_array_new_with_free_func((GDestroyNotify)av_profile_free);
    g_autoptr(AvNovaSettings) nova = NULL;
    g_autoptr(GPtrArray) limits = NULL;
    g_autoptr(json_t) root = NULL;
    g_autoptr(json_t) none = NULL;
    json_error_t jerr;
    json_t *profiles;
    gsize i;
    json_t *obj;

    g_return_val_if_fail(policy != NULL, FALSE);
    g_return_val_if_fail(filename != NULL, FALSE);
    g_return_val_if_fail(data != NULL || len == 0, FALSE);

    root = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "%s:%d:%d: invalid JSON: %s", filename,
                    MAX(jerr.line, 1), MAX(jerr.column, 1), jerr.text);
        return FALSE;
    }
    if (!json_is_object(root)) {
        g_autofree char *got = describe_value(root);
        return policy_fail(&pp, "", FALSE, error, "the file must hold an object such as {\"profiles\": [...]}, not %s", got);
    }
    if (!check_keys(&pp, root, "", " at the top level", top_keys, error))
        return FALSE;
    obj = json_object_get(root, "description");
    if (obj && !json_is_string(obj))
        return type_fail(&pp, "description", "description", "a string", obj, error);
    if (!parse_nova(&pp, policy, root, &nova, error))
        return FALSE;
    profiles = json_object_get(root, "profiles");
    /* A file may hold the "nova" object or the "limits" alone. */
    if (!profiles && (nova || json_object_get(root, "limits")))
        profiles = none = json_array();
    if (!profiles)
        return policy_fail(&pp, "", FALSE, error, "missing required key 'profiles' (a list of profiles)");
    if (!json_is_array(profiles))
        return type_fail(&pp, "profiles", "profiles", "a list of profiles", profiles, error);

    json_array_foreach(profiles, i, obj) {
        AvProfile *profile = NULL;

        if (!parse_profile(&pp, policy, added, obj, i, &profile, error))
            return FALSE;
        g_ptr_array_add(added, profile);
    }
    /* parse_profile() left its label behind, freed with the profile's parse. */
    pp.label = NULL;
    if (!policy_parse_limits(&pp, policy, added, root, &limits, error))
        return FALSE;

    for (i = 0; i < added->len; i++)
        g_ptr_array_add(policy->profiles, g_steal_pointer(&g_ptr_array_index(added, i)));
    g_ptr_array_set_size(added, 0);
    if (nova)
        policy->nova = g_steal_pointer(&nova);
    if (!policy->limits)
        policy->limits = g_ptr_array_new_with_free_func((GDestroyNotify)av_limit_free);
    g_ptr_array_extend_and_steal(policy->limits, g_steal_pointer(&limits));
    g_ptr_array_add(policy->files, g_strdup(filename));
    return TRUE;
}

/* See av-policy.h: the document alone, the files it names unchecked. */
gboolean
av_policy_add_data(AvPolicy *policy, const char *filename, const char *data, gsize len, GError **error)
{
    return policy_add_data(policy, filename, data, len, FALSE, error);
}

/* ---- output ---- */

static json_t *
hex16(guint16 v)
{
    g_autofree char *s = g_strdup_printf("0x%04x", v);
    return json_string(s);
}

static json_t *
strings_to_json(GPtrArray *strings)
{
    json_t *a = json_array();

    for (guint i = 0; i < strings->len; i++)
        json_array_append_new(a, json_string(g_ptr_array_index(strings, i)));
    return a;
}

/* Sets "vendor", "device" (a list) and "class" (4 or 6 digits, as
 * written) of a match or a companion in @obj, those that are set. */
static void
ids_to_json(json_t *obj, gboolean vendor_set, guint16 vendor, const GArray *devices, gboolean class_set,
            guint32 class_code, guint32 class_mask)
{
    if (vendor_set)
        json_object_set_new(obj, "vendor", hex16(vendor));
    if (devices->len > 0) {
        json_t *a = json_array();

        for (guint i = 0; i < devices->len; i++)
            json_array_append_new(a, hex16(g_array_index(devices, guint16, i)));
        json_object_set_new(obj, "device", a);
    }
    if (class_set) {
        g_autofree char *c = class_mask == 0xffffff ? g_strdup_printf("0x%06x", class_code)
                                                    : g_strdup_printf("0x%04x", class_code >> 8);
        json_object_set_new(obj, "class", json_string(c));
    }
}

/* The normalised profile, defaults included, as a new JSON object that
 * loads back to the same profile (caller owns the reference). */
json_t *
av_profile_to_json(const AvProfile *profile)
{
    json_t *o = json_object();
    json_t *match = json_object();
    json_t *scrub = json_array();

    json_object_set_new(o, "name", json_string(profile->name));
    if (profile->description)
        json_object_set_new(o, "description", json_string(profile->description));

    ids_to_json(match, profile->match_vendor_set, profile->match_vendor, profile->match_devices,
                profile->match_class_set, profile->match_class, profile->match_class_mask);
    if (profile->match_subsystem_vendor_set)
        json_object_set_new(match, "subsystem_vendor", hex16(profile->match_subsystem_vendor));
    if (profile->match_subsystem_device_set)
        json_object_set_new(match, "subsystem_device", hex16(profile->match_subsystem_device));
    if (profile->match_addresses->len > 0)
        json_object_set_new(match, "address", strings_to_json(profile->match_addresses));
    if (profile->match_mdev_parents->len > 0)
        json_object_set_new(match, "mdev_parent", strings_to_json(profile->match_mdev_parents));
    if (profile->match_pfs->len > 0)
        json_object_set_new(match, "pf", strings_to_json(profile->match_pfs));
    json_object_set_new(o, "match", match);
    if (profile->companions->len > 0) {
        json_t *companions = json_array();

        for (guint i = 0; i < profile->companions->len; i++) {
            const AvCompanionMatch *c = g_ptr_array_index(profile->companions, i);
            json_t *item = json_object();

            ids_to_json(item, c->vendor_set, c->vendor, c->devices, c->class_set, c->class_code, c->class_mask);
            json_array_append_new(companions, item);
        }
        json_object_set_new(o, "companions", companions);
    }

    json_object_set_new(o, "attach", json_string(av_attach_to_string(profile->attach)));
    if (profile->mdev_type)
        json_object_set_new(o, "mdev_type", json_string(profile->mdev_type));
    if ((profile->attach == AV_ATTACH_VFIO_PCI || profile->attach == AV_ATTACH_SRIOV_VF) && !profile->vgpu_type)
        json_object_set_new(o, "vfio_driver", json_string(profile->vfio_driver ? profile->vfio_driver : "auto"));
    if (profile->vgpu_type)
        json_object_set_new(o, "vgpu_type", json_string(profile->vgpu_type));
    if (profile->vfs_on_demand)
        json_object_set_new(o, "vfs", json_string("on-demand"));
    else if (profile->vfs)
        json_object_set_new(o, "vfs", json_integer(profile->vfs));
    if (av_profile_makes_vfs(profile))
        json_object_set_new(o, "vfs_shrink", json_boolean(profile->vfs_shrink));
    json_object_set_new(o, "numa", json_string(av_numa_policy_to_string(profile->numa)));
    json_object_set_new(o, "allocation", json_string(av_allocation_to_string(profile->allocation)));
    json_object_set_new(o, "granularity", json_string(av_granularity_to_string(profile->granularity)));
    for (guint i = 0; i < profile->scrub->len; i++) {
        const AvScrubStep *s = g_ptr_array_index(profile->scrub, i);
        json_array_append_new(scrub, json_deep_copy(s->options));
    }
    if (profile->scrub->len == 0)
        json_array_append_new(scrub, json_pack("{s:s}", "method", "none"));
    json_object_set_new(o, "scrub", scrub);
    json_object_set_new(o, "restore_driver", json_string(av_restore_driver_to_string(profile->restore_driver)));
    json_object_set_new(o, "hide_hypervisor", json_boolean(profile->hide_hypervisor));
    if (profile->program) {
        const AvProgram *program = profile->program;
        json_t *p = json_pack("{s:o}", "argv", json_deep_copy(program->argv));

        if (program->verify)
            json_object_set_new(p, "verify", json_deep_copy(program->verify));
        json_object_set_new(p, "timeout", json_integer(program->timeout_s));
        if (program->base)
            json_object_set_new(p, "base", json_string(program->base));
        json_object_set_new(p, "driver",
                            json_string(enum_name(program_driver_names, program_driver_values, program->driver)));
        json_object_set_new(o, "program", p);
    }
    for (guint i = 0; i < AV_DRIVER_POINTS; i++) {
        const AvDriverCommand *command = profile->drivers[i];

        if (command)
            json_object_set_new(o, av_driver_point_to_string((AvDriverPoint)i),
                                json_pack("{s:o,s:i}", "argv", json_deep_copy(command->argv),
                                          "timeout", (int)command->timeout_s));
    }
    /* Only when given: what policy show prints is a policy that loads. */
    if (profile->memory)
        json_object_set_new(o, "memory", json_integer((json_int_t)profile->memory));
    if (profile->min_coverage > 0)
        json_object_set_new(o, "min_coverage", json_real(profile->min_coverage));
    if (profile->resource_class)
        json_object_set_new(o, "resource_class", json_string(profile->resource_class));
    json_object_set_new(o, "traits", strings_to_json(profile->traits));
    if (profile->placement_sync >= 0)
        json_object_set_new(o, "placement_sync", json_boolean(profile->placement_sync == 1));
    if (profile->max_lease_s)
        json_object_set_new(o, "max_lease", json_integer((json_int_t)profile->max_lease_s));
    if (profile->runtime_ids->len > 0) {
        json_t *ids = json_array();

        for (guint i = 0; i < profile->runtime_ids->len; i++) {
            guint32 id = g_array_index(profile->runtime_ids, guint32, i);

            json_array_append_new(ids, json_sprintf("%04x:%04x", id >> 16, id & 0xffff));
        }
        json_object_set_new(o, "runtime_ids", ids);
    }
    if (profile->health.set) {
        const AvHealthLimits *h = &profile->health;
        json_t *health = json_object();
        const struct {
            const char *key;
            gint64 value;
        } counts[] = {
            { "fatal_aer", h->fatal_aer }, { "nonfatal_aer", h->nonfatal_aer },
            { "correctable_aer", h->correctable_aer }, { "reset_failures", h->reset_failures },
            { "scrub_failures", h->scrub_failures },
        };

        for (gsize i = 0; i < G_N_ELEMENTS(counts); i++)
            if (counts[i].value >= 0)
                json_object_set_new(health, counts[i].key, json_integer((json_int_t)counts[i].value));
        json_object_set_new(health, "degraded_link",
                            json_string(enum_name(health_link_names, health_link_values, (int)h->degraded_link)));
        json_object_set_new(health, "link_speed",
                            json_string(enum_name(link_speed_names, link_speed_values, h->link_speed)));
        json_object_set_new(o, "health", health);
    }
    return o;
}
