/* accelvirt: the scrub worker (accelvirt-worker only: the hook starts it with
 * av_hook_spawn_worker(), in hook-common.c, and links none of this).
 *
 * The hook must return at once (libvirtd waits for it, docs/hooks.rst), and
 * a scrub may take minutes: "release end" marks the devices dirty and starts
 * accelvirt-worker detached from libvirtd.  The worker scrubs one device at
 * a time without holding the pool lock during the scrub, so that hooks of
 * other domains keep going; a per-device lock keeps two workers off one
 * device. */
#include "config.h"

#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "scrub/av-program.h"
#include "scrub/av-scrub.h"
#include "nova/av-placement-sync.h"
#include "pool/av-pool-placement.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "util/av-spawn.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

/* --- the worker ---------------------------------------------------------------------- */

/* What the worker needs of a device while the pool is unlocked (copies). */
typedef struct {
    char *identity;
    AvDeviceKind kind;
    char *address;
    char *profile;
    int iommu_group;
    char *rom_sha256;            /* enrolled ROM hash, or NULL */
    char *scrub_token;           /* the pool's token for this scrub (av:scrub of a scrub domain) */
    char *scrub_domain;          /* and the UUID its scrub domain must have */
    AvOwner *owner;              /* the domain that had it before its release, or NULL */
    char *original_driver;       /* PCI: its host driver as the pool knows it, or NULL */
    gboolean release_pending;    /* its profile's on_release is owed (the pool's release_pending) */
    char *release_bitstream;     /* with it: the SHA-256 the domain's placement record said the device must
                                  * hold (the command's bitstream variables), or NULL */
    char *since;                 /* when the scrub began (ISO 8601 UTC) */
} AvScrubJob;

static void
av_scrub_job_free(AvScrubJob *job)
{
    if (!job)
        return;
    g_free(job->identity);
    g_free(job->address);
    g_free(job->profile);
    g_free(job->rom_sha256);
    g_free(job->scrub_token);
    g_free(job->scrub_domain);
    av_owner_free(job->owner);
    g_free(job->original_driver);
    g_free(job->release_bitstream);
    g_free(job->since);
    g_free(job);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvScrubJob, av_scrub_job_free)

/* Now as ISO 8601 UTC, to the second.  Caller frees. */
static char *
av_worker_now_iso(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

/* Under the pool lock and @dev's scrub lock: puts back the BAR sizes of
 * @dev recorded by a scrub that was killed mid-resize after the pool's
 * upkeep looked (av_pool_bar_sizes_restore()), logging what it did.  A
 * device whose sizes cannot be put back is quarantined, and the pool saved.
 * FALSE when the journal or the pool cannot be written. */
static gboolean
av_worker_bar_sizes(const AvHookConfig *config, AvPool *pool, AvPoolDevice *dev, GError **error)
{
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
    gboolean changed = FALSE, resume = FALSE;

    if (dev->kind != AV_DEVICE_KIND_PCI || !av_bar_record_exists(config->state_dir, dev->identity))
        return TRUE;
    if (!av_pool_bar_sizes_restore(pool, config->root, config->ops, dev->identity, "worker", &changed, &resume,
                                   notes, problems, error))
        return FALSE;
    for (guint i = 0; i < notes->len; i++)
        av_hook_log(LOG_WARNING, "%s", (const char *)g_ptr_array_index(notes, i));
    for (guint i = 0; i < problems->len; i++)
        av_hook_log(LOG_ERR, "%s", (const char *)g_ptr_array_index(problems, i));
    return !changed || av_pool_save(pool, error);
}

/* Under the pool lock: picks the next device to scrub (dirty, or scrubbing
 * with its per-device lock free: its worker died) that @done does not hold,
 * takes its per-device lock, moves it to scrubbing and saves.  Returns the
 * job and the lock, or NULL when there is nothing left. */
static AvScrubJob *
av_worker_pick(const AvHookConfig *config, GHashTable *done, AvLock **ret_lock, GError **error)
{
    g_autoptr(AvPool) pool = NULL;

    pool = av_hook_pool_open(config, error);
    if (!pool)
        return NULL;
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        g_autoptr(AvLock) lock = NULL;
        g_autoptr(AvScrubJob) job = NULL;
        g_autofree char *token = NULL;

        if (dev->state != AV_DEVICE_STATE_DIRTY && dev->state != AV_DEVICE_STATE_SCRUBBING)
            continue;
        if (g_hash_table_contains(done, dev->identity))
            continue;
        lock = av_scrub_lock_take(config->state_dir, dev->identity, NULL);
        if (!lock)
            continue;    /* another worker scrubs it */
        /* BARs that a scrub killed mid-resize since the upkeep above left
         * grown: back first (or the device is quarantined). */
        if (!av_worker_bar_sizes(config, pool, dev, error))
            return NULL;
        if ((dev->state != AV_DEVICE_STATE_DIRTY && dev->state != AV_DEVICE_STATE_SCRUBBING) ||
            av_bar_record_exists(config->state_dir, dev->identity))
            continue;    /* quarantined, or its record is another process's now */
        /* A fresh token for this scrub: a "vm" step's scrub domain carries
         * it, and the hook hands the device to that domain only.  Made
         * before the move, which is journalled at once. */
        token = av_scrub_token_random(error);
        if (!token)
            return NULL;
        if (dev->state == AV_DEVICE_STATE_DIRTY) {
            if (!av_pool_transition(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL, error))
                return NULL;
        } else {
            av_hook_log(LOG_WARNING, "device %s was left scrubbing by a worker that is gone; scrubbing it again "
                        "from its first step, held (quarantined if its group cannot be held)", dev->identity);
        }
        if (!av_pool_scrub_token_set(dev, token, error) || !av_pool_save(pool, error))
            return NULL;
        job = g_new0(AvScrubJob, 1);
        job->identity = g_strdup(dev->identity);
        job->kind = dev->kind;
        job->address = g_strdup(dev->address);
        job->profile = g_strdup(dev->profile);
        job->iommu_group = dev->iommu_group;
        job->rom_sha256 = g_strdup(dev->rom_sha256);
        job->scrub_token = g_strdup(dev->scrub_token);
        job->scrub_domain = g_strdup(dev->scrub_domain);
        /* The owner is kept through in-use -> dirty -> scrubbing, and
         * cleared only when the device is free: the certificate names it. */
        job->owner = av_owner_copy(dev->owner);
        job->original_driver = g_strdup(dev->original_driver);
        job->release_pending = dev->release_pending;
        if (dev->release_pending && dev->owner && dev->owner->domain_uuid) {
            const AvPoolPlacement *record = av_pool_placement_find(pool, dev->owner->domain_uuid);

            for (guint k = 0; record && k < record->items->len && !job->release_bitstream; k++) {
                const AvPlacedItem *item = g_ptr_array_index(record->items, k);

                if (item->bitstream && g_strcmp0(item->identity, dev->identity) == 0)
                    job->release_bitstream = g_strdup(item->bitstream);
            }
        }
        job->since = av_worker_now_iso();
        *ret_lock = g_steal_pointer(&lock);
        return g_steal_pointer(&job);
    }
    return NULL;
}

/* After the VF @address was scrubbed and freed: when its PF's
 * profile says "vfs_shrink" and every VF of the PF and the PF are free
 * (av_pool_vf_shrink_target()), sets sriov_numvfs back to the profile's
 * count (0 on demand), journalled, and reconciles the pool with the host
 * without those VFs: their records stay, missing, with their identities.
 * Saves the pool; failures are logged (the VFs stay, free). */
static void
av_worker_shrink(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, const AvHost *host,
                 const char *address)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvHost) after = NULL;
    g_autoptr(AvHost) now = NULL;
    const AvPciDevice *vf = av_host_find_pci(host, address);
    const AvPciDevice *pf = vf && vf->physfn ? av_host_find_pci(host, vf->physfn) : NULL;
    gboolean changed = FALSE;
    guint count;

    if (!pf)
        return;
    /* @host was scanned before the lock was taken: the PF and its VFs are
     * read again under it, so that the count and every VF are what the
     * kernel has now. */
    now = av_host_scan_devices(config->root, (const char *const[]){ pf->address, NULL }, FALSE, &error);
    if (!now) {
        av_hook_log(LOG_ERR, "cannot read PF %s again before shrinking its VFs: %s", pf->address, error->message);
        return;
    }
    pf = av_host_find_pci(now, pf->address);
    if (!pf || !av_pool_vf_shrink_target(pool, config->root, now, policy, pf->address, &count))
        return;
    if (!av_pool_vf_set_count(pool, config->root, config->ops, pf->address,
                              av_policy_match_sriov_pf(policy, pf)->name, pf->sriov_numvfs, count, "worker", &error)) {
        av_hook_log(LOG_ERR, "cannot shrink the VFs of PF %s: %s", pf->address, error->message);
        return;
    }
    av_hook_log(LOG_INFO, "shrank the VFs of PF %s: sriov_numvfs %u -> %u", pf->address, pf->sriov_numvfs, count);
    after = av_host_scan(config->root, &error);
    if (!after || !av_pool_reconcile(pool, after, policy, &changed, &error) || !av_pool_save(pool, &error))
        av_hook_log(LOG_ERR, "cannot record the VFs of PF %s that are gone: %s; the next scan does", pf->address,
                    error->message);
}

/* When no device is left to scrub: the shrink of every PF whose VFs are
 * all free again (av_worker_shrink()), for a worker killed after it freed
 * the last VF and before it shrank the PF.  Scans only the free VFs of
 * "vfs_shrink" profiles, under the pool's lock. */
static void
av_worker_shrink_all(const AvHookConfig *config, const AvPolicy *policy)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GPtrArray) vfs = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GHashTable) pfs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    gboolean any = FALSE;

    for (guint i = 0; i < policy->profiles->len && !any; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        any = p->attach == AV_ATTACH_SRIOV_VF && p->vfs_shrink;
    }
    if (!any)
        return;
    pool = av_hook_pool_open(config, &error);
    if (!pool) {
        av_hook_log(LOG_ERR, "worker: %s", error->message);
        return;
    }
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        const AvProfile *p = dev->profile ? av_policy_find(policy, dev->profile) : NULL;

        if (dev->kind == AV_DEVICE_KIND_PCI && dev->state == AV_DEVICE_STATE_FREE && dev->address && p &&
            p->attach == AV_ATTACH_SRIOV_VF && p->vfs_shrink)
            g_ptr_array_add(vfs, g_strdup(dev->address));
    }
    if (vfs->len == 0)
        return;
    g_ptr_array_add(vfs, NULL);
    host = av_host_scan_devices(config->root, (const char *const *)vfs->pdata, FALSE, &error);
    if (!host) {
        av_hook_log(LOG_ERR, "worker: cannot read the VFs to shrink: %s", error->message);
        return;
    }
    for (guint i = 0; i + 1 < vfs->len; i++) {
        const char *address = g_ptr_array_index(vfs, i);
        const AvPciDevice *vf = av_host_find_pci(host, address);

        if (!vf || !vf->physfn || g_hash_table_contains(pfs, vf->physfn))
            continue;
        g_hash_table_add(pfs, g_strdup(vf->physfn));
        av_worker_shrink(config, policy, pool, host, address);
    }
}

/* Brings the kernel-enforced holds up to date with @pool
 * (av_pool_holds_sync()), logging what it could not do.  Every path that
 * makes devices dirty outside the hook (`accelvirt release`, the upkeep's
 * releases of dead domains) ends in this worker, so this sweep takes their
 * holds. */
static void
av_worker_sync_holds(const AvHookConfig *config, AvPool *pool)
{
    g_autoptr(GError) error = NULL;

    if (!av_pool_holds_sync(pool, config->root, config->ops, &error))
        av_hook_log(LOG_ERR, "%s", error->message);
}

/* Before the steps of the PCI device of @job: says when it is scrubbed
 * without a hold of its IOMMU group (off vfio-pci: a profile whose steps
 * do not need it there).  On vfio-pci, av_scrub_run() holds the group
 * before the first step (a hold the hook took is kept; one that is gone,
 * a worker killed after dropping it for a "vm" step, is taken again and
 * the whole scrub runs from its first step) and fails the scrub, so that
 * the device is quarantined, when it cannot: a group open in another
 * process (someone got the device since its release), or any other reason
 * (no step ever runs unheld). */
static void
av_worker_hold_note(const AvHookConfig *config, const AvScrubJob *job)
{
    g_autofree char *driver = NULL;

    if (job->kind != AV_DEVICE_KIND_PCI || !job->address || job->iommu_group < 0)
        return;
    driver = av_vfio_current_driver(config->root, job->address);
    if (!av_vfio_device_is_vfio(config->root, job->address, driver))
        av_hook_log(LOG_INFO, "scrubbing %s on %s, without a hold of its IOMMU group (no step needs vfio-pci)",
                    job->address, driver ? driver : "no driver");
}

/* The driver command of @point of @profile for the device of @job, with
 * the domain that had it (av_driver_run()). */
static gboolean
av_worker_driver(const AvHookConfig *config, const AvProfile *profile, const AvScrubJob *job, AvDriverPoint point,
                 const AvBitstream *bitstream, json_t **ret_report, GError **error)
{
    AvProgramTarget target = { .root = config->root, .state_dir = config->state_dir, .profile = profile,
                               .address = job->address, .identity = job->identity,
                               .domain_name = job->owner ? job->owner->domain_name : NULL,
                               .domain_uuid = job->owner ? job->owner->domain_uuid : NULL, .group_fd = -1 };

    return av_driver_run(&target, point, bitstream, ret_report, error);
}

/* After a scrub that passed, before the device may be freed: the on_free
 * driver command of @profile (av_driver_run()), without the pool
 * lock (it may take minutes), for the device of @job, with the domain that
 * had it.  Its report goes to *ret_report (caller frees; NULL when no
 * command ran), for the journal's "driver" event.  FALSE with @error when
 * it failed: the device is quarantined. */
static gboolean
av_worker_on_free(const AvHookConfig *config, const AvProfile *profile, const AvScrubJob *job, json_t *scrub_report,
                  json_t **ret_report, GError **error)
{
    /* What the scrub's program-base put in it, for the command's variables. */
    g_autoptr(AvProgrammed) base = av_scrub_report_programmed(scrub_report, "scrub");
    g_autoptr(AvBitstream) bitstream = base ? av_bitstream_lookup(config->state_dir, base->sha256, NULL) : NULL;

    return av_worker_driver(config, profile, job, AV_DRIVER_ON_FREE, bitstream, ret_report, error);
}

/* Scrubs one device: the profile's steps without the pool lock, then under
 * it the driver restore and the move to free or quarantined, and the scrub
 * certificate in the journal.  A PCI device that is not on vfio-pci when a
 * step needs it there (a managed='yes' hostdev: libvirt gave it back to its
 * host driver at release, docs/design.md) is bound to vfio-pci first; it goes
 * back to its driver after a scrub that succeeded as the profile's
 * restore_driver says, and stays on vfio-pci when the scrub failed. */
static void
av_worker_scrub(const AvHookConfig *config, const AvPolicy *policy, const AvScrubJob *job)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) failure = NULL;
    g_autoptr(json_t) report = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    gboolean reconciled = FALSE;
    g_autoptr(json_t) fields = json_object();
    g_autofree char *mdev_uuid = NULL;
    const AvProfile *profile = job->profile ? av_policy_find(policy, job->profile) : NULL;
    AvScrubTarget target = { .identity = job->identity, .address = job->address, .iommu_group = job->iommu_group,
                             .rom_sha256 = job->rom_sha256, .scrub_token = job->scrub_token,
                             .scrub_domain_uuid = job->scrub_domain, .hold_state_dir = config->state_dir,
                             .state_dir = config->state_dir, .original_driver = job->original_driver };
    g_autoptr(json_t) on_free = NULL;
    g_autoptr(json_t) on_release = NULL;
    g_autoptr(AvBitstream) release_bitstream =
        job->release_bitstream ? av_bitstream_lookup(config->state_dir, job->release_bitstream, NULL) : NULL;
    gboolean release_failed = FALSE;
    g_autofree char *rebound_from = NULL;
    g_autofree char *driver_now = NULL;
    gboolean rebound = FALSE;
    gboolean freed = FALSE;
    gboolean health_quarantined = FALSE;
    AvPoolDevice *dev;
    gboolean ok;

    if (job->kind == AV_DEVICE_KIND_MDEV)
        mdev_uuid = g_strdup(job->identity + strlen("mdev:"));
    target.mdev_uuid = mdev_uuid;
    if (!profile) {
        g_set_error(&failure, AV_ERROR, AV_ERROR_POLICY,
                    "its profile '%s' is not in the policies any more, so its scrub steps are unknown",
                    job->profile ? job->profile : "(none)");
    } else if (job->release_pending && profile->drivers[AV_DRIVER_ON_RELEASE] &&
               !av_worker_driver(config, profile, job, AV_DRIVER_ON_RELEASE, release_bitstream, &on_release,
                                 &failure)) {
        /* The release work that the hook could not do (killed, a release by
         * a marker or of a dead domain): failing, the device is quarantined
         * before any scrub step ran. */
        g_prefix_error(&failure, "at its release, ");
        release_failed = TRUE;
    } else if (job->kind == AV_DEVICE_KIND_PCI && job->address &&
               av_scrub_bind_vfio(config->root, config->ops, profile, job->address, &rebound, &rebound_from,
                                  &failure) &&
               rebound) {
        av_hook_log(LOG_INFO, "bound %s to vfio-pci for its scrub (it was on %s)", job->address,
                    rebound_from ? rebound_from : "no driver");
    }
    if (profile && !failure)
        av_worker_hold_note(config, job);
    if (profile && !failure)
        av_scrub_run(config->root, config->ops, profile, &target, &report, &failure);
    if (!failure && job->kind == AV_DEVICE_KIND_PCI)
        av_scrub_group_released(config->root, config->state_dir, job->iommu_group, job->address, &failure);
    if (!failure && profile)
        av_worker_on_free(config, profile, job, report, &on_free, &failure);

    /* What the host is now, before the device may be freed: a tenant's
     * firmware may change the card's identity, at once or at the scrub's
     * reset.  The worker runs behind libvirt's back, so it reconciles the
     * pool with the whole host after every scrub (the hook reads only a
     * domain's devices): a changed identity gives the device its
     * identity problem, under its new identity if it took one
     * (found by its address), and any other card whose identity changed or
     * is shared now is caught here too.  The scan runs before the lock is
     * taken: the lock is held for the reconcile only. */
    host = av_host_scan(config->root, &error);
    if (!host) {
        if (!failure)
            g_propagate_prefixed_error(&failure, g_steal_pointer(&error),
                                       "cannot check what the device is after its scrub: ");
        g_clear_error(&error);
    }
    pool = av_hook_pool_open(config, &error);
    if (!pool) {
        av_hook_log(LOG_ERR, "cannot record the scrub of %s: %s", job->identity, error->message);
        return;
    }
    if (host && !av_pool_reconcile(pool, host, policy, &reconciled, &error)) {
        if (!failure)
            g_propagate_prefixed_error(&failure, g_steal_pointer(&error),
                                       "cannot check what the device is after its scrub: ");
        g_clear_error(&error);
        /* A reconcile that failed half way must not be saved: the pool
         * as it is on disk, and the device quarantined. */
        g_clear_pointer(&pool, av_pool_free);
        pool = av_hook_pool_open(config, &error);
        if (!pool) {
            av_hook_log(LOG_ERR, "cannot record the scrub of %s: %s", job->identity, error->message);
            return;
        }
    }
    /* The release work is done (or none was owed) unless it failed. */
    if (job->release_pending && !release_failed && profile) {
        AvPoolDevice *owed = av_pool_find(pool, job->identity);

        if (owed)
            owed->release_pending = FALSE;
    }
    if (on_release) {
        g_autoptr(json_t) run = json_deep_copy(on_release);

        json_object_set_new(run, "identity", json_string(job->identity));
        json_object_set_new(run, "by", json_string("scrub"));
        if (!av_pool_journal_append(pool, "driver", run, &error)) {
            av_hook_log(LOG_ERR, "cannot journal the on_release run of %s: %s", job->identity, error->message);
            g_clear_error(&error);
        }
    }
    /* Failures are logged: the certificate has both runs. */
    if (!av_scrub_journal_runs(pool, job->identity, report, on_free, "scrub", &error)) {
        av_hook_log(LOG_ERR, "cannot journal the programs run by the scrub of %s: %s", job->identity,
                    error->message);
        g_clear_error(&error);
    }
    dev = av_pool_find(pool, job->identity);
    if ((!dev || dev->state != AV_DEVICE_STATE_SCRUBBING) && job->kind == AV_DEVICE_KIND_PCI && job->address) {
        AvPoolDevice *at = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, job->address);

        if (at && at->state == AV_DEVICE_STATE_SCRUBBING && at->identity_problem)
            dev = at;
    }
    if (!dev || dev->state != AV_DEVICE_STATE_SCRUBBING) {
        av_hook_log(LOG_ERR, "device %s is no longer scrubbing in the pool (%s); its scrub is not recorded",
                    job->identity, dev ? av_device_state_to_string(dev->state) : "gone");
        /* What the reconcile journalled is saved all the same. */
        if (reconciled && !av_pool_save(pool, &error))
            av_hook_log(LOG_ERR, "cannot save the pool: %s", error->message);
        return;
    }
    /* An identity problem outlives any scrub: quarantined, and left
     * on vfio-pci, away from the host's drivers. */
    if (!failure)
        av_pool_device_may_be_freed(dev, &failure);
    /* Back to its drivers (a created mdev removed), as the profile says. */
    if (!failure && profile)
        av_pool_device_restore(config->root, config->ops, profile, dev, &failure);
    /* Rebound for the scrub and not restored above (the pool knew no
     * driver for it): back to the driver it had, as the profile says. */
    if (rebound)
        driver_now = av_vfio_current_driver(config->root, job->address);
    if (!failure && profile && rebound && profile->restore_driver == AV_RESTORE_ON_RELEASE &&
        av_pci_driver_is_vfio(driver_now))
        av_scrub_restore_rebound(config->root, config->ops, job->address, rebound_from, &failure);
    /* Its health, just before it is freed: over a profile's
     * limit it is quarantined (by av_pool_health_check()) instead. */
    if (!failure && profile) {
        g_autofree char *warning = NULL;

        if (!av_pool_health_check(pool, dev, profile, config->root, &health_quarantined, &warning, &error))
            goto fail;
        if (warning)
            av_hook_log(LOG_WARNING, "device %s (%s): health: %s", job->identity,
                        job->address ? job->address : "", warning);
        if (health_quarantined)
            failure = g_error_new(AV_ERROR, AV_ERROR_UNSAFE, "%s", dev->reason);
    } else if (failure && report && !release_failed && !dev->identity_problem) {
        /* A failed scrub counts against the device's health. */
        av_pool_count_scrub_failure(dev, av_scrub_report_failed_reset(report));
    }
    ok = failure == NULL;

    json_object_set_new(fields, "kind", json_string(av_device_kind_to_string(job->kind)));
    json_object_set_new(fields, "scrubbed_by", json_string("worker"));
    json_object_set_new(fields, "rebound_from", rebound ? av_json_string_or_null(rebound_from) : json_null());
    json_object_set_new(fields, "rom_sha256", av_json_string_or_null(job->rom_sha256));
    if (ok) {
        gboolean remove = dev->kind == AV_DEVICE_KIND_MDEV && dev->created;

        if (!av_pool_transition(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, &error))
            goto fail;
        if (profile && profile->restore_driver == AV_RESTORE_ON_RELEASE)
            g_ptr_array_set_size(dev->companions, 0);
        if (remove && !av_pool_remove(pool, job->identity, "its mdev was removed and scrubbed", &error))
            goto fail;
        /* What its "program-base" step put in it. */
        if (!remove && !av_pool_set_programmed(pool, dev, av_scrub_report_programmed(report, "scrub"),
                                               "the scrub programmed no base bitstream", &error))
            goto fail;
        av_hook_log(LOG_INFO, "scrubbed %s (%s): free", job->identity, job->address ? job->address : "");
        freed = TRUE;
    } else {
        g_autofree char *isolated_from = NULL;
        g_autoptr(GError) isolate_error = NULL;
        gboolean isolated = FALSE;

        /* Away from the host's drivers while it is quarantined. */
        if (job->kind == AV_DEVICE_KIND_PCI && job->address &&
            !av_scrub_isolate(config->root, config->ops, job->address, &isolated, &isolated_from, &isolate_error))
            av_hook_log(LOG_ERR, "%s", isolate_error->message);
        json_object_set_new(fields, "isolated_from", isolated ? av_json_string_or_null(isolated_from) : json_null());
        if (!health_quarantined &&
            !av_pool_transition(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, failure->message, &error))
            goto fail;
        /* No scrub step ran: what the domain left is still there. */
        if (release_failed)
            dev->unscrubbed = TRUE;
        av_hook_log(LOG_ERR, "device %s (%s) quarantined: %s", job->identity,
                    job->address ? job->address : "", failure->message);
    }
    /* The certificate before the save: killed in between, the device is
     * still scrubbing in the pool and is scrubbed again; never free
     * without its certificate in the journal. */
    if (!av_pool_journal_certificate(pool, job->identity, job->address, job->profile, job->owner, report,
                                     job->since, ok ? "free" : "quarantined", ok ? NULL : failure->message,
                                     fields, &error) ||
        !av_pool_save(pool, &error))
        goto fail;
    /* Free and saved: the kernel may hand it out again.  A quarantined
     * device keeps its hold (the sweep takes one it lacks). */
    if (freed && job->kind == AV_DEVICE_KIND_PCI && !av_pool_hold_drop_device(pool, config->root, dev, &error)) {
        av_hook_log(LOG_ERR, "%s; the next sweep drops it", error->message);
        g_clear_error(&error);
    }
    if (ok && host && job->kind == AV_DEVICE_KIND_PCI && job->address)
        av_worker_shrink(config, policy, pool, host, job->address);
    av_worker_sync_holds(config, pool);
    return;

fail:
    av_hook_log(LOG_ERR, "cannot record the scrub of %s: %s; it stays scrubbing and the next worker "
                "scrubs it again", job->identity, error->message);
}

/* Placement kept true (av_placement_sync_pool()): every device
 * of a sync-on profile when @only_identity is NULL, else the provider of
 * that one.  Without the pool's lock.  What cannot be applied stays pending
 * for the next worker or reconcile; nothing here changes the pool. */
static void
av_worker_placement(const AvHookConfig *config, const AvPolicy *policy, const char *only_identity)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPlacementReport) report = NULL;
    size_t i;
    json_t *r;

    if (!av_placement_sync_pool(config->root, config->state_dir, policy, only_identity, &report, &error)) {
        av_hook_log(LOG_ERR, "Placement sync: %s", error->message);
        return;
    }
    json_array_foreach(report->results, i, r) {
        const char *result = json_string_value(json_object_get(r, "result"));

        if (g_strcmp0(result, "pending") == 0)
            av_hook_log(LOG_WARNING, "Placement: %s %s stays pending: %s",
                        json_string_value(json_object_get(r, "rp")), json_string_value(json_object_get(r, "rc")),
                        json_string_value(json_object_get(r, "error")));
        else if (g_strcmp0(result, "applied") == 0)
            av_hook_log(LOG_INFO, "Placement: %s %s reserved %" JSON_INTEGER_FORMAT,
                        json_string_value(json_object_get(r, "rp")), json_string_value(json_object_get(r, "rc")),
                        json_integer_value(json_object_get(r, "reserved")));
    }
}

/* See hook.h. */
int
av_worker_run(const AvHookConfig *config)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GHashTable) done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    policy = av_policy_load_dir(config->policy_dir, &error);
    if (!policy) {
        /* Without the policies no scrub step is known: leave every device
         * dirty (never handed out) for the next worker. */
        av_hook_log(LOG_ERR, "worker: cannot read the policies: %s; the devices stay dirty", error->message);
        return 1;
    }
    {
        g_autoptr(AvPool) pool = av_hook_pool_open(config, &error);

        if (!pool) {
            av_hook_log(LOG_ERR, "worker: %s", error->message);
            return 1;
        }
        av_worker_sync_holds(config, pool);
    }
    /* The devices the hook just released: reserved in Placement before
     * their scrubs begin. */
    av_worker_placement(config, policy, NULL);
    for (;;) {
        g_autoptr(AvLock) lock = NULL;
        g_autoptr(AvScrubJob) job = av_worker_pick(config, done, &lock, &error);

        if (!job) {
            if (error) {
                av_hook_log(LOG_ERR, "worker: %s", error->message);
                return 1;
            }
            av_worker_shrink_all(config, policy);
            av_worker_placement(config, policy, NULL);
            return 0;
        }
        g_hash_table_add(done, g_strdup(job->identity));
        av_worker_scrub(config, policy, job);
        /* Freed: reserved 0; quarantined: it stays reserved.  The scrub
         * lock is let go first: a sync never waits on a scrub. */
        g_clear_pointer(&lock, av_lock_release);
        av_worker_placement(config, policy, job->identity);
    }
}
