/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the pool's kernel-enforced holds (av-hold.h).
 *
 * Which devices the kernel must refuse is the pool's to say: dirty,
 * scrubbing and quarantined PCI functions.  The hook takes the holds of a
 * domain's devices at "release end"; every other path that makes devices
 * dirty (`accelvirt release`, av_pool_upkeep()'s releases of dead domains)
 * ends in the worker, whose sweep (av_pool_holds_sync(), at its start and
 * after each device it records) takes theirs, and so does `accelvirt
 * reconcile`'s.  Each sweep first removes the records that name no live
 * holder of this boot (av_hold_prune()). */
#include "config.h"

#include "av-pool-private.h"

#include <errno.h>
#include <string.h>

#include "util/av-error.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

/* See av-pool.h. */
gboolean
av_pool_device_wants_hold(const AvPoolDevice *dev)
{
    return dev->kind == AV_DEVICE_KIND_PCI && dev->iommu_group >= 0 && dev->address &&
           (dev->state == AV_DEVICE_STATE_DIRTY || dev->state == AV_DEVICE_STATE_SCRUBBING ||
            dev->state == AV_DEVICE_STATE_QUARANTINED);
}

/* TRUE when a PCI device of @group other than @except wants a hold. */
static gboolean
av_pool_group_wants_hold(const AvPool *pool, int group, const AvPoolDevice *except)
{
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev != except && dev->iommu_group == group && av_pool_device_wants_hold(dev))
            return TRUE;
    }
    return FALSE;
}

/* See av-pool.h. */
gboolean
av_pool_hold_drop_device(AvPool *pool, const AvRoot *root, const AvPoolDevice *dev, GError **error)
{
    if (dev->kind != AV_DEVICE_KIND_PCI || dev->iommu_group < 0 ||
        av_pool_group_wants_hold(pool, dev->iommu_group, dev))
        return TRUE;
    return av_hold_drop(root, pool->state_dir, dev->iommu_group, error);
}

/* See av-pool.h. */
gboolean
av_pool_holds_sync(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error)
{
    g_autoptr(GArray) held = NULL;
    g_autoptr(GHashTable) taken = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GString) problems = g_string_new(NULL);
    g_autoptr(GError) prune_error = NULL;

    /* Records that name no live holder of this boot (a reboot's, a killed
     * holder's, a taker's killed between its record and its word): no
     * hold, and never to be taken for one. */
    if (!av_hold_prune(root, pool->state_dir, NULL, &prune_error))
        g_string_append(problems, prune_error->message);
    held = av_hold_list_groups(pool->state_dir);
    /* Holds nobody needs any more. */
    for (guint i = 0; i < held->len; i++) {
        int group = g_array_index(held, int, i);
        g_autoptr(GError) local = NULL;

        if (av_pool_group_wants_hold(pool, group, NULL))
            continue;
        if (!av_hold_drop(root, pool->state_dir, group, &local))
            g_string_append_printf(problems, "%s%s", problems->len ? "; " : "", local->message);
    }
    /* Holds missing: a device released behind the hook, a holder killed.
     * Scrubbing devices are the worker's (see av-pool.h), and so is every
     * group with one: a hold taken here for another device of that group
     * (a dirty companion) would pass for the scrub's own after its holder
     * was killed, and the scrub would go on as if its group had never been
     * open to anyone else meanwhile. */
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->state == AV_DEVICE_STATE_SCRUBBING && dev->iommu_group >= 0)
            g_hash_table_add(taken, GINT_TO_POINTER(dev->iommu_group + 1));
    }
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);
        g_autoptr(GError) local = NULL;
        g_autofree char *driver = NULL;

        if (!av_pool_device_wants_hold(dev) || dev->state == AV_DEVICE_STATE_SCRUBBING ||
            g_hash_table_contains(taken, GINT_TO_POINTER(dev->iommu_group + 1)))
            continue;
        /* Off vfio-pci there is no group file to hold (av-hold.h). */
        driver = av_vfio_current_driver(root, dev->address);
        if (!av_vfio_device_is_vfio(root, dev->address, driver))
            continue;
        g_hash_table_add(taken, GINT_TO_POINTER(dev->iommu_group + 1));
        if (!av_hold_take(root, ops, pool->state_dir, dev->iommu_group, dev->address, &local))
            g_string_append_printf(problems, "%s%s (%s %s)", problems->len ? "; " : "", local->message,
                                   av_device_state_to_string(dev->state), dev->identity);
    }
    /* USB sticks are held apart (av-pool-release-hold.c). */
    {
        g_autoptr(GError) local = NULL;

        if (!av_pool_usb_holds_sync(pool, root, ops, &local))
            g_string_append_printf(problems, "%s%s", problems->len ? "; " : "", local->message);
    }
    if (problems->len > 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot bring the holds of the pool up to date: %s",
                    problems->str);
        return FALSE;
    }
    return TRUE;
}
