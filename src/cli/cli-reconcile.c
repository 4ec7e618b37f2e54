/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: `accelvirt reconcile`, the pool put right with the host at
 * boot (accelvirt-reconcile.service, before libvirt's daemons) and on a
 * timer (accelvirt-reconcile.timer).
 *
 * Under the pool's lock (the host scanned before it, applied to what no
 * other writer changed meanwhile, as `status` does; scanned again under it
 * when the steps that act on the host have anything to do), idempotent,
 * journalled, and only on pool devices and the PFs that a profile's "vfs"
 * names:
 *   - what every locked call puts right first (av_pool_upkeep()): intents
 *     undone, release markers, devices of domains whose QEMU is gone, and
 *     devices in use in an earlier boot, by boot id (released at once, dirty);
 *   - claims past their expiry (free again);
 *   - the VF counts that "vfs": N profiles declare (a reboot leaves
 *     sriov_numvfs 0), where av_pool_pf_check_change() allows it;
 *   - free (once scrubbed) and quarantined devices of "keep-vfio"
 *     profiles back on vfio-pci, with their IOMMU group (a reboot probed
 *     host drivers);
 *   - "health" limits on free devices (av_pool_health_check());
 *   - the kernel-enforced holds (av-hold.h);
 *   - the scrub worker for dirty devices and for scrubs whose worker died
 *     (scrubbing, its scrub lock free: the worker scrubs them again);
 *   - then, the pool's lock let go, Placement kept true: what
 *     was pending applied, every wanted "reserved" asserted again (a Nova
 *     PUT of a whole inventory resets reserved to 0).
 * mdevs are not precreated: the hook creates a domain's mdev at its
 * prepare (hooks/hook-prepare.c), and reconcile, before libvirtd, cannot know
 * the defined domains; an mdev made now would be held by nobody. */
#include "config.h"

#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "scrub/av-scrub.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

/* What one reconcile did, for the output and the journal. */
typedef struct {
    json_t *vfs;                 /* {"pf", "profile", "from", "to"} */
    json_t *bound;               /* {"identity", "address", "bound": [{"address", "driver"}]} */
    json_t *released;            /* AvPoolUpkeep.released */
    json_t *quarantined;         /* {"identity", "address", "reason"} */
    json_t *health_warnings;     /* {"identity", "address", "warning"} */
    json_t *claims_expired;      /* {"identity", "address", "domain"} */
    json_t *scrubs;              /* {"identity", "address", "resumed"} */
    json_t *warnings;            /* strings */
} AvReconcile;

static void
av_reconcile_clear(AvReconcile *r)
{
    json_decref(r->vfs);
    json_decref(r->bound);
    json_decref(r->released);
    json_decref(r->quarantined);
    json_decref(r->health_warnings);
    json_decref(r->claims_expired);
    json_decref(r->scrubs);
    json_decref(r->warnings);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AvReconcile, av_reconcile_clear)

/* Says @msg on stderr as a warning and keeps it for --json; takes it over. */
static void
av_reconcile_warn(AvReconcile *r, char *msg)
{
    fprintf(stderr, "accelvirt: warning: %s\n", msg);
    json_array_append_new(r->warnings, json_string(msg));
    g_free(msg);
}

static json_t *
av_reconcile_device(const AvPoolDevice *dev)
{
    return json_pack("{s:s, s:o}", "identity", dev->identity, "address", av_json_string_or_null(dev->address));
}

/* Claims past their expiry go back to free (av_pool_expire_claims(), as
 * the scan's reconcile would), listed in @data's claims_expired (an
 * AvReconcile; AvCliSync.before_apply). */
static gboolean
av_reconcile_claims(AvPool *pool, gpointer data, GError **error)
{
    AvReconcile *r = data;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;
    gboolean changed = FALSE;

    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        json_t *e;

        if (dev->state != AV_DEVICE_STATE_CLAIMED || dev->claim_expires == 0 || dev->claim_expires > now)
            continue;
        e = av_reconcile_device(dev);
        json_object_set_new(e, "domain", av_json_string_or_null(dev->owner ? dev->owner->domain_name : NULL));
        json_array_append_new(r->claims_expired, e);
    }
    if (!av_pool_expire_claims(pool, now, &changed, error))
        return FALSE;
    /* Free, or dirty where a program ran for the claim (av_pool_unclaim()). */
    for (gsize i = 0; i < json_array_size(r->claims_expired); i++) {
        json_t *e = json_array_get(r->claims_expired, i);
        const AvPoolDevice *dev = av_pool_find(pool, json_string_value(json_object_get(e, "identity")));

        json_object_set_new(e, "state", json_string(dev ? av_device_state_to_string(dev->state) : "free"));
    }
    return TRUE;
}

/* The profile whose "vfs": N wants more VFs on @pf than it has (at most
 * sriov_totalvfs; on-demand profiles want 0), with that count in *ret_to;
 * NULL when none does. */
static const AvProfile *
av_reconcile_vfs_wanted(const AvPolicy *policy, const AvPciDevice *pf, guint *ret_to)
{
    const AvProfile *profile = av_policy_match_sriov_pf(policy, pf);

    if (!profile || pf->sriov_numvfs >= av_profile_vfs_base(profile))
        return NULL;
    *ret_to = MIN(av_profile_vfs_base(profile), pf->sriov_totalvfs);
    return *ret_to > pf->sriov_numvfs ? profile : NULL;
}

/* The VF counts that "vfs": N profiles declare, on each PF they make VFs
 * on with fewer (av_reconcile_vfs_wanted()). */
static gboolean
av_reconcile_vfs(const AvRoot *root, const AvPolicy *policy, AvPool *pool, AvHost **host, AvReconcile *r,
                 GError **error)
{
    gboolean changed = FALSE;

    for (guint i = 0; i < (*host)->pci->len; i++) {
        const AvPciDevice *pf = g_ptr_array_index((*host)->pci, i);
        g_autoptr(GError) err = NULL;
        guint to = 0;
        const AvProfile *profile = av_reconcile_vfs_wanted(policy, pf, &to);

        if (!profile)
            continue;
        if (!av_pool_pf_check_change(pool, root, *host, pf, &err) ||
            !av_cli_set_vfs(root, pool, pf->address, profile->name, pf->sriov_numvfs, to, "reconcile", &err)) {
            av_reconcile_warn(r, g_strdup_printf("PF %s keeps %u VFs, profile '%s' declares %u: %s", pf->address,
                                                 pf->sriov_numvfs, profile->name, to, err->message));
            continue;
        }
        json_array_append_new(r->vfs, json_pack("{s:s, s:s, s:i, s:i}", "pf", pf->address, "profile",
                                                 profile->name, "from", (int)pf->sriov_numvfs, "to", (int)to));
        changed = TRUE;
    }
    if (!changed)
        return TRUE;
    /* The new VFs enter the pool free. */
    g_clear_pointer(host, av_host_free);
    *host = av_host_scan(root, error);
    return *host && av_pool_reconcile(pool, *host, policy, &changed, error);
}

/* NULL when the members of @dev's IOMMU group (@members, addresses) that
 * are not on vfio-pci may be bound with it: endpoints outside the pool
 * (companions, av_vfio_group_check() let them through), and pool devices
 * free or quarantined under a "keep-vfio" profile themselves.  Any other
 * pool device (another profile's, or one in use, claimed or dirty, say an
 * "on-release" GPU free on its host driver) is not accelvirt's to take from
 * its driver here: why, as a sentence (caller frees). */
static char *
av_reconcile_group_refusal(const AvPolicy *policy, const AvPool *pool, const AvHost *host,
                           const AvPoolDevice *dev, const GPtrArray *members)
{
    for (guint i = 0; i < members->len; i++) {
        const char *address = g_ptr_array_index(members, i);
        const AvPciDevice *pci = av_host_find_pci(host, address);
        const AvPoolDevice *other = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, address);
        const AvProfile *profile = other && other->profile ? av_policy_find(policy, other->profile) : NULL;

        if (g_strcmp0(address, dev->address) == 0 || !pci || av_pci_driver_is_vfio(pci->driver) || !other)
            continue;
        if (profile && profile->restore_driver == AV_RESTORE_KEEP_VFIO &&
            (other->state == AV_DEVICE_STATE_FREE || other->state == AV_DEVICE_STATE_QUARANTINED))
            continue;
        return g_strdup_printf("its IOMMU group %d also holds pool device %s (%s, profile '%s', %s) on %s, which "
                               "is not a free or quarantined device of a keep-vfio profile: binding the group "
                               "would take it from its driver", dev->iommu_group, address, other->identity,
                               other->profile ? other->profile : "none", av_device_state_to_string(other->state),
                               pci->driver ? pci->driver : "no driver");
    }
    return NULL;
}

/* The function of @dev that av_reconcile_keep_vfio() puts back on
 * vfio-pci, its profile in *ret_profile; NULL when none.  Only what
 * accelvirt left on vfio-pci: a free device once scrubbed (its last
 * tenant's release, `accelvirt scrub`), or quarantined.  A device that
 * never had a tenant stays on its host driver until a prepare binds it. */
static const AvPciDevice *
av_reconcile_keep_vfio_wanted(const AvPolicy *policy, const AvHost *host, const AvPoolDevice *dev,
                              const AvProfile **ret_profile)
{
    const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    const AvPciDevice *pci;

    if (dev->kind != AV_DEVICE_KIND_PCI || !profile || profile->restore_driver != AV_RESTORE_KEEP_VFIO ||
        !(dev->state == AV_DEVICE_STATE_QUARANTINED || (dev->state == AV_DEVICE_STATE_FREE && dev->last_scrub)))
        return NULL;
    pci = dev->address ? av_host_find_pci(host, dev->address) : NULL;
    if (!pci || av_pci_driver_is_vfio(pci->driver))
        return NULL;
    *ret_profile = profile;
    return pci;
}

/* Free (once scrubbed) and quarantined devices of "keep-vfio" profiles
 * that a reboot left on another driver: back on vfio-pci with their IOMMU
 * group, as the hook's prepare binds (av_vfio_group_check(): never a host
 * device; av_reconcile_group_refusal(): never another pool device that is
 * not itself free or quarantined under keep-vfio). */
static gboolean
av_reconcile_keep_vfio(const AvRoot *root, const AvPolicy *policy, AvPool *pool, const AvHost *host,
                       AvReconcile *r, GError **error)
{
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        const AvProfile *profile = NULL;
        const AvPciDevice *pci = av_reconcile_keep_vfio_wanted(policy, host, dev, &profile);
        g_autoptr(GPtrArray) members = NULL;
        g_autoptr(GError) err = NULL;
        g_autofree char *failure = NULL;
        json_t *bound = NULL;
        json_t *e;

        if (!pci)
            continue;
        if (!av_vfio_group_check(host, policy, pci, &members, &err) ||
            (failure = av_reconcile_group_refusal(policy, pool, host, dev, members))) {
            av_reconcile_warn(r, g_strdup_printf("%s (%s) stays on %s: %s", dev->address, dev->identity,
                                                 pci->driver ? pci->driver : "no driver",
                                                 failure ? failure : err->message));
            continue;
        }
        if (!av_pool_rebind_vfio(pool, root, av_kernel_ops_for(root), dev, members, profile->vfio_driver, &bound,
                                 &failure, error))
            return FALSE;
        if (failure) {
            av_reconcile_warn(r, g_strdup_printf("%s (%s) stays on %s: %s", dev->address, dev->identity,
                                                 pci->driver ? pci->driver : "no driver", failure));
            continue;
        }
        e = av_reconcile_device(dev);
        json_object_set_new(e, "bound", bound);
        json_array_append_new(r->bound, e);
    }
    return TRUE;
}

/* The "health" limits of their profiles on the free devices. */
static gboolean
av_reconcile_health(const AvRoot *root, const AvPolicy *policy, AvPool *pool, AvReconcile *r, GError **error)
{
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
        g_autofree char *warning = NULL;
        gboolean quarantined = FALSE;
        json_t *e;

        if (dev->state != AV_DEVICE_STATE_FREE || !profile || !profile->health.set)
            continue;
        if (!av_pool_health_check(pool, dev, profile, root, &quarantined, &warning, error))
            return FALSE;
        if (quarantined) {
            e = av_reconcile_device(dev);
            json_object_set_new(e, "reason", av_json_string_or_null(dev->reason));
            json_array_append_new(r->quarantined, e);
        }
        if (warning) {
            e = av_reconcile_device(dev);
            json_object_set_new(e, "warning", json_string(warning));
            json_array_append_new(r->health_warnings, e);
        }
    }
    return TRUE;
}

/* The function of @dev, free, with a vGPU made on it; else NULL. */
static const AvPciDevice *
av_reconcile_vgpu_found(const AvHost *host, const AvPoolDevice *dev)
{
    const AvPciDevice *pci;

    if (dev->state != AV_DEVICE_STATE_FREE || dev->kind != AV_DEVICE_KIND_PCI || !dev->address)
        return NULL;
    pci = av_host_find_pci(host, dev->address);
    return pci && pci->vgpu_capable && pci->vgpu_current > 0 ? pci : NULL;
}

/* A free VF with an NVIDIA vGPU made on it: accelvirt destroys every vGPU
 * it made before the VF is free, so someone else made this one (by hand,
 * or for a domain behind accelvirt's back): quarantined, never handed out
 * so; 'accelvirt scrub' destroys it, then 'quarantine clear'. */
static gboolean
av_reconcile_vgpus(AvPool *pool, const AvHost *host, AvReconcile *r, GError **error)
{
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        const AvPciDevice *pci = av_reconcile_vgpu_found(host, dev);
        g_autofree char *reason = NULL;
        json_t *e;

        if (!pci)
            continue;
        reason = g_strdup_printf("free with an NVIDIA vGPU (type %u) that accelvirt did not make: run 'accelvirt "
                                 "scrub %s' (its last step destroys it), then 'accelvirt quarantine clear %s'",
                                 pci->vgpu_current, dev->address, dev->address);
        if (!av_pool_quarantine_found(pool, dev, "vgpu", reason, error))
            return FALSE;
        e = av_reconcile_device(dev);
        json_object_set_new(e, "reason", json_string(reason));
        json_array_append_new(r->quarantined, e);
    }
    return TRUE;
}

/* Whether the steps that act on the host (VFs made, drivers bound, vGPUs
 * quarantined) have anything to do, as @host says. */
static gboolean
av_reconcile_acts(const AvPolicy *policy, const AvPool *pool, const AvHost *host)
{
    const AvProfile *profile = NULL;
    guint to = 0;

    for (guint i = 0; i < host->pci->len; i++)
        if (av_reconcile_vfs_wanted(policy, g_ptr_array_index(host->pci, i), &to))
            return TRUE;
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if (av_reconcile_keep_vfio_wanted(policy, host, dev, &profile) || av_reconcile_vgpu_found(host, dev))
            return TRUE;
    }
    return FALSE;
}

/* Dirty devices, and scrubbing ones whose scrub lock nobody holds (their
 * worker died): the worker this starts scrubs them. */
static void
av_reconcile_scrubs(const AvCli *cli, AvPool *pool, AvReconcile *r)
{
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        g_autoptr(AvLock) lock = NULL;
        json_t *e;

        if (dev->state != AV_DEVICE_STATE_DIRTY && dev->state != AV_DEVICE_STATE_SCRUBBING)
            continue;
        if (dev->state == AV_DEVICE_STATE_SCRUBBING) {
            /* Held: a worker scrubs it now.  The worker takes the lock
             * under the pool's, which this process holds. */
            lock = av_scrub_lock_take(cli->state_dir, dev->identity, NULL);
            if (!lock)
                continue;
        }
        e = av_reconcile_device(dev);
        json_object_set_new(e, "resumed", json_boolean(dev->state == AV_DEVICE_STATE_SCRUBBING));
        json_array_append_new(r->scrubs, e);
        av_cli_want_worker();
    }
}

/* The journal entry "reconcile", with how many of each it did, when it
 * did anything (warnings alone are not news: a timer would repeat them). */
static gboolean
av_reconcile_journal(AvPool *pool, const AvReconcile *r, GError **error)
{
    static const char *const names[] = { "vfs", "bound", "released", "quarantined", "claims_expired",
                                         "scrubs_started", "scrubs_resumed" };
    g_autoptr(json_t) fields = json_object();
    size_t i, resumed = 0;
    json_t *e;
    size_t counts[G_N_ELEMENTS(names)];
    gboolean did = FALSE;

    json_array_foreach(r->scrubs, i, e)
        resumed += json_is_true(json_object_get(e, "resumed"));
    counts[0] = json_array_size(r->vfs);
    counts[1] = json_array_size(r->bound);
    counts[2] = json_array_size(r->released);
    counts[3] = json_array_size(r->quarantined);
    counts[4] = json_array_size(r->claims_expired);
    counts[5] = json_array_size(r->scrubs) - resumed;
    counts[6] = resumed;
    for (i = 0; i < G_N_ELEMENTS(names); i++) {
        json_object_set_new(fields, names[i], json_integer((json_int_t)counts[i]));
        did = did || counts[i] > 0;
    }
    if (!did)
        return TRUE;
    json_object_set_new(fields, "warnings", json_integer((json_int_t)json_array_size(r->warnings)));
    return av_pool_journal_append(pool, "reconcile", fields, error);
}

/* One line per action, as accelvirt(1) RECONCILE shows them. */
static void
av_reconcile_print(const AvReconcile *r)
{
    static const char *const released_why[][2] = {
        { "previous-boot", "died with the previous boot" },
        { "dead-domain", "whose QEMU is gone" },
        { "release-marker", "whose release was left for later" },
    };
    size_t i, j;
    json_t *e, *b;

#define S(e, k) (json_string_value(json_object_get((e), (k))) ?: "-")
    json_array_foreach(r->vfs, i, e)
        printf("vfs: PF %s %d -> %d (profile %s)\n", S(e, "pf"), (int)json_integer_value(json_object_get(e, "from")),
               (int)json_integer_value(json_object_get(e, "to")), S(e, "profile"));
    json_array_foreach(r->bound, i, e) {
        printf("bound: %s (%s) to vfio-pci (keep-vfio)", S(e, "address"), S(e, "identity"));
        json_array_foreach(json_object_get(e, "bound"), j, b)
            printf("%s %s from %s", j == 0 ? ":" : ",", S(b, "address"), S(b, "driver"));
        printf("\n");
    }
    json_array_foreach(r->released, i, e) {
        const char *why = S(e, "why");

        for (j = 0; j < G_N_ELEMENTS(released_why); j++)
            if (g_str_equal(why, released_why[j][0]))
                why = released_why[j][1];
        printf("released: %s (%s) (domain '%s' %s): dirty, the worker scrubs it\n", S(e, "address"),
               S(e, "identity"), S(e, "domain"), why);
    }
    json_array_foreach(r->claims_expired, i, e)
        printf("claim expired: %s (%s) (domain '%s'): %s\n", S(e, "address"), S(e, "identity"), S(e, "domain"),
               g_strcmp0(S(e, "state"), "dirty") == 0 ? "dirty (programmed for the domain), the worker scrubs it"
                                                      : S(e, "state"));
    json_array_foreach(r->quarantined, i, e)
        printf("quarantined: %s (%s) (%s)\n", S(e, "address"), S(e, "identity"), S(e, "reason"));
    json_array_foreach(r->health_warnings, i, e)
        printf("health warning: %s (%s): %s\n", S(e, "address"), S(e, "identity"), S(e, "warning"));
    json_array_foreach(r->scrubs, i, e)
        printf("scrub %s: %s (%s)\n", json_is_true(json_object_get(e, "resumed")) ? "resumed" : "started",
               S(e, "address"), S(e, "identity"));
#undef S
}

int
av_cli_cmd_reconcile(AvCli *cli, int argc, char **argv)
{
    g_auto(AvReconcile) r = { json_array(), json_array(), NULL, json_array(), json_array(), json_array(),
                              json_array(), json_array() };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GError) hold_error = NULL;
    g_autoptr(json_t) states = json_object();
    guint counts[AV_DEVICE_STATE_MISSING + 1] = { 0 };
    g_autoptr(AvPlacementReport) placement = NULL;
    g_autoptr(GError) placement_error = NULL;
    AvCliSync sync = { .mode = AV_CLI_SYNC_KEEP, .before_apply = av_reconcile_claims, .data = &r,
                       .ret_released = &r.released };
    gboolean changed = FALSE;
    guint n_devices;

    if (!av_cli_parse(cli, "reconcile", "",
                      "Put the pool right with the host, at boot and on a timer: what every locked call does "
                      "(prepares that died undone, releases left for later, devices of domains whose QEMU is "
                      "gone or that went in use in an earlier boot released: dirty, to be scrubbed), claims past "
                      "their expiry freed, the VF counts that \"vfs\" profiles declare made again, keep-vfio "
                      "devices put back on vfio-pci, \"health\" limits checked on free devices, and the scrub "
                      "worker started for dirty devices and scrubs whose worker died.  Safe to run at any time.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 1)
        return av_cli_usage_error("reconcile takes no arguments");
    /* The host is scanned before the exclusive lock (the timer runs this
     * every 15 minutes; a hook never waits behind its scan), then applied
     * to the devices nobody changed meanwhile; claims expire first. */
    pool = av_cli_sync_open(cli, &sync, &root, &host, &policy, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!r.released)
        r.released = json_array();
    /* The steps below act on the host (sriov_numvfs written, groups bound
     * to vfio-pci, devices quarantined for a vGPU) by what the scan says of
     * PFs, drivers and groups: a scan taken before the lock may be older
     * than a change another writer made meanwhile, so when the scan says
     * they have anything to do (after a boot, rarely else) the host is
     * scanned again under the lock and that scan reconciled, as before the
     * scan went first.  What the older scan saw nothing to do about waits
     * for the next reconcile. */
    if (sync.scanned_first && av_reconcile_acts(policy, pool, host)) {
        g_clear_pointer(&host, av_host_free);
        if (!(host = av_host_scan(root, &err)) || !av_pool_reconcile(pool, host, policy, &changed, &err))
            return av_cli_fail(err);
    }
    if (!av_reconcile_vfs(root, policy, pool, &host, &r, &err) ||
        !av_reconcile_keep_vfio(root, policy, pool, host, &r, &err) ||
        !av_reconcile_health(root, policy, pool, &r, &err) || !av_reconcile_vgpus(pool, host, &r, &err) ||
        !av_pool_save(pool, &err))
        return av_cli_fail(err);
    /* The kernel refuses what the pool refuses (av-hold.h): holds taken
     * for dirty and quarantined devices on vfio-pci, dropped for the rest. */
    if (!av_pool_holds_sync(pool, root, av_kernel_ops_for(root), &hold_error))
        av_reconcile_warn(&r, g_strdup(hold_error->message));
    av_reconcile_scrubs(cli, pool, &r);
    if (!av_reconcile_journal(pool, &r, &err))
        return av_cli_fail(err);
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if ((guint)dev->state < G_N_ELEMENTS(counts))
            counts[dev->state]++;
    }
    for (guint i = 0; i < G_N_ELEMENTS(counts); i++)
        json_object_set_new(states, av_device_state_to_string((AvDeviceState)i), json_integer(counts[i]));
    n_devices = av_pool_devices(pool)->len;
    /* Placement, without the pool's lock (HTTP may take seconds). */
    g_clear_pointer(&pool, av_pool_free);
    if (!av_cli_placement_sync(cli, root, policy, &placement, &placement_error))
        av_reconcile_warn(&r, g_strdup_printf("Placement sync: %s", placement_error->message));
    if (cli->json) {
        av_cli_print_json(json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:o, s:{s:i, s:i}}", "vfs",
                                    r.vfs, "bound", r.bound, "released", r.released, "claims_expired",
                                    r.claims_expired, "quarantined", r.quarantined, "health_warnings",
                                    r.health_warnings, "scrubs", r.scrubs, "warnings", r.warnings, "states", states,
                                    "holds_error", av_json_string_or_null(hold_error ? hold_error->message : NULL),
                                    "placement", "applied", placement ? (int)placement->applied : 0, "pending",
                                    placement ? (int)placement->pending : 0));
        return AV_EXIT_OK;
    }
    av_reconcile_print(&r);
    if (placement && (placement->applied || placement->pending || json_array_size(placement->results)))
        printf("placement: %u applied, %u pending\n", placement->applied, placement->pending);
    printf("reconciled %u devices:", n_devices);
    for (guint i = 0; i < G_N_ELEMENTS(counts); i++)
        if (counts[i])
            printf(" %u %s", counts[i], av_device_state_to_string((AvDeviceState)i));
    printf("\n");
    return AV_EXIT_OK;
}
