/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt attach: accelerators hot-plugged into running domains (the
 * unplug is cli-detach.c; the libvirt calls both make, cli-hotplug.c).
 *
 * libvirt runs no hook on device hot-plug (docs/hooks.rst lists none), so
 * the CLI does what the hook's prepare and release do:
 *
 *   attach  under the pool's lock: place the request against the running
 *           domain's NUMA pinning (av_place(), the placer of define), claim,
 *           record what it binds (a write-ahead record, as the hook's
 *           prepare), bind every endpoint of each IOMMU group to vfio-pci
 *           (or make the mdev, on the parent placement chose), mark the
 *           attach in flight (av_pool_attach_mark()), record the
 *           devices in use, journal "attach", save.  Then, without the lock
 *           (a hot-plug takes seconds while QEMU pins the guest's memory, and
 *           the hooks of other domains must not wait), hot-plug each device
 *           as <hostdev managed='no'> with a "ua-accelvirt-" user alias
 *           (virDomainAttachDeviceFlags; libvirt's formatdomain.html, "Device
 *           aliases": user aliases start with "ua-").  A failure rolls back
 *           every step under the lock again: a device the guest never had
 *           goes back to its driver and to free ("attach-rolled-back"); one
 *           it may have had (still in the live XML, or its IOMMU group held)
 *           or whose profile's on_prepare ran goes dirty and is scrubbed.
 */
#include "config.h"

#include <errno.h>
#include <syslog.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "cli.h"
#include "cli-hotplug.h"
#include "domain/av-domain.h"
#include "place/av-place.h"
#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-libvirt-casts.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-hold.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

/* The user alias of the device at @address (a PCI address or a USB bus
 * path): "ua-accelvirt-" and the address with every character that is no
 * letter or digit as '-' ("ua-accelvirt-0000-65-00-0", "ua-accelvirt-usb-
 * 1-2-3"): stable, unique on the host, and made of what libvirt accepts
 * in an alias.  Caller frees. */
static char *
av_attach_alias(const char *address, gboolean usb)
{
    g_autofree char *alias = g_strdup_printf("ua-accelvirt-%s%s", usb ? "usb-" : "", address);

    for (char *p = alias + strlen("ua-accelvirt-"); *p; p++)
        if (!g_ascii_isalnum(*p))
            *p = '-';
    return g_steal_pointer(&alias);
}

/* What names the placed @item for a reader: a PCI address, a USB bus
 * path, an mdev's UUID.  Borrowed from @item. */
static const char *
av_attach_item_name(const AvPlacedItem *item)
{
    if (item->attach == AV_ATTACH_MDEV)
        return item->mdev_uuid;
    return item->attach == AV_ATTACH_USB ? item->usb_bus_path : item->pci_address;
}

/* The alias of the placed @item (av_attach_alias(); "ua-accelvirt-mdev-
 * UUID" for an mdev).  Caller frees. */
static char *
av_attach_item_alias(const AvPlacedItem *item)
{
    if (item->attach == AV_ATTACH_MDEV)
        return g_strdup_printf("ua-accelvirt-mdev-%s", item->mdev_uuid);
    return av_attach_alias(av_attach_item_name(item), item->attach == AV_ATTACH_USB);
}

/* The <hostdev> of a placed PCI function, USB stick or mdev (libvirt's
 * formatdomain.html, "Host device assignment").  Caller frees. */
static char *
av_attach_hostdev_xml(const AvPlacedItem *item, const char *alias)
{
    guint dom_, bus, slot, fn;

    if (item->attach == AV_ATTACH_MDEV)
        return g_strdup_printf("<hostdev mode='subsystem' type='mdev' model='vfio-pci'>\n"
                               "  <source>\n"
                               "    <address uuid='%s'/>\n"
                               "  </source>\n"
                               "  <alias name='%s'/>\n"
                               "</hostdev>\n",
                               item->mdev_uuid, alias);
    if (item->attach == AV_ATTACH_USB)
        return g_strdup_printf("<hostdev mode='subsystem' type='usb'>\n"
                               "  <source>\n"
                               "    <vendor id='0x%04x'/>\n"
                               "    <product id='0x%04x'/>\n"
                               "    <address bus='%u' device='%u'/>\n"
                               "  </source>\n"
                               "  <alias name='%s'/>\n"
                               "</hostdev>\n",
                               item->usb_vendor, item->usb_product, item->usb_busnum, item->usb_devnum, alias);
    if (sscanf(item->pci_address, "%x:%x:%x.%x", &dom_, &bus, &slot, &fn) != 4)
        return NULL;
    return g_strdup_printf("<hostdev mode='subsystem' type='pci' managed='no'>\n"
                           "  <source>\n"
                           "    <address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>\n"
                           "  </source>\n"
                           "  <alias name='%s'/>\n"
                           "</hostdev>\n",
                           dom_, bus, slot, fn, alias);
}

/* The holder the pool records for @domain: its UUID and name, and Nova's
 * instance, project and user when Nova wrote it (as the hook's prepare). */
static AvOwner *
av_attach_owner(const AvDomain *domain, const char *uuid)
{
    AvOwner *owner = av_owner_new(uuid, domain->name);

    if (domain->is_nova) {
        owner->nova_instance = g_strdup(uuid);
        owner->nova_project = g_strdup(domain->nova_project);
        owner->nova_user = g_strdup(domain->nova_user);
    }
    return owner;
}

/* --- attach: where ----------------------------------------------------------------------- */

/* The NUMA nodes @domain is pinned to: each node that holds every CPU its
 * vCPUs may run on (when every vCPU is pinned: *ret_all_pinned), within its
 * <numatune><memory nodeset=> when it has one.  *ret_nodes (guint) is NULL
 * when nothing pins the domain.  FALSE with @error when the pinning cannot
 * be read. */
static gboolean
av_attach_pinned_nodes(const AvDomain *domain, const AvHost *host, GArray **ret_nodes, gboolean *ret_all_pinned,
                       GError **error)
{
    g_autoptr(GArray) cpus = NULL;
    g_autoptr(GArray) memory = NULL;
    g_autoptr(GArray) nodes = NULL;
    gboolean all_pinned = FALSE;

    if (!av_domain_vcpu_cpus(domain, &cpus, &all_pinned, error))
        return FALSE;
    if (domain->numatune_memory_nodeset &&
        !av_domain_cpuset_parse(domain->numatune_memory_nodeset, AV_DOMAIN_NODE_MAX, &memory, error))
        return FALSE;
    *ret_all_pinned = all_pinned;
    *ret_nodes = NULL;
    if (!all_pinned && !memory)
        return TRUE;
    nodes = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, i);
        gboolean ok = TRUE;

        for (guint j = 0; all_pinned && ok && j < cpus->len; j++) {
            gboolean in = FALSE;

            for (guint k = 0; n->cpus && k < n->cpus->len && !in; k++)
                in = g_array_index(n->cpus, guint, k) == g_array_index(cpus, guint, j);
            ok = in;
        }
        for (guint j = 0; memory && ok && j < memory->len; j++)
            if (g_array_index(memory, guint, j) == (guint)n->id)
                break;
            else if (j + 1 == memory->len)
                ok = FALSE;
        if (ok)
            g_array_append_val(nodes, n->id);
    }
    *ret_nodes = g_steal_pointer(&nodes);
    return TRUE;
}

/* @nodes as "0" or "0,1" ("none" when empty).  Caller frees. */
static char *
av_attach_node_list(const GArray *nodes)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < nodes->len; i++)
        g_string_append_printf(s, "%s%u", i ? "," : "", g_array_index(nodes, guint, i));
    if (s->len == 0)
        g_string_append(s, "none");
    return g_string_free(s, FALSE);
}

/* What is free of @profile per NUMA node outside @nodes: "node 0 has 3
 * free", "nothing" when none.  Caller frees. */
static char *
av_attach_free_elsewhere(const AvPool *pool, const AvHost *host, const char *profile, const GArray *nodes)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, i);
        guint free_ = 0;
        gboolean mine = FALSE;

        for (guint j = 0; nodes && j < nodes->len; j++)
            mine = mine || g_array_index(nodes, guint, j) == (guint)n->id;
        if (mine)
            continue;
        for (guint j = 0; j < av_pool_devices(pool)->len; j++) {
            const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), j);

            if (dev->state == AV_DEVICE_STATE_FREE && dev->numa_node == n->id && g_strcmp0(dev->profile, profile) == 0)
                free_++;
        }
        if (free_)
            g_string_append_printf(s, "%snode %d has %u free", s->len ? ", " : "", n->id, free_);
    }
    if (s->len == 0)
        g_string_append(s, "nothing is free on other nodes");
    return g_string_free(s, FALSE);
}

/* av_place() of @requests for the domain @uuid, on the NUMA nodes @nodes
 * only (NULL: any): the placer of define, shown only those nodes of
 * @host. */
static AvPlacement *
av_attach_place_on(AvHost *host, const AvPolicy *policy, const AvPool *pool, GPtrArray *requests,
                   const char *uuid, const GArray *nodes, GError **error)
{
    GPtrArray *all = host->numa_nodes;
    g_autoptr(GPtrArray) some = g_ptr_array_new();
    AvPlaceOptions options = { 0 };
    AvPlacement *placement;

    options.domain_uuid = uuid;
    /* The domain's vCPUs run already: placing them is not attach's business. */
    options.vcpus = 1;
    for (guint i = 0; nodes && i < all->len; i++) {
        AvNumaNode *n = g_ptr_array_index(all, i);

        for (guint j = 0; j < nodes->len; j++)
            if (g_array_index(nodes, guint, j) == (guint)n->id)
                g_ptr_array_add(some, n);
    }
    if (nodes)
        host->numa_nodes = some;
    placement = av_place(host, policy, pool, requests, &options, error);
    host->numa_nodes = all;
    return placement;
}

/* Makes the VFs a "vfs" profile lacks for @count devices (define's
 * av_cli_grow_vfs(): journalled "vfs-set", the host scanned again into
 * *@host); other profiles make nothing.  VFs made for an attach that
 * fails stay, free and idle, as after define (a "vfs_shrink" profile takes
 * them back once every VF is free). */
static gboolean
av_attach_grow_vfs(const AvRoot *root, const AvPolicy *policy, AvPool *pool, AvHost **host, const AvProfile *profile,
                   guint count, const AvDomain *domain, const char *uuid, gboolean dry_run, guint *ret_planned,
                   char **ret_why, GError **error)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autofree char *by = g_strdup_printf("attach to domain '%s' (%s)", domain->name, uuid);

    *ret_planned = 0;
    if (profile->attach != AV_ATTACH_SRIOV_VF)
        return TRUE;
    g_ptr_array_add(requests, av_request_new(profile->name, count));
    return av_cli_grow_vfs(root, policy, pool, host, requests, uuid, by, dry_run, ret_planned, ret_why, error);
}

/* Adds to @error (set) why no VF could be made, when @why says. */
static void
av_attach_add_why(GError **error, const char *why)
{
    char *message;

    if (!why || !error || !*error)
        return;
    message = g_strdup_printf("%s; and no VF could be made: %s", (*error)->message, why);
    g_free((*error)->message);
    (*error)->message = message;
}

/* Places @count devices of @profile for the running @domain against its NUMA
 * pinning: numa strict, only on the node(s) its vCPUs are pinned to
 * (refused, in one line naming the node and what is free elsewhere, when
 * none is free there, or when its vCPUs are not all pinned within one node);
 * preferred, there first, else anywhere with a warning on stderr; none,
 * anywhere.  Changes nothing. */
static AvPlacement *
av_attach_place(AvHost *host, const AvPolicy *policy, const AvPool *pool, const AvProfile *profile, guint count,
                const AvDomain *domain, const char *uuid, GError **error)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autoptr(GArray) nodes = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *list = NULL;
    g_autofree char *elsewhere = NULL;
    AvPlacement *placement;
    gboolean all_pinned = FALSE;

    g_ptr_array_add(requests, av_request_new(profile->name, count));
    if (profile->numa == AV_NUMA_NONE || profile->attach == AV_ATTACH_USB)
        return av_attach_place_on(host, policy, pool, requests, uuid, NULL, error);
    if (!av_attach_pinned_nodes(domain, host, &nodes, &all_pinned, &local)) {
        if (profile->numa == AV_NUMA_STRICT) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "profile '%s' has numa strict, and the NUMA "
                        "pinning of domain '%s' cannot be read: %s", profile->name, domain->name, local->message);
            return NULL;
        }
        fprintf(stderr, "accelvirt: warning: the NUMA pinning of domain '%s' cannot be read (%s); placing on "
                "any node\n", domain->name, local->message);
        return av_attach_place_on(host, policy, pool, requests, uuid, NULL, error);
    }
    if (profile->numa == AV_NUMA_STRICT && (!all_pinned || nodes->len == 0)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "profile '%s' has numa strict, and the vCPUs of domain '%s' are not %s; pin every vCPU to the "
                    "CPUs of one node (<vcpupin> or <vcpu cpuset=>), or use a profile with numa preferred",
                    profile->name, domain->name, all_pinned ? "pinned within one NUMA node" : "all pinned");
        return NULL;
    }
    if (!nodes)
        return av_attach_place_on(host, policy, pool, requests, uuid, NULL, error);
    list = av_attach_node_list(nodes);
    placement = nodes->len ? av_attach_place_on(host, policy, pool, requests, uuid, nodes, &local) : NULL;
    if (placement)
        return placement;
    elsewhere = av_attach_free_elsewhere(pool, host, profile->name, nodes);
    if (profile->numa == AV_NUMA_STRICT) {
        g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                    "cannot attach %u of profile '%s' to domain '%s' on NUMA node %s, where it is pinned (numa "
                    "strict): %s; %s", count, profile->name, domain->name, list,
                    local ? local->message : "no node fits", elsewhere);
        return NULL;
    }
    placement = av_attach_place_on(host, policy, pool, requests, uuid, NULL, error);
    if (placement && nodes->len == 0)
        fprintf(stderr, "accelvirt: warning: the vCPUs of domain '%s' are pinned across NUMA nodes; profile '%s' "
                "placed on node %d (numa preferred)\n", domain->name, profile->name, placement->numa_node);
    else if (placement)
        fprintf(stderr, "accelvirt: warning: nothing of profile '%s' fits NUMA node %s, where domain '%s' is "
                "pinned; placed on node %d instead (numa preferred)\n", profile->name, list, domain->name,
                placement->numa_node);
    return placement;
}

/* --- attach: claim, bind, record ----------------------------------------------------------- */

/* One device plugged into the guest. */
typedef struct {
    const AvPlacedItem *item;    /* borrowed from the placement */
    char *identity;              /* its pool identity ("mdev:UUID" for an mdev) */
    char *alias;
    char *xml;                   /* its <hostdev> */
    int group;                   /* its IOMMU group, -1 for a USB stick */
    gboolean attached;
} AvAttachPlug;

static void
av_attach_plug_free(AvAttachPlug *p)
{
    if (!p)
        return;
    g_free(p->identity);
    g_free(p->alias);
    g_free(p->xml);
    g_free(p);
}

/* Everything one attach knows. */
typedef struct {
    const AvCli *cli;
    AvRoot *root;
    const AvKernelOps *kops;
    const AvHotplugOps *ops;
    char uuid[VIR_UUID_STRING_BUFLEN];
    AvDomain *domain;            /* the live XML, parsed */
    AvOwner *owner;
    AvPlacement *placement;
    GPtrArray *plugs;            /* AvAttachPlug* */
    GPtrArray *claims;           /* char*: identity of every pool device taken in use, items and group mates */
    AvBinding *binding;          /* what it binds and makes on the host: the endpoints of the groups, the
                                  * vGPUs and mdevs to make, the groups (lifecycle/av-binding.h) */
    GPtrArray *marks;            /* AvPoolAttachMark* */
    GPtrArray *prepared;         /* char*, borrowed from the plugs: the identities whose on_prepare passed */
} AvAttachRun;

static void
av_attach_clear(AvAttachRun *a)
{
    g_clear_pointer(&a->root, av_root_free);
    g_clear_pointer(&a->domain, av_domain_free);
    g_clear_pointer(&a->owner, av_owner_free);
    g_clear_pointer(&a->placement, av_placement_free);
    g_clear_pointer(&a->plugs, g_ptr_array_unref);
    g_clear_pointer(&a->claims, g_ptr_array_unref);
    g_clear_pointer(&a->binding, av_binding_free);
    g_clear_pointer(&a->marks, g_ptr_array_unref);
    g_clear_pointer(&a->prepared, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AvAttachRun, av_attach_clear)

/* The binding's notes: a warning goes to standard error; a failure of an
 * undo is in the error the undo returns, which the caller shows; the
 * kernel changes themselves are not shown. */
static void
av_attach_note(gpointer data G_GNUC_UNUSED, int priority, const char *message)
{
    if (priority == LOG_WARNING)
        fprintf(stderr, "accelvirt: warning: %s\n", message);
}

/* FALSE (AV_ERROR_IN_USE, one sentence) unless @dev is free or claimed by
 * the domain @uuid. */
static gboolean
av_attach_check_available(const AvPoolDevice *dev, const char *uuid, GError **error)
{
    if (dev->state == AV_DEVICE_STATE_FREE ||
        (dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner && g_strcmp0(dev->owner->domain_uuid, uuid) == 0))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "device %s (%s) is %s%s%s; it cannot be attached",
                dev->address ? dev->address : "-", dev->identity, av_device_state_to_string(dev->state),
                dev->owner && dev->owner->domain_name ? " by domain " : "",
                dev->owner && dev->owner->domain_name ? dev->owner->domain_name : "");
    return FALSE;
}

static void
av_attach_add_claim(AvAttachRun *a, const char *identity)
{
    for (guint i = 0; i < a->claims->len; i++)
        if (g_str_equal(g_ptr_array_index(a->claims, i), identity))
            return;
    g_ptr_array_add(a->claims, g_strdup(identity));
}

/* The IOMMU group of @pci, checked (av_vfio_group_check()) and every pool
 * device of it available, taken into the claims; its endpoints not on
 * vfio-pci yet go into the binds.  A group already taken is left. */
static gboolean
av_attach_plan_group(AvAttachRun *a, AvPool *pool, const AvHost *host, const AvPolicy *policy, const AvPciDevice *pci,
                     const AvPoolDevice *dev, GError **error)
{
    g_autoptr(GPtrArray) members = NULL;
    const char *first = dev->identity;

    if (pci->iommu_group >= 0 && av_binding_has_group(a->binding, pci->iommu_group))
        return TRUE;
    if (!av_vfio_group_check(host, policy, pci, &members, error))
        return FALSE;
    for (guint i = 0; i < members->len; i++) {
        const char *address = g_ptr_array_index(members, i);
        const AvPoolDevice *mate = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, address);

        if (mate) {
            if (!av_attach_check_available(mate, a->uuid, error)) {
                g_prefix_error(error, "%s shares IOMMU group %d with it: ", pci->address, pci->iommu_group);
                return FALSE;
            }
            av_attach_add_claim(a, mate->identity);
        }
        /* Its vfio driver, chosen before anything is touched; a vGPU VF
         * stays on NVIDIA's driver, its vGPU made instead. */
        if (!av_binding_plan_endpoint(a->binding, host, policy, address, pci->iommu_group,
                                      mate ? mate->identity : first, TRUE, error))
            return FALSE;
    }
    av_binding_wait_group(a->binding, pci->iommu_group);
    return TRUE;
}

/* A new plug of @item (pool identity @identity) for this attach.
 * Borrowed from @a. */
static AvAttachPlug *
av_attach_plug_new(AvAttachRun *a, const AvPlacedItem *item, const char *identity)
{
    AvAttachPlug *plug = g_new0(AvAttachPlug, 1);

    plug->item = item;
    plug->identity = g_strdup(identity);
    plug->alias = av_attach_item_alias(item);
    plug->xml = av_attach_hostdev_xml(item, plug->alias);
    plug->group = -1;
    g_ptr_array_add(a->plugs, plug);
    return plug;
}

/* The mdev of @item, to make on the parent placement chose: the parent is
 * on this host and the UUID new to the pool. */
static gboolean
av_attach_plan_mdev(AvAttachRun *a, AvPool *pool, const AvHost *host, const AvPlacedItem *item, GError **error)
{
    const char *parent = item->mdev_parent ? item->mdev_parent : item->pci_address;
    const AvMdevParent *mp = parent ? av_host_find_mdev_parent(host, parent) : NULL;
    const AvBindingMdev *m;

    if (!mp || !item->mdev_type || !item->mdev_uuid) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "the mdev parent '%s' placement chose is not on this "
                    "host; run 'accelvirt status' and retry", parent ? parent : "?");
        return FALSE;
    }
    m = av_binding_add_mdev(a->binding, item->mdev_uuid, parent, item->mdev_type, item->profile, mp->numa_node);
    if (av_pool_find(pool, m->identity)) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE, "mdev %s is in the pool already", m->uuid);
        return FALSE;
    }
    av_attach_plug_new(a, item, m->identity);
    return TRUE;
}

/* Under the pool's lock: every placed device available, its IOMMU group
 * viable and free, what to bind, make and plug. */
static gboolean
av_attach_plan(AvAttachRun *a, AvPool *pool, const AvHost *host, const AvPolicy *policy, GError **error)
{
    for (guint i = 0; i < a->placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(a->placement->items, i);
        const AvPoolDevice *dev = item->identity ? av_pool_find(pool, item->identity) : NULL;
        const AvPciDevice *pci = NULL;
        gboolean usb = item->attach == AV_ATTACH_USB;
        AvAttachPlug *plug;

        if (item->attach == AV_ATTACH_MDEV) {
            if (!av_attach_plan_mdev(a, pool, host, item, error))
                return FALSE;
            continue;
        }
        if (!dev) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "placed device '%s' is not in the pool; run 'accelvirt "
                        "status' and retry", item->identity ? item->identity : "?");
            return FALSE;
        }
        if (!av_attach_check_available(dev, a->uuid, error))
            return FALSE;
        av_attach_add_claim(a, dev->identity);
        plug = av_attach_plug_new(a, item, dev->identity);
        if (usb && (item->usb_busnum == 0 || item->usb_devnum == 0)) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the bus and device numbers of USB stick %s cannot be "
                        "read, and libvirt hot-plugs a stick by them; run 'accelvirt status' and retry",
                        item->usb_bus_path);
            return FALSE;
        }
        if (usb)
            continue; /* QEMU's usb-host opens /dev/bus/usb itself: no bind */
        pci = av_host_find_pci(host, item->pci_address);
        if (!pci || !plug->xml) {
            g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "device %s is not on this host", item->pci_address);
            return FALSE;
        }
        plug->group = pci->iommu_group;
        /* A PF goes to no domain while a VF of it is not free, nor a VF
         * while its PF is not free. */
        if (!pci->physfn && !av_pool_pf_check_vfs(pool, host, pci->address, error))
            return FALSE;
        if (pci->physfn && !av_pool_vf_check_pf(pool, pci, error))
            return FALSE;
        if (!av_attach_plan_group(a, pool, host, policy, pci, dev, error))
            return FALSE;
    }
    return TRUE;
}

/* Records the plan in a write-ahead record and saves it (an attach killed
 * half-way is undone by the next holder of the lock:
 * av_pool_intents_undo()), then binds and makes it, as the hook's prepare
 * does (av_binding_apply()).  On failure undoes what it did and drops the
 * record. */
static gboolean
av_attach_bind(AvAttachRun *a, AvPool *pool, AvIntent **ret_intent, GError **error)
{
    AvIntent *intent = av_intent_new(a->uuid, a->domain->name);
    g_autoptr(GError) undo = NULL;

    av_binding_record(a->binding, intent);
    for (guint i = 0; i < a->claims->len; i++)
        av_intent_add_claim(intent, g_ptr_array_index(a->claims, i));
    for (guint i = 0; i < a->binding->mdevs->len; i++)
        av_intent_add_claim(intent, ((const AvBindingMdev *)g_ptr_array_index(a->binding->mdevs, i))->identity);
    intent = av_pool_intent_add(pool, intent);
    if (!av_pool_save(pool, error)) {
        av_pool_intent_remove(pool, intent);
        return FALSE;
    }
    if (av_binding_apply(a->binding, error)) {
        *ret_intent = intent;
        return TRUE;
    }
    if (!av_binding_undo(a->binding, &undo)) {
        /* The record stays: the next holder of the lock tries again. */
        char *message = g_strdup_printf("%s (and giving the endpoints back failed: %s; the next accelvirt call "
                                        "tries again)", (*error)->message, undo->message);

        g_free((*error)->message);
        (*error)->message = message;
        return FALSE;
    }
    av_pool_intent_remove(pool, intent);
    if (!av_pool_save(pool, &undo))
        fprintf(stderr, "accelvirt: warning: cannot drop the record of this attach (the next call does): %s\n",
                undo->message);
    return FALSE;
}

/* The devices of this attach as JSON: identity, address, profile, alias,
 * NUMA node.  Caller owns it. */
static json_t *
av_attach_devices_json(const AvAttachRun *a)
{
    json_t *devices = json_array();

    for (guint i = 0; i < a->plugs->len; i++) {
        const AvAttachPlug *p = g_ptr_array_index(a->plugs, i);
        const AvPlacedItem *item = p->item;

        json_array_append_new(devices, json_pack("{s:s?,s:s?,s:s?,s:s,s:s,s:i}", "identity", p->identity,
                                                 "address", item->attach == AV_ATTACH_USB ? item->usb_bus_path
                                                                                          : item->pci_address,
                                                 "mdev_uuid", item->mdev_uuid, "profile", item->profile, "alias",
                                                 p->alias, "numa_node", item->numa_node));
    }
    return devices;
}

/* Marks the attach in flight, records drivers and companions, moves every
 * claim to in use, drops the write-ahead record, journals "attach", saves. */
static gboolean
av_attach_commit(AvAttachRun *a, AvPool *pool, AvIntent *intent, gboolean persistent, GError **error)
{
    g_autoptr(json_t) fields = json_object();
    g_autofree char *operator_name = av_cli_operator();

    for (guint i = 0; i < a->claims->len; i++) {
        AvPoolAttachMark *mark = av_pool_attach_mark(a->cli->state_dir, a->uuid, g_ptr_array_index(a->claims, i),
                                                     error);

        if (!mark)
            return FALSE;
        g_ptr_array_add(a->marks, mark);
    }
    for (guint i = 0; i < a->binding->mdevs->len; i++) {
        const AvBindingMdev *m = g_ptr_array_index(a->binding->mdevs, i);
        AvPoolAttachMark *mark = av_pool_attach_mark(a->cli->state_dir, a->uuid, m->identity, error);

        if (!mark)
            return FALSE;
        g_ptr_array_add(a->marks, mark);
    }
    av_binding_commit(a->binding, pool);
    for (guint i = 0; i < a->claims->len; i++) {
        AvPoolDevice *dev = av_pool_find(pool, g_ptr_array_index(a->claims, i));

        if (!dev) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "device '%s' left the pool while it was attached",
                        (const char *)g_ptr_array_index(a->claims, i));
            return FALSE;
        }
        if (!av_pool_take(pool, dev, a->owner, error))
            return FALSE;
    }
    for (guint i = 0; i < a->binding->mdevs->len; i++) {
        const AvBindingMdev *m = g_ptr_array_index(a->binding->mdevs, i);
        AvPoolDevice *dev = av_pool_add(pool, AV_DEVICE_KIND_MDEV, m->identity, m->parent, m->profile,
                                        AV_DEVICE_STATE_IN_USE, a->owner, error);

        if (!dev)
            return FALSE;
        dev->created = TRUE;
        dev->numa_node = m->node;
    }
    av_pool_intent_remove(pool, intent);
    json_object_set_new(fields, "domain_uuid", json_string(a->uuid));
    json_object_set_new(fields, "domain_name", json_string(a->domain->name));
    json_object_set_new(fields, "numa_node", json_integer(a->placement->numa_node));
    json_object_set_new(fields, "devices", av_attach_devices_json(a));
    json_object_set_new(fields, "persistent", json_boolean(persistent));
    json_object_set_new(fields, "operator", json_string(operator_name));
    return av_pool_journal_append(pool, "attach", fields, error) && av_pool_save(pool, error);
}

/* --- attach: plug, or roll back ---------------------------------------------------------- */

/* Hot-plugs every planned device, live (and into the persistent definition
 * with @persistent), without the pool's lock. */
static gboolean
av_attach_plug(AvAttachRun *a, virDomain *dom, gboolean persistent, GError **error)
{
    unsigned int flags = VIR_DOMAIN_AFFECT_LIVE | (persistent ? VIR_DOMAIN_AFFECT_CONFIG : 0);

    for (guint i = 0; i < a->plugs->len; i++) {
        AvAttachPlug *p = g_ptr_array_index(a->plugs, i);

        if (!a->ops->attach(dom, p->xml, flags, error)) {
            g_prefix_error(error, "cannot hot-plug %s into domain '%s': ", av_attach_item_name(p->item),
                           a->domain->name);
            return FALSE;
        }
        p->attached = TRUE;
    }
    return TRUE;
}

/* Whether the guest may have had the pool device @dev of this attach: one
 * of its group's plugs (its own, for a USB stick or an mdev) went in, or
 * had its profile's on_prepare run (which a release undoes: its on_release
 * is the scrub's, as after every release), or is in the live XML @live
 * (NULL: it cannot be told), or a process holds its IOMMU group. */
static gboolean
av_attach_guest_may_have(const AvAttachRun *a, const AvPoolDevice *dev, const AvDomain *live)
{
    int group = dev->kind == AV_DEVICE_KIND_PCI ? dev->iommu_group : -1;
    g_autofree char *holder = NULL;

    if (!live)
        return TRUE;
    for (guint i = 0; i < a->plugs->len; i++) {
        const AvAttachPlug *p = g_ptr_array_index(a->plugs, i);

        if (!(group >= 0 ? p->group == group : g_strcmp0(p->identity, dev->identity) == 0))
            continue;
        if (p->attached || g_ptr_array_find_with_equal_func(a->prepared, p->identity, g_str_equal, NULL))
            return TRUE;
        for (guint j = 0; j < live->hostdevs->len; j++) {
            const AvHostdev *h = g_ptr_array_index(live->hostdevs, j);

            if (g_strcmp0(h->alias, p->alias) == 0 ||
                (h->type == AV_HOSTDEV_PCI && g_strcmp0(h->pci_address, p->item->pci_address) == 0) ||
                (h->type == AV_HOSTDEV_MDEV && g_strcmp0(h->mdev_uuid, p->item->mdev_uuid) == 0))
                return TRUE;
        }
    }
    return group >= 0 && (holder = av_vfio_group_holder(a->root, group)) != NULL;
}

/* A device of a failed attach that the guest may have had: in use ->
 * dirty, scrubbed by the worker; its identity appended to @dirtied. */
static gboolean
av_attach_rollback_dirty(AvPool *pool, AvPoolDevice *dev, json_t *dirtied, GError **error)
{
    gboolean moved = FALSE;

    if (!av_pool_release_device(pool, dev, "attach-rolled-back", &moved, error))
        return FALSE;
    json_array_append_new(dirtied, json_string(dev->identity));
    av_cli_want_worker();
    return TRUE;
}

/* After a failed hot-plug (@why): unplugs what went in, then under the
 * pool's lock again gives each device the guest never had back to its
 * driver and to free (an mdev it made is removed, and leaves the pool),
 * and releases the others (dirty, scrubbed); journals
 * "attach-rolled-back", saves.  *ret_report gets {"freed": [...],
 * "dirtied": [...]} (identities).  FALSE when the pool cannot be opened:
 * the devices then stay in use until `accelvirt audit` releases them. */
static gboolean
av_attach_rollback(AvAttachRun *a, virConnect *conn, virDomain *dom, gboolean persistent, const char *why,
                   json_t **ret_report, GError **error)
{
    g_autoptr(GPtrArray) aliases = g_ptr_array_new();
    g_autoptr(GHashTable) removed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(AvDomain) live = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(json_t) fields = json_object();
    json_t *freed = json_array();
    json_t *dirtied = json_array();

    json_object_set_new(fields, "domain_uuid", json_string(a->uuid));
    json_object_set_new(fields, "domain_name", json_string(a->domain->name));
    json_object_set_new(fields, "reason", json_string(why));
    json_object_set_new(fields, "freed", freed);
    json_object_set_new(fields, "dirtied", dirtied);
    for (guint i = 0; i < a->plugs->len; i++) {
        const AvAttachPlug *p = g_ptr_array_index(a->plugs, i);

        if (p->attached)
            g_ptr_array_add(aliases, p->alias);
    }
    if (aliases->len > 0 &&
        !a->ops->detach_live(conn, dom, aliases, AV_DETACH_TIMEOUT_S * 1000, removed, &local)) {
        fprintf(stderr, "accelvirt: warning: %s\n", local->message);
        g_clear_error(&local);
    }
    for (guint i = 0; persistent && i < a->plugs->len; i++) {
        const AvAttachPlug *p = g_ptr_array_index(a->plugs, i);

        if (p->attached && !a->ops->detach_config(dom, p->xml, &local)) {
            fprintf(stderr, "accelvirt: warning: %s\n", local->message);
            g_clear_error(&local);
        }
    }
    live = av_attach_parse(a->ops, dom, FALSE, NULL);
    pool = av_cli_open_pool(a->cli, a->root, AV_POOL_WRITE, error);
    if (!pool) {
        g_prefix_error(error, "cannot roll the attach back (its devices stay in use until 'accelvirt audit' "
                       "releases them): ");
        return FALSE;
    }
    for (guint i = 0; i < a->claims->len; i++) {
        AvPoolDevice *dev = av_pool_find(pool, g_ptr_array_index(a->claims, i));
        gboolean had;

        if (!dev || dev->state != AV_DEVICE_STATE_IN_USE || !dev->owner ||
            g_strcmp0(dev->owner->domain_uuid, a->uuid) != 0)
            continue; /* released by another accelvirt meanwhile */
        had = av_attach_guest_may_have(a, dev, live);
        if (!had && dev->kind == AV_DEVICE_KIND_PCI && !av_binding_undo_group(a->binding, dev->iommu_group, &local)) {
            fprintf(stderr, "accelvirt: warning: %s; device %s goes dirty, the worker gives it back\n",
                    local->message, dev->address);
            g_clear_error(&local);
            had = TRUE;
        }
        if (had) {
            if (!av_attach_rollback_dirty(pool, dev, dirtied, error))
                return FALSE;
            continue;
        }
        av_binding_drop_companions(a->binding, dev);
        if (!av_pool_attach_undo(pool, dev, a->uuid, why, error))
            return FALSE;
        json_array_append_new(freed, json_string(dev->identity));
    }
    for (guint i = 0; i < a->binding->mdevs->len; i++) {
        const AvBindingMdev *m = g_ptr_array_index(a->binding->mdevs, i);
        AvPoolDevice *dev = av_pool_find(pool, m->identity);
        gboolean had;

        if (!dev || dev->state != AV_DEVICE_STATE_IN_USE || !dev->owner ||
            g_strcmp0(dev->owner->domain_uuid, a->uuid) != 0)
            continue;
        had = av_attach_guest_may_have(a, dev, live);
        if (!had && !av_binding_undo_mdev(a->binding, m->identity, &local)) {
            fprintf(stderr, "accelvirt: warning: %s; it goes dirty, the worker removes it\n", local->message);
            g_clear_error(&local);
            had = TRUE;
        }
        if (had) {
            if (!av_attach_rollback_dirty(pool, dev, dirtied, error))
                return FALSE;
            continue;
        }
        /* Made for this attach and gone again: it leaves the pool. */
        json_array_append_new(freed, json_string(m->identity));
        if (!av_pool_remove(pool, m->identity, "attach-rolled-back", error))
            return FALSE;
    }
    if (!av_pool_journal_append(pool, "attach-rolled-back", fields, error) || !av_pool_save(pool, error))
        return FALSE;
    *ret_report = json_incref(fields);
    return TRUE;
}

/* Runs the driver command of @point of each device of @items
 * (AvPlacedItem*, borrowed) whose profile has one, for the domain @uuid
 * (@name), without the pool's lock (av_driver_run()), stopping at the
 * first failure; then journals every run ("driver", av_program_journal(),
 * with @by: "attach") under the lock.  The
 * items whose command ran and passed go to @ret_passed (borrowed; may be
 * NULL), the first failure to @error (FALSE), after the journal. */
static gboolean
av_attach_run_drivers(const AvCli *cli, const AvRoot *root, const AvPolicy *policy, const GPtrArray *items,
                      AvDriverPoint point, const char *uuid, const char *name, const char *by, GPtrArray *ret_passed,
                      GError **error)
{
    g_autoptr(GPtrArray) reports = g_ptr_array_new_with_free_func((GDestroyNotify)json_decref);
    g_autoptr(GPtrArray) identities = g_ptr_array_new();
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) failure = NULL;

    for (guint i = 0; i < items->len && !failure; i++) {
        const AvPlacedItem *item = g_ptr_array_index(items, i);
        const AvProfile *profile = av_policy_find(policy, item->profile);
        AvProgramTarget target = { 0 };
        json_t *report = NULL;

        if (!profile || !profile->drivers[point])
            continue;
        target.root = root;
        target.state_dir = cli->state_dir;
        target.profile = profile;
        target.address = item->pci_address ? item->pci_address
                         : item->mdev_parent ? item->mdev_parent : item->usb_bus_path;
        target.identity = item->identity;
        target.domain_name = name;
        target.domain_uuid = uuid;
        target.group_fd = -1;
        if (av_driver_run(&target, point, NULL, &report, &failure) && ret_passed)
            g_ptr_array_add(ret_passed, (gpointer)item);
        if (report) {
            g_ptr_array_add(reports, report);
            g_ptr_array_add(identities, item->identity);
        }
    }
    if (reports->len > 0) {
        pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, error);
        if (!pool)
            return FALSE;
        for (guint i = 0; i < reports->len; i++)
            if (!av_program_journal(pool, "driver", g_ptr_array_index(reports, i), g_ptr_array_index(identities, i),
                                    name, uuid, by, error))
                return FALSE;
        if (!av_pool_save(pool, error))
            return FALSE;
    }
    if (failure) {
        g_propagate_error(error, g_steal_pointer(&failure));
        return FALSE;
    }
    return TRUE;
}

/* The profiles' driver commands for the devices this attach
 * gives the domain, once they are bound and recorded in use and before the
 * hot-plug: "on_prepare", as the hook runs it at a domain's prepare (no
 * hook runs for a hot-plug), then "on_assign".  FALSE with the first
 * failure, and the caller rolls the attach back: a device whose on_prepare
 * passed (a->prepared) is released then, dirty, its on_release owed to its
 * scrub as after every release.  Run now, without the pool's lock, it
 * would race the worker, and a device that went free would owe nothing. */
static gboolean
av_attach_drivers(AvAttachRun *a, const AvPolicy *policy, GError **error)
{
    g_autoptr(GPtrArray) prepared = g_ptr_array_new();
    gboolean ok = av_attach_run_drivers(a->cli, a->root, policy, a->placement->items, AV_DRIVER_ON_PREPARE, a->uuid,
                                        a->domain->name, "attach", prepared, error);

    for (guint i = 0; i < a->plugs->len; i++) {
        const AvAttachPlug *p = g_ptr_array_index(a->plugs, i);

        if (g_ptr_array_find(prepared, p->item, NULL))
            g_ptr_array_add(a->prepared, p->identity);
    }
    return ok && av_attach_run_drivers(a->cli, a->root, policy, a->placement->items, AV_DRIVER_ON_ASSIGN, a->uuid,
                                       a->domain->name, "attach", NULL, error);
}

static void
av_attach_print(const AvAttachRun *a, gboolean dry_run)
{
    printf("%s domain '%s' (%s)", dry_run ? "dry run: would attach to" : "attached to", a->domain->name, a->uuid);
    if (a->placement->numa_node >= 0)
        printf(" on NUMA node %d", a->placement->numa_node);
    printf(":\n");
    for (guint i = 0; i < a->placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(a->placement->items, i);
        g_autofree char *alias = av_attach_item_alias(item);

        if (item->attach == AV_ATTACH_MDEV)
            printf("  %-20s mdev %s (%s) on %s, alias %s\n", item->profile, item->mdev_uuid, item->mdev_type,
                   item->mdev_parent ? item->mdev_parent : item->pci_address, alias);
        else
            printf("  %-20s %-14s alias %s\n", item->profile, av_attach_item_name(item), alias);
    }
}

/* `attach --dry-run`: placed in a scratch copy of the pool, nothing
 * claimed, bound or plugged. */
static int
av_attach_dry_run(AvAttachRun *a, const AvPolicy *policy, const AvProfile *profile, guint count)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = NULL;
    g_autoptr(AvPool) scratch = av_cli_scratch_pool(a->cli->state_dir, &dir, &err);
    g_autoptr(AvHost) host = NULL;
    g_autofree char *why = NULL;
    gboolean changed = FALSE;
    guint planned = 0;
    int status = AV_EXIT_OK;

    if (scratch)
        host = av_host_scan(a->root, &err);
    if (!host || !av_pool_reconcile(scratch, host, policy, &changed, &err) ||
        !av_attach_grow_vfs(a->root, policy, scratch, &host, profile, count, a->domain, a->uuid, TRUE, &planned,
                            &why, &err) ||
        !(a->placement = av_attach_place(host, policy, scratch, profile, count, a->domain, a->uuid, &err))) {
        av_attach_add_why(&err, why);
        if (planned > 0)
            g_prefix_error(&err, "this dry run placed without the VFs that a real run makes first: ");
        status = av_cli_fail(err);
    } else if (a->cli->json) {
        a->plugs = g_ptr_array_new_with_free_func((GDestroyNotify)av_attach_plug_free);
        for (guint i = 0; i < a->placement->items->len; i++) {
            const AvPlacedItem *item = g_ptr_array_index(a->placement->items, i);
            g_autofree char *identity = item->mdev_uuid ? av_pool_identity_mdev(item->mdev_uuid) : NULL;

            av_attach_plug_new(a, item, identity ? identity : item->identity);
        }
        av_cli_print_json(json_pack("{s:s,s:s,s:i,s:b,s:o}", "domain", a->domain->name, "uuid", a->uuid,
                                    "numa_node", a->placement->numa_node, "dry_run", TRUE, "devices",
                                    av_attach_devices_json(a)));
    } else {
        av_attach_print(a, TRUE);
    }
    g_clear_pointer(&scratch, av_pool_free);
    av_cli_remove_dir(dir);
    return status;
}

int
av_cli_cmd_attach(AvCli *cli, int argc, char **argv)
{
    gint count = 1;
    gboolean persistent = FALSE;
    gboolean dry_run = FALSE;
    const GOptionEntry entries[] = {
        { "count", 0, 0, G_OPTION_ARG_INT, &count, "How many devices of the profile (default 1)", "N" },
        { "persistent", 0, 0, G_OPTION_ARG_NONE, &persistent,
          "Add the devices to the domain's persistent definition too", NULL },
        { "dry-run", 0, 0, G_OPTION_ARG_NONE, &dry_run, "Print what would be attached; change nothing", NULL },
        { NULL },
    };
    g_auto(AvAttachRun) a = { 0 };
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPolicy) synced_policy = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    g_autofree char *no_vfs_why = NULL;
    guint planned_vfs = 0;
    const AvProfile *profile;
    AvIntent *intent = NULL;

    if (!av_cli_parse(cli, "attach", "DOMAIN PROFILE",
                      "Hot-plug COUNT devices of PROFILE into the running DOMAIN: placed against its NUMA "
                      "pinning, claimed, bound to vfio-pci with their IOMMU groups (an mdev made), recorded in use, "
                      "then attached "
                      "live as <hostdev managed='no'> with a ua-accelvirt- alias.  Any failure rolls every step "
                      "back.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 3)
        return av_cli_usage_error("'attach' takes a DOMAIN and a PROFILE; see 'accelvirt attach --help'");
    if (count < 1)
        return av_cli_usage_error("--count must be 1 or more");
    a.cli = cli;
    if (!av_cli_open(cli, &a.root, &policy, &err))
        return av_cli_fail(err);
    profile = av_policy_find(policy, argv[2]);
    if (!profile)
        return av_cli_usage_error("unknown profile '%s'; 'accelvirt policy show' lists the profiles", argv[2]);
    /* Not yet: a hot-plugged interface of a card of attach netdev (it
     * would be a passed-through PCI function here). */
    if (profile->attach == AV_ATTACH_NETDEV)
        return av_cli_usage_error("profile '%s' has attach netdev, which 'attach' cannot hot-plug yet; place it with "
                                  "'accelvirt define' and start the domain", argv[2]);
    conn = av_attach_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    dom = av_attach_running(conn, argv[1], a.uuid, &err);
    if (!dom)
        return av_cli_fail(err);
    a.ops = av_hotplug_ops_for(a.root);
    a.kops = av_kernel_ops_for(a.root);
    a.domain = av_attach_parse(a.ops, dom, FALSE, &err);
    if (!a.domain)
        return av_cli_fail(err);
    if (dry_run)
        return av_attach_dry_run(&a, policy, profile, (guint)count);
    a.owner = av_attach_owner(a.domain, a.uuid);
    a.plugs = g_ptr_array_new_with_free_func((GDestroyNotify)av_attach_plug_free);
    a.claims = g_ptr_array_new_with_free_func(g_free);
    a.binding = av_binding_new(a.root, a.kops, av_attach_note, NULL);
    a.marks = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_attach_mark_done);
    a.prepared = g_ptr_array_new();

    /* Under the pool's lock: place, claim, bind, record in use, save. */
    pool = av_cli_open_synced_pool(cli, &host, &synced_policy, &err);
    if (!pool)
        return av_cli_fail(err);
    profile = av_policy_find(synced_policy, argv[2]);
    if (!profile)
        return av_cli_usage_error("unknown profile '%s'; 'accelvirt policy show' lists the profiles", argv[2]);
    /* Charged as the hook's prepare charges it: the pinned owner. */
    if (!av_pool_owner_resolve(pool, av_policy_owner_metadata_trusted(synced_policy), a.owner, &err))
        return av_cli_fail(err);
    /* The policy's "limits", before anything changes: @count more devices
     * of the profile for the owner. */
    if (synced_policy->limits && synced_policy->limits->len > 0) {
        g_autofree AvLimitTake *takes = g_new0(AvLimitTake, (gsize)count);

        for (int i = 0; i < count; i++)
            takes[i].profile = profile->name;
        if (!av_pool_limits_check(pool, synced_policy->limits, a.owner, takes, (guint)count,
                                  g_get_real_time() / G_USEC_PER_SEC, &err))
            return av_cli_fail(err);
    }
    if (!av_attach_grow_vfs(a.root, synced_policy, pool, &host, profile, (guint)count, a.domain, a.uuid, FALSE,
                            &planned_vfs, &no_vfs_why, &err))
        return av_cli_fail(err);
    a.placement = av_attach_place(host, synced_policy, pool, profile, (guint)count, a.domain, a.uuid, &err);
    if (!a.placement)
        av_attach_add_why(&err, no_vfs_why);
    if (!a.placement || !av_attach_plan(&a, pool, host, synced_policy, &err) ||
        !av_attach_bind(&a, pool, &intent, &err))
        return av_cli_fail(err);
    if (!av_attach_commit(&a, pool, intent, persistent, &err)) {
        g_autoptr(GError) undo = NULL;

        /* Not saved: the pool on disk is as before, with the record that
         * the next holder of the lock drops. */
        if (!av_binding_undo(a.binding, &undo))
            fprintf(stderr, "accelvirt: warning: %s; the next accelvirt call tries again\n", undo->message);
        return av_cli_fail(err);
    }
    g_clear_pointer(&pool, av_pool_free);

    /* Without the lock: the profiles' on_prepare and on_assign, the hot-plug. */
    if (!av_attach_drivers(&a, synced_policy, &err) || !av_attach_plug(&a, dom, persistent, &err)) {
        g_autoptr(GError) rollback = NULL;
        guint freed, dirtied;

        if (!av_attach_rollback(&a, conn, dom, persistent, err->message, &report, &rollback)) {
            g_prefix_error(&err, "%s; ", rollback->message);
            return av_cli_fail(err);
        }
        freed = json_array_size(json_object_get(report, "freed"));
        dirtied = json_array_size(json_object_get(report, "dirtied"));
        g_prefix_error(&err, "rolled back (%u device%s free again, %u dirty to be scrubbed): ", freed,
                       freed == 1 ? "" : "s", dirtied);
        return av_cli_fail(err);
    }
    if (cli->json)
        av_cli_print_json(json_pack("{s:s,s:s,s:i,s:b,s:b,s:o}", "domain", a.domain->name, "uuid", a.uuid,
                                    "numa_node", a.placement->numa_node, "persistent", persistent, "dry_run", FALSE,
                                    "devices", av_attach_devices_json(&a)));
    else
        av_attach_print(&a, FALSE);
    return AV_EXIT_OK;
}
