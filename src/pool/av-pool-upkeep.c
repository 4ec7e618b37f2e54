/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: putting right what processes that died left in the pool
 *, before anything else is done under the lock.
 *
 * A release that could not be done when its domain stopped used to strand
 * the domain's devices in use forever: its XML did not parse, the lock wait
 * timed out, or the hook was killed between its journal entries and its
 * save.  libvirt calls "release end" once.  So:
 *   - the hook leaves a release marker in the state dir before it waits for
 *     the lock (release-pending/HASH-RANDOM.json: the domain's UUID, when
 *     the XML gave one, and its name, which libvirt passes as argv[1]),
 *     holds the marker's flock(2) lock while it lives, and removes the
 *     marker once it has done the release itself; every holder of the pool's
 *     lock carries out the markers whose writers are gone (the lock free),
 *     and removes them once the pool is saved;
 *   - a device in use by a domain whose QEMU is gone (libvirt's pid file
 *     /run/libvirt/qemu/NAME.pid gone and no process holding the device's
 *     IOMMU group), for longer than a prepare takes to reach QEMU's start,
 *     is released too.
 * Released means dirty: the worker scrubs it; never straight to free. */
#include "config.h"

#include "av-pool-private.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-vfio.h"

#define AV_POOL_RELEASE_DIR "release-pending"
/* What a marker may weigh: it holds a UUID and a name. */
#define AV_POOL_MARKER_MAX 8192

/* See av-pool.h. */
gboolean
av_pool_release_device(AvPool *pool, AvPoolDevice *dev, const char *released_by, gboolean *ret_released,
                       GError **error)
{
    g_autoptr(json_t) extra = json_object();
    g_autofree char *quarantine = NULL;

    *ret_released = FALSE;
    json_object_set_new(extra, "released_by", json_string(released_by));
    if (dev->state == AV_DEVICE_STATE_IN_USE) {
        /* Held before the move is journalled: killed in between, a device
         * is still in use on disk, held, de-authorized or its mdev gone,
         * and the release is done again (a marker, a dead domain), never
         * dirty without it. */
        quarantine = av_pool_release_hold(pool, dev, extra);
        if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL, "transition", extra, error))
            return FALSE;
        /* Its group open in another process: never freed, the operator
         * looks at it (its scrub does not clear it). */
        if (quarantine) {
            g_autoptr(GError) local = NULL;

            if (av_pool_quarantine_unscrubbed(pool, dev, quarantine, &local))
                g_warning("device %s (%s) quarantined: %s", dev->identity, dev->address, quarantine);
            else
                g_warning("cannot quarantine %s: %s; it stays dirty", dev->identity, local->message);
        }
    } else if (dev->state == AV_DEVICE_STATE_MISSING && dev->state_before_missing == AV_DEVICE_STATE_IN_USE) {
        /* Gone from the host: when it comes back, it comes back dirty. */
        if (!av_pool_journal_device(pool, "released-while-missing", dev, extra, error))
            return FALSE;
        dev->state_before_missing = AV_DEVICE_STATE_DIRTY;
        dev->release_pending = TRUE;
        g_clear_pointer(&dev->in_use_boot_id, g_free);
        g_clear_pointer(&dev->programmed, av_programmed_free);
    } else {
        return TRUE;
    }
    *ret_released = TRUE;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_release_owner(AvPool *pool, const char *domain_uuid, const char *domain_name, const char *released_by,
                      GPtrArray *ret_released, GError **error)
{
    g_return_val_if_fail(domain_uuid || domain_name, FALSE);
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);
        gboolean released = FALSE;

        if (!dev->owner)
            continue;
        if (domain_uuid ? g_strcmp0(dev->owner->domain_uuid, domain_uuid) != 0
                        : g_strcmp0(dev->owner->domain_name, domain_name) != 0)
            continue;
        if (!av_pool_release_device(pool, dev, released_by, &released, error))
            return FALSE;
        if (released && ret_released)
            g_ptr_array_add(ret_released, dev);
    }
    return TRUE;
}

/* Adds @dev, released from the domain @domain for @why, to the
 * upkeep's list (see AvPoolUpkeep). */
static void
av_pool_upkeep_note_release(AvPoolUpkeep *upkeep, const AvPoolDevice *dev, const char *domain, const char *why)
{
    json_array_append_new(upkeep->released, json_pack("{s:s, s:o, s:o, s:s}", "identity", dev->identity, "address",
                                                      av_json_string_or_null(dev->address), "domain",
                                                      av_json_string_or_null(domain), "why", why));
}

/* --- release markers -------------------------------------------------------------- */

static char *
av_pool_marker_dir(const char *state_dir)
{
    return g_build_filename(state_dir, AV_POOL_RELEASE_DIR, NULL);
}

/* See av-pool-private.h. */
AvPoolMarker *
av_pool_marker_write(const char *dir, const char *key, json_t *content, GError **error)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, key, -1);
    /* One marker per call: two never share a file, so that removing one
     * never removes another. */
    g_autofree char *name = g_strdup_printf("%.32s-%08x%08x.json", hash, g_random_int(), g_random_int());
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *text = av_json_dump_compact(content);
    AvPoolMarker *marker;
    int fd;

    if (!av_file_ensure_dir(dir, 0700, error) ||
        (fd = av_file_write_atomic_held(path, text, strlen(text), 0600, error)) < 0)
        return NULL;
    marker = g_new0(AvPoolMarker, 1);
    marker->fd = fd;
    marker->path = g_steal_pointer(&path);
    return marker;
}

/* See av-pool-private.h. */
void
av_pool_marker_close(AvPoolMarker *marker, gboolean remove)
{
    if (!marker)
        return;
    if (remove)
        unlink(marker->path);
    close(marker->fd);
    g_free(marker->path);
    g_free(marker);
}

struct AvPoolReleaseMark {
    AvPoolMarker *marker;        /* its lock held while its writer lives */
};

/* See av-pool.h. */
AvPoolReleaseMark *
av_pool_release_mark(const char *state_dir, const char *domain_uuid, const char *domain_name, GError **error)
{
    g_autofree char *dir = av_pool_marker_dir(state_dir);
    g_autofree char *key = g_strdup_printf("%s\n%s", domain_uuid ? domain_uuid : "", domain_name);
    g_autoptr(json_t) content = json_object();
    AvPoolReleaseMark *mark;
    AvPoolMarker *marker;

    g_return_val_if_fail(domain_name, NULL);
    json_object_set_new(content, "domain_uuid", av_json_string_or_null(domain_uuid));
    json_object_set_new(content, "domain_name", json_string(domain_name));
    json_object_set_new(content, "since", json_integer(av_pool_now()));
    marker = av_pool_marker_write(dir, key, content, error);
    if (!marker) {
        g_prefix_error(error, "cannot leave the release of domain '%s' for later: ", domain_name);
        return NULL;
    }
    mark = g_new0(AvPoolReleaseMark, 1);
    mark->marker = marker;
    return mark;
}

/* See av-pool.h. */
void
av_pool_release_mark_done(AvPoolReleaseMark *mark)
{
    if (mark)
        av_pool_marker_close(mark->marker, TRUE);
    g_free(mark);
}

/* See av-pool.h. */
void
av_pool_release_mark_free(AvPoolReleaseMark *mark)
{
    if (mark)
        av_pool_marker_close(mark->marker, FALSE);
    g_free(mark);
}

/* Reads the marker open on @fd: its UUID (NULL when the XML gave none) and
 * name.  FALSE when it is not a marker. */
static gboolean
av_pool_marker_read(int fd, char **ret_uuid, char **ret_name)
{
    g_autofree char *data = NULL;
    g_autoptr(json_t) marker = NULL;
    gsize len = 0;
    json_t *uuid, *name;

    if (av_file_read_all(fd, &data, &len) < 0 || len > AV_POOL_MARKER_MAX)
        return FALSE;
    marker = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    uuid = json_object_get(marker, "domain_uuid");
    name = json_object_get(marker, "domain_name");
    if (!json_is_object(marker) || json_object_size(marker) != 3 || !json_is_integer(json_object_get(marker, "since")) ||
        !(json_is_null(uuid) || (json_is_string(uuid) && av_uuid_is_valid(json_string_value(uuid)))) ||
        !json_is_string(name) || json_string_length(name) == 0 ||
        strlen(json_string_value(name)) != json_string_length(name))
        return FALSE;
    *ret_uuid = json_is_string(uuid) ? g_strdup(json_string_value(uuid)) : NULL;
    *ret_name = g_strdup(json_string_value(name));
    return TRUE;
}

/* Carries out the release markers of the state dir (see above) whose
 * writers are gone: a hook that still lives (it holds its marker's lock)
 * is waiting for the pool's lock to do its release itself. */
static gboolean
av_pool_upkeep_markers(AvPool *pool, AvPoolUpkeep *upkeep, GError **error)
{
    g_autofree char *dir = av_pool_marker_dir(pool->state_dir);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *entry;

    while (d && (entry = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, entry, NULL);
        g_autofree char *uuid = NULL;
        g_autofree char *name = NULL;
        g_autoptr(GPtrArray) released = g_ptr_array_new();
        gboolean ok;
        int fd = -1, r;

        r = av_file_open_unheld(path, &fd);
        if (r == 1)
            continue;    /* its writer lives, and is still writing it or will carry it out */
        if (!g_str_has_suffix(entry, ".json")) {
            /* The temporary file of a writer that died before its marker
             * was in place (the domain's devices are then released as the
             * devices of a domain whose QEMU is gone), or not ours. */
            if (r == 0 && strstr(entry, ".json.tmp."))
                g_ptr_array_add(upkeep->markers, g_steal_pointer(&path));
            if (fd >= 0)
                close(fd);
            continue;
        }
        ok = r == 0 && av_pool_marker_read(fd, &uuid, &name);
        if (fd >= 0)
            close(fd);
        if (!ok) {
            g_ptr_array_add(upkeep->problems, g_strdup_printf("removed '%s', which is not a release marker", path));
            g_ptr_array_add(upkeep->markers, g_steal_pointer(&path));
            continue;
        }
        if (!av_pool_release_owner(pool, uuid, name, "release-marker", released, error))
            return FALSE;
        for (guint i = 0; i < released->len; i++) {
            const AvPoolDevice *dev = g_ptr_array_index(released, i);

            g_ptr_array_add(upkeep->notes, g_strdup_printf("released %s (%s) of domain '%s', whose release was "
                                                           "left for later: dirty, to be scrubbed",
                                                           dev->address ? dev->address : "-", dev->identity, name));
            av_pool_upkeep_note_release(upkeep, dev, name, "release-marker");
        }
        upkeep->changed = upkeep->changed || released->len > 0;
        upkeep->dirtied = upkeep->dirtied || released->len > 0;
        g_ptr_array_add(upkeep->markers, g_steal_pointer(&path));
    }
    return TRUE;
}

/* --- domains whose QEMU is gone ---------------------------------------------------- */

/* TRUE when @name can be the name of libvirt's pid file: not empty, no '/',
 * not "." or "..", at most NAME_MAX - 4 bytes. */
static gboolean
av_pool_pidfile_name_ok(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           strlen(name) <= 251;
}

/* The IOMMU group of the mdev @uuid (its iommu_group link), or -1. */
static int
av_pool_mdev_group(const AvRoot *root, const char *uuid)
{
    g_autofree char *link = av_sys_path("bus/mdev/devices/%s/iommu_group", uuid);
    g_autofree char *name = NULL;
    guint64 group = 0;

    if (!av_uuid_is_valid(uuid) || av_root_link_name(root, link, &name) < 0 ||
        !g_ascii_string_to_unsigned(name, 10, 0, G_MAXINT, &group, NULL))
        return -1;
    return (int)group;
}

/* av_pool_owner_is_gone(), and with @before_boot (the device has been in
 * use since an earlier boot, av_pool_in_use_before_boot()), a
 * missing libvirt state dir counts as no pid file: the QEMU that held it
 * died with the previous boot, and libvirt of this boot has not started
 * yet (accelvirt-reconcile.service runs before it).  A pid file or a
 * process holding the device's IOMMU group still says it may run. */
static gboolean
av_pool_owner_gone(const AvRoot *root, const char *state_dir, const AvPoolDevice *dev, gboolean before_boot,
                   char **ret_why)
{
    g_autofree char *rundir = NULL;
    g_autofree char *pidfile = NULL;
    g_autofree char *holder = NULL;
    int group = dev->iommu_group;

    if (!dev->owner || !av_pool_pidfile_name_ok(dev->owner->domain_name))
        return FALSE;
    /* No libvirt state dir at all (not started yet, another layout): a
     * missing pid file says nothing, but for a device used before this boot. */
    rundir = av_run_path("libvirt/qemu");
    if (!before_boot && !av_root_exists(root, rundir))
        return FALSE;
    pidfile = av_run_path("libvirt/qemu/%s.pid", dev->owner->domain_name);
    if (av_root_exists(root, pidfile))
        return FALSE;
    if (dev->kind == AV_DEVICE_KIND_MDEV)
        group = av_pool_mdev_group(root, dev->identity + strlen("mdev:"));
    if (group >= 0 && (holder = av_vfio_group_holder_full(root, state_dir, group)))
        return FALSE;
    if (ret_why && before_boot)
        *ret_why = g_strdup_printf("in use since an earlier boot, and no pid file %s nor a process holding the "
                                   "device's IOMMU group says it runs now", pidfile);
    else if (ret_why)
        *ret_why = g_strdup_printf("libvirt has no pid file %s for domain '%s'%s", pidfile, dev->owner->domain_name,
                                   group >= 0 ? " and no process holds the device's IOMMU group" : "");
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_owner_is_gone(const AvRoot *root, const char *state_dir, const AvPoolDevice *dev, char **ret_why)
{
    return av_pool_owner_gone(root, state_dir, dev, FALSE, ret_why);
}

/* TRUE when @dev went in use in an earlier boot than the running one.
 * The boot ids decide (in_use_boot_id against pool->boot_id), never the
 * clock: btime of /proc/stat is the wall clock less the uptime, and moves
 * when the clock is stepped (chrony stepping forward after an early
 * autostart would make a prepare of this boot look older than btime).  A
 * device without a recorded boot id (a pool written before the ids were
 * recorded) counts only when its state_since is earlier than @btime by
 * more than the grace, a step no clock correction at boot makes; no
 * running boot id (a tree without one): never. */
static gboolean
av_pool_in_use_before_boot(const AvPool *pool, const AvPoolDevice *dev, gint64 btime)
{
    if (dev->in_use_boot_id)
        return pool->boot_id && strcmp(dev->in_use_boot_id, pool->boot_id) != 0;
    return btime > 0 && dev->state_since < btime - AV_POOL_DEAD_GRACE_S;
}

/* Releases the devices in use, for longer than AV_POOL_DEAD_GRACE_S, by
 * domains whose QEMU is gone (av_pool_owner_is_gone()), and at once those
 * in use since an earlier boot (av_pool_in_use_before_boot()) whose QEMU
 * nothing says runs (av_pool_owner_gone()): no QEMU outlives a reboot.
 * Their holds (av-hold.h) are taken by the worker this starts
 * (upkeep->dirtied): its sweep, av_pool_holds_sync(), runs first thing. */
static gboolean
av_pool_upkeep_dead(AvPool *pool, const AvRoot *root, AvPoolUpkeep *upkeep, GError **error)
{
    gint64 now = av_pool_now();
    gint64 btime = 0;
    g_autoptr(GPtrArray) dead = g_ptr_array_new_with_free_func((GDestroyNotify)av_owner_free);
    g_autoptr(GPtrArray) boot = g_ptr_array_new();    /* per dead owner: released for the previous boot */

    if (av_root_boot_time(root, &btime) < 0)
        btime = 0;    /* no /proc/stat (a fake tree): the grace alone */
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);
        g_autofree char *why = NULL;
        gboolean known = FALSE;
        gboolean before_boot = FALSE;

        if (dev->state != AV_DEVICE_STATE_IN_USE)
            continue;
        /* The usual rule first ("dead-domain"); the boot rule
         * ("previous-boot") for what it alone finds: no libvirt state dir
         * yet (before libvirtd), or within the grace. */
        if (now - dev->state_since < AV_POOL_DEAD_GRACE_S ||
            !av_pool_owner_gone(root, pool->state_dir, dev, FALSE, &why)) {
            before_boot = av_pool_in_use_before_boot(pool, dev, btime);
            if (!before_boot || !av_pool_owner_gone(root, pool->state_dir, dev, TRUE, &why))
                continue;
        }
        for (guint j = 0; j < dead->len && !known; j++)
            known = av_owner_compatible(g_ptr_array_index(dead, j), dev->owner);
        if (!known) {
            g_ptr_array_add(dead, av_owner_copy(dev->owner));
            g_ptr_array_add(boot, GINT_TO_POINTER(before_boot));
            g_ptr_array_add(upkeep->notes, g_strdup_printf("domain '%s' is gone (%s): releasing its devices",
                                                           dev->owner->domain_name, why));
        }
    }
    for (guint i = 0; i < dead->len; i++) {
        const AvOwner *owner = g_ptr_array_index(dead, i);
        g_autoptr(GPtrArray) released = g_ptr_array_new();

        const char *why = GPOINTER_TO_INT(g_ptr_array_index(boot, i)) ? "previous-boot" : "dead-domain";

        if (!av_pool_release_owner(pool, owner->domain_uuid, owner->domain_name, why, released, error))
            return FALSE;
        for (guint j = 0; j < released->len; j++) {
            const AvPoolDevice *dev = g_ptr_array_index(released, j);

            g_ptr_array_add(upkeep->notes, g_strdup_printf("released %s (%s): dirty, to be scrubbed",
                                                           dev->address ? dev->address : "-", dev->identity));
            av_pool_upkeep_note_release(upkeep, dev, owner->domain_name, why);
        }
        upkeep->changed = upkeep->changed || released->len > 0;
        upkeep->dirtied = upkeep->dirtied || released->len > 0;
    }
    return TRUE;
}

/* --- all of it --------------------------------------------------------------------- */

/* See av-pool.h. */
void
av_pool_upkeep_free(AvPoolUpkeep *upkeep)
{
    if (!upkeep)
        return;
    g_ptr_array_unref(upkeep->notes);
    g_ptr_array_unref(upkeep->problems);
    g_ptr_array_unref(upkeep->markers);
    json_decref(upkeep->released);
    g_free(upkeep);
}

/* See av-pool.h.  Caller frees. */
AvPoolUpkeep *
av_pool_upkeep(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error)
{
    g_autoptr(AvPoolUpkeep) upkeep = g_new0(AvPoolUpkeep, 1);
    g_autoptr(GError) local = NULL;
    gboolean changed = FALSE;

    upkeep->notes = g_ptr_array_new_with_free_func(g_free);
    upkeep->problems = g_ptr_array_new_with_free_func(g_free);
    upkeep->markers = g_ptr_array_new_with_free_func(g_free);
    upkeep->released = json_array();
    g_clear_pointer(&pool->boot_id, g_free);
    /* Its releases hold what they release on this host. */
    av_pool_set_kernel(pool, root, ops);
    /* None (a tree without one): devices going in use record no boot. */
    (void)av_root_boot_id(root, &pool->boot_id);
    if (pool->mode != AV_POOL_WRITE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot put the pool in '%s' right: it was opened for reading "
                    "only", pool->state_dir);
        return NULL;
    }
    /* A record that cannot be undone now is tried again by the next call;
     * nothing below depends on it. */
    if (!av_pool_intents_undo(pool, root, ops, &changed, &local))
        g_ptr_array_add(upkeep->problems, g_strdup(local->message));
    else if (changed)
        g_ptr_array_add(upkeep->notes, g_strdup("undid what a prepare that died had done to the host (see the "
                                                "journal's \"rolled-back\" entries)"));
    upkeep->changed = changed;
    /* BARs left grown by a scrub killed mid-resize: back to their sizes. */
    if (!av_pool_bar_sizes_restore(pool, root, ops, NULL, "upkeep", &upkeep->changed, &upkeep->dirtied,
                                   upkeep->notes, upkeep->problems, error))
        return NULL;
    if (!av_pool_upkeep_markers(pool, upkeep, error) || !av_pool_upkeep_dead(pool, root, upkeep, error))
        return NULL;
    return g_steal_pointer(&upkeep);
}

/* See av-pool.h. */
void
av_pool_upkeep_finish(AvPoolUpkeep *upkeep)
{
    for (guint i = 0; upkeep && i < upkeep->markers->len; i++)
        unlink(g_ptr_array_index(upkeep->markers, i));
}
