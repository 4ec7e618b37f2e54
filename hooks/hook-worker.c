/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub worker (accelvirt-worker only: the hook starts it with
 * av_hook_spawn_worker(), in hook-common.c, and links none of this).
 *
 * The hook must return at once (libvirtd waits for it, docs/hooks.rst), and
 * a scrub may take minutes: "release end" marks the devices dirty and starts
 * accelvirt-worker detached from libvirtd.  The worker scrubs one device at
 * a time without holding the pool lock during the scrub, so that hooks of
 * other domains keep going; a per-device lock keeps two workers off one
 * device.  Each scrub is the transaction of src/lifecycle/av-scrub-job.h,
 * the one `accelvirt scrub` runs too; what is the worker's alone is here:
 * choosing the next device, BAR sizes a killed scrub left grown, the VFs
 * of a PF shrunk back, and Placement kept true. */
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

#include "lifecycle/av-lifecycle.h"
#include "nova/av-placement-sync.h"
#include "pool/av-pool.h"
#include "scrub/av-scrub.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-bar-sizes.h"

/* --- the worker ---------------------------------------------------------------------- */

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
 * takes its per-device lock and begins its scrub (av_scrub_job_begin():
 * scrubbing, a fresh token, saved).  Returns the
 * job and the lock, or NULL when there is nothing left. */
static AvScrubJob *
av_worker_pick(const AvHookConfig *config, const AvScrubContext *ctx, GHashTable *done, AvLock **ret_lock,
               GError **error)
{
    g_autoptr(AvPool) pool = NULL;

    pool = av_hook_pool_open(config, error);
    if (!pool)
        return NULL;
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        g_autoptr(AvLock) lock = NULL;
        g_autoptr(AvScrubJob) job = NULL;

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
        job = av_scrub_job_begin(ctx, pool, dev, error);
        if (!job)
            return NULL;
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

/* The scrub job's notes go to the hook's log. */
static void
av_worker_note(gpointer data, int priority, gboolean outcome, const char *message)
{
    (void)data;
    (void)outcome;
    av_hook_log(priority, "%s", message);
}

static AvPool *
av_worker_open_pool(gpointer data, GError **error)
{
    return av_hook_pool_open(data, error);
}

/* Scrubs the device of @job (av_scrub_job_run(), without the pool lock)
 * and records the outcome (av_scrub_job_finish()); a VF freed may let its
 * PF shrink back (av_worker_shrink()). */
static void
av_worker_scrub(const AvHookConfig *config, const AvScrubContext *ctx, AvScrubJob *job)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;

    av_scrub_job_run(ctx, job);
    if (!av_scrub_job_finish(ctx, job, &pool, &host, &error)) {
        av_hook_log(LOG_ERR, "cannot record the scrub of %s: %s; it stays as the pool has it and the next worker "
                    "scrubs it again if it is still scrubbing", job->identity, error->message);
        return;
    }
    if (g_strcmp0(job->result, "free") == 0 && host && job->kind == AV_DEVICE_KIND_PCI && job->address)
        av_worker_shrink(config, ctx->policy, pool, host, job->address);
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
    AvScrubContext ctx = { .root = config->root, .ops = config->ops, .state_dir = config->state_dir,
                           .open_pool = av_worker_open_pool, .open_pool_data = (gpointer)config,
                           .note = av_worker_note };

    policy = av_policy_load_dir(config->policy_dir, &error);
    if (!policy) {
        /* Without the policies no scrub step is known: leave every device
         * dirty (never handed out) for the next worker. */
        av_hook_log(LOG_ERR, "worker: cannot read the policies: %s; the devices stay dirty", error->message);
        return 1;
    }
    ctx.policy = policy;
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
        g_autoptr(AvScrubJob) job = av_worker_pick(config, &ctx, done, &lock, &error);

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
        av_worker_scrub(config, &ctx, job);
        /* Freed: reserved 0; quarantined: it stays reserved.  The scrub
         * lock is let go first: a sync never waits on a scrub. */
        g_clear_pointer(&lock, av_lock_release);
        av_worker_placement(config, policy, job->identity);
    }
}
