/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what a reboot undid that reconcile puts back.
 *
 * After a reboot the kernel probes every device with its host driver:
 * the devices of "restore_driver": "keep-vfio" profiles, which stay on
 * vfio-pci while free or quarantined, are back on their host drivers.
 * `accelvirt reconcile` (accelvirt-reconcile.service, before libvirt's
 * daemons) binds them, with the other endpoints of their IOMMU groups,
 * to vfio-pci again: the primitive is here, the choice of devices (which
 * reads the policies) in src/cli/cli-reconcile.c. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-vfio.h"

/* See av-pool.h. */
gboolean
av_pool_rebind_vfio(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, AvPoolDevice *dev,
                    const GPtrArray *members, const char *vfio_driver, json_t **ret_bound, char **ret_failure,
                    GError **error)
{
    g_autoptr(json_t) bound = json_array();
    g_autoptr(json_t) extra = json_object();
    g_autoptr(GError) local = NULL;
    size_t i;
    json_t *e;

    g_return_val_if_fail(dev->state == AV_DEVICE_STATE_FREE || dev->state == AV_DEVICE_STATE_QUARANTINED, FALSE);
    for (guint m = 0; m < members->len; m++) {
        const char *address = g_ptr_array_index(members, m);
        g_autofree char *was = av_vfio_current_driver(root, address);
        g_autofree char *original = NULL;

        if (av_pci_driver_is_vfio(was))
            continue;
        /* @dev itself per its profile's choice, plain vfio-pci when
         * quarantined (its probe asks nothing of a device that failed its
         * scrub); the rest of its group as the kernel offers. */
        g_autofree char *driver =
            av_vfio_choose_driver_or_plain(root, address,
                                           dev->state == AV_DEVICE_STATE_QUARANTINED ? "vfio-pci" :
                                           g_strcmp0(address, dev->address) == 0 ? vfio_driver : NULL,
                                           NULL);

        if (!av_vfio_bind(root, ops, address, driver, &original, &local)) {
            /* The group goes back whole to where it was: half a group on
             * vfio-pci serves nobody. */
            json_array_foreach(bound, i, e)
                av_vfio_restore(root, ops, json_string_value(json_object_get(e, "address")),
                                json_string_value(json_object_get(e, "driver")), NULL);
            json_object_set_new(extra, "failed", json_string(address));
            json_object_set_new(extra, "error", json_string(local->message));
            if (!av_pool_journal_device(pool, "vfio-rebind-failed", dev, extra, error))
                return FALSE;
            *ret_failure = g_strdup(local->message);
            return TRUE;
        }
        json_array_append_new(bound, json_pack("{s:s, s:o}", "address", address, "driver",
                                               av_json_string_or_null(original)));
    }
    if (json_array_size(bound) > 0) {
        json_object_set(extra, "bound", bound);
        json_object_set_new(extra, "by", json_string("reconcile"));
        if (!av_pool_journal_device(pool, "vfio-rebound", dev, extra, error))
            return FALSE;
    }
    *ret_bound = g_steal_pointer(&bound);
    return TRUE;
}
