/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the guest PCIe and NUMA topology a rewrite writes (see
 * av-topology.h).  Pure: the domain XML's tree and a placement in, an
 * AvGuestTopology out.
 *
 * Decisions the header leaves open:
 *   - the vCPUs split among the cells are those of <vcpu> (its text: the
 *     maximum, not current=, since libvirt requires every vCPU up to the
 *     maximum in some cell); without <vcpu> libvirt runs one;
 *   - the memory split is <memory> in its unit= (libvirt's scaled
 *     integers: b, k, KiB, KB, M, MiB, MB, G, ... as virScaleInteger reads
 *     them; KiB when absent), rounded up to KiB as libvirt does, then split
 *     in whole MiB (whole pages of the largest <hugepages><page size=> when
 *     the domain names one larger than 1 MiB, whatever its nodeset=): a
 *     remainder is dropped, with a note, since libvirt makes the domain's
 *     memory the sum of its cells;
 *   - cells need a domain of at least one MiB (one such page) per cell, and each node's CPUs
 *     (AvPlacement->nodes) known; a switch's items that do not share one
 *     node go under the cell of the first, and a switch whose node is
 *     unknown stays on pcie-root;
 *   - NVIDIA GPUs get a clique only when two or more of them share a
 *     mirrored switch (one alone has no peer); with switches="off" none,
 *     with a note.
 * libvirt: formatdomain.rst "CPU model and topology" (<numa><cell>), "NUMA
 * Node Tuning" (<memnode>), "Controllers" (pcie-expander-bus <target><node>). */
#include "config.h"

#include "av-topology.h"
#include "av-domain.h"
#include "av-domain-private.h"

#include <string.h>

#include "util/av-error.h"

void
av_guest_cell_free(AvGuestCell *cell)
{
    if (!cell)
        return;
    if (cell->vcpus)
        g_array_unref(cell->vcpus);
    if (cell->host_cpus)
        g_array_unref(cell->host_cpus);
    g_free(cell);
}

void
av_guest_group_free(AvGuestGroup *group)
{
    if (!group)
        return;
    g_free(group->host_switch);
    if (group->items)
        g_array_unref(group->items);
    g_free(group);
}

void
av_guest_topology_free(AvGuestTopology *topology)
{
    if (!topology)
        return;
    if (topology->cells)
        g_ptr_array_unref(topology->cells);
    if (topology->groups)
        g_ptr_array_unref(topology->groups);
    if (topology->notes)
        g_ptr_array_unref(topology->notes);
    g_free(topology);
}

/* ---- <av:topology> ---- */

static gboolean
topology_word(const xmlNode *node, const char *name, const char *const *words, const char *say, int *ret,
              GError **error)
{
    g_autofree char *v = av_domain_prop(node, name);

    if (!v)
        return TRUE;
    for (int i = 0; words[i]; i++) {
        if (strcmp(v, words[i]) == 0) {
            *ret = i;
            return TRUE;
        }
    }
    {
        g_autofree char *q = av_domain_quote(v);

        return av_domain_invalid_at(error, node, "<av:topology %s='%s'> is not %s", name, q, say);
    }
}

gboolean
av_domain_topology_elem_parse(const xmlNode *node, AvTopologyRequest *ret, GError **error)
{
    static const char *const numas[] = { "auto", "mirror", "off", NULL };
    static const char *const switches[] = { "mirror", "off", NULL };
    static const char *const gpudirects[] = { "auto", "off", NULL };
    AvTopologyRequest request = { AV_GUEST_NUMA_AUTO, TRUE, TRUE };
    int numa = 0, sw = 0, gd = 0;

    for (const xmlAttr *a = node->properties; a; a = a->next) {
        const char *n = (const char *)a->name;

        if (a->ns || (strcmp(n, "guest-numa") != 0 && strcmp(n, "switches") != 0 && strcmp(n, "gpudirect") != 0)) {
            g_autofree char *q = av_domain_quote(n);

            return av_domain_invalid_at(error, node,
                                        "<av:topology> has an unknown attribute '%s' (it takes guest-numa, switches "
                                        "and gpudirect)",
                                        q);
        }
    }
    for (const xmlNode *c = node->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE)
            return av_domain_invalid_at(error, c, "<av:topology> takes no child element: write it as <av:topology/>");
    }
    if (!topology_word(node, "guest-numa", numas, "'auto', 'mirror' or 'off'", &numa, error) ||
        !topology_word(node, "switches", switches, "'mirror' or 'off'", &sw, error) ||
        !topology_word(node, "gpudirect", gpudirects, "'auto' or 'off'", &gd, error))
        return FALSE;
    request.guest_numa = (AvGuestNuma)numa;
    request.switches = sw == 0;
    request.gpudirect = gd == 0;
    *ret = request;
    return TRUE;
}

gboolean
av_domain_topology_find(const xmlNode *accelerators, AvTopologyRequest *ret, GError **error)
{
    AvTopologyRequest request = { AV_GUEST_NUMA_AUTO, TRUE, TRUE };
    const xmlNode *found = NULL;

    for (const xmlNode *c = accelerators ? accelerators->children : NULL; c; c = c->next) {
        if (!av_domain_is_elem(c, "topology", AV_NS_DOMAIN))
            continue;
        if (found)
            return av_domain_invalid_at(error, c, "<av:accelerators> has more than one <av:topology>: keep one");
        found = c;
        if (!av_domain_topology_elem_parse(c, &request, error))
            return FALSE;
    }
    *ret = request;
    return TRUE;
}

gboolean
av_domain_topology_request(const char *xml, gsize len, AvTopologyRequest *ret, GError **error)
{
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    gboolean ok = FALSE;

    if (!doc)
        return FALSE;
    root = av_domain_root(doc, error);
    if (root)
        ok = av_domain_topology_find(av_domain_accelerators_find(root), ret, error);
    xmlFreeDoc(doc);
    return ok;
}

/* ---- what the domain has ---- */

static char *
elem_text(const xmlNode *node)
{
    xmlChar *t = xmlNodeGetContent(node);
    char *s = g_strstrip(g_strdup(t ? (const char *)t : ""));

    xmlFree(t);
    return s;
}

/* libvirt's scaled integer (virScaleInteger): @unit NULL is KiB; b/bytes,
 * then k, m, g, t, p, e alone or with "iB" (powers of 1024) or "B" (of
 * 1000), any case.  The size in KiB, rounded up; FALSE when malformed or
 * too large. */
static gboolean
memory_kib_parse(const char *value, const char *unit, guint64 *ret)
{
    static const char prefixes[] = "kmgtpe";
    guint64 v = 0, scale = 1024, bytes;

    if (!value || !*value || !g_ascii_string_to_unsigned(value, 10, 0, G_MAXUINT64, &v, NULL))
        return FALSE;
    if (unit && *unit) {
        const char *p = strchr(prefixes, g_ascii_tolower(unit[0]));
        guint base = 1024;

        if (g_ascii_strcasecmp(unit, "b") == 0 || g_ascii_strcasecmp(unit, "bytes") == 0) {
            scale = 1;
        } else if (!p || !*p) {
            return FALSE;
        } else {
            if (unit[1] == '\0' || g_ascii_strcasecmp(unit + 1, "iB") == 0)
                base = 1024;
            else if (g_ascii_strcasecmp(unit + 1, "B") == 0)
                base = 1000;
            else
                return FALSE;
            scale = 1;
            for (const char *q = prefixes; q <= p; q++)
                scale *= base;
        }
    }
    if (v > G_MAXUINT64 / scale)
        return FALSE;
    bytes = v * scale;
    *ret = bytes / 1024 + (bytes % 1024 ? 1 : 0);
    return TRUE;
}

/* The largest <memoryBacking><hugepages><page size= unit=> in KiB
 * (libvirt's units, KiB when unit= is absent: formatdomain.rst, "Memory
 * Backing"), whatever its nodeset=; 0 when the domain names none. */
static guint64
domain_page_kib(const xmlNode *root)
{
    xmlNode *hugepages = av_domain_child_first(av_domain_child_first(root, "memoryBacking", NULL), "hugepages", NULL);
    guint64 largest = 0;

    for (xmlNode *c = hugepages ? hugepages->children : NULL; c; c = c->next) {
        g_autofree char *size = NULL;
        g_autofree char *unit = NULL;
        guint64 kib = 0;

        if (!av_domain_is_elem(c, "page", NULL))
            continue;
        size = av_domain_prop(c, "size");
        unit = av_domain_prop(c, "unit");
        if (memory_kib_parse(size, unit, &kib) && kib > largest)
            largest = kib;
    }
    return largest;
}

/* The vCPU count (<vcpu>'s text, 1 when absent) and <memory> in KiB (0
 * when absent or unreadable). */
static void
domain_size(const xmlNode *root, guint *ret_vcpus, guint64 *ret_memory_kib)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);
    xmlNode *memory = av_domain_child_first(root, "memory", NULL);
    guint vcpus = 1;
    guint64 kib = 0;

    if (vcpu) {
        g_autofree char *t = elem_text(vcpu);

        if (!av_domain_decimal_parse(t, AV_DOMAIN_VCPU_MAX, &vcpus) || vcpus == 0)
            vcpus = 0;
    }
    if (memory) {
        g_autofree char *t = elem_text(memory);
        g_autofree char *unit = av_domain_prop(memory, "unit");

        if (!memory_kib_parse(t, unit, &kib))
            kib = 0;
    }
    *ret_vcpus = vcpus;
    *ret_memory_kib = kib;
}

/* Why the user's own NUMA settings keep accelvirt's cells out, or NULL:
 * <cpu><numa> cells, pinned vCPUs (a <vcpupin>, an <emulatorpin>, <vcpu
 * cpuset=> or placement='auto'), or a <numatune> with anything in it. */
static const char *
user_numa(const xmlNode *root)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);
    xmlNode *numa = av_domain_child_first(av_domain_child_first(root, "cpu", NULL), "numa", NULL);

    if (av_domain_child_first(numa, "cell", NULL))
        return "the domain has <cpu><numa> cells of its own";
    if (vcpu) {
        g_autofree char *cpuset = av_domain_prop(vcpu, "cpuset");
        g_autofree char *placement = av_domain_prop(vcpu, "placement");

        if (cpuset || g_strcmp0(placement, "auto") == 0)
            return "the domain places its vCPUs itself (<vcpu cpuset=> or placement='auto')";
    }
    for (const xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "cputune", NULL) &&
            (av_domain_child_first(c, "vcpupin", NULL) || av_domain_child_first(c, "emulatorpin", NULL)))
            return "the domain pins its vCPUs itself (<vcpupin> or <emulatorpin>)";
        if (av_domain_is_elem(c, "numatune", NULL)) {
            for (const xmlNode *m = c->children; m; m = m->next) {
                if (m->type == XML_ELEMENT_NODE)
                    return "the domain has a <numatune> of its own";
            }
        }
    }
    return NULL;
}

/* ---- the topology ---- */

static gboolean
item_is_pci(const AvPlacedItem *item)
{
    return item->attach == AV_ATTACH_VFIO_PCI || item->attach == AV_ATTACH_SRIOV_VF;
}

/* A device that a guest PCIe position and a cell can be given to: a PCI
 * function or an mdev (its <hostdev> takes a guest PCI address). */
static gboolean
item_is_positioned(const AvPlacedItem *item)
{
    return item_is_pci(item) || item->attach == AV_ATTACH_MDEV;
}

const AvPlacedNode *
av_domain_placed_node(const AvPlacement *placement, int id)
{
    for (guint i = 0; placement->nodes && i < placement->nodes->len; i++) {
        const AvPlacedNode *n = g_ptr_array_index(placement->nodes, i);

        if (n->id == id)
            return n;
    }
    return NULL;
}

static gint
compare_int(gconstpointer a, gconstpointer b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return x < y ? -1 : x > y;
}

/* The host nodes of the positioned devices, ascending. */
static GArray *
used_nodes(const AvPlacement *placement)
{
    GArray *nodes = g_array_new(FALSE, FALSE, sizeof(int));

    for (guint i = 0; placement->items && i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        gboolean seen = FALSE;

        if (!item_is_positioned(item) || item->numa_node < 0)
            continue;
        for (guint j = 0; j < nodes->len && !seen; j++)
            seen = g_array_index(nodes, int, j) == item->numa_node;
        if (!seen)
            g_array_append_val(nodes, item->numa_node);
    }
    g_array_sort(nodes, compare_int);
    return nodes;
}

/* How many PCI devices of @placement sit behind the host switch @sw. */
static guint
switch_count(const AvPlacement *placement, const char *sw)
{
    guint n = 0;

    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

        if (item_is_pci(item) && g_strcmp0(item->switch_port, sw) == 0)
            n++;
    }
    return n;
}

static void
note(AvGuestTopology *topology, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void
note(AvGuestTopology *topology, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_ptr_array_add(topology->notes, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}

/* The granule of a cell's memory in KiB: 1 MiB, or the domain's largest
 * hugepage size when larger (QEMU refuses a cell smaller than a page and
 * rounds one that is not whole pages up, beyond <memory>). */
static guint64
cell_granule_kib(guint64 page_kib)
{
    return page_kib > 1024 ? page_kib : 1024;
}

/* Why guest NUMA cells for @nodes cannot be written, or NULL. */
static char *
cells_refusal(const xmlNode *root, const AvPlacement *placement, GArray *nodes, guint vcpus, guint64 memory_kib,
              guint64 page_kib)
{
    const char *user = user_numa(root);

    if (nodes->len == 0)
        return g_strdup("no device of the placement has a known host NUMA node");
    if (user)
        return g_strdup_printf("%s (it wins)", user);
    if (vcpus < nodes->len)
        return g_strdup_printf("the domain has %u vCPU%s for %u host nodes: give it at least %u in <vcpu>", vcpus,
                               vcpus == 1 ? "" : "s", nodes->len, nodes->len);
    if (page_kib > 1024 && memory_kib / page_kib < nodes->len)
        return g_strdup_printf("the domain's <memory> is less than one hugepage of %" G_GUINT64_FORMAT " KiB for "
                               "each of its %u cells: give it at least %" G_GUINT64_FORMAT " KiB", page_kib,
                               nodes->len, page_kib * nodes->len);
    if (memory_kib / 1024 < nodes->len)
        return g_strdup_printf("the domain's <memory> is less than 1 MiB for each of its %u cells", nodes->len);
    for (guint i = 0; i < nodes->len; i++) {
        int id = g_array_index(nodes, int, i);
        const AvPlacedNode *n = av_domain_placed_node(placement, id);

        if (!n || !n->cpus || n->cpus->len == 0)
            return g_strdup_printf("the CPUs of host node %d are unknown", id);
    }
    return NULL;
}

static void
cells_build(AvGuestTopology *topology, const AvPlacement *placement, GArray *nodes, guint vcpus, guint64 memory_kib,
            guint64 page_kib)
{
    guint k = nodes->len, base = vcpus / k, extra = vcpus % k, next = 0;
    guint64 granule = cell_granule_kib(page_kib);
    guint64 units = memory_kib / granule, per = units / k;

    if (memory_kib % granule && granule == 1024)
        note(topology, "guest NUMA: the domain's memory of %" G_GUINT64_FORMAT " KiB is not a whole number of "
             "MiB: its cells hold %" G_GUINT64_FORMAT " MiB, which libvirt makes the domain's memory",
             memory_kib, units);
    else if (memory_kib % granule)
        note(topology, "guest NUMA: the domain's memory of %" G_GUINT64_FORMAT " KiB is not a whole number of its "
             "%" G_GUINT64_FORMAT " KiB hugepages: its cells hold %" G_GUINT64_FORMAT " KiB, which libvirt makes "
             "the domain's memory", memory_kib, granule, units * granule);
    for (guint c = 0; c < k; c++) {
        AvGuestCell *cell = g_new0(AvGuestCell, 1);
        const AvPlacedNode *n = av_domain_placed_node(placement, g_array_index(nodes, int, c));
        guint count = base + (c < extra ? 1 : 0);

        cell->id = c;
        cell->host_node = g_array_index(nodes, int, c);
        cell->vcpus = g_array_new(FALSE, FALSE, sizeof(guint));
        for (guint v = 0; v < count; v++, next++)
            g_array_append_val(cell->vcpus, next);
        /* cells_refusal() made sure that every node has its CPUs */
        cell->host_cpus = n ? g_array_copy(n->cpus) : g_array_new(FALSE, FALSE, sizeof(guint));
        cell->memory_kib = (c + 1 == k ? units - per * (k - 1) : per) * granule;
        g_ptr_array_add(topology->cells, cell);
    }
}

static int
cell_of(const AvGuestTopology *topology, int host_node)
{
    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);

        if (host_node >= 0 && cell->host_node == host_node)
            return (int)c;
    }
    return -1;
}

static void
groups_build(AvGuestTopology *topology, const AvPlacement *placement)
{
    guint n = placement->items->len;
    g_autofree gboolean *taken = g_new0(gboolean, n);
    gboolean cells = topology->cells->len > 0;

    for (guint i = 0; i < n; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        AvGuestGroup *group;

        if (taken[i] || !item_is_positioned(item))
            continue;
        if (topology->request.switches && item_is_pci(item) && item->switch_port &&
            switch_count(placement, item->switch_port) >= 2) {
            guint count = switch_count(placement, item->switch_port);

            if (count > AV_GUEST_SWITCH_PORTS_MAX)
                note(topology, "switches: the %u devices behind host switch %s go behind %u guest switches (one has "
                     "at most %u downstream ports), all in one GPUDirect clique", count, item->switch_port,
                     (count + AV_GUEST_SWITCH_PORTS_MAX - 1) / AV_GUEST_SWITCH_PORTS_MAX, AV_GUEST_SWITCH_PORTS_MAX);
            group = g_new0(AvGuestGroup, 1);
            group->host_switch = g_strdup(item->switch_port);
            group->cell = cells ? cell_of(topology, item->numa_node) : -1;
            group->clique = -1;
            group->items = g_array_new(FALSE, FALSE, sizeof(guint));
            for (guint j = i; j < n; j++) {
                const AvPlacedItem *other = g_ptr_array_index(placement->items, j);

                if (item_is_pci(other) && g_strcmp0(other->switch_port, item->switch_port) == 0) {
                    if (group->items->len == AV_GUEST_SWITCH_PORTS_MAX) {
                        /* a guest upstream port has 32 slots for downstream ports */
                        AvGuestGroup *more = g_new0(AvGuestGroup, 1);

                        g_ptr_array_add(topology->groups, group);
                        more->host_switch = g_strdup(item->switch_port);
                        more->cell = group->cell;
                        more->clique = -1;
                        more->items = g_array_new(FALSE, FALSE, sizeof(guint));
                        group = more;
                    }
                    g_array_append_val(group->items, j);
                    taken[j] = TRUE;
                }
            }
            g_ptr_array_add(topology->groups, group);
            continue;
        }
        if (!cells)
            continue;
        if (item->numa_node < 0) {
            note(topology, "guest NUMA: %s%u (%s) has no known host NUMA node: libvirt places it", AV_REWRITE_ALIAS_PREFIX,
                 i, item_is_pci(item) ? item->pci_address : "an mdev");
            continue;
        }
        group = g_new0(AvGuestGroup, 1);
        group->cell = cell_of(topology, item->numa_node);
        group->clique = -1;
        group->items = g_array_new(FALSE, FALSE, sizeof(guint));
        g_array_append_val(group->items, i);
        taken[i] = TRUE;
        g_ptr_array_add(topology->groups, group);
    }
}

/* The GPUs of the placement that share a host switch (two or more). */
static gboolean
gpus_share_switch(const AvPlacement *placement)
{
    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *a = g_ptr_array_index(placement->items, i);

        for (guint j = i + 1; a->gpudirect && a->switch_port && j < placement->items->len; j++) {
            const AvPlacedItem *b = g_ptr_array_index(placement->items, j);

            if (b->gpudirect && g_strcmp0(a->switch_port, b->switch_port) == 0)
                return TRUE;
        }
    }
    return FALSE;
}

static void
cliques_build(AvGuestTopology *topology, const xmlNode *root, const AvPlacement *placement)
{
    int next = 0;

    if (!topology->request.gpudirect)
        return;
    if (!topology->request.switches && gpus_share_switch(placement)) {
        note(topology, "GPUDirect cliques: not written without the mirrored switches (switches='off')");
        return;
    }
    for (guint g = 0; g < topology->groups->len; g++) {
        AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        guint gpus = 0;

        const AvGuestGroup *first = NULL;

        if (!group->host_switch)
            continue;
        /* the guest switches of one host switch (groups_build() splits one of more than 32) share its clique */
        for (guint h = 0; h < g && !first; h++) {
            const AvGuestGroup *other = g_ptr_array_index(topology->groups, h);

            if (g_strcmp0(other->host_switch, group->host_switch) == 0)
                first = other;
        }
        if (first) {
            group->clique = first->clique;
            continue;
        }
        for (guint i = 0; i < placement->items->len; i++) {
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

            gpus += item->gpudirect && item_is_pci(item) && g_strcmp0(item->switch_port, group->host_switch) == 0;
        }
        if (gpus < 2)
            continue;
        if (next > 15) {
            note(topology, "GPUDirect cliques: the GPUs behind host switch %s get none (x-nv-gpudirect-clique "
                 "takes 0 to 15)", group->host_switch);
            continue;
        }
        group->clique = next++;
        for (guint j = 0; j < group->items->len; j++) {
            guint i = g_array_index(group->items, guint, j);
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
            g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

            if (item->gpudirect && av_domain_user_clique(root, alias))
                note(topology, "GPUDirect cliques: %s keeps the " AV_GPUDIRECT_PROPERTY " the domain's own "
                     "<qemu:override> gives it", alias);
        }
    }
}

AvGuestTopology *
av_guest_topology_at(const xmlNode *root, const AvPlacement *placement, GError **error)
{
    g_autoptr(AvGuestTopology) topology = g_new0(AvGuestTopology, 1);
    g_autoptr(GArray) nodes = NULL;
    g_autofree char *refusal = NULL;
    gboolean want_cells, any_switch = FALSE;
    guint vcpus = 0;
    guint64 memory_kib = 0;

    topology->cells = g_ptr_array_new_with_free_func((GDestroyNotify)av_guest_cell_free);
    topology->groups = g_ptr_array_new_with_free_func((GDestroyNotify)av_guest_group_free);
    topology->notes = g_ptr_array_new_with_free_func(g_free);
    if (!av_domain_topology_find(av_domain_accelerators_find(root), &topology->request, error))
        return NULL;
    if (!placement->items)
        return g_steal_pointer(&topology);
    nodes = used_nodes(placement);
    for (guint i = 0; i < placement->items->len && !any_switch; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

        any_switch = item_is_pci(item) && item->switch_port && switch_count(placement, item->switch_port) >= 2;
    }
    want_cells = topology->request.guest_numa == AV_GUEST_NUMA_MIRROR ||
                 (topology->request.guest_numa == AV_GUEST_NUMA_AUTO && nodes->len >= 2);
    if (!av_domain_machine_is_q35(root)) {
        if (topology->request.guest_numa == AV_GUEST_NUMA_MIRROR) {
            av_domain_invalid_at(error, NULL, "<av:topology guest-numa='mirror'> cannot be honoured: the domain's "
                                 "machine is not q35 (no PCIe expander bus); use a q35 machine or write "
                                 "guest-numa='auto'");
            return NULL;
        }
        if ((any_switch && topology->request.switches) || want_cells)
            note(topology, "the PCIe and NUMA topology: the domain's machine is not q35 (i440fx has no PCIe "
                 "switch or expander bus)");
        return g_steal_pointer(&topology);
    }
    domain_size(root, &vcpus, &memory_kib);
    if (want_cells)
        refusal = cells_refusal(root, placement, nodes, vcpus, memory_kib, domain_page_kib(root));
    if (refusal && topology->request.guest_numa == AV_GUEST_NUMA_MIRROR) {
        av_domain_invalid_at(error, NULL, "<av:topology guest-numa='mirror'> cannot be honoured: %s; change that "
                             "or write guest-numa='auto'", refusal);
        return NULL;
    }
    if (refusal)
        note(topology, "guest NUMA: %s", refusal);
    else if (want_cells)
        cells_build(topology, placement, nodes, vcpus, memory_kib, domain_page_kib(root));
    groups_build(topology, placement);
    cliques_build(topology, root, placement);
    return g_steal_pointer(&topology);
}

AvGuestTopology *
av_guest_topology(const char *xml, gsize len, const AvPlacement *placement, GError **error)
{
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    AvGuestTopology *topology = NULL;
    gboolean changed = FALSE;

    g_return_val_if_fail(placement != NULL, NULL);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    /* what an earlier placement wrote is not the user's */
    if (root && av_domain_strip(root, &changed, error))
        topology = av_guest_topology_at(root, placement, error);
    xmlFreeDoc(doc);
    return topology;
}

/* ---- for people and for --json ---- */

/* "ua-accelvirt-N (ADDRESS)" of item @i. */
static char *
item_describe(const AvPlacement *placement, guint i)
{
    const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

    return g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u (%s)", i,
                           item->attach == AV_ATTACH_MDEV ? item->mdev_uuid : item->pci_address);
}

char *
av_guest_topology_describe(const AvGuestTopology *topology, const AvPlacement *placement)
{
    GString *s = g_string_new(NULL);

    if (topology->cells->len > 0) {
        g_string_append(s, "guest NUMA: ");
        for (guint c = 0; c < topology->cells->len; c++) {
            const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
            g_autofree char *v = av_domain_cpuset_format(cell->vcpus);

            g_string_append_printf(s, "%scell %u = host node %d (vCPUs %s, %" G_GUINT64_FORMAT " MiB)",
                                   c ? ", " : "", cell->id, cell->host_node, v, cell->memory_kib / 1024);
        }
        g_string_append_c(s, '\n');
    }
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        g_autofree char *where =
            group->cell >= 0 ? g_strdup_printf("under cell %d", group->cell) : g_strdup("on pcie-root");

        if (group->host_switch)
            g_string_append_printf(s, "guest switch %s mirrors host switch %s: ", where, group->host_switch);
        else
            g_string_append_printf(s, "guest root port %s: ", where);
        for (guint j = 0; j < group->items->len; j++) {
            g_autofree char *d = item_describe(placement, g_array_index(group->items, guint, j));

            g_string_append_printf(s, "%s%s", j ? ", " : "", d);
        }
        if (group->clique >= 0)
            g_string_append_printf(s, "; x-nv-gpudirect-clique %d", group->clique);
        g_string_append_c(s, '\n');
    }
    if (s->len == 0)
        g_string_append(s, "guest topology: as libvirt places it (nothing to mirror)\n");
    for (guint i = 0; i < topology->notes->len; i++)
        g_string_append_printf(s, "not mirrored: %s\n", (const char *)g_ptr_array_index(topology->notes, i));
    return g_string_free(s, FALSE);
}

json_t *
av_guest_topology_json(const AvGuestTopology *topology, const AvPlacement *placement)
{
    json_t *cells = json_array(), *groups = json_array(), *notes = json_array();

    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
        g_autofree char *v = av_domain_cpuset_format(cell->vcpus);

        json_array_append_new(cells, json_pack("{s:i, s:i, s:s, s:I}", "cell", (int)cell->id, "host_node",
                                               cell->host_node, "vcpus", v, "memory_kib",
                                               (json_int_t)cell->memory_kib));
    }
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        json_t *devices = json_array();

        for (guint j = 0; j < group->items->len; j++) {
            guint i = g_array_index(group->items, guint, j);
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
            g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

            json_array_append_new(devices, json_pack("{s:s, s:s?}", "alias", alias, "address",
                                                     item->attach == AV_ATTACH_MDEV ? item->mdev_uuid
                                                                                    : item->pci_address));
        }
        json_array_append_new(groups,
                              json_pack("{s:o, s:o, s:o, s:o}", "cell",
                                        group->cell >= 0 ? json_integer(group->cell) : json_null(), "host_switch",
                                        group->host_switch ? json_string(group->host_switch) : json_null(),
                                        "clique", group->clique >= 0 ? json_integer(group->clique) : json_null(),
                                        "devices", devices));
    }
    for (guint i = 0; i < topology->notes->len; i++)
        json_array_append_new(notes, json_string(g_ptr_array_index(topology->notes, i)));
    return json_pack("{s:o, s:o, s:o}", "cells", cells, "groups", groups, "notes", notes);
}
