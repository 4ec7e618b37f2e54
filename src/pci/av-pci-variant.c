/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: which vfio-pci driver the kernel offers a PCI function: a
 * vfio-pci *variant* (mlx5_vfio_pci, hisi_acc_vfio_pci, pds_vfio_pci,
 * qat_vfio_pci, virtio_vfio_pci, nvgrace_gpu_vfio_pci, xe_vfio_pci ...) or
 * vfio-pci itself.
 *
 * Variant drivers declare their devices with PCI_DRIVER_OVERRIDE_DEVICE_VFIO()
 * (include/linux/pci.h), which the kernel's modpost writes to the running
 * kernel's modules.alias as "alias vfio_pci:vVVVVVVVVdDDDDDDDDsv*sd*bc*sc*i*
 * MODULE"; vfio-pci itself has the catch-all "vfio_pci:v*d*sv*sd*bc*sc*i*".
 * A function's modalias (pci:v...d...sv...sd...bc..sc..i.., as the kernel's
 * pci_uevent() writes it) with "vfio_pci:" for "pci:" is matched against
 * each of them; the most specific match wins (the most characters that are
 * not wildcards), as libvirt (10.0 and later) chooses when it binds a
 * managed='yes' hostdev itself.
 *
 * Whether a variant can migrate is not in sysfs before it is bound (QEMU asks
 * the bound device, VFIO_DEVICE_FEATURE_MIGRATION).  What list says is the
 * kernel's: the variants whose sources implement VFIO migration (stop-copy),
 * as of Linux 6.12, and the migration of Intel's xe VFs of 6.18. */
#include "config.h"

#include "av-pci.h"
#include "av-pci-private.h"
#include "util/av-names.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>

/* modules.alias is about 1.5 MB on Debian 13; a larger one is not read. */
#define AV_MODULES_ALIAS_MAX (64 * 1024 * 1024)
#define AV_VFIO_ALIAS_PREFIX "vfio_pci:"

/* The variants whose kernel drivers implement VFIO migration. */
static const char *const av_migrating_variants[] = {
    "mlx5_vfio_pci", "hisi_acc_vfio_pci", "pds_vfio_pci", "qat_vfio_pci",
    "virtio_vfio_pci", "xe_vfio_pci", NULL,
};

struct AvVfioAliases {
    GPtrArray *patterns;         /* char*: "vfio_pci:v...": the alias patterns */
    GPtrArray *modules;          /* char*: the module of each, '-' as '_' */
};

gboolean
av_pci_vfio_variant_migrates(const char *module)
{
    return module && g_strv_contains(av_migrating_variants, module);
}

/* See av-pci.h. */
gboolean
av_pci_driver_is_vfio(const char *driver)
{
    if (!driver)
        return FALSE;
    if (g_str_equal(driver, "vfio-pci"))
        return TRUE;
    /* Every variant's pci_driver is named after its module (KBUILD_MODNAME),
     * "<something>_vfio_pci"; the kernel, not a tenant, names drivers. */
    return (g_str_has_suffix(driver, "_vfio_pci") || g_str_has_suffix(driver, "-vfio-pci")) &&
           strlen(driver) > strlen("_vfio_pci") && av_driver_name_is_valid(driver);
}

/* How specific an alias pattern is: its characters that are not wildcards. */
static gsize
av_alias_weight(const char *pattern)
{
    gsize n = 0;

    for (const char *p = pattern; *p; p++)
        if (*p != '*' && *p != '?')
            n++;
    return n;
}

/* A module name as modules.alias writes one: [A-Za-z0-9_-], at most 64. */
static gboolean
av_module_name_valid(const char *s)
{
    gsize len = strlen(s);

    if (len == 0 || len > 64)
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum(s[i]) && s[i] != '_' && s[i] != '-')
            return FALSE;
    return TRUE;
}

void
av_vfio_aliases_free(AvVfioAliases *aliases)
{
    if (!aliases)
        return;
    g_ptr_array_unref(aliases->patterns);
    g_ptr_array_unref(aliases->modules);
    g_free(aliases);
}

/* See av-pci.h. */
AvVfioAliases *
av_vfio_aliases_load(const AvRoot *root)
{
    g_autofree char *osrelease = av_proc_path("sys/kernel/osrelease");
    g_autofree char *release = NULL;
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    AvVfioAliases *aliases;
    gsize len = 0;
    char *next;

    /* The running kernel's modules: /lib/modules/$(uname -r) under @root. */
    if (av_root_read_attr(root, osrelease, &release) < 0 || !*release ||
        strchr(release, '/') || g_str_equal(release, "..") || g_str_equal(release, "."))
        return NULL;
    path = g_strconcat("/lib/modules/", release, "/modules.alias", NULL);
    if (av_root_read_file(root, path, &text, &len) < 0 || len > AV_MODULES_ALIAS_MAX || memchr(text, '\0', len))
        return NULL;

    aliases = g_new0(AvVfioAliases, 1);
    aliases->patterns = g_ptr_array_new_with_free_func(g_free);
    aliases->modules = g_ptr_array_new_with_free_func(g_free);
    /* "alias PATTERN MODULE" lines whose PATTERN starts vfio_pci: */
    for (char *line = text; line && *line; line = next) {
        char *end = strchr(line, '\n');
        char *pat;
        char *mod;
        char *sp;

        next = end ? end + 1 : NULL;
        if (end)
            *end = '\0';
        if (!g_str_has_prefix(line, "alias " AV_VFIO_ALIAS_PREFIX))
            continue;
        pat = line + strlen("alias ");
        sp = strchr(pat, ' ');
        if (!sp)
            continue;
        *sp = '\0';
        mod = sp + 1;
        if (!av_module_name_valid(mod))
            continue;
        g_ptr_array_add(aliases->patterns, g_strdup(pat));
        /* modprobe treats '-' and '_' alike; modules.alias writes '_'. */
        g_ptr_array_add(aliases->modules, g_strdelimit(g_strdup(mod), "-", '_'));
    }
    return aliases;
}

/* The modalias the kernel gives a PCI function of these ids, vfio_pci:
 * prefixed as the vfio_pci: aliases are.  Caller frees. */
static char *
av_vfio_modalias(guint16 vendor, guint16 device, guint16 subsystem_vendor, guint16 subsystem_device,
                 guint32 class_code)
{
    return g_strdup_printf(AV_VFIO_ALIAS_PREFIX "v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", vendor, device,
                           subsystem_vendor, subsystem_device, (class_code >> 16) & 0xff, (class_code >> 8) & 0xff,
                           class_code & 0xff);
}

/* The most specific module whose pattern matches @modalias (NULL: none);
 * only @module's patterns when @module is not NULL. */
static const char *
av_vfio_aliases_best(const AvVfioAliases *aliases, const char *modalias, const char *module)
{
    const char *best = NULL;
    gsize best_weight = 0;

    for (guint j = 0; j < aliases->patterns->len; j++) {
        const char *pat = g_ptr_array_index(aliases->patterns, j);
        const char *mod = g_ptr_array_index(aliases->modules, j);
        gsize w;

        if (module && !g_str_equal(mod, module))
            continue;
        if (fnmatch(pat, modalias, 0) != 0)
            continue;
        w = av_alias_weight(pat);
        if (!best || w > best_weight) {
            best = mod;
            best_weight = w;
        }
    }
    return best;
}

/* See av-pci.h. */
const char *
av_vfio_aliases_match(const AvVfioAliases *aliases, guint16 vendor, guint16 device, guint16 subsystem_vendor,
                      guint16 subsystem_device, guint32 class_code)
{
    g_autofree char *modalias = NULL;

    if (!aliases)
        return NULL;
    modalias = av_vfio_modalias(vendor, device, subsystem_vendor, subsystem_device, class_code);
    return av_vfio_aliases_best(aliases, modalias, NULL);
}

/* See av-pci.h. */
gboolean
av_vfio_aliases_module_has(const AvVfioAliases *aliases, const char *module)
{
    if (!aliases || !module)
        return FALSE;
    for (guint j = 0; j < aliases->modules->len; j++)
        if (g_str_equal(g_ptr_array_index(aliases->modules, j), module))
            return TRUE;
    return FALSE;
}

void
av_pci_vfio_variants(const AvRoot *root, GPtrArray *devices)
{
    g_autoptr(AvVfioAliases) aliases = av_vfio_aliases_load(root);

    for (guint i = 0; i < devices->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(devices, i);
        const char *module;

        g_clear_pointer(&dev->vfio_driver, g_free);
        if (dev->is_bridge)
            continue;
        module = av_vfio_aliases_match(aliases, dev->vendor_id, dev->device_id, dev->subsystem_vendor_id,
                                       dev->subsystem_device_id, dev->class_code);
        if (module)
            dev->vfio_driver = g_strdup(module);
    }
}

/* The modalias of the PCI function @address (its sysfs ids), NULL when it
 * cannot be read or the function is a bridge (never handed to a guest).
 * Caller frees. */
static char *
av_pci_vfio_modalias(const AvRoot *root, const char *address)
{
    g_autofree char *dir = NULL;
    guint64 vendor, device, svendor = 0, sdevice = 0, cls = 0;

    if (!av_pci_address_is_valid(address))
        return NULL;
    dir = av_sys_path("bus/pci/devices/%s", address);
    if (av_attr_read_hex(root, dir, "vendor", 0xffff, &vendor) < 0 ||
        av_attr_read_hex(root, dir, "device", 0xffff, &device) < 0 ||
        av_attr_read_hex(root, dir, "class", 0xffffff, &cls) < 0)
        return NULL;
    (void)av_attr_read_hex(root, dir, "subsystem_vendor", 0xffff, &svendor);
    (void)av_attr_read_hex(root, dir, "subsystem_device", 0xffff, &sdevice);
    if ((cls >> 8) == 0x0604)
        return NULL;
    return av_vfio_modalias(vendor, device, svendor, sdevice, cls);
}

/* See av-pci.h. */
char *
av_pci_vfio_module_for(const AvRoot *root, const AvVfioAliases *aliases, const char *address)
{
    g_autofree char *modalias = NULL;

    if (!aliases || !(modalias = av_pci_vfio_modalias(root, address)))
        return NULL;
    return g_strdup(av_vfio_aliases_best(aliases, modalias, NULL));
}

/* See av-pci.h. */
gboolean
av_pci_vfio_module_names(const AvRoot *root, const AvVfioAliases *aliases, const char *address, const char *module)
{
    g_autofree char *modalias = NULL;
    g_autofree char *name = NULL;

    if (!aliases || !module || !(modalias = av_pci_vfio_modalias(root, address)))
        return FALSE;
    name = g_strdelimit(g_strdup(module), "-", '_');
    return av_vfio_aliases_best(aliases, modalias, name) != NULL;
}
