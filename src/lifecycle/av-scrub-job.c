/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub transaction (see av-scrub-job.h). */
#include "config.h"

#include "lifecycle/av-scrub-job.h"

#include <stdarg.h>
#include <string.h>
#include <syslog.h>

#include "fpga/av-bitstream.h"
#include "pool/av-pool-placement.h"
#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-vfio.h"

/* See av-scrub-job.h. */
void
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
    json_decref(job->report);
    json_decref(job->on_release);
    json_decref(job->on_free);
    g_clear_error(&job->failure);
    g_free(job->rebound_from);
    g_free(job->health_warning);
    g_free(job);
}

static void G_GNUC_PRINTF(4, 5)
av_scrub_job_note(const AvScrubContext *ctx, int priority, gboolean outcome, const char *fmt, ...)
{
    g_autofree char *message = NULL;
    va_list ap;

    if (!ctx->note)
        return;
    va_start(ap, fmt);
    message = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    ctx->note(ctx->note_data, priority, outcome, message);
}

/* A device a domain had: the release's work is this scrub's to finish. */
static gboolean
av_scrub_job_is_tenants(const AvScrubJob *job)
{
    return job->from == AV_DEVICE_STATE_DIRTY || job->from == AV_DEVICE_STATE_SCRUBBING;
}

/* "operator" (`accelvirt scrub`) or "scrub" (the worker): the "by" of the
 * programs' runs and of what a "program-base" step put in the device. */
static const char *
av_scrub_job_runs_by(const AvScrubContext *ctx)
{
    return ctx->operator_name ? "operator" : "scrub";
}

/* TRUE when av_scrub_run() ran at least one step of @job. */
static gboolean
av_scrub_job_steps_ran(const AvScrubJob *job)
{
    return job->report && json_array_size(json_object_get(job->report, "steps")) > 0;
}

/* See av-scrub-job.h. */
AvScrubJob *
av_scrub_job_begin(const AvScrubContext *ctx, AvPool *pool, AvPoolDevice *dev, GError **error)
{
    g_autoptr(AvScrubJob) job = NULL;
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *token = NULL;
    gboolean moved;

    /* A fresh token for this scrub: a "vm" step's scrub domain carries it,
     * and the hook hands the device to that domain only.  Made before the
     * move, which is journalled at once. */
    token = av_scrub_token_random(error);
    if (!token)
        return NULL;
    job = g_new0(AvScrubJob, 1);
    job->from = dev->state;
    switch (dev->state) {
    case AV_DEVICE_STATE_DIRTY:
    case AV_DEVICE_STATE_FREE:
        moved = ctx->operator_name ? av_pool_scrub_begin(pool, dev, ctx->operator_name, error)
                                   : av_pool_transition(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL, error);
        if (!moved)
            return NULL;
        break;
    case AV_DEVICE_STATE_SCRUBBING:
        av_scrub_job_note(ctx, LOG_WARNING, FALSE,
                          "device %s was left scrubbing by a worker that is gone; scrubbing it again from its first "
                          "step, held (quarantined if its group cannot be held)",
                          dev->identity);
        break;
    case AV_DEVICE_STATE_QUARANTINED:
        break;
    default:
        g_set_error(error, AV_ERROR, AV_ERROR_STATE, "device %s is %s: it cannot be scrubbed", dev->identity,
                    av_device_state_to_string(dev->state));
        return NULL;
    }
    /* A stick is held for its scrub, as a released one is
     * (av_pool_usb_hold()): its steps authorize it for themselves only. */
    if (dev->kind == AV_DEVICE_KIND_USB) {
        const char *done = NULL;

        if (!av_pool_usb_hold(pool, ctx->root, ctx->ops, dev, &done, &job->failure))
            g_prefix_error(&job->failure, "before its scrub, ");
    }
    if (!av_pool_scrub_token_set(dev, token, error) || !av_pool_save(pool, error))
        return NULL;
    job->identity = g_strdup(dev->identity);
    job->kind = dev->kind;
    job->address = g_strdup(dev->address);
    job->profile = g_strdup(dev->profile);
    job->iommu_group = dev->iommu_group;
    job->rom_sha256 = g_strdup(dev->rom_sha256);
    job->scrub_token = g_strdup(dev->scrub_token);
    job->scrub_domain = g_strdup(dev->scrub_domain);
    /* The owner is kept through in-use -> dirty -> scrubbing, and cleared
     * only when the device is free: the certificate names it. */
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
    job->since = g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
    return g_steal_pointer(&job);
}

/* The driver command of @point of @profile for the device of @job, with
 * the domain that had it (av_driver_run()). */
static gboolean
av_scrub_job_driver(const AvScrubContext *ctx, const AvProfile *profile, const AvScrubJob *job,
                    AvDriverPoint point, const AvBitstream *bitstream, json_t **ret_report, GError **error)
{
    AvProgramTarget target = { .root = ctx->root, .state_dir = ctx->state_dir, .profile = profile,
                               .address = job->address, .identity = job->identity,
                               .domain_name = job->owner ? job->owner->domain_name : NULL,
                               .domain_uuid = job->owner ? job->owner->domain_uuid : NULL, .group_fd = -1 };

    return av_driver_run(&target, point, bitstream, ret_report, error);
}

/* Before the steps of the PCI device of @job: says when it is scrubbed
 * without a hold of its IOMMU group (off vfio-pci: a profile whose steps
 * do not need it there).  On vfio-pci, av_scrub_run() holds the group
 * before the first step (a hold taken at release is kept; one that is
 * gone, a worker killed after dropping it for a "vm" step, is taken again
 * and the whole scrub runs from its first step) and fails the scrub, so
 * that the device is quarantined, when it cannot: a group open in another
 * process (someone got the device since its release), or any other reason
 * (no step ever runs unheld). */
static void
av_scrub_job_hold_note(const AvScrubContext *ctx, const AvScrubJob *job)
{
    g_autofree char *driver = NULL;

    if (job->kind != AV_DEVICE_KIND_PCI || !job->address || job->iommu_group < 0)
        return;
    driver = av_vfio_current_driver(ctx->root, job->address);
    if (!av_vfio_device_is_vfio(ctx->root, job->address, driver))
        av_scrub_job_note(ctx, LOG_INFO, FALSE, "scrubbing %s on %s, without a hold of its IOMMU group (no step needs "
                                         "vfio-pci)",
                          job->address, driver ? driver : "no driver");
}

/* See av-scrub-job.h.  A PCI device that is not on vfio-pci when a step
 * needs it there (a managed='yes' hostdev: libvirt gave it back to its
 * host driver at release, docs/design.md) is bound to vfio-pci first; it
 * goes back to its driver after a scrub that succeeded as the profile's
 * restore_driver says (av_scrub_job_finish()), and stays on vfio-pci when
 * the scrub failed. */
void
av_scrub_job_run(const AvScrubContext *ctx, AvScrubJob *job)
{
    const AvProfile *profile = job->profile ? av_policy_find(ctx->policy, job->profile) : NULL;
    g_autoptr(AvBitstream) release_bitstream =
        job->release_bitstream ? av_bitstream_lookup(ctx->state_dir, job->release_bitstream, NULL) : NULL;
    g_autofree char *mdev_uuid = job->kind == AV_DEVICE_KIND_MDEV ? g_strdup(job->identity + strlen("mdev:")) : NULL;
    g_autofree char *netdev = NULL;
    AvScrubTarget target = { .identity = job->identity, .address = job->address, .iommu_group = job->iommu_group,
                             .mdev_uuid = mdev_uuid, .rom_sha256 = job->rom_sha256,
                             .scrub_token = job->scrub_token, .scrub_domain_uuid = job->scrub_domain,
                             .hold_state_dir = ctx->state_dir, .state_dir = ctx->state_dir,
                             .original_driver = job->original_driver, .progress = ctx->progress,
                             .progress_data = ctx->progress_data };

    if (job->failure)
        return;
    if (!profile) {
        g_set_error(&job->failure, AV_ERROR, AV_ERROR_POLICY,
                    "its profile '%s' is not in the policies any more, so its scrub steps are unknown",
                    job->profile ? job->profile : "(none)");
        return;
    }
    if (job->release_pending && profile->drivers[AV_DRIVER_ON_RELEASE] &&
        !av_scrub_job_driver(ctx, profile, job, AV_DRIVER_ON_RELEASE, release_bitstream, &job->on_release,
                             &job->failure)) {
        /* The release work every release leaves owed (the hook's, detach,
         * release, stale, the audit, the upkeep; none runs it itself):
         * failing, the device is quarantined before any scrub step ran. */
        g_prefix_error(&job->failure, "at its release, ");
        job->release_failed = TRUE;
        return;
    }
    if (job->kind == AV_DEVICE_KIND_PCI && job->address &&
        av_scrub_bind_vfio(ctx->root, ctx->ops, profile, job->address, &job->rebound, &job->rebound_from,
                           &job->failure) &&
        job->rebound)
        av_scrub_job_note(ctx, LOG_INFO, FALSE, "bound %s to vfio-pci for its scrub (it was on %s)", job->address,
                          job->rebound_from ? job->rebound_from : "no driver");
    if (job->failure)
        return;
    av_scrub_job_hold_note(ctx, job);
    if (profile->attach == AV_ATTACH_NETDEV && job->kind == AV_DEVICE_KIND_PCI) {
        netdev = av_pci_netdev_first(ctx->root, job->address);
        target.netdev = netdev;
    }
    if (!av_scrub_run(ctx->root, ctx->ops, profile, &target, &job->report, &job->failure))
        return;
    if (job->kind == AV_DEVICE_KIND_PCI &&
        !av_scrub_group_released(ctx->root, ctx->state_dir, job->iommu_group, job->address, &job->failure))
        return;
    /* After a scrub that passed, before the device may be freed: its
     * profile's on_free, with the domain that had it and what the scrub's
     * "program-base" put in it for the command's variables.  A quarantined
     * device scrubbed by hand stays quarantined: not now. */
    if (job->from != AV_DEVICE_STATE_QUARANTINED && profile->drivers[AV_DRIVER_ON_FREE]) {
        g_autoptr(AvProgrammed) base = av_scrub_report_programmed(job->report, av_scrub_job_runs_by(ctx));
        g_autoptr(AvBitstream) bitstream = base ? av_bitstream_lookup(ctx->state_dir, base->sha256, NULL) : NULL;

        av_scrub_job_driver(ctx, profile, job, AV_DRIVER_ON_FREE, bitstream, &job->on_free, &job->failure);
    }
}

/* The device of @job in @pool, in the state @expected: by its identity, or,
 * a PCI device whose identity changed under the scrub (the reconcile gave
 * it its identity problem under the new one), by its address. */
static AvPoolDevice *
av_scrub_job_find(AvPool *pool, const AvScrubJob *job, AvDeviceState expected)
{
    AvPoolDevice *dev = av_pool_find(pool, job->identity);

    if ((!dev || dev->state != expected) && job->kind == AV_DEVICE_KIND_PCI && job->address) {
        AvPoolDevice *at = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, job->address);

        if (at && at->state == expected && at->identity_problem)
            return at;
    }
    return dev;
}

/* Journals what @job's programs did: the on_release run as a "driver"
 * entry, then the runs of the steps and on_free (av_scrub_journal_runs()).
 * Failures are noted only: the certificate has the runs too. */
static void
av_scrub_job_journal_runs(const AvScrubContext *ctx, AvPool *pool, const AvScrubJob *job)
{
    g_autoptr(GError) error = NULL;

    if (job->on_release) {
        if (!av_program_journal(pool, "driver", job->on_release, job->identity,
                                job->owner ? job->owner->domain_name : NULL,
                                job->owner ? job->owner->domain_uuid : NULL, av_scrub_job_runs_by(ctx), &error)) {
            av_scrub_job_note(ctx, LOG_ERR, FALSE, "cannot journal the on_release run of %s: %s", job->identity,
                              error->message);
            g_clear_error(&error);
        }
    }
    if (!av_scrub_journal_runs(pool, job->identity, job->report, job->on_free, av_scrub_job_runs_by(ctx), &error))
        av_scrub_job_note(ctx, LOG_ERR, FALSE, "cannot journal the programs run by the scrub of %s: %s", job->identity,
                          error->message);
}

/* Back to its drivers after a scrub that passed: a device a domain had as
 * its profile's restore_driver says (an mdev accelvirt created removed, a
 * stick authorized again: av_pool_device_restore()); a free stick scrubbed
 * by hand authorized again; then a device bound to vfio-pci for the steps
 * and not given back by the above (the pool knew no driver for it) back to
 * the driver it had.  A quarantined device stays where it is. */
static void
av_scrub_job_restore(const AvScrubContext *ctx, const AvProfile *profile, AvScrubJob *job,
                     const AvPoolDevice *dev)
{
    g_autofree char *driver_now = NULL;

    if (av_scrub_job_is_tenants(job))
        av_pool_device_restore(ctx->root, ctx->ops, profile, dev, &job->failure);
    else if (job->from == AV_DEVICE_STATE_FREE && dev->kind == AV_DEVICE_KIND_USB)
        av_pool_usb_unhold(ctx->root, ctx->ops, dev, &job->failure);
    if (job->failure || !job->rebound)
        return;
    driver_now = av_vfio_current_driver(ctx->root, job->address);
    if (profile->restore_driver == AV_RESTORE_ON_RELEASE && av_pci_driver_is_vfio(driver_now))
        av_scrub_restore_rebound(ctx->root, ctx->ops, job->address, job->rebound_from, &job->failure);
}

/* How long the after-scrub check waits for the pool's shared lock to read
 * the pool before its scan (a writer holds the exclusive lock for a prepare,
 * a release or a reconcile: tens of milliseconds to seconds). */
#define AV_SCRUB_JOB_SNAPSHOT_WAIT_MS 60000

/* See av-scrub-job.h. */
AvHost *
av_scrub_job_scan(const AvRoot *root, const AvScrubJob *job, char ***ret_addresses, GError **error)
{
    g_auto(GStrv) presenters = NULL;
    g_autoptr(GPtrArray) addresses = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(AvHost) host = NULL;

    /* Without an address to read it at, only the whole host can tell. */
    if (job->kind == AV_DEVICE_KIND_PCI && !av_pci_address_is_valid(job->address))
        return av_host_scan(root, error);
    if (job->kind == AV_DEVICE_KIND_PCI) {
        presenters = av_pool_identity_presenters(root, job->identity, error);
        if (!presenters)
            return NULL;
        g_ptr_array_add(addresses, g_strdup(job->address));
        for (guint i = 0; presenters[i]; i++)
            g_ptr_array_add(addresses, g_strdup(presenters[i]));
    }
    g_ptr_array_add(addresses, NULL);
    host = av_host_scan_devices(root, (const char *const *)addresses->pdata, job->kind == AV_DEVICE_KIND_MDEV, error);
    if (host && job->kind == AV_DEVICE_KIND_USB && !av_host_scan_devices_usb(root, host, error))
        return NULL;
    if (host)
        *ret_addresses = (char **)g_ptr_array_free(g_steal_pointer(&addresses), FALSE);
    return g_steal_pointer(&host);
}

/* See av-scrub-job.h. */
gboolean
av_scrub_job_confirm(const AvPool *pool, const AvPolicy *policy, const AvHost *host, char **addresses, char **ret_why)
{
    for (guint i = 0; addresses[i]; i++) {
        if (!av_host_find_pci(host, addresses[i]) && av_pool_find_address(pool, AV_DEVICE_KIND_PCI, addresses[i])) {
            *ret_why = g_strdup_printf("%s is not on the host", addresses[i]);
            return FALSE;
        }
    }
    return av_pool_confirm(pool, host, policy, ret_why);
}

/* See av-scrub-job.h. */
gboolean
av_scrub_job_finish(const AvScrubContext *ctx, AvScrubJob *job, AvPool **ret_pool, AvHost **ret_host,
                    GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvPool) before = NULL;
    g_autoptr(GHashTable) keep = NULL;
    g_autoptr(AvPoolScan) scan = NULL;
    g_auto(GStrv) addresses = NULL;
    g_autofree char *why = NULL;
    g_autoptr(json_t) fields = json_object();
    const AvProfile *profile = job->profile ? av_policy_find(ctx->policy, job->profile) : NULL;
    AvDeviceState expected =
        job->from == AV_DEVICE_STATE_QUARANTINED ? AV_DEVICE_STATE_QUARANTINED : AV_DEVICE_STATE_SCRUBBING;
    gboolean reconciled = FALSE;
    gboolean health_quarantined = FALSE;
    gboolean freed = FALSE;
    AvPoolDevice *dev;
    gboolean ok;

    /* What the device is now, before it may be freed: a tenant's firmware
     * may change the card's identity, at once or at the scrub's reset.  The
     * scrub runs behind libvirt's back, so the device is read again here:
     * with every function that may present its identity, its IOMMU group
     * and its PF (av_scrub_job_scan()).  When the pool agrees with them
     * all, a reconcile with the whole host would change nothing that
     * decides this device's fate; anything else (its identity changed,
     * another card presents it, a function gone, a new boot) and the pool
     * is reconciled with the whole host: a changed identity gives the
     * device its identity problem, under its new identity if it took one
     * (found by its address), and any other card whose identity changed or
     * is shared now is caught too.  A change elsewhere on the host is the
     * next whole reconcile's (the CLI, `accelvirt reconcile`'s timer, a
     * scrub that finds something).  The scans run before the lock is
     * taken: the lock is held for the check and the reconcile only, which
     * leaves what another writer changed in the pool since the snapshot
     * read first as that writer recorded it (av_pool_reconcile_scan(): the
     * scan may have seen those devices before or during the change), but
     * never this device: its identity is checked whatever happened to its
     * entry.  Without a snapshot (the pool unreadable now: opening it for
     * the write below says why), the scan is applied to every device. */
    before = av_pool_open(ctx->state_dir, AV_POOL_READ, AV_SCRUB_JOB_SNAPSHOT_WAIT_MS, NULL);
    if (before)
        av_pool_unlock(before);
    host = av_scrub_job_scan(ctx->root, job, &addresses, &local);
    if (host && !host->partial)
        scan = av_pool_scan_new(host, ctx->policy);
    pool = ctx->open_pool(ctx->open_pool_data, error);
    if (!pool)
        return FALSE;
    if (host && host->partial && !av_scrub_job_confirm(pool, ctx->policy, host, addresses, &why)) {
        /* The whole host, without the lock meanwhile. */
        av_scrub_job_note(ctx, LOG_DEBUG, FALSE, "scanning the whole host after the scrub of %s: %s", job->identity,
                          why);
        g_clear_pointer(&pool, av_pool_free);
        g_clear_pointer(&host, av_host_free);
        host = av_host_scan(ctx->root, &local);
        if (host)
            scan = av_pool_scan_new(host, ctx->policy);
        pool = ctx->open_pool(ctx->open_pool_data, error);
        if (!pool)
            return FALSE;
    }
    if (!host) {
        if (!job->failure)
            g_propagate_prefixed_error(&job->failure, g_steal_pointer(&local),
                                       "cannot check what the device is after its scrub: ");
        g_clear_error(&local);
    }
    if (scan && before) {
        keep = av_pool_changed_since(before, pool);
        av_pool_changed_forget(keep, job->identity, job->address);
    }
    if (scan && !av_pool_reconcile_scan(pool, scan, keep, &reconciled, &local)) {
        if (!job->failure)
            g_propagate_prefixed_error(&job->failure, g_steal_pointer(&local),
                                       "cannot check what the device is after its scrub: ");
        g_clear_error(&local);
        /* A reconcile that failed half way must not be saved: the pool as
         * it is on disk, and the device quarantined. */
        g_clear_pointer(&pool, av_pool_free);
        reconciled = FALSE;
        pool = ctx->open_pool(ctx->open_pool_data, error);
        if (!pool)
            return FALSE;
    }
    /* The release work is done, unless it was owed and did not run or
     * failed (then the next scrub runs it again). */
    if (job->release_pending && profile &&
        (!profile->drivers[AV_DRIVER_ON_RELEASE] ||
         (job->on_release && json_is_true(json_object_get(job->on_release, "ok"))))) {
        AvPoolDevice *owed = av_pool_find(pool, job->identity);

        if (owed)
            owed->release_pending = FALSE;
    }
    av_scrub_job_journal_runs(ctx, pool, job);
    dev = av_scrub_job_find(pool, job, expected);
    if (!dev || dev->state != expected) {
        if (dev)
            g_set_error(error, AV_ERROR, AV_ERROR_STATE, "device %s is %s, no longer %s; its scrub is not recorded",
                        job->identity, av_device_state_to_string(dev->state), av_device_state_to_string(expected));
        else
            g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "device %s left the pool during its scrub",
                        job->identity);
        /* What the reconcile journalled is saved all the same. */
        if (reconciled && !av_pool_save(pool, &local))
            av_scrub_job_note(ctx, LOG_ERR, FALSE, "cannot save the pool: %s", local->message);
        return FALSE;
    }
    /* An identity problem outlives any scrub: quarantined, and left on
     * vfio-pci, away from the host's drivers. */
    if (!job->failure)
        av_pool_device_may_be_freed(dev, &job->failure);
    if (!job->failure && profile && job->from != AV_DEVICE_STATE_QUARANTINED)
        av_scrub_job_restore(ctx, profile, job, dev);
    /* Its health, just before it is freed: over a profile's limit it is
     * quarantined (by av_pool_health_check()) instead. */
    if (!job->failure && profile && job->from != AV_DEVICE_STATE_QUARANTINED) {
        if (!av_pool_health_check(pool, dev, profile, ctx->root, &health_quarantined, &job->health_warning, error))
            return FALSE;
        if (job->health_warning)
            av_scrub_job_note(ctx, LOG_WARNING, TRUE, "device %s (%s): health: %s", job->identity,
                              job->address ? job->address : "", job->health_warning);
        if (health_quarantined)
            job->failure = g_error_new(AV_ERROR, AV_ERROR_UNSAFE, "%s", dev->reason);
    } else if (job->failure && job->report && !job->release_failed && !dev->identity_problem) {
        /* A failed scrub counts against the device's health. */
        av_pool_count_scrub_failure(dev, av_scrub_report_failed_reset(job->report));
    }
    ok = job->failure == NULL;

    json_object_set_new(fields, "kind", json_string(av_device_kind_to_string(job->kind)));
    json_object_set_new(fields, "scrubbed_by", json_string(ctx->operator_name ? "operator" : "worker"));
    if (ctx->operator_name) {
        json_object_set_new(fields, "operator", json_string(ctx->operator_name));
        json_object_set_new(fields, "state_before", json_string(av_device_state_to_string(job->from)));
    }
    json_object_set_new(fields, "rebound_from",
                        job->rebound ? av_json_string_or_null(job->rebound_from) : json_null());
    json_object_set_new(fields, "rom_sha256", av_json_string_or_null(job->rom_sha256));
    if (job->from == AV_DEVICE_STATE_QUARANTINED) {
        /* Scrubbed by hand, it stays quarantined; no transition clears its
         * token.  What a domain left in it is cleared now: `quarantine
         * clear` may give it back (av_pool_clear_quarantine()). */
        job->result = "quarantined";
        av_pool_scrub_token_clear(dev);
        if (ok && dev->unscrubbed) {
            dev->unscrubbed = FALSE;
            json_object_set_new(fields, "unscrubbed_cleared", json_true());
        }
        if (ok && !av_pool_set_programmed(pool, dev, av_scrub_report_programmed(job->report, av_scrub_job_runs_by(ctx)),
                                          "the scrub programmed no base bitstream", error))
            return FALSE;
    } else if (ok) {
        gboolean remove = av_scrub_job_is_tenants(job) && dev->kind == AV_DEVICE_KIND_MDEV && dev->created;

        if (!av_pool_transition(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, error))
            return FALSE;
        if (av_scrub_job_is_tenants(job) && profile && profile->restore_driver == AV_RESTORE_ON_RELEASE)
            g_ptr_array_set_size(dev->companions, 0);
        if (remove && !av_pool_remove(pool, job->identity, "its mdev was removed and scrubbed", error))
            return FALSE;
        /* What its "program-base" step put in it. */
        if (!remove && !av_pool_set_programmed(pool, dev,
                                               av_scrub_report_programmed(job->report, av_scrub_job_runs_by(ctx)),
                                               "the scrub programmed no base bitstream", error))
            return FALSE;
        if (remove)
            dev = NULL;
        av_scrub_job_note(ctx, LOG_INFO, TRUE, "scrubbed %s (%s): free", job->identity, job->address ? job->address : "");
        job->result = "free";
        freed = TRUE;
    } else {
        g_autofree char *isolated_from = NULL;
        gboolean isolated = FALSE;

        /* Away from the host's drivers while it is quarantined. */
        if (job->kind == AV_DEVICE_KIND_PCI && job->address &&
            !av_scrub_isolate(ctx->root, ctx->ops, job->address, &isolated, &isolated_from, &local)) {
            av_scrub_job_note(ctx, LOG_ERR, FALSE, "%s", local->message);
            g_clear_error(&local);
        }
        json_object_set_new(fields, "isolated_from", isolated ? av_json_string_or_null(isolated_from) : json_null());
        if (!health_quarantined &&
            !av_pool_transition(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, job->failure->message, error))
            return FALSE;
        /* No scrub step ran on a device a domain had (its release work
         * failed, its stick could not be held, its profile is gone, the bind
         * its steps need failed): what the domain left is still there, and
         * `quarantine clear` refuses it until a scrub by hand passes. */
        if (job->release_failed || (av_scrub_job_is_tenants(job) && !av_scrub_job_steps_ran(job)))
            dev->unscrubbed = TRUE;
        av_scrub_job_note(ctx, LOG_ERR, TRUE, "device %s (%s) quarantined: %s", job->identity,
                          job->address ? job->address : "", job->failure->message);
        job->result = "quarantined";
    }
    /* The certificate before the save: killed in between, the device is
     * still scrubbing in the pool and is scrubbed again; never free without
     * its certificate in the journal. */
    if (!av_pool_journal_certificate(pool, job->identity, job->address, job->profile,
                                     av_scrub_job_is_tenants(job) ? job->owner : NULL, job->report, job->since,
                                     job->result, ok ? NULL : job->failure->message, fields, error) ||
        !av_pool_save(pool, error))
        return FALSE;
    /* Free and saved: the kernel may hand it out again.  A quarantined
     * device keeps its hold (the sweep below takes one it lacks). */
    if (freed && dev && dev->kind == AV_DEVICE_KIND_PCI && !av_pool_hold_drop_device(pool, ctx->root, dev, &local)) {
        av_scrub_job_note(ctx, LOG_ERR, FALSE, "%s; the next sweep drops it", local->message);
        g_clear_error(&local);
    }
    /* Every path that makes devices dirty outside the hook (`accelvirt
     * release`, the upkeep's releases of dead domains) ends in a scrub, so
     * this sweep takes their holds too. */
    if (!av_pool_holds_sync(pool, ctx->root, ctx->ops, &local))
        av_scrub_job_note(ctx, LOG_ERR, FALSE, "%s", local->message);
    if (ret_pool) {
        *ret_pool = g_steal_pointer(&pool);
        *ret_host = g_steal_pointer(&host);
    }
    return TRUE;
}
