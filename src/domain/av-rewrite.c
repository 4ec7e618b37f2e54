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
 * This file checks a placement and writes it; the tree edits are
 * av-rewrite-tree.c, the requests av-requests.c, the removal of an earlier
 * placement av-strip.c, the remap and the read-back of a placement
 * av-remap.c, the metadata's RelaxNG check av-domain-schema.c.  The guest
 * topology written is computed by av-topology.c, which stands below the
 * rewrite: it calls only av-domain.c and av-strip.c.
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

/* libvirt's order of the children of <domain> (virDomainDefFormatInternal),
 * of <features> (virDomainFeature), of <cputune> and of <hyperv>: a new
 * element goes after the last sibling that libvirt formats before it. */
static const char *const domain_order[] = {
    "name", "uuid", "genid", "title", "description", "metadata", "maxMemory", "memory", "currentMemory",
    "blkiotune", "memtune", "memoryBacking", "vcpu", "vcpus", "iothreads", "iothreadids", "defaultiothread",
    "cputune", "numatune", "resource", "sysinfo", "bootloader", "bootloader_args", "os", "idmap", "features",
    "cpu", "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "perf", "devices", NULL,
};
static const char *const features_order[] = {
    "acpi", "apic", "pae", "hap", "viridian", "privnet", "hyperv", "kvm", "pvspinlock", "capabilities", "pmu",
    "vmport", "gic", "smm", "ioapic", "hpt", "vmcoreinfo", "htm", "nested-hv", "msrs", "ccf-assist", "xen",
    "cfpc", "sbbc", "ibs", "tcg", "async-teardown", NULL,
};
static const char *const cputune_order[] = {
    "shares", "period", "quota", "global_period", "global_quota", "emulator_period", "emulator_quota",
    "iothread_period", "iothread_quota", "vcpupin", "emulatorpin", "iothreadpin", "vcpusched",
    "iothreadsched", "emulatorsched", "cachetune", "memorytune", NULL,
};
static const char *const hyperv_order[] = {
    "relaxed", "vapic", "spinlocks", "vpindex", "runtime", "synic", "stimer", "reset", "vendor_id",
    "frequencies", "reenlightenment", "tlbflush", "ipi", "evmcs", "avic", NULL,
};
static const char *const kvm_order[] = { "hidden", "hint-dedicated", "poll-control", "pv-ipi", "dirty-ring", NULL };
static const char *const numatune_order[] = { "memory", "memnode", NULL };

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

/* <address type='pci' domain='0x0000' bus='0xBB' slot='0xSS'
 * function='0xF' [multifunction='on']/> as the last child of @node: bus is
 * the index of the controller it plugs into (formatdomain.rst, "Device
 * Addresses"; multifunction='on' on function 0 of a slot whose other
 * functions are used, as libvirt writes its own root ports). */
static void
guest_address_add_function(xmlNode *node, guint bus, guint slot, guint function, gboolean multifunction)
{
    xmlNode *address = add_elem(node, "address");
    g_autofree char *b = g_strdup_printf("0x%02x", bus);
    g_autofree char *sl = g_strdup_printf("0x%02x", slot);
    g_autofree char *f = g_strdup_printf("0x%x", function);

    set_prop(address, "type", "pci");
    set_prop(address, "domain", "0x0000");
    set_prop(address, "bus", b);
    set_prop(address, "slot", sl);
    set_prop(address, "function", f);
    if (multifunction)
        set_prop(address, "multifunction", "on");
}

/* The same, function 0. */
static void
guest_address_add(xmlNode *node, guint bus, guint slot)
{
    guest_address_add_function(node, bus, slot, 0, FALSE);
}

/* The <hostdev> of @item; @guest_bus: the index of the controller it plugs
 * into (slot 0), G_MAXUINT when libvirt chooses. */
static xmlNode *
hostdev_new(xmlDoc *doc, const AvPlacedItem *item, const char *alias, guint guest_bus)
{
    xmlNode *hostdev = new_elem(doc, NULL, "hostdev");
    xmlNode *source, *address;
    g_autofree char *canonical = NULL;

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

/* The <controller type='pci' index=> the next PCI controller may take: one
 * above the highest the domain names, at least 1 (0 is the root), where a
 * domain names an index by a pci controller's index= (base 10, leading
 * zeros allowed, as libvirt reads it) and by the bus= of any device's
 * <address type='pci'> (libvirt's controller index of that bus, whether or
 * not the controller is written: libvirt adds it when it defines the
 * domain). */
static guint
pci_controller_next_index(const xmlNode *devices)
{
    int next = 1;

    for (xmlNode *c = devices ? devices->children : NULL; c; c = c->next) {
        g_autofree char *type = NULL;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        next = MAX(next, device_pci_bus(c) + 1);
        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        type = av_domain_prop(c, "type");
        if (g_strcmp0(type, "pci") == 0)
            next = MAX(next, controller_bus(c) + 1);
    }
    return (guint)next;
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

/* ---- the guest topology (av-topology.h) ---- */

/* <controller type='pci' index= model=>, with <alias name='PREFIX N'/>
 * when @kind is not NULL (libvirt formats <target> before <alias>, so the
 * expander bus adds its own). */
static xmlNode *
controller_new(xmlDoc *doc, guint index, const char *model, const char *kind, guint n)
{
    xmlNode *controller = new_elem(doc, NULL, "controller");
    g_autofree char *index_s = g_strdup_printf("%u", index);

    set_prop(controller, "type", "pci");
    set_prop(controller, "index", index_s);
    set_prop(controller, "model", model);
    if (kind) {
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%s%u", kind, n);

        set_prop(add_elem(controller, "alias"), "name", alias);
    }
    return controller;
}

/* Where write_topology() put each placed item: the index of the
 * controller its hostdev plugs into (G_MAXUINT: where libvirt puts it)
 * and its guest cell (-1: none). */
typedef struct {
    guint *bus;
    int *cell;
} AvGuestSlots;

/* Writes the controllers of @topology into <devices> after its last
 * controller, with indexes from pci_controller_next_index() on, every
 * parent before its children:
 *   - per cell some group hangs under: <controller model='pcie-expander-bus'>
 *     with <target busNr='B'><node>C</node></target> and the alias
 *     ua-accelvirt-pxbC; its <address> is left to libvirt (it only goes on
 *     pcie-root).  busNr is written, not left to libvirt, whose default
 *     (the lowest busNr in use minus 2, 254 first) leaves no room for the
 *     buses behind a second expander: each gets 1 + the number of
 *     controllers behind it, counted down from the lowest busNr of the
 *     domain's own pcie-/pci-expander-buses (256 without one), cell 0
 *     highest;
 *   - per group a pcie-root-port (ua-accelvirt-rpK) on the expander (bus
 *     its index, slots 0 to 31, then function 1 of slots 0, 1, ... with
 *     multifunction='on' on function 0, as libvirt writes its own) or,
 *     without a cell, on pcie-root where libvirt picks the slot; for a
 *     switch then a pcie-switch-upstream-port (ua-accelvirt-upK, slot 0 of
 *     the root port) and one pcie-switch-downstream-port (ua-accelvirt-dnK)
 *     per device, on slots 0, 1, ... of the upstream port (at most
 *     AV_GUEST_SWITCH_PORTS_MAX: av_guest_topology() splits a larger one).
 * Stores in @slots the bus each item's hostdev goes on (slot 0).  FALSE
 * (nothing written, AV_ERROR_INVALID_INPUT in one sentence) when the bus
 * numbers below the lowest expander bus cannot hold the controllers on
 * pcie-root (indexes up to the next one, ours, the 16 hot-plug ports), or
 * the controller indexes pass 255. */
static gboolean
write_topology(xmlNode *root, const AvGuestTopology *topology, guint n_items, AvGuestSlots *slots, const char *unit,
               GError **error)
{
    xmlNode *devices, *after = NULL;
    guint index, rp = 0, up = 0, dn = 0, bus_top = 256, user_bus = 256;
    guint ncells = topology->cells->len;
    g_autofree guint *pxb_index = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_size = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_ports = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_port = g_new0(guint, ncells + 1);

    for (guint i = 0; i < n_items; i++) {
        slots->bus[i] = G_MAXUINT;
        slots->cell[i] = -1;
    }
    if (topology->groups->len == 0)
        return TRUE;
    devices = ensure_child(root, "devices", domain_order, unit);
    index = pci_controller_next_index(devices);
    for (xmlNode *c = devices->children; c; c = c->next) {
        g_autofree char *model = NULL;

        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        after = c;
        /* the user's expander buses: theirs from busNr up, ours below the lowest */
        model = av_domain_prop(c, "model");
        if (g_strcmp0(model, "pcie-expander-bus") == 0 || g_strcmp0(model, "pci-expander-bus") == 0) {
            xmlNode *target = av_domain_child_first(c, "target", NULL);
            g_autofree char *bus_nr = target ? av_domain_prop(target, "busNr") : NULL;
            int v = pci_number_parse(bus_nr, 10);

            if (v >= 0 && (guint)v < user_bus)
                user_bus = (guint)v;
        }
    }
    bus_top = user_bus;
    {
        /* the buses numbered from 1 up on pcie-root (one per controller
         * index at most: the user's, those written here outside an expander
         * bus and the hot-plug ports) must stay below the lowest expander
         * bus's, each of which takes 1 + the controllers behind it */
        guint on_root = 0, below = bus_top, total = 0;

        for (guint g = 0; g < topology->groups->len; g++) {
            const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
            guint size = 1 + (group->host_switch ? 1 + group->items->len : 0);

            total += size;
            if (group->cell >= 0) {
                pxb_size[group->cell] += size;
                pxb_ports[group->cell]++;
            } else {
                on_root += size;
            }
        }
        for (guint c = 0; c < ncells; c++) {
            if (pxb_size[c] == 0)
                continue;
            on_root++;      /* the expander bus's controller index */
            total++;
            below = below > 1 + pxb_size[c] ? below - 1 - pxb_size[c] : 0;
        }
        if (index + on_root + AV_HOTPLUG_SLOTS_MAX >= below || index + total > 256) {
            if (user_bus < 256)
                return av_domain_invalid_at(error, NULL, "the guest topology of %u devices needs more PCI buses than "
                                            "the domain's own expander bus at busNr %u leaves below it: raise that "
                                            "busNr, write <av:topology switches='off'/> or guest-numa='off', or "
                                            "ask for fewer devices", n_items, user_bus);
            return av_domain_invalid_at(error, NULL, "the guest topology of %u devices needs more PCI buses than a "
                                        "guest has (256): write <av:topology switches='off'/> or "
                                        "guest-numa='off', or ask for fewer devices", n_items);
        }
    }
#define PUT(node)                                                                                                    \
    do {                                                                                                             \
        xmlNode *node_ = (node);                                                                                     \
        if (after)                                                                                                   \
            insert_after(devices, after, node_, unit);                                                               \
        else                                                                                                         \
            insert_last(devices, node_, unit);                                                                       \
        after = node_;                                                                                               \
    } while (0)
    for (guint c = 0; c < ncells; c++) {
        xmlNode *pxb, *target;
        g_autofree char *bus_nr = NULL;
        g_autofree char *node = NULL;
        g_autofree char *alias = NULL;

        if (pxb_size[c] == 0)
            continue;
        bus_top -= 1 + pxb_size[c];
        bus_nr = g_strdup_printf("%u", bus_top);
        node = g_strdup_printf("%u", c);
        alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "pxb%u", c);
        pxb_index[c] = index++;
        pxb = controller_new(root->doc, pxb_index[c], "pcie-expander-bus", NULL, 0);
        target = add_elem(pxb, "target");
        set_prop(target, "busNr", bus_nr);
        xmlNodeAddContent(add_elem(target, "node"), (const xmlChar *)node);
        set_prop(add_elem(pxb, "alias"), "name", alias);
        PUT(pxb);
    }
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        guint rp_index = index++;
        xmlNode *port = controller_new(root->doc, rp_index, "pcie-root-port", "rp", rp++);

        if (group->cell >= 0) {
            /* slots 0 to 31 of the expander bus, then functions 1 to 7 of them */
            guint k = pxb_port[group->cell]++, n = pxb_ports[group->cell];

            guest_address_add_function(port, pxb_index[group->cell], k % 32, k / 32, k < 32 && k + 32 < n);
        }
        PUT(port);
        if (group->host_switch) {
            guint up_index = index++;
            xmlNode *upstream =
                controller_new(root->doc, up_index, "pcie-switch-upstream-port", "up", up++);

            guest_address_add(upstream, rp_index, 0);
            PUT(upstream);
            for (guint j = 0; j < group->items->len; j++) {
                guint item = g_array_index(group->items, guint, j);
                guint dn_index = index++;
                xmlNode *downstream = controller_new(root->doc, dn_index, "pcie-switch-downstream-port", "dn",
                                                     dn++);

                guest_address_add(downstream, up_index, j);
                PUT(downstream);
                slots->bus[item] = dn_index;
                slots->cell[item] = group->cell;
            }
        } else {
            guint item = g_array_index(group->items, guint, 0);

            slots->bus[item] = rp_index;
            slots->cell[item] = group->cell;
        }
    }
#undef PUT
    return TRUE;
}

/* The guest NUMA cells of @topology: <cpu><numa><cell id= cpus= memory=
 * unit='KiB'/></numa> (a <cpu> made when the domain has none; the user's
 * mode and model kept), a <vcpupin> per vCPU on its cell's host CPUs and
 * <emulatorpin> on all of them, <numatune><memory mode='strict'
 * nodeset=(every node)/> and a <memnode cellid= mode='strict' nodeset=/>
 * per cell (formatdomain.rst, "CPU model and topology", "CPU Tuning",
 * "NUMA Node Tuning").  Sets @wrote's cells, cpu, pinned, numatune. */
static void
write_cells(xmlNode *root, const AvGuestTopology *topology, AvWrote *wrote, const char *unit)
{
    xmlNode *cpu = av_domain_child_first(root, "cpu", NULL);
    xmlNode *numa, *cputune, *numatune, *memory;
    g_autoptr(GArray) all_cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autoptr(GArray) all_nodes = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autofree char *all_cpuset = NULL;
    g_autofree char *all_nodeset = NULL;

    if (!cpu) {
        cpu = ensure_child(root, "cpu", domain_order, unit);
        wrote->cpu = TRUE;
    }
    numa = new_elem(root->doc, NULL, "numa");
    cputune = ensure_child(root, "cputune", domain_order, unit);
    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
        xmlNode *node = add_elem(numa, "cell");
        g_autofree char *id = g_strdup_printf("%u", cell->id);
        g_autofree char *vcpus = av_domain_cpuset_format(cell->vcpus);
        g_autofree char *cpuset = av_domain_cpuset_format(cell->host_cpus);
        g_autofree char *memory_s = g_strdup_printf("%" G_GUINT64_FORMAT, cell->memory_kib);
        guint host_node = (guint)cell->host_node;

        set_prop(node, "id", id);
        set_prop(node, "cpus", vcpus);
        set_prop(node, "memory", memory_s);
        set_prop(node, "unit", "KiB");
        for (guint v = 0; v < cell->vcpus->len; v++) {
            xmlNode *pin = new_elem(root->doc, NULL, "vcpupin");
            g_autofree char *vcpu = g_strdup_printf("%u", g_array_index(cell->vcpus, guint, v));

            set_prop(pin, "vcpu", vcpu);
            set_prop(pin, "cpuset", cpuset);
            insert_ordered(cputune, pin, cputune_order, unit);
        }
        g_array_append_vals(all_cpus, cell->host_cpus->data, cell->host_cpus->len);
        g_array_append_val(all_nodes, host_node);
    }
    insert_last(cpu, numa, unit);
    all_cpuset = av_domain_cpuset_format(all_cpus);
    all_nodeset = av_domain_cpuset_format(all_nodes);
    {
        xmlNode *pin = new_elem(root->doc, NULL, "emulatorpin");

        set_prop(pin, "cpuset", all_cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
    numatune = ensure_child(root, "numatune", domain_order, unit);
    memory = new_elem(root->doc, NULL, "memory");
    set_prop(memory, "mode", "strict");
    set_prop(memory, "nodeset", all_nodeset);
    insert_ordered(numatune, memory, numatune_order, unit);
    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
        xmlNode *memnode = new_elem(root->doc, NULL, "memnode");
        g_autofree char *id = g_strdup_printf("%u", cell->id);
        g_autofree char *nodeset = g_strdup_printf("%d", cell->host_node);

        set_prop(memnode, "cellid", id);
        set_prop(memnode, "mode", "strict");
        set_prop(memnode, "nodeset", nodeset);
        insert_ordered(numatune, memnode, numatune_order, unit);
    }
    wrote->cells = wrote->pinned = wrote->numatune = TRUE;
}

/* The xmlns:qemu namespace of <domain>, declared (prefix "qemu") when it
 * is not; sets @wrote's qemu_ns then. */
static xmlNs *
qemu_ns_ensure(xmlNode *root, AvWrote *wrote)
{
    xmlNs *ns = xmlSearchNsByHref(root->doc, root, (const xmlChar *)AV_NS_QEMU);

    if (ns)
        return ns;
    ns = xmlNewNs(root, (const xmlChar *)AV_NS_QEMU, (const xmlChar *)"qemu");
    if (!ns)    /* "qemu" names another namespace on <domain> */
        ns = xmlNewNs(root, (const xmlChar *)AV_NS_QEMU, (const xmlChar *)"accelvirt-qemu");
    wrote->qemu_ns = ns != NULL;
    return ns;
}

/* GPUDirect cliques: for each GPU of a group with a clique,
 *   <qemu:override><qemu:device alias='ua-accelvirt-N'><qemu:frontend>
 *     <qemu:property name='x-nv-gpudirect-clique' type='unsigned' value='C'/>
 *   </qemu:frontend></qemu:device></qemu:override>
 * (libvirt 8.2 and later, docs/drvqemu.rst "Overriding properties of QEMU
 * devices"; QEMU hw/vfio/pci.c's x-nv-gpudirect-clique, 0 to 15), into the
 * user's <qemu:override>, <qemu:device alias=> and <qemu:frontend> where
 * they are (one element per alias, as libvirt wants), else new ones, the
 * <qemu:override> last in <domain>, where libvirt's schema puts it.  A GPU
 * whose alias has an x-nv-gpudirect-clique of the user's gets none (theirs
 * wins; av_guest_topology() notes it).  Stores in @made[i] what it made
 * for item i, for <av:placement> (clique-made=): "property" (into the
 * user's frontend), "frontend" or "device"; NULL when it wrote nothing;
 * sets @wrote's qemu_override when it made the <qemu:override>. */
static void
write_cliques(xmlNode *root, const AvGuestTopology *topology, const AvPlacement *placement, AvWrote *wrote,
              const char **made, const char *unit)
{
    xmlNode *override = override_find(root);
    xmlNs *ns = override ? override->ns : NULL;

    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        g_autofree char *clique = g_strdup_printf("%d", group->clique);

        if (group->clique < 0)
            continue;
        for (guint j = 0; j < group->items->len; j++) {
            guint i = g_array_index(group->items, guint, j);
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
            g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);
            xmlNode *device, *frontend, *property;

            if (!item->gpudirect || av_domain_user_clique(root, alias))
                continue;
            if (!ns) {
                ns = qemu_ns_ensure(root, wrote);
                if (!ns)
                    return;
            }
            if (!override) {
                override = new_elem(root->doc, ns, "override");
                insert_last(root, override, unit);
                wrote->qemu_override = TRUE;
            }
            property = new_elem(root->doc, ns, "property");
            set_prop(property, "name", AV_GPUDIRECT_PROPERTY);
            set_prop(property, "type", "unsigned");
            set_prop(property, "value", clique);
            device = override_device(override, alias);
            frontend = av_domain_child_first(device, "frontend", AV_NS_QEMU);
            if (frontend) {
                insert_last(frontend, property, unit);
                made[i] = "property";
            } else if (device) {
                frontend = new_elem(root->doc, ns, "frontend");
                xmlAddChild(frontend, property);
                insert_last(device, frontend, unit);
                made[i] = "frontend";
            } else {
                device = new_elem(root->doc, ns, "device");
                set_prop(device, "alias", alias);
                frontend = new_elem(root->doc, ns, "frontend");
                xmlAddChild(device, frontend);
                xmlAddChild(frontend, property);
                insert_last(override, device, unit);
                made[i] = "device";
            }
        }
    }
}

/* The clique of the group holding item @i of @topology, -1 when none. */
static int
group_clique(const AvGuestTopology *topology, guint i)
{
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);

        for (guint j = 0; j < group->items->len; j++) {
            if (g_array_index(group->items, guint, j) == i)
                return group->clique;
        }
    }
    return -1;
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
