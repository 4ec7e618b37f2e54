/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: SR-IOV VFs that accelvirt makes and takes back.
 *
 * A profile with "vfs" (accelvirt-policy(5), MAKING VFS) lets accelvirt
 * write sriov_numvfs on the PFs it matches (av_policy_match_sriov_pf()).
 * The kernel changes a non-zero count only through 0, which removes every
 * VF, so a count changes only from 0 or while every VF of the PF is idle
 * (av_pool_vf_check_idle(): free, on vfio-pci or no driver, its group held
 * by no process, no mdev on it); the hook changes only a count of 0;
 * a PF that the pool holds for a domain (or that is not free) gets no VF;
 * and a PF whose VFs are not all free is never handed out whole
 * (av_pool_pf_check_vfs()).  VFs that go away stay in the pool as missing
 * (their claims and history with them) until they come back. */
#include "config.h"

#include <string.h>

#include "av-pool-private.h"
#include "av-pool-placement.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-vfio.h"

void
av_vf_growth_free(AvVfGrowth *growth)
{
    if (!growth)
        return;
    g_free(growth->pf);
    g_free(growth->profile);
    g_free(growth);
}

/* The pool's record of the PCI function at @address, or NULL. */
static const AvPoolDevice *
av_pool_sriov_record(const AvPool *pool, const char *address)
{
    return av_pool_find_address(pool, AV_DEVICE_KIND_PCI, address);
}

/* The same from @pool, or from @index (av_pool_pci_index()) when not NULL. */
static const AvPoolDevice *
av_pool_sriov_record_in(const AvPool *pool, GHashTable *index, const char *address)
{
    return index ? g_hash_table_lookup(index, address) : av_pool_sriov_record(pool, address);
}

/* av_pool_pf_check_vfs(), its records from @pool or @index. */
static gboolean
av_pool_pf_check_vfs_at(const AvPool *pool, GHashTable *index, const AvHost *host, const char *pf_address,
                        GError **error)
{
    const AvPciDevice *pf = av_host_find_pci(host, pf_address);

    for (guint i = 0; pf && pf->virtfns && i < pf->virtfns->len; i++) {
        const char *vf = g_ptr_array_index(pf->virtfns, i);
        const AvPoolDevice *rec = av_pool_sriov_record_in(pool, index, vf);

        if (rec && rec->state != AV_DEVICE_STATE_FREE) {
            g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                        "PF '%s' is not free: its VF '%s' (%s) is %s; wait until every VF of the PF is free",
                        pf_address, vf, rec->identity, av_device_state_to_string(rec->state));
            return FALSE;
        }
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_pf_check_vfs(const AvPool *pool, const AvHost *host, const char *pf_address, GError **error)
{
    return av_pool_pf_check_vfs_at(pool, NULL, host, pf_address, error);
}

/* See av-pool.h. */
gboolean
av_pool_pf_check_vfs_in(GHashTable *index, const AvHost *host, const char *pf_address, GError **error)
{
    return av_pool_pf_check_vfs_at(NULL, index, host, pf_address, error);
}

/* The state that counts for the record @rec: a missing device counts as
 * what it was before it went missing (its claims and its dirt survive). */
static AvDeviceState
av_pool_sriov_state(const AvPoolDevice *rec)
{
    return rec->state == AV_DEVICE_STATE_MISSING ? rec->state_before_missing : rec->state;
}

/* See av-pool.h. */
gboolean
av_pool_vf_check_idle(const AvPool *pool, const AvRoot *root, const char *vf, GError **error)
{
    const AvPoolDevice *rec = av_pool_sriov_record(pool, vf);
    g_autofree char *driver = av_vfio_current_driver(root, vf);
    g_autofree char *dir = av_sys_path("bus/pci/devices/%s", vf);
    g_autofree char *group_link = av_sys_path("bus/pci/devices/%s/iommu_group", vf);
    g_autofree char *group = NULL;
    g_auto(GStrv) entries = NULL;
    guint64 n = 0;

    if (rec && av_pool_sriov_state(rec) != AV_DEVICE_STATE_FREE) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "its VF '%s' is %s%s in the pool%s%s", vf,
                    av_device_state_to_string(rec->state),
                    rec->state == AV_DEVICE_STATE_MISSING ? " (and was not free before)" : "",
                    rec->owner ? ", owner " : "",
                    rec->owner ? (rec->owner->domain_name ? rec->owner->domain_name : rec->owner->domain_uuid) : "");
        return FALSE;
    }
    if (driver && !av_pci_driver_is_vfio(driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "its VF '%s' is on the host driver %s (the host uses it)", vf,
                    driver);
        return FALSE;
    }
    if (driver && av_root_link_name(root, group_link, &group) >= 0 &&
        g_ascii_string_to_unsigned(group, 10, 0, G_MAXINT, &n, NULL)) {
        g_autofree char *holder = av_vfio_group_holder_full(root, pool->state_dir, (int)n);

        if (holder) {
            g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                        "its VF '%s' is held through its IOMMU group %s by process %s", vf, group, holder);
            return FALSE;
        }
    }
    if (av_root_list_dir(root, dir, &entries) >= 0) {
        for (guint i = 0; entries[i]; i++) {
            g_autofree char *type = g_strconcat(dir, "/", entries[i], "/mdev_type", NULL);
            g_autofree char *target = NULL;

            if (av_uuid_is_valid(entries[i]) && av_root_read_link(root, type, &target) >= 0) {
                g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "its VF '%s' is the parent of the mdev %s", vf,
                            entries[i]);
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* av_pool_vf_check_pf(), its record from @pool or @index. */
static gboolean
av_pool_vf_check_pf_at(const AvPool *pool, GHashTable *index, const AvPciDevice *vf, GError **error)
{
    const AvPoolDevice *rec = vf->physfn ? av_pool_sriov_record_in(pool, index, vf->physfn) : NULL;

    if (rec && rec->state != AV_DEVICE_STATE_FREE) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "VF '%s' is not free: its PF '%s' (%s) is %s%s%s; wait until the "
                    "PF is free", vf->address, vf->physfn, rec->identity, av_device_state_to_string(rec->state),
                    rec->owner ? ", owner " : "",
                    rec->owner ? (rec->owner->domain_name ? rec->owner->domain_name : rec->owner->domain_uuid) : "");
        return FALSE;
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_vf_check_pf(const AvPool *pool, const AvPciDevice *vf, GError **error)
{
    return av_pool_vf_check_pf_at(pool, NULL, vf, error);
}

/* See av-pool.h. */
gboolean
av_pool_vf_check_pf_in(GHashTable *index, const AvPciDevice *vf, GError **error)
{
    return av_pool_vf_check_pf_at(NULL, index, vf, error);
}

/* See av-pool.h. */
gboolean
av_pool_pf_check_change(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPciDevice *pf,
                        GError **error)
{
    const AvPoolDevice *rec = av_pool_sriov_record(pool, pf->address);

    if (rec && rec->state != AV_DEVICE_STATE_FREE) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "accelvirt makes no VF on PF '%s': the PF itself is %s%s%s",
                    pf->address, av_device_state_to_string(rec->state), rec->owner ? ", owner " : "",
                    rec->owner ? (rec->owner->domain_name ? rec->owner->domain_name : rec->owner->domain_uuid) : "");
        return FALSE;
    }
    /* The kernel makes VFs through the PF's driver (sriov_configure): none
     * is -ENOENT; vfio-pci means a domain may hold the PF behind the
     * pool's back. */
    if (!pf->driver || av_pci_driver_is_vfio(pf->driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "accelvirt makes no VF on PF '%s': it is on %s, not on its host "
                    "driver", pf->address, pf->driver ? pf->driver : "no driver");
        return FALSE;
    }
    (void)host;
    for (guint i = 0; pf->sriov_numvfs > 0 && pf->virtfns && i < pf->virtfns->len; i++) {
        if (!av_pool_vf_check_idle(pool, root, g_ptr_array_index(pf->virtfns, i), error)) {
            g_prefix_error(error, "cannot change the VF count of PF '%s' (the kernel changes a count only through "
                           "0, which removes every VF): ", pf->address);
            return FALSE;
        }
    }
    return TRUE;
}

/* TRUE when accelvirt may change the VF count of @pf now; else FALSE,
 * and the reason in *@why when it holds none yet (@why may be NULL). */
static gboolean
av_pool_pf_may_change(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPciDevice *pf, char **why)
{
    g_autoptr(GError) error = NULL;

    if (av_pool_pf_check_change(pool, root, host, pf, &error))
        return TRUE;
    if (why && !*why)
        *why = g_strdup(error->message);
    return FALSE;
}

/* How many VFs of @profile are free now (or claimed by @domain_uuid). */
static guint
av_pool_vfs_free(const AvPool *pool, const AvHost *host, const AvPolicy *policy, const AvProfile *profile,
                 const char *domain_uuid)
{
    guint n = 0;

    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *dev = g_ptr_array_index(host->pci, i);
        const AvPoolDevice *rec;

        if (!dev->physfn || av_policy_match_pci(policy, dev) != profile)
            continue;
        rec = av_pool_sriov_record(pool, dev->address);
        if (!rec || rec->state == AV_DEVICE_STATE_FREE ||
            (rec->state == AV_DEVICE_STATE_CLAIMED && rec->owner && domain_uuid &&
             g_strcmp0(rec->owner->domain_uuid, domain_uuid) == 0))
            n++;
    }
    return n;
}

/* The count to write on @pf for @need more VFs of @profile, or 0 when it
 * cannot give any: its declared "vfs" (never fewer than now), or on demand
 * now + @need, at most sriov_totalvfs. */
static guint
av_pool_pf_target(const AvProfile *profile, const AvPciDevice *pf, guint need)
{
    guint to = profile->vfs_on_demand ? pf->sriov_numvfs + need : MAX(profile->vfs, pf->sriov_numvfs);

    to = MIN(to, pf->sriov_totalvfs);
    return to > pf->sriov_numvfs ? to : 0;
}

/* Adds to @out the changes that give @profile @need more VFs. */
static void
av_pool_grow_profile(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPolicy *policy, const AvProfile *profile,
                     guint need, GPtrArray *out, char **why)
{
    for (guint i = 0; need > 0 && i < host->pci->len; i++) {
        const AvPciDevice *pf = g_ptr_array_index(host->pci, i);
        AvVfGrowth *g;
        guint to;

        if (av_policy_match_sriov_pf(policy, pf) != profile || !av_pool_pf_may_change(pool, root, host, pf, why))
            continue;
        to = av_pool_pf_target(profile, pf, need);
        if (to == 0)
            continue;
        g = g_new0(AvVfGrowth, 1);
        g->pf = g_strdup(pf->address);
        g->profile = g_strdup(profile->name);
        g->from = pf->sriov_numvfs;
        g->to = to;
        g_ptr_array_add(out, g);
        need = to - pf->sriov_numvfs >= need ? 0 : need - (to - pf->sriov_numvfs);
    }
}

/* See av-pool.h. */
GPtrArray *
av_pool_vf_growth(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPolicy *policy,
                  const GPtrArray *requests, const char *domain_uuid, char **ret_why)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)av_vf_growth_free);
    g_autoptr(GHashTable) wanted = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GPtrArray) order = g_ptr_array_new();

    for (guint i = 0; requests && i < requests->len; i++) {
        const AvRequest *r = g_ptr_array_index(requests, i);
        const AvProfile *p = av_policy_find(policy, r->profile);
        guint sum;

        if (!av_profile_makes_vfs(p))
            continue;
        if (!g_hash_table_contains(wanted, p))
            g_ptr_array_add(order, (gpointer)p);
        sum = GPOINTER_TO_UINT(g_hash_table_lookup(wanted, p)) + r->count;
        g_hash_table_insert(wanted, (gpointer)p, GUINT_TO_POINTER(sum));
    }
    for (guint i = 0; i < order->len; i++) {
        const AvProfile *p = g_ptr_array_index(order, i);
        guint want = GPOINTER_TO_UINT(g_hash_table_lookup(wanted, p));
        guint have = av_pool_vfs_free(pool, host, policy, p, domain_uuid);

        if (want > have)
            av_pool_grow_profile(pool, root, host, policy, p, want - have, out, ret_why);
    }
    return out;
}

/* See av-pool.h. */
gboolean
av_pool_vf_set_count(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *pf, const char *profile,
                     guint from, guint to, const char *by, GError **error)
{
    g_autoptr(json_t) fields = json_object();
    g_autoptr(GError) local = NULL;
    gboolean ok = av_sriov_set_numvfs(root, ops, pf, to, AV_SRIOV_WAIT_MS, &local);

    json_object_set_new(fields, "pf", json_string(pf));
    json_object_set_new(fields, "profile", av_json_string_or_null(profile));
    json_object_set_new(fields, "from", json_integer(from));
    json_object_set_new(fields, "to", json_integer(to));
    json_object_set_new(fields, "by", json_string(by));
    if (!ok)
        json_object_set_new(fields, "error", json_string(local->message));
    if (!av_pool_journal_append(pool, ok ? "vfs-set" : "vfs-set-failed", fields, error))
        return FALSE;
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot set the VFs of PF '%s' to %u: ", pf, to);
        return FALSE;
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_vf_shrink_target(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPolicy *policy,
                         const char *pf_address, guint *ret_count)
{
    const AvPciDevice *pf = av_host_find_pci(host, pf_address);
    const AvProfile *profile = pf ? av_policy_match_sriov_pf(policy, pf) : NULL;
    guint base;

    if (!profile || !profile->vfs_shrink)
        return FALSE;
    base = av_profile_vfs_base(profile);
    if (pf->sriov_numvfs <= base || !av_pool_pf_may_change(pool, root, host, pf, NULL))
        return FALSE;
    *ret_count = base;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_vf_undo(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *pf, guint from, guint to,
                const char *by, GError **error)
{
    g_autofree char *num_path = av_sys_path("bus/pci/devices/%s/sriov_numvfs", pf);
    guint64 now;

    (void)to;
    if (av_root_read_uint(root, num_path, 10, &now) < 0 || now == from)
        return TRUE;
    for (guint i = 0; i < now; i++) {
        g_autofree char *link = av_sys_path("bus/pci/devices/%s/virtfn%u", pf, i);
        g_autofree char *vf = NULL;

        if (av_root_link_name(root, link, &vf) < 0)
            continue;
        if (!av_pool_vf_check_idle(pool, root, vf, error)) {
            g_prefix_error(error, "cannot set the VFs of PF '%s' back from %" G_GUINT64_FORMAT " to %u: ", pf, now,
                           from);
            return FALSE;
        }
    }
    return av_pool_vf_set_count(pool, root, ops, pf, NULL, (guint)now, from, by, error);
}
