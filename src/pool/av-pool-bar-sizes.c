/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: BAR sizes put back after a scrub that was cut short.
 *
 * "vfio-zero" with "resize" records the size of every BAR it grows before
 * the first resize (av-bar-sizes.h), and removes the record once they are
 * back.  A record whose writer is gone (its lock free) was left by a
 * process killed in between: the BARs may be grown, the device off
 * vfio-pci.  Every holder of the pool's lock (av_pool_upkeep()), and the
 * worker as it picks a device, puts them back from the record, journals
 * it, and lets the scrub start over; a device whose sizes cannot be put
 * back is quarantined, unscrubbed, and the record stays for the next try. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-point.h"
#include "util/av-json.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

/* The pool device of @record: by its identity, else by its address. */
static AvPoolDevice *
av_pool_bar_device(AvPool *pool, const AvBarRecord *record)
{
    AvPoolDevice *dev = av_pool_find(pool, record->identity);

    return dev ? dev : av_pool_find_address(pool, AV_DEVICE_KIND_PCI, record->address);
}

/* TRUE when the PCI function at @record's address presents @record's
 * identity now (or its fallback identity, which the pool uses when one is
 * shared): the BARs are resized only on the device that was scrubbed, never
 * on whatever else sits at that address after a reboot, a hot swap or a
 * rescan (a host device: untouched).  FALSE with @error saying why. */
static gboolean
av_pool_bar_record_device_is_here(const AvRoot *root, const AvBarRecord *record, GError **error)
{
    const char *const one[] = { record->address, NULL };
    g_autoptr(AvHost) host = av_host_scan_devices(root, one, FALSE, error);
    const AvPciDevice *pci = host ? av_host_find_pci(host, record->address) : NULL;
    g_autofree char *identity = NULL;
    g_autofree char *fallback = NULL;

    if (!host)
        return FALSE;
    if (pci) {
        identity = av_pool_identity_pci(host, pci);
        fallback = av_pool_identity_pci_fallback(host, pci);
    }
    if (pci && (g_strcmp0(identity, record->identity) == 0 || g_strcmp0(fallback, record->identity) == 0))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                "the device at %s is %s%s%s now, not %s, whose BARs were resized: nothing is resized there",
                record->address, pci ? "'" : "", pci ? identity : "no device", pci ? "'" : "", record->identity);
    return FALSE;
}

/* Puts back the BARs of @record (taken), whose writer is gone; see
 * av_pool_bar_sizes_restore(). */
static gboolean
av_pool_bar_restore_one(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, AvBarRecord *record,
                        const char *by, gboolean *ret_changed, gboolean *ret_resume, GPtrArray *notes,
                        GPtrArray *problems, GError **error)
{
    AvPoolDevice *dev = av_pool_bar_device(pool, record);
    g_autoptr(json_t) fields = json_object();
    g_autoptr(GError) local = NULL;
    g_autoptr(GError) hold_error = NULL;
    g_autofree char *driver = NULL;
    json_t *done = json_array();
    gboolean ok;

    json_object_set_new(fields, "identity", json_string(record->identity));
    json_object_set_new(fields, "address", json_string(record->address));
    json_object_set_new(fields, "since", json_integer(record->since));
    json_object_set_new(fields, "by", json_string(by));
    json_object_set_new(fields, "bars", done);
    /* The resize unbinds the device from vfio-pci: no hold meanwhile. */
    if (!av_pool_bar_record_device_is_here(root, record, &hold_error)) {
        ok = FALSE;
        local = g_steal_pointer(&hold_error);
    } else if (dev && dev->kind == AV_DEVICE_KIND_PCI && dev->iommu_group >= 0 &&
               !av_hold_drop(root, pool->state_dir, dev->iommu_group, &hold_error)) {
        ok = FALSE;
        local = g_steal_pointer(&hold_error);
    } else {
        ok = av_bar_record_restore(root, ops, record, done, &local);
    }
    if (ok)
        av_point_crash_named("bar-restored");
    /* Held again as the pool says (a scrubbing device too: the worker that
     * dropped its hold for the resize is gone). */
    driver = av_vfio_current_driver(root, record->address);
    if (dev && av_pool_device_wants_hold(dev) && av_pci_driver_is_vfio(driver) &&
        !av_hold_take(root, ops, pool->state_dir, dev->iommu_group, dev->address, &hold_error))
        g_ptr_array_add(problems, g_strdup_printf("cannot hold %s again after putting its BARs back: %s",
                                                  record->address, hold_error->message));
    if (ok) {
        if (!av_pool_journal_append(pool, "bar-sizes-restored", fields, error))
            return FALSE;
        if (dev && (dev->state == AV_DEVICE_STATE_SCRUBBING || dev->state == AV_DEVICE_STATE_DIRTY))
            *ret_resume = TRUE;
        g_ptr_array_add(notes, g_strdup_printf("put the BARs of %s (%s) back to the sizes recorded before a "
                                               "resize that was cut short%s", record->address, record->identity,
                                               dev && (dev->state == AV_DEVICE_STATE_SCRUBBING ||
                                                       dev->state == AV_DEVICE_STATE_DIRTY)
                                               ? "; its scrub starts over" : ""));
        if (!av_bar_record_remove(record, &local))
            g_ptr_array_add(problems, g_strdup_printf("%s; the next call tries again", local->message));
        *ret_changed = TRUE;
        return TRUE;
    }
    g_prefix_error(&local, "its BAR sizes could not be put back after a scrub that was cut short: ");
    if (g_strcmp0(record->error, local->message) != 0) {
        g_autoptr(GError) keep = NULL;

        json_object_set_new(fields, "error", json_string(local->message));
        if (!av_pool_journal_append(pool, "bar-sizes-restore-failed", fields, error))
            return FALSE;
        if (!av_bar_record_set_error(record, local->message, &keep))
            g_ptr_array_add(problems, g_strdup(keep->message));
    }
    /* Never freed with a BAR grown, nor on the strength of the scrub that
     * was cut short. */
    if (dev && (dev->state == AV_DEVICE_STATE_DIRTY || dev->state == AV_DEVICE_STATE_SCRUBBING)) {
        if (!av_pool_quarantine_unscrubbed(pool, dev, local->message, error))
            return FALSE;
        *ret_changed = TRUE;
    }
    g_ptr_array_add(problems, g_strdup_printf("device %s (%s): %s%s", record->address, record->identity,
                                              local->message,
                                              dev && dev->state == AV_DEVICE_STATE_QUARANTINED
                                              ? "; it is quarantined, and the next call tries again"
                                              : "; the next call tries again"));
    av_bar_record_free(record);
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_bar_sizes_restore(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *identity,
                          const char *by, gboolean *ret_changed, gboolean *ret_resume, GPtrArray *notes,
                          GPtrArray *problems, GError **error)
{
    g_autoptr(GPtrArray) records = NULL;
    gboolean changed = FALSE, resume = FALSE;

    g_return_val_if_fail(pool->mode == AV_POOL_WRITE, FALSE);
    if (identity) {
        g_autoptr(GError) local = NULL;
        AvBarRecord *record = NULL;

        AvPoolDevice *dev = av_pool_find(pool, identity);

        records = g_ptr_array_new_with_free_func((GDestroyNotify)av_bar_record_free);
        if (av_bar_record_take(pool->state_dir, identity, 0, &record, &local)) {
            if (record)
                g_ptr_array_add(records, record);
        } else {
            g_ptr_array_add(problems, g_strdup(local->message));
            /* The sizes to go back to are lost: never handed out so. */
            if (g_error_matches(local, AV_ERROR, AV_ERROR_INVALID_INPUT) && dev &&
                (dev->state == AV_DEVICE_STATE_DIRTY || dev->state == AV_DEVICE_STATE_SCRUBBING)) {
                g_autofree char *reason = g_strdup_printf("its BAR sizes could not be put back after a scrub "
                                                          "that was cut short: %s", local->message);

                if (!av_pool_quarantine_unscrubbed(pool, dev, reason, error))
                    return FALSE;
                changed = TRUE;
            }
        }
    } else {
        records = av_bar_records_take_orphaned(pool->state_dir, problems);
    }
    for (guint i = 0; i < records->len; i++) {
        /* Taken over: removed or freed by the call. */
        AvBarRecord *record = g_ptr_array_steal_index(records, i--);

        if (!av_pool_bar_restore_one(pool, root, ops, record, by, &changed, &resume, notes, problems, error)) {
            av_bar_record_free(record);
            return FALSE;
        }
    }
    if (ret_changed)
        *ret_changed = *ret_changed || changed;
    if (ret_resume)
        *ret_resume = *ret_resume || resume;
    return TRUE;
}
