/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what holds a released USB stick or mdev until its scrub,
 * beside the VFIO group holds of PCI functions (av-pool-hold.c).
 *
 * A USB stick cannot be held through VFIO: the kernel's hold on it is its
 * "authorized" attribute (av-usb-auth.h).  A stick is de-authorized the
 * moment it goes dirty (av_pool_release_device(), the one function every
 * release goes through: the hook's, `accelvirt release`, detach, the
 * audit's, the upkeep's), stays so while it is dirty, scrubbing (the
 * scrub's USB steps authorize it only for what they need, and leave it
 * de-authorized) or quarantined, and is authorized again only on its way to
 * free (av_pool_device_restore()), which it does not reach when that
 * fails.  The sweep (av_pool_usb_holds_sync(), from av_pool_holds_sync())
 * de-authorizes again a stick found authorized in those states: re-plugged,
 * after a reboot, or left so by a worker killed in a step.
 *
 * An mdev cannot be held either: accelvirt never opens an mdev's group
 * between tenants, and what its memory becomes is the vendor driver's
 * (freed, and cleared or not, when the mdev is removed).  An mdev accelvirt
 * created is removed when it goes dirty, by the same release function,
 * and a parent that still carries a released mdev of accelvirt's (its
 * removal failed, or a release was not done yet) gets no new mdev
 * (av_pool_mdev_parents_block()): its memory is never handed on before the
 * vendor driver had it back. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "vfio/av-hold.h"
#include "vfio/av-usb-auth.h"
#include "vfio/av-vfio.h"

/* See av-pool.h. */
void
av_pool_set_kernel(AvPool *pool, const AvRoot *root, const AvKernelOps *ops)
{
    AvRoot *copy = root ? av_root_new(av_root_prefix(root), NULL) : NULL;

    /* A copy: the caller's root may be a temporary one (a whole scan's). */
    g_clear_pointer(&pool->root, av_root_free);
    pool->root = copy;
    pool->ops = copy ? ops : NULL;
}

/* TRUE when @state is one a device must be held in: dirty, scrubbing,
 * quarantined. */
static gboolean
av_pool_state_held(AvDeviceState state)
{
    return state == AV_DEVICE_STATE_DIRTY || state == AV_DEVICE_STATE_SCRUBBING ||
           state == AV_DEVICE_STATE_QUARANTINED;
}

/* See av-pool.h. */
gboolean
av_pool_usb_wants_hold(const AvPoolDevice *dev)
{
    return dev->kind == AV_DEVICE_KIND_USB && dev->address && av_pool_state_held(dev->state);
}

/* The vendor id of the USB identity @identity ("usb:VVVV:..."), or -1. */
static int
av_pool_usb_identity_vendor(const char *identity)
{
    char hex[5] = { 0 };
    char *end = NULL;
    guint64 v;

    if (!identity || !g_str_has_prefix(identity, "usb:") || strlen(identity) < 9 || identity[8] != ':')
        return -1;
    memcpy(hex, identity + 4, 4);
    v = g_ascii_strtoull(hex, &end, 16);
    return end && *end == '\0' ? (int)v : -1;
}

/* The device of @usb that holding @dev acts on: the one at the port the
 * pool recorded presenting @dev's identity; else the one at that port with
 * @dev's vendor id that presents no identity the pool knows (a tenant's
 * firmware may have changed the product id or serial of the stick it had:
 * av_pool_reconcile() gives it that identity and an identity problem
 * later).  Never a device at another port, never another pooled device.
 * NULL when neither is there.  Borrowed from @usb. */
static const AvUsbDevice *
av_pool_usb_held_device(const AvPool *pool, const GPtrArray *usb, const AvPoolDevice *dev)
{
    const AvUsbDevice *at = av_pool_find_usb_device_at(usb, dev->identity, dev->address);
    int vendor = av_pool_usb_identity_vendor(dev->identity);

    if (at)
        return at;
    for (guint i = 0; usb && i < usb->len; i++) {
        const AvUsbDevice *u = g_ptr_array_index(usb, i);
        const AvPoolDevice *known;

        if (g_strcmp0(u->bus_path, dev->address) != 0)
            continue;
        known = av_pool_find_usb(pool, u);
        if ((int)u->vendor_id != vendor || (known && known != dev))
            return NULL;
        return u;
    }
    return NULL;
}

/* Holds @dev with @usb (a scan of every USB device): see av_pool_usb_hold(). */
static gboolean
av_pool_usb_hold_in(const AvPool *pool, const GPtrArray *usb, const AvRoot *root, const AvKernelOps *ops,
                    const AvPoolDevice *dev, const char **ret_done, GError **error)
{
    const AvUsbDevice *u = av_pool_usb_held_device(pool, usb, dev);
    gboolean written = FALSE;

    if (!u) {
        *ret_done = "absent";
        return TRUE;
    }
    if (!av_usb_authorized_set(root, ops, u->bus_path, FALSE, &written, error)) {
        g_prefix_error(error, "cannot hold the USB stick %s (%s): ", dev->identity, u->bus_path);
        return FALSE;
    }
    *ret_done = written ? "deauthorized" : "was-deauthorized";
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_usb_hold(const AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const AvPoolDevice *dev,
                 const char **ret_done, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;

    g_return_val_if_fail(dev->kind == AV_DEVICE_KIND_USB, FALSE);
    if (!dev->address) {
        *ret_done = "absent";
        return TRUE;
    }
    usb = av_host_scan_usb(root, error);
    if (!usb) {
        g_prefix_error(error, "cannot hold the USB stick %s: ", dev->identity);
        return FALSE;
    }
    return av_pool_usb_hold_in(pool, usb, root, ops, dev, ret_done, error);
}

/* See av-pool.h. */
gboolean
av_pool_usb_unhold(const AvRoot *root, const AvKernelOps *ops, const AvPoolDevice *dev, GError **error)
{
    g_autoptr(GPtrArray) usb = av_host_scan_usb(root, error);
    const AvUsbDevice *u;

    if (!usb)
        return FALSE;
    u = av_pool_find_usb_device_at(usb, dev->identity, dev->address);
    if (!u) {
        /* A stick still presenting the ids its firmware gives it
         * ("runtime_ids"): the firmware survived the scrub. */
        const AvUsbDevice *there = NULL;

        for (guint i = 0; i < usb->len && !there; i++) {
            const AvUsbDevice *at = g_ptr_array_index(usb, i);

            if (g_strcmp0(at->bus_path, dev->address) == 0 &&
                (int)at->vendor_id == av_pool_usb_identity_vendor(dev->identity))
                there = at;
        }

        if (there) {
            g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                        "the USB stick %s at %s presents %04x:%04x, not its first ids: the firmware loaded while a "
                        "domain held it survived the scrub (a 'usb-power-cycle' or 'usb-reauthorize' step brings "
                        "such a stick back to its boot loader); it stays held and is not authorized", dev->identity,
                        dev->address, there->vendor_id, there->product_id);
            return FALSE;
        }
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "no USB device presenting %s is at the port the pool recorded (%s), so none is authorized; it "
                    "stays held", dev->identity, dev->address ? dev->address : "no port");
        return FALSE;
    }
    if (!av_usb_authorized_set(root, ops, u->bus_path, TRUE, NULL, error)) {
        g_prefix_error(error, "cannot authorize the USB stick %s again: ", dev->identity);
        return FALSE;
    }
    return TRUE;
}

/* See av-pool.h. */
char *
av_pool_scrub_lock_path(const char *state_dir, const char *identity)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, identity, -1);
    g_autofree char *name = g_strdup_printf("scrub-%s.lock", hash);

    return g_build_filename(state_dir, name, NULL);
}

/* TRUE when a scrub of @dev runs now: its per-device scrub lock is taken
 * (a worker or `accelvirt scrub` holds it; av_scrub_lock_take()). */
static gboolean
av_pool_scrub_runs(const AvPool *pool, const AvPoolDevice *dev)
{
    g_autofree char *path = av_pool_scrub_lock_path(pool->state_dir, dev->identity);
    g_autoptr(AvLock) lock = av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, NULL);

    return lock == NULL;
}

/* See av-pool.h. */
gboolean
av_pool_usb_holds_sync(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error)
{
    g_autoptr(GPtrArray) usb = NULL;
    g_autoptr(GString) problems = g_string_new(NULL);
    gboolean wanted = FALSE;

    for (guint i = 0; i < pool->devices->len && !wanted; i++)
        wanted = av_pool_usb_wants_hold(g_ptr_array_index(pool->devices, i));
    if (!wanted)
        return TRUE;
    usb = av_host_scan_usb(root, error);
    if (!usb) {
        g_prefix_error(error, "cannot hold the USB sticks of the pool: ");
        return FALSE;
    }
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);
        g_autoptr(GError) local = NULL;
        const char *done = NULL;

        if (!av_pool_usb_wants_hold(dev))
            continue;
        /* A scrub that runs authorizes the stick for its own steps. */
        if (dev->state == AV_DEVICE_STATE_SCRUBBING && av_pool_scrub_runs(pool, dev))
            continue;
        if (!av_pool_usb_hold_in(pool, usb, root, ops, dev, &done, &local))
            g_string_append_printf(problems, "%s%s (%s)", problems->len ? "; " : "", local->message,
                                   av_device_state_to_string(dev->state));
        else if (g_str_equal(done, "deauthorized"))
            g_debug("de-authorized the %s USB stick %s at %s", av_device_state_to_string(dev->state),
                    dev->identity, dev->address);
    }
    if (problems->len > 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "%s", problems->str);
        return FALSE;
    }
    return TRUE;
}

/* See av-pool-private.h. */
char *
av_pool_release_hold(AvPool *pool, AvPoolDevice *dev, json_t *extra)
{
    g_autoptr(GError) local = NULL;

    if (!pool->root || !pool->ops)
        return NULL;
    if (dev->kind == AV_DEVICE_KIND_PCI && dev->iommu_group >= 0 && dev->address) {
        g_autofree char *driver = av_vfio_current_driver(pool->root, dev->address);

        /* A managed='yes' device is back on its host driver: the worker
         * binds it to vfio-pci for its scrub and holds it then.  The quick
         * take does not name a process that has the group open (that reads
         * every process of the host; the hook's work grows with the domain). */
        if (!av_vfio_device_is_vfio(pool->root, dev->address, driver))
            return NULL;
        if (av_hold_take_quick(pool->root, pool->ops, pool->state_dir, dev->iommu_group, dev->address, &local))
            return NULL;
        if (g_error_matches(local, AV_ERROR, AV_ERROR_IN_USE))
            return g_strdup_printf("at its release, %s", local->message);
        /* Not held, still dirty: the worker's sweep tries again. */
        json_object_set_new(extra, "hold_error", json_string(local->message));
    } else if (dev->kind == AV_DEVICE_KIND_USB) {
        const char *done = NULL;

        if (av_pool_usb_hold(pool, pool->root, pool->ops, dev, &done, &local))
            json_object_set_new(extra, "usb_hold", json_string(done));
        else
            json_object_set_new(extra, "usb_hold_error", json_string(local->message));
    } else if (dev->kind == AV_DEVICE_KIND_MDEV && dev->created) {
        if (av_mdev_remove(pool->root, pool->ops, dev->identity + strlen("mdev:"), &local))
            json_object_set_new(extra, "mdev_removed", json_true());
        else
            json_object_set_new(extra, "mdev_remove_error", json_string(local->message));
    }
    return NULL;
}

/* See av-pool.h. */
gboolean
av_pool_mdev_is_released(const AvPool *pool, const char *uuid)
{
    g_autofree char *identity = g_strconcat("mdev:", uuid, NULL);
    const AvPoolDevice *dev = pool ? av_pool_find(pool, identity) : NULL;

    return dev && dev->kind == AV_DEVICE_KIND_MDEV && dev->created && av_pool_state_held(dev->state);
}

/* See av-pool.h. */
guint
av_pool_mdev_parents_block(const AvPool *pool, AvHost *host)
{
    guint blocked = 0;

    for (guint i = 0; host->mdev_parents && i < host->mdev_parents->len; i++) {
        AvMdevParent *parent = g_ptr_array_index(host->mdev_parents, i);
        gboolean released = FALSE;

        for (guint j = 0; parent->mdevs && j < parent->mdevs->len && !released; j++)
            released = av_pool_mdev_is_released(pool, ((const AvMdev *)g_ptr_array_index(parent->mdevs, j))->uuid);
        for (guint j = 0; released && parent->types && j < parent->types->len; j++) {
            AvMdevType *t = g_ptr_array_index(parent->types, j);

            if (t->available > 0)
                blocked++;
            t->available = 0;
        }
    }
    return blocked;
}
