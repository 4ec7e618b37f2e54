/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub method "reset": a ladder of PCI reset methods.
 *
 * The ladder is the step's "methods" option, or else the device's own
 * reset_method list in the kernel's order.  For each rung the device's
 * reset_method is narrowed to that one method and the device is reset:
 * through VFIO (VFIO_DEVICE_RESET, which honours reset_method) when it is on
 * vfio-pci and the kernel table can open it, else through sysfs "reset".
 * The first rung that succeeds wins; reset_method is given back its former
 * list afterwards.  A "bus" reset (a secondary bus reset of the parent
 * bridge) also resets every other device behind that bridge: it is refused
 * when one of them is in use (libvirt's rule, virPCIDeviceReset).
 *
 * Kernel interfaces: Documentation/ABI/testing/sysfs-bus-pci (reset_method,
 * reset), Documentation/driver-api/vfio.rst (VFIO_DEVICE_RESET). */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>
#include <string.h>

#include "pci/av-pci.h"
#include "util/av-error.h"
#include "vfio/av-vfio.h"

#define AV_RESET_DEFAULT "default"

/* TRUE when @dev's IOMMU group holds @address. */
static gboolean
av_reset_same_group(const AvPciDevice *dev, const char *address)
{
    for (guint i = 0; dev->iommu_group_members && i < dev->iommu_group_members->len; i++)
        if (g_str_equal(g_ptr_array_index(dev->iommu_group_members, i), address))
            return TRUE;
    return FALSE;
}

/* The devices a secondary bus reset of @dev's parent bridge also resets:
 * every other device behind that bridge (on a root bus: on the same bus),
 * and everything behind the bridges among them.  Borrowed from @host. */
static GPtrArray *
av_reset_bus_victims(const AvHost *host, const AvPciDevice *dev)
{
    GPtrArray *victims = g_ptr_array_new();
    g_autoptr(GHashTable) bridges = g_hash_table_new(g_str_hash, g_str_equal);
    guint32 domain = 0, d2 = 0;
    guint8 bus = 0, b2 = 0, s, f;
    gboolean grew = TRUE;

    av_pci_address_parse(dev->address, &domain, &bus, &s, &f);
    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *o = g_ptr_array_index(host->pci, i);
        gboolean sibling;

        if (o == dev)
            continue;
        if (dev->parent_bridge)
            sibling = g_strcmp0(o->parent_bridge, dev->parent_bridge) == 0;
        else
            sibling = !o->parent_bridge && av_pci_address_parse(o->address, &d2, &b2, &s, &f) &&
                      d2 == domain && b2 == bus;
        if (sibling) {
            g_ptr_array_add(victims, o);
            if (o->is_bridge)
                g_hash_table_add(bridges, o->address);
        }
    }
    while (grew) {
        grew = FALSE;
        for (guint i = 0; i < host->pci->len; i++) {
            AvPciDevice *o = g_ptr_array_index(host->pci, i);

            if (!o->parent_bridge || !g_hash_table_contains(bridges, o->parent_bridge) ||
                g_ptr_array_find(victims, o, NULL))
                continue;
            g_ptr_array_add(victims, o);
            if (o->is_bridge)
                g_hash_table_add(bridges, o->address);
            grew = TRUE;
        }
    }
    return victims;
}

/* libvirt's rule for a bus reset of @dev: every other device it would hit
 * must be in @dev's own IOMMU group, or a bridge, or unbound or on vfio-pci
 * (or pci-stub), with its group held by no process (no domain's QEMU, no
 * BAR mapped: av_vfio_groups_find_holder()).  Returns FALSE with an error
 * naming the first device on a host driver, else the device held and by
 * whom, or why the holders cannot be told. */
static gboolean
av_reset_bus_safe(const AvRoot *root, const AvHost *host, const AvPciDevice *dev, GError **error)
{
    g_autoptr(GPtrArray) victims = av_reset_bus_victims(host, dev);
    g_autoptr(GArray) groups = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(AvVfioHolder) holder = NULL;
    g_autofree char *who = NULL;

    for (guint i = 0; i < victims->len; i++) {
        const AvPciDevice *o = g_ptr_array_index(victims, i);

        if (av_reset_same_group(dev, o->address) || o->is_bridge)
            continue;
        if (o->driver && !av_pci_driver_is_vfio(o->driver) && !g_str_equal(o->driver, "pci-stub")) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "a bus reset would also reset %s, which the host uses (driver '%s')",
                        o->address, o->driver);
            return FALSE;
        }
        if (o->iommu_group >= 0)
            g_array_append_val(groups, o->iommu_group);
    }
    if (groups->len == 0)
        return TRUE;
    if (!av_vfio_groups_find_holder(root, &g_array_index(groups, int, 0), groups->len, &holder, error)) {
        g_prefix_error(error, "a bus reset would also reset devices of other IOMMU groups, and ");
        return FALSE;
    }
    if (!holder)
        return TRUE;
    who = av_vfio_holder_describe(holder);
    for (guint i = 0; i < victims->len; i++) {
        const AvPciDevice *o = g_ptr_array_index(victims, i);

        if (o->iommu_group == holder->group && !av_reset_same_group(dev, o->address) && !o->is_bridge) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "a bus reset would also reset %s, whose IOMMU group %d process %s holds "
                        "(a running domain?)", o->address, o->iommu_group, who);
            return FALSE;
        }
    }
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                "a bus reset would also reset IOMMU group %d, which process %s holds", holder->group, who);
    return FALSE;
}

/* Resets @dev through VFIO.  Returns 0, or -errno (-ENOSYS when the kernel
 * table cannot open devices). */
static int
av_reset_vfio(const AvScrubContext *ctx, const AvPciDevice *dev)
{
    AvDeviceHandle *handle = NULL;
    int r;

    if (!ctx->ops->device_open || !ctx->ops->device_reset || !ctx->ops->device_close)
        return -ENOSYS;
    r = av_scrub_device_open(ctx, dev->address, &handle);
    if (r < 0)
        return r;
    r = ctx->ops->device_reset(handle);
    ctx->ops->device_close(handle);
    return r;
}

/* One rung: narrows reset_method to @method (unless "default") and resets.
 * Stores how ("vfio" or "sysfs") in *ret_via.  Returns FALSE with @error. */
static gboolean
av_reset_try(const AvScrubContext *ctx, const AvPciDevice *dev, const char *method,
             const char **ret_via, GError **error)
{
    g_autofree char *method_path = av_sys_path("bus/pci/devices/%s/reset_method", dev->address);
    g_autofree char *reset_path = av_sys_path("bus/pci/devices/%s/reset", dev->address);
    int r;

    if (!g_str_equal(method, AV_RESET_DEFAULT)) {
        r = ctx->ops->write(ctx->root, method_path, method);
        if (r < 0)
            return av_error_errno(error, r, "cannot select it in reset_method");
    }
    if (av_pci_driver_is_vfio(dev->driver)) {
        r = av_reset_vfio(ctx, dev);
        if (r == 0) {
            *ret_via = "vfio";
            return TRUE;
        }
        /* accelvirt's hold is gone (av_scrub_device_open()): no reset of
         * a device another process may have now, by VFIO or by sysfs. */
        if (r == -ENOLCK) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "accelvirt's hold of its IOMMU group is gone");
            return FALSE;
        }
        if (r != -ENOSYS && r != -ENOTTY && r != -EBUSY && r != -ENOENT && r != -EPERM)
            return av_error_errno(error, r, "VFIO_DEVICE_RESET failed");
        /* VFIO cannot (the group is held, or no reset VFIO can do): sysfs. */
    }
    if (!dev->has_reset) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the device has no sysfs 'reset' attribute");
        return FALSE;
    }
    r = ctx->ops->write(ctx->root, reset_path, "1");
    if (r < 0)
        return av_error_errno(error, r, "writing 1 to reset failed");
    *ret_via = "sysfs";
    return TRUE;
}

gboolean
av_scrub_method_reset(AvScrubContext *ctx, char **ret_message, GError **error)
{
    const char *address = ctx->target->address;
    json_t *option = json_object_get(ctx->step->options, "methods");
    json_t *attempts = json_array();
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GPtrArray) ladder = g_ptr_array_new();
    g_autoptr(GString) failures = g_string_new(NULL);
    g_autofree char *method_path = NULL;
    g_autofree char *original = NULL;
    const AvPciDevice *dev;
    const char *winner = NULL, *via = NULL;
    gboolean on_vfio;

    json_object_set_new(ctx->entry, "attempts", attempts);
    if (ctx->target->mdev_uuid || !address || !av_pci_address_is_valid(address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "'%s' is not a PCI function: a reset acts on a whole function",
                    ctx->target->identity ? ctx->target->identity : "(none)");
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    host = av_host_scan(ctx->root, error);
    if (!host) {
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    dev = av_host_find_pci(host, address);
    if (!dev) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "device %s is not on this host", address);
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    on_vfio = av_pci_driver_is_vfio(dev->driver) && ctx->ops->device_open && ctx->ops->device_reset;

    if (!dev->reset_methods) {
        /* A kernel before 5.15 (no reset_method) cannot be told which
         * method: its own choice, whatever the step lists. */
        if (dev->has_reset || on_vfio)
            g_ptr_array_add(ladder, (gpointer)AV_RESET_DEFAULT);
    } else if (option) {
        size_t i;
        json_t *item;

        json_array_foreach(option, i, item) g_ptr_array_add(ladder, (gpointer)json_string_value(item));
    } else {
        for (guint i = 0; dev->reset_methods[i]; i++)
            g_ptr_array_add(ladder, dev->reset_methods[i]);
    }
    if (ladder->len == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "device %s has no reset method available (its reset_method is %s and it %s a sysfs "
                    "'reset'): it cannot be reset; scrub it with another method or remove 'reset' from "
                    "profile '%s'", address, dev->reset_methods ? "empty" : "absent",
                    dev->has_reset ? "has" : "has no", ctx->profile->name);
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }

    method_path = av_sys_path("bus/pci/devices/%s/reset_method", address);
    if (dev->reset_methods)
        original = g_strjoinv(" ", dev->reset_methods);
    for (guint i = 0; i < ladder->len && !winner && !(ctx->hold_lost && *ctx->hold_lost); i++) {
        const char *m = g_ptr_array_index(ladder, i);
        g_autoptr(GError) local = NULL;
        json_t *attempt = json_object();

        json_object_set_new(attempt, "method", json_string(m));
        if (!g_str_equal(m, AV_RESET_DEFAULT) && !g_strv_contains((const char *const *)dev->reset_methods, m)) {
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "not supported by the device (reset_method: %s)",
                        *original ? original : "empty");
        } else if (g_str_equal(m, "bus") && !av_reset_bus_safe(ctx->root, host, dev, &local)) {
            g_prefix_error(&local, "refused: ");
        } else if (av_reset_try(ctx, dev, m, &via, &local)) {
            winner = m;
        }
        json_object_set_new(attempt, "ok", json_boolean(winner != NULL));
        if (local) {
            json_object_set_new(attempt, "error", json_string(local->message));
            g_string_append_printf(failures, "%s%s: %s", failures->len ? "; " : "", m, local->message);
        }
        json_array_append_new(attempts, attempt);
    }
    /* reset_method keeps what it was before: narrowing it is ours only. */
    if (original && *original && ctx->ops->write(ctx->root, method_path, original) < 0)
        g_string_append_printf(failures, "%scannot give reset_method back its list '%s'",
                               failures->len ? "; " : "", original);

    if (!winner) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "no reset method worked for %s: %s", address,
                    failures->str);
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "reset_method", json_string(winner));
    json_object_set_new(ctx->entry, "via", json_string(via));
    *ret_message = g_strdup_printf("reset by %s (%s)%s%s", winner, via, failures->len ? " after " : "",
                                   failures->str);
    return TRUE;
}
