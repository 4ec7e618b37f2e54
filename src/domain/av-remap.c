/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: remapping a placed domain (restore, migrate: av_domain_remap())
 * and reading back the placement its <av:placement> records
 * (av_domain_placement()). */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-names.h"

/* ---- remapping a placed domain (restore, migrate) ---- */

/* Sets @name of @node to @value (removes it when @value is NULL), noting in
 * *changed when that changes the document. */
static void
update_prop(xmlNode *node, const char *name, const char *value, gboolean *changed)
{
    g_autofree char *old = av_domain_prop(node, name);

    if (g_strcmp0(old, value) == 0)
        return;
    if (value)
        xmlSetProp(node, (const xmlChar *)name, (const xmlChar *)value);
    else
        xmlUnsetProp(node, (const xmlChar *)name);
    *changed = TRUE;
}

/* The <av:placement> of @accelerators, or NULL. */
static xmlNode *
placement_find(const xmlNode *accelerators)
{
    return av_domain_child_first(accelerators, "placement", AV_NS_DOMAIN);
}

/* The kind of an <av:placement> entry: "device", "mdev" or "usb". */
static const char *
placed_kind_of(AvAttach attach)
{
    switch (attach) {
    case AV_ATTACH_MDEV:
        return "mdev";
    case AV_ATTACH_USB:
        return "usb";
    default:
        return "device";
    }
}

/* The entries of <av:placement> in document order, each checked to carry
 * the alias ua-accelvirt-N of its position N. */
static gboolean
placed_entries(xmlNode *placed, GPtrArray **ret, GError **error)
{
    g_autoptr(GPtrArray) entries = g_ptr_array_new();

    for (xmlNode *c = placed->children; c; c = c->next) {
        g_autofree char *alias = NULL;
        g_autofree char *want = NULL;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (!av_domain_is_elem(c, "device", AV_NS_DOMAIN) && !av_domain_is_elem(c, "mdev", AV_NS_DOMAIN) &&
            !av_domain_is_elem(c, "usb", AV_NS_DOMAIN)) {
            g_autofree char *q = av_domain_quote((const char *)c->name);

            return av_domain_invalid_at(error, c,
                                        "<av:placement> holds an unknown element <%s> (it takes av:device, av:mdev "
                                        "and av:usb)",
                                        q);
        }
        if (entries->len == AV_REQUESTS_MAX * AV_REQUEST_COUNT_MAX)
            return av_domain_invalid_at(error, c, "<av:placement> has more than %u devices",
                                        AV_REQUESTS_MAX * AV_REQUEST_COUNT_MAX);
        alias = av_domain_prop(c, "alias");
        want = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", entries->len);
        if (g_strcmp0(alias, want) != 0) {
            g_autofree char *q = av_domain_quote(alias);

            return av_domain_invalid_at(error, c,
                                        "av:placement entry %u has the alias '%s', not '%s': accelvirt did not "
                                        "write this placement; place the domain again with 'accelvirt define'",
                                        entries->len, q, want);
        }
        g_ptr_array_add(entries, c);
    }
    *ret = g_steal_pointer(&entries);
    return TRUE;
}

/* The <hostdev> of <devices> whose alias is @alias, or NULL; refuses a
 * second one. */
static gboolean
hostdev_find(xmlNode *root, const char *alias, xmlNode **ret, GError **error)
{
    xmlNode *found = NULL;

    for (xmlNode *devices = root->children; devices; devices = devices->next) {
        if (!av_domain_is_elem(devices, "devices", NULL))
            continue;
        for (xmlNode *c = devices->children; c; c = c->next) {
            xmlNode *a;
            g_autofree char *name = NULL;

            if (!av_domain_is_elem(c, "hostdev", NULL) || !(a = av_domain_child_first(c, "alias", NULL)))
                continue;
            name = av_domain_prop(a, "name");
            if (g_strcmp0(name, alias) != 0)
                continue;
            if (found)
                return av_domain_invalid_at(error, c, "two <hostdev>s have the alias '%s'", alias);
            found = c;
        }
    }
    *ret = found;
    return TRUE;
}

/* The canonical source address of the PCI hostdev @alias of @dom. */
static const char *
hostdev_address(const AvDomain *dom, const char *alias)
{
    for (guint i = 0; i < dom->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(dom->hostdevs, i);

        if (h->type == AV_HOSTDEV_PCI && !h->is_interface && g_strcmp0(h->alias, alias) == 0)
            return h->pci_address;
    }
    return NULL;
}

/* Moves the PCI hostdev @hostdev (alias @alias) and its entry @entry to the
 * address of @item: <source><address domain= bus= slot= function=/> only;
 * the guest-side <address type='pci'/>, the alias, the driver stay.  The
 * entry's bitstream= becomes @item's. */
static gboolean
remap_pci(const AvDomain *dom, xmlNode *hostdev, xmlNode *entry, const AvPlacedItem *item, const char *alias,
          gboolean *changed, GError **error)
{
    xmlNode *address = av_domain_child_first(av_domain_child_first(hostdev, "source", NULL), "address", NULL);
    const char *old = hostdev_address(dom, alias);
    g_autofree char *canonical = NULL;

    av_domain_pci_address_canonical(item->pci_address, &canonical);
    if (!address || !old)
        return av_domain_invalid_at(error, hostdev, "the <hostdev> '%s' has no <source><address>", alias);
    if (strcmp(old, canonical) != 0) {
        g_autofree char *domain = g_strdup_printf("0x%.4s", canonical);
        g_autofree char *bus = g_strdup_printf("0x%.2s", canonical + 5);
        g_autofree char *slot = g_strdup_printf("0x%.2s", canonical + 8);
        g_autofree char *function = g_strdup_printf("0x%.1s", canonical + 11);

        update_prop(address, "domain", domain, changed);
        update_prop(address, "bus", bus, changed);
        update_prop(address, "slot", slot, changed);
        update_prop(address, "function", function, changed);
    }
    update_prop(entry, "address", canonical, changed);
    update_prop(entry, "bitstream", item->bitstream, changed);
    return TRUE;
}

/* Moves the USB hostdev @hostdev and its entry @entry to @item: vendor and
 * product ids, <source><address bus= device=/> (the stick's numbers now:
 * they change when it re-enumerates; when @item does not know them, kept
 * for the same port and removed for another), and the bus path and
 * identity in the entry. */
static void
remap_usb(xmlNode *hostdev, xmlNode *entry, const AvPlacedItem *item, gboolean *changed)
{
    xmlNode *source = av_domain_child_first(hostdev, "source", NULL);
    xmlNode *vendor = av_domain_child_first(source, "vendor", NULL);
    xmlNode *product = av_domain_child_first(source, "product", NULL);
    xmlNode *address = av_domain_child_first(source, "address", NULL);
    g_autofree char *vendor_id = g_strdup_printf("0x%04x", item->usb_vendor);
    g_autofree char *product_id = g_strdup_printf("0x%04x", item->usb_product);
    g_autofree char *old_path = av_domain_prop(entry, "bus-path");

    if (item->usb_busnum > 0 && item->usb_devnum > 0 && source) {
        g_autofree char *bus = g_strdup_printf("%u", item->usb_busnum);
        g_autofree char *device = g_strdup_printf("%u", item->usb_devnum);

        if (!address) {
            address = add_elem(source, "address");
            *changed = TRUE;
        }
        update_prop(address, "bus", bus, changed);
        update_prop(address, "device", device, changed);
    } else if (address && g_strcmp0(old_path, item->usb_bus_path) != 0) {
        remove_node(address);
        *changed = TRUE;
    }
    /* Ids unknown (0: a placement the pool recorded keeps none) stay. */
    if (vendor && item->usb_vendor)
        update_prop(vendor, "id", vendor_id, changed);
    if (product && item->usb_product)
        update_prop(product, "id", product_id, changed);
    update_prop(entry, "bus-path", item->usb_bus_path, changed);
    if (item->usb_vendor && item->usb_product) {
        update_prop(entry, "vendor", vendor_id, changed);
        update_prop(entry, "product", product_id, changed);
    }
    if (item->identity)
        update_prop(entry, "identity", item->identity, changed);
}

/* The pinning and numatune accelvirt wrote (as @wrote says), moved to the
 * node of @placement; removed when it has none. */
static void
remap_numa(xmlNode *root, xmlNode *placed, const AvPlacement *placement, const AvWrote *wrote, gboolean *changed)
{
    g_autofree char *cpuset = placement->numa_node >= 0 ? av_domain_cpuset_format(placement->cpus) : NULL;
    g_autofree char *node = placement->numa_node >= 0 ? g_strdup_printf("%d", placement->numa_node) : NULL;
    xmlNode *next;

    update_prop(placed, "node", node, changed);
    for (xmlNode *c = root->children; c; c = next) {
        next = c->next;
        if (wrote->pinned && av_domain_is_elem(c, "cputune", NULL)) {
            if (!cpuset) {
                gboolean removed = remove_children(c, "vcpupin");

                removed = remove_children(c, "emulatorpin") || removed;
                if (removed) {
                    *changed = TRUE;
                    remove_if_emptied(c, FALSE);
                }
                continue;
            }
            for (xmlNode *pin = c->children; pin; pin = pin->next) {
                if (av_domain_is_elem(pin, "vcpupin", NULL) || av_domain_is_elem(pin, "emulatorpin", NULL))
                    update_prop(pin, "cpuset", cpuset, changed);
            }
        } else if (wrote->numatune && av_domain_is_elem(c, "numatune", NULL)) {
            if (!node) {
                if (remove_children(c, "memory")) {
                    *changed = TRUE;
                    remove_if_emptied(c, FALSE);
                }
                continue;
            }
            for (xmlNode *memory = c->children; memory; memory = memory->next) {
                if (av_domain_is_elem(memory, "memory", NULL))
                    update_prop(memory, "nodeset", node, changed);
            }
        }
    }
    if (!node) {
        if (wrote->pinned)
            update_prop(placed, "pinned", "no", changed);
        if (wrote->numatune)
            update_prop(placed, "numatune", "no", changed);
    }
}

/* The cell= of the <av:placement> entry @entry: *ret the cell, -1 when
 * it has none. */
static gboolean
entry_cell(const xmlNode *entry, int *ret, GError **error)
{
    g_autofree char *cell = av_domain_prop(entry, "cell");
    guint v = 0;

    *ret = -1;
    if (!cell)
        return TRUE;
    if (!av_domain_decimal_parse(cell, AV_DOMAIN_NODE_MAX - 1, &v)) {
        g_autofree char *q = av_domain_quote(cell);

        return av_domain_invalid_at(error, entry, "av:placement entry cell '%s' is not a guest NUMA cell between 0 "
                                    "and %u", q, AV_DOMAIN_NODE_MAX - 1);
    }
    *ret = (int)v;
    return TRUE;
}

/* The vCPUs of the guest cell @id as <cpu><numa><cell id= cpus=> of @root
 * says, or NULL with an error. */
static GArray *
cell_vcpus(const xmlNode *root, guint id, GError **error)
{
    xmlNode *numa = av_domain_child_first(av_domain_child_first(root, "cpu", NULL), "numa", NULL);

    for (xmlNode *c = numa ? numa->children : NULL; c; c = c->next) {
        g_autofree char *cid = NULL;
        g_autofree char *cpus = NULL;
        GArray *set = NULL;
        guint v = 0;

        if (!av_domain_is_elem(c, "cell", NULL))
            continue;
        cid = av_domain_prop(c, "id");
        if (!av_domain_decimal_parse(cid, G_MAXUINT32, &v) || v != id)
            continue;
        cpus = av_domain_prop(c, "cpus");
        if (!cpus || !av_domain_cpuset_parse(cpus, AV_DOMAIN_VCPU_MAX, &set, error)) {
            if (!cpus)
                av_domain_invalid_at(error, c, "<cell id='%u'> has no cpus", id);
            return NULL;
        }
        return set;
    }
    av_domain_invalid_at(error, numa, "the domain's <cpu><numa> has no <cell id='%u'>, which its av:placement "
                         "names; place the domain again with 'accelvirt define'", id);
    return NULL;
}

/* Sets @prop to @value on each <cputune> (vcpupin, emulatorpin) or
 * <numatune> (memory, memnode) child @elem whose @attr is @id (@attr NULL:
 * every one). */
static void
pins_update(xmlNode *root, const char *elem, const char *attr, guint id, const char *prop, const char *value,
            gboolean *changed)
{
    const char *parent = g_str_has_prefix(elem, "mem") ? "numatune" : "cputune";

    for (xmlNode *c = root->children; c; c = c->next) {
        if (!av_domain_is_elem(c, parent, NULL))
            continue;
        for (xmlNode *pin = c->children; pin; pin = pin->next) {
            g_autofree char *v = NULL;
            guint n = 0;

            if (!av_domain_is_elem(pin, elem, NULL))
                continue;
            v = attr ? av_domain_prop(pin, attr) : NULL;
            if (!attr || (av_domain_decimal_parse(v, G_MAXUINT32, &n) && n == id))
                update_prop(pin, prop, value, changed);
        }
    }
}

/* The host nodes the devices of guest cell @c sit on in @placement
 * (@cells: each entry's cell), in the order met. */
static GArray *
cell_nodes(GArray *cells, const AvPlacement *placement, guint c)
{
    GArray *nodes = g_array_new(FALSE, FALSE, sizeof(guint));

    for (guint i = 0; i < cells->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        guint node = (guint)item->numa_node;
        gboolean seen = FALSE;

        if (g_array_index(cells, int, i) != (int)c || item->numa_node < 0)
            continue;
        for (guint k = 0; k < nodes->len && !seen; k++)
            seen = g_array_index(nodes, guint, k) == node;
        if (!seen)
            g_array_append_val(nodes, node);
    }
    return nodes;
}

/* The nodeset of <numatune><memnode cellid=@c>, or NULL.  Caller frees. */
static char *
memnode_nodeset(const xmlNode *root, guint c)
{
    xmlNode *numatune = av_domain_child_first(root, "numatune", NULL);

    for (xmlNode *m = numatune ? numatune->children : NULL; m; m = m->next) {
        g_autofree char *id = NULL;
        guint v = 0;

        if (!av_domain_is_elem(m, "memnode", NULL))
            continue;
        id = av_domain_prop(m, "cellid");
        if (av_domain_decimal_parse(id, G_MAXUINT32, &v) && v == c)
            return av_domain_prop(m, "nodeset");
    }
    return NULL;
}

/* The guest cells accelvirt wrote, re-pinned to the host nodes their
 * devices sit on in @placement (a cell whose devices span nodes: all of
 * them): each cell's <vcpupin>s and <memnode>, then <emulatorpin> and
 * <numatune><memory> on the union.  The cells, controllers and guest
 * addresses stay: the guest ABI never changes.  When every cell's devices
 * sit on the nodes its <memnode> already names, nothing changes (and
 * @placement needs no CPUs: the hook's own remap of the same cards builds
 * one without its nodes); else every node needs its CPUs in
 * @placement->nodes. */
static gboolean
remap_cells(xmlNode *root, GPtrArray *entries, const AvPlacement *placement, gboolean *changed, GError **error)
{
    g_autoptr(GArray) cells = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GArray) all_cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autoptr(GArray) all_nodes = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autofree char *all_cpuset = NULL;
    g_autofree char *all_nodeset = NULL;
    guint max_cell = 0;
    gboolean any = FALSE, moved = FALSE;

    for (guint i = 0; i < entries->len; i++) {
        int cell = -1;

        if (!entry_cell(g_ptr_array_index(entries, i), &cell, error))
            return FALSE;
        g_array_append_val(cells, cell);
        if (cell >= 0) {
            max_cell = MAX(max_cell, (guint)cell);
            any = TRUE;
        }
    }
    for (guint c = 0; any && c <= max_cell && !moved; c++) {
        g_autoptr(GArray) nodes = cell_nodes(cells, placement, c);
        g_autofree char *nodeset = nodes->len ? av_domain_cpuset_format(nodes) : NULL;
        g_autofree char *now = memnode_nodeset(root, c);

        moved = nodeset && g_strcmp0(nodeset, now) != 0;
    }
    if (!moved)
        return TRUE;
    for (guint c = 0; c <= max_cell; c++) {
        g_autoptr(GArray) nodes = cell_nodes(cells, placement, c);
        g_autoptr(GArray) vcpus = NULL;
        g_autoptr(GArray) cpus = g_array_new(FALSE, FALSE, sizeof(guint));
        g_autofree char *cpuset = NULL;
        g_autofree char *nodeset = NULL;

        if (nodes->len == 0)
            continue;    /* no cell c, or none of its devices has a known node: as it was */
        for (guint k = 0; k < nodes->len; k++) {
            int node = (int)g_array_index(nodes, guint, k);
            const AvPlacedNode *n = av_domain_placed_node(placement, node);

            if (!n || !n->cpus || n->cpus->len == 0)
                return av_domain_invalid_at(error, NULL, "the new placement lacks the CPUs of host node %d, where "
                                            "the devices of guest cell %u now sit: cannot re-pin the cell",
                                            node, c);
            g_array_append_vals(cpus, n->cpus->data, n->cpus->len);
        }
        if (!(vcpus = cell_vcpus(root, c, error)))
            return FALSE;
        cpuset = av_domain_cpuset_format(cpus);
        nodeset = av_domain_cpuset_format(nodes);
        for (guint v = 0; v < vcpus->len; v++)
            pins_update(root, "vcpupin", "vcpu", g_array_index(vcpus, guint, v), "cpuset", cpuset, changed);
        pins_update(root, "memnode", "cellid", c, "nodeset", nodeset, changed);
        g_array_append_vals(all_cpus, cpus->data, cpus->len);
        g_array_append_vals(all_nodes, nodes->data, nodes->len);
    }
    all_cpuset = av_domain_cpuset_format(all_cpus);
    all_nodeset = av_domain_cpuset_format(all_nodes);
    pins_update(root, "emulatorpin", NULL, 0, "cpuset", all_cpuset, changed);
    pins_update(root, "memory", NULL, 0, "nodeset", all_nodeset, changed);
    return TRUE;
}

char *
av_domain_remap(const char *xml, gsize len, const AvPlacement *placement, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(GPtrArray) entries = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *accelerators, *placed;
    AvWrote wrote = { 0 };
    gboolean hide = FALSE, changed = FALSE;
    char *out = NULL;

    g_return_val_if_fail(placement != NULL, NULL);
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
    if (!requests_parse(accelerators, &requests, NULL, error))
        goto out;
    placed = accelerators ? placement_find(accelerators) : NULL;
    if (requests->len == 0 || !placed) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "domain '%s' has no accelvirt placement to remap (no <av:request> or no <av:placement> in its "
                    "<av:accelerators>); place it with 'accelvirt define'", dom->name ? dom->name : "(unnamed)");
        goto out;
    }
    if (!wrote_read(placed, &wrote, error) || !placed_entries(placed, &entries, error) ||
        !placement_check(placement, NULL, requests, &hide, error))
        goto out;
    if (!placement->items || placement->items->len != entries->len) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the new placement has %u devices but domain '%s' was placed with %u (%s0 to %s%u); place "
                    "the domain again with 'accelvirt define'",
                    placement->items ? placement->items->len : 0, dom->name ? dom->name : "(unnamed)",
                    entries->len, AV_REWRITE_ALIAS_PREFIX, AV_REWRITE_ALIAS_PREFIX,
                    entries->len ? entries->len - 1 : 0);
        goto out;
    }
    for (guint i = 0; i < entries->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        xmlNode *entry = g_ptr_array_index(entries, i);
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);
        g_autofree char *profile = av_domain_prop(entry, "profile");
        g_autofree char *type = NULL;
        const char *kind = placed_kind_of(item->attach);
        const char *want_type = item->attach == AV_ATTACH_MDEV ? "mdev"
                                : item->attach == AV_ATTACH_USB ? "usb" : "pci";
        xmlNode *hostdev = NULL;

        if (g_strcmp0(profile, item->profile) != 0) {
            g_autofree char *q = av_domain_quote(profile);

            av_domain_invalid_at(error, entry,
                                 "the new placement's device %u is of profile '%s' but %s of the domain is of "
                                 "profile '%s': the placement is not for these requests",
                                 i, item->profile, alias, q);
            goto out;
        }
        if (strcmp((const char *)entry->name, kind) != 0) {
            av_domain_invalid_at(error, entry,
                                 "the new placement's device %u is an %s but %s of the domain is an "
                                 "av:%s: the placement is not for these requests",
                                 i, kind, alias, (const char *)entry->name);
            goto out;
        }
        if (!hostdev_find(root, alias, &hostdev, error))
            goto out;
        if (!hostdev) {
            av_domain_invalid_at(error, entry,
                                 "the domain has no <hostdev> with the alias '%s' that its av:placement names; "
                                 "place the domain again with 'accelvirt define'",
                                 alias);
            goto out;
        }
        type = av_domain_prop(hostdev, "type");
        if (g_strcmp0(type, want_type) != 0) {
            g_autofree char *q = av_domain_quote(type);

            av_domain_invalid_at(error, hostdev,
                                 "the <hostdev> '%s' is of type '%s', not '%s' as its av:placement entry "
                                 "says",
                                 alias, q, want_type);
            goto out;
        }
        if (item->attach == AV_ATTACH_USB)
            remap_usb(hostdev, entry, item, &changed);
        else if (item->attach != AV_ATTACH_MDEV && !remap_pci(dom, hostdev, entry, item, alias, &changed, error))
            goto out;
        /* an mdev keeps its UUID: the hook creates it at prepare */
    }
    if (wrote.cells) {
        /* the cells' pinning, not the one node's */
        if (!remap_cells(root, entries, placement, &changed, error))
            goto out;
        wrote.pinned = wrote.numatune = FALSE;
    }
    remap_numa(root, placed, placement, &wrote, &changed);
    out = changed ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
out:
    xmlFreeDoc(doc);
    return out;
}

/* See av-rewrite.h. */
AvPlacement *
av_domain_placement(const char *xml, gsize len, GError **error)
{
    g_autoptr(AvPlacement) placement = g_new0(AvPlacement, 1);
    g_autoptr(GPtrArray) entries = NULL;
    xmlDoc *doc;
    xmlNode *root, *accelerators, *placed = NULL;
    gboolean ok = FALSE;

    placement->numa_node = -1;
    placement->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    placement->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    placement->warnings = g_ptr_array_new_with_free_func(g_free);
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    placed = accelerators ? placement_find(accelerators) : NULL;
    if (!placed) {
        ok = TRUE;
        goto out;
    }
    {
        g_autofree char *node = av_domain_prop(placed, "node");
        guint v = 0;

        if (node) {
            if (!av_domain_decimal_parse(node, AV_DOMAIN_NODE_MAX - 1, &v)) {
                g_autofree char *q = av_domain_quote(node);

                av_domain_invalid_at(error, placed, "av:placement node '%s' is not a NUMA node number between 0 and %u",
                                     q, AV_DOMAIN_NODE_MAX - 1);
                goto out;
            }
            placement->numa_node = (int)v;
        }
    }
    if (!placed_entries(placed, &entries, error))
        goto out;
    for (guint i = 0; i < entries->len; i++) {
        xmlNode *entry = g_ptr_array_index(entries, i);
        g_autoptr(AvPlacedItem) item = g_new0(AvPlacedItem, 1);
        g_autofree char *value = NULL;
        int cell = -1;    /* checked; AvPlacedItem has no field for the guest side */

        item->numa_node = -1;
        item->vf_index = -1;
        item->profile = av_domain_prop(entry, "profile");
        if (!item->profile || !av_profile_name_is_valid(item->profile)) {
            g_autofree char *q = av_domain_quote(item->profile);

            av_domain_invalid_at(error, entry, "av:placement entry %u has the profile name '%s'", i, q);
            goto out;
        }
        if (av_domain_is_elem(entry, "device", AV_NS_DOMAIN)) {
            item->attach = AV_ATTACH_VFIO_PCI;
            value = av_domain_prop(entry, "address");
            if (!av_domain_pci_address_canonical(value, &item->pci_address)) {
                g_autofree char *q = av_domain_quote(value);

                av_domain_invalid_at(error, entry, "av:device address '%s' is not a PCI address such as '0000:3b:00.0'",
                                     q);
                goto out;
            }
            if (!av_domain_placed_vf(entry, &item->pf_address, &item->vf_index, error) ||
                !av_domain_placed_bitstream(entry, &item->bitstream, error) || !entry_cell(entry, &cell, error))
                goto out;
            if (item->pf_address)
                item->attach = AV_ATTACH_SRIOV_VF;
        } else if (av_domain_is_elem(entry, "mdev", AV_NS_DOMAIN)) {
            item->attach = AV_ATTACH_MDEV;
            value = av_domain_prop(entry, "uuid");
            if (!av_domain_uuid_canonical(value, &item->mdev_uuid)) {
                g_autofree char *q = av_domain_quote(value);

                av_domain_invalid_at(error, entry, "av:mdev uuid '%s' is not a UUID", q);
                goto out;
            }
            if (!entry_cell(entry, &cell, error))
                goto out;
        } else {
            g_autofree char *vendor = av_domain_prop(entry, "vendor");
            g_autofree char *product = av_domain_prop(entry, "product");
            guint64 v = 0, p = 0;

            item->attach = AV_ATTACH_USB;
            item->usb_bus_path = av_domain_prop(entry, "bus-path");
            if (!usb_bus_path_valid(item->usb_bus_path) || !vendor || !product ||
                !g_str_has_prefix(vendor, "0x") || !g_str_has_prefix(product, "0x") ||
                !g_ascii_string_to_unsigned(vendor + 2, 16, 0, G_MAXUINT16, &v, NULL) ||
                !g_ascii_string_to_unsigned(product + 2, 16, 0, G_MAXUINT16, &p, NULL)) {
                av_domain_invalid_at(error, entry, "av:usb entry %u is malformed (bus-path, vendor, product)", i);
                goto out;
            }
            item->usb_vendor = (guint16)v;
            item->usb_product = (guint16)p;
            /* Optional: placements by an older accelvirt have none. */
            item->identity = av_domain_prop(entry, "identity");
            if (item->identity && !av_pool_identity_usb_is_valid(item->identity)) {
                av_domain_invalid_at(error, entry, "av:usb entry %u has a malformed identity", i);
                goto out;
            }
        }
        g_ptr_array_add(placement->items, g_steal_pointer(&item));
    }
    ok = TRUE;
out:
    xmlFreeDoc(doc);
    return ok ? g_steal_pointer(&placement) : NULL;
}
