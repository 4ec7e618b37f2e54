/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the hook's "prepare begin" (hook.h), which libvirt runs before
 * it allocates the domain's resources (docs/hooks.rst: a refusal stops the
 * start).  The domain's hostdevs that accelvirt manages are found
 * (av_hook_resolve(), which "reconnect begin" uses too); then, phase after
 * phase (av_hook_prepare()), they are checked, planned in a write-ahead
 * record, bound or made (VFs, vGPUs, mdevs) and recorded in use in the
 * pool, and a failure undoes what was done.  A scrub domain of accelvirt's
 * own takes its device with its token instead (av_hook_prepare_scrub()). */
#include "config.h"

#include "hook.h"

#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "pci/av-pci.h"
#include "fpga/av-bitstream.h"
#include "place/av-place.h"
#include "scrub/av-scrub.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-vfio.h"

/* Frees @m, an element of av_hook_resolve()'s array. */
static void
av_managed_free(AvManaged *m)
{
    if (!m)
        return;
    g_free(m->identity);
    g_free(m->mdev_parent);
    g_free(m);
}

/* --- which hostdevs are managed ---------------------------------------------- */

/* The av:placement entry of the mdev @uuid, or NULL.  Borrowed. */
static const AvPlacedDevice *
av_hook_find_placed_mdev(const AvDomain *domain, const char *uuid)
{
    for (guint i = 0; domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);

        if (p->mdev_uuid && g_str_equal(p->mdev_uuid, uuid))
            return p;
    }
    return NULL;
}

/* --- USB hostdevs --- */

/* "USB hostdev ua-accelvirt-2 (vendor 0x03e7 product 0x2485, bus 1 device
 * 5)", what the XML says of @h.  Caller frees. */
static char *
av_hook_describe_usb_hostdev(const AvHostdev *h)
{
    GString *s = g_string_new("USB hostdev");

    if (h->alias)
        g_string_append_printf(s, " %s", h->alias);
    g_string_append(s, " (");
    if (h->usb_vendor)
        g_string_append_printf(s, "vendor 0x%04x product 0x%04x%s", h->usb_vendor, h->usb_product,
                               h->usb_bus >= 0 ? ", " : "");
    if (h->usb_bus >= 0)
        g_string_append_printf(s, "bus %d device %d", h->usb_bus, h->usb_device);
    g_string_append_c(s, ')');
    return g_string_free(s, FALSE);
}

/* "1-2 (bus 1 device 5, serial S1)" or "(..., no serial)".  Caller frees. */
static char *
av_hook_describe_usb(const AvUsbDevice *usb)
{
    return g_strdup_printf("%s (bus %u device %u, %s%s)", usb->bus_path, usb->busnum, usb->devnum,
                           usb->serial ? "serial " : "no serial", usb->serial ? usb->serial : "");
}

/* The av:usb entry of av:placement for the hostdev @h (by its alias), or
 * NULL.  Borrowed. */
static const AvPlacedDevice *
av_hook_find_placed_usb(const AvDomain *domain, const AvHostdev *h)
{
    for (guint i = 0; h->alias && domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);

        if (p->usb_bus_path && g_strcmp0(p->alias, h->alias) == 0)
            return p;
    }
    return NULL;
}

/* FALSE with @error when the av:placement entry @placed of the hostdev @h
 * names another stick than @usb (NULL: no device at those numbers): bus
 * and device numbers change when a stick re-enumerates, the identity does
 * not.  Only a stick the pool holds (@placed's, or @usb's) matters. */
static gboolean
av_hook_usb_check_placed(AvPool *pool, const AvDomain *domain, const AvHostdev *h, const AvPlacedDevice *placed,
                         const AvUsbDevice *usb, GError **error)
{
    AvPoolDevice *want = placed->usb_identity ? av_pool_find(pool, placed->usb_identity) : NULL;
    AvPoolDevice *got = usb ? av_pool_find_usb(pool, usb) : NULL;
    g_autofree char *what = NULL;
    g_autofree char *now = NULL;
    gboolean same;

    if (!want && !got)
        return TRUE;
    if (placed->usb_identity)
        same = got && g_strcmp0(got->identity, placed->usb_identity) == 0;
    else
        same = usb && g_str_equal(usb->bus_path, placed->usb_bus_path);
    if (same)
        return TRUE;
    what = av_hook_describe_usb_hostdev(h);
    now = usb ? av_hook_describe_usb(usb) : g_strdup("no device");
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "%s names %s, not the stick its av:placement names (%s, last at %s): USB bus and device numbers "
                "change when a stick re-enumerates; run 'accelvirt start %s' (or 'accelvirt rewrite'), which "
                "refreshes them", what, now, placed->usb_identity ? placed->usb_identity : "no identity",
                placed->usb_bus_path, domain->name);
    return FALSE;
}

/* The pool device that the host's USB device @usb, which the hostdev @h
 * of @domain gets, is, in *ret_dev (NULL: none of the pool's).  A device
 * at a port where the pool has a USB entry is that entry's business
 * whatever ids it presents: a stick whose firmware changed its ids keeps
 * the identity of its first ids, so a look-up by identity alone would miss
 * it.  FALSE with @error when it presents other than the entry's identity,
 * unless it is one of its profile's runtime ids and @domain runs on it
 * (in-use, its owner).  No entry at its port: by identity
 * (av_pool_find_usb()). */
static gboolean
av_hook_pool_usb(const AvPolicy *policy, AvPool *pool, const AvDomain *domain, const AvHostdev *h,
                 const AvUsbDevice *usb, AvPoolDevice **ret_dev, GError **error)
{
    AvPoolDevice *dev = av_pool_find_address(pool, AV_DEVICE_KIND_USB, usb->bus_path);
    const AvProfile *profile = dev && dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    g_autofree char *what = NULL;
    g_autofree char *now = NULL;
    g_autofree char *stick = NULL;
    g_autofree char *who = NULL;

    *ret_dev = NULL;
    if (!dev) {
        *ret_dev = av_pool_find_usb(pool, usb);
        return TRUE;
    }
    switch (av_pool_usb_presents(dev, usb, profile)) {
    case AV_POOL_USB_SAME:
        *ret_dev = dev;
        return TRUE;
    case AV_POOL_USB_RUNTIME:
        if (dev->state == AV_DEVICE_STATE_IN_USE && dev->owner &&
            g_strcmp0(dev->owner->domain_uuid, domain->uuid) == 0) {
            *ret_dev = dev;
            return TRUE;
        }
        break;
    case AV_POOL_USB_OTHER:
    default:
        break;
    }
    what = av_hook_describe_usb_hostdev(h);
    now = av_hook_describe_usb(usb);
    stick = av_hook_describe_device(dev);
    who = av_hook_describe_owner(dev->owner);
    g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                "%s names %s, which presents %04x:%04x at the port of stick %s (%s, owner %s): %s; only the domain "
                "running on it may have it, and only while it is in use; check 'accelvirt status' and "
                "'accelvirt reconcile'", what, now, usb->vendor_id, usb->product_id, stick,
                av_device_state_to_string(dev->state), who,
                av_pool_usb_presents(dev, usb, profile) == AV_POOL_USB_RUNTIME
                    ? "one of the runtime_ids of its profile, a tenant's firmware"
                    : "not the ids of that stick");
    return FALSE;
}

/* The pooled sticks with the vendor and product of the hostdev @h (the
 * identity starts "usb:VVVV:PPPP"), in a new array.  Borrowed from @pool. */
static GPtrArray *
av_hook_pooled_usb_ids(AvPool *pool, const AvHostdev *h)
{
    g_autofree char *prefix = g_strdup_printf("usb:%04x:%04x", h->usb_vendor, h->usb_product);
    GPtrArray *devices = av_pool_devices(pool);
    GPtrArray *found = g_ptr_array_new();

    for (guint i = 0; i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (dev->kind == AV_DEVICE_KIND_USB && g_str_has_prefix(dev->identity, prefix) &&
            (dev->identity[strlen(prefix)] == ':' || dev->identity[strlen(prefix)] == '@'))
            g_ptr_array_add(found, dev);
    }
    return found;
}

/* The only device of @host with the vendor and product of @h, or NULL
 * (none, or several).  Borrowed. */
static const AvUsbDevice *
av_hook_usb_only_with_ids(const AvHost *host, const AvHostdev *h)
{
    const AvUsbDevice *only = NULL;

    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *usb = g_ptr_array_index(host->usb, i);

        if (usb->vendor_id != h->usb_vendor || usb->product_id != h->usb_product)
            continue;
        if (only)
            return NULL;
        only = usb;
    }
    return only;
}

/* The pooled stick the hostdev @h gets when libvirt finds it by its vendor
 * and product (virHostdevFindUSBDevice: no address, bus 0, or with
 * autoAddress/startupPolicy numbers that name no device of those ids): the
 * single device of the host with those ids, in *ret_dev (NULL: it is not
 * pooled, or no device of the host and no pooled stick has those ids:
 * nothing of accelvirt's).  FALSE with @error when two or more devices of
 * the host have those ids and one of them is pooled (libvirt could give
 * the domain either), and when no device of the host has them but two or
 * more pooled sticks do.  The only pooled stick of those ids, when none of
 * the host has them, so that the refusal says it is missing. */
static gboolean
av_hook_usb_by_ids(const AvHost *host, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                   const AvHostdev *h, AvPoolDevice **ret_dev, GError **error)
{
    g_autoptr(GString) names = g_string_new(NULL);
    g_autoptr(GPtrArray) pooled_ids = NULL;
    AvPoolDevice *pooled = NULL;
    guint matches = 0;

    *ret_dev = NULL;
    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *usb = g_ptr_array_index(host->usb, i);
        g_autofree char *one = NULL;

        if (usb->vendor_id != h->usb_vendor || usb->product_id != h->usb_product)
            continue;
        matches++;
        if (!pooled) {
            if (!av_hook_pool_usb(policy, pool, domain, h, usb, &pooled, error))
                return FALSE;
        }
        one = av_hook_describe_usb(usb);
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", one);
    }
    if (matches > 1 && pooled) {
        g_autofree char *what = av_hook_describe_usb_hostdev(h);

        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "%s %s, which %u devices of this host have: %s; give it <address bus= device=> of one of "
                    "them ('accelvirt rewrite' writes it)", what,
                    h->usb_bus < 0 ? "names only a vendor and product"
                                   : "is found by its vendor and product (its bus and device name no device of them)",
                    matches, names->str);
        return FALSE;
    }
    if (matches > 0) {
        *ret_dev = pooled;
        return TRUE;
    }
    pooled_ids = av_hook_pooled_usb_ids(pool, h);
    if (pooled_ids->len > 1) {
        g_autofree char *what = av_hook_describe_usb_hostdev(h);

        g_string_truncate(names, 0);
        for (guint i = 0; i < pooled_ids->len; i++) {
            const AvPoolDevice *dev = g_ptr_array_index(pooled_ids, i);

            g_string_append_printf(names, "%s%s (%s, %s)", names->len ? ", " : "", dev->address, dev->identity,
                                   av_device_state_to_string(dev->state));
        }
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "%s names no device of this host, and %u sticks accelvirt holds have its vendor and product: "
                    "%s; give it <address bus= device=> of one of them once it is back", what, pooled_ids->len,
                    names->str);
        return FALSE;
    }
    *ret_dev = pooled_ids->len == 1 ? g_ptr_array_index(pooled_ids, 0) : NULL;
    return TRUE;
}

/* TRUE when the pool holds a USB device (any state). */
static gboolean
av_hook_pool_has_usb(AvPool *pool)
{
    GPtrArray *devices = av_pool_devices(pool);

    for (guint i = 0; i < devices->len; i++)
        if (((const AvPoolDevice *)g_ptr_array_index(devices, i))->kind == AV_DEVICE_KIND_USB)
            return TRUE;
    return FALSE;
}

/* The pool device the USB hostdev @h of @domain names, in *ret_dev (NULL:
 * none, nothing of accelvirt's).  libvirt (virHostdevFindUSBDevice) uses
 * <address bus= device=> only when the hostdev gives a vendor and a
 * non-zero bus, and with autoAddress (or an optional startupPolicy) falls
 * back to vendor and product when those numbers are stale.  So the hook
 * takes the numbers when they name a device of the hostdev's ids (or the
 * hostdev gives no ids), cross-checked with its av:placement entry
 * (av_hook_usb_check_placed()); otherwise a hostdev with a vendor is
 * resolved by vendor and product (av_hook_usb_by_ids()), whatever its
 * numbers say, and never skipped while a pooled stick has those ids.  A
 * hostdev of numbers only that name no device is refused while the pool
 * holds a stick (libvirt fails on it anyway). */
static gboolean
av_hook_resolve_usb(const AvHost *host, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                    const AvHostdev *h, AvPoolDevice **ret_dev, GError **error)
{
    const AvPlacedDevice *placed = av_hook_find_placed_usb(domain, h);
    const AvUsbDevice *usb = NULL;

    *ret_dev = NULL;
    if (h->usb_bus < 0) {
        if (placed && placed->usb_identity && av_pool_find(pool, placed->usb_identity)) {
            g_autofree char *what = av_hook_describe_usb_hostdev(h);

            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "%s has no <address bus= device=>, but its av:placement names the stick %s; run "
                        "'accelvirt start %s' (or 'accelvirt rewrite'), which writes it", what, placed->usb_identity,
                        domain->name);
            return FALSE;
        }
        return av_hook_usb_by_ids(host, policy, pool, domain, h, ret_dev, error);
    }
    if (h->usb_bus > 0 && h->usb_device > 0)
        usb = av_host_find_usb_number(host, (guint)h->usb_bus, (guint)h->usb_device);
    if (h->usb_vendor &&
        (!usb || usb->vendor_id != h->usb_vendor || usb->product_id != h->usb_product)) {
        if (placed && !av_hook_usb_check_placed(pool, domain, h, placed, av_hook_usb_only_with_ids(host, h), error))
            return FALSE;
        return av_hook_usb_by_ids(host, policy, pool, domain, h, ret_dev, error);
    }
    if (!usb) {
        if (av_hook_pool_has_usb(pool)) {
            g_autofree char *what = av_hook_describe_usb_hostdev(h);

            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "%s names no device of this host, and accelvirt holds USB sticks here; give it the "
                        "<address bus= device=> of a device that exists, with its <vendor> and <product>", what);
            return FALSE;
        }
        return TRUE;
    }
    if (placed && !av_hook_usb_check_placed(pool, domain, h, placed, usb, error))
        return FALSE;
    return av_hook_pool_usb(policy, pool, domain, h, usb, ret_dev, error);
}

/* The pool device that owns the IOMMU group of the PCI function
 * @address, which the pool does not hold itself: a pool device of its
 * group (in the scan of @host), or one whose companions name it (what the
 * pool recorded when it bound them).  NULL when none: the function is
 * nobody's business but libvirt's.  Borrowed from @pool. */
static AvPoolDevice *
av_hook_group_owner(const AvHost *host, const AvPool *pool, const char *address)
{
    const AvPciDevice *pci = av_host_find_pci(host, address);
    GPtrArray *devices = av_pool_devices(pool);

    for (guint i = 0; pci && pci->iommu_group >= 0 && pci->iommu_group_members &&
                      i < pci->iommu_group_members->len; i++) {
        const char *member = g_ptr_array_index(pci->iommu_group_members, i);
        AvPoolDevice *dev = g_str_equal(member, address) ? NULL
                            : av_pool_find_address(pool, AV_DEVICE_KIND_PCI, member);

        if (dev)
            return dev;
    }
    for (guint i = 0; i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);

        for (guint j = 0; dev->kind == AV_DEVICE_KIND_PCI && j < dev->companions->len; j++)
            if (g_str_equal(((const AvCompanion *)g_ptr_array_index(dev->companions, j))->address, address))
                return dev;
    }
    return NULL;
}

/* The direct interface @h of @domain: the card whose host driver made the
 * network interface it names (av_host_find_netdev(): exactly a name in the
 * card's net/), when the pool holds that card.  *ret_m: a new AvManaged
 * when the card's profile attaches netdev, else NULL (not the pool's, or
 * a device of no profile that is available to @domain).  FALSE when the
 * interface names a card the pool gives out otherwise (a vfio-pci card on
 * its host driver between tenants, say): the domain would get it around
 * the pool. */
static gboolean
av_hook_resolve_netdev(const AvHookConfig *config, const AvHost *host, const AvPolicy *policy, AvPool *pool,
                       const AvDomain *domain, const AvHostdev *h, AvManaged **ret_m, GError **error)
{
    const AvPciDevice *pci = av_host_find_netdev(host, h->netdev);
    g_autofree char *card = NULL;
    AvPoolDevice *dev;
    const AvProfile *profile;
    AvManaged *m;

    /* Not a primary name in a card's net/: an altname or another name the
     * kernel resolves (libvirt's macvtap code does), or a card's interface
     * by its device link; what it resolves to is checked as if named so. */
    if (!pci && (card = av_kernel_netdev_card(config->root, config->ops, h->netdev)))
        pci = av_host_find_pci(host, card);
    dev = pci ? av_pool_find_address(pool, AV_DEVICE_KIND_PCI, pci->address) : NULL;
    *ret_m = NULL;
    if (!dev)
        return TRUE;
    profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    if (!profile || g_strcmp0(dev->reason, "unmanaged") == 0)
        return av_hook_check_available(dev, domain, error);
    if (profile->attach != AV_ATTACH_NETDEV) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "interface '%s' is the network interface of device %s, which accelvirt gives out with attach "
                    "'%s' (profile '%s'), not as a network interface; remove the interface from the domain",
                    h->netdev, dev->address, av_attach_to_string(profile->attach), profile->name);
        return FALSE;
    }
    m = g_new0(AvManaged, 1);
    m->hostdev = h;
    m->profile = profile;
    m->pooldev = dev;
    m->pci = pci;
    *ret_m = m;
    return TRUE;
}

/* The <interface type='ethernet'> target @target of a domain: refused when
 * it is a card's interface that the pool holds, or sits on one (a macvtap
 * or macvlan: its lower_* links), since libvirt opens an existing one as it
 * is (managed='no') and the domain would reach the card around the pool. */
static gboolean
av_hook_check_ethernet(const AvHookConfig *config, AvPool *pool, const char *target, GError **error)
{
    g_autofree char *primary = av_kernel_netdev_primary(config->root, config->ops, target);
    g_autofree char *dir = NULL;
    g_auto(GStrv) names = NULL;

    if (!primary)
        return TRUE;
    dir = av_sys_path("class/net/%s", primary);
    if (av_root_list_dir(config->root, dir, &names) < 0)
        return TRUE;
    for (gint i = -1; i < 0 || names[i]; i++) {
        const char *lower = i < 0 ? primary : names[i];
        g_autofree char *card = NULL;
        AvPoolDevice *dev;

        if (i >= 0 && !g_str_has_prefix(lower, "lower_"))
            continue;
        if (i >= 0)
            lower += strlen("lower_");
        card = av_kernel_netdev_card(config->root, config->ops, lower);
        dev = card ? av_pool_find_address(pool, AV_DEVICE_KIND_PCI, card) : NULL;
        if (dev) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "<interface type='ethernet'> target '%s' is or sits on '%s', the network interface of "
                        "device %s, which accelvirt holds: remove the interface from the domain; a card of attach "
                        "netdev goes to a domain as <interface type='direct'> with mode 'passthrough'",
                        target, lower, dev->address);
            return FALSE;
        }
    }
    return TRUE;
}

/* See hook.h. */
gboolean
av_hook_resolve(const AvHookConfig *config, const AvHost *host, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                GPtrArray **ret_managed, GError **error)
{
    g_autoptr(GPtrArray) managed = g_ptr_array_new_with_free_func((GDestroyNotify)av_managed_free);

    for (guint i = 0; domain->ethernet_targets && i < domain->ethernet_targets->len; i++)
        if (!av_hook_check_ethernet(config, pool, g_ptr_array_index(domain->ethernet_targets, i), error))
            return FALSE;
    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(domain->hostdevs, i);
        AvManaged *m;

        if (h->type == AV_HOSTDEV_PCI) {
            AvPoolDevice *dev = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, h->pci_address);
            gboolean through_group = FALSE;
            const AvProfile *profile;

            if (!dev) {
                dev = av_hook_group_owner(host, pool, h->pci_address);
                if (!dev)
                    continue;
                through_group = TRUE;
            }
            profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
            if (!profile || g_strcmp0(dev->reason, "unmanaged") == 0) {
                if (!av_hook_check_available(dev, domain, error)) {
                    if (through_group)
                        g_prefix_error(error, "%s shares its IOMMU group with device %s, which accelvirt holds: ",
                                       h->pci_address, dev->address);
                    return FALSE;
                }
                continue;
            }
            if (profile->attach == AV_ATTACH_NETDEV) {
                g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                            "device %s%s%s is a card of attach netdev (profile '%s'): it stays on its host driver; "
                            "give the domain its network interface as <interface type='direct'> with mode "
                            "'passthrough' (accelvirt define does), not the device",
                            dev->address, through_group ? ", which shares its IOMMU group with " : "",
                            through_group ? h->pci_address : "", profile->name);
                return FALSE;
            }
            if (profile->attach == AV_ATTACH_MDEV) {
                if (through_group)
                    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                                "%s shares its IOMMU group with %s, an mdev parent (profile '%s') whose mdevs "
                                "other domains may use; it cannot be passed through without taking the parent "
                                "from its driver",
                                h->pci_address, dev->address, profile->name);
                else
                    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                                "device %s is an mdev parent (profile '%s', type '%s'): give the domain an "
                                "mdev <hostdev> of it, not the device itself",
                                h->pci_address, profile->name, profile->mdev_type);
                return FALSE;
            }
            m = g_new0(AvManaged, 1);
            m->hostdev = h;
            m->profile = profile;
            m->pooldev = dev;
            m->pci = av_host_find_pci(host, dev->address);
            m->through_group = through_group;
            g_ptr_array_add(managed, m);
        } else if (h->type == AV_HOSTDEV_USB) {
            AvPoolDevice *dev = NULL;
            const AvProfile *profile;

            if (!av_hook_resolve_usb(host, policy, pool, domain, h, &dev, error))
                return FALSE;
            if (!dev)
                continue;
            profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
            if (!profile || profile->attach != AV_ATTACH_USB || g_strcmp0(dev->reason, "unmanaged") == 0) {
                if (!av_hook_check_available(dev, domain, error))
                    return FALSE;
                continue;
            }
            m = g_new0(AvManaged, 1);
            m->hostdev = h;
            m->profile = profile;
            m->pooldev = dev;
            g_ptr_array_add(managed, m);
        } else if (h->type == AV_HOSTDEV_NETDEV) {
            if (!av_hook_resolve_netdev(config, host, policy, pool, domain, h, &m, error))
                return FALSE;
            if (m)
                g_ptr_array_add(managed, m);
        } else if (h->type == AV_HOSTDEV_MDEV) {
            g_autofree char *identity = av_pool_identity_mdev(h->mdev_uuid);
            AvPoolDevice *dev = av_pool_find(pool, identity);
            const AvMdevParent *parent = av_host_find_mdev(host, h->mdev_uuid);
            const AvPlacedDevice *placed = av_hook_find_placed_mdev(domain, h->mdev_uuid);
            const AvProfile *profile = NULL;

            if (dev && dev->profile)
                profile = av_policy_find(policy, dev->profile);
            if (!profile && parent)
                profile = av_policy_match_mdev_parent(policy, parent);
            if (!profile && placed) {
                profile = av_policy_find(policy, placed->profile);
                if (!profile) {
                    g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                                "the av:placement of mdev %s names the profile '%s', which no policy "
                                "defines; add it to the policies or place the domain again",
                                h->mdev_uuid, placed->profile);
                    return FALSE;
                }
            }
            if (!profile) {
                if (dev && !av_hook_check_available(dev, domain, error))
                    return FALSE;
                continue;
            }
            if (profile->attach != AV_ATTACH_MDEV || !profile->mdev_type) {
                g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                            "mdev %s is placed with the profile '%s', which does not attach mdevs "
                            "(attach is '%s'); place the domain again",
                            h->mdev_uuid, profile->name, av_attach_to_string(profile->attach));
                return FALSE;
            }
            m = g_new0(AvManaged, 1);
            m->hostdev = h;
            m->profile = profile;
            m->pooldev = dev;
            m->pci = parent ? parent->pci : NULL;
            m->identity = g_steal_pointer(&identity);
            m->mdev_exists = parent != NULL;
            m->mdev_parent = parent ? g_strdup(parent->name) : NULL;
            m->mdev_node = parent ? parent->numa_node : -1;
            g_ptr_array_add(managed, m);
        }
    }
    *ret_managed = g_steal_pointer(&managed);
    return TRUE;
}

/* --- prepare -------------------------------------------------------------------- */

/* One IOMMU group the prepare hands over. */
typedef struct {
    int group;
    GPtrArray *members;          /* char*: endpoint addresses */
    gboolean bind;               /* some hostdev of it is managed='no': accelvirt binds */
    AvPoolDevice *first;         /* the first pool device of the group (companions go there) */
} AvPrepareGroup;

static void
av_prepare_group_free(AvPrepareGroup *g)
{
    if (!g)
        return;
    g_ptr_array_unref(g->members);
    g_free(g);
}

/* Everything one prepare knows, phase after phase (av_hook_prepare()). */
typedef struct {
    const AvHookConfig *config;
    AvDomain *domain;
    AvPolicy *policy;
    AvPool *pool;
    AvHost *host;
    AvOwner *owner;
    GPtrArray *managed;          /* AvManaged*: the hostdevs accelvirt manages */
    GPtrArray *groups;           /* AvPrepareGroup*: their IOMMU groups */
    GPtrArray *claims;           /* AvPoolDevice*, borrowed: every pool device of those groups */
    AvBinding *binding;          /* what it binds and makes on the host (lifecycle/av-binding.h) */
    AvIntent *intent;            /* the write-ahead record, borrowed from the pool once saved */
    guint vfs_written;           /* how many of the record's VF counts were written (av_prepare_grow()) */
    GPtrArray *grown;            /* char*, borrowed from the domain: the VFs av_prepare_grow() made */
    char *by;                    /* "prepare of domain 'NAME' (UUID)", for the journal */
} AvPrepare;

static void
av_prepare_clear(AvPrepare *p)
{
    g_clear_pointer(&p->policy, av_policy_free);
    g_clear_pointer(&p->pool, av_pool_free);
    g_clear_pointer(&p->host, av_host_free);
    g_clear_pointer(&p->owner, av_owner_free);
    g_clear_pointer(&p->managed, g_ptr_array_unref);
    g_clear_pointer(&p->groups, g_ptr_array_unref);
    g_clear_pointer(&p->claims, g_ptr_array_unref);
    g_clear_pointer(&p->binding, av_binding_free);
    g_clear_pointer(&p->grown, g_ptr_array_unref);
    g_clear_pointer(&p->by, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AvPrepare, av_prepare_clear)

/* The NUMA node an mdev should be created on: av:placement's node, else the
 * single node of <numatune><memory nodeset=>, else -1 (any). */
static int
av_hook_mdev_node(const AvDomain *domain)
{
    g_autoptr(GArray) nodes = NULL;

    if (domain->placement_node >= 0)
        return domain->placement_node;
    if (domain->numatune_memory_nodeset &&
        av_domain_cpuset_parse(domain->numatune_memory_nodeset, AV_DOMAIN_NODE_MAX, &nodes, NULL) &&
        nodes->len == 1)
        return (int)g_array_index(nodes, guint, 0);
    return -1;
}

/* After creating an mdev of @type on @parent, the scan of @host says one
 * instance less and one mdev more, so that the next choice sees it. */
static void
av_hook_note_mdev(AvHost *host, const char *parent, const char *type, const char *uuid)
{
    AvMdevParent *mp = av_host_find_mdev_parent(host, parent);
    AvMdev *mdev;

    /* A PCI parent shares its arrays with its AvPciDevice: both see it. */
    if (!mp)
        return;
    for (guint i = 0; mp->types && i < mp->types->len; i++) {
        AvMdevType *t = g_ptr_array_index(mp->types, i);

        if (g_str_equal(t->id, type) && t->available > 0)
            t->available--;
    }
    if (!mp->mdevs)
        return;
    mdev = g_new0(AvMdev, 1);
    mdev->uuid = g_strdup(uuid);
    mdev->parent = g_strdup(parent);
    mdev->type_id = g_strdup(type);
    g_ptr_array_add(mp->mdevs, mdev);
}

/* "prepare begin" of a scrub VM: a domain carrying <av:scrub token=>,
 * which accelvirt's worker (or `accelvirt scrub`) starts for a "vm" scrub
 * step.  It may have the devices being scrubbed with that very token, when
 * its UUID is the one the pool made with the token, and nothing else
 * accelvirt manages; it gets them without a claim or a bind: each stays
 * scrubbing (or quarantined, scrubbed by hand), owned by its last tenant,
 * and the scrubber, which holds the device's scrub lock and watches the
 * domain, decides what comes next.  The token is used up.  Its release then
 * finds nothing it owns.  Anything else is refused. */
static int
av_hook_prepare_scrub(const AvHookConfig *config, const AvHost *host, const AvPolicy *policy, AvPool *pool,
                      const AvDomain *domain, GPtrArray *managed)
{
    g_autoptr(GString) summary = g_string_new(NULL);

    for (guint i = 0; i < managed->len; i++) {
        const AvManaged *m = g_ptr_array_index(managed, i);
        const AvPoolDevice *dev = m->pooldev;
        g_autoptr(GPtrArray) members = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(AvLock) lock = NULL;

        if (m->hostdev->type != AV_HOSTDEV_PCI || !dev || m->through_group) {
            g_autofree char *usb = m->hostdev->type == AV_HOSTDEV_USB ? av_hook_describe_usb_hostdev(m->hostdev)
                                                                      : NULL;

            return av_hook_refusef("cannot start scrub domain '%s': it has %s %s, which is not a PCI function "
                                   "being scrubbed; a scrub domain may have only the device it scrubs",
                                   domain->name, m->hostdev->type == AV_HOSTDEV_MDEV ? "mdev" : "device",
                                   m->hostdev->type == AV_HOSTDEV_MDEV ? m->hostdev->mdev_uuid
                                   : usb                               ? usb
                                                                       : m->hostdev->pci_address);
        }
        if ((dev->state != AV_DEVICE_STATE_SCRUBBING && dev->state != AV_DEVICE_STATE_QUARANTINED) ||
            !av_pool_scrub_token_matches(dev, domain->scrub_token, domain->uuid))
            return av_hook_refusef("cannot start domain '%s': it carries an accelvirt scrub token (av:scrub), "
                                   "but device %s (%s) is %s and not being scrubbed with that token by a domain "
                                   "of this UUID, or the token was used already; only accelvirt's scrubber starts "
                                   "scrub domains", domain->name, dev->address, dev->identity,
                                   av_device_state_to_string(dev->state));
        /* A token outlives a scrubber killed mid-step; the lock does not.
         * Only "another process holds it" lets the domain in. */
        lock = av_scrub_lock_take(config->state_dir, dev->identity, &error);
        if (lock)
            return av_hook_refusef("cannot start domain '%s': no scrub of device %s (%s) is running (its scrub "
                                   "lock is free), so its av:scrub token is stale; the next worker scrubs it "
                                   "again", domain->name, dev->address, dev->identity);
        if (!g_error_matches(error, AV_ERROR, AV_ERROR_LOCKED))
            return av_hook_refusef("cannot start domain '%s': cannot tell whether a scrub of device %s runs: %s",
                                   domain->name, dev->address, error ? error->message : "no reason given");
        g_clear_error(&error);
        if (m->hostdev->managed)
            return av_hook_refusef("cannot start scrub domain '%s': its <hostdev> of %s is managed='yes'; the "
                                   "scrubber has bound the device to vfio-pci already, so the template must say "
                                   "managed='no'", domain->name, dev->address);
        if (!m->pci)
            return av_hook_refusef("cannot start scrub domain '%s': device %s is not on this host", domain->name,
                                   dev->address);
        if (!av_vfio_device_is_vfio(config->root, m->pci->address, m->pci->driver))
            return av_hook_refusef("cannot start scrub domain '%s': device %s is on %s, not vfio-pci; the "
                                   "scrubber binds it before it starts the domain", domain->name, dev->address,
                                   m->pci->driver ? m->pci->driver : "no driver");
        if (!av_vfio_group_check(host, policy, m->pci, &members, &error))
            return av_hook_refusef("cannot start scrub domain '%s': %s", domain->name, error->message);
        for (guint j = 0; j < members->len; j++) {
            const AvPoolDevice *mate = av_pool_find_address(pool, AV_DEVICE_KIND_PCI,
                                                            g_ptr_array_index(members, j));
            g_autofree char *who = NULL;

            if (!mate || mate == dev ||
                (mate->state != AV_DEVICE_STATE_CLAIMED && mate->state != AV_DEVICE_STATE_IN_USE))
                continue;
            who = av_hook_describe_owner(mate->owner);
            return av_hook_refusef("cannot start scrub domain '%s': device %s shares IOMMU group %d with %s, "
                                   "which is %s by %s", domain->name, dev->address, m->pci->iommu_group,
                                   mate->address, av_device_state_to_string(mate->state), who);
        }
        g_string_append_printf(summary, "%s%s (%s, %s)", summary->len ? ", " : "", dev->address, dev->identity,
                               av_device_state_to_string(dev->state));
    }
    /* Once: a copy of the token is worth nothing after this. */
    for (guint i = 0; i < managed->len; i++) {
        const AvManaged *m = g_ptr_array_index(managed, i);

        av_pool_scrub_token_consume(m->pooldev);
    }
    if (managed->len > 0) {
        g_autoptr(GError) error = NULL;

        if (!av_pool_save(pool, &error))
            return av_hook_refusef("cannot start scrub domain '%s': cannot record that its token is used: %s",
                                   domain->name, error->message);
    }
    av_hook_log(LOG_INFO, "prepare: scrub domain '%s' (av:scrub token and UUID match) takes %s; the token is "
                "used up, the device stays as the pool has it", domain->name,
                summary->len ? summary->str : "no device");
    return 0;
}

/* The binding's notes go to the hook's log. */
static void
av_prepare_note(gpointer data G_GNUC_UNUSED, int priority, const char *message)
{
    av_hook_log(priority, "%s", message);
}

/* Phase "open": the policies, the pool (what dead processes left put
 * right, see av_hook_pool_open()), and the host as far as the domain needs
 * it, the pool up to date with it (av_hook_scan_for()). */
static gboolean
av_prepare_open(AvPrepare *p, GError **error)
{
    p->policy = av_policy_load_dir(p->config->policy_dir, error);
    if (!p->policy) {
        g_prefix_error(error, "cannot read the policies: ");
        return FALSE;
    }
    p->pool = av_hook_pool_open(p->config, error);
    if (!p->pool)
        return FALSE;
    p->host = av_hook_scan_for(p->config, p->policy, p->pool, p->domain, error);
    return p->host != NULL;
}

static int
av_hook_strcmp_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The av:placement entry of the VF at @address that names its PF, or NULL.
 * Borrowed. */
static const AvPlacedDevice *
av_hook_find_placed_vf(const AvDomain *domain, const char *address)
{
    for (guint i = 0; domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);

        if (p->pf_address && p->pci_address && g_str_equal(p->pci_address, address))
            return p;
    }
    return NULL;
}

/* The VF count the PF of the missing VF @address (placed as @placed) must
 * have, in *ret_to (0: nothing to make: the profile makes no VFs, or is
 * gone).  Refuses what the XML cannot be trusted with: the PF must be one
 * its profile makes VFs on (av_policy_match_sriov_pf()), VF index and
 * address must be what the PF's sriov_offset and sriov_stride give, the
 * PF must have no VF (the hook grows only from 0: going through 0 would
 * take every VF from whoever uses it), and the count must be free to
 * change (av_pool_pf_check_change()). */
static gboolean
av_prepare_vf_count(AvPrepare *p, const char *address, const AvPlacedDevice *placed, const AvPciDevice **ret_pf,
                    guint *ret_to, GError **error)
{
    const AvProfile *profile = av_policy_find(p->policy, placed->profile);
    const AvPciDevice *pf = av_host_find_pci(p->host, placed->pf_address);
    g_autofree char *expected = NULL;

    *ret_to = 0;
    if (!av_profile_makes_vfs(profile))
        return TRUE;
    if (!pf || av_policy_match_sriov_pf(p->policy, pf) != profile) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "VF %s is gone and its placement names the PF %s, on which profile '%s' makes no VFs; "
                    "place the domain again with 'accelvirt define'", address, placed->pf_address, profile->name);
        return FALSE;
    }
    expected = av_pci_sriov_vf_address(pf->address, pf->sriov_offset, pf->sriov_stride, (guint)placed->vf_index);
    if ((guint)placed->vf_index >= pf->sriov_totalvfs || g_strcmp0(expected, address) != 0 ||
        (guint)placed->vf_index < pf->sriov_numvfs) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "VF %s is gone, and its placement (VF %d of PF %s) does not match the PF (%u of %u VFs, "
                    "VF %d would be %s); place the domain again with 'accelvirt define'", address, placed->vf_index,
                    pf->address, pf->sriov_numvfs, pf->sriov_totalvfs, placed->vf_index, expected ? expected : "none");
        return FALSE;
    }
    /* The hook changes no count that is not 0: going through 0
     * removes every VF, and a domain's start is no time to take VFs from
     * the host; a non-zero count is changed by 'accelvirt define' only. */
    if (pf->sriov_numvfs != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                    "cannot make VF %s again: PF %s has %u VFs, and the hook makes VFs only on a PF that has none "
                    "(the kernel changes a count only through 0, which removes every VF); place the domain again "
                    "with 'accelvirt define'", address, pf->address, pf->sriov_numvfs);
        return FALSE;
    }
    if (!av_pool_pf_check_change(p->pool, p->config->root, p->host, pf, error)) {
        g_prefix_error(error, "cannot make VF %s again: ", address);
        return FALSE;
    }
    *ret_pf = pf;
    *ret_to = MIN(MAX((guint)placed->vf_index + 1, av_profile_vfs_base(profile)), pf->sriov_totalvfs);
    return TRUE;
}

/* Saves the pool with the write-ahead record (@fresh, taken over, when the
 * prepare has none yet) before the kernel sees what it names.  On failure
 * the record goes, unless VF counts it names were written: then the next
 * call undoes them from the record on disk. */
static gboolean
av_prepare_record(AvPrepare *p, AvIntent *fresh, const char *what, GError **error)
{
    if (fresh)
        p->intent = av_pool_intent_add(p->pool, fresh);
    if (av_pool_save(p->pool, error))
        return TRUE;
    if (p->vfs_written == 0) {
        av_pool_intent_remove(p->pool, p->intent);
        p->intent = NULL;
    }
    g_prefix_error(error, "cannot record %s: ", what);
    return FALSE;
}

/* Records in a new write-ahead record the VF count @want (PF address ->
 * count) asks of each PF, and saves it before the kernel sees anything. */
static gboolean
av_prepare_grow_plan(AvPrepare *p, GHashTable *want, GError **error)
{
    g_autoptr(AvIntent) intent = av_intent_new(p->domain->uuid, p->domain->name);
    g_autofree gpointer *pfs = (gpointer *)g_hash_table_get_keys_as_array(want, NULL);
    guint n = g_hash_table_size(want);

    qsort(pfs, n, sizeof(gpointer), av_hook_strcmp_ptr);
    for (guint i = 0; i < n; i++) {
        const AvPciDevice *pf = av_host_find_pci(p->host, pfs[i]);

        av_intent_add_vfs(intent, pf->address, pf->sriov_numvfs, GPOINTER_TO_UINT(g_hash_table_lookup(want, pfs[i])));
    }
    return av_prepare_record(p, g_steal_pointer(&intent), "the VFs this prepare will make", error);
}

/* Phase "grow", before "resolve": the VFs of the domain's
 * placement that are gone (a reboot took them, or sriov_numvfs was set
 * back) are made again on their PF, when the profile makes VFs: planned in
 * the write-ahead record (saved), sriov_numvfs written
 * (av_pool_vf_set_count(), journalled), and the domain's devices scanned
 * again.  The VFs are bound to vfio-pci by "apply", as any managed='no'
 * hostdev. */
static gboolean
av_prepare_grow(AvPrepare *p, GError **error)
{
    g_autoptr(GHashTable) want = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; i < p->domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(p->domain->hostdevs, i);
        const AvPlacedDevice *placed;
        const AvPciDevice *pf = NULL;
        guint to = 0;

        if (h->type != AV_HOSTDEV_PCI || av_host_find_pci(p->host, h->pci_address) ||
            !(placed = av_hook_find_placed_vf(p->domain, h->pci_address)))
            continue;
        if (!av_prepare_vf_count(p, h->pci_address, placed, &pf, &to, error))
            return FALSE;
        if (to > 0 && to > GPOINTER_TO_UINT(g_hash_table_lookup(want, pf->address)))
            g_hash_table_insert(want, (gpointer)pf->address, GUINT_TO_POINTER(to));
        if (to > 0)
            g_ptr_array_add(p->grown, h->pci_address);
    }
    if (g_hash_table_size(want) == 0)
        return TRUE;
    if (!av_prepare_grow_plan(p, want, error))
        return FALSE;
    av_hook_test_stop(p->config, "prepare-vfs-planned");
    for (; p->vfs_written < p->intent->vfs->len; p->vfs_written++) {
        const AvIntentVfs *v = g_ptr_array_index(p->intent->vfs, p->vfs_written);
        const AvPciDevice *pf = av_host_find_pci(p->host, v->pf);
        const AvProfile *maker = pf ? av_policy_match_sriov_pf(p->policy, pf) : NULL;

        if (!av_pool_vf_set_count(p->pool, p->config->root, p->config->ops, v->pf, maker ? maker->name : NULL,
                                  v->from, v->to, p->by, error)) {
            p->vfs_written++;
            return FALSE;
        }
        av_hook_log(LOG_INFO, "made VFs on PF %s: sriov_numvfs %u -> %u", v->pf, v->from, v->to);
    }
    av_hook_test_stop(p->config, "prepare-vfs-made");
    g_clear_pointer(&p->host, av_host_free);
    p->host = av_hook_scan_for(p->config, p->policy, p->pool, p->domain, error);
    return p->host != NULL;
}

/* The write-ahead record of a prepare that died, still in the pool because
 * undoing it failed, that names the endpoint @address or the pool device
 * @identity (either may be NULL), or NULL.  Borrowed. */
static const AvIntent *
av_prepare_pending_intent(const AvPool *pool, const char *address, const char *identity)
{
    GPtrArray *intents = av_pool_intents(pool);

    for (guint i = 0; i < intents->len; i++) {
        const AvIntent *intent = g_ptr_array_index(intents, i);

        for (guint j = 0; address && j < intent->binds->len; j++)
            if (g_str_equal(((const AvCompanion *)g_ptr_array_index(intent->binds, j))->address, address))
                return intent;
        for (guint j = 0; identity && j < intent->claims->len; j++)
            if (g_str_equal(g_ptr_array_index(intent->claims, j), identity))
                return intent;
    }
    return NULL;
}

/* FALSE with an error when a record of a dead prepare that could not be
 * undone still names @address or @identity: its endpoints are not where
 * the pool thinks, and the next undo would take them from under whoever
 * had them. */
static gboolean
av_prepare_check_pending(const AvPool *pool, const char *address, const char *identity, GError **error)
{
    const AvIntent *intent = av_prepare_pending_intent(pool, address, identity);

    if (!intent)
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                "device %s%s%s%s is named by the record of a prepare of domain '%s' that died, which accelvirt "
                "could not undo yet (%s); fix that (the journal's rollback-failed entry says what), then retry",
                address ? address : identity, address && identity ? " (" : "", address && identity ? identity : "",
                address && identity ? ")" : "", intent->domain_name ? intent->domain_name : intent->domain_uuid,
                intent->undo_error ? intent->undo_error : "see the journal");
    return FALSE;
}

/* Phase "check" of the direct interface of @m, a card of attach netdev:
 * its mode is passthrough (the guest alone on the card's interface: in
 * another mode, macvtap shares it with the host and other guests), and
 * it is named by no other interface of the domain.  The card is claimed
 * alone and stays on its host driver: no IOMMU group, no bind. */
static gboolean
av_prepare_check_netdev(AvPrepare *p, AvManaged *m, GError **error)
{
    if (g_strcmp0(m->hostdev->netdev_mode, "passthrough") != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "interface '%s' (device %s, profile '%s') has the mode '%s'; a card of attach netdev goes to "
                    "one domain alone: write <source dev='%s' mode='passthrough'/>", m->hostdev->netdev,
                    m->pooldev->address, m->profile->name,
                    m->hostdev->netdev_mode ? m->hostdev->netdev_mode : "vepa (none written)", m->hostdev->netdev);
        return FALSE;
    }
    if (g_ptr_array_find(p->claims, m->pooldev, NULL)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "device %s (interface '%s') is named twice by the domain; give it once", m->pooldev->address,
                    m->hostdev->netdev);
        return FALSE;
    }
    g_ptr_array_add(p->claims, m->pooldev);
    return TRUE;
}

/* Phase "check", before anything is touched: every managed device is free
 * or claimed for this domain; every IOMMU group of a PCI device is viable
 * (av_vfio_group_check()), and every pool device in it is available too
 * (card granularity: two functions of one group never go to two domains);
 * nothing of it is named by the record of a dead prepare that could not be
 * undone. */
static gboolean
av_prepare_check(AvPrepare *p, GError **error)
{
    for (guint i = 0; i < p->managed->len; i++) {
        AvManaged *m = g_ptr_array_index(p->managed, i);
        g_autoptr(GPtrArray) members = NULL;
        AvPrepareGroup *group = NULL;

        if (m->pooldev && !av_prepare_check_pending(p->pool, m->pooldev->address, m->pooldev->identity, error))
            return FALSE;
        if (m->identity && !av_prepare_check_pending(p->pool, NULL, m->identity, error))
            return FALSE;
        if (m->pooldev && !av_hook_check_available(m->pooldev, p->domain, error)) {
            if (m->through_group)
                g_prefix_error(error, "%s shares its IOMMU group with device %s, which accelvirt holds: ",
                               m->hostdev->pci_address, m->pooldev->address);
            return FALSE;
        }
        /* libvirt would move a managed='yes' vGPU VF off NVIDIA's driver,
         * which breaks the vGPU Manager's hold of it. */
        if (m->hostdev->type == AV_HOSTDEV_PCI && m->hostdev->managed && m->profile && m->profile->vgpu_type) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "device %s has the profile '%s' (an NVIDIA vGPU VF), and its <hostdev> says managed='yes': "
                        "libvirt would take it off NVIDIA's driver; write managed='no' (accelvirt define does)",
                        m->hostdev->pci_address, m->profile->name);
            return FALSE;
        }
        /* "start begin" checks the pinning against the device's node: a
         * pinning it cannot read is refused now, before anything is bound
         * (only for a device whose profile makes it a condition). */
        if (p->domain->pinning_problem && m->profile->numa == AV_NUMA_STRICT) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "device %s has the profile '%s' with numa strict, and the domain's vCPU pinning cannot be "
                        "read: %s", m->pooldev ? m->pooldev->address : m->hostdev->mdev_uuid, m->profile->name,
                        p->domain->pinning_problem);
            return FALSE;
        }
        /* A USB stick is claimed alone: no IOMMU group, no bind (QEMU's
         * usb-host opens /dev/bus/usb itself). */
        if (m->hostdev->type == AV_HOSTDEV_USB && !g_ptr_array_find(p->claims, m->pooldev, NULL))
            g_ptr_array_add(p->claims, m->pooldev);
        if (m->hostdev->type == AV_HOSTDEV_NETDEV && !av_prepare_check_netdev(p, m, error))
            return FALSE;
        if (m->hostdev->type != AV_HOSTDEV_PCI)
            continue;
        if (!m->pci) {
            g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "device %s is not on this host",
                        m->hostdev->pci_address);
            return FALSE;
        }
        /* A PF goes to no domain while a VF of it is not free, nor a VF
         * while its PF is not free. */
        if (!m->pci->physfn && !av_pool_pf_check_vfs(p->pool, p->host, m->pci->address, error))
            return FALSE;
        if (m->pci->physfn && !av_pool_vf_check_pf(p->pool, m->pci, error))
            return FALSE;
        for (guint j = 0; j < p->groups->len && !group; j++) {
            AvPrepareGroup *g = g_ptr_array_index(p->groups, j);

            if (g->group == m->pci->iommu_group && m->pci->iommu_group >= 0)
                group = g;
        }
        if (!group) {
            if (!av_vfio_group_check(p->host, p->policy, m->pci, &members, error))
                return FALSE;
            for (guint j = 0; j < members->len; j++)
                if (!av_prepare_check_pending(p->pool, g_ptr_array_index(members, j), NULL, error))
                    return FALSE;
            group = g_new0(AvPrepareGroup, 1);
            group->group = m->pci->iommu_group;
            group->members = g_steal_pointer(&members);
            g_ptr_array_add(p->groups, group);
            for (guint j = 0; j < group->members->len; j++) {
                AvPoolDevice *mate = av_pool_find_address(p->pool, AV_DEVICE_KIND_PCI,
                                                          g_ptr_array_index(group->members, j));

                if (!mate)
                    continue;
                if (!av_hook_check_available(mate, p->domain, error)) {
                    g_prefix_error(error, "%s shares IOMMU group %d with it: ", m->hostdev->pci_address,
                                   group->group);
                    return FALSE;
                }
                if (!group->first)
                    group->first = mate;
                if (!g_ptr_array_find(p->claims, mate, NULL))
                    g_ptr_array_add(p->claims, mate);
            }
        }
        if (!m->hostdev->managed)
            group->bind = TRUE;
    }
    return TRUE;
}

/* Phase "check": every device of the pool's placement record of
 * the domain (av_pool_placement_find(): what accelvirt placed, not the
 * domain's own metadata, which its owner may edit) that was placed with a
 * bitstream holds it, as the pool last recorded it (AvPoolDevice's
 * programmed).  Programming takes minutes: the CLI does it before the
 * domain starts (`accelvirt start`), never the hook.  FALSE with
 * AV_ERROR_STATE, one sentence naming the device, the bitstream (its
 * library name when the library knows it) and what to do. */
static gboolean
av_prepare_check_bitstreams(AvPrepare *p, GError **error)
{
    const AvPoolPlacement *record = p->domain->uuid ? av_pool_placement_find(p->pool, p->domain->uuid) : NULL;

    for (guint i = 0; record && i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);
        const AvPoolDevice *dev = NULL;
        g_autoptr(AvBitstream) bitstream = NULL;
        g_autofree char *quoted = NULL;
        g_autofree char *prefix = NULL;

        if (!item->bitstream)
            continue;
        if (item->identity)
            dev = av_pool_find(p->pool, item->identity);
        if (!dev && item->pci_address)
            dev = av_pool_find_address(p->pool, AV_DEVICE_KIND_PCI, item->pci_address);
        if (dev && dev->programmed && g_strcmp0(dev->programmed->sha256, item->bitstream) == 0)
            continue;
        bitstream = av_bitstream_lookup(p->config->state_dir, item->bitstream, NULL);
        quoted = av_domain_quote(p->domain->name);
        prefix = g_strndup(item->bitstream, 12);
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s does not hold bitstream %s (sha256 %s...) that domain '%s' asked for; "
                    "'accelvirt start %s' programs it",
                    dev && dev->address ? dev->address : item->pci_address ? item->pci_address : "(none)",
                    bitstream ? bitstream->name : prefix, prefix, quoted, quoted);
        return FALSE;
    }
    return TRUE;
}

/* The @i-th device whose driver commands a prepare runs, in
 * *ret_profile, *ret_address and *ret_identity (borrowed): every pool
 * device it claims (p->claims: PCI functions with their group mates, USB
 * sticks; as each is owed its on_release at a release), then every mdev of the
 * domain (its parent and "mdev:UUID").  FALSE for an @i that names none. */
static gboolean
av_prepare_driver_device(const AvPrepare *p, guint i, const AvProfile **ret_profile, const char **ret_address,
                         const char **ret_identity)
{
    const AvManaged *m;

    if (i < p->claims->len) {
        const AvPoolDevice *dev = g_ptr_array_index(p->claims, i);

        *ret_profile = dev->profile ? av_policy_find(p->policy, dev->profile) : NULL;
        *ret_address = dev->address;
        *ret_identity = dev->identity;
        return *ret_profile != NULL;
    }
    m = g_ptr_array_index(p->managed, i - p->claims->len);
    if (m->hostdev->type != AV_HOSTDEV_MDEV)
        return FALSE;
    *ret_profile = m->profile;
    *ret_address = m->mdev_parent;
    *ret_identity = m->identity;
    return TRUE;
}

/* Undoes the on_prepare commands of the first @done devices
 * (av_prepare_driver_device()), newest first: the on_release command of
 * each whose profile has an on_prepare, under the pool's lock, while the
 * devices are still bound and none is in use (no release follows a refused
 * prepare).  A failure is logged: the domain never had the device. */
static void
av_prepare_drivers_undo(AvPrepare *p, guint done)
{
    for (guint i = done; i > 0; i--) {
        const AvProfile *profile = NULL;
        const char *address = NULL, *identity = NULL;
        g_autoptr(GError) local = NULL;

        if (!av_prepare_driver_device(p, i - 1, &profile, &address, &identity) ||
            !profile->drivers[AV_DRIVER_ON_PREPARE])
            continue;
        if (!av_hook_driver_run(p->config, p->pool, profile, address, identity, p->domain->name, p->domain->uuid,
                                AV_DRIVER_ON_RELEASE, &local))
            av_hook_log(LOG_ERR, "rollback: %s", local->message);
    }
}

/* Phase "drivers", after "apply" (the devices are bound, the
 * mdevs made) and before "commit": the on_prepare command of each device's
 * profile (av_prepare_driver_device(), av_hook_driver_run()).  The first
 * that fails refuses the domain: av_prepare_fail() then undoes what
 * "apply" did, and the on_release command of each device whose on_prepare
 * had run is run first (its failure logged: the domain never had the
 * device). */
static gboolean
av_prepare_drivers(AvPrepare *p, GError **error)
{
    guint n = p->claims->len + p->managed->len;
    guint done;

    for (done = 0; done < n; done++) {
        const AvProfile *profile = NULL;
        const char *address = NULL, *identity = NULL;

        if (av_prepare_driver_device(p, done, &profile, &address, &identity) &&
            !av_hook_driver_run(p->config, p->pool, profile, address, identity, p->domain->name, p->domain->uuid,
                                AV_DRIVER_ON_PREPARE, error))
            break;
    }
    if (done == n)
        return TRUE;
    av_prepare_drivers_undo(p, done);
    return FALSE;
}

/* Phase "plan": what the host will see, recorded in the pool and saved
 * before anything is touched: every endpoint of a group
 * accelvirt binds (managed='no'; libvirt binds managed='yes' ones itself)
 * that is not on vfio-pci yet, with the driver it is on, and every mdev to
 * create, on the parent chosen now. */
static gboolean
av_prepare_plan(AvPrepare *p, GError **error)
{
    g_autoptr(AvIntent) fresh = p->intent ? NULL : av_intent_new(p->domain->uuid, p->domain->name);
    AvIntent *intent = p->intent ? p->intent : fresh;

    for (guint i = 0; i < p->groups->len; i++) {
        AvPrepareGroup *g = g_ptr_array_index(p->groups, i);

        if (!g->bind)
            continue;
        /* A vGPU VF stays on NVIDIA's driver: its vGPU is planned with
         * the claims below. */
        for (guint j = 0; j < g->members->len; j++)
            if (!av_binding_plan_endpoint(p->binding, p->host, p->policy, g_ptr_array_index(g->members, j),
                                          g->group, g->first ? g->first->identity : NULL, FALSE, error))
                return FALSE;
        av_binding_wait_group(p->binding, g->group);
    }
    /* No new mdev on a parent that still carries a released one. */
    av_pool_mdev_parents_block(p->pool, p->host);
    for (guint i = 0; i < p->managed->len; i++) {
        AvManaged *m = g_ptr_array_index(p->managed, i);

        if (m->hostdev->type != AV_HOSTDEV_MDEV || m->mdev_exists)
            continue;
        if (!av_mdev_choose_parent(p->host, m->profile, av_hook_mdev_node(p->domain), &m->mdev_parent, error)) {
            g_prefix_error(error, "cannot create mdev %s (profile '%s'): ", m->hostdev->mdev_uuid, m->profile->name);
            return FALSE;
        }
        av_hook_note_mdev(p->host, m->mdev_parent, m->profile->mdev_type, m->hostdev->mdev_uuid);
        m->mdev = av_binding_add_mdev(p->binding, m->hostdev->mdev_uuid, m->mdev_parent, m->profile->mdev_type,
                                      m->profile->name, -1);
    }
    for (guint i = 0; i < p->claims->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(p->claims, i);
        const AvProfile *profile = dev->profile ? av_policy_find(p->policy, dev->profile) : NULL;

        av_intent_add_claim(intent, dev->identity);
        /* The vGPU of each VF of a "vgpu_type" profile, made at "apply": a
         * type its GPU does not offer refuses the domain in one line. */
        if (profile && profile->vgpu_type && dev->address)
            av_binding_add_vgpu(p->binding, dev->address, profile->vgpu_type, dev->iommu_group);
    }
    for (guint i = 0; i < p->managed->len; i++) {
        const AvManaged *m = g_ptr_array_index(p->managed, i);

        if (m->hostdev->type == AV_HOSTDEV_MDEV)
            av_intent_add_claim(intent, m->identity);
    }
    av_binding_record(p->binding, intent);
    return av_prepare_record(p, g_steal_pointer(&fresh), "what this prepare will do", error);
}

/* Phase "apply": binds the planned endpoints, makes the vGPUs, waits for
 * the nodes of their groups, creates the planned mdevs
 * (av_binding_apply()). */
static gboolean
av_prepare_apply(AvPrepare *p, GError **error)
{
    av_hook_test_stop(p->config, "prepare-planned");
    if (!av_binding_apply(p->binding, error))
        return FALSE;
    for (guint i = 0; i < p->managed->len; i++) {
        AvManaged *m = g_ptr_array_index(p->managed, i);
        const AvMdevParent *mp;

        if (!m->mdev)
            continue;
        mp = av_host_find_mdev_parent(p->host, m->mdev_parent);
        m->pci = mp ? mp->pci : NULL;
        m->mdev_node = mp ? mp->numa_node : -1;
    }
    return TRUE;
}

/* Undoes what "apply" did, newest first (av_binding_undo()), then sets
 * back the VF counts "grow" raised.  Tries everything; FALSE with the
 * first failure. */
static gboolean
av_prepare_undo(AvPrepare *p, GError **error)
{
    gboolean ok = av_binding_undo(p->binding, error);

    for (guint i = p->vfs_written; ok && i > 0; i--) {
        const AvIntentVfs *v = g_ptr_array_index(p->intent->vfs, i - 1);

        if (!av_pool_vf_undo(p->pool, p->config->root, p->config->ops, v->pf, v->from, v->to, "rollback", error)) {
            av_hook_log(LOG_ERR, "rollback: cannot set the VFs of PF %s back to %u: %s", v->pf, v->from,
                        (*error)->message);
            ok = FALSE;
        } else {
            av_hook_log(LOG_INFO, "rollback: set the VFs of PF %s back to %u", v->pf, v->from);
        }
    }
    return ok;
}

/* Phase "commit": everything on the host succeeded.  Records where the
 * endpoints go back (a pool device's original driver, a companion's), moves
 * the claims and the mdevs in use, drops the write-ahead record, and saves:
 * one atomic write. */
static gboolean
av_prepare_commit(AvPrepare *p, GString *summary, GError **error)
{
    av_binding_commit(p->binding, p->pool);
    for (guint i = 0; i < p->claims->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(p->claims, i);

        if (!av_pool_take(p->pool, dev, p->owner, error))
            return FALSE;
        g_string_append_printf(summary, "%s%s", summary->len ? ", " : "", dev->address);
    }
    for (guint i = 0; i < p->managed->len; i++) {
        AvManaged *m = g_ptr_array_index(p->managed, i);
        AvPoolDevice *dev = m->pooldev;

        if (m->hostdev->type != AV_HOSTDEV_MDEV)
            continue;
        if (dev) {
            if (!av_pool_take(p->pool, dev, p->owner, error))
                return FALSE;
            g_free(dev->address);
            dev->address = g_strdup(m->mdev_parent);
        } else {
            dev = av_pool_add(p->pool, AV_DEVICE_KIND_MDEV, m->identity, m->mdev_parent, m->profile->name,
                              AV_DEVICE_STATE_IN_USE, p->owner, error);
            if (!dev)
                return FALSE;
        }
        dev->created = dev->created || (m->mdev && m->mdev->created);
        dev->numa_node = m->mdev_node;
        g_string_append_printf(summary, "%smdev %s on %s", summary->len ? ", " : "", m->hostdev->mdev_uuid,
                               m->mdev_parent);
    }
    if (p->intent) {
        av_pool_intent_remove(p->pool, p->intent);
        p->intent = NULL;
    }
    return av_pool_save(p->pool, error);
}

/* A prepare that failed after its plan was recorded: undoes what "apply"
 * did, drops the record and saves, then refuses with @error's message.
 * When @committing, the pool in memory holds transitions that were not
 * saved (their journal entries are written): it is not saved, a
 * "rolled-back" entry says so, and the record on disk is left for the next
 * holder of the lock to drop (av_pool_intents_undo(): nothing left to do). */
static int
av_prepare_fail(AvPrepare *p, const GError *failure, gboolean committing)
{
    g_autoptr(GError) undo_error = NULL;
    g_autoptr(GError) save_error = NULL;
    g_autofree char *message = g_strdup_printf("cannot start domain '%s': %s%s", p->domain->name,
                                               committing ? "cannot record its devices in the pool: " : "",
                                               failure->message);
    gboolean undone = av_prepare_undo(p, &undo_error);

    if (committing) {
        g_autoptr(json_t) fields = json_object();
        g_autoptr(GError) journal_error = NULL;

        json_object_set_new(fields, "domain_uuid", json_string(p->domain->uuid));
        json_object_set_new(fields, "reason", json_string(failure->message));
        json_object_set_new(fields, "note", json_string("the transitions of this prepare since the last "
                                                        "save were not saved; the pool is as before it"));
        if (!av_pool_journal_append(p->pool, "rolled-back", fields, &journal_error))
            av_hook_log(LOG_ERR, "cannot journal the rollback: %s", journal_error->message);
    } else if (p->intent && undone) {
        av_pool_intent_remove(p->pool, p->intent);
        p->intent = NULL;
        if (!av_pool_save(p->pool, &save_error))
            av_hook_log(LOG_ERR, "cannot drop the record of this prepare (the next call does): %s",
                        save_error->message);
    }
    if (!undone)
        return av_hook_refusef("%s (and undoing what this prepare did failed too: %s; see the system log; the "
                               "next accelvirt call tries again from its record)", message, undo_error->message);
    return av_hook_refuse(message);
}

/* After "resolve": every VF that "grow" made is a device accelvirt
 * manages (a pool device of its profile), so that the commit claims it and
 * the write-ahead record goes with the commit.  A VF made for a hostdev
 * that no profile manages is refused (the rollback takes it back): the
 * record would otherwise stay behind, and the next call would take the VF
 * from under the running domain. */
static gboolean
av_prepare_check_grown(AvPrepare *p, GError **error)
{
    for (guint i = 0; i < p->grown->len; i++) {
        const char *address = g_ptr_array_index(p->grown, i);
        gboolean managed = FALSE;

        for (guint j = 0; j < p->managed->len && !managed; j++) {
            const AvManaged *m = g_ptr_array_index(p->managed, j);

            managed = m->hostdev->type == AV_HOSTDEV_PCI && !m->through_group && m->pooldev &&
                      g_strcmp0(m->hostdev->pci_address, address) == 0;
        }
        if (!managed) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "VF %s, which accelvirt made again for the domain's placement, is managed by no profile now; "
                        "place the domain again with 'accelvirt define'", address);
            return FALSE;
        }
    }
    if (p->intent && p->managed->len == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "this prepare made VFs, and no device of the domain is managed by accelvirt; place the domain "
                    "again with 'accelvirt define'");
        return FALSE;
    }
    return TRUE;
}

/* The policy's "limits" (accelvirt-policy(5), LIMITS): the owner as
 * charged may hold every managed device of the domain, each pool device
 * once (those it holds already, claimed at define, counted once).  Reads
 * the pool only. */
static gboolean
av_prepare_check_limits(AvPrepare *p, GError **error)
{
    g_autofree AvLimitTake *takes = NULL;
    guint n = 0;

    if (!p->policy->limits || p->policy->limits->len == 0)
        return TRUE;
    takes = g_new0(AvLimitTake, p->managed->len + 1);
    for (guint i = 0; i < p->managed->len; i++) {
        const AvManaged *m = g_ptr_array_index(p->managed, i);

        const char *identity = m->pooldev ? m->pooldev->identity : m->identity;
        gboolean seen = FALSE;

        if (!m->profile)
            continue;
        /* A hostdev of a function in a pool device's IOMMU group claims
         * that device (through_group): it counts, once however many
         * hostdevs name it or its group. */
        for (guint t = 0; t < n && !seen; t++)
            seen = identity && g_strcmp0(takes[t].identity, identity) == 0;
        if (seen)
            continue;
        takes[n].identity = identity;
        takes[n].profile = m->profile->name;
        n++;
    }
    return av_pool_limits_check(p->pool, p->policy->limits, p->owner, takes, n, g_get_real_time() / G_USEC_PER_SEC, error);
}

/* "prepare begin": claims every managed device under the pool's exclusive
 * lock (held throughout, so that racing hooks serialise), binds PCI devices
 * of managed='no' hostdevs and their IOMMU groups to vfio-pci, creates the
 * mdevs the XML names, then records the devices in-use.  The pool and the
 * journal change only once everything on the host succeeded; any failure
 * before that undoes the host changes and leaves the pool as it was.  What
 * the host will see is saved in the pool before it is touched, so that a
 * prepare killed at any point is undone by the next call. */
int
av_hook_prepare(const AvHookConfig *config, AvDomain *domain)
{
    g_auto(AvPrepare) p = { 0 };
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) summary = g_string_new(NULL);

    p.config = config;
    p.domain = domain;
    p.groups = g_ptr_array_new_with_free_func((GDestroyNotify)av_prepare_group_free);
    p.claims = g_ptr_array_new();
    p.binding = av_binding_new(config->root, config->ops, av_prepare_note, NULL);
    p.binding->stop_bound_first = "prepare-bound-first";
    p.grown = g_ptr_array_new();

    p.by = g_strdup_printf("prepare of domain '%s' (%s)", domain->name, domain->uuid);

    if (!av_prepare_open(&p, &error))
        return av_hook_refuse(error->message);
    if (!domain->scrub_token && !av_prepare_grow(&p, &error))
        return av_prepare_fail(&p, error, FALSE);
    if (!av_hook_resolve(p.config, p.host, p.policy, p.pool, domain, &p.managed, &error))
        return av_prepare_fail(&p, error, FALSE);
    if (!av_prepare_check_grown(&p, &error))
        return av_prepare_fail(&p, error, FALSE);
    if (domain->scrub_token)
        return av_hook_prepare_scrub(config, p.host, p.policy, p.pool, domain, p.managed);
    if (p.managed->len == 0) {
        av_hook_log(LOG_INFO, "prepare: no device of this domain is managed by accelvirt");
        return 0;
    }
    p.owner = av_hook_owner_for(domain, p.policy, p.pool, &error);
    if (!p.owner)
        return av_prepare_fail(&p, error, FALSE);
    if (!av_prepare_check_limits(&p, &error) || !av_prepare_check(&p, &error) ||
        !av_prepare_check_bitstreams(&p, &error) ||
        !av_prepare_plan(&p, &error))
        return av_prepare_fail(&p, error, FALSE);
    if (!av_prepare_apply(&p, &error) || !av_prepare_drivers(&p, &error))
        return av_prepare_fail(&p, error, FALSE);
    av_hook_test_stop(config, "prepare-commit");
    if (!av_prepare_commit(&p, summary, &error)) {
        /* Every on_prepare passed: each is undone before the binding. */
        av_prepare_drivers_undo(&p, p.claims->len + p.managed->len);
        return av_prepare_fail(&p, error, TRUE);
    }
    av_hook_log(LOG_INFO, "prepare: in use by this domain: %s", summary->str);
    return 0;
}
