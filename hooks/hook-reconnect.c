/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the hook's "reconnect begin" (hook.h), when libvirtd restarts
 * and finds a domain running: the pool brought in line with the devices
 * the domain holds, where that can be done without failing. */
#include "config.h"

#include "hook.h"

#include <syslog.h>

#include "place/av-place.h"

/* "reconnect begin": libvirtd restarted and found the domain running.  The
 * pool's claims are reconciled with what the domain holds; a difference is
 * logged, never fatal (a failure would make libvirt kill the domain). */
int
av_hook_reconnect(const AvHookConfig *config, const AvDomain *domain)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvOwner) owner = av_hook_owner_new(domain);
    g_autoptr(GPtrArray) managed = NULL;
    g_autoptr(GPtrArray) owned = NULL;
    gboolean changed = FALSE;

    policy = av_policy_load_dir(config->policy_dir, &error);
    if (policy)
        pool = av_hook_pool_open(config, &error);
    if (pool)
        host = av_hook_scan_for(config, policy, pool, domain, &error);
    if (!host) {
        av_hook_log(LOG_ERR, "reconnect: cannot check the pool against the domain: %s", error->message);
        return 0;
    }
    /* The owner the pool records is the pinned one, whatever the metadata
     * says now (a mismatch is logged; the domain runs already). */
    if (!av_pool_owner_resolve(pool, av_policy_owner_metadata_trusted(policy), owner, &error)) {
        av_hook_log(LOG_WARNING, "reconnect: %s; the pinned owner is kept", error->message);
        g_clear_error(&error);
        g_clear_pointer(&owner->nova_project, g_free);
        g_clear_pointer(&owner->nova_user, g_free);
        av_pool_owner_resolve(pool, FALSE, owner, NULL);
    }
    if (!av_hook_resolve(config, host, policy, pool, domain, &managed, &error)) {
        av_hook_log(LOG_ERR, "reconnect: %s", error->message);
        g_clear_error(&error);
        managed = g_ptr_array_new();
    }
    for (guint i = 0; i < managed->len; i++) {
        AvManaged *m = g_ptr_array_index(managed, i);
        AvPoolDevice *dev = m->pooldev;
        g_autofree char *what = NULL;
        g_autofree char *who = NULL;

        if (!dev) {
            /* An mdev the pool does not know: the domain runs with it. */
            if (!m->mdev_exists)
                continue;
            dev = av_pool_add(pool, AV_DEVICE_KIND_MDEV, m->identity, m->mdev_parent, m->profile->name,
                              AV_DEVICE_STATE_IN_USE, owner, &error);
            if (!dev) {
                av_hook_log(LOG_ERR, "reconnect: %s", error->message);
                g_clear_error(&error);
                continue;
            }
            dev->numa_node = m->mdev_node;
            av_hook_log(LOG_WARNING, "reconnect: mdev %s was not in the pool; recorded in use by this domain",
                        m->hostdev->mdev_uuid);
            changed = TRUE;
            continue;
        }
        what = av_hook_describe_device(dev);
        who = av_hook_describe_owner(dev->owner);
        if (av_pool_is_scrub_domain(dev, domain->uuid)) {
            av_hook_log(LOG_INFO, "reconnect: scrub domain '%s' runs with device %s, which is %s", domain->name,
                        what, av_device_state_to_string(dev->state));
            continue;
        }
        if (dev->owner && g_strcmp0(dev->owner->domain_uuid, domain->uuid) != 0) {
            av_hook_log(LOG_ERR, "reconnect: the running domain uses device %s, which the pool says is %s, "
                        "owner %s; check both domains", what, av_device_state_to_string(dev->state), who);
            continue;
        }
        if (dev->state == AV_DEVICE_STATE_IN_USE)
            continue;
        if (dev->state == AV_DEVICE_STATE_FREE || dev->state == AV_DEVICE_STATE_CLAIMED) {
            if (!av_pool_take(pool, dev, owner, &error)) {
                av_hook_log(LOG_ERR, "reconnect: %s", error->message);
                g_clear_error(&error);
                continue;
            }
            av_hook_log(LOG_WARNING, "reconnect: device %s was %s in the pool though this domain runs with it; "
                        "recorded in use", what, dev->owner ? "claimed" : "free");
            changed = TRUE;
        } else {
            av_hook_log(LOG_ERR, "reconnect: the running domain uses device %s, which the pool says is %s; "
                        "left as it is", what, av_device_state_to_string(dev->state));
        }
    }
    owned = av_pool_find_owned(pool, domain->uuid);
    for (guint i = 0; i < owned->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(owned, i);
        gboolean in_xml = FALSE;

        /* Named by the XML, or taken with a device it names (its IOMMU group). */
        for (guint j = 0; j < managed->len && !in_xml; j++) {
            const AvManaged *m = g_ptr_array_index(managed, j);

            in_xml = m->pooldev == dev || g_strcmp0(m->identity, dev->identity) == 0 ||
                     (m->pooldev && m->pooldev->kind == AV_DEVICE_KIND_PCI && dev->kind == AV_DEVICE_KIND_PCI &&
                      m->pooldev->iommu_group >= 0 && m->pooldev->iommu_group == dev->iommu_group);
        }
        if (!in_xml) {
            g_autofree char *what = av_hook_describe_device(dev);
            av_hook_log(LOG_WARNING, "reconnect: the pool says this domain holds device %s (%s), which its "
                        "XML does not name", what, av_device_state_to_string(dev->state));
        }
    }
    if (changed && !av_pool_save(pool, &error))
        av_hook_log(LOG_ERR, "reconnect: cannot save the pool: %s", error->message);
    return 0;
}
