/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: matching: which profile of a policy takes a PCI device, an
 * SR-IOV PF, an mdev parent or a USB device, and the lookup by name. */
#include "config.h"

#include "av-policy-private.h"

#include <string.h>

/* ---- matching ---- */

const AvProfile *
find_profile(GPtrArray *profiles, const char *name)
{
    for (guint i = 0; profiles && i < profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(profiles, i);
        if (g_str_equal(p->name, name))
            return p;
    }
    return NULL;
}

static gboolean
profile_match_ids(const AvProfile *p, guint16 vendor, guint16 device)
{
    gboolean found;

    if (p->match_vendor_set && p->match_vendor != vendor)
        return FALSE;
    if (p->match_devices->len == 0)
        return TRUE;
    found = FALSE;
    for (guint i = 0; i < p->match_devices->len && !found; i++)
        found = g_array_index(p->match_devices, guint16, i) == device;
    return found;
}

static gboolean
profile_match_address(const AvProfile *p, const char *address)
{
    if (p->match_addresses->len == 0)
        return TRUE;
    if (!address)
        return FALSE;
    for (guint i = 0; i < p->match_addresses->len; i++) {
        if (g_str_equal(g_ptr_array_index(p->match_addresses, i), address))
            return TRUE;
    }
    return FALSE;
}

/* The profile's class and subsystem ids, those it gives, match @dev's. */
static gboolean
profile_match_class_subsystem(const AvProfile *p, const AvPciDevice *dev)
{
    if (p->match_class_set && (dev->class_code & p->match_class_mask) != p->match_class)
        return FALSE;
    if (p->match_subsystem_vendor_set && dev->subsystem_vendor_id != p->match_subsystem_vendor)
        return FALSE;
    return !p->match_subsystem_device_set || dev->subsystem_device_id == p->match_subsystem_device;
}

static gboolean
profile_match_pf(const AvProfile *p, const char *pf_address)
{
    for (guint i = 0; i < p->match_pfs->len; i++)
        if (g_str_equal(g_ptr_array_index(p->match_pfs, i), pf_address))
            return TRUE;
    return p->match_pfs->len == 0;
}

/* See av-policy.h. */
gboolean
av_profile_makes_vfs(const AvProfile *profile)
{
    return profile && profile->attach == AV_ATTACH_SRIOV_VF && (profile->vfs > 0 || profile->vfs_on_demand);
}

/* See av-policy.h. */
guint
av_profile_vfs_base(const AvProfile *profile)
{
    return profile->vfs_on_demand ? 0 : profile->vfs;
}

/* See av-policy.h. */
const AvProfile *
av_policy_match_sriov_pf(const AvPolicy *policy, const AvPciDevice *pf)
{
    if (!policy || !pf || !pf->sriov_capable || pf->physfn || !pf->sriov_vf_device_set)
        return NULL;
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        if (av_profile_makes_vfs(p) && profile_match_pf(p, pf->address) &&
            profile_match_ids(p, pf->vendor_id, pf->sriov_vf_device) && profile_match_class_subsystem(p, pf))
            return p;
    }
    return NULL;
}

static gboolean
pci_offers_mdev_type(const AvPciDevice *dev, const char *type)
{
    for (guint i = 0; dev->mdev_types && i < dev->mdev_types->len; i++) {
        const AvMdevType *t = g_ptr_array_index(dev->mdev_types, i);
        if (t->id && type && g_str_equal(t->id, type))
            return TRUE;
    }
    return FALSE;
}

static gboolean
profile_names_parent(const AvProfile *p, const char *name)
{
    for (guint i = 0; p->match_mdev_parents && i < p->match_mdev_parents->len; i++)
        if (g_str_equal(g_ptr_array_index(p->match_mdev_parents, i), name))
            return TRUE;
    return FALSE;
}

/* See av-policy.h. */
const AvProfile *
av_policy_match_mdev_parent(const AvPolicy *policy, const AvMdevParent *parent)
{
    if (!policy || !parent)
        return NULL;
    if (parent->pci) {
        const AvProfile *p = av_policy_match_pci(policy, parent->pci);

        return p && p->attach == AV_ATTACH_MDEV ? p : NULL;
    }
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);
        gboolean offers = FALSE;

        if (p->attach != AV_ATTACH_MDEV || !p->mdev_type || !profile_names_parent(p, parent->name))
            continue;
        for (guint j = 0; parent->types && j < parent->types->len && !offers; j++)
            offers = g_strcmp0(((const AvMdevType *)g_ptr_array_index(parent->types, j))->id, p->mdev_type) == 0;
        if (offers)
            return p;
    }
    return NULL;
}

/* The first profile that takes the PCI function @dev (accelvirt-policy(5),
 * MATCHING), or NULL.  Borrowed from @policy. */
const AvProfile *
av_policy_match_pci(const AvPolicy *policy, const AvPciDevice *dev)
{
    if (!policy || !dev)
        return NULL;
    /* bridges, host bridges included, are the host's own plumbing */
    if ((dev->class_code >> 16) == 0x06 || dev->is_bridge)
        return NULL;
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        switch (p->attach) {
        case AV_ATTACH_USB:
            continue;
        case AV_ATTACH_VFIO_PCI:
            if (dev->physfn)
                continue;
            break;
        case AV_ATTACH_SRIOV_VF:
            if (!dev->physfn || !profile_match_pf(p, dev->physfn))
                continue;
            break;
        case AV_ATTACH_NETDEV:
            /* Any function, its interface or not: a card whose host driver
             * is not loaded yet is the pool's all the same (the hook refuses
             * it to a domain while it has no interface). */
            break;
        case AV_ATTACH_MDEV:
            if (!pci_offers_mdev_type(dev, p->mdev_type))
                continue;
            /* A profile naming its parents takes these and no other. */
            if (p->match_mdev_parents && p->match_mdev_parents->len > 0) {
                if (!profile_names_parent(p, dev->address))
                    continue;
                return p;
            }
            break;
        }
        if (!profile_match_ids(p, dev->vendor_id, dev->device_id) || !profile_match_class_subsystem(p, dev))
            continue;
        if (!profile_match_address(p, dev->address))
            continue;
        return p;
    }
    return NULL;
}

/* See av-policy.h. */
gboolean
av_profile_names_companion(const AvProfile *profile, const AvPciDevice *dev)
{
    for (guint i = 0; profile && dev && i < profile->companions->len; i++) {
        const AvCompanionMatch *c = g_ptr_array_index(profile->companions, i);
        gboolean ok = TRUE;

        if (c->vendor_set && dev->vendor_id != c->vendor)
            ok = FALSE;
        if (ok && c->devices->len > 0) {
            gboolean found = FALSE;

            for (guint j = 0; j < c->devices->len && !found; j++)
                found = g_array_index(c->devices, guint16, j) == dev->device_id;
            ok = found;
        }
        if (ok && c->class_set && (dev->class_code & c->class_mask) != c->class_code)
            ok = FALSE;
        if (ok)
            return TRUE;
    }
    return FALSE;
}

/* See av-policy.h. */
gboolean
av_profile_runtime_id(const AvProfile *profile, guint16 vendor, guint16 product)
{
    guint32 id = (guint32)vendor << 16 | product;

    for (guint i = 0; profile && profile->runtime_ids && i < profile->runtime_ids->len; i++) {
        if (g_array_index(profile->runtime_ids, guint32, i) == id)
            return TRUE;
    }
    return FALSE;
}

/* The first "usb" profile that takes the USB device @dev, or NULL.
 * Borrowed from @policy. */
const AvProfile *
av_policy_match_usb(const AvPolicy *policy, const AvUsbDevice *dev)
{
    if (!policy || !dev)
        return NULL;
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        if (p->attach != AV_ATTACH_USB)
            continue;
        if (!profile_match_ids(p, dev->vendor_id, dev->product_id))
            continue;
        if (!profile_match_address(p, dev->bus_path))
            continue;
        return p;
    }
    return NULL;
}

/* The profile named @name, or NULL.  Borrowed from @policy. */
const AvProfile *
av_policy_find(const AvPolicy *policy, const char *name)
{
    if (!policy || !name)
        return NULL;
    return find_profile(policy->profiles, name);
}
