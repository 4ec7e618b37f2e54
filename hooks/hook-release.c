/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the hook's "release end" (hook.h), which libvirt calls once a
 * domain stopped and its resources were released, also after a failed
 * prepare: the devices the domain owned become dirty and wait for their
 * scrub, and the scrub worker is started.  Their profiles' on_release
 * commands are the worker's (the scrub job runs the one the release left
 * owed, release_pending, before any scrub step, as for every release):
 * libvirt waits for this hook, and every other domain's start and stop for
 * the pool's lock. */
#include "config.h"

#include "hook.h"

#include <string.h>
#include <syslog.h>

#include "util/av-error.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

/* "release end": every in-use device this domain owns becomes dirty, the
 * mdevs accelvirt created for it are removed, and the scrub worker is
 * started, detached; the hook returns at once.  Devices the domain only
 * claimed stay claimed; devices it does not own are not touched (release is
 * also called after a refused prepare, with devices the domain never got).
 * libvirt calls it once, so nothing may make it lose a release: a marker is left before the lock is waited for, and whichever
 * accelvirt holds the lock next carries it out if this one cannot (a lock
 * wait that times out, a kill: the marker's lock then gone); with @domain_uuid NULL (the XML did not
 * parse) the domain is found by the name libvirt gives. */
int
av_hook_release(const AvHookConfig *config, const char *domain_uuid, const char *domain_name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) released = g_ptr_array_new();
    g_autoptr(GString) summary = g_string_new(NULL);
    g_autofree char *pool_path = g_build_filename(config->state_dir, "pool.json", NULL);
    g_autofree char *quoted = av_domain_quote(domain_name);
    g_autoptr(AvPoolReleaseMark) mark = NULL;

    /* No pool: the domain owns nothing, and no state is created for it. */
    if (!g_file_test(pool_path, G_FILE_TEST_EXISTS))
        return 0;
    mark = av_pool_release_mark(config->state_dir, domain_uuid, domain_name, &error);
    if (!mark) {
        av_hook_log(LOG_ERR, "%s", error->message);
        g_clear_error(&error);
    }
    av_hook_test_stop(config, "release-marked");
    /* While this hook lives, the marker is its own: others leave it be. */
    pool = av_hook_pool_open(config, &error);
    if (!pool)
        return av_hook_refusef("cannot release the devices of domain '%s' now: %s; the release is left for the next "
                               "accelvirt call (a release marker in the state dir)", quoted, error->message);
    if (!av_pool_release_owner(pool, domain_uuid, domain_name, "hook", released, &error))
        return av_hook_refusef("cannot release the devices of domain '%s': %s", quoted, error->message);
    av_hook_test_stop(config, "release-journalled");
    /* Each released device's IOMMU group was held as it went dirty
     * (av_pool_release_device()), before the save below.  A device this
     * domain got behind accelvirt's back (dirty or quarantined, another's)
     * and left now is held too: its group is free again (a quick try,
     * EBUSY is not named: the work of the hook grows with the domain). */
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        g_autoptr(GError) ignored = NULL;
        g_autofree char *driver = NULL;
        gboolean now = g_ptr_array_find(released, dev, NULL);
        gboolean mine = (dev->state == AV_DEVICE_STATE_DIRTY || now) && dev->owner &&
                        (domain_uuid ? g_strcmp0(dev->owner->domain_uuid, domain_uuid)
                                     : g_strcmp0(dev->owner->domain_name, domain_name)) == 0;

        if (mine) {
            g_autofree char *what = av_hook_describe_device(dev);

            g_string_append_printf(summary, "%s%s", summary->len ? ", " : "", what);
        }
        if (now || !av_pool_device_wants_hold(dev) || dev->state == AV_DEVICE_STATE_SCRUBBING)
            continue;
        driver = av_vfio_current_driver(config->root, dev->address);
        if (av_vfio_device_is_vfio(config->root, dev->address, driver))
            av_hold_take_quick(config->root, config->ops, config->state_dir, dev->iommu_group, dev->address,
                               &ignored);
    }
    if (released->len > 0 && !av_pool_save(pool, &error))
        return av_hook_refusef("cannot release the devices of domain '%s': %s", quoted, error->message);
    av_pool_release_mark_done(g_steal_pointer(&mark));
    /* The mdevs accelvirt created were removed as they went dirty
     * (av_pool_release_device()); one still there is the worker's to remove,
     * or to quarantine, and its parent gets no new mdev meanwhile. */
    for (guint i = 0; i < released->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(released, i);
        g_autofree char *dir = NULL;

        if (dev->kind != AV_DEVICE_KIND_MDEV || !dev->created)
            continue;
        dir = av_sys_path("bus/mdev/devices/%s", dev->identity + strlen("mdev:"));
        if (av_root_exists(config->root, dir))
            av_hook_log(LOG_ERR, "cannot remove mdev %s at its release; the worker tries again",
                        dev->identity + strlen("mdev:"));
        else
            av_hook_log(LOG_INFO, "removed mdev %s", dev->identity + strlen("mdev:"));
    }
    if (summary->len > 0)
        av_hook_log(LOG_INFO, "release: dirty, waiting for their scrub: %s", summary->str);
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if (dev->state == AV_DEVICE_STATE_DIRTY || dev->state == AV_DEVICE_STATE_SCRUBBING)
            av_hook_want_worker();
    }
    return 0;
}
