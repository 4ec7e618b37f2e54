/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the domain rewrite (src/domain/av-rewrite.c).
 *
 * Golden files, libvirt's qemuxml2xml way: tests/xml/in/NAME.xml with the
 * placement that cases[] builds by hand for NAME must give
 * tests/xml/out/NAME.xml byte for byte; AV_TEST_REGENERATE=1 rewrites the
 * out files instead (read the diff before committing them).  Each golden
 * case also checks that a second rewrite changes nothing, that unplace gives
 * the input back, and that the metadata written follows
 * xml/accelvirt-domain.rng (and libvirt's own schema when it is installed).
 * Then the requests, malformed and hostile input. */
#include "config.h"

#include <string.h>

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/xmlsave.h>

#include "av-test.h"
#include "domain/av-rewrite.h"
#include "domain/av-topology.h"
#include "util/av-error.h"

#define LIBVIRT_DOMAIN_RNG "/usr/share/libvirt/schemas/domain.rng"

static const char policy_json[] =
    "{\"profiles\": ["
    " {\"name\": \"gpu-passthrough\", \"match\": {\"vendor\": \"0x10de\", \"class\": \"0x0302\"},"
    "  \"attach\": \"vfio-pci\", \"numa\": \"strict\", \"scrub\": [{\"method\": \"none\"}]},"
    " {\"name\": \"gpu-consumer\", \"match\": {\"vendor\": \"0x10de\", \"class\": \"0x0300\"},"
    "  \"attach\": \"vfio-pci\", \"numa\": \"preferred\", \"hide_hypervisor\": true, \"scrub\": [{\"method\": \"none\"}]},"
    " {\"name\": \"vgpu-a10\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2236\"},"
    "  \"attach\": \"mdev\", \"mdev_type\": \"nvidia-588\", \"scrub\": [{\"method\": \"none\"}]},"
    " {\"name\": \"fpga-function\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x0d90\"},"
    "  \"attach\": \"sriov-vf\", \"scrub\": [{\"method\": \"none\"}]},"
    " {\"name\": \"usb-ai-stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": \"0x2485\"},"
    "  \"attach\": \"usb\", \"numa\": \"none\", \"scrub\": [{\"method\": \"none\"}]},"
    " {\"name\": \"vca-netdev\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x10d3\"},"
    "  \"attach\": \"netdev\", \"numa\": \"none\", \"scrub\": [{\"method\": \"reset\"}]}"
    "]}";

static AvPolicy *test_policy;

/* ---- building placements by hand ---- */

static AvPlacement *
placement_new(int node, const guint *cpus, guint ncpus)
{
    AvPlacement *p = g_new0(AvPlacement, 1);

    p->numa_node = node;
    p->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    if (ncpus)
        g_array_append_vals(p->cpus, cpus, ncpus);
    p->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    p->warnings = g_ptr_array_new_with_free_func(g_free);
    return p;
}

static void
add_pci(AvPlacement *p, const char *profile, AvAttach attach, const char *address, int node)
{
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);

    item->profile = g_strdup(profile);
    item->attach = attach;
    item->identity = g_strdup_printf("pci-%s", address);
    item->pci_address = g_strdup(address);
    item->numa_node = node;
    g_ptr_array_add(p->items, item);
}

static void
add_mdev(AvPlacement *p, const char *profile, const char *parent, const char *uuid, int node)
{
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);

    item->profile = g_strdup(profile);
    item->attach = AV_ATTACH_MDEV;
    item->pci_address = g_strdup(parent);
    item->mdev_type = g_strdup("nvidia-588");
    item->mdev_uuid = g_strdup(uuid);
    item->numa_node = node;
    g_ptr_array_add(p->items, item);
}

static void
add_usb(AvPlacement *p, const char *profile, const char *bus_path, guint16 vendor, guint16 product)
{
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);

    item->profile = g_strdup(profile);
    item->attach = AV_ATTACH_USB;
    item->identity = g_strdup_printf("usb:%04x:%04x:serial:03e72485", vendor, product);
    item->usb_bus_path = g_strdup(bus_path);
    item->usb_vendor = vendor;
    item->usb_product = product;
    /* The tree's stick: bus 1, devnum 3. */
    item->usb_busnum = 1;
    item->usb_devnum = 3;
    item->numa_node = -1;
    g_ptr_array_add(p->items, item);
}

static const guint cpus_node0[] = { 0, 1, 2, 3 };
static const guint cpus_node1[] = { 11, 8, 9, 10, 40, 41, 42, 43 };

/* 1 GPU on node 1 of a 2-socket host (CPUs given out of order, the address
 * in upper case: both written canonical). */
static AvPlacement *
case_gpu_pinned(void)
{
    AvPlacement *p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:AF:00.0", 1);
    return p;
}

/* 2 GPUs on node 0, into a <cputune> the user wrote (<shares>). */
static AvPlacement *
case_two_gpus(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:18:00.0", 0);
    return p;
}

static AvPlacement *
case_mdev(void)
{
    AvPlacement *p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));

    add_mdev(p, "vgpu-a10", "0000:af:00.0", "6F2A0B1C-9D8E-4F7A-8B6C-5D4E3F2A1B0C", 1);
    add_mdev(p, "vgpu-a10", "0000:af:00.0", "00000000000000000000000000000002", 1);
    return p;
}

/* A USB stick: no NUMA node, so no pinning. */
static AvPlacement *
case_usb_stick(void)
{
    AvPlacement *p = placement_new(-1, NULL, 0);

    add_usb(p, "usb-ai-stick", "1-1.2", 0x03e7, 0x2485);
    return p;
}

/* Issue 34: an IP-over-PCIe card (an e1000e standing in), which the
 * domain gets as its host driver's interface: <interface type='direct'>
 * in mode passthrough, no pinning (no NUMA node). */
static AvPlacement *
case_netdev_card(void)
{
    AvPlacement *p = placement_new(-1, NULL, 0);
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);

    item->profile = g_strdup("vca-netdev");
    item->attach = AV_ATTACH_NETDEV;
    item->identity = g_strdup("pci:8086:10d3:addr:0000:45:00.0");
    item->pci_address = g_strdup("0000:45:00.0");
    item->netdev = g_strdup("enp69s0");
    item->numa_node = -1;
    item->vf_index = -1;
    g_ptr_array_add(p->items, item);
    return p;
}

/* hide_hypervisor into the user's <features> and <hyperv>. */
static AvPlacement *
case_hide_features(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-consumer", AV_ATTACH_VFIO_PCI, "0000:65:00.0", 0);
    return p;
}

/* hide_hypervisor into a domain without <features>, no NUMA node. */
static AvPlacement *
case_hide_new(void)
{
    AvPlacement *p = placement_new(-1, NULL, 0);

    add_pci(p, "gpu-consumer", AV_ATTACH_VFIO_PCI, "0000:65:00.0", -1);
    return p;
}

/* The user pinned vCPUs and set a numatune: both kept. */
static AvPlacement *
case_user_pinned(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    return p;
}

/* A domain Nova wrote: no request, returned byte for byte. */
static AvPlacement *
case_nova(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    return p;
}

/* A placed domain re-placed on node 1's GPUs: the user's own hostdev stays. */
static AvPlacement *
case_replace(void)
{
    AvPlacement *p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:b0:00.0", 1);
    return p;
}

/* 2 GPUs and an FPGA VF. */
static AvPlacement *
case_gpu_fpga(void)
{
    static const guint cpus[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33 };
    AvPlacement *p = placement_new(0, cpus, G_N_ELEMENTS(cpus));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:18:00.0", 0);
    add_pci(p, "fpga-function", AV_ATTACH_SRIOV_VF, "0000:3d:00.1", 0);
    return p;
}

#define TEST_SHA256 "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

/* A GPU, and two FPGA VFs whose request names a bitstream (issue 15): the
 * VFs' entries say the SHA-256 they must hold; the GPU's says none. */
static AvPlacement *
case_fpga_bitstream(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    add_pci(p, "fpga-function", AV_ATTACH_SRIOV_VF, "0000:3d:00.1", 0);
    add_pci(p, "fpga-function", AV_ATTACH_SRIOV_VF, "0000:3d:00.2", 0);
    for (guint i = 1; i < 3; i++)
        ((AvPlacedItem *)g_ptr_array_index(p->items, i))->bitstream = g_strdup(TEST_SHA256);
    return p;
}

/* 1 GPU on node 0 and two empty hot-plug root ports after the user's own
 * (index 3): indices 4 and 5. */
static AvPlacement *
case_hotplug_gpu(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    return p;
}

/* Only room to grow (q35: one root port; i440fx: none), nothing placed. */
static AvPlacement *
case_nothing(void)
{
    return placement_new(-1, NULL, 0);
}

/* ---- issue 16: the guest topology ---- */

/* A PCI device at its host PCIe position: behind the switch whose upstream
 * port is @sw (NULL: on a root port of its own), an NVIDIA GPU when
 * @gpudirect. */
static AvPlacedItem *
add_pci_at(AvPlacement *p, const char *profile, const char *address, int node, const char *sw, gboolean gpudirect)
{
    AvPlacedItem *item;

    add_pci(p, profile, strcmp(profile, "fpga-function") == 0 ? AV_ATTACH_SRIOV_VF : AV_ATTACH_VFIO_PCI, address,
            node);
    item = g_ptr_array_index(p->items, p->items->len - 1);
    item->root_port = g_strdup(sw ? "0000:00:01.0" : "0000:00:02.0");
    item->switch_port = g_strdup(sw);
    item->gpudirect = gpudirect;
    return item;
}

/* A host node of the placement with its CPUs. */
static void
add_node(AvPlacement *p, int id, const guint *cpus, guint n)
{
    AvPlacedNode *node = g_new0(AvPlacedNode, 1);

    if (!p->nodes)
        p->nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_node_free);
    node->id = id;
    node->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_array_append_vals(node->cpus, cpus, n);
    g_ptr_array_add(p->nodes, node);
}

/* One device of a topology case. */
typedef struct {
    const char *profile;
    const char *address;
    int node;
    const char *sw;              /* its host switch's upstream port, or NULL */
    gboolean gpudirect;
} TopoItem;

/* A placement of @n @items whose domain node is @node, with the host nodes
 * 0 and 1 of the tests (cpus_node0, cpus_node1) its items use. */
static AvPlacement *
topo_placement(int node, const TopoItem *items, guint n)
{
    AvPlacement *p = node == 1 ? placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1))
                               : placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));
    gboolean used[2] = { FALSE, FALSE };

    for (guint i = 0; i < n; i++) {
        add_pci_at(p, items[i].profile, items[i].address, items[i].node, items[i].sw, items[i].gpudirect);
        used[items[i].node == 1] = TRUE;
    }
    if (used[0])
        add_node(p, 0, cpus_node0, G_N_ELEMENTS(cpus_node0));
    if (used[1])
        add_node(p, 1, cpus_node1, G_N_ELEMENTS(cpus_node1));
    return p;
}

#define SW_A "0000:02:00.0"
#define SW_B "0000:22:00.0"

/* Two NVIDIA GPUs behind one host switch on node 0: no cells (one node,
 * auto), the switch on pcie-root, both GPUs in clique 0. */
static AvPlacement *
case_topo_switch(void)
{
    static const TopoItem items[] = {
        { "gpu-passthrough", "0000:03:00.0", 0, SW_A, TRUE },
        { "gpu-passthrough", "0000:04:00.0", 0, SW_A, TRUE },
    };

    return topo_placement(0, items, G_N_ELEMENTS(items));
}

/* Three FPGA functions, two behind a switch on node 0 and one on node 1:
 * two cells, two expander buses, the switch under cell 0 and a root port
 * under cell 1. */
static AvPlacement *
case_topo_two_cells(void)
{
    static const TopoItem items[] = {
        { "fpga-function", "0000:03:00.1", 0, SW_A, FALSE },
        { "fpga-function", "0000:04:00.1", 0, SW_A, FALSE },
        { "fpga-function", "0000:81:00.1", 1, NULL, FALSE },
    };

    return topo_placement(0, items, G_N_ELEMENTS(items));
}

/* guest-numa="mirror" on one node: one cell, each device on a root port
 * of its own under its expander bus, into the user's <cpu>. */
static AvPlacement *
case_topo_mirror(void)
{
    static const TopoItem items[] = {
        { "fpga-function", "0000:81:00.1", 1, NULL, FALSE },
        { "fpga-function", "0000:82:00.1", 1, NULL, FALSE },
    };

    return topo_placement(1, items, G_N_ELEMENTS(items));
}

/* Three GPUs: two NVIDIA ones behind a switch on node 0, one on node 1. */
static AvPlacement *
case_topo_gpus_two_nodes(void)
{
    static const TopoItem items[] = {
        { "gpu-passthrough", "0000:03:00.0", 0, SW_A, TRUE },
        { "gpu-passthrough", "0000:04:00.0", 0, SW_A, TRUE },
        { "gpu-passthrough", "0000:81:00.0", 1, NULL, TRUE },
    };

    return topo_placement(0, items, G_N_ELEMENTS(items));
}

/* Five NVIDIA GPUs on node 0: two behind switch A (clique 0), one alone
 * (none), two behind switch B (clique 1). */
static AvPlacement *
case_topo_cliques(void)
{
    static const TopoItem items[] = {
        { "gpu-passthrough", "0000:03:00.0", 0, SW_A, TRUE }, { "gpu-passthrough", "0000:04:00.0", 0, SW_A, TRUE },
        { "gpu-passthrough", "0000:17:00.0", 0, NULL, TRUE }, { "gpu-passthrough", "0000:23:00.0", 0, SW_B, TRUE },
        { "gpu-passthrough", "0000:24:00.0", 0, SW_B, TRUE },
    };

    return topo_placement(0, items, G_N_ELEMENTS(items));
}

/* Two FPGA functions on two nodes, no switch: two cells. */
static AvPlacement *
case_topo_memory_split(void)
{
    static const TopoItem items[] = {
        { "fpga-function", "0000:03:00.1", 0, NULL, FALSE },
        { "fpga-function", "0000:81:00.1", 1, NULL, FALSE },
    };

    return topo_placement(0, items, G_N_ELEMENTS(items));
}

/* @n devices, the first half on host node 0 and the rest on node 1 (all
 * on node 0 when !@two_nodes), @per_switch behind each host switch (0:
 * none), NVIDIA GPUs when @gpus, else FPGA functions. */
static AvPlacement *
topo_bulk(guint n, guint per_switch, gboolean two_nodes, gboolean gpus)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    for (guint i = 0; i < n; i++) {
        g_autofree char *address = g_strdup_printf("0000:%02x:%02x.%u", 0x40 + i / 32, i % 32, gpus ? 0 : 1);
        g_autofree char *sw = per_switch ? g_strdup_printf("0000:%02x:00.0", 0x10 + i / per_switch) : NULL;
        int node = two_nodes && i >= n / 2 ? 1 : 0;

        add_pci_at(p, gpus ? "gpu-passthrough" : "fpga-function", address, node, sw, gpus);
    }
    add_node(p, 0, cpus_node0, G_N_ELEMENTS(cpus_node0));
    if (two_nodes)
        add_node(p, 1, cpus_node1, G_N_ELEMENTS(cpus_node1));
    return p;
}

/* 40 NVIDIA GPUs behind one host switch: two guest switches (32 and 8
 * downstream ports), one clique. */
static AvPlacement *
case_topo_switch_40(void)
{
    return topo_bulk(40, 40, FALSE, TRUE);
}

/* guest-numa="mirror", 33 devices alone on node 0: root ports on slots
 * 0x00-0x1f of the expander bus, the 33rd on function 1 of slot 0. */
static AvPlacement *
case_topo_mirror_33(void)
{
    return topo_bulk(33, 0, FALSE, FALSE);
}

/* 64 devices on two nodes behind 32 two-device switches: 130 controllers,
 * 2 + 128 bus numbers behind the expander buses, room enough. */
static AvPlacement *
case_topo_many_switches(void)
{
    return topo_bulk(64, 2, TRUE, FALSE);
}

typedef struct {
    const char *name;
    AvPlacement *(*placement)(void);
    gboolean unchanged;          /* out is in, byte for byte */
    gboolean restores;           /* unplace(out) is in (as libxml2 writes it) */
} Case;

static const Case cases[] = {
    { "gpu-pinned", case_gpu_pinned, FALSE, TRUE },
    { "two-gpus", case_two_gpus, FALSE, TRUE },
    { "mdev", case_mdev, FALSE, TRUE },
    { "usb-stick", case_usb_stick, FALSE, TRUE },
    { "netdev-card", case_netdev_card, FALSE, TRUE },
    { "hide-features", case_hide_features, FALSE, TRUE },
    { "hide-new", case_hide_new, FALSE, TRUE },
    { "user-pinned", case_user_pinned, FALSE, TRUE },
    { "nova", case_nova, TRUE, TRUE },
    { "replace", case_replace, FALSE, FALSE },
    { "gpu-fpga", case_gpu_fpga, FALSE, TRUE },
    { "hotplug-gpu", case_hotplug_gpu, FALSE, TRUE },
    { "hotplug-only", case_nothing, FALSE, TRUE },
    { "hotplug-pc", case_nothing, FALSE, TRUE },
    { "fpga-bitstream", case_fpga_bitstream, FALSE, TRUE },
    { "topo-switch", case_topo_switch, FALSE, TRUE },
    { "topo-two-cells", case_topo_two_cells, FALSE, TRUE },
    { "topo-mirror", case_topo_mirror, FALSE, TRUE },
    { "topo-numa-off", case_topo_two_cells, FALSE, TRUE },
    { "topo-switches-off", case_topo_gpus_two_nodes, FALSE, TRUE },
    { "topo-cliques", case_topo_cliques, FALSE, TRUE },
    { "topo-gpudirect-off", case_topo_cliques, FALSE, TRUE },
    { "topo-pc", case_topo_gpus_two_nodes, FALSE, TRUE },
    { "topo-user-numa", case_topo_two_cells, FALSE, TRUE },
    { "topo-memory-split", case_topo_memory_split, FALSE, TRUE },
    { "topo-hotplug", case_topo_two_cells, FALSE, TRUE },
    { "topo-few-vcpus", case_topo_two_cells, FALSE, TRUE },
    { "topo-switch-40", case_topo_switch_40, FALSE, TRUE },
    { "topo-mirror-33", case_topo_mirror_33, FALSE, TRUE },
    { "topo-many-switches", case_topo_many_switches, FALSE, TRUE },
    { "topo-bus-clash", case_topo_two_cells, FALSE, TRUE },
    { "topo-user-pxb", case_topo_two_cells, FALSE, TRUE },
    { "topo-user-clique", case_topo_cliques, FALSE, TRUE },
    { "topo-user-clique-off", case_topo_cliques, FALSE, TRUE },
    { "topo-hugepages", case_topo_memory_split, FALSE, TRUE },
    { "topo-empty-tune", case_topo_two_cells, FALSE, TRUE },
};

/* ---- helpers ---- */

static char *
read_src(const char *rel, gsize *ret_len)
{
    g_autofree char *path = av_test_srcdir_path(rel);
    g_autoptr(GError) err = NULL;
    char *data = NULL;

    g_file_get_contents(path, &data, ret_len, &err);
    g_assert_no_error(err);
    return data;
}

static char *
schema_path(void)
{
    return av_test_srcdir_path("../xml/accelvirt-domain.rng");
}

/* @xml as libxml2 writes it back (double quotes, <x/>): what an unplace of a
 * rewrite gives. */
static char *
roundtrip(const char *xml)
{
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), NULL, NULL, XML_PARSE_NONET);
    xmlBufferPtr buf = xmlBufferCreate();
    xmlSaveCtxtPtr save = xmlSaveToBuffer(buf, "UTF-8", g_str_has_prefix(xml, "<?xml") ? 0 : XML_SAVE_NO_DECL);
    char *out;

    g_assert_nonnull(doc);
    xmlSaveDoc(save, doc);
    xmlSaveClose(save);
    out = g_strndup((const char *)xmlBufferContent(buf), (gsize)xmlBufferLength(buf));
    xmlBufferFree(buf);
    xmlFreeDoc(doc);
    return out;
}

static void
assert_same(const char *what, const char *expected, const char *actual)
{
    if (strcmp(expected, actual) != 0)
        g_error("%s differs:\n--- expected\n%s\n--- actual\n%s", what, expected, actual);
}

/* Validates @xml against libvirt's installed domain schema; FALSE (and a
 * message) when libvirt's schemas are not installed. */
static gboolean
libvirt_validate(const char *name, const char *xml)
{
    xmlRelaxNGParserCtxtPtr pctxt;
    xmlRelaxNGPtr schema;
    xmlRelaxNGValidCtxtPtr vctxt;
    xmlDocPtr doc;
    int rc;

    if (!g_file_test(LIBVIRT_DOMAIN_RNG, G_FILE_TEST_EXISTS))
        return FALSE;
    pctxt = xmlRelaxNGNewParserCtxt(LIBVIRT_DOMAIN_RNG);
    schema = xmlRelaxNGParse(pctxt);
    g_assert_nonnull(schema);
    doc = xmlReadMemory(xml, (int)strlen(xml), NULL, NULL, XML_PARSE_NONET);
    g_assert_nonnull(doc);
    vctxt = xmlRelaxNGNewValidCtxt(schema);
    rc = xmlRelaxNGValidateDoc(vctxt, doc);
    if (rc != 0)
        g_error("%s: libvirt's %s refuses the rewritten domain", name, LIBVIRT_DOMAIN_RNG);
    xmlRelaxNGFreeValidCtxt(vctxt);
    xmlFreeDoc(doc);
    xmlRelaxNGFree(schema);
    xmlRelaxNGFreeParserCtxt(pctxt);
    return TRUE;
}

/* ---- golden cases ---- */

static void
test_golden(gconstpointer data)
{
    const Case *c = data;
    g_autofree char *in_rel = g_strdup_printf("xml/in/%s.xml", c->name);
    g_autofree char *out_rel = g_strdup_printf("xml/out/%s.xml", c->name);
    g_autofree char *in = NULL, *expected = NULL, *out = NULL, *again = NULL, *unplaced = NULL;
    g_autofree char *schema = schema_path();
    g_autoptr(AvPlacement) placement = c->placement();
    g_autoptr(GError) err = NULL;
    gsize in_len = 0, expected_len = 0;

    in = read_src(in_rel, &in_len);
    out = av_domain_rewrite(in, in_len, placement, test_policy, &err);
    g_assert_no_error(err);
    g_assert_nonnull(out);

    if (g_strcmp0(g_getenv("AV_TEST_REGENERATE"), "1") == 0) {
        g_autofree char *path = av_test_srcdir_path(out_rel);

        g_file_set_contents(path, out, -1, &err);
        g_assert_no_error(err);
        g_test_message("regenerated %s", path);
    }
    expected = read_src(out_rel, &expected_len);
    assert_same(out_rel, expected, out);
    if (c->unchanged)
        assert_same("the domain accelvirt has nothing to do with", in, out);

    /* idempotent */
    again = av_domain_rewrite(out, strlen(out), placement, test_policy, &err);
    g_assert_no_error(err);
    assert_same("a second rewrite", out, again);

    /* unplace gives the input back */
    unplaced = av_domain_unplace(out, strlen(out), &err);
    g_assert_no_error(err);
    if (c->unchanged) {
        assert_same("unplace", in, unplaced);
    } else if (c->restores) {
        g_autofree char *normal = roundtrip(in);

        assert_same("unplace of the rewrite", normal, unplaced);
    } else {
        g_assert_null(strstr(unplaced, "\"ua-accelvirt-0\""));
        g_assert_null(strstr(unplaced, "\"ua-accelvirt-1\""));
        /* a device `accelvirt attach --persistent` put there stays */
        g_assert_nonnull(strstr(unplaced, "\"ua-accelvirt-0000-65-00-0\""));
        g_assert_null(strstr(unplaced, "av:placement"));
        g_assert_null(strstr(unplaced, "vcpupin"));
        g_assert_nonnull(strstr(unplaced, "ua-users-nic"));
        g_assert_nonnull(strstr(unplaced, "<shares>1024</shares>"));
    }
    /* unplace twice is unplace once */
    {
        g_autofree char *twice = av_domain_unplace(unplaced, strlen(unplaced), &err);

        g_assert_no_error(err);
        assert_same("a second unplace", unplaced, twice);
    }

    /* the schemas */
    g_assert_true(av_domain_validate_metadata(out, strlen(out), schema, &err));
    g_assert_no_error(err);
    if (!libvirt_validate(c->name, out))
        g_test_message("libvirt's schemas are not installed: not checked against them");
}

/* av_domain_hotplug_fill() on a q35 domain as libvirt defined it: its
 * xHCI, which had no address, went into the first of the two ports a
 * rewrite reserved (bus 0x01); one more port, the next index and alias,
 * makes two empty again; a second fill adds none.  A port a device sits
 * behind is kept by a rewrite; i440fx gets none. */
static void
test_hotplug_fill(void)
{
    static const char defined[] =
        "<domain type='kvm'>\n"
        "  <name>hp</name>\n"
        "  <metadata>\n"
        "    <av:accelerators xmlns:av=\"urn:accelvirt:domain:1\">\n"
        "      <av:hotplug slots=\"2\"/>\n"
        "    </av:accelerators>\n"
        "  </metadata>\n"
        "  <os>\n"
        "    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>\n"
        "  </os>\n"
        "  <devices>\n"
        "    <controller type='usb' index='0' model='qemu-xhci'>\n"
        "      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>\n"
        "    </controller>\n"
        "    <controller type='pci' index='0' model='pcie-root'/>\n"
        "    <controller type='pci' index='1' model='pcie-root-port'>\n"
        "      <alias name='ua-accelvirt-hotplug0'/>\n"
        "      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x0'/>\n"
        "    </controller>\n"
        "    <controller type='pci' index='2' model='pcie-root-port'>\n"
        "      <alias name='ua-accelvirt-hotplug1'/>\n"
        "      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x1'/>\n"
        "    </controller>\n"
        "  </devices>\n"
        "</domain>\n";
    g_autoptr(GError) err = NULL;
    g_autofree char *filled = NULL;
    g_autofree char *again = NULL;
    g_autofree char *unplaced = NULL;
    g_autofree char *pc = NULL;
    g_autofree char *pc_filled = NULL;
    guint added = 99;

    filled = av_domain_hotplug_fill(defined, strlen(defined), &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 1);
    g_assert_nonnull(strstr(filled, "<controller type=\"pci\" index=\"3\" model=\"pcie-root-port\">\n"
                                    "      <alias name=\"ua-accelvirt-hotplug2\"/>"));
    again = av_domain_hotplug_fill(filled, strlen(filled), &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 0);
    assert_same("a second fill", filled, again);
    /* unplace: the empty ports go, the one the xHCI sits behind stays */
    unplaced = av_domain_unplace(filled, strlen(filled), &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(unplaced, "ua-accelvirt-hotplug0"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-hotplug1"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-hotplug2"));
    /* i440fx: nothing to add */
    pc = g_strdup(defined);
    memcpy(strstr(pc, "pc-q35-7.2"), "pc-i440fx", strlen("pc-i440fx"));
    pc_filled = av_domain_hotplug_fill(pc, strlen(pc), &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 0);
    assert_same("i440fx", pc, pc_filled);
}

/* The hot-plug ports take indexes above every bus a device's address
 * names (bus='0x05', no controller 5 written: libvirt adds it) and every
 * index as libvirt reads it (index='02'). */
static void
test_hotplug_fill_buses(void)
{
    static const char defined[] =
        "<domain type='kvm'><name>hp</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
        "<av:hotplug slots='1'/></av:accelerators></metadata><os><type machine='pc-q35-7.2'>hvm</type></os>"
        "<devices><controller type='pci' index='0' model='pcie-root'/>"
        "<controller type='pci' index='02' model='pcie-to-pci-bridge'/><interface type='network'>"
        "<source network='default'/><address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>"
        "</interface></devices></domain>";
    g_autoptr(GError) err = NULL;
    g_autofree char *filled = NULL;
    guint added = 0;

    filled = av_domain_hotplug_fill(defined, strlen(defined), &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 1);
    g_assert_nonnull(strstr(filled, "<controller type=\"pci\" index=\"6\" model=\"pcie-root-port\">"));
}

/* Specific facts of some golden outputs, so that a regenerated file that
 * lost them fails. */
static void
test_golden_facts(void)
{
    struct {
        const char *name;
        const char *present[7];
        const char *absent[3];
    } facts[] = {
        { "gpu-pinned",
          { "managed=\"no\"", "bus=\"0xaf\"", "cpuset=\"8-11,40-43\"", "nodeset=\"1\"", "pinned=\"yes\"",
            "<vcpupin vcpu=\"3\"" },
          { "vcpu=\"4\"", "<kvm>", NULL } },
        { "user-pinned",
          { "pinned=\"no\"", "numatune=\"no\"", "cpuset=\"2\"", "mode=\"preferred\"", NULL },
          { "0-3", NULL } },
        { "hide-features",
          { "<hidden state=\"on\"/>", "<vendor_id state=\"on\" value=\"accelvirt\"/>", "hidden=\"yes\"",
            "vendor-id=\"yes\"", "<relaxed state=\"on\"/>", NULL },
          { NULL } },
        { "usb-stick",
          { "type=\"usb\"", "<vendor id=\"0x03e7\"/>", "<product id=\"0x2485\"/>", "bus-path=\"1-1.2\"",
            "pinned=\"no\"", "<address bus=\"1\" device=\"3\"/>", "identity=\"usb:03e7:2485:serial:03e72485\"" },
          { "cputune", "numatune>", NULL } },
        { "mdev",
          { "type=\"mdev\"", "model=\"vfio-pci\"", "uuid=\"6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c\"",
            "uuid=\"00000000-0000-0000-0000-000000000002\"", "ua-accelvirt-1", NULL },
          { NULL } },
        { "replace",
          { "bus=\"0xaf\"", "bus=\"0xb0\"", "ua-users-nic", "node=\"1\"", NULL },
          { "bus=\"0x17\"", "bus=\"0x18\"", NULL } },
        { "fpga-bitstream",
          { "<av:request profile=\"fpga-function\" count=\"2\" bitstream=\"resnet50-int8\"/>",
            "address=\"0000:3d:00.1\" bitstream=\"" TEST_SHA256 "\" alias=\"ua-accelvirt-1\"",
            "address=\"0000:3d:00.2\" bitstream=\"" TEST_SHA256 "\" alias=\"ua-accelvirt-2\"",
            "address=\"0000:17:00.0\" alias=\"ua-accelvirt-0\"", NULL },
          { NULL } },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(facts); i++) {
        g_autofree char *rel = g_strdup_printf("xml/out/%s.xml", facts[i].name);
        g_autofree char *out = read_src(rel, NULL);

        for (gsize j = 0; j < G_N_ELEMENTS(facts[i].present) && facts[i].present[j]; j++) {
            if (!strstr(out, facts[i].present[j]))
                g_error("%s lacks '%s'", rel, facts[i].present[j]);
        }
        for (gsize j = 0; j < G_N_ELEMENTS(facts[i].absent) && facts[i].absent[j]; j++) {
            if (strstr(out, facts[i].absent[j]))
                g_error("%s holds '%s'", rel, facts[i].absent[j]);
        }
    }
}

/* The user's own <kvm><hidden state='off'/>: kept, not duplicated, and the
 * placement says accelvirt wrote neither. */
static void
test_hide_user_choice(void)
{
    static const char xml[] =
        "<domain type='kvm'>\n  <name>d</name>\n  <metadata>\n"
        "    <av:accelerators xmlns:av=\"urn:accelvirt:domain:1\">\n"
        "      <av:request profile=\"gpu-consumer\"/>\n    </av:accelerators>\n  </metadata>\n"
        "  <features>\n    <hyperv mode='passthrough'/>\n    <kvm>\n      <hidden state='off'/>\n    </kvm>\n"
        "  </features>\n  <devices/>\n</domain>\n";
    g_autoptr(AvPlacement) p = case_hide_new();
    g_autoptr(GError) err = NULL;
    g_autofree char *out = av_domain_rewrite(xml, strlen(xml), p, test_policy, &err);
    g_autofree char *unplaced = NULL, *normal = roundtrip(xml);

    g_assert_no_error(err);
    g_assert_nonnull(strstr(out, "<hidden state=\"off\"/>"));
    g_assert_null(strstr(out, "state=\"on\""));
    g_assert_null(strstr(out, "vendor_id"));
    g_assert_nonnull(strstr(out, "hidden=\"no\" vendor-id=\"no\""));
    g_assert_nonnull(strstr(out, "<devices>\n    <hostdev"));
    unplaced = av_domain_unplace(out, strlen(out), &err);
    g_assert_no_error(err);
    assert_same("unplace", normal, unplaced);
}

/* A domain with requests but nothing placed: only the placement element. */
static void
test_empty_placement(void)
{
    g_autofree char *in = read_src("xml/in/two-gpus.xml", NULL);
    g_autoptr(AvPlacement) p = placement_new(-1, NULL, 0);
    g_autoptr(GError) err = NULL;
    g_autofree char *out = av_domain_rewrite(in, strlen(in), p, test_policy, &err);

    g_assert_no_error(err);
    g_assert_nonnull(strstr(out, "<av:placement pinned=\"no\" numatune=\"no\" hidden=\"no\" vendor-id=\"no\"/>"));
    g_assert_null(strstr(out, "hostdev"));
}

/* Issue 15: the bitstream of a placed device, read back by the placement
 * reader (the hook's remap) and the domain parser (AvPlacedDevice), moved
 * by a remap, refused when it is no SHA-256. */
static void
test_bitstream_placement(void)
{
    g_autofree char *in = read_src("xml/in/fpga-bitstream.xml", NULL);
    g_autoptr(AvPlacement) p = case_fpga_bitstream();
    g_autoptr(AvPlacement) back = NULL;
    g_autoptr(AvPlacement) other = case_fpga_bitstream();
    g_autoptr(AvDomain) dom = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *out = av_domain_rewrite(in, strlen(in), p, test_policy, &err);
    g_autofree char *moved = NULL, *bad = NULL;
    static const char other_sha[] = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    g_assert_no_error(err);
    back = av_domain_placement(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpuint(back->items->len, ==, 3);
    g_assert_null(((AvPlacedItem *)g_ptr_array_index(back->items, 0))->bitstream);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(back->items, 1))->bitstream, ==, TEST_SHA256);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(back->items, 2))->bitstream, ==, TEST_SHA256);
    dom = av_domain_parse(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpuint(dom->placed->len, ==, 3);
    g_assert_null(((AvPlacedDevice *)g_ptr_array_index(dom->placed, 0))->bitstream);
    g_assert_cmpstr(((AvPlacedDevice *)g_ptr_array_index(dom->placed, 2))->bitstream, ==, TEST_SHA256);

    /* a remap to a placement whose second VF holds another bitstream, the first none */
    g_free(((AvPlacedItem *)g_ptr_array_index(other->items, 2))->bitstream);
    ((AvPlacedItem *)g_ptr_array_index(other->items, 2))->bitstream = g_strdup(other_sha);
    g_clear_pointer(&((AvPlacedItem *)g_ptr_array_index(other->items, 1))->bitstream, g_free);
    moved = av_domain_remap(out, strlen(out), other, &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(moved, other_sha));
    g_assert_null(strstr(moved, TEST_SHA256));

    /* a bitstream that is no SHA-256: both readers refuse */
    bad = g_strdup(out);
    memcpy(strstr(bad, TEST_SHA256), "9F86", 4);
    g_clear_pointer(&back, av_placement_free);
    back = av_domain_placement(bad, strlen(bad), &err);
    g_assert_null(back);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "not a SHA-256"));
    g_clear_error(&err);
    g_clear_pointer(&dom, av_domain_free);
    dom = av_domain_parse(bad, strlen(bad), &err);
    g_assert_null(dom);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "bitstream '9F86"));
    g_clear_error(&err);
}

/* ---- requests ---- */

static void
test_requests(void)
{
    g_autofree char *xml = read_src("xml/in/gpu-fpga.xml", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) requests = av_domain_requests(xml, strlen(xml), &err);
    const AvRequest *r;

    g_assert_no_error(err);
    g_assert_cmpuint(requests->len, ==, 2);
    r = g_ptr_array_index(requests, 0);
    g_assert_cmpstr(r->profile, ==, "gpu-passthrough");
    g_assert_cmpuint(r->count, ==, 2);
    g_assert_false(r->granularity_set);
    g_assert_false(r->numa_any);
    r = g_ptr_array_index(requests, 1);
    g_assert_cmpstr(r->profile, ==, "fpga-function");
    g_assert_cmpuint(r->count, ==, 1);

    {
        static const char more[] =
            "<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='fpga-region' granularity='region' numa='any'/>"
            "<av:request profile='gpu' count='64' granularity='card'/>"
            "</av:accelerators></metadata></domain>";
        g_autoptr(GPtrArray) rs = av_domain_requests(more, strlen(more), &err);

        g_assert_no_error(err);
        g_assert_cmpuint(rs->len, ==, 2);
        r = g_ptr_array_index(rs, 0);
        g_assert_cmpuint(r->count, ==, 1);
        g_assert_true(r->granularity_set);
        g_assert_cmpint(r->granularity, ==, AV_GRANULARITY_REGION);
        g_assert_true(r->numa_any);
        r = g_ptr_array_index(rs, 1);
        g_assert_cmpuint(r->count, ==, 64);
        g_assert_cmpint(r->granularity, ==, AV_GRANULARITY_CARD);
    }
    {
        /* issue 15: a bitstream by name or by SHA-256, kept as written; nothing resolved yet */
        static const char bitstreams[] =
            "<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='fpga' bitstream='resnet50-int8'/>"
            "<av:request profile='fpga' bitstream='" TEST_SHA256 "'/>"
            "<av:request profile='fpga'/>"
            "</av:accelerators></metadata></domain>";
        g_autoptr(GPtrArray) rs = av_domain_requests(bitstreams, strlen(bitstreams), &err);

        g_assert_no_error(err);
        g_assert_cmpuint(rs->len, ==, 3);
        r = g_ptr_array_index(rs, 0);
        g_assert_cmpstr(r->bitstream, ==, "resnet50-int8");
        g_assert_null(r->bitstream_sha256);
        r = g_ptr_array_index(rs, 1);
        g_assert_cmpstr(r->bitstream, ==, TEST_SHA256);
        g_assert_null(r->bitstream_sha256);
        r = g_ptr_array_index(rs, 2);
        g_assert_null(r->bitstream);
    }
    {
        g_autofree char *nova = read_src("xml/in/nova.xml", NULL);
        g_autoptr(GPtrArray) none = av_domain_requests(nova, strlen(nova), &err);

        g_assert_no_error(err);
        g_assert_cmpuint(none->len, ==, 0);
    }
}

static void
expect_words(const GError *err, const char *const *words)
{
    for (const char *p = err->message; *p; p++)
        g_assert_cmpint((guchar)*p, >=, 0x20);
    g_assert_cmpuint(strlen(err->message), <, 600);
    for (; *words; words++) {
        if (!strstr(err->message, *words))
            g_error("'%s' is not in the message '%s'", *words, err->message);
    }
}

static void
test_requests_malformed(void)
{
    static const struct {
        const char *request;
        const char *words[4];
    } bad[] = {
        { "<av:request profile='gpu' count='0'/>", { "count '0'", "between 1 and 64", "line 3", NULL } },
        { "<av:request profile='gpu' count='65'/>", { "count '65'", "between 1 and 64", NULL } },
        { "<av:request profile='gpu' count='010'/>", { "count '010'", NULL } },
        { "<av:request profile='gpu' count='-1'/>", { "count '-1'", NULL } },
        { "<av:request profile='gpu' numa='near'/>", { "numa 'near'", "'same'", "'any'", NULL } },
        { "<av:request profile='gpu' granularity='rack'/>", { "granularity 'rack'", "'card'", NULL } },
        { "<av:request profile='Bad Profile!'/>", { "profile 'Bad Profile!'", "not a profile name", NULL } },
        { "<av:request count='1'/>", { "has no profile", NULL } },
        { "<av:request profile='gpu' cuont='2'/>", { "unknown attribute 'cuont'", NULL } },
        { "<av:request profile='fpga' bitstream='My Image'/>", { "bitstream 'My Image'", "names no bitstream", NULL } },
        { "<av:request profile='fpga' bitstream=''/>", { "bitstream ''", NULL } },
        { "<av:request profile='fpga' bitstream='../../etc/shadow'/>", { "bitstream '../../etc/shadow'", NULL } },
        { "<av:request profile='fpga' bitstream='9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08'/>",
          { "names no bitstream", NULL } },
        { "<av:requets profile='gpu'/>", { "unknown element <requets>", NULL } },
        { "<av:hotplug slots='0'/>", { "slots='0'", "from 1 to 16", NULL } },
        { "<av:hotplug slots='17'/>", { "slots='17'", "from 1 to 16", NULL } },
        { "<av:hotplug slots='two'/>", { "slots='two'", NULL } },
        { "<av:hotplug/>", { "hot-plug slots", NULL } },
        { "<av:hotplug slots='1' bus='pcie'/>", { "unknown attribute 'bus'", NULL } },
        { "<av:hotplug slots='1'/><av:hotplug slots='2'/>", { "more than one <av:hotplug>", NULL } },
    };
    g_autoptr(AvPlacement) p = placement_new(-1, NULL, 0);

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'>\n<name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>\n"
            "%s</av:accelerators></metadata></domain>\n",
            bad[i].request);
        g_autoptr(GError) err = NULL;
        g_autoptr(GError) err2 = NULL;
        g_autoptr(GPtrArray) rs = av_domain_requests(xml, strlen(xml), &err);
        g_autofree char *out = av_domain_rewrite(xml, strlen(xml), p, test_policy, &err2);

        g_assert_null(rs);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_test_message("refused: %s", err->message);
        expect_words(err, bad[i].words);
        g_assert_null(out);
        g_assert_error(err2, AV_ERROR, AV_ERROR_INVALID_INPUT);
    }
    {
        GString *many = g_string_new("<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>");
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        g_autoptr(GPtrArray) rs = NULL;

        for (guint i = 0; i <= AV_REQUESTS_MAX; i++)
            g_string_append(many, "<av:request profile='gpu'/>");
        g_string_append(many, "</av:accelerators></metadata></domain>");
        xml = g_string_free(many, FALSE);
        rs = av_domain_requests(xml, strlen(xml), &err);
        g_assert_null(rs);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "more than 64 requests"));
    }
}

/* ---- hostile input ---- */

static void
expect_all_refuse(const char *xml, gsize len, const char *word)
{
    g_autoptr(AvPlacement) p = case_two_gpus();
    g_autofree char *schema = schema_path();
    GError *err = NULL;
    gpointer r;

    r = av_domain_requests(xml, len, &err);
    g_assert_null(r);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, word));
    g_clear_error(&err);
    r = av_domain_rewrite(xml, len, p, test_policy, &err);
    g_assert_null(r);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, word));
    g_clear_error(&err);
    r = av_domain_unplace(xml, len, &err);
    g_assert_null(r);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, word));
    g_clear_error(&err);
    g_assert_false(av_domain_validate_metadata(xml, len, schema, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, word));
    g_clear_error(&err);
}

static void
test_hostile(void)
{
    static const char laughs[] =
        "<?xml version='1.0'?>\n<!DOCTYPE domain [\n <!ENTITY a 'aaaaaaaaaa'>\n <!ENTITY b '&a;&a;&a;&a;&a;&a;'>\n]>\n"
        "<domain><name>&b;</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
        "<av:request profile='gpu-passthrough'/></av:accelerators></metadata></domain>\n";
    static const char xxe[] =
        "<!DOCTYPE domain SYSTEM 'file:///etc/shadow'><domain><name>d</name></domain>";
    static const char broken[] = "<domain><name>d</name>";
    static const char other[] = "<network><name>d</name></network>";
    gsize big_len = AV_DOMAIN_XML_MAX + 1;
    g_autofree char *big = g_malloc(big_len);

    expect_all_refuse(laughs, strlen(laughs), "DOCTYPE");
    expect_all_refuse(xxe, strlen(xxe), "DOCTYPE");
    expect_all_refuse(broken, strlen(broken), "does not parse");
    expect_all_refuse(other, strlen(other), "not <domain>");
    expect_all_refuse("", 0, "empty");
    /* refused on its size, before libxml2 reads a byte of it */
    memset(big, ' ', big_len);
    memcpy(big, "<domain>", 8);
    expect_all_refuse(big, big_len, "more than");
}

/* ---- placements the rewrite refuses ---- */

static void
test_placement_invalid(void)
{
    g_autofree char *in = read_src("xml/in/two-gpus.xml", NULL);
    struct {
        const char *profile;
        AvAttach attach;
        const char *address;
        const char *word;
    } bad[] = {
        { "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0/../../x", "PCI address" },
        { "gpu-passthrough", AV_ATTACH_VFIO_PCI, NULL, "PCI address" },
        { "fpga-function", AV_ATTACH_SRIOV_VF, "0000:3d:00.1", "no av:request" },
        { "gpu-passthrough", AV_ATTACH_MDEV, NULL, "UUID" },
        { "gpu-passthrough", AV_ATTACH_USB, NULL, "bus path" },
        /* issue 15: a bitstream on a PCI device only, and a SHA-256 */
        { "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", "bitstream 'resnet50-int8'" },
        { "gpu-passthrough", AV_ATTACH_MDEV, "00000000-0000-4000-8000-000000000001", "bitstream '" TEST_SHA256 "'" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(AvPlacement) p = placement_new(-1, NULL, 0);
        g_autoptr(GError) err = NULL;
        g_autofree char *out = NULL;

        add_pci(p, bad[i].profile, bad[i].attach, bad[i].address, -1);
        if (strstr(bad[i].word, "bitstream")) {
            AvPlacedItem *item = g_ptr_array_index(p->items, 0);

            item->bitstream = g_strdup(strstr(bad[i].word, "resnet") ? "resnet50-int8" : TEST_SHA256);
            if (item->attach == AV_ATTACH_MDEV)
                item->mdev_uuid = g_strdup(bad[i].address);
        }
        out = av_domain_rewrite(in, strlen(in), p, test_policy, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_test_message("refused: %s", err->message);
        g_assert_nonnull(strstr(err->message, bad[i].word));
    }
    {
        /* a profile the policy does not have */
        g_autoptr(AvPolicy) empty = av_policy_new();
        g_autoptr(AvPlacement) p = case_two_gpus();
        g_autoptr(GError) err = NULL;
        g_autofree char *out = av_domain_rewrite(in, strlen(in), p, empty, &err);

        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "not in the policy"));
    }
    {
        /* a node without CPUs */
        g_autoptr(AvPlacement) p = placement_new(0, NULL, 0);
        g_autoptr(GError) err = NULL;
        g_autofree char *out = av_domain_rewrite(in, strlen(in), p, test_policy, &err);

        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "no CPU"));
    }
    {
        /* an earlier placement with a flag accelvirt never writes */
        static const char xml[] =
            "<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='gpu-passthrough'/><av:placement pinned='maybe'/>"
            "</av:accelerators></metadata></domain>";
        g_autoptr(GError) err = NULL;
        g_autofree char *out = av_domain_unplace(xml, strlen(xml), &err);

        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "pinned 'maybe'"));
    }
}

/* ---- the schema ---- */

static void
test_schema_examples(void)
{
    static const char *const examples[] = { "gpu-passthrough.xml", "vgpu-mdev.xml", "usb-stick.xml", "gpu-fpga.xml",
                                            "fpga-bitstream.xml", "gpu-p2p.xml" };
    g_autofree char *schema = schema_path();

    for (gsize i = 0; i < G_N_ELEMENTS(examples); i++) {
        g_autofree char *rel = g_strdup_printf("../xml/examples/%s", examples[i]);
        g_autofree char *xml = read_src(rel, NULL);
        g_autoptr(GError) err = NULL;
        g_autoptr(GPtrArray) requests = NULL;

        if (!av_domain_validate_metadata(xml, strlen(xml), schema, &err))
            g_error("%s: %s", examples[i], err->message);
        requests = av_domain_requests(xml, strlen(xml), &err);
        g_assert_no_error(err);
        g_assert_cmpuint(requests->len, >=, 1);
        if (!libvirt_validate(examples[i], xml))
            g_test_message("libvirt's schemas are not installed: not checked against them");
    }
}

static void
test_schema_invalid(void)
{
    static const struct {
        const char *inner;
        const char *word;
    } bad[] = {
        { "<av:request profile='gpu' count='65'/>", "line 4" },
        { "<av:request profile='gpu' count='0'/>", "request" },
        { "<av:request profile='gpu' numa='near'/>", "request" },
        { "<av:request profile='GPU'/>", "request" },
        { "<av:request/>", "request" },
        { "<av:placement node='0'><av:device profile='gpu' address='0000:17:00.0' alias='my-gpu'/></av:placement>",
          "device" },
        { "<av:placement><av:device profile='gpu' address='17:00.0'/></av:placement>", "device" },
        { "<av:placement><av:mdev profile='gpu' uuid='not-a-uuid'/></av:placement>", "mdev" },
        { "<av:placement pinned='maybe'/>", "placement" },
        { "<av:placement node='1024'/>", "placement" },
        { "<av:placement><av:usb profile='s' bus-path='1-1.2' vendor='0x3e7' product='0x2485'/></av:placement>",
          "usb" },
        { "<av:placement><av:usb profile='s' bus-path='1-1.2' vendor='0x03e7' product='0x2485' "
          "identity='usb:03e7:2485:serial:'/></av:placement>",
          "usb" },
        { "<av:frobnicate/>", "frobnicate" },
        { "<av:request profile='fpga' bitstream='My Image'/>", "request" },
        { "<av:placement><av:device profile='fpga' address='0000:3d:00.1' bitstream='resnet50-int8'/></av:placement>",
          "device" },
        { "<av:placement><av:mdev profile='v' uuid='00000000-0000-4000-8000-000000000001' bitstream='"
          TEST_SHA256 "'/></av:placement>", "mdev" },
    };
    g_autofree char *schema = schema_path();

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'>\n  <name>d</name>\n  <metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>\n"
            "%s\n</av:accelerators></metadata>\n</domain>\n",
            bad[i].inner);
        g_autoptr(GError) err = NULL;

        g_assert_false(av_domain_validate_metadata(xml, strlen(xml), schema, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_test_message("refused: %s", err->message);
        if (!strstr(err->message, bad[i].word))
            g_error("'%s' is not in the message '%s'", bad[i].word, err->message);
        g_assert_nonnull(strstr(err->message, "line"));
    }
    {
        /* no metadata: nothing to check */
        static const char none[] = "<domain><name>d</name></domain>";
        g_autoptr(GError) err = NULL;

        g_assert_true(av_domain_validate_metadata(none, strlen(none), schema, &err));
        g_assert_no_error(err);
    }
    {
        static const char some[] =
            "<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='gpu'/></av:accelerators></metadata></domain>";
        g_autoptr(GError) err = NULL;

        g_assert_false(av_domain_validate_metadata(some, strlen(some), "/nonexistent/accelvirt-domain.rng", &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    }
}

/* A domain without <uuid> gets one after <name> (claims need it before
 * libvirt sees the domain); one that has it comes back unchanged. */
static void
test_ensure_uuid(void)
{
    const char *bare = "<domain type='qemu'>\n  <name>vm</name>\n  <memory>65536</memory>\n</domain>\n";
    const char *with = "<domain type='qemu'>\n  <name>vm</name>\n  <uuid>4B20D080-1B54-4048-85B3-A6A62D165C01</uuid>\n</domain>\n";
    g_autoptr(GError) err = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *uuid2 = NULL;
    g_autofree char *out = NULL;
    g_autofree char *same = NULL;
    g_autofree char *expect = NULL;
    g_autoptr(AvDomain) dom = NULL;

    out = av_domain_ensure_uuid(bare, strlen(bare), &uuid, &err);
    g_assert_no_error(err);
    g_assert_nonnull(uuid);
    g_assert_true(g_uuid_string_is_valid(uuid));
    expect = g_strdup_printf("<domain type=\"qemu\">\n  <name>vm</name>\n  <uuid>%s</uuid>\n  <memory>65536</memory>\n</domain>\n", uuid);
    g_assert_cmpstr(out, ==, expect);
    dom = av_domain_parse(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpstr(dom->uuid, ==, uuid);

    same = av_domain_ensure_uuid(with, strlen(with), &uuid2, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(same, ==, with);
    g_assert_cmpstr(uuid2, ==, "4b20d080-1b54-4048-85b3-a6a62d165c01");

    g_assert_null(av_domain_ensure_uuid("<domain>", 8, &uuid2, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
}

/* ---- remap (restore, migrate) ---- */

static const char remap_mdev_uuid[] = "6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c";

/* The domain of xml/in/remap-saved.xml moved to node 1's GPUs.  The mdev
 * item carries another UUID (av_place makes fresh ones): the domain's stays. */
static AvPlacement *
remap_to_node1(void)
{
    AvPlacement *p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:B0:00.0", 1);
    add_mdev(p, "vgpu-a10", "0000:d8:00.0", "00000000-0000-4000-8000-000000000009", 1);
    return p;
}

/* The placement xml/in/remap-saved.xml already has. */
static AvPlacement *
remap_as_saved(void)
{
    AvPlacement *p = placement_new(0, cpus_node0, G_N_ELEMENTS(cpus_node0));

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", 0);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:18:00.0", 0);
    add_mdev(p, "vgpu-a10", "0000:af:00.0", remap_mdev_uuid, 0);
    return p;
}

static void
assert_contains(const char *what, const char *doc, const char *const *present, const char *const *absent)
{
    for (gsize j = 0; present && present[j]; j++) {
        if (!strstr(doc, present[j]))
            g_error("%s lacks '%s':\n%s", what, present[j], doc);
    }
    for (gsize j = 0; absent && absent[j]; j++) {
        if (strstr(doc, absent[j]))
            g_error("%s holds '%s':\n%s", what, absent[j], doc);
    }
}

/* A placed domain as libvirt hands it to the restore hook (guest PCI
 * addresses on the hostdevs, <driver name='vfio'/>, aliases) moved to other
 * devices on another node: golden, host-side facts only. */
static void
test_remap_golden(void)
{
    static const char *const present[] = {
        /* the new host side */
        "bus=\"0xaf\"", "bus=\"0xb0\"", "cpuset=\"8-11,40-43\"", "nodeset=\"1\"", "node=\"1\"",
        "address=\"0000:af:00.0\" alias=\"ua-accelvirt-0\"", "address=\"0000:b0:00.0\" alias=\"ua-accelvirt-1\"",
        /* the guest side, the user's hostdev, the mdev's UUID: as they were */
        "<address type=\"pci\" domain=\"0x0000\" bus=\"0x06\" slot=\"0x00\" function=\"0x0\"/>",
        "<address type=\"pci\" domain=\"0x0000\" bus=\"0x07\" slot=\"0x00\" function=\"0x0\"/>",
        "<address type=\"pci\" domain=\"0x0000\" bus=\"0x08\" slot=\"0x00\" function=\"0x0\"/>",
        "<address domain=\"0x0000\" bus=\"0x5e\" slot=\"0x00\" function=\"0x0\"/>",
        "uuid=\"6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c\"", "<vcpu placement=\"static\">4</vcpu>",
        "<memory unit=\"KiB\">67108864</memory>", "<vcpupin vcpu=\"3\" cpuset=\"8-11,40-43\"/>",
        "<driver name=\"vfio\"/>", "pinned=\"yes\" numatune=\"yes\"", NULL,
    };
    static const char *const absent[] = {
        "bus=\"0x17\"", "bus=\"0x18\"", "0-3", "nodeset=\"0\"", "vcpu=\"4\"", "000000000009", NULL,
    };
    g_autofree char *in = NULL, *expected = NULL, *out = NULL, *again = NULL, *schema = schema_path();
    g_autoptr(AvPlacement) p = remap_to_node1();
    g_autoptr(AvPlacement) back = NULL;
    g_autoptr(AvDomain) before = NULL, after = NULL;
    g_autoptr(GError) err = NULL;
    gsize in_len = 0;

    in = read_src("xml/in/remap-saved.xml", &in_len);
    out = av_domain_remap(in, in_len, p, &err);
    g_assert_no_error(err);
    g_assert_nonnull(out);
    if (g_strcmp0(g_getenv("AV_TEST_REGENERATE"), "1") == 0) {
        g_autofree char *path = av_test_srcdir_path("xml/out/remap-saved.xml");

        g_file_set_contents(path, out, -1, &err);
        g_assert_no_error(err);
        g_test_message("regenerated %s", path);
    }
    expected = read_src("xml/out/remap-saved.xml", NULL);
    assert_same("xml/out/remap-saved.xml", expected, out);
    assert_contains("the remapped domain", out, present, absent);

    /* the guest ABI: same vCPUs, memory, hostdevs in the same order with the same aliases */
    before = av_domain_parse(in, in_len, &err);
    g_assert_no_error(err);
    after = av_domain_parse(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpuint(before->vcpus, ==, after->vcpus);
    g_assert_cmpstr(before->uuid, ==, after->uuid);
    g_assert_cmpuint(before->hostdevs->len, ==, after->hostdevs->len);
    for (guint i = 0; i < before->hostdevs->len; i++) {
        const AvHostdev *a = g_ptr_array_index(before->hostdevs, i);
        const AvHostdev *b = g_ptr_array_index(after->hostdevs, i);

        g_assert_cmpstr(a->alias, ==, b->alias);
        g_assert_cmpint(a->type, ==, b->type);
        g_assert_cmpint(a->managed, ==, b->managed);
    }

    /* again with the same placement: nothing more changes */
    again = av_domain_remap(out, strlen(out), p, &err);
    g_assert_no_error(err);
    assert_same("a second remap", out, again);

    /* what av_domain_placement reads back */
    back = av_domain_placement(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpint(back->numa_node, ==, 1);
    g_assert_cmpuint(back->items->len, ==, 3);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(back->items, 1))->pci_address, ==, "0000:b0:00.0");
    g_assert_cmpint(((AvPlacedItem *)g_ptr_array_index(back->items, 2))->attach, ==, AV_ATTACH_MDEV);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(back->items, 2))->mdev_uuid, ==, remap_mdev_uuid);

    g_assert_true(av_domain_validate_metadata(out, strlen(out), schema, &err));
    g_assert_no_error(err);
    if (!libvirt_validate("remap-saved", out))
        g_test_message("libvirt's schemas are not installed: not checked against them");
}

/* The placement the domain has already: the document comes back byte for
 * byte (libvirt's single quotes and all). */
static void
test_remap_same(void)
{
    g_autoptr(AvPlacement) p = remap_as_saved();
    g_autoptr(AvPlacement) read = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    g_autofree char *in = read_src("xml/in/remap-saved.xml", &len);
    g_autofree char *out = av_domain_remap(in, len, p, &err);
    g_autofree char *out2 = NULL;

    g_assert_no_error(err);
    g_assert_cmpuint(strlen(out), ==, len);
    assert_same("a remap to the same placement", in, out);

    /* and the placement read back from the domain, with its node's CPUs */
    read = av_domain_placement(in, len, &err);
    g_assert_no_error(err);
    g_assert_cmpint(read->numa_node, ==, 0);
    g_array_append_vals(read->cpus, cpus_node0, G_N_ELEMENTS(cpus_node0));
    out2 = av_domain_remap(in, len, read, &err);
    g_assert_no_error(err);
    assert_same("a remap to the placement read back", in, out2);
}

/* The user pinned the vCPUs and set a numatune: a remap to node 1 moves the
 * device and the placement's node, and leaves the user's choices alone. */
static void
test_remap_user_pinned(void)
{
    static const char *const present[] = {
        "<vcpupin vcpu=\"0\" cpuset=\"2\"/>", "<vcpupin vcpu=\"1\" cpuset=\"3\"/>", "<emulatorpin cpuset=\"1\"/>",
        "<memory mode=\"preferred\" nodeset=\"0\"/>", "node=\"1\" pinned=\"no\" numatune=\"no\"", "bus=\"0xaf\"",
        NULL,
    };
    static const char *const absent[] = { "8-11", "nodeset=\"1\"", "bus=\"0x17\"", NULL };
    g_autoptr(AvPlacement) p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    g_autofree char *in = read_src("xml/out/user-pinned.xml", &len);
    g_autofree char *out = NULL;

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
    out = av_domain_remap(in, len, p, &err);
    g_assert_no_error(err);
    assert_contains("the remapped user-pinned domain", out, present, absent);
}

/* A stick that re-enumerated (issue 13): the remap refreshes the
 * hostdev's <address bus= device=> from the placement and keeps the
 * identity; a second remap changes nothing; the identity reads back, and
 * an entry without one (older XML) still loads. */
static void
test_remap_usb_numbers(void)
{
    static const char *const present[] = { "<address bus=\"1\" device=\"8\"/>",
                                            "identity=\"usb:03e7:2485:serial:03e72485\"", NULL };
    static const char *const absent[] = { "device=\"3\"", NULL };
    g_autoptr(AvPlacement) p = placement_new(-1, NULL, 0);
    g_autoptr(AvPlacement) back = NULL;
    g_autoptr(AvPlacement) old = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    g_autofree char *in = read_src("xml/out/usb-stick.xml", &len);
    g_autofree char *out = NULL, *again = NULL, *older = NULL;

    add_usb(p, "usb-ai-stick", "1-1.2", 0x03e7, 0x2485);
    ((AvPlacedItem *)g_ptr_array_index(p->items, 0))->usb_devnum = 8;
    out = av_domain_remap(in, len, p, &err);
    g_assert_no_error(err);
    assert_contains("the remapped stick", out, present, absent);
    again = av_domain_remap(out, strlen(out), p, &err);
    g_assert_no_error(err);
    assert_same("a second remap of the stick", out, again);
    back = av_domain_placement(out, strlen(out), &err);
    g_assert_no_error(err);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(back->items, 0))->identity, ==,
                    "usb:03e7:2485:serial:03e72485");
    {
        GString *s = g_string_new(in);

        g_string_replace(s, " identity=\"usb:03e7:2485:serial:03e72485\"", "", 0);
        older = g_string_free(s, FALSE);
    }
    old = av_domain_placement(older, strlen(older), &err);
    g_assert_no_error(err);
    g_assert_null(((AvPlacedItem *)g_ptr_array_index(old->items, 0))->identity);
}

/* A placement without a node: the pinning and numatune accelvirt wrote go,
 * and the placement says so; a second remap changes nothing. */
static void
test_remap_no_node(void)
{
    static const char *const present[] = { "pinned=\"no\" numatune=\"no\"", "<shares>2048</shares>", NULL };
    static const char *const absent[] = { "vcpupin", "emulatorpin", "numatune>", "node=", NULL };
    g_autoptr(AvPlacement) p = placement_new(-1, NULL, 0);
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    g_autofree char *in = read_src("xml/in/remap-saved.xml", &len);
    g_autofree char *out = NULL, *again = NULL;

    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:17:00.0", -1);
    add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:18:00.0", -1);
    add_mdev(p, "vgpu-a10", "0000:af:00.0", remap_mdev_uuid, -1);
    out = av_domain_remap(in, len, p, &err);
    g_assert_no_error(err);
    assert_contains("the domain remapped without a node", out, present, absent);
    again = av_domain_remap(out, strlen(out), p, &err);
    g_assert_no_error(err);
    assert_same("a second remap without a node", out, again);
}

/* Placements that do not line up with the domain's aliases, and domains
 * with nothing to remap: refused with a sentence, nothing written. */
static void
test_remap_refused(void)
{
    gsize len = 0;
    g_autofree char *in = read_src("xml/in/remap-saved.xml", &len);
    g_autofree char *unplaced = read_src("xml/in/two-gpus.xml", NULL);
    g_autofree char *nova = read_src("xml/in/nova.xml", NULL);
    struct {
        const char *what;
        const char *doc;
        int shape;
        const char *word;
    } bad[] = {
        { "profiles in another order", in, 0, "profile 'vgpu-a10' but ua-accelvirt-0" },
        { "one device too few", in, 1, "has 2 devices but domain 'remap-saved' was placed with 3" },
        { "an mdev where a PCI device was", in, 2, "is an mdev but ua-accelvirt-1" },
        { "a profile the domain does not request", in, 3, "no av:request" },
        { "a domain never placed", unplaced, 4, "no accelvirt placement" },
        { "a domain Nova wrote", nova, 4, "no accelvirt placement" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(AvPlacement) p = placement_new(1, cpus_node1, G_N_ELEMENTS(cpus_node1));
        g_autoptr(GError) err = NULL;
        g_autofree char *out = NULL;

        switch (bad[i].shape) {
        case 0:
            add_mdev(p, "vgpu-a10", "0000:af:00.0", remap_mdev_uuid, 1);
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:b0:00.0", 1);
            break;
        case 1:
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:b0:00.0", 1);
            break;
        case 2:
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
            add_mdev(p, "gpu-passthrough", "0000:af:00.0", remap_mdev_uuid, 1);
            add_mdev(p, "vgpu-a10", "0000:af:00.0", remap_mdev_uuid, 1);
            break;
        case 3:
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
            add_pci(p, "fpga-function", AV_ATTACH_SRIOV_VF, "0000:3d:00.1", 1);
            add_mdev(p, "vgpu-a10", "0000:af:00.0", remap_mdev_uuid, 1);
            break;
        default:
            add_pci(p, "gpu-passthrough", AV_ATTACH_VFIO_PCI, "0000:af:00.0", 1);
            break;
        }
        out = av_domain_remap(bad[i].doc, strlen(bad[i].doc), p, &err);
        if (out)
            g_error("%s: not refused:\n%s", bad[i].what, out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_test_message("%s: %s", bad[i].what, err->message);
        if (!strstr(err->message, bad[i].word))
            g_error("%s: '%s' lacks '%s'", bad[i].what, err->message, bad[i].word);
    }
}

/* ---- issue 16: the guest topology, described, refused, remapped ---- */

/* av_guest_topology() of tests/xml/@file/@name.xml with @placement,
 * described. */
static char *
topology_describe(const char *file, const char *name, const AvPlacement *placement, json_t **ret_json)
{
    g_autofree char *rel = g_strdup_printf("xml/%s/%s.xml", file, name);
    gsize len = 0;
    g_autofree char *xml = read_src(rel, &len);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvGuestTopology) topology = av_guest_topology(xml, len, placement, &err);

    g_assert_no_error(err);
    g_assert_nonnull(topology);
    if (ret_json)
        *ret_json = av_guest_topology_json(topology, placement);
    return av_guest_topology_describe(topology, placement);
}

/* What `accelvirt plan` and the dry runs print, for the golden cases: the
 * same from the domain as the user wrote it and as accelvirt rewrote it
 * (what accelvirt wrote is never taken for the user's). */
static void
test_topology_describe(void)
{
    static const struct {
        const char *name;
        AvPlacement *(*placement)(void);
        const char *text;
    } topo[] = {
        { "topo-two-cells", case_topo_two_cells,
          "guest NUMA: cell 0 = host node 0 (vCPUs 0-1, 4096 MiB), cell 1 = host node 1 (vCPUs 2-3, 4096 MiB)\n"
          "guest switch under cell 0 mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.1), "
          "ua-accelvirt-1 (0000:04:00.1)\n"
          "guest root port under cell 1: ua-accelvirt-2 (0000:81:00.1)\n" },
        { "topo-switch", case_topo_switch,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.0), "
          "ua-accelvirt-1 (0000:04:00.0); x-nv-gpudirect-clique 0\n" },
        { "topo-mirror", case_topo_mirror,
          "guest NUMA: cell 0 = host node 1 (vCPUs 0-1, 4096 MiB)\n"
          "guest root port under cell 0: ua-accelvirt-0 (0000:81:00.1)\n"
          "guest root port under cell 0: ua-accelvirt-1 (0000:82:00.1)\n" },
        { "topo-memory-split", case_topo_memory_split,
          "guest NUMA: cell 0 = host node 0 (vCPUs 0-2, 2560 MiB), cell 1 = host node 1 (vCPUs 3-4, 2561 MiB)\n"
          "guest root port under cell 0: ua-accelvirt-0 (0000:03:00.1)\n"
          "guest root port under cell 1: ua-accelvirt-1 (0000:81:00.1)\n" },
        { "topo-cliques", case_topo_cliques,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.0), "
          "ua-accelvirt-1 (0000:04:00.0); x-nv-gpudirect-clique 0\n"
          "guest switch on pcie-root mirrors host switch 0000:22:00.0: ua-accelvirt-3 (0000:23:00.0), "
          "ua-accelvirt-4 (0000:24:00.0); x-nv-gpudirect-clique 1\n" },
        { "topo-gpudirect-off", case_topo_cliques,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.0), "
          "ua-accelvirt-1 (0000:04:00.0)\n"
          "guest switch on pcie-root mirrors host switch 0000:22:00.0: ua-accelvirt-3 (0000:23:00.0), "
          "ua-accelvirt-4 (0000:24:00.0)\n" },
        { "topo-numa-off", case_topo_two_cells,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.1), "
          "ua-accelvirt-1 (0000:04:00.1)\n" },
        { "topo-switches-off", case_topo_gpus_two_nodes,
          "guest NUMA: cell 0 = host node 0 (vCPUs 0-1, 4096 MiB), cell 1 = host node 1 (vCPUs 2-3, 4096 MiB)\n"
          "guest root port under cell 0: ua-accelvirt-0 (0000:03:00.0)\n"
          "guest root port under cell 0: ua-accelvirt-1 (0000:04:00.0)\n"
          "guest root port under cell 1: ua-accelvirt-2 (0000:81:00.0)\n"
          "not mirrored: GPUDirect cliques: not written without the mirrored switches (switches='off')\n" },
        { "topo-pc", case_topo_gpus_two_nodes,
          "guest topology: as libvirt places it (nothing to mirror)\n"
          "not mirrored: the PCIe and NUMA topology: the domain's machine is not q35 (i440fx has no PCIe switch "
          "or expander bus)\n" },
        { "topo-user-numa", case_topo_two_cells,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.1), "
          "ua-accelvirt-1 (0000:04:00.1)\n"
          "not mirrored: guest NUMA: the domain has <cpu><numa> cells of its own (it wins)\n" },
        { "topo-few-vcpus", case_topo_two_cells,
          "guest switch on pcie-root mirrors host switch 0000:02:00.0: ua-accelvirt-0 (0000:03:00.1), "
          "ua-accelvirt-1 (0000:04:00.1)\n"
          "not mirrored: guest NUMA: the domain has 1 vCPU for 2 host nodes: give it at least 2 in <vcpu>\n" },
        { "two-gpus", case_two_gpus, "guest topology: as libvirt places it (nothing to mirror)\n" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(topo); i++) {
        g_autoptr(AvPlacement) p = topo[i].placement();
        g_autofree char *in = topology_describe("in", topo[i].name, p, NULL);
        g_autofree char *out = topology_describe("out", topo[i].name, p, NULL);

        assert_same(topo[i].name, topo[i].text, in);
        assert_same(topo[i].name, topo[i].text, out);
    }
}

/* <memory> in libvirt's units (formatdomain.rst, "Memory Allocation"),
 * split in whole MiB among the cells, the last taking the rest; what is
 * not a whole MiB is said. */
static void
test_topology_memory_units(void)
{
    static const struct {
        const char *memory;
        const char *cells;
        const char *note;
    } units[] = {
        { "<memory>4194304</memory>", "(vCPUs 0-1, 2048 MiB), cell 1 = host node 1 (vCPUs 2-3, 2048 MiB)", NULL },
        { "<memory unit='G'>4</memory>", "2048 MiB), cell 1 = host node 1 (vCPUs 2-3, 2048 MiB)", NULL },
        { "<memory unit='GB'>4</memory>", "1907 MiB), cell 1 = host node 1 (vCPUs 2-3, 1907 MiB)",
          "memory of 3906250 KiB is not a whole number of MiB: its cells hold 3814 MiB" },
        { "<memory unit='bytes'>3146752</memory>", "(vCPUs 0-1, 1 MiB), cell 1 = host node 1 (vCPUs 2-3, 2 MiB)",
          "memory of 3073 KiB" },
        { "<memory unit='KiB'>2047</memory>", NULL, "less than 1 MiB for each of its 2 cells" },
        { "<memory unit='parsec'>4</memory>", NULL, "less than 1 MiB" },
        /* hugepages: whole pages of the largest size named */
        { "<memory unit='MiB'>5632</memory><memoryBacking><hugepages><page size='1' unit='G'/></hugepages>"
          "</memoryBacking>", "(vCPUs 0-1, 2048 MiB), cell 1 = host node 1 (vCPUs 2-3, 3072 MiB)",
          "not a whole number of its 1048576 KiB hugepages: its cells hold 5242880 KiB" },
        { "<memory unit='GiB'>4</memory><memoryBacking><hugepages><page size='2048'/></hugepages>"
          "</memoryBacking>", "(vCPUs 0-1, 2048 MiB), cell 1 = host node 1 (vCPUs 2-3, 2048 MiB)", NULL },
        { "<memory unit='GiB'>1</memory><memoryBacking><hugepages><page size='2' unit='M' nodeset='0'/>"
          "<page size='1048576' nodeset='1'/></hugepages></memoryBacking>", NULL,
          "less than one hugepage of 1048576 KiB for each of its 2 cells: give it at least 2097152 KiB" },
    };
    g_autoptr(AvPlacement) p = case_topo_memory_split();

    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'><name>m</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='fpga-function' count='2'/></av:accelerators></metadata>%s"
            "<vcpu>4</vcpu><os><type machine='q35'>hvm</type></os></domain>",
            units[i].memory);
        g_autoptr(GError) err = NULL;
        g_autoptr(AvGuestTopology) topology = av_guest_topology(xml, strlen(xml), p, &err);
        g_autofree char *text = NULL;

        g_assert_no_error(err);
        text = av_guest_topology_describe(topology, p);
        if ((units[i].cells && !strstr(text, units[i].cells)) || (!units[i].cells && topology->cells->len))
            g_error("%s: %s", units[i].memory, text);
        if (units[i].note ? !strstr(text, units[i].note) : strstr(text, "not mirrored") != NULL)
            g_error("%s: %s", units[i].memory, text);
    }
    /* guest-numa="mirror" with less than a hugepage per cell: refused */
    {
        static const char mirror[] =
            "<domain type='kvm'><name>m</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='fpga-function' count='2'/><av:topology guest-numa='mirror'/></av:accelerators>"
            "</metadata><memory unit='GiB'>1</memory><memoryBacking><hugepages><page size='1' unit='G'/>"
            "</hugepages></memoryBacking><vcpu>4</vcpu><os><type machine='q35'>hvm</type></os></domain>";
        g_autoptr(GError) err = NULL;
        g_autoptr(AvGuestTopology) topology = av_guest_topology(mirror, strlen(mirror), p, &err);
        g_autofree char *out = NULL;

        g_assert_null(topology);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "less than one hugepage of 1048576 KiB"));
        g_clear_error(&err);
        out = av_domain_rewrite(mirror, strlen(mirror), p, test_policy, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    }
}

static void
test_topology_json(void)
{
    g_autoptr(AvPlacement) p = case_topo_two_cells();
    json_t *json = NULL;
    g_autofree char *text = topology_describe("in", "topo-two-cells", p, &json);
    g_autofree char *dump = json_dumps(json, JSON_COMPACT | JSON_SORT_KEYS);

    g_assert_true(g_str_has_prefix(text, "guest NUMA: cell 0 = host node 0"));
    assert_same("the topology's JSON",
                "{\"cells\":[{\"cell\":0,\"host_node\":0,\"memory_kib\":4194304,\"vcpus\":\"0-1\"},"
                "{\"cell\":1,\"host_node\":1,\"memory_kib\":4194304,\"vcpus\":\"2-3\"}],"
                "\"groups\":[{\"cell\":0,\"clique\":null,\"devices\":[{\"address\":\"0000:03:00.1\","
                "\"alias\":\"ua-accelvirt-0\"},{\"address\":\"0000:04:00.1\",\"alias\":\"ua-accelvirt-1\"}],"
                "\"host_switch\":\"0000:02:00.0\"},{\"cell\":1,\"clique\":null,\"devices\":[{\"address\":"
                "\"0000:81:00.1\",\"alias\":\"ua-accelvirt-2\"}],\"host_switch\":null}],\"notes\":[]}",
                dump);
    json_decref(json);
}

/* guest-numa="mirror" that cannot be honoured is an error, one sentence,
 * from av_guest_topology() and from the rewrite alike. */
static void
test_topology_mirror_refused(void)
{
    static const struct {
        const char *name;
        const char *from, *to;
        const char *word;
    } topo[] = {
        { "topo-user-numa", "count=\"3\"/>", "count=\"3\"/><av:topology guest-numa=\"mirror\"/>", "cells of its own" },
        { "topo-pc", "count=\"3\"/>", "count=\"3\"/><av:topology guest-numa=\"mirror\"/>", "not q35" },
        { "topo-few-vcpus", "count=\"3\"/>", "count=\"3\"/><av:topology guest-numa=\"mirror\"/>",
          "1 vCPU for 2 host nodes" },
        { "topo-mirror", "<vcpu placement='static'>2</vcpu>",
          "<vcpu placement='static'>2</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/></cputune>", "pins its vCPUs" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(topo); i++) {
        g_autofree char *rel = g_strdup_printf("xml/in/%s.xml", topo[i].name);
        g_autofree char *xml = read_src(rel, NULL);
        g_auto(GStrv) parts = g_strsplit(xml, topo[i].from, 2);
        g_autofree char *bad = g_strjoinv(topo[i].to, parts);
        g_autoptr(AvPlacement) p = strcmp(topo[i].name, "topo-mirror") == 0 ? case_topo_mirror()
                                   : strcmp(topo[i].name, "topo-pc") == 0  ? case_topo_gpus_two_nodes()
                                                                            : case_topo_two_cells();
        g_autoptr(GError) err = NULL;
        g_autoptr(AvGuestTopology) topology = NULL;
        g_autofree char *out = NULL;

        g_assert_cmpuint(g_strv_length(parts), ==, 2);
        topology = av_guest_topology(bad, strlen(bad), p, &err);
        g_assert_null(topology);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        if (!strstr(err->message, topo[i].word) || !strstr(err->message, "guest-numa='mirror'"))
            g_error("%s: '%s' lacks '%s'", topo[i].name, err->message, topo[i].word);
        g_test_message("refused: %s", err->message);
        g_clear_error(&err);
        out = av_domain_rewrite(bad, strlen(bad), p, test_policy, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    }
}

/* <av:topology> and p2p= are tenant input: anything but the known values
 * is refused in one sentence naming the attribute, by the requests' reader
 * and by av_domain_topology_request() alike. */
static void
test_topology_hostile(void)
{
    static const struct {
        const char *inner;
        const char *word;
    } bad[] = {
        { "<av:topology guest-numa='always'/>", "guest-numa='always'" },
        { "<av:topology switches='yes'/>", "switches='yes'" },
        { "<av:topology gpudirect='on'/>", "gpudirect='on'" },
        { "<av:topology guest-numa=''/>", "guest-numa=''" },
        { "<av:topology cells='2'/>", "unknown attribute 'cells'" },
        { "<av:topology xmlns:x='urn:x' x:switches='off'/>", "unknown attribute 'switches'" },
        { "<av:topology/><av:topology switches='off'/>", "more than one <av:topology>" },
        { "<av:topology><av:cell/></av:topology>", "no child element" },
        { "<av:request profile='gpu-passthrough' count='2' p2p='yes'/>", "p2p 'yes'" },
        { "<av:request profile='gpu-passthrough' count='2' p2p='Required'/>", "p2p 'Required'" },
        { "<av:request profile='gpu-passthrough' count='2' p2p=''/>", "p2p ''" },
    };
    g_autofree char *schema = schema_path();

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'>\n  <name>d</name>\n  <metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
            "<av:request profile='gpu-passthrough'/>%s</av:accelerators></metadata>\n"
            "  <os><type machine='q35'>hvm</type></os>\n</domain>\n",
            bad[i].inner);
        g_autoptr(GError) err = NULL;
        g_autoptr(GPtrArray) requests = av_domain_requests(xml, strlen(xml), &err);
        g_autoptr(AvPlacement) p = case_topo_switch();
        g_autofree char *out = NULL;

        g_assert_null(requests);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        if (!strstr(err->message, bad[i].word))
            g_error("'%s': '%s' lacks '%s'", bad[i].inner, err->message, bad[i].word);
        g_test_message("refused: %s", err->message);
        g_clear_error(&err);
        out = av_domain_rewrite(xml, strlen(xml), p, test_policy, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
        g_assert_false(av_domain_validate_metadata(xml, strlen(xml), schema, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        if (strstr(bad[i].inner, "topology")) {
            AvTopologyRequest r = { AV_GUEST_NUMA_OFF, FALSE, FALSE };

            g_clear_error(&err);
            g_assert_false(av_domain_topology_request(xml, strlen(xml), &r, &err));
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            /* untouched on failure */
            g_assert_cmpint(r.guest_numa, ==, AV_GUEST_NUMA_OFF);
        }
    }
    {
        /* a placement whose node names a CPU libvirt cannot pin to is never written */
        static const guint huge[] = { 0, AV_DOMAIN_CPU_MAX };
        g_autoptr(AvPlacement) p = case_topo_two_cells();
        gsize len = 0;
        g_autofree char *in = read_src("xml/in/topo-two-cells.xml", &len);
        g_autoptr(GError) err = NULL;
        g_autofree char *out = NULL;

        add_node(p, 2, huge, G_N_ELEMENTS(huge));
        out = av_domain_rewrite(in, len, p, test_policy, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "CPU 16384 of node 2"));
    }
}

/* The values parsed: p2p into the request, <av:topology> with its
 * defaults. */
static void
test_topology_request(void)
{
    static const char xml[] =
        "<domain><name>d</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>"
        "<av:request profile='gpu' count='2' p2p='required'/><av:request profile='nic' count='2' p2p='preferred'/>"
        "<av:request profile='fpga'/><av:topology guest-numa='mirror' gpudirect='off'/>"
        "</av:accelerators></metadata></domain>";
    static const char none[] = "<domain><name>d</name></domain>";
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) requests = av_domain_requests(xml, strlen(xml), &err);
    AvTopologyRequest r = { AV_GUEST_NUMA_OFF, FALSE, FALSE };

    g_assert_no_error(err);
    g_assert_cmpuint(requests->len, ==, 3);
    g_assert_cmpint(((AvRequest *)g_ptr_array_index(requests, 0))->p2p, ==, AV_P2P_REQUIRED);
    g_assert_cmpint(((AvRequest *)g_ptr_array_index(requests, 1))->p2p, ==, AV_P2P_PREFERRED);
    g_assert_cmpint(((AvRequest *)g_ptr_array_index(requests, 2))->p2p, ==, AV_P2P_NONE);
    g_assert_true(av_domain_topology_request(xml, strlen(xml), &r, &err));
    g_assert_no_error(err);
    g_assert_cmpint(r.guest_numa, ==, AV_GUEST_NUMA_MIRROR);
    g_assert_true(r.switches);
    g_assert_false(r.gpudirect);
    g_assert_true(av_domain_topology_request(none, strlen(none), &r, &err));
    g_assert_no_error(err);
    g_assert_cmpint(r.guest_numa, ==, AV_GUEST_NUMA_AUTO);
    g_assert_true(r.switches);
    g_assert_true(r.gpudirect);
}

/* Restore or migration: the devices of the two-cell domain now sit
 * elsewhere.  The cells, controllers, guest addresses stay; each cell is
 * pinned to its devices' new node (both nodes when they span two); a node
 * whose CPUs the placement lacks is an error. */
static void
test_topology_remap(void)
{
    g_autoptr(AvPlacement) first = case_topo_two_cells();
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    g_autofree char *in = read_src("xml/in/topo-two-cells.xml", &len);
    g_autofree char *placed = av_domain_rewrite(in, len, first, test_policy, &err);

    g_assert_no_error(err);
    {
        /* swapped: the switch's devices on node 1, the lone one on node 0 */
        static const char *const present[] = {
            "<vcpupin vcpu=\"0\" cpuset=\"8-11,40-43\"/>", "<vcpupin vcpu=\"1\" cpuset=\"8-11,40-43\"/>",
            "<vcpupin vcpu=\"2\" cpuset=\"0-3\"/>", "<vcpupin vcpu=\"3\" cpuset=\"0-3\"/>",
            "<emulatorpin cpuset=\"0-3,8-11,40-43\"/>", "<memory mode=\"strict\" nodeset=\"0-1\"/>",
            "<memnode cellid=\"0\" mode=\"strict\" nodeset=\"1\"/>",
            "<memnode cellid=\"1\" mode=\"strict\" nodeset=\"0\"/>",
            "<cell id=\"0\" cpus=\"0-1\" memory=\"4194304\" unit=\"KiB\"/>", "<node>0</node>",
            "address=\"0000:83:00.1\" cell=\"0\" alias=\"ua-accelvirt-0\"", "ua-accelvirt-dn1",
            "<address type=\"pci\" domain=\"0x0000\" bus=\"0x05\" slot=\"0x00\" function=\"0x0\"/>", NULL,
        };
        static const TopoItem items[] = {
            { "fpga-function", "0000:83:00.1", 1, "0000:82:00.0", FALSE },
            { "fpga-function", "0000:84:00.1", 1, "0000:82:00.0", FALSE },
            { "fpga-function", "0000:05:00.1", 0, NULL, FALSE },
        };
        g_autoptr(AvPlacement) p = topo_placement(1, items, G_N_ELEMENTS(items));
        g_autofree char *out = NULL, *again = NULL;

        out = av_domain_remap(placed, strlen(placed), p, &err);
        g_assert_no_error(err);
        assert_contains("the remapped cells", out, present, NULL);
        if (!libvirt_validate("topology remap", out))
            g_test_message("libvirt's schemas are not installed: not checked against them");
        again = av_domain_remap(out, strlen(out), p, &err);
        g_assert_no_error(err);
        assert_same("a second remap", out, again);
    }
    {
        /* cell 0's devices now span both nodes: the union */
        static const char *const present[] = {
            "<vcpupin vcpu=\"0\" cpuset=\"0-3,8-11,40-43\"/>", "<vcpupin vcpu=\"2\" cpuset=\"8-11,40-43\"/>",
            "<memnode cellid=\"0\" mode=\"strict\" nodeset=\"0-1\"/>",
            "<memnode cellid=\"1\" mode=\"strict\" nodeset=\"1\"/>", NULL,
        };
        static const TopoItem items[] = {
            { "fpga-function", "0000:03:00.1", 0, SW_A, FALSE },
            { "fpga-function", "0000:83:00.1", 1, NULL, FALSE },
            { "fpga-function", "0000:81:00.1", 1, NULL, FALSE },
        };
        g_autoptr(AvPlacement) p = topo_placement(0, items, G_N_ELEMENTS(items));
        g_autofree char *out = NULL;

        out = av_domain_remap(placed, strlen(placed), p, &err);
        g_assert_no_error(err);
        assert_contains("the remapped cells", out, present, NULL);
    }
    {
        /* the same placement: byte for byte */
        g_autofree char *out = av_domain_remap(placed, strlen(placed), first, &err);

        g_assert_no_error(err);
        assert_same("a remap to the same placement", placed, out);
    }
    {
        /* node 1's CPUs unknown, a device of cell 0 moved to it */
        g_autoptr(AvPlacement) p = case_topo_two_cells();
        g_autofree char *out = NULL;

        g_ptr_array_remove_index(p->nodes, 1);
        ((AvPlacedItem *)g_ptr_array_index(p->items, 0))->numa_node = 1;
        out = av_domain_remap(placed, strlen(placed), p, &err);
        g_assert_null(out);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "lacks the CPUs of host node 1"));
        g_test_message("refused: %s", err->message);
        g_clear_error(&err);
    }
    {
        /* the same nodes, no node's CPUs (the hook's remap of the same cards): unchanged */
        g_autoptr(AvPlacement) p = case_topo_two_cells();
        g_autofree char *out = NULL;

        g_clear_pointer(&p->nodes, g_ptr_array_unref);
        out = av_domain_remap(placed, strlen(placed), p, &err);
        g_assert_no_error(err);
        assert_same("a remap to the same nodes without their CPUs", placed, out);
    }
}

/* av_domain_hotplug_fill() beside the topology: the topology's root ports
 * hold devices (an upstream port, a hostdev) and are never counted as
 * empty; when libvirt put its xHCI behind a hot-plug port, one more is
 * added, after every index. */
static void
test_topology_hotplug_fill(void)
{
    gsize len = 0;
    g_autofree char *out = read_src("xml/out/topo-hotplug.xml", &len);
    g_autofree char *filled = NULL, *defined = NULL, *filled2 = NULL, *unplaced = NULL;
    g_autoptr(GError) err = NULL;
    guint added = 99;

    filled = av_domain_hotplug_fill(out, len, &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 0);
    assert_same("nothing to fill", out, filled);
    {
        g_auto(GStrv) parts = g_strsplit(out, "<target dev=\"vda\" bus=\"virtio\"/>", 2);

        defined = g_strjoinv("<target dev=\"vda\" bus=\"virtio\"/>\n      <address type=\"pci\" domain=\"0x0000\" "
                             "bus=\"0x08\" slot=\"0x00\" function=\"0x0\"/>",
                             parts);
    }
    filled2 = av_domain_hotplug_fill(defined, strlen(defined), &added, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(added, ==, 1);
    g_assert_nonnull(strstr(filled2, "<controller type=\"pci\" index=\"10\" model=\"pcie-root-port\">\n"
                                     "      <alias name=\"ua-accelvirt-hotplug2\"/>"));
    /* unplace: the topology and the empty ports go, the one the disk sits behind stays */
    unplaced = av_domain_unplace(filled2, strlen(filled2), &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(unplaced, "ua-accelvirt-hotplug0"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-hotplug1"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-hotplug2"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-rp"));
    g_assert_null(strstr(unplaced, "ua-accelvirt-pxb"));
    g_assert_null(strstr(unplaced, "<numa>"));
    g_assert_null(strstr(unplaced, "memnode"));
}

/* What accelvirt did not write stays: the user's own <qemu:override>
 * entries and namespace, the user's <cpu> (emptied back to as it was). */
static void
test_topology_user_override(void)
{
    g_autofree char *in = read_src("xml/in/topo-switch.xml", NULL);
    g_auto(GStrv) a = g_strsplit(in, "<domain type='kvm'>", 2);
    g_autofree char *with_ns = g_strjoinv("<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>",
                                          a);
    g_auto(GStrv) b = g_strsplit(with_ns, "  </devices>\n", 2);
    g_autofree char *xml = g_strjoinv("  </devices>\n  <qemu:override>\n    <qemu:device alias='ua-users-nic'>\n"
                                      "      <qemu:frontend>\n        <qemu:property name='x-vga' type='bool' "
                                      "value='false'/>\n      </qemu:frontend>\n    </qemu:device>\n"
                                      "  </qemu:override>\n",
                                      b);
    g_autoptr(AvPlacement) p = case_topo_switch();
    g_autoptr(GError) err = NULL;
    g_autofree char *out = av_domain_rewrite(xml, strlen(xml), p, test_policy, &err);
    g_autofree char *again = NULL, *unplaced = NULL, *normal = roundtrip(xml);

    g_assert_no_error(err);
    g_assert_null(strstr(out, "qemu-ns="));
    g_assert_nonnull(strstr(out, "<qemu:device alias=\"ua-users-nic\">"));
    g_assert_nonnull(strstr(out, "<qemu:device alias=\"ua-accelvirt-1\">"));
    g_assert_null(strstr(out, "<qemu:override/>"));
    if (!libvirt_validate("user override", out))
        g_test_message("libvirt's schemas are not installed: not checked against them");
    again = av_domain_rewrite(out, strlen(out), p, test_policy, &err);
    g_assert_no_error(err);
    assert_same("a second rewrite", out, again);
    unplaced = av_domain_unplace(out, strlen(out), &err);
    g_assert_no_error(err);
    assert_same("unplace", normal, unplaced);
}

/* The bus numbers, boundary both ways: the user's expander bus at busNr B
 * (index 1, its root port index 2) and two cells of one device each:
 * ours take busNr B-2 and B-4, leaving B-4 bus numbers below them for
 * indexes 0 to 2 (the user's), our 2 expander buses and the 16 hot-plug
 * ports: 26 fits, 25 does not. */
static void
test_topology_bus_boundary(void)
{
    static const struct {
        const char *bus_nr;
        gboolean fits;
    } bounds[] = { { "26", TRUE }, { "25", FALSE }, { "254", TRUE } };
    g_autofree char *in = read_src("xml/in/topo-user-pxb.xml", NULL);

    for (guint i = 0; i < G_N_ELEMENTS(bounds); i++) {
        g_autoptr(AvPlacement) p = case_topo_memory_split();
        g_autoptr(GError) err = NULL;
        g_auto(GStrv) parts = g_strsplit(in, "busNr='254'", 2);
        g_autofree char *attr = g_strdup_printf("busNr='%s'", bounds[i].bus_nr);
        g_autofree char *xml = g_strjoinv(attr, parts);
        g_autofree char *out = av_domain_rewrite(xml, strlen(xml), p, test_policy, &err);

        if (bounds[i].fits) {
            g_autofree char *want = g_strdup_printf("busNr=\"%u\"", (guint)atoi(bounds[i].bus_nr) - 4);

            g_assert_no_error(err);
            g_assert_nonnull(strstr(out, want));
        } else {
            g_assert_null(out);
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_assert_nonnull(strstr(err->message, "expander bus at busNr 25"));
            g_assert_null(strchr(err->message, '\n'));
        }
    }
}

/* The bus count without a user expander bus, both ways: 64 devices behind
 * 32 two-device switches on two nodes fit (golden topo-many-switches);
 * 64 behind two host switches, one per node, fit beside 166 user root
 * ports on pcie-root and not beside 167. */
static void
test_topology_bus_count(void)
{
    g_autofree char *in = read_src("xml/in/topo-many-switches.xml", NULL);
    g_autoptr(GString) xml = g_string_new(NULL);
    const char *devices = strstr(in, "    <controller type='pci' index='0'");
    /* 256 - 2 * 35 = 186 bus numbers below the expander buses, for 1 +
     * n_user + 2 (the expander buses' indexes) + 16 hot-plug ports */
    guint n_user[] = { 166, 167 };

    g_assert_nonnull(devices);
    for (guint k = 0; k < G_N_ELEMENTS(n_user); k++) {
        g_autoptr(AvPlacement) p = topo_bulk(64, 32, TRUE, FALSE);
        g_autoptr(GError) err = NULL;
        g_autofree char *out = NULL;

        g_string_assign(xml, "");
        g_string_append_len(xml, in, devices - in);
        for (guint i = 1; i <= n_user[k]; i++)
            g_string_append_printf(xml, "    <controller type='pci' index='%u' model='pcie-root-port'/>\n", i);
        g_string_append(xml, devices);
        out = av_domain_rewrite(xml->str, xml->len, p, test_policy, &err);
        if (k == 0) {
            g_assert_no_error(err);
            g_assert_nonnull(out);
        } else {
            g_assert_null(out);
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_assert_nonnull(strstr(err->message, "needs more PCI buses than a guest has"));
        }
    }
}

/* The user's own x-nv-gpudirect-clique wins, with a note, before and
 * after a rewrite (whose own cliques are never taken for the user's). */
static void
test_topology_user_clique(void)
{
    static const char *const files[] = { "in", "out" };

    for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autoptr(AvPlacement) p = case_topo_cliques();
        g_autofree char *text = topology_describe(files[i], "topo-user-clique", p, NULL);

        g_assert_nonnull(strstr(text, "not mirrored: GPUDirect cliques: ua-accelvirt-1 keeps the "
                                      "x-nv-gpudirect-clique the domain's own <qemu:override> gives it\n"));
        g_assert_null(strstr(text, "ua-accelvirt-0 keeps"));
        g_assert_null(strstr(text, "ua-accelvirt-3 keeps"));
    }
    /* clique-made= is read back from tenant-written metadata: known values only */
    {
        g_autofree char *out = read_src("xml/out/topo-user-clique.xml", NULL);
        g_auto(GStrv) parts = g_strsplit(out, "clique-made=\"device\"", 2);
        g_autofree char *bad = g_strjoinv("clique-made=\"everything\"", parts);
        g_autoptr(GError) err = NULL;
        g_autofree char *unplaced = av_domain_unplace(bad, strlen(bad), &err);

        g_assert_null(unplaced);
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "clique-made 'everything' is none of"));
    }
}

/* 40 devices behind one host switch: two guest switches, one clique, a note. */
static void
test_topology_switch_split(void)
{
    g_autoptr(AvPlacement) p = case_topo_switch_40();
    g_autofree char *text = topology_describe("in", "topo-switch-40", p, NULL);

    g_assert_nonnull(strstr(text, "not mirrored: switches: the 40 devices behind host switch 0000:10:00.0 go behind "
                                  "2 guest switches (one has at most 32 downstream ports), all in one GPUDirect "
                                  "clique\n"));
    g_assert_nonnull(strstr(text, "ua-accelvirt-31 (0000:40:1f.0); x-nv-gpudirect-clique 0\n"));
    g_assert_nonnull(strstr(text, "ua-accelvirt-39 (0000:41:07.0); x-nv-gpudirect-clique 0\n"));
}

int
main(int argc, char **argv)
{
    g_autoptr(GError) err = NULL;

    av_test_init(&argc, &argv);
    test_policy = av_policy_new();
    if (!av_policy_add_data(test_policy, "test.json", policy_json, strlen(policy_json), &err))
        g_error("test policy: %s", err->message);

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_strdup_printf("/rewrite/golden/%s", cases[i].name);

        g_test_add_data_func(path, &cases[i], test_golden);
    }
    g_test_add_func("/rewrite/golden-facts", test_golden_facts);
    g_test_add_func("/rewrite/hotplug-fill", test_hotplug_fill);
    g_test_add_func("/rewrite/hotplug-fill-buses", test_hotplug_fill_buses);
    g_test_add_func("/rewrite/remap-usb-numbers", test_remap_usb_numbers);
    g_test_add_func("/rewrite/hide-user-choice", test_hide_user_choice);
    g_test_add_func("/rewrite/empty-placement", test_empty_placement);
    g_test_add_func("/rewrite/requests", test_requests);
    g_test_add_func("/rewrite/bitstream-placement", test_bitstream_placement);
    g_test_add_func("/rewrite/requests-malformed", test_requests_malformed);
    g_test_add_func("/rewrite/hostile", test_hostile);
    g_test_add_func("/rewrite/placement-invalid", test_placement_invalid);
    g_test_add_func("/rewrite/schema-examples", test_schema_examples);
    g_test_add_func("/rewrite/schema-invalid", test_schema_invalid);
    g_test_add_func("/rewrite/ensure-uuid", test_ensure_uuid);
    g_test_add_func("/rewrite/remap/golden", test_remap_golden);
    g_test_add_func("/rewrite/remap/same", test_remap_same);
    g_test_add_func("/rewrite/remap/user-pinned", test_remap_user_pinned);
    g_test_add_func("/rewrite/remap/no-node", test_remap_no_node);
    g_test_add_func("/rewrite/remap/refused", test_remap_refused);
    g_test_add_func("/rewrite/topology/describe", test_topology_describe);
    g_test_add_func("/rewrite/topology/json", test_topology_json);
    g_test_add_func("/rewrite/topology/memory-units", test_topology_memory_units);
    g_test_add_func("/rewrite/topology/mirror-refused", test_topology_mirror_refused);
    g_test_add_func("/rewrite/topology/hostile", test_topology_hostile);
    g_test_add_func("/rewrite/topology/request", test_topology_request);
    g_test_add_func("/rewrite/topology/remap", test_topology_remap);
    g_test_add_func("/rewrite/topology/hotplug-fill", test_topology_hotplug_fill);
    g_test_add_func("/rewrite/topology/user-override", test_topology_user_override);
    g_test_add_func("/rewrite/topology/bus-boundary", test_topology_bus_boundary);
    g_test_add_func("/rewrite/topology/bus-count", test_topology_bus_count);
    g_test_add_func("/rewrite/topology/user-clique", test_topology_user_clique);
    g_test_add_func("/rewrite/topology/switch-split", test_topology_switch_split);
    {
        int rc = g_test_run();

        av_policy_free(test_policy);
        return rc;
    }
}
