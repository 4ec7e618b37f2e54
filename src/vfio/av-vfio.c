/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: vfio-pci binding, IOMMU group safety, mediated devices.
 *
 * The sequences follow libvirt's virPCIDeviceBindToStub/UnbindFromStub and
 * Documentation/ABI/testing/sysfs-bus-pci: driver_override, unbind,
 * drivers_probe; and back: unbind, clear driver_override, DRV/bind.  Every
 * write goes through an AvKernelOps; every result is checked by reading the
 * tree again, never by trusting the write. */
#include "config.h"

#include "av-vfio.h"
#include "av-hold.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-point.h"
#include "util/av-file.h"

#define AV_VFIO_DRIVER "vfio-pci"

/* --- names ------------------------------------------------------------------ */


static gboolean
av_vfio_check_address(const char *address, GError **error)
{
    if (av_pci_address_is_valid(address))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "'%s' is not a PCI address: expected the form 0000:3b:00.0", address ? address : "");
    return FALSE;
}

static gboolean
av_vfio_check_driver_name(const char *driver, GError **error)
{
    if (av_driver_name_is_valid(driver))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "'%s' is not a driver name: expected letters, digits, '_', '.' and '-'",
                driver ? driver : "");
    return FALSE;
}

static gboolean
av_vfio_check_uuid(const char *uuid, GError **error)
{
    if (av_uuid_is_valid(uuid))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "'%s' is not an mdev UUID: expected the lower-case form "
                "4b20d080-1b54-4048-85b3-a6a62d165c01", uuid ? uuid : "");
    return FALSE;
}

/* --- reading the tree --------------------------------------------------------- */

/* The driver @address is bound to now: 0 and *ret_driver (NULL when
 * unbound), or -errno. */
static int
av_vfio_read_driver(const AvRoot *root, const char *address, char **ret_driver)
{
    g_autofree char *link = av_sys_path("bus/pci/devices/%s/driver", address);
    char *name = NULL;
    int r;

    r = av_root_link_name_text(root, link, &name);
    if (r == -ENOENT) {
        *ret_driver = NULL;
        return 0;
    }
    if (r < 0)
        return r;
    *ret_driver = name;
    return 0;
}

/* See av-vfio.h. */
char *
av_vfio_current_driver(const AvRoot *root, const char *address)
{
    char *driver = NULL;

    if (av_vfio_read_driver(root, address, &driver) < 0)
        return NULL;
    return driver;
}

/* The driver_override of @address: NULL when unset ("(null)") or unreadable. */
static char *
av_vfio_read_override(const AvRoot *root, const char *address)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/driver_override", address);
    char *value = NULL;

    if (av_root_read_attr(root, path, &value) < 0)
        return NULL;
    if (!*value || g_str_equal(value, "(null)")) {
        g_free(value);
        return NULL;
    }
    return value;
}

static gboolean
av_vfio_device_exists(const AvRoot *root, const char *address, GError **error)
{
    g_autofree char *dir = av_sys_path("bus/pci/devices/%s", address);

    if (av_root_exists(root, dir))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                "there is no PCI device '%s' under the root '%s'", address, av_root_prefix(root));
    return FALSE;
}

static gboolean
av_vfio_driver_loaded(const AvRoot *root, const char *driver)
{
    g_autofree char *dir = av_sys_path("bus/pci/drivers/%s", driver);

    return av_root_exists(root, dir);
}

/* See av-vfio.h. */
char *
av_vfio_module_driver(const AvRoot *root, const char *module)
{
    g_autofree char *dir = NULL;
    g_auto(GStrv) names = NULL;

    if (!module)
        return NULL;
    if (g_str_equal(module, "vfio_pci") || g_str_equal(module, AV_VFIO_DRIVER))
        return av_vfio_driver_loaded(root, AV_VFIO_DRIVER) ? g_strdup(AV_VFIO_DRIVER) : NULL;
    if (!av_driver_name_is_valid(module))
        return NULL;
    /* The kernel's own map: /sys/module/MODULE/drivers/pci:DRIVER. */
    dir = av_sys_path("module/%s/drivers", module);
    if (av_root_list_dir(root, dir, &names) == 0) {
        for (guint i = 0; names[i]; i++) {
            const char *drv;

            if (!g_str_has_prefix(names[i], "pci:"))
                continue;
            drv = names[i] + strlen("pci:");
            if (av_driver_name_is_valid(drv) && av_pci_driver_is_vfio(drv) && av_vfio_driver_loaded(root, drv))
                return g_strdup(drv);
        }
    }
    /* Every variant names its pci_driver after its module. */
    if (av_pci_driver_is_vfio(module) && av_vfio_driver_loaded(root, module))
        return g_strdup(module);
    return NULL;
}

/* See av-vfio.h. */
gboolean
av_vfio_choose_driver(const AvRoot *root, const AvVfioAliases *aliases, const char *address, const char *choice,
                      char **ret_driver, GError **error)
{
    g_autofree char *offered = NULL;
    g_autofree char *driver = NULL;
    const char *module;

    if (!av_vfio_check_address(address, error))
        return FALSE;
    if (choice && (g_str_equal(choice, AV_VFIO_DRIVER) || g_str_equal(choice, "vfio_pci"))) {
        *ret_driver = g_strdup(AV_VFIO_DRIVER);
        return TRUE;
    }
    if (choice && !g_str_equal(choice, "auto")) {
        g_autofree char *name = g_strdelimit(g_strdup(choice), "-", '_');

        module = choice;
        /* A variant the kernel lists binds only what its aliases name: with
         * the override set, the kernel would still hand it any device, to
         * a probe that refuses it or drives what it does not know. */
        if (av_vfio_aliases_module_has(aliases, name) &&
            !av_pci_vfio_module_names(root, aliases, address, name)) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "cannot bind '%s' to %s: the running kernel's modules.alias names no device of its ids "
                        "for %s; write \"vfio_driver\": \"auto\" (or \"vfio-pci\") in its profile",
                        address, choice, choice);
            return FALSE;
        }
    } else {
        offered = av_pci_vfio_module_for(root, aliases, address);
        if (!offered || g_str_equal(offered, "vfio_pci")) {
            /* No variant for it (or no modules.alias to ask): vfio-pci. */
            *ret_driver = g_strdup(AV_VFIO_DRIVER);
            return TRUE;
        }
        module = offered;
    }
    driver = av_vfio_module_driver(root, module);
    if (!driver) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot bind '%s' to %s: the module %s is not loaded%s; run 'modprobe %s', or write "
                    "\"vfio_driver\": \"vfio-pci\" in a profile that matches it to use plain vfio-pci%s",
                    address, module, module, offered ? " (the running kernel's modules.alias offers it for this device)" : "",
                    module, av_pci_vfio_variant_migrates(module) ? " and lose the variant's live migration" : "");
        return FALSE;
    }
    *ret_driver = g_steal_pointer(&driver);
    return TRUE;
}

/* See av-vfio.h. */
char *
av_vfio_choose_driver_or_plain(const AvRoot *root, const char *address, const char *choice, GError **ret_why)
{
    g_autoptr(AvVfioAliases) aliases = av_vfio_aliases_load(root);
    char *driver = NULL;

    if (av_vfio_choose_driver(root, aliases, address, choice, &driver, ret_why))
        return driver;
    return g_strdup(AV_VFIO_DRIVER);
}

/* @name with every '-' made '_': a module's name and its driver's name
 * compare equal so ("pds-vfio-pci" is module pds_vfio_pci's driver). */
static char *
av_vfio_module_form(const char *name)
{
    return g_strdelimit(g_strdup(name), "-", '_');
}

/* See av-vfio.h. */
char *
av_vfio_kept_note(const AvRoot *root, const AvVfioAliases *aliases, const char *address, const char *current,
                  const char *choice)
{
    g_autofree char *offered = NULL;
    g_autofree char *want = NULL;
    g_autofree char *have = NULL;
    const char *why;

    if (!current || !av_pci_driver_is_vfio(current))
        return NULL;
    if (choice && !g_str_equal(choice, "auto")) {
        want = av_vfio_module_form(choice);
        why = "its profile's \"vfio_driver\" asks for";
    } else {
        offered = av_pci_vfio_module_for(root, aliases, address);
        want = av_vfio_module_form(offered ? offered : "vfio_pci");
        why = "the running kernel's modules.alias offers";
    }
    have = av_vfio_module_form(current);
    if (g_str_equal(have, want))
        return NULL;
    /* Said as the driver's name: vfio-pci's module is vfio_pci. */
    if (g_str_equal(want, "vfio_pci")) {
        g_free(want);
        want = g_strdup(AV_VFIO_DRIVER);
    }
    return g_strdup_printf("%s stays on %s, where it already was, though %s %s (a vfio driver is never changed "
                           "while a process may hold the device); to use %s, bind %s to it while no domain has it",
                           address, current, why, want, want, address);
}

/* See av-vfio.h. */
gboolean
av_vfio_device_is_vfio(const AvRoot *root, const char *address, const char *driver)
{
    g_autofree char *vfio_dev = NULL;

    if (av_pci_driver_is_vfio(driver))
        return TRUE;
    if (!driver || !av_pci_has_vgpu(root, address))
        return FALSE;
    vfio_dev = av_sys_path("bus/pci/devices/%s/vfio-dev", address);
    return av_root_exists(root, vfio_dev);
}

/* --- the writes ------------------------------------------------------------- */

static int
av_vfio_write_override(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *value)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/driver_override", address);

    return ops->write(root, path, value);
}

/* Writes @address to /sys/bus/pci/drivers/@driver/@attr (bind, unbind). */
static int
av_vfio_write_driver(const AvRoot *root, const AvKernelOps *ops, const char *driver, const char *attr,
                     const char *address)
{
    g_autofree char *path = av_sys_path("bus/pci/drivers/%s/%s", driver, attr);

    return ops->write(root, path, address);
}

static int
av_vfio_write_probe(const AvRoot *root, const AvKernelOps *ops, const char *address)
{
    g_autofree char *path = av_sys_path("bus/pci/drivers_probe");

    return ops->write(root, path, address);
}

/* Puts @address back on @original (NULL: unbound) with @old_override after a
 * failed bind.  Appends what went wrong to @problems (nothing when all went
 * well). */
static void
av_vfio_rollback(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *original,
                 const char *old_override, GString *problems)
{
    g_autofree char *current = NULL;
    g_autofree char *after = NULL;
    int r;

    r = av_vfio_read_driver(root, address, &current);
    if (r < 0) {
        g_string_append_printf(problems, "; cannot read its driver link: %s", g_strerror(-r));
        return;
    }
    if (current && g_strcmp0(current, original) != 0) {
        if (!av_driver_name_is_valid(current)) {
            g_string_append_printf(problems, "; it is bound to '%s', which is not a driver name", current);
            return;
        }
        r = av_vfio_write_driver(root, ops, current, "unbind", address);
        if (r < 0)
            g_string_append_printf(problems, "; cannot unbind it from %s: %s", current, g_strerror(-r));
    }
    r = av_vfio_write_override(root, ops, address, old_override ? old_override : "\n");
    if (r < 0)
        g_string_append_printf(problems, "; cannot reset its driver_override: %s", g_strerror(-r));
    if (original && g_strcmp0(current, original) != 0) {
        if (!av_vfio_driver_loaded(root, original)) {
            g_string_append_printf(problems, "; driver %s is not loaded", original);
        } else {
            r = av_vfio_write_driver(root, ops, original, "bind", address);
            if (r < 0)
                g_string_append_printf(problems, "; cannot bind it to %s again: %s", original, g_strerror(-r));
        }
    }
    r = av_vfio_read_driver(root, address, &after);
    if (r < 0)
        g_string_append_printf(problems, "; cannot read its driver link: %s", g_strerror(-r));
    else if (g_strcmp0(after, original) != 0)
        g_string_append_printf(problems, "; it is left on %s instead of %s",
                               after ? after : "no driver", original ? original : "no driver");
}

/* Sets the bind error "cannot bind '%s' to DRIVER: WHAT" after rolling
 * back, with any rollback problem appended. */
static gboolean G_GNUC_PRINTF(8, 9)
av_vfio_bind_fail(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *want,
                  const char *original, const char *old_override, GError **error, const char *fmt, ...)
{
    g_autoptr(GString) problems = g_string_new(NULL);
    g_autofree char *what = NULL;
    va_list ap;

    va_start(ap, fmt);
    what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    av_vfio_rollback(root, ops, address, original, old_override, problems);
    if (problems->len == 0)
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot bind '%s' to %s: %s; it is back on %s", address, want, what,
                    original ? original : "no driver");
    else
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot bind '%s' to %s: %s; putting it back failed too%s", address, want, what,
                    problems->str);
    return FALSE;
}

gboolean
av_vfio_bind(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *driver,
             char **ret_original_driver, GError **error)
{
    const char *want = driver ? driver : AV_VFIO_DRIVER;
    g_autofree char *original = NULL;
    g_autofree char *old_override = NULL;
    g_autofree char *now = NULL;
    int r;

    if (!av_vfio_check_address(address, error) || !av_vfio_device_exists(root, address, error))
        return FALSE;
    if (!av_pci_driver_is_vfio(want)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot bind '%s' to %s: it is neither vfio-pci nor a vfio-pci variant", address, want);
        return FALSE;
    }
    /* A rebind takes a VF from NVIDIA's vGPU Manager, and with it the
     * Manager's hold of the VF (and whatever vGPU it has). */
    if (av_pci_has_vgpu(root, address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot bind '%s' to %s: it is a VF NVIDIA's vGPU Manager serves (nvidia/current_vgpu_type), "
                    "which stays on NVIDIA's driver; give its profile a \"vgpu_type\"", address, want);
        return FALSE;
    }
    if (!av_vfio_driver_loaded(root, want)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot bind '%s' to %s: the %s module is not loaded; run 'modprobe %s'", address, want, want,
                    want);
        return FALSE;
    }
    r = av_vfio_read_driver(root, address, &original);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the driver of '%s'", address);
    if (original && av_pci_driver_is_vfio(original)) {
        /* Already on a vfio driver (@want, vfio-pci or a variant, as the
         * operator or an earlier tenant left it): it stays, and giving it
         * back means leaving it there.  It never moves from one vfio driver
         * to another here: a process (QEMU, DPDK, a domain attached behind
         * libvirt's back) may hold it open, and then the kernel's unbind
         * blocks until that process lets go, or takes the device from it. */
        *ret_original_driver = g_steal_pointer(&original);
        return TRUE;
    }
    if (original && !av_driver_name_is_valid(original)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot bind '%s' to %s: its driver link names '%s', which is not a driver name", address, want,
                    original);
        return FALSE;
    }
    old_override = av_vfio_read_override(root, address);

    /* Documentation/ABI/testing/sysfs-bus-pci: driver_override. */
    r = av_vfio_write_override(root, ops, address, want);
    if (r < 0)
        return av_vfio_bind_fail(root, ops, address, want, original, old_override, error,
                                 "writing driver_override failed: %s", g_strerror(-r));
    if (original) {
        r = av_vfio_write_driver(root, ops, original, "unbind", address);
        if (r < 0)
            return av_vfio_bind_fail(root, ops, address, want, original, old_override, error,
                                     "unbinding it from %s failed: %s", original, g_strerror(-r));
    }
    r = av_vfio_write_probe(root, ops, address);
    if (r < 0)
        return av_vfio_bind_fail(root, ops, address, want, original, old_override, error,
                                 "drivers_probe failed: %s", g_strerror(-r));
    r = av_vfio_read_driver(root, address, &now);
    if (r < 0)
        return av_vfio_bind_fail(root, ops, address, want, original, old_override, error,
                                 "cannot read its driver link: %s", g_strerror(-r));
    if (!now || !g_str_equal(now, want))
        return av_vfio_bind_fail(root, ops, address, want, original, old_override, error,
                                 "after drivers_probe it is on %s, not %s (does %s accept it?)",
                                 now ? now : "no driver", want, want);
    *ret_original_driver = g_steal_pointer(&original);
    return TRUE;
}

/* See av-vfio.h. */
gboolean
av_vfio_resize_bar(const AvRoot *root, const AvKernelOps *ops, const char *address, guint bar, guint bit,
                   GError **error)
{
    g_autofree char *driver = NULL;
    g_autofree char *after = NULL;
    g_autofree char *path = NULL;
    g_autofree char *value = NULL;
    int r, resize_r, probe_r;

    if (!av_vfio_check_address(address, error) || !av_vfio_device_exists(root, address, error))
        return FALSE;
    g_return_val_if_fail(bar < 6, FALSE);
    r = av_vfio_read_driver(root, address, &driver);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the driver of '%s'", address);
    if (!av_pci_driver_is_vfio(driver) || !av_driver_name_is_valid(driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot resize BAR %u of '%s': it is on %s, not vfio-pci or a variant of it", bar, address,
                    driver ? driver : "no driver");
        return FALSE;
    }
    /* Back onto the same vfio driver (vfio-pci or its variant) afterwards. */
    r = av_vfio_write_override(root, ops, address, driver);
    if (r < 0)
        return av_error_errno(error, r, "cannot resize BAR %u of '%s': writing driver_override failed", bar, address);
    r = av_vfio_write_driver(root, ops, driver, "unbind", address);
    if (r < 0)
        return av_error_errno(error, r, "cannot resize BAR %u of '%s': unbinding it from %s failed", bar,
                              address, driver);
    av_point_crash_named("bar-unbound");
    path = av_sys_path("bus/pci/devices/%s/resource%u_resize", address, bar);
    value = g_strdup_printf("%u", bit);
    resize_r = ops->write(root, path, value);
    probe_r = av_vfio_write_probe(root, ops, address);
    r = av_vfio_read_driver(root, address, &after);
    if (probe_r < 0 || r < 0 || g_strcmp0(after, driver) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "resizing BAR %u of '%s' to %" G_GUINT64_FORMAT " MiB %s, and it did not go back to %s "
                    "(%s); it is on %s", bar, address, ((guint64)1 << bit),
                    resize_r < 0 ? "failed" : "worked", driver,
                    probe_r < 0 ? g_strerror(-probe_r) : r < 0 ? g_strerror(-r) : "drivers_probe left it elsewhere",
                    after ? after : "no driver");
        return FALSE;
    }
    if (resize_r < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "the kernel refused to resize BAR %u of '%s' to %" G_GUINT64_FORMAT " MiB: %s%s", bar, address,
                    ((guint64)1 << bit), g_strerror(-resize_r),
                    resize_r == -ENOSPC ? " (the bridge above it has no room for the larger BAR)" : "");
        return FALSE;
    }
    /* The kernel's own account of the BAR now ("resource", line @bar). */
    {
        guint64 start = 0, end = 0;

        r = av_pci_read_resource(root, address, bar, &start, &end, NULL);
        if (r < 0 || end < start || end - start + 1 != ((guint64)1 << (bit + 20))) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "BAR %u of '%s' is not %" G_GUINT64_FORMAT " MiB after the kernel resized it (%s)", bar,
                        address, ((guint64)1 << bit),
                        r < 0 ? g_strerror(-r) : "its resource line says otherwise");
            return FALSE;
        }
    }
    return TRUE;
}

/* From the vfio driver @current (NULL: no driver) back to the vfio driver
 * @original (a variant back to vfio-pci, or a device a crash left on no
 * driver): vfio-pci and its variants bind by driver_override only (their
 * id tables are empty or narrow), so the override names @original, then
 * unbind and drivers_probe, as av_vfio_bind(). */
static gboolean
av_vfio_restore_vfio(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *current,
                     const char *original, GError **error)
{
    g_autofree char *now = NULL;
    int r;

    if (!av_vfio_driver_loaded(root, original)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot give '%s' back to %s: driver %s is not loaded",
                    address, original, original);
        return FALSE;
    }
    r = av_vfio_write_override(root, ops, address, original);
    if (r < 0)
        return av_error_errno(error, r, "cannot set the driver_override of '%s' to %s", address, original);
    if (current) {
        r = av_vfio_write_driver(root, ops, current, "unbind", address);
        if (r < 0)
            return av_error_errno(error, r, "cannot unbind '%s' from %s", address, current);
    }
    r = av_vfio_write_probe(root, ops, address);
    if (r < 0)
        return av_error_errno(error, r, "cannot probe '%s' onto %s", address, original);
    r = av_vfio_read_driver(root, address, &now);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the driver of '%s'", address);
    if (g_strcmp0(now, original) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot give '%s' back to %s: after drivers_probe it is on %s",
                    address, original, now ? now : "no driver");
        return FALSE;
    }
    return TRUE;
}

gboolean
av_vfio_restore(const AvRoot *root, const AvKernelOps *ops, const char *address,
                const char *original_driver, GError **error)
{
    g_autofree char *current = NULL;
    g_autofree char *override = NULL;
    g_autofree char *now = NULL;
    int r;

    if (!av_vfio_check_address(address, error))
        return FALSE;
    if (original_driver && !av_vfio_check_driver_name(original_driver, error))
        return FALSE;
    if (!av_vfio_device_exists(root, address, error))
        return FALSE;
    r = av_vfio_read_driver(root, address, &current);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the driver of '%s'", address);

    if (current && av_pci_driver_is_vfio(current) && av_driver_name_is_valid(current)) {
        if (g_strcmp0(original_driver, current) == 0)
            return TRUE;
        if (original_driver && av_pci_driver_is_vfio(original_driver))
            return av_vfio_restore_vfio(root, ops, address, current, original_driver, error);
        r = av_vfio_write_driver(root, ops, current, "unbind", address);
        if (r < 0)
            return av_error_errno(error, r, "cannot unbind '%s' from %s", address, current);
    } else if (current && g_strcmp0(current, original_driver) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "cannot give '%s' back to %s: it is bound to %s, not vfio-pci or a variant; leaving it alone",
                    address, original_driver ? original_driver : "no driver", current);
        return FALSE;
    } else if (!current && original_driver && av_pci_driver_is_vfio(original_driver)) {
        /* On no driver (a crash between an unbind and a probe) and its
         * driver is a vfio one: a bind by name would not take it. */
        return av_vfio_restore_vfio(root, ops, address, NULL, original_driver, error);
    }

    /* "\n" clears driver_override (the kernel strips the newline). */
    override = av_vfio_read_override(root, address);
    if (override) {
        r = av_vfio_write_override(root, ops, address, "\n");
        if (r < 0)
            return av_error_errno(error, r, "cannot clear the driver_override of '%s'", address);
        g_clear_pointer(&override, g_free);
        override = av_vfio_read_override(root, address);
        if (override) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "cannot clear the driver_override of '%s': it still reads '%s'", address, override);
            return FALSE;
        }
    }
    if (current && g_strcmp0(current, original_driver) == 0)
        return TRUE;    /* already on its driver, e.g. after libvirt's managed='yes' */
    if (!original_driver)
        return TRUE;

    if (!av_vfio_driver_loaded(root, original_driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot give '%s' back to %s: driver %s is not loaded; load its module and bind the device to it",
                    address, original_driver, original_driver);
        return FALSE;
    }
    r = av_vfio_write_driver(root, ops, original_driver, "bind", address);
    if (r < 0)
        return av_error_errno(error, r, "cannot bind '%s' to %s", address, original_driver);
    r = av_vfio_read_driver(root, address, &now);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the driver of '%s'", address);
    if (g_strcmp0(now, original_driver) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot give '%s' back to %s: after the bind it is on %s", address, original_driver,
                    now ? now : "no driver");
        return FALSE;
    }
    return TRUE;
}

gboolean
av_vfio_wait_group_node(const AvRoot *root, int group, int timeout_ms, GError **error)
{
    g_autofree char *node = NULL;
    gint64 deadline;

    if (group < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%d' is not an IOMMU group number", group);
        return FALSE;
    }
    node = av_dev_path("vfio/%d", group);
    deadline = g_get_monotonic_time() + (gint64)MAX(timeout_ms, 0) * 1000;
    for (;;) {
        if (av_root_exists(root, node))
            return TRUE;
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(10 * 1000);
    }
    {
        g_autofree char *host = av_root_host_path(root, node);

        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "'%s' did not appear within %d ms; is udev running and the device on vfio-pci?", host,
                    timeout_ms);
    }
    return FALSE;
}

/* --- IOMMU groups ------------------------------------------------------------- */

static gint
av_vfio_strcmp_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "0000:98:00" of "0000:98:00.1": the card (domain:bus:slot). */
static gboolean
av_vfio_same_card(const char *a, const char *b)
{
    return strncmp(a, b, 10) == 0;
}

/* "'ADDR' (NAME, driver DRV)" for messages.  Caller frees. */
static char *
av_vfio_describe(const AvPciDevice *dev)
{
    GString *s = g_string_new(NULL);

    g_string_append_printf(s, "'%s' (", dev->address);
    if (dev->device_name)
        g_string_append_printf(s, "%s%s%s, ", dev->vendor_name ? dev->vendor_name : "",
                               dev->vendor_name ? " " : "", dev->device_name);
    else
        g_string_append_printf(s, "%04x:%04x, ", dev->vendor_id, dev->device_id);
    if (dev->driver)
        g_string_append_printf(s, "driver %s)", dev->driver);
    else
        g_string_append(s, "no driver)");
    return g_string_free(s, FALSE);
}

/* TRUE when the group member @m may go to the guest with @dev (see
 * av_vfio_group_check()): no host driver holds it (none, vfio-pci,
 * pci-stub); or it is a pool device itself, handed out whole (a profile
 * with attach vfio-pci or sriov-vf takes it: prepare claims it with @dev);
 * or it is a function of @dev's own card (domain:bus:slot) that the
 * profile of @dev names among its "companions" (the GPU's HDMI audio).
 * Nothing else: a function no profile names and that a host driver holds
 * is the host's (a NIC on the card's second function, a disk controller),
 * whatever its slot. */
static gboolean
av_vfio_member_is_free(const AvPolicy *policy, const AvPciDevice *dev, const AvProfile *dev_profile,
                       const AvPciDevice *m)
{
    const AvProfile *mp;

    if (!m->driver || av_pci_driver_is_vfio(m->driver) || g_str_equal(m->driver, "pci-stub"))
        return TRUE;
    mp = policy ? av_policy_match_pci(policy, m) : NULL;
    if (mp && (mp->attach == AV_ATTACH_VFIO_PCI || mp->attach == AV_ATTACH_SRIOV_VF))
        return TRUE;
    return dev_profile && av_vfio_same_card(dev->address, m->address) && av_profile_names_companion(dev_profile, m);
}

gboolean
av_vfio_group_check(const AvHost *host, const AvPolicy *policy, const AvPciDevice *dev,
                    GPtrArray **ret_members, GError **error)
{
    g_autoptr(GPtrArray) members = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) used = g_ptr_array_new();
    const AvPciDevice *bridge = NULL;
    const AvProfile *dev_profile = policy ? av_policy_match_pci(policy, dev) : NULL;
    g_autofree char *what = NULL;

    if (dev->iommu_group < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot hand '%s' to a guest: it has no IOMMU group, so the IOMMU is off; "
                    "enable intel_iommu=on or amd_iommu=on on the kernel command line and reboot",
                    dev->address);
        return FALSE;
    }
    if (dev->is_bridge)
        bridge = dev;
    for (guint i = 0; i < dev->iommu_group_members->len; i++) {
        const char *addr = g_ptr_array_index(dev->iommu_group_members, i);
        const AvPciDevice *m;

        if (g_str_equal(addr, dev->address)) {
            g_ptr_array_add(members, g_strdup(addr));
            continue;
        }
        m = av_host_find_pci(host, addr);
        if (!m) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "cannot hand '%s' to a guest: its IOMMU group %d holds '%s', which the host scan "
                        "did not find; scan again ('accelvirt list') and retry",
                        dev->address, dev->iommu_group, addr);
            return FALSE;
        }
        if (m->is_bridge) {
            if (!bridge)
                bridge = m;
            continue;
        }
        if (!av_vfio_member_is_free(policy, dev, dev_profile, m))
            g_ptr_array_add(used, (gpointer)m);
        g_ptr_array_add(members, g_strdup(addr));
    }
    /* A device the host uses is the more useful thing to name (the NIC behind
     * the same switch), so it comes before the bridge. */
    if (used->len > 0) {
        g_autofree char *more = used->len > 1 ? g_strdup_printf(" (and %u more)", used->len - 1) : g_strdup("");

        what = av_vfio_describe(g_ptr_array_index(used, 0));
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot hand '%s' to a guest: its IOMMU group %d also holds %s, a device the host "
                    "uses that no profile names%s; move the card to a slot with its own IOMMU group, or, "
                    "if that function belongs to the card (its HDMI audio), name its class in the "
                    "profile's \"companions\" so that it goes to the guest too",
                    dev->address, dev->iommu_group, what, more);
        return FALSE;
    }
    if (bridge) {
        what = av_vfio_describe(bridge);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot hand '%s' to a guest: its IOMMU group %d holds the PCI bridge %s, which "
                    "does not isolate the devices behind it, so the group is not viable; move the card "
                    "to a slot below a PCIe root port or a switch port with ACS",
                    dev->address, dev->iommu_group, what);
        return FALSE;
    }
    g_ptr_array_sort(members, av_vfio_strcmp_ptr);
    *ret_members = g_steal_pointer(&members);
    return TRUE;
}

/* --- mediated devices ----------------------------------------------------------- */

/* The type @type_id of @parent, or NULL.  Borrowed. */
static const AvMdevType *
av_mdev_find_type(const AvMdevParent *parent, const char *type_id)
{
    for (guint i = 0; parent->types && i < parent->types->len; i++) {
        const AvMdevType *t = g_ptr_array_index(parent->types, i);

        if (g_str_equal(t->id, type_id))
            return t;
    }
    return NULL;
}

static gboolean
av_mdev_runs_type(const AvMdevParent *parent, const char *type_id)
{
    for (guint i = 0; parent->mdevs && i < parent->mdevs->len; i++) {
        const AvMdev *m = g_ptr_array_index(parent->mdevs, i);

        if (g_strcmp0(m->type_id, type_id) == 0)
            return TRUE;
    }
    return FALSE;
}

/* TRUE unless @profile names its parents ("match": {"mdev_parent": [...]})
 * and @parent is not one of them. */
static gboolean
av_mdev_parent_listed(const AvProfile *profile, const AvMdevParent *parent)
{
    if (!profile->match_mdev_parents || profile->match_mdev_parents->len == 0)
        return TRUE;
    for (guint i = 0; i < profile->match_mdev_parents->len; i++)
        if (g_str_equal(g_ptr_array_index(profile->match_mdev_parents, i), parent->name))
            return TRUE;
    return FALSE;
}

gboolean
av_mdev_choose_parent(const AvHost *host, const AvProfile *profile, int numa_node,
                      char **ret_parent, GError **error)
{
    const AvMdevParent *best = NULL;
    gboolean best_runs = FALSE;
    guint best_avail = 0;
    const char *type_id = profile->mdev_type;

    if (!type_id || !av_mdev_type_id_is_valid(type_id)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "profile '%s' names no valid mdev type ('mdev_type')", profile->name);
        return FALSE;
    }
    /* host->mdev_parents is sorted by name: a strictly better candidate only
     * replaces the best, so ties go to the first name. */
    for (guint i = 0; host->mdev_parents && i < host->mdev_parents->len; i++) {
        const AvMdevParent *parent = g_ptr_array_index(host->mdev_parents, i);
        const AvMdevType *t = av_mdev_find_type(parent, type_id);
        gboolean runs;

        if (!t || t->available == 0)
            continue;
        if (numa_node >= 0 && parent->numa_node != numa_node)
            continue;
        if (!av_mdev_parent_listed(profile, parent))
            continue;
        runs = av_mdev_runs_type(parent, type_id);
        if (best) {
            if (best_runs && !runs)
                continue;
            if (runs == best_runs) {
                if (profile->allocation == AV_ALLOCATION_SPREAD ? t->available <= best_avail
                                                                : t->available >= best_avail)
                    continue;
            }
        }
        best = parent;
        best_runs = runs;
        best_avail = t->available;
    }
    if (!best) {
        if (numa_node >= 0)
            g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                        "no mdev parent has a free instance of type '%s' on NUMA node %d", type_id, numa_node);
        else
            g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                        "no mdev parent has a free instance of type '%s' on any NUMA node", type_id);
        return FALSE;
    }
    *ret_parent = g_strdup(best->name);
    return TRUE;
}

/* The root-relative directory of the mdev parent @name:
 * /sys/class/mdev_bus/NAME, where the kernel lists every parent; for a PCI
 * address that the class lacks (a tree captured without it),
 * /sys/bus/pci/devices/NAME.  AV_ERROR_NOT_FOUND when neither exists. */
static char *
av_mdev_parent_dir(const AvRoot *root, const char *name, GError **error)
{
    g_autofree char *dir = av_sys_path("class/mdev_bus/%s", name);

    if (av_root_exists(root, dir))
        return g_steal_pointer(&dir);
    if (av_pci_address_is_valid(name)) {
        g_autofree char *pci = av_sys_path("bus/pci/devices/%s", name);

        if (av_root_exists(root, pci))
            return g_steal_pointer(&pci);
    }
    g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                "there is no mdev parent '%s' under the root '%s' (no %s: is its driver loaded?)",
                name, av_root_prefix(root), dir);
    return NULL;
}

gboolean
av_mdev_create(const AvRoot *root, const AvKernelOps *ops, const char *parent,
               const char *type, const char *uuid, GError **error)
{
    g_autofree char *parent_dir = NULL;
    g_autofree char *parent_real = NULL;
    g_autofree char *type_dir = NULL;
    g_autofree char *create = NULL;
    g_autofree char *mdev = NULL;
    g_autofree char *mdev_type = NULL;
    g_autofree char *resolved = NULL;
    g_autofree char *owner = NULL;
    g_autofree char *now_type = NULL;
    int r;

    if (!av_mdev_parent_name_is_valid(parent)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not an mdev parent name: expected a name of /sys/class/mdev_bus such as "
                    "0000:17:00.0 or mtty", parent ? parent : "");
        return FALSE;
    }
    if (!av_vfio_check_uuid(uuid, error))
        return FALSE;
    if (!av_mdev_type_id_is_valid(type)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not an mdev type: expected letters, digits, '_', '.' and '-'", type ? type : "");
        return FALSE;
    }
    parent_dir = av_mdev_parent_dir(root, parent, error);
    if (!parent_dir)
        return FALSE;
    r = av_root_resolve(root, parent_dir, &parent_real);
    if (r < 0)
        return av_error_errno(error, r, "cannot resolve the mdev parent '%s'", parent);
    type_dir = g_strdup_printf("%s/mdev_supported_types/%s", parent_dir, type);
    if (!av_root_exists(root, type_dir)) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "cannot create mdev '%s': '%s' offers no mdev type '%s' (is its vendor driver loaded?)",
                    uuid, parent, type);
        return FALSE;
    }
    mdev = av_sys_path("bus/mdev/devices/%s", uuid);
    if (av_root_exists(root, mdev)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                    "cannot create mdev '%s': an mdev with this UUID exists already", uuid);
        return FALSE;
    }
    /* Documentation/driver-api/vfio-mediated-device.rst: "create". */
    create = g_strconcat(type_dir, "/create", NULL);
    r = ops->write(root, create, uuid);
    if (r == -EUSERS || r == -ENOSPC) {
        g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                    "cannot create mdev '%s': '%s' has no instance of type '%s' left", uuid, parent, type);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot create mdev '%s' of type '%s' on '%s'", uuid, type, parent);

    mdev_type = g_strconcat(mdev, "/mdev_type", NULL);
    if (av_root_resolve(root, mdev, &resolved) < 0 || av_root_link_name(root, mdev_type, &now_type) < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "created mdev '%s' of type '%s' on '%s', but it did not appear", uuid, type, parent);
        return FALSE;
    }
    /* The mdev is a child of its parent's directory. */
    owner = g_path_get_dirname(resolved);
    if (!g_str_equal(owner, parent_real) || !g_str_equal(now_type, type)) {
        g_autofree char *owner_name = g_path_get_basename(owner);

        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "created mdev '%s' of type '%s' on '%s', but it appeared as type '%s' on '%s'",
                    uuid, type, parent, now_type, owner_name);
        return FALSE;
    }
    return TRUE;
}

gboolean
av_mdev_remove(const AvRoot *root, const AvKernelOps *ops, const char *uuid, GError **error)
{
    g_autofree char *mdev = NULL;
    g_autofree char *remove = NULL;
    int r;

    if (!av_vfio_check_uuid(uuid, error))
        return FALSE;
    mdev = av_sys_path("bus/mdev/devices/%s", uuid);
    if (!av_root_exists(root, mdev))
        return TRUE;
    remove = g_strconcat(mdev, "/remove", NULL);
    r = ops->write(root, remove, "1");
    if (r == -EBUSY) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                    "cannot remove mdev '%s': it is busy (does a guest still use it?)", uuid);
        return FALSE;
    }
    if (r < 0 && r != -ENOENT && r != -ENODEV)
        return av_error_errno(error, r, "cannot remove mdev '%s'", uuid);
    if (av_root_exists(root, mdev)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "removed mdev '%s', but it is still there", uuid);
        return FALSE;
    }
    return TRUE;
}

/* --- holders of IOMMU groups --------------------------------------------------- */

/* The text of the /proc/PID/fd link of a device fd that
 * VFIO_GROUP_GET_DEVICE_FD returned (Documentation/driver-api/vfio.rst): an
 * anonymous inode, which names no file (proc(5): "anon_inode:[TYPE]"). */
#define AV_VFIO_ANON_DEVICE "anon_inode:[vfio-device]"
/* The line of /proc/PID/fdinfo/FD that names the device of a vfio device fd
 * (Documentation/filesystems/proc.rst, "VFIO Device files"; kernel 6.18). */
#define AV_VFIO_FDINFO_SYSPATH "vfio-device-syspath:"
/* What the kernel appends to the path of a file unlinked while open, in
 * /proc/PID/fd links and /proc/PID/maps (proc(5)). */
#define AV_VFIO_DELETED " (deleted)"

typedef enum {
    AV_VFIO_WATCH_GROUP,        /* /dev/vfio/N */
    AV_VFIO_WATCH_CDEV,         /* /dev/vfio/devices/vfioX of a member */
    AV_VFIO_WATCH_PROC_BAR,     /* /proc/bus/pci/BB/SS.F of a PCI member */
    AV_VFIO_WATCH_SYSDIR,       /* a member's sysfs directory (/sys/devices/...) */
} AvVfioWatchKind;

/* One path that ties a process to a group. */
typedef struct {
    AvVfioWatchKind kind;
    int group;
    char *member;               /* "0000:31:00.0" (or an mdev UUID); NULL for the group node */
} AvVfioWatch;

static void
av_vfio_watch_free(gpointer data)
{
    AvVfioWatch *w = data;

    g_free(w->member);
    g_free(w);
}

/* One scan of /proc: what it looks for (root-relative path -> AvVfioWatch),
 * and the first /proc entry that could not be read, if any. */
typedef struct {
    GHashTable *watch;
    char *unreadable;
} AvVfioScan;

void
av_vfio_holder_free(AvVfioHolder *holder)
{
    if (!holder)
        return;
    g_free(holder->pid);
    g_free(holder->through);
    g_free(holder);
}

/* See av-vfio.h. */
char *
av_vfio_holder_describe(const AvVfioHolder *holder)
{
    return g_strdup_printf("%s (%s)", holder->pid, holder->through);
}

static void
av_vfio_watch_add(AvVfioScan *scan, char *path, AvVfioWatchKind kind, int group, const char *member)
{
    AvVfioWatch *w = g_new0(AvVfioWatch, 1);

    w->kind = kind;
    w->group = group;
    w->member = g_strdup(member);
    g_hash_table_replace(scan->watch, path, w);
}

/* TRUE for "vfio" and digits: a name of /sys/.../vfio-dev
 * (Documentation/ABI/testing/sysfs-devices-vfio-dev: vfioX). */
static gboolean
av_vfio_is_cdev_name(const char *name)
{
    return g_str_has_prefix(name, "vfio") && name[4] && strspn(name + 4, "0123456789") == strlen(name + 4);
}

/* TRUE for "resourceN" and "resourceN_wc": the sysfs files that map BAR N
 * (Documentation/ABI/testing/sysfs-bus-pci, Documentation/PCI/sysfs-pci.rst). */
static gboolean
av_vfio_is_bar_name(const char *name)
{
    size_t digits;

    if (!g_str_has_prefix(name, "resource"))
        return FALSE;
    name += strlen("resource");
    digits = strspn(name, "0123456789");
    return digits > 0 && (name[digits] == '\0' || g_str_equal(name + digits, "_wc"));
}

/* Adds what ties a process to group @group: its node, and for each member
 * (the names in /sys/kernel/iommu_groups/N/devices) its sysfs directory,
 * its vfio cdevs and, for a PCI function, its /proc/bus/pci file. */
static void
av_vfio_watch_group(const AvRoot *root, AvVfioScan *scan, int group)
{
    g_autofree char *members_dir = av_sys_path("kernel/iommu_groups/%d/devices", group);
    g_auto(GStrv) members = NULL;

    /* /dev/iommu is not watched: an iommufd holds no particular device.  A
     * device joins one through its own cdev fd (VFIO_DEVICE_BIND_IOMMUFD,
     * Documentation/userspace-api/iommufd.rst), which is watched. */
    av_vfio_watch_add(scan, av_dev_path("vfio/%d", group), AV_VFIO_WATCH_GROUP, group, NULL);
    if (av_root_list_dir(root, members_dir, &members) < 0)
        return;
    for (guint i = 0; members[i]; i++) {
        g_autofree char *entry = g_strconcat(members_dir, "/", members[i], NULL);
        g_autofree char *sysdir = NULL;
        g_autofree char *cdev_dir = NULL;
        g_auto(GStrv) cdevs = NULL;
        guint32 domain;
        guint8 bus, slot, function;

        if (av_root_resolve(root, entry, &sysdir) < 0)
            continue;
        cdev_dir = g_strconcat(sysdir, "/vfio-dev", NULL);
        if (av_root_list_dir(root, cdev_dir, &cdevs) == 0) {
            for (guint j = 0; cdevs[j]; j++)
                if (av_vfio_is_cdev_name(cdevs[j]))
                    av_vfio_watch_add(scan, av_dev_path("vfio/devices/%s", cdevs[j]), AV_VFIO_WATCH_CDEV,
                                      group, members[i]);
        }
        /* drivers/pci/proc.c names a bus "BB" in domain 0, else "DDDD:BB". */
        if (av_pci_address_parse(members[i], &domain, &bus, &slot, &function))
            av_vfio_watch_add(scan,
                              domain ? av_proc_path("bus/pci/%04x:%02x/%02x.%x", domain, bus, slot, function)
                                     : av_proc_path("bus/pci/%02x/%02x.%x", bus, slot, function),
                              AV_VFIO_WATCH_PROC_BAR, group, members[i]);
        av_vfio_watch_add(scan, g_steal_pointer(&sysdir), AV_VFIO_WATCH_SYSDIR, group, members[i]);
    }
}

/* The watch that the path @path (as the kernel prints it, " (deleted)"
 * removed) ties to a group: the group node, a member's cdev or
 * /proc/bus/pci file, or a BAR file in a member's sysfs directory; NULL for
 * anything else.  Borrowed. */
static const AvVfioWatch *
av_vfio_watch_match(const AvVfioScan *scan, const char *path)
{
    const AvVfioWatch *w;
    g_autofree char *dir = NULL;
    g_autofree char *base = NULL;

    if (path[0] != '/')
        return NULL;
    w = g_hash_table_lookup(scan->watch, path);
    if (w)
        return w->kind == AV_VFIO_WATCH_SYSDIR ? NULL : w;
    dir = g_path_get_dirname(path);
    base = g_path_get_basename(path);
    w = g_hash_table_lookup(scan->watch, dir);
    if (w && w->kind == AV_VFIO_WATCH_SYSDIR && av_vfio_is_bar_name(base))
        return w;
    return NULL;
}

/* @text without a trailing " (deleted)": a file unlinked while open is
 * held all the same.  Caller frees. */
static char *
av_vfio_undeleted(const char *text)
{
    if (g_str_has_suffix(text, AV_VFIO_DELETED))
        return g_strndup(text, strlen(text) - strlen(AV_VFIO_DELETED));
    return g_strdup(text);
}

/* Notes that the /proc entry @path gave -errno @r.  A process that exited
 * meanwhile (-ENOENT, -ESRCH) is no holder; anything else means the scan
 * cannot tell, unless it finds a holder elsewhere. */
static void
av_vfio_scan_failed(AvVfioScan *scan, const char *path, int r)
{
    if (r == -ENOENT || r == -ESRCH || scan->unreadable)
        return;
    scan->unreadable = g_strdup_printf("cannot read '%s': %s", path, g_strerror(-r));
}

/* The lines of the /proc file @path, or NULL (noted in @scan) when it
 * cannot be read. */
static char **
av_vfio_scan_read_lines(const AvRoot *root, AvVfioScan *scan, const char *path)
{
    g_autofree char *contents = NULL;
    int r;

    r = av_root_read_file(root, path, &contents, NULL);
    if (r < 0) {
        av_vfio_scan_failed(scan, path, r);
        return NULL;
    }
    return g_strsplit(contents, "\n", -1);
}

static AvVfioHolder *
av_vfio_holder_new(const char *pid, int group, char *through)
{
    AvVfioHolder *h = g_new0(AvVfioHolder, 1);

    h->pid = g_strdup(pid);
    h->group = group;
    h->through = through;
    return h;
}

/* The member that the anonymous vfio device fd @fd of @pid is open on, by
 * its fdinfo; NULL when the kernel does not say (before 6.18 it prints
 * nothing that ties the fd to a device: such an fd is not seen, see
 * av_vfio_groups_find_holder()). */
static AvVfioHolder *
av_vfio_scan_anon_device(const AvRoot *root, AvVfioScan *scan, const char *pid, const char *fd)
{
    g_autofree char *path = av_proc_path("%s/fdinfo/%s", pid, fd);
    g_auto(GStrv) lines = av_vfio_scan_read_lines(root, scan, path);

    for (guint i = 0; lines && lines[i]; i++) {
        const AvVfioWatch *w;

        if (!g_str_has_prefix(lines[i], AV_VFIO_FDINFO_SYSPATH))
            continue;
        w = g_hash_table_lookup(scan->watch, g_strstrip(lines[i] + strlen(AV_VFIO_FDINFO_SYSPATH)));
        if (w && w->kind == AV_VFIO_WATCH_SYSDIR)
            return av_vfio_holder_new(pid, w->group, g_strdup_printf(AV_VFIO_ANON_DEVICE " of %s", w->member));
        return NULL;
    }
    return NULL;
}

/* The first fd of @pid that holds a watched group, or NULL. */
static AvVfioHolder *
av_vfio_scan_fds(const AvRoot *root, AvVfioScan *scan, const char *pid)
{
    g_autofree char *fd_dir = av_proc_path("%s/fd", pid);
    g_auto(GStrv) fds = NULL;
    int r;

    r = av_root_list_dir(root, fd_dir, &fds);
    if (r < 0) {
        av_vfio_scan_failed(scan, fd_dir, r);
        return NULL;
    }
    for (guint i = 0; fds[i]; i++) {
        g_autofree char *link = g_strconcat(fd_dir, "/", fds[i], NULL);
        g_autofree char *text = NULL;
        g_autofree char *path = NULL;
        const AvVfioWatch *w;

        /* The link's text, never followed: an anonymous inode names no file,
         * and a path is the one the process opened (proc(5)). */
        r = av_root_read_link(root, link, &text);
        if (r < 0) {
            av_vfio_scan_failed(scan, link, r);
            continue;
        }
        if (g_str_equal(text, AV_VFIO_ANON_DEVICE)) {
            AvVfioHolder *h = av_vfio_scan_anon_device(root, scan, pid, fds[i]);

            if (h)
                return h;
            continue;
        }
        path = av_vfio_undeleted(text);
        w = av_vfio_watch_match(scan, path);
        /* An open /proc/bus/pci file reads config space, which anyone may
         * (mode 0644): only a mapping of it (CAP_SYS_RAWIO) reaches the
         * device's memory (av_vfio_scan_maps()). */
        if (w && w->kind != AV_VFIO_WATCH_PROC_BAR)
            return av_vfio_holder_new(pid, w->group, g_steal_pointer(&text));
    }
    return NULL;
}

/* The pathname of a /proc/PID/maps line (proc(5): address, perms, offset,
 * dev, inode, then the pathname after blanks; empty for anonymous memory).
 * Borrowed from @line. */
static const char *
av_vfio_maps_pathname(const char *line)
{
    const char *p = line;

    for (guint field = 0; field < 5; field++) {
        p += strcspn(p, " \t");
        p += strspn(p, " \t");
    }
    return p;
}

/* The first mapping of @pid of a watched device (a BAR file, a cdev's
 * regions), or NULL. */
static AvVfioHolder *
av_vfio_scan_maps(const AvRoot *root, AvVfioScan *scan, const char *pid)
{
    g_autofree char *maps = av_proc_path("%s/maps", pid);
    g_auto(GStrv) lines = av_vfio_scan_read_lines(root, scan, maps);

    for (guint i = 0; lines && lines[i]; i++) {
        const char *name = av_vfio_maps_pathname(lines[i]);
        g_autofree char *path = NULL;
        const AvVfioWatch *w;

        if (name[0] != '/')
            continue;
        path = av_vfio_undeleted(name);
        w = av_vfio_watch_match(scan, path);
        if (w)
            return av_vfio_holder_new(pid, w->group, g_strdup_printf("a mapping of %s", name));
    }
    return NULL;
}

/* "IOMMU group 40" or "IOMMU groups 40, 41" (those of @groups that are
 * groups).  Caller frees. */
static char *
av_vfio_groups_text(const int *groups, guint n_groups)
{
    g_autoptr(GString) list = g_string_new(NULL);
    guint n = 0;

    for (guint i = 0; i < n_groups; i++)
        if (groups[i] >= 0)
            g_string_append_printf(list, "%s%d", n++ ? ", " : "", groups[i]);
    return g_strdup_printf("IOMMU group%s %s", n == 1 ? "" : "s", list->str);
}

/* See av-vfio.h. */
gboolean
av_vfio_groups_find_holder(const AvRoot *root, const int *groups, guint n_groups,
                           AvVfioHolder **ret_holder, GError **error)
{
    return av_vfio_groups_find_holder_full(root, NULL, groups, n_groups, ret_holder, error);
}

/* See av-vfio.h. */
gboolean
av_vfio_groups_find_holder_full(const AvRoot *root, const char *state_dir, const int *groups, guint n_groups,
                                AvVfioHolder **ret_holder, GError **error)
{
    g_autoptr(GHashTable) own = NULL;
    g_autoptr(GHashTable) watch = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, av_vfio_watch_free);
    g_autofree char *proc = av_proc_path("%s", "");
    g_autofree char *unreadable = NULL;
    g_autofree char *what = NULL;
    g_auto(GStrv) pids = NULL;
    AvVfioScan scan = { .watch = watch };
    AvVfioHolder *holder = NULL;
    int r;

    for (guint i = 0; i < n_groups; i++)
        if (groups[i] >= 0)
            av_vfio_watch_group(root, &scan, groups[i]);
    if (g_hash_table_size(watch) == 0) {
        *ret_holder = NULL;
        return TRUE;
    }
    r = av_root_list_dir(root, proc, &pids);
    if (r == -ENOENT && !av_root_is_host(root)) {
        /* A fake host without /proc: no processes. */
        *ret_holder = NULL;
        return TRUE;
    }
    if (r == -ENOENT)
        scan.unreadable = g_strdup_printf("there is no '%s' (is procfs mounted?)", proc);
    else if (r < 0)
        av_vfio_scan_failed(&scan, proc, r);
    for (guint i = 0; pids && pids[i] && !holder; i++) {
        guint64 pid;

        if (!g_ascii_string_to_unsigned(pids[i], 10, 1, G_MAXINT, &pid, NULL))
            continue;
        /* accelvirt's own holders (av-hold.h) are no QEMU. */
        if (!own)
            own = av_hold_pids(root, state_dir);
        if (g_hash_table_contains(own, pids[i]))
            continue;
        holder = av_vfio_scan_fds(root, &scan, pids[i]);
        if (!holder)
            holder = av_vfio_scan_maps(root, &scan, pids[i]);
    }
    unreadable = g_steal_pointer(&scan.unreadable);
    if (!holder && unreadable) {
        what = av_vfio_groups_text(groups, n_groups);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot tell whether a process holds %s: %s (is accelvirt running as root?)", what,
                    unreadable);
        return FALSE;
    }
    *ret_holder = holder;
    return TRUE;
}

/* See av-vfio.h. */
gboolean
av_vfio_group_file_take(const AvRoot *root, const char *state_dir, int group, int *ret_fd, char **ret_from,
                        GError **error)
{
    g_autofree char *node = av_dev_path("vfio/%d", group);
    g_autofree char *proc = av_proc_path("%s", "");
    g_autofree char *resolved = NULL;
    g_autoptr(GHashTable) own = NULL;
    g_auto(GStrv) pids = NULL;
    struct stat want, got;
    int r;

    *ret_fd = -1;
    if (ret_from)
        *ret_from = NULL;
    r = av_root_list_dir(root, proc, &pids);
    if (r == -ENOENT && !av_root_is_host(root))
        return TRUE;
    if (r < 0)
        return av_error_errno(error, r, "cannot list the processes in '%s'", proc);
    own = av_hold_pids(root, state_dir);
    for (guint i = 0; pids[i]; i++) {
        g_autofree char *fd_dir = NULL;
        g_auto(GStrv) fds = NULL;
        guint64 pid;

        if (!g_ascii_string_to_unsigned(pids[i], 10, 1, G_MAXINT, &pid, NULL) || g_hash_table_contains(own, pids[i]))
            continue;
        fd_dir = av_proc_path("%s/fd", pids[i]);
        if (av_root_list_dir(root, fd_dir, &fds) < 0)
            continue;
        for (guint j = 0; fds[j]; j++) {
            g_autofree char *link = g_strconcat(fd_dir, "/", fds[j], NULL);
            g_autofree char *text = NULL;
            guint64 target;
            int pidfd, fd, saved;

            if (av_root_read_link(root, link, &text) < 0 || !g_str_equal(text, node) ||
                !g_ascii_string_to_unsigned(fds[j], 10, 0, G_MAXINT, &target, NULL))
                continue;
            pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
            if (pidfd < 0)
                return av_error_errno(error, -errno, "cannot open process %s, which has %s open", pids[i], node);
            fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)target, 0);
            saved = errno;
            close(pidfd);
            if (fd < 0)
                return av_error_errno(error, -saved, "cannot take %s from process %s", node, pids[i]);
            /* The fd number may have been reused between the read of the link
             * and the take: the file taken must be the group's node. */
            if (!resolved) {
                g_autofree char *inside = NULL;

                if (av_root_resolve(root, node, &inside) == 0)
                    resolved = av_root_host_path(root, inside);
            }
            if (!resolved || stat(resolved, &want) < 0 || fstat(fd, &got) < 0 || want.st_dev != got.st_dev ||
                want.st_ino != got.st_ino || want.st_rdev != got.st_rdev) {
                close(fd);
                g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                            "fd %s of process %s was no longer %s when accelvirt took it", fds[j], pids[i], node);
                return FALSE;
            }
            *ret_fd = fd;
            if (ret_from)
                *ret_from = g_strdup_printf("%s (fd %s)", pids[i], fds[j]);
            return TRUE;
        }
    }
    return TRUE;
}

/* See av-vfio.h. */
char *
av_vfio_group_holder(const AvRoot *root, int group)
{
    return av_vfio_group_holder_full(root, NULL, group);
}

/* See av-vfio.h. */
char *
av_vfio_group_holder_full(const AvRoot *root, const char *state_dir, int group)
{
    g_autoptr(AvVfioHolder) holder = NULL;
    g_autoptr(GError) error = NULL;

    if (!av_vfio_groups_find_holder_full(root, state_dir, &group, 1, &holder, &error))
        return g_strdup_printf("unknown (%s)", error->message);
    return holder ? av_vfio_holder_describe(holder) : NULL;
}

/* --- SR-IOV ------------------------------------------------------------------ */

/* Writes @value to the attribute @name of the PF @pf_address. */
static gboolean
av_sriov_write(const AvRoot *root, const AvKernelOps *ops, const char *pf_address, const char *name,
               const char *value, GError **error)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/%s", pf_address, name);
    int r = ops->write(root, path, value);

    if (r < 0)
        return av_error_errno(error, r, "cannot write %s to '%s' of PF '%s'", value, name, pf_address);
    return TRUE;
}

/* TRUE once virtfn0 to virtfn(@count - 1) of @pf_address lead to
 * directories. */
static gboolean
av_sriov_vfs_present(const AvRoot *root, const char *pf_address, guint count)
{
    for (guint i = 0; i < count; i++) {
        g_autofree char *link = av_sys_path("bus/pci/devices/%s/virtfn%u/physfn", pf_address, i);

        if (!av_root_exists(root, link))
            return FALSE;
    }
    return TRUE;
}

gboolean
av_sriov_set_numvfs(const AvRoot *root, const AvKernelOps *ops, const char *pf_address, guint count,
                    int timeout_ms, GError **error)
{
    g_autofree char *total_path = NULL;
    g_autofree char *num_path = NULL;
    g_autofree char *text = NULL;
    guint64 total, now;
    gint64 deadline;

    if (!av_pci_address_is_valid(pf_address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a PCI address", pf_address ? pf_address : "");
        return FALSE;
    }
    total_path = av_sys_path("bus/pci/devices/%s/sriov_totalvfs", pf_address);
    num_path = av_sys_path("bus/pci/devices/%s/sriov_numvfs", pf_address);
    if (av_root_read_uint(root, total_path, 10, &total) < 0 || av_root_read_uint(root, num_path, 10, &now) < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "'%s' is no SR-IOV PF (no sriov_totalvfs or sriov_numvfs)",
                    pf_address);
        return FALSE;
    }
    if (count > total) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "PF '%s' offers at most %" G_GUINT64_FORMAT " VFs, not %u",
                    pf_address, total, count);
        return FALSE;
    }
    if (now == count)
        return TRUE;
    text = g_strdup_printf("%u", count);
    if (count > 0 && !av_sriov_write(root, ops, pf_address, "sriov_drivers_autoprobe", "0", error))
        return FALSE;
    if (now != 0 && count != 0 && !av_sriov_write(root, ops, pf_address, "sriov_numvfs", "0", error))
        return FALSE;
    if (!av_sriov_write(root, ops, pf_address, "sriov_numvfs", text, error))
        return FALSE;
    deadline = g_get_monotonic_time() + (gint64)MAX(timeout_ms, 0) * 1000;
    while (!av_sriov_vfs_present(root, pf_address, count)) {
        if (g_get_monotonic_time() >= deadline) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the %u VFs of PF '%s' did not appear within %d ms", count,
                        pf_address, timeout_ms);
            return FALSE;
        }
        g_usleep(10 * 1000);
    }
    return TRUE;
}
