/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the domain rewrite (see av-rewrite.h).
 *
 * The document is parsed once with the hostile-input rules of av-domain.c
 * (av_domain_xml_read) and changed as a tree, so that everything accelvirt
 * did not write keeps its place, its comments and its indentation.  Each
 * element accelvirt adds goes in as a pair: a whitespace text node ("\n" and
 * the indentation of its siblings) and the element, right after the sibling
 * libvirt would format before it.  Removing an element removes it with the
 * whitespace before it, so removing what was added gives back the tree it
 * was added to: a rewrite is undone by av_domain_unplace() and redone
 * identically, byte for byte.
 *
 * libxml2 writes attributes in double quotes and empty elements as <x/>: a
 * rewritten document is in that form; a document accelvirt has nothing to
 * do with (no request, nothing placed) is returned as it came.
 *
 * This file checks a placement and writes its hostdevs, pinning, hidden
 * hypervisor and hot-plug ports; the tree edits are av-rewrite-tree.c, the
 * guest PCIe and NUMA topology written av-rewrite-topology.c, the requests
 * av-requests.c, the removal of an earlier placement av-strip.c, the remap
 * and the read-back of a placement av-remap.c, the metadata's RelaxNG
 * check av-domain-schema.c.  The guest topology written is computed by
 * av-topology.c, which stands below the rewrite: it calls only
 * av-domain.c and av-strip.c.
 *
 * Formats: https://libvirt.org/formatdomain.html (#host-device-assignment,
 * #cpu-tuning, #numa-node-tuning, #hypervisor-features: <kvm><hidden>,
 * <hyperv><vendor_id state='on' value='...'/> of up to 12 characters,
 * libvirt's domaincommon.rng pattern [^,]{0,12}). */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlsave.h>

#include "fpga/av-bitstream.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-names.h"

/* ---- checking the placement ---- */

/* A USB device's sysfs name: "BUS-PORT[.PORT]...", as "1-1.2". */
gboolean
usb_bus_path_valid(const char *s)
{
    g_auto(GStrv) parts = NULL;
    g_auto(GStrv) ports = NULL;
    guint v = 0;

    if (!s || strlen(s) > 32)
        return FALSE;
    parts = g_strsplit(s, "-", -1);
    if (g_strv_length(parts) != 2 || !av_domain_decimal_parse(parts[0], 999, &v) || v == 0)
        return FALSE;
    ports = g_strsplit(parts[1], ".", -1);
    if (g_strv_length(ports) > 7)
        return FALSE;
    for (char **p = ports; *p; p++) {
        if (!av_domain_decimal_parse(*p, 255, &v) || v == 0)
            return FALSE;
    }
    return TRUE;
}

static gboolean G_GNUC_PRINTF(2, 3)
placement_invalid(GError **error, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the placement cannot be written: %s", msg);
    return FALSE;
}

static gboolean
requested(GPtrArray *requests, const char *profile)
{
    for (guint i = 0; i < requests->len; i++) {
        const AvRequest *r = g_ptr_array_index(requests, i);

        if (strcmp(r->profile, profile) == 0)
            return TRUE;
    }
    return FALSE;
}

/* Checks every value of @placement that reaches the XML; sets
 * *ret_hide when a placed profile says hide_hypervisor. */
gboolean
placement_check(const AvPlacement *placement, const AvPolicy *policy, GPtrArray *requests, gboolean *ret_hide,
                GError **error)
{
    gboolean hide = FALSE;

    if (placement->numa_node < -1 || placement->numa_node >= (int)AV_DOMAIN_NODE_MAX)
        return placement_invalid(error, "NUMA node %d is not between 0 and %u", placement->numa_node,
                                 AV_DOMAIN_NODE_MAX - 1);
    if (placement->numa_node >= 0) {
        if (!placement->cpus || placement->cpus->len == 0)
            return placement_invalid(error, "node %d has no CPU to pin the vCPUs on", placement->numa_node);
        for (guint i = 0; i < placement->cpus->len; i++) {
            guint cpu = g_array_index(placement->cpus, guint, i);

            if (cpu >= AV_DOMAIN_CPU_MAX)
                return placement_invalid(error, "CPU %u is not below %u", cpu, AV_DOMAIN_CPU_MAX);
        }
    }
    for (guint i = 0; placement->nodes && i < placement->nodes->len; i++) {
        const AvPlacedNode *node = g_ptr_array_index(placement->nodes, i);

        if (node->id < 0 || node->id >= (int)AV_DOMAIN_NODE_MAX)
            return placement_invalid(error, "NUMA node %d is not between 0 and %u", node->id, AV_DOMAIN_NODE_MAX - 1);
        for (guint j = 0; node->cpus && j < node->cpus->len; j++) {
            guint cpu = g_array_index(node->cpus, guint, j);

            if (cpu >= AV_DOMAIN_CPU_MAX)
                return placement_invalid(error, "CPU %u of node %d is not below %u", cpu, node->id, AV_DOMAIN_CPU_MAX);
        }
    }
    for (guint i = 0; placement->items && i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        g_autofree char *canonical = NULL;
        const AvProfile *profile;

        if (!item->profile || !av_profile_name_is_valid(item->profile)) {
            g_autofree char *q = av_domain_quote(item->profile);

            return placement_invalid(error, "device %u has the profile name '%s'", i, q);
        }
        if (item->numa_node < -1 || item->numa_node >= (int)AV_DOMAIN_NODE_MAX)
            return placement_invalid(error, "device %u is on NUMA node %d, not between 0 and %u", i, item->numa_node,
                                     AV_DOMAIN_NODE_MAX - 1);
        if (!requested(requests, item->profile))
            return placement_invalid(error, "device %u is of profile '%s', which no av:request of the domain asks for", i,
                                     item->profile);
        profile = policy ? av_policy_find(policy, item->profile) : NULL;
        if (policy && !profile)
            return placement_invalid(error, "profile '%s' is not in the policy", item->profile);
        if (profile && profile->hide_hypervisor)
            hide = TRUE;
        if (item->bitstream && ((item->attach != AV_ATTACH_VFIO_PCI && item->attach != AV_ATTACH_SRIOV_VF) ||
                                !av_rom_sha256_is_valid(item->bitstream) ||
                                g_str_equal(item->bitstream, AV_ROM_NONE))) {
            g_autofree char *q = av_domain_quote(item->bitstream);

            return placement_invalid(error, "device %u of profile '%s' has the bitstream '%s' (a PCI device's "
                                     "SHA-256 only)", i, item->profile, q);
        }
        switch (item->attach) {
        case AV_ATTACH_NETDEV:
            if (!av_netdev_name_is_valid(item->netdev)) {
                g_autofree char *q = av_domain_quote(item->netdev);

                return placement_invalid(error, "card %u of profile '%s' has the network interface '%s' (1 to 15 "
                                         "letters, digits, '-', '_' or '.')", i, item->profile, q);
            }
            /* a card of the pool, named by its PCI address too */
            G_GNUC_FALLTHROUGH;
        case AV_ATTACH_VFIO_PCI:
        case AV_ATTACH_SRIOV_VF:
            if (!av_domain_pci_address_canonical(item->pci_address, &canonical)) {
                g_autofree char *q = av_domain_quote(item->pci_address);

                return placement_invalid(error, "device %u of profile '%s' has the PCI address '%s'", i, item->profile, q);
            }
            break;
        case AV_ATTACH_MDEV:
            if (!av_domain_uuid_canonical(item->mdev_uuid, &canonical)) {
                g_autofree char *q = av_domain_quote(item->mdev_uuid);

                return placement_invalid(error, "mdev %u of profile '%s' has the UUID '%s'", i, item->profile, q);
            }
            break;
        case AV_ATTACH_USB:
            if (!usb_bus_path_valid(item->usb_bus_path)) {
                g_autofree char *q = av_domain_quote(item->usb_bus_path);

                return placement_invalid(error, "USB device %u of profile '%s' has the bus path '%s'", i, item->profile,
                                         q);
            }
            break;
        default:
            return placement_invalid(error, "device %u of profile '%s' has an unknown attach %d", i, item->profile,
                                     (int)item->attach);
        }
    }
    *ret_hide = hide;
    return TRUE;
}

/* ---- writing ---- */

/* <source><address bus= device=/> of a USB hostdev: the sysfs busnum and
 * devnum of @item's stick, in decimal as libvirt reads them. */
static void
usb_address_set(xmlNode *address, const AvPlacedItem *item)
{
    g_autofree char *bus = g_strdup_printf("%u", item->usb_busnum);
    g_autofree char *device = g_strdup_printf("%u", item->usb_devnum);

    set_prop(address, "bus", bus);
    set_prop(address, "device", device);
}

/* The <interface type='direct'> of @item, a card of attach netdev: its
 * host driver's network interface through macvtap in passthrough mode (the
 * guest alone on it), a virtio NIC in the guest, where libvirt chooses. */
static xmlNode *
interface_new(xmlDoc *doc, const AvPlacedItem *item, const char *alias)
{
    xmlNode *interface = new_elem(doc, NULL, "interface");
    xmlNode *source;

    set_prop(interface, "type", "direct");
    source = add_elem(interface, "source");
    set_prop(source, "dev", item->netdev);
    set_prop(source, "mode", "passthrough");
    set_prop(add_elem(interface, "model"), "type", "virtio");
    set_prop(add_elem(interface, "alias"), "name", alias);
    return interface;
}

/* The <hostdev> of @item (an <interface> for a card of attach netdev);
 * @guest_bus: the index of the controller it plugs into (slot 0),
 * G_MAXUINT when libvirt chooses. */
static xmlNode *
hostdev_new(xmlDoc *doc, const AvPlacedItem *item, const char *alias, guint guest_bus)
{
    xmlNode *hostdev;
    xmlNode *source, *address;
    g_autofree char *canonical = NULL;

    if (item->attach == AV_ATTACH_NETDEV)
        return interface_new(doc, item, alias);
    hostdev = new_elem(doc, NULL, "hostdev");

    set_prop(hostdev, "mode", "subsystem");
    switch (item->attach) {
    case AV_ATTACH_MDEV:
        set_prop(hostdev, "type", "mdev");
        set_prop(hostdev, "model", "vfio-pci");
        source = add_elem(hostdev, "source");
        address = add_elem(source, "address");
        av_domain_uuid_canonical(item->mdev_uuid, &canonical);
        set_prop(address, "uuid", canonical);
        break;
    case AV_ATTACH_USB: {
        g_autofree char *vendor = g_strdup_printf("0x%04x", item->usb_vendor);
        g_autofree char *product = g_strdup_printf("0x%04x", item->usb_product);

        set_prop(hostdev, "type", "usb");
        set_prop(hostdev, "managed", "no");
        source = add_elem(hostdev, "source");
        set_prop(add_elem(source, "vendor"), "id", vendor);
        set_prop(add_elem(source, "product"), "id", product);
        /* Exactly the stick chosen: two identical sticks share the ids. */
        if (item->usb_busnum > 0 && item->usb_devnum > 0)
            usb_address_set(add_elem(source, "address"), item);
        break;
    }
    default: {
        g_autofree char *domain = NULL, *bus = NULL, *slot = NULL, *function = NULL;

        av_domain_pci_address_canonical(item->pci_address, &canonical);
        /* "dddd:bb:ss.f" */
        domain = g_strdup_printf("0x%.4s", canonical);
        bus = g_strdup_printf("0x%.2s", canonical + 5);
        slot = g_strdup_printf("0x%.2s", canonical + 8);
        function = g_strdup_printf("0x%.1s", canonical + 11);
        set_prop(hostdev, "type", "pci");
        set_prop(hostdev, "managed", "no");
        source = add_elem(hostdev, "source");
        address = add_elem(source, "address");
        set_prop(address, "domain", domain);
        set_prop(address, "bus", bus);
        set_prop(address, "slot", slot);
        set_prop(address, "function", function);
        break;
    }
    }
    set_prop(add_elem(hostdev, "alias"), "name", alias);
    if (guest_bus != G_MAXUINT)
        guest_address_add(hostdev, guest_bus, 0);
    return hostdev;
}

/* The <av:placement> entry of @item; @cell: its guest NUMA cell, or -1. */
static xmlNode *
placed_new(xmlDoc *doc, xmlNs *ns, const AvPlacedItem *item, const char *alias, int cell)
{
    xmlNode *node;
    g_autofree char *canonical = NULL;

    switch (item->attach) {
    case AV_ATTACH_MDEV:
        node = new_elem(doc, ns, "mdev");
        set_prop(node, "profile", item->profile);
        av_domain_uuid_canonical(item->mdev_uuid, &canonical);
        set_prop(node, "uuid", canonical);
        break;
    case AV_ATTACH_USB: {
        g_autofree char *vendor = g_strdup_printf("0x%04x", item->usb_vendor);
        g_autofree char *product = g_strdup_printf("0x%04x", item->usb_product);

        node = new_elem(doc, ns, "usb");
        set_prop(node, "profile", item->profile);
        set_prop(node, "bus-path", item->usb_bus_path);
        set_prop(node, "vendor", vendor);
        set_prop(node, "product", product);
        if (item->identity)
            set_prop(node, "identity", item->identity);
        break;
    }
    default:
        node = new_elem(doc, ns, "device");
        set_prop(node, "profile", item->profile);
        av_domain_pci_address_canonical(item->pci_address, &canonical);
        set_prop(node, "address", canonical);
        if (item->attach == AV_ATTACH_SRIOV_VF && item->pf_address && item->vf_index >= 0) {
            g_autofree char *pf = NULL;
            g_autofree char *vf = g_strdup_printf("%d", item->vf_index);

            av_domain_pci_address_canonical(item->pf_address, &pf);
            set_prop(node, "pf", pf);
            set_prop(node, "vf", vf);
        }
        if (item->bitstream)
            set_prop(node, "bitstream", item->bitstream);
        if (item->attach == AV_ATTACH_NETDEV)
            set_prop(node, "netdev", item->netdev);
        break;
    }
    if (cell >= 0) {
        g_autofree char *c = g_strdup_printf("%d", cell);

        set_prop(node, "cell", c);
    }
    set_prop(node, "alias", alias);
    return node;
}

/* Whether the user placed the vCPUs themselves: a <vcpupin> or an
 * <emulatorpin> (accelvirt's own are gone by now), a <vcpu cpuset=>, or
 * placement='auto' (numad decides). */
static gboolean
user_pinned(const xmlNode *root)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);

    if (vcpu) {
        g_autofree char *cpuset = av_domain_prop(vcpu, "cpuset");
        g_autofree char *placement = av_domain_prop(vcpu, "placement");

        if (cpuset || (placement && strcmp(placement, "auto") == 0))
            return TRUE;
    }
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "cputune", NULL) &&
            (av_domain_child_first(c, "vcpupin", NULL) || av_domain_child_first(c, "emulatorpin", NULL)))
            return TRUE;
    }
    return FALSE;
}

/* Whether the user set the memory placement: a <numatune><memory>, or
 * <vcpu placement='auto'> (libvirt then places memory with numad). */
static gboolean
user_numatune(const xmlNode *root)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);

    if (vcpu) {
        g_autofree char *placement = av_domain_prop(vcpu, "placement");

        if (placement && strcmp(placement, "auto") == 0)
            return TRUE;
    }
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "numatune", NULL) && av_domain_child_first(c, "memory", NULL))
            return TRUE;
    }
    return FALSE;
}

static void
write_pinning(xmlNode *root, const AvPlacement *placement, guint vcpus, const char *unit)
{
    xmlNode *cputune = ensure_child(root, "cputune", domain_order, unit);
    g_autofree char *cpuset = av_domain_cpuset_format(placement->cpus);

    for (guint i = 0; i < vcpus; i++) {
        xmlNode *pin = new_elem(root->doc, NULL, "vcpupin");
        g_autofree char *id = g_strdup_printf("%u", i);

        set_prop(pin, "vcpu", id);
        set_prop(pin, "cpuset", cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
    {
        xmlNode *pin = new_elem(root->doc, NULL, "emulatorpin");

        set_prop(pin, "cpuset", cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
}

static void
write_numatune(xmlNode *root, const AvPlacement *placement, const char *unit)
{
    xmlNode *numatune = ensure_child(root, "numatune", domain_order, unit);
    xmlNode *memory = new_elem(root->doc, NULL, "memory");
    g_autofree char *node = g_strdup_printf("%d", placement->numa_node);

    set_prop(memory, "mode", "strict");
    set_prop(memory, "nodeset", node);
    insert_ordered(numatune, memory, numatune_order, unit);
}

/* <features><kvm><hidden state='on'/></kvm> and <hyperv><vendor_id
 * state='on' value='accelvirt'/></hyperv>, each unless the user wrote it
 * (in any state: theirs wins), vendor_id also not in hyperv
 * mode='passthrough' (which takes no child). */
static void
write_hidden(xmlNode *root, AvWrote *wrote, const char *unit)
{
    xmlNode *features = av_domain_child_first(root, "features", NULL);
    xmlNode *kvm = features ? av_domain_child_first(features, "kvm", NULL) : NULL;
    xmlNode *hyperv = features ? av_domain_child_first(features, "hyperv", NULL) : NULL;
    g_autofree char *mode = hyperv ? av_domain_prop(hyperv, "mode") : NULL;
    gboolean want_hidden = !kvm || !av_domain_child_first(kvm, "hidden", NULL);
    gboolean want_vendor =
        !(mode && strcmp(mode, "passthrough") == 0) && (!hyperv || !av_domain_child_first(hyperv, "vendor_id", NULL));

    if (!want_hidden && !want_vendor)
        return;
    features = ensure_child(root, "features", domain_order, unit);
    if (want_vendor) {
        xmlNode *vendor = new_elem(root->doc, NULL, "vendor_id");

        hyperv = ensure_child(features, "hyperv", features_order, unit);
        set_prop(vendor, "state", "on");
        set_prop(vendor, "value", AV_REWRITE_VENDOR_ID);
        insert_ordered(hyperv, vendor, hyperv_order, unit);
        wrote->vendor_id = TRUE;
    }
    if (want_hidden) {
        xmlNode *hidden = new_elem(root->doc, NULL, "hidden");

        kvm = ensure_child(features, "kvm", features_order, unit);
        set_prop(hidden, "state", "on");
        insert_ordered(kvm, hidden, kvm_order, unit);
        wrote->hidden = TRUE;
    }
}

/* <av:hotplug slots="N"/> on a q35 machine: at least N empty
 * pcie-root-ports (no device's address names their bus), since q35's root
 * complex takes no hot-plugged device and every hot-plugged PCIe device
 * needs an empty root port (KubeVirt reserves such placeholder ports too).
 * Adds the ports lacking, each <controller type='pci' index='I'
 * model='pcie-root-port'> with the alias AV_REWRITE_HOTPLUG_ALIAS_PREFIX
 * "K" (K after the highest already there), after the domain's last
 * controller.  Other machines get nothing.  Returns how many it added. */
static guint
write_hotplug(xmlNode *root, guint slots, const char *unit)
{
    xmlNode *devices;
    xmlNode *after = NULL;
    guint index, empty = 0, next_alias = 0, added = 0;

    if (!av_domain_machine_is_q35(root))
        return 0;
    devices = ensure_child(root, "devices", domain_order, unit);
    if (!devices)
        return 0;
    index = pci_controller_next_index(devices);
    for (xmlNode *c = devices->children; c; c = c->next) {
        g_autofree char *model = NULL;

        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        after = c;
        model = av_domain_prop(c, "model");
        if (g_strcmp0(model, "pcie-root-port") == 0 && !port_is_used(devices, c))
            empty++;
        if (alias_is_hotplug(c)) {
            xmlNode *alias = av_domain_child_first(c, "alias", NULL);
            g_autofree char *name = av_domain_prop(alias, "name");
            guint k = 0;

            if (av_domain_decimal_parse(name + strlen(AV_REWRITE_HOTPLUG_ALIAS_PREFIX), 1000, &k) && k + 1 > next_alias)
                next_alias = k + 1;
        }
    }
    for (; empty + added < slots; added++) {
        xmlNode *controller = new_elem(root->doc, NULL, "controller");
        xmlNode *alias;
        g_autofree char *index_s = g_strdup_printf("%u", index + added);
        g_autofree char *alias_s = g_strdup_printf(AV_REWRITE_HOTPLUG_ALIAS_PREFIX "%u", next_alias + added);

        set_prop(controller, "type", "pci");
        set_prop(controller, "index", index_s);
        set_prop(controller, "model", "pcie-root-port");
        alias = add_elem(controller, "alias");
        set_prop(alias, "name", alias_s);
        if (after)
            insert_after(devices, after, controller, unit);
        else
            insert_last(devices, controller, unit);
        after = controller;
    }
    return added;
}

char *
av_domain_hotplug_fill(const char *xml, gsize len, guint *ret_added, GError **error)
{
    g_autoptr(GPtrArray) requests = NULL;
    g_autofree char *unit = NULL;
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    guint hotplug = 0, added = 0;
    char *out = NULL;

    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root && requests_parse(av_domain_accelerators_find(root), &requests, &hotplug, error)) {
        unit = doc_unit(root);
        if (hotplug > 0)
            added = write_hotplug(root, hotplug, unit);
        out = added > 0 ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
        if (out)
            *ret_added = added;
    }
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_rewrite(const char *xml, gsize len, const AvPlacement *placement, const AvPolicy *policy, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(AvGuestTopology) topology = NULL;
    g_autofree char *unit = NULL;
    g_autofree guint *slot_bus = NULL;
    g_autofree int *slot_cell = NULL;
    g_autofree const char **made = NULL;
    AvGuestSlots slots;
    xmlDoc *doc = NULL;
    xmlNode *root, *accelerators, *devices = NULL, *placed;
    AvWrote wrote = { 0 };
    guint hotplug = 0, n_items;
    gboolean hide = FALSE, changed = FALSE;
    char *out = NULL;

    g_return_val_if_fail(placement != NULL, NULL);
    /* the reader's checks first: a domain it refuses is never written */
    dom = av_domain_parse(xml, len, error);
    if (!dom)
        return NULL;
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    if (!requests_parse(accelerators, &requests, &hotplug, error))
        goto out;
    if (requests->len == 0 && hotplug == 0) {
        /* nothing asked of accelvirt (a domain Nova wrote, say): as it came */
        out = g_strndup(xml, len);
        goto out;
    }
    if (dom->pinning_problem && requests->len > 0) {
        /* it is acted on from here: the vCPUs are pinned to the devices' node */
        av_domain_invalid_at(error, NULL, "cannot place the accelerators of domain '%s': its vCPU pinning or NUMA "
                             "tuning cannot be read (%s); accelvirt pins the vCPUs to the devices' NUMA node, "
                             "so correct it first", dom->name, dom->pinning_problem);
        goto out;
    }
    if (!placement_check(placement, policy, requests, &hide, error) || !av_domain_strip(root, &changed, error))
        goto out;
    /* on what the user wrote, accelvirt's earlier placement gone */
    topology = av_guest_topology_at(root, placement, error);
    if (!topology)
        goto out;

    unit = doc_unit(root);
    /* the user's own empty <cputune/> and <numatune/>, which an unplace gives back */
    wrote.user_cputune = element_is_empty(av_domain_child_first(root, "cputune", NULL));
    wrote.user_numatune = element_is_empty(av_domain_child_first(root, "numatune", NULL));
    n_items = placement->items ? placement->items->len : 0;
    slot_bus = g_new0(guint, n_items + 1);
    slot_cell = g_new0(int, n_items + 1);
    slots.bus = slot_bus;
    slots.cell = slot_cell;
    if (!write_topology(root, topology, n_items, &slots, unit, error))
        goto out;
    for (guint i = 0; i < n_items; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

        if (!devices)
            devices = ensure_child(root, "devices", domain_order, unit);
        insert_last(devices, hostdev_new(doc, item, alias, slots.bus[i]), unit);
    }
    if (hotplug > 0)
        write_hotplug(root, hotplug, unit);
    if (topology->cells->len > 0) {
        write_cells(root, topology, &wrote, unit);
    } else if (placement->numa_node >= 0) {
        if (!user_pinned(root)) {
            write_pinning(root, placement, MAX(dom->vcpus, 1), unit);
            wrote.pinned = TRUE;
        }
        if (!user_numatune(root)) {
            write_numatune(root, placement, unit);
            wrote.numatune = TRUE;
        }
    }
    if (hide)
        write_hidden(root, &wrote, unit);
    made = g_new0(const char *, n_items + 1);
    write_cliques(root, topology, placement, &wrote, made, unit);

    placed = new_elem(doc, accelerators->ns, "placement");
    if (placement->numa_node >= 0) {
        g_autofree char *node = g_strdup_printf("%d", placement->numa_node);

        set_prop(placed, "node", node);
    }
    set_prop(placed, "pinned", wrote.pinned ? "yes" : "no");
    set_prop(placed, "numatune", wrote.numatune ? "yes" : "no");
    set_prop(placed, "hidden", wrote.hidden ? "yes" : "no");
    set_prop(placed, "vendor-id", wrote.vendor_id ? "yes" : "no");
    /* The guest topology's, only when written: the records of earlier placements stay as they were */
    if (wrote.cells)
        set_prop(placed, "cells", "yes");
    if (wrote.cpu)
        set_prop(placed, "cpu", "yes");
    if (wrote.qemu_ns)
        set_prop(placed, "qemu-ns", "yes");
    if (wrote.qemu_override)
        set_prop(placed, "qemu-override", "yes");
    if (wrote.user_cputune && wrote.pinned)
        set_prop(placed, "user-cputune", "yes");
    if (wrote.user_numatune && (wrote.numatune || wrote.cells))
        set_prop(placed, "user-numatune", "yes");
    for (guint i = 0; i < n_items; i++) {
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

        xmlNode *entry = placed_new(doc, accelerators->ns, g_ptr_array_index(placement->items, i), alias,
                                    slots.cell[i]);

        if (made[i]) {
            g_autofree char *clique = g_strdup_printf("%d", group_clique(topology, i));

            set_prop(entry, "clique", clique);
            set_prop(entry, "clique-made", made[i]);
        }
        xmlAddChild(placed, entry);
    }
    insert_last(accelerators, placed, unit);
    out = doc_serialize(doc, has_declaration(xml, len), error);
out:
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_ensure_uuid(const char *xml, gsize len, char **ret_uuid, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *unit = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *node;
    char *out = NULL;

    dom = av_domain_parse(xml, len, error);
    if (!dom)
        return NULL;
    if (dom->uuid) {
        *ret_uuid = g_strdup(dom->uuid);
        return g_strndup(xml, len);
    }
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root) {
        uuid = g_uuid_string_random();
        unit = doc_unit(root);
        node = new_elem(doc, NULL, "uuid");
        xmlNodeAddContent(node, (const xmlChar *)uuid);
        insert_ordered(root, node, domain_order, unit);
        out = doc_serialize(doc, has_declaration(xml, len), error);
        if (out)
            *ret_uuid = g_steal_pointer(&uuid);
    }
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_unplace(const char *xml, gsize len, GError **error)
{
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    gboolean changed = FALSE;
    char *out = NULL;

    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root && av_domain_strip(root, &changed, error))
        out = changed ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
    xmlFreeDoc(doc);
    return out;
}
