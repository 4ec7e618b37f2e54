/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the guest PCIe and NUMA topology a rewrite writes, as
 * av-topology.c computed it: the controllers (expander buses, switches,
 * root ports) and the guest PCI address of each device on them, the guest
 * NUMA cells, the GPUDirect cliques of <qemu:override>. */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include "util/av-error.h"

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
void
guest_address_add(xmlNode *node, guint bus, guint slot)
{
    guest_address_add_function(node, bus, slot, 0, FALSE);
}

/* The <controller type='pci' index=> the next PCI controller may take: one
 * above the highest the domain names, at least 1 (0 is the root), where a
 * domain names an index by a pci controller's index= (base 10, leading
 * zeros allowed, as libvirt reads it) and by the bus= of any device's
 * <address type='pci'> (libvirt's controller index of that bus, whether or
 * not the controller is written: libvirt adds it when it defines the
 * domain). */
guint
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
gboolean
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
void
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
void
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
int
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
